#include <stdlib.h>
#include <string.h>

void spmv_iter(int n, int deg, int iters, const int* col, const float* val, float* x) {
    float* y = (float*)malloc((size_t)n * sizeof(float));
    for (int it = 0; it < iters; ++it) {
        for (int i = 0; i < n; ++i) {
            size_t base = (size_t)i * deg;
            float s = 0.0f;
            for (int k = 0; k < deg; ++k) s += val[base + k] * x[col[base + k]];
            y[i] = s;
        }
        memcpy(x, y, (size_t)n * sizeof(float));
    }
    free(y);
}
