/*
 * bench/src/kernels.c — `ats bench kernels` (bench/kernels.h): the shared weights and shapes, the CPU
 * part (decode GEMV against the DRAM probe, prefill GEMM), the whole model on dummy weights, and the
 * run that strings the parts together. The GPU part is bench/src/kernels_gpu.c.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ats/quant.h"
#include "ats_version.h"
#include "bench/dram.h"
#include "ex/backend.h"
#include "ex/model.h"
#include "ex/ops.h"
#include "ex/quant.h"
#include "ex/session.h"
#ifdef ATS_HAVE_CUDA
#include "ex/gpu.h"
#endif
#include "kernels_impl.h"

const kb_shape kb_shapes[KB_N_SHAPES] = {
    {"ffn_up 5120->17408", 17408, 5120},
    {"ffn_down 17408->5120", 5120, 17408},
    {"attn_q 5120->5120", 5120, 5120},
    {"attn_kv 5120->1024", 1024, 5120},
};

/* decode GEMV: every weight type the executor runs; prefill GEMM: the quantized types with prefill kernels */
static const ats_qtype CPU_TYPES[] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0, ATS_Q_Q6_K,
                                      ATS_Q_MXFP4, ATS_Q_F16, ATS_Q_BF16, ATS_Q_F32};
static const ats_qtype CPU_PREFILL_TYPES[] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0, ATS_Q_Q6_K};

bench_kernels_opts bench_kernels_opts_default(void)
{
    bench_kernels_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 16;
    o.reps = 50;
    o.n_tok = 512;
    o.prompt = 256;
    o.decode = 16;
    return o;
}

uint64_t kb_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float kb_rand_pm1(uint64_t *s) { return (float)((double)(kb_splitmix(s) >> 11) * 0x1.0p-52 - 1.0); }

json_t *kb_entry(const char *type, const char *shape_name, int64_t rows, int64_t cols)
{
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "shape", json_string(shape_name));
    json_object_set_new(e, "rows", json_integer(rows));
    json_object_set_new(e, "cols", json_integer(cols));
    return e;
}

/* rows x cols random values in [-1, 1) quantized to `t` (rows in parallel). NULL on failure. */
void *kb_make_weights(ats_qtype t, int64_t rows, int64_t cols, uint64_t seed, uint64_t *bytes_out)
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
            for (int64_t j = 0; j < cols; j++) tmp[j] = kb_rand_pm1(&s);
            if (ex_quantize_row(t, tmp, w + (uint64_t)r * rb, cols) != ATS_OK) bad = 1;
        }
        free(tmp);
    }
    if (bad) { free(w); return NULL; }
    *bytes_out = rb * (uint64_t)rows;
    return w;
}

static void machine_json(json_t *root, const bench_kernels_opts *o)
{
    json_t *m = json_object();
    bench_machine mc;
    bench_machine_get(&mc);
    json_object_set_new(m, "hostname", json_string(mc.host));
    json_object_set_new(m, "cpu_model", json_string(mc.cpu));
    json_object_set_new(m, "cpu_logical_cores", json_integer(mc.n_cpu));
    json_object_set_new(m, "cpu_features", json_integer((json_int_t)ex_cpu_features()));
    json_object_set_new(root, "machine", m);
    json_t *p = json_object();
    json_object_set_new(p, "threads", json_integer(o->threads));
    /* the timed calls each figure is the median of, as used (--reps: every GEMV, CPU and GPU) */
    json_object_set_new(p, "reps", json_integer(o->reps));
    json_object_set_new(p, "gpu_prefill_gemm_reps", json_integer(o->reps / 2 + 3));
    json_object_set_new(p, "cpu_prefill_gemm_reps", json_integer(BENCH_KERNELS_CPU_PREFILL_REPS));
    json_object_set_new(p, "prefill_tokens", json_integer(o->n_tok));
    json_object_set_new(p, "model_shapes", json_string("Qwen3-14B (hidden 5120, ffn 17408, 40/8 heads x 128)"));
    json_object_set_new(root, "params", p);
}

/* CPU prefill GEMM: ex_cpu_matmul over --tokens activation rows at the ffn_up shape, per CPU type. A chunk
 * reuses each weight row for all its tokens, so this is compute-bound (no DRAM ceiling applies); GMAC/s
 * = rows·cols·tokens / median time, and the matrix's own tok/s. 3 timed calls after one warm-up. Returns
 * the JSON rows; *bad = 1 where a type could not be built or run or memory ran out (each said as a note). */
static json_t *bench_cpu_prefill(const bench_kernels_opts *o, int *bad)
{
    const bench_sink *sk = &o->sink;
    json_t *arr = json_array();
    const kb_shape *sh = &kb_shapes[0];
    /* --tokens goes up to 100000 for the GPU GEMM; on the CPU that is hours a call: at most 2048 here */
    const int64_t n = o->n_tok < BENCH_KERNELS_CPU_PREFILL_MAX_TOK ? o->n_tok : BENCH_KERNELS_CPU_PREFILL_MAX_TOK;
    const unsigned f = ex_cpu_features();
    const char *path = (f & EX_CPU_AMX) && (f & EX_CPU_AVX512VNNI) && (f & EX_CPU_AVX512) && n >= EX_CPU_AMX_MIN_TOKENS
                           ? "AMX (Q4_K, Q6_K) and AVX-512 VNNI"
                           : (f & EX_CPU_AVX512VNNI) ? "AVX-512 VNNI" : (f & EX_CPU_AVX2) ? "AVX2" : "scalar";
    bench_table(sk, "\nCPU prefill GEMM, %lld tokens%s, %s: ex_cpu_matmul, %s kernels (ATS_CPU_FEATURES lowers them)\n",
           (long long)n, n < o->n_tok ? " (--tokens capped at 2048 on the CPU)" : "", sh->name, path);
    bench_table(sk, "%-6s %10s %10s %10s\n", "type", "median_ms", "GMAC/s", "tok/s");
    float *x = malloc((size_t)(n * sh->cols) * sizeof(float)), *y = malloc((size_t)(n * sh->rows) * sizeof(float));
    uint64_t sd = 7;
    for (int64_t j = 0; x && j < n * sh->cols; j++) x[j] = kb_rand_pm1(&sd);
    for (size_t ti = 0; x && y && ti < sizeof CPU_PREFILL_TYPES / sizeof CPU_PREFILL_TYPES[0]; ti++) {
        ats_qtype t = CPU_PREFILL_TYPES[ti];
        uint64_t bytes = 0;
        void *w = kb_make_weights(t, sh->rows, sh->cols, 4321 + ti, &bytes);
        if (!w) {
            bench_note(sk, "cannot build %s weights for the CPU prefill GEMM: out of memory",
                    ats_qtype_name(t));
            *bad = 1;
            continue;
        }
        ex_tensor wt = {t, {sh->cols, sh->rows, 1}, bytes / (uint64_t)sh->rows, w};
        double tm[BENCH_KERNELS_CPU_PREFILL_REPS] = {0};
        enum ats_status mst = ATS_OK;
        for (int r = -1; r < BENCH_KERNELS_CPU_PREFILL_REPS && mst == ATS_OK; r++) {
            int64_t t0 = bench_now_ns();
            mst = ex_cpu_matmul(&wt, x, n, y);
            if (r >= 0) tm[r] = (double)(bench_now_ns() - t0) * 1e-9;
        }
        free(w);
        if (mst != ATS_OK) {
            bench_note(sk, "ex_cpu_matmul(%s, %lld tokens): %s", ats_qtype_name(t), (long long)n,
                    ats_status_str(mst));
            *bad = 1;
            continue;
        }
        double med = bench_median(tm, BENCH_KERNELS_CPU_PREFILL_REPS), gmac = (double)sh->rows * (double)sh->cols * (double)n / med * 1e-9;
        bench_table(sk, "%-6s %10.2f %10.1f %10.1f\n", ats_qtype_name(t), med * 1e3, gmac, (double)n / med);
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
        bench_note(sk, "out of memory for the CPU prefill GEMM's activations");
        *bad = 1;
    }
    free(x);
    free(y);
    return arr;
}

/* One CPU GEMV row: `reps` timed calls of ex_cpu_matmul (after 3 warm-ups) over copies of the weights
 * cycled so that the set (>= 1 GiB, at most 64 copies) exceeds the last-level cache; bw is the DRAM
 * probe's rate [B/s] (NAN when the probe failed: no fraction then). Appends the row to arr and prints it;
 * -1 with one note when weights, copies' table or buffers cannot be allocated or the matmul
 * fails. */
static int cpu_gemv_row(const bench_sink *sk, ats_qtype t, const kb_shape *sh, uint64_t seed, int reps, double bw, json_t *arr)
{
    uint64_t bytes = 0;
    int rc = -1, nc = 0;
    void **w = NULL;
    float *x = NULL, *y = NULL;
    double *tm = NULL;
    void *w0 = kb_make_weights(t, sh->rows, sh->cols, seed, &bytes);
    if (!w0) {
        bench_note(sk, "cannot build %s weights (%s): out of memory", ats_qtype_name(t), sh->name);
        return -1;
    }
    nc = (int)(((uint64_t)1 << 30) / bytes) + 1;
    if (nc > 64) nc = 64;
    w = calloc((size_t)nc, sizeof *w);
    x = malloc((size_t)sh->cols * 4);
    y = malloc((size_t)sh->rows * 4);
    tm = malloc((size_t)reps * sizeof *tm);
    if (!w || !x || !y || !tm) {
        bench_note(sk, "out of memory for the %s %s GEMV's buffers", ats_qtype_name(t), sh->name);
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
    for (int64_t j = 0; j < sh->cols; j++) x[j] = kb_rand_pm1(&s);
    uint64_t rb = bytes / (uint64_t)sh->rows;
    for (int r = -3; r < reps; r++) {
        ex_tensor wt = {t, {sh->cols, sh->rows, 1}, rb, w[(r + 3) % nc]};
        int64_t t0 = bench_now_ns();
        enum ats_status mst = ex_cpu_matmul(&wt, x, 1, y);
        if (r >= 0) tm[r] = (double)(bench_now_ns() - t0) * 1e-9;
        if (mst != ATS_OK) {
            bench_note(sk, "ex_cpu_matmul(%s, %s): %s", ats_qtype_name(t), sh->name,
                    ats_status_str(mst));
            goto out;
        }
    }
    double med = bench_median(tm, reps), gbs = (double)bytes / med;
    /* faster than the probe: the probe under-reads this machine (or the copies were cached) */
    const int probed = bw > 0, over = probed && gbs > bw;
    char frac[16] = "       -";
    if (probed) snprintf(frac, sizeof frac, "%7.1f%%", 100.0 * gbs / bw);
    bench_table(sk, "%-6s %-22s %10.1f %10.1f %9.1f %s%s\n", ats_qtype_name(t), sh->name, bytes / 1e6, med * 1e6, gbs * 1e-9,
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

/* CPU routed experts of one decode token (ex_cpu_moe, n_tokens 1): Qwen3-30B-A3B's shapes (128 experts
 * 2048 -> 768 -> 2048, 8 a token, gate/up Q4_K, down Q6_K as its q4_k_m recipe), `reps` timed calls
 * after 3 warm-ups, each on fresh random ids over NSET sets of the layer's experts (3 x 392 MB: a
 * call's 8 experts are mostly outside the last-level cache, as in a model's decode; every expert a copy
 * of one quantized expert). The rate counts
 * the 8 experts' bytes (24.5 MB). The row the executor's CPU-resident MoE layers run at. */
static int cpu_moe_row(const bench_sink *sk, int reps, double bw, json_t *cpu)
{
    enum { NSET = 3, E = 128, K = 8, D = 2048, F = 768 };
    uint64_t gb = 0, db = 0;
    int rc = -1, ns = 0;
    void *g[NSET] = {0}, *u[NSET] = {0}, *dn[NSET] = {0};
    float *x = malloc(D * sizeof(float)), *out = malloc(D * sizeof(float));
    double *tm = malloc((size_t)reps * sizeof *tm);
    /* one expert's three matrices quantized, copied into every expert of every set (the rate does not
       depend on the values; quantizing 3 x 392 MB took ~30 s on 2 cores) */
    uint64_t g1 = 0, d1 = 0;
    void *ge1 = kb_make_weights(ATS_Q_Q4_K, F, D, 77, &g1), *ue1 = kb_make_weights(ATS_Q_Q4_K, F, D, 78, &g1),
         *de1 = kb_make_weights(ATS_Q_Q6_K, D, F, 79, &d1);
    gb = g1 * E;
    db = d1 * E;
    if (!x || !out || !tm || !ge1 || !ue1 || !de1) {
        bench_note(sk, "cannot build the routed experts (%d experts 2048 -> 768 -> 2048): out of memory", E);
        free(ge1); free(ue1); free(de1);
        goto out;
    }
    for (ns = 0; ns < NSET; ns++) {
        if (!(g[ns] = malloc(gb)) || !(u[ns] = malloc(gb)) || !(dn[ns] = malloc(db))) break;
        for (int e = 0; e < E; e++) {
            memcpy((char *)g[ns] + (size_t)e * g1, ge1, g1);
            memcpy((char *)u[ns] + (size_t)e * g1, ue1, g1);
            memcpy((char *)dn[ns] + (size_t)e * d1, de1, d1);
        }
    }
    free(ge1); free(ue1); free(de1);
    if (ns == 0) {
        bench_note(sk, "cannot build the routed experts (%d experts 2048 -> 768 -> 2048): out of memory", E);
        goto out;
    }
    uint64_t s = 4242;
    for (int j = 0; j < D; j++) x[j] = kb_rand_pm1(&s);
    const uint64_t grb = gb / ((uint64_t)E * F), drb = db / ((uint64_t)E * D);
    for (int r = -3; r < reps; r++) {
        const int c = (r + 3) % ns;
        ex_tensor ge = {ATS_Q_Q4_K, {D, F, E}, grb, g[c]}, ue = {ATS_Q_Q4_K, {D, F, E}, grb, u[c]},
                  de = {ATS_Q_Q6_K, {F, D, E}, drb, dn[c]};
        int32_t ids[K];
        float wt[K];
        for (int j = 0; j < K; j++) { /* K distinct experts */
            int dup;
            do {
                ids[j] = (int32_t)(kb_splitmix(&s) % E);
                dup = 0;
                for (int i = 0; i < j; i++) dup |= ids[i] == ids[j];
            } while (dup);
            wt[j] = 1.0f / K;
        }
        int64_t t0 = bench_now_ns();
        enum ats_status mst = ex_cpu_moe(&ge, &ue, &de, x, 1, ids, wt, K, out);
        if (r >= 0) tm[r] = (double)(bench_now_ns() - t0) * 1e-9;
        if (mst != ATS_OK) {
            bench_note(sk, "ex_cpu_moe (decode, 8 of 128 experts): %s", ats_status_str(mst));
            goto out;
        }
    }
    const double bytes = (double)K * (double)(2 * gb + db) / E, med = bench_median(tm, reps), gbs = bytes / med;
    char frac[16] = "       -";
    const int over = bw > 0 && gbs > bw; /* as the GEMV rows: the probe under-reads (or the sets were cached) */
    if (bw > 0) snprintf(frac, sizeof frac, "%7.1f%%", 100.0 * gbs / bw);
    bench_table(sk, "%-6s %-22s %10.1f %10.1f %9.1f %s  8 of 128 experts, down Q6_K%s\n", "Q4_K", "moe 2048->768->2048",
                bytes / 1e6, med * 1e6, gbs * 1e-9, frac, over ? "; over the probe: it under-reads" : "");
    json_t *e = json_object();
    json_object_set_new(e, "shape", json_string("Qwen3-30B-A3B routed experts: 128 x (2048 -> 768 -> 2048), 8 a token"));
    json_object_set_new(e, "types", json_string("gate/up Q4_K, down Q6_K"));
    json_object_set_new(e, "expert_sets", json_integer(ns));
    json_object_set_new(e, "bytes_per_token", json_real(bytes));
    json_object_set_new(e, "reps", json_integer(reps));
    json_object_set_new(e, "median_s", json_real(med));
    json_object_set_new(e, "GBps", json_real(gbs * 1e-9));
    if (bw > 0) {
        json_object_set_new(e, "fraction_of_dram_read", json_real(gbs / bw));
        json_object_set_new(e, "over_dram_probe", json_boolean(over));
    }
    json_object_set_new(cpu, "moe_decode", e);
    rc = 0;
out:
    for (int c = 0; c < NSET; c++) {
        free(g[c]);
        free(u[c]);
        free(dn[c]);
    }
    free(x);
    free(out);
    free(tm);
    return rc;
}

static int bench_cpu(const bench_kernels_opts *o, json_t *root, kb_ceilings *cl)
{
    json_t *cpu = json_object(), *arr = json_array();
    omp_set_num_threads(o->threads);
    const int reps = o->reps; /* as asked and as params.reps says (it was raised to 5 here, unsaid) */
    const bench_sink *sk = &o->sink;
    bench_dram_opts dop = bench_dram_opts_default();
    dop.threads = o->threads;
    bench_dram_result dp;
    ats_err derr = {{0}};
    json_object_set_new(cpu, "threads", json_integer(o->threads));
    double bw = NAN;
    if (bench_dram_probe(&dop, &dp, &derr) == ATS_OK) {
        bw = dp.best_Bps;
        bench_table(sk, "\nCPU (%d threads): measured DRAM read bandwidth %.1f GB/s (the fastest of %d reps of a 2 GiB read;\n"
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
        char why[ATS_ERR_LEN + 16];
        snprintf(why, sizeof why, "probe failed: %s", derr.msg);
        bench_table(sk, "\nCPU (%d threads): DRAM read bandwidth %s; GEMV rows without of_DRAM\n", o->threads, why);
        bench_note(sk, "DRAM read bandwidth %s", why);
        json_object_set_new(cpu, "dram_read_error", json_string(why));
    }
    cl->cpu_read_Bps = bw;
    bench_table(sk, "%-6s %-22s %10s %10s %9s %8s  %s\n", "type", "shape", "MB", "median_us", "GB/s", "of_DRAM", "note");
    int rc = 0;
    for (size_t ti = 0; ti < sizeof CPU_TYPES / sizeof CPU_TYPES[0] && rc == 0; ti++)
        for (int si = 0; si < 2 && rc == 0; si++) /* the two FFN shapes carry 2/3 of the weights */
            rc = cpu_gemv_row(&o->sink, CPU_TYPES[ti], &kb_shapes[si], 1234 + ti, reps, bw, arr);
    json_object_set_new(cpu, "gemv", arr);
    if (rc == 0) rc = cpu_moe_row(&o->sink, reps, bw, cpu);
    if (rc == 0) {
        int bad = 0;
        json_object_set_new(cpu, "prefill_gemm", bench_cpu_prefill(o, &bad));
        rc = bad ? -1 : 0;
    }
    json_object_set_new(root, "cpu", cpu);
    return rc;
}

/* ---- whole model ------------------------------------------------------------------------------- */
/* One backend for every layer: a prompt of o->prompt tokens as one chunk (prefill tok/s), then
 * o->decode greedy steps (decode tok/s), after a warm-up session (weights mirrored on the GPU).
 * Floors: decode reads every weight but the token embedding once per token; a prefill chunk reads
 * them once per chunk; GPU prefill is also bounded by 2·params·tokens / cuBLAS's F16 ceiling. */
static int run_model_once(const bench_sink *sk, ex_model *m, const ex_backend *be, int prompt, int decode, double *prefill_s,
                          double *decode_s)
{
    ats_err err;
    ex_session *s = NULL;
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = prompt + decode + 8;
    so.backend_a = be;
    if (ex_session_new(m, &so, &s, &err) != ATS_OK) {
        bench_note(sk, "session: %s", err.msg);
        return -1;
    }
    int32_t *toks = malloc((size_t)prompt * sizeof *toks);
    float *logits = malloc((size_t)m->arch.n_vocab * sizeof *logits);
    if (!toks || !logits) {
        bench_note(sk, "out of memory for %d prompt tokens and the logits", prompt);
        ex_session_free(s);
        free(toks);
        free(logits);
        return -1;
    }
    uint64_t sd = 3;
    for (int i = 0; i < prompt; i++) toks[i] = (int32_t)(kb_splitmix(&sd) % (uint64_t)m->arch.n_vocab);
    int rc = -1;
    int64_t t0 = bench_now_ns();
    if (ex_session_forward(s, toks, prompt, logits, &err) != ATS_OK) goto out;
    *prefill_s = (double)(bench_now_ns() - t0) * 1e-9;
    t0 = bench_now_ns();
    for (int i = 0; i < decode; i++) {
        int32_t best = 0;
        for (int64_t v = 1; v < m->arch.n_vocab; v++)
            if (logits[v] > logits[best]) best = (int32_t)v;
        if (ex_session_forward(s, &best, 1, logits, &err) != ATS_OK) goto out;
    }
    *decode_s = decode ? (double)(bench_now_ns() - t0) * 1e-9 / decode : 0;
    rc = 0;
out:
    if (rc) bench_note(sk, "forward: %s", err.msg);
    ex_session_free(s);
    free(toks);
    free(logits);
    return rc;
}

static int bench_model(const bench_kernels_opts *o, const ats_arch *arch, json_t *root, const kb_ceilings *cl)
{
    const bench_sink *sk = &o->sink;
    ats_arch a = *arch;
    ats_err err;
    ex_model *m = NULL;
    int64_t t0 = bench_now_ns();
    if (ex_model_new_dummy_progress(&a, ATS_RECIPE_Q4_K_M, 42, bench_progress_bytes, (void *)sk, &m, &err) != ATS_OK) {
        bench_note(sk, "dummy weights: %s", err.msg);
        return -1;
    }
    double build_s = (double)(bench_now_ns() - t0) * 1e-9;
    uint64_t embd_bytes = m->tok_embd.row_bytes * (uint64_t)m->tok_embd.ne[1];
    uint64_t dec_bytes = m->weight_bytes - (m->output.data == m->tok_embd.data ? 0 : embd_bytes);
    double params = 0, active = 0;
    ats_arch_param_count(&a, &params, &active);
    bench_table(sk, "\nwhole model %s Q4_K_M, dummy weights (%.2f GB, built in %.1f s): prompt %d tokens as one chunk, "
           "%d decode steps\n", a.name, m->weight_bytes / 1e9, build_s, o->prompt, o->decode);
    bench_table(sk, "%-8s %12s %12s %14s %12s %12s %14s\n", "backend", "prefill_tok/s", "floor_tok/s", "prefill_of_floor",
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
            if (b == 1 && !o->skip_cpu) bench_table(sk, "cpu      skipped: no DRAM read bandwidth (its probe failed), no floor\n");
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
        int bad = run_model_once(&o->sink, m, be, 8, 1, &w1, &w2) || run_model_once(&o->sink, m, be, o->prompt, o->decode, &pf, &dc);
        double pf_again = 0; /* [tok/s], GPU only */
        if (!bad && b == 0) {
            /* the same prompt again in a fresh session: the first chunk of that size also pays one-time costs
             * (workspaces and activation buffers grown on the device, cuBLAS's first calls at these shapes) */
            double pf2 = 0, dc2 = 0;
            if (run_model_once(&o->sink, m, be, o->prompt, 0, &pf2, &dc2) == 0) {
                pf_again = o->prompt / pf2;
                bench_table(sk, "gpu      prefill again in a new session: %.1f tok/s\n", pf_again);
            }
        }
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
        bench_table(sk, "%-8s %12.1f %12.1f %13.1f%% %12.2f %12.2f %13.1f%%\n", name, pf_tok, pf_floor, 100 * pf_tok / pf_floor,
               dc_tok, dc_floor, 100 * dc_tok / dc_floor);
        json_t *e = json_object();
        json_object_set_new(e, "backend", json_string(name));
        if (b == 1) json_object_set_new(e, "threads", json_integer(o->threads));
        json_object_set_new(e, "bandwidth_GBps", json_real(bw * 1e-9));
        json_object_set_new(e, "prefill_tok_per_s", json_real(pf_tok));
        json_object_set_new(e, "prefill_floor_tok_per_s", json_real(pf_floor));
        if (pf_again > 0) json_object_set_new(e, "prefill_again_tok_per_s", json_real(pf_again));
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
const char *bench_kernels_gpu_missing(void)
{
#ifdef ATS_HAVE_CUDA
    return ex_gpu_device_count() > 0 ? NULL : "there is no CUDA device (or no driver)";
#else
    return "ats was built without the CUDA backend";
#endif
}

enum ats_status bench_kernels_run(const bench_kernels_opts *o, json_t **doc, ats_err *err)
{
    *doc = NULL;
    if (!o || o->threads < 1 || o->threads > 1024 || o->reps < 1 || o->n_tok < 1 || o->prompt < 1 || o->decode < 1 ||
        (!o->skip_model && !o->arch))
        return ats_err_set(err, ATS_EINVAL, "bench kernels: threads 1..1024, reps, tokens, prompt, decode >= 1 and "
                                            "an architecture for the whole model");
    json_t *root = json_object();
    json_object_set_new(root, "bench", json_string("kernels"));
    json_object_set_new(root, "version", json_string(ATS_VERSION_STRING));
    json_object_set_new(root, "commit", json_string(ATS_GIT_COMMIT));
    machine_json(root, o);
    kb_ceilings cl = {0, 0, 0};
    const char *failed = NULL;
    if (!o->skip_gpu) bench_progress(&o->sink, "GPU kernels ...");
    if (!o->skip_gpu && kb_bench_gpu(o, root, &cl)) failed = "the GPU part";
    if (!o->skip_cpu) bench_progress(&o->sink, "CPU kernels (a 2 GiB DRAM read probe first) ...");
    if (!o->skip_cpu && bench_cpu(o, root, &cl)) failed = failed ? failed : "the CPU part";
    if (!o->skip_model) bench_progress(&o->sink, "whole model ...");
    if (!o->skip_model && bench_model(o, o->arch, root, &cl)) failed = failed ? failed : "the whole-model part";
    *doc = root;
    if (failed) return ats_err_set(err, ATS_EIO, "%s failed (the notes above say why)", failed);
    return ATS_OK;
}
