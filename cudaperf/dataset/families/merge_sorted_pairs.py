"""Merge two sorted key arrays a[0..na-1] and b[0..nb-1] into one sorted array c[0..na+nb-1] (a stable merge).

Ties go to a first: an element of a precedes every equal element of b, and each array keeps its own order. Some
tasks carry a payload per key (va, vb, copied along with the keys into vc), others report where each output came
from (src[k] = i for a[i], -(j + 1) for b[j]), others output the keys alone. What varies with the index: the key
type (int, long long), the key ranges of a and b (narrow ranges give long runs of ties, where the tie rule
decides the payload order; disjoint or offset ranges give long one-sided stretches), the size ratio na : nb, the
payload type and the sizes.

Every output is a copied key, payload or an index, so the tolerance is zero.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
MODES = ["vals", "none", "origin", "vals"]
VTYPES = ["float", "int", "double", "long long"]
RATIOS = [(1, 1), (1, 3), (5, 1), (1, 16), (2, 1), (7, 9)]


def _pre(p: dict) -> str:
    kt = p["kt"]
    s = HEAD + f"typedef {kt} mkey_t;\n"
    if p["mode"] == "vals":
        s += f"typedef {p['vt']} mval_t;\n"
    return s + "\n"


def _params(p: dict) -> str:
    """The C parameter list of the task function."""
    if p["mode"] == "vals":
        return ("int na, const mkey_t* a, const mval_t* va, int nb, const mkey_t* b, const mval_t* vb, mkey_t* c, "
                "mval_t* vc")
    if p["mode"] == "origin":
        return "int na, const mkey_t* a, int nb, const mkey_t* b, mkey_t* c, int* src"
    return "int na, const mkey_t* a, int nb, const mkey_t* b, mkey_t* c"


def _sig(p: dict) -> str:
    return f'extern "C" void merge_sorted({_params(p)})'


def _kp(p: dict) -> str:
    """Kernel parameters for the payload side (after the keys)."""
    return {"vals": ", const mval_t* va, const mval_t* vb, mval_t* vc", "origin": ", int* src", "none": ""}[p["mode"]]


def _ka(p: dict) -> str:
    return {"vals": ", dva, dvb, dvc", "origin": ", dsrc", "none": ""}[p["mode"]]


def _emit(p: dict) -> str:
    """EMIT_A(i, k) / EMIT_B(j, k): output position k receives a[i] / b[j] (and its payload or origin)."""
    if p["mode"] == "vals":
        return ("#define EMIT_A(i, k) do { c[k] = a[i]; vc[k] = va[i]; } while (0)\n"
                "#define EMIT_B(j, k) do { c[k] = b[j]; vc[k] = vb[j]; } while (0)\n\n")
    if p["mode"] == "origin":
        return ("#define EMIT_A(i, k) do { c[k] = a[i]; src[k] = (int)(i); } while (0)\n"
                "#define EMIT_B(j, k) do { c[k] = b[j]; src[k] = -(int)(j) - 1; } while (0)\n\n")
    return ("#define EMIT_A(i, k) do { c[k] = a[i]; } while (0)\n"
            "#define EMIT_B(j, k) do { c[k] = b[j]; } while (0)\n\n")


def _alloc(p: dict, pinned: bool = False) -> str:
    mode = p["mode"]
    s = ("    size_t n = (size_t)na + (size_t)nb;\n"
         "    if (n == 0) return;\n"
         "    size_t ab = (size_t)(na > 0 ? na : 1) * sizeof(mkey_t), "
         "bb = (size_t)(nb > 0 ? nb : 1) * sizeof(mkey_t);\n"
         "    mkey_t *da, *db, *dc;\n"
         "    cudaMalloc(&da, ab); cudaMalloc(&db, bb); cudaMalloc(&dc, n * sizeof(mkey_t));\n")
    if mode == "vals":
        s += ("    mval_t *dva, *dvb, *dvc;\n"
              "    cudaMalloc(&dva, (size_t)(na > 0 ? na : 1) * sizeof(mval_t));\n"
              "    cudaMalloc(&dvb, (size_t)(nb > 0 ? nb : 1) * sizeof(mval_t));\n"
              "    cudaMalloc(&dvc, n * sizeof(mval_t));\n")
    elif mode == "origin":
        s += "    int* dsrc; cudaMalloc(&dsrc, n * sizeof(int));\n"
    if pinned:
        s += ("    cudaHostRegister((void*)a, (size_t)na * sizeof(mkey_t), cudaHostRegisterDefault);\n"
              "    cudaHostRegister((void*)b, (size_t)nb * sizeof(mkey_t), cudaHostRegisterDefault);\n"
              "    cudaHostRegister((void*)c, n * sizeof(mkey_t), cudaHostRegisterDefault);\n")
    s += ("    if (na > 0) cudaMemcpy(da, a, (size_t)na * sizeof(mkey_t), cudaMemcpyHostToDevice);\n"
          "    if (nb > 0) cudaMemcpy(db, b, (size_t)nb * sizeof(mkey_t), cudaMemcpyHostToDevice);\n")
    if mode == "vals":
        s += ("    if (na > 0) cudaMemcpy(dva, va, (size_t)na * sizeof(mval_t), cudaMemcpyHostToDevice);\n"
              "    if (nb > 0) cudaMemcpy(dvb, vb, (size_t)nb * sizeof(mval_t), cudaMemcpyHostToDevice);\n")
    return s


def _finish(p: dict, pinned: bool = False) -> str:
    mode = p["mode"]
    s = "    cudaMemcpy(c, dc, n * sizeof(mkey_t), cudaMemcpyDeviceToHost);\n"
    if mode == "vals":
        s += "    cudaMemcpy(vc, dvc, n * sizeof(mval_t), cudaMemcpyDeviceToHost);\n"
    elif mode == "origin":
        s += "    cudaMemcpy(src, dsrc, n * sizeof(int), cudaMemcpyDeviceToHost);\n"
    if pinned:
        s += "    cudaHostUnregister((void*)a); cudaHostUnregister((void*)b); cudaHostUnregister((void*)c);\n"
    s += "    cudaFree(da); cudaFree(db); cudaFree(dc);\n"
    if mode == "vals":
        s += "    cudaFree(dva); cudaFree(dvb); cudaFree(dvc);\n"
    elif mode == "origin":
        s += "    cudaFree(dsrc);\n"
    return s + "}\n"


# The merge-path split of diagonal d: the number i of a's elements among the first d outputs (ties: a first).
SPLIT = (
    "__host__ __device__ __forceinline__ int merge_split(const mkey_t* a, int na, const mkey_t* b, int nb,"
    " long long d) {\n"
    "    int lo = d > nb ? (int)(d - nb) : 0;\n"
    "    int hi = d < na ? (int)d : na;\n"
    "    while (lo < hi) {\n"
    "        int mid = lo + ((hi - lo) >> 1);\n"
    "        if (a[mid] <= b[d - 1 - mid]) lo = mid + 1; else hi = mid;\n"
    "    }\n"
    "    return lo;\n}\n\n")

# Sequential merge of `cnt` outputs from (i, j), writing output positions k, k+1, ...
SEQ_MERGE = (
    "    for (int t = 0; t < cnt; ++t, ++k) {\n"
    "        if (i < na && (j >= nb || a[i] <= b[j])) { EMIT_A(i, k); ++i; }\n"
    "        else { EMIT_B(j, k); ++j; }\n"
    "    }\n")


def _merge_path(p: dict, ipt: int, block: int) -> str:
    """Each thread binary-searches its own diagonal (thread * IPT) and merges IPT outputs from there."""
    return (_pre(p) + _emit(p) + f"#define IPT {ipt}\n\n" + SPLIT
            + f"__global__ void merge_path(int na, const mkey_t* a, int nb, const mkey_t* b, mkey_t* c{_kp(p)}) {{\n"
            "    long long n = (long long)na + nb;\n"
            "    long long d = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * IPT;\n"
            "    if (d >= n) return;\n"
            "    int i = merge_split(a, na, b, nb, d);\n"
            "    int j = (int)(d - i);\n"
            "    int cnt = n - d < IPT ? (int)(n - d) : IPT;\n"
            "    long long k = d;\n"
            + SEQ_MERGE + "}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + f"    size_t threads = (n + IPT - 1) / IPT;\n"
            f"    merge_path<<<(unsigned)((threads + {block - 1}) / {block}), {block}>>>(na, da, nb, db, dc{_ka(p)});\n"
            + _finish(p))


TILE_MERGE = (
    "    // the tile's keys of a then of b, staged in shared memory with coalesced loads\n"
    "    for (int t = threadIdx.x; t < la; t += blockDim.x) sk[t] = a[i0 + t];\n"
    "    for (int t = threadIdx.x; t < lb; t += blockDim.x) sk[la + t] = b[j0 + t];\n"
    "    __syncthreads();\n"
    "    const mkey_t* sa = sk;\n"
    "    const mkey_t* sb = sk + la;\n"
    "    int dl = threadIdx.x * IPT;\n"
    "    if (dl < la + lb) {\n"
    "        int lo = dl > lb ? dl - lb : 0, hi = dl < la ? dl : la;\n"
    "        while (lo < hi) {\n"
    "            int mid = (lo + hi) >> 1;\n"
    "            if (sa[mid] <= sb[dl - 1 - mid]) lo = mid + 1; else hi = mid;\n"
    "        }\n"
    "        int ii = lo, jj = dl - lo;\n"
    "        int cnt = la + lb - dl < IPT ? la + lb - dl : IPT;\n"
    "        long long k = d0 + dl;\n"
    "        for (int t = 0; t < cnt; ++t, ++k) {\n"
    "            if (ii < la && (jj >= lb || sa[ii] <= sb[jj])) { int i = i0 + ii; EMIT_A(i, k); ++ii; }\n"
    "            else { int j = j0 + jj; EMIT_B(j, k); ++jj; }\n"
    "        }\n"
    "    }\n")


def _block_shared(p: dict) -> str:
    """A block per tile of TILE outputs: thread 0 finds the tile's two splits, the tile's keys are staged in shared
    memory, each thread then runs merge path inside the tile."""
    return (_pre(p) + _emit(p) + "#define IPT 8\n#define THREADS 256\n#define TILE (IPT * THREADS)\n\n" + SPLIT
            + f"__global__ void merge_tiles(int na, const mkey_t* a, int nb, const mkey_t* b, mkey_t* c{_kp(p)}) {{\n"
            "    __shared__ mkey_t sk[TILE];\n"
            "    __shared__ int split[2];\n"
            "    long long n = (long long)na + nb;\n"
            "    long long d0 = (long long)blockIdx.x * TILE;\n"
            "    long long d1 = d0 + TILE < n ? d0 + TILE : n;\n"
            "    if (threadIdx.x == 0) split[0] = merge_split(a, na, b, nb, d0);\n"
            "    if (threadIdx.x == 32) split[1] = merge_split(a, na, b, nb, d1);\n"
            "    __syncthreads();\n"
            "    int i0 = split[0], i1 = split[1];\n"
            "    int j0 = (int)(d0 - i0), j1 = (int)(d1 - i1);\n"
            "    int la = i1 - i0, lb = j1 - j0;\n"
            + TILE_MERGE + "}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    merge_tiles<<<(unsigned)((n + TILE - 1) / TILE), THREADS>>>(na, da, nb, db, dc" + _ka(p) + ");\n"
            + _finish(p))


def _two_pass(p: dict) -> str:
    """A partition kernel finds every tile boundary's split (a thread per boundary) into global memory; the merge
    kernel (a block per tile, 128 threads) stages the tile in shared memory and merges it."""
    return (_pre(p) + _emit(p) + "#define IPT 16\n#define THREADS 128\n#define TILE (IPT * THREADS)\n\n" + SPLIT
            + "__global__ void partition(int na, const mkey_t* a, int nb, const mkey_t* b, int tiles, int* part) {\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (t > tiles) return;\n"
            "    long long n = (long long)na + nb;\n"
            "    long long d = (long long)t * TILE < n ? (long long)t * TILE : n;\n"
            "    part[t] = merge_split(a, na, b, nb, d);\n}\n\n"
            + "__global__ void merge_tiles(int na, const mkey_t* a, int nb, const mkey_t* b, const int* part, "
            f"mkey_t* c{_kp(p)}) {{\n"
            "    __shared__ mkey_t sk[TILE];\n"
            "    long long n = (long long)na + nb;\n"
            "    long long d0 = (long long)blockIdx.x * TILE;\n"
            "    long long d1 = d0 + TILE < n ? d0 + TILE : n;\n"
            "    int i0 = part[blockIdx.x], i1 = part[blockIdx.x + 1];\n"
            "    int j0 = (int)(d0 - i0), j1 = (int)(d1 - i1);\n"
            "    int la = i1 - i0, lb = j1 - j0;\n"
            + TILE_MERGE + "}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    int tiles = (int)((n + TILE - 1) / TILE);\n"
            "    int* part; cudaMalloc(&part, (size_t)(tiles + 1) * sizeof(int));\n"
            "    partition<<<(tiles + 1 + 255) / 256, 256>>>(na, da, nb, db, tiles, part);\n"
            "    merge_tiles<<<tiles, THREADS>>>(na, da, nb, db, part, dc" + _ka(p) + ");\n"
            "    cudaFree(part);\n" + _finish(p))


def _rank_scatter(p: dict, block: int, pinned: bool) -> str:
    """A thread per input element: its output position is its own index plus its rank in the other array (keys of
    b strictly below it for a's elements, keys of a at or below it for b's), found by binary search."""
    return (_pre(p) + _emit(p)
            + f"__global__ void scatter_ranks(int na, const mkey_t* a, int nb, const mkey_t* b, mkey_t* c{_kp(p)}) {{\n"
            "    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (t < na) {\n"
            "        int i = (int)t;\n"
            "        mkey_t x = a[i];\n"
            "        int lo = 0, hi = nb;\n"
            "        while (lo < hi) { int mid = (lo + hi) >> 1; if (b[mid] < x) lo = mid + 1; else hi = mid; }\n"
            "        long long k = (long long)i + lo;\n"
            "        EMIT_A(i, k);\n"
            "    } else if (t < (long long)na + nb) {\n"
            "        int j = (int)(t - na);\n"
            "        mkey_t x = b[j];\n"
            "        int lo = 0, hi = na;\n"
            "        while (lo < hi) { int mid = (lo + hi) >> 1; if (a[mid] <= x) lo = mid + 1; else hi = mid; }\n"
            "        long long k = (long long)j + lo;\n"
            "        EMIT_B(j, k);\n"
            "    }\n}\n\n"
            + _sig(p) + " {\n" + _alloc(p, pinned)
            + f"    scatter_ranks<<<(unsigned)((n + {block - 1}) / {block}), {block}>>>(na, da, nb, db, dc{_ka(p)});\n"
            + _finish(p, pinned))


def _single_block(p: dict) -> str:
    """One block of 1024 threads walks the whole output, 4 outputs a thread per round, each thread searching its
    diagonal in global memory."""
    return (_pre(p) + _emit(p) + "#define IPT 4\n\n" + SPLIT
            + "__global__ void merge_one_block(int na, const mkey_t* a, int nb, const mkey_t* b, "
            f"mkey_t* c{_kp(p)}) {{\n"
            "    long long n = (long long)na + nb;\n"
            "    for (long long d = (long long)threadIdx.x * IPT; d < n; d += (long long)blockDim.x * IPT) {\n"
            "        int i = merge_split(a, na, b, nb, d);\n"
            "        int j = (int)(d - i);\n"
            "        int cnt = n - d < IPT ? (int)(n - d) : IPT;\n"
            "        long long k = d;\n"
            + SEQ_MERGE.replace("\n    ", "\n        ").replace("    for", "        for", 1)
            + "    }\n}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    merge_one_block<<<1, 1024>>>(na, da, nb, db, dc" + _ka(p) + ");\n" + _finish(p))


def _host_partition(p: dict) -> str:
    """The host finds the splits of chunks of CH outputs (binary searches on its own copy); a thread per chunk
    merges its CH outputs sequentially."""
    return (_pre(p) + _emit(p) + "#define CH 512\n\n" + SPLIT
            + "__global__ void merge_chunks(int na, const mkey_t* a, int nb, const mkey_t* b, const int* part, "
            f"int chunks, mkey_t* c{_kp(p)}) {{\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (t >= chunks) return;\n"
            "    long long n = (long long)na + nb;\n"
            "    long long d = (long long)t * CH;\n"
            "    int i = part[t];\n"
            "    int j = (int)(d - i);\n"
            "    int cnt = n - d < CH ? (int)(n - d) : CH;\n"
            "    long long k = d;\n"
            + SEQ_MERGE + "}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    int chunks = (int)((n + CH - 1) / CH);\n"
            "    int* hp = (int*)malloc((size_t)chunks * sizeof(int));\n"
            "    for (int t = 0; t < chunks; ++t) hp[t] = merge_split(a, na, b, nb, (long long)t * CH);\n"
            "    int* part; cudaMalloc(&part, (size_t)chunks * sizeof(int));\n"
            "    cudaMemcpy(part, hp, (size_t)chunks * sizeof(int), cudaMemcpyHostToDevice);\n"
            "    free(hp);\n"
            "    merge_chunks<<<(chunks + 127) / 128, 128>>>(na, da, nb, db, part, chunks, dc" + _ka(p) + ");\n"
            "    cudaFree(part);\n" + _finish(p))


def _reference(p: dict) -> str:
    mode = p["mode"]
    if mode == "vals":
        ea, eb = "c[k] = a[i]; vc[k] = va[i]; ++i;", "c[k] = b[j]; vc[k] = vb[j]; ++j;"
    elif mode == "origin":
        ea, eb = "c[k] = a[i]; src[k] = i; ++i;", "c[k] = b[j]; src[k] = -j - 1; ++j;"
    else:
        ea, eb = "c[k] = a[i]; ++i;", "c[k] = b[j]; ++j;"
    return ("#include <stddef.h>\n\n" + f"typedef {p['kt']} mkey_t;\n"
            + (f"typedef {p['vt']} mval_t;\n" if mode == "vals" else "") + "\n"
            + f"void merge_sorted({_params(p)}) {{\n"
            "    int i = 0, j = 0;\n"
            "    size_t k = 0;\n"
            "    while (i < na && j < nb) {\n"
            f"        if (b[j] < a[i]) {{ {eb} }}\n"
            f"        else {{ {ea} }}\n"
            "        ++k;\n"
            "    }\n"
            f"    while (i < na) {{ {ea} ++k; }}\n"
            f"    while (j < nb) {{ {eb} ++k; }}\n}}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    mode = MODES[index % len(MODES)]
    kt = "long long" if index % 5 == 3 else "int"
    vt = VTYPES[(index // 4) % len(VTYPES)]
    ra, rb = RATIOS[(index // 2) % len(RATIOS)]
    span = int(rng.choice([100, 10_000, 5_000_000, 1_000_000_000] + ([400_000_000_000] if kt == "long long" else [])))
    shape = ["overlap", "offset", "inside", "overlap", "disjoint"][(index // 3) % 5]
    if shape == "overlap":
        la, ha, lb, hb = -span, span, -span, span
    elif shape == "offset":
        la, ha, lb, hb = -span, span, 0, 2 * span
    elif shape == "inside":
        la, ha, lb, hb = -span, span, -span // 4, span // 4 + 1
    else:
        la, ha, lb, hb = -span, 0, 0, span
    p = {"mode": mode, "kt": kt, "vt": vt, "ratio": [ra, rb], "span": span, "shape": shape}
    # the reference merges at a few ns per output: ~60-120 ms at 14-24 M outputs
    n_time = int(rng.integers(14_000_000, 24_000_000)) // (2 if mode == "vals" and vt in ("double", "long long") else 1)
    na_t = n_time * ra // (ra + rb)
    nb_t = n_time - na_t
    da = {"kind": "sorted", "low": la, "high": ha}
    db = {"kind": "sorted", "low": lb, "high": hb}
    args = [{"name": "na", "role": "scalar", "ctype": "int"},
            {"name": "a", "role": "in", "ctype": kt, "length": "na", "dist": da}]
    if mode == "vals":
        vd = ({"kind": "uniform", "low": -1000.0, "high": 1000.0} if vt in ("float", "double")
              else {"kind": "randint", "low": -2_000_000_000, "high": 2_000_000_000})
        args.append({"name": "va", "role": "in", "ctype": vt, "length": "na", "dist": vd})
    args += [{"name": "nb", "role": "scalar", "ctype": "int"},
             {"name": "b", "role": "in", "ctype": kt, "length": "nb", "dist": db}]
    if mode == "vals":
        args.append({"name": "vb", "role": "in", "ctype": vt, "length": "nb", "dist": vd})
    args.append({"name": "c", "role": "out", "ctype": kt, "length": "na + nb"})
    if mode == "vals":
        args.append({"name": "vc", "role": "out", "ctype": vt, "length": "na + nb"})
    elif mode == "origin":
        args.append({"name": "src", "role": "out", "ctype": "int", "length": "na + nb"})
    what = {"vals": f"each key's {vt} payload (va, vb) goes along with it into vc",
            "origin": "src[k] receives the origin of c[k]: i for a[i], -(j + 1) for b[j]",
            "none": "keys only"}[mode]
    task = {
        "function_name": "merge_sorted",
        "description": (f"Stable merge of two ascending {kt} arrays a (na keys in [{la}, {ha})) and b (nb keys in "
                        f"[{lb}, {hb})) into the ascending array c of na + nb keys; among equal keys those of a come "
                        f"first, each array in its own order. {what[0].upper() + what[1:]}."),
        "returns": "void",
        "args": args,
        "size_configs": [{"na": 1, "nb": 1}, {"na": 300 * ra + 1, "nb": 77 * rb},
                         {"na": 3000 * ra + int(rng.integers(0, 999)), "nb": 3000 * rb + int(rng.integers(0, 999))},
                         {"na": na_t, "nb": nb_t}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["merge", "sorted", mode, kt.replace(" ", "_")],
    }
    ipt = [4, 8, 16][index % 3]
    variants = (
        Variant(f"merge_path_ipt{ipt}", ("register_blocking", "branch_divergent", "block_256"),
                _merge_path(p, ipt, 256)),
        Variant("block_merge_path_shared", ("shared_tiling", "coalesced", "register_blocking", "block_256"),
                _block_shared(p)),
        Variant("partition_then_merge", ("multi_pass", "two_level", "shared_tiling", "block_128"), _two_pass(p)),
        Variant("rank_scatter", ("naive", "branch_divergent", "block_256"), _rank_scatter(p, 256, False)),
        Variant("rank_scatter_pinned_b512", ("naive", "pinned", "block_512"), _rank_scatter(p, 512, True)),
        Variant("single_block", ("single_thread", "small_grid", "block_1024"), _single_block(p)),
        Variant("host_partition", ("host_compute", "thread_per_row", "strided", "block_128"), _host_partition(p)),
    )
    return GeneratedTask(task, variants, {**p, "n_time": n_time})


FAMILY = Family(
    name="merge_sorted_pairs",
    description="stable merge of two sorted int / long long arrays, with a payload, an origin index or keys only",
    generate=generate,
    n_tasks=50,
    tags=("merge", "integer"),
)
