"""Harness settings. Every default is documented here, next to where it is defined."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from cudaperf.harness.compile import DEFAULT_NVCC_FLAGS, REFERENCE_FLAGS


SPEEDUP_ESTIMATORS = ("median", "best_window")


@dataclass(frozen=True)
class HarnessSettings:
    n_tests: int = 6
    """Hidden tests per evaluation (>= 5), cycling over the task's test size configurations (>= 2)."""
    timing_sets: int = 3
    """Distinct input sets at the timing size; timed calls rotate over them and their outputs are re-checked."""
    min_reps: int = 5
    """Timed calls at least (the paper's 5 runs)."""
    max_reps: int = 100
    """Timed calls at most."""
    budget_ms: float = 2000.0
    """Stop adding timed calls past this much timing (once ``min_reps`` are done)."""
    cv_target: float = 0.02
    """Stop adding timed calls once the coefficient of variation is below this."""
    warmup: int = 2
    """Untimed calls before timing (context, module load, caches)."""
    warmup_ms: float = 20.0
    """...and untimed calls for at least this long, so that the GPU's clocks have left idle before timing."""
    timing_rounds: int = 1
    """Timing windows per candidate in a batch (``run_batch``): above 1, a task's candidates stay alive together
    and their windows interleave with the baseline's, round by round, spreading each candidate's samples over
    the task's whole span (more reproducible on a host whose speed fluctuates). The repetitions and budget
    above are shared among the windows. Only for candidates that do not attack each other (the dataset's):
    waiting processes share the GPU."""
    start_together: bool = False
    """With ``timing_rounds`` above 1 (candidates that are alive together anyway): start all of a task's candidate
    processes at once, their set-ups (sandbox, CUDA context) and hidden tests side by side, instead of one after
    another. No window is open meanwhile. In session 28's dataset run on the H200 the one-by-one starts were 22 %
    of the C tasks' GPU time (132 of 609 s). Off until measured on a GPU against one by one
    (``benchmarks/c_throughput.py --arms dataset,dataset_together``)."""
    pipeline_candidates: bool = False
    """In a batch, start a task's next candidate (its hidden tests) while the previous one's process ends and is
    judged; timing still waits until the previous process is gone. Two sandboxed processes of the same user then
    coexist briefly, so this too is only for candidates that do not attack each other (the dataset's)."""
    overlap_judging: bool = False
    """In a batch, start a task's next C-function candidate as soon as the previous one's process is gone, while
    the harness still judges the previous one's outputs (comparison, evidence, timing records): no two candidate
    processes ever exist at once, so this is safe for a policy's samples, unlike ``pipeline_candidates``. The
    next candidate's timing still waits until the previous one is judged. Off until measured on a GPU."""
    overlap_runs: bool = True
    """In a batch, start a task's next C-function candidate (its sandbox, CUDA context and hidden tests) as soon as
    the harness needs nothing more from the previous one, beside that one's exit and judging; its timing window
    still waits until the previous process is gone. Two candidates' processes are then alive at once, apart
    (namespaces and a user id each): a run whose tests overlapped another and crashed, hung or failed a CUDA call is
    run again alone, so one candidate cannot fail another. The re-checks of the timed calls' outputs (a reference
    run each) go in batches of ``recheck_batch``, side by side between two windows. Safe for a policy's samples
    (:func:`cudaperf.harness.run_c_function._run_overlapped`). On by default since session 25: on the H200 its
    GPU tests passed, 653 load-run jobs under it (a tenth hostile) had no harness fault and every expected
    verdict, and it judged 1.34x the candidates a minute of ``serial`` (``False``) in the same call, timing them
    alike (docs/BENCHMARKS.md)."""
    recheck_batch: int = 8
    """With ``overlap_runs``: re-checks of timed outputs held back and then run side by side (each holds its
    candidate's timing outputs in memory while it waits). On the H200 in session 24, holding every re-check to the
    end of a task of about 60 candidates made each wait up to 95 s and held them all."""
    prebuild_modelnew: bool = False
    """Build a ``ModelNew`` module's ``load_inline`` extensions on the CPU pool before its GPU run, in a sandbox
    without the GPU's device nodes, and hand the GPU run the built tree (:mod:`cudaperf.harness.modelnew_build`):
    the build (about a minute) no longer holds the GPU worker. Where it cannot (no private root, a torch without
    CUDA, no ninja) or the module needs the GPU as it loads, the GPU run builds as before. A build error found
    ahead is the candidate's ``compile_error``. Off until measured on a GPU."""
    modelnew_pch: bool = True
    """Give ``ModelNew`` modules' ``load_inline`` builds (ahead or in the GPU run) a precompiled
    ``torch/extension.h`` (:mod:`cudaperf.harness.torch_pch`; built once per toolchain, about a minute and 1.6 GB
    of cache): g++ uses it where the unit's flags match and reads the header as before where they do not, so the
    extension is the same; on this project's CPU machine a unit's compile went from 43.9 to 18.4 s."""
    pytorch_zygote: bool = field(default_factory=lambda: os.environ.get("CUDAPERF_PYTORCH_ZYGOTE") == "1")
    """Fork each PyTorch candidate's runner from a zygote that has imported torch once (no CUDA context), instead
    of starting a fresh interpreter that imports it (:mod:`cudaperf.harness.zygote`; with ``torch._dynamo``, which
    the profiler's first session imports: ``run_pytorch.RUNNER_PRELOAD``): still a process of its own
    per candidate, under every protection of the sandbox, set up by the same launcher code (tests/test_zygote.py
    compares the two processes field by field). Where the harness is not root or has no private root, runners
    start as before. On this project's CPU machine a child that imports torch and opens the profiler's first
    session (as the runner's probe does) started in 0.36 s forked against 2.86 s exec'd (docs/BENCHMARKS.md).
    Off until measured on a GPU (``benchmarks/runner_startup.py``); the environment's
    ``CUDAPERF_PYTORCH_ZYGOTE=1`` turns it on for every run that takes the default (the GPU suite under it)."""
    prestart_runners: bool = False
    """For PyTorch candidates that are not trusted (a policy's samples): start the next candidate's runner while
    the current one runs, up to the end of its trusted set-up (torch imported, its CUDA context, the profiler's
    probe: about 11 s on the H200, paused whenever anything is timed); its code loads only once the current
    candidate's process is gone (:func:`cudaperf.harness.run_pytorch.run_pytorch_candidate`'s ``load_lock``), so
    no two candidates' code is alive at once. A set-up that failed beside another candidate is run again alone.
    Off until measured on a GPU."""
    prestart_ahead: int = 1
    """With ``prestart_runners``: runners per GPU started ahead of the one running (1: the next one only). Their
    set-ups (about 11 s each on the H200, paused while anything is timed) overlap each other and the current run,
    so the GPU waits for none once this many runs last as long as a set-up; their code still loads one at a time,
    in the order they got ready. Each holds torch in host memory and a CUDA context on the GPU."""
    pytorch_runners: int = 4
    """With ``pipeline_candidates``: PyTorch runner processes alive at once per GPU, taking turns on it
    (:mod:`cudaperf.harness.batch_pytorch`). A runner's start-up takes seconds and its GPU turn a fraction of one, so
    more runners keep the GPU busier, at the cost of host memory and start-up CPU."""
    reference_warmup: int = 1
    exclusive_timing: bool = False
    """In a batch over several GPUs: one timed window at a time across all GPU workers, and C candidates' hidden
    tests and exits kept out of every window (:mod:`cudaperf.harness.quiet`). Slower; for a host whose timings
    drift with the other workers' activity."""
    speedup_estimator: str = "median"
    """What a C function's speedup rests on: ``"median"``, the median of all timed calls of the baseline over that
    of the candidate; ``"best_window"``, the fastest window's median of each (``TimingStats.best_window_ms``;
    the same as the median with one window, so use it with ``timing_rounds`` of 3 or more). On the H200
    machines the host is slow for whole windows at a time, seconds long, by up to 1.5x: with 3 windows the
    fastest drifts less between runs than the median does (0.088 against 0.134; docs/BENCHMARKS.md)."""
    host_calibration: bool = True
    """Before each sequential C baseline window, time two fixed workloads on one core (about 0.15 s, as background
    host work: never beside another timed call) and store them with the host's busy and stolen CPU shares in
    ``TimingStats.host``: what a drifting baseline is read against (:mod:`cudaperf.harness.hostload`)."""
    burst_preparation: bool = False
    """In a batch over several GPUs: tasks are prepared (hidden inputs, reference outputs) in bursts, each an
    urgent period (:mod:`cudaperf.harness.quiet`) in which no GPU worker opens a new timing window, and the
    baseline's host calibration is skipped when another GPU's window is open instead of waiting for it. Without
    it, timing's priority starves preparation and calibration, and the GPU workers wait for one another between
    tasks. What is timed, and how, does not change."""
    test_timeout_s: float = 60.0
    """Wall-clock limit for the candidate's test run (all hidden tests)."""
    timing_timeout_s: float = 180.0
    pytorch_exit_grace_s: float = 30.0
    """The same for a PyTorch runner, once the harness has its last record (an ``atexit`` handler or a
    ``__del__`` of the candidate's module runs at the interpreter's exit; the exit itself took 1.4 s for
    KernelBench's 6.4 GB ``19_ReLU`` on the H200): past it, killed, ``timeout``, no credit."""
    pytorch_quick_exit: bool = False
    """A PyTorch runner ends with ``os._exit`` once the harness has read its last record, instead of the
    interpreter's exit: no finalization of torch's modules, and none of the candidate's code at exit (``atexit``
    handlers, ``__del__``, static destructors of its library) ever runs, so none can hold the GPU worker. The
    runner's exit took a median 0.91 to 1.07 s a candidate on the H200 (``exit_s``, per store of sessions 5,
    6 and 28), and the next policy sample's code waits for it; on this project's CPU machine an interpreter that
    imported torch and torch._dynamo took 0.65 s to exit. With it the adversarial entries that spin at exit
    (``modelnew_atexit_spin.py``, ``fast_static_destructor_spin.cu``) should be timed at their honest speed
    instead of ``timeout``, their spin never started (the GPU test is written, not yet run). Off until measured on a GPU."""
    exit_grace_s: float = 10.0
    """A C function's process, once the harness has read its last record and told it to stop, has this long to
    end (its CUDA context's teardown takes a fraction of a second); past it, it is killed and gets no credit
    (``timeout``): code of the candidate's running at exit (a function-local static's destructor) would otherwise
    hold the GPU worker until the process's six-hour backstop."""
    reference_timeout_s: float = 900.0
    plausible_speedup: float = 10_000.0
    """Speedups above this are kept but flagged for audit (a timing hack or a broken baseline)."""
    require_gpu_evidence: bool = True
    """Without a working profiler probe, results are unscored rather than trusted blindly."""
    time_candidates: bool = True
    timer_check_rel: float = 0.25
    timer_check_abs_ms: float = 10.0
    """The external clock check of every C candidate timing window: the harness times the window itself (command
    sent to ``timing_done`` received) and gives no credit when the driver's in-process span is shorter than that
    by more than ``timer_check_rel`` of it plus ``timer_check_abs_ms`` (a clock forged inside the candidate's
    process), or when the timed calls add up to more than the span."""
    max_foreign_compute_share: float = 0.2
    """A PyTorch candidate's profiled call (the runner's, after timing): kernels that are not the candidate's own
    (cuBLAS, cuDNN, ATen compute; copies and fills aside, ``run_pytorch.MOVEMENT_KERNELS``) may carry at most this
    share of its GPU compute time, else ``no_gpu_work``: the run-time boundary behind the static checks, which
    session 20's hostile review got 49 library-computing ``ModelNew`` candidates past (``at::`` through a macro, a
    namespace alias or argument-dependent lookup, ``torch.cuda.torch.matmul``, a matmul made of broadcast ``*`` and
    ``sum``...), each launching a small kernel of its own. 1 switches it off."""
    timing_floor_fraction: float = 0.5
    timing_floor_abs_us: float = 5.0
    """The PyTorch runner's check of its CUDA-event samples (written inside the candidate's process, where Python or
    a library's code can reach the clock): the median timed call on trial 0's inputs must take at least
    ``timing_floor_fraction`` of the GPU time the profiled call on the same inputs spent in kernels and copies,
    less ``timing_floor_abs_us``; otherwise ``timer_mismatch``."""
    outputs_from_device_fraction: float = 0.5
    """Evidence that the GPU produced a C function's outputs: in each timing window one timed call, drawn at random
    among the first ``min_reps`` and traced (CUPTI) instead of timed, must run a kernel and copy at least this
    fraction of its output bytes from the device (``run_c_function.output_bytes``: the outputs' elements that are
    not zero, since a zero tail is a host memset; session 20 on the H200: the honest ``chunked_transfers``
    compaction copied back only its selected elements and was refused when all the array's bytes counted). Half,
    not all: an honest candidate may copy back only the part of an in/out array it changed (a stencil's
    interior). 0 switches the byte rule off (outputs written through
    mapped or managed memory then pass; so does host work behind a token kernel)."""
    inputs_to_device_fraction: float = 0.5
    """The same traced timed call must also copy at least this fraction of its input arrays' bytes (``in`` and
    ``inout``, their non-zero elements: ``run_c_function.input_bytes``) to the device: outputs computed on the
    host need no inputs on the device, whatever kernel runs beside them (an idle grid, a spin on the clock:
    ``adversarial/saxpy_token_grid_copy.cu``, ``saxpy_spin_kernel_host_loop.cu``, credited at the host loop's
    speed before session 20). On the H200 (session 20's clean batch) the 66 honest, correct dataset variants with
    input arrays copied 0.95 to 1.0 of them. What it would refuse: inputs read through mapped or managed memory,
    and an early-exit search that stops copying once found. 0 switches it off."""
    min_kernel_share: float = 0.0001
    """Evidence that the GPU did a C function's work, not only that its outputs came from the device: in the call
    traced after timing (at the timing size, CUPTI in the driver), the kernels' GPU time must be at least this
    share of the call's wall time (``GpuEvidence.kernel_share``); below it the outputs were computed on the host
    (``no_gpu_work``). Host work behind a token kernel and useless copies of the inputs' and the outputs' size
    meets the input and byte rules above and is stopped here. Measured on an NVIDIA H200: session 19, 78 honest,
    correct dataset variants over many tasks had kernel shares from 0.0010 (p01 0.0011, p05 0.0012, median
    0.011) to 0.973, the honest saxpy fast candidate 0.0025; session 20, 71 more from 0.0004 (a transpose staged
    through pinned buffers; p05 0.002, median 0.0087); the token kernels (``trust/token_kernel_full_copy.cu``,
    ``adversarial/dot_token_kernel_host_sum.cu``, ``histogram_token_kernel_full_copy.cu``) 0.00001 to 0.00004.
    The floor was 0.0002 (a fifth of session 19's honest minimum) and is 0.0001 since session 20: a quarter of the
    honest minimum seen, two and a half times the highest token kernel. It does not stop a kernel that takes GPU
    time without doing the work while the host computes (a spin on the clock, a grid of idle threads): the input
    rule stops those that move no inputs, and ``adversarial/saxpy_token_grid_copy_both_ways.cu`` (useless copies
    both ways) is an open gap, credited at most at the host loop's speed. Only applied when the traced call's
    profile is there; 0 switches it off."""
    max_window_cpu_cores: float = 1.5
    """Evidence that host threads did not do a C function's work: the CPU time the run used during each timing
    window (all its threads, read by the harness from outside the run: the run's cgroup v2 ``cpu.stat``, else
    ``/proc``), over the window's wall time on the harness's clock, is how many cores worked while the calls ran.
    An honest candidate keeps about one busy: the calling thread, which copies and spins in its synchronizations.
    Host threads computing the outputs in parallel (``std::thread`` or ``pthread_create`` however spelled, a
    ``timer_create`` or ``cudaLaunchHostFunc`` callback) beside a kernel that only moves the results show as more;
    above this many cores the candidate gets ``no_gpu_work`` (``GpuEvidence.window_cpu_cores`` keeps the figure).
    It does not see host work on the calling thread alone (bounded by one core's speed: see ``min_kernel_share``).
    0 switches it off."""
    window_cpu_slack_s: float = 0.05
    """CPU time allowed over ``max_window_cpu_cores`` x the window's wall time: the resolution of ``/proc``'s clock
    ticks (10 ms) and the harness's own reads of the count, so that a short window is not ruled on by a tick."""
    timing_recheck: bool = True
    """Timed calls see perturbed inputs (:mod:`cudaperf.harness.driver`); the last timed call on each timing input
    set is re-checked against the reference run on the same perturbed inputs (one reference call per set and
    candidate, as background host work). False: the outputs of timed calls are re-checked only where the task's
    inputs cannot be perturbed, against the unperturbed expected outputs."""
    c_program_context_check: bool = True
    """Whole programs (``c_program``): the harness reads the driver's list of processes with a CUDA context (NVML)
    while each test run goes, and a program whose probe record claims kernels but that was never in that list gets
    no credit (``no_gpu_work``): the probe's record is written inside the program's process, where it can be
    forged (:mod:`cudaperf.harness.nvml`). The run's GPU is ``gpu_index``, or the only GPU visible when none is
    given. Where NVML cannot see the sandbox's processes (no GPU or driver, a container whose PID namespace hides
    the driver's process ids, several GPUs and none given) the check is unavailable, nothing is ruled on, and the
    result says why (``GpuEvidence.driver_context``): on such a machine a forged record is still credited. On by
    default since session 19, after its GPU test passed on an NVIDIA H200."""
    arch: str | None = None
    """``sm_XY``; None: the visible GPU's, or sm_90 without one."""
    nvcc_flags: tuple[str, ...] = DEFAULT_NVCC_FLAGS
    reference_flags: tuple[str, ...] = REFERENCE_FLAGS
    """gcc flags of the sequential C baseline: -O3, one thread (no OpenMP, no auto-parallelisation)."""

    def __post_init__(self) -> None:
        if self.n_tests < 5:
            raise ValueError("n_tests must be >= 5 (hidden tests per evaluation)")
        if self.min_reps < 1 or self.max_reps < self.min_reps:
            raise ValueError("need 1 <= min_reps <= max_reps")
        if self.recheck_batch < 1:
            raise ValueError("recheck_batch must be >= 1")
        if self.prestart_ahead < 1:
            raise ValueError("prestart_ahead must be >= 1")
        if self.timing_rounds < 1:
            raise ValueError("timing_rounds must be >= 1")
        if self.speedup_estimator not in SPEEDUP_ESTIMATORS:
            raise ValueError(f"speedup_estimator must be one of {SPEEDUP_ESTIMATORS}, not "
                             f"{self.speedup_estimator!r}")
        if self.timing_sets < 1:
            raise ValueError("timing_sets must be >= 1")
        if not 0 <= self.min_kernel_share < 1:
            raise ValueError("min_kernel_share must be in [0, 1)")
        if self.max_window_cpu_cores < 0 or self.window_cpu_slack_s < 0:
            raise ValueError("max_window_cpu_cores and window_cpu_slack_s must be >= 0")

    @property
    def seeds_policy(self) -> str:
        return (f"fresh 63-bit seed from os.urandom per task preparation; {self.n_tests} hidden tests and "
                f"{self.timing_sets} timing input sets drawn from it")

    @property
    def timing_method(self) -> str:
        return (f"host wall clock (CLOCK_MONOTONIC) around the call + cudaDeviceSynchronize, host inputs in, "
                f"host outputs out; inputs copied afresh per call; tests then timing in one process; warm-up "
                f"{self.warmup} calls and >= {self.warmup_ms:.0f} ms; "
                f"{self.min_reps}..{self.max_reps} reps until cv < {self.cv_target} or {self.budget_ms:.0f} ms"
                + (f", in {self.timing_rounds} windows interleaved with the task's other candidates and the "
                   f"baseline" if self.timing_rounds > 1 else "")
                + ("; one timed window at a time across GPUs, tests and exits kept out of it"
                   if self.exclusive_timing else "")
                + ("; speedup from each side's fastest window median" if self.speedup_estimator == "best_window"
                   else ""))

    def speedup_time_ms(self, stats) -> float:
        """The time of one side (baseline or candidate) that a speedup rests on (``speedup_estimator``)."""
        return stats.best_window_ms if self.speedup_estimator == "best_window" else stats.median_ms


def speedup_flag(speedup: float, settings: HarnessSettings) -> str | None:
    """The audit mark of a speedup beyond ``settings.plausible_speedup`` (kept, never clamped away), or None."""
    if speedup > settings.plausible_speedup:
        return (f"speedup {speedup:.0f}x exceeds the plausibility bound {settings.plausible_speedup:.0f}x: audit "
                "before trusting")
    return None
