"""The "profile" tier: hardware counters of a candidate's kernels, read by Nsight Compute (GPU, optional, slow).

The candidate is compiled by the harness (the same cached build that is tested and timed) and run in the sandbox
under ``ncu --clock-control none`` (the only clock setting allowed: the card's clocks are never touched) on one
hidden input at the task's timing size. ncu replays each profiled launch to collect the counters below; at most
``max_launches`` launches are profiled (the first ones; a candidate that launches thousands of tiny kernels is
characterised by its first).

Features (aggregated over the profiled launches; ``per_kernel`` holds the same per kernel name):

``gld_sectors_per_request`` / ``gst_sectors_per_request``
    ``l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}.sum / l1tex__t_requests_..._{ld,st}.sum``: 32-byte sectors
    touched per warp-wide global load/store instruction. Coalesced 4-byte accesses touch 4, 8-byte ones 8; a
    stride of 32+ bytes touches 32; a broadcast touches 1.
``gld_efficiency`` / ``gst_efficiency``
    ``smsp__sass_average_data_bytes_per_sector_mem_global_op_{ld,st}.pct / 100``: the fraction of fetched sector
    bytes that threads asked for (1.0 fully coalesced, 0.125 for 4-byte accesses 32 bytes apart). Launches are
    weighted by their request counts.
``coalescing``
    Load and store efficiency together, weighted by requests: the measured counterpart of the paper's ``coal``.
``achieved_occupancy``
    ``sm__warps_active.avg.pct_of_peak_sustained_active / 100``: active warps per active cycle over the SM's
    maximum, weighted by launch duration: the measured counterpart of ``occ``.
``branch_divergence`` / ``divergent_branches``
    ``smsp__sass_branch_targets_threads_divergent.sum`` (count) and its ratio to
    ``smsp__sass_branch_targets.sum``.
``atomics``
    ``smsp__sass_inst_executed_op_global_atom.sum + ..._global_red.sum + ..._shared_atom.sum``: warp-level
    atomic instructions.
``dram_bytes``
    ``dram__bytes_read.sum + dram__bytes_write.sum``.
``flops``
    ``fadd + fmul + 2 ffma + dadd + dmul + 2 dfma + hadd + hmul + 2 hfma`` thread instructions
    (``smsp__sass_thread_inst_executed_op_*_pred_on.sum``), as Nsight Compute's roofline counts them.
``arithmetic_intensity``
    ``flops / dram_bytes`` (FLOP per DRAM byte, measured).
``kernel_ms``, ``launches``
    ``gpu__time_duration.sum`` over the profiled launches (under replay, with caches flushed by ncu) and their
    number.
"""

from __future__ import annotations

import csv
import glob
import io
import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudaperf.harness.environment import device_for_child
from cudaperf.harness.evaluate import build_candidate, check_candidate
from cudaperf.harness.sandbox import SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env, share_file
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.inputs import fresh_seed, generate_case, write_inputs
from cudaperf.tasks.schema import CFunctionTask, Task

_FLOP_WEIGHTS = {"fadd": 1, "fmul": 1, "ffma": 2, "dadd": 1, "dmul": 1, "dfma": 2, "hadd": 1, "hmul": 1, "hfma": 2}

METRICS: dict[str, str] = {
    "gld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "gld_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "gst_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "gst_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "gld_eff_pct": "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
    "gst_eff_pct": "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",
    "occ_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "div_targets": "smsp__sass_branch_targets_threads_divergent.sum",
    "targets": "smsp__sass_branch_targets.sum",
    "atom_global": "smsp__sass_inst_executed_op_global_atom.sum",
    "red_global": "smsp__sass_inst_executed_op_global_red.sum",
    "atom_shared": "smsp__sass_inst_executed_op_shared_atom.sum",
    "dram_read": "dram__bytes_read.sum",
    "dram_write": "dram__bytes_write.sum",
    "duration_ns": "gpu__time_duration.sum",
    **{f"op_{op}": f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in _FLOP_WEIGHTS},
}

PROFILE_FEATURES = (
    "gld_sectors_per_request", "gst_sectors_per_request", "gld_efficiency", "gst_efficiency", "coalescing",
    "achieved_occupancy", "divergent_branches", "branch_divergence", "atomics", "dram_bytes", "flops",
    "arithmetic_intensity", "kernel_ms", "launches",
)


class ProfilerUnavailable(RuntimeError):
    """ncu is missing or cannot read the counters here: a harness fault, never a candidate's."""


def find_ncu() -> Path | None:
    """``$CUDAPERF_NCU``, ``ncu`` on the PATH, ``$CUDA_HOME/bin/ncu``, or the newest /opt/nvidia/nsight-compute."""
    env = os.environ.get("CUDAPERF_NCU")
    if env:
        return Path(env) if Path(env).exists() else None
    hit = shutil.which("ncu")
    if hit:
        return Path(hit)
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "ncu").exists():
            return Path(home) / "bin" / "ncu"
    found = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))
    return Path(found[-1]) if found else None


@dataclass(frozen=True)
class ProfileFeatures:
    ok: bool
    values: dict[str, float] = field(default_factory=dict)
    per_kernel: dict[str, dict[str, float]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    """Why there are no values (the candidate did not build or run, or ncu failed)."""
    attributed_to: str = "candidate"
    """``candidate`` or ``harness`` (ncu missing or refused): only the latter is a harness fault."""
    ncu_log: str = ""
    raw_csv: str = ""
    """ncu's table as it printed it (for audit)."""

    def to_json(self) -> dict[str, Any]:
        clean = lambda d: {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}
        return {"ok": self.ok, "values": clean(self.values),
                "per_kernel": {k: clean(v) for k, v in self.per_kernel.items()}, "reasons": self.reasons,
                "error": self.error, "attributed_to": self.attributed_to}


def _num(text: str) -> float:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Rows of ``ncu --csv --page raw --print-units base``: one dict per profiled launch (metric keys as in
    :data:`METRICS`, plus ``kernel``, ``block_size`` and ``grid_size``). Lines that are not part of the table
    (``==PROF==`` messages, the program's own output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID","Process ID"')), None)
    if start is None:
        return []
    body = [l for l in lines[start:] if l.startswith('"')]
    reader = csv.DictReader(io.StringIO("\n".join(body)))
    by_metric = {v: k for k, v in METRICS.items()}
    rows = []
    for r in reader:
        if not (r.get("ID") or "").strip().isdigit():
            continue  # the units row
        row: dict[str, Any] = {"kernel": r.get("Kernel Name", "?"), "block_size": r.get("Block Size", ""),
                               "grid_size": r.get("Grid Size", "")}
        for col, val in r.items():
            if col in by_metric:
                row[by_metric[col]] = _num(val or "")
        rows.append(row)
    return rows


def _sum(rows: list[dict[str, Any]], key: str) -> float:
    vals = [r.get(key, math.nan) for r in rows]
    vals = [v for v in vals if not math.isnan(v)]
    return float(sum(vals)) if vals else math.nan


def _weighted(rows: list[dict[str, Any]], key: str, weight: str | tuple[str, ...]) -> float:
    keys = (weight,) if isinstance(weight, str) else weight
    num = den = 0.0
    for r in rows:
        v = r.get(key, math.nan)
        w = sum(r.get(k, 0.0) or 0.0 for k in keys)
        if not math.isnan(v) and not math.isnan(w) and w > 0:
            num += v * w
            den += w
    return num / den if den > 0 else math.nan


def aggregate(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The profile features of a set of launches (see the module docstring for each formula)."""
    nan = math.nan
    gld_req, gst_req = _sum(rows, "gld_requests"), _sum(rows, "gst_requests")
    ld_eff = _weighted(rows, "gld_eff_pct", "gld_requests") / 100
    st_eff = _weighted(rows, "gst_eff_pct", "gst_requests") / 100
    parts = [(e, w) for e, w in ((ld_eff, gld_req), (st_eff, gst_req)) if not math.isnan(e) and w > 0]
    coal = sum(e * w for e, w in parts) / sum(w for _, w in parts) if parts else nan
    flops = sum(_FLOP_WEIGHTS[op] * _sum(rows, f"op_{op}") for op in _FLOP_WEIGHTS if not math.isnan(_sum(rows, f"op_{op}")))
    dram = _sum(rows, "dram_read") + _sum(rows, "dram_write")
    div, targets = _sum(rows, "div_targets"), _sum(rows, "targets")
    return {
        "gld_sectors_per_request": _sum(rows, "gld_sectors") / gld_req if gld_req > 0 else nan,
        "gst_sectors_per_request": _sum(rows, "gst_sectors") / gst_req if gst_req > 0 else nan,
        "gld_efficiency": ld_eff,
        "gst_efficiency": st_eff,
        "coalescing": coal,
        "achieved_occupancy": _weighted(rows, "occ_pct", "duration_ns") / 100,
        "divergent_branches": div,
        "branch_divergence": div / targets if targets > 0 else nan,
        "atomics": _sum(rows, "atom_global") + _sum(rows, "red_global") + _sum(rows, "atom_shared"),
        "dram_bytes": dram,
        "flops": float(flops),
        "arithmetic_intensity": flops / dram if dram > 0 else nan,
        "kernel_ms": _sum(rows, "duration_ns") / 1e6,
        "launches": float(len(rows)),
    }


def _reasons(values: dict[str, float]) -> dict[str, str]:
    why = {
        "gld_sectors_per_request": "no global loads", "gld_efficiency": "no global loads",
        "gst_sectors_per_request": "no global stores", "gst_efficiency": "no global stores",
        "coalescing": "no global loads or stores", "branch_divergence": "no branch instructions",
        "arithmetic_intensity": "no DRAM traffic", "achieved_occupancy": "no launch duration",
    }
    return {k: why.get(k, "ncu reported no value") for k, v in values.items() if math.isnan(v)}


def ncu_command(ncu: Path, program: list[str], max_launches: int) -> list[str]:
    return [str(ncu), "--clock-control", "none", "--metrics", ",".join(METRICS.values()), "--csv", "--page", "raw",
            "--print-units", "base", "--print-kernel-base", "function", "--launch-count", str(max_launches),
            "--target-processes", "all", "--log-file", "ncu.csv", *program]


def profile_features(task: Task, code: str, *, settings: HarnessSettings | None = None,
                     gpu_index: int | None = None, max_launches: int = 20, seed: int | None = None,
                     timeout_s: float = 300.0) -> ProfileFeatures:
    """Profile ``code`` (a candidate for ``task``) on one hidden input at the timing size.

    Raises :class:`ProfilerUnavailable` when ncu is not installed; candidate failures (static check, compile,
    crash under ncu) come back as ``ok=False`` with the reason.
    """
    if not isinstance(task, CFunctionTask):
        raise NotImplementedError(f"the profile tier runs c_function candidates; task {task.id} is {task.kind}")
    ncu = find_ncu()
    if ncu is None:
        raise ProfilerUnavailable("Nsight Compute (ncu) was not found: install it, put it on the PATH or set "
                                  "CUDAPERF_NCU")
    settings = settings or HarnessSettings()
    chk = check_candidate(task, code, "profile", settings)
    if chk.result is not None:
        return ProfileFeatures(False, error=f"static check: {chk.result.failure.message}")
    build = build_candidate(task, chk.code, settings)
    if build.stage != "ok":
        return ProfileFeatures(False, error=f"{build.stage} failed: {(build.info.log or '; '.join(build.reasons))[-800:]}")
    case = generate_case(task, task.timing_config % len(task.size_configs), seed if seed is not None else fresh_seed())
    extra = {"CUDA_VISIBLE_DEVICES": device_for_child(gpu_index)} if gpu_index is not None else {}
    with Workdir(prefix="cudaperf-prof-") as w:
        exe = copy_in(build.exe, w, "candidate")
        write_inputs(w / "in.bin", task, [case])
        share_file(w / "in.bin")
        env = scrubbed_env(w, extra)
        run = run_sandboxed(ncu_command(ncu, [str(exe), "test", "in.bin", "out.bin", "stats.txt"], max_launches),
                            w, env=env, limits=SandboxLimits(wall_s=timeout_s, max_processes=4096))
        log = (w / "ncu.csv").read_text(errors="replace") if (w / "ncu.csv").exists() else ""
    rows = parse_ncu_csv(log)
    tail = "\n".join(l for l in (log + "\n" + run.stderr).splitlines() if l.startswith("==") and "PROF" not in l)[-2000:]
    if not rows:
        counters_refused = any(s in log + run.stderr for s in ("ERR_NVGPUCTRPERM", "LibraryNotLoaded",
                                                                 "Failed to initialize the profiler",
                                                                 "Failed to find metric"))
        return ProfileFeatures(False, error=f"ncu profiled no kernel launch ({run.describe()}): {tail or run.stderr[-800:]}",
                               attributed_to="harness" if counters_refused else "candidate", ncu_log=tail)
    values = aggregate(rows)
    per_kernel: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        per_kernel.setdefault(str(r["kernel"]), []).append(r)
    start = log.find('"ID","Process ID"')
    return ProfileFeatures(True, values, {k: aggregate(v) for k, v in per_kernel.items()}, _reasons(values),
                           ncu_log=tail, raw_csv=log[start:] if start >= 0 else "")


def ncu_version() -> str:
    ncu = find_ncu()
    if ncu is None:
        return "unavailable"
    try:
        out = subprocess.run([str(ncu), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    return out.strip().splitlines()[-1] if out.strip() else "unknown"
