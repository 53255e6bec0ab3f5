#include <cuda_runtime.h>
#include <math.h>

// Slow: no shared-memory tiling, IEEE sqrtf and division, and 1024-thread blocks so only ~n/1024 SMs get work.
__global__ void forces_naive(int n, float eps2, const float* px, const float* py, const float* pz, const float* m,
                             float* ax, float* ay, float* az) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sx = 0.0f, sy = 0.0f, sz = 0.0f;
    for (int j = 0; j < n; ++j) {
        float dx = px[j] - px[i], dy = py[j] - py[i], dz = pz[j] - pz[i];
        float inv = 1.0f / sqrtf(dx * dx + dy * dy + dz * dz + eps2);
        float s = m[j] * inv * inv * inv;
        sx += dx * s;
        sy += dy * s;
        sz += dz * s;
    }
    ax[i] = sx;
    ay[i] = sy;
    az[i] = sz;
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
    forces_naive<<<(n + 1023) / 1024, 1024>>>(n, eps2, dpx, dpy, dpz, dm, dax, day, daz);
    cudaMemcpy(ax, dax, nb, cudaMemcpyDeviceToHost);
    cudaMemcpy(ay, day, nb, cudaMemcpyDeviceToHost);
    cudaMemcpy(az, daz, nb, cudaMemcpyDeviceToHost);
    cudaFree(dpx); cudaFree(dpy); cudaFree(dpz); cudaFree(dm);
    cudaFree(dax); cudaFree(day); cudaFree(daz);
}
