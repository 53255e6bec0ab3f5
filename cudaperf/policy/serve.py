"""A small OpenAI-compatible HTTP server in front of any policy: ``python -m cudaperf.policy.serve --policy SPEC``.

    POST /v1/chat/completions   model, messages, temperature, top_p, max_tokens | max_completion_tokens, n (1),
                                seed, metadata {task_id, sample, turn, purpose} (optional, for replay policies)
    GET  /v1/models             the one model served
    GET  /health                200 when up

Decisions:

* Standard library only (``http.server.ThreadingHTTPServer``, HTTP/1.1 keep-alive): a thread per connection, and
  one lock around the policy, so generation is serialised; for throughput put vLLM in front of the model instead.
* A malformed request is answered with the status OpenAI's API gives and its error shape
  (``{"error": {"message", "type", "param", "code"}}``): 400 for a body that is not JSON or has a bad field,
  404 for an unknown path, 405 for a wrong method, 413 for a body over ``MAX_BODY_BYTES``. A policy's error
  Generation becomes a 400 ``context_length_exceeded`` when the prompt did not fit, else a 500 (which clients
  retry).
* The ``model`` field is not checked against the served name (any name reaches the one policy); the response
  carries the name the client sent, or the policy's name. Defaults follow :class:`SamplingParams` (temperature 0.7,
  top-p 0.9, 1,536 new tokens) rather than OpenAI's, so a bare request samples as the paper does.
* ``seed`` goes to the policy as ``SamplingParams.seed`` with a fixed request key: the same seed and messages give
  the same answer. ``stream: true`` and ``n > 1`` are refused (400) rather than answered differently.
* Usage reports the policy's token counts; where a policy gives none, the prompt is counted with its
  ``count_tokens``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cudaperf.policy.base import Policy, Request, SamplingParams

MAX_BODY_BYTES = 32 << 20
ROLES = ("system", "user", "assistant", "developer", "tool")


class BadRequest(ValueError):
    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param, self.status, self.code = param, status, code


def _error(message: str, type_: str = "invalid_request_error", param: str | None = None,
           code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _content(value: Any, i: int) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, list):  # content parts: only text parts are understood
        parts = []
        for part in value:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise BadRequest(f"messages[{i}].content: only text parts ({{'type': 'text', 'text': ...}}) are "
                                 "supported", f"messages[{i}].content")
            parts.append(part["text"])
        return "".join(parts)
    raise BadRequest(f"messages[{i}].content must be a string or a list of text parts", f"messages[{i}].content")


def _number(body: dict[str, Any], key: str, default: float) -> float:
    v = body.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadRequest(f"{key} must be a number, got {v!r}", key)
    return float(v)


def _integer(body: dict[str, Any], key: str) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"{key} must be an integer, got {v!r}", key)
    return v


def parse_chat_request(body: Any) -> tuple[Request, SamplingParams, str | None]:
    """The policy request, sampling parameters and model name of a chat completions body, or :class:`BadRequest`."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if body.get("stream"):
        raise BadRequest("stream=true is not supported by this server", "stream")
    n = _integer(body, "n")
    if n is not None and n != 1:
        raise BadRequest("only n=1 is supported", "n")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of {role, content} objects", "messages")
    chat = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a string role", f"messages[{i}]")
        if m["role"] not in ROLES:
            raise BadRequest(f"messages[{i}].role {m['role']!r} is not one of {', '.join(ROLES)}",
                             f"messages[{i}].role")
        chat.append({"role": m["role"], "content": _content(m.get("content"), i)})
    defaults = SamplingParams()
    limit_key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    limit = _integer(body, limit_key)
    temperature = _number(body, "temperature", defaults.temperature)
    top_p = _number(body, "top_p", defaults.top_p)
    seed = _integer(body, "seed")
    for key, bad in (("temperature", temperature < 0), ("top_p", not 0 < top_p <= 1),
                     (limit_key, limit is not None and limit < 1)):
        if bad:
            rule = {"temperature": ">= 0", "top_p": "in (0, 1]"}.get(key, ">= 1")
            raise BadRequest(f"{key} must be {rule}, got {body.get(key)!r}", key)
    params = SamplingParams(temperature=temperature, top_p=top_p,
                            max_new_tokens=limit if limit is not None else defaults.max_new_tokens, seed=seed)
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise BadRequest("metadata must be an object", "metadata")
    try:
        request = Request(messages=tuple(chat), task_id=str(meta.get("task_id") or ""),
                          sample=int(meta.get("sample") or 0), turn=int(meta.get("turn") or 0),
                          purpose=str(meta.get("purpose") or "candidate"))
    except (TypeError, ValueError):
        raise BadRequest("metadata.sample and metadata.turn must be integers", "metadata") from None
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("model must be a string", "model")
    return request, params, model


class PolicyHandler(BaseHTTPRequestHandler):
    """The request handler; subclass it to change how requests are answered (tests do)."""

    protocol_version = "HTTP/1.1"
    timeout = 300
    """Seconds a connection may sit idle (or a body take to arrive) before the server drops it."""
    server: "PolicyServer"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            raise BadRequest("a Content-Length header is required", status=411)
        try:
            n = int(length)
        except ValueError:
            raise BadRequest(f"bad Content-Length {length!r}") from None
        if n > MAX_BODY_BYTES:
            raise BadRequest(f"the body has {n} bytes, more than the {MAX_BODY_BYTES} this server takes", status=413)
        return self.rfile.read(n)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            self.send_json(200, {"object": "list", "data": [
                {"id": self.server.model_name, "object": "model", "created": self.server.started,
                 "owned_by": "cudaperf", "max_model_len": self.server.policy.context_tokens}]})
        elif path == "/health":
            self.send_json(200, {"status": "ok", "policy": self.server.policy.name})
        elif path in ("/v1/chat/completions", "/chat/completions"):
            self.send_json(405, _error("use POST for /v1/chat/completions"), {"Allow": "POST"})
        else:
            self.send_json(404, _error(f"no such path: {self.path}", code="not_found"))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            raw = self.read_body()
        except BadRequest as e:
            self.send_json(e.status, _error(str(e)), {"Connection": "close"})
            self.close_connection = True
            return
        if path not in ("/v1/chat/completions", "/chat/completions"):
            if path in ("/v1/models", "/models", "/health"):
                self.send_json(405, _error(f"use GET for {path}"), {"Allow": "GET"})
            else:
                self.send_json(404, _error(f"no such path: {self.path}", code="not_found"))
            return
        try:
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise BadRequest(f"the body is not JSON: {e}") from None
            status, payload = self.complete(*parse_chat_request(body))
        except BadRequest as e:
            status, payload = e.status, _error(str(e), param=e.param, code=e.code)
        self.send_json(status, payload)

    def complete(self, request: Request, params: SamplingParams, model: str | None) -> tuple[int, dict[str, Any]]:
        policy = self.server.policy
        with self.server.lock:
            gen = policy.generate([request], params)[0]
            prompt_tokens = gen.prompt_tokens
            if prompt_tokens is None:
                prompt_tokens = policy.count_tokens(request.messages)
        if gen.error is not None:
            if gen.extra.get("error_type") == "context_length_exceeded":
                return 400, _error(gen.error, param="messages", code="context_length_exceeded")
            return 500, _error(gen.error, type_="server_error")
        completion_tokens = gen.completion_tokens or 0
        return 200, {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": model or self.server.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": gen.text},
                         "finish_reason": gen.finish_reason, "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }


class PolicyServer(ThreadingHTTPServer):
    """The HTTP server; ``port`` and ``url`` say where it listens, ``close()`` stops it."""

    daemon_threads = True

    def __init__(self, policy: Policy, host: str, port: int, handler: type[PolicyHandler] = PolicyHandler,
                 model_name: str | None = None, verbose: bool = False):
        super().__init__((host, port), handler)
        self.policy = policy
        self.model_name = model_name or policy.name
        self.lock = threading.Lock()
        self.verbose = verbose
        self.started = int(time.time())
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        """The base URL an OpenAI client takes (``http://host:port/v1``)."""
        host = self.server_address[0]
        return f"http://{host}:{self.port}/v1"

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        if self.thread is not None:
            self.thread.join(timeout=10)

    def __enter__(self) -> "PolicyServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def serve(policy: Policy, host: str = "127.0.0.1", port: int = 0, handler: type[PolicyHandler] = PolicyHandler,
          model_name: str | None = None, verbose: bool = False) -> PolicyServer:
    """Start serving ``policy`` in a background thread; ``port=0`` takes a free port (``server.port`` says which)."""
    server = PolicyServer(policy, host, port, handler=handler, model_name=model_name, verbose=verbose)
    server.thread = threading.Thread(target=server.serve_forever, name=f"policy-server-{server.port}", daemon=True)
    server.thread.start()
    return server


def main(argv: list[str] | None = None) -> int:
    from cudaperf.policy.base import PolicyError
    from cudaperf.policy.spec import FORMS, load_policy

    ap = argparse.ArgumentParser(prog="python -m cudaperf.policy.serve",
                                 description="Serve a policy over an OpenAI-compatible HTTP API.")
    ap.add_argument("--policy", default="embedded", help=f"policy spec ({', '.join(FORMS)}); default: embedded")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=8000, help="port (0: any free one); default 8000")
    ap.add_argument("--model-name", default=None, help="the name /v1/models reports (default: the policy's name)")
    ap.add_argument("--verbose", action="store_true", help="log every request")
    args = ap.parse_args(argv)
    try:
        policy = load_policy(args.policy)
    except (PolicyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        server = serve(policy, args.host, args.port, model_name=args.model_name, verbose=args.verbose)
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        policy.close()
        return 2
    print(f"serving {policy.name} at {server.url} (Ctrl-C stops)", flush=True)
    try:
        while server.thread is not None and server.thread.is_alive():
            server.thread.join(timeout=1.0)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        policy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
