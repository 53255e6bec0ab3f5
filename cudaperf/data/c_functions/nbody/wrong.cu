#include <cuda_runtime.h>

// Bug: the separation vector is taken as r_i - r_j, so every force points away from the other bodies.
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
        for (int k = 0; k < B; ++k) {
            float4 p = sh[k];
            float dx = xi - p.x, dy = yi - p.y, dz = zi - p.z;
            float inv = rsqrtf(dx * dx + dy * dy + dz * dz + eps2);
            float s = p.w * inv * inv * inv;
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
    float *dpx, *dpy, *dpz, *dm, *dax, *day, *daz;
    cudaMalloc(&dpx, nb); cudaMalloc(&dpy, nb); cudaMalloc(&dpz, nb); cudaMalloc(&dm, nb);
    cudaMalloc(&dax, nb); cudaMalloc(&day, nb); cudaMalloc(&daz, nb);
    cudaMemcpy(dpx, px, nb, cudaMemcpyHostToDevice);
    cudaMemcpy(dpy, py, nb, cudaMemcpyHostToDevice);
    cudaMemcpy(dpz, pz, nb, cudaMemcpyHostToDevice);
    cudaMemcpy(dm, m, nb, cudaMemcpyHostToDevice);
    forces_tiled<<<(n + B - 1) / B, B>>>(n, eps2, dpx, dpy, dpz, dm, dax, day, daz);
    cudaMemcpy(ax, dax, nb, cudaMemcpyDeviceToHost);
    cudaMemcpy(ay, day, nb, cudaMemcpyDeviceToHost);
    cudaMemcpy(az, daz, nb, cudaMemcpyDeviceToHost);
    cudaFree(dpx); cudaFree(dpy); cudaFree(dpz); cudaFree(dm);
    cudaFree(dax); cudaFree(day); cudaFree(daz);
}
