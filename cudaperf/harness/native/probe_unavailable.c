/* Built instead of probe.c when the CUDA toolkit has no CUPTI: every evaluation then records that GPU-work
 * evidence was unavailable (a harness limitation, reported as such), never that no kernel ran. */
#include <string.h>
#include "probe.h"

int cudaperf_probe_init(char *err, int errlen) {
    strncpy(err, "CUPTI was not found when the harness built this driver", (size_t)errlen - 1);
    err[errlen - 1] = 0;
    return 0;
}
void cudaperf_probe_begin(void) {}
cudaperf_probe_stats cudaperf_probe_end(void) {
    cudaperf_probe_stats s;
    memset(&s, 0, sizeof s);
    return s;
}
