/* Kahan-compensated summation in float: accurate to about one rounding of the exact sum. */
void sum_reduce(int n, const float* x, float* result) {
    float s = 0.0f, c = 0.0f;
    for (int i = 0; i < n; ++i) {
        float y = x[i] - c;
        float t = s + y;
        c = (t - s) - y;
        s = t;
    }
    result[0] = s;
}
