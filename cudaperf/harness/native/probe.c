/* cudaperf GPU-work probe: CUPTI activity tracing around one call of the candidate.
 *
 * Trusted harness code linked into the candidate's driver. It counts the kernels that ran and splits GPU time
 * into kernels, memory copies (with bytes and direction) and memsets. It never launches GPU work itself.
 */
#include <cupti.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "probe.h"

static cudaperf_probe_stats g_stats;
static int g_ready = 0;

static void CUPTIAPI on_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = 4u << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                         size_t valid) {
    (void)ctx; (void)stream; (void)size;
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)rec;
            g_stats.kernels += 1;
            g_stats.kernel_ns += k->end - k->start;
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)rec;
            g_stats.memcpy_ns += m->end - m->start;
            if (m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) g_stats.htod_bytes += m->bytes;
            else if (m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH) g_stats.dtoh_bytes += m->bytes;
            else g_stats.other_copy_bytes += m->bytes;
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            CUpti_ActivityMemset4 *s = (CUpti_ActivityMemset4 *)rec;
            g_stats.memset_ns += s->end - s->start;
            break;
        }
        default:
            break;
        }
    }
    free(buffer);
}

int cudaperf_probe_init(char *err, int errlen) {
    CUptiResult r = cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
    if (r != CUPTI_SUCCESS) {
        const char *msg = NULL;
        cuptiGetResultString(r, &msg);
        strncpy(err, msg ? msg : "cuptiActivityRegisterCallbacks failed", (size_t)errlen - 1);
        err[errlen - 1] = 0;
        return 0;
    }
    g_ready = 1;
    return 1;
}

void cudaperf_probe_begin(void) {
    memset(&g_stats, 0, sizeof g_stats);
    if (!g_ready) return;
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
}

cudaperf_probe_stats cudaperf_probe_end(void) {
    if (g_ready) {
        cuptiActivityFlushAll(1);
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
        cuptiActivityFlushAll(1);
    }
    g_stats.valid = g_ready;
    return g_stats;
}
