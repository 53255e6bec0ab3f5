"""Static features against Nsight Compute: does the paper's ``coal`` / ``occ`` agree with what the GPU measures?

Two steps, because the GPU machine has ncu but not tree-sitter, and this machine has tree-sitter but no GPU:

    # on the GPU machine: profile the built-in candidates (and family variants) under ncu, one worker per GPU
    python benchmarks/profile_vs_static.py run --out DIR [--families elementwise_map:0,1] [--limit N]
    # anywhere: join with the paper (and compiler) tier per kernel and print the agreement table
    python benchmarks/profile_vs_static.py compare DIR/profile.jsonl [--markdown]

Agreement is judged per kernel (kernels matched by name):
  coal: the paper's per-kernel coal >= 0.5 ("mostly unit-stride") against ncu's global load/store sector
        efficiency >= 0.5 ("at least half of each fetched sector used");
  occ:  the paper's occ == 1.0 (128 <= tpb <= 256) against ncu's achieved occupancy >= 0.5; and, for contrast,
        the compiler tier's theoretical occupancy >= 0.5 against the same.
Spearman rank correlations are printed beside the agreement rates.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _jobs(families: str | None, limit: int | None):
    from cudaperf.tasks.load import builtin_candidates, load_builtin_tasks

    tasks = {t.id: t for t in load_builtin_tasks()}
    jobs = []
    for c in builtin_candidates():
        if c.task_id in tasks and tasks[c.task_id].kind == "c_function":
            jobs.append((tasks[c.task_id], c.label, c.source))
    if families:
        from cudaperf.dataset.family import build_task
        from cudaperf.dataset.families import all_families

        fams = all_families()
        for spec in families.split(";"):
            name, _, idx = spec.partition(":")
            for i in ([int(x) for x in idx.split(",")] if idx else [0]):
                bt = build_task(fams[name], i)
                jobs += [(bt.task, v.name, v.code) for v in bt.variants]
    return jobs[:limit] if limit else jobs


def run(args) -> int:
    from cudaperf.features.profile import ncu_version, profile_features
    from cudaperf.harness.environment import gpu_inventory

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = _jobs(args.families, args.limit)
    gpus = list(range(max(1, len(gpu_inventory()))))
    print(f"{len(jobs)} candidates, {len(gpus)} GPU(s), {ncu_version()}", flush=True)
    lock = threading.Lock()
    t0 = time.monotonic()
    done = [0]
    fh = open(out / "profile.jsonl", "w")

    def work(gpu: int) -> None:
        while True:
            with lock:
                if not jobs:
                    return
                task, name, code = jobs.pop(0)
            t = time.monotonic()
            pf = profile_features(task, code, gpu_index=gpu, max_launches=args.max_launches, seed=12345)
            rec = {"task": task.id, "candidate": name, "code": code, "seconds": time.monotonic() - t,
                   **pf.to_json(), "ncu_log": pf.ncu_log[-1500:]}
            if pf.raw_csv:
                raw = out / "ncu_raw"
                raw.mkdir(exist_ok=True)
                (raw / f"{task.id}__{name}.csv").write_text(pf.raw_csv)
            with lock:
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                done[0] += 1
                print(f"[{done[0]}] gpu{gpu} {task.id}/{name}: {'ok' if pf.ok else 'FAILED ' + str(pf.error)[:300]} "
                      f"({rec['seconds']:.1f} s)", flush=True)

    with ThreadPoolExecutor(len(gpus)) as pool:
        list(pool.map(work, gpus))
    fh.close()
    print(f"profiled {done[0]} candidates in {time.monotonic() - t0:.0f} s", flush=True)
    return 0


def _spearman(xs: list[float], ys: list[float]) -> float:
    import numpy as np

    if len(xs) < 3:
        return math.nan

    def rank(v):
        a = np.asarray(v, float)
        order = a.argsort(kind="mergesort")
        r = np.empty(len(a))
        r[order] = np.arange(len(a))
        for val in np.unique(a):  # average ranks of ties
            m = a == val
            r[m] = r[m].mean()
        return r

    rx, ry = rank(xs), rank(ys)
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def compare(args) -> int:
    from cudaperf.features.compiler import compiler_features, kernel_base_name
    from cudaperf.features.paper import extract_paper_features

    recs = [json.loads(l) for l in Path(args.profile).read_text().splitlines() if l.strip()]
    rows = []
    failed = [r for r in recs if not r["ok"]]
    for r in recs:
        if not r["ok"]:
            continue
        fv = extract_paper_features(r["code"])
        tpb = {l["kernel"]: l["tpb"] for l in fv.launches if l.get("tpb") is not None}
        cf = compiler_features(r["code"]) if args.compiler else None
        for k in fv.per_kernel:
            name = k["name"]
            meas = r["per_kernel"].get(name)
            if meas is None:
                continue  # not launched, or beyond the profiled launches
            t = tpb.get(name)
            occ = math.nan if t is None or (isinstance(t, float) and math.isnan(t)) else (
                1.0 if 128 <= t <= 256 else 0.4 if (64 <= t < 128 or 256 < t <= 512) else -0.3)
            theo = math.nan
            if cf is not None and cf.compile_ok:
                for kk, vals in cf.per_kernel.items():
                    if kernel_base_name(kk) == name:
                        theo = vals.get("theoretical_occupancy", math.nan)
            rows.append({"src": f"{r['task']}/{r['candidate']}", "kernel": name, "coal": k["coal"],
                         "occ": occ, "tpb": t, "theo_occ": theo,
                         "coalescing": meas.get("coalescing"), "achieved": meas.get("achieved_occupancy")})

    def agree(pairs):
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None
                 and not (isinstance(a, float) and math.isnan(a)) and not (isinstance(b, float) and math.isnan(b))]
        return pairs

    coal_pairs = agree([(x["coal"], x["coalescing"]) for x in rows])
    occ_pairs = agree([(x["occ"], x["achieved"]) for x in rows])
    theo_pairs = agree([(x["theo_occ"], x["achieved"]) for x in rows])
    lines = []

    def line(label, pairs, static_good, measured_good=lambda b: b >= 0.5):
        n = len(pairs)
        hits = sum((static_good(a)) == measured_good(b) for a, b in pairs)
        tp = sum(static_good(a) and measured_good(b) for a, b in pairs)
        fp = sum(static_good(a) and not measured_good(b) for a, b in pairs)
        fn = sum((not static_good(a)) and measured_good(b) for a, b in pairs)
        rho = _spearman([a for a, _ in pairs], [b for _, b in pairs])
        lines.append(f"| {label} | {n} | {hits}/{n} ({100 * hits / max(n, 1):.0f} %) | {tp} | {fp} | {fn} | "
                     f"{rho:.2f} |")

    line("paper coal >= 0.5 vs ncu sector efficiency >= 0.5", coal_pairs, lambda a: a >= 0.5)
    line("paper occ = 1.0 vs ncu achieved occupancy >= 0.5", occ_pairs, lambda a: a >= 1.0)
    if args.compiler:
        line("compiler theoretical occupancy >= 0.5 vs achieved >= 0.5", theo_pairs, lambda a: a >= 0.5)
    print(f"{len(recs)} candidates profiled, {len(failed)} failed under ncu; {len(rows)} kernels matched "
          f"({len({x['src'] for x in rows})} candidates)")
    for r in failed[:10]:
        print(f"  failed: {r['task']}/{r['candidate']}: {str(r['error'])[:200]}")
    print("| comparison | kernels | agree | both good | static good, measured poor | static poor, measured good "
          "| Spearman |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    if args.details:
        for x in rows:
            print(json.dumps(x))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--families", default=None, help="e.g. 'elementwise_map:0,1;matmul:0'")
    r.add_argument("--limit", type=int, default=None)
    r.add_argument("--max-launches", type=int, default=20)
    c = sub.add_parser("compare")
    c.add_argument("profile")
    c.add_argument("--compiler", action="store_true", help="also the compiler tier's theoretical occupancy")
    c.add_argument("--details", action="store_true")
    a = ap.parse_args()
    return run(a) if a.cmd == "run" else compare(a)


if __name__ == "__main__":
    raise SystemExit(main())
