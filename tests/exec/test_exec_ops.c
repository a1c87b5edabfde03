/*
 * test_exec_ops — every CPU op of ex/ops.h against a naive double-precision reference written here,
 * on fresh random inputs (seed printed; replay with ATS_TEST_SEED).
 *
 * Matmul error measure: max_r |y[r] - y_ref[r]| / max_r Σ_j |W_rj x_j| (one bound per type whatever
 * the shape). Bounds: F32/F16/BF16 1e-5 (float sums); 8-bit activations per 32 (Q4_0, Q8_0, MXFP4):
 * |Δx_j| <= amax/254 → 1e-2 on uniform x; per 256 (Q4_K, Q6_K) 1.5e-2. The SIMD paths (AVX2,
 * AVX-512 VNNI, forced with ATS_CPU_FEATURES) compute the same integer sums as the scalar path, so
 * they must agree with it to float rounding (1e-5). A prefill chunk of N rows must equal N decode
 * calls bit for bit (rows are independent), and so must a MoE over Q4_0/Q8_0 experts (ragged expert
 * batches, test_moe_prefill_decode). With AMX (features 15) Q4_K/Q6_K prefill from EX_CPU_AMX_MIN_TOKENS
 * tokens runs on tiles and equals the scalar path bit for bit instead. ex_cpu_matmul_multi equals one
 * ex_cpu_matmul call per matrix bit for bit. Q4_K/Q6_K/Q4_0/Q8_0 prefill (test_matmul_prefill_kq): token counts
 * around the 8-, 4- and 1-token kernels and the 32-token tile, uniform and extreme inputs. The F16 KV cache (ex_cpu_kv_store_f16 /
 * ex_cpu_attention_f16): the store is checked value by value (nearest even, within half an F16 ulp),
 * attention against a double reference over the same F16 values and, more loosely, over the
 * unrounded F32 K/V.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ex/ops.h"
#include "ex/quant.h"
#include "testutil.h"

static uint64_t rng;

static void fill(float *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)tu_uniform(&rng, lo, hi);
}

static ex_tensor make_weight(ats_qtype t, int64_t n_in, int64_t n_out, int64_t n_mat, float **dense_out)
{
    ex_tensor w = {t, {n_in, n_out, n_mat}, 0, NULL};
    ats_qtype_bytes(t, n_in, &w.row_bytes);
    uint8_t *buf = malloc((size_t)(w.row_bytes * (uint64_t)(n_out * n_mat)));
    float *row = malloc((size_t)n_in * sizeof *row);
    float *dense = malloc((size_t)(n_in * n_out * n_mat) * sizeof *dense);
    for (int64_t r = 0; r < n_out * n_mat; r++) {
        fill(row, n_in, -1, 1);
        ex_quantize_row(t, row, buf + (size_t)(r * (int64_t)w.row_bytes), n_in);
        ex_dequantize_row(t, buf + (size_t)(r * (int64_t)w.row_bytes), dense + r * n_in, n_in);
    }
    free(row);
    w.data = buf;
    *dense_out = dense;
    return w;
}

/* y_ref and the scale Σ|W x| of each row */
static void naive_matmul(const float *W, const float *x, int64_t n_in, int64_t n_out, int64_t n_tok,
                         double *yref, double *scale)
{
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < n_out; r++) {
            double s = 0, a = 0;
            for (int64_t j = 0; j < n_in; j++) {
                s += (double)W[r * n_in + j] * x[t * n_in + j];
                a += fabs((double)W[r * n_in + j] * x[t * n_in + j]);
            }
            yref[t * n_out + r] = s;
            scale[t * n_out + r] = a;
        }
}

static double rel_err(const float *y, const double *yref, const double *scale, int64_t n)
{
    double e = 0, sc = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(y[i] - yref[i]);
        if (!(d == d)) return INFINITY;
        e = fmax(e, d);
        sc = fmax(sc, scale[i]);
    }
    return e / sc;
}

static void test_matmul(void)
{
    struct { ats_qtype t; double bound; } types[] = {
        {ATS_Q_F32, 1e-5}, {ATS_Q_F16, 1e-5}, {ATS_Q_BF16, 1e-5}, {ATS_Q_Q8_0, 1e-2}, {ATS_Q_Q4_0, 1e-2},
        {ATS_Q_MXFP4, 1e-2}, {ATS_Q_Q4_K, 1.5e-2}, {ATS_Q_Q6_K, 1.5e-2},
    };
    const char *paths[] = {"0", "1", "3", "7"};
    unsigned have = ex_cpu_features();
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        ats_qtype t = types[k].t;
        int64_t n_in = 256 * (1 + (int64_t)(tu_rand(&rng) % 4)), n_out = 1 + (int64_t)(tu_rand(&rng) % 70), n_tok = 5;
        float *dense;
        ex_tensor w = make_weight(t, n_in, n_out, 1, &dense);
        float *x = malloc((size_t)(n_in * n_tok) * sizeof *x);
        fill(x, n_in * n_tok, -2, 2);
        double *yref = malloc((size_t)(n_out * n_tok) * sizeof *yref), *sc = malloc((size_t)(n_out * n_tok) * sizeof *sc);
        naive_matmul(dense, x, n_in, n_out, n_tok, yref, sc);
        float *y = malloc((size_t)(n_out * n_tok) * sizeof *y), *y0 = malloc((size_t)(n_out * n_tok) * sizeof *y0);
        float *y1 = malloc((size_t)n_out * sizeof *y1);
        /* oracle */
        CHECK(ex_cpu_matmul_ref(&w, x, n_tok, y) == ATS_OK);
        CHECK_MSG(rel_err(y, yref, sc, n_out * n_tok) <= 1e-6, "%s matmul_ref err %.3g", ats_qtype_name(t),
                  rel_err(y, yref, sc, n_out * n_tok));
        for (size_t p = 0; p < 4; p++) {
            unsigned mask = (unsigned)strtoul(paths[p], NULL, 0);
            if ((mask & have) != mask) continue; /* path not available on this CPU */
            setenv("ATS_CPU_FEATURES", paths[p], 1);
            CHECK(ex_cpu_matmul(&w, x, n_tok, y) == ATS_OK);
            double e = rel_err(y, yref, sc, n_out * n_tok);
            CHECK_MSG(e <= types[k].bound, "%s matmul (features %s, %lldx%lld): err %.3g > %.3g", ats_qtype_name(t),
                      paths[p], (long long)n_out, (long long)n_in, e, types[k].bound);
            if (p == 0) memcpy(y0, y, (size_t)(n_out * n_tok) * sizeof *y);
            else {
                double d = 0, s = 0;
                for (int64_t i = 0; i < n_out * n_tok; i++) {
                    d = fmax(d, fabs(y[i] - y0[i]));
                    s = fmax(s, sc[i]);
                }
                CHECK_MSG(d / s <= 1e-5, "%s: SIMD path %s differs from scalar by %.3g", ats_qtype_name(t), paths[p], d / s);
            }
            /* prefill rows == decode calls, bit for bit */
            for (int64_t tk = 0; tk < n_tok; tk++) {
                CHECK(ex_cpu_matmul(&w, x + tk * n_in, 1, y1) == ATS_OK);
                CHECK(memcmp(y1, y + tk * n_out, (size_t)n_out * sizeof *y1) == 0);
            }
        }
        /* a NaN or Inf in a token's activations makes every output of that token non-finite, on every
         * path and for prefill and decode alike (the activation quantizers skipped a NaN: the row came
         * out finite and NaN weights or activations ran silently); the other tokens stay finite */
        const int64_t nan_at = 2 * n_in + (int64_t)(tu_rand(&rng) % (uint64_t)n_in);
        const int64_t inf_at = 4 * n_in + (int64_t)(tu_rand(&rng) % (uint64_t)n_in);
        x[nan_at] = NAN;
        x[inf_at] = -INFINITY;
        for (size_t p = 0; p < 4; p++) {
            unsigned mask = (unsigned)strtoul(paths[p], NULL, 0);
            if ((mask & have) != mask) continue;
            setenv("ATS_CPU_FEATURES", paths[p], 1);
            CHECK(ex_cpu_matmul(&w, x, n_tok, y) == ATS_OK);
            int64_t wrong = 0;
            for (int64_t tk = 0; tk < n_tok; tk++)
                for (int64_t i = 0; i < n_out; i++) {
                    const float v = y[tk * n_out + i];
                    wrong += tk == 2 ? !isnan(v) : tk == 4 ? isfinite(v) : !isfinite(v);
                }
            CHECK(ex_cpu_matmul(&w, x + 2 * n_in, 1, y1) == ATS_OK);
            for (int64_t i = 0; i < n_out; i++) wrong += !isnan(y1[i]);
            CHECK_MSG(wrong == 0, "%s (features %s): %lld outputs wrong with a NaN in token 2 and -Inf in token 4",
                      ats_qtype_name(t), paths[p], (long long)wrong);
        }
        unsetenv("ATS_CPU_FEATURES");
        /* shape error */
        ex_tensor bad = w;
        bad.row_bytes += 1;
        CHECK(ex_cpu_matmul(&bad, x, 1, y) == ATS_EINVAL);
        free((void *)w.data); free(dense); free(x); free(yref); free(sc); free(y); free(y0); free(y1);
    }
}

/* Q4_K / Q6_K / Q4_0 / Q8_0 prefill: the matmul driver runs 8-token (AVX-512 VNNI), 4-token and 1-token kernels
 * over tiles of 32 tokens, so token counts that are not multiples of 4 or 8, and chunks that cross a
 * tile, exercise every kernel. Each path present on this CPU (0 scalar, 1 AVX2, 3 AVX2 with AVX-512
 * F/BW, 7 with VNNI) against ex_cpu_matmul_ref and the scalar path, and each prefill row against its
 * decode call bit for bit. Inputs: uniform, and extreme (every activation ±amax, every weight ±1) so
 * the 8-bit values sit at ±127 and the weight codes at their ends (a saturating int16 sum would show). */
static void prefill_case(ats_qtype t, int64_t n_tok, int extreme)
{
    const char *paths[] = {"0", "1", "3", "7", "15"};
    const unsigned have = ex_cpu_features();
    /* Q4_0 / Q8_0: any count of 32-blocks (their VNNI 4-/8-token kernels read tokens regrouped by 8, and
       must equal the 1-token decode kernel bit for bit) */
    const int kq = t == ATS_Q_Q4_K || t == ATS_Q_Q6_K;
    const int64_t n_in = kq ? 256 * (1 + (int64_t)(tu_rand(&rng) % 8)) : 32 * (1 + (int64_t)(tu_rand(&rng) % 64));
    const int64_t n_out = 1 + (int64_t)(tu_rand(&rng) % 40);
    float *dense;
    ex_tensor w;
    if (!extreme) w = make_weight(t, n_in, n_out, 1, &dense);
    else {
        w = (ex_tensor){t, {n_in, n_out, 1}, 0, NULL};
        ats_qtype_bytes(t, n_in, &w.row_bytes);
        uint8_t *buf = malloc((size_t)(w.row_bytes * (uint64_t)n_out));
        float *row = malloc((size_t)n_in * sizeof *row);
        dense = malloc((size_t)(n_in * n_out) * sizeof *dense);
        for (int64_t r = 0; r < n_out; r++) {
            for (int64_t j = 0; j < n_in; j++) row[j] = tu_rand(&rng) & 1 ? 1.0f : -1.0f;
            ex_quantize_row(t, row, buf + (size_t)(r * (int64_t)w.row_bytes), n_in);
            ex_dequantize_row(t, buf + (size_t)(r * (int64_t)w.row_bytes), dense + r * n_in, n_in);
        }
        free(row);
        w.data = buf;
    }
    float *x = malloc((size_t)(n_in * n_tok) * sizeof *x);
    if (!extreme) fill(x, n_in * n_tok, -2, 2);
    else
        for (int64_t j = 0; j < n_in * n_tok; j++) x[j] = tu_rand(&rng) & 1 ? 2.0f : -2.0f;
    const int64_t n = n_out * n_tok;
    double *yref = malloc((size_t)n * sizeof *yref), *sc = malloc((size_t)n * sizeof *sc);
    naive_matmul(dense, x, n_in, n_out, n_tok, yref, sc);
    float *yo = malloc((size_t)n * sizeof *yo), *y = malloc((size_t)n * sizeof *y), *y0 = malloc((size_t)n * sizeof *y0);
    float *y1 = malloc((size_t)n_out * sizeof *y1);
    CHECK(ex_cpu_matmul_ref(&w, x, n_tok, yo) == ATS_OK);
    double so = 0;
    for (int64_t i = 0; i < n; i++) so = fmax(so, sc[i]);
    int ran = 0;
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        unsigned mask = (unsigned)strtoul(paths[p], NULL, 0);
        if ((mask & have) != mask) continue;
        setenv("ATS_CPU_FEATURES", paths[p], 1);
        CHECK(ex_cpu_matmul(&w, x, n_tok, y) == ATS_OK);
        double e = 0, d = 0;
        for (int64_t i = 0; i < n; i++) {
            double di = fabs((double)y[i] - yo[i]);
            e = di == di ? fmax(e, di) : INFINITY;
            if (p > 0) d = fmax(d, fabs((double)y[i] - y0[i]));
        }
        CHECK_MSG(e / so <= 1.5e-2, "%s prefill (features %s, %lldx%lld, %lld tok%s): err vs matmul_ref %.3g",
                  ats_qtype_name(t), paths[p], (long long)n_out, (long long)n_in, (long long)n_tok,
                  extreme ? ", extreme" : "", e / so);
        if (p == 0) memcpy(y0, y, (size_t)n * sizeof *y);
        else
            CHECK_MSG(d / so <= 1e-5, "%s prefill (features %s, %lld tok%s): differs from scalar by %.3g",
                      ats_qtype_name(t), paths[p], (long long)n_tok, extreme ? ", extreme" : "", d / so);
        /* the AMX path (Q4_K / Q6_K from EX_CPU_AMX_MIN_TOKENS tokens) is bit for bit the scalar path instead */
        const int amx = (mask & EX_CPU_AMX) && kq && n_tok >= EX_CPU_AMX_MIN_TOKENS;
        if (amx)
            CHECK_MSG(memcmp(y, y0, (size_t)n * sizeof *y) == 0, "%s features %s, %lld tok%s: AMX differs from scalar",
                      ats_qtype_name(t), paths[p], (long long)n_tok, extreme ? ", extreme" : "");
        for (int64_t tk = 0; tk < n_tok && !amx; tk++) {
            CHECK(ex_cpu_matmul(&w, x + tk * n_in, 1, y1) == ATS_OK);
            CHECK_MSG(memcmp(y1, y + tk * n_out, (size_t)n_out * sizeof *y1) == 0,
                      "%s features %s: prefill token %lld of %lld differs from its decode call", ats_qtype_name(t),
                      paths[p], (long long)tk, (long long)n_tok);
        }
        ran++;
    }
    unsetenv("ATS_CPU_FEATURES");
    CHECK(ran >= 1);
    fprintf(stderr, "  prefill %s %3lldx%-4lld %2lld tok%s: %d paths\n", ats_qtype_name(t), (long long)n_out,
            (long long)n_in, (long long)n_tok, extreme ? " (extreme)" : "", ran);
    free((void *)w.data); free(dense); free(x); free(yref); free(sc); free(yo); free(y); free(y0); free(y1);
}

static void test_matmul_prefill_kq(void)
{
    const ats_qtype kt[] = {ATS_Q_Q4_K, ATS_Q_Q6_K, ATS_Q_Q4_0, ATS_Q_Q8_0};
    const int64_t toks[] = {1, 3, 4, 7, 8, 9, 13, 31, 33, 45};
    for (size_t k = 0; k < sizeof kt / sizeof kt[0]; k++)
        for (size_t nt = 0; nt < sizeof toks / sizeof toks[0]; nt++)
            for (int extreme = 0; extreme < 2; extreme++) prefill_case(kt[k], toks[nt], extreme);
}

/* ex_cpu_matmul_multi: matrices of mixed types and shapes (some sharing an input, as a MoE's gate and up)
 * equal one ex_cpu_matmul call each bit for bit, on every path present; bad arguments are refused. */
static void test_matmul_multi(void)
{
    const ats_qtype types[] = {ATS_Q_Q4_K, ATS_Q_Q6_K, ATS_Q_Q4_0, ATS_Q_Q8_0, ATS_Q_MXFP4, ATS_Q_F16};
    const char *paths[] = {"0", "1", "3", "7", "15"};
    const unsigned have = ex_cpu_features();
    enum { N = 7 };
    ex_tensor w[N];
    float *dense[N], *x[N], *y[N], *y1[N];
    const float *xs[N];
    for (int i = 0; i < N; i++) {
        const ats_qtype t = types[tu_rand(&rng) % (sizeof types / sizeof types[0])];
        const int64_t n_in = 256 * (1 + (int64_t)(tu_rand(&rng) % 3)), n_out = 1 + (int64_t)(tu_rand(&rng) % 70);
        w[i] = make_weight(t, n_in, n_out, 1, &dense[i]);
        x[i] = malloc((size_t)n_in * sizeof(float));
        fill(x[i], n_in, -2, 2);
        /* every other matrix of the same width reads the previous one's input */
        xs[i] = i > 0 && i % 2 == 1 && w[i - 1].ne[0] == n_in ? xs[i - 1] : x[i];
        y[i] = malloc((size_t)n_out * sizeof(float));
        y1[i] = malloc((size_t)n_out * sizeof(float));
    }
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        unsigned mask = (unsigned)strtoul(paths[p], NULL, 0);
        if ((mask & have) != mask) continue;
        setenv("ATS_CPU_FEATURES", paths[p], 1);
        CHECK(ex_cpu_matmul_multi(w, xs, y, N) == ATS_OK);
        for (int i = 0; i < N; i++) {
            CHECK(ex_cpu_matmul(&w[i], xs[i], 1, y1[i]) == ATS_OK);
            CHECK_MSG(memcmp(y[i], y1[i], (size_t)w[i].ne[1] * sizeof(float)) == 0,
                      "matmul_multi features %s, matrix %d (%s %lldx%lld) differs from ex_cpu_matmul", paths[p], i,
                      ats_qtype_name(w[i].type), (long long)w[i].ne[1], (long long)w[i].ne[0]);
        }
    }
    unsetenv("ATS_CPU_FEATURES");
    CHECK(ex_cpu_matmul_multi(w, xs, y, 0) == ATS_EINVAL);
    ex_tensor bad = w[0];
    bad.row_bytes += 1;
    CHECK(ex_cpu_matmul_multi(&bad, xs, y, 1) == ATS_EINVAL);
    fprintf(stderr, "  matmul_multi: %d matrices equal one call each\n", N);
    for (int i = 0; i < N; i++) {
        free((void *)w[i].data); free(dense[i]); free(x[i]); free(y[i]); free(y1[i]);
    }
}

static void test_embedding_norm(void)
{
    float *dense;
    ex_tensor te = make_weight(ATS_Q_Q8_0, 64, 50, 1, &dense);
    int32_t tok[3] = {0, 49, 17};
    float x[3 * 64];
    CHECK(ex_cpu_embedding(&te, tok, 3, x) == ATS_OK);
    CHECK(memcmp(x + 64, dense + 49 * 64, 64 * sizeof(float)) == 0);
    CHECK(memcmp(x + 128, dense + 17 * 64, 64 * sizeof(float)) == 0);
    int32_t badtok = 50;
    CHECK(ex_cpu_embedding(&te, &badtok, 1, x) == ATS_EINVAL);
    free((void *)te.data);
    free(dense);
    /* RMSNorm */
    int64_t n = 1 + (int64_t)(tu_rand(&rng) % 300);
    float *xi = malloc(3 * (size_t)n * sizeof *xi), *w = malloc((size_t)n * sizeof *w), *y = malloc(3 * (size_t)n * sizeof *y);
    fill(xi, 3 * n, -3, 3);
    fill(w, n, 0.5, 1.5);
    CHECK(ex_cpu_rmsnorm(xi, w, 3, n, 1e-5f, y) == ATS_OK);
    for (int r = 0; r < 3; r++) {
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)xi[r * n + i] * xi[r * n + i];
        double inv = 1.0 / sqrt(ss / (double)n + 1e-5);
        for (int64_t i = 0; i < n; i++) CHECK_REL(y[r * n + i], w[i] * xi[r * n + i] * inv, 1e-5, 1e-6);
    }
    /* q/k norm = rmsnorm per head, in place */
    float q[2 * 4 * 8], q2[2 * 4 * 8], wq[8];
    fill(q, 64, -1, 1);
    fill(wq, 8, 0.5, 1.5);
    memcpy(q2, q, sizeof q);
    CHECK(ex_cpu_qk_norm(q, wq, 2, 4, 8, 1e-6f) == ATS_OK);
    for (int h = 0; h < 8; h++) {
        double ss = 0;
        for (int i = 0; i < 8; i++) ss += (double)q2[h * 8 + i] * q2[h * 8 + i];
        for (int i = 0; i < 8; i++) CHECK_REL(q[h * 8 + i], wq[i] * q2[h * 8 + i] / sqrt(ss / 8 + 1e-6), 1e-5, 1e-6);
    }
    free(xi); free(w); free(y);
}

static void test_rope(void)
{
    const int64_t n_tok = 3, H = 2, hd = 16;
    for (int type = 0; type < 2; type++)
        for (int64_t n_rot = 8; n_rot <= hd; n_rot += 8) {
            float x[3 * 2 * 16], x0[3 * 2 * 16];
            fill(x, n_tok * H * hd, -1, 1);
            memcpy(x0, x, sizeof x);
            int64_t pos0 = (int64_t)(tu_rand(&rng) % 1000);
            double theta = 10000.0;
            CHECK(ex_cpu_rope(x, n_tok, H, hd, n_rot, pos0, (float)theta, (ats_rope_type)type) == ATS_OK);
            for (int64_t t = 0; t < n_tok; t++)
                for (int64_t h = 0; h < H; h++) {
                    const float *a = x0 + (t * H + h) * hd;
                    const float *b = x + (t * H + h) * hd;
                    for (int64_t i = 0; i < n_rot / 2; i++) {
                        double ang = (double)(pos0 + t) * pow(theta, -2.0 * (double)i / (double)n_rot);
                        int64_t p0 = type == ATS_ROPE_NORM ? 2 * i : i, p1 = type == ATS_ROPE_NORM ? 2 * i + 1 : i + n_rot / 2;
                        CHECK_NEAR(b[p0], a[p0] * cos(ang) - a[p1] * sin(ang), 2e-3);
                        CHECK_NEAR(b[p1], a[p0] * sin(ang) + a[p1] * cos(ang), 2e-3);
                    }
                    for (int64_t i = n_rot; i < hd; i++) CHECK(b[i] == a[i]); /* not rotated */
                }
        }
    /* frequency factors (Llama-3.1 rope_freqs): pair i's angle divided by ff[i] */
    for (int type = 0; type < 2; type++) {
        float x[2 * 16], x0[2 * 16], ff[8];
        fill(x, 32, -1, 1);
        fill(ff, 8, 1, 8);
        memcpy(x0, x, sizeof x);
        int64_t pos0 = (int64_t)(tu_rand(&rng) % 5000);
        CHECK(ex_cpu_rope_ff(x, 1, 2, 16, 16, pos0, 5e5f, (ats_rope_type)type, ff) == ATS_OK);
        for (int64_t h = 0; h < 2; h++)
            for (int64_t i = 0; i < 8; i++) {
                double ang = (double)pos0 * pow(5e5, -2.0 * (double)i / 16.0) / ff[i];
                int64_t p0 = type == ATS_ROPE_NORM ? 2 * i : i, p1 = type == ATS_ROPE_NORM ? 2 * i + 1 : i + 8;
                const float *a = x0 + h * 16, *b = x + h * 16;
                CHECK_NEAR(b[p0], a[p0] * cos(ang) - a[p1] * sin(ang), 3e-3);
                CHECK_NEAR(b[p1], a[p0] * sin(ang) + a[p1] * cos(ang), 3e-3);
            }
    }
    float x[16];
    CHECK(ex_cpu_rope(x, 1, 1, 16, 7, 0, 1e4f, ATS_ROPE_NORM) == ATS_EINVAL);
}

/* hd 16 over up to 40 positions (one block of ex_cpu_attention's 64), hd 64 over 262-290 (five
 * blocks; a decode step then takes the (token, KV head, block) layout with 2+ threads, a chunk the
 * (token, KV head) one) */
static void test_attention_case(int64_t hd, int64_t n_ctx)
{
    const int64_t H = 8, Hkv = 2, kvd = Hkv * hd;
    int64_t pos0 = n_ctx - 39 + (int64_t)(tu_rand(&rng) % 20), n_tok = 1 + (int64_t)(tu_rand(&rng) % 10);
    float *kc = calloc((size_t)(n_ctx * kvd), sizeof *kc), *vc = calloc((size_t)(n_ctx * kvd), sizeof *vc);
    float *k = malloc((size_t)((pos0 + n_tok) * kvd) * sizeof *k), *v = malloc((size_t)((pos0 + n_tok) * kvd) * sizeof *v);
    fill(k, (pos0 + n_tok) * kvd, -1, 1);
    fill(v, (pos0 + n_tok) * kvd, -1, 1);
    CHECK(ex_cpu_kv_store(k, v, pos0 + n_tok, 0, kvd, n_ctx, kc, vc) == ATS_OK);
    CHECK(ex_cpu_kv_store(k, v, 2, n_ctx - 1, kvd, n_ctx, kc, vc) == ATS_EINVAL);
    float *q = malloc((size_t)(n_tok * H * hd) * sizeof *q), *o = malloc((size_t)(n_tok * H * hd) * sizeof *o);
    fill(q, n_tok * H * hd, -2, 2);
    float scale = 1.0f / sqrtf((float)hd);
    CHECK(ex_cpu_attention(q, n_tok, pos0, kc, vc, H, Hkv, hd, scale, o) == ATS_OK);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / (H / Hkv), len = pos0 + t + 1;
            double *p = malloc((size_t)len * sizeof *p), mx = -INFINITY, sum = 0;
            for (int64_t s = 0; s < len; s++) {
                double d = 0;
                for (int64_t i = 0; i < hd; i++) d += (double)q[(t * H + h) * hd + i] * k[s * kvd + kh * hd + i];
                p[s] = d * scale;
                mx = fmax(mx, p[s]);
            }
            for (int64_t s = 0; s < len; s++) sum += (p[s] = exp(p[s] - mx));
            for (int64_t i = 0; i < hd; i++) {
                double r = 0;
                for (int64_t s = 0; s < len; s++) r += p[s] / sum * v[s * kvd + kh * hd + i];
                CHECK_NEAR(o[(t * H + h) * hd + i], r, 1e-5);
            }
            free(p);
        }
    /* decode step by step gives the prefill chunk's bits */
    float o1[8 * 64];
    for (int64_t t = 0; t < n_tok; t++) {
        CHECK(ex_cpu_attention(q + t * H * hd, 1, pos0 + t, kc, vc, H, Hkv, hd, scale, o1) == ATS_OK);
        CHECK_MSG(memcmp(o1, o + t * H * hd, (size_t)(H * hd) * sizeof *o1) == 0,
                  "attention hd %lld, %lld positions: decode of token %lld differs from the prefill chunk",
                  (long long)hd, (long long)(pos0 + t + 1), (long long)t);
    }
    CHECK(ex_cpu_attention(q, 1, 0, kc, vc, 6, 4, hd, scale, o) == ATS_EINVAL);
    free(kc); free(vc); free(k); free(v); free(q); free(o);
}

static void test_attention(void)
{
    const int thr = omp_get_max_threads();
    test_attention_case(16, 40);
    omp_set_num_threads(4); /* a decode step's (token, KV head, block) layout needs items < 2 x threads */
    test_attention_case(64, 300);
    test_attention_case(64, 300);
    omp_set_num_threads(thr);
}

/* The F16 KV store: every stored value is the nearest F16 (ties to even), checked by distance (at
 * most half an F16 ulp of |x|: 2^-11 |x| for normal results, 2^-25 below 2^-14) and against the
 * bits of ex_f32_to_fp16; specials (max, overflow to inf, subnormals, ties, signed zero, NaN) at
 * the head of K; kv_dim 44 so the SIMD path has a scalar tail; every available path. */
static void test_kv_store_f16(void)
{
    const int64_t kvd = 44, n_ctx = 9, n_tok = 3, pos0 = 1 + (int64_t)(tu_rand(&rng) % 6);
    const float special[] = {65504.0f, -65504.0f, 65519.99f, 65520.0f, -1e6f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
                             -(1.0f + 0x1p-11f), 0x1p-14f, 0x1.8p-20f, 0x1p-25f, 0x1.01p-25f, 1e-30f, -0.0f, 0.0f,
                             INFINITY, -INFINITY, NAN};
    const size_t n_sp = sizeof special / sizeof special[0];
    float *k = malloc((size_t)(n_tok * kvd) * sizeof *k), *v = malloc((size_t)(n_tok * kvd) * sizeof *v);
    ex_fp16 *kc = malloc((size_t)(n_ctx * kvd) * sizeof *kc), *vc = malloc((size_t)(n_ctx * kvd) * sizeof *vc);
    const char *paths[] = {"0", "1", "3"};
    unsigned have = ex_cpu_features();
    int checked = 0;
    for (size_t p = 0; p < 3; p++) {
        unsigned mask = (unsigned)strtoul(paths[p], NULL, 0);
        if ((mask & have) != mask) continue;
        setenv("ATS_CPU_FEATURES", paths[p], 1);
        fill(k, n_tok * kvd, -3, 3);
        fill(v, n_tok * kvd, -1e-3, 1e-3);
        memcpy(k, special, n_sp * sizeof *k);
        for (int64_t i = 0; i < n_ctx * kvd; i++) kc[i] = vc[i] = 0x5555; /* rows outside the store keep it */
        CHECK(ex_cpu_kv_store_f16(k, v, n_tok, pos0, kvd, n_ctx, kc, vc) == ATS_OK);
        for (int64_t i = 0; i < n_ctx * kvd; i++) {
            int64_t r = i / kvd;
            if (r < pos0 || r >= pos0 + n_tok) {
                CHECK_MSG(kc[i] == 0x5555 && vc[i] == 0x5555, "path %s: kv_store wrote row %lld outside [%lld, %lld)",
                          paths[p], (long long)r, (long long)pos0, (long long)(pos0 + n_tok));
                continue;
            }
            for (int c = 0; c < 2; c++) {
                float x = (c ? v : k)[i - pos0 * kvd];
                ex_fp16 h = (c ? vc : kc)[i];
                float y = ex_fp16_to_f32(h);
                if (isnan(x)) {
                    CHECK_MSG(isnan(y), "path %s: NaN stored as 0x%04x", paths[p], h);
                    continue;
                }
                CHECK_MSG(h == ex_f32_to_fp16(x), "path %s: %a stored as 0x%04x, round to nearest even gives 0x%04x",
                          paths[p], (double)x, h, ex_f32_to_fp16(x));
                double ax = fabs((double)x);
                if (ax >= 65520.0) {
                    CHECK_MSG(isinf(y) && signbit(y) == signbit(x), "path %s: %a stored as %a (want inf)", paths[p],
                              (double)x, (double)y);
                } else {
                    double bound = ax >= 0x1p-14 ? ax * 0x1p-11 : 0x1p-25;
                    CHECK_MSG(fabs((double)y - x) <= bound && signbit(y) == signbit(x),
                              "path %s: %a stored as %a: error %.3g > half an F16 ulp %.3g", paths[p], (double)x,
                              (double)y, fabs((double)y - x), bound);
                }
                checked++;
            }
        }
    }
    unsetenv("ATS_CPU_FEATURES");
    /* the ties went to even: 1 + 2^-11 -> 1, 1 + 3 * 2^-11 -> 1 + 2^-9 */
    CHECK(ex_f32_to_fp16(1.0f + 0x1p-11f) == 0x3C00 && ex_f32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02);
    CHECK(ex_cpu_kv_store_f16(k, v, 2, n_ctx - 1, kvd, n_ctx, kc, vc) == ATS_EINVAL);
    CHECK(ex_cpu_kv_store_f16(k, v, 1, -1, kvd, n_ctx, kc, vc) == ATS_EINVAL);
    fprintf(stderr, "  kv_store: %d F16 values nearest-even and within half an ulp (paths with features <= %u)\n",
            checked, have);
    free(k); free(v); free(kc); free(vc);
}

/* Attention over the F16 cache against a double reference over the same F16 values (1e-5), and
 * within 5e-3 of the reference over the unrounded F32 K/V (what F16 storage costs); every SIMD path
 * (scalar, AVX2, AVX-512 when the CPU has them) for head dims that take each path's vector loop and
 * its fallback; a prefill chunk equals decode calls. */
static void test_attention_f16(void)
{
    const int64_t hds[] = {16, 8, 12, 64, 128, 40};
    const char *paths[] = {"0", "1", "3"};
    unsigned have = ex_cpu_features();
    for (size_t c = 0; c < sizeof hds / sizeof hds[0]; c++) {
        const int64_t H = 8, Hkv = 2, hd = hds[c], kvd = Hkv * hd, n_ctx = hd >= 64 ? 300 : 40; /* several blocks */
        int64_t pos0 = n_ctx - 39 + (int64_t)(tu_rand(&rng) % 20), n_tok = 1 + (int64_t)(tu_rand(&rng) % 10);
        ex_fp16 *kc = calloc((size_t)(n_ctx * kvd), sizeof *kc), *vc = calloc((size_t)(n_ctx * kvd), sizeof *vc);
        float *k = malloc((size_t)((pos0 + n_tok) * kvd) * sizeof *k), *v = malloc((size_t)((pos0 + n_tok) * kvd) * sizeof *v);
        fill(k, (pos0 + n_tok) * kvd, -1, 1);
        fill(v, (pos0 + n_tok) * kvd, -1, 1);
        CHECK(ex_cpu_kv_store_f16(k, v, pos0 + n_tok, 0, kvd, n_ctx, kc, vc) == ATS_OK);
        float *q = malloc((size_t)(n_tok * H * hd) * sizeof *q), *o = malloc((size_t)(n_tok * H * hd) * sizeof *o);
        float *o0 = malloc((size_t)(n_tok * H * hd) * sizeof *o0), *o1 = malloc((size_t)(H * hd) * sizeof *o1);
        double *ref = malloc((size_t)(n_tok * H * hd) * sizeof *ref), *ref32 = malloc((size_t)(n_tok * H * hd) * sizeof *ref32);
        fill(q, n_tok * H * hd, -2, 2);
        float scale = 1.0f / sqrtf((float)hd);
        for (int f16 = 0; f16 < 2; f16++) /* f16: over the stored F16 values; else over the F32 inputs */
            for (int64_t t = 0; t < n_tok; t++)
                for (int64_t h = 0; h < H; h++) {
                    int64_t kh = h / (H / Hkv), len = pos0 + t + 1;
                    double *p = malloc((size_t)len * sizeof *p), mx = -INFINITY, sum = 0;
                    for (int64_t s = 0; s < len; s++) {
                        double d = 0;
                        for (int64_t i = 0; i < hd; i++) {
                            int64_t j = s * kvd + kh * hd + i;
                            d += (double)q[(t * H + h) * hd + i] * (f16 ? ex_fp16_to_f32(kc[j]) : k[j]);
                        }
                        p[s] = d * scale;
                        mx = fmax(mx, p[s]);
                    }
                    for (int64_t s = 0; s < len; s++) sum += (p[s] = exp(p[s] - mx));
                    for (int64_t i = 0; i < hd; i++) {
                        double r = 0;
                        for (int64_t s = 0; s < len; s++) {
                            int64_t j = s * kvd + kh * hd + i;
                            r += p[s] / sum * (f16 ? ex_fp16_to_f32(vc[j]) : v[j]);
                        }
                        (f16 ? ref : ref32)[(t * H + h) * hd + i] = r;
                    }
                    free(p);
                }
        for (size_t pi = 0; pi < 3; pi++) {
            unsigned mask = (unsigned)strtoul(paths[pi], NULL, 0);
            if ((mask & have) != mask) continue;
            setenv("ATS_CPU_FEATURES", paths[pi], 1);
            CHECK(ex_cpu_attention_f16(q, n_tok, pos0, kc, vc, H, Hkv, hd, scale, o) == ATS_OK);
            double e = 0, e32 = 0, d0 = 0;
            for (int64_t i = 0; i < n_tok * H * hd; i++) {
                e = fmax(e, fabs(o[i] - ref[i]));
                e32 = fmax(e32, fabs(o[i] - ref32[i]));
                if (pi > 0) d0 = fmax(d0, fabs(o[i] - o0[i]));
                if (!(o[i] == o[i])) e = INFINITY;
            }
            CHECK_MSG(e <= 1e-5, "attention hd %lld path %s: max error %.3g against the F16-cache reference",
                      (long long)hd, paths[pi], e);
            CHECK_MSG(e32 <= 5e-3, "attention hd %lld path %s: max error %.3g against the F32 reference", (long long)hd,
                      paths[pi], e32);
            CHECK_MSG(d0 <= 1e-5, "attention hd %lld: path %s differs from scalar by %.3g", (long long)hd, paths[pi], d0);
            if (pi == 0) memcpy(o0, o, (size_t)(n_tok * H * hd) * sizeof *o);
            fprintf(stderr, "  attention hd %3lld path %s: err %.2e (F16 cache), %.2e (vs F32 K/V)\n", (long long)hd,
                    paths[pi], e, e32);
            /* decode step by step equals the prefill chunk */
            for (int64_t t = 0; t < n_tok; t++) {
                CHECK(ex_cpu_attention_f16(q + t * H * hd, 1, pos0 + t, kc, vc, H, Hkv, hd, scale, o1) == ATS_OK);
                CHECK_MSG(memcmp(o1, o + t * H * hd, (size_t)(H * hd) * sizeof *o1) == 0,
                          "attention hd %lld path %s: decode of token %lld differs from the prefill chunk",
                          (long long)hd, paths[pi], (long long)t);
            }
        }
        unsetenv("ATS_CPU_FEATURES");
        CHECK(ex_cpu_attention_f16(q, 1, 0, kc, vc, 6, 4, hd, scale, o) == ATS_EINVAL);
        free(kc); free(vc); free(k); free(v); free(q); free(o); free(o0); free(o1); free(ref); free(ref32);
    }
}

static void test_ffn_router_moe(void)
{
    /* swiglu, add */
    float g[100], u[100], out[100], y[100];
    fill(g, 100, -6, 6);
    fill(u, 100, -2, 2);
    CHECK(ex_cpu_swiglu(g, u, 100, out) == ATS_OK);
    for (int i = 0; i < 100; i++) CHECK_REL(out[i], g[i] / (1 + exp(-(double)g[i])) * u[i], 1e-6, 1e-7);
    memcpy(y, g, sizeof y);
    CHECK(ex_cpu_add(y, u, 100) == ATS_OK);
    for (int i = 0; i < 100; i++) CHECK(y[i] == g[i] + u[i]);
    /* router vs brute force */
    const int64_t X = 2 + (int64_t)(tu_rand(&rng) % 30), K = 1 + (int64_t)(tu_rand(&rng) % (uint64_t)(X < 8 ? X : 8)), T = 4;
    float *lg = malloc((size_t)(T * X) * sizeof *lg), *wts = malloc((size_t)(T * K) * sizeof *wts);
    int32_t *ids = malloc((size_t)(T * K) * sizeof *ids);
    fill(lg, T * X, -3, 3);
    for (int norm = 0; norm < 2; norm++) {
        CHECK(ex_cpu_router_topk(lg, T, X, K, norm, ids, wts) == ATS_OK);
        for (int64_t t = 0; t < T; t++) {
            double mx = -INFINITY, sum = 0, ksum = 0;
            for (int64_t e = 0; e < X; e++) mx = fmax(mx, lg[t * X + e]);
            for (int64_t e = 0; e < X; e++) sum += exp(lg[t * X + e] - mx);
            for (int64_t j = 0; j < K; j++) {
                /* exactly j experts have a larger logit */
                int larger = 0;
                for (int64_t e = 0; e < X; e++) larger += lg[t * X + e] > lg[t * X + ids[t * K + j]];
                CHECK(larger == j);
                ksum += exp(lg[t * X + ids[t * K + j]] - mx) / sum;
            }
            for (int64_t j = 0; j < K; j++) {
                double p = exp(lg[t * X + ids[t * K + j]] - mx) / sum;
                CHECK_REL(wts[t * K + j], norm ? p / ksum : p, 1e-5, 1e-7);
            }
        }
    }
    /* MoE vs per-token dense FFNs with the exact oracle */
    const int64_t E = 64, F = 32;
    float *dg, *du, *dd;
    ex_tensor ge = make_weight(ATS_Q_Q8_0, E, F, X, &dg), ue = make_weight(ATS_Q_Q8_0, E, F, X, &du),
              de = make_weight(ATS_Q_Q8_0, F, E, X, &dd);
    float *x = malloc((size_t)(T * E) * sizeof *x), *o = malloc((size_t)(T * E) * sizeof *o);
    fill(x, T * E, -1, 1);
    CHECK(ex_cpu_router_topk(lg, T, X, K, 1, ids, wts) == ATS_OK);
    CHECK(ex_cpu_moe(&ge, &ue, &de, x, T, ids, wts, K, o) == ATS_OK);
    for (int64_t t = 0; t < T; t++) {
        double ref[64] = {0}, sc[64] = {0};
        for (int64_t j = 0; j < K; j++) {
            int64_t e = ids[t * K + j];
            double h[32];
            for (int64_t r = 0; r < F; r++) {
                double a = 0, b = 0;
                for (int64_t i = 0; i < E; i++) {
                    a += (double)dg[(e * F + r) * E + i] * x[t * E + i];
                    b += (double)du[(e * F + r) * E + i] * x[t * E + i];
                }
                h[r] = a / (1 + exp(-a)) * b;
            }
            for (int64_t r = 0; r < E; r++) {
                double s = 0, a = 0;
                for (int64_t i = 0; i < F; i++) {
                    s += (double)dd[(e * E + r) * F + i] * h[i];
                    a += fabs((double)dd[(e * E + r) * F + i] * h[i]);
                }
                ref[r] += wts[t * K + j] * s;
                sc[r] += wts[t * K + j] * a;
            }
        }
        double err = 0, s = 0;
        for (int64_t r = 0; r < E; r++) {
            err = fmax(err, fabs(o[t * E + r] - ref[r]));
            s = fmax(s, sc[r]);
        }
        CHECK_MSG(err / s <= 3e-2, "moe token %lld: err %.3g of scale %.3g", (long long)t, err, s);
    }
    int32_t badid = (int32_t)X;
    CHECK(ex_cpu_moe(&ge, &ue, &de, x, 1, &badid, wts, 1, o) == ATS_EINVAL);
    free((void *)ge.data); free((void *)ue.data); free((void *)de.data); free(dg); free(du); free(dd);
    free(x); free(o); free(lg); free(wts); free(ids);
}

/* MoE with Q4_0 / Q8_0 experts, prefill against decode: ex_cpu_moe over T tokens must equal T calls of
 * one token bit for bit on every CPU path (each expert's ragged batch of 1..T tokens goes through the
 * 8-, 4- and 1-token kernels, the VNNI ones reading tokens regrouped by 8; a token's output sums the
 * experts in the same order either way). Shapes: the residency test's tiny qwen3moe (64 x 32, 8 experts,
 * top 2) and random multiples of 32, few experts so batches reach 8 and more. */
static void test_moe_prefill_decode(void)
{
    const char *paths[] = {"0", "1", "3", "7"};
    const unsigned have = ex_cpu_features();
    const ats_qtype types[] = {ATS_Q_Q4_0, ATS_Q_Q8_0};
    int cases = 0;
    for (int c = 0; c < 4; c++) {
        const ats_qtype t = types[c % 2];
        const int64_t E = c < 2 ? 64 : 32 * (1 + (int64_t)(tu_rand(&rng) % 8));
        const int64_t F = c < 2 ? 32 : 32 * (1 + (int64_t)(tu_rand(&rng) % 6));
        const int64_t X = c < 2 ? 8 : 2 + (int64_t)(tu_rand(&rng) % 3), K = c < 2 ? 2 : 1 + (int64_t)(tu_rand(&rng) % 2);
        const int64_t T = 5 + (int64_t)(tu_rand(&rng) % 36);
        float *dg, *du, *dd;
        ex_tensor ge = make_weight(t, E, F, X, &dg), ue = make_weight(t, E, F, X, &du), de = make_weight(t, F, E, X, &dd);
        float *x = malloc((size_t)(T * E) * sizeof *x), *lg = malloc((size_t)(T * X) * sizeof *lg);
        float *wts = malloc((size_t)(T * K) * sizeof *wts), *o = malloc((size_t)(T * E) * sizeof *o);
        float *o1 = malloc((size_t)(T * E) * sizeof *o1);
        int32_t *ids = malloc((size_t)(T * K) * sizeof *ids);
        fill(x, T * E, -1, 1);
        fill(lg, T * X, -3, 3);
        CHECK(ex_cpu_router_topk(lg, T, X, K, 1, ids, wts) == ATS_OK);
        int64_t most = 0;
        for (int64_t e = 0; e < X; e++) {
            int64_t m = 0;
            for (int64_t i = 0; i < T * K; i++) m += ids[i] == e;
            if (m > most) most = m;
        }
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            unsigned mask = (unsigned)strtoul(paths[p], NULL, 0);
            if ((mask & have) != mask) continue;
            setenv("ATS_CPU_FEATURES", paths[p], 1);
            CHECK(ex_cpu_moe(&ge, &ue, &de, x, T, ids, wts, K, o) == ATS_OK);
            for (int64_t i = 0; i < T; i++)
                CHECK(ex_cpu_moe(&ge, &ue, &de, x + i * E, 1, ids + i * K, wts + i * K, K, o1 + i * E) == ATS_OK);
            int64_t bad = -1;
            for (int64_t i = 0; i < T * E && bad < 0; i++)
                if (memcmp(&o[i], &o1[i], sizeof(float)) != 0) bad = i;
            CHECK_MSG(bad < 0, "moe %s %lld x %lld, %lld experts top %lld, %lld tokens (largest batch %lld), path %s: "
                      "token %lld col %lld prefill %a != decode %a", ats_qtype_name(t), (long long)E, (long long)F,
                      (long long)X, (long long)K, (long long)T, (long long)most, paths[p], (long long)(bad / E),
                      (long long)(bad % E), bad < 0 ? 0.0 : (double)o[bad], bad < 0 ? 0.0 : (double)o1[bad]);
            cases++;
        }
        unsetenv("ATS_CPU_FEATURES");
        free((void *)ge.data); free((void *)ue.data); free((void *)de.data); free(dg); free(du); free(dd);
        free(x); free(lg); free(wts); free(o); free(o1); free(ids);
    }
    fprintf(stderr, "  moe prefill = decode (Q4_0/Q8_0 experts, ragged batches): %d cases\n", cases);
}

static void test_sample(void)
{
    float lg[6] = {0.1f, 2.0f, 1.5f, 2.0f, -1.0f, 0.0f};
    ex_sample_params p = ex_sample_params_default();
    uint64_t r = 7, r0 = 7;
    int32_t tok;
    CHECK(ex_cpu_sample(lg, 6, &p, &r, &tok) == ATS_OK && tok == 1); /* lowest id on ties */
    CHECK(r == r0);                                                  /* greedy never draws */
    p.temp = 1.0f;
    p.top_k = 1;
    for (int i = 0; i < 20; i++) CHECK(ex_cpu_sample(lg, 6, &p, &r, &tok) == ATS_OK && tok == 1);
    /* temperature: frequencies ~ softmax(l / T) */
    p.top_k = 0;
    p.temp = 0.7f;
    int cnt[6] = {0}, N = 40000;
    for (int i = 0; i < N; i++) {
        ex_cpu_sample(lg, 6, &p, &r, &tok);
        cnt[tok]++;
    }
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp(lg[i] / 0.7);
    for (int i = 0; i < 6; i++) {
        double pi = exp(lg[i] / 0.7) / z;
        CHECK_NEAR((double)cnt[i] / N, pi, 5 * sqrt(pi * (1 - pi) / N) + 1e-3);
    }
    /* top-p: keeps the smallest prefix with mass >= p: here {1, 3} (ids tie at 2.0) */
    p.top_p = 0.5f;
    p.temp = 1.0f;
    int seen[6] = {0};
    for (int i = 0; i < 2000; i++) {
        ex_cpu_sample(lg, 6, &p, &r, &tok);
        seen[tok] = 1;
    }
    CHECK(seen[1] && seen[3] && !seen[0] && !seen[2] && !seen[4] && !seen[5]);
    /* seeded: same seed, same tokens */
    p = ex_sample_params_default();
    p.temp = 1.0f;
    uint64_t ra = 99, rb = 99;
    int same = 1;
    for (int i = 0; i < 100; i++) {
        int32_t a, b;
        ex_cpu_sample(lg, 6, &p, &ra, &a);
        ex_cpu_sample(lg, 6, &p, &rb, &b);
        same &= a == b;
    }
    CHECK(same);
}

int main(void)
{
    rng = tu_seed("test_exec_ops");
    fprintf(stderr, "test_exec_ops: CPU features %u (1 AVX2, 2 AVX-512, 4 VNNI)\n", ex_cpu_features());
    test_matmul();
    test_matmul_prefill_kq();
    test_matmul_multi();
    test_embedding_norm();
    test_rope();
    test_attention();
    test_kv_store_f16();
    test_attention_f16();
    test_ffn_router_moe();
    test_moe_prefill_decode();
    test_sample();
    return tu_finish("test_exec_ops");
}
