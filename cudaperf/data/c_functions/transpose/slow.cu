#include <cuda_runtime.h>

// Slow: one cudaMemcpy per row in and per output row out (thousands of small pageable copies), naive kernel.
__global__ void transpose_naive(int rows, int cols, const float* in, float* out) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y;
    if (j < cols) out[(size_t)j * rows + i] = in[(size_t)i * cols + j];
}

extern "C" void transpose(int rows, int cols, const float* in, float* out) {
    if (rows <= 0 || cols <= 0) return;
    size_t bytes = (size_t)rows * cols * sizeof(float);
    float *din, *dout;
    cudaMalloc(&din, bytes);
    cudaMalloc(&dout, bytes);
    for (int i = 0; i < rows; ++i)
        cudaMemcpy(din + (size_t)i * cols, in + (size_t)i * cols, (size_t)cols * sizeof(float), cudaMemcpyHostToDevice);
    transpose_naive<<<dim3((cols + 127) / 128, rows), 128>>>(rows, cols, din, dout);
    for (int j = 0; j < cols; ++j)
        cudaMemcpy(out + (size_t)j * rows, dout + (size_t)j * rows, (size_t)rows * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(din);
    cudaFree(dout);
}
