#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

// Slow: a single block of 256 threads walks all pixels, reading image and weights straight from global memory.
__global__ void blur_one_block(int rows, int cols, int radius, const float* img, const float* w, float* out) {
    int d = 2 * radius + 1;
    for (size_t p = threadIdx.x; p < (size_t)rows * cols; p += blockDim.x) {
        int i = (int)(p / cols), j = (int)(p % cols);
        float s = 0.0f;
        for (int dy = -radius; dy <= radius; ++dy) {
            int ii = min(max(i + dy, 0), rows - 1);
            for (int dx = -radius; dx <= radius; ++dx) {
                int jj = min(max(j + dx, 0), cols - 1);
                s += w[(dy + radius) * d + (dx + radius)] * img[(size_t)ii * cols + jj];
            }
        }
        out[p] = s;
    }
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
    blur_one_block<<<1, 256>>>(rows, cols, radius, dimg, dw, dout);
    cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dimg);
    cudaFree(dw);
    cudaFree(dout);
    free(wd);
    free(w);
}
