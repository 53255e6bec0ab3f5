"""Extraction from completions and the static checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaperf.harness.extract import extract_code
from cudaperf.harness.static_checks import check_source, check_symbols, strip_comments_and_strings
from cudaperf.tasks import builtin_candidates

FIXTURES = Path(__file__).parent / "fixtures"

KERNEL = "__global__ void k(float* y) { y[threadIdx.x] = 1; }\nextern \"C\" void f(float* y) { k<<<1, 32>>>(y); }\n"


def test_extract_prefers_the_output_tag():
    text = f"Here:\n```cuda\nint junk;\n```\n<OUTPUT_CUDA>\n{KERNEL}</OUTPUT_CUDA>\nbye"
    e = extract_code(text)
    assert e.method == "tag" and e.code.strip() == KERNEL.strip()


def test_extract_fence_inside_tag_and_unclosed_tag():
    assert extract_code(f"<OUTPUT_CUDA>\n```cuda\n{KERNEL}```\n</OUTPUT_CUDA>").code.strip() == KERNEL.strip()
    assert extract_code(f"<OUTPUT_CUDA>\n{KERNEL}").code.strip() == KERNEL.strip()


def test_extract_fence_with_kernel_wins_over_later_fence():
    text = f"```cuda\n{KERNEL}```\nand to compile:\n```bash\nnvcc a.cu\n```"
    assert extract_code(text).code.strip() == KERNEL.strip()


def test_extract_raw_source_and_nothing():
    assert extract_code(KERNEL).method == "raw"
    e = extract_code("I cannot help with that.")
    assert e.code is None and e.method == "none"


def test_bundled_candidates_pass_the_checks():
    for c in builtin_candidates():
        r = check_source(c.source)
        assert r.ok, (c.task_id, c.label, r.reasons)


def test_every_dataset_variant_passes_the_checks():
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    bad = [(c["candidate_id"], check_source(c["code"]).reasons) for c in Dataset.load(default_dataset_dir()).candidates
           if not check_source(c["code"]).ok]
    assert not bad, bad[:3]


@pytest.mark.parametrize(
    "src, reason",
    [
        ("int main() { return 0; }", "no __global__ kernel"),
        ("__global__ void k() {}\nvoid f() {}", "no kernel is launched"),
        ("#define __global__\n__global__ void k() {}\nvoid f() { k<<<1,1>>>(); }", "#define __global__"),
        ("#define threadIdx blockIdx\n__global__ void k() {}\nvoid f() { k<<<1,1>>>(); }", "#define threadIdx"),
        ('#include "../../secret.h"\n' + KERNEL, "only system headers"),
        ("#include </etc/passwd>\n" + KERNEL, "only system headers"),
        (KERNEL + 'void g() { system("rm -rf /"); }', "calls system()"),
        (KERNEL + "void g() { fork(); }", "calls fork()"),
        (KERNEL + "#include <thread>\nvoid g() { std::thread t([]{}); }", "std::thread"),
        (KERNEL + "__attribute__((constructor)) static void early() {}", "constructor"),
        (KERNEL + "void g() { cudaDeviceReset(); }", "cudaDeviceReset"),
        (KERNEL + 'extern "C" int cuptiActivityEnable(int k) { return 0; }', "profiler and driver are off limits"),
        (KERNEL + "extern int cudaperf_probe_init(char*, int);", "profiler and driver are off limits"),
        # the driver writes timings to a file in the candidate's directory: candidates may not touch files
        (KERNEL + 'void g() { FILE* s = fopen("tstats.txt", "a"); }', "calls fopen()"),
        (KERNEL + 'void g() { int fd = open("tstats.txt", 1); }', "calls open()"),
        (KERNEL + 'void g() { rename("a", "tstats.txt"); }', "calls rename()"),
        (KERNEL + "#include <fstream>\nvoid g() { std::ofstream o(\"tstats.txt\"); }", "file streams"),
        (KERNEL + "static void h() {}\nvoid g() { atexit(h); }", "calls atexit()"),
        (KERNEL + 'void g() { asm volatile("mov $1, %%rax; syscall" ::: "rax"); }', "system calls"),
        # names that passed the lists before the hostile review (issue 22, item 9)
        (KERNEL + 'void g() { FILE* s = fopen64("tstats.txt", "a"); }', "calls fopen64()"),
        (KERNEL + 'void g() { int fd = open64("tstats.txt", 1); }', "calls open64()"),
        (KERNEL + 'void g() { DIR* d = opendir("/"); }', "calls opendir()"),
        (KERNEL + 'void g() { struct dirent** l; scandir(".", &l, 0, 0); }', "calls scandir()"),
        (KERNEL + 'void g() { pid_t p; posix_spawn(&p, "/bin/sh", 0, 0, 0, 0); }', "calls posix_spawn()"),
        (KERNEL + 'void g() { pid_t p; posix_spawnp(&p, "sh", 0, 0, 0, 0); }', "calls posix_spawnp()"),
        (KERNEL + "static int h(void*) { return 0; }\nvoid g() { static char s[4096]; clone(h, s + 4096, 0, 0); }",
         "calls clone()"),
        (KERNEL + "void g(void* p) { mprotect(p, 4096, 7); }", "calls mprotect()"),
        (KERNEL + "void g(void* p) { pkey_mprotect(p, 4096, 7, 0); }", "calls pkey_mprotect()"),
        (KERNEL + "void g() { unshare(0x10000000); }", "calls unshare()"),
        (KERNEL + 'void g() { mount("none", "/tmp", "tmpfs", 0, 0); }', "calls mount()"),
        (KERNEL + "void g() { kill(1, 9); }", "calls kill()"),
        (KERNEL + "void g(struct iovec* a) { process_vm_writev(1, a, 1, a, 1, 0); }", "calls process_vm_writev()"),
    ],
)
def test_rejections_have_reasons(src, reason):
    r = check_source(src)
    assert not r.ok and any(reason in x for x in r.reasons), r.reasons


def test_commented_out_launch_does_not_count():
    src = "__global__ void k() {}\nvoid f() { // k<<<1,1>>>();\n }"
    assert not check_source(src).ok


def test_new_names_do_not_catch_lookalikes():
    # methods and longer names that contain a forbidden name are not calls of it
    src = KERNEL + ("void g(Graph* l, Fs& m) { l->link(1); m.mount(); int killcount = skill(2); "
                    "my_clone(3); (void)killcount; }")
    r = check_source(src)
    assert r.ok, r.reasons


def test_strings_do_not_trigger_checks():
    src = KERNEL + 'const char* msg = "do not call system(now)";'
    assert check_source(src).ok
    assert "system" not in strip_comments_and_strings(src)


def test_templated_and_api_launches_count():
    src = ("template <int B> __global__ void k(float* y) {}\n"
           "void f(float* y) { k<256><<<1, 256>>>(y); }\n")
    assert check_source(src).ok
    src2 = "__global__ void k(float* y) {}\nvoid f(float* y) { void* a[] = {&y}; cudaLaunchKernel((void*)k, 1, 1, a, 0, 0); }"
    assert check_source(src2).ok


def test_kernel_task_needs_its_named_kernel():
    assert check_source("__global__ void add(float* a) {}", kind="cuda_kernel", kernel_name="add").ok
    r = check_source("__global__ void other(float* a) {}", kind="cuda_kernel", kernel_name="add")
    assert not r.ok and "'add' is not defined" in r.reasons[0]


def test_symbol_check():
    nm = ("0000 T _Z1kPf\n0000 V DW.ref.__gxx_personality_v0\n0000 T saxpy\n0000 T clock_gettime\n"
          "0000 B my_global\n0000 W cudaDeviceSynchronize\n0000 D __cudart_state\n")
    reasons = check_symbols(nm, {"saxpy"})
    assert len(reasons) == 3
    assert "clock_gettime" in reasons[0] and "cudaDeviceSynchronize" in reasons[1] and "__cudart_state" in reasons[2]
    assert not any("my_global" in r for r in reasons)  # an ordinary host global is fine
    # session 20: a weak object (an assembler label on code bytes in .text) named like a library function the
    # driver calls stood in for it (fprintf, fclose: forged records); a prefix of _init/_fini is no longer a pass
    weak = check_symbols("0000 V fprintf\n0000 u fclose\n0000 V _ZTV4Base\n0000 T _init_cp_extra\n", {"saxpy"})
    assert len(weak) == 3 and "fprintf" in weak[0] and "fclose" in weak[1] and "_init_cp_extra" in weak[2]
    assert "weak global object" in weak[0]


def test_a_weak_object_named_like_a_library_function_fails_the_build():
    """The candidate of session 20's hostile review: a weak object in .text named fprintf by an assembler label,
    jumping to the candidate's own fprintf, which rewrote the driver's evidence records."""
    from cudaperf.harness.evaluate import build_candidate, check_candidate
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks import find_task, load_builtin_tasks

    task = find_task(load_builtin_tasks(), "saxpy")
    src = (FIXTURES / "adversarial" / "saxpy_weak_object_fprintf.cu").read_text()
    checked = check_candidate(task, src, "weak", HarnessSettings())
    assert checked.result is None, checked.result.failure  # the text checks let it through: the symbol check stops it
    build = build_candidate(task, checked.code, HarnessSettings())
    assert build.stage == "symbols" and any("'fprintf'" in r for r in build.reasons), (build.stage, build.reasons)


@pytest.mark.parametrize("src", [
    "__global__ void __launch_bounds__(256) k(float* x) {}",
    "__global__ __launch_bounds__(256, 2) void k(float* x) {}",
    "__global__ void __launch_bounds__(BLOCK * (2), MIN_BLOCKS(4)) k(float* x) {}",
    "template <int R>\n__global__ void __launch_bounds__(128)\nk(float* x) {}",
])
def test_kernel_names_read_launch_bounds_in_either_place(src):
    from cudaperf.harness.static_checks import kernel_names

    assert kernel_names(src) == ["k"]
