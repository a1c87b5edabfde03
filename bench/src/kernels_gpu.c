/*
 * bench/src/kernels_gpu.c — the GPU part of `ats bench kernels` (bench/kernels.h): the HBM read and
 * device-to-device copy ceilings, the decode GEMV of every weight type (each checked against
 * ex_cpu_matmul), the prefill GEMM and cuBLAS's F16 GEMM ceiling. Without CUDA the part is one
 * "built without CUDA" entry.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ats/quant.h"
#include "ex/ops.h"
#include "ex/quant.h"
#include "kernels_impl.h"

#ifndef ATS_HAVE_CUDA
int kb_bench_gpu(const bench_kernels_opts *o, json_t *root, kb_ceilings *cl)
{
    (void)cl;
    bench_table(&o->sink, "GPU: built without the CUDA backend: skipped\n");
    json_object_set_new(root, "gpu", json_string("built without CUDA"));
    return 0;
}
#else
#include "ex/gpu.h"

/* GPU only, quantized types: the fused forms runtimes launch as one GEMV (llama.cpp and vLLM fuse
 * gate+up and Q+K+V), which show the kernel's streaming rate with less of the per-launch fixed cost */
static const kb_shape GPU_FUSED_SHAPES[] = {
    {"gate_up 5120->34816", 34816, 5120},
    {"qkv 5120->7168", 7168, 5120},
};
#define N_FUSED (int)(sizeof GPU_FUSED_SHAPES / sizeof GPU_FUSED_SHAPES[0])
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
static double gpu_time_batch(const bench_sink *sk, ex_stream s, int reps, int batch, gpu_fn fn, void *arg)
{
    ex_event *ev = calloc((size_t)(2 * reps), sizeof *ev);
    double *t = malloc((size_t)reps * sizeof *t), med = NAN;
    if (!ev || !t) {
        bench_note(sk, "out of memory for %d CUDA events", 2 * reps);
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
    med = bench_median(t, reps);
out:
    for (int i = 0; ev && i < 2 * reps; i++) ex_gpu_event_free(ev[i]);
    free(ev);
    free(t);
    return med;
}
static double gpu_time(const bench_sink *sk, ex_stream s, int reps, gpu_fn fn, void *arg)
{
    return gpu_time_batch(sk, s, reps, 1, fn, arg);
}

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
    med = bench_median(t, reps);
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

/* Uploads nc copies of host weights; returns 0 on success. */
static int upload_copies(ex_gpu *g, ex_stream s, const void *h, uint64_t bytes, void **w, int nc)
{
    for (int c = 0; c < nc; c++) {
        if (ex_gpu_malloc(g, bytes, &w[c]) || ex_gpu_memcpy_h2d(w[c], h, bytes, s)) return -1;
    }
    return ex_gpu_stream_sync(s) ? -1 : 0;
}

/* the ceilings: the read probe over 4 GiB, a device-to-device copy of 2 GiB (read + write counted); 0 or -1 */
static int gpu_ceilings(const bench_sink *sk, ex_gpu *g, ex_stream s, json_t *gj, kb_ceilings *cl)
{
    const ex_gpu_props *pr = ex_gpu_info(g);
    probe_arg pa = {g, s, NULL, NULL, (size_t)2 << 30};
    int rc = -1;
    if (ex_gpu_malloc(g, 2 * pa.bytes, &pa.buf) || ex_gpu_malloc(g, pa.bytes, &pa.buf2) ||
        ex_gpu_memset(pa.buf, 0x5A, 2 * pa.bytes, s) || ex_gpu_memset(pa.buf2, 0, pa.bytes, s))
        goto out;
    pa.bytes *= 2;
    double t_read = gpu_time(sk, s, 20, run_probe, &pa);
    double read_bw = (double)pa.bytes / t_read;
    cl->gpu_read_Bps = read_bw;
    pa.bytes /= 2;
    double t_copy = gpu_time(sk, s, 20, run_d2d, &pa);
    double copy_bw = 2.0 * (double)pa.bytes / t_copy;
    bench_table(sk, "\nGPU %s (%d SMs): HBM read %.0f GB/s (probe, 4 GiB), D2D copy %.0f GB/s (r+w), theoretical %.0f GB/s\n",
           pr->name, pr->sm_count, read_bw * 1e-9, copy_bw * 1e-9, pr->mem_bw_peak_Bps * 1e-9);
    json_object_set_new(gj, "hbm_read_GBps", json_real(read_bw * 1e-9));
    json_object_set_new(gj, "hbm_copy_rw_GBps", json_real(copy_bw * 1e-9));
    rc = 0;
out:
    ex_gpu_free(g, pa.buf);
    ex_gpu_free(g, pa.buf2);
    return rc;
}

/* the decode GEMV table's header */
static void gemv_header(const bench_sink *sk, json_t *gj)
{
    (void)gj;
    bench_table(sk, "decode GEMV (ex_cuda_gemv; quantized: int8 activations; kern: the kernel of the table in\n"
           "exec/kernels/cuda/gemv.cu: tma, rows2, rows1, ring or warp; exec/kernels/cuda/README.md), per call in\n"
           "back-to-back batches of 10;\n"
           "single_us: one call alone between two events (adds the launch latency); graph_us: per call when all the\n"
           "cycled copies' calls are captured in one CUDA graph and replayed (no host launch work); rd_same: the read\n"
           "probe over the same bytes, back to back like median_us (the ceiling at this size: launch, ramp and tail\n"
           "included); of_same: GB/s / rd_same; err: max |y - y_cpu| / max |y_cpu|\n");
    bench_table(sk, "%-6s %-22s %10s %10s %10s %9s %8s %9s %8s %8s %8s %5s %9s\n", "type", "shape", "MB", "median_us", "single_us",
           "GB/s", "of_read", "graph_us", "g_of_rd", "rd_same", "of_same", "kern", "err");
}

/* One GEMV row: type t (index ti of GPU_TYPES) at shape sh, timed batched, alone and in a CUDA graph,
 * next to the read probe over the same bytes, checked against ex_cpu_matmul (*bad = 1 when it differs);
 * appended to garr. 0, or -1 when memory or CUDA failed. */
static int gemv_row(const bench_kernels_opts *o, ex_gpu *g, ex_stream s, ats_qtype t, size_t ti, const kb_shape *sh,
                    double read_bw, json_t *garr, int *bad)
{
    const bench_sink *sk = &o->sink;
    uint64_t bytes = 0;
    void *h = kb_make_weights(t, sh->rows, sh->cols, 777 + ti, &bytes);
    if (!h) return -1;
    int nc = (int)(((uint64_t)512 << 20) / bytes) + 1; /* ≥ 512 MiB cycled: ~10x the L2 */
    if (nc > 64) nc = 64;
    void *w[64] = {0};
    gemv_arg a = {g, s, (int)t, w, nc, sh->rows, sh->cols, 1, NULL, NULL, NULL};
    float *hx = malloc((size_t)sh->cols * 4);
    uint64_t sd = 5;
    for (int64_t j = 0; hx && j < sh->cols; j++) hx[j] = kb_rand_pm1(&sd);
    if (!hx) bench_note(sk, "out of memory for a GEMV's activations");
    int ok = hx && upload_copies(g, s, h, bytes, w, nc) == 0 && ex_gpu_malloc(g, (size_t)sh->cols * 4, (void **)&a.x) == 0 &&
             ex_gpu_malloc(g, (size_t)sh->rows * 4, (void **)&a.y) == 0 &&
             ex_gpu_memcpy_h2d(a.x, hx, (size_t)sh->cols * 4, s) == 0;
    double med = ok ? gpu_time_batch(sk, s, o->reps, 10, run_gemv, &a) : NAN;
    double single = ok ? gpu_time(sk, s, o->reps, run_gemv, &a) : NAN;
    double graph = ok ? gpu_time_graph(s, o->reps, nc, run_gemv, &a) : NAN;
    probe_w_arg pw = {g, s, w, nc, (size_t)bytes & ~(size_t)15};
    double t_same = ok ? gpu_time_batch(sk, s, o->reps, 10, run_probe_w, &pw) : NAN;
    double gbs = (double)bytes / med, gbs_graph = (double)bytes / graph, gbs_same = (double)pw.bytes / t_same;
    double err = ok ? gemv_check(t, h, sh->rows, sh->cols, bytes, hx, a.y, s) : INFINITY;
    int err_ok = err <= (t == ATS_Q_F32 || t == ATS_Q_F16 || t == ATS_Q_BF16 ? 1e-3 : 2.4e-2);
    *bad |= !err_ok;
    bench_table(sk, "%-6s %-22s %10.1f %10.2f %10.2f %9.0f %7.1f%% %9.2f %7.1f%% %8.0f %7.1f%% %5s %8.1e%s\n", ats_qtype_name(t),
           sh->name, bytes / 1e6, med * 1e6, single * 1e6, gbs * 1e-9, 100.0 * gbs / read_bw, graph * 1e6,
           100.0 * gbs_graph / read_bw, gbs_same * 1e-9, 100.0 * gbs / gbs_same, ex_cuda_gemv_kernel(g, t, sh->rows, sh->cols), err,
           err_ok ? "" : " FAIL");
    json_t *e = kb_entry(ats_qtype_name(t), sh->name, sh->rows, sh->cols);
    json_object_set_new(e, "kernel", json_string(ex_cuda_gemv_kernel(g, t, sh->rows, sh->cols)));
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
    return ok ? 0 : -1;
}

/* The prefill GEMM (ffn_up shape, o->n_tok tokens) per type, cuBLAS F16 on the same shape and on 8192^3
 * (the ceiling, into cl); 0 or -1 */
static int gpu_prefill(const bench_kernels_opts *o, ex_gpu *g, ex_stream s, json_t *gj, kb_ceilings *cl)
{
    const bench_sink *sk = &o->sink;
    float *X = NULL, *Y = NULL;
    void *X16 = NULL;
    int rc = -1;
    json_t *marr = json_array();
    const kb_shape *sh = &kb_shapes[0];
    int64_t n = o->n_tok;
    bench_table(sk, "\nprefill GEMM, %lld tokens, %s: dequantize + cublasGemmEx (F16/BF16 in, F32 accumulate)\n", (long long)n,
           sh->name);
    bench_table(sk, "%-6s %10s %9s\n", "type", "median_us", "TFLOP/s");
    const ats_qtype mt[] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0, ATS_Q_Q6_K, ATS_Q_F16, ATS_Q_BF16};
    size_t xb = (size_t)(n * 8192) * 4;
    if (ex_gpu_malloc(g, xb, (void **)&X) || ex_gpu_malloc(g, (size_t)(n > 8192 ? n : 8192) * 17408 * 4, (void **)&Y) ||
        ex_gpu_malloc(g, (size_t)8192 * 8192 * 2, &X16))
        goto out;
    {
        float *hx = malloc(xb);
        if (!hx) {
            bench_note(sk, "out of memory for the prefill GEMM's %zu-byte activations", xb);
            goto out;
        }
        uint64_t sd = 11;
        for (size_t j = 0; j < xb / 4; j++) hx[j] = kb_rand_pm1(&sd);
        ex_gpu_memcpy_h2d(X, hx, xb, s);
        ex_gpu_stream_sync(s);
        free(hx);
    }
    double flop = 2.0 * (double)sh->rows * (double)sh->cols * (double)n;
    for (size_t ti = 0; ti < sizeof mt / sizeof mt[0]; ti++) {
        uint64_t bytes = 0;
        void *h = kb_make_weights(mt[ti], sh->rows, sh->cols, 31 + ti, &bytes);
        void *w[1] = {NULL};
        gemv_arg a = {g, s, (int)mt[ti], w, 1, sh->rows, sh->cols, n, X, Y, NULL};
        double med = h && upload_copies(g, s, h, bytes, w, 1) == 0 ? gpu_time(sk, s, o->reps / 2 + 3, run_gemm, &a) : NAN;
        bench_table(sk, "%-6s %10.1f %9.1f\n", ats_qtype_name(mt[ti]), med * 1e6, flop / med * 1e-12);
        json_t *e = kb_entry(ats_qtype_name(mt[ti]), sh->name, sh->rows, sh->cols);
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
            med1 = gpu_time(sk, s, o->reps / 2 + 3, run_gemm16, &a);
            gemv_arg b = {g, s, ATS_Q_F16, w, 1, 8192, 8192, 8192, NULL, Y, X16};
            med2 = gpu_time(sk, s, 10, run_gemm16, &b);
        }
        double flop2 = 2.0 * 8192.0 * 8192.0 * 8192.0;
        bench_table(sk, "cuBLAS F16 GEMM alone, same shape: %.1f TFLOP/s; 8192^3: %.1f TFLOP/s (ceiling)\n", flop / med1 * 1e-12,
               flop2 / med2 * 1e-12);
        json_object_set_new(gj, "cublas_f16_same_shape_TFLOPs", json_real(flop / med1 * 1e-12));
        json_object_set_new(gj, "cublas_f16_8192_TFLOPs", json_real(flop2 / med2 * 1e-12));
        cl->gpu_gemm_flops = flop2 / med2;
        ex_gpu_free(g, W16);
    }
    json_object_set_new(gj, "prefill_gemm", marr);
    rc = 0;
out:
    if (rc) json_decref(marr); /* on success it is gj's */
    ex_gpu_free(g, X);
    ex_gpu_free(g, Y);
    ex_gpu_free(g, X16);
    return rc;
}

/* Prefill attention (Qwen3-14B: 40 heads, 8 KV heads, head_dim 128, F32 cache) and routed experts
 * (Qwen3-30B-A3B: n_embd 2048, 768 per expert, 128 experts, 8 a token; gate/up Q4_K, down Q6_K, random
 * distinct ids a token) at n_tok tokens, the chunk starting at position 0; MoE also at 1 token (decode). */
typedef struct att_arg {
    ex_stream s;
    const float *q, *kc, *vc;
    float *out;
    int64_t n, nh, nkv, hd;
} att_arg;
static ex_gpu_status run_att(void *p, int rep)
{
    (void)rep;
    att_arg *a = p;
    return ex_cuda_attention(a->q, a->n, 0, a->kc, a->vc, a->nh, a->nkv, a->hd, 1.0f / sqrtf((float)a->hd), a->out, a->s);
}
typedef struct moe_arg {
    ex_gpu *g;
    ex_stream s;
    ex_tensor ge, ue, de;
    const float *x, *w;
    const int32_t *ids;
    int64_t n, k;
    float *out;
} moe_arg;
static ex_gpu_status run_moe(void *p, int rep)
{
    (void)rep;
    moe_arg *a = p;
    return ex_cuda_moe(a->g, &a->ge, &a->ue, &a->de, a->x, a->n, a->ids, a->w, a->k, a->out, a->s);
}

static int gpu_prefill_ops(const bench_kernels_opts *o, ex_gpu *g, ex_stream s, json_t *gj)
{
    const bench_sink *sk = &o->sink;
    const int64_t n = o->n_tok, nh = 40, nkv = 8, hd = 128;
    const int64_t ne = 2048, nf = 768, nx = 128, k = 8;
    int rc = -1;
    float *dq = NULL, *dkc = NULL, *dvc = NULL, *dout = NULL, *dx = NULL, *dw = NULL, *dmo = NULL;
    int32_t *dids = NULL;
    void *wg = NULL, *wd = NULL;
    size_t nq = (size_t)(n * nh * hd), nkvb = (size_t)(n * nkv * hd);
    size_t big = nq > (size_t)(n * ne) ? nq : (size_t)(n * ne);
    float *h = malloc(big * 4), *hw = malloc((size_t)(n * k) * 4);
    int32_t *hid = malloc((size_t)(n * k) * 4);
    uint64_t sd = 17, bg = 0, bd = 0;
    void *hg = kb_make_weights(ATS_Q_Q4_K, nf, ne, 41, &bg), *hd6 = kb_make_weights(ATS_Q_Q6_K, ne, nf, 43, &bd);
    if (!h || !hw || !hid || !hg || !hd6) {
        bench_note(sk, "out of memory for the prefill attention / MoE inputs");
        goto out;
    }
    for (size_t j = 0; j < big; j++) h[j] = (float)((double)(kb_splitmix(&sd) >> 11) * 0x1.0p-52 * 2.0 - 1.0);
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < k; j++) {
            int32_t id;
            int dup;
            do { /* k distinct experts a token, as a router's top-k */
                id = (int32_t)(kb_splitmix(&sd) % (uint64_t)nx);
                dup = 0;
                for (int64_t i = 0; i < j; i++) dup |= hid[t * k + i] == id;
            } while (dup);
            hid[t * k + j] = id;
            hw[t * k + j] = 1.0f / (float)k;
        }
    if (ex_gpu_malloc(g, nq * 4, (void **)&dq) || ex_gpu_malloc(g, nkvb * 4, (void **)&dkc) ||
        ex_gpu_malloc(g, nkvb * 4, (void **)&dvc) || ex_gpu_malloc(g, nq * 4, (void **)&dout) ||
        ex_gpu_malloc(g, (size_t)(n * ne) * 4, (void **)&dx) || ex_gpu_malloc(g, (size_t)(n * k) * 4, (void **)&dw) ||
        ex_gpu_malloc(g, (size_t)(n * k) * 4, (void **)&dids) || ex_gpu_malloc(g, (size_t)(n * ne) * 4, (void **)&dmo) ||
        ex_gpu_malloc(g, (size_t)bg * (size_t)nx * 2, &wg) || ex_gpu_malloc(g, (size_t)bd * (size_t)nx, &wd))
        goto out;
    ex_gpu_memcpy_h2d(dq, h, nq * 4, s);
    ex_gpu_memcpy_h2d(dkc, h, nkvb * 4, s);
    ex_gpu_memcpy_h2d(dvc, h + 7, nkvb * 4, s);
    ex_gpu_memcpy_h2d(dx, h, (size_t)(n * ne) * 4, s);
    ex_gpu_memcpy_h2d(dw, hw, (size_t)(n * k) * 4, s);
    ex_gpu_memcpy_h2d(dids, hid, (size_t)(n * k) * 4, s);
    for (int64_t e = 0; e < 2 * nx; e++) ex_gpu_memcpy_h2d((char *)wg + e * bg, hg, bg, s);
    for (int64_t e = 0; e < nx; e++) ex_gpu_memcpy_h2d((char *)wd + e * bd, hd6, bd, s);
    if (ex_gpu_stream_sync(s)) goto out;
    {
        att_arg a = {s, dq, dkc, dvc, dout, n, nh, nkv, hd};
        double med = gpu_time(sk, s, o->reps / 2 + 3, run_att, &a);
        double flop = 4.0 * (double)hd * (double)nh * (double)n * (double)(n + 1) / 2.0; /* QKᵀ and PV, causal */
        bench_table(sk, "\nprefill attention, %lld tokens from position 0, 40 heads / 8 KV heads, head_dim 128, F32 cache: "
               "%.1f us, %.1f TFLOP/s (causal FLOP)\n", (long long)n, med * 1e6, flop / med * 1e-12);
        json_t *e = json_object();
        json_object_set_new(e, "tokens", json_integer(n));
        json_object_set_new(e, "median_s", json_real(med));
        json_object_set_new(e, "TFLOPs", json_real(flop / med * 1e-12));
        json_object_set_new(gj, "prefill_attention", e);
    }
    {
        ex_tensor ge = {ATS_Q_Q4_K, {ne, nf, nx}, 0, wg}, de = {ATS_Q_Q6_K, {nf, ne, nx}, 0, wd};
        ats_qtype_bytes(ATS_Q_Q4_K, ne, &ge.row_bytes);
        ats_qtype_bytes(ATS_Q_Q6_K, nf, &de.row_bytes);
        ex_tensor ue = ge;
        ue.data = (char *)wg + nx * bg;
        bench_table(sk, "routed experts (MoE), 2048 -> 768 -> 2048, 128 experts, 8 a token, gate/up Q4_K, down Q6_K:\n");
        bench_table(sk, "%8s %10s %9s %10s\n", "tokens", "median_us", "TFLOP/s", "tok/s");
        json_t *arr = json_array();
        const int64_t ns[] = {1, n};
        for (int i = 0; i < 2; i++) {
            moe_arg a = {g, s, ge, ue, de, dx, dw, dids, ns[i], k, dmo};
            double med = gpu_time(sk, s, o->reps / 2 + 3, run_moe, &a);
            double flop = 2.0 * 3.0 * (double)ne * (double)nf * (double)ns[i] * (double)k;
            bench_table(sk, "%8lld %10.1f %9.1f %10.0f\n", (long long)ns[i], med * 1e6, flop / med * 1e-12, ns[i] / med);
            json_t *e = json_object();
            json_object_set_new(e, "tokens", json_integer(ns[i]));
            json_object_set_new(e, "median_s", json_real(med));
            json_object_set_new(e, "TFLOPs", json_real(flop / med * 1e-12));
            json_array_append_new(arr, e);
        }
        json_object_set_new(gj, "moe", arr);
    }
    rc = 0;
out:
    ex_gpu_free(g, dq); ex_gpu_free(g, dkc); ex_gpu_free(g, dvc); ex_gpu_free(g, dout);
    ex_gpu_free(g, dx); ex_gpu_free(g, dw); ex_gpu_free(g, dids); ex_gpu_free(g, dmo);
    ex_gpu_free(g, wg); ex_gpu_free(g, wd);
    free(h); free(hw); free(hid); free(hg); free(hd6);
    return rc;
}

int kb_bench_gpu(const bench_kernels_opts *o, json_t *root, kb_ceilings *cl)
{
    const bench_sink *sk = &o->sink;
    ex_gpu *g = NULL;
    ex_gpu_status st = ex_gpu_open(0, &g);
    if (st) {
        bench_table(sk, "\nGPU: %s: skipped\n", ex_gpu_status_str(st));
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
    int rc = gpu_ceilings(sk, g, s, gj, cl);
    int gemv_bad = 0;
    if (rc == 0) {
        json_t *garr = json_array();
        gemv_header(sk, gj);
        for (size_t ti = 0; ti < sizeof GPU_TYPES / sizeof GPU_TYPES[0] && rc == 0; ti++) {
            ats_qtype t = GPU_TYPES[ti];
            int fused_ok = t == ATS_Q_Q4_0 || t == ATS_Q_Q4_K || t == ATS_Q_Q8_0 || t == ATS_Q_Q6_K;
            for (int si = 0; si < KB_N_SHAPES + (fused_ok ? N_FUSED : 0) && rc == 0; si++)
                rc = gemv_row(o, g, s, t, ti, si < KB_N_SHAPES ? &kb_shapes[si] : &GPU_FUSED_SHAPES[si - KB_N_SHAPES],
                              cl->gpu_read_Bps, garr, &gemv_bad);
        }
        json_object_set_new(gj, "gemv", garr);
        if (gemv_bad) bench_note(sk, "a GPU GEMV differs from ex_cpu_matmul (FAIL in the table)");
    }
    if (rc == 0) rc = gpu_prefill(o, g, s, gj, cl);
    if (rc == 0) rc = gpu_prefill_ops(o, g, s, gj);
    if (rc == 0 && gemv_bad) rc = -1;
    json_object_set_new(root, "gpu", gj);
    ex_gpu_close(g);
    if (rc) bench_note(sk, "GPU part failed (see the CUDA message above)");
    return rc;
}
#endif
