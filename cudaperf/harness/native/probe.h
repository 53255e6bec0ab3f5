#ifndef CUDAPERF_PROBE_H
#define CUDAPERF_PROBE_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef struct {
    int valid;
    uint64_t kernels, kernel_ns, memcpy_ns, memset_ns, htod_bytes, dtoh_bytes, other_copy_bytes;
} cudaperf_probe_stats;
int cudaperf_probe_init(char *err, int errlen);
void cudaperf_probe_begin(void);
cudaperf_probe_stats cudaperf_probe_end(void);
#ifdef __cplusplus
}
#endif
#endif
