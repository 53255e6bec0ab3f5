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


def test_hostile_candidates_the_build_stops_keep_their_verdicts_when_prebuilt(tmp_path, monkeypatch):
    """The adversarial suite's 16 C-function candidates that the build stops (a patched timer, weak or reserved
    symbols, init sections, ifunc resolvers, host threads, OpenMP, a second main): prebuilt into a fresh build
    cache, then judged by the real evaluate(): each judged build is the prebuilt one (a cache hit), and each
    verdict is the manifest's, its reason included. A head start credits nothing the build would stop."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "adversarial_table", Path(__file__).resolve().parents[1] / "benchmarks" / "adversarial_table.py")
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))
    entries = [e for e in suite.load_manifest() if e["task_kind"] == "c_function" and e["decided"] == "compile"]
    assert len(entries) >= 16
    settings = suite.harness_settings(gpu=False)
    pb = Prebuilder({suite.task_of(e).id: suite.task_of(e) for e in entries}, settings, workers=2)
    try:
        pb.submit([(suite.task_of(e).id, suite.completion(e)) for e in entries])
        pb.wait()
        assert pb.stats() == {"submitted": len(entries), "built": len(entries), "stopped": 0, "faults": 0}
    finally:
        pb.close()
    for e in entries:
        r = suite.evaluate_entry(e, settings=settings)
        assert r.compile is not None and r.compile.cached, e["file"]
        assert suite.matches(e["expect"], r, suite.reason_for(e)), (e["file"], suite.observed(r), r.failure)
