"""Check a task family on a machine without a GPU: structure, references, static checks, and (on a sample) nvcc.

    python -m cudaperf.dataset.validate FAMILY [--compile-sample K] [--all]

For every task: the task record validates; the trusted C reference builds with gcc and runs on the hidden-test
and timing inputs (its time per call at the timing size is printed, and flagged outside 1..400 ms); the reference
is *well-conditioned*: built again with fused multiply-adds (``-mfma -ffp-contract=fast``, what nvcc does on the
GPU by default), its outputs on the same inputs, timing size included, stay within the task's tolerance (a task
that fails this cannot be passed reliably by a correct translation: ``elementwise_map_010``, whose
``cbrtf(x*y + 2)`` cancels near x*y = -2, is one); every variant passes the harness's static checks and its paper
features extract; its kernel launches stay within CUDA's grid and block limits at every size configuration
(:mod:`cudaperf.dataset.launch_dims`: a 2-D grid with the rows on y fails past 65,535 rows). For K sampled
tasks (first, last, and random ones; ``--all`` for every task) every variant is compiled and linked with nvcc
exactly as the harness does. Running the variants needs a GPU: ``cudaperf dataset measure`` does that.
"""

from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ThreadPoolExecutor

from cudaperf.dataset.family import BuiltTask, build_task
from cudaperf.dataset.families import all_families
from cudaperf.dataset.launch_dims import task_launch_problems
from cudaperf.features.paper import extract_paper_features
from cudaperf.harness.evaluate import build_candidate, check_candidate
from cudaperf.harness.run_c_function import prepare_c_function
from cudaperf.harness.settings import HarnessSettings

SETTINGS = HarnessSettings(budget_ms=300.0, max_reps=10, min_reps=2)


FMA_FLAGS = ("-mfma", "-ffp-contract=fast")


def host_has_fma() -> bool:
    try:
        return any(line.startswith("flags") and " fma " in f" {line} " for line in open("/proc/cpuinfo"))
    except OSError:
        return False


def conditioning_problem(task, prep, settings: HarnessSettings = SETTINGS) -> str | None:
    """Why ``task``'s reference is ill-conditioned (None when it is not, or when this host has no FMA): its outputs
    built with fused multiply-adds, on ``prep``'s inputs, differ from ``prep``'s expected ones beyond the tolerance.
    Tasks with a zero tolerance are exact by design (their translations must round every step, as the families'
    variants do with ``__fmul_rn``/``__fadd_rn``) and are not checked."""
    from dataclasses import replace

    from cudaperf.harness.compare import describe_mismatch
    from cudaperf.harness.run_c_function import compare_case

    if not host_has_fma() or (task.tolerance.atol == 0 and task.tolerance.rtol == 0):
        return None  # an exact task asks for bit-equal results: its variants round each step (__fmul_rn, ...)
    fma = prepare_c_function(task, replace(settings, reference_flags=settings.reference_flags + FMA_FLAGS),
                             seed=prep.seed, time_baseline=True, defer_baseline=True)
    pairs = [("hidden test", prep.expected_tests, fma.expected_tests),
             ("timing size", prep.expected_timing, fma.expected_timing)]
    for where, want, got in pairs:
        for k, (e, g) in enumerate(zip(want, got)):
            m = compare_case(task, e, g)
            if m is not None:
                return (f"the reference built with fused multiply-adds differs beyond the tolerance ({where} {k}: "
                        f"{describe_mismatch(m)}): a correct GPU translation can fail; change the task")
    return None


def check_task(bt: BuiltTask, compile_variants: bool) -> list[str]:
    problems: list[str] = []
    prep = prepare_c_function(bt.task, SETTINGS, seed=1234, time_baseline=True)
    ms = prep.baseline_timing.median_ms if prep.baseline_timing else float("nan")
    if not (1.0 <= ms <= 400.0):
        problems.append(f"reference takes {ms:.2f} ms per call at the timing size (want 1..400 ms)")
    cond = conditioning_problem(bt.task, prep)
    if cond:
        problems.append(cond)
    for v in bt.variants:
        chk = check_candidate(bt.task, v.code, v.name, SETTINGS)
        if chk.result is not None:
            problems.append(f"variant {v.name}: static check: {chk.result.failure.message}")
            continue
        for lp in task_launch_problems(bt.task, v.code, unknown=False):
            problems.append(f"variant {v.name}: launch: {lp}")
        fv = extract_paper_features(v.code)
        nan = [k for k, x in fv.values.items() if isinstance(x, float) and math.isnan(x)]
        if fv.parse_errors:
            problems.append(f"variant {v.name}: {fv.parse_errors} parse error(s) reading paper features")
        if nan:
            problems.append(f"variant {v.name}: paper features NaN: {nan}")
        if compile_variants:
            b = build_candidate(bt.task, v.code, SETTINGS)
            if b.stage != "ok":
                problems.append(f"variant {v.name}: {b.stage} failed: {(b.info.log or '; '.join(b.reasons))[-1500:]}")
    print(f"  {bt.task.id}: reference {ms:8.2f} ms, {len(bt.variants)} variants"
          f"{' (compiled)' if compile_variants else ''}: {'OK' if not problems else f'{len(problems)} problem(s)'}",
          flush=True)
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("family")
    ap.add_argument("--compile-sample", type=int, default=3, help="tasks whose variants are compiled (default 3)")
    ap.add_argument("--all", action="store_true", help="compile every task's variants")
    ap.add_argument("--indices", default=None, help="comma-separated task indices (default: all)")
    args = ap.parse_args(argv)
    fams = all_families()
    if args.family not in fams:
        print(f"unknown family {args.family!r}; known: {', '.join(sorted(fams))}", file=sys.stderr)
        return 2
    fam = fams[args.family]
    idx = [int(x) for x in args.indices.split(",")] if args.indices else list(range(fam.n_tasks))
    sample = set(idx) if args.all else set(idx[:1] + idx[-1:] + idx[len(idx) // 2: len(idx) // 2 + max(0, args.compile_sample - 2)])
    built = [build_task(fam, i) for i in idx]
    print(f"family {fam.name}: {len(built)} tasks, {sum(len(b.variants) for b in built)} variants")
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda b: (b, check_task(b, b.index in sample)), built))
    bad = 0
    for b, probs in results:
        for p in probs:
            bad += 1
            print(f"PROBLEM {b.task.id}: {p}")
    print(f"family {fam.name}: {'OK' if not bad else f'{bad} problem(s)'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
