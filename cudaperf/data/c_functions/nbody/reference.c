#include <math.h>

void nbody(int n, float eps2, const float* px, const float* py, const float* pz, const float* m,
           float* ax, float* ay, float* az) {
    for (int i = 0; i < n; ++i) {
        float xi = px[i], yi = py[i], zi = pz[i];
        float sx = 0.0f, sy = 0.0f, sz = 0.0f;
        for (int j = 0; j < n; ++j) {
            float dx = px[j] - xi, dy = py[j] - yi, dz = pz[j] - zi;
            float d2 = dx * dx + dy * dy + dz * dz + eps2;
            float inv = 1.0f / sqrtf(d2);
            float s = m[j] * inv * inv * inv;
            sx += dx * s;
            sy += dy * s;
            sz += dz * s;
        }
        ax[i] = sx;
        ay[i] = sy;
        az[i] = sz;
    }
}
