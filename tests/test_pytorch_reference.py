"""The trusted side of PyTorch tasks, on the CPU: trials from the reference under the pinned precision policy,
and the output verdict (count, dtype, shape, per-dtype tolerance, non-finite values)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cudaperf.harness.pytorch_reference import compare_outputs, prepare_pytorch  # noqa: E402
from cudaperf.tasks.pytorch import PyTorchTask, builtin_pytorch_dir, load_pytorch_tasks  # noqa: E402

SMALL = '''
import torch
from torch import nn

batch_size = 6
features = 5


class Model(nn.Module):
    """y = relu(x W^T + b)"""

    def __init__(self, features):
        super().__init__()
        self.lin = nn.Linear(features, 3)
        self.register_buffer("offset", torch.full((3,), 0.5))

    def forward(self, x):
        return torch.relu(self.lin(x)) + self.offset


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
'''


@pytest.fixture()
def small():
    return PyTorchTask(id="small", source=SMALL)


def test_trials_alternate_two_sizes_with_fresh_seeds_and_pinned_precision(small):
    torch.backends.cuda.matmul.allow_tf32 = True
    p = prepare_pytorch(small, seed=10, n_trials=4)
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    assert [t.config for t in p.trials] == [{"batch_size": 6}, {"batch_size": 4}] * 2
    assert [t.seed for t in p.trials] == [10, 11, 12, 13]
    assert [t.specs[0].shape for t in p.trials] == [(6, 3), (4, 3), (6, 3), (4, 3)]
    assert p.trials[0].specs[0].dtype == "float32" and "two sizes" in p.sizes_note
    assert not torch.equal(p.trials[0].inputs[0], p.trials[2].inputs[0])
    assert [n for n, _ in p.parameters] == ["lin.weight", "lin.bias", "offset"]
    again = prepare_pytorch(small, seed=10, n_trials=4)
    assert all(torch.equal(a.expected[0], b.expected[0]) for a, b in zip(p.trials, again.trials))
    # the expected outputs are the reference's own on those inputs
    ns: dict = {}
    exec(SMALL, ns)
    torch.manual_seed(1234)
    m = ns["Model"](5)
    assert torch.allclose(m(p.trials[1].inputs[0]), p.trials[1].expected[0])


def test_a_problem_with_fixed_shapes_keeps_one_size():
    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    p = prepare_pytorch(task, seed=0, n_trials=2)
    assert [t.config for t in p.trials] == [{}, {}] and "one size" in p.sizes_note
    with pytest.raises(ValueError, match="n_trials"):
        prepare_pytorch(task, seed=0, n_trials=1)


def test_verdicts(small):
    e = (torch.tensor([1.0, -2.0, float("nan"), float("inf")]),)
    assert compare_outputs(small, e, (e[0].clone(),)) is None
    assert compare_outputs(small, e, (e[0] + 5e-5,)) is None  # within atol 1e-4 + rtol 1e-4 (NaN/inf positions same)
    assert "outside" in compare_outputs(small, e, (e[0] * 1.01,))
    assert "outside" in compare_outputs(small, e, (torch.zeros(4),))
    assert "dtype float64" in compare_outputs(small, e, (e[0].double(),))
    assert "shape (2, 2)" in compare_outputs(small, e, (e[0].reshape(2, 2),))
    assert "2 outputs" in compare_outputs(small, e, (e[0], e[0]))
    assert "a list" in compare_outputs(small, e, ([1.0],))
    nan_for_value = e[0].clone()
    nan_for_value[0] = float("nan")
    assert "outside" in compare_outputs(small, e, (nan_for_value,))
    ints = (torch.tensor([1, 2, 3]),)
    assert compare_outputs(small, ints, (torch.tensor([1, 2, 3]),)) is None
    assert "1 of 3 elements differ" in compare_outputs(small, ints, (torch.tensor([1, 2, 4]),))
    b16 = (torch.tensor([1.0, 2.0], dtype=torch.bfloat16),)
    assert compare_outputs(small, b16, (b16[0] * 1.01,)) is None  # bf16 tolerance 2e-2
    assert "outside" in compare_outputs(small, (b16[0].float(),), (b16[0].float() * 1.01,))  # fp32: 1e-4


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_verdicts_are_the_same_wherever_compared(small, monkeypatch, device):
    """Values compared a chunk at a time on a device (``compare_outputs(device=)``: the harness's GPU in a run)
    give the CPU's verdict and message, chunk borders included (three elements a chunk here)."""
    import cudaperf.harness.pytorch_reference as pr

    monkeypatch.setattr(pr, "COMPARE_CHUNK", 3)
    e = torch.tensor([1.0, -2.0, float("nan"), float("inf"), 0.5, -0.0, 3.0])
    off = e.clone()
    off[5] = 1e-3  # one element outside atol 1e-4 + rtol 1e-4, in the second chunk
    nan = e.clone()
    nan[6] = float("nan")  # the last chunk
    ints = torch.tensor([1, 2, 3, 4, 5])
    cases = [(e, e.clone()), (e, e + 5e-5), (e, off), (e, nan), (e, e * 1.01), (ints, ints.clone()),
             (ints, torch.tensor([1, 2, 3, 4, 6]))]
    for want_ok, (exp, got) in zip([True, True, False, False, False, True, False], cases):
        on_cpu = pr._compare_values(small, 0, exp, got)
        assert (on_cpu is None) == want_ok, on_cpu
        if device == "cpu":  # the device route (each chunk copied there) against the plain one
            assert pr._compare_values(small, 0, exp, got, "cpu") == on_cpu
        else:
            assert pr.compare_outputs(small, (exp,), (got,), device="cuda") == on_cpu
    assert "1 of 7 elements outside" in pr._compare_values(small, 0, e, off)


def test_baselines_need_a_cuda_device(small):
    from cudaperf.harness.pytorch_reference import time_reference

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the GPU test times the baselines")
    with pytest.raises(RuntimeError, match="CUDA device"):
        time_reference(prepare_pytorch(small, seed=0, n_trials=2))


def test_the_inputs_are_packed_once_sealed_and_read_without_a_copy(small):
    """Every run of a prepared task shares one memory file of inputs: written once, sealed (no run can change what
    the next one reads), and read back as views of its pages, equal to the trials' inputs."""
    import errno
    import os

    from cudaperf.harness.native.tensor_pack import read_pack

    prep = prepare_pytorch(small, seed=7, n_trials=2)
    fd = prep.inputs_fd()
    assert prep.inputs_fd() == fd  # once per preparation
    with pytest.raises(OSError) as err:
        os.pwrite(fd, b"x", 0)
    assert err.value.errno == errno.EPERM
    with pytest.raises(OSError):
        os.ftruncate(fd, 1)
    data = read_pack(fd)
    assert torch.equal(data["trials"][1][0], prep.trials[1].inputs[0]) and len(data["params"]) == len(prep.parameters)
    assert data["init"] == list(prep.init_inputs)
    data["trials"][0][0].fill_(7.0)  # copy-on-write: the next reader sees the inputs as they were
    assert torch.equal(read_pack(fd)["trials"][0][0], prep.trials[0].inputs[0])


def test_the_pack_keeps_every_dtype_shape_and_plain_value():
    import os

    from cudaperf.harness.native.tensor_pack import memory_file, read_pack, write_pack

    obj = {"t": [torch.arange(6, dtype=torch.int64).reshape(2, 3), torch.tensor(2.5, dtype=torch.bfloat16),
                 torch.tensor([True, False]), torch.zeros(0, 4), torch.randn(3, 5).t()],
           "v": (1, 2.0, None, "s", [True])}
    fd = memory_file("test-pack")
    try:
        write_pack(fd, obj)
        back = read_pack(fd)
    finally:
        os.close(fd)
    for a, b in zip(obj["t"], back["t"]):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    assert back["v"] == obj["v"]
    with pytest.raises(TypeError, match="cannot pass a set"):
        write_pack(-1, {"bad": {1}})


BIG = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1024, 4096)]


def get_init_inputs():
    return []
'''


def test_large_outputs_travel_in_memory_under_small_file_limits():
    """KernelBench's 19_ReLU (6.4 GB a tensor) once left every candidate unscored: its outputs, written to files,
    outgrew the disk. Outputs now travel in a memory file the harness sizes from the trusted outputs: a sandboxed
    process under file-size and disk limits far below the outputs' size reads the inputs' pack, stores its outputs
    in their slots and the harness judges them; it can neither grow the outputs' file nor write the inputs."""
    import sys

    from cudaperf.harness.run_pytorch import PACK, _Outputs
    from cudaperf.harness.sandbox import SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env, share_file

    p = prepare_pytorch(PyTorchTask(id="big", source=BIG), seed=3, n_trials=2)
    need = sum(t.nbytes for trial in p.trials for t in trial.expected)
    assert need == 2 * 1024 * 4096 * 4
    small = SandboxLimits(wall_s=120, file_size_bytes=1 << 20, disk_bytes=2 << 20)
    outputs = _Outputs(p)
    assert outputs.nbytes >= need
    script = f"""
import json, mmap, os, sys
import torch
import tensor_pack
job = json.load(open("job.json"))
data = tensor_pack.read_pack(job["inputs_fd"])
buf = mmap.mmap(job["outputs_fd"], job["outputs_bytes"], flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
reports = []
for k, (x,) in enumerate(data["trials"]):
    y = torch.relu(x) if k == 0 else torch.relu(x) + float(sys.argv[1])
    tensor_pack.slot_tensor(buf, job["slots"][k][0], list(y.shape), "float32").copy_(y)
    reports.append([dict(tensor_pack.describe_output(y), stored=True)])
json.dump(reports, open("trials.json", "w"))
for what, fn in (("grow", lambda: os.ftruncate(job["outputs_fd"], job["outputs_bytes"] * 2)),
                 ("write inputs", lambda: os.pwrite(job["inputs_fd"], b"x", 0))):
    try:
        fn()
        print(what, "succeeded")
    except OSError:
        print(what, "refused")
"""
    try:
        for shift, expect_ok in (("0", True), ("1", False)):
            with Workdir() as w:
                (w / "run.py").write_text(script)
                share_file(w / "run.py")
                copy_in(PACK, w, "tensor_pack.py")
                (w / "job.json").write_text(__import__("json").dumps({
                    "inputs_fd": p.inputs_fd(), "outputs_fd": outputs.fd, "outputs_bytes": outputs.nbytes,
                    "slots": outputs.slots}))
                share_file(w / "job.json")
                r = run_sandboxed([sys.executable, "run.py", shift], w, limits=small, env=scrubbed_env(w),
                                  pass_fds=(p.inputs_fd(), outputs.fd))
                assert r.ok, (r.describe(), r.stderr[-500:])
                assert "grow refused" in r.stdout and "write inputs refused" in r.stdout, r.stdout
                reports = __import__("json").loads((w / "trials.json").read_text())
            verdicts = []
            for k, trial in enumerate(p.trials):
                got, why = outputs.got(k, reports[k])
                assert why is None
                verdicts.append(compare_outputs(p.task, trial.expected, got))
                del got
            assert verdicts[0] is None
            assert (verdicts[1] is None) == expect_ok, verdicts[1]
    finally:
        outputs.close()


def test_an_untrusted_output_report_gives_the_candidate_a_clear_failure():
    """The runner's report of its outputs is the candidate's: other dtypes and shapes come out as a wrong answer
    naming them, a non-tensor by its type, and a report that is not one as the candidate's failure."""
    from cudaperf.harness.run_pytorch import _Outputs

    p = prepare_pytorch(PyTorchTask(id="big", source=BIG), seed=3, n_trials=2)
    outputs = _Outputs(p)
    try:
        e = p.trials[0].expected
        got, why = outputs.got(0, [{"dtype": "float16", "shape": list(e[0].shape)}])
        assert "dtype float16, expected float32" in compare_outputs(p.task, e, got)
        got, why = outputs.got(0, [{"dtype": "float32", "shape": [3]}])
        assert "shape (3,), expected" in compare_outputs(p.task, e, got)
        got, why = outputs.got(0, [{"type": "int"}])
        assert "a int, expected a tensor" in compare_outputs(p.task, e, got)
        got, why = outputs.got(0, [{"dtype": "float32", "shape": list(e[0].shape)}, {"type": "int"}])
        assert "not stored" in why
        for bad in ({"dtype": "os", "shape": [1]}, {"dtype": "float32", "shape": [-1]}, "x"):
            got, why = outputs.got(0, [bad])
            assert got is None and why
        got, why = outputs.got(0, None)
        assert got is None and "not reported" in why
    finally:
        outputs.close()


def test_the_comparison_in_chunks_reports_as_one_pass(monkeypatch):
    """Large outputs are compared a chunk at a time; the message (first bad element, count, max error) is the
    same as in one pass."""
    import cudaperf.harness.pytorch_reference as ref

    task = PyTorchTask(id="big", source=BIG)
    e = torch.linspace(-1, 1, 1000)
    g = e.clone()
    g[[10, 500, 999]] += torch.tensor([0.5, 2.0, float("nan")])
    gi, ei = torch.arange(100), torch.arange(100)
    gi[[3, 77]] = -1
    whole = (compare_outputs(task, [e], [g]), compare_outputs(task, [ei], [gi]))
    monkeypatch.setattr(ref, "COMPARE_CHUNK", 7)
    chunked = (compare_outputs(task, [e], [g]), compare_outputs(task, [ei], [gi]))
    assert chunked == whole
    assert "output 0[10]" in whole[0] and "3 of 1000" in whole[0] and "max abs err 2" in whole[0]
    assert "output 0[3]" in whole[1] and "2 of 100 elements differ" in whole[1]


def test_timed_inputs_are_perturbed_alike_in_the_runner_and_the_harness():
    """Timed calls never see inputs twice: each call's fresh copies are perturbed by its seed (a few elements take
    other elements' values, floating-point tensors only). A sandboxed process perturbing with the runner's copy of
    the code gets what the harness's reference expects; outputs cached from the unperturbed inputs do not."""
    import json
    import sys

    from cudaperf.harness.native.tensor_pack import call_seed, perturb
    from cudaperf.harness.run_pytorch import PACK, _Outputs
    from cudaperf.harness.sandbox import Workdir, copy_in, run_sandboxed, scrubbed_env, share_file

    x = torch.randn(4096)
    ints = torch.arange(100)
    a, b = [x.clone(), ints.clone()], [x.clone(), ints.clone()]
    perturb(a, 99)
    perturb(b, 99)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], ints)  # deterministic; integers left alone
    changed = (a[0] != x).nonzero().flatten()
    assert 1 <= changed.numel() <= 8 and set(a[0][changed].tolist()) <= set(x.tolist())
    c = [x.clone()]
    perturb(c, 0)
    assert torch.equal(c[0], x)
    assert call_seed(5, 0) != call_seed(5, 1) and call_seed(0, 3) == 0

    p = prepare_pytorch(PyTorchTask(id="big", source=BIG), seed=3, n_trials=2)
    assert p.perturbs()
    seed = call_seed(12345, 7)
    want = p.expected_perturbed(1, seed)
    assert compare_outputs(p.task, p.trials[1].expected, want) is not None  # the perturbation shows
    outputs = _Outputs(p)
    script = """
import json, mmap, sys
import torch
import tensor_pack
job = json.load(open("job.json"))
x = tensor_pack.read_pack(job["inputs_fd"])["trials"][1][0]
mine = [x.clone()]
if sys.argv[1] == "fresh":
    tensor_pack.perturb(mine, job["seed"])
y = torch.relu(mine[0])
buf = mmap.mmap(job["outputs_fd"], job["outputs_bytes"], flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
tensor_pack.slot_tensor(buf, job["slots"][1][0], list(y.shape), "float32").copy_(y)
json.dump([dict(tensor_pack.describe_output(y), stored=True)], open("timed.json", "w"))
"""
    try:
        for mode, ok in (("fresh", True), ("cached", False)):
            with Workdir() as w:
                (w / "run.py").write_text(script)
                share_file(w / "run.py")
                copy_in(PACK, w, "tensor_pack.py")
                (w / "job.json").write_text(json.dumps({
                    "inputs_fd": p.inputs_fd(), "outputs_fd": outputs.fd, "outputs_bytes": outputs.nbytes,
                    "slots": outputs.slots, "seed": seed}))
                share_file(w / "job.json")
                r = run_sandboxed([sys.executable, "run.py", mode], w, env=scrubbed_env(w),
                                  pass_fds=(p.inputs_fd(), outputs.fd))
                assert r.ok, (r.describe(), r.stderr[-500:])
                got, why = outputs.got(1, json.loads((w / "timed.json").read_text()))
            assert (compare_outputs(p.task, want, got) is None) == ok
            del got
    finally:
        outputs.close()


def test_the_recheck_follows_the_windows_calls():
    """The re-checked call of each trial is its last in the window (calls rotate over the trials after the warm-up
    calls); a window reporting fewer calls than trials is the candidate's failure."""
    from cudaperf.harness.native.tensor_pack import call_seed
    from cudaperf.harness.run_pytorch import _timed_seeds

    p = prepare_pytorch(PyTorchTask(id="big", source=BIG), seed=3, n_trials=2)
    # calls K = 3..7 on trials 0,1,0,1,0: trial 0's last at K=7, trial 1's at K=6
    assert _timed_seeds(p, 777, 3, 5) == [call_seed(777, 7), call_seed(777, 6)]
    assert "fewer than the 2 trials" in _timed_seeds(p, 777, 3, 1)


def test_a_batch_defers_the_next_preparation_for_tasks_too_large_to_hold_two():
    """The trials keep views of the inputs' pack (no second copy); a batch prepares the next task beside the
    current one only while three times the current task's host memory is available."""
    from cudaperf.harness.batch_pytorch import host_bytes, mem_available_bytes

    p = prepare_pytorch(PyTorchTask(id="big", source=BIG), seed=3, n_trials=2)
    one = 1024 * 4096 * 4
    assert host_bytes(p) == 2 * one + 2 * 2 * one
    assert 0 < mem_available_bytes()
    from cudaperf.harness.native.tensor_pack import read_pack

    assert torch.equal(read_pack(p.inputs_fd())["trials"][1][0], p.trials[1].inputs[0])
