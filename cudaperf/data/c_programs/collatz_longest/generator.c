/* gen SEED CONFIG: print N. Config 0: small, 1: medium, 2: the timing size. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    unsigned long long seed = argc > 1 ? strtoull(argv[1], 0, 10) : 1;
    int cfg = argc > 2 ? atoi(argv[2]) : 0;
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    long long base = cfg == 0 ? 1000 : (cfg == 1 ? 100000 : 8000000);
    long long n = base + (long long)((seed >> 33) % (unsigned long long)(base / 10 + 1));
    printf("%lld\n", n);
    return 0;
}
