"""Run a fast-path variant's own CUDA source on the CPU, to check its indexing and synchronisation where no GPU is.

The translation unit is compiled by g++ against a small emulation of the CUDA subset the dataset's variants use
(:data:`EMU_HEADER`, installed as ``cuda_runtime.h``): a launch runs its blocks one after another and each block's
threads as cooperative fibers (``ucontext``). A thread runs until it reaches ``__syncthreads`` or a warp
intrinsic; a barrier opens once every thread of the block waits at it, a warp intrinsic once every lane its mask
names waits at the same call, so shuffles, ballots and ``__match_any_sync`` exchange real values. What it checks
beyond the outputs:

- shared memory (static and dynamic), scratch from ``cudaMalloc*`` and the outputs start as 0xFF bytes (NaN, -1):
  a read before a write shows; the threads of a block take turns in one of several orders (:data:`SCHEDULES`),
  so a missing barrier between writing and reading shared memory, or before shared memory is written again,
  shows as a poisoned or overwritten read in one order or another;
- a barrier some threads of the block never reach (they returned), a warp intrinsic whose mask names a lane that
  is gone or waits elsewhere, a lane reading a lane outside the mask: errors;
- launch limits: block size (and a kernel's ``__launch_bounds__``), ``gridDim.x < 2^31``, ``gridDim.y/z <= 65535``,
  dynamic shared memory over 48 KB only after ``cudaFuncSetAttribute`` raised the kernel's limit (at most 227 KB);
- every device buffer has guard zones: a write past either end is reported; the inputs must come back unchanged.

``dry=True`` runs only the host code: launches are checked against the limits but not run, and no memory is
touched, so a variant's launch configuration can be checked at the problem's full size.

What it cannot show: races between threads outside barriers and warp intrinsics (a plain ``+=`` where an atomic
is needed runs correctly here), and anything about speed.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cudaperf.harness.torch_fast import DTYPES, HEADER, HEADER_NAME

EMU_HEADER = r"""
#ifndef CUDAPERF_CPU_EMU_H
#define CUDAPERF_CPU_EMU_H
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <ucontext.h>
#include <functional>
#include <map>
#include <set>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __noinline__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define warpSize 32

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(4) uchar4 { unsigned char x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) longlong2 { long long x, y; };
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
inline float2 make_float2(float a, float b) { return float2{a, b}; }
inline int4 make_int4(int a, int b, int c, int d) { return int4{a, b, c, d}; }

typedef struct CUstream_st* cudaStream_t;
enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
                 cudaErrorInvalidConfiguration = 9, cudaErrorLaunchFailure = 719 };
typedef enum cudaError cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMaxSharedMemoryPerBlock = 8,
                      cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };

namespace emu {
enum State { RUN, BAR, WARP, DONE };
struct Fiber {
    ucontext_t ctx;
    uint3 tid;
    unsigned linear;
    State st;
    int site, op;
    unsigned mask;
    uint64_t val;
    uint64_t snap[32];
};
constexpr size_t STACK = 128 * 1024;
constexpr size_t GUARD = 256;
inline ucontext_t main_ctx;
inline Fiber* cur = nullptr;
inline std::vector<Fiber> fibers;
inline std::vector<char*> stacks;
inline uint3 block_idx;
inline dim3 block_dim, grid_dim;
inline std::function<void()> body;
inline std::set<void*> shared_seen;
inline std::vector<unsigned char> dyn_smem;
inline int failed = 0;
inline cudaError_t last_error = cudaSuccess;
inline bool dry = getenv("EMU_DRY") != nullptr;
inline std::map<const void*, int> dyn_limit;
inline std::map<void*, size_t> allocs;  /* user pointer -> size */
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

inline void* alloc(size_t n, int fill) {
    if (dry) {
        void* p = (void*)fake_next;
        fake_next += ((n + 4095) / 4096 + 1) * 4096;
        return p;
    }
    unsigned char* raw = (unsigned char*)aligned_alloc(256, ((n + 2 * GUARD + 255) / 256) * 256);
    if (!raw) return nullptr;
    memset(raw, 0xA5, GUARD);
    memset(raw + GUARD, fill, n);
    memset(raw + GUARD + n, 0xA5, GUARD);
    allocs[raw + GUARD] = n;
    return raw + GUARD;
}
inline bool guards_ok(void* p, size_t n) {
    const unsigned char* u = (const unsigned char*)p;
    for (size_t i = 1; i <= GUARD; ++i)
        if (u[-(long)i] != 0xA5 || u[n + i - 1] != 0xA5) return false;
    return true;
}
inline void release(void* p) {
    if (dry || !p) return;
    auto it = allocs.find(p);
    if (it == allocs.end()) { fail("free of a pointer that was not allocated"); return; }
    if (!guards_ok(p, it->second)) fail("a write past the ends of a %zu-byte scratch buffer", it->second);
    allocs.erase(it);
    free((unsigned char*)p - GUARD);
}
inline bool inside(const void* p, size_t n) {  /* [p, p + n) within one allocation */
    if (dry) return true;
    auto it = allocs.upper_bound((void*)p);
    if (it == allocs.begin()) return false;
    --it;
    const unsigned char* b = (const unsigned char*)it->first;
    return (const unsigned char*)p >= b && (const unsigned char*)p + n <= b + it->second;
}

inline void yield() { swapcontext(&cur->ctx, &main_ctx); }
inline void trampoline() {
    body();
    cur->st = DONE;
}

/* the lanes of warp w whose warp intrinsic every lane of its mask has reached: results handed out, lanes run */
inline int release_warp(unsigned n, unsigned w) {
    const unsigned lo = w * 32, cnt = n - lo < 32 ? n - lo : 32;
    int released = 0;
    for (unsigned l = 0; l < cnt; ++l) {
        Fiber& f = fibers[lo + l];
        if (f.st != WARP) continue;
        bool all = true;
        for (unsigned m = 0; m < 32 && all; ++m) {
            if (!(f.mask >> m & 1u)) continue;
            if (m >= cnt) { all = false; break; }
            const Fiber& g = fibers[lo + m];
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

/* Schedules: 0 round robin, thread order then reverse on alternate passes; 1 the same starting reversed;
   2 always the lowest-numbered runnable thread (a warp runs ahead as far as the barriers let it); 3 the highest */
inline int sched = getenv("EMU_SCHED") ? atoi(getenv("EMU_SCHED")) : 0;

inline bool run_block(unsigned n) {
    if (fibers.size() < n) fibers.resize(n);
    while (stacks.size() < n) stacks.push_back((char*)malloc(STACK));
    for (unsigned t = 0; t < n; ++t) {
        Fiber& f = fibers[t];
        f.tid = uint3{t % block_dim.x, (t / block_dim.x) % block_dim.y, t / (block_dim.x * block_dim.y)};
        f.linear = t;
        f.st = RUN;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stacks[t];
        f.ctx.uc_stack.ss_size = STACK;
        f.ctx.uc_link = &main_ctx;
        makecontext(&f.ctx, trampoline, 0);
    }
    shared_seen.clear();
    if (!dyn_smem.empty()) memset(dyn_smem.data(), 0xFF, dyn_smem.size());
    for (unsigned pass = 0;; ++pass) {
        bool ran = false;
        if (sched >= 2) {  /* greedy: one thread at a time, the lowest (highest) runnable */
            for (;;) {
                int pick = -1;
                for (unsigned k = 0; k < n; ++k) {
                    const unsigned t = sched == 2 ? k : n - 1 - k;
                    if (fibers[t].st == RUN) { pick = (int)t; break; }
                }
                if (pick < 0) break;
                cur = &fibers[pick];
                swapcontext(&main_ctx, &cur->ctx);
                ran = true;
                if (cur->st == WARP && release_warp(n, cur->linear / 32) < 0) return false;
            }
        } else {
            const bool back = (sched == 1) != (bool)(pass & 1);
            for (unsigned k = 0; k < n; ++k) {
                Fiber& f = fibers[back ? n - 1 - k : k];
                if (f.st != RUN) continue;
                cur = &f;
                swapcontext(&main_ctx, &f.ctx);
                ran = true;
            }
        }
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
                fail("block (%u,%u,%u): __syncthreads reached while %u of its %u threads have returned",
                     block_idx.x, block_idx.y, block_idx.z, done, n);
                return false;
            }
            for (unsigned t = 0; t < n; ++t) fibers[t].st = RUN;
            continue;
        }
        for (unsigned t = 0; t < n; ++t)
            if (fibers[t].st == WARP) {
                fail("block (%u,%u,%u): deadlock: thread %u waits at the warp intrinsic on line %d (mask %08x); "
                     "%u threads returned, %u wait at a barrier, %u at warp intrinsics", block_idx.x, block_idx.y,
                     block_idx.z, t, fibers[t].site, fibers[t].mask, done, bar, warp);
                return false;
            }
        fail("block (%u,%u,%u): deadlock", block_idx.x, block_idx.y, block_idx.z);
        return false;
    }
}

template <class F>
inline void launch(const void* kernel, const char* name, long bound, F&& fn, dim3 g, dim3 b, size_t smem = 0,
                   cudaStream_t = nullptr) {
    ++launches;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    const char* why = nullptr;
    if (threads == 0 || threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64) why = "block size";
    else if (bound > 0 && threads > (unsigned long long)bound) why = "more threads than __launch_bounds__";
    else if (g.x == 0 || g.y == 0 || g.z == 0) why = "an empty grid";
    else if (g.x > 2147483647u || g.y > 65535u || g.z > 65535u) why = "grid size";
    else if (smem > 232448 || (smem > 49152 && (!dyn_limit.count(kernel) || (size_t)dyn_limit[kernel] < smem)))
        why = "dynamic shared memory over 48 KB without cudaFuncSetAttribute (or over 227 KB)";
    if (why) {
        fail("launch of %s: %s (grid %u,%u,%u block %u,%u,%u, %zu bytes of dynamic shared memory)", name, why, g.x,
             g.y, g.z, b.x, b.y, b.z, smem);
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (dry) return;
    body = fn;
    grid_dim = g;
    block_dim = b;
    dyn_smem.assign(smem, 0xFF);
    const unsigned long long nb = (unsigned long long)g.x * g.y * g.z;
    for (unsigned long long k = 0; k < nb; ++k) {
        const unsigned long long i = sched % 2 ? nb - 1 - k : k;
        block_idx = uint3{(unsigned)(i % g.x), (unsigned)((i / g.x) % g.y), (unsigned)(i / ((unsigned long long)g.x * g.y))};
        if (!run_block((unsigned)threads)) {
            fail("launch of %s abandoned", name);
            last_error = cudaErrorLaunchFailure;
            return;
        }
    }
}

inline void shared(void* p, size_t n) {
    if (shared_seen.insert(p).second) memset(p, 0xFF, n);
}
inline void* dynamic_shared() { return dyn_smem.empty() ? nullptr : (void*)dyn_smem.data(); }

inline uint64_t* warp_op(int site, int op, unsigned mask, uint64_t v) {
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
template <class T> inline uint64_t bits(T v) { uint64_t b = 0; memcpy(&b, &v, sizeof(T)); return b; }
template <class T> inline T from(uint64_t b) { T v; memcpy(&v, &b, sizeof(T)); return v; }
inline unsigned lane() { return cur->linear % 32; }
inline void check_src(int site, unsigned mask, unsigned src) {
    if (!(mask >> src & 1u)) fail("line %d: lane %u reads lane %u, outside the mask %08x", site, lane(), src, mask);
}
}  // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)

inline void emu_syncthreads() { emu::cur->st = emu::BAR; emu::yield(); }
#define __syncthreads() emu_syncthreads()
#define __syncwarp(...) emu_syncwarp(__LINE__, ##__VA_ARGS__)
inline void emu_syncwarp(int site, unsigned mask = 0xffffffffu) { emu::warp_op(site, 0, mask, 0); }
inline void __threadfence() {}
inline void __threadfence_block() {}

template <class T> inline T emu_shfl(int site, unsigned mask, T v, int src, int width = 32) {
    if (width != 32) emu::fail("line %d: shuffle width %d (the emulation knows 32)", site, width);
    uint64_t* s = emu::warp_op(site, 1, mask, emu::bits(v));
    const unsigned l = (unsigned)src & 31u;
    emu::check_src(site, mask, l);
    return emu::from<T>(s[l]);
}
template <class T> inline T emu_shfl_xor(int site, unsigned mask, T v, int lm, int width = 32) {
    if (width != 32) emu::fail("line %d: shuffle width %d (the emulation knows 32)", site, width);
    uint64_t* s = emu::warp_op(site, 2, mask, emu::bits(v));
    const unsigned l = (emu::lane() ^ (unsigned)lm) & 31u;
    emu::check_src(site, mask, l);
    return emu::from<T>(s[l]);
}
template <class T> inline T emu_shfl_down(int site, unsigned mask, T v, unsigned d, int width = 32) {
    if (width != 32) emu::fail("line %d: shuffle width %d (the emulation knows 32)", site, width);
    uint64_t* s = emu::warp_op(site, 3, mask, emu::bits(v));
    const unsigned l = emu::lane() + d;
    if (l > 31) return v;
    emu::check_src(site, mask, l);
    return emu::from<T>(s[l]);
}
template <class T> inline T emu_shfl_up(int site, unsigned mask, T v, unsigned d, int width = 32) {
    if (width != 32) emu::fail("line %d: shuffle width %d (the emulation knows 32)", site, width);
    uint64_t* s = emu::warp_op(site, 4, mask, emu::bits(v));
    if (emu::lane() < d) return v;
    const unsigned l = emu::lane() - d;
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
#define EMU_ATOMIC2(NAME, T, EXPR) inline T NAME(T* p, T v) { const T o = *p; *p = (EXPR); return o; }
EMU_ATOMIC2(atomicAdd, float, o + v)
EMU_ATOMIC2(atomicAdd, double, o + v)
EMU_ATOMIC2(atomicAdd, int, o + v)
EMU_ATOMIC2(atomicAdd, unsigned, o + v)
EMU_ATOMIC2(atomicAdd, unsigned long long, o + v)
EMU_ATOMIC2(atomicSub, int, o - v)
EMU_ATOMIC2(atomicSub, unsigned, o - v)
EMU_ATOMIC2(atomicMax, int, o > v ? o : v)
EMU_ATOMIC2(atomicMax, unsigned, o > v ? o : v)
EMU_ATOMIC2(atomicMax, long long, o > v ? o : v)
EMU_ATOMIC2(atomicMax, unsigned long long, o > v ? o : v)
EMU_ATOMIC2(atomicMin, int, o < v ? o : v)
EMU_ATOMIC2(atomicMin, unsigned, o < v ? o : v)
EMU_ATOMIC2(atomicMin, long long, o < v ? o : v)
EMU_ATOMIC2(atomicMin, unsigned long long, o < v ? o : v)
EMU_ATOMIC2(atomicExch, float, v)
EMU_ATOMIC2(atomicExch, int, v)
EMU_ATOMIC2(atomicExch, unsigned, v)
EMU_ATOMIC2(atomicExch, unsigned long long, v)
EMU_ATOMIC2(atomicOr, unsigned, o | v)
EMU_ATOMIC2(atomicAnd, unsigned, o & v)
inline int atomicCAS(int* p, int c, int v) { const int o = *p; if (o == c) *p = v; return o; }
inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) { const unsigned o = *p; if (o == c) *p = v; return o; }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) {
    const unsigned long long o = *p; if (o == c) *p = v; return o;
}

/* device math and intrinsics: IEEE single precision on the host (x86-64 SSE, no contraction without -mfma) */
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float a) { return expf(a); }
inline float __logf(float a) { return logf(a); }
inline float rsqrtf(float a) { return 1.f / sqrtf(a); }
inline int __float2int_rz(float a) { return (int)a; }
inline int __float2int_rd(float a) { return (int)floorf(a); }
template <class T> inline T __ldg(const T* p) { return *p; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }
inline int __ffsll(unsigned long long v) { return __builtin_ffsll((long long)v); }
inline int __clz(unsigned v) { return v ? __builtin_clz(v) : 32; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

/* the runtime API the variants call */
inline cudaError_t cudaGetLastError() { const cudaError_t e = emu::last_error; emu::last_error = cudaSuccess; return e; }
inline cudaError_t cudaPeekAtLastError() { return emu::last_error; }
inline const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }
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
template <class T> inline cudaError_t cudaFuncSetAttribute(T* fn, cudaFuncAttribute a, int v) {
    if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (v > 232448 - 1024) return cudaErrorInvalidValue;
        emu::dyn_limit[(const void*)fn] = v;
    }
    return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
    switch (a) {
        case cudaDevAttrMultiProcessorCount: *v = 132; break;
        case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: *v = 49152; break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 232448; break;
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
/* the emulation's driver: tensors from argv[1], outputs and a report to argv[2] */
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
    int hdr[3];
    emu_read(f, hdr, sizeof hdr);
    const int n_in = hdr[0], n_out = hdr[1];
    const bool with_data = hdr[2] != 0;
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
        for (int i = t.ndim - 1; i >= 0; --i) {
            t.strides[i] = i == t.ndim - 1 ? 1 : t.strides[i + 1] * t.shape[i + 1];
        }
        for (int i = 0; i < t.ndim; ++i) t.numel *= t.shape[i];
        const size_t bytes = (size_t)t.numel * emu_esize(t.dtype);
        t.data = emu::alloc(bytes > 0 ? bytes : 1, 0xFF);
        if (k < n_in && with_data) {
            emu_read(f, t.data, bytes);
            copies[k].assign((unsigned char*)t.data, (unsigned char*)t.data + bytes);
        }
    }
    fclose(f);
    const int rc = kernel_forward(ins.data(), n_in, outs.data(), n_out, nullptr);
    int modified = 0, guards = 0;
    if (with_data) {
        for (int k = 0; k < n_in; ++k) {
            const size_t bytes = (size_t)ins[k].numel * emu_esize(ins[k].dtype);
            if (bytes && memcmp(ins[k].data, copies[k].data(), bytes) != 0) modified |= 1 << k;
            if (!emu::guards_ok(ins[k].data, bytes > 0 ? bytes : 1)) guards |= 1 << k;
        }
        for (int k = 0; k < n_out; ++k) {
            const size_t bytes = (size_t)outs[k].numel * emu_esize(outs[k].dtype);
            if (!emu::guards_ok(outs[k].data, bytes > 0 ? bytes : 1)) guards |= 1 << (16 + k);
        }
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

_NUMPY_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
                 "bool": np.bool_, "int8": np.int8, "uint8": np.uint8, "float16": np.float16}


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


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


_EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([\w\s:*]+?)\s+(\w+)\s*\[\s*\]\s*;")
_SHARED = re.compile(r"__shared__\s+([^;]*);")
_BOUNDS = re.compile(r"__launch_bounds__\s*\(\s*(\d+)[^)]*\)\s*(\w+)\s*[(<]")
_KERNEL_NAME = re.compile(r"(\w+)\s*$")


_TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)


def _without_comments(code: str) -> str:
    return _TOKEN.sub(lambda m: m.group(0) if m.group(0).startswith('"') else re.sub(r"[^\n]", " ", m.group(0)), code)


def translate(code: str) -> str:
    """``code`` (a fast-path translation unit) rewritten for the emulation: shared memory declarations registered
    (poisoned at each block's start), dynamic shared memory from the launch's buffer, launches as calls."""
    src = _without_comments(code)
    src = _EXTERN_SHARED.sub(lambda m: f"{m.group(1)}* {m.group(2)} = ({m.group(1)}*)emu::dynamic_shared();", src)

    def shared(m: re.Match) -> str:
        decl = m.group(1).strip()
        tm = re.match(r"((?:const\s+|volatile\s+)*(?:unsigned\s+|signed\s+)?(?:long\s+long|\w+)(?:\s*\*+)?)\s+(.*)$",
                      decl, re.S)
        if not tm:
            raise ValueError(f"cannot read the shared declaration {decl!r}")
        names = [re.match(r"\s*\**\s*(\w+)", d).group(1) for d in _split_top(tm.group(2))]
        return f"static {decl}; " + " ".join(f"emu::shared(&{n}, sizeof({n}));" for n in names)

    src = _SHARED.sub(shared, src)
    bounds = {m.group(2): int(m.group(1)) for m in _BOUNDS.finditer(src)}
    out, pos = [], 0
    while True:
        k = src.find("<<<", pos)
        if k < 0:
            out.append(src[pos:])
            break
        # the kernel expression before <<<: a name, perhaps with template arguments
        j = k
        while src[j - 1].isspace():
            j -= 1
        end = j
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
        m = _KERNEL_NAME.search(src[:j])
        start = m.start(1)
        kexpr = src[start:end].strip()
        name = m.group(1)
        cfg_end = src.find(">>>", k)
        cfg = _split_top(src[k + 3:cfg_end])
        a = cfg_end + 3
        while src[a].isspace():
            a += 1
        if src[a] != "(":
            raise ValueError(f"a launch of {kexpr} without arguments")
        b = _matching(src, a, "(", ")")
        args = src[a + 1:b - 1]
        out.append(src[pos:start])
        out.append(f"emu::launch(reinterpret_cast<const void*>(&{kexpr}), \"{name}\", {bounds.get(name, 0)}L, "
                   f"[=]() {{ {kexpr}({args}); }}, {', '.join(cfg)})")
        pos = b
    return "".join(out)


@dataclass(frozen=True)
class EmuResult:
    rc: int
    """kernel_forward's return value."""
    errors: str
    """The emulation's complaints (stderr), empty when none."""
    inputs_modified: int
    guards_broken: int
    leaked: int
    launches: int
    outputs: list

    @property
    def clean(self) -> bool:
        return (self.rc == 0 and not self.errors and not self.inputs_modified and not self.guards_broken
                and self.leaked == 0)


_BUILD_DIR = Path(tempfile.gettempdir()) / "cudaperf_cpu_emu"


def build(code: str) -> Path:
    """An executable of ``code`` under the emulation (cached by content)."""
    unit = translate(code)
    key = hashlib.sha256((EMU_HEADER + HEADER + unit + DRIVER).encode()).hexdigest()[:20]
    exe = _BUILD_DIR / key / "emu"
    if exe.exists():
        return exe
    d = exe.parent
    d.mkdir(parents=True, exist_ok=True)
    (d / "cuda_runtime.h").write_text(EMU_HEADER)
    (d / HEADER_NAME).write_text(HEADER)
    (d / "unit.cpp").write_text(unit + DRIVER)
    r = subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-I", str(d), "-include", HEADER_NAME, "unit.cpp",
                        "-o", "emu.tmp"], cwd=d, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"g++ failed on the emulated unit:\n{r.stderr[-4000:]}")
    os.replace(d / "emu.tmp", exe)
    return exe


SCHEDULES = ("round_robin", "round_robin_reversed", "lowest_first", "highest_first")
"""How a block's threads take turns (:data:`EMU_HEADER`'s ``sched``): round robin in thread order, then reversed on
alternate passes (or starting reversed, the blocks in reverse order too); or always the lowest (highest) numbered
thread that can run, so that one warp runs ahead of the others as far as the barriers let it (the blocks in
reverse order for the highest)."""


def _describe(x) -> tuple[tuple[int, ...], str]:
    """(shape, dtype name) of a torch tensor (any device, ``meta`` included) or a numpy array."""
    name = str(x.dtype).removeprefix("torch.")
    return tuple(int(n) for n in x.shape), name


def run(exe: Path, inputs, out_specs, *, dry: bool = False, schedule: str = "round_robin",
        timeout: float = 600) -> EmuResult:
    """Call ``kernel_forward`` of ``exe`` on ``inputs`` (torch tensors or numpy arrays, contiguous) with outputs of
    ``out_specs`` ((shape, dtype name) pairs). ``dry``: the inputs' contents are not passed and no kernel runs
    (only their shapes and dtypes matter: ``meta`` tensors will do); ``schedule``: one of :data:`SCHEDULES`."""
    blob = [struct.pack("<3i", len(inputs), len(out_specs), 0 if dry else 1)]
    for x in inputs:
        shape, dtype = _describe(x)
        blob.append(struct.pack(f"<2i{len(shape)}q", DTYPES.index(dtype), len(shape), *shape))
        if not dry:
            a = np.ascontiguousarray(x.numpy() if hasattr(x, "numpy") else x)
            blob.append(a.tobytes())
    for shape, dtype in out_specs:
        blob.append(struct.pack(f"<2i{len(shape)}q", DTYPES.index(dtype), len(shape), *shape))
    with tempfile.TemporaryDirectory() as t:
        fin, fout = Path(t) / "in.bin", Path(t) / "out.bin"
        fin.write_bytes(b"".join(blob))
        env = {k: v for k, v in os.environ.items() if k not in ("EMU_DRY", "EMU_SCHED")}
        if dry:
            env["EMU_DRY"] = "1"
        env["EMU_SCHED"] = str(SCHEDULES.index(schedule))
        r = subprocess.run([str(exe), str(fin), str(fout)], capture_output=True, text=True, env=env, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"the emulated program failed ({r.returncode}): {r.stderr[-4000:]}")
        data = fout.read_bytes()
    rc, failed, modified, guards, leaked, launches = struct.unpack("<6i", data[:24])
    outputs, off = [], 24
    if not dry:
        for shape, dtype in out_specs:
            nt = _NUMPY_DTYPES[dtype]
            n = int(np.prod(shape, dtype=np.int64))
            outputs.append(np.frombuffer(data, dtype=nt, count=n, offset=off).reshape(shape).copy())
            off += n * np.dtype(nt).itemsize
    errors = r.stderr.strip() if failed or r.stderr.strip() else ""
    return EmuResult(rc, errors, modified, guards, leaked, launches, outputs)
