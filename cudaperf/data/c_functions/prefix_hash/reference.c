void prefix_hash(int n, const unsigned char* s, unsigned int* h) {
    const unsigned long long P = 1000000007ULL, B = 131ULL;
    unsigned long long x = 0;
    for (int i = 0; i < n; ++i) {
        x = (x * B + s[i]) % P;
        h[i] = (unsigned int)x;
    }
}
