#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

// Bug: pads the image with zeros outside the border instead of clamping to the edge, darkening the border pixels.
constexpr int BS = 16;

__global__ void blur_kernel(int rows, int cols, int radius, const float* __restrict__ img, const float* __restrict__ w,
                            float* __restrict__ out) {
    int i = blockIdx.y * BS + threadIdx.y, j = blockIdx.x * BS + threadIdx.x;
    if (i >= rows || j >= cols) return;
    int d = 2 * radius + 1;
    float s = 0.0f;
    for (int dy = -radius; dy <= radius; ++dy)
        for (int dx = -radius; dx <= radius; ++dx) {
            int ii = i + dy, jj = j + dx;
            float v = (ii >= 0 && ii < rows && jj >= 0 && jj < cols) ? img[(size_t)ii * cols + jj] : 0.0f;
            s += w[(dy + radius) * d + (dx + radius)] * v;
        }
    out[(size_t)i * cols + j] = s;
}

extern "C" void gaussian_blur(int rows, int cols, int radius, float sigma, const float* img, float* out) {
    if (rows <= 0 || cols <= 0 || radius < 0) return;
    int d = 2 * radius + 1;
    float* w = (float*)malloc((size_t)d * d * sizeof(float));
    double total = 0.0;
    for (int t = 0; t < d * d; ++t) {
        int dy = t / d - radius, dx = t % d - radius;
        total += exp(-(double)(dx * dx + dy * dy) / (2.0 * (double)sigma * (double)sigma));
    }
    for (int t = 0; t < d * d; ++t) {
        int dy = t / d - radius, dx = t % d - radius;
        w[t] = (float)(exp(-(double)(dx * dx + dy * dy) / (2.0 * (double)sigma * (double)sigma)) / total);
    }
    size_t bytes = (size_t)rows * cols * sizeof(float);
    float *dimg, *dw, *dout;
    cudaMalloc(&dimg, bytes);
    cudaMalloc(&dout, bytes);
    cudaMalloc(&dw, (size_t)d * d * sizeof(float));
    cudaMemcpy(dimg, img, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dw, w, (size_t)d * d * sizeof(float), cudaMemcpyHostToDevice);
    dim3 block(BS, BS), grid((cols + BS - 1) / BS, (rows + BS - 1) / BS);
    blur_kernel<<<grid, block>>>(rows, cols, radius, dimg, dw, dout);
    cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dimg);
    cudaFree(dw);
    cudaFree(dout);
    free(w);
}
