#include <cuda_runtime.h>
#include <math.h>

// Fast: one 256-thread block per row, coalesced two-pass statistics with warp-shuffle block reductions, fused GELU.
constexpr int BLOCK = 256;

__device__ float block_sum(float v) {
    __shared__ float ws[BLOCK / 32];
    __shared__ float result;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) ws[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < BLOCK / 32 ? ws[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) result = v;
    }
    __syncthreads();
    return result;
}

__global__ void ln_gelu_block_per_row(int cols, float eps, const float* __restrict__ x, const float* __restrict__ gamma,
                                      const float* __restrict__ beta, float* __restrict__ y) {
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) s += xr[c];
    float mean = block_sum(s) / cols;
    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        float d = xr[c] - mean;
        v += d * d;
    }
    float inv = rsqrtf(block_sum(v) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        float t = (xr[c] - mean) * inv * gamma[c] + beta[c];
        yr[c] = 0.5f * t * (1.0f + tanhf(0.7978845608f * (t + 0.044715f * t * t * t)));
    }
}

extern "C" void layernorm_gelu(int rows, int cols, float eps, const float* x, const float* gamma, const float* beta,
                               float* y) {
    if (rows <= 0 || cols <= 0) return;
    size_t bytes = (size_t)rows * cols * sizeof(float), cb = (size_t)cols * sizeof(float);
    float *dx, *dg, *db, *dy;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMalloc(&dg, cb);
    cudaMalloc(&db, cb);
    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dg, gamma, cb, cudaMemcpyHostToDevice);
    cudaMemcpy(db, beta, cb, cudaMemcpyHostToDevice);
    ln_gelu_block_per_row<<<rows, BLOCK>>>(cols, eps, dx, dg, db, dy);
    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dg);
    cudaFree(db);
}
