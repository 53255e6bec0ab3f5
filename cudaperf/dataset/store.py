"""The dataset on disk: three Parquet tables and a manifest, readable with pyarrow, pandas or ``datasets``.

    DIR/tasks.parquet         one row per task: id, family, index, task (the task record as JSON, with the
                              reference), params (JSON), split_task (train/val/test), split_family (train/test)
    DIR/candidates.parquet    one row per CUDA candidate: candidate_id (TASK/NAME), task_id, family, name, tags,
                              origin (family | external | model), code, code_sha256, source (an added
                              candidate's provenance: for a model's, the policy, run, sample and turn)
    DIR/measurements.parquet  one row per measurement of a candidate: run_id, status, correct, stage, failure,
                              pass_fraction, speedup, candidate/baseline median and cv, kernels, the environment
    DIR/manifest.json         the version (a content hash of the three tables), counts, split and filter rules

``datasets.load_dataset("parquet", data_files="DIR/tasks.parquet", split="train")`` reads a table (one call per
table: their columns differ).
The version hash covers the rows, not the files' bytes, so rewriting the same content gives the same version.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

TASK_SCHEMA = pa.schema([
    ("id", pa.string()), ("family", pa.string()), ("index", pa.int32()), ("task", pa.string()),
    ("params", pa.string()), ("split_task", pa.string()), ("split_family", pa.string()),
])
CANDIDATE_SCHEMA = pa.schema([
    ("candidate_id", pa.string()), ("task_id", pa.string()), ("family", pa.string()), ("name", pa.string()),
    ("tags", pa.list_(pa.string())), ("origin", pa.string()), ("code", pa.string()), ("code_sha256", pa.string()),
    ("source", pa.string()),
])
MEASUREMENT_SCHEMA = pa.schema([
    ("candidate_id", pa.string()), ("task_id", pa.string()), ("code_sha256", pa.string()), ("run_id", pa.string()),
    ("measured_at", pa.string()), ("status", pa.string()), ("correct", pa.bool_()), ("stage", pa.string()),
    ("failure_kind", pa.string()), ("failure", pa.string()), ("pass_fraction", pa.float64()),
    ("speedup", pa.float64()), ("candidate_median_ms", pa.float64()), ("candidate_cv", pa.float64()),
    ("baseline_median_ms", pa.float64()), ("baseline_cv", pa.float64()), ("kernels_in_timed_call", pa.int64()),
    ("gpu", pa.string()), ("driver", pa.string()), ("cuda", pa.string()), ("host", pa.string()),
    ("timing_method", pa.string()), ("seed", pa.int64()), ("cpu", pa.string()), ("superseded", pa.string()),
    ("compiled_baseline_median_ms", pa.float64()), ("baseline_compute_ms", pa.float64()),
    ("baseline_memory_ms", pa.float64()), ("baseline_steal_frac", pa.float64()),
    ("baseline_best_window_ms", pa.float64()), ("candidate_best_window_ms", pa.float64()),
])

OPTIONAL_COLUMNS = {"source", "seed", "cpu", "superseded", "compiled_baseline_median_ms", "baseline_compute_ms",
                    "baseline_memory_ms", "baseline_steal_frac", "baseline_best_window_ms",
                    "candidate_best_window_ms"}
HASHED_WHEN_SET = {"source", "baseline_compute_ms", "baseline_memory_ms", "baseline_steal_frac", "baseline_best_window_ms",
                   "candidate_best_window_ms"}
"""Columns added after versions were published: an empty one is left out of a row's hash, so that adding the
column does not change the version of a dataset whose rows do not use it."""
"""Columns added after the first version: absent in older files, read as null."""

FILES = {"tasks": ("tasks.parquet", TASK_SCHEMA), "candidates": ("candidates.parquet", CANDIDATE_SCHEMA),
         "measurements": ("measurements.parquet", MEASUREMENT_SCHEMA)}


def default_dataset_dir() -> Path:
    """The dataset shipped in the package (``cudaperf/data/dataset``)."""
    return Path(__file__).resolve().parents[1] / "data" / "dataset"


class DatasetError(ValueError):
    """A missing or malformed dataset directory (the message says which file and what is wrong)."""


@dataclass
class Dataset:
    root: Path
    tasks: list[dict[str, Any]]
    candidates: list[dict[str, Any]]
    measurements: list[dict[str, Any]]
    manifest: dict[str, Any]

    @classmethod
    def empty(cls, root: Path) -> "Dataset":
        return cls(Path(root), [], [], [], {})

    @classmethod
    def load(cls, root: str | Path, *, missing_ok: bool = False) -> "Dataset":
        root = Path(root)
        if not (root / "tasks.parquet").exists():
            if missing_ok:
                return cls.empty(root)
            raise DatasetError(f"no dataset at {root}: {root / 'tasks.parquet'} is missing "
                               "(run `cudaperf dataset build` first)")
        tables = {}
        for key, (name, schema) in FILES.items():
            path = root / name
            if not path.exists():
                tables[key] = []
                continue
            try:
                t = pq.read_table(path)
            except (pa.ArrowInvalid, OSError) as exc:
                raise DatasetError(f"{path}: not a readable Parquet file: {exc}") from None
            missing = [f.name for f in schema if f.name not in t.column_names and f.name not in OPTIONAL_COLUMNS]
            if missing:
                raise DatasetError(f"{path}: columns {missing} are missing")
            rows = t.select([f.name for f in schema if f.name in t.column_names]).to_pylist()
            tables[key] = [{f.name: r.get(f.name) for f in schema} for r in rows]
        manifest = json.loads((root / "manifest.json").read_text()) if (root / "manifest.json").exists() else {}
        return cls(root, tables["tasks"], tables["candidates"], tables["measurements"], manifest)

    def version(self) -> str:
        return content_hash(self.tasks, self.candidates, self.measurements)

    def save(self, extra_manifest: dict[str, Any] | None = None) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        # Only the schema's columns are stored, so only they are kept (and hashed): the version of a saved dataset
        # is the version of the same dataset loaded again.
        rows = {"tasks": sorted(self.tasks, key=lambda r: r["id"]),
                "candidates": sorted(self.candidates, key=lambda r: r["candidate_id"]),
                "measurements": sorted(self.measurements, key=lambda r: (r["candidate_id"], r["run_id"]))}
        rows = {key: [{f.name: r.get(f.name) for f in FILES[key][1]} for r in rs] for key, rs in rows.items()}
        for key, (name, schema) in FILES.items():
            table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows[key]], schema=schema)
            tmp = self.root / f".{name}.tmp"
            pq.write_table(table, tmp, compression="zstd")
            tmp.replace(self.root / name)
        self.tasks, self.candidates, self.measurements = rows["tasks"], rows["candidates"], rows["measurements"]
        version = self.version()
        self.manifest = {**self.manifest, **(extra_manifest or {}), "version": version,
                         "counts": {"tasks": len(self.tasks), "candidates": len(self.candidates),
                                    "measurements": len(self.measurements)}}
        (self.root / "manifest.json").write_text(json.dumps(self.manifest, indent=2, sort_keys=True) + "\n")
        return version


def _canon(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def content_hash(*tables: Iterable[dict[str, Any]]) -> str:
    """sha256 over the rows of every table in a canonical JSON form (sorted keys, NaN as null); 16 hex digits."""
    h = hashlib.sha256()
    for rows in tables:
        h.update(b"\x00table\x00")
        for r in rows:
            h.update(json.dumps({k: _canon(v) for k, v in r.items() if v is not None or k not in HASHED_WHEN_SET},
                                sort_keys=True, default=str).encode())
            h.update(b"\n")
    return h.hexdigest()[:16]
