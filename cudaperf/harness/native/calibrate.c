/* How fast is this host right now? Two fixed workloads, timed with CLOCK_MONOTONIC, run by the harness right
 * before a baseline's timing window:
 *   compute: a dependent chain of integer multiply-adds (one core's clock: frequency, a busy SMT sibling,
 *            time stolen by the hypervisor);
 *   memory:  copies between two buffers larger than the last-level cache (the memory system's share for one
 *            core: other work's traffic).
 * Prints "compute_ns N" and "memory_ns N": the fastest of REPEATS runs of each. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPEATS 3
#define CHAIN 4000000ull
#define BUF_BYTES (64ull << 20)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(void) {
    volatile uint64_t sink = 0;
    uint64_t best_compute = UINT64_MAX, best_memory = UINT64_MAX;
    char *a = malloc(BUF_BYTES), *b = malloc(BUF_BYTES);
    if (!a || !b) return 1;
    memset(a, 1, BUF_BYTES);
    memset(b, 2, BUF_BYTES);
    for (int r = 0; r < REPEATS; r++) {
        uint64_t x = 88172645463325252ull + (uint64_t)r, t0 = now_ns();
        for (uint64_t i = 0; i < CHAIN; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t t1 = now_ns();
        sink += x;
        if (t1 - t0 < best_compute) best_compute = t1 - t0;
        t0 = now_ns();
        memcpy(b, a, BUF_BYTES);
        memcpy(a, b, BUF_BYTES);
        t1 = now_ns();
        sink += (uint64_t)a[r] + (uint64_t)b[BUF_BYTES - 1 - r];
        if (t1 - t0 < best_memory) best_memory = t1 - t0;
    }
    printf("compute_ns %llu\nmemory_ns %llu\nsink %llu\n", (unsigned long long)best_compute,
           (unsigned long long)best_memory, (unsigned long long)sink);
    free(a);
    free(b);
    return 0;
}
