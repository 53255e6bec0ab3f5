#include <cuda_runtime.h>

// Fast: one thread per point, coefficients staged through shared memory in 256-term chunks, sincosf per term.
constexpr int BLOCK = 256;

__global__ void fourier_kernel(int n, int terms, const float* __restrict__ a, const float* __restrict__ b,
                               const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float sa[BLOCK], sb[BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float xi = (i < n) ? x[i] : 0.0f;
    float s = 0.0f;
    for (int base = 0; base < terms; base += BLOCK) {
        int k = base + threadIdx.x;
        if (k < terms) {
            sa[threadIdx.x] = a[k];
            sb[threadIdx.x] = b[k];
        }
        __syncthreads();
        int cnt = min(BLOCK, terms - base);
        for (int j = 0; j < cnt; ++j) {
            float sn, cs;
            sincosf((float)(base + j + 1) * xi, &sn, &cs);
            s += sa[j] * cs + sb[j] * sn;
        }
        __syncthreads();
    }
    if (i < n) y[i] = s;
}

extern "C" void fourier_eval(int n, int terms, const float* a, const float* b, const float* x, float* y) {
    if (n <= 0) return;
    if (terms < 0) terms = 0;
    size_t tb = (size_t)(terms > 0 ? terms : 1) * sizeof(float);
    size_t nb = (size_t)n * sizeof(float);
    float *da, *db, *dx, *dy;
    cudaMalloc(&da, tb);
    cudaMalloc(&db, tb);
    cudaMalloc(&dx, nb);
    cudaMalloc(&dy, nb);
    if (terms > 0) {
        cudaMemcpy(da, a, (size_t)terms * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemcpy(db, b, (size_t)terms * sizeof(float), cudaMemcpyHostToDevice);
    }
    cudaMemcpy(dx, x, nb, cudaMemcpyHostToDevice);
    fourier_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n, terms, da, db, dx, dy);
    cudaMemcpy(y, dy, nb, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dx);
    cudaFree(dy);
}
