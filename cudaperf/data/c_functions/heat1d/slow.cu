#include <cuda_runtime.h>

// Slow: every step is a launch of one single block of 1024 threads striding over the whole array.
__global__ void heat_step(int n, double r, const double* a, double* b) {
    for (int i = threadIdx.x + 1; i < n - 1; i += blockDim.x)
        b[i] = a[i] + r * (a[i - 1] - 2.0 * a[i] + a[i + 1]);
}

extern "C" void heat1d(int n, int steps, double r, double* u) {
    if (n < 3 || steps <= 0) return;
    size_t bytes = (size_t)n * sizeof(double);
    double *da, *db;
    cudaMalloc(&da, bytes);
    cudaMalloc(&db, bytes);
    cudaMemcpy(da, u, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(db, u, bytes, cudaMemcpyHostToDevice);
    for (int s = 0; s < steps; ++s) {
        heat_step<<<1, 1024>>>(n, r, da, db);
        double* t = da; da = db; db = t;
    }
    cudaMemcpy(u, da, bytes, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
}
