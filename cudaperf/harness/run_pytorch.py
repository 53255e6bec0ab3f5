"""Evaluate a PyTorch candidate: hidden trials against the trusted reference, then CUDA-event timing.

A candidate is a fast-path library (``torch_fast``) or, for compatibility, KernelBench-style Python defining
``ModelNew``. It runs in a sandboxed Python process (``native/torch_runner.py``, which imports torch and
nothing of cudaperf); the harness gives it inputs, parameters and output shapes, never expected outputs. The
process stops after the trials for the harness's verdict (``tests_done``), times on command and ends on ``stop``,
as the C driver does. Checks on the outputs: each trial's outputs (candidate run on fresh copies of the inputs,
outputs poisoned, freed memory poisoned), no input modified in place, the outputs of timed calls re-checked, and
one profiled call that must run one of the candidate's own kernels.

The sandbox user (``nobody`` when the harness runs as root) must be able to run the harness's Python and import
torch; :func:`sandbox_python` probes it once and says what is wrong when it cannot (then every result is
unscored: a harness fault).
"""

from __future__ import annotations

import json
import mmap
import os
import re
import secrets
import statistics
import sys
import time
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from threading import Lock

from cudaperf.harness.compile import BuildOutcome, ToolchainError
from cudaperf.harness.environment import device_for_child
from cudaperf.harness.pytorch_reference import PreparedPyTorch, compare_outputs
from cudaperf.harness.quiet import HOST
from cudaperf.harness.result import CompileInfo, Failure, FailureKind, Stage, TimingStats
from cudaperf.harness.sandbox import (CTL_FD, Control, SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env,
                                      share_file)
from cudaperf.harness.settings import HarnessSettings, speedup_flag
from cudaperf.harness.static_checks import KERNEL_DEF_PATTERN
from cudaperf.harness.turns import TurnLock

RUNNER = Path(__file__).parent / "native" / "torch_runner.py"
PACK = Path(__file__).parent / "native" / "tensor_pack.py"
EXIT_NO_GPU = 5
"""The runner's exit status when torch sees no usable CUDA device (a harness fault)."""
H200_L2_BYTES = 60 * 1024 * 1024


@dataclass(frozen=True)
class PyTorchOutcome:
    stage: Stage
    correct: bool
    failure: Failure | None
    trials_passed: int
    n_trials: int
    timing: TimingStats | None
    kernels: tuple[str, ...] | None
    """GPU kernels of one profiled call (None: not profiled)."""
    run_s: float
    window_cpu_cores: float | None = None
    """The cores the runner kept busy in its timing window (CPU time read from outside the run over the window's
    wall time); recorded, not ruled on (``HarnessSettings.max_window_cpu_cores`` applies to C functions)."""
    sandbox_level: str | None = None
    """The sandbox the runner ran under (:attr:`cudaperf.harness.sandbox.SandboxRun.level`: ``start=zygote`` at
    its end for a runner forked from the zygote); None where no runner ran."""


@lru_cache(maxsize=1)
def sandbox_python() -> tuple[str, str | None]:
    """(the Python the sandbox runs, why it cannot run it, or None)."""
    py = sys.executable
    with Workdir(prefix="cudaperf-pyprobe-") as w:
        r = run_sandboxed([py, "-c", "import torch, ctypes; print(torch.__version__)"], w,
                          limits=SandboxLimits(wall_s=120), env=scrubbed_env(w))
    if r.ok:
        return py, None
    return py, (f"the sandbox user cannot run {py} with torch ({r.describe()}: {(r.stderr or r.stdout)[-300:]}); "
                "install Python and torch where that user can read them, or run the harness as that user")


_ZYGOTE_NOTED: set[str] = set()


RUNNER_PRELOAD = ("torch", "?torch._dynamo")
"""What the runners' zygote imports: torch, and ``torch._dynamo``, which the profiler's first session (the
runner's probe) imports otherwise: on this project's CPU machine 1.0 s of each runner's start, of 2.0 to 2.5 s
(docs/BENCHMARKS.md). Of torch._dynamo's and torch._inductor's configuration two values differ in a forked runner
from an exec'd one, both paths made from the directory the interpreter was in at the import (the zygote's, not the
run's): ``torch._dynamo.config.debug_dir_root`` (torch.compile's debug output, used only when it is asked for)
and ``torch._inductor.config.xpu.cutlass_dir`` (Intel GPUs); tests/test_zygote.py checks that no other does."""


def runner_zygote(py: str):
    """The zygote PyTorch runners fork from (``HarnessSettings.pytorch_zygote``: :data:`RUNNER_PRELOAD` imported
    once), or None where there is none (the reason logged once; runners then start as fresh interpreters)."""
    from cudaperf.harness.zygote import shared_zygote

    z = shared_zygote(RUNNER_PRELOAD, py)
    if isinstance(z, str):
        if z not in _ZYGOTE_NOTED:
            _ZYGOTE_NOTED.add(z)
            import logging

            logging.getLogger(__name__).warning("PyTorch runners start without a zygote: %s", z)
        return None
    return z


def _l2_flush_bytes() -> int:
    import torch

    if torch.cuda.is_available():
        return 2 * int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", H200_L2_BYTES))
    return 2 * H200_L2_BYTES


def run_pytorch_fast(prepared: PreparedPyTorch, code: str, build: BuildOutcome, settings: HarnessSettings,
                     gpu_index: int | None = None) -> PyTorchOutcome:
    """Run a built fast-path candidate (``build.exe`` is its library) on ``prepared``'s trials, then time it."""
    return run_pytorch_candidate(prepared, code, settings, gpu_index, build=build)


MODELNEW_BUILD_S = 600.0
"""Added to the trials' time limit for a KernelBench-style candidate, whose extension builds in the process."""

_KERNEL = re.compile(KERNEL_DEF_PATTERN)  # on the raw source: a ModelNew module holds its CUDA in strings


def run_pytorch_candidate(prepared: PreparedPyTorch, code: str, settings: HarnessSettings,
                          gpu_index: int | None = None, *, build: BuildOutcome | None = None,
                          gpu_lock: AbstractContextManager | None = None,
                          phases_s: dict[str, float] | None = None, prebuilt: Path | None = None,
                          load_lock: Lock | TurnLock | None = None) -> PyTorchOutcome:
    """Run a candidate on ``prepared``'s trials, then time it: a built fast-path library (``build``), or, without
    one, KernelBench-style Python source defining ``ModelNew`` (statically checked first; its ``load_inline``
    extension builds inside the sandboxed process, with nvcc and ninja on its PATH).

    ``gpu_lock``: held while the candidate uses the GPU (its trials; its timing, re-checked outputs and profiled
    call), so that several candidates of one task may start their processes together (setting up torch and the
    CUDA context takes seconds) and still never share the GPU while one of them runs or is timed. Only for
    trusted candidates (a dataset's own variants): an untrusted one could leave work running between phases.

    ``phases_s``: filled with the seconds each phase took (the runner's start-up, waits for the GPU lock, trials,
    judging, timing, the profiled call), for the measurement's own accounting.

    ``prebuilt``: a ``ModelNew`` module's extensions built ahead (:mod:`cudaperf.harness.modelnew_build`), copied
    into the run at the path they were built at, so that its ``load_inline`` calls only load them.

    ``load_lock``: a runner started ahead (``HarnessSettings.prestart_runners``, for any candidate): its trusted
    set-up (torch, the CUDA context, the profiler's probe) runs beside another candidate's run, paused whenever
    anything is timed; the candidate's code loads only once this lock is taken, and the lock is held until this
    run's process is gone, so no two candidates' code is ever alive at once. A set-up that failed (the harness's
    fault, or one a candidate beside it could have caused, say by taking the GPU's memory) is run again holding
    the lock, with nothing beside it."""
    seen: dict = {}
    out = _run_once(prepared, code, settings, gpu_index, build=build, gpu_lock=gpu_lock, phases_s=phases_s,
                    prebuilt=prebuilt, load_lock=load_lock, seen=seen)
    if out is None:  # a prestarted runner's set-up failed: again, alone (no other candidate's code alive)
        with load_lock:
            out = _run_once(prepared, code, settings, gpu_index, build=build, gpu_lock=gpu_lock, phases_s=phases_s,
                            prebuilt=prebuilt, seen=seen)
        assert out is not None
    return replace(out, sandbox_level=seen["level"]) if seen.get("level") else out


def _run_once(prepared: PreparedPyTorch, code: str, settings: HarnessSettings, gpu_index: int | None = None, *,
              build: BuildOutcome | None = None, gpu_lock: AbstractContextManager | None = None,
              phases_s: dict[str, float] | None = None, prebuilt: Path | None = None,
              load_lock: Lock | TurnLock | None = None, seen: dict | None = None) -> PyTorchOutcome | None:
    """One run of :func:`run_pytorch_candidate`; None when a runner started ahead failed before its candidate's
    code loaded. ``seen["level"]``: the sandbox level its runner ran under."""
    import torch

    from cudaperf.harness.modelnew_build import install_prebuilt, modelnew_env, modelnew_pch, modelnew_ro_paths
    from cudaperf.harness.pytorch_checks import check_pytorch_candidate

    mode = "fast" if build is not None else "modelnew"
    if mode == "modelnew":
        chk = check_pytorch_candidate(code)
        if not chk.ok:
            return PyTorchOutcome(Stage.EXTRACTED, False, Failure(FailureKind.STATIC_CHECK, "; ".join(chk.reasons)),
                                  0, len(prepared.trials), None, None, 0.0)

    py, why = sandbox_python()
    n = len(prepared.trials)
    if why is None and not torch.cuda.is_available():
        why = "no CUDA device is visible to PyTorch: the candidate compiled, but cannot be run here"
    if why is not None:
        return PyTorchOutcome(Stage.COMPILED, False, Failure(FailureKind.HARNESS, why, "harness"), 0, n, None, None,
                              0.0)
    extra = {"CUDA_VISIBLE_DEVICES": device_for_child(gpu_index)} if gpu_index is not None else {}
    pch = modelnew_pch(settings.modelnew_pch, build=False) if mode == "modelnew" else None
    if mode == "modelnew":  # load_inline needs nvcc and ninja
        extra.update(modelnew_env(py, settings.arch, prebuilt=prebuilt is not None, pch=pch))
    state: dict = {}
    gpu = gpu_lock if gpu_lock is not None else nullcontext()
    with Workdir(prefix="cudaperf-torch-") as w, ExitStack() as stack:
        if build is not None:
            assert build.exe is not None
            copy_in(build.exe, w, "candidate.so")
        else:
            (w / "candidate.py").write_text(code)
            share_file(w / "candidate.py")
            if prebuilt is not None:
                install_prebuilt(prebuilt, w)
        copy_in(RUNNER, w, "torch_runner.py")
        copy_in(PACK, w, "tensor_pack.py")
        try:  # memory sized by the trusted outputs: a shortage is the harness's, never the candidate's
            in_fd = prepared.inputs_fd()  # shared by the task's runs, sealed
            outputs = _Outputs(prepared)
        except OSError as exc:
            return PyTorchOutcome(Stage.COMPILED, False, Failure(
                FailureKind.HARNESS, f"cannot hold the task's tensors in memory: {exc}", "harness"), 0, n, None,
                None, 0.0)
        stack.callback(outputs.close)
        (w / "job.json").write_text(json.dumps({
            "mode": mode, "n_trials": n, "l2_flush_bytes": _l2_flush_bytes(),
            "ext": "ext" if prebuilt is not None and mode == "modelnew" else None, "gate": load_lock is not None,
            "quick_exit": settings.pytorch_quick_exit,
            "specs": [[{"shape": list(s.shape), "dtype": s.dtype} for s in t.specs] for t in prepared.trials],
            "inputs_fd": in_fd, "outputs_fd": outputs.fd, "outputs_bytes": outputs.nbytes,
            "slots": outputs.slots}))
        share_file(w / "job.json")
        tests_limit = settings.test_timeout_s + (MODELNEW_BUILD_S if mode == "modelnew" else 0.0)
        run_need_s = tests_limit + settings.timing_timeout_s + 60  # a whole run, from its start

        phases = phases_s if phases_s is not None else {}
        last = [time.monotonic()]

        def mark(name: str) -> None:
            now = time.monotonic()
            phases[name] = phases.get(name, 0.0) + now - last[0]
            last[0] = now

        def control(ctl: Control) -> None:
            mark("sandbox_s")
            # With other runners on the GPU (gpu_lock), or started ahead (load_lock), this one's start-up (importing
            # torch, the CUDA context, the profiler) is paused background work: stopped (SIGSTOP) whenever anything
            # is timed.
            background = gpu_lock is not None or load_lock is not None
            if background:
                HOST.register(ctl.pid)
            try:
                first = ctl.read_line(timeout_s=tests_limit)  # torch imported, a CUDA device seen
                state["gpu_ok"] = first == "gpu_ok"
                probe = ctl.read_line(timeout_s=tests_limit) if state["gpu_ok"] else None  # before candidate code
                state["probe_ok"] = probe == "probe 1"
                state["probe"] = probe
                ok = state["gpu_ok"] and probe is not None and probe.startswith("probe ")
                if ok and load_lock is None:
                    ok = ctl.read_line(timeout_s=tests_limit) == "ready"  # the context, the library
            finally:
                if background:
                    phases["startup_paused_s"] = HOST.unregister(ctl.pid)
            mark("startup_s")
            if ok and load_lock is not None and not state["probe_ok"]:
                ok = False  # the probe may have failed for what a candidate beside it did: run again, alone
            if ok and load_lock is not None:  # the candidate's code, once the previous candidate's process is gone
                # Not past the point where a whole run no longer fits before this process's deadline (the
                # previous candidate ran long, or hung to its limit): then again, alone, with a fresh deadline,
                # never a timeout of this candidate's for what another did.
                while not load_lock.acquire(timeout=0.25):
                    if ctl.deadline - time.monotonic() < run_need_s:
                        getattr(load_lock, "cancel", lambda: None)()  # a TurnLock: its place goes
                        break
                else:
                    state["holds_load_lock"] = True
                mark("load_wait_s")
                ok = (state.get("holds_load_lock", False) and ctl.send("load")
                      and ctl.read_line(timeout_s=tests_limit) == "ready")
                mark("load_s")
            if not ok:
                if not ctl.eof:
                    ctl.kill()
                return
            with gpu:  # the trials
                mark("wait_s")
                line = ctl.read_line(timeout_s=settings.test_timeout_s) if ctl.send("go") else None
                mark("trials_s")
            if line != "tests_done":
                if line is None and not ctl.eof:
                    ctl.kill()
                return
            with HOST.background():  # the comparison uses this GPU (and the host): never beside a timed window
                state["verdict"] = _judge_trials(prepared, w, outputs)
            mark("judge_s")
            if state["verdict"][1] is not None or not settings.time_candidates:
                ctl.send("stop")
                return
            with gpu:  # timing (with the host quiet), then the re-checked outputs and the profiled call
                mark("wait_s")
                secret = secrets.randbits(63) | 1 if settings.timing_recheck else 0
                state["secret"] = secret
                with HOST.timing():
                    mark("quiet_wait_s")
                    cpu0, t_sent = ctl.cpu_s(), time.monotonic()
                    ok = ctl.send(f"time {settings.min_reps} {settings.max_reps} {settings.budget_ms} "
                                  f"{settings.cv_target} {settings.warmup} {secret}")
                    done = ctl.read_line(timeout_s=settings.timing_timeout_s) if ok else None
                    cpu1, t_done = ctl.cpu_s(), time.monotonic()
                    if cpu0 is not None and cpu1 is not None and t_done > t_sent:
                        state["window_cpu_cores"] = round((cpu1 - cpu0) / (t_done - t_sent), 3)
                    mark("timing_s")
                state["timed"] = done == "timing_done"
                if state["timed"]:  # read while the runner waits: nothing of the candidate's runs in between
                    state["samples"] = _read_json(w / "timing.json", {}).get("samples_ms") or []
                if done is None and not ctl.eof:
                    ctl.kill()
                    state["timing_timeout"] = True
                    return
                stopped = ctl.read_line(timeout_s=settings.timing_timeout_s) if ctl.send("stop") else None
                mark("profile_s")
            if stopped == "stopped":  # the GPU is free again; the runner waits until this returns
                try:  # with the reference on the re-checked calls' perturbed inputs: trusted work, on the GPU
                    with gpu, HOST.background():
                        state["recheck"] = _recheck_timed(prepared, w, outputs, _timed_seeds(
                            prepared, state["secret"], settings.warmup, len(state.get("samples") or [])))
                except _ReferenceFailed as exc:
                    state["recheck_fault"] = str(exc)
                    return
                state["evidence"] = _read_json(w / "evidence.json", {})
                mark("recheck_s")

        # A runner started ahead may wait for the load lock as long as a whole run of each runner ahead of it: it
        # gets that much more time
        ahead = settings.prestart_ahead if load_lock is not None else 0
        limits = SandboxLimits(wall_s=run_need_s * (1 + ahead), max_processes=4096,
                               exit_grace_s=settings.pytorch_exit_grace_s,
                               ro_paths=modelnew_ro_paths(pch))
        t0 = time.monotonic()
        try:
            run = run_sandboxed([py, "torch_runner.py", CTL_FD], w, env=scrubbed_env(w, extra), limits=limits,
                                control=control, pass_fds=(in_fd, outputs.fd),
                                zygote=runner_zygote(py) if settings.pytorch_zygote else None)
        finally:
            if state.get("holds_load_lock"):
                load_lock.release()  # its process is gone: the next candidate's code may load
        if seen is not None:
            seen["level"] = run.level
        run_s = time.monotonic() - t0
        mark("exit_s")
        if load_lock is not None and not state.get("holds_load_lock"):
            return None  # its set-up failed before any of its code ran, beside another candidate's run
        tail = (run.stderr or run.stdout).strip()[-400:]
        if "verdict" not in state:
            if run.returncode == EXIT_NO_GPU and not state.get("gpu_ok"):  # the runner's check, before any candidate
                                                                           # code; after it, exit(5) is the candidate's
                return PyTorchOutcome(Stage.COMPILED, False, Failure(
                    FailureKind.HARNESS, f"no usable GPU in the sandbox: {tail}", "harness"), 0, n, None, None, run_s)
            if run.timed_out:
                f = Failure(FailureKind.TIMEOUT, f"trials: {run.describe()}")
            else:
                f = Failure(FailureKind.CRASH, f"trials: the runner {run.describe()}" + (f": {tail}" if tail else ""))
            return PyTorchOutcome(Stage.RAN, False, f, 0, n, None, None, run_s)
        passed, failure = state["verdict"]
        if failure is not None:
            return PyTorchOutcome(Stage.RAN, False, failure, passed, n, None, None, run_s)
        if run.exit_overrun:  # its records were read, but it would not end (code of its own at exit): no credit
            return PyTorchOutcome(Stage.CORRECT, False, Failure(FailureKind.TIMEOUT, f"the runner {run.describe()}; "
                                                                "killed"), passed, n, None, None, run_s)
        if not state.get("timed"):
            if not settings.time_candidates:
                return PyTorchOutcome(Stage.CORRECT, True, None, passed, n, None, None, run_s)
            why = ("a timing run ran past its limit" if state.get("timing_timeout")
                   else f"timing failed: {run.describe()}" + (f": {tail}" if tail else ""))
            return PyTorchOutcome(Stage.CORRECT, False, Failure(FailureKind.TIMEOUT if state.get("timing_timeout")
                                                                else FailureKind.CRASH, why), passed, n, None, None,
                                  run_s)
        samples = state.get("samples") or []
        if "recheck_fault" in state:
            return PyTorchOutcome(Stage.CORRECT, False, Failure(FailureKind.HARNESS, state["recheck_fault"], "harness"),
                                  passed, n, None, None, run_s)
        if "evidence" not in state:  # the runner ended (or hung) after its timing, before its records
            return PyTorchOutcome(Stage.CORRECT, False, Failure(
                FailureKind.CRASH, f"the runner did not finish its re-checked and profiled calls: {run.describe()}"
                + (f": {tail}" if tail else "")), passed, n, None, None, run_s)
        recheck, evidence = state["recheck"], state["evidence"]
    kernels = tuple(evidence.get("kernels") or ()) if evidence.get("kernels") is not None else None
    if recheck is not None:
        return PyTorchOutcome(Stage.CORRECT, False, Failure(FailureKind.TIMING_RECHECK, recheck), passed, n, None,
                              kernels, run_s)
    own = set(_KERNEL.findall(code))  # in a ModelNew module the CUDA source sits in Python strings
    if kernels is None:
        if not state.get("probe_ok"):  # the profiler failed on a trusted op before any candidate code
            return PyTorchOutcome(Stage.CORRECT, False, Failure(
                FailureKind.HARNESS, f"cannot verify GPU work: the profiler does not work here ({state.get('probe')}; "
                f"the profiled call: {evidence.get('error')})", "harness"), passed, n, None, None, run_s)
        return PyTorchOutcome(Stage.CORRECT, False, Failure(  # it worked before the candidate's code was loaded
            FailureKind.NO_GPU_WORK, f"the profiled call of the candidate failed ({evidence.get('error')}), so its GPU "
            "work cannot be shown"), passed, n, None, None, run_s)
    if not any(re.match(rf"(?:void )?{re.escape(k)}\b", name) for k in own for name in kernels):
        return PyTorchOutcome(Stage.CORRECT, False, Failure(
            FailureKind.NO_GPU_WORK, f"none of the candidate's kernels ({', '.join(sorted(own))}) ran in a profiled "
            f"call; the GPU ran: {', '.join(kernels[:5]) or 'nothing'}"), passed, n, None, kernels, run_s)
    foreign = foreign_compute_problem(evidence.get("kernel_us"), own, settings)
    if foreign is not None:
        return PyTorchOutcome(Stage.CORRECT, False, Failure(FailureKind.NO_GPU_WORK, foreign), passed, n, None,
                              kernels, run_s)
    flags = flags_problem(evidence.get("flags_pinned"), evidence.get("flags"))
    if flags is not None:
        return PyTorchOutcome(Stage.CORRECT, False, Failure(FailureKind.NO_GPU_WORK, flags), passed, n, None,
                              kernels, run_s)
    if not samples:
        return PyTorchOutcome(Stage.CORRECT, False, Failure(FailureKind.CRASH, "timing produced no samples"), passed,
                              n, None, kernels, run_s)
    floor = timing_floor_failure(samples[::n], evidence.get("device_us"), settings)  # trial 0's calls: the
    # window rotates over the trials from trial 0, and the profiled call ran on trial 0's inputs
    if floor is not None:
        return PyTorchOutcome(Stage.CORRECT, False, Failure(FailureKind.TIMER_MISMATCH, floor), passed, n, None,
                              kernels, run_s)
    return PyTorchOutcome(Stage.TIMED, True, None, passed, n, TimingStats.from_samples_ms(samples), kernels, run_s,
                          window_cpu_cores=state.get("window_cpu_cores"))


MOVEMENT_KERNELS = ("Memcpy", "Memset", "direct_copy_kernel", "CatArrayBatchedCopy", "FillFunctor", "fill_kernel")
"""Kernel names (substrings) of data movement and fills, which any candidate may leave to torch (``.contiguous()``,
``torch.zeros``, ``torch.cat``): not counted as the library's compute."""


def foreign_compute_problem(kernel_us: dict | None, own: set[str], settings: HarnessSettings) -> str | None:
    """The profiled call's GPU time by kernel (the runner's ``evidence.json``) against the candidate's own kernel
    names: what is wrong when kernels that are not the candidate's (cuBLAS, cuDNN, ATen compute) carry more than
    ``settings.max_foreign_compute_share`` of its compute time (copies and fills aside), else None. Nothing is
    ruled on without the figures or with the share at 1."""
    if not kernel_us or settings.max_foreign_compute_share >= 1:
        return None

    def mine(name: str) -> bool:
        return any(re.match(rf"(?:void )?{re.escape(k)}\b", name) for k in own)

    compute = {k: float(v) for k, v in kernel_us.items() if not any(m in k for m in MOVEMENT_KERNELS)}
    total = sum(compute.values())
    foreign = {k: v for k, v in compute.items() if not mine(k)}
    share = sum(foreign.values()) / total if total > 0 else 0.0
    if share <= settings.max_foreign_compute_share:
        return None
    top = sorted(foreign.items(), key=lambda kv: -kv[1])[:3]
    names = "; ".join(f"{k[:80]} ({v:.0f} us)" for k, v in top)
    return (f"kernels that are not the candidate's carried {100 * share:.0f} % of the profiled call's GPU compute "
            f"(more than {100 * settings.max_foreign_compute_share:.0f} %, HarnessSettings.max_foreign_compute_share): "
            f"{names}; a library did the work, no credit")


def flags_problem(pinned: dict | None, after: dict | None) -> str | None:
    """The precision settings the runner read after pinning them (TF32 off, float32 matmul precision ``highest``),
    before any candidate code, against those it read after the candidate's last call: what changed, else None
    (also without both records)."""
    if not pinned or after is None:
        return None
    changed = [f"{k}: {pinned[k]!r} -> {after.get(k, 'absent')!r}" for k in pinned if after.get(k) != pinned[k]]
    if not changed:
        return None
    return (f"the candidate changed the pinned precision settings ({'; '.join(changed)}): TF32 or reduced-precision "
            "matmuls are not its kernels' work, no credit")


def timing_floor_failure(samples_ms, device_us, settings: HarnessSettings) -> str | None:
    """Trial 0's timed calls' CUDA-event samples against the GPU time of the profiled call's kernels and copies (the
    same call on the same inputs): a median below ``timing_floor_fraction`` of it (less ``timing_floor_abs_us``) means samples
    written or a clock changed inside the candidate's process. None when they agree or there is no figure."""
    if not samples_ms or not isinstance(device_us, (int, float)) or device_us <= 0:
        return None
    med_us = 1000.0 * statistics.median(samples_ms)
    floor_us = settings.timing_floor_fraction * device_us - settings.timing_floor_abs_us
    if med_us < floor_us:
        return (f"the timed calls' median ({med_us:.1f} us) is under {settings.timing_floor_fraction:g} of the GPU "
                f"time its profiled call's kernels took ({device_us:.1f} us): the timing was not the candidate's work")
    return None


def _read_json(path: Path, default):
    from cudaperf.tasks.inputs import read_untrusted_text

    try:
        text = read_untrusted_text(path, 10_000_000)
        return json.loads(text) if text else default
    except (OSError, ValueError):
        return default


class _Outputs:
    """The run's output memory file (:mod:`cudaperf.harness.native.tensor_pack`): every trial's outputs at slots
    sized from the trusted outputs, allocated by the harness, mapped read-only here."""

    def __init__(self, prepared: PreparedPyTorch) -> None:
        from cudaperf.harness.native.tensor_pack import create_output_file, output_slots

        self.specs = [[(tuple(s.shape), s.dtype) for s in t.specs] for t in prepared.trials]
        self.slots, self.nbytes = output_slots(self.specs)
        self.fd = create_output_file(self.nbytes)
        self._map: mmap.mmap | None = None

    def got(self, k: int, descs) -> tuple[list | None, str | None]:
        """Trial ``k``'s outputs as the runner reported them (``descs``, untrusted): tensors read from their slots
        (views, no copy) where the dtype and shape are the expected ones, stand-ins carrying the dtype and shape
        (or the type) otherwise, so that :func:`compare_outputs` names the difference; or why the report is not
        one (the candidate's failure)."""
        import torch

        from cudaperf.harness.native.tensor_pack import slot_tensor

        if not isinstance(descs, list) or len(descs) > 1000:
            return None, "the outputs were not reported"
        if self._map is None:
            self._map = mmap.mmap(self.fd, self.nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        specs = self.specs[k]
        out: list = []
        for i, d in enumerate(descs):
            if not isinstance(d, dict):
                return None, f"output {i} was not reported"
            if "dtype" not in d:
                out.append(_NotATensor(str(d.get("type", "object"))[:40]))
                continue
            shape, dtype = d.get("shape"), d.get("dtype")
            if (not isinstance(shape, list) or len(shape) > 16
                    or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 40 for x in shape)
                    or not isinstance(getattr(torch, str(dtype), None), torch.dtype)):
                return None, f"output {i}: an unreadable dtype or shape ({str(dtype)[:40]}, {str(shape)[:80]})"
            if i < len(specs) and (tuple(shape), dtype) == specs[i]:
                if d.get("stored") is not True:
                    return None, f"output {i} has the expected dtype and shape but was not stored"
                out.append(slot_tensor(self._map, self.slots[k][i], shape, dtype))
            else:
                out.append(torch.empty(shape, dtype=getattr(torch, dtype), device="meta"))
        return out, None

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view still alive: the mapping goes with it
                pass
            self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _NotATensor:
    """Stands for an output the runner reported as a non-tensor (``compare_outputs`` names its type)."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name


def _judge_trials(prepared: PreparedPyTorch, w: Path, outputs: _Outputs) -> tuple[int, Failure | None]:
    reports = _read_json(w / "trials.json", None)
    if not isinstance(reports, list):
        return 0, Failure(FailureKind.CRASH, "the trials left no readable report")
    passed = 0
    for k, trial in enumerate(prepared.trials):
        rep = reports[k] if k < len(reports) and isinstance(reports[k], dict) else {"error": "the trial did not run"}
        where = f"trial {k} (seed {trial.seed}{', ' + str(trial.config) if trial.config else ''})"
        if rep.get("error"):
            kind = FailureKind.CUDA_ERROR if "CUDA" in str(rep["error"]) else FailureKind.CRASH
            return passed, Failure(kind, f"{where}: {rep['error']}")
        if rep.get("mutated_inputs"):
            return passed, Failure(FailureKind.WRONG_OUTPUT, f"{where}: modified inputs {rep['mutated_inputs']} in "
                                   "place (the reference must see them unchanged)")
        got, why = outputs.got(k, rep.get("outputs"))
        if got is None:
            return passed, Failure(FailureKind.CRASH, f"{where}: {why}")
        bad = compare_outputs(prepared.task, trial.expected, got, device=prepared.device)
        del got
        if bad is not None:
            return passed, Failure(FailureKind.WRONG_OUTPUT, f"{where}: {bad}")
        passed += 1
    return passed, None


class _ReferenceFailed(Exception):
    """The trusted reference failed on a re-checked call's inputs (a harness fault)."""


def _timed_seeds(prepared: PreparedPyTorch, secret: int, warmup: int, n_samples: int) -> list[int] | str:
    """The perturbation seed of the last timed call on each trial's inputs: the window's calls rotate over the
    trials after ``warmup`` calls, the ``K``-th call (warm-up calls first) on inputs perturbed by
    ``call_seed(secret, K)``; the runner reported ``n_samples`` timed calls. A count with a trial left out is
    the candidate's (the runner makes at least one call per trial)."""
    from cudaperf.harness.native.tensor_pack import call_seed

    n = len(prepared.trials)
    if n_samples < n:
        return f"the timing window reported {n_samples} calls, fewer than the {n} trials"
    last = {(n_samples - 1 - j) % n: warmup + n_samples - 1 - j for j in range(n)}  # trial -> its last call's K
    return [call_seed(secret, last[k]) for k in range(n)]


def _expected_timed(prepared: PreparedPyTorch, k: int, seed: int):
    """What the last timed call on trial ``k``'s inputs must have returned, one trial at a time (the largest
    problems' outputs are gigabytes)."""
    try:
        return prepared.expected_perturbed(k, seed)
    except Exception as exc:  # noqa: BLE001 - the trusted reference failed: not the candidate's doing
        raise _ReferenceFailed(f"the reference on the timed calls' inputs failed: {type(exc).__name__}: {exc}") \
            from exc


def _recheck_timed(prepared: PreparedPyTorch, w: Path, outputs: _Outputs, seeds: list[int] | str) -> str | None:
    if isinstance(seeds, str):
        return seeds
    reports = _read_json(w / "timed.json", None)
    if not isinstance(reports, list) or len(reports) != len(prepared.trials):
        why = reports.get("error") if isinstance(reports, dict) else None
        return "the timed calls left no readable outputs" + (f" ({str(why)[:300]})" if why else "")
    for k, trial in enumerate(prepared.trials):
        got, why = outputs.got(k, reports[k])
        if got is None:
            return f"outputs of timed calls on trial {k}'s inputs: {why}"
        bad = compare_outputs(prepared.task, _expected_timed(prepared, k, seeds[k]), got, device=prepared.device)
        del got
        if bad is not None:
            return f"outputs of timed calls on trial {k}'s (perturbed) inputs are wrong: {bad}"
    return None


def check_and_build(task, code: str | None, res, settings: HarnessSettings):
    """The steps of a PyTorch candidate before any run: its form's static checks (a fast-path unit or a ``ModelNew``
    module) and the fast path's build, or, with ``settings.prebuild_modelnew``, a ``ModelNew`` module's extensions
    built ahead (:func:`cudaperf.harness.modelnew_build.prebuild_modelnew`). Returns ``(result, finished, modelnew,
    build)``: ``build`` the fast path's :class:`BuildOutcome`, or a module's
    :class:`~cudaperf.harness.modelnew_build.ModelNewBuild` (None when nothing was built ahead); ``finished``: the
    result is final (no code, rejected, not compiled, or a toolchain fault)."""
    from dataclasses import replace

    from cudaperf.harness.records import compile_failure, unscored
    from cudaperf.harness.torch_fast import build_fast_candidate, check_fast_candidate
    from cudaperf.harness.pytorch_checks import check_pytorch_candidate

    if code is None:
        return replace(res, failure=Failure(FailureKind.NO_CODE, "no code found: expected a fast-path CUDA unit "
                                            "(kernel_forward) or a module defining ModelNew")), True, False, None
    modelnew = re.search(r"\bclass\s+ModelNew\b", code) is not None
    chk = check_pytorch_candidate(code) if modelnew else check_fast_candidate(code)
    if not chk.ok:
        return (replace(res, stage=Stage.EXTRACTED, static_check_reasons=tuple(chk.reasons),
                        failure=Failure(FailureKind.STATIC_CHECK, "; ".join(chk.reasons))), True, modelnew, None)
    res = replace(res, stage=Stage.CHECKED)
    if modelnew:
        if not settings.prebuild_modelnew:
            return res, False, True, None
        from cudaperf.harness.compile import default_arch
        from cudaperf.harness.modelnew_build import COMPILER, cuda_arch_list, prebuild_modelnew

        pre = prebuild_modelnew(code, arch=settings.arch, pch=settings.modelnew_pch)
        res = replace(res, durations_s={**res.durations_s, "compile_s": round(pre.seconds, 4)})
        if pre.status == "none":
            return res, False, True, None
        arch = settings.arch or default_arch()
        info = CompileInfo(ok=pre.status == "ok", compiler=COMPILER,
                           flags=(f"TORCH_CUDA_ARCH_LIST={cuda_arch_list(arch)}",), arch=arch, toolchain="",
                           log=pre.message, cached=pre.cached, seconds=pre.seconds)
        res = replace(res, compile=info)
        if pre.status == "build_error":
            return replace(res, failure=Failure(FailureKind.COMPILE_ERROR, pre.message or "load_inline failed")), \
                True, True, pre
        return replace(res, stage=Stage.COMPILED), False, True, pre
    try:
        build = build_fast_candidate(code, arch=settings.arch, flags=settings.nvcc_flags)
    except ToolchainError as exc:  # nvcc or gcc missing or broken: the harness's fault
        return unscored(res, f"ToolchainError: {exc}"), True, False, None
    durations = {"compile_s": build.info.seconds}
    res = replace(res, compile=build.info, durations_s=durations)
    if build.stage != "ok":
        return (replace(res, failure=compile_failure(build, task), static_check_reasons=build.reasons), True, False,
                build)
    return replace(res, stage=Stage.COMPILED), False, False, build


def evaluate_pytorch(task, completion: str, settings: HarnessSettings, *, candidate_id: str = "candidate",
                     prepared: PreparedPyTorch | None = None, gpu_index: int | None = None,
                     baseline: TimingStats | None = None, compiled_baseline: TimingStats | None = None,
                     gpu_lock: AbstractContextManager | None = None, load_lock: Lock | TurnLock | None = None):
    """``evaluate`` for a PyTorch task: extraction, the static checks of the candidate's form (a fast-path unit
    or a ``ModelNew`` module), the fast path's build, then the sandboxed trials and timing against the eager
    baseline. Candidate failures are results; no GPU, no usable Python in the sandbox or a broken reference are
    unscored.

    ``baseline`` / ``compiled_baseline``: the eager and ``torch.compile`` timings of ``prepared``, when a caller
    that runs many candidates of the task timed them once (otherwise the eager one is timed after each correct
    candidate). ``gpu_lock``: see :func:`run_pytorch_candidate` (trusted candidates only); ``load_lock``: likewise
    (a runner started ahead, any candidate)."""
    from dataclasses import replace

    from cudaperf.harness.environment import gpu_count
    from cudaperf.harness.records import base_result, unscored
    from cudaperf.harness.extract import extract_code
    from cudaperf.harness.pytorch_reference import prepare_pytorch, time_reference
    from cudaperf.harness.result import GpuEvidence, TestOutcome
    from cudaperf.tasks.inputs import fresh_seed

    t0 = time.monotonic()
    code = extract_code(completion).code
    res = base_result(task, candidate_id, code, settings, gpu_index)
    res = replace(res, environment=replace(res.environment, timing_method=PYTORCH_TIMING_METHOD,
                                           seeds_policy="fresh seed per evaluation; one trial per seed, "
                                                        "alternating two sizes where the problem allows"))
    res, finished, modelnew, build = check_and_build(task, code, res, settings)
    if finished:
        return res
    durations: dict[str, float] = dict(res.durations_s)
    if gpu_count() == 0:
        return replace(unscored(res, "no NVIDIA GPU is visible (nvidia-smi lists none): the candidate cannot be "
                                     "run here"), durations_s=durations)
    try:
        if prepared is None:
            prepared = prepare_pytorch(task, fresh_seed(), device="cuda")
        phases: dict[str, float] = {}
        out = run_pytorch_candidate(prepared, code, settings, gpu_index, build=None if modelnew else build,
                                    gpu_lock=gpu_lock, phases_s=phases, load_lock=load_lock,
                                    prebuilt=build.ext if modelnew and build is not None else None)
        durations.update({k: round(v, 4) for k, v in phases.items()})
        eager = baseline
        if eager is None and out.correct:
            with HOST.timing():
                eager = time_reference(prepared, min_reps=settings.min_reps, max_reps=settings.max_reps,
                                       budget_ms=settings.budget_ms, cv_target=settings.cv_target)
    except Exception as exc:  # noqa: BLE001 - the trusted reference or torch failed: not the candidate's doing
        return replace(unscored(res, f"{type(exc).__name__}: {exc}"), durations_s=durations)
    tests = tuple(TestOutcome(k, dict(t.config), k < out.trials_passed,
                              "" if k < out.trials_passed else (out.failure.message if out.failure else ""))
                  for k, t in enumerate(prepared.trials) if k <= out.trials_passed)
    res = replace(res, stage=out.stage, correct=out.correct, failure=out.failure, tests=tests,
                  pass_fraction=out.trials_passed / max(1, out.n_trials), candidate_timing=out.timing,
                  seeds=tuple(t.seed for t in prepared.trials),
                  gpu_evidence=GpuEvidence(source="torch.profiler: one call after timing (trials not traced)",
                                           kernels_in_tests=0,
                                           kernels_in_timed_call=len(out.kernels) if out.kernels is not None
                                           else None, window_cpu_cores=out.window_cpu_cores))
    if out.sandbox_level and out.sandbox_level.endswith("; start=zygote"):  # the record says the runner was forked
        res = replace(res, environment=replace(res.environment,
                                               sandbox_level=res.environment.sandbox_level + "; start=zygote"))
    if out.failure is not None and out.failure.attributed_to == "harness":
        res = replace(res, status="unscored")
    if out.timing is not None and eager is not None:
        speedup = eager.median_ms / max(out.timing.median_ms, 1e-6)
        res = replace(res, baseline_timing=eager, speedup=speedup, speedup_flag=speedup_flag(speedup, settings),
                      compiled_baseline_timing=compiled_baseline)
    durations.update(run_s=out.run_s, total_s=time.monotonic() - t0)
    return replace(res, durations_s=durations)


PYTORCH_TIMING_METHOD = ("CUDA events around the call with a device-wide synchronize before the end mark; an "
                         "untimed L2 flush (2x L2), fresh input copies and (fast path) NaN-poisoned outputs made "
                         "before each call; warm-up; adaptive repetitions; speedup over the eager reference timed "
                         "the same way; TF32 off")
