#include <stddef.h>
#include <math.h>

void layernorm_gelu(int rows, int cols, float eps, const float* x, const float* gamma, const float* beta, float* y) {
    for (int r = 0; r < rows; ++r) {
        const float* xr = x + (size_t)r * cols;
        float* yr = y + (size_t)r * cols;
        double s = 0.0;
        for (int c = 0; c < cols; ++c) s += xr[c];
        double mean = s / cols;
        double v = 0.0;
        for (int c = 0; c < cols; ++c) {
            double d = xr[c] - mean;
            v += d * d;
        }
        float fmean = (float)mean;
        float inv = (float)(1.0 / sqrt(v / cols + (double)eps));
        for (int c = 0; c < cols; ++c) {
            float t = (xr[c] - fmean) * inv * gamma[c] + beta[c];
            yr[c] = 0.5f * t * (1.0f + tanhf(0.7978845608f * (t + 0.044715f * t * t * t)));
        }
    }
}
