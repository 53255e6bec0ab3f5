#include <stdlib.h>
#include <string.h>

void heat1d(int n, int steps, double r, double* u) {
    if (n < 3 || steps <= 0) return;
    double* v = (double*)malloc((size_t)n * sizeof(double));
    v[0] = u[0];
    v[n - 1] = u[n - 1];
    double* a = u;
    double* b = v;
    for (int s = 0; s < steps; ++s) {
        for (int i = 1; i < n - 1; ++i)
            b[i] = a[i] + r * (a[i - 1] - 2.0 * a[i] + a[i + 1]);
        double* t = a; a = b; b = t;
    }
    if (a != u) memcpy(u, a, (size_t)n * sizeof(double));
    free(v);
}
