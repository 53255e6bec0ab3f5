"""The adversarial suite as a table: every hostile candidate of ``tests/fixtures/adversarial/manifest.json`` through
the real ``evaluate()``, its expected verdict and stage beside the observed ones.

    python benchmarks/adversarial_table.py --out table.md [--jsonl rows.jsonl] [--workers 2]
    python benchmarks/adversarial_table.py --out table.md --assume-gpu-cpu-runs   # also the CPU-runnable programs

Without a GPU, what can be decided is decided (the static checks, nvcc, the symbol check, the link); entries
decided at ``run`` or ``timing`` come out unscored after the build ("no NVIDIA GPU"), which the table marks as
"needs the GPU run" (they passed the checks before the GPU, as they should). With ``--assume-gpu-cpu-runs`` the
entries marked ``cpu_run`` (whole programs that never initialise CUDA, so no GPU is needed to run them) are also
run to their verdict on this machine, with ``CUDAPERF_ASSUME_GPU=1`` and timing off. With a GPU every entry is
evaluated to its verdict, one at a time (timing must own the GPU), each task prepared once.

The manifest (one entry per candidate): ``file`` (relative to ``tests/fixtures``), ``task``, ``task_kind``
(``c_function``, ``c_program``, ``cuda_kernel``, ``pytorch_fast``, ``pytorch_modelnew``), ``hack_class`` (the
number and short name of ``../shared/design/HARNESS.md``), ``expect`` (``status``, ``failure``: a FailureKind value
or null for "timed honestly, no inflated credit", ``stage``), ``decided`` (``static``, ``compile``, ``run``,
``timing``), ``reason`` (static and compile entries: words their failure message must hold), and optionally
``also`` (other outcomes an existing GPU test accepts), ``gap`` (what gets through), ``note``, ``cpu_run`` and
``cpu_run_expect`` (a ``cpu_run`` entry's verdict on a machine without NVML, where it differs from ``expect``).
This module is also the suite's library: ``tests/test_adversarial_suite.py`` and ``tests/gpu/test_gpu_adversarial.py``
load it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "tests" / "fixtures"
MANIFEST = FIXTURES / "adversarial" / "manifest.json"
KINDS = ("c_function", "c_program", "cuda_kernel", "pytorch_fast", "pytorch_modelnew")
DECIDED = ("static", "compile", "run", "timing")
STAGES = ("none", "extracted", "checked", "compiled", "ran", "correct", "timed")
NO_GPU = "no NVIDIA GPU is visible"


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    return json.loads(Path(path).read_text())


def source(entry: dict) -> str:
    return (FIXTURES / entry["file"]).read_text()


def completion(entry: dict) -> str:
    """The candidate as a model's answer: CUDA in the paper's output tag, a ModelNew module in a python fence."""
    src = source(entry)
    if entry["file"].endswith(".py"):
        return f"```python\n{src}```\n"
    return f"<OUTPUT_CUDA>\n{src}</OUTPUT_CUDA>\n"


@lru_cache(maxsize=None)
def _c_tasks():
    from cudaperf.tasks import load_builtin_tasks

    return {t.id: t for t in load_builtin_tasks()}


@lru_cache(maxsize=None)
def _pytorch_tasks():
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    return {t.id: t for t in load_pytorch_tasks(builtin_pytorch_dir())}


@lru_cache(maxsize=None)
def _babeltower_tasks():
    from cudaperf.tasks.babeltower import find_babeltower, load_babeltower

    path = find_babeltower()
    if path is None:
        raise FileNotFoundError("BabelTower's unit_total_eval_cases.jsonl is not found (set CUDAPERF_BABELTOWER)")
    return {t.id: t for t in load_babeltower(path)}


def task_of(entry: dict):
    kind = entry["task_kind"]
    if kind in ("c_function", "c_program"):
        return _c_tasks()[entry["task"]]
    if kind == "cuda_kernel":
        return _babeltower_tasks()[entry["task"]]
    return _pytorch_tasks()[entry["task"]]


def cpu_expectation(entry: dict) -> dict:
    """What this CPU machine (no GPU) must give: the full verdict for entries decided at ``static`` or ``compile``;
    for the rest, unscored after the build (a ModelNew module is not built before its run), i.e. not stopped early
    by accident."""
    if entry["decided"] in ("static", "compile"):
        return dict(entry["expect"])
    return {"status": "unscored", "failure": "harness_error",
            "stage": "checked" if entry["task_kind"] == "pytorch_modelnew" else "compiled"}


def cpu_run_expectation(entry: dict) -> dict:
    """A ``cpu_run`` entry run here with ``CUDAPERF_ASSUME_GPU=1`` and timing off: the expected verdict (its
    ``cpu_run_expect`` where a machine without NVML gives another than the GPU's: the driver's context list, which
    stops a forged probe record, cannot be read here), its stage capped at ``correct`` (nothing is timed)."""
    exp = dict(entry.get("cpu_run_expect", entry["expect"]))
    exp["stage"] = min(exp["stage"], "correct", key=STAGES.index)
    return exp


def outcomes(entry: dict) -> list[dict]:
    """Every accepted outcome: the expectation, then the ``also`` alternatives (same status)."""
    exp = entry["expect"]
    return [exp] + [{"status": exp["status"], **alt} for alt in entry.get("also", [])]


def observed(result) -> dict:
    return {"status": result.status, "failure": result.failure.kind.value if result.failure else None,
            "stage": result.stage.value}


def matches(expected: dict | list[dict], result, reason: str | None = None, max_speedup: float | None = None) -> bool:
    """The result is one of the ``expected`` outcomes (and, given ``reason``, its failure message says so; given
    ``max_speedup``, the entry's cap, a speedup credited above it is no match: a forged timer or a kept cache is
    credited at its honest speed or not at all)."""
    got = observed(result)
    options = expected if isinstance(expected, list) else [expected]
    if reason is not None and (result.failure is None or reason not in result.failure.message):
        return False
    if max_speedup is not None and result.speedup is not None and result.speedup > max_speedup:
        return False
    return any(all(got[k] == o[k] for k in ("status", "failure", "stage")) for o in options)


def reason_for(entry: dict) -> str | None:
    """The words the failure message must hold (the manifest gives them for static and compile entries)."""
    return entry.get("reason") if entry["decided"] in ("static", "compile") else None


def harness_settings(*, gpu: bool):
    from cudaperf.harness.settings import HarnessSettings

    if gpu:  # hangs end at 10 s per test run; timing as the other GPU tests of hostile candidates
        return HarnessSettings(test_timeout_s=10, timing_timeout_s=60, budget_ms=1000)
    return HarnessSettings(test_timeout_s=10, time_candidates=False)


def evaluate_entry(entry: dict, *, settings=None, prepared=None):
    from cudaperf.harness.evaluate import evaluate

    return evaluate(task_of(entry), completion(entry), settings=settings or harness_settings(gpu=False),
                    candidate_id=entry["file"], prepared=prepared)


def evaluate_all(entries: list[dict], *, workers: int = 2, settings=None) -> dict[str, object]:
    """Results by file, evaluated ``workers`` at a time (CPU work only: compiles share the cache and the
    sandbox; never use more than one worker where candidates run on a GPU)."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {e["file"]: pool.submit(evaluate_entry, e, settings=settings) for e in entries}
        return {f: fut.result() for f, fut in futures.items()}


@contextmanager
def assume_gpu():
    """``CUDAPERF_ASSUME_GPU=1`` for the duration (programs that never touch CUDA run without a GPU)."""
    old = os.environ.get("CUDAPERF_ASSUME_GPU")
    os.environ["CUDAPERF_ASSUME_GPU"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CUDAPERF_ASSUME_GPU", None)
        else:
            os.environ["CUDAPERF_ASSUME_GPU"] = old


def evaluate_cpu_runs(entries: list[dict], seed: int = 4242) -> dict[str, object]:
    """The ``cpu_run`` entries run to their verdict here (timing off), each task prepared once."""
    from cudaperf.harness.evaluate import prepare_task

    s = harness_settings(gpu=False)
    prepared: dict[str, object] = {}
    out = {}
    with assume_gpu():
        for e in entries:
            if not e.get("cpu_run"):
                continue
            if e["task"] not in prepared:
                prepared[e["task"]] = prepare_task(task_of(e), s, seed)
            out[e["file"]] = evaluate_entry(e, settings=s, prepared=prepared[e["task"]])
    return out


class GpuPreparations:
    """Hidden inputs, expected outputs and baselines per task, made once (GPU runs)."""

    def __init__(self, settings, seed: int = 2468):
        self.settings, self.seed, self._by_task = settings, seed, {}

    def get(self, entry: dict):
        if entry["task_kind"] == "cuda_kernel":
            return None  # the task's own tests, nothing to prepare
        if entry["task"] not in self._by_task:
            task = task_of(entry)
            if entry["task_kind"].startswith("pytorch"):
                from cudaperf.harness.pytorch_reference import prepare_pytorch

                self._by_task[entry["task"]] = prepare_pytorch(task, self.seed, n_trials=3, device="cuda")
            else:
                from cudaperf.harness.evaluate import prepare_task

                self._by_task[entry["task"]] = prepare_task(task, self.settings, self.seed)
        return self._by_task[entry["task"]]


def row(entry: dict, result, *, expected: dict | None = None, mode: str = "") -> dict:
    """One JSON line of the table: the expectation and what was observed."""
    fail = result.failure
    return {"file": entry["file"], "task": entry["task"], "task_kind": entry["task_kind"],
            "hack_class": entry["hack_class"], "decided": entry["decided"], "gap": entry.get("gap"),
            "expected": expected or entry["expect"], "expected_gpu": entry["expect"], "mode": mode,
            "observed": {**observed(result), "reason": fail.message[:300] if fail else None,
                         "correct": result.correct, "speedup": result.speedup,
                         "window_cpu_cores": getattr(result.gpu_evidence, "window_cpu_cores", None)},
            "match": matches(expected or outcomes(entry), result, reason_for(entry), entry.get("max_speedup"))}


def _verdict(v: dict) -> str:
    if v["status"] == "unscored":
        return f"unscored: {v['failure']}"
    return f"scored: {v['failure']}" if v["failure"] else "scored: no failure (credited)"


def _cell(text: str | None, limit: int = 100) -> str:
    text = " ".join((text or "").split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def markdown_table(rows: list[dict]) -> str:
    head = ("| candidate | task kind | hack class | expected verdict (stage) | decided | observed verdict | stage | "
            "reason | result |\n|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        exp, obs = r["expected_gpu"], r["observed"]
        if r["mode"] == "cpu" and r["decided"] in ("run", "timing"):
            result = "needs the GPU run" if r["match"] else "MISMATCH (stopped early?)"
        elif r["mode"] == "cpu_run":
            result = "as expected (CPU run, timing off)" if r["match"] else "MISMATCH"
            if r["expected"]["failure"] != exp["failure"]:  # its cpu_run_expect: a check that needs the GPU's NVML
                result += f"; here expected {_verdict(r['expected'])} ({r['expected']['stage']}): no NVML"
        else:
            result = "as expected" if r["match"] else "MISMATCH"
        if r.get("gap"):
            result += "; GAP"
        lines.append(f"| `{r['file']}` | {r['task_kind']} | {_cell(r['hack_class'], 60)} | {_verdict(exp)} "
                     f"({exp['stage']}) | {r['decided']} | {_verdict(obs)} | {obs['stage']} | "
                     f"{_cell(obs['reason'])} | {result} |")
    return head + "\n".join(lines) + "\n"


def summary(rows: list[dict]) -> str:
    def count(key):
        out: dict[str, int] = {}
        for r in rows:
            out[r[key]] = out.get(r[key], 0) + 1
        return ", ".join(f"{k} {v}" for k, v in sorted(out.items()))

    decided_here = [r for r in rows if r["mode"] != "cpu" or r["decided"] in ("static", "compile")]
    return (f"{len(rows)} rows; by kind: {count('task_kind')}; by stage deciding: {count('decided')}; "
            f"decided on this machine: {len(decided_here)}, as expected: {sum(r['match'] for r in decided_here)}; "
            f"gaps: {sum(bool(r.get('gap')) for r in rows)}; mismatches: {sum(not r['match'] for r in rows)}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="markdown table to write")
    ap.add_argument("--jsonl", type=Path, help="also write one JSON line per candidate here")
    ap.add_argument("--manifest", type=Path, default=MANIFEST)
    ap.add_argument("--workers", type=int, default=2, help="parallel evaluations without a GPU (default 2)")
    ap.add_argument("--assume-gpu-cpu-runs", action="store_true",
                    help="without a GPU, also run the cpu_run entries to their verdict (CUDAPERF_ASSUME_GPU=1)")
    args = ap.parse_args(argv)
    from cudaperf.harness.environment import gpu_count

    entries = load_manifest(args.manifest)
    rows = []
    if gpu_count() > 0:
        s = harness_settings(gpu=True)
        preps = GpuPreparations(s)
        for e in entries:
            rows.append(row(e, evaluate_entry(e, settings=s, prepared=preps.get(e)), mode="gpu"))
    else:
        results = evaluate_all(entries, workers=args.workers)
        runs = evaluate_cpu_runs(entries) if args.assume_gpu_cpu_runs else {}
        for e in entries:
            if e["file"] in runs:
                rows.append(row(e, runs[e["file"]], expected=cpu_run_expectation(e), mode="cpu_run"))
            else:
                rows.append(row(e, results[e["file"]], expected=cpu_expectation(e), mode="cpu"))
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    args.out.write_text(f"<!-- benchmarks/adversarial_table.py, {stamp}, "
                        f"{'GPU' if gpu_count() > 0 else 'CPU, no GPU'} -->\n\n{summary(rows)}\n{markdown_table(rows)}")
    if args.jsonl:
        with open(args.jsonl, "w") as fh:
            for r in rows:
                fh.write(json.dumps(r, default=str) + "\n")
    print(summary(rows), end="")
    return 0 if all(r["match"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
