#include <math.h>
#include <stdlib.h>

static int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

void gaussian_blur(int rows, int cols, int radius, float sigma, const float* img, float* out) {
    int d = 2 * radius + 1;
    double* wd = (double*)malloc((size_t)d * d * sizeof(double));
    float* w = (float*)malloc((size_t)d * d * sizeof(float));
    double total = 0.0;
    for (int dy = -radius; dy <= radius; ++dy)
        for (int dx = -radius; dx <= radius; ++dx) {
            double v = exp(-(double)(dx * dx + dy * dy) / (2.0 * (double)sigma * (double)sigma));
            wd[(dy + radius) * d + (dx + radius)] = v;
            total += v;
        }
    for (int t = 0; t < d * d; ++t) w[t] = (float)(wd[t] / total);
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) {
            float s = 0.0f;
            for (int dy = -radius; dy <= radius; ++dy) {
                const float* row = img + (size_t)clampi(i + dy, 0, rows - 1) * cols;
                for (int dx = -radius; dx <= radius; ++dx)
                    s += w[(dy + radius) * d + (dx + radius)] * row[clampi(j + dx, 0, cols - 1)];
            }
            out[(size_t)i * cols + j] = s;
        }
    free(wd);
    free(w);
}
