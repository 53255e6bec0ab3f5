"""The static checks on preprocessed text, the dynamic-initializer check, and cuda_kernel hidden tests (CPU only).

Preprocessing: a launch the compiler never sees (``#if 0``, an unexpanded macro) does not count, names the
candidate's own macros assemble are on the deny list, and a preprocessor failure falls back to the raw text
without rejecting. Dynamic initializers: code that would run before ``main`` is rejected, constant initializers
are not. Hidden tests: BabelTower's babeltower-003 gets tests of other sizes whose expected printouts come from
its C reference.
"""

from __future__ import annotations

import shutil

import pytest

from cudaperf.harness.static_checks import check_source, dynamic_initializers, strip_comments_and_strings

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 0; }\n"
LAUNCH = "void f(float* x) { k<<<1, 32>>>(x); }\n"
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found")


@needs_gcc
@pytest.mark.parametrize("hide", ["#if 0\n{}#endif\n", "#ifdef NEVER_DEFINED\n{}#endif\n",
                                  "#if 1\n#else\n{}#endif\n", "#define UNUSED(x) {}"])
def test_a_launch_the_compiler_never_sees_does_not_count(hide):
    src = KERNEL + "void f(float* x) {\n" + hide.format("k<<<1, 32>>>(x);\n") + "\n}\n"
    r = check_source(src)
    assert not r.ok and r.preprocessed == "gcc -E"
    assert any("no kernel is launched" in x for x in r.reasons), r.reasons


@needs_gcc
def test_the_same_launch_outside_the_conditional_counts():
    r = check_source("#define BLOCK(n) ((n) + 31) / 32\n#if 1\n" + KERNEL + "#endif\n" +
                     "void f(float* x, int n) { k<<<BLOCK(n), 32>>>(x); }\n")
    assert r.ok, r.reasons
    assert r.launched == ("k",)


@needs_gcc
@pytest.mark.parametrize("spelling, name", [("#define CAT(a, b) a##b\n", "CAT(fo, pen)"),
                                            ("#define OPEN fopen\n", "OPEN"),
                                            ("#define CAT(a, b) a##b\n#define SYS CAT(sys, tem)\n", "SYS")])
def test_names_assembled_by_the_candidates_macros_are_on_the_deny_list(spelling, name):
    r = check_source(spelling + KERNEL + LAUNCH + f'void g() {{ {name}("x"); }}\n')
    assert not r.ok and any(x.startswith(("calls fopen()", "calls system()")) for x in r.reasons), r.reasons


@needs_gcc
def test_a_preprocessor_failure_falls_back_to_the_raw_text_and_does_not_reject():
    src = "#if NOT_A_MACRO(1)\n#endif\n" + KERNEL + LAUNCH  # invalid #if for gcc without the real headers
    r = check_source(src)
    assert r.ok, r.reasons
    assert r.preprocessed.startswith("failed")


def _dyn(src: str) -> list[str]:
    return dynamic_initializers(strip_comments_and_strings(src))


@pytest.mark.parametrize("src", [
    "static int f() { return 1; }\nstatic int x = f();",
    "struct A { A() {} };\nA a;",
    "struct R { ~R() {} };\nnamespace { R r; }",
    "struct S { int v = g(); };\nS s;",
    "static const auto y = [] { return 3; }();",
    'int z = (puts("x"), 1);',
    "struct C { static int q; };\nint C::q = compute();",
    "struct C { static inline int q = compute(); };",
    "static int f() { return 1; }\nstatic int x = std::invoke(f);",
])
def test_dynamic_initializers_are_rejected(src):
    assert _dyn(src), src


@pytest.mark.parametrize("src", [
    "static const int N = 256;\nconst float PI = acosf(-1.0f);\nstatic float w[4] = {1, 2, 3, 4};",
    "__device__ int d = 3;\n__constant__ float c[2] = {1, 2};\nconstexpr int M = 4 * N;",
    "static float* buf = nullptr;\nstatic size_t bytes = sizeof(float) * 4;\nstatic std::vector<float> v;",
    "int f(int a, int b);\nfloat g(float* x);\nstruct P { int n; float a; };\nstatic P p = {3, 1.0f};",
    "constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }\nstatic const int B = cdiv(100, 32);",
    "static auto sq = [](float x) { return x * x; };\nstatic int (*fp)(int) = nullptr;",
    "template <class T> __global__ void k(T* x) { static int seen = 0; x[0] = seen; }",
    "static const float lim = std::numeric_limits<float>::max();\nstatic std::vector<float> h(100);",
])
def test_constant_initializers_are_allowed(src):
    assert not _dyn(src), _dyn(src)


@pytest.fixture(scope="module")
def bt003():
    from cudaperf.tasks.babeltower import find_babeltower, load_babeltower

    path = find_babeltower()
    if path is None or shutil.which("g++") is None:
        pytest.skip("BabelTower data or g++ not available")
    return load_babeltower(path)[3]


def test_cuda_kernel_tasks_get_hidden_tests_of_other_sizes_from_the_reference(bt003):
    from cudaperf.harness.kernel_program import compare_printout
    from cudaperf.harness.run_cuda_kernel import prepare_hidden_tests, with_hidden_tests

    h = prepare_hidden_tests(bt003, seed=7)
    assert len(h.calls) == 3, h.note
    assert [c.rstrip().rsplit(", ", 1)[1] for c in h.calls] == ["16);", "36);", "5);"]  # dims 5 -> 16, 36, 5
    assert all("set_valid_mask_cuda_invoke_in_cpp" in c for c in h.calls)
    assert "[ 1.1, 1.2, 1.3, 1.4, 1.5 ]" not in h.expected[2]  # fresh values at the visible size
    # the threshold: the visible 1.3 in the first, fresh ones near it (0.65 to 1.95) in the others, so a kernel
    # right only for the visible thresholds meets another (adversarial/bt003_visible_thresholds.cu)
    thresholds = [float(c.rstrip().rsplit("wrapper(", 1)[1].split(", ")[2]) for c in h.calls]
    assert thresholds[0] == 1.3 and all(0.65 <= t <= 1.95 and t != 1.3 for t in thresholds[1:]), thresholds
    # the expected mask follows the fresh scores (score > threshold) over the first dims elements; arrays are larger
    for printout, dims, thr in zip(h.expected, (16, 36, 5), thresholds):
        args = printout.split("(", 1)[1]
        scores = [float(v) for v in args.split("]")[0].strip(" [").split(", ")]
        mask = [int(v) for v in args.split("], ", 1)[1].split(", [", 1)[1].split("]")[0].strip().split(", ")]
        assert len(scores) >= dims and mask[dims:] == [0] * (len(mask) - dims)
        assert all(m == int(s > thr) for m, s in zip(mask[:dims], scores) if abs(s - thr) > 1e-3)
        assert compare_printout(printout, printout, bt003.tolerance).passed
    t = with_hidden_tests(bt003, h)
    assert len(t.test_calls_cuda) == len(t.expected_outputs) == len(bt003.expected_outputs) + 3
    assert prepare_hidden_tests(bt003, seed=8).expected != h.expected  # the seed changes the values


def test_hidden_tests_the_reference_kernel_fails_are_dropped(bt003):
    """The GPU check's judgement of the reference kernel's printouts (the run itself needs a GPU): real expected
    printouts of the C reference, another seed's printouts as a wrong answer."""
    from cudaperf.harness.run_cuda_kernel import check_hidden_printouts, prepare_hidden_tests

    exp = prepare_hidden_tests(bt003, seed=7).expected
    other = prepare_hidden_tests(bt003, seed=8).expected
    tol = bt003.tolerance
    assert len(exp) == 3 and other[0] != exp[0]
    c = check_hidden_printouts(exp, list(exp), tol, clean=True)
    assert (c.kept, c.failed, c.stopped_at) == ((0, 1, 2), (), None)
    c = check_hidden_printouts(exp, [other[0], exp[1], other[2]], tol, clean=True)  # wrong printouts: dropped
    assert (c.kept, c.failed, c.stopped_at) == ((1,), (0, 2), None)
    c = check_hidden_printouts(exp, [exp[0], None, None], tol, clean=False)  # crashed at hidden test 1
    assert (c.kept, c.failed, c.stopped_at) == ((0,), (), 1)
    c = check_hidden_printouts(exp, [other[0], exp[1], None], tol, clean=False)  # wrong, then a CUDA error
    assert (c.kept, c.failed, c.stopped_at) == ((1,), (0,), 2)
    c = check_hidden_printouts(exp, list(exp), tol, clean=False)  # every printout, then a crash at exit
    assert (c.kept, c.failed, c.stopped_at) == ((0, 1), (), 2)
    c = check_hidden_printouts(exp, [exp[0]], tol, clean=False)  # output cut short
    assert (c.kept, c.stopped_at) == ((0,), 1)
    c = check_hidden_printouts((), (), tol, clean=False)
    assert (c.kept, c.failed, c.stopped_at) == ((), (), None)


def test_a_reference_kernel_that_cannot_be_checked_leaves_the_candidate_unscored(bt003):
    """Without a GPU the check cannot run: the candidate is unscored (harness), never judged on unchecked hidden
    tests; without hidden tests there is nothing to check."""
    from dataclasses import replace

    from cudaperf.harness.run_cuda_kernel import HiddenTests, prepare_hidden_tests, validate_hidden_tests
    from cudaperf.harness.settings import HarnessSettings

    none = HiddenTests((), (), (), "visible tests only: x")
    assert validate_hidden_tests(bt003, none, HarnessSettings(), None) is none
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not available")
    from cudaperf.harness.run_c_function import HarnessError

    broken = replace(bt003, reference_kernel=bt003.reference_kernel + "\nthis is not CUDA;\n")
    with pytest.raises(HarnessError, match="reference kernel does not build"):
        validate_hidden_tests(broken, prepare_hidden_tests(broken, seed=7), HarnessSettings(), None)
    if shutil.which("nvidia-smi") is None:  # the reference kernel builds, but there is no GPU to run it on
        with pytest.raises(HarnessError, match="no usable GPU"):
            validate_hidden_tests(bt003, prepare_hidden_tests(bt003, seed=7), HarnessSettings(), None)
