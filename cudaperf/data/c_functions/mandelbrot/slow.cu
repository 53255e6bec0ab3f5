#include <cuda_runtime.h>

// Slow: one thread per image row computes its pixels one after another (few threads, long serial loops).
constexpr int FRAC = 28;

__global__ void mandel_rows(int width, int height, int max_iter, int* iters) {
    int py = blockIdx.x * blockDim.x + threadIdx.x;
    if (py >= height) return;
    long long ci = -(5LL << (FRAC - 2)) + ((long long)py * (5LL << (FRAC - 1))) / height;
    for (int px = 0; px < width; ++px) {
        long long cr = -(2LL << FRAC) + ((long long)px * (5LL << (FRAC - 1))) / width;
        long long zr = 0, zi = 0;
        int k = 0;
        while (k < max_iter) {
            long long zr2 = (zr * zr) >> FRAC, zi2 = (zi * zi) >> FRAC;
            if (zr2 + zi2 > (4LL << FRAC)) break;
            long long t = zr2 - zi2 + cr;
            zi = ((zr * zi) >> (FRAC - 1)) + ci;
            zr = t;
            ++k;
        }
        iters[(size_t)py * width + px] = k;
    }
}

extern "C" void mandelbrot(int width, int height, int max_iter, int* iters) {
    if (width <= 0 || height <= 0) return;
    size_t bytes = (size_t)width * height * sizeof(int);
    int* d;
    cudaMalloc(&d, bytes);
    mandel_rows<<<(height + 63) / 64, 64>>>(width, height, max_iter, d);
    cudaMemcpy(iters, d, bytes, cudaMemcpyDeviceToHost);
    cudaFree(d);
}
