#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

// Slow: a single block of 128 threads, one row per thread (uncoalesced reads of A); y goes back to the host
// every step to be normalised there.
__global__ void gemv_rows(int n, const double* A, const double* x, double* y) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        double s = 0.0;
        for (int j = 0; j < n; ++j) s += A[(size_t)i * n + j] * x[j];
        y[i] = s;
    }
}

extern "C" double power_iteration(int n, int iters, const double* A, double* x) {
    if (n <= 0 || iters <= 0) return 0.0;
    size_t vb = (size_t)n * sizeof(double);
    double *dA, *dx, *dy;
    double* y = (double*)malloc(vb);
    cudaMalloc(&dA, (size_t)n * n * sizeof(double));
    cudaMalloc(&dx, vb);
    cudaMalloc(&dy, vb);
    cudaMemcpy(dA, A, (size_t)n * n * sizeof(double), cudaMemcpyHostToDevice);
    double norm = 0.0;
    for (int it = 0; it < iters; ++it) {
        cudaMemcpy(dx, x, vb, cudaMemcpyHostToDevice);
        gemv_rows<<<1, 128>>>(n, dA, dx, dy);
        cudaMemcpy(y, dy, vb, cudaMemcpyDeviceToHost);
        double ss = 0.0;
        for (int i = 0; i < n; ++i) ss += y[i] * y[i];
        norm = sqrt(ss);
        for (int i = 0; i < n; ++i) x[i] = y[i] / norm;
    }
    cudaFree(dA);
    cudaFree(dx);
    cudaFree(dy);
    free(y);
    return norm;
}
