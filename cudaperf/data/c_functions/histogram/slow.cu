#include <cuda_runtime.h>

// Slow: a single block of 1024 threads does every increment with a global-memory atomic.
__global__ void hist_one_block(int n, const unsigned char* data, int* counts) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&counts[data[i]], 1);
}

extern "C" void histogram(int n, int bins, const unsigned char* data, int* counts) {
    if (bins <= 0) return;
    int* dcounts;
    unsigned char* ddata;
    cudaMalloc(&dcounts, (size_t)bins * sizeof(int));
    cudaMemset(dcounts, 0, (size_t)bins * sizeof(int));
    cudaMalloc(&ddata, (size_t)(n > 0 ? n : 1));
    cudaMemcpy(ddata, data, (size_t)n, cudaMemcpyHostToDevice);
    hist_one_block<<<1, 1024>>>(n, ddata, dcounts);
    cudaMemcpy(counts, dcounts, (size_t)bins * sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(ddata);
    cudaFree(dcounts);
}
