#include <cuda_runtime.h>
#include <math.h>

// Bug: the dimension loop stops at d - 1, so the last coordinate never contributes to the distance.
__global__ void dist_kernel(int m, int n, int d, const float* __restrict__ a, const float* __restrict__ b,
                            float* __restrict__ dist) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= m || j >= n) return;
    float s = 0.0f;
    for (int k = 0; k < d - 1; ++k) {
        float t = a[(size_t)i * d + k] - b[(size_t)j * d + k];
        s += t * t;
    }
    dist[(size_t)i * n + j] = sqrtf(s);
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
    dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
    dist_kernel<<<grid, block>>>(m, n, d, da, db, dd);
    cudaMemcpy(dist, dd, db_, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dd);
}
