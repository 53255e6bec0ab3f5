"""The static checks of KernelBench-style ``ModelNew`` candidates (cudaperf.harness.pytorch_checks): candidates
that let torch, cuBLAS or TF32 do the work are rejected with a line-numbered reason naming what they did, and
honest candidates (sources built in f-strings or from pieces, extension functions named like tensor methods,
parameter initialisation, a cuDNN setting, launch-size helpers) pass. No torch is needed: nothing is run."""

from __future__ import annotations

import re

import pytest

from cudaperf.harness.pytorch_checks import check_pytorch_candidate

# An honest matmul candidate: its kernel in a module-level string, launched from its C++ wrapper.
CUDA = '''
#include <torch/extension.h>
__global__ void mm_kernel(const float* a, const float* b, float* c, int n, int k, int m) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < m) {
        float acc = 0.f;
        for (int i = 0; i < k; ++i) acc += a[row * k + i] * b[i * m + col];
        c[row * m + col] = acc;
    }
}
torch::Tensor mm_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda(), "a must be a CUDA tensor");
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    dim3 block(16, 16), grid((b.size(1) + 15) / 16, (a.size(0) + 15) / 16);
    mm_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), a.size(0), a.size(1), b.size(1));
    return c;
}
'''

HEAD = ("import math\nimport torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
        f"cuda_src = '''{CUDA}'''\n"
        "ext = load_inline(name='mm_ext', cpp_sources='torch::Tensor mm_cuda(torch::Tensor a, torch::Tensor b);',\n"
        "                  cuda_sources=cuda_src, functions=['mm_cuda'])\n\n")

FORWARD = "        return ext.mm_cuda(a.contiguous(), b.contiguous())\n"


def candidate(forward: str = FORWARD, head: str = HEAD, init: str = "", extra: str = "") -> str:
    return (head + extra + "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + init + "\n    def forward(self, a, b):\n" + forward)


def rejected(src: str, *words: str) -> str:
    res = check_pytorch_candidate(src)
    assert not res.ok, "accepted:\n" + src
    hit = [r for r in res.reasons if all(w in r for w in words)]
    assert hit, (words, res.reasons)
    assert re.match(r"line \d+: ", hit[0]), hit[0]
    return hit[0]


def line_of(src: str, text: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if text in line)


def test_the_honest_base_candidate_passes():
    res = check_pytorch_candidate(candidate())
    assert res.ok, res.reasons


# ---- torch work through aliases, imports and getattr --------------------------------------------------------

@pytest.mark.parametrize("extra,forward,words", [
    ("mm = torch.matmul\n\n", "        return mm(a, b)\n", ("calls mm", "torch.matmul")),
    ("from torch import matmul as mm\n\n", "        return mm(a, b)\n", ("calls mm", "torch.matmul")),
    ("import torch as th\n\n", "        return th.matmul(a, b)\n", ("calls th.matmul", "torch.matmul")),
    ("from torch.nn import functional as fn\n\n", "        return fn.linear(a, b.t())\n",
     ("calls fn.linear", "torch.nn.functional.linear")),
    ("", "        return getattr(torch, 'matmul')(a, b)\n", ("getattr(torch, 'matmul')", "torch.matmul")),
    ("OP = 'mat' + 'mul'\n\n", "        return getattr(torch, OP)(a, b)\n", ("torch.matmul",)),
    ("", "        name = a.dtype.__str__()\n        return getattr(torch, name)(a, b)\n",
     ("getattr on torch", "not known statically")),
    ("aten = torch.ops.aten\n\n", "        return aten.mm(a, b)\n", ("calls aten.mm", "torch.ops.aten.mm")),
    ("mm = torch.ops.aten.mm.default\n\n", "        return mm(a, b)\n", ("torch.ops.aten.mm.default",)),
    ("OPS = {'mm': torch.mm}\n\n", "        return OPS['mm'](a, b)\n", ("calls OPS", "holds torch.mm")),
    ("", "        mm = torch.mm\n        return mm(a, b)\n", ("calls mm", "torch.mm")),
    ("", "        import torch as T\n        return T.bmm(a[None], b[None])[0]\n", ("T.bmm", "torch.bmm")),
    ("import operator\n\n", "        return operator.matmul(a, b)\n", ("operator.matmul", "matrix product")),
])
def test_torch_through_aliases_is_rejected(extra, forward, words):
    src = candidate(forward, extra=extra)
    reason = rejected(src, *words)
    assert reason.startswith(f"line {line_of(src, forward.strip().splitlines()[-1])}:"), reason


def test_matrix_product_operators_and_dunders_are_rejected():
    rejected(candidate("        return a @ b\n"), "multiplies matrices with @")
    rejected(candidate("        c = a.clone()\n        c @= b\n        return c\n"), "multiplies matrices with @")
    rejected(candidate("        return a.__matmul__(b)\n"), ".__matmul__()")
    rejected(candidate("        return b.__rmatmul__(a)\n"), ".__rmatmul__()")


# ---- helpers called from forward, followed transitively -----------------------------------------------------

def test_helper_functions_are_followed_transitively():
    extra = "def _inner(x, y):\n    return torch.mm(x, y)\n\ndef _outer(x, y):\n    return _inner(x, y)\n\n"
    src = candidate("        return _outer(a, b)\n", extra=extra)
    reason = rejected(src, "function _inner", "torch.mm")
    assert reason.startswith(f"line {line_of(src, 'return torch.mm(x, y)')}:") and "reached from" in reason
    # mutual recursion terminates (a visited set)
    extra = ("def _a(x, y, n):\n    return _b(x, y, n - 1) if n else x.matmul(y)\n\n"
             "def _b(x, y, n):\n    return _a(x, y, n)\n\n")
    rejected(candidate("        return _a(a, b, 3)\n", extra=extra), "function _a", ".matmul()")
    # a module-level lambda
    rejected(candidate("        return mm(a, b)\n", extra="mm = lambda x, y: x @ y\n\n"), "lambda", "@")


def test_helper_modules_and_autograd_functions_are_followed():
    helper = ("class Helper(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.lin = nn.Linear(4, 4)\n    def forward(self, x):\n        return self.lin(x)\n\n")
    rejected(candidate("        return self.h(a)\n", init="        self.h = Helper()\n", extra=helper),
             "Helper.forward", "calls self.lin", "torch.nn.Linear")
    rejected(candidate("        return Helper()(a)\n", extra=helper), "Helper.forward", "self.lin")
    fn = ("class MatMul(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x, y):\n"
          "        ctx.save_for_backward(x, y)\n        return torch.matmul(x, y)\n\n")
    rejected(candidate("        return MatMul.apply(a, b)\n", extra=fn), "MatMul.forward", "torch.matmul")


# ---- attributes set in __init__, and a rebound forward ------------------------------------------------------

@pytest.mark.parametrize("init,forward,words", [
    ("        self.lin = nn.Linear(64, 64)\n", "        return self.lin(a)\n", ("calls self.lin", "nn.Linear")),
    ("        self.conv = nn.Conv2d(3, 8, 3)\n", "        return self.conv.forward(a)\n",
     ("calls self.conv", "nn.Conv2d")),
    ("        self.net = nn.Sequential(nn.Linear(8, 8), nn.ReLU())\n",
     "        for layer in self.net:\n            a = layer(a)\n        return a\n", ("calls layer", "self.net")),
    ("        self.layers = nn.ModuleList([nn.Linear(8, 8)])\n", "        return self.layers[0](a)\n",
     ("calls self.layers",)),
    ("        self.f = lambda x, y: x @ y\n", "        return self.f(a, b)\n", ("calls self.f", "lambda")),
    ("        self.op = torch.matmul\n", "        return self.op(a, b)\n", ("calls self.op", "torch.matmul")),
    ("        self.forward = lambda a, b: torch.matmul(a, b)\n", FORWARD, ("rebinds forward",)),
])
def test_attributes_holding_torch_work_are_rejected(init, forward, words):
    src = candidate(forward, init=init)
    rejected(src, *words)


@pytest.mark.parametrize("init,forward,extra,words", [
    ("        self.mm = getattr(torch, 'matmul')\n", "        return self.mm(a, b)\n", "", ("self.mm", "torch.matmul")),
    ("        self.t = torch\n", "        return self.t.addcmul(a, a, b)\n", "", ("self.t.addcmul", "torch.addcmul")),
    ("", "        return Holder.op(a, b)\n", "class Holder:\n    op = torch.matmul\n\n", ("Holder.op", "torch.matmul")),
    ("        self.register_forward_hook(lambda m, i, o: torch.mm(*i))\n", FORWARD, "",
     ("register_forward_hook", "hook")),
    ("", "        return torch.tensor(np.matmul(a.cpu().numpy(), b.cpu().numpy()))\n", "import numpy as np\n\n",
     ("np.matmul", "numpy computes on the host")),
])
def test_torch_held_by_attributes_hooks_and_host_libraries_are_rejected(init, forward, extra, words):
    rejected(candidate(forward, init=init, extra=extra), *words)


def test_rebinding_forward_elsewhere_is_rejected():
    rejected(candidate(extra="", forward=FORWARD) + "\nModelNew.forward = lambda self, a, b: a.mm(b)\n",
             "rebinds forward")
    rejected(candidate(init="        setattr(self, 'forward', torch.mm)\n"), "setattr rebinds forward")


# ---- the C++/CUDA source --------------------------------------------------------------------------------------

@pytest.mark.parametrize("edit,words", [
    (("auto c = torch::empty({a.size(0), b.size(1)}, a.options());", "auto c = at::matmul(a, b);"),
     ("C++/CUDA source calls at::matmul",)),
    (("auto c = torch::empty({a.size(0), b.size(1)}, a.options());", "auto c = torch::mm(a, b);"),
     ("calls torch::mm",)),
    (("auto c = torch::empty({a.size(0), b.size(1)}, a.options());",
      "auto c = at::native::mm(a, b);"), ("at::native",)),
    (("auto c = torch::empty({a.size(0), b.size(1)}, a.options());", "auto c = a.matmul(b);"),
     ("tensor method .matmul()",)),
    (("#include <torch/extension.h>", "#include <torch/extension.h>\n#include <cublas_v2.h>"),
     ("cublas_v2", "cuBLAS/cuDNN")),
    (("TORCH_CHECK(a.is_cuda(), \"a must be a CUDA tensor\");",
      "cublasSgemm(at::cuda::getCurrentCUDABlasHandle(), CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1);"),
     ("cublasSgemm",)),
    (("TORCH_CHECK(a.is_cuda(), \"a must be a CUDA tensor\");", "cudnnHandle_t h; cudnnCreate(&h);"),
     ("cudnnCreate",)),
    (("TORCH_CHECK(a.is_cuda(), \"a must be a CUDA tensor\");",
      "at::globalContext().setAllowTF32CuBLAS(true);"), ("switches TF32 on", "setAllowTF32CuBLAS")),
])
def test_torch_and_libraries_in_the_cpp_source_are_rejected(edit, words):
    src = candidate()
    assert edit[0] in src
    bad = src.replace(*edit)
    reason = rejected(bad, *words)
    assert reason.startswith(f"line {line_of(bad, edit[1].splitlines()[-1])}:"), reason


def test_torch_calls_split_over_concatenated_strings_are_found():
    head = HEAD.replace("cuda_sources=cuda_src", "cuda_sources=cuda_src + PIECE")
    extra_src = "PIECE = 'torch::Tensor g(torch::Tensor a) { return at::' + 'matmul(a, a); }'\n"
    src = candidate(head=head.replace("ext = load_inline", extra_src + "ext = load_inline"))
    rejected(src, "in the source given to load_inline", "at::matmul")


@pytest.mark.parametrize("code,words", [
    ("torch.set_float32_matmul_precision('high')\n", ("switches TF32 on",)),
    ("torch.backends.cuda.matmul.allow_tf32 = True\n", ("allow_tf32", "TF32")),
    ("torch.backends.cudnn.allow_tf32 = True\n", ("allow_tf32", "TF32")),
    ("setattr(torch.backends.cuda.matmul, 'allow_tf32', True)\n", ("TF32",)),
    ("torch.backends.cudnn.is_available = lambda: False\n", ("monkey-patching",)),
])
def test_tf32_in_python_is_rejected_and_settings_are_not_patching(code, words):
    rejected(candidate(extra=code + "\n"), *words)


# ---- honest controls: each must pass ----------------------------------------------------------------------------

def ok(src: str) -> None:
    res = check_pytorch_candidate(src)
    assert res.ok, res.reasons


def test_kernel_in_an_fstring_passes():
    src = ("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
           "BLOCK = 256\n\n"
           "src = f'''\n#include <torch/extension.h>\n#define BLOCK {BLOCK}\n"
           "__global__ void relu_kernel(const float* x, float* y, int n) {{\n"
           "    int i = blockIdx.x * BLOCK + threadIdx.x;\n    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;\n}}\n"
           "torch::Tensor relu_cuda(torch::Tensor x) {{\n    auto y = torch::empty_like(x);\n"
           "    int n = x.numel();\n"
           "    relu_kernel<<<(n + {BLOCK} - 1) / {BLOCK}, {BLOCK}>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n"
           "    return y;\n}}\n'''\n\n"
           "ext = load_inline(name='relu_f', cpp_sources='torch::Tensor relu_cuda(torch::Tensor x);',\n"
           "                  cuda_sources=src, functions=['relu_cuda'])\n\n"
           "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "    def forward(self, x):\n        return ext.relu_cuda(x.contiguous())\n")
    ok(src)
    # the control can fail: the same f-string without its launch is "never launched"
    no_launch = src.replace("    relu_kernel<<<(n + {BLOCK} - 1) / {BLOCK}, {BLOCK}>>>(x.data_ptr<float>(), "
                            "y.data_ptr<float>(), n);\n", "")
    assert no_launch != src
    assert "a __global__ kernel is defined but never launched (<<< >>>)" in check_pytorch_candidate(no_launch).reasons


def test_source_split_over_concatenated_strings_passes():
    kernel, launcher = CUDA.split("torch::Tensor mm_cuda", 1)
    head = ("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
            f"KERNEL = '''{kernel}'''\nLAUNCHER = '''torch::Tensor mm_cuda{launcher}'''\n"
            "SOURCE = KERNEL + LAUNCHER\n"
            "ext = load_inline('mm_ext', ['torch::Tensor mm_cuda(torch::Tensor a, torch::Tensor b);'],\n"
            "                  [SOURCE], functions=['mm_cuda'])\n\n")
    src = candidate(head=head)
    ok(src)
    ok(src.replace("SOURCE = KERNEL + LAUNCHER", "SOURCE = '\\n'.join([KERNEL, LAUNCHER])"))
    # the checks read the joined text: the launcher's launch removed, nothing is launched
    broken = src.replace("mm_kernel<<<", "mm_kernel(")
    assert "a __global__ kernel is defined but never launched (<<< >>>)" in check_pytorch_candidate(broken).reasons


def test_extension_functions_named_like_tensor_methods_pass():
    head = HEAD.replace("functions=['mm_cuda']", "functions=['argmin', 'cumsum', 'softmax']")
    ok(candidate("        i = ext.argmin(a)\n        return ext.cumsum(ext.softmax(b))\n", head=head))
    # through self and through a lazily built extension
    ok(candidate("        return self.ext.argmin(a)\n", head=head, init="        self.ext = ext\n"))
    lazy = head + ("_EXT = None\n\ndef _get_ext():\n    global _EXT\n    if _EXT is None:\n"
                   "        _EXT = load_inline(name='x', cpp_sources='', cuda_sources=cuda_src, functions=['argmin'])\n"
                   "    return _EXT\n\n")
    ok(candidate("        return _get_ext().argmin(a)\n", head=lazy))
    # the same call on a tensor is torch's
    rejected(candidate("        return a.argmin()\n", head=head), "calls .argmin()")


def test_parameter_initialisation_passes():
    init = ("        self.weight = nn.Parameter(torch.empty(64, 64))\n"
            "        self.bias = nn.Parameter(torch.empty(64))\n        self.reset_parameters()\n\n"
            "    def reset_parameters(self):\n"
            "        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))\n"
            "        bound = 1 / math.sqrt(self.weight.size(1))\n"
            "        nn.init.uniform_(self.bias, -bound, bound)\n")
    ok(candidate("        return ext.mm_cuda(a, self.weight.t().contiguous())\n", init=init))
    # called from forward, initialisation is forward-side work
    rejected(candidate("        self.reset_parameters()\n" + FORWARD, init=init), "ModelNew.reset_parameters",
             "nn.init.kaiming_uniform_")


def test_cudnn_benchmark_setting_passes():
    ok(candidate(extra="torch.backends.cudnn.benchmark = True\ntorch.backends.cuda.matmul.allow_tf32 = False\n\n"))
    ok(candidate(init="        torch.backends.cudnn.benchmark = True\n"))


def test_launch_size_helper_with_math_ceil_passes():
    extra = "def _grid(n, block=256):\n    return math.ceil(n / block), block\n\n"
    ok(candidate("        grid, block = _grid(a.numel())\n        a = a.view(a.size(0), -1)\n" + FORWARD,
                 extra=extra))
    ok(candidate("        scale = 1.0 / math.sqrt(a.size(1))\n" + FORWARD))


def test_honest_bookkeeping_in_forward_passes():
    ok(candidate("        assert a.is_cuda and a.dtype == torch.float32\n"
                 "        out = torch.empty(a.size(0), b.size(1), device=a.device, dtype=a.dtype)\n"
                 "        stream = torch.cuda.current_stream()\n" + FORWARD))
    ok(candidate("        with torch.no_grad():\n" + "    " + FORWARD))


# ---- honest controls a hostile review found refused (session 20), each beside the hostile use it must not admit --

def _cpp(old: str, new: str) -> str:
    assert old in HEAD
    return HEAD.replace(old, new)


GRID = "dim3 block(16, 16), grid((b.size(1) + 15) / 16, (a.size(0) + 15) / 16);"
REDUCE = ("#include <torch/extension.h>\n#include <ATen/native/cuda/block_reduce.cuh>\n"
          "__global__ void rowsum_kernel(const float* x, float* y, int m) {\n    __shared__ float shared[32];\n"
          "    float v = 0.f;\n    for (int j = threadIdx.x; j < m; j += blockDim.x) v += x[blockIdx.x * m + j];\n"
          "    v = at::native::cuda_utils::BlockReduceSum(v, shared);\n    if (threadIdx.x == 0) y[blockIdx.x] = v;\n}\n")
AUTOGRAD = ("class _MM(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, a, b):\n"
            "        ctx.save_for_backward(a, b)\n        return ext.mm_cuda(a.contiguous(), b.contiguous())\n\n"
            "    @staticmethod\n    def backward(ctx, g):\n        a, b = ctx.saved_tensors\n"
            "        return g @ b.t(), a.t() @ g\n\n")


@pytest.mark.parametrize("name,honest", [
    ("at::ceil_div", lambda: candidate(head=_cpp(GRID, "dim3 block(16, 16), grid(at::ceil_div((int)b.size(1), 16), "
                                                      "at::ceil_div((int)a.size(0), 16));"))),
    ("at::opmath_type", lambda: candidate(head=_cpp("float acc = 0.f;",
                                                    "using acc_t = at::opmath_type<float>;\n        acc_t acc = 0.f;"))),
    ("at::isFloatingType", lambda: candidate(head=_cpp(
        'TORCH_CHECK(a.is_cuda(), "a must be a CUDA tensor");',
        'TORCH_CHECK(a.is_cuda() && at::isFloatingType(a.scalar_type()), "a must be a floating CUDA tensor");'))),
    ("BlockReduceSum in the candidate's kernel", lambda: candidate(head=_cpp("#include <torch/extension.h>\n", REDUCE))),
    ("torch.broadcast_shapes", lambda: candidate("        shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])\n"
                                                 + FORWARD)),
    ("torch.preserve_format", lambda: candidate("        out = torch.empty_like(a, memory_format=torch.preserve_format)\n"
                                                + FORWARD)),
    ("a __main__ block", lambda: candidate() + "\n\nif __name__ == '__main__':\n    a = torch.randn(64, 64, device='cuda')\n"
                                               "    print((ModelNew()(a, a) - a @ a).abs().max())\n"),
    (".zero_()", lambda: candidate("        out = torch.empty(a.size(0), b.size(1), device=a.device)\n        out.zero_()\n"
                                   + FORWARD)),
    ("the extension held in a dict", lambda: candidate("        return _EXTS[a.dtype].mm_cuda(a.contiguous(), b)\n",
                                                      extra="_EXTS = {torch.float32: ext}\n\n")),
    ("an autograd.Function's backward", lambda: candidate("        return _MM.apply(a, b)\n", extra=AUTOGRAD)),
    ("autocast off", lambda: candidate("        with torch.autocast('cuda', enabled=False):\n    " + FORWARD)),
])
def test_honest_uses_found_refused_by_a_review_pass(name, honest):
    ok(honest())


def test_the_hostile_twins_of_those_honest_uses_stay_refused():
    """Each relaxation is narrow: ATen compute beside the allowed helpers, ATen's kernels under at::native, torch
    work in forward, and a backward the code calls itself are still refused (the run-time boundary stands behind
    every name the checks cannot follow)."""
    rejected(candidate(head=_cpp(GRID, GRID + "\n    auto d = at::matmul(a, b);")), "at::matmul")
    rejected(candidate(head=_cpp("#include <torch/extension.h>\n", "#include <torch/extension.h>\n"
                                 "void f(torch::Tensor x) { at::native::sum_out(x, x, {0}); }\n")), "at::native")
    rejected(candidate("        out = torch.empty_like(a)\n        out.copy_(a.t())\n" + FORWARD), ".copy_()")
    rejected(candidate("        return _MM.backward(None, a)[0]\n", extra=AUTOGRAD), "_MM.backward", "@")
    rejected(candidate("        return _MM.apply(a, b) + torch.broadcast_tensors(a, b)[0]\n", extra=AUTOGRAD),
             "torch.broadcast_tensors")


def test_a_main_block_is_not_checked_unless_the_module_can_make_it_run():
    """``if __name__ == "__main__":`` never runs in the harness (the runner loads the module under another name),
    so a self-test there (imports, torch checks of the result) does not refuse the candidate; a module that stores
    to ``__name__`` could run it, and then it is checked like the rest."""
    block = ("\nif __name__ == '__main__':\n    import time\n    m = ModelNew().cuda()\n"
             "    a = torch.randn(64, 64, device='cuda')\n    t = time.time()\n"
             "    torch.testing.assert_close(m(a, a), torch.matmul(a, a))\n    print(time.time() - t)\n")
    ok(candidate() + block)
    rejected(candidate(extra="__name__ = '__main__'\n\n") + block, "import of time")
    rejected(candidate() + block.replace("if __name__ == '__main__':", "if __name__ == '__main__' or True:"),
             "import of time")
