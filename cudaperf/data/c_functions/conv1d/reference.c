void conv1d(int n, int k, const float* x, const float* w, float* y) {
    for (int i = 0; i + k <= n; ++i) {
        float s = 0.0f;
        for (int j = 0; j < k; ++j) s += w[j] * x[i + j];
        y[i] = s;
    }
}
