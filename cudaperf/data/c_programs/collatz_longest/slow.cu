// Correct but slow: a single block of 32 threads walks all start values, then a serial max on the host.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void lengths(long long n, unsigned* len) {
    for (long long s = 1 + threadIdx.x; s < n; s += blockDim.x) {
        unsigned long long x = s;
        unsigned steps = 1;
        while (x != 1) { x = (x & 1) ? 3 * x + 1 : x >> 1; ++steps; }
        len[s] = steps;
    }
}

int main() {
    long long n;
    if (scanf("%lld", &n) != 1 || n < 2) return 1;
    unsigned* d;
    cudaMalloc(&d, n * sizeof(unsigned));
    lengths<<<1, 32>>>(n, d);
    unsigned* h = (unsigned*)malloc(n * sizeof(unsigned));
    cudaMemcpy(h, d, n * sizeof(unsigned), cudaMemcpyDeviceToHost);
    long long best = 1; unsigned best_len = 1;
    for (long long s = 1; s < n; ++s) if (h[s] > best_len) { best_len = h[s]; best = s; }
    printf("%lld %u\n", best, best_len);
    return 0;
}
