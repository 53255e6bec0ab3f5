#include <cuda_runtime.h>

// Slow: one block of 32 threads; each thread hashes a contiguous chunk twice (summary pass, then output pass)
// and thread 0 chains the 32 chunk summaries serially.
constexpr unsigned long long P = 1000000007ULL, B = 131ULL;

__global__ void hash_chunks(int n, const unsigned char* s, unsigned int* h) {
    __shared__ unsigned long long ca[32], cb[32], cin[32];
    int per = (n + 31) / 32;
    int lo = min(n, (int)threadIdx.x * per), hi = min(n, lo + per);
    unsigned long long a = 1, b = 0;
    for (int i = lo; i < hi; ++i) {
        a = a * B % P;
        b = (b * B + s[i]) % P;
    }
    ca[threadIdx.x] = a;
    cb[threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long x = 0;
        for (int t = 0; t < 32; ++t) {
            cin[t] = x;
            x = (ca[t] * x + cb[t]) % P;
        }
    }
    __syncthreads();
    unsigned long long x = cin[threadIdx.x];
    for (int i = lo; i < hi; ++i) {
        x = (x * B + s[i]) % P;
        h[i] = (unsigned int)x;
    }
}

extern "C" void prefix_hash(int n, const unsigned char* s, unsigned int* h) {
    if (n <= 0) return;
    unsigned char* ds;
    unsigned int* dh;
    cudaMalloc(&ds, (size_t)n);
    cudaMalloc(&dh, (size_t)n * sizeof(unsigned int));
    cudaMemcpy(ds, s, (size_t)n, cudaMemcpyHostToDevice);
    hash_chunks<<<1, 32>>>(n, ds, dh);
    cudaMemcpy(h, dh, (size_t)n * sizeof(unsigned int), cudaMemcpyDeviceToHost);
    cudaFree(ds);
    cudaFree(dh);
}
