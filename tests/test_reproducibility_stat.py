"""benchmarks/reproducibility_stat.py --pooled, run as a script over stores written here."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks/reproducibility_stat.py"


def _store(path: Path, base_windows: list[float], base_min: float, cand_windows: list[float], cand_min: float):
    row = {"task_id": "t", "candidate_id": "c", "status": "scored", "correct": True,
           "speedup": min(base_windows) / min(cand_windows),  # as the harness computes it: fastest windows
           "baseline_timing": {"median_ms": sorted(base_windows)[len(base_windows) // 2], "min_ms": base_min,
                               "windows_ms": base_windows},
           "candidate_timing": {"median_ms": sorted(cand_windows)[len(cand_windows) // 2], "min_ms": cand_min,
                                "windows_ms": cand_windows}}
    path.write_text(json.dumps(row) + "\n")
    return path


def test_pooled_runs_take_each_sides_fastest_over_its_runs(tmp_path):
    stores = [_store(tmp_path / "a1.jsonl", [10.0, 12.0], 9.0, [1.0], 0.9),
              _store(tmp_path / "b1.jsonl", [20.0], 18.0, [1.0], 1.0),
              _store(tmp_path / "a2.jsonl", [16.0], 15.0, [2.0], 1.8),
              _store(tmp_path / "b2.jsonl", [10.0], 10.0, [1.0], 1.0)]
    out = tmp_path / "pooled.json"
    subprocess.run([sys.executable, str(SCRIPT), "--pooled", "--min-common", "1", "--out", str(out),
                    *map(str, stores)], check=True, capture_output=True, text=True)
    one, two = json.loads(out.read_text())["pooled"]
    # one run per side: a1/b1 give speedups 10 and 20, a2/b2 give 8 and 10; the two choices averaged
    assert one["choices"] == 2
    assert one["speedup_best_window"] == pytest.approx((math.log(2) + math.log(10 / 8)) / 2)
    assert one["speedup_min"] == pytest.approx((math.log(18 / 10) + math.log(10 / (15 / 1.8))) / 2)
    # two runs per side: a = min(10, 16) / min(1, 2) = 10 and b = min(20, 10) / 1 = 10
    assert two["choices"] == 1 and two["speedup_best_window"] == pytest.approx(0.0)
    assert two["baseline_best_window"] == pytest.approx(0.0) and two["candidate_min"] == pytest.approx(math.log(1 / 0.9))
    assert two["speedup_min"] == pytest.approx(0.0)  # 9 / 0.9 against 10 / 1
    # as the dataset combined runs before session 10: geometric means of the runs' speedups, sqrt(10 * 8) against
    # sqrt(20 * 10)
    assert one["speedup_geomean"] == pytest.approx(one["speedup_best_window"])
    assert two["speedup_geomean"] == pytest.approx(0.5 * math.log(200 / 80))


def test_pooled_needs_candidates_in_common(tmp_path):
    a = _store(tmp_path / "a1.jsonl", [10.0], 9.0, [1.0], 0.9)
    b = tmp_path / "b1.jsonl"
    b.write_text("")
    r = subprocess.run([sys.executable, str(SCRIPT), "--pooled", "--min-common", "1", "--out",
                        str(tmp_path / "o.json"), str(a), str(b)], capture_output=True, text=True)
    assert r.returncode != 0 and "in common" in r.stderr


def test_versus_pools_each_sides_stores_whole(tmp_path):
    a = [_store(tmp_path / "a1.jsonl", [10.0, 12.0], 9.0, [1.0], 0.9),
         _store(tmp_path / "a2.jsonl", [16.0], 15.0, [0.8], 0.75)]
    b = [_store(tmp_path / "b1.jsonl", [20.0], 18.0, [1.0], 1.0)]
    out = tmp_path / "cross.json"
    subprocess.run([sys.executable, str(SCRIPT), "--min-common", "1", "--out", str(out), *map(str, a),
                    "--versus", *map(str, b)], check=True, capture_output=True, text=True)
    row = json.loads(out.read_text())
    assert row["runs_a"] == 2 and row["runs_b"] == 1 and row["candidates"] == 1
    # a: min(10, 16) / min(1, 0.8) = 12.5; b: 20 / 1
    assert row["speedup_best_window"] == pytest.approx(math.log(20 / 12.5))
    assert row["baseline_best_window_signed"] == pytest.approx(math.log(20 / 10))
    assert row["candidate_best_window_signed"] == pytest.approx(math.log(1 / 0.8))
    assert row["speedup_min"] == pytest.approx(math.log((18 / 1.0) / (9 / 0.75)))


def test_gpu_timeline_counts_the_time_outside_task_groups(tmp_path):
    """Two tasks on two GPUs, the second starting only when the first ends: 10 s of span, 4 + 5 s in groups."""
    script = SCRIPT.with_name("gpu_timeline.py")
    rows = []
    for task, end_s, group_s in (("t1", 4.0, 4.0), ("t1", 3.0, 3.0), ("t2", 10.0, 5.0)):
        at = f"2026-11-30T05:00:{end_s:06.3f}+00:00"
        rows.append({"task_id": task, "created_at": at, "durations_s": {"group_s": group_s},
                     "baseline_timing": {"windows_ms": [2.0, 1.0, 1.5] if task == "t1" else [4.0, 4.0]},
                     "candidate_timing": {"windows_ms": [1.0]}})
    store = tmp_path / "s.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, str(script), "--gpus", "2", "--out", str(out), str(store)],
                       capture_output=True, text=True, check=True)
    (row,) = json.loads(out.read_text())
    assert row["tasks"] == 2 and row["span_s"] == 10.0 and row["group_s_per_gpu"] == 4.5
    assert row["outside_groups_s_per_gpu"] == 5.5 and row["outside_groups_fraction"] == 0.55
    assert "outside 5.5 s" in r.stdout
    # window spreads: the baseline's ln 2, ln 2 and ln 1 (median ln 2); no candidate timed in two windows
    assert row["results"] == 3 and row["baseline_window_spread"] == round(math.log(2), 4)
    assert row["candidate_window_spread"] is None
    bad = subprocess.run([sys.executable, str(script), "--gpus", "2", str(tmp_path / "none.jsonl")],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "no such store" in bad.stderr
