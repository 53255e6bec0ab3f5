#include <cuda_runtime.h>
#include <math.h>

// Fast: 16x16 output tiles; 16 points of a and of b are staged in shared memory 32 dimensions at a time.
constexpr int T = 16, KC = 32;

__global__ void dist_tiled(int m, int n, int d, const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ dist) {
    __shared__ float As[T][KC + 1], Bs[T][KC + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * T + ty, j = blockIdx.x * T + tx;
    float s = 0.0f;
    for (int k0 = 0; k0 < d; k0 += KC) {
        for (int t = ty * T + tx; t < T * KC; t += T * T) {
            int r = t / KC, c = t % KC, gk = k0 + c;
            int gi = blockIdx.y * T + r, gj = blockIdx.x * T + r;
            As[r][c] = (gi < m && gk < d) ? a[(size_t)gi * d + gk] : 0.0f;
            Bs[r][c] = (gj < n && gk < d) ? b[(size_t)gj * d + gk] : 0.0f;
        }
        __syncthreads();
        int kmax = min(KC, d - k0);
        for (int kk = 0; kk < kmax; ++kk) {
            float t = As[ty][kk] - Bs[tx][kk];
            s += t * t;
        }
        __syncthreads();
    }
    if (i < m && j < n) dist[(size_t)i * n + j] = sqrtf(s);
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
    dim3 block(T, T), grid((n + T - 1) / T, (m + T - 1) / T);
    dist_tiled<<<grid, block>>>(m, n, d, da, db, dd);
    cudaMemcpy(dist, dd, db_, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dd);
}
