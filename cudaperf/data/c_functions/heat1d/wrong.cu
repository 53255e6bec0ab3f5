#include <cuda_runtime.h>

// Bug: also updates the two end points (treating the outside as 0) instead of keeping them fixed.
__global__ void heat_step(int n, double r, const double* __restrict__ a, double* __restrict__ b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double left = i > 0 ? a[i - 1] : 0.0;
    double right = i < n - 1 ? a[i + 1] : 0.0;
    b[i] = a[i] + r * (left - 2.0 * a[i] + right);
}

extern "C" void heat1d(int n, int steps, double r, double* u) {
    if (n < 3 || steps <= 0) return;
    size_t bytes = (size_t)n * sizeof(double);
    double *da, *db;
    cudaMalloc(&da, bytes);
    cudaMalloc(&db, bytes);
    cudaMemcpy(da, u, bytes, cudaMemcpyHostToDevice);
    int blocks = (n + 255) / 256;
    for (int s = 0; s < steps; ++s) {
        heat_step<<<blocks, 256>>>(n, r, da, db);
        double* t = da; da = db; db = t;
    }
    cudaMemcpy(u, da, bytes, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
}
