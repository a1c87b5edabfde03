/*
 * bench/src/dram.c — the DRAM read probe (bench/dram.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/dram.h"

/* The loop: 8 independent 16-byte XOR accumulators (128 bytes a trip), plain SSE2 as the build has no
 * -march. The former 2 accumulators of 64 bytes (8 xmm registers; 8 x 64 bytes would spill) on the
 * 2-core dev VM, best of 7-11 reps, a stand-alone copy of each loop at -O2: 2 threads 52 ->
 * 56-58 GB/s while the host was quiet, 34 -> 33 (no difference) while it was busy; 1 thread 26 -> 28-30;
 * AVX-512 8 x 64 bytes (target attribute) 50 / 32 / 25, no better. On the H200 host a median of 7
 * static-split reps read 65 GB/s where the F32 GEMV streamed 107; the fastest rep of either split reads
 * 122-132 GB/s there (median ~110; experiments/kernels/README.md). */
typedef uint64_t v2u64 __attribute__((vector_size(16)));

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

bench_dram_opts bench_dram_opts_default(void)
{
    bench_dram_opts o = {1, 7, (size_t)2 << 30};
    return o;
}

enum ats_status bench_dram_probe(const bench_dram_opts *o, bench_dram_result *out, ats_err *err)
{
    memset(out, 0, sizeof *out);
    if (!o || o->threads < 1 || o->threads > 1024 || o->reps < 1 || o->bytes < 128 || o->bytes % 128)
        return ats_err_set(err, ATS_EINVAL, "DRAM read probe: threads 1..1024, reps >= 1, bytes a multiple of 128");
    const size_t bytes = o->bytes, n = bytes / sizeof(v2u64);
    const int threads = o->threads, reps = o->reps;
    v2u64 *buf = aligned_alloc(64, bytes);
    double *bw = malloc((size_t)(2 * reps) * sizeof *bw);
    if (!buf || !bw) {
        free(buf);
        free(bw);
        return ats_err_set(err, ATS_ENOMEM, "cannot allocate its %.0f GiB buffer (out of memory)",
                           (double)bytes / (1u << 30));
    }
    uint64_t *b64 = (uint64_t *)buf;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < bytes / 8; i++) b64[i] = i * 0x9E3779B97F4A7C15ull;
    volatile uint64_t sink = 0;
    for (int r = 0; r < 2 * reps; r++) {
        const int dynamic = r % 2;
        int64_t t0 = bench_now_ns();
        sink ^= read_pass(buf, n, threads, dynamic);
        bw[r] = (double)bytes / ((double)(bench_now_ns() - t0) * 1e-9);
        double *best = dynamic ? &out->best_dynamic_Bps : &out->best_static_Bps;
        if (bw[r] > *best) *best = bw[r];
    }
    (void)sink;
    out->reps = reps;
    out->median_Bps = bench_median(bw, 2 * reps); /* sorts bw */
    out->slowest_Bps = bw[0];
    out->best_Bps = bw[2 * reps - 1];
    free(bw);
    free(buf);
    return ATS_OK;
}
