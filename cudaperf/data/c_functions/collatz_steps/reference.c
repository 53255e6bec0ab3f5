void collatz_steps(int n, const int* start, int* steps) {
    for (int i = 0; i < n; ++i) {
        unsigned long long x = (unsigned long long)start[i];
        int c = 0;
        while (x != 1ULL) {
            x = (x & 1ULL) ? 3ULL * x + 1ULL : x >> 1;
            ++c;
        }
        steps[i] = c;
    }
}
