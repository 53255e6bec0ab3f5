"""Property-based fuzzing (hypothesis) of the parts that read untrusted or user-written text: completion
extraction, the paper's structural features, task loading and the static checks. Each property states the
documented contract (never raise; raise only TaskError; NaN only with a reason); the @example lines are the
crashes fuzzing found, kept as regressions."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cudaperf.features.paper import PAPER_FEATURES, extract_paper_features
from cudaperf.harness.extract import extract_code
from cudaperf.harness.static_checks import check_source
from cudaperf.tasks.load import builtin_dir, load_tasks
from cudaperf.tasks.schema import TaskError, task_from_dict

# Derandomized: CI sees the same examples on every run, so a new failure comes from a code change, not from luck.
# CUDAPERF_FUZZ_EXPLORE=N searches further: random examples, N times as many (then add what it finds as @example).
_EXPLORE = int(os.environ.get("CUDAPERF_FUZZ_EXPLORE", "0") or 0)
_KW = dict(deadline=None, derandomize=not _EXPLORE, database=None, suppress_health_check=[HealthCheck.too_slow])
FAST = settings(max_examples=150 * max(1, _EXPLORE), **_KW)
FEW = settings(max_examples=60 * max(1, _EXPLORE), **_KW)

FAST_SOURCES = sorted((builtin_dir("c_functions")).glob("*/fast.cu"))
SOURCES = [p.read_text(encoding="utf-8") for p in FAST_SOURCES]

# Text built from the pieces the extractor and the checks react to, plus arbitrary unicode (surrogates included).
FRAGMENTS = st.sampled_from([
    "<OUTPUT_CUDA>", "</OUTPUT_CUDA>", "<output_cuda>", "</Output_Cuda>", "```", "```cuda\n", "```c++ x\n", "\n",
    "\r\n", "\x00", "\ud800", "\u2028", "__global__ void k(float* a) { a[threadIdx.x] = 1; }\n", "#include <cstdio>\n",
    "k<<<1, 256>>>(a);\n", "/*", "*/", "//", '"', "'", "#define __global__\n", "system(", "fopen(", "\\",
])
ANY_TEXT = st.text(alphabet=st.characters(codec=None), max_size=300)
PIECES = st.lists(st.one_of(FRAGMENTS, ANY_TEXT), max_size=30).map("".join)
HUGE = st.tuples(st.one_of(FRAGMENTS, ANY_TEXT.filter(bool)), st.integers(1, 4000)).map(
    lambda t: t[0] * t[1] if len(t[0]) * t[1] <= 400_000 else t[0] * (400_000 // max(1, len(t[0]))))
COMPLETIONS = st.one_of(ANY_TEXT, PIECES, HUGE)


# ---------------------------------------------------------------------------------------------------- extraction
@FAST
@given(COMPLETIONS)
@example("<OUTPUT_CUDA>" * 50)
@example("```cuda\n```\n<OUTPUT_CUDA>\n```\n__global__ void k(){}\n")
@example("<OUTPUT_CUDA>\x00\ud800</OUTPUT_CUDA>")
@example("<OUTPUT_CUDA>```\n```")
def test_extraction_never_raises_and_takes_only_text_from_the_input(completion):
    ext = extract_code(completion)
    assert ext.method in ("tag", "fence", "raw", "none")
    assert (ext.code is None) == (ext.method == "none")
    if ext.code is None:
        return
    assert ext.code.strip(), "an extraction never returns blank code"
    if ext.method == "raw":
        assert ext.code == completion
    else:  # a span of the input, plus the one newline that ends the file
        assert ext.code.endswith("\n") and ext.code[:-1] in completion
    for line in ext.code.splitlines():
        assert line in completion


def _has_markup(code: str) -> bool:
    return "```" in code or "output_cuda>" in code.lower()


@FAST
@given(COMPLETIONS)
@example("<OUTPUT_CUDA>\n\n__global__ void k(){}\n\n</OUTPUT_CUDA>")
@example("<OUTPUT_CUDA>```\n```")
def test_extraction_is_idempotent_on_its_own_output(completion):
    """Extracted code without markup: extracting again from it gives it back (it is CUDA-looking, or has no
    kernel and is then not picked up as raw), and wrapping it in the paper's tags gives it back (newline-trimmed)."""
    code = extract_code(completion).code
    if code is None or _has_markup(code):
        return
    wrapped = extract_code(f"<OUTPUT_CUDA>\n{code}</OUTPUT_CUDA>")
    # tag and fence code is already newline-trimmed and newline-ended; raw code (a whole file) is kept as given
    assert (wrapped.method, wrapped.code) == ("tag", code.strip("\n") + "\n")
    again = extract_code(code)
    assert again.code in (code, None)
    if "__global__" in code:
        assert again.code == code


# ---------------------------------------------------------------------------------------------------- features
COUNTS = ("kernels", "atomics", "syncthreads", "gmem_access", "ops")


def _check_features(fv) -> None:
    assert set(fv.values) == set(PAPER_FEATURES)
    for name, value in fv.values.items():
        assert isinstance(value, float), name
        if math.isnan(value):
            assert isinstance(fv.reasons.get(name), str) and fv.reasons[name], f"{name} is NaN without a reason"
        else:
            assert math.isfinite(value), f"{name} = {value}"
    for name in COUNTS:
        value = fv.values[name]
        if not math.isnan(value):
            assert value >= 0 and value == int(value), f"{name} = {value} is not a count"
    assert fv.parse_errors >= 0 and isinstance(fv.parse_errors, int)
    if not math.isnan(fv.values["div"]):
        assert fv.values["div"] <= 0


@FEW
@given(COMPLETIONS)
def test_paper_features_on_arbitrary_text(text):
    fv = extract_paper_features(text)
    _check_features(fv)
    assert not any(r.startswith("internal error") for r in fv.reasons.values()), fv.reasons


@st.composite
def mutated_sources(draw):
    src = draw(st.sampled_from(SOURCES))
    for _ in range(draw(st.integers(1, 6))):
        n = len(src)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 200)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if op == "delete":
            src = src[:i] + src[j:]
        elif op == "insert":
            src = src[:i] + draw(st.one_of(FRAGMENTS, ANY_TEXT, st.sampled_from(["{", "}", "(", ")", ";", "[", "]"])))\
                + src[i:]
        else:
            src = src[:j] + src[i:j] * draw(st.integers(1, 5)) + src[j:]
    return src


@FEW
@given(mutated_sources())
def test_paper_features_on_mutated_real_sources(src):
    fv = extract_paper_features(src)
    _check_features(fv)
    assert not any(r.startswith("internal error") for r in fv.reasons.values()), fv.reasons


def test_paper_features_read_the_unmutated_sources():
    """The fuzzed property above is not vacuous: the real sources give real kernels and finite features."""
    for src in SOURCES:
        fv = extract_paper_features(src)
        _check_features(fv)
        assert fv.values["kernels"] >= 1


# ---------------------------------------------------------------------------------------------------- tasks
FIELDS = ["id", "kind", "function_name", "reference_c", "args", "size_configs", "returns", "tolerance",
          "timing_config", "description", "tags", "input_generator_c", "n_configs", "compare", "kernel_name",
          "reference_kernel", "wrapper", "test_calls_c", "test_calls_cuda", "expected_outputs", "source",
          "name", "role", "ctype", "length", "dist", "low", "high", "value", "rtol", "atol", "fp32"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-10**400, max_value=10**400),
                    st.floats(), st.text(max_size=20), st.sampled_from(["c_function", "c_program", "cuda_kernel",
                                                                         "pytorch", "n", "float", "in", "-1"]))
KEYS = st.one_of(st.sampled_from(FIELDS), st.text(max_size=8))
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(KEYS, inner, max_size=5)), max_leaves=20)
BAD_EXPRESSIONS = st.sampled_from([
    "n +", "", "__import__('os').system('x')", "n.real", "lambda: 1", "-" * 100_000 + "1", "1+" * 50_000 + "1",
    "(" * 300 + "n" + ")" * 300, "n\x00", "[n]", "-5", "nope * 2", "min()", "1e999", "n ** 99999",
])
BAD_VALUES = st.one_of(JSONISH, BAD_EXPRESSIONS, st.integers(max_value=-1), st.floats(allow_nan=True))


def _bundled_record(task_dir: Path) -> dict:
    d = json.loads((task_dir / "task.json").read_text(encoding="utf-8"))
    d.setdefault("id", task_dir.name)
    d.setdefault("kind", "c_function")
    for key, fname in (("reference_c", "reference.c"), ("input_generator_c", "generator.c")):
        if key not in d and (task_dir / fname).exists():
            d[key] = (task_dir / fname).read_text(encoding="utf-8")
    return d


RECORDS = [_bundled_record(p.parent) for p in sorted(builtin_dir("c_functions").glob("*/task.json"))[:6]] + [
    _bundled_record(p.parent) for p in sorted(builtin_dir("c_programs").glob("*/task.json"))[:2]]


def _load_or_task_error(record) -> None:
    try:
        task_from_dict(record)
    except TaskError as exc:
        assert str(exc)


@FAST
@given(st.one_of(JSONISH, st.dictionaries(KEYS, JSONISH, max_size=12)))
@example({"id": "t", "kind": "c_function", "function_name": "f", "reference_c": "", "args": [
    {"name": "x", "role": "out", "ctype": ["float"], "length": "n"}], "size_configs": [{"n": 1}, {"n": 2}]})
@example({"id": "t", "kind": "c_program", "reference_c": "", "input_generator_c": "", "n_configs": "two"})
@example({"id": "t", "kind": "c_program", "reference_c": "", "input_generator_c": "", "tags": 3})
@example({"id": "t", "kind": "pytorch", "source": "(" * 200 + ")" * 200})
def test_task_from_dict_on_arbitrary_records(record):
    _load_or_task_error(record)


@st.composite
def mutated_records(draw):
    rec = copy.deepcopy(draw(st.sampled_from(RECORDS)))
    for _ in range(draw(st.integers(1, 4))):
        target = rec
        if "args" in rec and isinstance(rec["args"], list) and rec["args"] and draw(st.booleans()):
            target = rec["args"][draw(st.integers(0, len(rec["args"]) - 1))]
            if not isinstance(target, dict):
                continue
            if isinstance(target.get("dist"), dict) and draw(st.booleans()):
                target = target["dist"]
        if not target:
            continue
        key = draw(st.sampled_from(sorted(target)))
        op = draw(st.sampled_from(["drop", "replace", "bad_expression"]))
        if op == "drop":
            del target[key]
        elif op == "replace":
            target[key] = draw(BAD_VALUES)
        else:
            target[draw(st.sampled_from(["length", "low", "high", "value", "timing_config", "n_configs"]))] = \
                draw(BAD_EXPRESSIONS)
    if draw(st.booleans()) and isinstance(rec.get("size_configs"), list) and rec["size_configs"]:
        cfg = rec["size_configs"][0]
        if isinstance(cfg, dict) and cfg:
            cfg[sorted(cfg)[0]] = draw(st.integers(-10**6, -1))
    return rec


@FAST
@given(mutated_records())
@example(dict(RECORDS[0], timing_config=float("nan")))
@example(dict(RECORDS[0], timing_config=float("inf")))
@example(dict(RECORDS[0], timing_config="last"))
@example(dict(RECORDS[0], tolerance={"rtol": 10**400}))
@example(dict(RECORDS[0], returns={"float": 1}))
@example(dict(RECORDS[0], args=[dict(RECORDS[0]["args"][0], length="-" * 100_000 + "1", role="in")]
                              + RECORDS[0]["args"][1:]))
@example(dict(RECORDS[0], args=[dict(RECORDS[0]["args"][0], length="1+" * 50_000 + "1", role="in")]
                              + RECORDS[0]["args"][1:]))
def test_task_from_dict_on_mutated_bundled_records(record):
    _load_or_task_error(record)


def test_the_bundled_records_load_unmutated():
    """The mutation property above starts from records that are valid: a TaskError there is the mutation's."""
    for rec in RECORDS:
        assert task_from_dict(rec).id == rec["id"]


GARBAGE_LINE = st.one_of(
    st.binary(min_size=1, max_size=60),
    ANY_TEXT.map(lambda s: s.encode("utf-8", errors="surrogatepass")),
    st.sampled_from([b"[" * 100_000, b"1" * 5000, b"{", b"[]", b"null", b'{"id": 3}', b"\xff\xfe", b"\x00",
                     b'{"id": "x", "kind": "c_function"}']),
).map(lambda b: b.replace(b"\n", b" "))


@FEW
@given(n_good=st.integers(0, 3), garbage=st.lists(GARBAGE_LINE, min_size=1, max_size=4))
@example(n_good=1, garbage=[b"\xff\xfe"])
@example(n_good=0, garbage=[b"[" * 100_000])
@example(n_good=2, garbage=[b"1" * 5000])
def test_jsonl_with_garbage_lines_names_file_and_line(tmp_path_factory, n_good, garbage):
    good = [json.dumps(dict(RECORDS[i % 6], id=f"task{i}")).encode() for i in range(n_good)]
    path = tmp_path_factory.mktemp("jsonl") / "tasks.jsonl"
    path.write_bytes(b"\n".join(good + garbage) + b"\n")
    first_bad = None
    for k, raw in enumerate(garbage, n_good + 1):
        try:
            blank = not raw.decode("utf-8").strip()  # a blank line (by str.strip: also \x85, \u3000) is skipped
        except UnicodeDecodeError:
            blank = False
        if not blank:
            first_bad = k
            break
    if first_bad is None:
        assert len(load_tasks(path)) == n_good if n_good else pytest.raises(TaskError, load_tasks, path)
        return
    with pytest.raises(TaskError) as err:
        load_tasks(path)
    assert f"{path}:{first_bad}:" in str(err.value), str(err.value)[:300]


# ---------------------------------------------------------------------------------------------------- checks
@FAST
@given(COMPLETIONS, st.sampled_from(["c_function", "c_program", "cuda_kernel"]),
       st.one_of(st.none(), st.text(max_size=10), st.sampled_from(["k", "a[", "(", "*"])))
@example("__global__ void k(){}\n#define __global__\n\x00\ud800", "cuda_kernel", "(")
@example('"unterminated /* string', "c_function", None)
def test_static_checks_never_raise(code, kind, kernel_name):
    res = check_source(code, kind=kind, kernel_name=kernel_name)
    assert res.ok == (not res.reasons)
    assert all(isinstance(r, str) and r for r in res.reasons)
    if "\x00" in code:
        assert not res.ok and any("NUL byte" in r for r in res.reasons)
