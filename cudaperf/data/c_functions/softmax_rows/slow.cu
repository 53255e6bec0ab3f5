#include <cuda_runtime.h>
#include <math.h>

// Slow: a single block of 64 threads handles the rows one after another (one SM busy, barriers in every pass).
constexpr int BLOCK = 64;

__global__ void softmax_one_block(int rows, int cols, const double* x, double* y) {
    __shared__ double sh[BLOCK];
    for (int r = 0; r < rows; ++r) {
        const double* xr = x + (size_t)r * cols;
        double* yr = y + (size_t)r * cols;
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
            yr[c] = exp(xr[c] - m);
            s += yr[c];
        }
        sh[threadIdx.x] = s;
        __syncthreads();
        for (int h = BLOCK / 2; h > 0; h >>= 1) {
            if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];
            __syncthreads();
        }
        s = sh[0];
        __syncthreads();
        for (int c = threadIdx.x; c < cols; c += BLOCK) yr[c] /= s;
    }
}

extern "C" void softmax_rows(int rows, int cols, const double* x, double* y) {
    if (rows <= 0 || cols <= 0) return;
    size_t bytes = (size_t)rows * cols * sizeof(double);
    double *dx, *dy;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
    softmax_one_block<<<1, BLOCK>>>(rows, cols, dx, dy);
    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
}
