"""Generate the C driver that calls a ``c_function`` task's function: the reference's and the candidate's alike.

One driver source per task, compiled twice: with gcc against the trusted C reference (the sequential baseline),
and with ``-DCUDAPERF_GPU`` against the candidate's object (linked by nvcc, with the CUPTI probe). Both builds
call the function at the same boundary: host inputs in, host outputs out.

Modes (``argv[1]``)::

    test  INPUTS OUTPUTS STATS                 every case once; outputs poisoned before each call
    ptest INPUTS OUTPUTS STATS SEED...         ``test`` with case I's inputs perturbed by SEED I (the reference
                                               computes what a perturbed timed call should have returned)
    time  INPUTS OUTPUTS STATS MIN MAX BUDGET_MS CV WARMUP [WARMUP_MS [SECRET [PERTURB]]]
                                               rotate over the cases; inputs copied afresh per call (untimed),
                                               perturbed (PERTURB 1) by the call's seed of SECRET; in the GPU
                                               build, one call among the first MIN (chosen by a nonzero SECRET)
                                               is traced instead of timed (``traced ...`` line);
                                               timed call + device-wide synchronize; adaptive repetitions;
                                               warm-up: WARMUP calls and at least WARMUP_MS of calls
    testtime INPUTS OUTPUTS STATS TINPUTS TOUTPUTS TSTATS CTL_FD
                                               ``ready probe 0|1`` on descriptor CTL_FD (context up, CUPTI
                                               tracing or not: before any candidate code runs), ``test``,
                                               then report ``tests_done`` on CTL_FD and
                                               read the harness's commands on stdin, one per line: ``time MIN
                                               MAX BUDGET_MS CV WARMUP WARMUP_MS SECRET PERTURB`` runs one timing window on
                                               the T* files in the same process (one context, warm clocks) and
                                               reports ``timing_done``; anything else (or end of input) writes
                                               the timing outputs and reports ``timing_written`` (then waits for
                                               a line), traces one call, reports ``closed``, waits for a line or
                                               the end of input and ends the program: the harness reads each
                                               record at a point where no candidate code can run. Windows
                                               let a batch interleave the timing of a task's candidates.

The outputs file is written case by case and flushed, so a crash keeps what came before it. The stats file is
text: ``case I valid V call_ns C kernels K kernel_ns ...`` (GPU build), ``time_ns T`` lines, ``window W reps R
warm K span_ns S`` after each window, ``kept case I seed S`` (the seed of the last timed call on case I, whose
outputs the timing outputs file holds), ``cuda_error I NAME`` on a CUDA error (then exit 3), ``probe_error MSG``
when CUPTI cannot trace.

Timed inputs never repeat: every call's inputs are perturbed by a seed derived from the window's SECRET (drawn by
the harness per window) and the call's index (:func:`call_seed`), so a candidate that caches outputs by its inputs
returns stale outputs, and the harness re-checks the last timed call on each case against the reference run on
the same perturbed inputs (``ptest``).
"""

from __future__ import annotations

from cudaperf.tasks.schema import CFunctionTask, c_param_decl, is_float_type

EXIT_CUDA_ERROR = 3
EXIT_BAD_INPUT = 4
EXIT_NO_GPU = 5

PERTURBED_KINDS = ("uniform", "randint")
"""Input distributions whose arrays the timing perturbs per call (any element may take any other's value);
structured ones (permutations, offsets, sorted, aranges, constants) are left as drawn."""

_M64 = (1 << 64) - 1


def _mix(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def call_seed(secret: int, k: int) -> int:
    """The perturbation seed of a window's ``k``-th call (warm-up calls first), as the driver computes it."""
    return _mix((secret + (k + 1) * 0x632BE59BD9B4E019) & _M64) if secret else 0


def perturbs_inputs(task: CFunctionTask) -> bool:
    """Whether timed calls of ``task`` see perturbed inputs (some in/inout array has a value distribution)."""
    return any(a.role in ("in", "inout") and a.dist.kind in PERTURBED_KINDS for a in task.args)


def driver_source(task: CFunctionTask) -> str:
    """The complete C source of the driver for ``task``."""
    fn = task.function_name
    proto = f"{task.returns} {fn}({', '.join(c_param_decl(a) for a in task.args)});"
    fields = []
    read = []
    setup = []
    call_args = []
    write = []
    free = []
    for k, a in enumerate(task.args):
        t = a.ctype
        if a.role == "scalar":
            fields.append(f"    {t} s{k};")
            read.append(f"        if (take(cur, slot, 8) != 0) {{ return -1; }}\n        memcpy(&c->s{k}, slot, sizeof({t}));")
            call_args.append(f"c->s{k}")
        else:
            fields.append(f"    uint64_t n{k}; {t}* a{k};")
            read.append(f"        if (take(cur, &c->n{k}, 8) != 0) return -1;")
            if a.role != "out":
                read.append(  # the values stay in the mapped file: only ever copied from (setup_buffers)
                    f"        if (c->n{k} > cur->left / sizeof({t})) return -1;\n"
                    f"        c->a{k} = ({t}*)(void *)cur->p; cur->p += c->n{k} * sizeof({t}); "
                    f"cur->left -= c->n{k} * sizeof({t});"
                )
            else:
                read.append(f"        c->a{k} = NULL;")
            poison = "0xFF" if is_float_type(a.ctype) else "0xA5"  # 0xFF.. is NaN as float and double
            src = f"memcpy(b->a{k}, c->a{k}, c->n{k} * sizeof({t}));" if a.role != "out" else (
                f"memset(b->a{k}, {poison}, c->n{k} * sizeof({t}));"
            )
            setup.append(f"    b->z{k} = c->n{k} * sizeof({t}); b->a{k} = ({t}*)buf_get(b->z{k}); {src} "
                         f"b->bytes += b->z{k};")
            const = "(const " + t + "*)" if a.role == "in" else ""
            call_args.append(f"{const}b->a{k}")
            if a.is_output:
                write.append(
                    f"    fwrite(&c->n{k}, 8, 1, fh); if (c->n{k}) fwrite(b->a{k}, sizeof({t}), c->n{k}, fh);"
                )
            free.append(f"    buf_put(b->a{k}, b->z{k}); b->a{k} = NULL;")
    perturb = []
    for k, a in enumerate(task.args):
        if a.role in ("in", "inout") and a.dist.kind in PERTURBED_KINDS:
            perturb.append(
                f"    {{ uint64_t L = c->n{k}, m = L / 1024; if (m < 8) m = L < 8 ? L : 8; if (m > 4096) m = 4096;\n"
                f"      for (uint64_t j = 0; j < m; ++j) {{ uint64_t p = (st = cp_mix(st)) % L; "
                f"uint64_t q = (st = cp_mix(st)) % L; b->a{k}[p] = b->a{k}[q]; }} }}")
    buf_fields = [f"    {task.args[k].ctype}* a{k}; size_t z{k};" for k, a in enumerate(task.args) if a.is_array]
    ret_decl = "" if task.returns == "void" else f"    {task.returns} ret;"
    call = f"{fn}({', '.join(call_args)})"
    do_call = f"b->ret = {call};" if task.returns != "void" else f"{call};"
    write_ret = (
        "    { unsigned char slot[8] = {0}; memcpy(slot, &b->ret, sizeof(b->ret)); fwrite(slot, 8, 1, fh); }"
        if task.returns != "void"
        else ""
    )
    nl = "\n"
    return f"""/* Generated by cudaperf for task {task.id}. Do not edit. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>
#include <signal.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#ifdef CUDAPERF_GPU
#include <cuda_runtime.h>
#include "probe.h"
#endif

{proto}

typedef struct {{
{nl.join(fields)}
}} Case;

typedef struct {{
{nl.join(buf_fields) if buf_fields else "    int unused;"}
{ret_decl}
    size_t bytes;
}} Buffers;

static void *xmalloc(size_t n) {{
    void *p = malloc(n ? n : 1);
    if (!p) {{ fprintf(stderr, "cudaperf driver: out of host memory\\n"); exit({EXIT_BAD_INPUT}); }}
    return p;
}}

/* The clock. In the candidate's build it is read with the system call itself, not through the C library, its
 * vDSO or the program's symbol tables, which code in the same process could redirect without touching this
 * code; the harness also checks each timing window against its own clock (see timing_window). */
static double now_ns(void) {{
    struct timespec ts;
#if defined(CUDAPERF_GPU) && defined(__x86_64__)
    long rc;
    __asm__ volatile ("syscall" : "=a"(rc) : "0"(228L), "D"((long)CLOCK_MONOTONIC), "S"(&ts) : "rcx", "r11", "memory");
    if (rc != 0) {{ fprintf(stderr, "cudaperf driver: clock_gettime failed\\n"); exit({EXIT_BAD_INPUT}); }}
#elif defined(CUDAPERF_GPU) && defined(__aarch64__)
    register long x8 __asm__("x8") = 113;
    register long x0 __asm__("x0") = CLOCK_MONOTONIC;
    register long x1 __asm__("x1") = (long)&ts;
    __asm__ volatile ("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
    if (x0 != 0) {{ fprintf(stderr, "cudaperf driver: clock_gettime failed\\n"); exit({EXIT_BAD_INPUT}); }}
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}}

/* splitmix64: the per-call perturbation stream (the harness computes the same seeds, cudaperf.harness.driver). */
static uint64_t cp_mix(uint64_t z) {{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}}

static uint64_t call_seed(uint64_t secret, uint64_t k) {{
    return secret ? cp_mix(secret + (k + 1) * 0x632BE59BD9B4E019ull) : 0;
}}

/* Host buffers of calls: a block freed by one call is given to the next call that asks for the same size, so that
 * a call's set-up copies its inputs into memory already mapped instead of faulting in fresh pages (hundreds of MB
 * for the larger tasks, every call). Each call's inputs are copied afresh and perturbed all the same. */
#define CP_POOL 8
static void *cp_pool_p[CP_POOL];
static size_t cp_pool_n[CP_POOL];

static void *buf_get(size_t n) {{
    for (int i = 0; i < CP_POOL; ++i)
        if (cp_pool_p[i] && cp_pool_n[i] == n) {{ void *p = cp_pool_p[i]; cp_pool_p[i] = NULL; return p; }}
    return xmalloc(n);
}}

static void buf_put(void *p, size_t n) {{
    if (!p) return;
#ifdef CUDAPERF_GPU
    /* A block the call left registered (pinned) with the driver would stay pinned for the next call that gets it:
     * a registration paid once and kept across timed calls (a buffer's address is stable here, where fresh
     * buffers used to change it). The registration is undone; a block that is part of a larger registration
     * cannot be, and is neither reused nor freed (its range stays apart). */
    {{
        struct cudaPointerAttributes at;
        if (cudaPointerGetAttributes(&at, p) == cudaSuccess && at.type == cudaMemoryTypeHost) {{ /* pinned */
            int undone = cudaHostUnregister(p) == cudaSuccess;
            (void)cudaGetLastError();
            if (!undone || (cudaPointerGetAttributes(&at, p) == cudaSuccess && at.type == cudaMemoryTypeHost)) {{
                (void)cudaGetLastError();
                return;
            }}
        }}
        (void)cudaGetLastError();
    }}
#endif
    for (int i = 0; i < CP_POOL; ++i)
        if (!cp_pool_p[i]) {{ cp_pool_p[i] = p; cp_pool_n[i] = n; return; }}
    free(p);
}}

/* The inputs file is mapped, not read: its pages are the page cache's, shared with every run of the task (the
 * harness wrote the file once), so a run's start costs no copy of its cases. */
typedef struct {{ const unsigned char *p; size_t left; }} Cursor;

static int take(Cursor *cur, void *dst, size_t n) {{
    if (cur->left < n) return -1;
    memcpy(dst, cur->p, n);
    cur->p += n;
    cur->left -= n;
    return 0;
}}

static int read_case(Cursor *cur, Case *c) {{
    unsigned char slot[8];
    (void)slot;
{nl.join(read)}
    return 0;
}}

static void setup_buffers(const Case *c, Buffers *b) {{
    b->bytes = 0;
{nl.join(setup)}
}}

/* A timed call's inputs differ from every earlier call's where the program cannot predict: elements of each
 * in/inout array drawn from a value distribution are overwritten by other elements of the same array (so they
 * stay in range), positions drawn from the seed. Seed 0: unchanged. */
static void perturb_buffers(const Case *c, Buffers *b, uint64_t seed) {{
    uint64_t st = seed;
    if (!seed) return;
{nl.join(perturb)}
    (void)c; (void)b; (void)st;
}}

static void free_buffers(Buffers *b) {{
{nl.join(free)}
    (void)b;
}}

static void call_case(Case *c, Buffers *b) {{
    {do_call}
}}

static void write_case(FILE *fh, const Case *c, const Buffers *b) {{
    uint32_t status = 0;
    (void)c;
    fwrite(&status, 4, 1, fh);
{write_ret}
{nl.join(write)}
    fflush(fh);
}}

static Case *read_cases(const char *path, uint32_t *count) {{
    int fd = open(path, O_RDONLY);
    struct stat st;
    void *map = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= 8)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fd >= 0) close(fd);
    Cursor cur = {{ (const unsigned char *)map, map == MAP_FAILED ? 0 : (size_t)st.st_size }};
    char magic[4];
    if (map == MAP_FAILED || take(&cur, magic, 4) != 0 || memcmp(magic, "CPF1", 4) != 0 || take(&cur, count, 4) != 0) {{
        fprintf(stderr, "cudaperf driver: cannot read inputs %s\\n", path);
        exit({EXIT_BAD_INPUT});
    }}
    Case *cases = (Case *)xmalloc(sizeof(Case) * (*count ? *count : 1));
    for (uint32_t i = 0; i < *count; ++i) {{
        if (read_case(&cur, &cases[i]) != 0) {{
            fprintf(stderr, "cudaperf driver: inputs truncated at case %u\\n", i);
            exit({EXIT_BAD_INPUT});
        }}
    }}
    return cases;  /* the mapping lives as long as the program */
}}

static FILE *open_out(const char *path, uint32_t count) {{
    FILE *fh = fopen(path, "wb");
    if (!fh) {{ fprintf(stderr, "cudaperf driver: cannot write %s\\n", path); exit({EXIT_BAD_INPUT}); }}
    fwrite("CPO1", 1, 4, fh);
    fwrite(&count, 4, 1, fh);
    fflush(fh);
    return fh;
}}

#ifdef CUDAPERF_GPU
static void check_cuda(FILE *stats, int idx, cudaError_t err) {{
    if (err != cudaSuccess) {{
        fprintf(stats, "cuda_error %d %s %s\\n", idx, cudaGetErrorName(err), cudaGetErrorString(err));
        fflush(stats);
        exit({EXIT_CUDA_ERROR});
    }}
}}

/* Fill and free a block of device memory so that a candidate's fresh cudaMalloc is unlikely to find stale
 * results of an earlier call there. */
static void poison_device_pool(size_t bytes) {{
    void *p = NULL;
    if (bytes == 0) return;
    if (cudaMalloc(&p, bytes) == cudaSuccess) {{
        cudaMemset(p, 0xFF, bytes);
        cudaDeviceSynchronize();
        cudaFree(p);
    }}
    cudaGetLastError();
}}
#endif

static double cv_of(const double *t, int n) {{
    double mean = 0, var = 0;
    for (int i = 0; i < n; ++i) mean += t[i];
    mean /= n;
    for (int i = 0; i < n; ++i) var += (t[i] - mean) * (t[i] - mean);
    return n > 1 && mean > 0 ? sqrt(var / (n - 1)) / mean : 1.0;
}}

static int run_tests(const char *in, const char *outp, FILE *stats, const uint64_t *seeds, int n_seeds) {{
    uint32_t n = 0;
    Case *cases = read_cases(in, &n);
    if (seeds && n_seeds != (int)n) {{ fprintf(stderr, "cudaperf driver: %d seeds for %u cases\\n", n_seeds, n); exit({EXIT_BAD_INPUT}); }}
    FILE *out = open_out(outp, n);
    for (uint32_t i = 0; i < n; ++i) {{
        Buffers b;
        setup_buffers(&cases[i], &b);
        if (seeds) perturb_buffers(&cases[i], &b, seeds[i]);
#ifdef CUDAPERF_GPU
        poison_device_pool(2 * b.bytes + (1u << 20));
        cudaperf_probe_begin();
        double c0 = now_ns();
#endif
        call_case(&cases[i], &b);
#ifdef CUDAPERF_GPU
        check_cuda(stats, (int)i, cudaDeviceSynchronize());
        double c1 = now_ns();
        check_cuda(stats, (int)i, cudaGetLastError());
        cudaperf_probe_stats p = cudaperf_probe_end();
        fprintf(stats, "case %u valid %d call_ns %.0f kernels %llu kernel_ns %llu memcpy_ns %llu memset_ns %llu htod_bytes %llu dtoh_bytes %llu\\n",
                i, p.valid, c1 - c0, (unsigned long long)p.kernels, (unsigned long long)p.kernel_ns,
                (unsigned long long)p.memcpy_ns, (unsigned long long)p.memset_ns,
                (unsigned long long)p.htod_bytes, (unsigned long long)p.dtoh_bytes);
        fflush(stats);
#endif
        write_case(out, &cases[i], &b);
        free_buffers(&b);
    }}
    fclose(out);
    return 0;
}}

/* Timing state kept across windows: the cases, and the buffers of the last call on each case (re-checked). */
typedef struct {{
    Case *cases;
    uint32_t n;
    Buffers *last;
    int *have;
    uint64_t *last_seed;
    int windows;
}} Timing;

static void timing_open(Timing *t, const char *in) {{
    t->n = 0;
    t->cases = read_cases(in, &t->n);
    if (t->n == 0) exit({EXIT_BAD_INPUT});
    t->last = (Buffers *)xmalloc(sizeof(Buffers) * t->n);
    t->have = (int *)calloc(t->n, sizeof(int));
    t->last_seed = (uint64_t *)calloc(t->n, sizeof(uint64_t));
    t->windows = 0;
}}

/* One timing window: warm-up (WARMUP calls and at least WARMUP_MS), then timed calls rotating over the cases
 * until MIN reps are done and the cv is below CV or BUDGET_MS has passed (at most MAX). Every call (warm-up too)
 * gets inputs perturbed (PERTURB) by the K-th seed of SECRET, K counting the window's warm-up and timed calls from 0. The window line reports
 * the warm-up calls and the span from CMD_NS (when the command was read) to its last timed call, which the harness
 * compares with its own clock. */
static void timing_window(Timing *t, FILE *stats, int min_reps, int max_reps, double budget_ms, double cv_target,
                          int warmup, double warmup_ms, uint64_t secret, int perturb, double cmd_ns) {{
    uint32_t n = t->n;
    uint64_t k = 0;
    if (min_reps < (int)n) min_reps = (int)n;
    if (max_reps < min_reps) max_reps = min_reps;
    double *times = (double *)xmalloc(sizeof(double) * (size_t)max_reps);
    double warm_start = now_ns();
    int w = 0;
    for (; w < warmup || ((now_ns() - warm_start) / 1e6 < warmup_ms && w < 1000); ++w) {{
        Buffers b;
        setup_buffers(&t->cases[w % n], &b);
        uint64_t wseed = call_seed(secret, k++);
        perturb_buffers(&t->cases[w % n], &b, perturb ? wseed : 0);
        call_case(&t->cases[w % n], &b);
#ifdef CUDAPERF_GPU
        check_cuda(stats, -1, cudaDeviceSynchronize());
#endif
        free_buffers(&b);
    }}
    double start = now_ns(), end = start;
    int reps = 0;
#ifdef CUDAPERF_GPU
    /* One call among the first MIN, chosen by the secret, is traced (CUPTI) instead of timed: the evidence that
     * timed calls do their work on the GPU comes from a call the program cannot tell from the timed ones. */
    int traced = secret ? (int)(cp_mix(secret ^ 0x7261636564ull) % (uint64_t)min_reps) : -1;
#endif
    while (reps < max_reps) {{
        uint32_t ci = (uint32_t)(reps % (int)n);
        Buffers b;
#ifdef CUDAPERF_GPU
        if (reps == traced) {{
            traced = -1;
            setup_buffers(&t->cases[ci], &b);
            perturb_buffers(&t->cases[ci], &b, perturb ? call_seed(secret, 1ull << 40) : 0); /* k is the timed calls' */
            cudaperf_probe_begin();
            double c0 = now_ns();
            call_case(&t->cases[ci], &b);
            check_cuda(stats, -1, cudaDeviceSynchronize());
            double c1 = now_ns();
            cudaperf_probe_stats p = cudaperf_probe_end();
            fprintf(stats, "traced window %d case %u valid %d call_ns %.0f kernels %llu kernel_ns %llu memcpy_ns %llu memset_ns %llu htod_bytes %llu dtoh_bytes %llu\\n",
                    t->windows, ci, p.valid, c1 - c0, (unsigned long long)p.kernels, (unsigned long long)p.kernel_ns,
                    (unsigned long long)p.memcpy_ns, (unsigned long long)p.memset_ns,
                    (unsigned long long)p.htod_bytes, (unsigned long long)p.dtoh_bytes);
            free_buffers(&b);
            start += now_ns() - c0; /* the traced call does not count against the window's budget */
            continue;
        }}
#endif
        uint64_t seed = perturb ? call_seed(secret, k) : 0;
        k++;
        setup_buffers(&t->cases[ci], &b);          /* inputs copied afresh, outside the timed region */
        perturb_buffers(&t->cases[ci], &b, seed);
        double t0 = now_ns();
        call_case(&t->cases[ci], &b);
#ifdef CUDAPERF_GPU
        cudaError_t err = cudaDeviceSynchronize(); /* device-wide: work on any stream counts */
#endif
        double t1 = now_ns();
        end = t1;
#ifdef CUDAPERF_GPU
        check_cuda(stats, -1, err);
#endif
        times[reps++] = t1 - t0;
        if (t->have[ci]) free_buffers(&t->last[ci]);
        t->last[ci] = b;
        t->have[ci] = 1;
        t->last_seed[ci] = seed;
        if (reps >= min_reps && (cv_of(times, reps) < cv_target || (now_ns() - start) / 1e6 > budget_ms)) break;
    }}
    for (int i = 0; i < reps; ++i) fprintf(stats, "time_ns %.0f\\n", times[i]);
    fprintf(stats, "window %d reps %d warm %d span_ns %.0f\\n", t->windows, reps, w, end - (cmd_ns > 0 ? cmd_ns : warm_start));
    fflush(stats);
    free(times);
    t->windows++;
}}

/* The outputs of the last call on each case, then (GPU build) one extra traced call: where a call's GPU time
 * goes. */
static void report(int fd, const char *line) {{
    size_t n = strlen(line);
    if (fd >= 0 && write(fd, line, n) != (ssize_t)n) {{ /* the harness stopped listening: nothing to do */ }}
}}

/* Report LINE on the control pipe and wait for the harness's next line (or the end of its input): the harness
 * reads what was written so far while no candidate code can run. */
static void sync_with_harness(int ctl, const char *line) {{
    char buf[64];
    if (ctl < 0) return;
    report(ctl, line);
    if (!fgets(buf, sizeof buf, stdin)) {{ /* end of input: go on */ }}
}}

static void timing_close(Timing *t, const char *outp, FILE *stats, int ctl) {{
    uint32_t n = t->n;
    FILE *out = open_out(outp, n);
    for (uint32_t i = 0; i < n; ++i) write_case(out, &t->cases[i], &t->last[i]);
    fclose(out);
    for (uint32_t i = 0; i < n; ++i) fprintf(stats, "kept case %u seed %llu\\n", i, (unsigned long long)t->last_seed[i]);
    fflush(stats);
    sync_with_harness(ctl, "timing_written\\n"); /* the outputs and records of the timed calls, read now */
#ifdef CUDAPERF_GPU
    {{
        Buffers b;
        setup_buffers(&t->cases[0], &b);
        perturb_buffers(&t->cases[0], &b, call_seed(t->last_seed[0], 7));
        cudaperf_probe_begin();
        double c0 = now_ns();
        call_case(&t->cases[0], &b);
        check_cuda(stats, -1, cudaDeviceSynchronize());
        double c1 = now_ns();
        cudaperf_probe_stats p = cudaperf_probe_end();
        fprintf(stats, "profile valid %d call_ns %.0f kernels %llu kernel_ns %llu memcpy_ns %llu memset_ns %llu htod_bytes %llu dtoh_bytes %llu\\n",
                p.valid, c1 - c0, (unsigned long long)p.kernels, (unsigned long long)p.kernel_ns,
                (unsigned long long)p.memcpy_ns, (unsigned long long)p.memset_ns,
                (unsigned long long)p.htod_bytes, (unsigned long long)p.dtoh_bytes);
        free_buffers(&b);
    }}
#else
    (void)stats;
#endif
}}

static int run_timing(const char *in, const char *outp, FILE *stats, int min_reps, int max_reps, double budget_ms,
                      double cv_target, int warmup, double warmup_ms, uint64_t secret, int perturb) {{
    Timing t;
    double cmd_ns = now_ns();
    timing_open(&t, in);
    timing_window(&t, stats, min_reps, max_reps, budget_ms, cv_target, warmup, warmup_ms, secret, perturb, cmd_ns);
    timing_close(&t, outp, stats, -1);
    return 0;
}}

int main(int argc, char **argv) {{
    signal(SIGPIPE, SIG_IGN);
    if (argc < 5) {{
        fprintf(stderr, "usage: %s test|time|testtime INPUTS OUTPUTS STATS [...]\\n", argv[0]);
        return {EXIT_BAD_INPUT};
    }}
    FILE *stats = fopen(argv[4], "w");
    if (!stats) return {EXIT_BAD_INPUT};
    int probe_ready = 0;
#ifdef CUDAPERF_GPU
    {{
        char err[256] = {{0}};
        probe_ready = cudaperf_probe_init(err, (int)sizeof err);
        if (!probe_ready) fprintf(stats, "probe_error %s\\n", err);
        cudaError_t e = cudaFree(0); /* create the context before anything is measured */
        if (e != cudaSuccess) {{
            fprintf(stats, "init_error %s %s\\n", cudaGetErrorName(e), cudaGetErrorString(e));
            fclose(stats);
            return {EXIT_NO_GPU};
        }}
    }}
#endif
    fflush(stats);
    int rc;
    if (strcmp(argv[1], "test") == 0) rc = run_tests(argv[2], argv[3], stats, NULL, 0);
    else if (strcmp(argv[1], "ptest") == 0) {{
        int ns = argc - 5;
        uint64_t *seeds = (uint64_t *)xmalloc(sizeof(uint64_t) * (size_t)(ns > 0 ? ns : 1));
        for (int i = 0; i < ns; ++i) seeds[i] = strtoull(argv[5 + i], NULL, 10);
        rc = run_tests(argv[2], argv[3], stats, seeds, ns);
    }}
    else if (strcmp(argv[1], "time") == 0 && argc >= 10)
        rc = run_timing(argv[2], argv[3], stats, atoi(argv[5]), atoi(argv[6]), atof(argv[7]), atof(argv[8]), atoi(argv[9]),
                        argc >= 11 ? atof(argv[10]) : 0.0, argc >= 12 ? strtoull(argv[11], NULL, 10) : 0, argc >= 13 ? atoi(argv[12]) : 0);
    else if (strcmp(argv[1], "testtime") == 0 && argc >= 9) {{
        int ctl = atoi(argv[8]);
        /* Before any candidate code runs: the context is up (GPU build), and whether the probe traces. What the
         * harness reads from the files after this line can have been written by the candidate. */
        report(ctl, probe_ready ? "ready probe 1\\n" : "ready probe 0\\n");
        rc = run_tests(argv[2], argv[3], stats, NULL, 0);
        fflush(stats);
        report(ctl, "tests_done\\n");
        FILE *tstats = NULL;
        Timing t;
        char cmd[256];
        while (rc == 0 && fgets(cmd, sizeof cmd, stdin)) {{
            double cmd_ns = now_ns(); /* the window's span starts here: everything after the command counts */
            int min_reps, max_reps, warmup;
            double budget_ms, cv, warmup_ms;
            unsigned long long secret = 0;
            int perturb = 0;
            if (sscanf(cmd, "time %d %d %lf %lf %d %lf %llu %d", &min_reps, &max_reps, &budget_ms, &cv, &warmup,
                       &warmup_ms, &secret, &perturb) < 6) break;
            if (!tstats) {{
                tstats = fopen(argv[7], "w");
                if (!tstats) {{ rc = {EXIT_BAD_INPUT}; break; }}
                timing_open(&t, argv[5]);
            }}
            timing_window(&t, tstats, min_reps, max_reps, budget_ms, cv, warmup, warmup_ms, (uint64_t)secret, perturb, cmd_ns);
            report(ctl, "timing_done\\n");
        }}
        if (tstats) {{
            timing_close(&t, argv[6], tstats, ctl);
            fclose(tstats);
        }}
        fflush(stats);
        /* Before returning: static destructors and exit handlers (the candidate's too) run after main, once the
         * harness has read everything it judges. */
        sync_with_harness(ctl, "closed\\n");
    }}
    else {{ fprintf(stderr, "cudaperf driver: bad mode\\n"); rc = {EXIT_BAD_INPUT}; }}
    fclose(stats);
    return rc;
}}
"""
