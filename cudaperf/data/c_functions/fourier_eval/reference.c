#include <math.h>

void fourier_eval(int n, int terms, const float* a, const float* b, const float* x, float* y) {
    for (int i = 0; i < n; ++i) {
        float s = 0.0f;
        for (int k = 0; k < terms; ++k) {
            float t = (float)(k + 1) * x[i];
            s += a[k] * cosf(t) + b[k] * sinf(t);
        }
        y[i] = s;
    }
}
