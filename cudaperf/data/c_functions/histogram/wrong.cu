#include <cuda_runtime.h>

// Bug: reads the bytes 16 at a time (uint4) and forgets the n % 16 tail, so those values are never counted.
constexpr int BLOCK = 256;

__global__ void hist_shared(int n, int bins, const unsigned char* __restrict__ data, int* __restrict__ counts) {
    __shared__ int sh[256];
    for (int b = threadIdx.x; b < 256; b += BLOCK) sh[b] = 0;
    __syncthreads();
    const uint4* d16 = reinterpret_cast<const uint4*>(data);
    for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n / 16; i += gridDim.x * BLOCK) {
        uint4 v = d16[i];
        unsigned int w[4] = {v.x, v.y, v.z, v.w};
        for (int q = 0; q < 4; ++q)
            for (int s = 0; s < 32; s += 8) atomicAdd(&sh[(w[q] >> s) & 0xffu], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < min(bins, 256); b += BLOCK)
        if (sh[b]) atomicAdd(&counts[b], sh[b]);
}

extern "C" void histogram(int n, int bins, const unsigned char* data, int* counts) {
    if (bins <= 0) return;
    int* dcounts;
    unsigned char* ddata;
    cudaMalloc(&dcounts, (size_t)bins * sizeof(int));
    cudaMemset(dcounts, 0, (size_t)bins * sizeof(int));
    cudaMalloc(&ddata, (size_t)(n > 0 ? n : 1));
    cudaMemcpy(ddata, data, (size_t)n, cudaMemcpyHostToDevice);
    int blocks = (n / 16 + BLOCK - 1) / BLOCK;
    if (blocks > 528) blocks = 528;
    if (blocks < 1) blocks = 1;
    hist_shared<<<blocks, BLOCK>>>(n, bins, ddata, dcounts);
    cudaMemcpy(counts, dcounts, (size_t)bins * sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(ddata);
    cudaFree(dcounts);
}
