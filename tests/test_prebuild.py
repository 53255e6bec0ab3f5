"""cudaperf.harness.prebuild on this machine (real nvcc in the sandbox, compile-only): answers compiled while the
policy writes are found in the build cache when judged, the verdicts are those of a run without it, and answers
without code, answers the static checks stop and answers to unknown tasks are not built."""

from __future__ import annotations

from dataclasses import replace

from test_eval_run import TASK_IDS, _completions, _lines

from cudaperf.eval.run import EvalOptions, run_eval
from cudaperf.eval.tasksets import load_taskset, select
from cudaperf.harness.prebuild import Prebuilder
from cudaperf.harness.settings import HarnessSettings
from cudaperf.policy.replay import ReplayPolicy


def _verdicts(run_dir) -> dict:
    return {(r["task_id"], r["sample"], r["turn"]): (r["stage"], r["compiled"], r["failure_kind"], r["stop"])
            for r in _lines(run_dir / "turns.jsonl")}


def _cached(run_dir) -> list[bool]:
    return [r["compile"]["cached"] for r in _lines(run_dir / "results.jsonl") if r.get("compile")]


def test_answers_built_while_the_policy_writes_are_cache_hits_with_the_same_verdicts(tmp_path):
    """Two tasks x 1 sample x 3 turns (broken, fast, slow), one answer a chunk: with the prebuilder every judged
    build is a cache hit; without it, on new sources, none is; the verdicts are the same."""
    ts = select(load_taskset("builtin"), task_ids=TASK_IDS)
    opts = EvalOptions(samples=1, turns=3, compile_only=True, summarizer="template", fewshot=False, chunk=1)
    on = run_eval(ReplayPolicy(_completions(tmp_path / "a.jsonl", 1, 3)), ts, tmp_path / "on", opts)
    off = run_eval(ReplayPolicy(_completions(tmp_path / "b.jsonl", 1, 3)), ts, tmp_path / "off",
                   replace(opts, prebuild=False))
    assert on.prebuilt == {"submitted": 6, "built": 6, "stopped": 0, "faults": 0}
    assert off.prebuilt is None
    assert _cached(tmp_path / "on") == [True] * 6  # the broken answer's compile failure is cached too
    assert _cached(tmp_path / "off") == [False] * 6  # each source new to the cache (a nonce in each)
    assert _verdicts(tmp_path / "on") == _verdicts(tmp_path / "off")


def test_what_is_not_built(tmp_path):
    """No code and code the static checks stop are checked but not built; an unknown task and an empty answer are
    not queued."""
    ts = select(load_taskset("builtin"), task_ids=TASK_IDS)
    tasks = {t.id: t for t in ts.tasks}
    pb = Prebuilder(tasks, HarnessSettings(), workers=2)
    try:
        n = pb.submit([("saxpy", "I cannot write this."),
                       ("saxpy", "<OUTPUT_CUDA>\nvoid saxpy(int n, float a, const float *x, float *y) {}\n"
                                 "</OUTPUT_CUDA>"),
                       ("no_such_task", "<OUTPUT_CUDA>\n__global__ void k() {}\n</OUTPUT_CUDA>"),
                       ("dot", "")])
        pb.wait()
        assert n == 2 and pb.stats() == {"submitted": 2, "built": 0, "stopped": 2, "faults": 0}
    finally:
        pb.close()
