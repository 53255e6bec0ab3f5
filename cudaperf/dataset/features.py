"""Feature tables of the dataset's candidates, computed once and stored beside the dataset.

``DIR/features_<tier>.parquet``: one row per candidate (candidate_id, code_sha256, features as JSON with NaN as
null). A row whose code hash no longer matches its candidate is recomputed. The ranker reads these tables
instead of recomputing (the compiler tier compiles every candidate: about 0.75 s each on this project's CPU
machine).
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from cudaperf.dataset.store import Dataset

SCHEMA = pa.schema([("candidate_id", pa.string()), ("code_sha256", pa.string()), ("features", pa.string())])


def tier_function(tier: str) -> Callable[[str], dict[str, float]]:
    if tier == "paper":
        from cudaperf.ranker.train import paper_features

        return paper_features
    if tier == "compiler":
        from cudaperf.features.compiler import compiler_features

        def fn(code: str) -> dict[str, float]:
            return {f"compiler.{k}": float(v) for k, v in compiler_features(code).values.items()}

        return fn
    raise ValueError(f"unknown feature tier {tier!r} (paper or compiler; the profile tier needs a GPU run)")


def table_path(ds: Dataset, tier: str) -> Path:
    return ds.root / f"features_{tier}.parquet"


def load_features(ds: Dataset, tier: str) -> dict[str, dict[str, float]]:
    """Stored features of candidates whose code is unchanged (by candidate id)."""
    path = table_path(ds, tier)
    if not path.exists():
        return {}
    sha = {c["candidate_id"]: c["code_sha256"] for c in ds.candidates}
    out = {}
    for r in pq.read_table(path).to_pylist():
        if sha.get(r["candidate_id"]) == r["code_sha256"]:
            out[r["candidate_id"]] = {k: (math.nan if v is None else float(v)) for k, v in json.loads(r["features"]).items()}
    return out


def compute_features(ds: Dataset, tier: str, *, jobs: int = 2, candidate_ids=None,
                     progress: Callable[[int, int], None] | None = None, save_every: int = 200) -> int:
    """Compute missing or stale rows of ``features_<tier>.parquet``; saves as it goes. Returns rows computed."""
    fn = tier_function(tier)
    have = load_features(ds, tier)
    cands = [c for c in ds.candidates if c["candidate_id"] not in have
             and (candidate_ids is None or c["candidate_id"] in candidate_ids)]
    sha = {c["candidate_id"]: c["code_sha256"] for c in ds.candidates}

    def save() -> None:
        rows = [{"candidate_id": k, "code_sha256": sha[k],
                 "features": json.dumps({n: (None if isinstance(x, float) and math.isnan(x) else x) for n, x in v.items()})}
                for k, v in sorted(have.items())]
        tmp = table_path(ds, tier).with_suffix(".tmp")
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp, compression="zstd")
        tmp.replace(table_path(ds, tier))

    done = 0
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for c, feats in zip(cands, pool.map(lambda c: fn(c["code"]), cands)):
            have[c["candidate_id"]] = feats
            done += 1
            if progress:
                progress(done, len(cands))
            if done % save_every == 0:
                save()
    save()
    return done
