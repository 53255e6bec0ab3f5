"""The profile tier's aggregation formulas and its failure modes without a GPU or without ncu."""

from __future__ import annotations

import math

import pytest

from cudaperf.features.profile import METRICS, ProfilerUnavailable, aggregate, ncu_command, parse_ncu_csv, profile_features
from cudaperf.tasks import find_task, load_builtin_tasks


def _launch(**kw):
    base = {k: 0.0 for k in METRICS}
    base.update(kw)
    return base


def test_coalescing_is_weighted_by_requests():
    # 300 load requests at 100 % sector efficiency, 100 store requests at 12.5 %: (300*1 + 100*0.125) / 400
    rows = [_launch(gld_requests=300, gld_sectors=1200, gld_eff_pct=100.0, duration_ns=1000, occ_pct=80.0),
            _launch(gst_requests=100, gst_sectors=3200, gst_eff_pct=12.5, duration_ns=3000, occ_pct=40.0)]
    v = aggregate(rows)
    assert v["coalescing"] == pytest.approx((300 * 1.0 + 100 * 0.125) / 400)
    assert v["gld_sectors_per_request"] == pytest.approx(4.0)
    assert v["gst_sectors_per_request"] == pytest.approx(32.0)
    # achieved occupancy weighted by duration: (0.8*1000 + 0.4*3000) / 4000
    assert v["achieved_occupancy"] == pytest.approx(0.5)
    assert v["launches"] == 2 and v["kernel_ms"] == pytest.approx(0.004)


def test_flops_count_fma_twice_and_intensity_divides_by_dram_bytes():
    v = aggregate([_launch(op_fadd=10, op_fmul=5, op_ffma=100, op_dfma=1, dram_read=100, dram_write=50)])
    assert v["flops"] == 10 + 5 + 200 + 2
    assert v["arithmetic_intensity"] == pytest.approx(217 / 150)
    assert v["atomics"] == 0


def test_absent_traffic_is_nan_not_zero():
    v = aggregate([_launch(duration_ns=10, occ_pct=50.0)])
    assert math.isnan(v["coalescing"]) and math.isnan(v["gld_sectors_per_request"])
    assert math.isnan(v["arithmetic_intensity"]) and math.isnan(v["branch_divergence"])


def test_parse_skips_messages_and_the_units_row():
    metric_cols = ",".join(f'"{m}"' for m in METRICS.values())
    units = ",".join('"byte"' for _ in METRICS)
    vals = ",".join(f'"{i + 1}"' for i in range(len(METRICS)))
    text = "\n".join([
        "==PROF== Connected to process 12 (/w/candidate)",
        "program output line",
        f'"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",{metric_cols}',
        f'"","","","","","","","","",{units}',
        f'"0","12","candidate","h","saxpy_kernel","1","7","(256, 1, 1)","(4, 1, 1)",{vals}',
        "==PROF== Disconnected from process 12",
    ])
    rows = parse_ncu_csv(text)
    assert len(rows) == 1 and rows[0]["kernel"] == "saxpy_kernel"
    assert rows[0]["gld_sectors"] == 1.0 and rows[0][list(METRICS)[-1]] == float(len(METRICS))


def test_command_never_touches_clocks():
    cmd = ncu_command(__import__("pathlib").Path("/x/ncu"), ["./candidate"], 7)
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--launch-count") + 1] == "7" and cmd[-1] == "./candidate"


def test_missing_ncu_is_reported_as_unavailable(monkeypatch):
    monkeypatch.setenv("CUDAPERF_NCU", "/nonexistent/ncu")
    task = find_task(load_builtin_tasks(), "saxpy")
    with pytest.raises(ProfilerUnavailable, match="ncu"):
        profile_features(task, "__global__ void k() {}")


def test_parse_a_real_ncu_table(fixtures_dir):
    """ncu 2025.3.1's table for the bundled saxpy/fast candidate on the H200 (recorded there, 2026-11-29)."""
    rows = parse_ncu_csv((fixtures_dir / "ncu" / "saxpy_fast_h200.csv").read_text())
    assert len(rows) == 1 and rows[0]["kernel"] == "saxpy_kernel"
    missing = [k for k in METRICS if k not in rows[0]]
    assert not missing, missing
    v = aggregate(rows)
    assert v["gld_sectors_per_request"] == pytest.approx(4.0, rel=0.01)  # 4-byte coalesced loads
    assert v["coalescing"] == pytest.approx(1.0, abs=0.01)
    assert 0 < v["achieved_occupancy"] <= 1 and v["flops"] > 0 and v["dram_bytes"] > 0 and v["atomics"] == 0
