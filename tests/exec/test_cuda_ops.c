/*
 * test_cuda_ops — every CUDA op of ex/gpu.h against its CPU oracle of ex/ops.h on fresh random
 * inputs (seed printed; replay with ATS_TEST_SEED). Exits 77 when there is no CUDA device or the
 * build has no CUDA backend. `test_cuda_ops gemv_table` runs only test_gemv_table.
 *
 * Error measure for the matmul family: max_i |y_gpu[i] - y_ref[i]| / max_i Σ_j |W_ij x_j| (the
 * scale of the row sums), so one bound per type holds whatever the shape; y_ref is the exact float
 * oracle ex_cpu_matmul_ref; the GPU is also compared with ex_cpu_matmul (both quantize activations
 * to 8 bits). Bounds (see err_bound()): F32 1e-5; F16/BF16 GEMV 1e-5 (F32 math); int8-activation
 * GEMV 1.2e-2 (|Δx| ≤ amax/254 per block of 32); dequant + F16 GEMM 4e-3; BF16 GEMM 1.6e-2.
 * A NaN anywhere never passes (all comparisons are written as !(err <= bound)); one check feeds a
 * NaN on purpose and expects the comparison to fail.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#ifndef ATS_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "test_cuda_ops: built without the CUDA backend: skipped\n");
    return TU_SKIP;
}
#else

#include <cuda_runtime_api.h> /* the device's opt-in shared memory (test_gemv_table) */

#include "ex/gpu.h"
#include "ex/ops.h"
#include "ex/quant.h"

static uint64_t g_rng;
static ex_gpu *g_gpu;
static ex_stream g_s;

static float frand(double lo, double hi) { return (float)tu_uniform(&g_rng, lo, hi); }
static void fill(float *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) x[i] = frand(lo, hi);
}

static void *dev_upload(const void *h, size_t bytes)
{
    void *d = NULL;
    if (ex_gpu_malloc(g_gpu, bytes, &d) != EX_GPU_OK) {
        fprintf(stderr, "device allocation of %zu bytes failed\n", bytes);
        exit(1); /* test program, not library code */
    }
    if (h && (ex_gpu_memcpy_h2d(d, h, bytes, g_s) != EX_GPU_OK || ex_gpu_stream_sync(g_s) != EX_GPU_OK)) exit(1);
    return d;
}
static void dev_download(void *h, const void *d, size_t bytes)
{
    if (ex_gpu_memcpy_d2h(h, d, bytes, g_s) != EX_GPU_OK || ex_gpu_stream_sync(g_s) != EX_GPU_OK) exit(1);
}

/* max |a - b| / scale, NaN → INFINITY */
static double max_err(const float *a, const float *b, int64_t n, double scale)
{
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= e)) e = isnan(d) ? INFINITY : d;
    }
    return e / scale;
}

/* A random weight tensor (rows, cols) of `type`: random F32 values quantized by the CPU code. */
typedef struct { ex_tensor host, dev; void *hbuf; void *dbuf; } wt;
static wt make_weight(ats_qtype type, int64_t cols, int64_t rows, int64_t n_mat, double amp)
{
    wt w;
    memset(&w, 0, sizeof w);
    uint64_t rb = 0;
    ats_qtype_bytes(type, cols, &rb);
    size_t bytes = (size_t)(rb * (uint64_t)rows * (uint64_t)n_mat);
    w.hbuf = malloc(bytes);
    float *tmp = malloc((size_t)cols * sizeof(float));
    for (int64_t r = 0; r < rows * n_mat; r++) {
        fill(tmp, cols, -amp, amp);
        ex_quantize_row(type, tmp, (uint8_t *)w.hbuf + r * rb, cols);
    }
    free(tmp);
    w.dbuf = dev_upload(w.hbuf, bytes);
    ex_tensor t = {type, {cols, rows, n_mat}, rb, w.hbuf};
    w.host = t;
    w.dev = t;
    w.dev.data = w.dbuf;
    return w;
}
static void free_weight(wt *w)
{
    free(w->hbuf);
    ex_gpu_free(g_gpu, w->dbuf);
}

/* Σ_j |W_ij x_j| maximised over rows and tokens: the scale of the row sums. */
static double row_scale(const ex_tensor *w, const float *x, int64_t n_tok)
{
    int64_t cols = w->ne[0], rows = w->ne[1];
    float *row = malloc((size_t)cols * sizeof(float));
    double best = 1e-30;
    for (int64_t r = 0; r < rows; r++) {
        ex_dequantize_row(w->type, (const uint8_t *)w->data + r * w->row_bytes, row, cols);
        for (int64_t t = 0; t < n_tok; t++) {
            double s = 0;
            for (int64_t j = 0; j < cols; j++) s += fabs((double)row[j] * x[t * cols + j]);
            if (s > best) best = s;
        }
    }
    free(row);
    return best;
}

static double err_bound(ats_qtype t, int64_t n_tok)
{
    int gemm = n_tok > 8;
    switch (t) {
    case ATS_Q_F32: return 1e-5;
    case ATS_Q_F16: return gemm ? 4e-3 : 1e-5;
    case ATS_Q_BF16: return gemm ? 1.6e-2 : 1e-5;
    default: return gemm ? 4e-3 : 1.2e-2;
    }
}

static void test_matmul(void)
{
    const ats_qtype types[] = {ATS_Q_F32, ATS_Q_F16, ATS_Q_BF16, ATS_Q_Q8_0, ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q6_K, ATS_Q_MXFP4};
    /* then long rows (4352..12288 columns) of the types with decode kernels that loop over a row in
     * several rounds of loads (gemv_ring.cu, gemv_rows.cu, gemv_tma.cu), including rows that end inside a
     * round; 1 token runs the table's kernel for the shape (test_gemv_table pins each one), 3 the batched
     * warp kernel, 19 the prefill GEMM */
    const ats_qtype long_types[] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0, ATS_Q_Q6_K, ATS_Q_Q6_K};
    const size_t n_short = sizeof types / sizeof types[0], n_long = sizeof long_types / sizeof long_types[0];
    const int64_t toks[] = {1, 3, 19};
    /* the rows above are all fewer than cols / 2; one more Q4_0 case with cols < 2 x rows and an odd row
     * count (rows2 off sm_90: its ragged last rows) */
    for (size_t ti = 0; ti < n_short + n_long + 1; ti++) {
        const int tall = ti == n_short + n_long;
        ats_qtype t = tall ? ATS_Q_Q4_0 : ti < n_short ? types[ti] : long_types[ti - n_short];
        int64_t cols = ti < n_short || tall ? 256 * (1 + (int64_t)(tu_rand(&g_rng) % 4))
                                            : 256 * (17 + (int64_t)(tu_rand(&g_rng) % 32));
        int64_t rows = 37 + (int64_t)(tu_rand(&g_rng) % 90);
        if (ti == n_short + n_long - 1) rows = 2049 + (int64_t)(tu_rand(&g_rng) % 200); /* Q6_K's rows2 (> 2048 rows) */
        if (tall) rows = cols / 2 + 1 + 2 * (int64_t)(tu_rand(&g_rng) % (uint64_t)(cols / 2)); /* odd, > cols / 2 */
        wt w = make_weight(t, cols, rows, 1, 1.0);
        for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++) {
            int64_t n = toks[k];
            float *x = malloc((size_t)(n * cols) * sizeof(float));
            float *yr = malloc((size_t)(n * rows) * sizeof(float)), *yc = malloc((size_t)(n * rows) * sizeof(float));
            float *yg = malloc((size_t)(n * rows) * sizeof(float));
            fill(x, n * cols, -1, 1);
            CHECK(ex_cpu_matmul_ref(&w.host, x, n, yr) == ATS_OK);
            CHECK(ex_cpu_matmul(&w.host, x, n, yc) == ATS_OK);
            float *dx = dev_upload(x, (size_t)(n * cols) * sizeof(float));
            float *dy = dev_upload(NULL, (size_t)(n * rows) * sizeof(float));
            CHECK(ex_cuda_matmul(g_gpu, &w.dev, dx, n, dy, g_s) == EX_GPU_OK);
            dev_download(yg, dy, (size_t)(n * rows) * sizeof(float));
            double sc = row_scale(&w.host, x, n), b = err_bound(t, n);
            double e_ref = max_err(yg, yr, n * rows, sc), e_cpu = max_err(yg, yc, n * rows, sc);
            CHECK_MSG(e_ref <= b, "matmul %s %lldx%lld n_tok %lld: error vs exact %.3g > %.3g", ats_qtype_name(t),
                      (long long)rows, (long long)cols, (long long)n, e_ref, b);
            CHECK_MSG(e_cpu <= 2 * b, "matmul %s n_tok %lld: error vs ex_cpu_matmul %.3g > %.3g", ats_qtype_name(t),
                      (long long)n, e_cpu, 2 * b);
            fprintf(stderr, "  matmul %-5s %4lldx%-4lld n_tok %2lld: err vs exact %.2e, vs cpu %.2e (bound %.1e)\n",
                    ats_qtype_name(t), (long long)rows, (long long)cols, (long long)n, e_ref, e_cpu, b);
            if (n == 1) { /* NaN never passes: poison x and expect the comparison to fail */
                x[cols / 2] = NAN;
                ex_gpu_memcpy_h2d(dx, x, (size_t)cols * sizeof(float), g_s);
                CHECK(ex_cuda_matmul(g_gpu, &w.dev, dx, 1, dy, g_s) == EX_GPU_OK);
                dev_download(yg, dy, (size_t)rows * sizeof(float));
                CHECK_MSG(!(max_err(yg, yr, rows, sc) <= b), "matmul %s: a NaN input passed the comparison",
                          ats_qtype_name(t));
            }
            ex_gpu_free(g_gpu, dx);
            ex_gpu_free(g_gpu, dy);
            free(x); free(yr); free(yc); free(yg);
        }
        /* dequantize to F32 is exact (same formula as ex_dequantize_row) */
        float *hd = malloc((size_t)(rows * cols) * sizeof(float)), *gd = malloc((size_t)(rows * cols) * sizeof(float));
        for (int64_t r = 0; r < rows; r++)
            ex_dequantize_row(t, (const uint8_t *)w.hbuf + r * w.host.row_bytes, hd + r * cols, cols);
        float *dd = dev_upload(NULL, (size_t)(rows * cols) * sizeof(float));
        CHECK(ex_cuda_dequantize((int)t, w.dbuf, rows * cols, ATS_Q_F32, dd, g_s) == EX_GPU_OK);
        dev_download(gd, dd, (size_t)(rows * cols) * sizeof(float));
        double e = max_err(gd, hd, rows * cols, 1.0);
        CHECK_MSG(e <= 1e-6, "dequantize %s: max error %.3g", ats_qtype_name(t), e);
        ex_gpu_free(g_gpu, dd);
        free(hd); free(gd);
        free_weight(&w);
    }
    /* bad shape: cols not a multiple of the block */
    ex_tensor bad = {ATS_Q_Q4_K, {96, 4, 1}, 0, (void *)16};
    CHECK(ex_cuda_matmul(g_gpu, &bad, (const float *)16, 1, (float *)16, g_s) == EX_GPU_EINVAL);
}

static void test_norm_rope(void)
{
    /* a random width, the widths of each thread count (32, 128, 256, 1024), ragged ones (not a
     * multiple of the threads or of the unroll) and Qwen3-14B's 5120 */
    const int64_t widths[] = {64 * (1 + (int64_t)(tu_rand(&g_rng) % 40)), 7, 100, 1061, 4099, 5120};
    const float eps = 1e-6f;
    double e;
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        int64_t rows = 5, n = widths[wi];
        float *x = malloc((size_t)(rows * n) * 4), *w = malloc((size_t)n * 4), *yc = malloc((size_t)(rows * n) * 4),
              *yg = malloc((size_t)(rows * n) * 4);
        fill(x, rows * n, -2, 2);
        fill(w, n, 0.5, 1.5);
        ex_cpu_rmsnorm(x, w, rows, n, eps, yc);
        float *dx = dev_upload(x, (size_t)(rows * n) * 4), *dw = dev_upload(w, (size_t)n * 4);
        CHECK(ex_cuda_rmsnorm(dx, dw, rows, n, eps, dx, g_s) == EX_GPU_OK); /* in place */
        dev_download(yg, dx, (size_t)(rows * n) * 4);
        e = max_err(yg, yc, rows * n, 1.0);
        CHECK_MSG(e <= 1e-5, "rmsnorm n %lld: max error %.3g", (long long)n, e);
        ex_gpu_free(g_gpu, dx);
        ex_gpu_free(g_gpu, dw);
        free(x); free(w); free(yc); free(yg);
    }

    /* Q/K norm + RoPE, both layouts */
    for (int type = 0; type < 2; type++) {
        int64_t nt = 1 + (int64_t)(tu_rand(&g_rng) % 6), nh = 3, hd = 64 * (1 + type), nrot = type ? hd : hd - 16;
        int64_t pos0 = (int64_t)(tu_rand(&g_rng) % 4000), len = nt * nh * hd;
        float theta = type ? 1000000.0f : 10000.0f;
        float *q = malloc((size_t)len * 4), *qc = malloc((size_t)len * 4), *qg = malloc((size_t)len * 4),
              *wn = malloc((size_t)hd * 4);
        fill(q, len, -1, 1);
        fill(wn, hd, 0.5, 1.5);
        memcpy(qc, q, (size_t)len * 4);
        ex_cpu_qk_norm(qc, wn, nt, nh, hd, eps);
        ex_cpu_rope(qc, nt, nh, hd, nrot, pos0, theta, (ats_rope_type)type);
        float *dq = dev_upload(q, (size_t)len * 4), *dwn = dev_upload(wn, (size_t)hd * 4);
        CHECK(ex_cuda_qk_norm(dq, dwn, nt, nh, hd, eps, g_s) == EX_GPU_OK);
        CHECK(ex_cuda_rope(dq, nt, nh, hd, nrot, pos0, theta, (ats_rope_type)type, g_s) == EX_GPU_OK);
        dev_download(qg, dq, (size_t)len * 4);
        e = max_err(qg, qc, len, 1.0);
        /* |x| ≲ 4 after the norm; the angle pos·freq (pos < 4006) carries F32 rounding of ~2 ulp */
        CHECK_MSG(e <= 2e-3, "qk_norm+rope %s pos0 %lld: max error %.3g", type ? "neox" : "norm", (long long)pos0, e);
        fprintf(stderr, "  rope %s pos0 %lld: max error %.2e\n", type ? "neox" : "norm", (long long)pos0, e);
        ex_gpu_free(g_gpu, dq);
        ex_gpu_free(g_gpu, dwn);
        free(q); free(qc); free(qg); free(wn);
    }
    CHECK(ex_cuda_rope((float *)16, 1, 1, 64, 63, 0, 1e4f, ATS_ROPE_NORM, g_s) == EX_GPU_EINVAL);
}

static void test_attention(void)
{
    const int64_t hds[] = {64, 128, 8, 80}; /* 8: stories260K; 80: not a multiple of 32 */
    for (int c = 0; c < 8; c++) { /* c < 4: decode; c >= 4: a prefill chunk */
        /* up to 8 tokens: the F32 kernel (more: the tensor-core kernel, test_attention_prefill) */
        int64_t hd = hds[c % 4], nkv = 2, nh = 8, nt = c < 4 ? 1 : 5 + (int64_t)(tu_rand(&g_rng) % 4);
        int64_t pos0 = (int64_t)(tu_rand(&g_rng) % 300), n_ctx = pos0 + nt + 3, kvd = nkv * hd;
        float scale = 1.0f / sqrtf((float)hd);
        float *kc = calloc((size_t)(n_ctx * kvd), 4), *vc = calloc((size_t)(n_ctx * kvd), 4);
        fill(kc, pos0 * kvd, -1, 1);
        fill(vc, pos0 * kvd, -1, 1);
        float *k = malloc((size_t)(nt * kvd) * 4), *v = malloc((size_t)(nt * kvd) * 4), *q = malloc((size_t)(nt * nh * hd) * 4);
        fill(k, nt * kvd, -1, 1);
        fill(v, nt * kvd, -1, 1);
        fill(q, nt * nh * hd, -2, 2);
        float *dkc = dev_upload(kc, (size_t)(n_ctx * kvd) * 4), *dvc = dev_upload(vc, (size_t)(n_ctx * kvd) * 4);
        float *dk = dev_upload(k, (size_t)(nt * kvd) * 4), *dv = dev_upload(v, (size_t)(nt * kvd) * 4);
        float *dq = dev_upload(q, (size_t)(nt * nh * hd) * 4), *dout = dev_upload(NULL, (size_t)(nt * nh * hd) * 4);
        CHECK(ex_cpu_kv_store(k, v, nt, pos0, kvd, n_ctx, kc, vc) == ATS_OK);
        CHECK(ex_cuda_kv_store(dk, dv, nt, pos0, kvd, n_ctx, dkc, dvc, g_s) == EX_GPU_OK);
        CHECK(ex_cuda_kv_store(dk, dv, nt, n_ctx - nt + 1, kvd, n_ctx, dkc, dvc, g_s) == EX_GPU_EINVAL);
        float *oc = malloc((size_t)(nt * nh * hd) * 4), *og = malloc((size_t)(nt * nh * hd) * 4);
        CHECK(ex_cpu_attention(q, nt, pos0, kc, vc, nh, nkv, hd, scale, oc) == ATS_OK);
        CHECK(ex_cuda_attention(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s) == EX_GPU_OK);
        dev_download(og, dout, (size_t)(nt * nh * hd) * 4);
        double e = max_err(og, oc, nt * nh * hd, 1.0);
        CHECK_MSG(e <= 2e-5, "attention hd %lld n_tok %lld pos0 %lld: max error %.3g", (long long)hd, (long long)nt,
                  (long long)pos0, e);
        fprintf(stderr, "  attention hd %3lld n_tok %2lld pos0 %3lld: max error %.2e\n", (long long)hd, (long long)nt,
                (long long)pos0, e);
        ex_gpu_free(g_gpu, dkc); ex_gpu_free(g_gpu, dvc); ex_gpu_free(g_gpu, dk); ex_gpu_free(g_gpu, dv);
        ex_gpu_free(g_gpu, dq); ex_gpu_free(g_gpu, dout);
        free(kc); free(vc); free(k); free(v); free(q); free(oc); free(og);
    }
}

/* F16 KV cache: the CUDA store must write the CPU store's bits (both round to nearest even) over the
 * whole cache (rows outside [pos0, pos0 + n_tok) untouched; V values reach the F16 subnormals);
 * attention over the same F16 cache on both sides then differs only in F32 summation order (2e-5).
 * The oracle of the _f16 ops. */
static void test_attention_f16(void)
{
    const int64_t hds[] = {64, 128, 8, 80}; /* 8: stories260K; 80: not a multiple of 32 */
    for (int c = 0; c < 8; c++) { /* c < 4: decode; c >= 4: a prefill chunk */
        int64_t hd = hds[c % 4], nkv = 2, nh = 8, nt = c < 4 ? 1 : 5 + (int64_t)(tu_rand(&g_rng) % 4);
        int64_t pos0 = 1 + (int64_t)(tu_rand(&g_rng) % 300), n_ctx = pos0 + nt + 3, kvd = nkv * hd;
        float scale = 1.0f / sqrtf((float)hd);
        size_t cache_bytes = (size_t)(n_ctx * kvd) * sizeof(ex_fp16);
        ex_fp16 *kc = calloc((size_t)(n_ctx * kvd), sizeof *kc), *vc = calloc((size_t)(n_ctx * kvd), sizeof *vc);
        ex_fp16 *kg = malloc(cache_bytes), *vg = malloc(cache_bytes);
        /* earlier positions: random rows stored by the CPU, the same bits uploaded */
        float *k0 = malloc((size_t)(pos0 * kvd) * 4), *v0 = malloc((size_t)(pos0 * kvd) * 4);
        fill(k0, pos0 * kvd, -1, 1);
        fill(v0, pos0 * kvd, -1, 1);
        CHECK(ex_cpu_kv_store_f16(k0, v0, pos0, 0, kvd, n_ctx, kc, vc) == ATS_OK);
        float *k = malloc((size_t)(nt * kvd) * 4), *v = malloc((size_t)(nt * kvd) * 4), *q = malloc((size_t)(nt * nh * hd) * 4);
        fill(k, nt * kvd, -1, 1);
        fill(v, nt * kvd, -1e-3, 1e-3); /* reaches the F16 subnormals (< 2^-14) */
        fill(q, nt * nh * hd, -2, 2);
        ex_fp16 *dkc = dev_upload(kc, cache_bytes), *dvc = dev_upload(vc, cache_bytes);
        float *dk = dev_upload(k, (size_t)(nt * kvd) * 4), *dv = dev_upload(v, (size_t)(nt * kvd) * 4);
        float *dq = dev_upload(q, (size_t)(nt * nh * hd) * 4), *dout = dev_upload(NULL, (size_t)(nt * nh * hd) * 4);
        CHECK(ex_cpu_kv_store_f16(k, v, nt, pos0, kvd, n_ctx, kc, vc) == ATS_OK);
        CHECK(ex_cuda_kv_store_f16(dk, dv, nt, pos0, kvd, n_ctx, dkc, dvc, g_s) == EX_GPU_OK);
        CHECK(ex_cuda_kv_store_f16(dk, dv, nt, n_ctx - nt + 1, kvd, n_ctx, dkc, dvc, g_s) == EX_GPU_EINVAL);
        dev_download(kg, dkc, cache_bytes);
        dev_download(vg, dvc, cache_bytes);
        int64_t diff = 0;
        for (int64_t i = 0; i < n_ctx * kvd; i++) diff += (kg[i] != kc[i]) + (vg[i] != vc[i]);
        CHECK_MSG(diff == 0, "kv_store_f16 hd %lld n_tok %lld pos0 %lld: %lld F16 values differ from the CPU store",
                  (long long)hd, (long long)nt, (long long)pos0, (long long)diff);
        float *oc = malloc((size_t)(nt * nh * hd) * 4), *og = malloc((size_t)(nt * nh * hd) * 4);
        CHECK(ex_cpu_attention_f16(q, nt, pos0, kc, vc, nh, nkv, hd, scale, oc) == ATS_OK);
        CHECK(ex_cuda_attention_f16(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s) == EX_GPU_OK);
        dev_download(og, dout, (size_t)(nt * nh * hd) * 4);
        double e = max_err(og, oc, nt * nh * hd, 1.0);
        CHECK_MSG(e <= 2e-5, "attention_f16 hd %lld n_tok %lld pos0 %lld: max error %.3g", (long long)hd, (long long)nt,
                  (long long)pos0, e);
        fprintf(stderr, "  attention_f16 hd %3lld n_tok %2lld pos0 %3lld: F16 caches equal, max error %.2e\n",
                (long long)hd, (long long)nt, (long long)pos0, e);
        ex_gpu_free(g_gpu, dkc); ex_gpu_free(g_gpu, dvc); ex_gpu_free(g_gpu, dk); ex_gpu_free(g_gpu, dv);
        ex_gpu_free(g_gpu, dq); ex_gpu_free(g_gpu, dout);
        free(kc); free(vc); free(kg); free(vg); free(k0); free(v0); free(k); free(v); free(q); free(oc); free(og);
    }
}

/* Prefill chunks of more than 8 tokens: the tensor-core flash kernel for head_dim 64/128/256 (F16
 * operands, F32 softmax and accumulation), the F32 kernel for other head sizes (80 here). Both cache types
 * against the CPU op on the same cache (F16: the CPU store's bits). Chunk lengths 9 (one partial query
 * tile), 64 + r and 150 + r (several tiles, a ragged last one), from position 0 or a random pos0 (KV
 * tiles before the chunk, a partial last KV tile); GQA ratios 1, 4, 5. Bound: 4e-3 of max |v| = 1 (Q·scale,
 * K, P and V rounded to F16: ~2^-11 relative each); head_dim 80 keeps 2e-5. */
static void test_attention_prefill(void)
{
    static const struct { int64_t nt, hd, nh, nkv; int at0; } cs[] = {
        {9, 128, 8, 2, 1}, {64, 128, 40, 8, 0}, {150, 64, 8, 8, 1}, {9, 256, 4, 1, 0},
        {150, 128, 10, 2, 0}, {64, 256, 8, 2, 1}, {40, 80, 8, 2, 0},
    };
    for (int f16 = 0; f16 < 2; f16++) {
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            int64_t nt = cs[c].nt + (cs[c].nt > 9 ? (int64_t)(tu_rand(&g_rng) % 40) : 0), hd = cs[c].hd;
            int64_t nh = cs[c].nh, nkv = cs[c].nkv, pos0 = cs[c].at0 ? 0 : 1 + (int64_t)(tu_rand(&g_rng) % 300);
            int64_t rows = pos0 + nt, n_ctx = rows + 5, kvd = nkv * hd, nq = nt * nh * hd;
            float scale = 1.0f / sqrtf((float)hd);
            size_t eb = f16 ? sizeof(ex_fp16) : sizeof(float), cache_bytes = (size_t)(n_ctx * kvd) * eb;
            float *k = malloc((size_t)(rows * kvd) * 4), *v = malloc((size_t)(rows * kvd) * 4), *q = malloc((size_t)nq * 4);
            fill(k, rows * kvd, -1, 1);
            fill(v, rows * kvd, -1, 1);
            fill(q, nq, -2, 2);
            void *kc = calloc((size_t)(n_ctx * kvd), eb), *vc = calloc((size_t)(n_ctx * kvd), eb);
            float *oc = malloc((size_t)nq * 4), *og = malloc((size_t)nq * 4);
            if (f16) CHECK(ex_cpu_kv_store_f16(k, v, rows, 0, kvd, n_ctx, kc, vc) == ATS_OK);
            else CHECK(ex_cpu_kv_store(k, v, rows, 0, kvd, n_ctx, kc, vc) == ATS_OK);
            void *dkc = dev_upload(kc, cache_bytes), *dvc = dev_upload(vc, cache_bytes);
            float *dq = dev_upload(q, (size_t)nq * 4), *dout = dev_upload(NULL, (size_t)nq * 4);
            ex_gpu_status st;
            if (f16) {
                CHECK(ex_cpu_attention_f16(q, nt, pos0, kc, vc, nh, nkv, hd, scale, oc) == ATS_OK);
                st = ex_cuda_attention_f16(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s);
            } else {
                CHECK(ex_cpu_attention(q, nt, pos0, kc, vc, nh, nkv, hd, scale, oc) == ATS_OK);
                st = ex_cuda_attention(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s);
            }
            CHECK(st == EX_GPU_OK);
            dev_download(og, dout, (size_t)nq * 4);
            double e = max_err(og, oc, nq, 1.0), b = hd == 80 ? 2e-5 : 4e-3;
            CHECK_MSG(e <= b, "attention%s prefill hd %lld n_tok %lld pos0 %lld heads %lld/%lld: max error %.3g > %.1g",
                      f16 ? "_f16" : "", (long long)hd, (long long)nt, (long long)pos0, (long long)nh, (long long)nkv, e, b);
            fprintf(stderr, "  attention%s prefill hd %3lld n_tok %3lld pos0 %3lld heads %2lld/%lld: max error %.2e (bound %.0e)\n",
                    f16 ? "_f16" : "    ", (long long)hd, (long long)nt, (long long)pos0, (long long)nh, (long long)nkv, e, b);
            ex_gpu_free(g_gpu, dkc); ex_gpu_free(g_gpu, dvc); ex_gpu_free(g_gpu, dq); ex_gpu_free(g_gpu, dout);
            free(k); free(v); free(q); free(kc); free(vc); free(oc); free(og);
        }
    }
}

/* Decode-shaped attention at long contexts (task AA): few (head, token) blocks and many positions, where
 * the launcher gives each (head, token) 8-32 warps and, on sm_90+, a cluster of S blocks merged through
 * distributed shared memory. Both cache types against the CPU op on the same cache (F16: the CPU store's
 * bits uploaded), n_tok 1 and 2, pos0 255/1000/4095, head_dim 64/128, GQA ratios 1/5/8 with the launcher's
 * own choice; then forced shapes: 32 warps x 3 blocks over 1001 positions (uneven shares), 32 x 8 over
 * 11 and over 1 position (whole blocks get none), 16 x 5 with head_dim 80, 4 x 7 over 4096 (through
 * ATS_ATTN_SHAPE, which the launchers read at every call). Same 2e-5 bound as above. */
static void test_attention_long(void)
{
    static const struct { int64_t nt, pos0, hd, ratio; int warps, split; } cs[] = {
        {1, 255, 64, 1, 0, 0},     {1, 1000, 128, 5, 0, 0}, {1, 4095, 128, 8, 0, 0}, {2, 4095, 64, 5, 0, 0},
        {2, 1000, 64, 8, 0, 0},    {2, 255, 128, 1, 0, 0},  {1, 4095, 64, 1, 0, 0},  {1, 1000, 128, 8, 32, 3},
        {2, 10, 64, 5, 32, 8},     {1, 0, 128, 1, 32, 8},   {1, 700, 80, 5, 16, 5},  {2, 300, 128, 8, 8, 2},
        {1, 1000, 128, 5, 32, 1},  {1, 4095, 64, 8, 4, 7},
        /* head_dim 256 (8 values a lane, the most): the largest shared-memory partials, 16 and 32 warps */
        {1, 1000, 256, 5, 16, 4},  {2, 700, 256, 1, 32, 2},  {1, 2047, 256, 8, 0, 0},
    };
    for (int f16 = 0; f16 < 2; f16++) {
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            int64_t nt = cs[c].nt, pos0 = cs[c].pos0, hd = cs[c].hd, nkv = 2, nh = nkv * cs[c].ratio;
            int64_t rows = pos0 + nt, n_ctx = rows + 2, kvd = nkv * hd, nq = nt * nh * hd;
            float scale = 1.0f / sqrtf((float)hd);
            size_t eb = f16 ? sizeof(ex_fp16) : sizeof(float), cache_bytes = (size_t)(n_ctx * kvd) * eb;
            float *k = malloc((size_t)(rows * kvd) * 4), *v = malloc((size_t)(rows * kvd) * 4), *q = malloc((size_t)nq * 4);
            fill(k, rows * kvd, -1, 1);
            fill(v, rows * kvd, -1, 1);
            fill(q, nq, -2, 2);
            void *kc = calloc((size_t)(n_ctx * kvd), eb), *vc = calloc((size_t)(n_ctx * kvd), eb);
            float *oc = malloc((size_t)nq * 4), *og = malloc((size_t)nq * 4);
            if (f16) {
                CHECK(ex_cpu_kv_store_f16(k, v, rows, 0, kvd, n_ctx, kc, vc) == ATS_OK);
                CHECK(ex_cpu_attention_f16(q, nt, pos0, kc, vc, nh, nkv, hd, scale, oc) == ATS_OK);
            } else {
                CHECK(ex_cpu_kv_store(k, v, rows, 0, kvd, n_ctx, kc, vc) == ATS_OK);
                CHECK(ex_cpu_attention(q, nt, pos0, kc, vc, nh, nkv, hd, scale, oc) == ATS_OK);
            }
            void *dkc = dev_upload(kc, cache_bytes), *dvc = dev_upload(vc, cache_bytes);
            float *dq = dev_upload(q, (size_t)nq * 4), *dout = dev_upload(NULL, (size_t)nq * 4);
            char shape[32];
            snprintf(shape, sizeof shape, "%d,%d", cs[c].warps, cs[c].split);
            setenv("ATS_ATTN_SHAPE", shape, 1);
            ex_gpu_status st = f16 ? ex_cuda_attention_f16(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s)
                                   : ex_cuda_attention(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s);
            CHECK(st == EX_GPU_OK);
            dev_download(og, dout, (size_t)nq * 4);
            double e = max_err(og, oc, nq, 1.0);
            CHECK_MSG(e <= 2e-5, "attention%s long hd %lld n_tok %lld pos0 %lld gqa %lld warps %d split %d: max error %.3g",
                      f16 ? "_f16" : "", (long long)hd, (long long)nt, (long long)pos0, (long long)cs[c].ratio,
                      cs[c].warps, cs[c].split, e);
            fprintf(stderr, "  attention%s long hd %3lld n_tok %lld pos0 %4lld gqa %lld warps %2d split %d%s: max error %.2e\n",
                    f16 ? "_f16" : "    ", (long long)hd, (long long)nt, (long long)pos0, (long long)cs[c].ratio,
                    cs[c].warps, cs[c].split, cs[c].warps ? "" : " (auto)", e);
            /* a warp count and a split the launcher does not have */
            setenv("ATS_ATTN_SHAPE", "3,0", 1);
            st = f16 ? ex_cuda_attention_f16(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s)
                     : ex_cuda_attention(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s);
            CHECK(st == EX_GPU_EINVAL);
            setenv("ATS_ATTN_SHAPE", "0,9", 1);
            st = f16 ? ex_cuda_attention_f16(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s)
                     : ex_cuda_attention(dq, nt, pos0, dkc, dvc, nh, nkv, hd, scale, dout, g_s);
            CHECK(st == EX_GPU_EINVAL);
            unsetenv("ATS_ATTN_SHAPE");
            ex_gpu_free(g_gpu, dkc); ex_gpu_free(g_gpu, dvc); ex_gpu_free(g_gpu, dq); ex_gpu_free(g_gpu, dout);
            free(k); free(v); free(q); free(kc); free(vc); free(oc); free(og);
        }
    }
}

static void test_elementwise_embedding(void)
{
    int64_t n = 1000 + (int64_t)(tu_rand(&g_rng) % 5000);
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *c = malloc((size_t)n * 4), *gg = malloc((size_t)n * 4);
    fill(a, n, -8, 8);
    fill(b, n, -2, 2);
    float *da = dev_upload(a, (size_t)n * 4), *db = dev_upload(b, (size_t)n * 4);
    ex_cpu_swiglu(a, b, n, c);
    CHECK(ex_cuda_swiglu(da, db, n, da, g_s) == EX_GPU_OK);
    dev_download(gg, da, (size_t)n * 4);
    CHECK_MSG(max_err(gg, c, n, 1.0) <= 1e-5, "swiglu: max error %.3g", max_err(gg, c, n, 1.0));
    ex_cpu_add(c, b, n);
    CHECK(ex_cuda_add(da, db, n, g_s) == EX_GPU_OK);
    dev_download(gg, da, (size_t)n * 4);
    CHECK_MSG(max_err(gg, c, n, 1.0) <= 1e-5, "add: max error %.3g", max_err(gg, c, n, 1.0));
    ex_gpu_free(g_gpu, da);
    ex_gpu_free(g_gpu, db);
    free(a); free(b); free(c); free(gg);

    const ats_qtype types[] = {ATS_Q_F32, ATS_Q_Q8_0, ATS_Q_Q4_K, ATS_Q_Q6_K};
    for (size_t i = 0; i < 4; i++) {
        int64_t n_embd = 512, n_vocab = 300, nt = 7;
        wt w = make_weight(types[i], n_embd, n_vocab, 1, 1.0);
        int32_t tok[7];
        for (int t = 0; t < nt; t++) tok[t] = (int32_t)(tu_rand(&g_rng) % (uint64_t)n_vocab);
        float *xc = malloc((size_t)(nt * n_embd) * 4), *xg = malloc((size_t)(nt * n_embd) * 4);
        CHECK(ex_cpu_embedding(&w.host, tok, nt, xc) == ATS_OK);
        int32_t *dt = dev_upload(tok, sizeof tok);
        float *dx = dev_upload(NULL, (size_t)(nt * n_embd) * 4);
        CHECK(ex_cuda_embedding(&w.dev, dt, nt, dx, g_s) == EX_GPU_OK);
        dev_download(xg, dx, (size_t)(nt * n_embd) * 4);
        double e = max_err(xg, xc, nt * n_embd, 1.0);
        CHECK_MSG(e <= 1e-6, "embedding %s: max error %.3g", ats_qtype_name(types[i]), e);
        /* an id out of range gives a NaN row, never a crash */
        tok[0] = (int32_t)n_vocab;
        ex_gpu_memcpy_h2d(dt, tok, sizeof tok, g_s);
        CHECK(ex_cuda_embedding(&w.dev, dt, nt, dx, g_s) == EX_GPU_OK);
        dev_download(xg, dx, (size_t)n_embd * 4);
        CHECK(isnan(xg[0]) && isnan(xg[n_embd - 1]));
        ex_gpu_free(g_gpu, dt);
        ex_gpu_free(g_gpu, dx);
        free(xc); free(xg);
        free_weight(&w);
    }
}

/* Exact float FFN of one token (matmul_ref, F32 SwiGLU) into out (n_embd); returns the scale
 * max_i Σ_l |W_down,il · h_l| of its down projection (the measure the GEMV bounds are relative to). */
static double ffn_ref(const ex_tensor *gate, const ex_tensor *up, const ex_tensor *down, const float *x, float *out)
{
    int64_t n_ff = gate->ne[1];
    float *g = malloc((size_t)n_ff * 4), *u = malloc((size_t)n_ff * 4);
    ex_cpu_matmul_ref(gate, x, 1, g);
    ex_cpu_matmul_ref(up, x, 1, u);
    for (int64_t i = 0; i < n_ff; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    ex_cpu_matmul_ref(down, g, 1, out);
    double sc = row_scale(down, g, 1);
    free(g);
    free(u);
    return sc;
}

/* FFN and MoE: GPU vs CPU op and vs the exact float reference, errors relative to the down
 * projection's row-sum scale (as the matmul bound); the int8 activations of gate/up and of the
 * SwiGLU output both contribute, hence 2x the GEMV bound. */
static void test_ffn_router_moe(void)
{
    int64_t n_embd = 256, n_ff = 512, n_exp = 8, k = 2;
    const int64_t toks[] = {1, 4, 12};
    const double bound = 2.4e-2;
    for (int c = 0; c < 3; c++) {
        int64_t nt = toks[c];
        ats_qtype t = c == 0 ? ATS_Q_Q4_K : c == 1 ? ATS_Q_Q8_0 : ATS_Q_Q4_0;
        wt gate = make_weight(t, n_embd, n_ff, 1, 0.1), up = make_weight(t, n_embd, n_ff, 1, 0.1),
           down = make_weight(ATS_Q_Q6_K, n_ff, n_embd, 1, 0.1);
        float *x = malloc((size_t)(nt * n_embd) * 4), *oc = malloc((size_t)(nt * n_embd) * 4),
              *og = malloc((size_t)(nt * n_embd) * 4), *orf = malloc((size_t)(nt * n_embd) * 4);
        fill(x, nt * n_embd, -1, 1);
        CHECK(ex_cpu_ffn(&gate.host, &up.host, &down.host, x, nt, oc) == ATS_OK);
        float *dx = dev_upload(x, (size_t)(nt * n_embd) * 4), *dout = dev_upload(NULL, (size_t)(nt * n_embd) * 4);
        CHECK(ex_cuda_ffn(g_gpu, &gate.dev, &up.dev, &down.dev, dx, nt, dout, g_s) == EX_GPU_OK);
        dev_download(og, dout, (size_t)(nt * n_embd) * 4);
        double e_cpu = 0, e_ref = 0;
        for (int64_t tk = 0; tk < nt; tk++) {
            double sc = ffn_ref(&gate.host, &up.host, &down.host, x + tk * n_embd, orf + tk * n_embd);
            e_cpu = fmax(e_cpu, max_err(og + tk * n_embd, oc + tk * n_embd, n_embd, sc));
            e_ref = fmax(e_ref, max_err(og + tk * n_embd, orf + tk * n_embd, n_embd, sc));
        }
        CHECK_MSG(e_ref <= bound && e_cpu <= 2 * bound, "ffn %s n_tok %lld: error vs exact %.3g, vs cpu %.3g",
                  ats_qtype_name(t), (long long)nt, e_ref, e_cpu);
        fprintf(stderr, "  ffn %s n_tok %2lld: err vs exact %.2e, vs cpu %.2e (bound %.1e)\n", ats_qtype_name(t),
                (long long)nt, e_ref, e_cpu, bound);
        free_weight(&gate); free_weight(&up); free_weight(&down);

        /* router */
        float *lg = malloc((size_t)(nt * n_exp) * 4), *wc = malloc((size_t)(nt * k) * 4), *wg = malloc((size_t)(nt * k) * 4);
        int32_t *ic = malloc((size_t)(nt * k) * 4), *ig = malloc((size_t)(nt * k) * 4);
        fill(lg, nt * n_exp, -3, 3);
        CHECK(ex_cpu_router_topk(lg, nt, n_exp, k, 1, ic, wc) == ATS_OK);
        float *dlg = dev_upload(lg, (size_t)(nt * n_exp) * 4), *dw = dev_upload(NULL, (size_t)(nt * k) * 4);
        int32_t *di = dev_upload(NULL, (size_t)(nt * k) * 4);
        CHECK(ex_cuda_router_topk(dlg, nt, n_exp, k, 1, di, dw, g_s) == EX_GPU_OK);
        dev_download(ig, di, (size_t)(nt * k) * 4);
        dev_download(wg, dw, (size_t)(nt * k) * 4);
        for (int64_t i = 0; i < nt * k; i++) {
            CHECK_MSG(ig[i] == ic[i], "router: slot %lld id %d vs cpu %d", (long long)i, ig[i], ic[i]);
            CHECK_NEAR(wg[i], wc[i], 1e-5);
        }
        /* experts */
        wt ge = make_weight(t, n_embd, n_ff, n_exp, 0.1), ue = make_weight(t, n_embd, n_ff, n_exp, 0.1),
           de = make_weight(ATS_Q_Q4_K, n_ff, n_embd, n_exp, 0.1);
        CHECK(ex_cpu_moe(&ge.host, &ue.host, &de.host, x, nt, ic, wc, k, oc) == ATS_OK);
        CHECK(ex_cuda_moe(g_gpu, &ge.dev, &ue.dev, &de.dev, dx, nt, di, dw, k, dout, g_s) == EX_GPU_OK);
        dev_download(og, dout, (size_t)(nt * n_embd) * 4);
        e_cpu = e_ref = 0;
        float *one = malloc((size_t)n_embd * 4);
        for (int64_t tk = 0; tk < nt; tk++) {
            double sc = 0;
            for (int64_t i = 0; i < n_embd; i++) orf[tk * n_embd + i] = 0;
            for (int64_t j = 0; j < k; j++) {
                ex_tensor g1 = ex_tensor_matrix(&ge.host, ic[tk * k + j]), u1 = ex_tensor_matrix(&ue.host, ic[tk * k + j]),
                          d1 = ex_tensor_matrix(&de.host, ic[tk * k + j]);
                sc += wc[tk * k + j] * ffn_ref(&g1, &u1, &d1, x + tk * n_embd, one);
                for (int64_t i = 0; i < n_embd; i++) orf[tk * n_embd + i] += wc[tk * k + j] * one[i];
            }
            e_cpu = fmax(e_cpu, max_err(og + tk * n_embd, oc + tk * n_embd, n_embd, sc));
            e_ref = fmax(e_ref, max_err(og + tk * n_embd, orf + tk * n_embd, n_embd, sc));
        }
        free(one);
        CHECK_MSG(e_ref <= bound && e_cpu <= 2 * bound, "moe %s n_tok %lld: error vs exact %.3g, vs cpu %.3g",
                  ats_qtype_name(t), (long long)nt, e_ref, e_cpu);
        fprintf(stderr, "  moe %s n_tok %2lld: err vs exact %.2e, vs cpu %.2e (bound %.1e)\n", ats_qtype_name(t),
                (long long)nt, e_ref, e_cpu, bound);
        free_weight(&ge); free_weight(&ue); free_weight(&de);
        ex_gpu_free(g_gpu, dlg); ex_gpu_free(g_gpu, dw); ex_gpu_free(g_gpu, di);
        ex_gpu_free(g_gpu, dx); ex_gpu_free(g_gpu, dout);
        free(lg); free(wc); free(wg); free(ic); free(ig);
        free(x); free(oc); free(og); free(orf);
    }
}

/* Routed experts in prefill chunks (more than 8 tokens: pairs grouped by expert on the device, grouped
 * F16 tensor-core GEMMs): GPU vs ex_cpu_moe and vs the exact float reference, relative to the down
 * projection's row-sum scale. Cases: Q4_K gate/up + Q6_K down, 8 experts, 4 a token, 130 + r tokens
 * (65 pairs an expert on average: experts with more than one tile of 64 pairs); Q4_0 + Q8_0 with widths that are not a multiple of the
 * 128-column step or the 64-row tile (352, 288); MXFP4 + Q4_K at 9 tokens; F16 + BF16. Ids are random
 * distinct experts a token; one case routes a token to an id out of range: its row must be NaN and the
 * others still right. Bound 8e-3: F16 weights and activations in both GEMMs (4e-3 each, as the prefill
 * GEMM); vs the CPU op (int8 activations) twice the GEMV bound. */
static void test_moe_prefill(void)
{
    static const struct { ats_qtype tg, td; int64_t n_embd, n_ff, n_exp, k, nt; } cs[] = {
        {ATS_Q_Q4_K, ATS_Q_Q6_K, 512, 256, 8, 4, 130}, {ATS_Q_Q4_0, ATS_Q_Q8_0, 352, 288, 8, 2, 37},
        {ATS_Q_MXFP4, ATS_Q_Q4_K, 256, 256, 8, 2, 9},   {ATS_Q_F16, ATS_Q_BF16, 192, 96, 4, 2, 20},
    };
    const double bound = 8e-3;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        int64_t n_embd = cs[c].n_embd, n_ff = cs[c].n_ff, n_exp = cs[c].n_exp, k = cs[c].k;
        int64_t nt = cs[c].nt + (c == 0 ? (int64_t)(tu_rand(&g_rng) % 60) : 0);
        wt ge = make_weight(cs[c].tg, n_embd, n_ff, n_exp, 0.1), ue = make_weight(cs[c].tg, n_embd, n_ff, n_exp, 0.1),
           de = make_weight(cs[c].td, n_ff, n_embd, n_exp, 0.1);
        float *x = malloc((size_t)(nt * n_embd) * 4), *oc = malloc((size_t)(nt * n_embd) * 4),
              *og = malloc((size_t)(nt * n_embd) * 4), *orf = malloc((size_t)(nt * n_embd) * 4),
              *one = malloc((size_t)n_embd * 4), *wc = malloc((size_t)(nt * k) * 4);
        int32_t *ic = malloc((size_t)(nt * k) * 4);
        fill(x, nt * n_embd, -1, 1);
        for (int64_t t = 0; t < nt; t++) {
            float sum = 0;
            for (int64_t j = 0; j < k; j++) {
                int32_t id;
                int dup;
                do {
                    id = (int32_t)(tu_rand(&g_rng) % (uint64_t)n_exp);
                    dup = 0;
                    for (int64_t i = 0; i < j; i++) dup |= ic[t * k + i] == id;
                } while (dup);
                ic[t * k + j] = id;
                wc[t * k + j] = frand(0.1, 1.0);
                sum += wc[t * k + j];
            }
            for (int64_t j = 0; j < k; j++) wc[t * k + j] /= sum;
        }
        CHECK(ex_cpu_moe(&ge.host, &ue.host, &de.host, x, nt, ic, wc, k, oc) == ATS_OK);
        float *dx = dev_upload(x, (size_t)(nt * n_embd) * 4), *dout = dev_upload(NULL, (size_t)(nt * n_embd) * 4);
        float *dw = dev_upload(wc, (size_t)(nt * k) * 4);
        int32_t *di = dev_upload(ic, (size_t)(nt * k) * 4);
        CHECK(ex_cuda_moe(g_gpu, &ge.dev, &ue.dev, &de.dev, dx, nt, di, dw, k, dout, g_s) == EX_GPU_OK);
        dev_download(og, dout, (size_t)(nt * n_embd) * 4);
        double e_cpu = 0, e_ref = 0;
        for (int64_t tk = 0; tk < nt; tk++) {
            double sc = 0;
            for (int64_t i = 0; i < n_embd; i++) orf[tk * n_embd + i] = 0;
            for (int64_t j = 0; j < k; j++) {
                ex_tensor g1 = ex_tensor_matrix(&ge.host, ic[tk * k + j]), u1 = ex_tensor_matrix(&ue.host, ic[tk * k + j]),
                          d1 = ex_tensor_matrix(&de.host, ic[tk * k + j]);
                sc += wc[tk * k + j] * ffn_ref(&g1, &u1, &d1, x + tk * n_embd, one);
                for (int64_t i = 0; i < n_embd; i++) orf[tk * n_embd + i] += wc[tk * k + j] * one[i];
            }
            e_cpu = fmax(e_cpu, max_err(og + tk * n_embd, oc + tk * n_embd, n_embd, sc));
            e_ref = fmax(e_ref, max_err(og + tk * n_embd, orf + tk * n_embd, n_embd, sc));
        }
        CHECK_MSG(e_ref <= bound && e_cpu <= 2 * 2.4e-2, "moe prefill %s/%s n_tok %lld: error vs exact %.3g, vs cpu %.3g",
                  ats_qtype_name(cs[c].tg), ats_qtype_name(cs[c].td), (long long)nt, e_ref, e_cpu);
        fprintf(stderr, "  moe prefill %-5s/%-5s %3lldx%-3lld %2lld experts k %lld n_tok %3lld: err vs exact %.2e, vs cpu %.2e (bound %.0e)\n",
                ats_qtype_name(cs[c].tg), ats_qtype_name(cs[c].td), (long long)n_embd, (long long)n_ff, (long long)n_exp,
                (long long)k, (long long)nt, e_ref, e_cpu, bound);
        if (c == 1) { /* token 3 routed to an expert that does not exist: its row NaN, the rest unchanged */
            int32_t bad = (int32_t)n_exp;
            ex_gpu_memcpy_h2d(di + 3 * k + 1, &bad, 4, g_s);
            CHECK(ex_cuda_moe(g_gpu, &ge.dev, &ue.dev, &de.dev, dx, nt, di, dw, k, dout, g_s) == EX_GPU_OK);
            dev_download(og, dout, (size_t)(nt * n_embd) * 4);
            int nan_row = 1, others = 1;
            for (int64_t i = 0; i < n_embd; i++) nan_row &= isnan(og[3 * n_embd + i]);
            for (int64_t i = 0; i < nt * n_embd; i++)
                if (i / n_embd != 3) others &= !isnan(og[i]);
            CHECK_MSG(nan_row && others, "moe prefill: a bad id must make its token's row NaN and only that row");
        }
        ex_gpu_free(g_gpu, dx); ex_gpu_free(g_gpu, dout); ex_gpu_free(g_gpu, dw); ex_gpu_free(g_gpu, di);
        free_weight(&ge); free_weight(&ue); free_weight(&de);
        free(x); free(oc); free(og); free(orf); free(one); free(wc); free(ic);
    }
}

static void test_sample_copy(void)
{
    int64_t nv = 1000 + (int64_t)(tu_rand(&g_rng) % 150000);
    float *lg = malloc((size_t)nv * 4);
    fill(lg, nv, -10, 10);
    float *dl = dev_upload(lg, (size_t)nv * 4);
    ex_sample_params p = ex_sample_params_default();
    int32_t tc = -1, tg = -2;
    uint64_t r1 = 42, r2 = 42;
    CHECK(ex_cpu_sample(lg, nv, &p, &r1, &tc) == ATS_OK);
    CHECK(ex_cuda_sample(g_gpu, dl, nv, &p, &r2, &tg, g_s) == EX_GPU_OK);
    CHECK_MSG(tc == tg, "greedy: gpu %d cpu %d", tg, tc);
    p.temp = 0.8f;
    p.top_k = 40;
    p.top_p = 0.9f;
    for (int i = 0; i < 5; i++) {
        CHECK(ex_cpu_sample(lg, nv, &p, &r1, &tc) == ATS_OK);
        CHECK(ex_cuda_sample(g_gpu, dl, nv, &p, &r2, &tg, g_s) == EX_GPU_OK);
        CHECK_MSG(tc == tg && r1 == r2, "sample %d: gpu %d cpu %d", i, tg, tc);
    }
    ex_gpu_free(g_gpu, dl);
    free(lg);

    /* SM copy kernel: device → mapped pinned host (zero-copy) and back, odd sizes and offsets */
    size_t bytes = 1 + (size_t)(tu_rand(&g_rng) % (1u << 22));
    uint8_t *src = malloc(bytes + 16), *back = malloc(bytes + 16);
    for (size_t i = 0; i < bytes + 16; i++) src[i] = (uint8_t)tu_rand(&g_rng);
    uint8_t *dsrc = dev_upload(src, bytes + 16), *ddst = dev_upload(NULL, bytes + 16);
    void *host = NULL, *halias = NULL;
    CHECK(ex_gpu_host_alloc(g_gpu, bytes + 16, &host, &halias) == EX_GPU_OK);
    for (int off = 0; off < 2; off++) {
        CHECK(ex_cuda_copy((uint8_t *)halias + off, dsrc + off, bytes, g_s) == EX_GPU_OK);
        CHECK(ex_gpu_stream_sync(g_s) == EX_GPU_OK);
        CHECK(memcmp((uint8_t *)host + off, src + off, bytes) == 0);
        CHECK(ex_cuda_copy(ddst + off, (uint8_t *)halias + off, bytes, g_s) == EX_GPU_OK);
        dev_download(back, ddst, bytes + 16);
        CHECK(memcmp(back + off, src + off, bytes) == 0);
    }
    ex_gpu_host_free(g_gpu, host);
    ex_gpu_free(g_gpu, dsrc);
    ex_gpu_free(g_gpu, ddst);
    free(src); free(back);
}

/* Decode GEMVs queued back to back with no host wait in between: (a) independent activations x_i, all
 * GEMVs of one shared quantize workspace; (b) a chain where GEMV i's output is GEMV i+1's input. Each
 * output is compared with the CPU's product of the same input (for the chain, the GPU's own previous
 * output), so a quantize kernel that read its input before the GEMV producing it had finished, or a GEMV
 * that read activations stale or overwritten by the next call, fails here. It catches a launch chain
 * of quantize and GEMV kernels as programmatic dependents of each other (stale L1 lines of x: 1 call in
 * 8-16 wrong now and then on the H200; experiments/kernels/README.md). */
static void test_gemv_chain(void)
{
    const ats_qtype types[4] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0, ATS_Q_Q6_K}; /* Q4_0/Q4_K: tma; Q8_0: ring; Q6_K: rows2 at 4096, ring at 1024 */
    enum { N = 16 };
    const int64_t sizes[] = {4096, 1024}; /* square: rows = cols */
    for (size_t ti = 0; ti < 2 * sizeof types / sizeof types[0]; ti++) {
        ats_qtype t = types[ti % 4];
        const int64_t n = sizes[ti / 4];
        wt w = make_weight(t, n, n, 1, 1.7 / sqrt((double)n)); /* |y| ~ |x| */
        float *hx = malloc((size_t)(N * n) * sizeof(float)), *hy = malloc((size_t)(N * n) * sizeof(float));
        float *yr = malloc((size_t)n * sizeof(float));
        fill(hx, N * n, -1, 1);
        float *dx = dev_upload(hx, (size_t)(N * n) * sizeof(float));
        float *dy = dev_upload(NULL, (size_t)(N * n) * sizeof(float));
        for (int mode = 0; mode < 2; mode++) {
            for (int i = 0; i < N; i++) {
                const float *in = mode == 0 || i == 0 ? dx + (int64_t)i * n : dy + (int64_t)(i - 1) * n;
                CHECK(ex_cuda_matmul(g_gpu, &w.dev, in, 1, dy + (int64_t)i * n, g_s) == EX_GPU_OK);
            }
            dev_download(hy, dy, (size_t)(N * n) * sizeof(float)); /* the only wait */
            double worst = 0;
            for (int i = 0; i < N; i++) {
                const float *in = mode == 0 || i == 0 ? hx + (int64_t)i * n : hy + (int64_t)(i - 1) * n;
                CHECK(ex_cpu_matmul_ref(&w.host, in, 1, yr) == ATS_OK);
                double e = max_err(hy + (int64_t)i * n, yr, n, row_scale(&w.host, in, 1));
                CHECK_MSG(e <= err_bound(t, 1), "gemv %s %s, call %d of %d queued back to back: error %.3g > %.3g",
                          ats_qtype_name(t), mode ? "chain" : "independent x", i, N, e, err_bound(t, 1));
                if (!(e <= worst)) worst = e;
            }
            fprintf(stderr, "  gemv %-5s %lldx%lld, %d calls back to back (%s): worst err %.2e\n", ats_qtype_name(t),
                    (long long)n, (long long)n, N, mode ? "y_i = W y_i-1" : "independent x", worst);
        }
        ex_gpu_free(g_gpu, dx);
        ex_gpu_free(g_gpu, dy);
        free(hx); free(hy); free(yr);
        free_weight(&w);
    }
}

/* The decode GEMV table (exec/kernels/cuda/gemv.cu) on shapes that reach each of its kernels, with the edge
 * cases of each kernel's bookkeeping reached through the shape alone:
 * - tma (Q4_0/Q4_K, up to 8192 columns, sm_90): fewer rows than SMs (grid = rows, a row a block), one row,
 *   many items a warp (21121 x 1024: ~160 items a block, 10 a warp), ragged last rounds (row counts not a
 *   multiple of 16 · blocks), two chunks a row of unequal length (7936 columns: 31 units cut 15 + 16), and
 *   a ring slot waited on a third time (its mbarrier's phase parity back at 0): warp w takes items w, w + 16,
 *   ...; its k-th lands in slot k mod S with S = 96 KB / (16 warps · slot), 8 at 256 columns and 2 from
 *   3840 up, so SMs · 16 · 24 + 7 rows of 256 columns (24 items a warp > 2 · 8) and SMs · 16 · 5 + 3 rows
 *   of 3840 (5 items a warp > 2 · 2) use slot 0 three times;
 * - rows1 / rows2 (Q4_0 rows of more than 8192 columns: rows1 when cols >= 2 rows; Q4_K wider than 8192;
 *   Q6_K above 2048 rows): odd row counts (the last warp's second row missing), 17408 and 34816 columns;
 * - ring (Q8_0 up to 8192 columns, Q6_K up to 2048 rows, Q4_0 rows of a column count not a multiple of 256):
 *   many rows a warp (40000 rows of 64 or 96 columns: ~19 rows a warp at 2112 resident warps, the ring
 *   wrapping across row boundaries), rows of several chunks (Q6_K 17408 columns), unaligned Q4_0 rows;
 * - warp (MXFP4, F16, BF16, F32, Q8_0 wider than 8192 columns), with rows not fit for 16-byte loads.
 * Every output against the exact reference; on an sm_90 device with the H200's 227 KiB of opt-in shared
 * memory the case must also have run the kernel named here, so this test fails if the dispatch silently
 * falls back. Elsewhere the tma cases run rows1 / rows2 (checked) and the ring cases may run warp (sm_120's
 * 99 KiB), so there only the results are checked for those. */
typedef struct gemv_case {
    ats_qtype t;
    int64_t rows, cols;
    const char *kern; /* on the H200 */
} gemv_case;

static void test_gemv_table(void)
{
    const int64_t nsm = ex_gpu_info(g_gpu)->sm_count;
    const gemv_case cases[] = {
        {ATS_Q_Q4_0, 5, 256, "tma"},           {ATS_Q_Q4_0, 1, 4096, "tma"},
        {ATS_Q_Q4_0, 131, 512, "tma"},         {ATS_Q_Q4_0, 21121, 1024, "tma"},
        {ATS_Q_Q4_0, 1107, 5120, "tma"},       {ATS_Q_Q4_0, nsm * 16 * 24 + 7, 256, "tma"},
        {ATS_Q_Q4_0, nsm * 16 * 5 + 3, 3840, "tma"}, {ATS_Q_Q4_0, nsm * 32 + 9, 7936, "tma"},
        {ATS_Q_Q4_0, 603, 17408, "rows1"},     {ATS_Q_Q4_0, 270, 34816, "rows1"},
        {ATS_Q_Q4_0, 4301, 8448, "rows2"},     {ATS_Q_Q4_0, 3001, 4192, "ring"},
        {ATS_Q_Q4_0, 40000, 96, "ring"},
        {ATS_Q_Q4_K, 5, 256, "tma"},           {ATS_Q_Q4_K, 1, 4096, "tma"},
        {ATS_Q_Q4_K, 131, 512, "tma"},         {ATS_Q_Q4_K, 21121, 1024, "tma"},
        {ATS_Q_Q4_K, 1107, 5120, "tma"},       {ATS_Q_Q4_K, nsm * 16 * 24 + 7, 256, "tma"},
        {ATS_Q_Q4_K, nsm * 32 + 9, 7936, "tma"}, {ATS_Q_Q4_K, 603, 17408, "rows2"},
        {ATS_Q_Q4_K, 271, 34816, "rows2"},
        {ATS_Q_Q8_0, 1107, 1024, "ring"},      {ATS_Q_Q8_0, 40000, 64, "ring"},
        {ATS_Q_Q8_0, 2049, 8192, "ring"},      {ATS_Q_Q8_0, 603, 17408, "warp"},
        {ATS_Q_Q8_0, 37, 8224, "warp"},
        {ATS_Q_Q6_K, 2048, 5120, "ring"},      {ATS_Q_Q6_K, 131, 512, "ring"},
        {ATS_Q_Q6_K, 37, 17408, "ring"},       {ATS_Q_Q6_K, 2049, 256, "rows2"},
        {ATS_Q_Q6_K, 2101, 2560, "rows2"},
        {ATS_Q_MXFP4, 131, 4096, "warp"},      {ATS_Q_F16, 131, 4096, "warp"},
        {ATS_Q_F16, 37, 100, "warp"},          {ATS_Q_BF16, 131, 4096, "warp"},
        {ATS_Q_F32, 131, 4096, "warp"},        {ATS_Q_F32, 37, 101, "warp"},
    };
    const int sm90 = ex_gpu_info(g_gpu)->cc_major >= 9;
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ex_gpu_info(g_gpu)->device) != cudaSuccess)
        optin = 0;
    const int h200 = sm90 && optin >= 227 * 1024;
    fprintf(stderr, "  gemv table: cc %d, %d KB opt-in shared memory a block: %s\n", ex_gpu_info(g_gpu)->cc_major,
            optin / 1024, h200 ? "every case must run the kernel named" : "the non-sm_90 choices checked");
    int seen[5] = {0};
    const char *names[5] = {"tma", "rows2", "rows1", "ring", "warp"};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const gemv_case *c = &cases[ci];
        const char *kern = ex_cuda_gemv_kernel(g_gpu, (int)c->t, c->rows, c->cols);
        const char *want = c->kern;
        if (!h200 && strcmp(want, "tma") == 0) /* the rows kernels take these off sm_90 */
            want = c->t == ATS_Q_Q4_0 && c->cols >= 2 * c->rows ? "rows1" : "rows2";
        const int check = h200 || strcmp(want, "ring") != 0;
        CHECK_MSG(!check || strcmp(kern, want) == 0, "gemv %s %lldx%lld: the table ran %s, not %s", ats_qtype_name(c->t),
                  (long long)c->rows, (long long)c->cols, kern, want);
        for (int k = 0; k < 5; k++) seen[k] += strcmp(kern, names[k]) == 0;
        wt w = make_weight(c->t, c->cols, c->rows, 1, 1.0);
        float *x = malloc((size_t)c->cols * sizeof(float)), *yr = malloc((size_t)c->rows * sizeof(float));
        float *yg = malloc((size_t)c->rows * sizeof(float));
        fill(x, c->cols, -1, 1);
        CHECK(ex_cpu_matmul_ref(&w.host, x, 1, yr) == ATS_OK);
        float *dx = dev_upload(x, (size_t)c->cols * sizeof(float));
        float *dy = dev_upload(NULL, (size_t)c->rows * sizeof(float));
        CHECK(ex_cuda_matmul(g_gpu, &w.dev, dx, 1, dy, g_s) == EX_GPU_OK);
        dev_download(yg, dy, (size_t)c->rows * sizeof(float));
        const double e = max_err(yg, yr, c->rows, row_scale(&w.host, x, 1)), b = err_bound(c->t, 1);
        CHECK_MSG(e <= b, "gemv %s %lldx%lld (%s): error vs exact %.3g > %.3g", ats_qtype_name(c->t),
                  (long long)c->rows, (long long)c->cols, kern, e, b);
        fprintf(stderr, "  gemv %-5s %6lldx%-5lld (%-5s): err vs exact %.2e (bound %.1e)\n", ats_qtype_name(c->t),
                (long long)c->rows, (long long)c->cols, kern, e, b);
        ex_gpu_free(g_gpu, dx);
        ex_gpu_free(g_gpu, dy);
        free(x); free(yr); free(yg);
        free_weight(&w);
    }
    for (int k = 0; k < 5; k++) /* every kernel of the table ran (tma only where it exists) */
        CHECK_MSG(seen[k] > 0 || (k == 0 && !h200) || (k == 3 && !h200), "gemv table: no case ran %s", names[k]);
}

/* Decode GEMVs of an FFN-like pair queued back to back: up (rows 3n, cols n) then down (rows n, cols 3n =
 * 8448 > 8192: rows1 for Q4_0 with its plain-order quantize (exc_quantize_q8x), rows2 for Q4_K, warp for
 * Q8_0; up runs tma on sm_90, ring for Q8_0), y_i = W_i y_i-1 alternating, 16 calls with one wait at the
 * end: every pair of different kernels of the table back to back, each a programmatic dependent of the
 * other where it launches as one. */
static void test_gemv_wide_chain(void)
{
    const ats_qtype types[3] = {ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q8_0};
    enum { N = 16 };
    const int64_t n = 2816, m = 3 * 2816;
    for (size_t ti = 0; ti < 3; ti++) {
        ats_qtype t = types[ti];
        wt up = make_weight(t, n, m, 1, 1.7 / sqrt((double)n)), down = make_weight(t, m, n, 1, 1.7 / sqrt((double)m));
        float *hx = malloc((size_t)n * sizeof(float)), *hy = malloc((size_t)(N * m) * sizeof(float));
        float *yr = malloc((size_t)m * sizeof(float));
        fill(hx, n, -1, 1);
        float *dx = dev_upload(hx, (size_t)n * sizeof(float));
        float *dy = dev_upload(NULL, (size_t)(N * m) * sizeof(float)); /* call i's output at dy + i * m */
        for (int i = 0; i < N; i++) {
            const ex_tensor *w = i % 2 ? &down.dev : &up.dev;
            const float *in = i == 0 ? dx : dy + (int64_t)(i - 1) * m;
            CHECK(ex_cuda_matmul(g_gpu, w, in, 1, dy + (int64_t)i * m, g_s) == EX_GPU_OK);
        }
        dev_download(hy, dy, (size_t)(N * m) * sizeof(float)); /* the only wait */
        double worst = 0;
        for (int i = 0; i < N; i++) {
            const ex_tensor *w = i % 2 ? &down.host : &up.host;
            const float *in = i == 0 ? hx : hy + (int64_t)(i - 1) * m;
            const int64_t rows = w->ne[1];
            CHECK(ex_cpu_matmul_ref(w, in, 1, yr) == ATS_OK);
            double e = max_err(hy + (int64_t)i * m, yr, rows, row_scale(w, in, 1));
            CHECK_MSG(e <= err_bound(t, 1), "gemv %s %s %lldx%lld, call %d of %d back to back: error %.3g > %.3g",
                      ats_qtype_name(t), i % 2 ? "down (wide)" : "up", (long long)rows, (long long)w->ne[0], i, N,
                      e, err_bound(t, 1));
            if (!(e <= worst)) worst = e;
        }
        fprintf(stderr, "  gemv %-5s up %lldx%lld (%s) / down %lldx%lld (%s) alternating, %d calls back to back: worst %.2e\n",
                ats_qtype_name(t), (long long)m, (long long)n, ex_cuda_gemv_kernel(g_gpu, (int)t, m, n), (long long)n,
                (long long)m, ex_cuda_gemv_kernel(g_gpu, (int)t, n, m), N, worst);
        ex_gpu_free(g_gpu, dx);
        ex_gpu_free(g_gpu, dy);
        free(hx); free(hy); free(yr);
        free_weight(&up);
        free_weight(&down);
    }
}

int main(int argc, char **argv)
{
    /* `test_cuda_ops gemv_table`: that test alone */
    const int only_table = argc > 1 && strcmp(argv[1], "gemv_table") == 0;
    if (argc > 1 && !only_table) {
        fprintf(stderr, "usage: test_cuda_ops [gemv_table]\n");
        return 2;
    }
    ex_gpu_status st = ex_gpu_open(0, &g_gpu);
    if (st == EX_GPU_ENODEV) {
        fprintf(stderr, "test_cuda_ops: %s: skipped\n", ex_gpu_status_str(st));
        return TU_SKIP;
    }
    if (st != EX_GPU_OK) {
        fprintf(stderr, "test_cuda_ops: ex_gpu_open: %s\n", ex_gpu_status_str(st));
        return 1;
    }
    fprintf(stderr, "device: %s (cc %d.%d, %d SMs)\n", ex_gpu_info(g_gpu)->name, ex_gpu_info(g_gpu)->cc_major,
            ex_gpu_info(g_gpu)->cc_minor, ex_gpu_info(g_gpu)->sm_count);
    g_rng = tu_seed("test_cuda_ops");
    g_s = ex_gpu_stream(g_gpu, EX_GPU_STREAM_COMPUTE);
    if (only_table) {
        test_gemv_table();
    } else {
        test_matmul();
        test_gemv_table();
        test_gemv_chain();
        test_gemv_wide_chain();
        test_norm_rope();
        test_attention();
        test_attention_f16();
        test_attention_prefill();
        test_attention_long();
        test_elementwise_embedding();
        test_ffn_router_moe();
        test_moe_prefill();
        test_sample_copy();
    }
    ex_gpu_close(g_gpu);
    return tu_finish("test_cuda_ops");
}
#endif
