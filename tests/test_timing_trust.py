"""The timing's defences against a candidate that forges its clock or caches outputs, on the CPU: the driver's
CPU build (the trusted reference) speaks the real testtime protocol in the real sandbox, honest and with a forged
clock linked in, and the harness's checks judge what it recorded."""

from __future__ import annotations

import subprocess
from pathlib import Path
import textwrap

import pytest

from cudaperf.harness.compile import _driver_object
from cudaperf.harness.driver import call_seed, driver_source, perturbs_inputs
from cudaperf.harness.result import FailureKind
from cudaperf.harness.run_c_function import (TimingWindow, _device_output_fraction, _parse_stats, _run_reference,
                                             _Stats, check_timer, compare_case, kept_call_seeds, prepare_c_function)
from cudaperf.harness.sandbox import CTL_FD, SandboxLimits, Workdir, run_sandboxed, share_file
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks import find_task, load_builtin_tasks
from cudaperf.tasks.inputs import read_outputs

SETTINGS = HarnessSettings(budget_ms=30, max_reps=12, warmup_ms=20)

# A forged clock: time inside the process runs 60 times slower than it does (the hostile review's clock_gettime
# rewrite, here linked in by name, which only the CPU build allows: the GPU build reads the clock with the system
# call itself).
SLOW_CLOCK_C = textwrap.dedent("""
    #define _GNU_SOURCE
    #include <time.h>
    #include <unistd.h>
    #include <sys/syscall.h>
    int clock_gettime(clockid_t id, struct timespec *ts) {
        static long long base = -1;
        struct timespec r;
        syscall(SYS_clock_gettime, id, &r);
        long long ns = r.tv_sec * 1000000000LL + r.tv_nsec;
        if (base < 0) base = ns;
        ns = base + (ns - base) / 60;
        ts->tv_sec = ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
        return 0;
    }
""")


@pytest.fixture(scope="module")
def saxpy_prep():
    task = find_task(load_builtin_tasks(), "saxpy")
    return prepare_c_function(task, SETTINGS, seed=11, defer_baseline=True)


def _run_protocol(prep, exe_bytes: bytes, secrets: list[int]):
    """Tests, then one timing window per secret, with the harness's clock around each window."""
    import time

    window = TimingWindow.of(SETTINGS, len(secrets), first=True)
    ext_ms: list[float] = []

    def control(ctl):
        assert ctl.read_line(timeout_s=60) == "ready probe 0"  # before any candidate code; the CPU build has no probe
        assert ctl.read_line(timeout_s=60) == "tests_done"
        for s in secrets:
            t0 = time.monotonic()
            ctl.send(window.command(s, perturb=True))
            assert ctl.read_line(timeout_s=60) == "timing_done"
            ext_ms.append((time.monotonic() - t0) * 1e3)
        ctl.send("stop")

    with Workdir() as w:
        for name, which in (("tests.bin", "tests"), ("timing.bin", "timing")):
            (w / name).write_bytes(prep.input_file(which).read_bytes())
        exe = w / "prog"
        exe.write_bytes(exe_bytes)
        exe.chmod(0o755)
        for f in (exe, w / "tests.bin", w / "timing.bin"):
            share_file(f)
        r = run_sandboxed([str(exe), "testtime", "tests.bin", "out.bin", "stats.txt", "timing.bin", "tout.bin",
                           "tstats.txt", CTL_FD], w, limits=SandboxLimits(wall_s=120), control=control)
        assert r.ok, r.stderr
        return ext_ms, _parse_stats(w / "tstats.txt"), read_outputs(w / "tout.bin", prep.task,
                                                                   len(prep.timing_cases))


def test_timed_inputs_never_repeat_and_the_last_timed_calls_are_rechecked(saxpy_prep):
    prep = saxpy_prep
    assert perturbs_inputs(prep.task)
    secrets = [0x1234_5678_9ABC_DEF1, 0x0FED_CBA9_8765_4321]
    ext_ms, st, touts = _run_protocol(prep, prep.reference_exe.read_bytes(), secrets)
    n = len(prep.timing_cases)
    # the driver's seeds are the harness's: the kept calls are the last window's last timed call on each set
    seeds = kept_call_seeds(secrets[-1], st.window_warm[-1], st.window_reps[-1], n)
    assert [st.kept_seeds[c] for c in range(n)] == seeds
    assert len(set(seeds)) == n and 0 not in seeds
    # what those calls returned is what the reference returns on the same perturbed inputs...
    expected, _ = _run_reference(prep.reference_exe, ["ptest", *map(str, seeds)], list(prep.timing_cases),
                                 prep.task, 60, prep.input_file("timing"))
    assert all(compare_case(prep.task, e, g) is None for e, g in zip(expected, touts))
    # ...and not what it returns on the drawn inputs: a candidate returning outputs cached from an earlier call
    # (on the same set, other perturbation) fails the re-check
    assert any(compare_case(prep.task, e, g) is not None for e, g in zip(prep.expected_timing, touts))
    # seed 0 leaves the inputs as drawn; a seed always perturbs the same way
    same, _ = _run_reference(prep.reference_exe, ["ptest"] + ["0"] * n, list(prep.timing_cases), prep.task, 60,
                             prep.input_file("timing"))
    assert all(compare_case(prep.task, e, g) is None for e, g in zip(prep.expected_timing, same))
    again, _ = _run_reference(prep.reference_exe, ["ptest", *map(str, seeds)], list(prep.timing_cases),
                              prep.task, 60, prep.input_file("timing"))
    assert all(compare_case(prep.task, e, g) is None for e, g in zip(expected, again))
    # the honest run agrees with the harness's clock
    problem, note = check_timer(ext_ms, st, SETTINGS)
    assert problem is None, problem
    assert note.startswith("span/clock ") and len(note.split()[1].split(",")) == 2


def test_a_clock_forged_in_the_candidates_process_disagrees_with_the_harness_clock(saxpy_prep, tmp_path):
    prep = saxpy_prep
    (tmp_path / "driver.c").write_text(prep.driver_c)
    (tmp_path / "reference.c").write_text(prep.task.reference_c)
    (tmp_path / "clock.c").write_text(SLOW_CLOCK_C)
    exe = tmp_path / "forged"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(tmp_path / "driver.c"), str(tmp_path / "reference.c"),
                    str(tmp_path / "clock.c"), "-lm"], check=True, capture_output=True)
    ext_ms, st, _ = _run_protocol(prep, exe.read_bytes(), [7])
    problem, _ = check_timer(ext_ms, st, SETTINGS)
    assert problem is not None and "harness's measured" in problem
    # the figures in the message are the two clocks': the forged one far below the real one
    assert st.window_span_ms[0] * 10 < ext_ms[0]


def _stats(**kw) -> _Stats:
    base = dict(cuda_error=None, init_error=None, probe_error=None, case_kernels={}, profile=None, times_ms=[])
    base.update(kw)
    return _Stats(**base)


def test_records_that_do_not_add_up_get_no_credit():
    ok = _stats(times_ms=[1.0, 1.0], window_reps=[2], window_warm=[2], window_span_ms=[30.0])
    assert check_timer([31.0], ok, SETTINGS)[0] is None
    # timed calls longer than the window they were taken in
    assert "more than the window's span" in check_timer([31.0], _stats(
        times_ms=[20.0, 20.0], window_reps=[2], window_warm=[2], window_span_ms=[30.0]), SETTINGS)[0]
    # a window the harness did not run, or samples that do not match the reported counts
    assert "windows" in check_timer([31.0, 31.0], ok, SETTINGS)[0]
    assert "timed calls where" in check_timer([31.0], _stats(
        times_ms=[1.0], window_reps=[2], window_warm=[2], window_span_ms=[30.0]), SETTINGS)[0]
    # a span longer than the harness's own view of the window
    assert check_timer([20.0], ok, SETTINGS)[0] is not None
    # the slack: a quarter of the window plus 10 ms of pipe and scheduling latency
    assert check_timer([50.0], ok, SETTINGS)[0] is None
    assert check_timer([54.0], ok, SETTINGS)[0] is not None


def test_a_traced_timed_call_must_bring_its_outputs_back_from_the_device(saxpy_prep, tmp_path):
    prep = saxpy_prep
    from cudaperf.harness.run_c_function import input_bytes, output_bytes, traced_evidence

    need = output_bytes(prep.task, prep.expected_timing[1])
    assert need == 4 * prep.timing_cases[1].values["y"].size  # saxpy: y is the output
    h2d = input_bytes(prep.task, prep.timing_cases[1])
    assert h2d == 8 * prep.timing_cases[1].values["y"].size  # x and y go to the device

    def traced(*recs):
        f = tmp_path / "tstats.txt"
        f.write_text("".join(f"traced window {i} case 1 valid 1 call_ns 5000 kernels {k} kernel_ns 100 memcpy_ns 10 "
                             f"memset_ns 0 htod_bytes {h2d} dtoh_bytes {d}\n" for i, (k, d) in enumerate(recs)))
        return _parse_stats(f)

    assert traced_evidence(prep, traced((1, need)), 1, SETTINGS) == (1.0, None)
    frac, problem = traced_evidence(prep, traced((1, need), (1, need // 4)), 2, SETTINGS)
    assert frac == pytest.approx(0.25, abs=0.01) and "25 % of its output bytes" in problem
    assert "no GPU kernel" in traced_evidence(prep, traced((0, need)), 1, SETTINGS)[1]
    # an honest partial copy-back (a stencil's interior) keeps its credit
    assert traced_evidence(prep, traced((1, need * 9 // 10)), 1, SETTINGS) == (0.9, None)
    # one trace per window, or the records do not add up
    assert "traced 1 calls in 2" in traced_evidence(prep, traced((1, need)), 2, SETTINGS)[1]
    # the rule can be switched off (outputs through mapped memory then pass)
    off = HarnessSettings(outputs_from_device_fraction=0.0)
    assert traced_evidence(prep, traced((1, 0)), 1, off) == (0.0, None)
    # the hidden tests' fraction is recorded, not a rule (a small size may be served from the host)
    tests = _stats(case_kernels={i: {"valid": 1, "kernels": 1, "dtoh_bytes": output_bytes(prep.task, e) // 2}
                                 for i, e in enumerate(prep.expected_tests)})
    assert _device_output_fraction(prep, tests) == pytest.approx(0.5, abs=0.01)
    assert _device_output_fraction(prep, _stats(case_kernels={0: {"valid": 0, "dtoh_bytes": 0}})) is None


def test_a_compaction_that_copies_back_only_its_selected_elements_keeps_its_credit(tmp_path):
    """Session 20 on the H200: the dataset's honest ``chunked_transfers`` stream compaction copies back the
    ``count`` selected elements and zeroes the tail on the host; counted against every byte of ``y`` it copied
    49.5 % and got no_gpu_work. The byte rule counts the outputs' non-zero elements: the honest copy-back meets
    it, and a call that copies back less than half of what it selected still does not."""
    import numpy as np

    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.store import Dataset, default_dataset_dir
    from cudaperf.harness.run_c_function import output_bytes, prepare_c_function, traced_evidence

    ds = Dataset.load(default_dataset_dir())
    task = next(t for k, t in sorted(dataset_tasks(ds).items()) if k.startswith("stream_compact_"))
    prep = prepare_c_function(task, SETTINGS, seed=5, defer_baseline=True)
    exp = prep.expected_timing[0]
    y, count = np.asarray(exp.values["y"]), int(exp.values["return"])
    assert 0 < count < y.size and not y[count:].any()  # a tail of zeros
    need = output_bytes(prep.task, exp)
    assert need == np.count_nonzero(y) * y.itemsize <= count * y.itemsize  # a selected 0 counts as a zero

    def traced(dtoh):
        f = tmp_path / "tstats.txt"
        f.write_text(f"traced window 0 case 0 valid 1 call_ns 5000 kernels 3 kernel_ns 900 memcpy_ns 10 "
                     f"memset_ns 0 htod_bytes {4 * y.size} dtoh_bytes {dtoh}\n")
        return _parse_stats(f)

    honest = count * y.itemsize + 4  # the selected elements and the count
    assert traced_evidence(prep, traced(honest), 1, SETTINGS)[1] is None
    assert "of its output bytes" in traced_evidence(prep, traced(need // 3), 1, SETTINGS)[1]
    # an output of zeros only asks for the return value
    zeros = type(exp)(status=0, values={"y": np.zeros_like(y), "return": 0})
    assert output_bytes(prep.task, zeros) == 4


def test_a_traced_timed_call_must_take_its_inputs_to_the_device(saxpy_prep, tmp_path):
    """Outputs computed on the host need no inputs on the device, whatever kernel runs beside them (an idle grid
    or a spin: adversarial/saxpy_token_grid_copy.cu, saxpy_spin_kernel_host_loop.cu copy none); honest variants
    copied 0.95 to 1.0 of theirs on the H200 (session 20)."""
    from cudaperf.harness.run_c_function import input_bytes, input_fraction, output_bytes, traced_evidence

    prep = saxpy_prep
    h2d, d2h = input_bytes(prep.task, prep.timing_cases[1]), output_bytes(prep.task, prep.expected_timing[1])

    def traced(*htod):
        f = tmp_path / "tstats.txt"
        f.write_text("".join(f"traced window {i} case 1 valid 1 call_ns 5000 kernels 1 kernel_ns 100 memcpy_ns 10 "
                             f"memset_ns 0 htod_bytes {b} dtoh_bytes {d2h}\n" for i, b in enumerate(htod)))
        return _parse_stats(f)

    assert traced_evidence(prep, traced(h2d), 1, SETTINGS) == (1.0, None)
    assert traced_evidence(prep, traced(h2d // 2), 1, SETTINGS)[1] is None  # half is enough
    frac, problem = traced_evidence(prep, traced(h2d, 0), 2, SETTINGS)  # one window with none: no credit
    assert frac == 1.0 and "0 % of its input bytes to the device" in problem
    assert input_fraction(prep, traced(h2d, h2d // 4)) == pytest.approx(0.25, abs=0.01)
    off = HarnessSettings(inputs_to_device_fraction=0.0)
    assert traced_evidence(prep, traced(0), 1, off) == (1.0, None)


def test_host_work_behind_a_token_kernel_falls_below_the_kernel_share_floor():
    """The call traced after timing: its kernels' GPU time over its wall time (both from CUPTI in the driver) must
    reach ``min_kernel_share``. The H200 figures: honest dataset variants from 0.0004 up (sessions 19 and 20), the
    honest saxpy fast candidate 0.0025, the token kernels 0.00001 to 0.00004."""
    from cudaperf.harness.run_c_function import kernel_share_problem

    s = HarnessSettings()
    assert s.min_kernel_share == 0.0001

    def prof(kernel_ns, call_ns):
        return {"valid": 1, "call_ns": call_ns, "kernels": 1, "kernel_ns": kernel_ns, "memcpy_ns": 0}

    call = 200_000_000  # a 200 ms call
    assert kernel_share_problem(prof(500_000, call), s) is None  # 0.0025, the honest saxpy
    assert kernel_share_problem(prof(80_000, call), s) is None  # 0.0004, the honest minimum (session 20)
    assert kernel_share_problem(prof(20_000, call), s) is None  # the floor itself passes
    token = kernel_share_problem(prof(8_000, call), s)  # 0.00004: the highest token kernel seen
    assert token and "8.0 us of a 200.00 ms call" in token and "computed on the host" in token
    assert "0.0001" in token
    # nothing is ruled on without the profile's numbers (no CUPTI, the CPU build) or with the floor off
    assert kernel_share_problem(None, s) is None and kernel_share_problem({"valid": 1, "kernels": 1}, s) is None
    assert kernel_share_problem(prof(0, 0), s) is None
    assert kernel_share_problem(prof(8_000, call), HarnessSettings(min_kernel_share=0.0)) is None
    with pytest.raises(ValueError):
        HarnessSettings(min_kernel_share=1.5)


def test_host_threads_beside_the_calls_show_as_cores_in_a_timing_window():
    """Each timing window's CPU time of the run (read from outside it) over the window's wall time: about one core
    is an honest candidate's calling thread (copies, spins in its synchronizations); more than
    ``max_window_cpu_cores`` (1.5) plus the tick slack means host threads worked beside the calls."""
    from cudaperf.harness.run_c_function import window_cpu_problem

    s = HarnessSettings()
    assert s.max_window_cpu_cores == 1.5
    cores, problem = window_cpu_problem([500.0, 480.0], [0.52, 0.47], s)
    assert problem is None and cores == pytest.approx(1.04, abs=0.01)
    cores, problem = window_cpu_problem([500.0, 500.0], [0.5, 6.1], s)  # 12 cores in the second window
    assert cores == pytest.approx(12.2) and problem and "timing window 1" in problem
    assert "12.2 cores" in problem and "max_window_cpu_cores" in problem
    # the slack: a 20 ms window read as two ticks over the limit passes; nothing without a reading; 0: off
    assert window_cpu_problem([20.0], [0.07], s)[1] is None
    assert window_cpu_problem([500.0], [None], s) == (None, None) and window_cpu_problem([], [], s) == (None, None)
    assert window_cpu_problem([500.0], [6.0], HarnessSettings(max_window_cpu_cores=0))[1] is None
    with pytest.raises(ValueError):
        HarnessSettings(max_window_cpu_cores=-1)


def test_the_build_refuses_imports_that_start_host_workers(tmp_path):
    """The import check reads the object's undefined symbols, which no spelling in the source hides:
    ``std::thread`` after ``using namespace std`` (which the text check of ``std::thread`` misses), C11
    ``thrd_create``, a CUDA host callback; an honest candidate imports none of them."""
    from cudaperf.harness.evaluate import build_candidate
    from cudaperf.tasks import builtin_candidates

    task = find_task(load_builtin_tasks(), "mandelbrot")
    adv = Path(__file__).resolve().parent / "fixtures" / "adversarial"
    for name, what in (("mandelbrot_using_std_thread.cu", "std::thread"), ("mandelbrot_thrd_create.cu", "thrd_create"),
                       ("mandelbrot_host_callback.cu", "cudaLaunchHostFunc")):
        b = build_candidate(task, (adv / name).read_text(), HarnessSettings())
        assert b.stage == "symbols" and any(f"refers to {what}" in r for r in b.reasons), (name, b.reasons)
    honest = next(c for c in builtin_candidates() if c.task_id == "mandelbrot" and c.label == "fast").source
    assert build_candidate(task, honest, HarnessSettings()).stage == "ok"


def test_the_gpu_build_of_every_driver_compiles_with_the_raw_clock_and_perturbation():
    """Every built-in task's driver, GPU build (gcc -DCUDAPERF_GPU against the CUDA headers): the raw
    clock_gettime system call and the perturbation code compile; no libc clock_gettime call remains."""
    tasks = [t for t in load_builtin_tasks() if t.kind == "c_function"]
    assert tasks
    for t in tasks:
        obj = _driver_object(driver_source(t))
        syms = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True).stdout
        assert "clock_gettime" not in syms, t.id


def test_seeds_are_distinct_per_call_and_zero_only_without_a_secret():
    seeds = [call_seed(99, k) for k in range(1000)]
    assert len(set(seeds)) == 1000 and 0 not in seeds
    assert call_seed(0, 5) == 0
    assert kept_call_seeds(99, 3, 7, 3) == [call_seed(99, 3 + 6), call_seed(99, 3 + 4), call_seed(99, 3 + 5)]
    assert FailureKind.TIMER_MISMATCH.value == "timer_mismatch"


def test_records_the_candidate_can_write_cannot_make_its_failure_the_harness_s(tmp_path):
    """The candidate's process can append to its stats file. A GPU start failure counts as the harness's only when
    the driver never said ``ready`` (which it says before any candidate code runs), and whether the probe traces
    is what that line said, not what the file says."""
    from cudaperf.harness.run_c_function import _trusted

    f = tmp_path / "stats.txt"
    f.write_text("init_error cudaErrorNoDevice forged\nprobe_error forged\n")
    st = _parse_stats(f)
    assert st.init_error and st.probe_error  # as written
    assert _trusted(st, None) == st  # no ready line: the driver died at start, its record stands
    t = _trusted(st, "ready probe 1")
    assert t.init_error is None and t.probe_error is None
    t0 = _trusted(st, "ready probe 0")
    assert t0.init_error is None and t0.probe_error == "forged"


def test_a_hidden_test_without_its_trace_is_the_candidate_s_failure(saxpy_prep, tmp_path):
    """Right outputs (the reference's own, written by its CPU build) but no trace records, where the driver said
    the probe traces: the records were overwritten in the candidate's process. That is the candidate's failure,
    never an unscored result."""
    from cudaperf.harness.run_c_function import _judge_tests

    prep = saxpy_prep
    subprocess.run([str(prep.reference_exe), "test", str(prep.input_file("tests")), str(tmp_path / "out.bin"),
                    str(tmp_path / "stats.txt")], check=True)
    with open(tmp_path / "stats.txt", "a") as fh:
        fh.write("init_error cudaErrorNoDevice forged\n")
    v = _judge_tests(prep, tmp_path, None, SETTINGS, "ready probe 1")
    assert v.pass_fraction == 1.0
    assert v.failure.kind == FailureKind.NO_GPU_WORK and v.failure.attributed_to == "candidate"
    assert "overwrote the harness's records" in v.failure.message
    # without the ready line the same file reads as the driver's own start failure: the harness's
    assert _judge_tests(prep, tmp_path, None, SETTINGS, None).failure.attributed_to == "harness"


# A forger that acts at exit: a destructor rewrites the timing records (every call 1 us) and the timing outputs
# (zeros). The harness reads both while the program waits, before any exit code of the candidate's runs.
EXIT_FORGER_C = textwrap.dedent("""
    #include <stdio.h>
    __attribute__((destructor)) static void forge(void) {
        FILE *f = fopen("tstats.txt", "w");
        if (f) {
            for (int i = 0; i < 6; ++i) fprintf(f, "time_ns 1000\\n");
            fprintf(f, "window 0 reps 6 warm 2 span_ns 6000\\n");
            fclose(f);
        }
        f = fopen("tout.bin", "r+b");
        if (f) { char z[4096] = {0}; fseek(f, 8, SEEK_SET); fwrite(z, 1, sizeof z, f); fclose(f); }
    }
""")


def _build_with(prep, tmp_path, name: str, extra_c: str):
    from cudaperf.harness.compile import BuildOutcome, CompileInfo

    for fname, text in (("driver.c", prep.driver_c), ("reference.c", prep.task.reference_c), ("extra.c", extra_c)):
        (tmp_path / fname).write_text(text)
    exe = tmp_path / name
    subprocess.run(["gcc", "-O2", "-o", str(exe), *(str(tmp_path / f) for f in ("driver.c", "reference.c",
                    "extra.c")), "-lm"], check=True, capture_output=True)
    return BuildOutcome(exe=exe, info=CompileInfo(True, "gcc", (), "cpu", "gcc", "", False, 0.0), stage="ok")


@pytest.mark.parametrize("forger", ["none", "exit", "clock"])
def test_the_whole_candidate_run_reads_its_records_while_the_program_waits(saxpy_prep, tmp_path, forger):
    """CandidateRun end to end on the CPU build (no probe, so GPU evidence is not required here): the honest
    program is timed, a program that rewrites its records at exit is timed as what it did, and one whose clock
    runs 60 times slow gets no credit."""
    from dataclasses import replace as dc_replace

    from cudaperf.harness.run_c_function import run_c_function

    settings = HarnessSettings(budget_ms=30, max_reps=12, warmup_ms=20, require_gpu_evidence=False)
    prep = dc_replace(saxpy_prep, baseline_timing=None)
    from cudaperf.harness.run_c_function import time_baseline

    prep = time_baseline(prep, settings)
    extra = {"none": "int cudaperf_no_extra;\n", "exit": EXIT_FORGER_C, "clock": SLOW_CLOCK_C}[forger]
    out = run_c_function(prep, _build_with(prep, tmp_path, forger, extra), settings)
    if forger == "clock":
        assert not out.correct and out.failure.kind == FailureKind.TIMER_MISMATCH, out.failure
        return
    assert out.correct and out.failure is None and out.candidate_timing is not None, out.failure
    # the samples are the real ones (a saxpy call at the timing size on the CPU takes far more than 1 us)
    assert out.candidate_timing.median_ms > 0.01
    assert out.gpu_evidence.timer_check.startswith("span/clock ")


def test_pytorch_samples_below_the_profiled_calls_gpu_time_are_a_timer_mismatch():
    from cudaperf.harness.run_pytorch import timing_floor_failure

    s = HarnessSettings()
    assert timing_floor_failure([0.001] * 9, 80.0, s) is not None  # 1 us calls of an 80 us kernel: forged
    assert timing_floor_failure([0.085, 0.09, 0.2], 80.0, s) is None  # honest: the call holds its kernel
    assert timing_floor_failure([0.036], 80.0, s) is None  # within the margin (boost clocks, a warm cache)
    assert timing_floor_failure([0.001], None, s) is None and timing_floor_failure([], 80.0, s) is None
    assert timing_floor_failure([0.001], 4.0, s) is None  # under the absolute margin: too small to judge


def test_the_build_refuses_code_that_runs_before_or_after_the_call():
    """The object's sections and symbols, whatever the source's spelling: ``[[gnu::constructor]]`` (which the text
    check of ``__attribute__((constructor))`` misses), a pointer put in ``.init_array`` by a section attribute, and
    an ifunc resolver (run by the loader before ``main``) are refused; nvcc's own registration (one ``.init_array``
    entry in every object) is not, so honest candidates build."""
    from cudaperf.harness.evaluate import build_candidate
    from cudaperf.harness.static_checks import check_source, startup_code_reasons
    from cudaperf.tasks import builtin_candidates

    task = find_task(load_builtin_tasks(), "saxpy")
    adv = Path(__file__).resolve().parent / "fixtures" / "adversarial"
    for name, what in (("saxpy_gnu_constructor.cu", ".init_array"), ("saxpy_init_array_section.cu", ".init_array"),
                       ("saxpy_ifunc_resolver.cu", "indirect function")):
        code = (adv / name).read_text()
        assert check_source(code, kind="c_function").ok, name  # the text checks miss each of them
        b = build_candidate(task, code, HarnessSettings())
        assert b.stage == "symbols" and any(what in r for r in b.reasons), (name, b.reasons)
    for c in builtin_candidates():
        if c.task_id == "saxpy" and c.label in ("fast", "slow"):
            assert build_candidate(task, c.source, HarnessSettings()).stage == "ok", c.label
    one = "  [14] .init_array       INIT_ARRAY      0000000000000000 001500 000008 08  WA  0   0  8\n"
    prio = "  [ 8] .init_array.00101 INIT_ARRAY      0000000000000000 0005b0 000008 08  WA  0   0  8\n"
    fini = "  [ 9] .fini_array       FINI_ARRAY      0000000000000000 0005b8 000008 08  WA  0   0  8\n"
    assert startup_code_reasons(one) == [] and startup_code_reasons("") == []
    assert startup_code_reasons(one + prio) and startup_code_reasons(one + fini)
