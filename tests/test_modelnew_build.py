"""ModelNew extensions built ahead of the GPU run (cudaperf.harness.modelnew_build), with the real sandbox, torch,
g++ and ninja. This machine's torch has no CUDA, so the modules here build C++-only extensions (load_inline with
``cpp_sources``), and the gate that refuses a torch without CUDA (``prebuild_unavailable``: there a CUDA
module's build error would not be the candidate's) is lifted for them. The GPU test is
``tests/gpu/test_gpu_pytorch_fast.py::test_a_modelnew_built_ahead_runs_without_building_again``."""

from __future__ import annotations

import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from cudaperf.harness import modelnew_build as mb  # noqa: E402
from cudaperf.harness.sandbox import (SandboxLimits, Workdir, base_level, copy_untrusted_tree,  # noqa: E402
                                      private_tmp_available, run_sandboxed, scrubbed_env, share_file)

pytestmark = pytest.mark.skipif(not private_tmp_available(), reason="sandboxed runs get no private root here")

MODULE = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    from torch.utils.cpp_extension import load_inline

    src = """
    #include <torch/extension.h>
    torch::Tensor add_one(torch::Tensor x) { return x + 1; }
    """
    ext = load_inline(name="cudaperf_add_one_SALT", cpp_sources=[src], functions=["add_one"], verbose=True)


    class ModelNew(nn.Module):
        def forward(self, x):
            return ext.add_one(x)
    ''')

LOAD = textwrap.dedent('''\
    import os, shutil, torch
    root = os.environ["TORCH_EXTENSIONS_DIR"]
    if os.path.isdir("ext"):
        shutil.copytree("ext", root)   # as the GPU runner does
    ns = {"__name__": "cudaperf_candidate"}
    exec(compile(open("candidate.py").read(), "candidate.py", "exec"), ns)
    print("value", float(ns["ModelNew"]()(torch.zeros(1))[0]))
    ''')


@pytest.fixture
def buildable(monkeypatch, tmp_path):
    """Builds in a private cache, with the CUDA gate lifted for C++-only modules."""
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(mb, "prebuild_unavailable", lambda: None)


def _module(salt: str, body: str = MODULE) -> str:
    return body.replace("SALT", salt)


def _load_run(code: str, tree: Path | None, pch: Path | None = None) -> str:
    """The GPU run's loading step in a fresh sandboxed process: the prebuilt tree (if any) at the fixed path,
    the same environment (with ``pch``: the precompiled header, read-only), the module run; its output."""
    from cudaperf.harness.run_pytorch import sandbox_python

    py, why = sandbox_python()
    assert why is None, why
    with Workdir() as w:
        (w / "candidate.py").write_text(code)
        (w / "load.py").write_text(LOAD)
        for f in ("candidate.py", "load.py"):
            share_file(w / f)
        if tree is not None:
            mb.install_prebuilt(tree, w)
        env = scrubbed_env(w, mb.modelnew_env(py, "sm_90", prebuilt=True, pch=pch))
        r = run_sandboxed([py, "load.py"], w, env=env,
                          limits=SandboxLimits(wall_s=300, ro_paths=mb.modelnew_ro_paths(pch)))
    assert r.returncode == 0, r.describe() + r.stderr[-2000:]
    return r.stdout


def test_a_prebuilt_module_loads_without_building_again(buildable):
    code = _module("a")
    pre = mb.prebuild_modelnew(code, arch="sm_90", pch=False)
    assert pre.status == "ok", pre.message
    assert pre.ext is not None and (pre.ext / "cudaperf_add_one_a" / "build.ninja").is_file()
    assert list((pre.ext / "cudaperf_add_one_a").glob("*.so"))
    out = _load_run(code, pre.ext)
    assert "ninja: no work to do" in out and "value 1.0" in out, out
    # the control: the same run without the tree compiles (so the line above can fail)
    cold = _load_run(code, None)
    assert "ninja: no work to do" not in cold and "value 1.0" in cold and "c++" in cold, cold
    again = mb.prebuild_modelnew(code, arch="sm_90", pch=False)  # cached by the source
    assert again.cached and again.ext == pre.ext


def test_a_compile_error_found_ahead_is_the_candidates(buildable):
    """A KernelBench-style ReLU (tests/fixtures/pytorch/relu_modelnew.py) with its CUDA source handed to
    load_inline as C++ (a model's common slip; it passes the static checks): g++ fails on ``__global__`` before
    anything needs a CUDA torch, and the result is the candidate's ``compile_error`` at stage ``checked``, with
    the compiler's words."""
    from cudaperf.harness.records import base_result
    from cudaperf.harness.result import FailureKind, Stage
    from cudaperf.harness.run_pytorch import check_and_build
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks.pytorch import PyTorchTask

    honest = (Path(__file__).parent / "fixtures" / "pytorch" / "relu_modelnew.py").read_text()
    code = honest.replace('cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",\n                  cuda_sources=cuda_src,',
                          "cpp_sources=cuda_src,")
    assert code != honest
    task = PyTorchTask(id="relu", source="import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return torch.relu(x)\n\n"
                       "def get_inputs():\n    return [torch.randn(4, 8)]\n\ndef get_init_inputs():\n    return []\n")
    settings = HarnessSettings(prebuild_modelnew=True, arch="sm_90", modelnew_pch=False)  # the PCH: a slow test
    res, finished, modelnew, build = check_and_build(task, code, base_result(task, "c", code, settings, None),
                                                     settings)
    assert finished and modelnew and res.status == "scored" and res.stage == Stage.CHECKED, res.failure
    assert res.failure.kind == FailureKind.COMPILE_ERROR and "__global__" in res.failure.message
    assert res.compile is not None and not res.compile.ok and build.status == "build_error"
    off = HarnessSettings(prebuild_modelnew=False)  # the setting off: nothing is built ahead
    res, finished, _, build = check_and_build(task, code, base_result(task, "c", code, off, None), off)
    assert not finished and build is None and res.compile is None


def test_a_module_that_fails_otherwise_is_left_to_its_gpu_run(buildable):
    code = "import torch\nraise RuntimeError('needs a GPU: ' + str(torch.cuda.is_available()))\n" + _module("c")
    pre = mb.prebuild_modelnew(code, arch="sm_90", pch=False)
    assert pre.status == "none" and "needs a GPU: False" in pre.message and pre.ext is None


def test_links_and_fifos_in_a_built_tree_are_not_followed(buildable, tmp_path):
    """A hostile module plants, in the tree the build run hands back, a link to a file only root can read (as the
    harness runs) and a FIFO (the harness would hang reading it), from an exit handler, after the build runner's
    own copy: neither is kept, and the secret never reaches the cache."""
    if base_level() != "namespaces+nobody":
        pytest.skip("the harness does not run as root here")
    secret = tmp_path / "root_only.txt"
    secret.write_text("SECRET-5d1f")
    secret.chmod(0o600)
    plant = textwrap.dedent(f"""
        import atexit, os

        d = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "cudaperf_add_one_d")  # a tree, without a build
        os.makedirs(d)
        open(os.path.join(d, "build.ninja"), "w").write("# a build file\\n")

        def plant():
            d = os.path.join("ext", "cudaperf_add_one_d")
            os.symlink({str(secret)!r}, os.path.join(d, "stolen.txt"))
            os.symlink("/", os.path.join(d, "host_root"))
            os.mkfifo(os.path.join(d, "hang.fifo"))
            open(os.path.join(d, "planted.txt"), "w").write("the handler ran")  # kept: it did run

        atexit.register(plant)
        """)
    hostile = "import torch\n" + plant
    pre = mb.prebuild_modelnew(hostile, arch="sm_90", pch=False)
    assert pre.status == "ok", pre.message
    kept = {p.name for p in (pre.ext / "cudaperf_add_one_d").iterdir()}
    assert {"build.ninja", "planted.txt"} <= kept and not kept & {"stolen.txt", "host_root", "hang.fifo"}
    for p in Path(os.environ["CUDAPERF_CACHE"]).rglob("*"):
        assert p.is_symlink() or not p.is_file() or b"SECRET-5d1f" not in p.read_bytes()


def test_copy_untrusted_tree_keeps_times_and_refuses_too_much(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a" / "f.o").write_bytes(b"x" * 1000)
    os.utime(src / "a" / "f.o", ns=(1_000_000_000_123, 1_600_000_000_123_456_789))
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    assert copy_untrusted_tree(src, tmp_path / "ok", max_bytes=10_000) is None
    assert (tmp_path / "ok" / "a" / "f.o").stat().st_mtime_ns == 1_600_000_000_123_456_789
    assert (tmp_path / "ok" / "run.sh").stat().st_mode & stat.S_IXUSR
    why = copy_untrusted_tree(src, tmp_path / "big", max_bytes=500)
    assert why is not None and "bytes" in why and not (tmp_path / "big").exists()
    assert copy_untrusted_tree(tmp_path / "missing", tmp_path / "none", max_bytes=1) is not None
    (tmp_path / "secret").write_text("SECRET")
    os.symlink(tmp_path / "secret", src / "a" / "link.o")
    os.symlink(tmp_path, src / "dirlink")
    os.mkfifo(src / "a" / "pipe")
    assert copy_untrusted_tree(src, tmp_path / "hostile", max_bytes=10_000) is None
    assert sorted(p.name for p in (tmp_path / "hostile").rglob("*")) == ["a", "f.o", "run.sh"]
    assert copy_untrusted_tree(src / "dirlink", tmp_path / "viadir", max_bytes=10_000) is not None  # not followed


def test_a_run_without_gpu_devices_cannot_see_them(tmp_path):
    """``SandboxLimits.gpu_devices=False`` leaves the GPU's nodes out of the private root. This machine has no
    GPU, so a stand-in node named like one (a character device with /dev/null's numbers) is made for the test;
    the control run, with the default, sees it."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    node = Path("/dev/nvidia-cudaperf-test")
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    try:
        seen = {}
        for gpu in (True, False):
            with Workdir() as w:
                r = run_sandboxed(["sh", "-c", f"ls {node} 2>/dev/null || echo absent"], w,
                                  limits=SandboxLimits(gpu_devices=gpu))
                seen[gpu] = r.stdout.strip()
        assert seen[True] == str(node) and seen[False] == "absent", seen
    finally:
        node.unlink()


def test_the_build_run_and_the_gpu_run_share_one_environment():
    """ninja's up-to-date check needs the same paths, compilers and flags in both runs."""
    a = mb.modelnew_env(sys.executable, "sm_90", prebuilt=True)
    assert a["TORCH_EXTENSIONS_DIR"] == mb.EXT_ROOT and a["TORCH_CUDA_ARCH_LIST"] == "9.0"
    cold = mb.modelnew_env(sys.executable, "sm_90", prebuilt=False)
    assert "TORCH_EXTENSIONS_DIR" not in cold
    # the compilers' paths are those a build in the run itself would see; prebuilding adds the fixed build settings
    assert {k: a[k] for k in cold} == cold
    assert set(a) - set(cold) == {"TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS"}


@pytest.mark.slow  # about 3 min on two cores: PyTorch's header precompiled twice, then a load_inline build
def test_builds_read_the_precompiled_torch_header(buildable):
    """``HarnessSettings.modelnew_pch``: the harness precompiles ``torch/extension.h`` once; a module's sandboxed
    build run reads it (g++ -H names the precompiled file), the GPU run finds the tree up to date, and the module
    computes the same. The control: the same compile without ``CPATH`` reads the header itself."""
    from cudaperf.harness import torch_pch as tp
    from cudaperf.harness.run_pytorch import sandbox_python

    tp._plan.cache_clear()  # the private cache of this test (the fixture's CUDAPERF_CACHE)
    tp.torch_pch.cache_clear()
    try:
        assert tp.ready_pch() is None and mb.modelnew_pch(True, build=False) is None  # a GPU run never waits
        code = _module("pch")
        pre = mb.prebuild_modelnew(code, arch="sm_90", pch=True)
        root = tp.ready_pch()
        assert pre.status == "ok" and root is not None, (pre.message, tp.torch_pch())
        assert sorted(p.name for p in (root / "torch" / "extension.h.gch").iterdir()) == ["v0.gch", "v1.gch"]
        out = _load_run(code, pre.ext, pch=root)
        assert "ninja: no work to do" in out and "value 1.0" in out, out
        ninja = (pre.ext / "cudaperf_add_one_pch" / "build.ninja").read_text()
        cflags = next(line for line in ninja.splitlines() if line.startswith("cflags = ")).split(" = ", 1)[1]
        py, _ = sandbox_python()
        seen = {}
        for name, pch in (("pch", root), ("control", None)):
            with Workdir() as w:
                (w / "main.cpp").write_text("#include <torch/extension.h>\n")
                share_file(w / "main.cpp")
                env = scrubbed_env(w, mb.modelnew_env(py, "sm_90", prebuilt=True, pch=pch))
                r = run_sandboxed(["sh", "-c", f"c++ {cflags} -H -fsyntax-only main.cpp"], w, env=env,
                                  limits=SandboxLimits(wall_s=300, ro_paths=mb.modelnew_ro_paths(pch)))
            assert r.returncode == 0, r.describe() + r.stderr[-1500:]
            seen[name] = [line for line in r.stderr.splitlines() if line.startswith("! ")]
        assert seen["pch"] == [f"! {root}/torch/extension.h.gch/v0.gch"] and seen["control"] == [], seen
    finally:
        tp._plan.cache_clear()
        tp.torch_pch.cache_clear()
