"""GPU behaviour of the HF policy (``pytest -m gpu``): the static KV cache, which transformers compiles on a GPU,
answers as the dynamic one does (a random-weight Llama in float32, greedy), chunk after chunk; the project's decoder
with its steps replayed as a CUDA graph answers as generate does, and as its own eager steps do in bfloat16."""

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


def test_graph_decoder_replays_and_answers_as_generate(tiny_model_dir):
    """decoder graph on CUDA: every batch's steps are replayed from one captured graph (``graph:replayed``), and
    the answers are generate's (float32, greedy and sampled, chunks of 4 with an early EOS possible); in bfloat16
    the replayed steps give exactly the tokens of the same loop run eagerly (the same kernels)."""
    hf = HFPolicy(tiny_model_dir, device="cuda", dtype="float32", batch_size=4)
    graph = HFPolicy(tiny_model_dir, device="cuda", dtype="float32", batch_size=4, decoder="graph")
    try:
        reqs = _requests(7)
        for params in (SamplingParams(temperature=0, max_new_tokens=40),
                       SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=40, seed=5)):
            want = hf.generate(reqs, params)
            got = graph.generate(reqs, params)
            assert all(g.error is None for g in got), [g.error for g in got]
            assert {g.extra["decoder"] for g in got} == {"graph:replayed"}, graph.last_decode
            assert [g.text for g in got] == [g.text for g in want]
            assert [g.finish_reason for g in got] == [g.finish_reason for g in want]
    finally:
        hf.close()
        graph.close()
    loop16 = HFPolicy(tiny_model_dir, device="cuda", dtype="bfloat16", batch_size=8, decoder="loop")
    graph16 = HFPolicy(tiny_model_dir, device="cuda", dtype="bfloat16", batch_size=8, decoder="graph")
    try:
        params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=64, seed=9)
        assert [g.text for g in graph16.generate(_requests(8), params)] == \
            [g.text for g in loop16.generate(_requests(8), params)]
        assert graph16.last_decode.graph == "replayed"
    finally:
        loop16.close()
        graph16.close()


def test_decoder_self_check_replays_on_the_gpu():
    """cudaperf doctor --decoder's check on the GPU: the graph replayed, its tokens those of the eager loop."""
    from cudaperf.policy.decode import self_check

    ok, detail = self_check("cuda")
    assert ok, detail
    assert detail.startswith("graph replayed")
