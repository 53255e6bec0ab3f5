"""The harness's layering: ``evaluate`` dispatches to one runner per task kind, and no runner imports it back
(the record helpers they share live in ``cudaperf.harness.records``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "cudaperf" / "harness"
RUNNERS = ("run_c_function.py", "run_c_program.py", "run_cuda_kernel.py", "run_pytorch.py", "batch_pytorch.py",
           "torch_fast.py", "modelnew_build.py", "records.py", "pytorch_reference.py")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


@pytest.mark.parametrize("name", RUNNERS)
def test_no_runner_imports_evaluate(name):
    assert "cudaperf.harness.evaluate" not in _imports(HARNESS / name)


def test_evaluate_dispatches_to_every_runner():
    used = _imports(HARNESS / "evaluate.py")
    assert {"cudaperf.harness.run_c_function", "cudaperf.harness.run_c_program", "cudaperf.harness.run_cuda_kernel",
            "cudaperf.harness.run_pytorch", "cudaperf.harness.records"} <= used
