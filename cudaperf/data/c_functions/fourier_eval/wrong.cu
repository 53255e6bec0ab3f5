#include <cuda_runtime.h>

// Bug: the term loop stops at terms - 1, so the highest harmonic is always missing.
__global__ void fourier_kernel(int n, int terms, const float* __restrict__ a, const float* __restrict__ b,
                               const float* __restrict__ x, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = x[i];
    float s = 0.0f;
    for (int k = 0; k < terms - 1; ++k) {
        float sn, cs;
        sincosf((float)(k + 1) * xi, &sn, &cs);
        s += a[k] * cs + b[k] * sn;
    }
    y[i] = s;
}

extern "C" void fourier_eval(int n, int terms, const float* a, const float* b, const float* x, float* y) {
    if (n <= 0) return;
    if (terms < 0) terms = 0;
    size_t tb = (size_t)(terms > 0 ? terms : 1) * sizeof(float);
    size_t nb = (size_t)n * sizeof(float);
    float *da, *db, *dx, *dy;
    cudaMalloc(&da, tb);
    cudaMalloc(&db, tb);
    cudaMalloc(&dx, nb);
    cudaMalloc(&dy, nb);
    cudaMemcpy(da, a, (size_t)terms * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, (size_t)terms * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dx, x, nb, cudaMemcpyHostToDevice);
    fourier_kernel<<<(n + 255) / 256, 256>>>(n, terms, da, db, dx, dy);
    cudaMemcpy(y, dy, nb, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dx);
    cudaFree(dy);
}
