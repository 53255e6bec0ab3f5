"""Comparison semantics, the result record's JSON round trip, and the resumable store."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cudaperf.harness.compare import compare_arrays, describe_mismatch
from cudaperf.harness.result import (
    EvaluationResult,
    Failure,
    FailureKind,
    GpuEvidence,
    Stage,
    TestOutcome,
    TimingStats,
)
from cudaperf.harness.run_c_program import compare_text
from cudaperf.harness.store import ResultStore
from cudaperf.tasks.schema import Tolerance

TOL = Tolerance(rtol=1e-5, atol=1e-6)


def test_floats_within_and_outside_tolerance():
    exp = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    assert compare_arrays("y", exp, exp * (1 + 1e-6), TOL, is_float=True) is None
    m = compare_arrays("y", exp, np.array([1.0, 2.1, 3.5], dtype=np.float32), TOL, is_float=True)
    assert m.index == 1 and m.n_bad == 2 and math.isclose(m.max_abs_err, 0.5, rel_tol=1e-6)
    assert "y[1]" in describe_mismatch(m)


def test_nan_or_inf_where_reference_has_none_fails():
    exp = np.array([1.0, 2.0])
    assert compare_arrays("y", exp, np.array([1.0, np.nan]), TOL, is_float=True).index == 1
    assert compare_arrays("y", exp, np.array([np.inf, 2.0]), TOL, is_float=True).index == 0
    both = np.array([np.nan, np.inf])
    assert compare_arrays("y", both, both.copy(), TOL, is_float=True) is None


def test_integers_are_exact_and_lengths_must_match():
    exp = np.array([1, 2, 3], dtype=np.int32)
    assert compare_arrays("h", exp, exp.copy(), TOL, is_float=False) is None
    assert compare_arrays("h", exp, np.array([1, 2, 4], dtype=np.int32), TOL, is_float=False).index == 2
    assert compare_arrays("h", exp, exp[:2], TOL, is_float=False).index == -1


def test_text_comparison():
    assert compare_text("1 2.5\n", "1 2.5000001\n", "numeric", TOL) is None
    assert compare_text("1 2.5\n", "1 2.6\n", "numeric", TOL).index == 1
    assert compare_text("ok\n", "ok  \n", "exact", TOL) is None
    assert compare_text("a\nb\n", "a\n", "exact", TOL) is not None


def _result(cid: str, status: str = "scored") -> EvaluationResult:
    return EvaluationResult(
        task_id="t", task_kind="c_function", candidate_id=cid, code_sha256="ab", status=status,
        stage=Stage.TIMED, correct=True, failure=Failure(FailureKind.WRONG_OUTPUT, "m"),
        tests=(TestOutcome(0, {"n": 3}, True),), pass_fraction=1.0,
        candidate_timing=TimingStats.from_samples_ms([1.0, 1.1, 0.9]), speedup=float("inf"),
        gpu_evidence=GpuEvidence("cupti", 3, 1, 0.5), seeds=(1,),
    )


def test_result_json_roundtrip():
    r = _result("a")
    back = EvaluationResult.from_dict(__import__("json").loads(r.to_json()))
    assert back == r


def test_store_appends_resumes_and_survives_a_torn_line(tmp_path):
    s = ResultStore(tmp_path / "r.jsonl")
    s.append(_result("a"))
    s.append(_result("b", status="unscored"))
    with open(s.path, "a") as fh:
        fh.write('{"task_id": "t", "candid')  # a crash mid-write
    s.append(_result("c"))
    assert {r.candidate_id for r in s.read()} == {"a", "b", "c"}
    assert s.done_keys() == {("t", "a"), ("t", "c")}  # unscored results are retried


def test_a_file_that_is_not_a_store_is_an_error_and_a_gzipped_store_is_read_only(tmp_path):
    """A whole JSON line that is not a result (a profile table, say) names the file and line instead of being
    skipped like a torn one; nothing is appended to such a file. A gzipped store reads like the plain one."""
    import gzip

    from cudaperf.harness.executor import run_batch
    from cudaperf.harness.store import StoreFormatError

    s = ResultStore(tmp_path / "r.jsonl")
    s.append(_result("a"))
    with open(s.path, "a") as fh:
        fh.write('{"task_id": "t", "candid\n')  # torn, then resumed on a fresh line
    s.append(_result("b"))
    assert [r.candidate_id for r in s.read()] == ["a", "b"] and s.torn_lines == 1

    other = tmp_path / "profile.jsonl"
    other.write_text('{"candidate_id": "x", "sm_efficiency": 0.5}\n')
    before = other.read_text()
    with pytest.raises(StoreFormatError, match=r"profile.jsonl:1: not an evaluation result"):
        ResultStore(other).read()
    with pytest.raises(StoreFormatError):  # the batch refuses it before it runs anything
        run_batch([], [], other, gpus=[])
    assert other.read_text() == before

    gz = tmp_path / "r.jsonl.gz"
    gz.write_bytes(gzip.compress(s.path.read_bytes()))
    z = ResultStore(gz)
    assert [r.candidate_id for r in z.read()] == ["a", "b"] and z.torn_lines == 1
    with pytest.raises(StoreFormatError, match="compressed"):
        z.append(_result("c"))
    assert [r.candidate_id for r in z.read()] == ["a", "b"]


def test_a_speedup_beyond_the_plausibility_bound_is_flagged_not_dropped():
    from cudaperf.harness.settings import HarnessSettings, speedup_flag

    s = HarnessSettings(plausible_speedup=1000.0)
    assert speedup_flag(999.0, s) is None
    assert "exceeds the plausibility bound 1000x" in speedup_flag(25_000.0, s)
