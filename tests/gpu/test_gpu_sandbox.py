"""The sandbox on a GPU: what one sandboxed run leaves in device memory must not reach the next run.

``tests/fixtures/hostile/gpu_residue.cu`` fills device memory with a pattern and ends without freeing it; the next
run allocates more than that and counts the pattern's words in what the driver gave it. A control in one process
scans the live buffer it filled (every word found), so a second run that finds nothing is not a broken probe."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import pytest

from cudaperf.harness.sandbox import SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env, share_file

pytestmark = pytest.mark.gpu

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"


@pytest.fixture(scope="module")
def residue(tmp_path_factory) -> Path:
    from cudaperf.harness.compile import _nvcc_in_sandbox

    out = tmp_path_factory.mktemp("gpu-residue")
    with Workdir(prefix="cudaperf-build-") as w:
        shutil.copy(HOSTILE / "gpu_residue.cu", w / "gpu_residue.cu")
        share_file(w / "gpu_residue.cu")
        ok, log = _nvcc_in_sandbox(["gpu_residue.cu", "-O2", "-arch=sm_90", "-o", "gpu_residue"], w)
        assert ok, log[-2000:]
        shutil.copy(w / "gpu_residue", out / "gpu_residue")
    return out / "gpu_residue"


def _run(exe: Path, *args: str) -> dict[str, int]:
    with Workdir() as w:
        prog = copy_in(exe, w, "program")
        run = run_sandboxed([str(prog), *args], w, env=scrubbed_env(w), limits=SandboxLimits(wall_s=120))
    assert run.ok, (run.describe(), run.stdout[-2000:], run.stderr[-2000:])
    return {k: int(v) for k, v in (ln.split()[:2] for ln in run.stdout.splitlines() if len(ln.split()) >= 2)}


def test_device_memory_left_by_a_run_does_not_reach_the_next(residue):
    seed = secrets.token_hex(8)
    ctl = _run(residue, "self", seed, "256")
    assert ctl["FOUND"] == ctl["WORDS"] == ctl["LEFT"] > 0, ctl  # the probe finds what is there
    left = _run(residue, "leave", seed, "4096")
    assert left["LEFT"] == 4096 * (1 << 20) // 8
    found = _run(residue, "find", seed, "16384")  # more than was left: the freed pages are among it
    assert found["WORDS"] == 16384 * (1 << 20) // 8
    assert found["FOUND"] == 0, (f"{found['FOUND']} of the first run's {left['LEFT']} words reached the next run "
                                 f"({found['ZERO']} zero words)")
