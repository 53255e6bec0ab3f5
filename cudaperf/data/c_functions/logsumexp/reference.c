#include <math.h>

double logsumexp(int n, const double* x) {
    if (n <= 0) return -INFINITY;
    double m = x[0];
    for (int i = 1; i < n; ++i)
        if (x[i] > m) m = x[i];
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += exp(x[i] - m);
    return m + log(s);
}
