// Bug: counts steps from 0 instead of 1 (every length is one short).
#include <cstdio>
#include <cuda_runtime.h>

__global__ void lengths(long long n, unsigned* len) {
    long long s = 1 + blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= n) return;
    unsigned long long x = s;
    unsigned steps = 0;
    while (x != 1) { x = (x & 1) ? 3 * x + 1 : x >> 1; ++steps; }
    len[s] = steps;
}

int main() {
    long long n;
    if (scanf("%lld", &n) != 1 || n < 2) return 1;
    unsigned* d;
    cudaMalloc(&d, n * sizeof(unsigned));
    lengths<<<(unsigned)((n + 255) / 256), 256>>>(n, d);
    unsigned* h = (unsigned*)malloc(n * sizeof(unsigned));
    cudaMemcpy(h, d, n * sizeof(unsigned), cudaMemcpyDeviceToHost);
    long long best = 1; unsigned best_len = 0;
    for (long long s = 1; s < n; ++s) if (h[s] > best_len) { best_len = h[s]; best = s; }
    printf("%lld %u\n", best, best_len);
    return 0;
}
