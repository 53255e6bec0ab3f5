"""Batched decoding of a local causal LM without ``generate``: a KV cache of fixed shape that the model writes into,
and, on a GPU, every decoding step after the first two replayed as one CUDA graph.

Why: a decoding step of a small model (the embedded 135M one) costs about 80 ms on the H200 whatever the batch,
because the eager forward launches about a thousand small kernels from Python, one at a time
(``benchmarks/decode_overhead.py``); answers of 1,024 to 1,536 tokens then take minutes a batch, which is most of an
evaluation's and of a GRPO step's time. A CUDA graph launches the whole step at once. transformers' own route to the
same end (its static cache with ``torch.compile``) compiles anew for each cache length (what that costs on the H200
is not measured yet), and its internals change between releases; this module only calls the model's ``forward``.

How (:func:`decode_batch`):

* ``rows`` left-padded prompts of width ``W``; the cache holds ``W + max_new`` slots a row (:class:`RowCache`,
  allocated at the first write, one key and one value tensor a layer). Slot ``i`` of a row is its ``i``-th column, so
  every row writes the same slot at each step and one device tensor (``RowCache.slot``) says which.
* The prefill runs ``prefill_rows`` rows at a time (a view of the cache's rows), the model called with an explicit
  4-D mask (a row attends to its own tokens, causally; a padding position only to itself, so that nothing is a
  fully masked row), position ids counted from the row's first real token, as ``generate`` counts them.
* Each decoding step feeds the last token of every row with a 4-D mask of one query over all slots (the row's real
  slots up to the current one) and writes the next token into the output; a row is done at its first EOS or when
  its own token budget is used, and a done row is fed padding, as ``generate`` does. Every ``check_every`` steps
  the host asks whether all rows are done (the only synchronisation) and stops early.
* ``graph=True`` on CUDA: the first two decoding steps run eagerly on a side stream (they warm the kernels and
  the allocator up), the step is captured once (no kernel runs during capture) and replayed for the rest. The
  step only reads and writes tensors allocated before the capture, so a replay is the eager step exactly. If the
  capture fails (a model whose forward synchronises with the host), the rest runs eagerly and
  :attr:`DecodeStats.graph` says so; the answers are the same either way.
* A grouped-query model's decoding steps attend with :func:`gqa_decode_attention` (registered in transformers'
  ``AttentionInterface`` and named by the model's config for those steps only): the cached keys and values are
  read once a step instead of being copied once for each query head of their group first.
* Sampling is :class:`RowSampler`'s: the hf policy's seeded Gumbel-max draw, the step index a device tensor, one
  temperature and top-p a row (so rows of several temperatures share a batch).

What it supports: decoder-only models whose attention calls ``cache.update(keys, values, layer_idx, ...)`` and
accepts a prepared 4-D mask (transformers' ``sdpa`` and ``eager`` attention: Llama, Qwen2/3, Mistral without a
sliding window, ...). A model with sliding-window or other non-global layers, or another attention implementation,
is refused with :class:`DecodeUnsupported` before anything runs, and the caller uses ``generate`` instead.
Tested against ``generate`` token for token on the CPU (``tests/test_policy_decode.py``); the graph's test on a GPU
(``tests/gpu/test_gpu_policy.py``) is written and has not run yet.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Sequence

_M32 = 0xFFFFFFFF
DECODERS = ("hf", "loop", "graph")
"""``hf``: transformers' ``generate``; ``loop``: :func:`decode_batch` eagerly; ``graph``: :func:`decode_batch` with
the decoding steps replayed as a CUDA graph on a GPU (eagerly on a CPU)."""


class DecodeUnsupported(RuntimeError):
    """The model cannot be decoded by :func:`decode_batch` (the reason is the message); use ``generate``."""


def _mul32(h: Any, c: int) -> Any:
    """``(h * c) mod 2**32`` for int64 tensors ``h`` in [0, 2**32): in two 16-bit halves of ``c``, so that no
    product leaves int64."""
    return (h * (c & 0xFFFF) + (((h * (c >> 16)) & 0xFFFF) << 16)) & _M32


def _fmix32(h: Any) -> Any:
    """MurmurHash3's 32-bit finalizer (a bijection of [0, 2**32) that mixes every bit), on int64 tensors."""
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


class RowSampler:
    """Each row sampled from its own seed, temperature and top-p, in one draw for the whole batch.

    The Gumbel-max trick with uniforms hashed from (the row's seed, the decoding step, the token id): a row's sample
    depends on its seed, step, temperature and top-p alone, never on the other rows or how many there are. A row
    with temperature 0 takes the argmax. ``step`` is an int or a one-element int64 tensor on the scores' device (so
    that a CUDA graph can advance it)."""

    def __init__(self, seeds: Sequence[int], temperature: float | Sequence[float], top_p: float | Sequence[float],
                 device: Any):
        import torch

        n = len(seeds)
        temps = [float(temperature)] * n if isinstance(temperature, (int, float)) else [float(t) for t in temperature]
        tops = [float(top_p)] * n if isinstance(top_p, (int, float)) else [float(p) for p in top_p]
        if len(temps) != n or len(tops) != n:
            raise ValueError(f"{n} seeds but {len(temps)} temperatures and {len(tops)} top-p values")
        if any(t < 0 for t in temps) or any(not 0 < p <= 1 for p in tops):
            raise ValueError("temperatures must be >= 0 and top-p values in (0, 1]")
        keys = [(int(s) ^ (int(s) >> 32)) & _M32 for s in seeds]
        self.keys = _fmix32(torch.tensor(keys, dtype=torch.long, device=device))
        self.greedy_rows = [t == 0 for t in temps]
        self.any_greedy = any(self.greedy_rows)
        self.all_greedy = all(self.greedy_rows)
        self.nucleus = any(p < 1.0 for p, g in zip(tops, self.greedy_rows) if not g)
        # greedy rows divide by 1 (their draw is thrown away); rows at top-p 1 keep every token
        self.temperature = torch.tensor([t if t > 0 else 1.0 for t in temps], dtype=torch.float64, device=device)
        self.top_p = torch.tensor(tops, dtype=torch.float64, device=device)
        self.full_rows = torch.tensor([p >= 1.0 for p in tops], dtype=torch.bool, device=device)
        self.greedy = torch.tensor(self.greedy_rows, dtype=torch.bool, device=device)
        self._tokens: Any = None

    def prepare(self, vocab: int, device: Any) -> None:
        """Make the per-token hashes ahead of time (before a CUDA graph is captured)."""
        import torch

        if self._tokens is None or self._tokens.numel() != vocab:
            self._tokens = _fmix32(_mul32(torch.arange(vocab, dtype=torch.long, device=device), 0x9E3779B1))

    def picks(self, scores: Any, step: Any) -> Any:
        """The chosen token of every row (int64, shape [rows]) from float scores of shape [rows, vocab]."""
        import torch

        if self.all_greedy:
            return scores.argmax(dim=-1)
        self.prepare(scores.shape[-1], scores.device)
        if isinstance(step, int):
            salt = torch.full_like(self.keys, step + 1)
        else:
            salt = (step + 1).expand_as(self.keys)
        row_keys = _fmix32(self.keys ^ _mul32(salt, 0x27D4EB2F))
        u = _fmix32(row_keys[:, None] ^ self._tokens[None, :])  # [rows, vocab], uniform on [0, 2**32)
        gumbel = -torch.log(-torch.log((u.double() + 0.5) / 2.0 ** 32))
        logits = scores.double() / self.temperature[:, None]
        if self.nucleus:
            probs = torch.softmax(logits, dim=-1)
            sorted_p, order = probs.sort(dim=-1, descending=True)
            # drop a token when the tokens above it already hold top_p of the mass (the first always stays)
            drop_sorted = ((sorted_p.cumsum(dim=-1) - sorted_p) >= self.top_p[:, None]) & ~self.full_rows[:, None]
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            logits = logits.masked_fill(drop, float("-inf"))
        picks = (logits + gumbel).argmax(dim=-1)
        if self.any_greedy:
            picks = torch.where(self.greedy, scores.argmax(dim=-1), picks)
        return picks


class RowCache:
    """The KV cache :func:`decode_batch` hands the model: per layer one key and one value tensor of shape [rows,
    kv heads, max_len, head dim], allocated at the layer's first write and written in place at slot ``slot`` (a
    one-element device tensor) onwards. ``rows`` (a slice) narrows every layer to some rows (the prefill's
    chunks)."""

    is_compileable = False

    def __init__(self, n_rows: int, max_len: int):
        self.n_rows = n_rows
        self.max_len = max_len
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.slot: Any = None
        self.rows = slice(None)
        self._offsets: Any = None

    def update(self, key_states: Any, value_states: Any, layer_idx: int, *args: Any, **kwargs: Any):
        import torch

        while len(self.keys) <= layer_idx:
            self.keys.append(None)
            self.values.append(None)
        if self.keys[layer_idx] is None:
            shape_k = (self.n_rows, key_states.shape[1], self.max_len, key_states.shape[-1])
            shape_v = (self.n_rows, value_states.shape[1], self.max_len, value_states.shape[-1])
            self.keys[layer_idx] = torch.zeros(shape_k, dtype=key_states.dtype, device=key_states.device)
            self.values[layer_idx] = torch.zeros(shape_v, dtype=value_states.dtype, device=value_states.device)
        keys, values = self.keys[layer_idx][self.rows], self.values[layer_idx][self.rows]
        q = key_states.shape[-2]
        if q == 1:
            index = self.slot
        else:
            if self._offsets is None or self._offsets.numel() < q:
                self._offsets = torch.arange(self.max_len, device=key_states.device)
            index = self._offsets[:q] + self.slot
        keys.index_copy_(2, index, key_states)
        values.index_copy_(2, index, value_states)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:  # positions are always given; never consulted for them
        return 0

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class DecodeStats:
    """What one :func:`decode_batch` call did."""

    rows: int
    width: int
    steps: int
    """Decoding steps run (the prefill's token included)."""
    graph: str
    """``replayed`` (a CUDA graph), ``eager`` (asked for no graph, or not on CUDA), or ``failed: REASON`` (the capture
    failed and the steps ran eagerly)."""
    gqa: bool = False
    """Whether the decoding steps attended with :func:`gqa_decode_attention`."""
    prefill_s: float = 0.0
    decode_s: float = 0.0


def _text_config(model: Any) -> Any:
    config = model.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def check_supported(model: Any) -> tuple[str, dict[str, str]]:
    """The model's attention implementation and how its forward names the cache (and cache positions), or
    :class:`DecodeUnsupported`."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = _text_config(base)
    impl = getattr(config, "_attn_implementation", None) or getattr(base.config, "_attn_implementation", None)
    if impl not in ("sdpa", "eager"):
        raise DecodeUnsupported(f"attention implementation {impl!r} (decode_batch builds masks for sdpa and eager)")
    if getattr(config, "is_encoder_decoder", False):
        raise DecodeUnsupported("an encoder-decoder model")
    layer_types = getattr(config, "layer_types", None)
    if layer_types and any(t != "full_attention" for t in layer_types):
        raise DecodeUnsupported(f"layers of types {sorted(set(layer_types))} (only full attention is supported)")
    if not layer_types and getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        raise DecodeUnsupported(f"a sliding window of {config.sliding_window} tokens")
    params = inspect.signature(base.forward).parameters
    names: dict[str, str] = {}
    if "cache" in params:
        names["cache"] = "cache"
    elif "past_key_values" in params:
        names["cache"] = "past_key_values"
    else:
        raise DecodeUnsupported("the model's forward takes neither cache nor past_key_values")
    if "cache_position" in params:
        names["cache_position"] = "cache_position"
    if "logits_to_keep" in params:
        names["logits_to_keep"] = "logits_to_keep"
    return impl, names


DECODE_ATTENTION = "cudaperf_gqa_decode"
"""The name :func:`gqa_decode_attention` is registered under in transformers' ``AttentionInterface``."""


def gqa_decode_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
                         scaling: float | None = None, **kwargs: Any) -> tuple[Any, None]:
    """Attention of one new token a row over the cache, for grouped-query models, without repeating the key and
    value heads: the query heads of a group ([rows, kv heads, group, head dim]) are multiplied with their shared
    cached keys and values as one batched product, so the cache is read once a step. transformers' own attention
    first copies every key and value head ``group`` times (``repeat_kv``) once a mask is given, which at a few
    hundred rows of a few thousand slots is most of a decoding step's memory traffic. ``attention_mask``: [rows, 1,
    1, slots], booleans (True: attend) or an additive float mask. Softmax in float32, as transformers' eager
    attention. Returns [rows, 1, heads, head dim], as transformers' attention functions do."""
    import torch

    rows, heads, q, dim = query.shape
    kv_heads = key.shape[1]
    if q != 1 or heads % kv_heads:
        raise ValueError(f"gqa_decode_attention takes one query a row and heads divisible by the key heads "
                         f"(got {q} queries, {heads} heads, {kv_heads} key heads)")
    group = heads // kv_heads
    scale = scaling if scaling is not None else dim ** -0.5
    qg = query.reshape(rows, kv_heads, group, dim)
    scores = torch.matmul(qg, key.transpose(-1, -2)).float() * scale  # [rows, kv heads, group, slots]
    if attention_mask is not None:
        mask = attention_mask.reshape(rows, 1, 1, -1)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + mask.float()
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)  # [rows, kv heads, group, head dim]
    return out.reshape(rows, heads, 1, dim).transpose(1, 2).contiguous(), None


def _register_decode_attention() -> None:
    from transformers import AttentionInterface

    if DECODE_ATTENTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(DECODE_ATTENTION, gqa_decode_attention)


class _DecodeAttention:
    """For the decoding steps of :func:`decode_batch`: the model's configs name :func:`gqa_decode_attention` as
    their attention implementation, and their own again afterwards (the prefill keeps the model's own)."""

    def __init__(self, model: Any, enabled: bool):
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        text = _text_config(base)
        self.configs = [base.config] if text is base.config else [base.config, text]
        self.enabled = enabled
        self.saved: list[Any] = []
        if enabled:
            _register_decode_attention()

    def __enter__(self) -> "_DecodeAttention":
        if self.enabled:
            self.saved = [c._attn_implementation for c in self.configs]
            for c in self.configs:
                c._attn_implementation = DECODE_ATTENTION
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            for c, impl in zip(self.configs, self.saved):
                c._attn_implementation = impl


def _groups(model: Any) -> int:
    config = _text_config(model.get_base_model() if hasattr(model, "get_base_model") else model)
    heads = int(getattr(config, "num_attention_heads", 1) or 1)
    kv = int(getattr(config, "num_key_value_heads", None) or heads)
    return heads // kv if kv and heads % kv == 0 else 1


def _mask(allowed: Any, impl: str, dtype: Any) -> Any:
    """[rows, q, slots] booleans (True: attend) as the attention implementation's 4-D mask."""
    import torch

    if impl == "sdpa":
        return allowed[:, None]
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
        ~allowed, torch.finfo(dtype).min)[:, None]


def self_check(device: str = "cuda", steps: int = 24) -> tuple[bool, str]:
    """Whether :func:`decode_batch` works on ``device`` (``cudaperf doctor --decoder``): a 2-layer grouped-query
    Llama with random weights (built from a config, nothing downloaded), 4 ragged left-padded prompts, ``steps``
    sampled tokens, with the graph asked for against the same loop run eagerly and against ``generate``; returns
    (ok, what happened). On a GPU ``ok`` needs the graph to have replayed and every token to agree."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, LogitsProcessorList

    try:
        config = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                             initializer_range=0.3, pad_token_id=0, eos_token_id=1, bos_token_id=None)
        torch.manual_seed(0)
        model = LlamaForCausalLM(config).to(device).eval()
        gen = torch.Generator().manual_seed(1)
        lengths = [5, 17, 9, 30]
        ids = torch.zeros((4, max(lengths)), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, n in enumerate(lengths):
            ids[r, -n:] = torch.randint(2, 512, (n,), generator=gen)
            mask[r, -n:] = 1
        ids, mask = ids.to(device), mask.to(device)
        runs = {}
        with torch.inference_mode():
            for graph in (True, False):
                out, stats = decode_batch(model, ids, mask, max_new=steps, budgets=[steps] * 4, eos_ids=[10**6],
                                          pad_id=0, sampler=RowSampler([1, 2, 3, 4], 0.7, 0.9, ids.device),
                                          graph=graph)
                runs[graph] = (out.tolist(), stats)
            from cudaperf.policy.hf import _SeededSampler

            cfg = GenerationConfig(max_new_tokens=steps, min_new_tokens=steps, do_sample=False, num_beams=1,
                                   eos_token_id=[], pad_token_id=0)
            seqs = model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg,
                                  logits_processor=LogitsProcessorList(
                                      [_SeededSampler([1, 2, 3, 4], 0.7, 0.9, ids.device, ids.shape[1])]))
        hf = seqs[:, ids.shape[1]:].tolist()
    except Exception as exc:
        return False, f"decode_batch failed: {type(exc).__name__}: {str(exc)[:300]}"
    (g_out, g_stats), (e_out, _) = runs[True], runs[False]
    same_eager = g_out == e_out
    same_hf = sum(a == b for ra, rb in zip(g_out, hf) for a, b in zip(ra, rb))
    total = sum(len(r) for r in hf)
    detail = (f"graph {g_stats.graph}; {steps} tokens x 4 rows: the same as the eager loop: "
              f"{'yes' if same_eager else 'no'}; as generate: {same_hf} of {total} tokens")
    wants_graph = str(device).startswith("cuda")
    ok = same_eager and (g_stats.graph == "replayed" or not wants_graph)
    return ok, detail


def decode_batch(model: Any, input_ids: Any, attention_mask: Any, *, max_new: int, budgets: Sequence[int],
                 eos_ids: Sequence[int], pad_id: int, sampler: RowSampler | None, graph: bool = True,
                 gqa: bool = True, prefill_rows: int = 16, check_every: int = 16) -> tuple[Any, DecodeStats]:
    """New tokens of every row (an int64 tensor [rows, <= max_new] on the CPU; a done row's later tokens are
    ``pad_id``) and what was done. ``input_ids`` and ``attention_mask`` are left-padded [rows, W] on the model's
    device; ``budgets`` the rows' own token limits (<= ``max_new``); ``sampler`` None decodes greedily; ``gqa``:
    the decoding steps of a grouped-query model attend with :func:`gqa_decode_attention`."""
    import time

    import torch

    impl, names = check_supported(model)
    if max_new < 1:
        raise ValueError("max_new must be >= 1")
    rows, width = input_ids.shape
    if len(budgets) != rows:
        raise ValueError(f"{rows} rows but {len(budgets)} budgets")
    device = input_ids.device
    dtype = next(model.parameters()).dtype
    L = width + max_new
    cache = RowCache(rows, L)
    cache.slot = torch.zeros(1, dtype=torch.long, device=device)
    mask2 = attention_mask.to(torch.bool)
    lengths = mask2.sum(dim=-1)  # real prompt tokens a row
    slots = torch.arange(L, device=device)
    row_valid = torch.zeros((rows, L), dtype=torch.bool, device=device)
    row_valid[:, :width] = mask2
    row_valid[:, width:] = True
    eos = torch.tensor(sorted(set(int(e) for e in eos_ids)), dtype=torch.long, device=device)
    budget_t = torch.tensor([max(1, min(int(b), max_new)) for b in budgets], dtype=torch.long, device=device)
    out = torch.full((rows, max_new), int(pad_id), dtype=torch.long, device=device)

    def forward(ids: Any, mask4: Any, positions: Any, q: int) -> Any:
        kwargs = {"input_ids": ids, "attention_mask": mask4, "position_ids": positions, names["cache"]: cache,
                  "use_cache": True}
        if "cache_position" in names:
            kwargs["cache_position"] = cache.slot if q == 1 else slots[:q] + cache.slot
        if "logits_to_keep" in names:
            kwargs["logits_to_keep"] = 1
        return model(**kwargs).logits[:, -1, :].float()

    t0 = time.perf_counter()
    # prefill, a chunk of rows at a time: causal over the row's real tokens; a padding position sees only itself
    pos_prompt = (mask2.long().cumsum(-1) - 1).clamp(min=0)
    causal = slots[None, :width, None] >= slots[None, None, :L]  # [1, W, L]: slot j <= query slot i
    eye = slots[None, :width, None] == slots[None, None, :L]
    logits0 = []
    for r0 in range(0, rows, max(1, prefill_rows)):
        r1 = min(rows, r0 + max(1, prefill_rows))
        cache.rows = slice(r0, r1)
        allowed = (causal & row_valid[r0:r1, None, :]) | eye
        logits0.append(forward(input_ids[r0:r1], _mask(allowed, impl, dtype), pos_prompt[r0:r1], width))
    cache.rows = slice(None)
    logits0 = torch.cat(logits0, dim=0)
    step = torch.zeros(1, dtype=torch.long, device=device)
    done = torch.zeros(rows, dtype=torch.bool, device=device)

    def choose(scores: Any) -> Any:
        nxt = sampler.picks(scores, step) if sampler is not None else scores.argmax(dim=-1)
        nxt = torch.where(done, torch.full_like(nxt, int(pad_id)), nxt)
        out.index_copy_(1, step, nxt[:, None])
        done.logical_or_(torch.isin(nxt, eos) | (step + 1 >= budget_t))
        return nxt

    if sampler is not None:
        sampler.prepare(logits0.shape[-1], device)
    tok = choose(logits0)[:, None].clone()
    del logits0
    cache.slot.fill_(width)
    pos = (lengths[:, None] - 1).clone()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    prefill_s = time.perf_counter() - t0
    t0 = time.perf_counter()

    attention = _DecodeAttention(model, gqa and _groups(model) > 1)

    def decode_step() -> None:
        pos.add_(1)
        step.add_(1)
        allowed = row_valid & (slots[None, :] <= cache.slot)
        with attention:
            nxt = choose(forward(tok, _mask(allowed[:, None, :], impl, dtype), pos, 1))
        tok.copy_(nxt[:, None])
        cache.slot.add_(1)

    steps_done = 1
    mode = "eager"
    remaining = max_new - 1
    use_graph = graph and device.type == "cuda" and remaining > 2
    if use_graph:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):  # real steps that also warm the kernels and the allocator up
                decode_step()
        torch.cuda.current_stream(device).wait_stream(side)
        steps_done += 2
        remaining -= 2
        g = torch.cuda.CUDAGraph()
        try:
            # thread_local: CUDA calls of other threads of the process (a harness thread, a server's) neither
            # break the capture nor are refused while it lasts
            with torch.cuda.graph(g, capture_error_mode="thread_local"):
                decode_step()
            mode = "replayed"
        except Exception as e:  # capture refused (a host synchronisation inside the forward): go on eagerly
            mode = f"failed: {type(e).__name__}: {str(e)[:200]}"
            g = None
            torch.cuda.synchronize(device)
    for _ in range(remaining):
        if (steps_done % check_every == 0) and bool(done.all()):
            break
        if mode == "replayed":
            g.replay()
        else:
            decode_step()
        steps_done += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    decode_s = time.perf_counter() - t0
    result = out[:, :steps_done].cpu()
    if mode == "replayed":
        del g  # the graph's private memory pool goes with it
    return result, DecodeStats(rows=rows, width=width, steps=steps_done, graph=mode, gqa=attention.enabled,
                               prefill_s=round(prefill_s, 4), decode_s=round(decode_s, 4))
