"""Run fast-path CUDA units on the CPU, to check their indexing without a GPU.

A test helper, not part of the harness. :func:`emulate` turns one or more fast-path units (``kernel_forward`` over
``TensorArg``, see :mod:`cudaperf.harness.torch_fast`) into C++ that g++ builds with AddressSanitizer and
UndefinedBehaviorSanitizer, and runs it on given inputs:

- each kernel launch runs its blocks one after another and, within a block, its threads; where the unit calls
  ``__syncthreads`` the threads of a block are fibers (``ucontext``) that run until each has reached the barrier or
  returned, in thread order or in reverse thread order (``order``), so that a missing barrier shows as a thread
  reading shared memory before another wrote it; a barrier reached by some threads of a block after others returned
  is an error;
- ``__shared__`` arrays are static (one block runs at a time), dynamic shared memory is a heap block of the launch's
  size filled with NaN before each block, device allocations (``cudaMallocAsync``) are heap blocks filled with NaN,
  so that a read of something never written turns into NaN in the outputs, and outputs start as NaN (as the
  harness's do), so that an element left unwritten fails the comparison;
- tensors are heap blocks of exactly their size, so that AddressSanitizer reports a read or write past either end;
  ``misalign`` moves every tensor 4 bytes off a 16-byte boundary, which sends the float4 paths to their scalar
  fallbacks;
- every launch's configuration is checked as the CUDA runtime would (block at most 1024 threads, z at most 64;
  grid y and z at most 65535, x at most 2^31 - 1; dynamic shared memory over 48 KB only after
  ``cudaFuncSetAttribute`` raised the kernel's limit, and never over 227 KB; a kernel's ``__launch_bounds__``); a
  bad one is not run and sets the error ``cudaGetLastError`` returns, as on a GPU;
- ``dry`` runs ``kernel_forward`` without running any kernel and without allocating the tensors (pointers are fake
  and 256-byte aligned), to check the launch configurations of full-size problems.

Not emulated: warps (no shuffles, votes or warp-synchronous code: a unit using them does not build here), atomics,
streams, races between blocks. Several units build into one program (each in its own namespace), so that a
problem's variants cost one g++ run.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cudaperf.harness.torch_fast import DTYPES, HEADER

_CACHE = Path(tempfile.gettempdir()) / "cudaperf_cpu_cuda"

_RUNTIME = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>
#include <sys/mman.h>
#include <ucontext.h>

/* ---- the CUDA names the units use ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __constant__
#define __shared__ static
#define __align__(n) alignas(n)
#define __launch_bounds__(...)

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) int4 { int x, y, z, w; };
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
static inline float2 make_float2(float a, float b) { return float2{a, b}; }
template <typename T> static inline T __ldg(const T* p) { return *p; }
static inline float rsqrtf(float v) { return 1.f / sqrtf(v); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }

typedef void* cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInvalidConfiguration = 9 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3,
                      cudaMemcpyDefault = 4 };

static uint3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;

static int emu_dry = 0, emu_reverse = 0, emu_errors = 0;
static cudaError_t emu_last_error = cudaSuccess;
static std::map<const void*, int> emu_max_dyn_smem, emu_bounds;
static std::map<const void*, std::string> emu_names;
static void* emu_dyn_smem = nullptr;  /* the launch's dynamic shared memory: a heap block of exactly its size */

static void emu_fail(const char* what, const char* kernel) {
    fprintf(stderr, "EMU-ERROR %s: %s\n", kernel, what);
    ++emu_errors;
}

static cudaError_t cudaGetLastError() { cudaError_t e = emu_last_error; emu_last_error = cudaSuccess; return e; }
static cudaError_t cudaPeekAtLastError() { return emu_last_error; }
static const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }

static cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) {
    if (emu_dry) { *p = (void*)(uintptr_t)0x100000; return cudaSuccess; }
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xff, bytes);  /* NaN: a read of what was never written shows */
    return cudaSuccess;
}
static cudaError_t cudaMalloc(void** p, size_t bytes) { return cudaMallocAsync(p, bytes, 0); }
static cudaError_t cudaFreeAsync(void* p, cudaStream_t) { if (!emu_dry) free(p); return cudaSuccess; }
static cudaError_t cudaFree(void* p) { return cudaFreeAsync(p, 0); }
static cudaError_t cudaMemsetAsync(void* p, int v, size_t bytes, cudaStream_t = 0) {
    if (!emu_dry) memset(p, v, bytes);
    return cudaSuccess;
}
static cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t bytes, cudaMemcpyKind, cudaStream_t = 0) {
    if (!emu_dry) memcpy(d, s, bytes);
    return cudaSuccess;
}
template <typename T>
static cudaError_t cudaMemcpyToSymbolAsync(T& sym, const void* s, size_t bytes, size_t off = 0,
                                           cudaMemcpyKind = cudaMemcpyHostToDevice, cudaStream_t = 0) {
    if (off + bytes > sizeof(T)) return cudaErrorInvalidValue;
    if (!emu_dry) memcpy((char*)&sym + off, s, bytes);
    return cudaSuccess;
}
template <typename F>
static cudaError_t cudaFuncSetAttribute(F* f, cudaFuncAttribute a, int v) {
    if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (v < 0 || v > 232448) return cudaErrorInvalidValue;
        emu_max_dyn_smem[(const void*)f] = v;
    }
    return cudaSuccess;
}
template <typename F>
static int emu_set_bounds(F* f, int n) { emu_bounds[(const void*)f] = n; return 0; }

/* ---- fibers: the threads of a block when the unit has barriers ---- */
struct EmuFiber { ucontext_t ctx; char* stack; int state; uint3 tid; };  /* state 0 ready, 1 at a barrier, 2 done */
static const size_t EMU_STACK = 256 * 1024;
static std::vector<EmuFiber> emu_fibers;
static ucontext_t emu_sched;
static EmuFiber* emu_cur = nullptr;
static std::function<void()>* emu_body = nullptr;

static void emu_entry() {
    (*emu_body)();
    emu_cur->state = 2;
}

static void __syncthreads() {
    if (!emu_cur) { emu_fail("__syncthreads outside a fiber", "?"); return; }
    EmuFiber* me = emu_cur;
    me->state = 1;
    swapcontext(&me->ctx, &emu_sched);
}

static void emu_run_block(std::function<void()>& body, const char* name) {
    const unsigned nt = blockDim.x * blockDim.y * blockDim.z;
    if (emu_fibers.size() < nt) {
        size_t old = emu_fibers.size();
        emu_fibers.resize(nt);
        for (size_t t = old; t < nt; ++t) {
            void* s = mmap(nullptr, EMU_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
            if (s == MAP_FAILED) { fprintf(stderr, "mmap failed\n"); exit(3); }
            emu_fibers[t].stack = (char*)s;
        }
    }
    emu_body = &body;
    for (unsigned t = 0; t < nt; ++t) {
        EmuFiber& f = emu_fibers[t];
        f.tid = uint3{t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y)};
        f.state = 0;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = EMU_STACK;
        f.ctx.uc_link = &emu_sched;
        makecontext(&f.ctx, emu_entry, 0);
    }
    for (;;) {
        for (unsigned k = 0; k < nt; ++k) {
            EmuFiber& f = emu_fibers[emu_reverse ? nt - 1 - k : k];
            if (f.state != 0) continue;
            emu_cur = &f;
            threadIdx = f.tid;
            swapcontext(&emu_sched, &f.ctx);
        }
        emu_cur = nullptr;
        unsigned waiting = 0, done = 0;
        for (unsigned t = 0; t < nt; ++t) {
            waiting += emu_fibers[t].state == 1;
            done += emu_fibers[t].state == 2;
        }
        if (waiting == 0) return;
        if (done) emu_fail("__syncthreads reached by some threads of a block after others returned", name);
        for (unsigned t = 0; t < nt; ++t)
            if (emu_fibers[t].state == 1) emu_fibers[t].state = 0;
    }
}

/* ---- launches ---- */
struct EmuConfig { dim3 grid, block; size_t smem; };
static EmuConfig emu_config(dim3 g, dim3 b, size_t smem = 0, cudaStream_t = 0) { return EmuConfig{g, b, smem}; }

template <typename... P, typename... A>
static void emu_launch(const char* name, EmuConfig c, void (*k)(P...), A&&... args) {
    const dim3 g = c.grid, b = c.block;
    char why[256] = "";
    const unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
    if (b.x == 0 || b.y == 0 || b.z == 0 || g.x == 0 || g.y == 0 || g.z == 0)
        snprintf(why, sizeof why, "empty grid or block");
    else if (b.x > 1024 || b.y > 1024 || b.z > 64 || nt > 1024)
        snprintf(why, sizeof why, "block %ux%ux%u", b.x, b.y, b.z);
    else if (g.x > 2147483647u || g.y > 65535u || g.z > 65535u)
        snprintf(why, sizeof why, "grid %ux%ux%u", g.x, g.y, g.z);
    else if (c.smem > 232448 || (c.smem > 49152 && (!emu_max_dyn_smem.count((const void*)k) ||
                                                   (size_t)emu_max_dyn_smem[(const void*)k] < c.smem)))
        snprintf(why, sizeof why, "dynamic shared memory %zu bytes", c.smem);
    else if (emu_bounds.count((const void*)k) && nt > (unsigned long long)emu_bounds[(const void*)k])
        snprintf(why, sizeof why, "block of %llu threads over __launch_bounds__(%d)", nt, emu_bounds[(const void*)k]);
    printf("LAUNCH %s grid %u %u %u block %u %u %u smem %zu\n", name, g.x, g.y, g.z, b.x, b.y, b.z, c.smem);
    if (why[0]) {
        emu_fail(why, name);
        emu_last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (emu_dry) return;
    std::function<void()> body = [&]() { k(args...); };
    gridDim = g;
    blockDim = b;
    emu_dyn_smem = malloc(c.smem ? c.smem : 1);
    for (unsigned bz = 0; bz < g.z; ++bz)
        for (unsigned by = 0; by < g.y; ++by)
            for (unsigned bx = 0; bx < g.x; ++bx) {
                blockIdx = uint3{bx, by, bz};
                memset(emu_dyn_smem, 0xff, c.smem);
#ifdef EMU_FIBERS
                emu_run_block(body, name);
#else
                for (unsigned tz = 0; tz < b.z; ++tz)
                    for (unsigned ty = 0; ty < b.y; ++ty)
                        for (unsigned tx = 0; tx < b.x; ++tx) {
                            threadIdx = uint3{tx, ty, tz};
                            body();
                        }
#endif
            }
    free(emu_dyn_smem);
    emu_dyn_smem = nullptr;
}
"""

_MAIN = r"""
typedef int (*EmuEntry)(const TensorArg*, int, TensorArg*, int, cudaStream_t);
static const EmuEntry emu_entries[] = {%(entries)s};

static const int ESIZE[] = {4, 2, 2, 8, 4, 8, 1, 1, 1};

static int read_tensor(FILE* f, TensorArg* t, int misalign, char* path, size_t npath) {
    int dtype, ndim;
    if (fscanf(f, "%%d %%d", &dtype, &ndim) != 2) return 1;
    t->dtype = dtype;
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; ++d) {
        long long s;
        if (fscanf(f, "%%lld", &s) != 1) return 1;
        t->shape[d] = s;
        t->numel *= s;
    }
    long long st = 1;
    for (int d = ndim - 1; d >= 0; --d) { t->strides[d] = st; st *= t->shape[d]; }
    if (fscanf(f, "%%s", path) != 1) return 1;
    (void)npath;
    const size_t bytes = (size_t)t->numel * ESIZE[dtype];
    if (emu_dry) { t->data = (void*)(uintptr_t)0x200000; return 0; }
    /* exactly the tensor's bytes (misaligned: 4 bytes past a 16-byte boundary) */
    char* base = (char*)malloc(bytes + (misalign ? 4 : 0));
    if (!base) return 1;
    if (((uintptr_t)base & 15) != 0) { fprintf(stderr, "malloc not 16-byte aligned\n"); return 1; }
    t->data = base + (misalign ? 4 : 0);
    FILE* g = fopen(path, "rb");
    if (!g) return 1;
    if (bytes && fread(t->data, 1, bytes, g) != bytes) { fclose(g); return 1; }
    fclose(g);
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    FILE* f = fopen(argv[1], "r");
    if (!f) return 2;
    int unit, misalign, n_in, n_out;
    if (fscanf(f, "%%d %%d %%d %%d", &unit, &emu_dry, &emu_reverse, &misalign) != 4) return 2;
    if (unit < 0 || unit >= (int)(sizeof emu_entries / sizeof emu_entries[0])) return 2;
    static char paths[16][4096];
    TensorArg in[8], out[8];
    if (fscanf(f, "%%d", &n_in) != 1 || n_in > 8) return 2;
    for (int i = 0; i < n_in; ++i) if (read_tensor(f, &in[i], misalign, paths[i], 4096)) return 2;
    if (fscanf(f, "%%d", &n_out) != 1 || n_out > 8) return 2;
    for (int i = 0; i < n_out; ++i) if (read_tensor(f, &out[i], misalign, paths[8 + i], 4096)) return 2;
    fclose(f);
    const int rc = emu_entries[unit](in, n_in, out, n_out, (cudaStream_t)0);
    printf("RC %%d\n", rc);
    if (!emu_dry)
        for (int i = 0; i < n_out; ++i) {
            FILE* g = fopen(paths[8 + i], "wb");
            if (!g) return 2;
            fwrite(out[i].data, 1, (size_t)out[i].numel * ESIZE[out[i].dtype], g);
            fclose(g);
            free((char*)out[i].data - (misalign ? 4 : 0));
        }
    if (!emu_dry)
        for (int i = 0; i < n_in; ++i) free((char*)in[i].data - (misalign ? 4 : 0));
    return emu_errors ? 4 : 0;
}
"""

_LAUNCH = re.compile(r"(\w+(?:\s*<[^<>;()]*>)?)\s*<<<")
_KERNEL_BOUNDS = re.compile(r"__global__\s+void\s+__launch_bounds__\(([^)]*)\)\s*(\w+)\s*\(")
_DYN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+(\w+)\s*\[\s*\]\s*;")


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """The index just past the bracket that closes the one at ``start``."""
    depth = 0
    for k in range(start, len(text)):
        if text[k] == open_:
            depth += 1
        elif text[k] == close:
            depth -= 1
            if depth == 0:
                return k + 1
    raise ValueError(f"unbalanced {open_}{close} from offset {start}")


def translate(code: str) -> str:
    """A fast-path unit as C++ for the emulator: launches become calls of ``emu_launch``, dynamic shared memory the
    emulator's buffer, ``kernel_forward`` a plain C++ function (the caller puts the unit in a namespace)."""
    out, pos = [], 0
    for m in _LAUNCH.finditer(code):
        if m.start() < pos:
            continue
        cfg_end = code.index(">>>", m.end())
        cfg = code[m.end():cfg_end]
        args_start = code.index("(", cfg_end)
        args_end = _matching(code, args_start, "(", ")")
        args = code[args_start + 1:args_end - 1].strip()
        name = m.group(1)
        out.append(code[pos:m.start()])
        call = f'emu_launch("{" ".join(name.split())}", emu_config({cfg}), {name}'
        out.append(call + (f", {args})" if args else ")"))
        pos = args_end
    out.append(code[pos:])
    text = "".join(out)
    text = _DYN_SHARED.sub(r"\1* \2 = (\1*)emu_dyn_smem;", text)
    bounds = _KERNEL_BOUNDS.findall(text)
    text = text.replace('extern "C" int kernel_forward', "int kernel_forward")
    for expr, name in bounds:
        first = expr.split(",")[0].strip()
        text += f"\nstatic int emu_bounds_{name} = emu_set_bounds({name}, ({first}));\n"
    return text


def program(units: list[str]) -> str:
    """One C++ program holding ``units`` (unit k in namespace ``unit_k``); its first argument is a spec file."""
    header = HEADER.replace("#include <cuda_runtime.h>", "")
    header = header.replace("int kernel_forward(", "int emu_unused_kernel_forward(")
    fibers = any("__syncthreads" in u for u in units)
    parts = [("#define EMU_FIBERS\n" if fibers else "") + _RUNTIME, header]
    for k, u in enumerate(units):
        parts.append(f"namespace unit_{k} {{\n{translate(u)}\n}}  // namespace unit_{k}\n")
    parts.append(_MAIN % {"entries": ", ".join(f"unit_{k}::kernel_forward" for k in range(len(units)))})
    return "\n".join(parts)


def build(units: list[str], *, sanitize: bool = True) -> Path:
    """Build (cached by content) the program of ``units``; returns the executable."""
    src = program(units)
    flags = ["-std=c++17", "-g", "-w", "-fno-strict-aliasing"]
    flags += ["-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
              "-fno-omit-frame-pointer"] if sanitize else ["-O0"]
    key = hashlib.sha256((src + " ".join(flags)).encode()).hexdigest()[:24]
    _CACHE.mkdir(parents=True, exist_ok=True)
    exe = _CACHE / f"emu_{key}"
    if exe.exists():
        return exe
    cpp = _CACHE / f"emu_{key}.cpp"
    cpp.write_text(src)
    tmp = exe.with_suffix(f".tmp{os.getpid()}")
    res = subprocess.run(["g++", *flags, str(cpp), "-o", str(tmp)], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"g++ failed on {cpp}:\n{res.stderr[-4000:]}")
    tmp.replace(exe)
    return exe


@dataclass
class EmuResult:
    rc: int
    """kernel_forward's return value (None when the program died first)."""
    outputs: list[np.ndarray]
    launches: list[str]
    errors: list[str]
    """Configuration and barrier errors, and sanitizer reports."""
    log: str


def _dtype_code(a: np.ndarray) -> int:
    name = {"float32": "float32", "float64": "float64", "int64": "int64", "int32": "int32", "bool": "bool",
            "uint8": "uint8", "int8": "int8"}[str(a.dtype)]
    return DTYPES.index(name)


def emulate(exe: Path, unit: int, inputs: list, out_shapes: list[tuple], *, out_dtype=np.float32,
            order: str = "forward", misalign: bool = False, dry: bool = False, timeout: float = 600) -> EmuResult:
    """Run unit ``unit`` of ``exe`` on ``inputs`` (numpy arrays; when ``dry``, arrays or the shapes of float32
    tensors), with float32 outputs of ``out_shapes`` (NaN at the start)."""
    with tempfile.TemporaryDirectory(prefix="emu_run_") as d:
        d = Path(d)
        lines = [f"{unit} {int(dry)} {int(order == 'reverse')} {int(misalign)}", str(len(inputs))]
        for k, a in enumerate(inputs):
            if dry and not isinstance(a, np.ndarray):
                shape, code = tuple(a), DTYPES.index("float32")
            elif dry:
                shape, code = a.shape, _dtype_code(a)
            else:
                a = np.ascontiguousarray(a)
                shape, code = a.shape, _dtype_code(a)
                a.tofile(d / f"in{k}")
            lines.append(f"{code} {len(shape)} {' '.join(map(str, shape))} {d / f'in{k}'}")
        lines.append(str(len(out_shapes)))
        for k, s in enumerate(out_shapes):
            np.full(s, np.nan, dtype=out_dtype).tofile(d / f"out{k}") if not dry else None
            lines.append(f"{DTYPES.index(np.dtype(out_dtype).name)} {len(s)} {' '.join(map(str, s))} {d / f'out{k}'}")
        (d / "spec").write_text("\n".join(lines) + "\n")
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:detect_stack_use_after_return=0:abort_on_error=0",
                   UBSAN_OPTIONS="print_stacktrace=1")
        res = subprocess.run([str(exe), str(d / "spec")], capture_output=True, text=True, timeout=timeout, env=env)
        rc = next((int(line.split()[1]) for line in res.stdout.splitlines() if line.startswith("RC ")), None)
        errors = [line for line in res.stderr.splitlines() if line.startswith("EMU-ERROR")]
        found = [res.stderr.find(m) for m in ("ERROR: AddressSanitizer", "runtime error:") if m in res.stderr]
        if found:  # the sanitizer's report, from its first line
            errors.append(res.stderr[max(0, min(found) - 200):min(found) + 3000])
        if res.returncode not in (0, 4) and not errors:
            errors.append(f"exit status {res.returncode}: {res.stderr[-2000:]}")
        outputs = [] if dry or rc is None else [np.fromfile(d / f"out{k}", dtype=out_dtype).reshape(s)
                                               for k, s in enumerate(out_shapes)]
        launches = [line[len("LAUNCH "):] for line in res.stdout.splitlines() if line.startswith("LAUNCH ")]
        return EmuResult(rc, outputs, launches, errors, res.stdout[-2000:] + res.stderr[-4000:])
