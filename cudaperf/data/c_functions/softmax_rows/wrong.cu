#include <cuda_runtime.h>
#include <math.h>

// Bug: the denominator sums only the first cols - 1 exponentials (off by one), so every row sums to more than 1.
constexpr int BLOCK = 256;

__global__ void softmax_block_per_row(int cols, const double* __restrict__ x, double* __restrict__ y) {
    __shared__ double sh[BLOCK];
    const double* xr = x + (size_t)blockIdx.x * cols;
    double* yr = y + (size_t)blockIdx.x * cols;
    double m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmax(m, xr[c]);
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int h = BLOCK / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + h]);
        __syncthreads();
    }
    m = sh[0];
    __syncthreads();
    double s = 0.0;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        double e = exp(xr[c] - m);
        yr[c] = e;
        if (c < cols - 1) s += e;
    }
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int h = BLOCK / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];
        __syncthreads();
    }
    s = sh[0];
    for (int c = threadIdx.x; c < cols; c += BLOCK) yr[c] /= s;
}

extern "C" void softmax_rows(int rows, int cols, const double* x, double* y) {
    if (rows <= 0 || cols <= 0) return;
    size_t bytes = (size_t)rows * cols * sizeof(double);
    double *dx, *dy;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
    softmax_block_per_row<<<rows, BLOCK>>>(cols, dx, dy);
    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
}
