"""Evaluate a ``c_program`` candidate: a whole CUDA program that reads stdin and writes stdout.

Test inputs come from the task's trusted generator (``gen SEED CONFIG``), expected outputs from the trusted C
reference run in its own process; the candidate's sandboxed process sees its stdin only. GPU work is witnessed
by a CUPTI injection library that the CUDA driver loads into the candidate's process at CUDA initialisation
(``CUDA_INJECTION64_PATH``): a program that never initialises CUDA leaves no trace file and gets no credit.
Timing is whole-process wall time at the timing input, candidate and reference alike (so the candidate pays
for its CUDA context, as a user swapping programs would).
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from cudaperf.harness.compile import BuildOutcome, build_c_program, build_cuda_program, injection_library
from cudaperf.harness.environment import device_for_child, gpu_count
from cudaperf.harness.nvml import ContextWatch, context_check_available
from cudaperf.harness.result import (
    EvaluationResult,
    Failure,
    FailureKind,
    GpuEvidence,
    Mismatch,
    Stage,
    TestOutcome,
    TimingStats,
)
from cudaperf.harness.run_c_function import HarnessError
from cudaperf.harness.sandbox import SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env, share_file
from cudaperf.harness.settings import HarnessSettings, speedup_flag
from cudaperf.tasks.inputs import fresh_seed
from cudaperf.tasks.schema import CProgramTask, Tolerance

_NUM = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|nan)$", re.I)


def build_program_candidate(code: str, settings: HarnessSettings) -> BuildOutcome:
    return build_cuda_program(code, arch=settings.arch, flags=settings.nvcc_flags, tag="c_program-candidate")


def compare_text(expected: str, got: str, mode: str, tol: Tolerance) -> Mismatch | None:
    """Exact: lines equal after trimming trailing blanks. Numeric: whitespace tokens, numbers within tolerance."""
    if mode == "exact":
        e = [l.rstrip() for l in expected.rstrip().splitlines()]
        g = [l.rstrip() for l in got.rstrip().splitlines()]
        for i, (a, b) in enumerate(zip(e, g)):
            if a != b:
                return Mismatch("stdout line", i, a[:200], b[:200], float("nan"), float("nan"), 1, len(e))
        if len(e) != len(g):
            return Mismatch("stdout", -1, f"{len(e)} lines", f"{len(g)} lines", float("inf"), float("inf"), 1, len(e))
        return None
    et, gt = expected.split(), got.split()
    if len(et) != len(gt):
        return Mismatch("stdout", -1, f"{len(et)} tokens", f"{len(gt)} tokens", float("inf"), float("inf"),
                        abs(len(et) - len(gt)), len(et))
    max_abs = max_rel = 0.0
    first = None
    n_bad = 0
    for i, (a, b) in enumerate(zip(et, gt)):
        if _NUM.match(a) and _NUM.match(b):
            x, y = float(a), float(b)
            if np.isnan(x) and np.isnan(y):
                continue
            d = abs(x - y)
            ok = np.isfinite(y) and d <= tol.atol + tol.rtol * abs(x) or (x == y)
            if np.isfinite(x) and np.isfinite(y):
                max_abs = max(max_abs, d)
                max_rel = max(max_rel, d / max(abs(x), 1e-300))
        else:
            ok = a == b
        if not ok:
            n_bad += 1
            if first is None:
                first = (i, a, b)
    if first is None:
        return None
    return Mismatch("stdout token", first[0], first[1][:100], first[2][:100], max_abs, max_rel, n_bad, len(et))


@dataclass(frozen=True)
class PreparedCProgram:
    task: CProgramTask
    seed: int
    inputs: tuple[bytes, ...]
    configs: tuple[int, ...]
    expected: tuple[str, ...]
    timing_input: bytes
    expected_timing: str
    baseline_timing: TimingStats | None


def _run_trusted(exe: Path, args: list[str], stdin: bytes, timeout_s: float, what: str) -> tuple[str, float]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run([str(exe), *args], input=stdin, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"{what} did not finish within {timeout_s:.0f} s") from None
    dt = (time.perf_counter() - t0) * 1e3
    if p.returncode != 0:
        raise HarnessError(f"{what} failed (exit {p.returncode}): {p.stderr[-300:].decode(errors='replace')}")
    return p.stdout.decode(errors="replace"), dt


def prepare_c_program(task: CProgramTask, settings: HarnessSettings, seed: int, *,
                      time_baseline: bool = True) -> PreparedCProgram:
    gen = build_c_program(task.input_generator_c, tag="c_program-gen")
    ref = build_c_program(task.reference_c, tag="c_program-ref", flags=settings.reference_flags)
    rng = np.random.default_rng(seed)
    timing_cfg = task.timing_config % task.n_configs
    test_cfgs = [c for c in range(task.n_configs) if c != timing_cfg] if task.n_configs >= 3 else list(
        range(task.n_configs))
    inputs, configs, expected = [], [], []
    for i in range(settings.n_tests):
        cfg = test_cfgs[i % len(test_cfgs)]
        text, _ = _run_trusted(gen, [str(int(rng.integers(2**62))), str(cfg)], b"", 60, "the input generator")
        inputs.append(text.encode())
        configs.append(cfg)
        out, _ = _run_trusted(ref, [], text.encode(), settings.reference_timeout_s, "the C reference")
        expected.append(out)
    tin, _ = _run_trusted(gen, [str(int(rng.integers(2**62))), str(timing_cfg)], b"", 60, "the input generator")
    texp, _ = _run_trusted(ref, [], tin.encode(), settings.reference_timeout_s, "the C reference")
    baseline = None
    if time_baseline:
        samples: list[float] = []
        t_start = time.monotonic()
        while len(samples) < settings.max_reps:
            _, dt = _run_trusted(ref, [], tin.encode(), settings.reference_timeout_s, "the C reference")
            samples.append(dt)
            if len(samples) >= settings.min_reps and (
                    TimingStats.from_samples_ms(samples).cv < settings.cv_target
                    or (time.monotonic() - t_start) * 1e3 > settings.budget_ms):
                break
        baseline = TimingStats.from_samples_ms(samples)
    return PreparedCProgram(task, seed, tuple(inputs), tuple(configs), tuple(expected), tin.encode(), texp, baseline)


def _context_check(settings: HarnessSettings, gpu_index: int | None) -> tuple[int | None, str]:
    """(the NVML index of the run's GPU, "") when the driver's context list is to be checked, else (None, why not).
    Without ``gpu_index`` the program sees every GPU this process sees, so its GPU is known only when there is one
    (the adversarial suite's and a direct ``evaluate()``'s case on a one-GPU machine)."""
    if not settings.c_program_context_check:
        return None, "off"
    if gpu_index is None:
        visible = gpu_count()
        if visible != 1:
            return None, ("unavailable: no GPU is visible (nvidia-smi lists none)" if visible == 0 else
                          f"unavailable: no GPU given and {visible} visible, so the program's GPU is not known")
        gpu_index = 0
    index = int(device_for_child(gpu_index))
    ok, why = context_check_available(index, settings.arch)
    return (index, "") if ok else (None, f"unavailable: {why}")


def _parse_probe(path: Path) -> dict:
    from cudaperf.tasks.inputs import read_untrusted_text

    if not path.exists():
        return {"absent": True}
    out: dict = {}
    try:
        text = read_untrusted_text(path)
    except OSError:  # a link or a FIFO in its place: no record
        return {"absent": True}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "init":
            out["init"] = True
        elif parts and parts[0] == "probe_error":
            out["probe_error"] = " ".join(parts[1:])
        elif parts and parts[0] == "profile":
            out.update({k: int(v) for k, v in zip(parts[1::2], parts[2::2]) if v.isdigit()})
    return out


def run_program_candidate(task: CProgramTask, build: BuildOutcome, res: EvaluationResult,
                          settings: HarnessSettings, gpu_index: int | None,
                          prepared: PreparedCProgram | None = None) -> EvaluationResult:
    assert build.exe is not None
    if prepared is None:
        prepared = prepare_c_program(task, settings, fresh_seed(), time_baseline=settings.time_candidates)
    lib = injection_library()
    with Workdir(prefix="cudaperf-run-") as w:
        exe = copy_in(build.exe, w, "program")
        extra = {"CUDA_VISIBLE_DEVICES": device_for_child(gpu_index)} if gpu_index is not None else {}
        if lib is not None:
            extra["CUDA_INJECTION64_PATH"] = str(copy_in(lib, w, "libinject.so"))
        env = scrubbed_env(w, extra)

        context = _context_check(settings, gpu_index)  # (NVML index, "") or (None, why it is off/unavailable)

        def run_once(stdin: bytes, tag: str, timeout: float, watch: ContextWatch | None = None):
            (w / f"{tag}.in").write_bytes(stdin)
            share_file(w / f"{tag}.in")
            probe = w / f"{tag}.probe"
            run = run_sandboxed([str(exe)], w, env={**env, "CUDAPERF_PROBE_OUT": str(probe)},
                                stdin_path=w / f"{tag}.in",
                                limits=SandboxLimits(wall_s=timeout, capture_bytes=16 << 20), observe=watch)
            return run, _parse_probe(probe)

        tests, kernels_total, probes, watches = [], 0, [], []
        failure = None
        for i, (inp, cfg, exp) in enumerate(zip(prepared.inputs, prepared.configs, prepared.expected)):
            watch = ContextWatch(context[0]) if context[0] is not None else None
            run, probe = run_once(inp, f"t{i}", settings.test_timeout_s, watch)
            watches.append(watch)
            probes.append(probe)
            kernels_total += probe.get("kernels", 0)
            if run.timed_out or run.returncode != 0:
                msg = f"test {i}: the program {run.describe()}: {run.stderr.strip()[-300:]}"
                tests.append(TestOutcome(i, {"config": cfg}, False, msg, None, probe.get("kernels")))
                failure = failure or Failure(FailureKind.TIMEOUT if run.timed_out else FailureKind.CRASH, msg)
                continue
            m = compare_text(exp, run.stdout, task.compare, task.tolerance)
            msg = "" if m is None else f"{m.output} {m.index}: expected {m.expected!r}, got {m.got!r}"
            tests.append(TestOutcome(i, {"config": cfg}, m is None, msg, m, probe.get("kernels")))
        passed = sum(t.passed for t in tests)
        p = passed / len(tests)
        res = replace(res, stage=Stage.RAN, tests=tuple(tests), pass_fraction=p, seeds=(prepared.seed,))
        if failure is None and p < 1:
            first = next(t for t in tests if not t.passed)
            failure = Failure(FailureKind.WRONG_OUTPUT, f"{len(tests) - passed} of {len(tests)} tests failed; "
                                                        f"test {first.index}: {first.message}")
        if failure is not None:
            return replace(res, failure=failure)
        errors = [pr["probe_error"] for pr in probes if "probe_error" in pr]
        if lib is None or errors:
            why = errors[0] if errors else "CUPTI not found"
            return replace(res, status="unscored", failure=Failure(
                FailureKind.HARNESS, f"cannot verify GPU work: profiler probe unavailable ({why})", "harness"))
        ctx_note = (f"seen in {sum(wt.seen for wt in watches if wt)} of {len(watches)} test runs"
                    if context[0] is not None else context[1])
        evidence = GpuEvidence(source="cupti-injection", kernels_in_tests=kernels_total, kernels_in_timed_call=None,
                               driver_context=ctx_note)
        if kernels_total == 0:
            how = ("never initialised CUDA" if all(pr.get("absent") for pr in probes)
                   else "launched no kernel (or ended without a normal exit)")
            return replace(res, gpu_evidence=evidence, failure=Failure(
                FailureKind.NO_GPU_WORK, f"outputs were right but the program {how}: no GPU work, no credit"))
        if context[0] is not None:
            unseen = [i for i, (wt, pr) in enumerate(zip(watches, probes)) if pr.get("kernels") and not wt.seen]
            if unseen:
                return replace(res, gpu_evidence=evidence, failure=Failure(
                    FailureKind.NO_GPU_WORK, f"the probe's record of test {unseen[0]} claims "
                    f"{probes[unseen[0]]['kernels']} kernel(s), but the driver never listed a CUDA context of the "
                    f"program (NVML): the record was not the probe's; no credit"))
        res = replace(res, stage=Stage.CORRECT, correct=True, gpu_evidence=evidence)
        if not settings.time_candidates or prepared.baseline_timing is None:
            return res
        samples, t_start, last_probe = [], time.monotonic(), {}
        while len(samples) < settings.max_reps:
            run, last_probe = run_once(prepared.timing_input, "timing", settings.timing_timeout_s)
            if not run.ok:
                return replace(res, correct=False, failure=Failure(
                    FailureKind.TIMEOUT if run.timed_out else FailureKind.CRASH,
                    f"at the timing input: the program {run.describe()}"))
            m = compare_text(prepared.expected_timing, run.stdout, task.compare, task.tolerance)
            if m is not None:
                return replace(res, correct=False, failure=Failure(
                    FailureKind.TIMING_RECHECK, f"wrong output at the timing input: {m.output} {m.index}: "
                                                f"expected {m.expected!r}, got {m.got!r}"))
            samples.append(run.wall_s * 1e3)
            if len(samples) >= settings.min_reps and (
                    TimingStats.from_samples_ms(samples).cv < settings.cv_target
                    or (time.monotonic() - t_start) * 1e3 > settings.budget_ms):
                break
    timing = TimingStats.from_samples_ms(samples)
    evidence = replace(evidence, kernels_in_timed_call=last_probe.get("kernels"),
                       kernel_ms=last_probe.get("kernel_ns", 0) / 1e6, memcpy_ms=last_probe.get("memcpy_ns", 0) / 1e6,
                       memset_ms=last_probe.get("memset_ns", 0) / 1e6, htod_bytes=last_probe.get("htod_bytes"),
                       dtoh_bytes=last_probe.get("dtoh_bytes"))
    speedup = prepared.baseline_timing.median_ms / max(timing.median_ms, 1e-6)
    return replace(res, stage=Stage.TIMED, candidate_timing=timing, baseline_timing=prepared.baseline_timing,
                   speedup=speedup, speedup_flag=speedup_flag(speedup, settings), gpu_evidence=evidence)
