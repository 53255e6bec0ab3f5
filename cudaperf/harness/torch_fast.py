"""The fast build path for PyTorch tasks: one CUDA translation unit, built by nvcc alone, bound by pointer.

KernelBench's candidates build a PyTorch extension with ``load_inline``: PyTorch's headers, ninja, a C++ binding
layer, tens of seconds per candidate. The paper's output format is a single CUDA translation unit, so cudaperf
defines a C entry point that needs none of that:

    extern "C" int kernel_forward(const TensorArg* inputs, int n_inputs,
                                  TensorArg* outputs, int n_outputs, cudaStream_t stream);

``TensorArg`` (:data:`HEADER`, forced into the translation unit with ``nvcc -include``; the candidate does not
include it) describes one tensor: device pointer, dtype code, shape and strides in elements. ``inputs`` are the
forward arguments followed by the module's parameters and buffers, in ``named_parameters()`` then
``named_buffers()`` order; ``outputs`` are allocated by the harness with the reference's shapes and dtypes. The
entry returns 0 on success; the work must go on ``stream`` (or be synchronised before returning).

:func:`build_fast_candidate` compiles the unit to an object in the sandbox, checks its symbols (only
``kernel_forward`` may have C linkage), and links a shared library with the CUDA runtime linked statically and its
symbols hidden, so that the library carries no PyTorch or CUDA-version coupling. :class:`FastModule` loads it with
ctypes and calls it on torch tensors; it runs in the candidate's sandboxed process.
"""

from __future__ import annotations


import ctypes
import re
from pathlib import Path
from typing import Sequence

from cudaperf.harness.compile import (
    DEFAULT_NVCC_FLAGS,
    BuildOutcome,
    _cached_nvcc_build,
    _nvcc_in_sandbox,
    default_arch,
    gcc_version,
    nvcc_version,
    object_reasons,
    sha256,
)
from cudaperf.harness.sandbox import share_file
from cudaperf.harness.static_checks import IMPORTS_CHECK, StaticCheckResult, check_source

ENTRY = "kernel_forward"
MAX_DIMS = 8
DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "bool", "int8", "uint8")
"""Dtype codes: the index in this tuple (``enum TensorDtype`` in :data:`HEADER`)."""
HEADER_NAME = "tensor_arg.h"
HEADER = """/* cudaperf fast path: the tensors of one forward call, passed by pointer (forced include). */
#ifndef CUDAPERF_TENSOR_ARG_H
#define CUDAPERF_TENSOR_ARG_H
#include <stdint.h>
#include <cuda_runtime.h>

#define TENSOR_ARG_MAX_DIMS 8

enum TensorDtype {
    DT_FLOAT32 = 0, DT_FLOAT16 = 1, DT_BFLOAT16 = 2, DT_FLOAT64 = 3, DT_INT32 = 4, DT_INT64 = 5, DT_BOOL = 6,
    DT_INT8 = 7, DT_UINT8 = 8
};

typedef struct TensorArg {
    void *data;                              /* device pointer */
    int32_t dtype;                           /* enum TensorDtype */
    int32_t ndim;
    int64_t numel;
    int64_t shape[TENSOR_ARG_MAX_DIMS];
    int64_t strides[TENSOR_ARG_MAX_DIMS];    /* in elements */
} TensorArg;

#ifdef __cplusplus
extern "C"
#endif
int kernel_forward(const TensorArg *inputs, int n_inputs, TensorArg *outputs, int n_outputs, cudaStream_t stream);

#endif
"""


class TensorArg(ctypes.Structure):
    """The ctypes mirror of ``TensorArg`` (a test compares its layout with the C compiler's)."""

    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("numel", ctypes.c_int64), ("shape", ctypes.c_int64 * MAX_DIMS),
                ("strides", ctypes.c_int64 * MAX_DIMS)]


def tensor_arg(t) -> TensorArg:
    """Describe a torch tensor (its storage stays owned by torch: keep the tensor alive across the call)."""
    name = str(t.dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"dtype {t.dtype} is not supported by the fast path (supported: {', '.join(DTYPES)})")
    if t.dim() > MAX_DIMS:
        raise ValueError(f"a {t.dim()}-dimensional tensor: the fast path passes at most {MAX_DIMS} dimensions")
    a = TensorArg()
    a.data = t.data_ptr()
    a.dtype = DTYPES.index(name)
    a.ndim = t.dim()
    a.numel = t.numel()
    for i, (n, s) in enumerate(zip(t.shape, t.stride())):
        a.shape[i] = n
        a.strides[i] = s
    return a


class FastCallError(RuntimeError):
    """The candidate's ``kernel_forward`` returned a nonzero status."""


class FastModule:
    """A built fast-path library, loaded: ``module(inputs, outputs, stream)`` calls ``kernel_forward``."""

    def __init__(self, library: str | Path) -> None:
        self.path = Path(library)
        self._lib = ctypes.CDLL(str(self.path), mode=ctypes.RTLD_LOCAL)
        try:
            fn = getattr(self._lib, ENTRY)
        except AttributeError:
            raise ValueError(f"{self.path} does not define {ENTRY}") from None
        fn.argtypes = [ctypes.POINTER(TensorArg), ctypes.c_int, ctypes.POINTER(TensorArg), ctypes.c_int,
                       ctypes.c_void_p]
        fn.restype = ctypes.c_int
        self._fn = fn

    def __call__(self, inputs: Sequence, outputs: Sequence, stream: int | None = 0) -> None:
        ins = (TensorArg * max(1, len(inputs)))(*[tensor_arg(t) for t in inputs])
        outs = (TensorArg * max(1, len(outputs)))(*[tensor_arg(t) for t in outputs])
        rc = self._fn(ins, len(inputs), outs, len(outputs), stream or None)
        if rc != 0:
            raise FastCallError(f"{ENTRY} returned {rc}")


_LIBRARY_SYMBOL = re.compile(r"^(?:cublas|cublasLt|cudnn|cufft|cusparse|cusolver|curand|cutensor|nccl|nvrtc|cuLink"
                             r"|cuModule|cuLaunch|_ZN2at|_ZN5torch|_ZN3c10\d|_?Py[A-Z_]|_?Py$)")
"""Undefined references a fast-path library may not hold: vendor libraries, ATen/torch/c10, the driver's module
loader, and the Python C API (``PyRun_SimpleString`` and the like would run Python in the runner's interpreter,
where the timing's CUDA events and the profiler live)."""


def library_references(nm_undefined: str) -> list[str]:
    """Reasons to reject a fast-path object (``nm -u`` output) that refers to vendor compute libraries, PyTorch
    (ATen, torch), the driver API's module loader or the Python C API: in the runner's process those are loaded and
    would do the work or reach the runner, however they are declared (a weak ``extern "C"`` declaration links
    without the library)."""
    reasons = []
    for line in nm_undefined.splitlines():
        sym = line.split()[-1] if line.split() else ""
        if _LIBRARY_SYMBOL.match(sym):
            reasons.append(f"refers to {sym}: vendor libraries, PyTorch, the Python C API and the driver's module "
                           "loader are off limits (the candidate's own kernels must do the work)")
    return list(dict.fromkeys(reasons))


def check_fast_candidate(code: str) -> StaticCheckResult:
    """The static checks every candidate gets, before nvcc: a kernel defined and launched, no host threads,
    process creation, run-time loading, signal handlers or timers, no quoted includes (the harness forces
    ``tensor_arg.h`` in), no redefined CUDA names, nothing naming the harness's probe."""
    return check_source(code, kind="pytorch_fast")


def build_fast_candidate(code: str, *, arch: str | None = None,
                         flags: tuple[str, ...] = DEFAULT_NVCC_FLAGS) -> BuildOutcome:
    """Compile (sandboxed nvcc, cached by content) a fast-path candidate into a shared library.

    Stages: ``compile`` (nvcc failed), ``symbols`` (no ``kernel_forward``, or another function with C linkage
    that could replace the C library's, the CUDA runtime's or the harness's), ``link``, ``ok``. The outcome's
    ``exe`` is the library."""
    arch = arch or default_arch()
    all_flags = (f"-arch={arch}", *flags)
    key = sha256("torchfast", code, HEADER, " ".join(all_flags), f"{nvcc_version()}; {gcc_version()}",
                 _LIBRARY_SYMBOL.pattern, IMPORTS_CHECK)  # a change of the symbol rules builds (and checks) again

    def build(w: Path) -> tuple[str, str, tuple[str, ...], str]:
        (w / "candidate.cu").write_text(code)
        (w / HEADER_NAME).write_text(HEADER)
        for f in ("candidate.cu", HEADER_NAME):
            share_file(w / f)
        ok, log = _nvcc_in_sandbox([*all_flags, "-Xcompiler", "-fPIC", "-include", HEADER_NAME, "-c",
                                    "candidate.cu", "-o", "candidate.o"], w)
        if not ok:
            return "compile", log, (), "candidate.so"
        obj = object_reasons(w / "candidate.o", {ENTRY})
        reasons = obj.reasons + library_references(obj.undefined)
        if not any(line.split()[1:] == ["T", ENTRY] for line in obj.defined.splitlines()):
            reasons.insert(0, f"does not define extern \"C\" int {ENTRY}(const TensorArg*, int, TensorArg*, int, "
                              "cudaStream_t): the fast path's entry point")
        if reasons:
            return "symbols", log, tuple(reasons), "candidate.so"
        ok, link_log = _nvcc_in_sandbox([f"-arch={arch}", "-shared", "candidate.o", "-o", "candidate.so",
                                         "-Xlinker=--exclude-libs,ALL"], w)
        return ("ok" if ok else "link"), log + link_log, (), "candidate.so"

    return _cached_nvcc_build(key, arch, all_flags, build)
