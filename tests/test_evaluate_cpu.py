"""End-to-end evaluation where no GPU is visible: failures before the GPU are scored, the rest is unscored."""

from __future__ import annotations

import pytest

from cudaperf.harness.evaluate import evaluate
from cudaperf.harness.executor import Job, run_batch
from cudaperf.harness.result import FailureKind, Stage
from cudaperf.harness.store import ResultStore
from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks
from tests.conftest import HAVE_GPU

pytestmark = pytest.mark.skipif(HAVE_GPU, reason="checks the no-GPU behaviour")


@pytest.fixture(scope="module")
def saxpy():
    return find_task(load_builtin_tasks(), "saxpy")


def test_no_code_is_a_scored_candidate_failure(saxpy):
    r = evaluate(saxpy, "Sorry, I can't write CUDA.")
    assert r.status == "scored" and r.stage == Stage.NONE and r.failure.kind == FailureKind.NO_CODE
    assert r.failure.attributed_to == "candidate" and r.code_sha256 is None


def test_static_rejection_is_scored(saxpy, fixtures_dir):
    r = evaluate(saxpy, (fixtures_dir / "saxpy" / "define_global.cu").read_text())
    assert r.status == "scored" and r.failure.kind == FailureKind.STATIC_CHECK
    assert any("__global__" in x for x in r.static_check_reasons)


def test_compile_error_is_scored_with_the_log(saxpy):
    r = evaluate(saxpy, "<OUTPUT_CUDA>__global__ void k() { undefined_thing; }\nvoid f() { k<<<1,1>>>(); }"
                        "</OUTPUT_CUDA>")
    assert r.status == "scored" and r.stage == Stage.CHECKED and r.failure.kind == FailureKind.COMPILE_ERROR
    assert "undefined_thing" in r.compile.log


def test_compiled_candidate_without_gpu_is_unscored_not_zero(saxpy):
    src = next(c for c in builtin_candidates() if c.task_id == "saxpy" and c.label == "fast").source
    r = evaluate(saxpy, src)
    assert r.stage == Stage.COMPILED and r.status == "unscored"
    assert r.failure.attributed_to == "harness" and "no NVIDIA GPU" in r.failure.message
    assert r.environment.gpu == "none visible" and r.compile.ok


def test_batch_appends_and_resumes(tmp_path, saxpy):
    store = ResultStore(tmp_path / "r.jsonl")
    jobs = [Job("saxpy", "none", "no code here"), Job("saxpy", "fast",
            next(c for c in builtin_candidates() if c.task_id == "saxpy" and c.label == "fast").source)]
    s1 = run_batch([saxpy], jobs, store, compile_workers=2)
    assert s1.n_skipped == 0 and len(store.read()) == 2
    s2 = run_batch([saxpy], jobs, store, compile_workers=2)
    # the scored failure is done; the unscored one (no GPU here) is tried again
    assert s2.n_skipped == 1 and len(store.read()) == 3
    with pytest.raises(ValueError, match="unknown tasks"):
        run_batch([saxpy], [Job("nope", "x", "")], store)


def test_timing_and_background_host_work_never_overlap():
    import threading
    import time

    from cudaperf.harness.quiet import HostActivity

    host = HostActivity()
    overlaps = []
    active = {"timing": 0, "background": 0}
    lock = threading.Lock()

    def work(kind: str, seconds: float) -> None:
        ctx = host.timing() if kind == "timing" else host.background()
        with ctx:
            with lock:
                active[kind] += 1
                if active["timing"] and active["background"]:
                    overlaps.append(dict(active))
            time.sleep(seconds)
            with lock:
                active[kind] -= 1

    threads = [threading.Thread(target=work, args=("timing" if i % 3 == 0 else "background", 0.01))
               for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlaps and host.state() == (0, 0, 0)


def test_an_urgent_period_lets_background_work_past_waiting_timing_windows():
    """Timing's priority starves background work while any window waits; in an urgent period background work
    starts once no window is open, new windows wait for the period to end, and a window nested in its owner's
    open one goes on. The two classes never overlap."""
    import threading
    import time

    from cudaperf.harness.quiet import HostActivity

    def started(fn, *args):
        ev = threading.Event()
        release = threading.Event()

        def run():
            with fn(*args):
                ev.set()
                release.wait(10)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, ev, release

    def settle():
        time.sleep(0.1)  # let the other threads reach their waits

    for urgent in (False, True):
        host = HostActivity()
        rounds, rounds_in, rounds_out = started(host.timing, 0)  # GPU 0's rounds: one window held for long
        assert rounds_in.wait(5)
        if urgent:
            host.begin_urgent()
        other, other_in, other_out = started(host.timing, 1)  # GPU 1 wants a new window
        prep, prep_in, prep_out = started(host.background)  # the next task's preparation
        settle()
        assert not prep_in.is_set()  # never beside an open window
        assert other_in.is_set() != urgent  # a new window waits for an urgent period only
        nested, nested_in, nested_out = started(host.timing, 0)  # a window inside GPU 0's rounds
        assert nested_in.wait(5)
        nested_out.set()
        nested.join(5)
        if urgent:
            with host.try_background() as free:
                assert not free  # GPU 0's window is still open
        rounds_out.set()
        rounds.join(5)
        if urgent:
            assert prep_in.wait(5)  # GPU 1 still waits, but the preparation goes first
            settle()
            assert not other_in.is_set()
            prep_out.set()
            prep.join(5)
            settle()
            assert not other_in.is_set()  # the period is not over
            with host.try_background() as free:
                assert free  # no window open: background may start, though one waits
            host.end_urgent()
            assert other_in.wait(5)
            other_out.set()
        else:
            settle()
            assert not prep_in.is_set()  # GPU 1's window keeps the preparation out: starved
            other_out.set()
            other.join(5)
            assert prep_in.wait(5)
            prep_out.set()
        for t in (other, prep):
            t.join(5)
            assert not t.is_alive()
        assert host.state() == (0, 0, 0) and host.urgent_periods() == 0
    with pytest.raises(RuntimeError, match="without begin_urgent"):
        HostActivity().end_urgent()


def test_urgent_periods_keep_timing_and_background_apart_under_load():
    """Windows of two owners (some nested), background steps and urgent periods at random: no overlap, and
    every thread finishes."""
    import random
    import threading
    import time

    from cudaperf.harness.quiet import HostActivity

    host = HostActivity()
    active = {"timing": 0, "background": 0}
    overlaps = []
    lock = threading.Lock()

    def note(kind, d):
        with lock:
            active[kind] += d
            if active["timing"] and active["background"]:
                overlaps.append(dict(active))

    def timing_worker(owner, rng):
        for _ in range(15):
            with host.timing(owner):
                note("timing", 1)
                if rng.random() < 0.5:
                    with host.timing(owner):  # a window inside the owner's rounds
                        time.sleep(0.002)
                time.sleep(rng.random() * 0.004)
                note("timing", -1)

    def background_worker(rng):
        for _ in range(15):
            with host.background():
                note("background", 1)
                time.sleep(rng.random() * 0.003)
                note("background", -1)

    def urgent_toggler(rng):
        for _ in range(10):
            host.begin_urgent()
            time.sleep(rng.random() * 0.01)
            host.end_urgent()
            time.sleep(rng.random() * 0.01)

    rng = random.Random(7)
    threads = ([threading.Thread(target=timing_worker, args=(o, random.Random(rng.random()))) for o in (0, 1, 0, 1)]
               + [threading.Thread(target=background_worker, args=(random.Random(rng.random()),)) for _ in range(3)]
               + [threading.Thread(target=urgent_toggler, args=(random.Random(rng.random()),))])
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert not overlaps and host.state() == (0, 0, 0) and host.urgent_periods() == 0
    assert host.urgent_started == 10


def test_exclusive_timing_keeps_owners_apart_and_lets_one_owner_nest():
    """Exclusive mode: timed windows of different owners (GPU workers) never overlap; one owner's windows nest
    across threads (a task's rounds); a background slot held across threads keeps every window out; off, the
    owners overlap as before."""
    import threading
    import time

    from cudaperf.harness.quiet import HostActivity

    host = HostActivity()
    active: dict = {}
    overlaps = []
    lock = threading.Lock()

    def window(owner, seconds=0.02):
        with host.timing(owner):
            with lock:
                active[owner] = active.get(owner, 0) + 1
                if len([o for o, n in active.items() if n]) > 1:
                    overlaps.append(dict(active))
            time.sleep(seconds)
            with lock:
                active[owner] -= 1

    def run(n_threads):
        threads = [threading.Thread(target=window, args=(i % 2,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads)

    run(12)
    assert overlaps  # not exclusive: the two owners' windows overlap
    overlaps.clear()
    with host.exclusive_mode():
        assert host.exclusive
        run(12)
        assert not overlaps
        with host.timing(0):  # owner 0 holds a window (a task's rounds) ...
            inner = threading.Thread(target=window, args=(0,))
            inner.start()
            inner.join(timeout=5)
            assert not inner.is_alive()  # ... and its candidates' windows run inside it
            other = threading.Thread(target=window, args=(1,))
            other.start()
            time.sleep(0.1)
            assert other.is_alive()  # owner 1 waits
        other.join(timeout=5)
        assert not other.is_alive()
        slot = host.hold_background()  # a candidate's tests
        waiting = threading.Thread(target=window, args=(1,))
        waiting.start()
        time.sleep(0.1)
        assert waiting.is_alive()
        threading.Thread(target=slot.release).start()  # released from another thread
        waiting.join(timeout=5)
        assert not waiting.is_alive()
        slot.release()  # idempotent
    assert not host.exclusive and host.state() == (0, 0, 0)


def test_deferred_baseline_is_timed_later_and_inputs_are_shared_read_only():
    import os

    from cudaperf.harness.run_c_function import prepare_c_function, time_baseline
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks import find_task, load_builtin_tasks

    task = find_task(load_builtin_tasks(), "saxpy")
    settings = HarnessSettings(budget_ms=50, max_reps=5)
    prep = prepare_c_function(task, settings, seed=3, defer_baseline=True)
    assert prep.baseline_timing is None and len(prep.expected_timing) == settings.timing_sets
    path = prep.input_file("timing")
    assert oct(os.stat(path).st_mode & 0o777) == "0o444"
    done = time_baseline(prep, settings)
    assert done.baseline_timing is not None and done.baseline_timing.n >= settings.min_reps
    assert done.input_file("timing") == path and time_baseline(done, settings) is done


def test_batch_time_limit_leaves_the_rest_for_a_rerun(tmp_path):
    from cudaperf.harness.executor import Job, run_batch
    from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

    task = find_task(load_builtin_tasks(), "saxpy")
    jobs = [Job("saxpy", c.label, c.source) for c in builtin_candidates() if c.task_id == "saxpy"]
    s = run_batch([task], jobs, tmp_path / "r.jsonl", compile_workers=2, max_seconds=0.0)
    assert s.n_run == 0 and s.n_not_started == len(jobs)   # all compiled, none started
    s2 = run_batch([task], jobs, tmp_path / "r.jsonl", compile_workers=2)
    assert s2.n_not_started == 0 and s2.n_run == len(jobs)


@pytest.mark.parametrize("overlap", [True, False])
def test_batch_over_several_tasks_reports_every_job_once(tmp_path, overlap):
    from cudaperf.harness.executor import Job, run_batch
    from cudaperf.tasks import builtin_candidates, load_builtin_tasks

    tasks = load_builtin_tasks()
    cands = [c for c in builtin_candidates() if c.task_id in {t.id for t in tasks}][:6]
    jobs = [Job(c.task_id, c.label, c.source) for c in cands]
    jobs.append(Job(cands[0].task_id, "broken", "```cuda\n__global__ void k( {\n```"))
    s = run_batch(tasks, jobs, tmp_path / "r.jsonl", compile_workers=2, overlap_compile=overlap)
    keys = [(r.task_id, r.candidate_id) for r in s.results]
    assert sorted(keys) == sorted((j.task_id, j.candidate_id) for j in jobs)
    assert s.n_not_started == 0 and s.n_compiled == len(jobs) - 1  # "broken" stops at the static checks
    broken = next(r for r in s.results if r.candidate_id == "broken")
    assert broken.status == "scored" and not broken.correct and broken.failure is not None


def test_driver_runs_tests_then_timing_windows_on_command(tmp_path):
    """The driver's testtime protocol, with its CPU build (the trusted reference) as the program: tests, then two
    timing windows in one process, then the timing outputs, which must equal the reference's own."""
    from cudaperf.harness.run_c_function import TimingWindow, _parse_stats, compare_case, prepare_c_function
    from cudaperf.harness.sandbox import CTL_FD, SandboxLimits, Workdir, run_sandboxed
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks import find_task, load_builtin_tasks
    from cudaperf.tasks.inputs import read_outputs

    task = find_task(load_builtin_tasks(), "saxpy")
    settings = HarnessSettings(budget_ms=20, max_reps=8)
    prep = prepare_c_function(task, settings, seed=5, defer_baseline=True)
    window = TimingWindow.of(settings, 2, first=True)
    seen = []

    def control(ctl):
        seen.append(ctl.read_line(timeout_s=30))
        seen.append(ctl.read_line(timeout_s=30))
        for _ in range(2):
            ctl.send(window.command())
            seen.append(ctl.read_line(timeout_s=30))
        ctl.send("stop")

    with Workdir() as w:
        for name, which in (("tests.bin", "tests"), ("timing.bin", "timing")):
            (w / name).write_bytes(prep.input_file(which).read_bytes())
        exe = w / "prog"
        exe.write_bytes(prep.reference_exe.read_bytes())
        exe.chmod(0o755)
        from cudaperf.harness.sandbox import share_file
        for f in (exe, w / "tests.bin", w / "timing.bin"):
            share_file(f)
        r = run_sandboxed([str(exe), "testtime", "tests.bin", "out.bin", "stats.txt", "timing.bin", "tout.bin",
                           "tstats.txt", CTL_FD], w, limits=SandboxLimits(wall_s=60), control=control)
        stats = (w / "tstats.txt").read_text().splitlines()
        parsed = _parse_stats(w / "tstats.txt")
        touts = read_outputs(w / "tout.bin", task, len(prep.timing_cases))
        outs = read_outputs(w / "out.bin", task, len(prep.test_cases))
    assert r.ok, r.stderr
    assert seen == ["ready probe 0", "tests_done", "timing_done", "timing_done"]  # the CPU build has no probe
    windows = [l for l in stats if l.startswith("window ")]
    assert [l.split()[1] for l in windows] == ["0", "1"]
    assert sum(l.startswith("time_ns ") for l in stats) >= 2 * window.min_reps
    # the harness splits the samples back into the driver's windows: the best-window estimator's input
    from cudaperf.harness.result import TimingStats

    split = parsed.windows()
    assert [len(x) for x in split] == [int(l.split()[3]) for l in windows]
    timing = TimingStats.from_windows_ms(split)
    assert len(timing.windows_ms) == 2 and timing.n == len(parsed.times_ms)
    assert timing.best_window_ms == min(timing.windows_ms) <= max(timing.windows_ms)
    assert all(compare_case(task, e, g) is None for e, g in zip(prep.expected_timing, touts))
    assert all(compare_case(task, e, g) is None for e, g in zip(prep.expected_tests, outs))


def test_timing_windows_share_the_budget():
    from cudaperf.harness.run_c_function import TimingWindow
    from cudaperf.harness.settings import HarnessSettings

    s = HarnessSettings(min_reps=5, max_reps=48, budget_ms=400, warmup=2, timing_rounds=4)
    first, later = TimingWindow.of(s, 4, first=True), TimingWindow.of(s, 4, first=False)
    assert (first.min_reps, first.max_reps, first.budget_ms, first.warmup) == (2, 12, 100.0, 2)
    assert later.warmup == 1 and later.command().split()[:4] == ["time", "2", "12", "100.000"]
    one = TimingWindow.of(s, 1, first=True)
    assert (one.min_reps, one.max_reps, one.budget_ms) == (5, 48, 400.0)
    with pytest.raises(ValueError):
        HarnessSettings(timing_rounds=0)



@pytest.mark.parametrize("mode", [{"pipeline_candidates": True}, {"timing_rounds": 3}])
def test_grouped_task_paths_report_every_candidate_once(tmp_path, mode):
    """The grouped paths of a batch (pipelined, interleaved) run here up to the candidate's process, which finds
    no GPU: each candidate comes back once, unscored, with the baseline prepared and timed on the CPU."""
    from cudaperf.harness.executor import Job, run_batch
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

    task = find_task(load_builtin_tasks(), "saxpy")
    jobs = [Job("saxpy", c.label, c.source) for c in builtin_candidates() if c.task_id == "saxpy"]
    settings = HarnessSettings(budget_ms=30, max_reps=6, **mode)
    s = run_batch([task], jobs, tmp_path / "r.jsonl", settings=settings, gpus=[0], compile_workers=2)
    assert sorted(r.candidate_id for r in s.results) == sorted(j.candidate_id for j in jobs)
    assert all(r.status == "unscored" and "no usable GPU" in r.failure.message for r in s.results)
    assert all("tests_s" in r.durations_s for r in s.results)


@pytest.mark.parametrize("burst", [False, True])
def test_burst_preparation_refills_the_queue_and_ends_every_period(tmp_path, burst):
    """Six tasks on two GPU workers, two prepared at a time: with ``burst_preparation`` each refill is an urgent
    period; the batch ends (the producers see that nothing is left to prepare, even between bursts), every job
    comes back once (here unscored: no GPU), and every period and slot is given back. A deadlock fails the join."""
    import threading

    from cudaperf.harness.executor import Job, run_batch
    from cudaperf.harness.quiet import HOST
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

    ids = ["saxpy", "dot", "heat1d", "histogram", "transpose", "sum_reduce"]
    tasks = [find_task(load_builtin_tasks(), t) for t in ids]
    jobs = [Job(c.task_id, c.label, c.source) for c in builtin_candidates() if c.task_id in ids and c.label == "fast"]
    settings = HarnessSettings(budget_ms=30, max_reps=6, timing_rounds=3, speedup_estimator="best_window",
                               burst_preparation=burst)
    before = HOST.urgent_started
    out = {}
    t = threading.Thread(target=lambda: out.update(s=run_batch(tasks, jobs, tmp_path / "r.jsonl", settings=settings,
                                                                gpus=[0, 1], compile_workers=2, prepare_ahead=2,
                                                                prepare_workers=2)), daemon=True)
    t.start()
    t.join(240)
    assert not t.is_alive(), "the batch did not end"
    s = out["s"]
    assert sorted(r.task_id for r in s.results) == sorted(ids) and s.n_not_started == 0
    assert HOST.state() == (0, 0, 0) and HOST.urgent_periods() == 0
    # the first fill and at least one refill (six tasks, two at a time); none without bursts
    assert (HOST.urgent_started - before >= 2) if burst else HOST.urgent_started == before


def test_exclusive_timing_keeps_a_candidates_tests_out_of_another_gpus_window():
    """A real sandboxed run (the CPU build of the driver as the program) under exclusive timing: while another
    GPU's window is open it does not start; afterwards it runs, and gives its background slot back."""
    import threading
    import time

    from cudaperf.harness.compile import BuildOutcome
    from cudaperf.harness.quiet import HOST
    from cudaperf.harness.result import CompileInfo
    from cudaperf.harness.run_c_function import prepare_c_function, run_c_function
    from cudaperf.harness.settings import HarnessSettings

    task = find_task(load_builtin_tasks(), "saxpy")
    settings = HarnessSettings(budget_ms=20, max_reps=8, exclusive_timing=True)
    prep = prepare_c_function(task, settings, seed=5)
    build = BuildOutcome(exe=prep.reference_exe, stage="ok", info=CompileInfo(
        ok=True, compiler="gcc", flags=(), arch="cpu", toolchain="", log="", cached=False, seconds=0.0))
    out = []
    with HOST.exclusive_mode(settings.exclusive_timing):
        with HOST.timing(1):  # GPU 1's window
            t = threading.Thread(target=lambda: out.append(run_c_function(prep, build, settings, gpu_index=None)))
            t.start()
            time.sleep(0.3)
            assert not out and HOST.state()[2] == 0  # waiting for a slot, not running beside the window
        t.join(timeout=60)
    assert out and out[0].pass_fraction == 1.0  # it ran its hidden tests (no GPU kernels on this CPU build)
    assert HOST.state() == (0, 0, 0) and not HOST.exclusive


def test_best_window_estimator_rests_on_the_fastest_window_of_each_side():
    """``speedup_estimator="best_window"``: each side's fastest window median; one window is its median."""
    from cudaperf.harness.result import TimingStats
    from cudaperf.harness.settings import HarnessSettings

    t = TimingStats.from_windows_ms([[3.0, 3.2, 2.8], [], [2.0, 2.2], [4.0]])
    assert t.windows_ms == (3.0, 2.1, 4.0) and t.best_window_ms == 2.1  # the empty window is skipped
    assert t.n == 6 and t.median_ms == 2.9
    one = TimingStats.from_windows_ms([[1.0, 5.0, 2.0]])
    assert one.windows_ms == () and one.best_window_ms == one.median_ms == 2.0
    best, med = HarnessSettings(speedup_estimator="best_window"), HarnessSettings()
    assert best.speedup_time_ms(t) == 2.1 and med.speedup_time_ms(t) == 2.9
    assert "fastest window" in best.timing_method and "fastest window" not in med.timing_method
    with pytest.raises(ValueError, match="speedup_estimator"):
        HarnessSettings(speedup_estimator="mean")
    from cudaperf.harness.run_c_function import _Stats

    odd = _Stats(None, None, None, {}, None, [1.0, 2.0, 3.0], [2, 2])  # the reps lines do not add up
    assert odd.windows() == [[1.0, 2.0, 3.0]]


def test_baseline_windows_are_separate_processes_and_keep_their_medians():
    """What a grouped task does with the sequential baseline: its first window, then one process per later
    round (real reference runs here), combined so that every window's median is kept."""
    from dataclasses import replace

    from cudaperf.harness.result import TimingStats
    from cudaperf.harness.run_c_function import TimingWindow, baseline_window, prepare_c_function, time_baseline
    from cudaperf.harness.settings import HarnessSettings

    task = find_task(load_builtin_tasks(), "saxpy")
    settings = HarnessSettings(budget_ms=20, max_reps=6, timing_rounds=3, speedup_estimator="best_window")
    prep = time_baseline(prepare_c_function(task, settings, seed=5, defer_baseline=True), settings)
    windows = [list(prep.baseline_timing.samples_ms)]
    windows += [baseline_window(prep, settings, TimingWindow.of(settings, 3, first=False)) for _ in range(2)]
    stats = replace(TimingStats.from_windows_ms(windows), host=prep.baseline_timing.host)
    assert len(stats.windows_ms) == 3 and stats.n == sum(len(w) for w in windows)
    assert settings.speedup_time_ms(stats) == min(stats.windows_ms)
