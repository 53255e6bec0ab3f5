#include <stddef.h>
#include <math.h>

void pairwise_dist(int m, int n, int d, const float* a, const float* b, float* dist) {
    for (int i = 0; i < m; ++i) {
        const float* ai = a + (size_t)i * d;
        for (int j = 0; j < n; ++j) {
            const float* bj = b + (size_t)j * d;
            float s = 0.0f;
            for (int k = 0; k < d; ++k) {
                float t = ai[k] - bj[k];
                s += t * t;
            }
            dist[(size_t)i * n + j] = sqrtf(s);
        }
    }
}
