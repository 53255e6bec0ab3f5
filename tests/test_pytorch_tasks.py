"""PyTorch problems: loading KernelBench-format files, the degenerate-problem filter (the reference runs on the
CPU with torch), and the static checks that KernelBench-style hacks fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaperf.tasks.pytorch import (
    PyTorchTask,
    builtin_pytorch_dir,
    check_pytorch_candidate,
    degenerate_reasons,
    load_pytorch_tasks,
)
from cudaperf.tasks.schema import TaskError


def test_builtin_problems_load_with_ids_and_descriptions():
    tasks = load_pytorch_tasks(builtin_pytorch_dir())
    assert len(tasks) >= 24
    ids = {t.id for t in tasks}
    assert {"relu", "layer_norm", "linear_relu"} <= ids
    assert all(t.kind == "pytorch" and t.description for t in tasks)


def test_malformed_problems_name_the_file_and_what_is_missing(tmp_path):
    (tmp_path / "level1").mkdir()
    bad = tmp_path / "level1" / "3_Broken.py"
    bad.write_text("import torch\nclass Model:\n    pass\ndef get_inputs():\n    return []\n")
    with pytest.raises(TaskError, match=r"3_Broken.py: .*Model has no forward.*no function get_init_inputs"):
        load_pytorch_tasks(tmp_path)
    bad.write_text("def (:\n")
    with pytest.raises(TaskError, match=r"3_Broken.py:1: not valid Python"):
        load_pytorch_tasks(tmp_path)
    with pytest.raises(TaskError, match="no such file"):
        load_pytorch_tasks(tmp_path / "nope")


def test_ids_follow_relative_paths(tmp_path):
    src = (builtin_pytorch_dir() / "relu.py").read_text()
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "19_ReLU.py").write_text(src)
    (tmp_path / "level1" / "1_Square_matrix_multiplication_.py").write_text(src)
    (tmp_path / "level1" / "2 odd-name.py").write_text(src)
    assert [t.id for t in load_pytorch_tasks(tmp_path)] == [
        "level1_19_ReLU", "level1_1_Square_matrix_multiplication_", "level1_2_odd_name"]


torch = pytest.importorskip("torch")


def _problem(forward: str, inputs: str = "[torch.randn(64, 33)]") -> PyTorchTask:
    src = ("import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.w = nn.Parameter(torch.randn(33))\n"
           f"    def forward(self, x):\n        return {forward}\n\n"
           f"def get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n    return []\n")
    return PyTorchTask(id="p", source=src)


def test_degenerate_filter():
    assert degenerate_reasons(_problem("torch.relu(x) * self.w")) == []
    assert any("tiny" in r for r in degenerate_reasons(_problem("x * 1e-9")))
    assert any("constant" in r for r in degenerate_reasons(_problem("x.sum() * 0 + 3 + 0 * x")))
    assert any("input-insensitive" in r for r in degenerate_reasons(_problem("self.w.expand(64, 33) + 0 * x")))
    # a scalar statistic that every input draw gives alike (a fixed answer would pass)
    assert any("input-insensitive" in r for r in degenerate_reasons(_problem("(x.abs() < 1e6).float().mean()")))
    # x - x is exactly zero whatever the inputs
    assert any("tiny" in r for r in degenerate_reasons(_problem("(x - x) * self.w")))


def test_builtin_problems_are_not_degenerate():
    for t in load_pytorch_tasks(builtin_pytorch_dir()):
        assert degenerate_reasons(t) == [], t.id


GOOD = (Path(__file__).parent / "fixtures" / "pytorch" / "relu_modelnew.py").read_text()


@pytest.mark.parametrize("edit,expect", [
    (("return self.ext.relu_cuda(x)", "return torch.relu(x)"), "calls torch.relu"),
    (("return self.ext.relu_cuda(x)", "return torch.nn.functional.relu(x)"), "calls torch.nn.functional.relu"),
    (("return self.ext.relu_cuda(x)", "return x.clamp(min=0)"), "calls .clamp()"),
    (("return self.ext.relu_cuda(x)", "return x @ x.t()"), "multiplies matrices with @"),
    (("        x = x.contiguous()\n",
      "        try:\n            return self.ext.relu_cuda(x)\n        except Exception:\n            return x\n"),
     "try/except"),
    (("import torch\n", "import torch\nimport threading\n"), "import of threading"),
    (("import torch\n", "import torch\nimport time\n"), "import of time"),
    (("        x = x.contiguous()\n", "        s = torch.cuda.Stream()\n"), "extra streams"),
    (("class ModelNew", "class Lazy(torch.Tensor):\n    pass\n\nclass ModelNew"), "subclasses torch.Tensor"),
    (("class ModelNew", "torch.cuda.synchronize = lambda: None\n\nclass ModelNew"), "monkey-patching"),
    (("relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);", ""), "never launched"),
    (("class ModelNew", "class Other"), "no class ModelNew"),
    (("class ModelNew(torch.nn.Module)", "class ModelNew(Model)"), "subclassing the reference Model"),
    (("    def forward(self, x):", "    def forward_unused(self, x):"), "defines no forward"),
])
def test_hacks_are_rejected(edit, expect):
    assert check_pytorch_candidate(GOOD).ok, check_pytorch_candidate(GOOD).reasons
    src = GOOD.replace(*edit)
    assert src != GOOD
    res = check_pytorch_candidate(src)
    assert not res.ok and any(expect in r for r in res.reasons), res.reasons
