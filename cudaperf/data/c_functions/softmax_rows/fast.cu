#include <cuda_runtime.h>
#include <math.h>

// Fast: one 256-thread block per row; coalesced strided loops, warp-shuffle block reductions for max and sum.
constexpr int BLOCK = 256;

__device__ double block_reduce(double v, bool is_max) {
    __shared__ double ws[BLOCK / 32];
    __shared__ double result;
    for (int o = 16; o > 0; o >>= 1) {
        double u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmax(v, u) : v + u;
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) ws[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < BLOCK / 32 ? ws[lane] : (is_max ? -INFINITY : 0.0);
        for (int o = 16; o > 0; o >>= 1) {
            double u = __shfl_xor_sync(0xffffffffu, v, o);
            v = is_max ? fmax(v, u) : v + u;
        }
        if (lane == 0) result = v;
    }
    __syncthreads();
    return result;
}

__global__ void softmax_block_per_row(int cols, const double* __restrict__ x, double* __restrict__ y) {
    const double* xr = x + (size_t)blockIdx.x * cols;
    double* yr = y + (size_t)blockIdx.x * cols;
    double m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmax(m, xr[c]);
    m = block_reduce(m, true);
    double s = 0.0;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        double e = exp(xr[c] - m);
        yr[c] = e;
        s += e;
    }
    s = block_reduce(s, false);
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
