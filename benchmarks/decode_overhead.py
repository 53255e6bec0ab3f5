"""Where a decoding step of the embedded model's shape goes (SmolLM2-135M: 30 layers, 49,152-token vocabulary),
with random weights from the config (no download; ``--model DIR`` reads the real model's config from DIR).

    python benchmarks/decode_overhead.py [--model DIR] [--batches 1,16,64] [--steps 64] [--device cpu|cuda]
        [--out FILE.json]
    python benchmarks/decode_overhead.py --arms greedy,sampled,lora,merged,static --batches 285 --prompt-tokens 2400
        [--steps 64] [--out FILE.json]

Without ``--arms``: milliseconds a decoding step (greedy, ``min_new_tokens`` = ``max_new_tokens``), for each batch
size, of the full model beside the same depth at a width of 64, where there is almost no arithmetic left. When the
narrow model's step costs about what the full one's does, the step is bound by the per-op overhead (Python,
dispatch, kernel launches), not by the model, and larger batches are nearly free.

With ``--arms``: the full model only, at each batch size and a prompt of ``--prompt-tokens`` tokens (eval's prompts
for test:c average about 2,400 at ``--context-tokens 4096``), one row per arm, side by side in one process:

* ``greedy``: transformers' dynamic KV cache, no logits processor;
* ``sampled``: the same with the hf policy's seeded sampler (``cudaperf.policy.hf._SeededSampler``, temperature
  0.7, top-p 0.9), as ``cudaperf eval`` samples;
* ``lora``: ``sampled`` through a PEFT LoRA adapter (r 16 on all linear layers, as ``cudaperf sft`` trains), not
  merged: what an ``hf:MODEL+ADAPTER`` policy decoded with before adapters were merged;
* ``merged``: the same adapter merged into the weights (``merge_and_unload``), as the hf policy loads one now;
* ``static``: ``sampled`` with the static KV cache (``cache_implementation="static"``; transformers compiles the
  decoding step on a GPU): the first call's seconds (the compilation) are a column of their own;
* ``loop``: ``sampled`` through the project's own decoder (``cudaperf.policy.decode.decode_batch``: a fixed KV
  cache, no ``generate``), each step run eagerly;
* ``graph``: the same with every decoding step after the first two replayed as one CUDA graph (``graph`` in the
  row says whether the capture took), attending with ``gqa_decode_attention`` (the cache read once a step);
* ``graph-repeat``: ``graph`` with transformers' own attention, which copies the key and value heads for each
  query head of their group first;
* ``graph-greedy``: ``graph`` without the sampler (what the seeded draw, a sort of every row's vocabulary in float64
  each step, costs beside it);
* ``lora-graph``: ``graph`` through the unmerged LoRA adapter (GRPO's live model generates so).

Every arm is timed twice with the same shapes: ``first_s`` is the first call's wall (warm-up, compilation), the
step time comes from the second. ``peak_gib`` is the second call's peak GPU memory.
"""

from __future__ import annotations

import argparse
import json
import time

ARMS = ("greedy", "sampled", "lora", "merged", "static", "loop", "graph", "graph-repeat", "graph-greedy",
        "lora-graph")


def step_ms(model, batch: int, steps: int, device: str) -> float:
    import torch

    ids = torch.randint(0, model.config.vocab_size, (batch, 200), device=device)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4, min_new_tokens=4, do_sample=False)
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=steps + 1, min_new_tokens=steps + 1,
                       do_sample=False)
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t) / steps * 1000


def _timed_generate(model, ids, mask, steps: int, device: str, sampler_seeds=None, static: bool = False) -> float:
    import torch
    from transformers import GenerationConfig, LogitsProcessorList

    from cudaperf.policy.hf import _SeededSampler

    cfg = GenerationConfig(max_new_tokens=steps, min_new_tokens=steps, do_sample=False, num_beams=1,
                           eos_token_id=0, pad_token_id=0)
    if static:
        cfg.cache_implementation = "static"
    procs = LogitsProcessorList()
    if sampler_seeds is not None:
        procs.append(_SeededSampler(sampler_seeds, 0.7, 0.9, ids.device, ids.shape[1]))
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.inference_mode():
        model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg, logits_processor=procs)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t


def _decoder_row(model, ids, mask, steps: int, device: str, seeds, graph: bool, gqa: bool = True) -> dict:
    """decode_batch twice with the same shapes (the first call warms up), the second timed: its prefill, its
    decoding steps (the prefill's token excluded), whether the graph replayed, peak memory."""
    import torch

    from cudaperf.policy.decode import RowSampler, decode_batch

    def once():
        t = time.perf_counter()
        with torch.inference_mode():
            _, stats = decode_batch(model, ids, mask, max_new=steps + 1, budgets=[steps + 1] * ids.shape[0],
                                    eos_ids=[-1], pad_id=0,
                                    sampler=None if seeds is None else RowSampler(seeds, 0.7, 0.9, ids.device),
                                    graph=graph, gqa=gqa)
        return time.perf_counter() - t, stats

    first, _ = once()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    _, stats = once()
    out = {"first_s": round(first, 2), "prefill_s": round(stats.prefill_s, 3),
           "ms_per_step": round(stats.decode_s / max(1, stats.steps - 1) * 1000, 1), "graph": stats.graph,
           "gqa": stats.gqa}
    if device == "cuda":
        out["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    return out


def arm_rows(cfg, arms: list[str], batches: list[int], prompt_tokens: int, steps: int, device: str,
             out: str | None = None) -> list[dict]:
    """One row per (arm, batch): a prefill-only call (1 new token) and a call of 1 + ``steps`` new tokens, both
    timed after a first call of the same shapes; the step time is their difference over ``steps``. With ``out``,
    the rows so far are written there after each one (a run cut short keeps what it measured)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    rows = []
    for arm in arms:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype).to(device).eval()
        if arm in ("lora", "merged", "lora-graph"):
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05,
                                                     target_modules="all-linear", init_lora_weights=False))
            if arm == "merged":
                model = model.merge_and_unload()
            model.eval()
        for b in batches:
            g = torch.Generator(device="cpu").manual_seed(b)
            ids = torch.randint(1, cfg.vocab_size, (b, prompt_tokens), generator=g).to(device)
            mask = torch.ones_like(ids)
            seeds = None if arm == "greedy" else list(range(b))
            static = arm == "static"
            row = {"arm": arm, "batch": b, "prompt_tokens": prompt_tokens, "steps": steps, "device": device}
            try:
                if arm in ("loop", "graph", "graph-repeat", "graph-greedy", "lora-graph"):
                    row.update(_decoder_row(model, ids, mask, steps, device,
                                            None if arm == "graph-greedy" else seeds, graph=arm != "loop",
                                            gqa=arm != "graph-repeat"))
                    _keep(rows, row, out)
                    continue
                row["first_s"] = round(_timed_generate(model, ids, mask, steps + 1, device, seeds, static), 2)
                prefill = _timed_generate(model, ids, mask, 1, device, seeds, static)
                if device == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                full = _timed_generate(model, ids, mask, steps + 1, device, seeds, static)
                row["prefill_s"] = round(prefill, 3)
                row["ms_per_step"] = round((full - prefill) / steps * 1000, 1)
                if device == "cuda":
                    row["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
            except Exception as e:  # an arm that fails (out of memory, a compile error) is a row, not the end
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                if device == "cuda":
                    torch.cuda.empty_cache()
            _keep(rows, row, out)
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def _keep(rows: list[dict], row: dict, out: str | None) -> None:
    rows.append(row)
    print(json.dumps(row), flush=True)
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a transformers model directory whose config to copy (default SmolLM2-135M's)")
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--device", default="cuda" if __import__("torch").cuda.is_available() else "cpu")
    ap.add_argument("--arms", help=f"comma-separated, of {', '.join(ARMS)} (see above); default: full against narrow")
    ap.add_argument("--prompt-tokens", type=int, default=200)
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig

    if a.model:
        full = AutoConfig.from_pretrained(a.model)
    else:  # SmolLM2-135M's published shape
        full = LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                           num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192,
                           tie_word_embeddings=True)
    batches = [int(x) for x in a.batches.split(",")]
    if a.arms:
        arms = [x for x in a.arms.split(",") if x]
        unknown = sorted(set(arms) - set(ARMS))
        if unknown:
            ap.error(f"unknown arms {unknown}; known: {', '.join(ARMS)}")
        rows = arm_rows(full, arms, batches, a.prompt_tokens, a.steps, a.device, a.out)
    else:
        narrow = full.__class__(**{**full.to_dict(), "hidden_size": 64, "intermediate_size": 128,
                                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16})
        dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
        rows = []
        for name, cfg in (("full", full), ("narrow", narrow)):
            torch.manual_seed(0)
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype).to(a.device).eval()
            for b in batches:
                rows.append({"model": name, "hidden": cfg.hidden_size, "layers": cfg.num_hidden_layers, "batch": b,
                             "ms_per_step": round(step_ms(model, b, a.steps, a.device), 1), "device": a.device})
                print(json.dumps(rows[-1]), flush=True)
            del model
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
