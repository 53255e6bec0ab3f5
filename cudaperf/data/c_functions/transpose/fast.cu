#include <cuda_runtime.h>

// Fast: 32x32 shared-memory tile (padded against bank conflicts), coalesced reads and writes, 32x8 threads.
constexpr int T = 32, R = 8;

__global__ void transpose_tile(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float tile[T][T + 1];
    int i0 = blockIdx.y * T, j0 = blockIdx.x * T;
    int j = j0 + threadIdx.x;
    for (int r = threadIdx.y; r < T; r += R) {
        int i = i0 + r;
        if (i < rows && j < cols) tile[r][threadIdx.x] = in[(size_t)i * cols + j];
    }
    __syncthreads();
    int oi = i0 + threadIdx.x; /* column of out (a row of in) */
    for (int r = threadIdx.y; r < T; r += R) {
        int oj = j0 + r; /* row of out (a column of in) */
        if (oj < cols && oi < rows) out[(size_t)oj * rows + oi] = tile[threadIdx.x][r];
    }
}

extern "C" void transpose(int rows, int cols, const float* in, float* out) {
    if (rows <= 0 || cols <= 0) return;
    size_t bytes = (size_t)rows * cols * sizeof(float);
    float *din, *dout;
    cudaMalloc(&din, bytes);
    cudaMalloc(&dout, bytes);
    cudaMemcpy(din, in, bytes, cudaMemcpyHostToDevice);
    dim3 block(T, R), grid((cols + T - 1) / T, (rows + T - 1) / T);
    transpose_tile<<<grid, block>>>(rows, cols, din, dout);
    cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
    cudaFree(din);
    cudaFree(dout);
}
