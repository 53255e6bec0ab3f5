#include <stdio.h>

static unsigned collatz_len(unsigned long long x) {
    unsigned steps = 1;
    while (x != 1) {
        x = (x & 1) ? 3 * x + 1 : x >> 1;
        ++steps;
    }
    return steps;
}

int main(void) {
    long long n;
    if (scanf("%lld", &n) != 1 || n < 2) return 1;
    long long best = 1;
    unsigned best_len = 1;
    for (long long s = 1; s < n; ++s) {
        unsigned len = collatz_len((unsigned long long)s);
        if (len > best_len) { best_len = len; best = s; }
    }
    printf("%lld %u\n", best, best_len);
    return 0;
}
