#include <cuda_runtime.h>
#include <math.h>

// Slow: every row is uploaded and downloaded with its own cudaMemcpy, and one thread per row does all the work.
__global__ void ln_gelu_thread_per_row(int rows, int cols, float eps, const float* x, const float* gamma,
                                       const float* beta, float* y) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    double s = 0.0;
    for (int c = 0; c < cols; ++c) s += xr[c];
    double mean = s / cols, v = 0.0;
    for (int c = 0; c < cols; ++c) v += (xr[c] - mean) * (xr[c] - mean);
    float fmean = (float)mean;
    float inv = (float)(1.0 / sqrt(v / cols + (double)eps));
    for (int c = 0; c < cols; ++c) {
        float t = (xr[c] - fmean) * inv * gamma[c] + beta[c];
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
    for (int r = 0; r < rows; ++r)
        cudaMemcpy(dx + (size_t)r * cols, x + (size_t)r * cols, cb, cudaMemcpyHostToDevice);
    cudaMemcpy(dg, gamma, cb, cudaMemcpyHostToDevice);
    cudaMemcpy(db, beta, cb, cudaMemcpyHostToDevice);
    ln_gelu_thread_per_row<<<(rows + 63) / 64, 64>>>(rows, cols, eps, dx, dg, db, dy);
    for (int r = 0; r < rows; ++r)
        cudaMemcpy(y + (size_t)r * cols, dy + (size_t)r * cols, cb, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dg);
    cudaFree(db);
}
