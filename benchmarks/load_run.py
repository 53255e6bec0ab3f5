"""The harness under load (issue 22): thousands of candidates, a tenth or more of them hostile, through the batch
executor, beside a clean batch of honest candidates alone.

    python benchmarks/load_run.py --out DIR [--honest 1800] [--clean 200] [--hostile-copies 2] [--max-tasks N]
                                  [--max-minutes M] [--executor local|compile-only] [--budget-ms 500]
                                  [--max-reps 30] [--no-overlap-runs] [--overlap-judging]

Honest candidates are measured-correct variants of the built-in dataset's C-function tasks (drawn at random with
``--seed``; the clean batch and the load's honest part are disjoint draws from the same pool). When the load asks
for more honest candidates than the pool has after the clean batch (``--max-tasks``: an RL step's shape, many
samples of few tasks), its variants are used again, each copy a distinct source by a trailing comment (so nvcc
runs for it), as a policy's samples of one task often repeat each other. Timing is ``cudaperf eval``'s
(``--budget-ms 500 --max-reps 30``), and so is ``HarnessSettings.overlap_runs`` (``--no-overlap-runs``: one
process after another); ``--overlap-judging`` runs the batches with ``HarnessSettings.overlap_judging`` instead. Hostile ones are every
entry of the adversarial suite (``tests/fixtures/adversarial/manifest.json``) ``--hostile-copies`` times, each copy
made a distinct source by a trailing comment, so it is compiled and run again rather than found in a cache; the
``cuda_kernel`` entries need BabelTower's data (``CUDAPERF_BABELTOWER``) and are left out, and said so, without it.
The load's jobs are shuffled, so hostile candidates (hangs, crashes, out-of-memory, forged timers) land between
honest ones.

Two batches, ``clean`` then ``load``, each appended to its own resumable store (``DIR/clean.jsonl``,
``DIR/load.jsonl``): a rerun skips what is already scored, so a run split over several calls (``--max-minutes``:
no new candidate starts after it) goes on where it stopped. ``DIR/progress.json`` adds up each batch's wall time
and new results over the calls. ``DIR/summary.json`` and the printed table give, per batch: results by verdict,
**harness faults** (unscored results: with a GPU there must be none), hostile candidates whose verdict is not one
the manifest accepts (without a GPU: the verdict the CPU must give, see ``adversarial_table.cpu_expectation``),
honest candidates not judged correct, the throughput (new results per minute of wall time) with the load's
against the clean batch's, and the kernels' and the GPU's share of the traced timed call (``GpuEvidence``) over the
honest correct candidates (quantiles) beside the credited hostile ones: the data a rule against host work behind
a token kernel needs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

_SPEC = importlib.util.spec_from_file_location("adversarial_table", Path(__file__).with_name("adversarial_table.py"))
suite = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(suite)

HONEST = "honest/"
HOSTILE = "hostile/"


def honest_pool(seed: int, max_tasks: int = 0) -> tuple[dict, list[tuple[str, str, str]]]:
    """The dataset's C-function tasks by id, and every measured-correct variant of them as (task id, candidate id,
    completion), shuffled with ``seed``; with ``max_tasks``, only the variants of that many tasks drawn at random
    (each task is prepared once per batch, so fewer tasks with more candidates each is an RL step's shape)."""
    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.features import c_function_task_ids, measured_valid_ids
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    ds = Dataset.load(default_dataset_dir())
    valid, c_tasks = measured_valid_ids(ds), c_function_task_ids(ds)
    tasks = {k: t for k, t in dataset_tasks(ds).items() if k in c_tasks}
    rows = [(c["task_id"], HONEST + c["candidate_id"], f"<OUTPUT_CUDA>\n{c['code']}\n</OUTPUT_CUDA>\n")
            for c in ds.candidates if c["candidate_id"] in valid and c["task_id"] in tasks]
    rows.sort(key=lambda r: r[1])
    if max_tasks:
        ids = sorted({r[0] for r in rows})
        keep = set(random.Random(seed - 1).sample(ids, min(max_tasks, len(ids))))
        rows = [r for r in rows if r[0] in keep]
    random.Random(seed).shuffle(rows)
    return tasks, rows


def honest_rows(pool: list[tuple[str, str, str]], n: int) -> list[tuple[str, str, str]]:
    """``n`` honest jobs from ``pool``: each variant once, then again as copies (``#k`` in the id, a trailing
    comment in the source) until there are ``n``."""
    rows = []
    for i in range(n):
        task, cid, text = pool[i % len(pool)]
        k = i // len(pool)
        if k:
            end = "</OUTPUT_CUDA>\n"
            assert text.endswith(end), cid
            text, cid = text[:-len(end)] + f"// load-run copy {k}\n" + end, f"{cid}#{k}"
        rows.append((task, cid, text))
    return rows


def hostile_copies(copies: int, kinds: set[str] | None = None) -> tuple[dict, list[tuple[str, str, str]], dict,
                                                                        list[str]]:
    """The suite's tasks by id, its entries ``copies`` times as (task id, candidate id, completion), the entry of
    each candidate id, and what was left out (and why)."""
    tasks, rows, entry_of, left_out = {}, [], {}, []
    for e in suite.load_manifest():
        if kinds and e["task_kind"] not in kinds:
            continue
        try:
            task = suite.task_of(e)
        except FileNotFoundError as exc:
            left_out.append(f"{e['file']}: {exc}")
            continue
        tasks[task.id] = task
        base = suite.completion(e)
        py = e["file"].endswith(".py")
        end = "```\n" if py else "</OUTPUT_CUDA>\n"
        assert base.endswith(end), e["file"]
        for k in range(copies):
            text = base if k == 0 else base[:-len(end)] + f"{'#' if py else '//'} load-run copy {k}\n" + end
            cid = f"{HOSTILE}{e['file']}#{k}"
            rows.append((task.id, cid, text))
            entry_of[cid] = e
    return tasks, rows, entry_of, left_out


def made_on_gpu(result) -> bool:
    """The result was made on a GPU machine (its environment names a GPU)."""
    from cudaperf.harness.records import NO_GPU

    return result.environment is not None and result.environment.gpu not in ("", NO_GPU)


def as_expected(entry: dict, result, *, on_gpu: bool) -> bool:
    """The hostile result is one the manifest accepts: on a GPU its outcomes and speed cap, elsewhere the verdict the
    CPU can reach."""
    return suite.matches(suite.outcomes(entry) if on_gpu else suite.cpu_expectation(entry), result,
                         suite.reason_for(entry), entry.get("max_speedup"))


def verdict_of(result) -> str:
    return "correct" if result.correct else (f"unscored: {result.failure.kind.value}" if result.status == "unscored"
                                             else (result.failure.kind.value if result.failure else "failed"))


def hostile_table(results: list, entry_of: dict, *, gpu: bool) -> str:
    """The suite's entries as the load ran them, one markdown row per entry: its copies' verdicts (the failure, or
    "timed" with the speedup), the stage, whether each matches the manifest, and the first copy's reason."""
    by_file: dict[str, list] = {}
    for r in results:
        e = entry_of.get(r.candidate_id)
        if e is not None:
            by_file.setdefault(e["file"], []).append(r)
    entries = {e["file"]: e for e in entry_of.values()}
    lines = ["| candidate | kind | hack class | verdict (each copy) | stage | as the manifest says | reason |",
             "|---|---|---|---|---|---|---|"]
    for f in sorted(by_file):
        e, rs = entries[f], sorted(by_file[f], key=lambda r: r.candidate_id)
        verdicts = ", ".join(f"timed {r.speedup:.2f}x" if r.correct and r.speedup is not None else verdict_of(r)
                             for r in rs)
        ok = [as_expected(e, r, on_gpu=gpu or made_on_gpu(r)) for r in rs]
        reason = next((r.failure.message for r in rs if r.failure), "")
        reason = " ".join(reason.split())[:160].replace("|", "\\|")
        lines.append(f"| `{f}` | {e['task_kind']} | {e['hack_class']} | {verdicts} | "
                     f"{', '.join(sorted({r.stage.value for r in rs}))} | {'yes' if all(ok) else 'NO'} | {reason} |")
    return "\n".join(lines) + "\n"


def judge(results: list, entry_of: dict, *, gpu: bool) -> dict:
    """The batch's figures from its results (the latest record of each job). A result is judged as a GPU's where it
    was made on one (its environment names a GPU), so that stores written on the GPU machine can be summed up
    anywhere."""
    verdicts = Counter()
    faults, hostile_wrong, honest_wrong = [], [], []
    for r in results:
        on_gpu = gpu or made_on_gpu(r)
        verdicts[verdict_of(r)] += 1
        e = entry_of.get(r.candidate_id)
        if e is not None:
            if not as_expected(e, r, on_gpu=on_gpu):
                hostile_wrong.append({"candidate": r.candidate_id, "observed": suite.observed(r), "on_gpu": on_gpu,
                                      "speedup": r.speedup,
                                      "reason": r.failure.message[:200] if r.failure else None})
            continue
        if r.status == "unscored":
            if on_gpu:
                faults.append({"candidate": r.candidate_id, "task": r.task_id, "reason": r.failure.message[:300]})
        elif not r.correct:
            honest_wrong.append({"candidate": r.candidate_id, "task": r.task_id,
                                 "failure": r.failure.kind.value if r.failure else None,
                                 "reason": r.failure.message[:200] if r.failure else None})
    keys = ("kernel_share", "gpu_share", "window_cpu_cores")
    shares = {"honest": {k: [] for k in keys}, "hostile": {}}
    for r in results:
        ev = r.gpu_evidence
        if ev is None or not r.correct:
            continue
        e = entry_of.get(r.candidate_id)
        side = shares["honest"] if e is None else shares["hostile"].setdefault(
            e["file"], {k: [] for k in keys})
        for key in keys:
            v = getattr(ev, key, None)
            if v is not None:
                side[key].append(float(v))
    # a hostile candidate left unscored on a GPU is a harness fault too (one it may have caused)
    faults += [w for w in hostile_wrong if w["observed"]["status"] == "unscored" and w["on_gpu"]]
    return {"results": len(results), "hostile": sum(r.candidate_id in entry_of for r in results),
            "verdicts": dict(verdicts.most_common()), "harness_faults": len(faults), "faults": faults[:50],
            "hostile_unexpected": len(hostile_wrong), "hostile_unexpected_list": hostile_wrong[:50],
            "honest_not_correct": len(honest_wrong), "honest_not_correct_list": honest_wrong[:50],
            # where a rule on the kernels' share of a traced call would have to sit (token kernels, issue 22):
            # quantiles over the honest correct candidates, and each credited hostile one's values
            "shares_honest": {k: _quantiles(v) for k, v in shares["honest"].items()},
            "shares_hostile_credited": {f: {k: sorted(v) for k, v in d.items()} for f, d in shares["hostile"].items()}}


def _quantiles(values: list[float]) -> dict | None:
    if not values:
        return None
    v = sorted(values)

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]

    return {"n": len(v), "min": v[0], "p01": q(0.01), "p05": q(0.05), "median": q(0.5), "max": v[-1]}


def progress_log(name: str, log, every_s: float = 30.0):
    """An executor progress callback that logs a stage's count when the stage changes, at its end, and at most every
    ``every_s`` seconds otherwise (with the seconds since the batch began), so that a call cut short by its time
    limit still says how far each stage got."""
    t0 = time.monotonic()
    last: dict[str, float] = {}

    def progress(stage: str, k: int, n: int) -> None:
        now = time.monotonic()
        if stage not in last or k >= n or now - last[stage] >= every_s:
            last[stage] = now
            log(f"{name}: {now - t0:.0f} s: {stage} {k}/{n}")

    return progress


def run_batch_in(name: str, out: Path, tasks: dict, rows: list, *, executor: str, settings, max_seconds: float | None,
                 log) -> dict:
    """One batch into ``DIR/NAME.jsonl``, resuming; returns this call's figures (new results, wall)."""
    from cudaperf.harness.executor import Job
    from cudaperf.harness.executors import make_executor
    from cudaperf.harness.store import ResultStore

    store = ResultStore(out / f"{name}.jsonl")
    jobs = [Job(t, c, comp) for t, c, comp in rows]
    needed = sorted({t for t, _, _ in rows})
    before = len(store.done_keys())
    t0 = time.monotonic()
    with make_executor(executor) as ex:
        options = {"max_seconds": max_seconds} if (max_seconds and executor == "local") else {}
        summary = ex.evaluate([tasks[t] for t in needed], jobs, store, settings=settings,
                              progress=progress_log(name, log), **options)
    wall = time.monotonic() - t0
    done = len(store.done_keys())
    log(f"{name}: {summary.n_jobs} jobs, {summary.n_skipped} already scored, {done - before} newly scored in "
        f"{wall:.0f} s; {summary.n_not_started} left for a rerun")
    return {"wall_s": wall, "new_scored": done - before, "new_results": len(summary.results),
            "not_started": summary.n_not_started, "gpus": list(summary.gpus),
            "compile_wall_s": summary.compile_wall_s, "run_wall_s": summary.run_wall_s}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="folder of the stores, progress.json and summary.json")
    ap.add_argument("--honest", type=int, default=1800, help="honest candidates in the load (default 1800)")
    ap.add_argument("--clean", type=int, default=200, help="honest candidates in the clean batch (default 200; 0: none)")
    ap.add_argument("--hostile-copies", type=int, default=2, help="copies of each suite entry in the load (default 2)")
    ap.add_argument("--hostile-kinds", default="", help="only these task kinds of the suite (comma-separated)")
    ap.add_argument("--max-tasks", type=int, default=0,
                    help="honest candidates from this many dataset tasks only, drawn at random (default 0: all)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--executor", default="local", help="local (default) or compile-only")
    ap.add_argument("--budget-ms", type=float, default=500.0,
                    help="timing budget per candidate (default 500, as cudaperf eval's)")
    ap.add_argument("--max-reps", type=int, default=30, help="timed calls per candidate at most (default 30, as eval's)")
    ap.add_argument("--overlap-runs", action=argparse.BooleanOptionalAction, default=True,
                    help="HarnessSettings.overlap_runs (the default): the next candidate starts beside the previous "
                         "one's exit; --no-overlap-runs: one process after another")
    ap.add_argument("--overlap-judging", action="store_true",
                    help="HarnessSettings.overlap_judging: the next candidate starts while the previous one is judged")
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="no new candidate starts after this long (both batches together); rerun to go on")
    ap.add_argument("--table", type=Path, default=None,
                    help="also write the load's hostile entries as a markdown table here (verdict, stage, reason)")
    ap.add_argument("--batches", default="clean,load",
                    help="which batches to run, in order (default clean,load; clean_again: the clean batch's "
                         "candidates again as new sources, in their own store, to compare rates in one mode)")
    args = ap.parse_args(argv)
    if args.overlap_judging:  # one mode: overlap_judging instead of the default overlap_runs
        args.overlap_runs = False
    from cudaperf.harness.environment import gpu_count
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.store import ResultStore

    if args.honest < 0 or args.clean < 0 or args.hostile_copies < 0:
        ap.error("--honest, --clean and --hostile-copies must be >= 0")
    args.out.mkdir(parents=True, exist_ok=True)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    gpu = gpu_count() > 0 and args.executor == "local"
    kinds = {k.strip() for k in args.hostile_kinds.split(",") if k.strip()} or None
    bad = (kinds or set()) - set(suite.KINDS)
    if bad:
        ap.error(f"--hostile-kinds: unknown {sorted(bad)} (known: {', '.join(suite.KINDS)})")

    c_tasks, pool = honest_pool(args.seed, args.max_tasks)
    if args.clean >= len(pool) or (args.honest and args.clean + 1 > len(pool)):
        ap.error(f"--clean {args.clean}: the pool has {len(pool)} correct variants, and the load needs some of them")
    h_tasks, hostile, entry_of, left_out = hostile_copies(args.hostile_copies, kinds)
    for why in left_out:
        log(f"left out: {why}")
    clash = set(c_tasks) & set(h_tasks)
    assert not clash, f"task ids in both the dataset and the suite: {sorted(clash)}"
    tasks = {**c_tasks, **h_tasks}
    load = honest_rows(pool[args.clean:], args.honest) + hostile
    random.Random(args.seed + 1).shuffle(load)
    end = "</OUTPUT_CUDA>\n"
    # the clean batch again, as new sources (nvcc runs for each), for a like-for-like rate when the load's mode or
    # harness changed since the clean batch ran
    batches = {"clean": pool[:args.clean], "load": load,
               "clean_again": [(t, f"{c}#again", x[:-len(end)] + "// clean batch again\n" + end)
                               for t, c, x in pool[:args.clean]]}
    # as the adversarial GPU table (a hang ends at 10 s a test run), with this run's timing budget
    settings = HarnessSettings(test_timeout_s=10, timing_timeout_s=60, budget_ms=args.budget_ms,
                               max_reps=args.max_reps, overlap_judging=args.overlap_judging,
                               overlap_runs=args.overlap_runs)

    progress_path = args.out / "progress.json"
    progress = json.loads(progress_path.read_text()) if progress_path.exists() else {}
    t_start = time.monotonic()
    for name in [b.strip() for b in args.batches.split(",") if b.strip()]:
        if name not in batches:
            ap.error(f"--batches: unknown batch {name!r} (clean, load, clean_again)")
        if not batches[name]:
            continue
        left = None
        if args.max_minutes is not None:
            left = args.max_minutes * 60 - (time.monotonic() - t_start)
            if left <= 0:
                log(f"{name}: not started (--max-minutes spent)")
                continue
        call = run_batch_in(name, args.out, tasks, batches[name], executor=args.executor, settings=settings,
                            max_seconds=left, log=log)
        p = progress.setdefault(name, {"calls": 0, "wall_s": 0.0, "new_scored": 0, "run_wall_s": 0.0})
        p["calls"] += 1
        p["wall_s"] += call["wall_s"]
        p["new_scored"] += call["new_scored"]
        p["run_wall_s"] += call["run_wall_s"]
        p["last_call"] = {**call, "overlap_runs": args.overlap_runs, "overlap_judging": args.overlap_judging}
        p.setdefault("calls_by_mode", {})
        mode = "overlap_runs" if args.overlap_runs else "overlap_judging" if args.overlap_judging else "serial"
        p["calls_by_mode"][mode] = p["calls_by_mode"].get(mode, 0) + 1
        progress_path.write_text(json.dumps(progress, indent=1))

    summary = {"gpu": gpu, "executor": args.executor, "seed": args.seed, "budget_ms": args.budget_ms,
               "max_reps": args.max_reps, "overlap_judging": args.overlap_judging,
               "overlap_runs": args.overlap_runs, "max_tasks": args.max_tasks,
               "honest_distinct": min(args.honest, len(pool) - args.clean),
               "hostile_copies": args.hostile_copies, "left_out": left_out, "batches": {}}
    for name, rows in batches.items():
        path = args.out / f"{name}.jsonl"
        if not rows or not path.exists():
            continue
        latest = ResultStore(path).latest()
        results = [latest[(t, c)] for t, c, _ in rows if (t, c) in latest]
        fig = judge(results, entry_of, gpu=gpu)
        fig["jobs"] = len(rows)
        fig["hostile_jobs"] = sum(c in entry_of for _, c, _ in rows)
        p = progress.get(name, {})
        if p.get("wall_s"):
            fig["wall_s"] = round(p["wall_s"], 1)
            fig["scored_per_min"] = round(p["new_scored"] / p["wall_s"] * 60, 1)
        summary["batches"][name] = fig
        if name == "load" and args.table is not None:
            args.table.write_text(hostile_table(results, entry_of, gpu=gpu))
    b = summary["batches"]
    if b.get("clean", {}).get("scored_per_min") and b.get("load", {}).get("scored_per_min"):
        summary["load_over_clean_rate"] = round(b["load"]["scored_per_min"] / b["clean"]["scored_per_min"], 3)
    if b.get("clean_again", {}).get("scored_per_min") and b.get("load", {}).get("scored_per_min"):
        summary["load_over_clean_again_rate"] = round(b["load"]["scored_per_min"]
                                                      / b["clean_again"]["scored_per_min"], 3)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    for name, fig in b.items():
        print(f"{name}: {fig['results']} of {fig['jobs']} jobs have results ({fig['hostile']} hostile); harness "
              f"faults {fig['harness_faults']}; hostile with an unexpected verdict {fig['hostile_unexpected']}; "
              f"honest not correct {fig['honest_not_correct']}; "
              + (f"{fig['scored_per_min']} scored/min over {fig['wall_s']} s" if "scored_per_min" in fig else
                 "no rate") + f"\n  verdicts: {fig['verdicts']}")
    if "load_over_clean_rate" in summary:
        print(f"load / clean throughput: {summary['load_over_clean_rate']}")
    if "load_over_clean_again_rate" in summary:
        print(f"load / clean_again throughput: {summary['load_over_clean_again_rate']}")
    if not gpu:
        print("no GPU (or compile-only): honest candidates and hostile ones decided on the GPU stay unscored; "
              "harness faults are counted only with a GPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
