#include <cuda_runtime.h>

// Slow: one thread per row walks its row serially, so a warp's accesses are a whole row apart (uncoalesced).
__global__ void jacobi_rows(int rows, int cols, const float* a, float* b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= 0 || i >= rows - 1) return;
    for (int j = 1; j < cols - 1; ++j) {
        size_t c = (size_t)i * cols + j;
        b[c] = 0.25f * (a[c - cols] + a[c + cols] + a[c - 1] + a[c + 1]);
    }
}

extern "C" void jacobi2d(int rows, int cols, int iters, float* grid) {
    if (rows < 3 || cols < 3 || iters <= 0) return;
    size_t bytes = (size_t)rows * cols * sizeof(float);
    float *da, *db;
    cudaMalloc(&da, bytes);
    cudaMalloc(&db, bytes);
    cudaMemcpy(da, grid, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(db, grid, bytes, cudaMemcpyHostToDevice);
    for (int it = 0; it < iters; ++it) {
        jacobi_rows<<<(rows + 63) / 64, 64>>>(rows, cols, da, db);
        float* t = da; da = db; db = t;
    }
    cudaMemcpy(grid, da, bytes, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
}
