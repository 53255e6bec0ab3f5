"""Real nvcc builds: success, trimmed errors, link hints, symbol interposition, the cache."""

from __future__ import annotations

import pytest

from cudaperf.harness.compile import build_c_function_candidate, trim_log
from cudaperf.harness.driver import driver_source
from cudaperf.harness.evaluate import build_candidate
from cudaperf.harness.records import compile_failure
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


def _without_host_compiler(monkeypatch):
    """nvcc (real) in the sandbox with a PATH that has no gcc: it cannot run its host compiler, which is what a
    host out of processes looks like to it."""
    import cudaperf.harness.compile as compile_mod
    from cudaperf.harness.sandbox import scrubbed_env

    nvcc_dir = str(compile_mod.Path(compile_mod.nvcc_path()).parent)
    monkeypatch.setattr(compile_mod, "scrubbed_env", lambda w, extra=None: {**scrubbed_env(w), "PATH": nvcc_dir})
    monkeypatch.setattr(compile_mod, "TOOLCHAIN_RETRY_DELAYS_S", (0.0,))


def test_a_toolchain_that_cannot_run_is_unscored_and_not_cached(saxpy, monkeypatch):
    """A build that failed for the host's reasons (seen on the H200: fork failing with EAGAIN while 16 runners
    held threads) is the harness's fault: never the candidate's compile error, never cached."""
    from cudaperf.harness.compile import ToolchainError
    from cudaperf.harness.evaluate import evaluate

    with monkeypatch.context() as m:
        _without_host_compiler(m)
        with pytest.raises(ToolchainError, match="after 2 tries.*Failed to preprocess host compiler properties"):
            build_c_function_candidate(_src("fast"), driver_source(saxpy), "saxpy", arch="sm_90")
        res = evaluate(saxpy, f"```cuda\n{_src('fast')}\n```", settings=HarnessSettings(arch="sm_90"))
        assert res.status == "unscored" and "ToolchainError" in res.failure.message
        assert res.failure.attributed_to == "harness"
    again = build_c_function_candidate(_src("fast"), driver_source(saxpy), "saxpy", arch="sm_90")
    assert again.stage == "ok" and not again.info.cached  # the fault was not remembered


def test_toolchain_faults_are_told_apart_from_the_sources():
    from cudaperf.harness.compile import toolchain_fault

    for log in ("setpriv: failed to execute /bin/sh: Resource temporarily unavailable",
                "cudaperf-init: 1: Cannot fork",
                "gcc: fatal error: cannot execute 'as': vfork: Resource temporarily unavailable",
                "nvcc fatal   : Failed to preprocess host compiler properties.", ""):
        assert toolchain_fault(False, log), log
    for log in ('candidate.cu(3): error: identifier "nope" is undefined',
                "nvcc was killed by SIGXFSZ\n", "nvcc did not finish within 180 s\n"):
        assert toolchain_fault(False, log) is None, log
    assert toolchain_fault(True, "") is None


def test_a_cached_toolchain_fault_is_built_again(saxpy):
    """Cache entries written before faults were told apart are not trusted."""
    from cudaperf.harness.compile import _store

    first = build_candidate(saxpy, "__global__ void k() { nope; }", HarnessSettings(arch="sm_90"))
    assert first.stage == "compile"
    import cudaperf.harness.compile as compile_mod

    key = next(p.stem for p in compile_mod.cache_dir().rglob("*.json"))
    _store(key, None, {"stage": "compile", "log": "sh: 1: Cannot fork", "reasons": []})
    again = build_candidate(saxpy, "__global__ void k() { nope; }", HarnessSettings(arch="sm_90"))
    assert again.stage == "compile" and not again.info.cached and "nope" in again.info.log


def test_a_source_cannot_pass_its_compile_error_off_as_a_toolchain_fault(saxpy):
    """nvcc echoes source lines in its diagnostics: a candidate that writes the toolchain-fault words into a line
    that fails to compile still gets its compile error (scored), not an unscored result."""
    bad = '__global__ void k() { const char* s = "vfork: Resource temporarily unavailable"; int x = nope; }'
    b = build_candidate(saxpy, bad, HarnessSettings(arch="sm_90"))
    assert b.stage == "compile" and "Resource temporarily unavailable" in b.info.log
    f = compile_failure(b, saxpy)
    assert f.kind.value == "compile_error" and f.attributed_to == "candidate"
    assert build_candidate(saxpy, bad, HarnessSettings(arch="sm_90")).info.cached  # and cached as such


def test_a_build_past_its_time_limit_fails_now_and_is_built_again_next_time(saxpy, monkeypatch):
    """nvcc past COMPILE_TIMEOUT_S is the candidate's compile failure for this evaluation, but it is not cached: a
    loaded machine (prebuilds beside a policy's generation, many builds at once) can slow an honest heavy build
    that far, so the next evaluation of the same source builds it again (here, with the normal limit, it builds)."""
    import cudaperf.harness.compile as comp

    drv = driver_source(saxpy)
    with monkeypatch.context() as m:
        m.setattr(comp, "COMPILE_TIMEOUT_S", 0.05)
        slow = build_c_function_candidate(_src("fast"), drv, "saxpy", arch="sm_90")
        assert slow.stage == "compile" and slow.exe is None and "did not finish within" in slow.info.log
        assert compile_failure(slow, saxpy).kind.value == "compile_error"
        assert not build_c_function_candidate(_src("fast"), drv, "saxpy", arch="sm_90").info.cached
    again = build_c_function_candidate(_src("fast"), drv, "saxpy", arch="sm_90")
    assert again.stage == "ok" and not again.info.cached
    assert build_c_function_candidate(_src("fast"), drv, "saxpy", arch="sm_90").info.cached
