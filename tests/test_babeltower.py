"""BabelTower tasks: loading, the test-program builders, printout comparison, and real g++ / nvcc sweeps.

Tests that read the data skip when :func:`find_babeltower` finds nothing (a user's checkout has no ``../shared``).
The CPU sweep runs every task by default (about a minute and a half on 2 cores); the nvcc compile check runs
every 10th task unless ``CUDAPERF_FULL=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudaperf.harness.kernel_program import (
    CPU_CXX_FLAGS,
    PrintoutComparison,
    build_cpu_program,
    build_cuda_program,
    compare_printout,
    find_cuda_error,
    parse_program_output,
)
from cudaperf.tasks.babeltower import BABELTOWER_ENV, detokenize, find_babeltower, load_babeltower
from cudaperf.tasks.schema import CudaKernelTask, TaskError, Tolerance

BABELTOWER = find_babeltower()
needs_data = pytest.mark.skipif(
    BABELTOWER is None,
    reason="BabelTower data not found: set CUDAPERF_BABELTOWER to unit_total_eval_cases.jsonl "
    "(or place it in ../shared/data/babeltower/ next to the repository)",
)
FULL = os.environ.get("CUDAPERF_FULL") == "1"
TOL = Tolerance(rtol=1e-4, atol=1e-5)

# Tasks whose expected printout the reference C function cannot reproduce reliably: every one reads or writes
# outside its test arrays (undefined behaviour, confirmed with -fsanitize=address), so the expected values reflect
# the stack layout of the machine that recorded them. Not asserted either way: garbage can happen to match.
CPU_ALLOWED_FAILURES: dict[str, str] = {
    "babeltower-033": "writes buf[0..n-1] into a 1-element buf; the expected mat shows those writes landing in it",
    "babeltower-060": "inner loop increments x instead of z, writing vec[i + 1] past a 1-element vec (test 0)",
    "babeltower-074": "reads xi/xq[u + k*Lq + l] up to index 63 of 8-element arrays; the expected 'inf' is garbage",
    "babeltower-094": "reads filters[fbase + shift] up to shift 4*step from a 1-element filters array (test 0)",
    "babeltower-106": "reads filters[fbase + shift] up to shift 4*step from a 1-element filters array (test 0)",
    "babeltower-126": "inner loop increments x instead of z, writing vec[i + cols] past a 1-element vec (test 0)",
    "babeltower-196": "test 3 reads vec[1..2] of a 1-element vec; the expected buf shows them read from mat",
    "babeltower-195": "reads and writes past its test arrays (AddressSanitizer); passes or crashes with the stack layout",
}


def _subset(tasks: list[CudaKernelTask]) -> list[CudaKernelTask]:
    """Every task under CUDAPERF_FULL=1, else every 10th (a quick default for the slow sweeps)."""
    return tasks if FULL else tasks[::10]


@pytest.fixture(scope="module")
def tasks() -> list[CudaKernelTask]:
    assert BABELTOWER is not None
    return load_babeltower(BABELTOWER)


# ---------------------------------------------------------------------------------------------------------------
# Loading


def _row(**overrides) -> dict:
    row = {
        "cpp_code": 'void scale_cpu ( float * x , float a , int n ) { '
        'for ( int i = 0 ; i < n ; i ++ ) { x [ i ] *= a ; } '
        'if ( n < 0 ) printf ( " n ▁ = ▁ % d \\n " , n ) ; }',
        "cuda_code": "__device__ float twice ( float v ) { return 2 * v ; } "
        "__global__ void scale_kernel ( float * x , float a , int n ) { "
        "int i = threadIdx . x ; if ( i < n ) x [ i ] *= a ; }",
        "cuda_wrapper": "void scale_cuda_invoke_in_cpp(float* x, float a, int n) {\n"
        "    float* d; cudaMalloc((void**)&d, n * sizeof(float));\n"
        "    cudaMemcpy(d, x, n * sizeof(float), cudaMemcpyHostToDevice);\n"
        "    scale_kernel<<<1, n>>>(d, a, n);\n"
        "    cudaMemcpy(x, d, n * sizeof(float), cudaMemcpyDeviceToHost);\n    cudaFree(d);\n}\n",
        "consistent_cpp_inputs": ["float x1[] = {1, 2.5, -3};\nwrapper(scale_cpu, x1, 2.0f, 3);\n"],
        "consistent_cuda_inputs": ["float x1[] = {1, 2.5, -3};\nwrapper(scale_cuda_invoke_in_cpp, x1, 2.0f, 3);\n"],
        "consistent_outputs": ["Return value: void\nArguments after function call: ([ 2, 5, -6 ], 2, 3)\n"],
    }
    row.update(overrides)
    return row


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_synthetic_rows_load(tmp_path):
    p = _write(tmp_path / "unit_total_eval_cases.jsonl", [_row(), _row()])
    for where in (p, tmp_path, str(p)):
        ts = load_babeltower(where)
        assert [t.id for t in ts] == ["babeltower-000", "babeltower-001"]
    t = ts[0]
    assert t.function_name == "scale_cpu" and t.kernel_name == "scale_kernel"
    assert t.tags == ("babeltower",) and t.kind == "cuda_kernel"
    assert t.tolerance == Tolerance(rtol=1e-4, atol=1e-5)
    assert '"n = %d\\n"' in t.reference_c  # string literal de-tokenized
    assert t.test_calls_c[0].startswith("float x1[]") and "scale_cuda_invoke_in_cpp" in t.test_calls_cuda[0]
    assert t.reference_kernel.startswith("__device__") and "cudaMalloc" in t.wrapper


def test_detokenize_only_touches_string_literals():
    assert detokenize('printf ( " % i ▁ ! = ▁ % i \\n " , a , b ) ;') == 'printf ( "%i != %i\\n" , a , b ) ;'
    code = "x [ i ] = a -> b . c + 1e-7 ;"
    assert detokenize(code) == code


@pytest.mark.parametrize(
    "rows, needle",
    [
        ([_row(), "{not json"], ":2 (babeltower-001): not valid JSON"),
        ([_row(), _row(cuda_code=None)], ":2 (babeltower-001): field 'cuda_code'"),
        ([_row(consistent_outputs="oops")], ":1 (babeltower-000): field 'consistent_outputs' must be a list"),
        ([_row(consistent_outputs=[])], "non-empty and of equal length"),
        ([_row(consistent_cuda_inputs=["a;", "b;"])], "consistent_cuda_inputs=2"),
        ([_row(), "", _row()], ":2 (babeltower-001): empty line"),
        ([[1, 2]], "must be a JSON object"),
        ([_row(cuda_code="void no_kernel ( ) { }")], "no __global__ function"),
    ],
)
def test_malformed_input_names_file_and_line(tmp_path, rows, needle):
    p = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(TaskError) as exc:
        load_babeltower(p)
    assert str(p) in str(exc.value) and needle in str(exc.value)


def test_missing_file(tmp_path):
    with pytest.raises(TaskError, match="not found"):
        load_babeltower(tmp_path / "nope.jsonl")
    with pytest.raises(TaskError, match="unit_total_eval_cases.jsonl"):
        load_babeltower(tmp_path)  # a directory without the file
    with pytest.raises(TaskError, match="no BabelTower rows"):
        load_babeltower(_write(tmp_path / "empty.jsonl", []))


def test_find_babeltower(tmp_path, monkeypatch):
    p = _write(tmp_path / "unit_total_eval_cases.jsonl", [_row()])
    monkeypatch.delenv(BABELTOWER_ENV, raising=False)
    assert find_babeltower(p) == p
    assert find_babeltower(tmp_path) == p
    assert find_babeltower(tmp_path / "missing.jsonl") is None  # an explicit path does not fall through
    monkeypatch.setenv(BABELTOWER_ENV, str(tmp_path))
    assert find_babeltower() == p
    monkeypatch.setenv(BABELTOWER_ENV, str(tmp_path / "elsewhere"))
    assert find_babeltower() is None


@needs_data
def test_loads_all_233(tasks):
    assert len(tasks) == 233
    assert [t.id for t in tasks[:2]] == ["babeltower-000", "babeltower-001"]
    assert len({t.id for t in tasks}) == 233
    assert sum(len(t.expected_outputs) for t in tasks) == 948
    t = tasks[0]
    assert (t.function_name, t.kernel_name) == ("add_sources_d", "add_sources_d")
    for t in tasks:
        assert t.function_name in t.reference_c and "__global__" in t.reference_kernel
        assert len(t.test_calls_c) == len(t.test_calls_cuda) == len(t.expected_outputs)


# ---------------------------------------------------------------------------------------------------------------
# Printout comparison

EXP = "Return value: void\nArguments after function call: (4, 0.3, [ 0.2, 0.3, 0.4, 0.5 ], 1, [ 0, 0, 0.4, 0.5 ], 1)\n"


def _got(arr: str = "[ 0, 0, 0.4, 0.5 ]", scalar: str = "0.3") -> str:
    return f"Return value: void\nArguments after function call: (4, {scalar}, [ 0.2, 0.3, 0.4, 0.5 ], 1, {arr}, 1)\n"


def test_compare_exact():
    c = compare_printout(EXP, EXP, TOL)
    assert isinstance(c, PrintoutComparison) and c.passed and c.max_abs_err == 0


def test_compare_within_tolerance():
    c = compare_printout(EXP, _got("[ 0, 1e-06, 0.400001, 0.5 ]"), TOL)
    assert c.passed, c.message
    assert 0 < c.max_abs_err < 2e-6
    # print rounding of 6 significant digits is always covered, even with a tiny rtol
    assert compare_printout("Return value: void\nArguments after function call: (123457)\n",
                            "Return value: void\nArguments after function call: (123456.5)\n",
                            Tolerance(rtol=0, atol=0)).passed


def test_compare_outside_tolerance():
    c = compare_printout(EXP, _got("[ 0, 0, 0.41, 0.5 ]"), TOL)
    assert not c.passed
    assert (c.argument, c.element, c.expected_value, c.got_value) == (4, 2, "0.4", "0.41")
    assert c.max_abs_err == pytest.approx(0.01) and c.max_rel_err == pytest.approx(0.025)
    assert "argument 4 element 2" in c.message
    c = compare_printout(EXP, _got(scalar="0.31"), TOL)
    assert not c.passed and (c.argument, c.element) == (1, None)


def test_compare_large_integers_exactly():
    e = "Return value: void\nArguments after function call: ([ 12345678 ])\n"
    assert not compare_printout(e, e.replace("12345678", "12345679"), TOL).passed


def test_compare_nan_and_inf():
    nan_exp = _got("[ 0, 0, nan, 0.5 ]")
    assert compare_printout(nan_exp, _got("[ 0, 0, -nan, 0.5 ]"), TOL).passed
    assert not compare_printout(nan_exp, _got("[ 0, 0, 0.4, 0.5 ]"), TOL).passed
    c = compare_printout(EXP, _got("[ 0, 0, nan, 0.5 ]"), TOL)
    assert not c.passed and c.got_value == "nan" and "non-finite" in c.message
    assert not compare_printout(EXP, _got("[ 0, 0, inf, 0.5 ]"), TOL).passed
    inf_exp = _got("[ 0, 0, inf, 0.5 ]")
    assert compare_printout(inf_exp, _got("[ 0, 0, inf, 0.5 ]"), TOL).passed
    assert not compare_printout(inf_exp, _got("[ 0, 0, -inf, 0.5 ]"), TOL).passed


def test_compare_structure_mismatch():
    c = compare_printout(EXP, _got("[ 0, 0, 0.4 ]"), TOL)
    assert not c.passed and c.argument == 4 and "array of 4" in c.message and "array of 3" in c.message
    c = compare_printout(EXP, EXP.replace(", 1)\n", ")\n"), TOL)
    assert not c.passed and "argument count differs: expected 6, got 5" in c.message
    c = compare_printout(EXP, _got(scalar="[ 0.3 ]"), TOL)
    assert not c.passed and "scalar" in c.message
    c = compare_printout(EXP, "Segmentation fault\n", TOL)
    assert not c.passed and "not in the expected format" in c.message
    c = compare_printout(EXP, None, TOL)
    assert not c.passed and "did not finish" in c.message
    c = compare_printout(EXP, EXP.replace("void", "0"), TOL)
    assert not c.passed and c.argument == -1 and "return value" in c.message


def test_compare_printed_chars():
    # unsigned char arrays print raw bytes, including ',', ' ', ']' and newlines; \r was read back as \n
    e = "Return value: void\nArguments after function call: ([ \x01, ,,  , ], \n ], 3)\n"
    assert compare_printout(e, e, TOL).passed
    got = e.replace("\x01", "\x02")
    c = compare_printout(e, got, TOL)
    assert not c.passed and (c.argument, c.element) == (0, 0) and "text differs" in c.message
    e2 = "Return value: void\nArguments after function call: ([ \x0c, \n, \x0e ], 3)\n"
    assert compare_printout(e2, e2.replace("\x0c, \n", "\x0c, \r"), TOL).passed


def test_compare_empty_printout():
    assert compare_printout("", "", TOL).passed  # a test with no statements prints nothing
    assert not compare_printout("", EXP, TOL).passed


def test_parse_program_output():
    out = ("@@CUDAPERF_TEST 0@@\nA\n@@CUDAPERF_TEST_END 0@@\n"
           "@@CUDAPERF_TEST 1@@\n@@CUDAPERF_TEST_END 1@@\n"
           "@@CUDAPERF_TEST 2@@\npartial\n@@CUDAPERF_CUDA_ERROR 2 cudaErrorIllegalAddress@@\n")
    assert parse_program_output(out, 4) == ["A\n", "", None, None]
    assert find_cuda_error(out) == (2, "cudaErrorIllegalAddress")
    assert find_cuda_error("@@CUDAPERF_TEST 0@@\n") is None
    assert parse_program_output("", 2) == [None, None]


# ---------------------------------------------------------------------------------------------------------------
# Real builds

GXX = shutil.which("g++")
NVCC = shutil.which("nvcc")
needs_gxx = pytest.mark.skipif(GXX is None, reason="g++ not found")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found")


def _run_cpu(task: CudaKernelTask, workdir: Path, timeout_s: float = 20) -> tuple[str, list[PrintoutComparison]]:
    """Build and run one task's CPU program; ('', comparisons) on success, else (problem, [])."""
    workdir.mkdir(parents=True, exist_ok=True)
    src, exe = workdir / "prog.cpp", workdir / "prog"
    src.write_text(build_cpu_program(task), encoding="utf-8")
    cc = subprocess.run([GXX, *CPU_CXX_FLAGS, "-w", "-o", str(exe), str(src)], capture_output=True, text=True)
    if cc.returncode != 0:
        return f"g++ failed: {cc.stderr[-1500:]}", []
    try:
        run = subprocess.run([str(exe)], capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout_s} s", []
    stdout = run.stdout.decode("latin-1")  # printed unsigned chars are raw bytes
    printouts = parse_program_output(stdout, len(task.expected_outputs))
    cmps = [compare_printout(e, g, task.tolerance) for e, g in zip(task.expected_outputs, printouts)]
    if run.returncode != 0:
        return f"exit status {run.returncode}", cmps
    return "", cmps


@needs_gxx
def test_print_helper_format(tmp_path):
    """The wrapper helper on its own, without the data: arrays, chars, scalars as passed, a return value."""
    ref = ("float sum_cpu ( float * x , unsigned char * c , double d , int n ) { float s = 0 ; "
           "for ( int i = 0 ; i < n ; i ++ ) { "
           "s += x [ i ] ; x [ i ] = 0.1f * i + 1e6f * ( i == 2 ) ; c [ i ] += 1 ; } "
           "return s + d ; }")
    call = ("float x1[3] = {1, 2, 3.5};\nunsigned char c1[] = {'a', 'b', 'c'};\nconst int n1 = 3;\n"
            "wrapper(sum_cpu, x1, c1, 0.25, n1);\n // a trailing comment without a newline")
    expected = "Return value: 6.75\nArguments after function call: ([ 0, 0.1, 1e+06 ], [ b, c, d ], 0.25, 3)\n"
    task = CudaKernelTask(id="t", function_name="sum_cpu", kernel_name="k", reference_c=ref, reference_kernel="",
                          wrapper="", test_calls_c=(call, " "), test_calls_cuda=(call, " "),
                          expected_outputs=(expected, ""))
    problem, cmps = _run_cpu(task, tmp_path)
    assert problem == ""
    assert [c.passed for c in cmps] == [True, True], [c.message for c in cmps]
    assert cmps[0].message == "ok (identical)"  # byte-for-byte the expected format


@pytest.mark.slow  # 110 s on two cores: all 233 C references built and run (the GPU suite runs them too)
@needs_data
@needs_gxx
def test_cpu_reference_reproduces_expected_outputs(tasks, tmp_path):
    """Every task's C reference, built with g++ and the print helper, reproduces its expected printouts."""
    def one(task: CudaKernelTask) -> tuple[CudaKernelTask, str, list[PrintoutComparison]]:
        problem, cmps = _run_cpu(task, tmp_path / task.id)
        return task, problem, cmps

    with ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(one, tasks))
    failures = []
    n_pass = 0
    for task, problem, cmps in results:
        bad = [f"test {i}: {c.message}" for i, c in enumerate(cmps) if not c.passed]
        if not problem and not bad:
            n_pass += 1
        elif task.id not in CPU_ALLOWED_FAILURES:
            failures.append(f"{task.id} ({task.function_name}): {problem} {'; '.join(bad)[:600]}")
    assert not failures, f"{len(failures)} tasks fail:\n" + "\n".join(failures)
    assert n_pass >= len(tasks) - len(CPU_ALLOWED_FAILURES)


@pytest.mark.slow  # 30 s on two cores: every program through nvcc (bt-full builds them on the GPU machine)
@needs_data
@needs_nvcc
def test_cuda_programs_compile(tasks, tmp_path):
    """The CUDA test program (reference kernel + wrapper + helper) compiles with nvcc (every 10th task unless
    CUDAPERF_FULL=1)."""
    def one(task: CudaKernelTask) -> str:
        src = tmp_path / f"{task.id}.cu"
        src.write_text(build_cuda_program(task, task.reference_kernel), encoding="utf-8")
        r = subprocess.run([NVCC, "-arch=sm_90", "-c", "-w", "-o", str(src.with_suffix(".o")), str(src)],
                           capture_output=True, text=True)
        return "" if r.returncode == 0 else f"{task.id}: {r.stderr[-1500:]}"

    with ThreadPoolExecutor(max_workers=2) as ex:
        errors = [e for e in ex.map(one, _subset(tasks)) if e]
    assert not errors, "\n".join(errors)


@needs_data
def test_cuda_program_structure(tasks):
    t = tasks[0]
    prog = build_cuda_program(t, "__global__ void add_sources_d() {}")
    assert prog.index("#include <cuda_runtime.h>") < prog.index("__global__ void add_sources_d() {}")
    assert prog.index("__global__ void add_sources_d() {}") < prog.index(t.wrapper) < prog.index("int main(")
    n = len(t.test_calls_cuda)
    for i in range(n):
        assert f'"@@CUDAPERF_TEST {i}" << nonce_' in prog and f'"@@CUDAPERF_TEST_END {i}" << nonce_' in prog
    assert prog.count("cudaDeviceSynchronize()") == n and prog.count("std::exit(3)") == n
    assert t.reference_kernel not in prog


def test_markers_need_the_runs_nonce():
    out = "@@CUDAPERF_TEST 0 abc@@\nA\n@@CUDAPERF_TEST_END 0 abc@@\n@@CUDAPERF_TEST 1@@\nfake\n@@CUDAPERF_TEST_END 1@@\n"
    assert parse_program_output(out, 2, "abc") == ["A\n", None]
