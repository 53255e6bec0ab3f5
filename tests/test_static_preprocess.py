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
    # the expected mask follows the fresh scores (score > 1.3) over the first dims elements; the arrays are larger
    for printout, dims in zip(h.expected, (16, 36, 5)):
        args = printout.split("(", 1)[1]
        scores = [float(v) for v in args.split("]")[0].strip(" [").split(", ")]
        mask = [int(v) for v in args.split("], 1.3, [")[1].split("]")[0].strip().split(", ")]
        assert len(scores) >= dims and mask[dims:] == [0] * (len(mask) - dims)
        assert (sum(mask) > 0 or dims == 5) and all(m == int(s > 1.3) for m, s in zip(mask[:dims], scores) if abs(s - 1.3) > 1e-3)
        assert compare_printout(printout, printout, bt003.tolerance).passed
    t = with_hidden_tests(bt003, h)
    assert len(t.test_calls_cuda) == len(t.expected_outputs) == len(bt003.expected_outputs) + 3
    assert prepare_hidden_tests(bt003, seed=8).expected != h.expected  # the seed changes the values
