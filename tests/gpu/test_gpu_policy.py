"""GPU behaviour of the HF policy (``pytest -m gpu``): the static KV cache, which transformers compiles on a GPU,
answers as the dynamic one does (a random-weight Llama in float32, greedy), chunk after chunk."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policy_fixtures import tiny_model_dir  # noqa: E402,F401  (a pytest fixture)

from cudaperf.policy import Request, SamplingParams  # noqa: E402
from cudaperf.policy.hf import HFPolicy  # noqa: E402


def _requests(n: int) -> list[Request]:
    return [Request(messages=({"role": "user", "content": "Write a CUDA kernel for saxpy. " * (1 + i % 4)},),
                    task_id=f"t{i}", sample=i) for i in range(n)]


def test_static_cache_on_the_gpu_answers_as_the_dynamic_cache(tiny_model_dir):
    dynamic = HFPolicy(tiny_model_dir, device="cuda", dtype="float32", batch_size=8)
    static = HFPolicy(tiny_model_dir, device="cuda", dtype="float32", batch_size=4, static_cache=True,
                      length_bucket=32)
    try:
        reqs = _requests(7)  # two chunks of 4, the second with a filler row
        for params in (SamplingParams(temperature=0, max_new_tokens=12),
                       SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=12, seed=5)):
            want = dynamic.generate(reqs, params)
            got = static.generate(reqs, params)
            assert all(g.error is None for g in got), [g.error for g in got]
            assert [g.text for g in got] == [g.text for g in want]
    finally:
        dynamic.close()
        static.close()
