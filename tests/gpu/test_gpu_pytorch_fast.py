"""PyTorch fast-path candidates end to end on the GPU: trials against the reference, in-place mutation, a side
stream, timing with CUDA events and an L2 flush, the re-check of timed outputs, and kernel evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs PyTorch with a CUDA device")]

FIX = Path(__file__).parent.parent / "fixtures" / "torch_fast"


@pytest.fixture(scope="module")
def relu_prepared():
    from cudaperf.harness.pytorch_reference import prepare_pytorch
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    return prepare_pytorch(task, seed=5, n_trials=3, device="cuda")


def _run(prepared, name):
    from cudaperf.harness.run_pytorch import run_pytorch_fast, sandbox_python
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.torch_fast import build_fast_candidate

    _, why = sandbox_python()
    if why:
        pytest.skip(why)
    code = (FIX / name).read_text()
    b = build_fast_candidate(code)
    assert b.stage == "ok", b.info.log
    return run_pytorch_fast(prepared, code, b, HarnessSettings(budget_ms=300, test_timeout_s=60))


def test_correct_candidate_is_timed_with_its_kernel_seen(relu_prepared):
    out = _run(relu_prepared, "relu.cu")
    assert out.correct and out.failure is None, out.failure
    assert out.trials_passed == 3 and out.timing.n >= 5 and out.timing.median_ms > 0
    assert any(k.startswith("relu_kernel") for k in out.kernels)


def test_wrong_and_in_place_candidates_fail(relu_prepared):
    from cudaperf.harness.result import FailureKind

    wrong = _run(relu_prepared, "relu_wrong.cu")
    assert wrong.failure.kind == FailureKind.WRONG_OUTPUT and "outside" in wrong.failure.message
    in_place = _run(relu_prepared, "relu_in_place.cu")
    assert in_place.failure.kind == FailureKind.WRONG_OUTPUT and "in place" in in_place.failure.message


def test_side_stream_work_is_waited_for_and_timed(relu_prepared):
    out = _run(relu_prepared, "relu_side_stream.cu")
    assert out.correct, out.failure
    assert any(k.startswith("relu_kernel") for k in out.kernels)


def test_eager_and_compiled_baselines_are_timed(relu_prepared):
    from cudaperf.harness.pytorch_reference import time_reference

    eager = time_reference(relu_prepared, budget_ms=300)
    compiled = time_reference(relu_prepared, compiled=True, budget_ms=300)
    assert eager.n >= 5 and compiled.n >= 5 and eager.median_ms > 0 and compiled.median_ms > 0


def test_kernelbench_style_modelnew_runs_in_the_sandbox(relu_prepared):
    """A ModelNew with a load_inline extension (built inside the sandboxed process) is accepted and timed."""
    from cudaperf.harness.run_pytorch import run_pytorch_candidate, sandbox_python
    from cudaperf.harness.settings import HarnessSettings

    _, why = sandbox_python()
    if why:
        pytest.skip(why)
    code = (Path(__file__).parent.parent / "fixtures" / "pytorch" / "relu_modelnew.py").read_text()
    out = run_pytorch_candidate(relu_prepared, code, HarnessSettings(budget_ms=300))
    assert out.correct, out.failure
    assert any(k.startswith("relu_kernel") for k in out.kernels)


@pytest.mark.parametrize("name,stage,kind,words", [
    ("hack_no_launch.cu", "ran", "wrong_output", "outside"),          # poisoned outputs come back NaN
    ("hack_cache.cu", "ran", "wrong_output", "trial 1"),               # the second trial's inputs differ
    ("hack_zeros.cu", "ran", "wrong_output", "outside"),
    ("relu_in_place.cu", "ran", "wrong_output", "in place"),
    ("relu_wrong.cu", "ran", "wrong_output", "outside"),
])
def test_adversarial_fast_candidates_are_rejected(relu_prepared, name, stage, kind, words):
    out = _run(relu_prepared, name)
    assert not out.correct and out.stage.value == stage and out.failure.kind.value == kind, out.failure
    assert words in out.failure.message


def test_precision_downgrade_is_rejected_by_the_fp32_tolerance():
    """linear_relu (K = 1024, TF32 off): the same tiled kernel passes in fp32 and fails with its inputs rounded to
    fp16, the shortcut that tensor-core precision would take."""
    from cudaperf.harness.pytorch_reference import prepare_pytorch
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "linear_relu")
    prepared = prepare_pytorch(task, seed=11, n_trials=2, device="cuda")
    good = _run(prepared, "linear_relu.cu")
    assert good.correct, good.failure
    bad = _run(prepared, "hack_fp16_linear.cu")
    assert not bad.correct and bad.stage.value == "ran" and bad.failure.kind.value == "wrong_output", bad.failure
    assert "outside" in bad.failure.message


def test_evaluate_gives_a_speedup_over_eager(relu_prepared):
    from cudaperf.harness.evaluate import evaluate
    from cudaperf.harness.run_pytorch import sandbox_python
    from cudaperf.harness.settings import HarnessSettings

    _, why = sandbox_python()
    if why:
        pytest.skip(why)
    r = evaluate(relu_prepared.task, f"```cuda\n{(FIX / 'relu.cu').read_text()}\n```",
                 settings=HarnessSettings(budget_ms=300), prepared=relu_prepared)
    assert r.correct and r.status == "scored" and r.speedup > 0, r.failure
    assert r.baseline_timing.n >= 5 and len(r.tests) == 3 and r.pass_fraction == 1.0


def test_every_family_variant_is_correct_through_the_dataset_measurement(tmp_path):
    """One problem of every PyTorch family, measured as the dataset is (cudaperf.harness.batch_pytorch: runner
    processes started together, taking turns on the GPU): every variant matches the reference and is timed
    against eager PyTorch."""
    from cudaperf.dataset.build import build, torch_family_names
    from cudaperf.dataset.measure import MEASURE_SETTINGS, measure, select_candidates
    from cudaperf.dataset.store import Dataset
    from cudaperf.harness.run_pytorch import sandbox_python

    _, why = sandbox_python()
    if why:
        pytest.skip(why)
    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=sorted(torch_family_names()), n_tasks=1)
    cands = select_candidates(ds)
    summary = measure(ds, cands, store_path=tmp_path / "run.jsonl", run_id="gpu", gpus=[0],
                      settings=MEASURE_SETTINGS)
    assert summary.batch.pytorch.n_done == len(cands)
    rows = {m["candidate_id"]: m for m in ds.measurements}
    bad = {k: (m["status"], m["failure"]) for k, m in rows.items() if not (m["status"] == "scored" and m["correct"])}
    assert not bad, bad
    assert all(m["speedup"] and m["speedup"] > 0 and m["baseline_median_ms"] > 0 for m in rows.values())
    assert len({round(m["speedup"], 2) for m in rows.values()}) > len(rows) // 2  # variants differ in speed


ADV = Path(__file__).parent.parent / "fixtures" / "adversarial"


def test_records_rewritten_at_the_runners_exit_are_never_read(relu_prepared, tmp_path, monkeypatch):
    """fast_forged_timing.cu (a static destructor) and modelnew_forged_timing.py (an atexit handler) rewrite
    timing.json with 1 us samples when the runner exits: the harness read the samples at ``timing_done``, while the
    runner waited, so each is timed as the honest ReLU it is. (The fast one is built directly, with the build's
    object check off in a private build cache: the static checks and, since session 21, that check stop it
    earlier; this is the run-time defence behind them.)"""
    import cudaperf.harness.compile as compile_mod
    from cudaperf.harness.run_pytorch import run_pytorch_candidate, run_pytorch_fast, sandbox_python
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.torch_fast import build_fast_candidate

    _, why = sandbox_python()
    if why:
        pytest.skip(why)
    settings = HarnessSettings(budget_ms=300, test_timeout_s=60)
    honest = _run(relu_prepared, "relu.cu")
    code = (ADV / "fast_forged_timing.cu").read_text()
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "build-cache"))
    monkeypatch.setattr(compile_mod, "startup_code_reasons", lambda readelf_sections: [])
    b = build_fast_candidate(code)
    assert b.stage == "ok", b.info.log
    fast = run_pytorch_fast(relu_prepared, code, b, settings)
    assert fast.correct, fast.failure
    assert fast.timing.median_ms > 0.5 * honest.timing.median_ms, (fast.timing.median_ms, honest.timing.median_ms)
    modelnew = run_pytorch_candidate(relu_prepared, (ADV / "modelnew_forged_timing.py").read_text(), settings)
    if modelnew.correct:
        assert modelnew.timing.median_ms > 0.5 * honest.timing.median_ms
    else:
        assert modelnew.failure.kind.value in ("static_check", "timer_mismatch"), modelnew.failure


def test_samples_under_the_profiled_calls_gpu_time_get_no_credit(relu_prepared):
    """The floor check on the same records: an honest run passes it; forged 1 us samples against the profiled
    call's GPU time do not."""
    from cudaperf.harness.run_pytorch import timing_floor_failure
    from cudaperf.harness.settings import HarnessSettings

    honest = _run(relu_prepared, "relu.cu")
    assert honest.correct, honest.failure  # the floor check ran on its own samples and passed
    assert timing_floor_failure([0.001] * 5, 1000.0 * honest.timing.median_ms, HarnessSettings()) is not None


def test_outputs_cached_by_sampled_input_values_fail_the_timed_recheck(relu_prepared):
    """adversarial/fast_cache_sampled_inputs.cu computes each trial honestly (fresh inputs), then serves timed
    calls from a cache keyed by 64 sampled input values, copied by a kernel of its own. Timed calls see inputs
    perturbed per call, so the cached outputs are stale where the perturbation landed, and the re-check of each
    trial's last timed outputs against the reference on the same perturbed inputs fails it."""
    from cudaperf.harness.run_pytorch import run_pytorch_fast, sandbox_python
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.torch_fast import build_fast_candidate

    _, why = sandbox_python()
    if why:
        pytest.skip(why)
    code = (FIX.parent / "adversarial" / "fast_cache_sampled_inputs.cu").read_text()
    b = build_fast_candidate(code)
    assert b.stage == "ok", b.info.log
    out = run_pytorch_fast(relu_prepared, code, b, HarnessSettings(budget_ms=300, test_timeout_s=60))
    assert out.trials_passed == out.n_trials  # honest on fresh inputs
    assert not out.correct and out.failure.kind.value == "wrong_output_during_timing", out.failure
    assert "perturbed" in out.failure.message


def test_honest_candidates_pass_the_recheck_on_perturbed_inputs(relu_prepared):
    """The perturbation is the same in the runner (on the GPU) and in the harness (on the CPU, then the reference):
    an honest candidate's timed outputs match, over several runs (fresh secrets each)."""
    for _ in range(3):
        out = _run(relu_prepared, "relu.cu")
        assert out.correct and out.timing is not None, out.failure


def test_a_modelnew_built_ahead_runs_without_building_again(relu_prepared, tmp_path, monkeypatch):
    """``HarnessSettings.prebuild_modelnew``: the ReLU module's extension is built on the CPU, in a sandbox without
    the GPU's nodes, and its GPU run loads the tree (``phases_s`` says how long the runner took to get ready, with
    and without the tree; the speed itself is benchmarks/modelnew_prebuild.py's). A module that uses the GPU as it
    loads is left to its GPU run, and is still judged correct there."""
    from cudaperf.harness.modelnew_build import prebuild_modelnew, prebuild_unavailable
    from cudaperf.harness.run_pytorch import run_pytorch_candidate, sandbox_python
    from cudaperf.harness.settings import HarnessSettings

    _, why = sandbox_python()
    if why or prebuild_unavailable():
        pytest.skip(why or prebuild_unavailable())
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))
    settings = HarnessSettings(budget_ms=300, test_timeout_s=60, prebuild_modelnew=True)
    code = (Path(__file__).parent.parent / "fixtures" / "pytorch" / "relu_modelnew.py").read_text()
    pre = prebuild_modelnew(code)
    assert pre.status == "ok" and pre.ext is not None, pre.message
    warm: dict[str, float] = {}
    out = run_pytorch_candidate(relu_prepared, code, settings, prebuilt=pre.ext, phases_s=warm)
    assert out.correct, out.failure
    cold: dict[str, float] = {}
    out_cold = run_pytorch_candidate(relu_prepared, code, settings, phases_s=cold)
    assert out_cold.correct, out_cold.failure
    print(f"prebuild {pre.build_s} s; runner start-up with the tree {warm.get('startup_s'):.1f} s, "
          f"without {cold.get('startup_s'):.1f} s")
    gpu_at_import = code.replace("ext = load_inline(", "assert torch.cuda.is_available()\next = load_inline(")
    left = prebuild_modelnew(gpu_at_import)
    assert left.status == "none" and left.ext is None, left
    assert run_pytorch_candidate(relu_prepared, gpu_at_import, settings).correct


@pytest.mark.parametrize("ahead", [1, 3])
def test_prestarted_runners_keep_every_verdict(tmp_path, ahead):
    """``HarnessSettings.prestart_runners``: a policy's samples of one task (an honest ReLU, one with a side
    stream, a wrong one, one that hangs in its call, and a KernelBench-style module) through the batch with the
    next runner started beside the current one: each gets the verdict it gets alone (the hang's timeout does not
    spill over onto the next candidate, whose code loads only once the hung process is gone), and the candidates
    after the first waited for the load lock (``load_wait_s``). With ``prestart_ahead`` 3, three runners set up
    beside the running one and load one at a time, in the order they got ready."""
    from cudaperf.harness.batch_pytorch import run_pytorch_batch
    from cudaperf.harness.executor import Job
    from cudaperf.harness.run_pytorch import sandbox_python
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.store import ResultStore
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    _, why = sandbox_python()
    if why:
        pytest.skip(why)
    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    files = {"honest": FIX / "relu.cu", "side_stream": FIX / "relu_side_stream.cu", "wrong": FIX / "relu_wrong.cu",
             "hang": ADV / "fast_infinite.cu",
             "modelnew": Path(__file__).parent.parent / "fixtures" / "pytorch" / "relu_modelnew.py"}
    jobs = [Job("relu", name, f"```python\n{p.read_text()}```\n" if p.suffix == ".py"
                else f"<OUTPUT_CUDA>\n{p.read_text()}\n</OUTPUT_CUDA>\n") for name, p in files.items()]
    settings = HarnessSettings(budget_ms=300, test_timeout_s=20, prestart_runners=True, prestart_ahead=ahead)
    store = ResultStore(tmp_path / "prestart.jsonl")
    summary = run_pytorch_batch({"relu": task}, jobs, store, settings=settings, parallel=1, prestart=True)
    got = {r.candidate_id: r for r in store.read()}
    assert summary.n_done == len(jobs) and set(got) == set(files)
    verdict = {k: ("correct" if r.correct else r.failure.kind.value) for k, r in got.items()}
    assert verdict == {"honest": "correct", "side_stream": "correct", "wrong": "wrong_output", "hang": "timeout",
                       "modelnew": "correct"}, {k: (v, got[k].failure) for k, v in verdict.items()}
    assert all(r.status == "scored" for r in got.values())
    assert sum(r.durations_s.get("load_wait_s", 0.0) > 0.05 for r in got.values()) >= 1


def test_runners_forked_from_the_zygote_keep_every_verdict(relu_prepared):
    """HarnessSettings.pytorch_zygote: the same candidates (honest, on a side stream, wrong, in place, a cache of
    outputs, no launch) through runners forked from the zygote that imported torch, against exec'd runners: the
    same verdicts and failure kinds, the honest ones timed with their kernel seen, and every run forked."""
    from cudaperf.harness.run_pytorch import run_pytorch_fast, runner_zygote, sandbox_python
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.torch_fast import build_fast_candidate

    py, why = sandbox_python()
    if why:
        pytest.skip(why)
    z = runner_zygote(py)
    if z is None:
        pytest.skip("no zygote here (the harness is not root, or has no private root)")
    for name in ("relu.cu", "relu_side_stream.cu", "relu_wrong.cu", "relu_in_place.cu", "hack_cache.cu",
                 "hack_no_launch.cu"):
        code = (FIX / name).read_text()
        b = build_fast_candidate(code)
        outs = {}
        for forked in (False, True):
            before = z.spawned
            outs[forked] = run_pytorch_fast(relu_prepared, code, b, HarnessSettings(
                budget_ms=300, test_timeout_s=60, pytorch_zygote=forked))
            assert z.spawned == before + (1 if forked else 0), name
        a, f = outs[False], outs[True]
        assert (a.correct, a.stage, a.failure and a.failure.kind) == (f.correct, f.stage, f.failure and f.failure.kind), \
            (name, a.failure, f.failure)
        assert (f.sandbox_level or "").endswith("start=zygote"), (name, f.sandbox_level)
        assert a.sandbox_level is not None and not a.sandbox_level.endswith("start=zygote"), (name, a.sandbox_level)
        if a.correct:
            assert f.timing.n >= 5 and any(k.startswith("relu_kernel") for k in f.kernels), name


def test_a_quick_exit_ends_runners_without_their_exit_code_and_keeps_the_verdicts(relu_prepared):
    """HarnessSettings.pytorch_quick_exit: the runner ends by os._exit once its records are read. Honest, wrong
    and in-place candidates keep their verdicts; the candidate whose library's static destructor spins at exit
    (an adversarial entry: timeout without it, after the 30 s grace) is timed at its honest speed, its spin never
    started, so it is not ended by the exit grace. Each runner's exit phase is printed (-s), forked or not."""
    from cudaperf.harness.run_pytorch import run_pytorch_candidate, sandbox_python
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.torch_fast import build_fast_candidate

    _, why = sandbox_python()
    if why:
        pytest.skip(why)
    adversarial = Path(__file__).parent.parent / "fixtures" / "adversarial"
    for path in (FIX / "relu.cu", FIX / "relu_wrong.cu", FIX / "relu_in_place.cu",
                 adversarial / "fast_static_destructor_spin.cu"):
        code = path.read_text()
        b = build_fast_candidate(code)
        assert b.stage == "ok", b.info.log
        outs, exits = {}, {}
        for quick in (False, True):
            if not quick and path.name.startswith("fast_static"):
                continue  # 30 s of grace, then timeout: the adversarial suite's entry
            phases: dict[str, float] = {}
            outs[quick] = run_pytorch_candidate(relu_prepared, code, HarnessSettings(
                budget_ms=300, test_timeout_s=60, pytorch_quick_exit=quick), build=b, phases_s=phases)
            exits[quick] = phases.get("exit_s")
        q = outs[True]
        if path.name.startswith("fast_static"):
            assert q.correct and q.timing is not None, (q.failure, exits)
            print(path.name, "exit_s", exits)
            continue
        a = outs[False]
        assert (a.correct, a.stage, a.failure and a.failure.kind) == (q.correct, q.stage, q.failure and q.failure.kind)
        print(path.name, "exit_s", exits)
