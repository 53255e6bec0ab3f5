"""Viterbi decoding of a hidden Markov model for a batch of observation sequences (float score, exact states).

The model has S states and M symbols; logA[r*S + s] scores the transition r -> s, the emission table scores
symbol o in state s, logpi[s] the start. For sequence q (obs[q*T .. q*T + T)) the recursion is
d_0[s] = logpi[s] + E(s, o_0) and d_t[s] = max_r (d_{t-1}[r] + logA[r*S + s]) + E(s, o_t); best[q] is
max_s d_{T-1}[s]. Each maximum takes the lowest index among equal candidates (r ascending, strict >). The
output states are either the last state of the best path (states[q]) or the whole best path (states[q*T + t],
by backtracking the arg-maxima).

What varies with the index: the number of states (8 to 96) and symbols (4 to 256), the emission layout
(state-major E(s, o) = logB[s*M + o] or symbol-major logB[o*S + s]), the output (last state / whole path), the
ranges the score tables are drawn from, the sequence length and the number of sequences.

CPU and GPU agree exactly: every value is one float addition of two floats or a maximum of such sums, in the
same order in the C reference and in every variant (no multiplication, so no fused multiply-add can change a
rounding), and every arg-maximum takes the lowest index on ties. The tables are random reals, so ties are rare,
and when one occurs every implementation resolves it alike. The float tolerance (rtol 1e-6, atol 1e-4 on scores
of magnitude up to a few thousand) is therefore a formality; the state outputs are compared exactly.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

STATES = [8, 16, 24, 32, 48, 64, 96, 12]
SYMBOLS = [4, 16, 64, 256, 7, 32]
TLENS = [64, 100, 200, 400, 1000, 150]
HEAD = "#include <cuda_runtime.h>\n\n"
SIG_ARGS = ("int nseq, int T, const float* logA, const float* logB, const float* logpi, const int* obs, "
            "float* best, int* states")
SIG = f'extern "C" void viterbi({SIG_ARGS})'
KARGS = "int nseq, int T, const float* logA, const float* logB, const float* logpi, const int* obs"
KCALL = "nseq, T, dA, dB, dpi, dobs"


def _defs(S: int, M: int, layout: str) -> str:
    emi = "logB[(s) * NSYM + (o)]" if layout == "sm" else "logB[(o) * NST + (s)]"
    return f"#define NST {S}\n#define NSYM {M}\n#define EMI(s, o) ({emi})\n"


def _backtrack(path: bool, bp: str, a: str, out: str = "states") -> str:
    """Writes the outputs from the final arg-maximum ``a`` (q, T in scope; ``bp`` indexed by t*NST + s)."""
    if not path:
        return f"    {out}[q] = {a};\n"
    return (f"    {{ int st = {a};\n"
            f"      {out}[(size_t)q * T + T - 1] = st;\n"
            "      for (int t = T - 1; t > 0; --t) {\n"
            f"          st = {bp.format(t='t', s='st')};\n"
            f"          {out}[(size_t)q * T + t - 1] = st;\n"
            "      } }\n")


def _reference(defs: str, path: bool) -> str:
    return ("#include <stdlib.h>\n\n" + defs + "\n"
            f"void viterbi({SIG_ARGS}) {{\n"
            "    float d[NST], nd[NST];\n"
            "    unsigned char* bp = (unsigned char*)malloc((size_t)T * NST);\n"
            "    for (int q = 0; q < nseq; ++q) {\n"
            "        const int* o = obs + (size_t)q * T;\n"
            "        for (int s = 0; s < NST; ++s) d[s] = logpi[s] + EMI(s, o[0]);\n"
            "        for (int t = 1; t < T; ++t) {\n"
            "            int ot = o[t];\n"
            "            for (int s = 0; s < NST; ++s) {\n"
            "                float bv = d[0] + logA[s];\n"
            "                int arg = 0;\n"
            "                for (int r = 1; r < NST; ++r) {\n"
            "                    float v = d[r] + logA[r * NST + s];\n"
            "                    if (v > bv) { bv = v; arg = r; }\n"
            "                }\n"
            "                nd[s] = bv + EMI(s, ot);\n"
            "                bp[(size_t)t * NST + s] = (unsigned char)arg;\n"
            "            }\n"
            "            for (int s = 0; s < NST; ++s) d[s] = nd[s];\n"
            "        }\n"
            "        float b = d[0]; int a = 0;\n"
            "        for (int s = 1; s < NST; ++s) if (d[s] > b) { b = d[s]; a = s; }\n"
            "        best[q] = b;\n"
            + "".join("    " + ln + "\n" for ln in _backtrack(path, "bp[(size_t){t} * NST + {s}]", "a")
                      .splitlines())
            + "    }\n    free(bp);\n}\n")


def _host_in(path: bool) -> str:
    olen = "(size_t)nseq * T" if path else "(size_t)nseq"
    return ("    if (nseq <= 0 || T <= 0) return;\n"
            f"    size_t nobs = (size_t)nseq * T, nout = {olen};\n"
            "    float *dA, *dB, *dpi, *dbest; int *dobs, *dstates; unsigned char* dbp;\n"
            "    cudaMalloc(&dA, NST * NST * sizeof(float));\n"
            "    cudaMalloc(&dB, NST * NSYM * sizeof(float));\n"
            "    cudaMalloc(&dpi, NST * sizeof(float));\n"
            "    cudaMalloc(&dobs, nobs * sizeof(int));\n"
            "    cudaMalloc(&dbest, (size_t)nseq * sizeof(float));\n"
            "    cudaMalloc(&dstates, nout * sizeof(int));\n"
            "    cudaMalloc(&dbp, nobs * NST);\n"
            "    cudaMemcpy(dA, logA, NST * NST * sizeof(float), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(dB, logB, NST * NSYM * sizeof(float), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(dpi, logpi, NST * sizeof(float), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(dobs, obs, nobs * sizeof(int), cudaMemcpyHostToDevice);\n")


OUT = ("    cudaMemcpy(best, dbest, (size_t)nseq * sizeof(float), cudaMemcpyDeviceToHost);\n"
       "    cudaMemcpy(states, dstates, nout * sizeof(int), cudaMemcpyDeviceToHost);\n"
       "    cudaFree(dA); cudaFree(dB); cudaFree(dpi); cudaFree(dobs); cudaFree(dbest); cudaFree(dstates);\n"
       "    cudaFree(dbp);\n")

BP = "bp[((size_t)q * T + {t}) * NST + {s}]"


def _thread_seq(pre: str, path: bool, block: int, const: bool) -> str:
    """Thread per sequence: its deltas in local arrays, the backpointers in global memory; the transition table
    read from global memory or from __constant__ memory (every thread reads the same entry at once)."""
    tab = "cA" if const else "logA"
    decl = "__constant__ float cA[NST * NST];\n\n" if const else ""
    copy = ("    cudaMemcpyToSymbol(cA, logA, NST * NST * sizeof(float));\n" if const else "")
    return (pre + decl
            + f"__global__ void vit_thread({KARGS}, unsigned char* bp, float* best, int* states) {{\n"
            "    int q = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (q >= nseq) return;\n"
            "    float d[NST], nd[NST];\n"
            "    const int* o = obs + (size_t)q * T;\n"
            "    for (int s = 0; s < NST; ++s) d[s] = logpi[s] + EMI(s, o[0]);\n"
            "    for (int t = 1; t < T; ++t) {\n"
            "        int ot = o[t];\n"
            "        for (int s = 0; s < NST; ++s) {\n"
            f"            float bv = d[0] + {tab}[s];\n"
            "            int arg = 0;\n"
            "            for (int r = 1; r < NST; ++r) {\n"
            f"                float v = d[r] + {tab}[r * NST + s];\n"
            "                if (v > bv) { bv = v; arg = r; }\n"
            "            }\n"
            "            nd[s] = bv + EMI(s, ot);\n"
            f"            {BP.format(t='t', s='s')} = (unsigned char)arg;\n"
            "        }\n"
            "        for (int s = 0; s < NST; ++s) d[s] = nd[s];\n"
            "    }\n"
            "    float b = d[0]; int a = 0;\n"
            "    for (int s = 1; s < NST; ++s) if (d[s] > b) { b = d[s]; a = s; }\n"
            "    best[q] = b;\n" + _backtrack(path, BP, "a") + "}\n\n"
            + SIG + " {\n" + _host_in(path) + copy
            + f"    vit_thread<<<(nseq + {block - 1}) / {block}, {block}>>>({KCALL}, dbp, dbest, dstates);\n"
            + OUT + "}\n")


def _step_launches(pre: str, path: bool, nthr: int) -> str:
    """Block per sequence, a thread per state, one kernel launch per time step over device-resident deltas
    (double-buffered); a last kernel takes the arg-maximum and backtracks."""
    return (pre + f"__global__ void vit_init({KARGS}, float* d) {{\n"
            "    int q = blockIdx.x, s = threadIdx.x;\n"
            "    if (s < NST) d[(size_t)q * NST + s] = logpi[s] + EMI(s, obs[(size_t)q * T]);\n}\n\n"
            f"__global__ void vit_step(int t, {KARGS}, const float* d, float* nd, unsigned char* bp) {{\n"
            "    int q = blockIdx.x, s = threadIdx.x;\n"
            "    if (s >= NST) return;\n"
            "    const float* dq = d + (size_t)q * NST;\n"
            "    float bv = dq[0] + logA[s];\n"
            "    int arg = 0;\n"
            "    for (int r = 1; r < NST; ++r) {\n"
            "        float v = dq[r] + logA[r * NST + s];\n"
            "        if (v > bv) { bv = v; arg = r; }\n"
            "    }\n"
            "    nd[(size_t)q * NST + s] = bv + EMI(s, obs[(size_t)q * T + t]);\n"
            f"    {BP.format(t='t', s='s')} = (unsigned char)arg;\n}}\n\n"
            "__global__ void vit_final(int nseq, int T, const float* d, const unsigned char* bp, float* best,"
            " int* states) {\n"
            "    int q = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (q >= nseq) return;\n"
            "    const float* dq = d + (size_t)q * NST;\n"
            "    float b = dq[0]; int a = 0;\n"
            "    for (int s = 1; s < NST; ++s) if (dq[s] > b) { b = dq[s]; a = s; }\n"
            "    best[q] = b;\n" + _backtrack(path, BP, "a") + "}\n\n"
            + SIG + " {\n" + _host_in(path)
            + "    float *d0, *d1;\n"
            "    cudaMalloc(&d0, (size_t)nseq * NST * sizeof(float));\n"
            "    cudaMalloc(&d1, (size_t)nseq * NST * sizeof(float));\n"
            f"    vit_init<<<nseq, {nthr}>>>({KCALL}, d0);\n"
            "    for (int t = 1; t < T; ++t) {\n"
            f"        vit_step<<<nseq, {nthr}>>>(t, {KCALL}, d0, d1, dbp);\n"
            "        float* x = d0; d0 = d1; d1 = x;\n"
            "    }\n"
            "    vit_final<<<(nseq + 127) / 128, 128>>>(nseq, T, d0, dbp, dbest, dstates);\n"
            "    cudaFree(d0); cudaFree(d1);\n" + OUT + "}\n")


def _block_loop(pre: str, path: bool, nthr: int, shared_a: bool, host_final: bool) -> str:
    """Block per sequence, a thread per state, the time loop inside one kernel with the deltas in shared memory
    and __syncthreads between steps; the transition table read through the read-only cache, or staged once in
    shared memory (transposed, padded against bank conflicts). With ``host_final`` the kernel leaves the last
    deltas and the backpointers for the host, which takes the arg-maximum and backtracks."""
    if shared_a:
        stage = ("    __shared__ float sA[NST * (NST + 1)];\n"
                 "    for (int k = threadIdx.x; k < NST * NST; k += blockDim.x)\n"
                 "        sA[(k % NST) * (NST + 1) + k / NST] = logA[k];\n")
        A = lambda r: f"sA[s * (NST + 1) + {r}]"  # noqa: E731
    else:
        stage = ""
        A = lambda r: f"__ldg(&logA[{r} * NST + s])"  # noqa: E731
    if host_final:
        tail = ("    if (s < NST) dlast[(size_t)q * NST + s] = d[s];\n}\n\n")
        kparams = "unsigned char* __restrict__ bp, float* dlast"
        kargs = "dbp, dlast"
        host = ("    float* dlast; cudaMalloc(&dlast, (size_t)nseq * NST * sizeof(float));\n"
                f"    vit_block<<<nseq, {nthr}>>>({KCALL}, {kargs});\n"
                "    float* hl = (float*)malloc((size_t)nseq * NST * sizeof(float));\n"
                "    unsigned char* hbp = (unsigned char*)malloc(nobs * NST);\n"
                "    cudaMemcpy(hl, dlast, (size_t)nseq * NST * sizeof(float), cudaMemcpyDeviceToHost);\n"
                "    cudaMemcpy(hbp, dbp, nobs * NST, cudaMemcpyDeviceToHost);\n"
                "    for (int q = 0; q < nseq; ++q) {\n"
                "        const float* dq = hl + (size_t)q * NST;\n"
                "        float b = dq[0]; int a = 0;\n"
                "        for (int s = 1; s < NST; ++s) if (dq[s] > b) { b = dq[s]; a = s; }\n"
                "        best[q] = b;\n"
                + "".join("    " + ln + "\n" for ln in _backtrack(path, BP.replace("bp[", "hbp["), "a")
                          .splitlines())
                + "    }\n"
                "    free(hl); free(hbp); cudaFree(dlast);\n"
                "    cudaFree(dA); cudaFree(dB); cudaFree(dpi); cudaFree(dobs); cudaFree(dbest);"
                " cudaFree(dstates);\n    cudaFree(dbp);\n")
    else:
        tail = ("    if (s == 0) {\n"
                "        float b = d[0]; int a = 0;\n"
                "        for (int k = 1; k < NST; ++k) if (d[k] > b) { b = d[k]; a = k; }\n"
                "        best[q] = b;\n"
                + "".join("    " + ln + "\n" for ln in _backtrack(path, BP, "a").splitlines())
                + "    }\n}\n\n")
        kparams = "unsigned char* __restrict__ bp, float* best, int* states"
        kargs = "dbp, dbest, dstates"
        host = f"    vit_block<<<nseq, {nthr}>>>({KCALL}, {kargs});\n" + OUT
    return (pre + ("#include <stdlib.h>\n" if host_final else "")
            + f"__global__ void vit_block(int nseq, int T, const float* __restrict__ logA, const float* logB, "
            f"const float* logpi, const int* __restrict__ obs, {kparams}) {{\n"
            "    __shared__ float d[NST];\n" + stage
            + "    int q = blockIdx.x, s = threadIdx.x;\n"
            "    const int* o = obs + (size_t)q * T;\n"
            "    if (s < NST) d[s] = logpi[s] + EMI(s, o[0]);\n"
            "    __syncthreads();\n"
            "    for (int t = 1; t < T; ++t) {\n"
            "        float nv = 0.0f;\n"
            "        if (s < NST) {\n"
            f"            float bv = d[0] + {A('0')};\n"
            "            int arg = 0;\n"
            "            for (int r = 1; r < NST; ++r) {\n"
            f"                float v = d[r] + {A('r')};\n"
            "                if (v > bv) { bv = v; arg = r; }\n"
            "            }\n"
            "            nv = bv + EMI(s, o[t]);\n"
            f"            {BP.format(t='t', s='s')} = (unsigned char)arg;\n"
            "        }\n"
            "        __syncthreads();\n"
            "        if (s < NST) d[s] = nv;\n"
            "        __syncthreads();\n"
            "    }\n" + tail
            + SIG + " {\n" + _host_in(path) + host + "}\n")


def _warp_seq(pre: str, path: bool, block: int) -> str:
    """Warp per sequence: lane l holds the deltas of states l, l + 32, ... in registers; d[r] is broadcast by
    __shfl_sync; the final arg-maximum is a shuffle reduction that keeps the lowest index on ties."""
    return (pre + "#define KS ((NST + 31) / 32)\n\n"
            f"__global__ void vit_warp({KARGS}, unsigned char* bp, float* best, int* states) {{\n"
            "    int q = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);\n"
            "    int lane = threadIdx.x & 31;\n"
            "    if (q >= nseq) return;\n"
            "    const int* o = obs + (size_t)q * T;\n"
            "    float d[KS];\n"
            "#pragma unroll\n"
            "    for (int k = 0; k < KS; ++k) {\n"
            "        int s = k * 32 + lane;\n"
            "        d[k] = s < NST ? logpi[s] + EMI(s, o[0]) : 0.0f;\n"
            "    }\n"
            "    for (int t = 1; t < T; ++t) {\n"
            "        int ot = o[t];\n"
            "        float bv[KS]; int arg[KS];\n"
            "#pragma unroll\n"
            "        for (int k = 0; k < KS; ++k) { bv[k] = 0.0f; arg[k] = -1; }\n"
            "#pragma unroll\n"
            "        for (int kr = 0; kr < KS; ++kr) {\n"
            "            for (int l = 0; l < 32; ++l) {\n"
            "                int r = kr * 32 + l;\n"
            "                if (r >= NST) break;\n"
            "                float dr = __shfl_sync(0xffffffffu, d[kr], l);\n"
            "#pragma unroll\n"
            "                for (int k = 0; k < KS; ++k) {\n"
            "                    int s = k * 32 + lane;\n"
            "                    if (s < NST) {\n"
            "                        float v = dr + logA[r * NST + s];\n"
            "                        if (arg[k] < 0 || v > bv[k]) { bv[k] = v; arg[k] = r; }\n"
            "                    }\n"
            "                }\n"
            "            }\n"
            "        }\n"
            "#pragma unroll\n"
            "        for (int k = 0; k < KS; ++k) {\n"
            "            int s = k * 32 + lane;\n"
            "            if (s < NST) {\n"
            "                d[k] = bv[k] + EMI(s, ot);\n"
            f"                {BP.format(t='t', s='s')} = (unsigned char)arg[k];\n"
            "            }\n"
            "        }\n"
            "    }\n"
            "    float b = d[0]; int a = lane < NST ? lane : NST;\n"
            "    if (lane >= NST) b = -3.0e38f;\n"
            "#pragma unroll\n"
            "    for (int k = 1; k < KS; ++k) {\n"
            "        int s = k * 32 + lane;\n"
            "        if (s < NST && d[k] > b) { b = d[k]; a = s; }\n"
            "    }\n"
            "    for (int off = 16; off > 0; off >>= 1) {\n"
            "        float ob = __shfl_down_sync(0xffffffffu, b, off);\n"
            "        int oa = __shfl_down_sync(0xffffffffu, a, off);\n"
            "        if (ob > b || (ob == b && oa < a)) { b = ob; a = oa; }\n"
            "    }\n"
            "    if (lane == 0) {\n"
            "        best[q] = b;\n"
            + "".join("    " + ln + "\n" for ln in _backtrack(path, BP, "a").splitlines())
            + "    }\n}\n\n"
            + SIG + " {\n" + _host_in(path)
            + "    size_t threads = (size_t)nseq * 32;\n"
            f"    vit_warp<<<(unsigned)((threads + {block - 1}) / {block}), {block}>>>({KCALL}, dbp, dbest,"
            " dstates);\n" + OUT + "}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    S = STATES[(index + int(rng.integers(2))) % len(STATES)]
    M = SYMBOLS[(index // 2 + int(rng.integers(3))) % len(SYMBOLS)]
    layout = "sm" if (index // 3) % 2 == 0 else "ms"
    path = index % 2 == 0
    T = TLENS[(index // 4 + int(rng.integers(3))) % len(TLENS)] + int(rng.integers(0, 9))
    nseq = max(32, int(2.5e7 / (T * S * S))) + int(rng.integers(0, 17))
    if nseq * T * S * S > 3.5e7:  # many states: shorter sequences rather than fewer than 32 of them
        T = max(16, int(2.5e7 / (nseq * S * S)))
    a_lo = -float(np.round(rng.uniform(3.0, 9.0), 2))
    b_lo = -float(np.round(rng.uniform(2.0, 8.0), 2))
    defs = _defs(S, M, layout)
    emis = "logB[s*M + o]" if layout == "sm" else "logB[o*S + s]"
    outs = ("states[q*T + t] = the state at step t of the best path (backtracked from the arg-maxima)" if path else
            "states[q] = the last state of the best path (the arg-maximum of d_{T-1})")
    task = {
        "function_name": "viterbi",
        "description": (f"Viterbi decoding of a hidden Markov model with S = {S} states and M = {M} symbols, for "
                        "nseq observation sequences obs[q*T .. q*T + T) of symbols in [0, M): "
                        f"d_0[s] = logpi[s] + E(s, o_0), d_t[s] = max_r (d_(t-1)[r] + logA[r*S + s]) + E(s, o_t), "
                        f"with E(s, o) = {emis}; best[q] = max_s d_(T-1)[s] and {outs}. Every maximum takes the "
                        "lowest index among equal candidates (strict > over ascending indices)."),
        "returns": "void",
        "args": [
            {"name": "nseq", "role": "scalar", "ctype": "int"},
            {"name": "T", "role": "scalar", "ctype": "int"},
            {"name": "logA", "role": "in", "ctype": "float", "length": S * S,
             "dist": {"kind": "uniform", "low": a_lo, "high": -0.05}},
            {"name": "logB", "role": "in", "ctype": "float", "length": S * M,
             "dist": {"kind": "uniform", "low": b_lo, "high": -0.02}},
            {"name": "logpi", "role": "in", "ctype": "float", "length": S,
             "dist": {"kind": "uniform", "low": -5.0, "high": -0.1}},
            {"name": "obs", "role": "in", "ctype": "int", "length": "nseq * T",
             "dist": {"kind": "randint", "low": 0, "high": M}},
            {"name": "best", "role": "out", "ctype": "float", "length": "nseq"},
            {"name": "states", "role": "out", "ctype": "int", "length": "nseq * T" if path else "nseq"},
        ],
        "size_configs": [{"nseq": 1, "T": 1}, {"nseq": 3, "T": 7}, {"nseq": 37, "T": 50},
                         {"nseq": 5, "T": 301}, {"nseq": nseq, "T": T}],
        "tolerance": {"rtol": 1e-6, "atol": 1e-4},
        "reference_c": _reference(defs, path),
        "tags": ["dynamic-programming", "float32", "hmm"],
    }
    pre = HEAD + defs + "\n"
    nthr = (S + 31) // 32 * 32
    btag = {32: "block_32", 64: "block_64", 96: "block_128", 128: "block_128"}[nthr]
    variants = (
        Variant("thread_per_seq_b64", ("thread_per_row", "block_64", "pageable"),
                _thread_seq(pre, path, 64, False)),
        Variant("thread_per_seq_const_b128", ("thread_per_row", "constant_memory", "block_128", "pageable"),
                _thread_seq(pre, path, 128, True)),
        Variant("launch_per_step", ("many_launches", "device_resident", "double_buffered", "block_per_row",
                                    btag, "pageable"), _step_launches(pre, path, nthr)),
        Variant("block_loop_sync", ("block_per_row", "fused", "readonly_cache", btag, "pageable"),
                _block_loop(pre, path, nthr, False, False)),
        Variant("block_shared_transitions", ("block_per_row", "fused", "shared_tiling", btag, "pageable"),
                _block_loop(pre, path, nthr, True, False)),
        Variant("block_host_backtrack", ("block_per_row", "host_compute", "extra_transfers", "readonly_cache",
                                         btag, "pageable"), _block_loop(pre, path, nthr, False, True)),
        Variant("warp_per_seq_shfl", ("block_per_row", "warp_shuffle", "block_128", "pageable"),
                _warp_seq(pre, path, 128)),
    )
    return GeneratedTask(task, variants, {"states": S, "symbols": M, "layout": layout,
                                          "output": "path" if path else "last", "T_time": T, "nseq_time": nseq,
                                          "a_low": a_lo, "b_low": b_lo})


FAMILY = Family(
    name="viterbi_decode",
    description="Viterbi decoding (best score and best path or last state) of an HMM for a batch of sequences",
    generate=generate,
    n_tasks=50,
    tags=("dynamic-programming", "float32"),
)
