"""A local transformers model as a policy: ``AutoModelForCausalLM`` + ``AutoTokenizer``, an optional PEFT adapter.

Decisions:

* Prompts are the tokenizer's own chat template with the generation prompt (``apply_chat_template(...,
  add_generation_prompt=True)``); where the installed transformers offers it, control tokens inside messages (a
  ``<|im_end|>`` in a compiler log or in echoed code) are encoded as text (``sanitize_control_tokens``), so
  feedback cannot end a turn early. A tokenizer without a chat template is refused (:class:`PolicyError`): guessing
  one would give prompts the model was never trained on.
* Batches are left-padded and sorted by prompt length (less padding); results come back in request order.
* Sampling is the policy's own, not the model's ``generation_config.json``: temperature and top-p are applied by a
  logits processor that draws every row at once (Gumbel-max, with uniforms hashed from the row's seed, the step
  and the token; the seed from ``params.seed`` and the request's key, :func:`cudaperf.policy.common.derive_seed`),
  then hands ``generate`` a one-hot choice to take greedily. A request's sample therefore depends on its seed, not on
  the other requests in its batch (up to the floating-point noise that padding brings), and ``temperature == 0`` is
  plain greedy decoding. The model's stored generation defaults (temperature, repetition penalty, ...) are set aside
  during ``generate``; only its EOS, pad and BOS ids are kept.
* A request ends with ``stop`` at the first EOS (counted in ``completion_tokens``, left out of the text) and with
  ``length`` when it used its token budget: ``max_new_tokens``, or what is left of the model's context after the
  prompt, whichever is smaller. A prompt that fills the context gets an error Generation
  (``extra["error_type"] == "context_length_exceeded"``); so does a batch that fails (after halving it on a CUDA
  out-of-memory error, down to one request).
* ``static_cache=True`` (``hf:...`` option, ``cudaperf eval --static-cache``) decodes with transformers' static KV
  cache, which transformers compiles (``torch.compile``, CUDA graphs) on a GPU: a decoding step of a small model is
  otherwise bound by the eager forward's per-op overhead (``benchmarks/decode_overhead.py``). So that a compiled
  step is reused, prompts are left-padded to a multiple of ``length_bucket`` tokens and every batch is filled to
  ``batch_size`` rows (filler rows are dropped). Off by default: each new shape costs a compilation.
* An adapter loaded from a directory (``hf:MODEL+ADAPTER``) is merged into the weights once it has loaded
  (``merge_and_unload``, ``merge_adapter=True``): unmerged, every LoRA layer adds its own small ops to each decoding
  step (7 projections x 30 layers for the embedded model), and a step of a small model is bound by the number of
  ops, not by its arithmetic. The merged weights are rounded once to the model's dtype; ``merge_adapter=False``
  keeps the PEFT model as it loaded.
* ``decoder`` (``cudaperf eval --decoder``): ``hf`` (default) decodes with transformers' ``generate``; ``loop`` and
  ``graph`` with :func:`cudaperf.policy.decode.decode_batch` (a fixed KV cache the model writes into; ``graph``
  replays each decoding step as one CUDA graph on a GPU), the same answers as ``generate`` (tested token for
  token). A model the decoder cannot handle (sliding-window layers, flash attention), or a failure inside it, sends
  this and every later batch through ``generate``: ``decoder_fallback`` says why (and a warning, once), and each
  answer's ``extra["decoder"]`` says how it was decoded (``hf``, ``loop``, ``graph:replayed``, ``graph:eager``, or
  ``graph:failed: ...`` when the capture failed and the steps ran eagerly).
* ``latency_s`` is the wall time of the batch the request ran in.
* ``device="auto"`` takes the first CUDA GPU when there is one, else the CPU; ``dtype="auto"`` is bfloat16 on a GPU
  that supports it (float16 otherwise) and float32 on the CPU.
* One lock serialises ``generate``: the policy can be shared by threads (the HTTP server in ``serve.py``).
"""

from __future__ import annotations

import copy
import gc
import inspect
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

from cudaperf.policy.base import Generation, Message, PolicyError, Request, SamplingParams
from cudaperf.policy.common import derive_seed
from cudaperf.policy.decode import DECODERS, DecodeUnsupported, RowSampler, decode_batch

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.gguf")
DTYPES = ("auto", "float32", "bfloat16", "float16")


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - torch is a dependency of the train/test extras
        raise PolicyError("the hf policy needs torch and transformers: pip install 'cudaperf[train]'") from e
    return torch


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; an explicit CUDA device without a GPU is an error."""
    torch = _torch()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise PolicyError(f"device {device!r} asked for, but torch sees no CUDA GPU: use device='cpu' or 'auto'")
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    torch = _torch()
    if dtype not in DTYPES:
        raise PolicyError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, dtype)


def check_model_dir(model_dir: str | Path) -> Path:
    """The directory as a Path, or a :class:`PolicyError` that names it and says what is missing."""
    path = Path(model_dir).expanduser()
    if not path.exists():
        raise PolicyError(f"model directory {path} does not exist: give the directory that save_pretrained wrote "
                          "(config.json, weights, tokenizer files)")
    if not path.is_dir():
        raise PolicyError(f"{path} is not a directory: give the directory that save_pretrained wrote")
    if not (path / "config.json").is_file() or not any(any(path.glob(p)) for p in WEIGHT_PATTERNS):
        raise PolicyError(f"{path} holds no transformers model: expected config.json and weights "
                          "(model.safetensors or pytorch_model.bin), as written by save_pretrained")
    return path


_Work = tuple[int, list[int], int, int, SamplingParams]
"""One request's work: its index in the call, its prompt ids, its token budget, its seed, its SamplingParams."""


class _SeededSampler:
    """A logits processor for ``generate`` that samples each row from its own seed (temperature, then top-p) and
    returns scores that make greedy decoding take the sampled token: :class:`cudaperf.policy.decode.RowSampler`'s
    draw, the step counted from the batch's padded prompt width (``prompt_width``), the same for every row."""

    def __init__(self, seeds: Sequence[int], temperature: float | Sequence[float], top_p: float | Sequence[float],
                 device: Any, prompt_width: int):
        self.rows = RowSampler(seeds, temperature, top_p, device)
        self.prompt_width = prompt_width

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        torch = _torch()
        picks = self.rows.picks(scores, int(input_ids.shape[1]) - self.prompt_width)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter(1, picks.view(-1, 1), 0.0)


class HFPolicy:
    """A transformers causal LM (and optional PEFT adapter) answering chat requests in batches."""

    def __init__(self, model_dir: str | Path, adapter: str | Path | None = None, device: str = "auto",
                 dtype: str = "auto", batch_size: int = 16, context_tokens: int | None = None,
                 static_cache: bool = False, length_bucket: int = 256, merge_adapter: bool = True,
                 decoder: str = "hf"):
        path = check_model_dir(model_dir)
        adapter_path = None
        if adapter is not None:
            adapter_path = Path(adapter).expanduser()
            if not (adapter_path / "adapter_config.json").is_file():
                raise PolicyError(f"adapter directory {adapter_path} holds no PEFT adapter (no adapter_config.json): "
                                  "give the directory that PeftModel.save_pretrained wrote")
        dev = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, dev)
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:  # pragma: no cover
            raise PolicyError("the hf policy needs transformers: pip install 'cudaperf[train]'") from e
        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
        except Exception as e:
            raise PolicyError(f"cannot load a tokenizer from {path}: {type(e).__name__}: {e} "
                              "(save the tokenizer next to the model with tokenizer.save_pretrained)") from e
        try:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        except Exception as e:
            raise PolicyError(f"cannot load a causal LM from {path}: {type(e).__name__}: {e}") from e
        if adapter_path is not None:
            try:
                from peft import PeftModel
            except ImportError as e:
                raise PolicyError("an adapter needs peft: pip install peft") from e
            try:
                model = PeftModel.from_pretrained(model, str(adapter_path))
            except Exception as e:
                raise PolicyError(f"cannot load the PEFT adapter {adapter_path} onto {path}: "
                                  f"{type(e).__name__}: {e}") from e
            if merge_adapter:
                model = model.merge_and_unload()
        model.to(dev)
        model.eval()
        name = f"hf:{path}" + (f"+{adapter_path}" if adapter_path is not None else "")
        self._setup(model, tokenizer, name=name, batch_size=batch_size, context_tokens=context_tokens,
                    static_cache=static_cache, length_bucket=length_bucket, decoder=decoder)
        self.model_dir: Path | None = path
        self.adapter: Path | None = adapter_path

    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any, name: str = "hf:in-memory", batch_size: int = 16,
                    context_tokens: int | None = None, static_cache: bool = False,
                    length_bucket: int = 256, decoder: str = "hf") -> "HFPolicy":
        """A policy over a model and tokenizer already in memory (a trainer's model, on its device)."""
        self = cls.__new__(cls)
        self._setup(model, tokenizer, name=name, batch_size=batch_size, context_tokens=context_tokens,
                    static_cache=static_cache, length_bucket=length_bucket, decoder=decoder)
        self.model_dir = None
        self.adapter = None
        return self

    def _setup(self, model: Any, tokenizer: Any, *, name: str, batch_size: int, context_tokens: int | None,
               static_cache: bool = False, length_bucket: int = 256, decoder: str = "hf") -> None:
        from transformers import GenerationConfig

        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if decoder not in DECODERS:
            raise PolicyError(f"unknown decoder {decoder!r}: use one of {', '.join(DECODERS)}")
        if decoder != "hf" and static_cache:
            raise PolicyError(f"decoder {decoder!r} has a static cache of its own: static_cache is for decoder 'hf'")
        self.decoder = decoder
        self.decoder_fallback: str | None = None  # why decoder loop/graph fell back to generate, once it did
        self.last_decode: Any = None  # DecodeStats of the last batch decoded by decode_batch
        self.last_new_tokens: list[list[int]] = []  # the last batch's new token ids, a list a row of it
        if length_bucket < 1:
            raise ValueError("length_bucket must be >= 1")
        self.static_cache = bool(static_cache)
        self.length_bucket = int(length_bucket)
        if not getattr(tokenizer, "chat_template", None):
            raise PolicyError(f"the tokenizer of {name} has no chat template: set tokenizer.chat_template (a Jinja "
                              "string) and save it with the model")
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.device = next(model.parameters()).device
        self._lock = threading.Lock()
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self._base = base
        stored = getattr(base, "generation_config", None)
        eos: list[int] = []
        for v in (getattr(stored, "eos_token_id", None), tokenizer.eos_token_id):
            for i in (v if isinstance(v, (list, tuple)) else [v]):
                if i is not None and int(i) not in eos:
                    eos.append(int(i))
        if not eos:
            raise PolicyError(f"{name} has no EOS token (neither its tokenizer nor its generation config names one)")
        self.eos_ids = tuple(eos)
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = getattr(stored, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else self.eos_ids[0]
        bos = getattr(stored, "bos_token_id", None)
        if bos is None:
            bos = tokenizer.bos_token_id
        self._clean_generation_config = GenerationConfig(eos_token_id=list(self.eos_ids), pad_token_id=self.pad_id,
                                                         bos_token_id=bos)
        if context_tokens is None:
            config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
            context_tokens = getattr(config, "max_position_embeddings", None)
        self._context_tokens = int(context_tokens) if context_tokens else None
        params = inspect.signature(tokenizer.apply_chat_template).parameters
        self._template_kwargs = {"sanitize_control_tokens": True} if "sanitize_control_tokens" in params else {}

    @property
    def context_tokens(self) -> int | None:
        return self._context_tokens

    def _encode(self, messages: Sequence[Message]) -> list[int]:
        chat = [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in messages]
        enc = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True,
                                                 **self._template_kwargs)
        ids = enc["input_ids"]
        return [int(i) for i in (ids[0] if ids and isinstance(ids[0], list) else ids)]

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return len(self._encode(messages))

    per_request_params = True
    """``generate`` takes one SamplingParams a request as well as one for all: rows of several temperatures then
    share a batch (GRPO's trajectories at 0.2 and 0.7, one call a turn)."""

    def generate(self, requests: Sequence[Request],
                 params: SamplingParams | Sequence[SamplingParams]) -> list[Generation]:
        requests = list(requests)
        plist = list(params) if isinstance(params, (list, tuple)) else [params] * len(requests)
        if len(plist) != len(requests):
            raise ValueError(f"{len(requests)} requests but {len(plist)} sampling parameters")
        with self._lock:
            return self._generate(requests, plist)

    def _generate(self, requests: list[Request], plist: list[SamplingParams]) -> list[Generation]:
        out: list[Generation | None] = [None] * len(requests)
        work: list[_Work] = []
        for i, (r, params) in enumerate(zip(requests, plist)):
            try:
                ids = self._encode(r.messages)
            except Exception as e:
                out[i] = _error(f"cannot build the prompt: {type(e).__name__}: {e}")
                continue
            budget = params.max_new_tokens
            if self._context_tokens is not None:
                if len(ids) >= self._context_tokens:
                    out[i] = _error(f"the prompt has {len(ids)} tokens: it does not fit the context of "
                                    f"{self._context_tokens} tokens", prompt_tokens=len(ids),
                                    error_type="context_length_exceeded")
                    continue
                budget = min(budget, self._context_tokens - len(ids))
            work.append((i, ids, budget, derive_seed(params.seed, r), params))
        work.sort(key=lambda w: len(w[1]))
        for start in range(0, len(work), self.batch_size):
            chunk = work[start:start + self.batch_size]
            for (i, *_), g in zip(chunk, self._run_batch(chunk)):
                out[i] = g
        return [g if g is not None else _error("internal: no generation") for g in out]

    def _run_batch(self, chunk: list[_Work]) -> list[Generation]:
        torch = _torch()
        try:
            return self._batch(chunk)
        except torch.cuda.OutOfMemoryError as e:
            if len(chunk) == 1:
                return [_error(f"CUDA out of memory for one request: {e}")]
            torch.cuda.empty_cache()
            half = len(chunk) // 2
            return self._run_batch(chunk[:half]) + self._run_batch(chunk[half:])
        except Exception as e:
            return [_error(f"generation failed: {type(e).__name__}: {e}", prompt_tokens=len(ids))
                    for _, ids, *_ in chunk]

    def _batch(self, chunk: list[_Work]) -> list[Generation]:
        torch = _torch()
        width = max(len(ids) for _, ids, *_ in chunk)
        max_new = max(b for _, _, b, *_ in chunk)
        rows = list(chunk)
        if self.static_cache:  # few distinct shapes, so a compiled step is reused: widths in buckets, full batches
            # (positions come from the attention mask, so the extra left padding moves no real token); a chunk
            # halved after running out of memory is filled to the next power of two, not back to batch_size
            width = -(-width // self.length_bucket) * self.length_bucket
            target = min(self.batch_size, 1 << (len(chunk) - 1).bit_length())
            rows += [chunk[-1]] * (target - len(chunk))  # filler rows, dropped below
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for row, (_, ids, *_) in enumerate(rows):
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            mask[row, width - len(ids):] = 1
        seeds = [w[3] for w in rows]
        temps = [w[4].temperature for w in rows]
        tops = [w[4].top_p for w in rows]
        sampled = any(t > 0 for t in temps)
        t0 = time.perf_counter()
        new = None
        used = "hf"
        if self.decoder != "hf" and self.decoder_fallback is None:
            sampler = RowSampler(seeds, temps, tops, self.device) if sampled else None
            try:
                with torch.inference_mode():
                    out, self.last_decode = decode_batch(
                        self.model, input_ids.to(self.device), mask.to(self.device), max_new=max_new,
                        budgets=[w[2] for w in rows], eos_ids=self.eos_ids, pad_id=self.pad_id, sampler=sampler,
                        graph=self.decoder == "graph")
                new = out.tolist()
                used = f"{self.decoder}:{self.last_decode.graph}" if self.decoder == "graph" else self.decoder
            except DecodeUnsupported as e:  # once: this model goes through generate from now on
                self.decoder_fallback = f"{self.decoder} decoder unsupported for {self.name}: {e}; using generate"
                warnings.warn(self.decoder_fallback, stacklevel=2)
            except torch.cuda.OutOfMemoryError:
                raise  # _run_batch halves the chunk
            except Exception as e:  # the fast path failed: answer through generate, and say so once
                self.decoder_fallback = (f"{self.decoder} decoder failed for {self.name}: {type(e).__name__}: "
                                         f"{str(e)[:300]}; using generate from now on")
                warnings.warn(self.decoder_fallback, stacklevel=2)
        if new is None:
            new = self._generate_new(input_ids, mask, width, max_new,
                                     _SeededSampler(seeds, temps, tops, self.device, width) if sampled else None)
        latency = time.perf_counter() - t0
        self.last_new_tokens = new[:len(chunk)]
        gens = []
        for row, (_, ids, budget, seed, _) in enumerate(chunk):
            tokens = new[row][:budget]
            end = next((k for k, t in enumerate(tokens) if t in self.eos_ids), None)
            if end is not None:
                text_ids, n, reason = tokens[:end], end + 1, "stop"
            else:
                text_ids, n, reason = tokens, len(tokens), "length"
            text = self.tokenizer.decode(text_ids, skip_special_tokens=True)
            gens.append(Generation(text=text, prompt_tokens=len(ids), completion_tokens=n, finish_reason=reason,
                                   latency_s=latency, extra={"seed": seed, "batch": len(chunk), "decoder": used}))
        return gens

    def _generate_new(self, input_ids: Any, mask: Any, width: int, max_new: int,
                      sampler: "_SeededSampler | None") -> list[list[int]]:
        """New token ids a row, through transformers' ``generate`` (decoder ``hf``, or a model decode_batch
        refuses)."""
        from transformers import LogitsProcessorList

        torch = _torch()
        config = copy.deepcopy(self._clean_generation_config)
        config.max_new_tokens = max_new
        config.do_sample = False
        config.num_beams = 1
        if self.static_cache:
            config.cache_implementation = "static"
        processors = LogitsProcessorList([sampler] if sampler is not None else [])
        stored = getattr(self._base, "generation_config", None)
        try:
            if stored is not None:
                self._base.generation_config = self._clean_generation_config
            with torch.inference_mode():
                seqs = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                           generation_config=config, logits_processor=processors)
        finally:
            if stored is not None:
                self._base.generation_config = stored
        return seqs[:, width:].tolist()

    def close(self) -> None:
        with self._lock:
            for attr in ("model", "_base", "tokenizer"):
                if hasattr(self, attr):
                    setattr(self, attr, None)
            gc.collect()
            torch = _torch()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


def _error(message: str, prompt_tokens: int | None = None, error_type: str = "generation_failed") -> Generation:
    return Generation(text="", prompt_tokens=prompt_tokens, completion_tokens=0, finish_reason="error",
                      error=message, extra={"error_type": error_type})
