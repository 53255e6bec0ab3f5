#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

// Fast: 16x16 blocks load a clamped (16+2r)^2 tile and the weights into shared memory; host builds the weights.
constexpr int BS = 16;

__global__ void blur_tiled(int rows, int cols, int radius, const float* __restrict__ img, const float* __restrict__ w,
                           float* __restrict__ out) {
    extern __shared__ float sm[];
    int d = 2 * radius + 1, tw = BS + 2 * radius;
    float* tile = sm;
    float* ws = sm + tw * tw;
    int tid = threadIdx.y * BS + threadIdx.x;
    for (int t = tid; t < d * d; t += BS * BS) ws[t] = w[t];
    int r0 = blockIdx.y * BS - radius, c0 = blockIdx.x * BS - radius;
    for (int t = tid; t < tw * tw; t += BS * BS) {
        int gi = min(max(r0 + t / tw, 0), rows - 1);
        int gj = min(max(c0 + t % tw, 0), cols - 1);
        tile[t] = img[(size_t)gi * cols + gj];
    }
    __syncthreads();
    int i = blockIdx.y * BS + threadIdx.y, j = blockIdx.x * BS + threadIdx.x;
    if (i >= rows || j >= cols) return;
    float s = 0.0f;
    for (int dy = 0; dy < d; ++dy)
        for (int dx = 0; dx < d; ++dx) s += ws[dy * d + dx] * tile[(threadIdx.y + dy) * tw + threadIdx.x + dx];
    out[(size_t)i * cols + j] = s;
}

extern "C" void gaussian_blur(int rows, int cols, int radius, float sigma, const float* img, float* out) {
    if (rows <= 0 || cols <= 0 || radius < 0) return;
    int d = 2 * radius + 1;
    double* wd = (double*)malloc((size_t)d * d * sizeof(double));
    float* w = (float*)malloc((size_t)d * d * sizeof(float));
    double total = 0.0;
    for (int dy = -radius; dy <= radius; ++dy)
        for (int dx = -radius; dx <= radius; ++dx) {
            double v = exp(-(double)(dx * dx + dy * dy) / (2.0 * (double)sigma * (double)sigma));
            wd[(dy + radius) * d + (dx + radius)] = v;
            total += v;
        }
    for (int t = 0; t < d * d; ++t) w[t] = (float)(wd[t] / total);
    size_t bytes = (size_t)rows * cols * sizeof(float);
    float *dimg, *dw, *dout;
    cudaMalloc(&dimg, bytes);
    cudaMalloc(&dout, bytes);
    cudaMalloc(&dw, (size_t)d * d * sizeof(float));
    cudaMemcpy(dimg, img, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dw, w, (size_t)d * d * sizeof(float), cudaMemcpyHostToDevice);
    int tw = BS + 2 * radius;
    size_t smem = (size_t)(tw * tw + d * d) * sizeof(float);
    dim3 block(BS, BS), grid((cols + BS - 1) / BS, (rows + BS - 1) / BS);
    blur_tiled<<<grid, block, smem>>>(rows, cols, radius, dimg, dw, dout);
    cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dimg);
    cudaFree(dw);
    cudaFree(dout);
    free(wd);
    free(w);
}
