#include <cuda_runtime.h>

// Bug: the row loop runs to deg - 1, so the last non-zero of every row is ignored.
__global__ void spmv_scalar(int n, int deg, const int* __restrict__ col, const float* __restrict__ val,
                            const float* __restrict__ x, float* __restrict__ y) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n) return;
    size_t base = (size_t)row * deg;
    float s = 0.0f;
    for (int k = 0; k < deg - 1; ++k) s += val[base + k] * x[col[base + k]];
    y[row] = s;
}

extern "C" void spmv_iter(int n, int deg, int iters, const int* col, const float* val, float* x) {
    if (n <= 0 || iters <= 0) return;
    size_t nnz = (size_t)n * deg;
    int* dcol;
    float *dval, *dx, *dy;
    cudaMalloc(&dcol, (nnz > 0 ? nnz : 1) * sizeof(int));
    cudaMalloc(&dval, (nnz > 0 ? nnz : 1) * sizeof(float));
    cudaMalloc(&dx, (size_t)n * sizeof(float));
    cudaMalloc(&dy, (size_t)n * sizeof(float));
    cudaMemcpy(dcol, col, nnz * sizeof(int), cudaMemcpyHostToDevice);
    cudaMemcpy(dval, val, nnz * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dx, x, (size_t)n * sizeof(float), cudaMemcpyHostToDevice);
    for (int it = 0; it < iters; ++it) {
        spmv_scalar<<<(n + 255) / 256, 256>>>(n, deg, dcol, dval, dx, dy);
        float* t = dx; dx = dy; dy = t;
    }
    cudaMemcpy(x, dx, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dcol);
    cudaFree(dval);
    cudaFree(dx);
    cudaFree(dy);
}
