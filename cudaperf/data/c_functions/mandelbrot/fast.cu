#include <cuda_runtime.h>

// Fast: one thread per pixel on a 2-D grid of 32x8 blocks, exact 64-bit fixed-point iteration.
constexpr int FRAC = 28;

__global__ void mandel_kernel(int width, int height, int max_iter, int* __restrict__ iters) {
    int px = blockIdx.x * blockDim.x + threadIdx.x;
    int py = blockIdx.y * blockDim.y + threadIdx.y;
    if (px >= width || py >= height) return;
    const long long FOUR = 4LL << FRAC;
    long long ci = -(5LL << (FRAC - 2)) + ((long long)py * (5LL << (FRAC - 1))) / height;
    long long cr = -(2LL << FRAC) + ((long long)px * (5LL << (FRAC - 1))) / width;
    long long zr = 0, zi = 0;
    int k = 0;
    while (k < max_iter) {
        long long zr2 = (zr * zr) >> FRAC;
        long long zi2 = (zi * zi) >> FRAC;
        if (zr2 + zi2 > FOUR) break;
        long long t = zr2 - zi2 + cr;
        zi = ((zr * zi) >> (FRAC - 1)) + ci;
        zr = t;
        ++k;
    }
    iters[(size_t)py * width + px] = k;
}

extern "C" void mandelbrot(int width, int height, int max_iter, int* iters) {
    if (width <= 0 || height <= 0) return;
    size_t bytes = (size_t)width * height * sizeof(int);
    int* d;
    cudaMalloc(&d, bytes);
    dim3 block(32, 8), grid((width + 31) / 32, (height + 7) / 8);
    mandel_kernel<<<grid, block>>>(width, height, max_iter, d);
    cudaMemcpy(iters, d, bytes, cudaMemcpyDeviceToHost);
    cudaFree(d);
}
