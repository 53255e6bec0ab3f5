"""benchmarks/kernelbench_sample.py against a KernelBench-format folder written here (levels 1 to 3): every level
loaded with ids that keep the file stem, the sampled problem's candidate checked and built by nvcc, a problem that
is missing or whose formula changed skipped with its reason."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "kernelbench_sample", Path(__file__).resolve().parents[1] / "benchmarks" / "kernelbench_sample.py")
kb = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(kb)

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """{doc}"""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {body}


def get_inputs():
    return [torch.rand(64, 96)]


def get_init_inputs():
    return []
'''


def _folder(root: Path) -> Path:
    kbdir = root / "KernelBench"
    files = {"level1/19_ReLU.py": ("ReLU.", "torch.relu(x)"),
             "level1/22_Tanh.py": ("Tanh, changed.", "torch.tanh(2 * x)"),
             "level1/1_Square_matrix_multiplication_.py": ("Not sampled.", "x @ x.t()"),
             "level2/5_Add_two.py": ("Level 2.", "x + 2"), "level3/7_Tiny_net.py": ("Level 3.", "x * 3")}
    for rel, (doc, body) in files.items():
        p = kbdir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(PROBLEM.format(doc=doc, body=body))
    return kbdir


def test_every_elementwise_candidate_is_for_a_known_formula():
    assert set(kb.DEFAULT_SAMPLE) <= set(kb.ELEMENTWISE)
    for stem in kb.ELEMENTWISE:
        text = kb.candidate(stem)
        assert text.startswith("<OUTPUT_CUDA>") and "kernel_forward" in text and kb.ELEMENTWISE[stem][1] in text


def test_sample_loads_every_level_and_builds_the_candidates(tmp_path, capsys):
    kbdir = _folder(tmp_path)
    out = tmp_path / "out"
    assert kb.main(["--kernelbench", str(kbdir), "--out", str(out), "--problems", "19_ReLU,22_Tanh,21_Sigmoid"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["levels"] == {"level1": 3, "level2": 1, "level3": 1}
    assert s["sampled"] == ["19_ReLU"]
    assert any(x.startswith("22_Tanh: its forward no longer holds") for x in s["skipped"])
    assert any(x.startswith("21_Sigmoid: no level1/21_Sigmoid.py") for x in s["skipped"])
    (row,) = s["results"]
    assert row["task"] == "level1_19_ReLU"
    if not s["gpu"]:  # checked and built by nvcc, then unscored for want of a GPU, not rejected
        assert row["status"] == "unscored" and row["stage"] == "compiled", row
    else:
        assert row["correct"], row
    assert "loaded 5 problems: level1 3, level2 1, level3 1" in capsys.readouterr().out


def test_a_missing_level_is_a_clear_error(tmp_path, capsys):
    kbdir = _folder(tmp_path)
    for f in (kbdir / "level3").iterdir():
        f.unlink()
    (kbdir / "level3").rmdir()
    import pytest

    with pytest.raises(SystemExit):
        kb.main(["--kernelbench", str(kbdir), "--out", str(tmp_path / "o")])
    assert "level3: not a folder" in capsys.readouterr().err
