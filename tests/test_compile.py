"""Real nvcc builds: success, trimmed errors, link hints, symbol interposition, the cache."""

from __future__ import annotations

import pytest

from cudaperf.harness.compile import build_c_function_candidate, trim_log
from cudaperf.harness.driver import driver_source
from cudaperf.harness.evaluate import build_candidate, compile_failure
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def saxpy():
    return find_task(load_builtin_tasks(), "saxpy")


def _src(label: str) -> str:
    return next(c for c in builtin_candidates() if c.task_id == "saxpy" and c.label == label).source


def test_good_candidate_builds_and_is_cached(saxpy):
    drv = driver_source(saxpy)
    first = build_c_function_candidate(_src("fast"), drv, "saxpy", arch="sm_90")
    assert first.stage == "ok" and first.exe is not None and first.exe.stat().st_size > 0
    assert not first.info.cached and "-arch=sm_90" in first.info.flags
    again = build_c_function_candidate(_src("fast"), drv, "saxpy", arch="sm_90")
    assert again.info.cached and again.exe == first.exe
    other_flags = build_c_function_candidate(_src("fast"), drv, "saxpy", arch="sm_90", flags=("-O2",))
    assert not other_flags.info.cached and other_flags.exe != first.exe


def test_compile_error_is_trimmed_and_attributed_to_the_candidate(saxpy):
    bad = _src("fast").replace("if (i < n)", "if (i < n") + "\n" + "\n".join(f"// pad {i}" for i in range(200))
    b = build_candidate(saxpy, bad, HarnessSettings())
    assert b.stage == "compile" and b.exe is None
    assert "error" in b.info.log and len(b.info.log) <= 4000
    f = compile_failure(b, saxpy)
    assert f.kind.value == "compile_error" and f.attributed_to == "candidate"


def test_missing_c_linkage_gets_a_hint(saxpy):
    src = _src("fast").replace('extern "C" ', "")
    b = build_candidate(saxpy, src, HarnessSettings())
    assert b.stage == "link"
    f = compile_failure(b, saxpy)
    assert f.kind.value == "link_error" and 'extern "C"' in f.message


def test_interposing_a_library_symbol_is_rejected(saxpy, fixtures_dir):
    b = build_candidate(saxpy, (fixtures_dir / "saxpy" / "timer_patch.cu").read_text(), HarnessSettings())
    assert b.stage == "symbols"
    assert any("clock_gettime" in r for r in b.reasons)


def test_failures_are_cached_too(saxpy):
    bad = "__global__ void k() { nope; }"
    first = build_candidate(saxpy, bad, HarnessSettings())
    again = build_candidate(saxpy, bad, HarnessSettings())
    assert first.stage == again.stage == "compile" and again.info.cached and again.info.log == first.info.log


def test_trim_log_keeps_first_errors():
    log = "\n".join(["warning: meh"] * 50 + ["a.cu(3): error: bad thing", "  context", "  more"] * 30)
    out = trim_log(log, max_lines=9)
    assert out.startswith("a.cu(3): error: bad thing") and out.count("\n") <= 8


def test_globals_and_constant_memory_are_allowed(saxpy):
    src = ("__constant__ float coef[16];\n__device__ float dbuf[8];\nfloat* d_cache = 0;\n"
           + _src("fast"))
    b = build_candidate(saxpy, src, HarnessSettings())
    assert b.stage == "ok", (b.stage, b.reasons, b.info.log)
