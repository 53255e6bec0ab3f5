"""The adversarial suite on a GPU: every candidate of ``tests/fixtures/adversarial/manifest.json`` through the real
``evaluate()`` to its full expected verdict (status, failure kind, stage; or an alternative in its ``also``, which an
older GPU test accepts), one at a time, each task prepared once.

With ``CUDAPERF_ADVERSARIAL_TABLE=PATH`` one JSON line per candidate is appended there (file, task, expected,
observed status, stage, failure, reason, speedup): the rows of ``docs/ADVERSARIAL.md``'s GPU table
(``benchmarks/adversarial_table.py`` writes the same rows as markdown).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

_SPEC = importlib.util.spec_from_file_location(
    "adversarial_table", Path(__file__).resolve().parents[2] / "benchmarks" / "adversarial_table.py")
suite = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(suite)

ENTRIES = suite.load_manifest()
BY_FILE = {e["file"]: e for e in ENTRIES}
SETTINGS = suite.harness_settings(gpu=True)


@pytest.fixture(scope="module")
def preparations():
    return suite.GpuPreparations(SETTINGS)


def _needs_torch_runner() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs PyTorch with a CUDA device")
    from cudaperf.harness.run_pytorch import sandbox_python

    _, why = sandbox_python()
    if why:
        pytest.skip(why)


@pytest.mark.parametrize("name", list(BY_FILE))
def test_every_hostile_candidate_gets_its_expected_verdict(preparations, name):
    e = BY_FILE[name]
    if e["task_kind"].startswith("pytorch"):
        _needs_torch_runner()
    r = suite.evaluate_entry(e, settings=SETTINGS, prepared=preparations.get(e))
    table = os.environ.get("CUDAPERF_ADVERSARIAL_TABLE")
    if table:
        with open(table, "a") as fh:
            fh.write(json.dumps(suite.row(e, r, mode="gpu"), default=str) + "\n")
    assert suite.matches(suite.outcomes(e), r, suite.reason_for(e)), (name, suite.observed(r), r.failure)
    if e["expect"]["failure"] is None:  # timed honestly (or, for a gap, credited): say so in the record
        assert r.correct, r.failure
        if e["expect"]["stage"] == "timed":
            assert r.speedup is not None and r.speedup > 0
            if "max_speedup" in e:  # a forged timer is credited at its honest speed, not the forged one
                assert r.speedup <= e["max_speedup"], (name, r.speedup)
    else:
        assert not r.correct and r.speedup is None
        assert r.failure.attributed_to == "candidate"
