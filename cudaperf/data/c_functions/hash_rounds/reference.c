void hash_rounds(int n, int rounds, const unsigned int* keys, unsigned int* out) {
    for (int i = 0; i < n; ++i) {
        unsigned int x = keys[i];
        for (int r = 0; r < rounds; ++r) {
            x += (unsigned int)r * 0x9e3779b9u;
            x ^= x >> 16;
            x *= 0x7feb352du;
            x ^= x >> 15;
            x *= 0x846ca68bu;
            x ^= x >> 16;
        }
        out[i] = x;
    }
}
