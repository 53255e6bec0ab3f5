"""The PyTorch fast path: one CUDA unit built by nvcc alone into a library, bound by pointer with ctypes.

Everything here runs without a GPU: nvcc builds, the symbol checks, the ctypes layout against the C compiler's,
and loading the library (its CUDA calls then fail, and the binding reports the status)."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest

from cudaperf.harness.compile import cuda_home
from cudaperf.harness.torch_fast import (
    DTYPES,
    ENTRY,
    HEADER,
    FastCallError,
    FastModule,
    TensorArg,
    build_fast_candidate,
    check_fast_candidate,
    tensor_arg,
)

torch = pytest.importorskip("torch")

FIX = Path(__file__).parent / "fixtures" / "torch_fast"
ADD = (FIX / "add.cu").read_text()


def test_a_unit_builds_into_a_library_that_exports_only_its_entry():
    b = build_fast_candidate(ADD)
    assert b.stage == "ok" and b.exe is not None, b.info.log
    exported = subprocess.run(["nm", "-D", "--defined-only", str(b.exe)], capture_output=True, text=True).stdout
    names = {line.split()[-1] for line in exported.splitlines() if line.split()}
    assert ENTRY in names
    assert not {n for n in names if n.startswith(("cuda", "__cuda"))}  # the static CUDA runtime stays hidden
    again = build_fast_candidate(ADD)
    assert again.info.cached and again.exe == b.exe


def test_missing_entry_extra_c_functions_and_compile_errors_are_rejected():
    no_entry = build_fast_candidate(ADD.replace("kernel_forward", "forward"))
    assert no_entry.stage == "symbols" and any(ENTRY in r for r in no_entry.reasons)
    interposer = build_fast_candidate(ADD + '\nextern "C" int cuptiActivityFlushAll(unsigned f) { return 0; }\n')
    assert interposer.stage == "symbols" and any("cuptiActivityFlushAll" in r for r in interposer.reasons)
    broken = build_fast_candidate(ADD.replace("return 1;", "return 1"))
    assert broken.stage == "compile" and "error" in broken.info.log


def test_ctypes_layout_matches_the_c_compiler(tmp_path):
    (tmp_path / "tensor_arg.h").write_text(HEADER)
    (tmp_path / "layout.c").write_text(
        '#include <stdio.h>\n#include <stddef.h>\n#include "tensor_arg.h"\n'
        'int main(void) { printf("%zu %zu %zu %zu %zu %zu %zu\\n", sizeof(TensorArg), offsetof(TensorArg, data), '
        'offsetof(TensorArg, dtype), offsetof(TensorArg, ndim), offsetof(TensorArg, numel), '
        'offsetof(TensorArg, shape), offsetof(TensorArg, strides)); return 0; }\n')
    subprocess.run(["gcc", "-I", str(cuda_home() / "include"), str(tmp_path / "layout.c"), "-o",
                    str(tmp_path / "layout")], check=True)
    c = [int(x) for x in subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True).stdout.split()]
    py = [ctypes.sizeof(TensorArg)] + [getattr(TensorArg, f).offset for f in
                                       ("data", "dtype", "ndim", "numel", "shape", "strides")]
    assert c == py


def test_the_c_dtype_codes_are_the_python_ones(tmp_path):
    """Each ``DT_*`` code of the header is its dtype's index in DTYPES (what ``tensor_arg`` sends)."""
    (tmp_path / "tensor_arg.h").write_text(HEADER)
    names = [f"DT_{d.upper()}" for d in DTYPES]
    (tmp_path / "codes.c").write_text(
        '#include <stdio.h>\n#include "tensor_arg.h"\nint main(void) { printf("'
        + " ".join(["%d"] * len(names)) + '\\n", ' + ", ".join(names) + "); return 0; }\n")
    subprocess.run(["gcc", "-I", str(cuda_home() / "include"), str(tmp_path / "codes.c"), "-o",
                    str(tmp_path / "codes")], check=True)
    out = subprocess.run([str(tmp_path / "codes")], capture_output=True, text=True).stdout.split()
    assert [int(v) for v in out] == list(range(len(DTYPES)))


def test_float16_tensors_reach_the_entry_as_float16(tmp_path):
    """A float16 input and output through FastModule: a host-only library (gcc, CPU tensors) reads the halves
    by their bit patterns and writes twice each value, as a unit for the half-precision families would on the GPU."""
    (tmp_path / "tensor_arg.h").write_text(HEADER)
    (tmp_path / "twice.c").write_text("""#include "tensor_arg.h"
int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    (void)stream;
    if (n_in != 1 || n_out != 1 || in[0].dtype != DT_FLOAT16 || out[0].dtype != DT_FLOAT16) return 1;
    if (in[0].numel != out[0].numel || in[0].ndim != 2 || in[0].strides[0] != in[0].shape[1]) return 1;
    const _Float16* x = (const _Float16*)in[0].data;
    _Float16* y = (_Float16*)out[0].data;
    for (long long i = 0; i < in[0].numel; ++i) y[i] = x[i] * (_Float16)2;
    return 0;
}
""")
    subprocess.run(["gcc", "-shared", "-fPIC", "-I", str(cuda_home() / "include"), str(tmp_path / "twice.c"), "-o",
                    str(tmp_path / "twice.so")], check=True)
    x = (torch.randn(3, 5) * 100).half()
    y = torch.full((3, 5), float("nan"), dtype=torch.float16)
    FastModule(tmp_path / "twice.so")([x], [y])
    assert torch.equal(y, x * 2)
    with pytest.raises(FastCallError, match="returned 1"):  # the dtype code is checked, not assumed
        FastModule(tmp_path / "twice.so")([x.float()], [y])


def test_tensor_descriptions():
    t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4).transpose(1, 2)
    a = tensor_arg(t)
    assert (a.data, a.ndim, a.numel, a.dtype) == (t.data_ptr(), 3, 24, DTYPES.index("float32"))
    assert list(a.shape[:3]) == [2, 4, 3] and list(a.strides[:3]) == [12, 1, 4]
    assert tensor_arg(torch.zeros(2, dtype=torch.bfloat16)).dtype == DTYPES.index("bfloat16")
    h = tensor_arg(torch.zeros(3, 4, dtype=torch.float16))
    assert (h.dtype, h.numel, list(h.shape[:2]), list(h.strides[:2])) == (DTYPES.index("float16"), 12, [3, 4], [4, 1])
    with pytest.raises(ValueError, match="not supported"):
        tensor_arg(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match="at most 8"):
        tensor_arg(torch.zeros([1] * 9))


def test_library_loads_and_a_failing_call_is_reported():
    b = build_fast_candidate(ADD)
    mod = FastModule(b.exe)
    x = torch.ones(8)
    with pytest.raises(FastCallError, match="returned 1"):  # the candidate's own check: wrong arity
        mod([x], [torch.empty(8)])
    if not torch.cuda.is_available():  # no GPU: the launch fails, and the status comes back
        with pytest.raises(FastCallError, match="returned 2"):
            mod([x, x], [torch.empty(8)])


@pytest.mark.parametrize("edit,expect", [
    (("add_kernel<<<", "if (0) add_kernel<<<"), None),  # still launched in the source: run-time evidence decides
    (("    add_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>((const float*)in[0].data, "
      "(const float*)in[1].data,\n                                                              "
      "(float*)out[0].data, n);\n", ""), "no kernel is launched"),
    (("long long n = in[0].numel;", "long long n = in[0].numel; std::thread t([]{}); t.detach();"),
     "std::thread"),
    (("long long n = in[0].numel;", "long long n = in[0].numel; cudaDeviceReset();"), "cudaDeviceReset"),
    (("__global__", '#include "tensor_arg.h"\n__global__'), "only system headers"),
    (("__global__", "#define cudaStreamSynchronize(s) 0\n__global__"), "redefining CUDA"),
    (("__global__", "__attribute__((constructor)) static void early() {}\n__global__"), "constructor"),
    (("long long n = in[0].numel;", "long long n = in[0].numel; void* h = dlopen(0, 0);"), "dlopen"),
    (("long long n = in[0].numel;", "long long n = in[0].numel; "
      "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20);"), "persisting-L2"),
    (("long long n = in[0].numel;", "long long n = in[0].numel; cudaStreamAttrValue v = {}; "
      "v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting; "
      "cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v);"), "persisting-L2"),
])
def test_fast_candidates_get_the_static_checks(edit, expect):
    assert check_fast_candidate(ADD).ok, check_fast_candidate(ADD).reasons
    src = ADD.replace(*edit)
    assert src != ADD
    res = check_fast_candidate(src)
    if expect is None:
        assert res.ok
    else:
        assert not res.ok and any(expect in r for r in res.reasons), res.reasons


def test_fast_candidate_run_without_a_usable_python_or_gpu_is_unscored():
    """The runner is a Python process in the sandbox: where the sandbox user cannot run this Python (here it lives
    under /root) or there is no GPU, the result is a harness fault, never a candidate's failure."""
    from cudaperf.harness.pytorch_reference import prepare_pytorch
    from cudaperf.harness.result import FailureKind
    from cudaperf.harness.run_pytorch import run_pytorch_fast, sandbox_python
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks.pytorch import PyTorchTask

    task = PyTorchTask(id="relu_small", source="import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n"
                       "    return [torch.randn(37, 41)]\n\ndef get_init_inputs():\n    return []\n")
    prep = prepare_pytorch(task, seed=1, n_trials=2)
    code = (Path(__file__).parent / "fixtures" / "torch_fast" / "relu.cu").read_text()
    b = build_fast_candidate(code)
    out = run_pytorch_fast(prep, code, b, HarnessSettings())
    _, why = sandbox_python()
    if why is not None:
        assert out.failure.kind == FailureKind.HARNESS and out.failure.attributed_to == "harness"
        assert "cannot run" in out.failure.message
    elif not torch.cuda.is_available():
        assert not out.correct and out.failure is not None
    else:
        pytest.skip("this machine runs the GPU test instead")


def test_runner_script_reports_no_gpu_with_its_own_status(tmp_path):
    import subprocess
    import sys

    from cudaperf.harness.run_pytorch import EXIT_NO_GPU, RUNNER

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    r = subprocess.run([sys.executable, str(RUNNER), "1"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == EXIT_NO_GPU and "no CUDA device" in r.stderr


def test_modelnew_candidate_that_computes_with_torch_stops_at_the_static_checks():
    from cudaperf.harness.pytorch_reference import prepare_pytorch
    from cudaperf.harness.result import FailureKind, Stage
    from cudaperf.harness.run_pytorch import run_pytorch_candidate
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks.pytorch import PyTorchTask

    task = PyTorchTask(id="relu_small", source="import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n"
                       "    return [torch.randn(8, 8)]\n\ndef get_init_inputs():\n    return []\n")
    good = (Path(__file__).parent / "fixtures" / "pytorch" / "relu_modelnew.py").read_text()
    cheat = good.replace("return self.ext.relu_cuda(x)", "return torch.relu(x)")
    out = run_pytorch_candidate(prepare_pytorch(task, seed=0, n_trials=2), cheat, HarnessSettings())
    assert out.stage == Stage.EXTRACTED and out.failure.kind == FailureKind.STATIC_CHECK
    assert "torch.relu" in out.failure.message


def test_evaluate_takes_pytorch_tasks_in_either_form():
    """evaluate() on a PyTorch task: no code, a torch-computing ModelNew, a fast-path unit that does not compile
    and one that does (then, with no GPU here, unscored, never zero)."""
    from cudaperf.harness.evaluate import evaluate
    from cudaperf.harness.result import FailureKind, Stage
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    fix = Path(__file__).parent / "fixtures"
    assert evaluate(task, "Use torch.relu.").failure.kind == FailureKind.NO_CODE
    cheat = (fix / "pytorch" / "relu_modelnew.py").read_text().replace("return self.ext.relu_cuda(x)",
                                                                       "return torch.relu(x)")
    r = evaluate(task, f"```python\n{cheat}\n```")
    assert r.failure.kind == FailureKind.STATIC_CHECK and r.stage == Stage.EXTRACTED and r.task_kind == "pytorch"
    relu = (fix / "torch_fast" / "relu.cu").read_text()
    broken = evaluate(task, f"```cuda\n{relu.replace('return 1;', 'return 1')}\n```")
    assert broken.failure.kind == FailureKind.COMPILE_ERROR and broken.status == "scored"
    if not torch.cuda.is_available():
        r = evaluate(task, f"```cuda\n{relu}\n```")
        assert r.stage == Stage.COMPILED and r.status == "unscored" and r.compile.ok
        assert "CUDA events" in r.environment.timing_method


def test_cli_evaluates_a_pytorch_problem(tmp_path):
    import json

    from typer.testing import CliRunner

    from cudaperf.cli import app

    unit = tmp_path / "relu.cu"
    unit.write_text((Path(__file__).parent / "fixtures" / "torch_fast" / "relu.cu").read_text())
    r = CliRunner().invoke(app, ["evaluate", "--tasks", "pytorch", "--task", "relu", "--candidate", str(unit),
                                 "--json"])
    rec = json.loads(r.output.strip().splitlines()[-1])
    assert rec["task_kind"] == "pytorch" and rec["compile"]["ok"]
    if not torch.cuda.is_available():
        assert r.exit_code == 3 and rec["status"] == "unscored"
    r = CliRunner().invoke(app, ["evaluate", "--tasks", f"pytorch:{tmp_path / 'none'}", "--task", "relu",
                                 "--candidate", str(unit)])
    assert r.exit_code == 2 and "no such file" in " ".join(r.output.split())


def test_batch_takes_pytorch_tasks_beside_c_tasks(tmp_path):
    """``run_batch`` and ``cudaperf batch`` take PyTorch tasks: each job gets one result. With no GPU here, a
    fast-path unit is built and then unscored; a torch-computing ModelNew stops at the static checks; text with
    no code, and a unit that does not compile, are the candidate's failures."""
    import json

    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.harness.environment import gpu_count
    from cudaperf.harness.executor import Job, run_batch
    from cudaperf.tasks import load_builtin_tasks
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    relu = (FIX / "relu.cu").read_text()
    hack = (FIX.parent / "pytorch" / "relu_modelnew.py").read_text().replace("return self.ext.relu_cuda(x)",
                                                                           "return torch.relu(x)")
    rows = [("relu", "fast", f"```cuda\n{relu}```"), ("relu", "modelnew_torch", f"```python\n{hack}```"),
            ("relu", "prose", "I would use a kernel."), ("relu", "broken", relu.replace("}", "", 1))]
    c_tasks = load_builtin_tasks()
    c_job = Job(c_tasks[0].id, "c_candidate", "no code here")
    summary = run_batch(c_tasks + load_pytorch_tasks(builtin_pytorch_dir()),
                        [Job(*r) for r in rows] + [c_job], tmp_path / "r.jsonl")
    got = {r.candidate_id: r for r in summary.results}
    assert set(got) == {r[1] for r in rows} | {"c_candidate"} and summary.pytorch.n_done == 4
    assert got["modelnew_torch"].failure.kind.value == "static_check"
    assert got["prose"].failure.kind.value == "no_code"
    assert got["broken"].failure.kind.value == "compile_error" and got["broken"].status == "scored"
    if gpu_count() == 0:
        assert got["fast"].status == "unscored" and got["fast"].stage.value == "compiled"

    comp = tmp_path / "c.jsonl"
    comp.write_text("".join(json.dumps({"task_id": t, "candidate_id": c, "completion": x}) + "\n"
                            for t, c, x in rows))
    r = CliRunner().invoke(app, ["batch", "--tasks", "pytorch", "--completions", str(comp), "--store",
                                 str(tmp_path / "cli.jsonl"), "--json"])
    assert r.exit_code == 0, r.output
    recs = [json.loads(line) for line in r.output.splitlines() if line.startswith("{")]
    assert sorted(x["candidate_id"] for x in recs) == sorted(c for _, c, _ in rows)


def test_a_missing_nvcc_makes_the_result_unscored_not_a_crash(monkeypatch, tmp_path):
    import uuid

    from cudaperf.harness.evaluate import evaluate
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    code = (FIX / "relu.cu").read_text() + f"// {uuid.uuid4().hex}\n"  # new to the build cache
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    r = evaluate(task, code)
    # whichever tool the build looks up first (nvcc, or nm when nvcc's path is known already) is not found
    assert r.status == "unscored" and r.failure.attributed_to == "harness" and "not found" in r.failure.message


def test_a_library_that_reaches_the_runners_python_is_rejected_by_its_symbols():
    """tests/fixtures/trust/fast_python_patch.cu would replace torch.cuda.Event.elapsed_time from inside the runner
    through the Python C API; its undefined references give it away. The honest unit of the same shape builds."""
    hostile = (Path(__file__).parent / "fixtures" / "trust" / "fast_python_patch.cu").read_text()
    b = build_fast_candidate(hostile)
    assert b.stage == "symbols", b.info.log
    assert any("PyRun_SimpleString" in r for r in b.reasons) and any("PyGILState_Ensure" in r for r in b.reasons)
    honest = hostile.split("static int patched = 0;")[0].split("extern \"C\" __attribute__((weak)) void "
                                                               "PyGILState_Release(int);")[1]
    honest += ('extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, '
               'cudaStream_t stream) {\n  long long n = in[0].numel;\n  relu_kernel<<<(unsigned)((n + 255) / 256), '
               '256, 0, stream>>>((const float*)in[0].data, (float*)out[0].data, n);\n  return 0;\n}\n')
    assert build_fast_candidate(honest).stage == "ok"


def test_builds_started_ahead_give_a_tasks_jobs_as_they_are_built(tmp_path, monkeypatch):
    """``PyTorchBuilds`` (started by ``run_batch`` before a batch's C tasks): every job of a task comes out once,
    after its build, which the run then finds in the cache; candidates that fail the checks come out unbuilt."""
    from cudaperf.harness.batch_pytorch import PyTorchBuilds
    from cudaperf.harness.executor import Job
    from cudaperf.harness.settings import HarnessSettings

    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))
    relu = (FIX / "relu.cu").read_text()
    jobs = [Job("relu", "fast", f"```cuda\n{relu}```"), Job("relu", "prose", "I would use a kernel."),
            Job("relu", "fast_b128", f"```cuda\n{relu.replace('256', '128')}```")]
    assert "256" in relu
    builds = PyTorchBuilds(jobs, HarnessSettings())
    try:
        assert builds.covers(jobs[:2]) and not builds.covers([Job("relu", "other", "")])
        out = list(builds.in_build_order("relu", jobs))
    finally:
        builds.close()
    assert sorted(j.candidate_id for j in out) == ["fast", "fast_b128", "prose"]
    for code in (relu, relu.replace("256", "128")):
        assert build_fast_candidate(code).info.cached
