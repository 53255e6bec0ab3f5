void histogram(int n, int bins, const unsigned char* data, int* counts) {
    for (int b = 0; b < bins; ++b) counts[b] = 0;
    for (int i = 0; i < n; ++i) counts[data[i]]++;
}
