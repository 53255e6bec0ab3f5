/* cudaperf GPU-work probe: CUPTI activity tracing around one call of the candidate.
 *
 * Trusted harness code linked into the candidate's driver. It counts the kernels that ran and splits GPU time
 * into kernels, memory copies (with bytes and direction) and memsets. It never launches GPU work itself.
 */
#include <cupti.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "probe.h"

/* CUPTI turns the GPU's timestamps into host time with the C library's clock_gettime by default, and a candidate
 * in the same process can rewrite that function (adversarial/saxpy_clock_rewrite_runtime.cu did, and its traced
 * call's kernel and copy durations came out 60 times short on the H200 in session 24). The probe gives CUPTI its
 * own clock: the clock_gettime system call itself, as the driver reads it. Weak: a CUPTI without the call keeps
 * its own clock. */
#pragma weak cuptiActivityRegisterTimestampCallback

static uint64_t CUPTIAPI trusted_now_ns(void) {
    struct timespec ts = {0, 0};
#if defined(__x86_64__)
    long rc;
    __asm__ volatile ("syscall" : "=a"(rc) : "0"(228L), "D"((long)CLOCK_MONOTONIC), "S"(&ts) : "rcx", "r11", "memory");
    (void)rc;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = 113;
    register long x0 __asm__("x0") = CLOCK_MONOTONIC;
    register long x1 __asm__("x1") = (long)&ts;
    __asm__ volatile ("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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
    if (cuptiActivityRegisterTimestampCallback) cuptiActivityRegisterTimestampCallback(trusted_now_ns);
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
