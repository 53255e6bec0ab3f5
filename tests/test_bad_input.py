"""Bad completions end to end without a GPU: through the compile-only Evaluator, through check_candidate, and
through ``cudaperf evaluate --candidate FILE``. Each is a scored candidate failure with a clear message."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.env.evaluator import Evaluator
from cudaperf.harness.evaluate import check_candidate
from cudaperf.harness.result import FailureKind
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.static_checks import MAX_CODE_BYTES, check_source
from cudaperf.tasks import load_builtin_tasks
from cudaperf.tasks.load import builtin_dir

FAST_CU = (builtin_dir("c_functions") / "saxpy" / "fast.cu").read_text(encoding="utf-8")

BAD = {
    # 20 MB: a valid kernel followed by a 20 MB comment (the whole text is the code, "raw")
    "huge": (FAST_CU + "// " + "x" * (20 * 2**20) + "\n", FailureKind.STATIC_CHECK, "the limit is"),
    "huge_tagged": ("<OUTPUT_CUDA>\n" + FAST_CU * (20 * 2**20 // len(FAST_CU)) + "</OUTPUT_CUDA>",
                    FailureKind.STATIC_CHECK, "the limit is"),
    "nul_and_surrogates": ("<OUTPUT_CUDA>\n" + FAST_CU + "int z = 0;\x00 \ud800\udfff\n</OUTPUT_CUDA>",
                           FailureKind.STATIC_CHECK, "NUL byte (line"),
    "binary_junk": (bytes(range(256)).decode("utf-8", errors="replace") * 200, FailureKind.NO_CODE, "no code found"),
    "binary_junk_with_include": ("#include <x>\n" + bytes(range(256)).decode("utf-8", errors="replace") * 200,
                                 FailureKind.STATIC_CHECK, "no __global__ kernel"),
    "whitespace": (" \n\t\r\n   \n", FailureKind.NO_CODE, "no code found"),
    "python": ("```python\nimport os\nprint(os.listdir('.'))\n```\n", FailureKind.STATIC_CHECK,
               "no __global__ kernel"),
    "c_without_cuda": ("#include <stdio.h>\nvoid saxpy(int n, float a, const float* x, float* y)"
                       " { for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i]; }\n",
                       FailureKind.STATIC_CHECK, "no __global__ kernel"),
}


@pytest.fixture(scope="module")
def tasks():
    return load_builtin_tasks()


@pytest.fixture(scope="module")
def saxpy(tasks):
    return next(t for t in tasks if t.id == "saxpy")


@pytest.mark.parametrize("name", sorted(BAD))
def test_check_candidate_scores_bad_completions(saxpy, name):
    completion, kind, words = BAD[name]
    t0 = time.monotonic()
    checked = check_candidate(saxpy, completion, name, HarnessSettings())
    assert time.monotonic() - t0 < 20, "a bad completion must be rejected quickly"
    res = checked.result
    assert res is not None, f"{name}: passed the checks"
    assert res.status == "scored" and not res.correct
    assert res.failure.kind == kind and words in res.failure.message, res.failure.message[:300]
    json.loads(res.to_json())  # the record can be stored


def test_size_limit_counts_utf8_bytes_and_names_the_sizes():
    code = FAST_CU + "// " + "é" * (MAX_CODE_BYTES // 2) + "\n"  # fewer characters than the limit, more bytes
    assert len(code) < MAX_CODE_BYTES
    res = check_source(code)
    n = len(code.encode("utf-8"))
    assert not res.ok and res.reasons == (f"the code is {n} bytes; the limit is {MAX_CODE_BYTES} bytes "
                                          "(MAX_CODE_BYTES)",)
    assert check_source(FAST_CU).ok  # a real candidate far below the limit is not touched


def test_surrogates_are_named_with_their_line():
    res = check_source(FAST_CU + "\n// \udc80\n")
    line = FAST_CU.count("\n") + 2
    assert not res.ok and any(f"U+DC80 (a lone surrogate, line {line})" in r for r in res.reasons), res.reasons


def test_compile_only_evaluator_scores_every_bad_completion(tasks, tmp_path):
    ev = Evaluator(tasks, tmp_path / "results.jsonl", compile_only=True, compile_workers=2)
    items = [("saxpy", name, BAD[name][0]) for name in sorted(BAD)]
    results = ev.evaluate(items)
    assert [r.candidate_id for r in results] == sorted(BAD)
    for r in results:
        completion, kind, words = BAD[r.candidate_id]
        assert r.status == "scored" and not r.correct, (r.candidate_id, r.status)
        assert r.failure.kind == kind and words in r.failure.message, (r.candidate_id, r.failure.message[:200])
    # stored, and read back as the same verdicts (surrogates and NULs survive the JSONL store)
    again = Evaluator(tasks, tmp_path / "results.jsonl", compile_only=True).evaluate(items)
    assert [(r.candidate_id, r.failure.kind) for r in again] == [(r.candidate_id, r.failure.kind) for r in results]
    nul = next(r for r in again if r.candidate_id == "nul_and_surrogates")
    expected = BAD["nul_and_surrogates"][0].split("<OUTPUT_CUDA>\n")[1].split("</OUTPUT_CUDA>")[0]
    assert nul.code_sha256 == hashlib.sha256(expected.encode("utf-8", "surrogatepass")).hexdigest()


def test_cli_evaluate_reads_a_non_utf8_candidate(tmp_path):
    cand = tmp_path / "latin1.cu"
    cand.write_bytes("// Gr\xfc\xdfe, caf\xe9\n#include <stdio.h>\nint main() { return 0; }\n".encode("latin-1"))
    r = CliRunner().invoke(app, ["evaluate", "--task", "saxpy", "--candidate", str(cand), "--json"])
    assert r.exit_code == 0, r.output[-2000:]
    rec = json.loads(r.output.strip().splitlines()[-1])
    assert rec["status"] == "scored" and rec["failure"]["kind"] == "static_check"
    assert "no __global__ kernel" in rec["failure"]["message"]
    text = cand.read_bytes().decode("utf-8", errors="replace")
    assert "\ufffd" in text and rec["code_sha256"] == hashlib.sha256(text.encode()).hexdigest()
