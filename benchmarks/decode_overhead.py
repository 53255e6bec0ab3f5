"""How much of a decoding step is the eager forward's fixed cost: the embedded model (SmolLM2-135M's shape: 30
layers, 49,152-token vocabulary) beside the same depth at a width of 64, where there is almost no arithmetic left.

    python benchmarks/decode_overhead.py [--model DIR] [--batches 1,16,64] [--steps 64] [--device cpu|cuda]
        [--out FILE.json]

Random weights from the config (no download); with ``--model`` the real model's config is read from DIR. Each
row: milliseconds a decoding step (greedy, ``min_new_tokens`` = ``max_new_tokens``, a prompt of 200 tokens), for
each batch size. When the narrow model's step costs about what the full one's does, the step is bound by the
per-op overhead (Python, dispatch, kernel launches), not by the model, and larger batches are nearly free.
"""

from __future__ import annotations

import argparse
import json
import time


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a transformers model directory whose config to copy (default SmolLM2-135M's)")
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--device", default="cuda" if __import__("torch").cuda.is_available() else "cpu")
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
    narrow = full.__class__(**{**full.to_dict(), "hidden_size": 64, "intermediate_size": 128,
                               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16})
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    rows = []
    for name, cfg in (("full", full), ("narrow", narrow)):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype).to(a.device).eval()
        for b in (int(x) for x in a.batches.split(",")):
            rows.append({"model": name, "hidden": cfg.hidden_size, "layers": cfg.num_hidden_layers, "batch": b,
                         "ms_per_step": round(step_ms(model, b, a.steps, a.device), 1), "device": a.device})
            print(json.dumps(rows[-1]), flush=True)
        del model
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
