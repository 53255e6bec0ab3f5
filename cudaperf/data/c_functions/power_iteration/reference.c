#include <math.h>
#include <stdlib.h>

double power_iteration(int n, int iters, const double* A, double* x) {
    if (n <= 0 || iters <= 0) return 0.0;
    double* y = (double*)malloc((size_t)n * sizeof(double));
    double norm = 0.0;
    for (int it = 0; it < iters; ++it) {
        for (int i = 0; i < n; ++i) {
            const double* row = A + (size_t)i * n;
            double s = 0.0;
            for (int j = 0; j < n; ++j) s += row[j] * x[j];
            y[i] = s;
        }
        double ss = 0.0;
        for (int i = 0; i < n; ++i) ss += y[i] * y[i];
        norm = sqrt(ss);
        for (int i = 0; i < n; ++i) x[i] = y[i] / norm;
    }
    free(y);
    return norm;
}
