#include <cuda_runtime.h>

// Fast: one thread per body; bodies stream through shared memory in float4 tiles of 128; rsqrtf.
constexpr int B = 128;

__global__ void forces_tiled(int n, float eps2, const float* __restrict__ px, const float* __restrict__ py,
                             const float* __restrict__ pz, const float* __restrict__ m, float* __restrict__ ax,
                             float* __restrict__ ay, float* __restrict__ az) {
    __shared__ float4 sh[B];
    int i = blockIdx.x * B + threadIdx.x;
    float xi = 0.0f, yi = 0.0f, zi = 0.0f;
    if (i < n) { xi = px[i]; yi = py[i]; zi = pz[i]; }
    float sx = 0.0f, sy = 0.0f, sz = 0.0f;
    for (int base = 0; base < n; base += B) {
        int j = base + threadIdx.x;
        sh[threadIdx.x] = j < n ? make_float4(px[j], py[j], pz[j], m[j]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < B; ++k) {
            float4 p = sh[k];
            float dx = p.x - xi, dy = p.y - yi, dz = p.z - zi;
            float inv = rsqrtf(dx * dx + dy * dy + dz * dz + eps2);
            float s = p.w * inv * inv * inv; /* padded bodies have zero mass */
            sx += dx * s;
            sy += dy * s;
            sz += dz * s;
        }
        __syncthreads();
    }
    if (i < n) { ax[i] = sx; ay[i] = sy; az[i] = sz; }
}

extern "C" void nbody(int n, float eps2, const float* px, const float* py, const float* pz, const float* m,
                      float* ax, float* ay, float* az) {
    if (n <= 0) return;
    size_t nb = (size_t)n * sizeof(float);
    float* d;
    cudaMalloc(&d, 7 * nb);
    float *dpx = d, *dpy = d + n, *dpz = d + 2 * (size_t)n, *dm = d + 3 * (size_t)n;
    float *dax = d + 4 * (size_t)n, *day = d + 5 * (size_t)n, *daz = d + 6 * (size_t)n;
    cudaMemcpy(dpx, px, nb, cudaMemcpyHostToDevice);
    cudaMemcpy(dpy, py, nb, cudaMemcpyHostToDevice);
    cudaMemcpy(dpz, pz, nb, cudaMemcpyHostToDevice);
    cudaMemcpy(dm, m, nb, cudaMemcpyHostToDevice);
    forces_tiled<<<(n + B - 1) / B, B>>>(n, eps2, dpx, dpy, dpz, dm, dax, day, daz);
    cudaMemcpy(ax, dax, nb, cudaMemcpyDeviceToHost);
    cudaMemcpy(ay, day, nb, cudaMemcpyDeviceToHost);
    cudaMemcpy(az, daz, nb, cudaMemcpyDeviceToHost);
    cudaFree(d);
}
