"""Run fast-path units (``kernel_forward`` over ``TensorArg``) on the CPU, to check their indexing and
synchronisation where no GPU is. The one CPU emulator of the tests (its own tests: ``tests/test_cuda_cpu_emulator.py``).

A unit's CUDA source is rewritten into C++ (:func:`translate`: launches become calls of the emulator's launcher,
``__shared__`` arrays static storage poisoned at each block's first use, ``extern __shared__`` the launch's dynamic
buffer) and built by g++ against an emulation of the CUDA subset the variants use (:data:`EMU_HEADER`, installed as
``cuda_runtime.h`` and ``cuda_fp16.h``). Several units build into one program (unit ``k`` in namespace ``unit_k``), so
that a problem's variants cost one g++ run; ``sanitize=True`` builds under AddressSanitizer and
UndefinedBehaviorSanitizer. A launch runs its blocks one after another and each block's threads as cooperative fibers
(``ucontext``): a thread runs until it reaches ``__syncthreads`` or a warp intrinsic; a barrier opens once every
thread of the block waits at it, a warp intrinsic once every lane its mask names waits at the same call, so
shuffles (with ``width``), votes and ``__match_any_sync`` exchange real values. What it checks beyond the outputs:

- shared memory (static and dynamic), scratch from ``cudaMalloc*`` and the outputs start as 0xFF bytes (NaN in
  float32, float16 and float64; -1 in integers): a read before a write shows;
- the threads of a block take turns in one of several orders (:data:`SCHEDULES`: always in thread order, always
  reversed, alternating, one warp running ahead as far as the barriers let it, seeded random), so a missing barrier
  between writing and reading shared memory, or before it is written again, shows in one order or another;
- a barrier some threads of the block never reach (they returned), a warp intrinsic whose mask names a lane that is
  gone or waits elsewhere, a lane reading a lane outside the mask: errors;
- every tensor and scratch buffer sits between guard zones: a write past either end is reported (under ASan any
  access to a guard zone is, and a read or write past a shared array or the dynamic shared memory too); the inputs
  must come back unchanged; scratch must be freed; UBSan reports a misaligned ``float4`` (or ``__half2``...) access,
  and ``misalign=True`` moves every tensor 4 bytes off its 256-byte boundary to send vector paths to their scalar
  fallbacks (or show they have none);
- launch limits, as the CUDA runtime checks them: block at most 1024 threads (z at most 64) and at most the kernel's
  ``__launch_bounds__`` (its expression evaluated at the launch, template arguments substituted), ``gridDim.x <
  2^31``, ``gridDim.y/z <= 65535``, dynamic shared memory over 48 KB only after ``cudaFuncSetAttribute`` raised the
  kernel's limit, never over 227 KB; a refused launch does not run and sets the error ``cudaGetLastError`` returns.

``dry=True`` runs only the host code: launches are checked against the limits and recorded but not run, no tensor is
allocated (fake 256-byte aligned pointers), so a variant's launch configurations are checked at a problem's full size.
``__half`` and ``__half2`` are storage types with the conversions of ``cuda_fp16.h`` (round to nearest even).

What it cannot show: races between threads outside barriers and warp intrinsics (a plain ``+=`` where an atomic is
needed runs correctly here: one host thread runs every CUDA thread), memory-model subtleties, and anything about speed.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cudaperf.harness.torch_fast import DTYPES, HEADER, HEADER_NAME

EMU_HEADER = r"""
#ifndef CUDAPERF_CPU_EMU_H
#define CUDAPERF_CPU_EMU_H
#include <stdint.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define EMU_POISON(p, n) ((void)(p), (void)(n))
#define EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define __global__
#define __device__
#define __host__
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline
#define __constant__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
#define EMU_VEC2(T, N, A) struct __attribute__((aligned(A))) N { T x, y; }; \
    inline N make_##N(T a, T b) { N r; r.x = a; r.y = b; return r; }
#define EMU_VEC4(T, N, A) struct __attribute__((aligned(A))) N { T x, y, z, w; }; \
    inline N make_##N(T a, T b, T c, T d) { N r; r.x = a; r.y = b; r.z = c; r.w = d; return r; }
EMU_VEC2(float, float2, 8) EMU_VEC4(float, float4, 16)
EMU_VEC2(int, int2, 8) EMU_VEC4(int, int4, 16)
EMU_VEC2(unsigned, uint2, 8) EMU_VEC4(unsigned, uint4, 16)
EMU_VEC2(double, double2, 16) EMU_VEC4(unsigned char, uchar4, 4)
struct __attribute__((aligned(16))) longlong2 { long long x, y; };

typedef struct CUstream_st* cudaStream_t;
enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
                 cudaErrorInvalidConfiguration = 9, cudaErrorLaunchFailure = 719 };
typedef enum cudaError cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
                         cudaFuncAttributePreferredSharedMemoryCarveout = 9 };
enum cudaDeviceAttr { cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMaxSharedMemoryPerBlock = 8,
                      cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
constexpr int warpSize = 32;

namespace emu {
enum State { RUN, BAR, WARP, DONE };
struct Fiber {
    ucontext_t ctx;
    char* stack = nullptr;
    void* fake = nullptr;
    uint3 tid;
    unsigned linear;
    State st;
    int site, op;
    unsigned mask;
    uint64_t val;
    uint64_t snap[32];
};
constexpr size_t STACK = 256 * 1024;
constexpr size_t GUARD = 256;
constexpr size_t SMEM_LIMIT = 232448;  /* 227 KB: the opt-in maximum per block (H100, H200) */
inline ucontext_t main_ctx;
inline const void* main_bottom = nullptr;
inline size_t main_size = 0;
inline Fiber* cur = nullptr;
inline std::vector<Fiber> fibers;
inline uint3 block_idx;
inline dim3 block_dim, grid_dim;
inline std::function<void()> body;
inline std::set<void*> shared_seen;
inline unsigned char* dyn_smem = nullptr;
inline size_t dyn_size = 0;
inline int failed = 0;
inline cudaError_t last_error = cudaSuccess;
inline bool dry = false;
inline int sched = 0;
inline std::mt19937 rng(12345);
inline std::map<const void*, int> dyn_limit;
struct Alloc { size_t n; unsigned char* raw; };
inline std::map<void*, Alloc> allocs;  /* user pointer -> its size and the block around it */
inline uintptr_t fake_next = (uintptr_t)1 << 40;
inline long long launches = 0;

inline void fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "EMU ERROR: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (failed < 1000) ++failed;
}

/* n bytes filled with `fill`, `shift` bytes past a 256-byte boundary, between two guard zones of GUARD bytes */
inline void* alloc(size_t n, int fill, size_t shift = 0) {
    if (dry) {
        void* p = (void*)fake_next;
        fake_next += ((n + 4095) / 4096 + 1) * 4096;
        return p;
    }
    const size_t total = ((GUARD + shift + n + GUARD + 255) / 256) * 256;
    unsigned char* raw = (unsigned char*)aligned_alloc(256, total);
    if (!raw) return nullptr;
    unsigned char* p = raw + GUARD + shift;
    memset(raw, 0xA5, total);
    memset(p, fill, n);
    EMU_POISON(raw, GUARD + shift);
    EMU_POISON(p + n, total - GUARD - shift - n);
    allocs[p] = Alloc{n, raw};
    return p;
}
inline bool guards_ok(void* q) {
    auto it = allocs.find(q);
    if (it == allocs.end()) return false;
    unsigned char* p = (unsigned char*)q;
    const size_t n = it->second.n;
    EMU_UNPOISON(p - GUARD, GUARD);
    EMU_UNPOISON(p + n, GUARD);
    bool ok = true;
    for (size_t i = 1; i <= GUARD; ++i)
        if (p[-(long)i] != 0xA5 || p[n + i - 1] != 0xA5) ok = false;
    EMU_POISON(p - GUARD, GUARD);
    EMU_POISON(p + n, GUARD);
    return ok;
}
inline void release(void* p, bool check = true) {
    if (dry || !p) return;
    auto it = allocs.find(p);
    if (it == allocs.end()) { fail("free of a pointer that was not allocated"); return; }
    if (check && !guards_ok(p)) fail("a write past the ends of a %zu-byte scratch buffer", it->second.n);
    unsigned char* raw = it->second.raw;
    const size_t total = ((GUARD + ((unsigned char*)p - raw - GUARD) + it->second.n + GUARD + 255) / 256) * 256;
    EMU_UNPOISON(raw, total);
    allocs.erase(it);
    free(raw);
}
inline bool inside(const void* p, size_t n) {  /* [p, p + n) within one allocation */
    if (dry) return true;
    auto it = allocs.upper_bound((void*)p);
    if (it == allocs.begin()) return false;
    --it;
    const unsigned char* b = (const unsigned char*)it->first;
    return (const unsigned char*)p >= b && (const unsigned char*)p + n <= b + it->second.n;
}

/* fiber switches, announced to ASan so that it follows the stacks */
inline void start_switch(void** fake, const void* bottom, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void)fake; (void)bottom; (void)size;
#endif
}
inline void finish_switch(void* fake, const void** bottom, size_t* size) {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
    (void)fake; (void)bottom; (void)size;
#endif
}
inline void yield() {
    Fiber* me = cur;
    start_switch(&me->fake, main_bottom, main_size);
    swapcontext(&me->ctx, &main_ctx);
    finish_switch(me->fake, nullptr, nullptr);
}
inline void trampoline() {
    finish_switch(nullptr, &main_bottom, &main_size);
    body();
    cur->st = DONE;
    start_switch(nullptr, main_bottom, main_size);  /* uc_link returns to the scheduler; this stack is done */
}
inline void resume(Fiber& f) {
    cur = &f;
    void* fake = nullptr;
    start_switch(&fake, f.stack, STACK);
    swapcontext(&main_ctx, &f.ctx);
    finish_switch(fake, nullptr, nullptr);
}

/* the lanes of warp w whose warp intrinsic every lane of its mask has reached: values handed out, lanes run */
inline int release_warp(unsigned n, unsigned w) {
    const unsigned lo = w * 32, cnt = n - lo < 32 ? n - lo : 32;
    int released = 0;
    for (unsigned l = 0; l < cnt; ++l) {
        Fiber& f = fibers[lo + l];
        if (f.st != WARP) continue;
        bool all = true;
        for (unsigned m = 0; m < 32 && all; ++m) {
            if (!(f.mask >> m & 1u)) continue;
            if (m >= cnt) {
                fail("warp %u: the mask %08x of the warp intrinsic on line %d names lane %u, which does not exist",
                     w, f.mask, f.site, m);
                return -1;
            }
            const Fiber& g = fibers[lo + m];
            if (g.st == DONE) {
                fail("warp %u: lane %u of the mask %08x never reaches the warp intrinsic on line %d (it returned)",
                     w, m, f.mask, f.site);
                return -1;
            }
            if (g.st != WARP) { all = false; break; }
            if (g.mask != f.mask || g.site != f.site || g.op != f.op) {
                fail("warp %u: lanes %u and %u wait at different warp intrinsics (lines %d and %d, masks %08x and "
                     "%08x)", w, l, m, f.site, g.site, f.mask, g.mask);
                return -1;
            }
        }
        if (!all) continue;
        uint64_t vals[32] = {0};
        for (unsigned m = 0; m < 32; ++m)
            if (f.mask >> m & 1u) vals[m] = fibers[lo + m].val;
        const unsigned mask = f.mask;
        for (unsigned m = 0; m < 32; ++m)
            if (mask >> m & 1u) {
                memcpy(fibers[lo + m].snap, vals, sizeof vals);
                fibers[lo + m].st = RUN;
            }
        ++released;
    }
    return released;
}

/* Schedules (SCHEDULES in the Python module): 0 round robin, thread order then reverse on alternate passes;
   1 the same starting reversed (blocks in reverse order too); 2 always the lowest-numbered runnable thread (a warp
   runs ahead as far as the barriers let it); 3 the highest (blocks reversed); 4 thread order at every pass;
   5 reverse thread order at every pass (blocks reversed); 6 a seeded random order at every pass */
inline bool run_block(unsigned n) {
    if (fibers.size() < n) {
        const size_t old = fibers.size();
        fibers.resize(n);
        for (size_t t = old; t < n; ++t) {
            void* s = mmap(nullptr, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (s == MAP_FAILED) { fprintf(stderr, "EMU: no memory for a fiber stack\n"); exit(75); }
            fibers[t].stack = (char*)s;
        }
    }
    for (unsigned t = 0; t < n; ++t) {
        Fiber& f = fibers[t];
        f.tid = uint3{t % block_dim.x, (t / block_dim.x) % block_dim.y, t / (block_dim.x * block_dim.y)};
        f.linear = t;
        f.st = RUN;
        f.fake = nullptr;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = STACK;
        f.ctx.uc_link = &main_ctx;
        makecontext(&f.ctx, trampoline, 0);
    }
    shared_seen.clear();
    if (dyn_size) memset(dyn_smem, 0xFF, dyn_size);
    std::vector<unsigned> seq(n);
    for (unsigned pass = 0;; ++pass) {
        bool ran = false;
        if (sched == 2 || sched == 3) {  /* greedy: one thread at a time, the lowest (highest) runnable */
            for (;;) {
                int pick = -1;
                for (unsigned k = 0; k < n; ++k) {
                    const unsigned t = sched == 2 ? k : n - 1 - k;
                    if (fibers[t].st == RUN) { pick = (int)t; break; }
                }
                if (pick < 0) break;
                resume(fibers[pick]);
                ran = true;
                if (fibers[pick].st == WARP && release_warp(n, fibers[pick].linear / 32) < 0) return false;
            }
        } else {
            const bool back = sched == 5 || (sched < 2 && (sched == 1) != (bool)(pass & 1));
            for (unsigned k = 0; k < n; ++k) seq[k] = back ? n - 1 - k : k;
            if (sched == 6) std::shuffle(seq.begin(), seq.end(), rng);
            for (unsigned t : seq) {
                if (fibers[t].st != RUN) continue;
                resume(fibers[t]);
                ran = true;
            }
        }
        cur = nullptr;
        bool released = false;
        for (unsigned w = 0; w * 32 < n; ++w) {
            const int r = release_warp(n, w);
            if (r < 0) return false;
            released = released || r > 0;
        }
        if (ran || released) continue;
        unsigned done = 0, bar = 0, warp = 0;
        for (unsigned t = 0; t < n; ++t) {
            done += fibers[t].st == DONE;
            bar += fibers[t].st == BAR;
            warp += fibers[t].st == WARP;
        }
        if (done == n) return true;
        if (bar > 0 && bar + done == n) {
            if (done > 0) {
                fail("block (%u,%u,%u): __syncthreads() reached by some threads of a block after %u of its %u "
                     "threads returned", block_idx.x, block_idx.y, block_idx.z, done, n);
                return false;
            }
            for (unsigned t = 0; t < n; ++t) fibers[t].st = RUN;
            continue;
        }
        for (unsigned t = 0; t < n; ++t)
            if (fibers[t].st == WARP) {
                fail("block (%u,%u,%u): deadlock: thread %u waits at the warp intrinsic on line %d (mask %08x) that "
                     "a lane never reaches; %u threads returned, %u wait at a barrier, %u at warp intrinsics",
                     block_idx.x, block_idx.y, block_idx.z, t, fibers[t].site, fibers[t].mask, done, bar, warp);
                return false;
            }
        fail("block (%u,%u,%u): deadlock", block_idx.x, block_idx.y, block_idx.z);
        return false;
    }
}

inline FILE* trace() { return stdout; }

template <class F>
inline void launch(const void* kernel, const char* name, long bound, F&& fn, dim3 g, dim3 b, size_t smem = 0,
                   cudaStream_t = nullptr) {
    ++launches;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    const char* why = nullptr;
    if (threads == 0 || g.x == 0 || g.y == 0 || g.z == 0) why = "empty_grid_or_block";
    else if (threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64) why = "block_too_large";
    else if (bound > 0 && threads > (unsigned long long)bound) why = "over_launch_bounds";
    else if (g.x > 2147483647u || g.y > 65535u || g.z > 65535u) why = "grid_too_large";
    else if (smem > SMEM_LIMIT) why = "dynamic_smem_over_227kb";
    else if (smem > 49152 && (!dyn_limit.count(kernel) || (size_t)dyn_limit[kernel] < smem))
        why = "dynamic_smem_over_48kb_without_opt_in";
    printf("EMU-LAUNCH %s %u %u %u %u %u %u %zu %s\n", name, g.x, g.y, g.z, b.x, b.y, b.z, smem, why ? why : "ok");
    if (why) {
        fail("launch of %s: %s (grid %ux%ux%u, block %ux%ux%u, __launch_bounds__ %ld, %zu bytes of dynamic shared "
             "memory)", name, why, g.x, g.y, g.z, b.x, b.y, b.z, bound, smem);
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (dry) return;
    body = fn;
    grid_dim = g;
    block_dim = b;
    dyn_size = smem;
    dyn_smem = (unsigned char*)malloc(smem ? smem : 1);  /* exactly its size: ASan sees a read past its end */
    const unsigned long long nb = (unsigned long long)g.x * g.y * g.z;
    const bool back = sched == 1 || sched == 3 || sched == 5;
    for (unsigned long long k = 0; k < nb; ++k) {
        const unsigned long long i = back ? nb - 1 - k : k;
        block_idx = uint3{(unsigned)(i % g.x), (unsigned)((i / g.x) % g.y),
                          (unsigned)(i / ((unsigned long long)g.x * g.y))};
        if (!run_block((unsigned)threads)) {
            fail("launch of %s abandoned", name);
            last_error = cudaErrorLaunchFailure;
            break;
        }
    }
    free(dyn_smem);
    dyn_smem = nullptr;
    dyn_size = 0;
}

inline void shared(void* p, size_t n) {
    if (shared_seen.insert(p).second) memset(p, 0xFF, n);
}
inline void* dynamic_shared() { return (void*)dyn_smem; }

inline uint64_t* warp_op(int site, int op, unsigned mask, uint64_t v) {
    if (!cur) { fail("line %d: a warp intrinsic outside a kernel", site); exit(76); }
    const unsigned lane = cur->linear % 32;
    if (!(mask >> lane & 1u)) fail("line %d: lane %u calls a warp intrinsic whose mask %08x leaves it out", site, lane, mask);
    cur->site = site;
    cur->op = op;
    cur->mask = mask;
    cur->val = v;
    cur->st = WARP;
    yield();
    return cur->snap;
}
template <class T> inline uint64_t bits(T v) {
    static_assert(sizeof(T) <= 8, "a warp exchange of a type wider than 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T> inline T from(uint64_t b) { T v; memcpy(&v, &b, sizeof(T)); return v; }
inline unsigned lane() { return cur->linear % 32; }
inline void check_src(int site, unsigned mask, unsigned src) {
    if (!(mask >> src & 1u)) fail("line %d: lane %u reads lane %u, outside the mask %08x", site, lane(), src, mask);
}
inline void check_width(int site, int width) {
    if (width < 1 || width > 32 || (width & (width - 1))) fail("line %d: shuffle width %d (a power of 2 up to 32)", site, width);
}
template <class T> struct same { typedef T type; };
}  // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)

inline void emu_syncthreads() {
    if (!emu::cur) { emu::fail("__syncthreads outside a kernel"); exit(76); }
    emu::cur->st = emu::BAR;
    emu::yield();
}
#define __syncthreads() emu_syncthreads()
#define __syncwarp(...) emu_syncwarp(__LINE__, ##__VA_ARGS__)
inline void emu_syncwarp(int site, unsigned mask = 0xffffffffu) { emu::warp_op(site, 0, mask, 0); }
inline void __threadfence() {}
inline void __threadfence_block() {}

/* shuffles: within segments of `width` lanes; a source outside the segment (down, up, xor) gives the lane's own value */
template <class T> inline T emu_shfl(int site, unsigned mask, T v, int src, int width = 32) {
    emu::check_width(site, width);
    uint64_t* s = emu::warp_op(site, 1, mask, emu::bits(v));
    const unsigned l = emu::lane() / width * width + ((unsigned)src & (unsigned)(width - 1));
    emu::check_src(site, mask, l);
    return emu::from<T>(s[l]);
}
template <class T> inline T emu_shfl_xor(int site, unsigned mask, T v, int lm, int width = 32) {
    emu::check_width(site, width);
    uint64_t* s = emu::warp_op(site, 2, mask, emu::bits(v));
    const unsigned me = emu::lane(), l = (me ^ (unsigned)lm) & 31u;
    if (l >= (me / width + 1) * width) return v;
    emu::check_src(site, mask, l);
    return emu::from<T>(s[l]);
}
template <class T> inline T emu_shfl_down(int site, unsigned mask, T v, unsigned d, int width = 32) {
    emu::check_width(site, width);
    uint64_t* s = emu::warp_op(site, 3, mask, emu::bits(v));
    const unsigned me = emu::lane(), l = me + d;
    if (l >= (me / width + 1) * width) return v;
    emu::check_src(site, mask, l);
    return emu::from<T>(s[l]);
}
template <class T> inline T emu_shfl_up(int site, unsigned mask, T v, unsigned d, int width = 32) {
    emu::check_width(site, width);
    uint64_t* s = emu::warp_op(site, 4, mask, emu::bits(v));
    const unsigned me = emu::lane();
    if (me < d || me - d < me / width * width) return v;
    const unsigned l = me - d;
    emu::check_src(site, mask, l);
    return emu::from<T>(s[l]);
}
inline unsigned emu_ballot(int site, unsigned mask, int pred) {
    uint64_t* s = emu::warp_op(site, 5, mask, pred != 0);
    unsigned r = 0;
    for (unsigned m = 0; m < 32; ++m)
        if ((mask >> m & 1u) && s[m]) r |= 1u << m;
    return r;
}
template <class T> inline unsigned emu_match_any(int site, unsigned mask, T v) {
    uint64_t* s = emu::warp_op(site, 6, mask, emu::bits(v));
    const uint64_t me = emu::bits(v);
    unsigned r = 0;
    for (unsigned m = 0; m < 32; ++m)
        if ((mask >> m & 1u) && s[m] == me) r |= 1u << m;
    return r;
}
#define __shfl_sync(...) emu_shfl(__LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) emu_shfl_xor(__LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) emu_shfl_down(__LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) emu_shfl_up(__LINE__, __VA_ARGS__)
#define __ballot_sync(...) emu_ballot(__LINE__, __VA_ARGS__)
#define __any_sync(m, p) (emu_ballot(__LINE__, m, p) != 0u)
#define __all_sync(m, p) (emu_ballot(__LINE__, m, p) == (m))
#define __match_any_sync(...) emu_match_any(__LINE__, __VA_ARGS__)

/* atomics: one host thread runs every CUDA thread, so a plain read-modify-write is atomic */
template <class T> inline T atomicAdd(T* p, typename emu::same<T>::type v) { const T o = *p; *p = o + v; return o; }
template <class T> inline T atomicSub(T* p, typename emu::same<T>::type v) { const T o = *p; *p = o - v; return o; }
template <class T> inline T atomicMax(T* p, typename emu::same<T>::type v) { const T o = *p; *p = o < v ? v : o; return o; }
template <class T> inline T atomicMin(T* p, typename emu::same<T>::type v) { const T o = *p; *p = v < o ? v : o; return o; }
template <class T> inline T atomicExch(T* p, typename emu::same<T>::type v) { const T o = *p; *p = v; return o; }
template <class T> inline T atomicOr(T* p, typename emu::same<T>::type v) { const T o = *p; *p = o | v; return o; }
template <class T> inline T atomicAnd(T* p, typename emu::same<T>::type v) { const T o = *p; *p = o & v; return o; }
template <class T> inline T atomicCAS(T* p, typename emu::same<T>::type c, typename emu::same<T>::type v) {
    const T o = *p;
    if (o == c) *p = v;
    return o;
}

/* device math and intrinsics: IEEE single precision on the host (x86-64 SSE, no contraction without -mfma) */
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float a) { return expf(a); }
inline float __logf(float a) { return logf(a); }
inline float __saturatef(float v) { return v < 0.f ? 0.f : (v > 1.f ? 1.f : v); }
inline float rsqrtf(float a) { return 1.f / sqrtf(a); }
inline int __float2int_rz(float a) { return (int)a; }
inline int __float2int_rd(float a) { return (int)floorf(a); }
template <class T> inline T __ldg(const T* p) { return *p; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }
inline int __ffsll(unsigned long long v) { return __builtin_ffsll((long long)v); }
inline int __clz(unsigned v) { return v ? __builtin_clz(v) : 32; }
inline int __clzll(unsigned long long v) { return v ? __builtin_clzll(v) : 64; }
inline unsigned __brev(unsigned v) { unsigned r = 0; for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1u) << (31 - i); return r; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
/* min and max: the integer ones over mixed types as CUDA's overloads convert, the floating ones as fminf / fmaxf */
template <class A, class B> inline auto min(A a, B b) -> decltype(a < b ? a : b) { return b < a ? b : a; }
template <class A, class B> inline auto max(A a, B b) -> decltype(a < b ? a : b) { return a < b ? b : a; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

/* cuda_fp16.h: the storage types and the conversions (round to nearest even) */
struct __attribute__((aligned(2))) __half { unsigned short __x; };
struct __attribute__((aligned(4))) __half2 { __half x, y; };
typedef __half half;
typedef __half2 half2;
namespace emu {
inline unsigned short f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return (unsigned short)(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (x >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  /* rounds to infinity */
    if (x >= 0x38800000u) {                                          /* a normal half */
        const uint32_t r = (x + 0x0fffu + ((x >> 13) & 1u)) >> 13;
        return (unsigned short)(sign | (r - (112u << 10)));
    }
    if (x <= 0x33000000u) return (unsigned short)sign;               /* at most half the smallest subnormal */
    const uint32_t e = x >> 23, mant = (x & 0x7fffffu) | 0x800000u, s = 126u - e;
    uint32_t q = mant >> s;
    const uint32_t rem = mant & ((1u << s) - 1u), halfway = 1u << (s - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    return (unsigned short)(sign | q);
}
inline float h2f(unsigned short h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t x;
    if (e == 0x1fu) x = sign | 0x7f800000u | (m << 13);
    else if (e != 0) x = sign | ((e + 112u) << 23) | (m << 13);
    else if (m == 0) x = sign;
    else {
        float v = ldexpf((float)m, -24);
        memcpy(&x, &v, 4);
        x |= sign;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}
}  // namespace emu
inline __half __float2half_rn(float f) { __half h; h.__x = emu::f2h(f); return h; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float __half2float(__half h) { return emu::h2f(h.__x); }
inline __half2 __halves2half2(__half a, __half b) { __half2 r; r.x = a; r.y = b; return r; }
inline __half2 __floats2half2_rn(float a, float b) { return __halves2half2(__float2half_rn(a), __float2half_rn(b)); }
inline __half2 __float22half2_rn(float2 v) { return __floats2half2_rn(v.x, v.y); }
inline __half2 __float2half2_rn(float a) { return __floats2half2_rn(a, a); }
inline float2 __half22float2(__half2 h) { return make_float2(__half2float(h.x), __half2float(h.y)); }
inline float __low2float(__half2 h) { return __half2float(h.x); }
inline float __high2float(__half2 h) { return __half2float(h.y); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { __half h; h.__x = u; return h; }

/* the runtime API the variants call */
inline cudaError_t cudaGetLastError() { const cudaError_t e = emu::last_error; emu::last_error = cudaSuccess; return e; }
inline cudaError_t cudaPeekAtLastError() { return emu::last_error; }
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }
template <class T> inline cudaError_t cudaMalloc(T** p, size_t n) { *p = (T*)emu::alloc(n, 0xFF); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
template <class T> inline cudaError_t cudaMallocAsync(T** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
inline cudaError_t cudaFree(void* p) { emu::release(p); return cudaSuccess; }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { emu::release(p); return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t = nullptr) {
    if (emu::dry) return cudaSuccess;
    if (!emu::inside(p, n)) { emu::fail("cudaMemset of %zu bytes outside an allocation", n); return cudaErrorInvalidValue; }
    memset(p, v, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) { return cudaMemsetAsync(p, v, n); }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t = nullptr) {
    if (emu::dry) return cudaSuccess;
    if (!emu::inside(d, n) || !emu::inside(s, n)) { emu::fail("cudaMemcpy of %zu bytes outside an allocation", n); return cudaErrorInvalidValue; }
    memmove(d, s, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind k) { return cudaMemcpyAsync(d, s, n, k); }
template <class T> inline cudaError_t cudaMemcpyToSymbolAsync(T& sym, const void* src, size_t n, size_t off = 0,
                                                              cudaMemcpyKind = cudaMemcpyHostToDevice,
                                                              cudaStream_t = nullptr) {
    if (off + n > sizeof(T)) return cudaErrorInvalidValue;
    if (!emu::dry) memcpy((char*)&sym + off, src, n);
    return cudaSuccess;
}
template <class T> inline cudaError_t cudaMemcpyToSymbol(T& sym, const void* src, size_t n, size_t off = 0,
                                                         cudaMemcpyKind k = cudaMemcpyHostToDevice) {
    return cudaMemcpyToSymbolAsync(sym, src, n, off, k);
}
template <class T> inline cudaError_t cudaFuncSetAttribute(T* fn, cudaFuncAttribute a, int v) {
    if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (v < 0 || (size_t)v > emu::SMEM_LIMIT) return cudaErrorInvalidValue;
        emu::dyn_limit[(const void*)fn] = v;
    }
    return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
    switch (a) {
        case cudaDevAttrMultiProcessorCount: *v = 132; break;
        case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: *v = 49152; break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)emu::SMEM_LIMIT; break;
        default: return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
#endif
"""

DRIVER = r"""
/* the emulation's driver: a job (argv[1]) of tensors in, outputs and a report out (argv[2]) */
typedef int (*EmuEntry)(const TensorArg*, int, TensorArg*, int, cudaStream_t);
static const EmuEntry emu_entries[] = {%(entries)s};

static size_t emu_esize(int dt) {
    static const size_t sz[] = {4, 2, 2, 8, 4, 8, 1, 1, 1};
    return dt >= 0 && dt < 9 ? sz[dt] : 0;
}
static void emu_read(FILE* f, void* p, size_t n) {
    if (n && fread(p, 1, n, f) != n) { fprintf(stderr, "EMU: short input file\n"); exit(70); }
}
int main(int argc, char** argv) {
    if (argc != 3) return 64;
    FILE* f = ::fopen(argv[1], "rb");
    if (!f) return 66;
    int hdr[7];
    emu_read(f, hdr, sizeof hdr);
    const int n_in = hdr[0], n_out = hdr[1], unit = hdr[4];
    const bool with_data = hdr[2] != 0, misalign = hdr[5] != 0;
    emu::dry = !with_data;
    emu::sched = hdr[3];
    emu::rng.seed((unsigned)hdr[6]);
    if (unit < 0 || unit >= (int)(sizeof emu_entries / sizeof emu_entries[0])) return 65;
    std::vector<TensorArg> ins(n_in > 0 ? n_in : 1), outs(n_out > 0 ? n_out : 1);
    std::vector<std::vector<unsigned char>> copies(n_in);
    for (int k = 0; k < n_in + n_out; ++k) {
        TensorArg& t = k < n_in ? ins[k] : outs[k - n_in];
        memset(&t, 0, sizeof t);
        int d[2];
        emu_read(f, d, sizeof d);
        t.dtype = d[0];
        t.ndim = d[1];
        t.numel = 1;
        emu_read(f, t.shape, sizeof(int64_t) * t.ndim);
        for (int i = t.ndim - 1; i >= 0; --i) t.strides[i] = i == t.ndim - 1 ? 1 : t.strides[i + 1] * t.shape[i + 1];
        for (int i = 0; i < t.ndim; ++i) t.numel *= t.shape[i];
        const size_t bytes = (size_t)t.numel * emu_esize(t.dtype);
        t.data = emu::alloc(bytes, 0xFF, misalign ? 4 : 0);
        if (k < n_in && with_data) {
            emu_read(f, t.data, bytes);
            copies[k].assign((unsigned char*)t.data, (unsigned char*)t.data + bytes);
        }
    }
    fclose(f);
    const int rc = emu_entries[unit](ins.data(), n_in, outs.data(), n_out, nullptr);
    int modified = 0, guards = 0;
    if (with_data) {
        for (int k = 0; k < n_in; ++k) {
            const size_t bytes = (size_t)ins[k].numel * emu_esize(ins[k].dtype);
            if (bytes && memcmp(ins[k].data, copies[k].data(), bytes) != 0) modified |= 1 << k;
            if (!emu::guards_ok(ins[k].data)) guards |= 1 << k;
        }
        for (int k = 0; k < n_out; ++k)
            if (!emu::guards_ok(outs[k].data)) guards |= 1 << (16 + k);
    }
    const int leaked = (int)emu::allocs.size() - (with_data ? n_in + n_out : 0);
    FILE* o = ::fopen(argv[2], "wb");
    if (!o) return 73;
    const int rep[6] = {rc, emu::failed, modified, guards, leaked, (int)emu::launches};
    fwrite(rep, sizeof rep, 1, o);
    if (with_data)
        for (int k = 0; k < n_out; ++k) fwrite(outs[k].data, 1, (size_t)outs[k].numel * emu_esize(outs[k].dtype), o);
    fclose(o);
    return 0;
}
"""

SCHEDULES = ("round_robin", "round_robin_reversed", "lowest_first", "highest_first", "forward", "reverse", "random")
"""How a block's threads take turns between barriers and warp intrinsics: round robin in thread order, then reversed
on alternate passes (or starting reversed, the blocks in reverse order too); always the lowest (highest) numbered
thread that can run, so that one warp runs ahead of the others as far as the barriers let it (the blocks reversed for
the highest); thread order at every pass; reverse thread order at every pass (the blocks reversed); a random order
at every pass (``seed``)."""

_NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int32": np.int32,
                 "int64": np.int64, "bool": np.bool_, "int8": np.int8, "uint8": np.uint8}

_TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)
_EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([\w\s:*]+?)\s+"
                            r"(?:__align__\s*\(\s*\d+\s*\)\s*)?(\w+)\s*\[\s*\]\s*;")
_SHARED = re.compile(r"(?<!\w)__shared__\s+([^;]*);")
_ALIGN = re.compile(r"__align__\s*\(\s*(\d+)\s*\)\s*")
_KERNEL_NAME = re.compile(r"(\w+)\s*$")
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[^\n]*\n?", re.M)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """The index just past the bracket that closes the one at ``text[start]``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError(f"unbalanced {open_}{close} from offset {start}")


def _split_top(text: str, angle: bool = False) -> list[str]:
    """``text`` split at the commas outside brackets (and outside ``<>`` when ``angle``)."""
    opens, closes = ("([{<", ")]}>") if angle else ("([{", ")]}")
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _without_comments(code: str) -> str:
    return _TOKEN.sub(lambda m: m.group(0) if m.group(0).startswith('"') else re.sub(r"[^\n]", " ", m.group(0)), code)


def launch_bounds(code: str) -> dict[str, tuple[tuple[str, ...], str]]:
    """Kernel name -> (its template parameters' names, the expression of the thread count its ``__launch_bounds__``
    allows)."""
    src = _without_comments(code)
    out = {}
    for m in re.finditer(r"__launch_bounds__\s*\(", src):
        if "#define" in src[src.rfind("\n", 0, m.start()) + 1:m.start()]:
            continue
        close = _matching(src, m.end() - 1, "(", ")")
        expr = _split_top(src[m.end():close - 1])[0]
        name = re.match(r"\s*(?:void\s+)?(\w+)\s*\(", src[close:])
        if not name:
            continue
        head = src[:m.start()]
        tm = re.search(r"template\s*<([^<>]*)>\s*(?:__global__\s+)?(?:void\s+)?(?:__global__\s+)?$", head)
        params = tuple(re.findall(r"(?:int|unsigned|bool|long|size_t)\s+(\w+)", tm.group(1))) if tm else ()
        out[name.group(1)] = (params, expr)
    return out


def bound_of(code: str, launched: str) -> int | None:
    """The ``__launch_bounds__`` thread count of the kernel launched as ``launched`` (``name`` or ``name<args>``, the
    template arguments integer literals), or None where it declares none or it is not plain arithmetic here (the
    emulator itself evaluates it in C++, where the unit's constants are known)."""
    base, _, args = launched.partition("<")
    decl = launch_bounds(code).get(base)
    if decl is None:
        return None
    text = _bound_expr(decl, args.rstrip(">") if args else "")
    if text is None or not re.fullmatch(r"[\d\s()+*/-]+", text):
        return None
    return int(eval(text, {"__builtins__": {}}))  # digits and arithmetic only


def _bound_expr(decl: tuple[tuple[str, ...], str], args: str) -> str | None:
    """The bound's expression with the launch's template arguments in place of the kernel's parameters (None where
    a parameter has no argument)."""
    names, expr = decl
    values = _split_top(args, angle=True) if args else []
    env = dict(zip(names, values))
    if len(values) < len(names) and any(re.search(rf"\b{n}\b", expr) for n in names[len(values):]):
        return None
    return re.sub(r"\b\w+\b", lambda t: f"({env[t.group(0)]})" if t.group(0) in env else t.group(0), expr)


def translate(code: str) -> str:
    """``code`` (a fast-path translation unit) rewritten for the emulation: shared memory declarations registered
    (poisoned at each block's first use), dynamic shared memory from the launch's buffer, launches as calls of
    ``emu::launch`` with the kernel's ``__launch_bounds__`` evaluated there."""
    src = _without_comments(code)
    bounds = launch_bounds(src)
    src = _EXTERN_SHARED.sub(lambda m: f"{m.group(1)}* {m.group(2)} = ({m.group(1)}*)emu::dynamic_shared();", src)

    def shared(m: re.Match) -> str:
        decl = m.group(1).strip()
        align = ""
        am = _ALIGN.match(decl)
        if am:
            align, decl = f"__attribute__((aligned({am.group(1)}))) ", decl[am.end():]
        tm = re.match(r"((?:const\s+|volatile\s+)*(?:unsigned\s+|signed\s+)?(?:long\s+long|[\w:]+)(?:\s*\*+)?)\s+"
                      r"(?:__align__\s*\(\s*(\d+)\s*\)\s*)?(.*)$", decl, re.S)
        if not tm:
            raise ValueError(f"cannot read the shared declaration {decl!r}")
        if tm.group(2):
            align = f"__attribute__((aligned({tm.group(2)}))) "
        names = [re.match(r"\s*\**\s*(\w+)", d).group(1) for d in _split_top(tm.group(3))]
        return (f"static {align}{tm.group(1)} {tm.group(3)}; "
                + " ".join(f"emu::shared(&{n}, sizeof({n}));" for n in names))

    src = _SHARED.sub(shared, src)
    out, pos = [], 0
    while True:
        k = src.find("<<<", pos)
        if k < 0:
            out.append(src[pos:])
            break
        j = k  # the kernel expression before <<<: a name, perhaps with template arguments
        while src[j - 1].isspace():
            j -= 1
        end = j
        targs = ""
        if src[j - 1] == ">":
            depth = 0
            while True:
                j -= 1
                if src[j] == ">":
                    depth += 1
                elif src[j] == "<":
                    depth -= 1
                    if depth == 0:
                        break
            targs = src[j + 1:end - 1]
        m = _KERNEL_NAME.search(src[:j])
        start = m.start(1)
        kexpr = src[start:end].strip()
        name = m.group(1)
        cfg_end = src.find(">>>", k)
        cfg = _split_top(src[k + 3:cfg_end])
        if not 2 <= len(cfg) <= 4:
            raise ValueError(f"launch of {kexpr}: {len(cfg)} configuration arguments")
        a = cfg_end + 3
        while src[a].isspace():
            a += 1
        if src[a] != "(":
            raise ValueError(f"a launch of {kexpr} without arguments")
        b = _matching(src, a, "(", ")")
        args = src[a + 1:b - 1]
        bound = _bound_expr(bounds[name], targs) if name in bounds else None
        label = re.sub(r"\s+", "", kexpr)
        out.append(src[pos:start])
        out.append(f"emu::launch(reinterpret_cast<const void*>(&{kexpr}), \"{label}\", (long)({bound or 0}), "
                   f"[=]() {{ {kexpr}({args}); }}, {', '.join(cfg)})")
        pos = b
    return "".join(out)


def program(codes: list[str]) -> str:
    """One C++ program of ``codes`` (unit ``k`` in namespace ``unit_k``, its macros undefined after it) and the
    driver."""
    includes, parts = [], []
    for k, code in enumerate(codes):
        body = translate(code)
        includes += [m.group(0).strip() for m in _INCLUDE.finditer(body) if m.group(0).strip() not in includes]
        body = _INCLUDE.sub("", body)
        body = re.sub(r'extern\s+"C"\s+int\s+kernel_forward', "int kernel_forward", body)
        undef = "".join(f"#undef {n}\n" for n in dict.fromkeys(_DEFINE.findall(body)))
        parts.append(f"namespace unit_{k} {{\n{body}\n}}  // namespace unit_{k}\n{undef}")
    entries = ", ".join(f"unit_{k}::kernel_forward" for k in range(len(codes)))
    head = f'#include "cuda_runtime.h"\n#include "cuda_fp16.h"\n#include "{HEADER_NAME}"\n' + "\n".join(includes)
    return head + "\n" + "\n".join(parts) + DRIVER % {"entries": entries}


_BUILD_DIR = Path(tempfile.gettempdir()) / f"cudaperf_cpu_emu_{os.getuid()}"
FLAGS = ("-std=c++17", "-O1", "-w", "-fno-strict-aliasing")
SANITIZE_FLAGS = ("-std=c++17", "-O1", "-g", "-w", "-fno-strict-aliasing", "-fsanitize=address,undefined",
                  "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")


def build(code: str | list[str], *, sanitize: bool = False) -> Path:
    """An executable of ``code`` (one unit, or a list of units run by index) under the emulation, cached by content;
    ``sanitize``: under ASan and UBSan (slower to build and run; reads past a tensor, misaligned vector accesses)."""
    codes = [code] if isinstance(code, str) else list(code)
    src = program(codes)
    flags = SANITIZE_FLAGS if sanitize else FLAGS
    header = HEADER.replace("int kernel_forward(", "int emu_declared_kernel_forward(")
    key = hashlib.sha256("\0".join([EMU_HEADER, header, src, " ".join(flags)]).encode()).hexdigest()[:24]
    exe = _BUILD_DIR / f"emu_{key}"
    if exe.exists():
        return exe
    _BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=_BUILD_DIR) as work:
        d = Path(work)
        (d / "cuda_runtime.h").write_text(EMU_HEADER)
        (d / "cuda_fp16.h").write_text('#pragma once\n#include "cuda_runtime.h"\n')
        (d / HEADER_NAME).write_text(header)
        (d / "unit.cpp").write_text(src)
        r = subprocess.run(["g++", *flags, "-I", str(d), "unit.cpp", "-o", "emu"], cwd=d, capture_output=True,
                           text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"g++ failed on the emulated unit:\n{r.stderr[-4000:]}")
        os.replace(d / "emu", exe)
    return exe


@dataclass
class EmuResult:
    rc: int | None
    """kernel_forward's return value (None when the program died first: see ``errors``)."""
    errors: list[str]
    """The emulation's complaints and the sanitizers' reports, empty when none."""
    inputs_modified: int = 0
    """A bit per input whose contents changed."""
    guards_broken: int = 0
    """A bit per input (bit k) or output (bit 16 + k) written past either end."""
    leaked: int = 0
    """Scratch buffers never freed."""
    launches: list[dict] = field(default_factory=list)
    """Every launch: name (with its template arguments), grid, block, smem, status ("ok" or why it was refused)."""
    outputs: list = field(default_factory=list)
    """The outputs as numpy arrays (none when dry or when the program died)."""
    log: str = ""

    @property
    def clean(self) -> bool:
        return (self.rc == 0 and not self.errors and not self.inputs_modified and not self.guards_broken
                and self.leaked == 0)


def _spec(x) -> tuple[tuple[int, ...], str]:
    """(shape, dtype name) of a torch tensor (any device, ``meta`` included), a numpy array, or a (shape, dtype)
    pair (the dtype a name, a numpy dtype or a torch dtype)."""
    if isinstance(x, tuple) and len(x) == 2 and not isinstance(x[1], (int, np.integer)):
        shape, dtype = x
    else:
        shape, dtype = x.shape, x.dtype
    name = str(dtype).removeprefix("torch.")
    name = {"float": "float32", "half": "float16", "double": "float64", "long": "int64", "int": "int32"}.get(name, name)
    return tuple(int(n) for n in shape), name


def run(exe: Path, inputs, out_specs, *, unit: int = 0, dry: bool = False, schedule: str = "round_robin",
        misalign: bool = False, seed: int = 0, timeout: float = 600) -> EmuResult:
    """Call ``kernel_forward`` of unit ``unit`` of ``exe`` on ``inputs`` (torch tensors or numpy arrays, contiguous)
    with outputs of ``out_specs`` ((shape, dtype) pairs, filled with 0xFF bytes). ``dry``: the inputs' contents are
    not passed and no kernel runs (only shapes and dtypes matter: ``meta`` tensors or (shape, dtype) pairs will do);
    ``schedule``: one of :data:`SCHEDULES` (``seed`` for ``random``); ``misalign``: every tensor 4 bytes past a
    256-byte boundary."""
    blob = [struct.pack("<7i", len(inputs), len(out_specs), 0 if dry else 1, SCHEDULES.index(schedule), unit,
                        int(misalign), seed)]
    for x in inputs:
        shape, dtype = _spec(x)
        blob.append(struct.pack(f"<2i{len(shape)}q", DTYPES.index(dtype), len(shape), *shape))
        if not dry:
            a = np.ascontiguousarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
            if a.dtype != _NUMPY_DTYPES[dtype] or a.shape != shape:
                raise ValueError(f"an input of {a.dtype} {a.shape}, described as {dtype} {shape}")
            blob.append(a.tobytes())
    specs = [_spec(s) for s in out_specs]
    for shape, dtype in specs:
        blob.append(struct.pack(f"<2i{len(shape)}q", DTYPES.index(dtype), len(shape), *shape))
    with tempfile.TemporaryDirectory(prefix="emu_run_") as t:
        fin, fout = Path(t) / "in.bin", Path(t) / "out.bin"
        fin.write_bytes(b"".join(blob))
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:detect_stack_use_after_return=0",
                   UBSAN_OPTIONS="print_stacktrace=1")
        r = subprocess.run([str(exe), str(fin), str(fout)], capture_output=True, text=True, env=env, timeout=timeout)
        data = fout.read_bytes() if fout.exists() and r.returncode == 0 else b""
    stderr = "\n".join(line for line in r.stderr.splitlines() if "fully support makecontext/swapcontext" not in line)
    errors = [line.removeprefix("EMU ERROR: ") for line in stderr.splitlines() if line.startswith("EMU ERROR: ")]
    found = [stderr.find(m) for m in ("ERROR: AddressSanitizer", "runtime error:") if m in stderr]
    if found:  # the sanitizer's report, from its first line
        errors.append(stderr[max(0, min(found) - 300):min(found) + 3000])
    if r.returncode != 0 and not found:
        errors.append(f"exit status {r.returncode}: {stderr[-3000:]}")
    launches = []
    for line in r.stdout.splitlines():
        if line.startswith("EMU-LAUNCH "):
            w = line.split()
            launches.append({"name": w[1], "grid": tuple(map(int, w[2:5])), "block": tuple(map(int, w[5:8])),
                             "smem": int(w[8]), "status": w[9]})
    res = EmuResult(None, errors, launches=launches, log=r.stdout[-2000:] + stderr[-4000:])
    if len(data) < 24:
        return res
    res.rc, _failed, res.inputs_modified, res.guards_broken, res.leaked, _n = struct.unpack("<6i", data[:24])
    off = 24
    if not dry:
        for shape, dtype in specs:
            nt = np.dtype(_NUMPY_DTYPES[dtype])
            n = int(np.prod(shape, dtype=np.int64))
            res.outputs.append(np.frombuffer(data, dtype=nt, count=n, offset=off).reshape(shape).copy())
            off += n * nt.itemsize
    return res
