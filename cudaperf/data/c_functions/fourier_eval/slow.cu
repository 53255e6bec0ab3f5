#include <cuda_runtime.h>

// Slow: a single block of 128 threads strides over all points, reading the coefficients from global memory.
__global__ void fourier_kernel(int n, int terms, const float* a, const float* b, const float* x, float* y) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float s = 0.0f;
        for (int k = 0; k < terms; ++k) {
            float t = (float)(k + 1) * x[i];
            s += a[k] * cosf(t) + b[k] * sinf(t);
        }
        y[i] = s;
    }
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
    fourier_kernel<<<1, 128>>>(n, terms, da, db, dx, dy);
    cudaMemcpy(y, dy, nb, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dx);
    cudaFree(dy);
}
