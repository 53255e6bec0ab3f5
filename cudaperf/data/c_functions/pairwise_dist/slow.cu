#include <cuda_runtime.h>
#include <math.h>

// Slow: a single block of 256 threads computes every pair straight from global memory.
__global__ void dist_one_block(int m, int n, int d, const float* a, const float* b, float* dist) {
    for (size_t p = threadIdx.x; p < (size_t)m * n; p += blockDim.x) {
        int i = (int)(p / n), j = (int)(p % n);
        float s = 0.0f;
        for (int k = 0; k < d; ++k) {
            float t = a[(size_t)i * d + k] - b[(size_t)j * d + k];
            s += t * t;
        }
        dist[p] = sqrtf(s);
    }
}

extern "C" void pairwise_dist(int m, int n, int d, const float* a, const float* b, float* dist) {
    if (m <= 0 || n <= 0) return;
    float *da, *db, *dd;
    size_t ab = (size_t)m * d * sizeof(float), bb = (size_t)n * d * sizeof(float), db_ = (size_t)m * n * sizeof(float);
    cudaMalloc(&da, ab > 0 ? ab : 1);
    cudaMalloc(&db, bb > 0 ? bb : 1);
    cudaMalloc(&dd, db_);
    cudaMemcpy(da, a, ab, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, bb, cudaMemcpyHostToDevice);
    dist_one_block<<<1, 256>>>(m, n, d, da, db, dd);
    cudaMemcpy(dist, dd, db_, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dd);
}
