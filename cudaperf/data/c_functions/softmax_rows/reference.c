#include <stddef.h>
#include <math.h>

void softmax_rows(int rows, int cols, const double* x, double* y) {
    for (int r = 0; r < rows; ++r) {
        const double* xr = x + (size_t)r * cols;
        double* yr = y + (size_t)r * cols;
        double m = xr[0];
        for (int c = 1; c < cols; ++c)
            if (xr[c] > m) m = xr[c];
        double s = 0.0;
        for (int c = 0; c < cols; ++c) {
            yr[c] = exp(xr[c] - m);
            s += yr[c];
        }
        for (int c = 0; c < cols; ++c) yr[c] /= s;
    }
}
