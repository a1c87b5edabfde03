/*
 * `ats bench kernels` — speed of the executor's kernels against measured ceilings (issue 5):
 * - GPU decode GEMV per weight type at Qwen3-14B shapes, as a fraction of the measured HBM read
 *   bandwidth (ex_cuda_read_probe over 4 GiB); bytes counted = weight bytes (activations are < 0.2%).
 * - GPU prefill GEMM (dequantize + cublasGemmEx, n_tok tokens) in TFLOP/s next to cuBLAS's own F16
 *   GEMM on the same shape and on 8192³ (the ceiling).
 * - CPU prefill GEMM (ex_cpu_matmul over --tokens rows at the ffn_up shape) in GMAC/s (compute-bound)
 * - CPU decode GEMV (ex_cpu_matmul, --threads threads) as a fraction of the measured DRAM read
 *   bandwidth (an OpenMP read loop over 2 GiB with the same thread count).
 * Timing: GPU with CUDA events around each call after warm-up, CPU with CLOCK_MONOTONIC; the median
 * of --reps runs. Weights are random values quantized by the CPU code (ex_quantize_row); several
 * copies are cycled so the working set exceeds the GPU's L2 / the CPU's last-level cache.
 * Writes a table to stdout and JSON (commit, machine, parameters, figures) to --out (default
 * ./bench-kernels.json; the committed H200 figures, experiments/bench/bench-kernels.json, change only
 * when --out names them), checked before the work and written through common/outfile.
 */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ats/quant.h"
#include "ats_version.h"
#include "atsc/model_json.h"
#include "atsc/outfile.h"
#include "cli.h"
#include "ex/model.h"
#include "ex/session.h"
#include "ex/ops.h"
#include "ex/quant.h"
#ifdef ATS_HAVE_CUDA
#include "ex/gpu.h"
#endif

typedef struct shape {
    const char *name;
    int64_t rows, cols; /* W (rows, cols): y (rows) = W x (cols) */
} shape;

/* Qwen3-14B: hidden 5120, intermediate 17408, 40 heads / 8 KV heads of 128 (models/qwen3-14b.json) */
static const shape SHAPES[] = {
    {"ffn_up 5120->17408", 17408, 5120},
    {"ffn_down 17408->5120", 5120, 17408},
    {"attn_q 5120->5120", 5120, 5120},
    {"attn_kv 5120->1024", 1024, 5120},
};
#define N_SHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])
#ifdef ATS_HAVE_CUDA
/* GPU only, quantized types: the fused forms runtimes launch as one GEMV (llama.cpp and vLLM fuse
 * gate+up and Q+K+V), which show the kernel's streaming rate with less of the per-launch fixed cost */
static const shape GPU_FUSED_SHAPES[] = {
    {"gate_up 5120->34816", 34816, 5120},
    {"qkv 5120->7168", 7168, 5120},
};
#define N_FUSED (int)(sizeof GPU_FUSED_SHAPES / sizeof GPU_FUSED_SHAPES[0])
#endif

/* decode GEMV: every weight type the executor runs; prefill GEMM: the quantized types with prefill kernels */
static const ats_qtype CPU_TYPES[] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0, ATS_Q_Q6_K,
                                      ATS_Q_MXFP4, ATS_Q_F16, ATS_Q_BF16, ATS_Q_F32};
static const ats_qtype CPU_PREFILL_TYPES[] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0, ATS_Q_Q6_K};
#define CPU_PREFILL_REPS 3 /* timed calls of each CPU prefill GEMM (a call is long) */

typedef struct bench_opts {
    int threads, reps, n_tok, skip_cpu, skip_gpu, skip_model, prompt, decode;
    const char *out, *model;
} bench_opts;

/* Ceilings measured by the kernel parts, used as floors for the whole-model part. */
typedef struct ceilings {
    double gpu_read_Bps, gpu_gemm_flops, cpu_read_Bps;
} ceilings;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* rows x cols random values in [-1, 1) quantized to `t` (rows in parallel). NULL on failure. */
static void *make_weights(ats_qtype t, int64_t rows, int64_t cols, uint64_t seed, uint64_t *bytes_out)
{
    uint64_t rb = 0;
    if (ats_qtype_bytes(t, cols, &rb) != ATS_OK) return NULL;
    uint8_t *w = malloc((size_t)(rb * (uint64_t)rows));
    if (!w) return NULL;
    int bad = 0;
#pragma omp parallel
    {
        float *tmp = malloc((size_t)cols * sizeof(float));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!tmp) { bad = 1; continue; }
            uint64_t s = seed ^ (uint64_t)r * 0x9E3779B97F4A7C15ull;
            for (int64_t j = 0; j < cols; j++) tmp[j] = (float)((double)(splitmix(&s) >> 11) * 0x1.0p-52 - 1.0);
            if (ex_quantize_row(t, tmp, w + (uint64_t)r * rb, cols) != ATS_OK) bad = 1;
        }
        free(tmp);
    }
    if (bad) { free(w); return NULL; }
    *bytes_out = rb * (uint64_t)rows;
    return w;
}

static void machine_json(json_t *root, const bench_opts *o)
{
    json_t *m = json_object();
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    json_object_set_new(m, "hostname", json_string(host));
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    int ncpu = 0;
    char model[256] = "?";
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            ncpu++;
            char *c = strchr(line, ':');
            if (c && ncpu == 1) {
                snprintf(model, sizeof model, "%s", c + 2);
                model[strcspn(model, "\n")] = '\0';
            }
        }
    }
    if (f) fclose(f);
    json_object_set_new(m, "cpu_model", json_string(model));
    json_object_set_new(m, "cpu_logical_cores", json_integer(ncpu));
    json_object_set_new(m, "cpu_features", json_integer((json_int_t)ex_cpu_features()));
    json_object_set_new(root, "machine", m);
    json_t *p = json_object();
    json_object_set_new(p, "threads", json_integer(o->threads));
    /* the timed calls each figure is the median of, as used (--reps: every GEMV, CPU and GPU) */
    json_object_set_new(p, "reps", json_integer(o->reps));
    json_object_set_new(p, "gpu_prefill_gemm_reps", json_integer(o->reps / 2 + 3));
    json_object_set_new(p, "cpu_prefill_gemm_reps", json_integer(CPU_PREFILL_REPS));
    json_object_set_new(p, "prefill_tokens", json_integer(o->n_tok));
    json_object_set_new(p, "model_shapes", json_string("Qwen3-14B (hidden 5120, ffn 17408, 40/8 heads x 128)"));
    json_object_set_new(root, "params", p);
}

/* ---- CPU ---------------------------------------------------------------------------------------- */
/* The DRAM read probe: the best rate the machine reads a 2 GiB buffer at with `threads` OpenMP threads,
 * which the CPU GEMV rows are a fraction of. Reps alternate a static split (one contiguous range a
 * thread, the pages' first-touch owner) and a dynamic one (1 MiB chunks, as the GEMV's row tiles: a
 * thread that is slowed down does not hold the rep back); the ceiling is the fastest rep of either
 * (STREAM's convention: the best the machine did), the median and slowest show the spread.
 * The loop: 8 independent 16-byte XOR accumulators (128 bytes a trip), plain SSE2 as the build has no
 * -march. The former 2 accumulators of 64 bytes (8 xmm registers; 8 x 64 bytes would spill) on the
 * 2-core dev VM, best of 7-11 reps, a stand-alone copy of each loop at -O2, 2026-11-30: 2 threads 52 ->
 * 56-58 GB/s while the host was quiet, 34 -> 33 (no difference) while it was busy; 1 thread 26 -> 28-30;
 * AVX-512 8 x 64 bytes (target attribute) 50 / 32 / 25, no better. On the H200 host the old probe read
 * 65 GB/s (median of 7) where the F32 GEMV streamed 107; the best rep and the dynamic split (a slow
 * thread cannot hold a rep back, as in the GEMV's dynamic row tiles) are the suspects, not yet measured
 * there. */
typedef uint64_t v2u64 __attribute__((vector_size(16)));
typedef struct dram_probe {
    double best_Bps, median_Bps, slowest_Bps; /* over all reps [B/s] */
    double best_static_Bps, best_dynamic_Bps;
    int reps;                                 /* reps of each split */
} dram_probe;

static uint64_t read_pass(const v2u64 *buf, size_t n, int threads, int dynamic)
{
    uint64_t acc = 0;
#pragma omp parallel num_threads(threads) reduction(^ : acc)
    {
        v2u64 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
        if (dynamic) {
#pragma omp for schedule(dynamic, 8192) nowait /* 8192 trips of 128 bytes: 1 MiB */
            for (size_t i = 0; i < n; i += 8) {
                a0 ^= buf[i], a1 ^= buf[i + 1], a2 ^= buf[i + 2], a3 ^= buf[i + 3];
                a4 ^= buf[i + 4], a5 ^= buf[i + 5], a6 ^= buf[i + 6], a7 ^= buf[i + 7];
            }
        } else {
#pragma omp for schedule(static) nowait
            for (size_t i = 0; i < n; i += 8) {
                a0 ^= buf[i], a1 ^= buf[i + 1], a2 ^= buf[i + 2], a3 ^= buf[i + 3];
                a4 ^= buf[i + 4], a5 ^= buf[i + 5], a6 ^= buf[i + 6], a7 ^= buf[i + 7];
            }
        }
        a0 ^= a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
        acc ^= a0[0] ^ a0[1];
    }
    return acc;
}

/* reps of each split (2 * reps in all); 0 on success, -1 when the buffer cannot be allocated */
static int cpu_read_bw(int threads, int reps, dram_probe *out)
{
    memset(out, 0, sizeof *out);
    size_t bytes = (size_t)2 << 30, n = bytes / sizeof(v2u64);
    v2u64 *buf = aligned_alloc(64, bytes);
    double *bw = malloc((size_t)(2 * reps) * sizeof *bw);
    if (!buf || !bw) {
        free(buf);
        free(bw);
        return -1;
    }
    uint64_t *b64 = (uint64_t *)buf;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < bytes / 8; i++) b64[i] = i * 0x9E3779B97F4A7C15ull;
    volatile uint64_t sink = 0;
    for (int r = 0; r < 2 * reps; r++) {
        const int dynamic = r % 2;
        int64_t t0 = now_ns();
        sink ^= read_pass(buf, n, threads, dynamic);
        bw[r] = (double)bytes / ((double)(now_ns() - t0) * 1e-9);
        double *best = dynamic ? &out->best_dynamic_Bps : &out->best_static_Bps;
        if (bw[r] > *best) *best = bw[r];
    }
    (void)sink;
    out->reps = reps;
    out->median_Bps = median(bw, 2 * reps); /* sorts bw */
    out->slowest_Bps = bw[0];
    out->best_Bps = bw[2 * reps - 1];
    free(bw);
    free(buf);
    return 0;
}

/* CPU prefill GEMM: ex_cpu_matmul over --tokens activation rows at the ffn_up shape, per CPU type. A chunk
 * reuses each weight row for all its tokens, so this is compute-bound (no DRAM ceiling applies); GMAC/s
 * = rows·cols·tokens / median time, and the matrix's own tok/s. 3 timed calls after one warm-up. Returns
 * the JSON rows; *bad = 1 where a type could not be built or run or memory ran out (said on stderr). */
static json_t *bench_cpu_prefill(const bench_opts *o, int *bad)
{
    json_t *arr = json_array();
    const shape *sh = &SHAPES[0];
    /* --tokens goes up to 100000 for the GPU GEMM; on the CPU that is hours a call: at most 2048 here */
    const int64_t n = o->n_tok < 2048 ? o->n_tok : 2048;
    const unsigned f = ex_cpu_features();
    const char *path = (f & EX_CPU_AMX) && (f & EX_CPU_AVX512VNNI) && (f & EX_CPU_AVX512) && n >= EX_CPU_AMX_MIN_TOKENS
                           ? "AMX (Q4_K, Q6_K) and AVX-512 VNNI"
                           : (f & EX_CPU_AVX512VNNI) ? "AVX-512 VNNI" : (f & EX_CPU_AVX2) ? "AVX2" : "scalar";
    printf("\nCPU prefill GEMM, %lld tokens%s, %s: ex_cpu_matmul, %s kernels (ATS_CPU_FEATURES lowers them)\n",
           (long long)n, n < o->n_tok ? " (--tokens capped at 2048 on the CPU)" : "", sh->name, path);
    printf("%-6s %10s %10s %10s\n", "type", "median_ms", "GMAC/s", "tok/s");
    float *x = malloc((size_t)(n * sh->cols) * sizeof(float)), *y = malloc((size_t)(n * sh->rows) * sizeof(float));
    uint64_t sd = 7;
    for (int64_t j = 0; x && j < n * sh->cols; j++) x[j] = (float)((double)(splitmix(&sd) >> 11) * 0x1.0p-52 - 1.0);
    for (size_t ti = 0; x && y && ti < sizeof CPU_PREFILL_TYPES / sizeof CPU_PREFILL_TYPES[0]; ti++) {
        ats_qtype t = CPU_PREFILL_TYPES[ti];
        uint64_t bytes = 0;
        void *w = make_weights(t, sh->rows, sh->cols, 4321 + ti, &bytes);
        if (!w) {
            fprintf(stderr, "ats bench kernels: cannot build %s weights for the CPU prefill GEMM: out of memory\n",
                    ats_qtype_name(t));
            *bad = 1;
            continue;
        }
        ex_tensor wt = {t, {sh->cols, sh->rows, 1}, bytes / (uint64_t)sh->rows, w};
        double tm[CPU_PREFILL_REPS] = {0};
        enum ats_status mst = ATS_OK;
        for (int r = -1; r < CPU_PREFILL_REPS && mst == ATS_OK; r++) {
            int64_t t0 = now_ns();
            mst = ex_cpu_matmul(&wt, x, n, y);
            if (r >= 0) tm[r] = (double)(now_ns() - t0) * 1e-9;
        }
        free(w);
        if (mst != ATS_OK) {
            fprintf(stderr, "ats bench kernels: ex_cpu_matmul(%s, %lld tokens): %s\n", ats_qtype_name(t), (long long)n,
                    ats_status_str(mst));
            *bad = 1;
            continue;
        }
        double med = median(tm, CPU_PREFILL_REPS), gmac = (double)sh->rows * (double)sh->cols * (double)n / med * 1e-9;
        printf("%-6s %10.2f %10.1f %10.1f\n", ats_qtype_name(t), med * 1e3, gmac, (double)n / med);
        json_t *e = json_object();
        json_object_set_new(e, "type", json_string(ats_qtype_name(t)));
        json_object_set_new(e, "shape", json_string(sh->name));
        json_object_set_new(e, "tokens", json_integer((json_int_t)n));
        json_object_set_new(e, "median_s", json_real(med));
        json_object_set_new(e, "GMACps", json_real(gmac));
        json_object_set_new(e, "kernels", json_string(path));
        json_array_append_new(arr, e);
    }
    if (!x || !y) {
        fprintf(stderr, "ats bench kernels: out of memory for the CPU prefill GEMM's activations\n");
        *bad = 1;
    }
    free(x);
    free(y);
    return arr;
}

/* One CPU GEMV row: `reps` timed calls of ex_cpu_matmul (after 3 warm-ups) over copies of the weights
 * cycled so that the set (>= 1 GiB, at most 64 copies) exceeds the last-level cache; bw is the DRAM
 * probe's rate [B/s] (NAN when the probe failed: no fraction then). Appends the row to arr and prints it;
 * -1 with one line on stderr when weights, copies' table or buffers cannot be allocated or the matmul
 * fails. */
static int cpu_gemv_row(ats_qtype t, const shape *sh, uint64_t seed, int reps, double bw, json_t *arr)
{
    uint64_t bytes = 0;
    int rc = -1, nc = 0;
    void **w = NULL;
    float *x = NULL, *y = NULL;
    double *tm = NULL;
    void *w0 = make_weights(t, sh->rows, sh->cols, seed, &bytes);
    if (!w0) {
        fprintf(stderr, "ats bench kernels: cannot build %s weights (%s): out of memory\n", ats_qtype_name(t), sh->name);
        return -1;
    }
    nc = (int)(((uint64_t)1 << 30) / bytes) + 1;
    if (nc > 64) nc = 64;
    w = calloc((size_t)nc, sizeof *w);
    x = malloc((size_t)sh->cols * 4);
    y = malloc((size_t)sh->rows * 4);
    tm = malloc((size_t)reps * sizeof *tm);
    if (!w || !x || !y || !tm) {
        fprintf(stderr, "ats bench kernels: out of memory for the %s %s GEMV's buffers\n", ats_qtype_name(t), sh->name);
        free(w0);
        nc = 0;
        goto out;
    }
    w[0] = w0;
    for (int c = 1; c < nc; c++) { /* fewer copies where memory is short: still timed, maybe cached */
        w[c] = malloc(bytes);
        if (w[c]) memcpy(w[c], w0, bytes);
        else { nc = c; break; }
    }
    uint64_t s = 99;
    for (int64_t j = 0; j < sh->cols; j++) x[j] = (float)((double)(splitmix(&s) >> 11) * 0x1.0p-52 - 1.0);
    uint64_t rb = bytes / (uint64_t)sh->rows;
    for (int r = -3; r < reps; r++) {
        ex_tensor wt = {t, {sh->cols, sh->rows, 1}, rb, w[(r + 3) % nc]};
        int64_t t0 = now_ns();
        enum ats_status mst = ex_cpu_matmul(&wt, x, 1, y);
        if (r >= 0) tm[r] = (double)(now_ns() - t0) * 1e-9;
        if (mst != ATS_OK) {
            fprintf(stderr, "ats bench kernels: ex_cpu_matmul(%s, %s): %s\n", ats_qtype_name(t), sh->name,
                    ats_status_str(mst));
            goto out;
        }
    }
    double med = median(tm, reps), gbs = (double)bytes / med;
    /* faster than the probe: the probe under-reads this machine (or the copies were cached) */
    const int probed = bw > 0, over = probed && gbs > bw;
    char frac[16] = "       -";
    if (probed) snprintf(frac, sizeof frac, "%7.1f%%", 100.0 * gbs / bw);
    printf("%-6s %-22s %10.1f %10.1f %9.1f %s%s\n", ats_qtype_name(t), sh->name, bytes / 1e6, med * 1e6, gbs * 1e-9,
           frac, over ? "  over the probe: it under-reads" : "");
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string(ats_qtype_name(t)));
    json_object_set_new(e, "shape", json_string(sh->name));
    json_object_set_new(e, "rows", json_integer(sh->rows));
    json_object_set_new(e, "cols", json_integer(sh->cols));
    json_object_set_new(e, "weight_bytes", json_integer((json_int_t)bytes));
    json_object_set_new(e, "reps", json_integer(reps));
    json_object_set_new(e, "median_s", json_real(med));
    json_object_set_new(e, "GBps", json_real(gbs * 1e-9));
    if (probed) { /* without the probe: no ceiling to be a fraction of (cpu.dram_read_error says why) */
        json_object_set_new(e, "fraction_of_dram_read", json_real(gbs / bw));
        json_object_set_new(e, "over_dram_probe", json_boolean(over));
    }
    json_array_append_new(arr, e);
    rc = 0;
out:
    for (int c = 0; c < nc; c++) free(w[c]);
    free(w);
    free(x);
    free(y);
    free(tm);
    return rc;
}

static int bench_cpu(const bench_opts *o, json_t *root, ceilings *cl)
{
    json_t *cpu = json_object(), *arr = json_array();
    omp_set_num_threads(o->threads);
    const int reps = o->reps; /* as asked and as params.reps says (it was raised to 5 here, unsaid) */
    dram_probe dp;
    json_object_set_new(cpu, "threads", json_integer(o->threads));
    double bw = NAN;
    if (cpu_read_bw(o->threads, 7, &dp) == 0) {
        bw = dp.best_Bps;
        printf("\nCPU (%d threads): measured DRAM read bandwidth %.1f GB/s (the fastest of %d reps of a 2 GiB read;\n"
               "median %.1f, slowest %.1f; best with a static split %.1f, with 1 MiB dynamic chunks %.1f)\n",
               o->threads, bw * 1e-9, 2 * dp.reps, dp.median_Bps * 1e-9, dp.slowest_Bps * 1e-9,
               dp.best_static_Bps * 1e-9, dp.best_dynamic_Bps * 1e-9);
        /* the ceiling (files written before this field's siblings: the median of 7 static reps, 2 x 64-byte loop) */
        json_object_set_new(cpu, "dram_read_GBps", json_real(bw * 1e-9));
        json_object_set_new(cpu, "dram_read_GBps_median", json_real(dp.median_Bps * 1e-9));
        json_object_set_new(cpu, "dram_read_GBps_slowest", json_real(dp.slowest_Bps * 1e-9));
        json_object_set_new(cpu, "dram_read_GBps_best_static", json_real(dp.best_static_Bps * 1e-9));
        json_object_set_new(cpu, "dram_read_GBps_best_dynamic", json_real(dp.best_dynamic_Bps * 1e-9));
        json_object_set_new(cpu, "dram_read_reps", json_integer(2 * dp.reps));
        json_object_set_new(cpu, "dram_read_ceiling",
                            json_string("fastest rep (STREAM convention) of a 2 GiB read, static and 1 MiB dynamic "
                                        "splits alternating, 8 x 16-byte XOR accumulators"));
    } else {
        /* no ceiling: the rows below have no of_DRAM fraction and the whole model no CPU floor (the JSON
         * says why instead of NaN figures, which JSON cannot hold) */
        const char *why = "probe failed: cannot allocate its 2 GiB buffer (out of memory)";
        printf("\nCPU (%d threads): DRAM read bandwidth %s; GEMV rows without of_DRAM\n", o->threads, why);
        fprintf(stderr, "ats bench kernels: DRAM read bandwidth %s\n", why);
        json_object_set_new(cpu, "dram_read_error", json_string(why));
    }
    cl->cpu_read_Bps = bw;
    printf("%-6s %-22s %10s %10s %9s %8s  %s\n", "type", "shape", "MB", "median_us", "GB/s", "of_DRAM", "note");
    int rc = 0;
    for (size_t ti = 0; ti < sizeof CPU_TYPES / sizeof CPU_TYPES[0] && rc == 0; ti++)
        for (int si = 0; si < 2 && rc == 0; si++) /* the two FFN shapes carry 2/3 of the weights */
            rc = cpu_gemv_row(CPU_TYPES[ti], &SHAPES[si], 1234 + ti, reps, bw, arr);
    json_object_set_new(cpu, "gemv", arr);
    if (rc == 0) {
        int bad = 0;
        json_object_set_new(cpu, "prefill_gemm", bench_cpu_prefill(o, &bad));
        rc = bad ? -1 : 0;
    }
    json_object_set_new(root, "cpu", cpu);
    return rc;
}

/* ---- GPU ---------------------------------------------------------------------------------------- */
#ifdef ATS_HAVE_CUDA
static const ats_qtype GPU_TYPES[] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0, ATS_Q_Q6_K, ATS_Q_MXFP4,
                                      ATS_Q_F16,  ATS_Q_BF16, ATS_Q_F32};

typedef ex_gpu_status (*gpu_fn)(void *arg, int rep);

/* max_i |y_gpu[i] - y_cpu[i]| / max_i |y_cpu[i]| for one GEMV: y_cpu from ex_cpu_matmul (int8
 * activations for the quantized types, as the GPU); NaN → INFINITY. Bound: 2.4e-2 quantized (twice
 * test_cuda_ops' GEMV bound; a wrong row or block gives O(1)), 1e-3 float. */
static double gemv_check(ats_qtype t, const void *h, int64_t rows, int64_t cols, uint64_t bytes, const float *hx,
                         const float *dy, ex_stream s)
{
    float *yg = malloc((size_t)rows * 4), *yc = malloc((size_t)rows * 4);
    double err = INFINITY;
    ex_tensor wt = {t, {cols, rows, 1}, bytes / (uint64_t)rows, (void *)h};
    if (yg && yc && ex_gpu_memcpy_d2h(yg, dy, (size_t)rows * 4, s) == 0 && ex_gpu_stream_sync(s) == 0 &&
        ex_cpu_matmul(&wt, hx, 1, yc) == ATS_OK) {
        double scale = 1e-30, e = 0;
        for (int64_t i = 0; i < rows; i++) {
            double d = fabs((double)yg[i] - (double)yc[i]);
            if (!(d <= e)) e = isnan(d) ? INFINITY : d;
            if (fabs((double)yc[i]) > scale) scale = fabs((double)yc[i]);
        }
        err = e / scale;
    }
    free(yg);
    free(yc);
    return err;
}

/* Median time of one call of fn [s]: reps samples, each `batch` calls back to back between two
 * events (divided by batch), after 3 warm-up calls. batch > 1 is the steady state of a forward
 * pass, where the next launch is queued while a kernel runs; batch = 1 adds the launch latency. */
static double gpu_time_batch(ex_stream s, int reps, int batch, gpu_fn fn, void *arg)
{
    ex_event *ev = calloc((size_t)(2 * reps), sizeof *ev);
    double *t = malloc((size_t)reps * sizeof *t), med = NAN;
    if (!ev || !t) {
        fprintf(stderr, "ats bench kernels: out of memory for %d CUDA events\n", 2 * reps);
        goto out;
    }
    for (int i = 0; i < 2 * reps; i++)
        if (ex_gpu_event_new(&ev[i])) goto out;
    for (int r = 0; r < 3; r++)
        if (fn(arg, r)) goto out;
    for (int r = 0; r < reps; r++) {
        ex_gpu_event_record(ev[2 * r], s);
        for (int b = 0; b < batch; b++)
            if (fn(arg, r * batch + b)) goto out;
        ex_gpu_event_record(ev[2 * r + 1], s);
    }
    if (ex_gpu_stream_sync(s)) goto out;
    for (int r = 0; r < reps; r++) {
        int64_t ns = 0;
        ex_gpu_event_elapsed_ns(ev[2 * r], ev[2 * r + 1], &ns);
        t[r] = (double)ns * 1e-9 / batch;
    }
    med = median(t, reps);
out:
    for (int i = 0; ev && i < 2 * reps; i++) ex_gpu_event_free(ev[i]);
    free(ev);
    free(t);
    return med;
}
static double gpu_time(ex_stream s, int reps, gpu_fn fn, void *arg) { return gpu_time_batch(s, reps, 1, fn, arg); }

/* Median time of one call of fn [s] with the host out of the way: calls 0..ncalls-1 captured once
 * into a CUDA graph, the graph replayed `reps` times, each replay between two events (divided by
 * ncalls). This is the GPU-side cost of a call inside a captured forward pass (llama.cpp replays
 * its decode graph the same way); gpu_time_batch's figure also includes the host's launch work
 * whenever that is slower than the kernel. NAN when capture fails. */
static double gpu_time_graph(ex_stream s, int reps, int ncalls, gpu_fn fn, void *arg)
{
    ex_event *ev = calloc((size_t)(2 * reps), sizeof *ev);
    double *t = malloc((size_t)reps * sizeof *t), med = NAN;
    ex_graph gr = NULL;
    int ok = ev && t;
    for (int i = 0; ok && i < 2 * reps; i++) ok = ex_gpu_event_new(&ev[i]) == 0;
    if (ok && ex_gpu_graph_begin(s) == 0) {
        for (int c = 0; c < ncalls && ok; c++) ok = fn(arg, c) == 0;
        ex_graph g2 = NULL;
        int ended = ex_gpu_graph_end(s, &g2) == 0;
        if (ok && ended) gr = g2;
        else ex_gpu_graph_free(g2);
    }
    if (!gr) goto out;
    for (int r = 0; r < 2; r++)
        if (ex_gpu_graph_launch(gr, s)) goto out;
    for (int r = 0; r < reps; r++) {
        ex_gpu_event_record(ev[2 * r], s);
        if (ex_gpu_graph_launch(gr, s)) goto out;
        ex_gpu_event_record(ev[2 * r + 1], s);
    }
    if (ex_gpu_stream_sync(s)) goto out;
    for (int r = 0; r < reps; r++) {
        int64_t ns = 0;
        ex_gpu_event_elapsed_ns(ev[2 * r], ev[2 * r + 1], &ns);
        t[r] = (double)ns * 1e-9 / ncalls;
    }
    med = median(t, reps);
out:
    ex_gpu_graph_free(gr);
    for (int i = 0; ev && i < 2 * reps; i++) ex_gpu_event_free(ev[i]);
    free(ev);
    free(t);
    return med;
}

typedef struct gemv_arg {
    ex_gpu *g;
    ex_stream s;
    int type;
    void **w;
    int nc;
    int64_t rows, cols, n_tok;
    float *x, *y;
    const void *x16;
} gemv_arg;

static ex_gpu_status run_gemv(void *p, int rep)
{
    gemv_arg *a = p;
    return ex_cuda_gemv(a->g, a->type, a->w[rep % a->nc], a->rows, a->cols, a->x, a->y, a->s);
}
static ex_gpu_status run_gemm(void *p, int rep)
{
    gemv_arg *a = p;
    return ex_cuda_gemm(a->g, a->type, a->w[rep % a->nc], a->rows, a->cols, a->x, a->n_tok, a->y, a->s);
}
static ex_gpu_status run_gemm16(void *p, int rep)
{
    gemv_arg *a = p;
    return ex_cuda_gemm_16(a->g, 0, a->w[rep % a->nc], a->rows, a->cols, a->x16, a->n_tok, a->y, a->s);
}
typedef struct probe_arg { ex_gpu *g; ex_stream s; void *buf, *buf2; size_t bytes; } probe_arg;
static ex_gpu_status run_probe(void *p, int rep)
{
    (void)rep;
    probe_arg *a = p;
    return ex_cuda_read_probe(a->g, a->buf, a->bytes, a->s);
}
/* The read probe over one of the GEMV's cycled weight copies: the ceiling of a kernel that streams the
 * same bytes from HBM (same size, same launch overheads), next to the 4 GiB figure. */
typedef struct probe_w_arg { ex_gpu *g; ex_stream s; void **w; int nc; size_t bytes; } probe_w_arg;
static ex_gpu_status run_probe_w(void *p, int rep)
{
    probe_w_arg *a = p;
    return ex_cuda_read_probe(a->g, a->w[rep % a->nc], a->bytes, a->s);
}
static ex_gpu_status run_d2d(void *p, int rep)
{
    (void)rep;
    probe_arg *a = p;
    return ex_gpu_memcpy_d2d(a->buf2, a->buf, a->bytes, a->s);
}

static json_t *entry(const char *type, const char *shape_name, int64_t rows, int64_t cols)
{
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "shape", json_string(shape_name));
    json_object_set_new(e, "rows", json_integer(rows));
    json_object_set_new(e, "cols", json_integer(cols));
    return e;
}

/* Uploads nc copies of host weights; returns 0 on success. */
static int upload_copies(ex_gpu *g, ex_stream s, const void *h, uint64_t bytes, void **w, int nc)
{
    for (int c = 0; c < nc; c++) {
        if (ex_gpu_malloc(g, bytes, &w[c]) || ex_gpu_memcpy_h2d(w[c], h, bytes, s)) return -1;
    }
    return ex_gpu_stream_sync(s) ? -1 : 0;
}

static int bench_gpu(const bench_opts *o, json_t *root, ceilings *cl)
{
    ex_gpu *g = NULL;
    float *X = NULL, *Y = NULL;
    void *X16 = NULL;
    ex_gpu_status st = ex_gpu_open(0, &g);
    if (st) {
        printf("\nGPU: %s: skipped\n", ex_gpu_status_str(st));
        json_object_set_new(root, "gpu", json_string(ex_gpu_status_str(st)));
        return 0;
    }
    const ex_gpu_props *pr = ex_gpu_info(g);
    ex_stream s = ex_gpu_stream(g, EX_GPU_STREAM_COMPUTE);
    json_t *gj = json_object();
    json_object_set_new(gj, "name", json_string(pr->name));
    json_object_set_new(gj, "cc", json_integer(pr->cc_major * 10 + pr->cc_minor));
    json_object_set_new(gj, "sm_count", json_integer(pr->sm_count));
    json_object_set_new(gj, "mem_bytes", json_integer((json_int_t)pr->mem_bytes));
    json_object_set_new(gj, "mem_bw_theoretical_GBps", json_real(pr->mem_bw_peak_Bps * 1e-9));

    /* ceilings: read probe over 4 GiB, device-to-device copy of 2 GiB (read + write counted) */
    probe_arg pa = {g, s, NULL, NULL, (size_t)2 << 30};
    int rc = -1;
    if (ex_gpu_malloc(g, 2 * pa.bytes, &pa.buf) || ex_gpu_malloc(g, pa.bytes, &pa.buf2) ||
        ex_gpu_memset(pa.buf, 0x5A, 2 * pa.bytes, s) || ex_gpu_memset(pa.buf2, 0, pa.bytes, s))
        goto done;
    pa.bytes *= 2;
    double t_read = gpu_time(s, 20, run_probe, &pa);
    double read_bw = (double)pa.bytes / t_read;
    cl->gpu_read_Bps = read_bw;
    pa.bytes /= 2;
    double t_copy = gpu_time(s, 20, run_d2d, &pa);
    double copy_bw = 2.0 * (double)pa.bytes / t_copy;
    ex_gpu_free(g, pa.buf);
    ex_gpu_free(g, pa.buf2);
    printf("\nGPU %s (%d SMs): HBM read %.0f GB/s (probe, 4 GiB), D2D copy %.0f GB/s (r+w), theoretical %.0f GB/s\n",
           pr->name, pr->sm_count, read_bw * 1e-9, copy_bw * 1e-9, pr->mem_bw_peak_Bps * 1e-9);
    json_object_set_new(gj, "hbm_read_GBps", json_real(read_bw * 1e-9));
    json_object_set_new(gj, "hbm_copy_rw_GBps", json_real(copy_bw * 1e-9));

    /* decode GEMV */
    json_t *garr = json_array();
    printf("decode GEMV (ex_cuda_gemv; quantized: int8 activations; kern: v1 = quantize kernel + one warp per row,\n"
           "v2 = one persistent kernel, v3 = quantize kernel + two rows per warp (exec/kernels/cuda/README.md);\n"
           "ATS_GEMV_KERNEL=%s), per call in back-to-back batches of 10;\n"
           "single_us: one call alone between two events (adds the launch latency); graph_us: per call when all the\n"
           "cycled copies' calls are captured in one CUDA graph and replayed (no host launch work); rd_same: the read\n"
           "probe over the same bytes, back to back like median_us (the ceiling at this size: launch, ramp and tail\n"
           "included); of_same: GB/s / rd_same; err: max |y - y_cpu| / max |y_cpu|\n",
           getenv("ATS_GEMV_KERNEL") ? getenv("ATS_GEMV_KERNEL") : "(unset)");
    printf("%-6s %-22s %10s %10s %10s %9s %8s %9s %8s %8s %8s %4s %9s\n", "type", "shape", "MB", "median_us", "single_us",
           "GB/s", "of_read", "graph_us", "g_of_rd", "rd_same", "of_same", "kern", "err");
    json_object_set_new(gj, "gemv_kernel_env", json_string(getenv("ATS_GEMV_KERNEL") ? getenv("ATS_GEMV_KERNEL") : ""));
    { /* every ATS_GEMV_* variable (kernel variants of exec/kernels/cuda/gemv_v3.cu), in the table and the JSON */
        extern char **environ;
        json_t *ev = json_object();
        printf("kernel variables:");
        for (char **e = environ; e && *e; e++) {
            const char *eq = strchr(*e, '=');
            if (strncmp(*e, "ATS_GEMV_", 9) != 0 || !eq) continue;
            printf(" %s", *e);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
            json_object_set_new(ev, name, json_string(eq + 1));
        }
        printf("%s\n", json_object_size(ev) ? "" : " (none: defaults)");
        json_object_set_new(gj, "gemv_env", ev);
    }
    int gemv_bad = 0;
    for (size_t ti = 0; ti < sizeof GPU_TYPES / sizeof GPU_TYPES[0]; ti++) {
        ats_qtype t = GPU_TYPES[ti];
        int fused_ok = t == ATS_Q_Q4_0 || t == ATS_Q_Q4_K || t == ATS_Q_Q8_0 || t == ATS_Q_Q6_K;
        for (int si = 0; si < N_SHAPES + (fused_ok ? N_FUSED : 0); si++) {
            const shape *sh = si < N_SHAPES ? &SHAPES[si] : &GPU_FUSED_SHAPES[si - N_SHAPES];
            uint64_t bytes = 0;
            void *h = make_weights(t, sh->rows, sh->cols, 777 + ti, &bytes);
            if (!h) goto done;
            int nc = (int)(((uint64_t)512 << 20) / bytes) + 1; /* ≥ 512 MiB cycled: ~10x the L2 */
            if (nc > 64) nc = 64;
            void *w[64] = {0};
            gemv_arg a = {g, s, (int)t, w, nc, sh->rows, sh->cols, 1, NULL, NULL, NULL};
            float *hx = malloc((size_t)sh->cols * 4);
            uint64_t sd = 5;
            for (int64_t j = 0; hx && j < sh->cols; j++) hx[j] = (float)((double)(splitmix(&sd) >> 11) * 0x1.0p-52 - 1.0);
            if (!hx) fprintf(stderr, "ats bench kernels: out of memory for a GEMV's activations\n");
            int ok = hx && upload_copies(g, s, h, bytes, w, nc) == 0 && ex_gpu_malloc(g, (size_t)sh->cols * 4, (void **)&a.x) == 0 &&
                     ex_gpu_malloc(g, (size_t)sh->rows * 4, (void **)&a.y) == 0 &&
                     ex_gpu_memcpy_h2d(a.x, hx, (size_t)sh->cols * 4, s) == 0;
            double med = ok ? gpu_time_batch(s, o->reps, 10, run_gemv, &a) : NAN;
            double single = ok ? gpu_time(s, o->reps, run_gemv, &a) : NAN;
            double graph = ok ? gpu_time_graph(s, o->reps, nc, run_gemv, &a) : NAN;
            probe_w_arg pw = {g, s, w, nc, (size_t)bytes & ~(size_t)15};
            double t_same = ok ? gpu_time_batch(s, o->reps, 10, run_probe_w, &pw) : NAN;
            double gbs = (double)bytes / med, gbs_graph = (double)bytes / graph, gbs_same = (double)pw.bytes / t_same;
            double err = ok ? gemv_check(t, h, sh->rows, sh->cols, bytes, hx, a.y, s) : INFINITY;
            int err_ok = err <= (t == ATS_Q_F32 || t == ATS_Q_F16 || t == ATS_Q_BF16 ? 1e-3 : 2.4e-2);
            gemv_bad |= !err_ok;
            printf("%-6s %-22s %10.1f %10.2f %10.2f %9.0f %7.1f%% %9.2f %7.1f%% %8.0f %7.1f%% %4s %8.1e%s\n", ats_qtype_name(t),
                   sh->name, bytes / 1e6, med * 1e6, single * 1e6, gbs * 1e-9, 100.0 * gbs / read_bw, graph * 1e6,
                   100.0 * gbs_graph / read_bw, gbs_same * 1e-9, 100.0 * gbs / gbs_same, ex_cuda_gemv_kernel(t, sh->rows, sh->cols), err,
                   err_ok ? "" : " FAIL");
            json_t *e = entry(ats_qtype_name(t), sh->name, sh->rows, sh->cols);
            json_object_set_new(e, "kernel", json_string(ex_cuda_gemv_kernel(t, sh->rows, sh->cols)));
            json_object_set_new(e, "check_err_rel_max", json_real(isfinite(err) ? err : -1.0));
            json_object_set_new(e, "check_ok", json_boolean(err_ok));
            json_object_set_new(e, "weight_bytes", json_integer((json_int_t)bytes));
            json_object_set_new(e, "copies_cycled", json_integer(nc));
            json_object_set_new(e, "median_s", json_real(med));
            json_object_set_new(e, "single_call_median_s", json_real(single));
            json_object_set_new(e, "GBps", json_real(gbs * 1e-9));
            json_object_set_new(e, "fraction_of_hbm_read", json_real(gbs / read_bw));
            json_object_set_new(e, "graph_median_s", json_real(isfinite(graph) ? graph : -1.0));
            json_object_set_new(e, "graph_fraction_of_hbm_read", json_real(isfinite(graph) ? gbs_graph / read_bw : -1.0));
            json_object_set_new(e, "same_size_read_GBps", json_real(isfinite(t_same) ? gbs_same * 1e-9 : -1.0));
            json_object_set_new(e, "fraction_of_same_size_read", json_real(isfinite(t_same) ? gbs / gbs_same : -1.0));
            json_array_append_new(garr, e);
            for (int c = 0; c < nc; c++) ex_gpu_free(g, w[c]);
            ex_gpu_free(g, a.x);
            ex_gpu_free(g, a.y);
            free(hx);
            free(h);
            if (!ok) goto done;
        }
    }
    json_object_set_new(gj, "gemv", garr);
    if (gemv_bad) fprintf(stderr, "ats bench kernels: a GPU GEMV differs from ex_cpu_matmul (FAIL in the table)\n");

    /* prefill GEMM: ffn_up shape, n_tok tokens; cuBLAS F16 on the same shape and on 8192³ */
    json_t *marr = json_array();
    const shape *sh = &SHAPES[0];
    int64_t n = o->n_tok;
    printf("\nprefill GEMM, %lld tokens, %s: dequantize + cublasGemmEx (F16/BF16 in, F32 accumulate)\n", (long long)n,
           sh->name);
    printf("%-6s %10s %9s\n", "type", "median_us", "TFLOP/s");
    const ats_qtype mt[] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0, ATS_Q_Q6_K, ATS_Q_F16, ATS_Q_BF16};
    size_t xb = (size_t)(n * 8192) * 4;
    if (ex_gpu_malloc(g, xb, (void **)&X) || ex_gpu_malloc(g, (size_t)(n > 8192 ? n : 8192) * 17408 * 4, (void **)&Y) ||
        ex_gpu_malloc(g, (size_t)8192 * 8192 * 2, &X16))
        goto done;
    {
        float *hx = malloc(xb);
        if (!hx) {
            fprintf(stderr, "ats bench kernels: out of memory for the prefill GEMM's %zu-byte activations\n", xb);
            goto done;
        }
        uint64_t sd = 11;
        for (size_t j = 0; j < xb / 4; j++) hx[j] = (float)((double)(splitmix(&sd) >> 11) * 0x1.0p-52 - 1.0);
        ex_gpu_memcpy_h2d(X, hx, xb, s);
        ex_gpu_stream_sync(s);
        free(hx);
    }
    double flop = 2.0 * (double)sh->rows * (double)sh->cols * (double)n;
    for (size_t ti = 0; ti < sizeof mt / sizeof mt[0]; ti++) {
        uint64_t bytes = 0;
        void *h = make_weights(mt[ti], sh->rows, sh->cols, 31 + ti, &bytes);
        void *w[1] = {NULL};
        gemv_arg a = {g, s, (int)mt[ti], w, 1, sh->rows, sh->cols, n, X, Y, NULL};
        double med = h && upload_copies(g, s, h, bytes, w, 1) == 0 ? gpu_time(s, o->reps / 2 + 3, run_gemm, &a) : NAN;
        printf("%-6s %10.1f %9.1f\n", ats_qtype_name(mt[ti]), med * 1e6, flop / med * 1e-12);
        json_t *e = entry(ats_qtype_name(mt[ti]), sh->name, sh->rows, sh->cols);
        json_object_set_new(e, "tokens", json_integer(n));
        json_object_set_new(e, "median_s", json_real(med));
        json_object_set_new(e, "TFLOPs", json_real(flop / med * 1e-12));
        json_array_append_new(marr, e);
        ex_gpu_free(g, w[0]);
        free(h);
    }
    /* cuBLAS ceiling: F16 operands already in place */
    {
        void *W16 = NULL;
        double med1 = NAN, med2 = NAN;
        if (ex_gpu_malloc(g, (size_t)8192 * 17408 * 2, &W16) == 0 &&
            ex_gpu_memset(W16, 0x3C, (size_t)8192 * 17408 * 2, s) == 0 && ex_gpu_memset(X16, 0x3C, (size_t)8192 * 8192 * 2, s) == 0) {
            void *w[1] = {W16};
            gemv_arg a = {g, s, ATS_Q_F16, w, 1, sh->rows, sh->cols, n, NULL, Y, X16};
            med1 = gpu_time(s, o->reps / 2 + 3, run_gemm16, &a);
            gemv_arg b = {g, s, ATS_Q_F16, w, 1, 8192, 8192, 8192, NULL, Y, X16};
            med2 = gpu_time(s, 10, run_gemm16, &b);
        }
        double flop2 = 2.0 * 8192.0 * 8192.0 * 8192.0;
        printf("cuBLAS F16 GEMM alone, same shape: %.1f TFLOP/s; 8192^3: %.1f TFLOP/s (ceiling)\n", flop / med1 * 1e-12,
               flop2 / med2 * 1e-12);
        json_object_set_new(gj, "cublas_f16_same_shape_TFLOPs", json_real(flop / med1 * 1e-12));
        json_object_set_new(gj, "cublas_f16_8192_TFLOPs", json_real(flop2 / med2 * 1e-12));
        cl->gpu_gemm_flops = flop2 / med2;
        ex_gpu_free(g, W16);
    }
    json_object_set_new(gj, "prefill_gemm", marr);
    rc = gemv_bad ? -1 : 0;
done:
    ex_gpu_free(g, X);
    ex_gpu_free(g, Y);
    ex_gpu_free(g, X16);
    json_object_set_new(root, "gpu", gj);
    ex_gpu_close(g);
    if (rc) fprintf(stderr, "ats bench kernels: GPU part failed (see the CUDA message above)\n");
    return rc;
}
#endif

/* ---- whole model ------------------------------------------------------------------------------- */
/* One backend for every layer: a prompt of o->prompt tokens as one chunk (prefill tok/s), then
 * o->decode greedy steps (decode tok/s), after a warm-up session (weights mirrored on the GPU).
 * Floors: decode reads every weight but the token embedding once per token; a prefill chunk reads
 * them once per chunk; GPU prefill is also bounded by 2·params·tokens / cuBLAS's F16 ceiling. */
static int run_model_once(ex_model *m, const ex_backend *be, int prompt, int decode, double *prefill_s,
                          double *decode_s)
{
    ats_err err;
    ex_session *s = NULL;
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = prompt + decode + 8;
    so.backend_a = be;
    if (ex_session_new(m, &so, &s, &err) != ATS_OK) {
        fprintf(stderr, "ats bench kernels: session: %s\n", err.msg);
        return -1;
    }
    int32_t *toks = malloc((size_t)prompt * sizeof *toks);
    float *logits = malloc((size_t)m->arch.n_vocab * sizeof *logits);
    if (!toks || !logits) {
        fprintf(stderr, "ats bench kernels: out of memory for %d prompt tokens and the logits\n", prompt);
        ex_session_free(s);
        free(toks);
        free(logits);
        return -1;
    }
    uint64_t sd = 3;
    for (int i = 0; i < prompt; i++) toks[i] = (int32_t)(splitmix(&sd) % (uint64_t)m->arch.n_vocab);
    int rc = -1;
    int64_t t0 = now_ns();
    if (ex_session_forward(s, toks, prompt, logits, &err) != ATS_OK) goto out;
    *prefill_s = (double)(now_ns() - t0) * 1e-9;
    t0 = now_ns();
    for (int i = 0; i < decode; i++) {
        int32_t best = 0;
        for (int64_t v = 1; v < m->arch.n_vocab; v++)
            if (logits[v] > logits[best]) best = (int32_t)v;
        if (ex_session_forward(s, &best, 1, logits, &err) != ATS_OK) goto out;
    }
    *decode_s = decode ? (double)(now_ns() - t0) * 1e-9 / decode : 0;
    rc = 0;
out:
    if (rc) fprintf(stderr, "ats bench kernels: forward: %s\n", err.msg);
    ex_session_free(s);
    free(toks);
    free(logits);
    return rc;
}

/* The --model's architecture, loaded before any work, and --prompt + --decode against its context: one
 * line and -1 when either is bad (exit 2), so a typo is not found after minutes of kernel timing. */
static int model_check(const bench_opts *o, ats_arch *a)
{
    char path[1024];
    ats_err err = {{0}};
    ats_cli_model_path(o->model, path, sizeof path);
    if (atsc_model_load(path, a, &err) != ATS_OK) {
        ats_cli_error("bench kernels", "--model %s: %s", o->model, err.msg);
        return -1;
    }
    long long ctx = a->n_ctx_max > 0 ? (long long)a->n_ctx_max : ATS_ARCH_MAX_CTX;
    if ((long long)o->prompt + o->decode > ctx) {
        ats_cli_error("bench kernels", "--prompt %d + --decode %d: %d tokens, longer than %s's context (%lld tokens)",
                      o->prompt, o->decode, o->prompt + o->decode, a->name, ctx);
        return -1;
    }
    return 0;
}

static int bench_model(const bench_opts *o, const ats_arch *arch, json_t *root, const ceilings *cl)
{
    ats_arch a = *arch;
    ats_err err;
    ex_model *m = NULL;
    int64_t t0 = now_ns();
    if (ex_model_new_dummy(&a, ATS_RECIPE_Q4_K_M, 42, &m, &err) != ATS_OK) {
        fprintf(stderr, "ats bench kernels: dummy weights: %s\n", err.msg);
        return -1;
    }
    double build_s = (double)(now_ns() - t0) * 1e-9;
    uint64_t embd_bytes = m->tok_embd.row_bytes * (uint64_t)m->tok_embd.ne[1];
    uint64_t dec_bytes = m->weight_bytes - (m->output.data == m->tok_embd.data ? 0 : embd_bytes);
    double params = 0, active = 0;
    ats_arch_param_count(&a, &params, &active);
    printf("\nwhole model %s Q4_K_M, dummy weights (%.2f GB, built in %.1f s): prompt %d tokens as one chunk, "
           "%d decode steps\n", a.name, m->weight_bytes / 1e9, build_s, o->prompt, o->decode);
    printf("%-8s %12s %12s %14s %12s %12s %14s\n", "backend", "prefill_tok/s", "floor_tok/s", "prefill_of_floor",
           "decode_tok/s", "floor_tok/s", "decode_of_floor");
    json_t *mj = json_object(), *arr = json_array();
    json_object_set_new(mj, "model", json_string(a.name));
    json_object_set_new(mj, "recipe", json_string("q4_k_m"));
    json_object_set_new(mj, "weight_bytes", json_integer((json_int_t)m->weight_bytes));
    json_object_set_new(mj, "decode_bytes_per_token", json_integer((json_int_t)dec_bytes));
    json_object_set_new(mj, "active_params", json_real(active));
    json_object_set_new(mj, "prompt_tokens", json_integer(o->prompt));
    json_object_set_new(mj, "decode_steps", json_integer(o->decode));
    int rc = 0;
    for (int b = 0; b < 2; b++) {
        const ex_backend *be = NULL;
        double bw = b == 0 ? cl->gpu_read_Bps : cl->cpu_read_Bps;
        if (!(bw > 0)) { /* that side was skipped, or its bandwidth probe failed (said there) */
            if (b == 1 && !o->skip_cpu) printf("cpu      skipped: no DRAM read bandwidth (its probe failed), no floor\n");
            continue;
        }
#ifdef ATS_HAVE_CUDA
        ex_gpu *g = NULL;
        ex_backend *gb = NULL;
        if (b == 0) {
            if (ex_gpu_open(0, &g) || ex_backend_cuda_new(g, &gb)) {
                ex_gpu_close(g);
                continue;
            }
            be = gb;
        }
#else
        if (b == 0) continue;
#endif
        if (b == 1) omp_set_num_threads(o->threads);
        double pf = 0, dc = 0, w1, w2;
        /* warm-up: weights mirrored / pages touched, kernels loaded */
        int bad = run_model_once(m, be, 8, 1, &w1, &w2) || run_model_once(m, be, o->prompt, o->decode, &pf, &dc);
#ifdef ATS_HAVE_CUDA
        if (gb) ex_backend_cuda_free(gb);
        ex_gpu_close(g);
#endif
        if (bad) {
            rc = -1;
            continue;
        }
        double pf_tok = o->prompt / pf, dc_tok = 1.0 / dc;
        double pf_floor = (double)o->prompt * bw / (double)m->weight_bytes, dc_floor = bw / (double)dec_bytes;
        if (b == 0 && cl->gpu_gemm_flops > 0) {
            double flop_floor = cl->gpu_gemm_flops / (2.0 * active);
            if (flop_floor < pf_floor) pf_floor = flop_floor;
        }
        const char *name = b == 0 ? "gpu" : "cpu";
        printf("%-8s %12.1f %12.1f %13.1f%% %12.2f %12.2f %13.1f%%\n", name, pf_tok, pf_floor, 100 * pf_tok / pf_floor,
               dc_tok, dc_floor, 100 * dc_tok / dc_floor);
        json_t *e = json_object();
        json_object_set_new(e, "backend", json_string(name));
        if (b == 1) json_object_set_new(e, "threads", json_integer(o->threads));
        json_object_set_new(e, "bandwidth_GBps", json_real(bw * 1e-9));
        json_object_set_new(e, "prefill_tok_per_s", json_real(pf_tok));
        json_object_set_new(e, "prefill_floor_tok_per_s", json_real(pf_floor));
        json_object_set_new(e, "decode_tok_per_s", json_real(dc_tok));
        json_object_set_new(e, "decode_floor_tok_per_s", json_real(dc_floor));
        json_array_append_new(arr, e);
    }
    json_object_set_new(mj, "runs", arr);
    json_object_set_new(root, "whole_model", mj);
    ex_model_free(m);
    return rc;
}

/* Why the GPU part cannot run in this process (NULL: it can) */
static const char *gpu_missing(void)
{
#ifdef ATS_HAVE_CUDA
    return ex_gpu_device_count() > 0 ? NULL : "there is no CUDA device (or no driver)";
#else
    return "ats was built without the CUDA backend";
#endif
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ats bench kernels [--threads N] [--reps N] [--tokens N] [--skip-cpu] [--skip-gpu]\n"
               "                         [--skip-model] [--model NAME] [--prompt N] [--decode N] [--out FILE]\n"
               "  decode GEMV per weight type at Qwen3-14B shapes vs measured HBM / DRAM read bandwidth,\n"
               "  prefill GEMM TFLOP/s vs cuBLAS (GPU) and GMAC/s (CPU, at most 2048 tokens: compute-bound, no ceiling),\n"
               "  whole-model (dummy Q4_K_M weights) prefill/decode tok/s on each backend vs bytes/bandwidth\n"
               "  floors (a CPU prefill chunk is compute-bound: far below its bandwidth floor).\n"
               "  Defaults: --threads 16 (1..1024) --reps 50 --tokens 512 --model qwen3-14b --prompt 256 --decode 16\n"
               "  --reps N: timed calls of each GEMV, CPU and GPU, the median reported (GPU prefill GEMM: N/2 + 3;\n"
               "  CPU prefill GEMM: 3); params in the JSON file say the counts used\n"
               "  --out ./bench-kernels.json; --prompt + --decode at most the model's context\n"
               "  (--out, --model and that are checked before any work; --skip-cpu where the GPU part cannot run\n"
               "  is refused: nothing to run)\n"
               "  (the committed figures: experiments/bench/bench-kernels.md, newest session first, each\n"
               "  with its folder of JSON and text results)\n");
}

int ats_bench_kernels(int argc, char **argv)
{
    bench_opts o = {16, 50, 512, 0, 0, 0, 256, 16, "bench-kernels.json", "qwen3-14b"};
    static const struct option lo[] = {{"threads", required_argument, 0, 't'}, {"reps", required_argument, 0, 'r'},
                                       {"tokens", required_argument, 0, 'n'},  {"skip-cpu", no_argument, 0, 'C'},
                                       {"skip-gpu", no_argument, 0, 'G'},      {"out", required_argument, 0, 'o'},
                                       {"skip-model", no_argument, 0, 'M'},    {"model", required_argument, 0, 'm'},
                                       {"prompt", required_argument, 0, 'p'},  {"decode", required_argument, 0, 'd'},
                                       {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    int c;
    long long v;
    optind = 1;
    opterr = 0; /* one line of our own per bad option */
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":t:r:n:o:m:p:d:h", lo, NULL)) != -1) {
        if (ats_cli_once_opt("bench kernels", &seen, lo, c, optarg)) return ATS_EXIT_USAGE;
        switch (c) {
        case 't':
            /* the rule of `ats run --threads` (cmd_run.c; also sim, record): 1 .. 1024. More asks libgomp
             * for threads it cannot create (99999 crashed in the DRAM probe) */
            if (ats_cli_parse_int(optarg, &v) || v < 1 || v > 1024) {
                ats_cli_error("bench kernels", "--threads: bad value '%s' (an integer 1..1024)", optarg);
                return ATS_EXIT_USAGE;
            }
            o.threads = (int)v;
            break;
        case 'r':
        case 'n':
        case 'p':
        case 'd':
            if (ats_cli_parse_int(optarg, &v) || v < 1 || v > 100000) {
                ats_cli_error("bench kernels", "--%s: '%s' is not a positive integer (1..100000)",
                              c == 'r' ? "reps" : c == 'n' ? "tokens" : c == 'p' ? "prompt" : "decode", optarg);
                return ATS_EXIT_USAGE;
            }
            if (c == 'r') o.reps = (int)v;
            else if (c == 'n') o.n_tok = (int)v;
            else if (c == 'p') o.prompt = (int)v;
            else o.decode = (int)v;
            break;
        case 'M': o.skip_model = 1; break;
        case 'm':
            if (ats_cli_file_value("bench kernels", "--model", optarg)) return ATS_EXIT_USAGE;
            o.model = optarg;
            break;
        case 'C': o.skip_cpu = 1; break;
        case 'G': o.skip_gpu = 1; break;
        case 'o':
            if (ats_cli_file_value("bench kernels", "--out", optarg)) return ATS_EXIT_USAGE;
            o.out = optarg;
            break;
        case 'h': usage(stdout); return ATS_EXIT_OK;
        case ':': ats_cli_missing_value("bench kernels", argv[optind - 1], optopt); return ATS_EXIT_USAGE;
        default: ats_cli_bad_option("bench kernels", argv[optind - 1], optopt, lo); return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error("bench kernels", "unexpected argument '%s' (ats bench kernels --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    ats_err oerr = {{0}};
    if (atsc_out_check(o.out, &oerr) != ATS_OK) { /* before the work */
        ats_cli_error("bench kernels", "--out: %s", oerr.msg);
        return ATS_EXIT_USAGE;
    }
    /* the whole-model part runs on the backends measured above it: with neither, nothing would run (it
     * built the dummy model's weights, ~25 s, for no row) */
    const char *no_gpu = o.skip_gpu ? NULL : gpu_missing();
    if (o.skip_cpu && (o.skip_gpu || no_gpu)) {
        if (o.skip_gpu)
            ats_cli_error("bench kernels", "nothing to run: --skip-cpu and --skip-gpu (the whole model runs only on "
                                           "the backends measured)");
        else
            ats_cli_error("bench kernels", "nothing to run: --skip-cpu, and the GPU part cannot run: %s", no_gpu);
        return ATS_EXIT_USAGE;
    }
    ats_arch arch;
    if (!o.skip_model && model_check(&o, &arch)) return ATS_EXIT_USAGE; /* before the work too */
    json_t *root = json_object();
    json_object_set_new(root, "bench", json_string("kernels"));
    json_object_set_new(root, "version", json_string(ATS_VERSION_STRING));
    json_object_set_new(root, "commit", json_string(ATS_GIT_COMMIT));
    machine_json(root, &o);
    int rc = 0;
    ceilings cl = {0, 0, 0};
#ifdef ATS_HAVE_CUDA
    if (!o.skip_gpu) rc |= bench_gpu(&o, root, &cl);
#else
    if (!o.skip_gpu) {
        printf("GPU: built without the CUDA backend: skipped\n");
        json_object_set_new(root, "gpu", json_string("built without CUDA"));
    }
#endif
    if (!o.skip_cpu) rc |= bench_cpu(&o, root, &cl);
    if (!o.skip_model) rc |= bench_model(&o, &arch, root, &cl);
    if (atsc_out_write_json(o.out, root, JSON_INDENT(1) | JSON_REAL_PRECISION(6), &oerr) != ATS_OK) {
        ats_cli_error("bench kernels", "cannot write the result file: %s", oerr.msg);
        json_decref(root);
        return ATS_EXIT_FAIL;
    }
    json_decref(root);
    fflush(stdout); /* the table first, when both go to one file */
    fprintf(stderr, "wrote %s\n", o.out);
    return rc ? ATS_EXIT_FAIL : ATS_EXIT_OK;
}
