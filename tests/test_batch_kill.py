"""`cudaperf batch` killed at any point (the whole process group, SIGKILL) resumes from its store with nothing lost
or duplicated: every job ends up with exactly one scored record, and records written before the kill are kept as
they were. On the CPU the jobs are ones the harness scores without a GPU (no code, static rejections, compile
errors), each source new to the compile cache so the run really compiles."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cudaperf.tasks.load import builtin_candidates

TASKS = ["saxpy", "dot", "histogram", "conv1d"]


def _jobs(path: Path) -> list[tuple[str, str]]:
    nonce = uuid.uuid4().hex
    src = {(c.task_id, c.label): c.source for c in builtin_candidates()}
    rows = []
    for tid in TASKS:
        fast = src[(tid, "fast")]
        rows += [
            {"task_id": tid, "candidate_id": "nocode", "completion": f"I cannot do that ({nonce})."},
            {"task_id": tid, "candidate_id": "static", "completion": f"<OUTPUT_CUDA>// {nonce}\n#include <cstdio>\n"
                                                                   "void f() { system(\"ls\"); }\n</OUTPUT_CUDA>"},
            {"task_id": tid, "candidate_id": "broken1",
             "completion": f"<OUTPUT_CUDA>// {nonce} 1\n{fast}\nstatic int broken = ;\n</OUTPUT_CUDA>"},
            {"task_id": tid, "candidate_id": "broken2",
             "completion": f"<OUTPUT_CUDA>// {nonce} 2\n{fast}\nstatic float also_broken = (;\n</OUTPUT_CUDA>"},
        ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [(r["task_id"], r["candidate_id"]) for r in rows]


def _records(store: Path) -> list[dict]:
    out = []
    if store.exists():
        for line in store.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a torn last line: the store skips it
    return out


def _batch(comps: Path, store: Path) -> list[str]:
    return [sys.executable, "-m", "cudaperf", "batch", "--tasks", "builtin", "--completions", str(comps),
            "--store", str(store)]


@pytest.mark.parametrize("kill_after", [1, 9])
def test_a_killed_batch_resumes_with_nothing_lost_or_duplicated(tmp_path, kill_after):
    comps, store = tmp_path / "c.jsonl", tmp_path / "store.jsonl"
    jobs = _jobs(comps)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(_batch(comps, store), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while len(_records(store)) < kill_after and proc.poll() is None:
        assert time.monotonic() < deadline, "the batch made no progress"
        time.sleep(0.02)
    assert proc.poll() is None, "the batch ended before it could be killed: " + proc.stdout.read().decode()[-2000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _records(store)
    assert kill_after <= len(before) < len(jobs)
    done = subprocess.run(_batch(comps, store), capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    after = _records(store)
    assert after[: len(before)] == before  # nothing rewritten
    keys = [(r["task_id"], r["candidate_id"]) for r in after]
    assert sorted(keys) == sorted(jobs) and len(keys) == len(set(keys))  # each job once
    assert all(r["status"] == "scored" for r in after)
    kinds = {(r["task_id"], r["candidate_id"]): r["failure"]["kind"] for r in after}
    assert {kinds[(t, "nocode")] for t in TASKS} == {"no_code"}
    assert {kinds[(t, "static")] for t in TASKS} == {"static_check"}
    assert {kinds[(t, c)] for t in TASKS for c in ("broken1", "broken2")} == {"compile_error"}
