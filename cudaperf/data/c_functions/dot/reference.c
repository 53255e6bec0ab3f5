/* Products are exact in double; the sum is Kahan-compensated. */
double dot(int n, const float* x, const float* y) {
    double s = 0.0, c = 0.0;
    for (int i = 0; i < n; ++i) {
        double v = (double)x[i] * (double)y[i] - c;
        double t = s + v;
        c = (t - s) - v;
        s = t;
    }
    return s;
}
