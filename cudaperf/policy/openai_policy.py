"""A policy behind an OpenAI-compatible chat completions endpoint (OpenAI, ``vllm serve``, ``cudaperf serve``).

Decisions:

* The ``openai`` package's ``AsyncOpenAI`` does the HTTP, with its own retries off (``max_retries=0``): retrying
  is this module's, so that every attempt is counted (``Generation.extra["attempts"]``) and the waits recorded
  (``extra["retry_waits_s"]``).
* Retried: 429 (rate limit; not when the body's code is ``insufficient_quota``, which waiting does not cure),
  408, 409, any 5xx, timeouts and connection errors; never another 4xx. The wait honours ``Retry-After-Ms`` /
  ``Retry-After`` (seconds or an HTTP date, capped at ``max_retry_after_s``) and is otherwise exponential with
  equal jitter: ``d/2 + U(0, d/2)`` with ``d = min(max_backoff_s, backoff_s * 2**attempt)``. After
  ``max_retries`` retries the Generation carries the last error (``finish_reason="error"``); nothing is raised.
* One asyncio loop, in a daemon thread the policy owns, runs every request: ``generate`` (sync) submits to it and
  waits, so it works from any thread, with or without a running loop of its own; ``agenerate`` awaits the same
  loop. One client and one semaphore (``concurrency``) therefore bound all of the policy's requests together.
* Base URL, model and key may come from the environment: ``OPENAI_BASE_URL``, ``OPENAI_MODEL``,
  ``OPENAI_API_KEY``; a local server needs no key, so a placeholder is sent when there is none.
* With ``params.seed`` set, each request sends its own seed derived from it and the request's key
  (:func:`cudaperf.policy.common.derive_seed`); without it no seed is sent. The token limit goes out as
  ``max_completion_tokens`` (``token_limit_param="max_tokens"`` for servers that know only the old name).
* Token counts and finish reason come from the response (``usage``; ``length`` stays ``length``, anything else
  but an error is ``stop``, the server's word kept in ``extra["server_finish_reason"]``); ``latency_s`` is the
  time from the first attempt to the answer, waits included.
* ``count_tokens``: exact with a local tokenizer (a Hugging Face tokenizer directory, its chat template with the
  generation prompt); otherwise an estimate, ``ceil(characters / 3) + 4`` per message ``+ 3``, which over-counts
  code and English text (about 3.5 to 4 characters a token for the common BPE vocabularies) so that a context check
  built on it errs on the safe side.
* ``send_metadata=True`` adds ``metadata`` (task id, sample, turn, purpose) to each request, for a
  ``cudaperf.policy.serve`` server in front of a replay or oracle policy; off by default, since other servers may
  reject unknown fields.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from cudaperf.policy.base import Generation, Message, PolicyError, Request, SamplingParams
from cudaperf.policy.common import derive_seed

ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_MODEL = "OPENAI_MODEL"
ENV_KEY = "OPENAI_API_KEY"
PLACEHOLDER_KEY = "sk-no-key"
"""Sent when no key is given or set: local servers ignore it, the openai client insists on one."""
RETRY_STATUSES = frozenset({408, 409, 429})


def estimate_tokens(messages: Sequence[Message]) -> int:
    """The documented estimate without a tokenizer: ``ceil(chars / 3) + 4`` per message, ``+ 3``."""
    return sum(math.ceil(len(str(m.get("content") or "")) / 3) + 4 for m in messages) + 3


def retry_after_s(headers: Any) -> float | None:
    """Seconds to wait from ``Retry-After-Ms`` or ``Retry-After`` (seconds or an HTTP date), None when absent."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAIPolicy:
    """Chat completions from an OpenAI-compatible server, concurrent and retried."""

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 concurrency: int = 8, max_retries: int = 5, timeout_s: float = 600, context_tokens: int | None = None,
                 tokenizer: str | Path | Any | None = None, backoff_s: float = 1.0, max_backoff_s: float = 60.0,
                 max_retry_after_s: float = 120.0, token_limit_param: str = "max_completion_tokens",
                 send_metadata: bool = False):
        try:
            import openai
        except ImportError as e:  # pragma: no cover
            raise PolicyError("the openai policy needs the openai package: pip install 'openai>=3'") from e
        self._openai = openai
        model = model or os.environ.get(ENV_MODEL)
        if not model:
            raise PolicyError(f"no model name: give one (openai:MODEL@URL) or set {ENV_MODEL}")
        base_url = base_url or os.environ.get(ENV_BASE_URL)
        if not base_url:
            raise PolicyError(f"no endpoint: give its URL (openai:{model}@http://host:port/v1) or set {ENV_BASE_URL}")
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError("concurrency must be >= 1, max_retries >= 0 and timeout_s > 0")
        if token_limit_param not in ("max_completion_tokens", "max_tokens"):
            raise ValueError("token_limit_param must be 'max_completion_tokens' or 'max_tokens'")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or os.environ.get(ENV_KEY) or PLACEHOLDER_KEY
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.timeout_s = float(timeout_s)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.token_limit_param = token_limit_param
        self.send_metadata = send_metadata
        self.name = f"openai:{model}@{self.base_url}"
        self._context_tokens = context_tokens
        self._tokenizer = self._load_tokenizer(tokenizer)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._semaphore: asyncio.Semaphore | None = None
        self._start_lock = threading.Lock()
        self._closed = False

    @staticmethod
    def _load_tokenizer(tokenizer: str | Path | Any | None) -> Any:
        if tokenizer is None or not isinstance(tokenizer, (str, Path)):
            return tokenizer
        path = Path(tokenizer).expanduser()
        if not path.is_dir():
            raise PolicyError(f"tokenizer directory {path} does not exist: give a directory with tokenizer.json "
                              "(tokenizer.save_pretrained) or leave tokenizer unset for an estimate")
        try:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(path)
        except Exception as e:
            raise PolicyError(f"cannot load a tokenizer from {path}: {type(e).__name__}: {e}") from e

    @property
    def context_tokens(self) -> int | None:
        return self._context_tokens

    def count_tokens(self, messages: Sequence[Message]) -> int:
        tok = self._tokenizer
        if tok is None or not getattr(tok, "chat_template", None):
            return estimate_tokens(messages)
        chat = [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in messages]
        ids = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
        return len(ids[0] if ids and isinstance(ids[0], list) else ids)

    # -- the loop thread ---------------------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._closed:
                raise PolicyError(f"{self.name} is closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    self._client = self._openai.AsyncOpenAI(base_url=self.base_url, api_key=self.api_key,
                                                            timeout=self.timeout_s, max_retries=0)
                    self._semaphore = asyncio.Semaphore(self.concurrency)
                    ready.set()
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name=f"openai-policy-{self.model}", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[Generation]:
        loop = self._ensure_loop()
        return asyncio.run_coroutine_threadsafe(self._gather(list(requests), params), loop).result()

    async def agenerate(self, requests: Sequence[Request], params: SamplingParams) -> list[Generation]:
        """``generate`` for a caller inside an event loop (the requests still run on the policy's own loop)."""
        loop = self._ensure_loop()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._gather(list(requests), params), loop))

    async def _gather(self, requests: list[Request], params: SamplingParams) -> list[Generation]:
        return list(await asyncio.gather(*(self._one(r, params) for r in requests)))

    # -- one request -------------------------------------------------------------------------------------------
    def _body(self, request: Request, params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in request.messages],
            "temperature": params.temperature, "top_p": params.top_p, "n": 1,
            self.token_limit_param: params.max_new_tokens,
        }
        if params.seed is not None:
            body["seed"] = derive_seed(params.seed, request)
        if self.send_metadata:
            body["metadata"] = {"task_id": request.task_id, "sample": str(request.sample),
                                "turn": str(request.turn), "purpose": request.purpose}
        return body

    def _retry_wait(self, error: Exception, attempt: int) -> float | None:
        """Seconds to wait before retrying after ``error`` (``attempt`` retries done so far), None: do not retry."""
        openai = self._openai
        if isinstance(error, openai.APIStatusError):
            status = error.status_code
            if status not in RETRY_STATUSES and status < 500:
                return None
            if status == 429 and _error_code(error) == "insufficient_quota":
                return None
            hinted = retry_after_s(getattr(error.response, "headers", None))
            if hinted is not None:
                return min(hinted, self.max_retry_after_s)
        elif not isinstance(error, (openai.APIConnectionError, openai.APITimeoutError)):
            return None
        d = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
        return d / 2 + random.uniform(0, d / 2)

    async def _one(self, request: Request, params: SamplingParams) -> Generation:
        assert self._client is not None and self._semaphore is not None
        body = self._body(request, params)
        extra: dict[str, Any] = {"attempts": 0, "retry_waits_s": []}
        if "seed" in body:
            extra["seed"] = body["seed"]
        t0 = time.perf_counter()
        attempt = 0
        while True:
            extra["attempts"] += 1
            try:
                async with self._semaphore:
                    response = await self._client.chat.completions.create(**body)
                return self._generation(response, time.perf_counter() - t0, extra)
            except Exception as e:  # every failure becomes an error Generation, never an exception
                wait = self._retry_wait(e, attempt) if attempt < self.max_retries else None
                if wait is None:
                    return Generation(text="", completion_tokens=0, finish_reason="error",
                                      latency_s=time.perf_counter() - t0, error=self._describe(e, extra["attempts"]),
                                      extra={**extra, "error_type": type(e).__name__,
                                             "status": getattr(e, "status_code", None)})
                extra["retry_waits_s"].append(round(wait, 3))
                attempt += 1
                await asyncio.sleep(wait)

    def _generation(self, response: Any, latency: float, extra: dict[str, Any]) -> Generation:
        if not getattr(response, "choices", None):
            return Generation(text="", finish_reason="error", latency_s=latency, extra=extra,
                              error=f"{self.base_url} answered with no choices")
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        reason = choice.finish_reason or "stop"
        extra = {**extra, "server_finish_reason": reason, "id": getattr(response, "id", None)}
        return Generation(text=choice.message.content or "",
                          prompt_tokens=getattr(usage, "prompt_tokens", None) if usage else None,
                          completion_tokens=getattr(usage, "completion_tokens", None) if usage else None,
                          finish_reason="length" if reason == "length" else "stop", latency_s=latency, extra=extra)

    def _describe(self, e: Exception, attempts: int) -> str:
        openai = self._openai
        tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(e, openai.APITimeoutError):
            return f"{self.base_url} did not answer within {self.timeout_s:g} s ({tries})"
        if isinstance(e, openai.APIConnectionError):
            return (f"cannot reach {self.base_url} ({type(e).__name__}: {e}; {tries}): is the server running "
                    "and the URL right?")
        if isinstance(e, openai.APIStatusError):
            return f"{self.base_url} answered HTTP {e.status_code}: {_error_message(e)} ({tries})"
        return f"{type(e).__name__}: {e} ({tries})"

    def close(self) -> None:
        with self._start_lock:
            self._closed = True
            loop, client = self._loop, self._client
            self._loop = None
        if loop is None:
            return
        if client is not None:
            try:
                asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=10)
            except Exception:  # closing a client whose connections are already gone is not an error worth raising
                pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        if not loop.is_running():
            loop.close()


def _error_body(e: Exception) -> dict[str, Any]:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        return inner if isinstance(inner, dict) else {"message": str(inner)}
    return {}


def _error_code(e: Exception) -> str | None:
    return _error_body(e).get("code") or getattr(e, "code", None)


def _error_message(e: Exception) -> str:
    return str(_error_body(e).get("message") or getattr(e, "message", None) or e)
