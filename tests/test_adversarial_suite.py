"""The adversarial suite (``tests/fixtures/adversarial/manifest.json``) on a machine without a GPU.

Every hostile candidate of the suite goes through the real ``evaluate()`` once (a module-scoped batch, two at a
time). Entries decided at the static checks or at the build (nvcc, the symbol check, the link) must get exactly
their expected status, failure kind and stage, for the reason the manifest names. Entries decided at run or timing
must get past those stages and come out unscored for want of a GPU: they were not stopped early by accident (their
full verdict is ``tests/gpu/test_gpu_adversarial.py``'s). Entries marked ``cpu_run`` are whole programs that never
initialise CUDA: they also run to their verdict here, with ``CUDAPERF_ASSUME_GPU=1`` and timing off.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, HAVE_GPU

_SPEC = importlib.util.spec_from_file_location(
    "adversarial_table", Path(__file__).resolve().parents[1] / "benchmarks" / "adversarial_table.py")
suite = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(suite)

ENTRIES = suite.load_manifest()
BY_FILE = {e["file"]: e for e in ENTRIES}
DECIDED_HERE = [e["file"] for e in ENTRIES if e["decided"] in ("static", "compile")]
NEEDS_GPU = [e["file"] for e in ENTRIES if e["decided"] in ("run", "timing")]
CPU_RUNS = [e["file"] for e in ENTRIES if e.get("cpu_run")]
HONEST = ("saxpy/side_stream.cu", "torch_fast/relu_side_stream.cu", "adversarial/dot_partial_sums_host_final.cu",
          "adversarial/histogram_block_counts_host_merge.cu")
"""Honest controls: twins of a hostile class that a check must not stop (side-stream work that is waited for, a
small final step on the host beside the kernel-share floor), timed and credited."""


@pytest.fixture(scope="module")
def results():
    return suite.evaluate_all(ENTRIES, workers=2)


def test_the_manifest_covers_every_kind_with_at_least_40_candidates():
    assert len(ENTRIES) >= 40
    assert len(BY_FILE) == len(ENTRIES), "a file is listed twice"
    kinds = Counter(e["task_kind"] for e in ENTRIES)
    assert set(kinds) == set(suite.KINDS), kinds
    assert all(e["decided"] in suite.DECIDED for e in ENTRIES)
    from cudaperf.harness.result import FailureKind, Stage

    for e in ENTRIES:
        assert (FIXTURES / e["file"]).is_file(), e["file"]
        exp = e["expect"]
        assert exp["status"] == "scored" and exp["stage"] in {s.value for s in Stage}, e["file"]
        assert exp["failure"] is None or exp["failure"] in {k.value for k in FailureKind}, e["file"]
        assert e["hack_class"] and suite.task_of(e).id == e["task"], e["file"]
        assert bool(e.get("reason")) == (e["decided"] in ("static", "compile")), e["file"]
        # a candidate with no failure is credited: that is a gap unless it is an honest control; a forged timer that
        # is timed at its honest speed says so with the bound the GPU test holds it to (max_speedup)
        if exp["failure"] is None and e["file"] not in HONEST:
            assert e.get("gap") or e.get("max_speedup"), e["file"]
        if "max_speedup" in e:
            assert exp["failure"] is None and exp["stage"] == "timed" and e["max_speedup"] > 0, e["file"]
        if "cpu_run_expect" in e:  # a verdict of its own where NVML cannot be read: only for cpu_run entries
            alt = e["cpu_run_expect"]
            assert e.get("cpu_run") and alt["stage"] in {s.value for s in Stage}, e["file"]
            assert alt["failure"] is None or alt["failure"] in {k.value for k in FailureKind}, e["file"]


def test_every_new_candidate_says_what_it_tries_and_what_should_stop_it():
    for e in ENTRIES:
        if e["file"].startswith("adversarial/"):
            head = suite.source(e)[:800]
            opening = ("// Honest control",) if e["file"] in HONEST else ("// Hostile", "# Hostile")
            assert head.startswith(opening) and "stop" in head, e["file"]
    assert all(BY_FILE[f]["expect"]["failure"] is None and "gap" not in BY_FILE[f] for f in HONEST)


@pytest.mark.parametrize("name", DECIDED_HERE)
def test_candidates_decided_before_the_gpu_get_their_exact_verdict(results, name):
    e, r = BY_FILE[name], results[name]
    assert suite.observed(r) == e["expect"], (name, suite.observed(r), r.failure)
    assert r.failure.attributed_to == "candidate" and not r.correct and r.speedup is None
    assert e["reason"] in r.failure.message, (name, r.failure.message)
    if r.failure.kind.value == "static_check":
        assert r.static_check_reasons, name


@pytest.mark.skipif(HAVE_GPU, reason="checks the no-GPU behaviour (tests/gpu/test_gpu_adversarial.py runs these)")
@pytest.mark.parametrize("name", NEEDS_GPU)
def test_candidates_decided_on_the_gpu_pass_the_checks_before_it(results, name):
    e, r = BY_FILE[name], results[name]
    assert suite.observed(r) == suite.cpu_expectation(e), (name, suite.observed(r), r.failure)
    assert r.failure.attributed_to == "harness" and suite.NO_GPU in r.failure.message, r.failure
    assert not r.static_check_reasons
    if e["task_kind"] != "pytorch_modelnew":  # a ModelNew module's extension builds in its run
        assert r.compile is not None and r.compile.ok, name


def test_a_fast_path_library_rewrites_the_runners_files_when_the_process_exits(tmp_path, monkeypatch):
    """The mechanism of the gap ``fast_forged_timing.cu``, shown without a GPU: the build refuses it since session
    21 (its static object's constructor is an ``.init_array`` entry beyond nvcc's own); built with that check off
    (a private build cache), loaded with ctypes as the runner loads it and called once (the launch fails here, the
    call is what arms it), the library overwrites timing.json in its working directory when the process exits,
    after the runner would have written its samples."""
    import json
    import shutil
    import subprocess
    import sys

    import cudaperf.harness.compile as compile_mod
    from cudaperf.harness.torch_fast import build_fast_candidate

    code = suite.source(BY_FILE["adversarial/fast_forged_timing.cu"])
    refused = build_fast_candidate(code)
    assert refused.stage == "symbols" and any(".init_array" in r for r in refused.reasons), refused.reasons
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "build-cache"))
    monkeypatch.setattr(compile_mod, "startup_code_reasons", lambda readelf_sections: [])
    build = build_fast_candidate(code)
    assert build.stage == "ok", build.info.log
    shutil.copy(build.exe, tmp_path / "candidate.so")
    (tmp_path / "timing.json").write_text(json.dumps({"samples_ms": [5.0, 5.1, 5.2]}))  # the runner's record
    call = ("import ctypes\n"
            "class T(ctypes.Structure):\n"
            "    _fields_ = [('data', ctypes.c_void_p), ('dtype', ctypes.c_int32), ('ndim', ctypes.c_int32),\n"
            "                ('numel', ctypes.c_int64), ('shape', ctypes.c_int64 * 8),\n"
            "                ('strides', ctypes.c_int64 * 8)]\n"
            "lib = ctypes.CDLL('./candidate.so', mode=ctypes.RTLD_LOCAL)\n"
            "a, b = (T * 1)(), (T * 1)()\n"
            "a[0].numel = b[0].numel = 4\n"
            "lib.kernel_forward(a, 1, b, 1, None)\n")
    subprocess.run([sys.executable, "-c", call], cwd=tmp_path, check=True, capture_output=True, timeout=60)
    assert json.loads((tmp_path / "timing.json").read_text())["samples_ms"] == [0.001] * 20


@pytest.mark.skipif(HAVE_GPU, reason="without a GPU only")
def test_programs_that_never_touch_cuda_run_to_their_verdict_here():
    """The host-only c_program gets no credit. The one that forges the CUPTI probe's file (its file call found at
    run time, which no source check resolves) is stopped on a GPU machine by the driver's context list (NVML, on
    by default); here NVML cannot be read, so the check is unavailable, the result says why, and it is credited:
    the gap stays open on such machines (its ``cpu_run_expect``)."""
    assert CPU_RUNS
    runs = suite.evaluate_cpu_runs(ENTRIES)
    for name in CPU_RUNS:
        r = runs[name]
        assert suite.observed(r) == suite.cpu_run_expectation(BY_FILE[name]), (name, suite.observed(r), r.failure)
        assert r.correct == (r.failure is None)
    forged = runs["adversarial/collatz_forged_probe_runtime.cu"]
    assert BY_FILE["adversarial/collatz_forged_probe_runtime.cu"]["expect"]["failure"] == "no_gpu_work"
    assert forged.gpu_evidence.driver_context.startswith("unavailable: "), forged.gpu_evidence
