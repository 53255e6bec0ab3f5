"""All-pairs softened gravity: accelerations of n bodies (SoA inputs), or a few kick-drift steps (AoS state).

Parameters: element type (float/double), mode ("acc": accelerations from SoA positions and masses; "step":
``steps`` symplectic-Euler steps updating interleaved positions and velocities), softening eps2, time step, body
count. O(n^2) work per step, so tiled GPU variants win by far even with the transfers counted.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

EPS2 = [0.01, 0.02, 0.05, 0.03, 0.1]
DT = [1e-4, 2e-4, 5e-4, 1e-3]


class _M:
    def __init__(self, t: str, mode: str):
        self.t, self.mode = t, mode
        self.f = "f" if t == "float" else ""
        self.one = "1.0f" if t == "float" else "1.0"
        self.st = 1 if mode == "acc" else 3
        self.rs = "rsqrtf" if t == "float" else "rsqrt"

    @property
    def sig(self) -> str:
        t = self.t
        if self.mode == "acc":
            return (f"int n, {t} eps2, const {t}* px, const {t}* py, const {t}* pz, const {t}* m,"
                    f" {t}* ax, {t}* ay, {t}* az")
        return f"int n, int steps, {t} dt, {t} eps2, const {t}* m, {t}* pos, {t}* vel"

    @property
    def out_params(self) -> str:
        t = self.t
        if self.mode == "acc":
            return f"{t}* __restrict__ ax, {t}* __restrict__ ay, {t}* __restrict__ az"
        return f"{t} dt, const {t}* __restrict__ pold, {t}* __restrict__ pnew, {t}* __restrict__ vel"

    def in_params(self) -> str:
        t = self.t
        return (f"int n, {t} eps2, const {t}* __restrict__ px, const {t}* __restrict__ py,"
                f" const {t}* __restrict__ pz, const {t}* __restrict__ m")

    def epilogue(self, i: str, sx: str, sy: str, sz: str, ind: str) -> str:
        if self.mode == "acc":
            return f"{ind}{{ ax[{i}] = {sx}; ay[{i}] = {sy}; az[{i}] = {sz}; }}\n"
        t = self.t
        return (f"{ind}{{\n"
                f"{ind}    size_t b = (size_t)3 * ({i});\n"
                f"{ind}    {t} vx = vel[b] + {sx} * dt, vy = vel[b + 1] + {sy} * dt, vz = vel[b + 2] + {sz} * dt;\n"
                f"{ind}    vel[b] = vx; vel[b + 1] = vy; vel[b + 2] = vz;\n"
                f"{ind}    pnew[b] = pold[b] + vx * dt; pnew[b + 1] = pold[b + 1] + vy * dt;"
                f" pnew[b + 2] = pold[b + 2] + vz * dt;\n"
                f"{ind}}}\n")

    def head(self) -> str:
        return f"#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n\n#define ST {self.st}\n\n"

    def inter(self, xj: str, yj: str, zj: str, mj: str, fast: bool, ind: str, acc=("sx", "sy", "sz"),
              me=("xi", "yi", "zi")) -> str:
        t = self.t
        inv = f"{self.rs}(d2)" if fast else f"{self.one} / sqrt{self.f}(d2)"
        sx, sy, sz = acc
        xi, yi, zi = me
        return (f"{ind}{{\n"
                f"{ind}    {t} dx = {xj} - {xi}, dy = {yj} - {yi}, dz = {zj} - {zi};\n"
                f"{ind}    {t} d2 = dx * dx + dy * dy + dz * dz + eps2;\n"
                f"{ind}    {t} inv = {inv};\n"
                f"{ind}    {t} s = {mj} * inv * inv * inv;\n"
                f"{ind}    {sx} += dx * s; {sy} += dy * s; {sz} += dz * s;\n"
                f"{ind}}}\n")

    def host(self, launch: str, pre: str = "", post: str = "") -> str:
        """Host entry; ``launch`` uses {ARGS} for the kernel's arguments."""
        t = self.t
        if self.mode == "acc":
            args = "n, eps2, dpx, dpy, dpz, dm, dax, day, daz"
            return (f'extern "C" void nbody({self.sig}) {{\n'
                    "    if (n <= 0) return;\n"
                    f"    size_t nb = (size_t)n * sizeof({t});\n"
                    f"    {t} *dpx, *dpy, *dpz, *dm, *dax, *day, *daz;\n"
                    "    cudaMalloc(&dpx, nb); cudaMalloc(&dpy, nb); cudaMalloc(&dpz, nb); cudaMalloc(&dm, nb);\n"
                    "    cudaMalloc(&dax, nb); cudaMalloc(&day, nb); cudaMalloc(&daz, nb);\n"
                    "    cudaMemcpy(dpx, px, nb, cudaMemcpyHostToDevice); cudaMemcpy(dpy, py, nb, cudaMemcpyHostToDevice);\n"
                    "    cudaMemcpy(dpz, pz, nb, cudaMemcpyHostToDevice); cudaMemcpy(dm, m, nb, cudaMemcpyHostToDevice);\n"
                    + pre + launch.replace("{ARGS}", args) + post
                    + "    cudaMemcpy(ax, dax, nb, cudaMemcpyDeviceToHost); cudaMemcpy(ay, day, nb, cudaMemcpyDeviceToHost);\n"
                    "    cudaMemcpy(az, daz, nb, cudaMemcpyDeviceToHost);\n"
                    "    cudaFree(dpx); cudaFree(dpy); cudaFree(dpz); cudaFree(dm);\n"
                    "    cudaFree(dax); cudaFree(day); cudaFree(daz);\n}\n")
        args = "n, eps2, pa, pa + 1, pa + 2, dm, dt, pa, pb, dv"
        return (f'extern "C" void nbody({self.sig}) {{\n'
                "    if (n <= 0) return;\n"
                f"    size_t nb = (size_t)n * sizeof({t}), sb = 3 * nb;\n"
                f"    {t} *pa, *pb, *dv, *dm;\n"
                "    cudaMalloc(&pa, sb); cudaMalloc(&pb, sb); cudaMalloc(&dv, sb); cudaMalloc(&dm, nb);\n"
                "    cudaMemcpy(pa, pos, sb, cudaMemcpyHostToDevice); cudaMemcpy(dv, vel, sb, cudaMemcpyHostToDevice);\n"
                "    cudaMemcpy(dm, m, nb, cudaMemcpyHostToDevice);\n"
                + pre
                + "    for (int s = 0; s < steps; ++s) {\n"
                + launch.replace("{ARGS}", args)
                + f"        {{ {t}* tmp = pa; pa = pb; pb = tmp; }}\n"
                "    }\n" + post
                + "    cudaMemcpy(pos, pa, sb, cudaMemcpyDeviceToHost); cudaMemcpy(vel, dv, sb, cudaMemcpyDeviceToHost);\n"
                "    cudaFree(pa); cudaFree(pb); cudaFree(dv); cudaFree(dm);\n}\n")


def _naive(M: _M, block: int, ldg: bool) -> str:
    t = M.t
    ld = (lambda e: f"__ldg(&{e})") if ldg else (lambda e: e)
    return (M.head()
            + f"__global__ void forces({M.in_params()}, {M.out_params}) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            f"    {t} xi = px[(size_t)i * ST], yi = py[(size_t)i * ST], zi = pz[(size_t)i * ST];\n"
            f"    {t} sx = 0, sy = 0, sz = 0;\n"
            "    for (int j = 0; j < n; ++j)\n"
            + M.inter(ld("px[(size_t)j * ST]"), ld("py[(size_t)j * ST]"), ld("pz[(size_t)j * ST]"), ld("m[j]"),
                      False, "    ")
            + M.epilogue("i", "sx", "sy", "sz", "    ") + "}\n\n"
            + M.host(f"    forces<<<(n + {block - 1}) / {block}, {block}>>>({{ARGS}});\n"))


def _tile_load(t: str) -> str:
    return ("        int j = base + threadIdx.x;\n"
            "        if (j < n) {\n"
            "            shx[threadIdx.x] = px[(size_t)j * ST]; shy[threadIdx.x] = py[(size_t)j * ST];\n"
            "            shz[threadIdx.x] = pz[(size_t)j * ST]; shm[threadIdx.x] = m[j];\n"
            "        } else {\n"
            "            shx[threadIdx.x] = 0; shy[threadIdx.x] = 0; shz[threadIdx.x] = 0; shm[threadIdx.x] = 0;\n"
            "        }\n"
            "        __syncthreads();\n")


def _tiled(M: _M, block: int, fast: bool) -> str:
    t = M.t
    return (M.head() + f"#define B {block}\n\n"
            + f"__global__ void forces_tiled({M.in_params()}, {M.out_params}) {{\n"
            f"    __shared__ {t} shx[B], shy[B], shz[B], shm[B];\n"
            "    int i = blockIdx.x * B + threadIdx.x;\n"
            f"    {t} xi = 0, yi = 0, zi = 0;\n"
            "    if (i < n) { xi = px[(size_t)i * ST]; yi = py[(size_t)i * ST]; zi = pz[(size_t)i * ST]; }\n"
            f"    {t} sx = 0, sy = 0, sz = 0;\n"
            "    for (int base = 0; base < n; base += B) {\n"
            + _tile_load(t)
            + "#pragma unroll 8\n"
            "        for (int k = 0; k < B; ++k)\n"
            + M.inter("shx[k]", "shy[k]", "shz[k]", "shm[k]", fast, "        ")
            + "        __syncthreads();\n    }\n"
            "    if (i < n)\n" + M.epilogue("i", "sx", "sy", "sz", "    ") + "}\n\n"
            + M.host(f"    forces_tiled<<<(n + B - 1) / B, B>>>({{ARGS}});\n"))


def _regblock(M: _M) -> str:
    t = M.t
    return (M.head() + "#define B 128\n\n"
            + f"__global__ void forces_rb2({M.in_params()}, {M.out_params}) {{\n"
            f"    __shared__ {t} shx[B], shy[B], shz[B], shm[B];\n"
            "    // each thread owns two bodies, i0 and i0 + B, that share every staged source body\n"
            "    int i0 = blockIdx.x * 2 * B + threadIdx.x, i1 = i0 + B;\n"
            f"    {t} x0 = 0, y0 = 0, z0 = 0, x1 = 0, y1 = 0, z1 = 0;\n"
            "    if (i0 < n) { x0 = px[(size_t)i0 * ST]; y0 = py[(size_t)i0 * ST]; z0 = pz[(size_t)i0 * ST]; }\n"
            "    if (i1 < n) { x1 = px[(size_t)i1 * ST]; y1 = py[(size_t)i1 * ST]; z1 = pz[(size_t)i1 * ST]; }\n"
            f"    {t} ax0 = 0, ay0 = 0, az0 = 0, ax1 = 0, ay1 = 0, az1 = 0;\n"
            "    for (int base = 0; base < n; base += B) {\n"
            + _tile_load(t)
            + "#pragma unroll 4\n"
            "        for (int k = 0; k < B; ++k) {\n"
            + M.inter("shx[k]", "shy[k]", "shz[k]", "shm[k]", True, "            ", ("ax0", "ay0", "az0"),
                      ("x0", "y0", "z0"))
            + M.inter("shx[k]", "shy[k]", "shz[k]", "shm[k]", True, "            ", ("ax1", "ay1", "az1"),
                      ("x1", "y1", "z1"))
            + "        }\n        __syncthreads();\n    }\n"
            "    if (i0 < n)\n" + M.epilogue("i0", "ax0", "ay0", "az0", "    ")
            + "    if (i1 < n)\n" + M.epilogue("i1", "ax1", "ay1", "az1", "    ") + "}\n\n"
            + M.host("    forces_rb2<<<(n + 2 * B - 1) / (2 * B), B>>>({ARGS});\n"))


def _block_per_body(M: _M) -> str:
    t = M.t
    return (M.head() + "#define B 128\n\n"
            + f"__global__ void forces_bpb({M.in_params()}, {M.out_params}) {{\n"
            f"    __shared__ {t} rx[B], ry[B], rz[B];\n"
            "    int i = blockIdx.x;\n"
            f"    {t} xi = px[(size_t)i * ST], yi = py[(size_t)i * ST], zi = pz[(size_t)i * ST];\n"
            f"    {t} sx = 0, sy = 0, sz = 0;\n"
            "    for (int j = threadIdx.x; j < n; j += B)\n"
            + M.inter("px[(size_t)j * ST]", "py[(size_t)j * ST]", "pz[(size_t)j * ST]", "m[j]", False, "    ")
            + "    rx[threadIdx.x] = sx; ry[threadIdx.x] = sy; rz[threadIdx.x] = sz;\n"
            "    __syncthreads();\n"
            "    for (int h = B / 2; h > 0; h >>= 1) {\n"
            "        if (threadIdx.x < h) {\n"
            "            rx[threadIdx.x] += rx[threadIdx.x + h];\n"
            "            ry[threadIdx.x] += ry[threadIdx.x + h];\n"
            "            rz[threadIdx.x] += rz[threadIdx.x + h];\n"
            "        }\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0)\n" + M.epilogue("i", "rx[0]", "ry[0]", "rz[0]", "    ") + "}\n\n"
            + M.host("    forces_bpb<<<n, B>>>({ARGS});\n"))


def _atomics(M: _M) -> str:
    t = M.t
    kern = (f"__global__ void forces_part({M.in_params()}, {t}* gx, {t}* gy, {t}* gz, int chunk) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            "    int j0 = blockIdx.y * chunk, j1 = j0 + chunk < n ? j0 + chunk : n;\n"
            f"    {t} xi = px[(size_t)i * ST], yi = py[(size_t)i * ST], zi = pz[(size_t)i * ST];\n"
            f"    {t} sx = 0, sy = 0, sz = 0;\n"
            "    for (int j = j0; j < j1; ++j)\n"
            + M.inter("px[(size_t)j * ST]", "py[(size_t)j * ST]", "pz[(size_t)j * ST]", "m[j]", False, "    ")
            + "    atomicAdd(gx + i, sx); atomicAdd(gy + i, sy); atomicAdd(gz + i, sz);\n}\n\n")
    common = ("    const int PARTS = 16;\n"
              "    int chunk = (n + PARTS - 1) / PARTS;\n"
              "    dim3 grid((n + 255) / 256, PARTS);\n")
    if M.mode == "acc":
        launch = ("    cudaMemset(dax, 0, nb); cudaMemset(day, 0, nb); cudaMemset(daz, 0, nb);\n" + common
                  + "    forces_part<<<grid, 256>>>(n, eps2, dpx, dpy, dpz, dm, dax, day, daz, chunk);\n")
        return M.head() + kern + M.host(launch)
    upd = (f"__global__ void kick_drift(int n, {t} dt, const {t}* gx, const {t}* gy, const {t}* gz,"
           f" const {t}* __restrict__ pold, {t}* __restrict__ pnew, {t}* __restrict__ vel) {{\n"
           "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "    if (i >= n) return;\n"
           + M.epilogue("i", "gx[i]", "gy[i]", "gz[i]", "    ") + "}\n\n")
    pre = (f"    {t} *gx, *gy, *gz;\n"
           "    cudaMalloc(&gx, nb); cudaMalloc(&gy, nb); cudaMalloc(&gz, nb);\n" + common)
    launch = ("        cudaMemset(gx, 0, nb); cudaMemset(gy, 0, nb); cudaMemset(gz, 0, nb);\n"
              "        forces_part<<<grid, 256>>>(n, eps2, pa, pa + 1, pa + 2, dm, gx, gy, gz, chunk);\n"
              "        kick_drift<<<(n + 255) / 256, 256>>>(n, dt, gx, gy, gz, pa, pb, dv);\n")
    post = "    cudaFree(gx); cudaFree(gy); cudaFree(gz);\n"
    return M.head() + kern + upd + M.host(launch, pre, post)


def _packed(M: _M) -> str:
    """acc mode: the host interleaves x, y, z, m into one array; the kernel stages it through shared memory."""
    t = M.t
    if t == "float":
        ld = "        float4 q = j < n ? P[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n        sh[threadIdx.x] = q;\n"
        sht, pt, rd = "float4", "float4", "float4 q = sh[k];"
    else:
        ld = ("        sa[threadIdx.x] = j < n ? P[2 * j] : make_double2(0.0, 0.0);\n"
              "        sb[threadIdx.x] = j < n ? P[2 * j + 1] : make_double2(0.0, 0.0);\n")
        sht, pt, rd = "", "double2", "double2 qa = sa[k], qb = sb[k];"
    sht_decl = f"__shared__ {sht} sh[B];" if t == "float" else "__shared__ double2 sa[B], sb[B];"
    return (M.head() + "#define B 128\n\n"
            + f"__global__ void forces_packed(int n, {t} eps2, const {pt}* __restrict__ P, {t}* __restrict__ ax,"
            f" {t}* __restrict__ ay, {t}* __restrict__ az) {{\n"
            f"    {sht_decl}\n"
            "    int i = blockIdx.x * B + threadIdx.x;\n"
            f"    {t} xi = 0, yi = 0, zi = 0;\n"
            + ("    if (i < n) { float4 me = P[i]; xi = me.x; yi = me.y; zi = me.z; }\n" if t == "float" else
               "    if (i < n) { double2 me = P[2 * i]; double2 me2 = P[2 * i + 1]; xi = me.x; yi = me.y; zi = me2.x; }\n")
            + f"    {t} sx = 0, sy = 0, sz = 0;\n"
            "    for (int base = 0; base < n; base += B) {\n"
            "        int j = base + threadIdx.x;\n" + ld
            + "        __syncthreads();\n"
            "#pragma unroll 8\n"
            "        for (int k = 0; k < B; ++k) {\n"
            f"            {rd}\n"
            + (M.inter("q.x", "q.y", "q.z", "q.w", True, "            ") if t == "float"
               else M.inter("qa.x", "qa.y", "qb.x", "qb.y", True, "            "))
            + "        }\n        __syncthreads();\n    }\n"
            "    if (i < n) { ax[i] = sx; ay[i] = sy; az[i] = sz; }\n}\n\n"
            + f'extern "C" void nbody({M.sig}) {{\n'
            "    if (n <= 0) return;\n"
            f"    size_t nb = (size_t)n * sizeof({t});\n"
            f"    {t}* hp = ({t}*)malloc(4 * nb);\n"
            "    for (int i = 0; i < n; ++i) {\n"
            "        hp[4 * (size_t)i] = px[i]; hp[4 * (size_t)i + 1] = py[i];\n"
            "        hp[4 * (size_t)i + 2] = pz[i]; hp[4 * (size_t)i + 3] = m[i];\n"
            "    }\n"
            f"    {t} *dp, *dax, *day, *daz;\n"
            "    cudaMalloc(&dp, 4 * nb); cudaMalloc(&dax, nb); cudaMalloc(&day, nb); cudaMalloc(&daz, nb);\n"
            "    cudaMemcpy(dp, hp, 4 * nb, cudaMemcpyHostToDevice);\n"
            f"    forces_packed<<<(n + B - 1) / B, B>>>(n, eps2, (const {pt}*)dp, dax, day, daz);\n"
            "    cudaMemcpy(ax, dax, nb, cudaMemcpyDeviceToHost); cudaMemcpy(ay, day, nb, cudaMemcpyDeviceToHost);\n"
            "    cudaMemcpy(az, daz, nb, cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dp); cudaFree(dax); cudaFree(day); cudaFree(daz); free(hp);\n}\n")


def _roundtrip(M: _M) -> str:
    """step mode: naive kernel, and the whole state travels to the host and back after every step."""
    body = _naive(M, 128, False)
    launch_old = "    forces<<<(n + 127) / 128, 128>>>(n, eps2, pa, pa + 1, pa + 2, dm, dt, pa, pb, dv);\n"
    assert launch_old in body
    launch_new = (launch_old
                  + "        cudaMemcpy(pos, pb, sb, cudaMemcpyDeviceToHost); cudaMemcpy(vel, dv, sb, cudaMemcpyDeviceToHost);\n"
                  "        cudaMemcpy(pb, pos, sb, cudaMemcpyHostToDevice); cudaMemcpy(dv, vel, sb, cudaMemcpyHostToDevice);\n")
    return body.replace(launch_old, launch_new)


def _reference(M: _M) -> str:
    t, f, one = M.t, M.f, M.one
    inter = (f"            {t} dx = XJ - xi, dy = YJ - yi, dz = ZJ - zi;\n"
             f"            {t} d2 = dx * dx + dy * dy + dz * dz + eps2;\n"
             f"            {t} inv = {one} / sqrt{f}(d2);\n"
             f"            {t} s = m[j] * inv * inv * inv;\n"
             "            sx += dx * s; sy += dy * s; sz += dz * s;\n")
    if M.mode == "acc":
        return ("#include <math.h>\n\n"
                f"void nbody({M.sig}) {{\n"
                "    for (int i = 0; i < n; ++i) {\n"
                f"        {t} xi = px[i], yi = py[i], zi = pz[i];\n"
                f"        {t} sx = 0, sy = 0, sz = 0;\n"
                "        for (int j = 0; j < n; ++j) {\n"
                + inter.replace("XJ", "px[j]").replace("YJ", "py[j]").replace("ZJ", "pz[j]")
                + "        }\n"
                "        ax[i] = sx; ay[i] = sy; az[i] = sz;\n    }\n}\n")
    return ("#include <math.h>\n#include <stdlib.h>\n\n"
            f"void nbody({M.sig}) {{\n"
            f"    {t}* acc = ({t}*)malloc((size_t)3 * n * sizeof({t}) + 1);\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        for (int i = 0; i < n; ++i) {\n"
            f"            {t} xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];\n"
            f"            {t} sx = 0, sy = 0, sz = 0;\n"
            "            for (int j = 0; j < n; ++j) {\n"
            + inter.replace("            ", "                ").replace("XJ", "pos[3 * j]")
            .replace("YJ", "pos[3 * j + 1]").replace("ZJ", "pos[3 * j + 2]")
            + "            }\n"
            "            acc[3 * i] = sx; acc[3 * i + 1] = sy; acc[3 * i + 2] = sz;\n"
            "        }\n"
            "        for (int k = 0; k < 3 * n; ++k) {\n"
            "            vel[k] = vel[k] + acc[k] * dt;\n"
            "            pos[k] = pos[k] + vel[k] * dt;\n"
            "        }\n"
            "    }\n"
            "    free(acc);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    mode = "acc" if (index // 2) % 2 == 0 else "step"
    M = _M(t, mode)
    eps2 = EPS2[index % len(EPS2)]
    steps = int(rng.integers(2, 6)) if mode == "step" else 1
    # body pairs times steps at the timing size (~3 ns per float pair unloaded, ~4.5 per double)
    pairs = (24e6 if t == "float" else 13e6) * float(rng.uniform(0.8, 1.2))
    n_time = int((pairs / steps) ** 0.5) + int(rng.integers(1, 64))
    if t == "float":
        tol = {"rtol": 1e-3, "atol": 0.05} if mode == "acc" else {"rtol": 1e-3, "atol": 1e-3}
    else:
        tol = {"rtol": 1e-8, "atol": 1e-8}
    pos = {"kind": "uniform", "low": -1.0, "high": 1.0}
    mass = {"kind": "uniform", "low": 0.5, "high": 1.5}
    if mode == "acc":
        args = [{"name": "n", "role": "scalar", "ctype": "int"},
                {"name": "eps2", "role": "scalar", "ctype": t, "dist": {"kind": "const", "value": eps2}},
                {"name": "px", "role": "in", "ctype": t, "length": "n", "dist": pos},
                {"name": "py", "role": "in", "ctype": t, "length": "n", "dist": pos},
                {"name": "pz", "role": "in", "ctype": t, "length": "n", "dist": pos},
                {"name": "m", "role": "in", "ctype": t, "length": "n", "dist": mass},
                {"name": "ax", "role": "out", "ctype": t, "length": "n"},
                {"name": "ay", "role": "out", "ctype": t, "length": "n"},
                {"name": "az", "role": "out", "ctype": t, "length": "n"}]
        desc = (f"Softened gravitational accelerations of n bodies over {t}s (G = 1, SoA inputs): "
                "a_i = sum_j m_j (r_j - r_i) / (|r_j - r_i|^2 + eps2)^(3/2) over all j (j == i adds zero), "
                f"eps2 = {eps2}.")
        configs = [{"n": 1}, {"n": 100 + int(rng.integers(1, 30))}, {"n": 1000 + int(rng.integers(1, 60))},
                   {"n": n_time}]
    else:
        dt = DT[int(rng.integers(len(DT)))]
        args = [{"name": "n", "role": "scalar", "ctype": "int"},
                {"name": "steps", "role": "scalar", "ctype": "int", "dist": {"kind": "const", "value": steps}},
                {"name": "dt", "role": "scalar", "ctype": t, "dist": {"kind": "const", "value": dt}},
                {"name": "eps2", "role": "scalar", "ctype": t, "dist": {"kind": "const", "value": eps2}},
                {"name": "m", "role": "in", "ctype": t, "length": "n", "dist": mass},
                {"name": "pos", "role": "inout", "ctype": t, "length": "3 * n", "dist": pos},
                {"name": "vel", "role": "inout", "ctype": t, "length": "3 * n",
                 "dist": {"kind": "uniform", "low": -0.1, "high": 0.1}}]
        desc = (f"{steps} symplectic Euler steps of a softened n-body system over {t}s (G = 1). pos and vel are "
                "interleaved (x, y, z per body). Each step: a_i = sum_j m_j (r_j - r_i) / (|r_j - r_i|^2 + "
                "eps2)^(3/2) from the positions at the start of the step; then v += a * dt; r += v * dt "
                f"(dt = {dt}, eps2 = {eps2}).")
        configs = [{"n": 7}, {"n": 257}, {"n": 1000 + int(rng.integers(1, 60))}, {"n": n_time}]
    task = {
        "function_name": "nbody",
        "description": desc,
        "returns": "void",
        "args": args,
        "size_configs": configs,
        "tolerance": tol,
        "reference_c": _reference(M),
        "tags": ["n-body", "all-pairs", "compute-bound", t],
    }
    dr = ("device_resident", "double_buffered") if mode == "step" else ()
    variants = [
        Variant("naive_b256", ("naive", "pageable", "block_256", *dr), _naive(M, 256, False)),
        Variant("naive_ldg_b32", ("naive", "readonly_cache", "block_32", *dr), _naive(M, 32, True)),
        Variant("tiled_rsqrt_b128", ("shared_tiling", "unrolled", "block_128", *dr), _tiled(M, 128, True)),
        Variant("tiled_sqrt_b256", ("shared_tiling", "unrolled", "block_256", *dr), _tiled(M, 256, False)),
        Variant("register_blocked2", ("shared_tiling", "register_blocking", "unrolled", "block_128", *dr),
                _regblock(M)),
        Variant("block_per_body", ("block_per_row", "tree_reduction", "block_128", *dr), _block_per_body(M)),
        Variant("split_atomics", ("atomics", "two_level", "block_256", *(("multi_pass",) if mode == "step" else ())),
                _atomics(M)),
    ]
    if mode == "acc":
        variants.append(Variant("host_packed_aos", ("host_compute", "vectorized", "shared_tiling", "unrolled",
                                                    "block_128"), _packed(M)))
    else:
        variants.append(Variant("step_roundtrip", ("naive", "in_loop_transfers", "extra_transfers", "block_128"),
                                _roundtrip(M)))
    return GeneratedTask(task, tuple(variants), {"type": t, "mode": mode, "eps2": eps2, "steps": steps,
                                                 "n_time": n_time})


FAMILY = Family(
    name="nbody",
    description="all-pairs softened gravity: accelerations (SoA) or a few kick-drift steps (AoS), float/double",
    generate=generate,
    n_tasks=50,
    tags=("n-body", "compute-bound"),
)
