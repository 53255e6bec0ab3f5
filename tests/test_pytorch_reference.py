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


def test_baselines_need_a_cuda_device(small):
    from cudaperf.harness.pytorch_reference import time_reference

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the GPU test times the baselines")
    with pytest.raises(RuntimeError, match="CUDA device"):
        time_reference(prepare_pytorch(small, seed=0, n_trials=2))


def test_the_inputs_file_is_written_once_read_only_and_linked_into_each_run(small, tmp_path):
    """Every run of a prepared task shares one inputs file: written once, mode 0444 and not owned by the sandbox
    user (so no run can change what the next one reads), hard-linked into each run's directory."""
    import os
    import stat

    from cudaperf.harness.sandbox import NOBODY_UID, link_in

    prep = prepare_pytorch(small, seed=7, n_trials=2)
    path = prep.inputs_file()
    assert prep.inputs_file() == path  # once per preparation
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o444 and st.st_uid != NOBODY_UID
    data = torch.load(path, weights_only=True)
    assert torch.equal(data["trials"][1][0], prep.trials[1].inputs[0]) and len(data["params"]) == len(prep.parameters)
    for k in range(2):
        dst = tmp_path / f"run{k}.pt"
        link_in(path, dst)
        assert os.stat(dst).st_ino == st.st_ino


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


def test_outputs_of_the_right_size_always_fit_the_runners_limits(tmp_path):
    """KernelBench's 19_ReLU once failed every candidate: the runner's outputs file outgrew the sandbox's file-size
    limit. The limits now follow the trusted outputs: a process writing outputs of the expected size (as the
    runner does, with torch.save) succeeds under them, where under the fixed limits scaled down to this test's
    size it is killed by SIGXFSZ."""
    from cudaperf.harness.run_pytorch import disk_shortfall, output_limits
    from cudaperf.harness.sandbox import SandboxLimits, Workdir, run_sandboxed, scrubbed_env, share_file

    p = prepare_pytorch(PyTorchTask(id="big", source=BIG), seed=3, n_trials=2)
    need = sum(t.nbytes for trial in p.trials for t in trial.expected)
    assert need == 2 * 1024 * 4096 * 4
    small = SandboxLimits(wall_s=120, file_size_bytes=8 << 20, disk_bytes=16 << 20)
    sized = output_limits(p, small)
    assert sized.file_size_bytes >= need and sized.disk_bytes >= 2 * need and sized.wall_s == 120
    assert output_limits(p, SandboxLimits()).file_size_bytes == SandboxLimits().file_size_bytes  # small: as before
    script = ("import torch\n"
              "torch.save([torch.zeros(1024, 4096) for _ in range(2)], 'outputs.pt')\n"
              "torch.save([torch.zeros(1024, 4096) for _ in range(2)], 'timed_outputs.pt')\n")
    import sys

    for limits, ok in ((sized, True), (small, False)):
        with Workdir() as w:
            (w / "write.py").write_text(script)
            share_file(w / "write.py")
            r = run_sandboxed([sys.executable, "write.py"], w, limits=limits, env=scrubbed_env(w))
        assert r.ok == ok, (limits.file_size_bytes, r.describe(), r.stderr[-300:])
    assert disk_shortfall(tmp_path, sized) is None
    assert "GiB" in disk_shortfall(tmp_path, SandboxLimits(disk_bytes=1 << 60))
