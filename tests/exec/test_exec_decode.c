/*
 * test_exec_decode — the CPU decode (one-token) GEMV kernels of exec/kernels/cpu/cpu_matmul.c for Q4_0 and
 * MXFP4 (4 weight rows a call on AVX2 / AVX-512 VNNI), Q4_K and Q6_K (4 rows a call on AVX-512 VNNI:
 * each row of a matrix equals the row alone bit for bit on every path, test_kquant_rows) and the SIMD
 * activation quantizer, on fresh random inputs (seed printed; replay with ATS_TEST_SEED).
 *
 * - Every SIMD path present (ATS_CPU_FEATURES 1 AVX2, 3 +AVX-512 F/BW, 7 +VNNI) against the scalar
 *   path (0: dot_q4_0_scalar / dot_mxfp4_scalar over the scalar quantizer): random weight blocks with
 *   raw random nibbles and scales drawn from normal, huge (fp16 65504 / E8M0 2^60), subnormal
 *   (fp16 2^-24) and zero; activations per block at magnitudes 1e-20..1e3; rows of nb = 1, 2, 3, odd
 *   and longer blocks; n_out around the 4-row groups and the 16-row tiles. Bound: |y - y_scalar| <=
 *   1e-5 * Σ_j (|W_j| + 8 |d_b|) |x_j| (float sums in another order; the 8 |d_b| covers Q4_0's -8
 *   correction, summed apart), and against ex_cpu_matmul_ref (double) 1e-2 on the same scale.
 * - Each row of a 4-row call equals the row computed alone (a one-row view: the one-row kernel, the
 *   one the prefill kernels match) bit for bit.
 * - The activation quantizers (AVX2) bit for bit the scalar ones: a Q8_0 identity matrix returns
 *   y[j] = d_block * q_j exactly on every path, with ties at .5, a NaN (dropped from amax, coded 0)
 *   and a zero block among the inputs; a Q4_K identity does the same for the 256-element blocks.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ex/ops.h"
#include "ex/quant.h"
#include "ex/quant_blocks.h"
#include "testutil.h"

static uint64_t rng;
static const char *const PATHS[] = {"0", "1", "3", "7"};

/* one raw weight scale: normal, huge, subnormal or zero (Q4_0: fp16 bits; MXFP4: E8M0 byte) */
static void put_scale(ats_qtype t, uint8_t *blk)
{
    unsigned kind = (unsigned)(tu_rand(&rng) % 8);
    if (t == ATS_Q_Q4_0) {
        ex_fp16 h;
        if (kind == 0) h = 0x7BFF; /* 65504 */
        else if (kind == 1) h = (ex_fp16)(1 + tu_rand(&rng) % 0x3FF); /* subnormal */
        else if (kind == 2) h = 0;
        else h = ex_f32_to_fp16((float)tu_uniform(&rng, -0.1, 0.1));
        memcpy(blk, &h, 2);
    } else {
        uint8_t e;
        if (kind == 0) e = 127 + 60;
        else if (kind == 1) e = (uint8_t)(tu_rand(&rng) % 3); /* 2^-127..2^-125 */
        else e = (uint8_t)(110 + tu_rand(&rng) % 20);
        blk[0] = e;
    }
}

static void test_kernels(ats_qtype t, int64_t nb, int64_t n_out)
{
    const unsigned have = ex_cpu_features();
    const int bb = t == ATS_Q_Q4_0 ? 18 : 17, hb = t == ATS_Q_Q4_0 ? 2 : 1;
    const int64_t n_in = 32 * nb;
    ex_tensor w = {t, {n_in, n_out, 1}, 0, NULL};
    CHECK(ats_qtype_bytes(t, n_in, &w.row_bytes) == ATS_OK && w.row_bytes == (uint64_t)(bb * nb));
    uint8_t *buf = malloc((size_t)w.row_bytes * (size_t)n_out);
    for (int64_t b = 0; b < nb * n_out; b++) {
        uint8_t *blk = buf + b * bb;
        put_scale(t, blk);
        for (int j = hb; j < bb; j++) blk[j] = (uint8_t)tu_rand(&rng);
    }
    w.data = buf;
    float *x = malloc((size_t)n_in * sizeof *x);
    const double mags[] = {1.0, 1e-3, 1e3, 1e-20};
    for (int64_t b = 0; b < nb; b++) {
        double m = mags[tu_rand(&rng) % 4];
        for (int j = 0; j < 32; j++) x[32 * b + j] = (float)tu_uniform(&rng, -m, m);
    }
    /* scale Σ_j (|W_j| + 8 |d_b|) |x_j| of each row, in double over the dequantized row */
    double *sc = calloc((size_t)n_out, sizeof *sc);
    float *row = malloc((size_t)n_in * sizeof *row);
    for (int64_t r = 0; r < n_out; r++) {
        CHECK(ex_dequantize_row(t, buf + r * (int64_t)w.row_bytes, row, n_in) == ATS_OK);
        for (int64_t b = 0; b < nb; b++) {
            double d = 0;
            if (t == ATS_Q_Q4_0) {
                ex_fp16 h;
                memcpy(&h, buf + r * (int64_t)w.row_bytes + b * bb, 2);
                d = fabs(ex_fp16_to_f32(h));
            }
            for (int j = 0; j < 32; j++) sc[r] += (fabs(row[32 * b + j]) + 8 * d) * fabs(x[32 * b + j]);
        }
    }
    float *y0 = malloc((size_t)n_out * sizeof *y0), *y = malloc((size_t)n_out * sizeof *y);
    float *yr = malloc((size_t)n_out * sizeof *yr), *y1 = malloc(sizeof *y1);
    CHECK(ex_cpu_matmul_ref(&w, x, 1, yr) == ATS_OK);
    int ran = 0;
    double worst = 0, worst_ref = 0;
    for (size_t p = 0; p < sizeof PATHS / sizeof PATHS[0]; p++) {
        unsigned mask = (unsigned)strtoul(PATHS[p], NULL, 0);
        if ((mask & have) != mask) continue;
        setenv("ATS_CPU_FEATURES", PATHS[p], 1);
        CHECK(ex_cpu_matmul(&w, x, 1, p == 0 ? y0 : y) == ATS_OK);
        const float *yp = p == 0 ? y0 : y;
        for (int64_t r = 0; r < n_out; r++) {
            double s = sc[r] > 0 ? sc[r] : 1e-300;
            /* Against the reference the error may also exceed 1e-2 * sc by the rounding of each block's
             * scale product d_w * d_x in float: when it is subnormal (E8M0 scales of 2^-127 times small
             * activations) its absolute error is up to FLT_TRUE_MIN / 2, times |sum of q_w q_x| <= 32 * 12 *
             * 127 a block (MXFP4; Q4_0's 8 * 128 is less), in the kernel and in the reference (seen:
             * 5.19e-41 vs 5.33e-41 on a sc of 9.9e-41). Between the paths (same float steps) no such slack. */
            const double slack = 2.0 * (double)nb * 32 * 12 * 128 * ((double)FLT_TRUE_MIN / 2);
            double e = fmax(0.0, fabs((double)yp[r] - yr[r]) - slack) / s;
            if (!(e == e)) e = INFINITY;
            worst_ref = fmax(worst_ref, e);
            CHECK_MSG(e <= 1e-2, "%s path %s nb %lld row %lld of %lld: %.9g vs ref %.9g (rel %.3g)", ats_qtype_name(t),
                      PATHS[p], (long long)nb, (long long)r, (long long)n_out, yp[r], yr[r], e);
            if (p > 0) {
                double d = fabs((double)yp[r] - y0[r]) / s;
                if (!(d == d)) d = INFINITY;
                worst = fmax(worst, d);
                CHECK_MSG(d <= 1e-5, "%s path %s nb %lld row %lld of %lld: %.9g vs scalar %.9g (rel %.3g)",
                          ats_qtype_name(t), PATHS[p], (long long)nb, (long long)r, (long long)n_out, yp[r], y0[r], d);
            }
            /* the row alone: a one-row view, so the one-row kernel */
            ex_tensor v = w;
            v.ne[1] = 1;
            v.data = buf + r * (int64_t)w.row_bytes;
            CHECK(ex_cpu_matmul(&v, x, 1, y1) == ATS_OK);
            CHECK_MSG(memcmp(y1, yp + r, sizeof *y1) == 0, "%s path %s nb %lld row %lld of %lld: %.9g alone, %.9g in the matrix",
                      ats_qtype_name(t), PATHS[p], (long long)nb, (long long)r, (long long)n_out, *y1, yp[r]);
        }
        ran++;
    }
    unsetenv("ATS_CPU_FEATURES");
    CHECK(ran >= 1);
    fprintf(stderr, "  %-5s nb %3lld x %2lld rows: %d paths, vs scalar %.2g, vs ref %.2g\n", ats_qtype_name(t),
            (long long)nb, (long long)n_out, ran, worst, worst_ref);
    free(buf); free(x); free(sc); free(row); free(y0); free(y); free(yr); free(y1);
}

/* the K-quant activation quantizer (256 a block) the same way: a Q4_K identity (d = 1, dmin = 0, every
 * sub-block scale 1 and min 0, one nibble 1 a row) returns y[j] = d_block(j) * q_j on every path; compared
 * with == (a zero's sign may differ between paths), NaN never passes */
static void test_quantizer_k(const float *x, int64_t nbk)
{
    const unsigned have = ex_cpu_features();
    const int64_t n = 256 * nbk;
    ex_tensor w = {ATS_Q_Q4_K, {n, n, 1}, 0, NULL};
    CHECK(ats_qtype_bytes(ATS_Q_Q4_K, n, &w.row_bytes) == ATS_OK);
    uint8_t *buf = calloc((size_t)(w.row_bytes * (uint64_t)n), 1);
    for (int64_t r = 0; r < n; r++) {
        ex_block_q4_K *blk = (ex_block_q4_K *)(buf + r * (int64_t)w.row_bytes);
        for (int64_t b = 0; b < nbk; b++) {
            blk[b].d = 0x3C00;
            blk[b].dmin = 0;
            for (int k = 0; k < 4; k++) blk[b].scales[k] = 1;  /* sc 0..3 = 1, m 0..3 = 0 */
            for (int k = 8; k < 12; k++) blk[b].scales[k] = 1; /* sc 4..7 = 1, m 4..7 = 0 */
        }
        int64_t j = r % 256, c = j / 64, l = j % 64;
        blk[r / 256].qs[32 * c + l % 32] = l < 32 ? 0x01 : 0x10;
    }
    w.data = buf;
    float *y0 = malloc((size_t)n * sizeof *y0), *y = malloc((size_t)n * sizeof *y);
    int ran = 0;
    for (size_t p = 0; p < sizeof PATHS / sizeof PATHS[0]; p++) {
        unsigned mask = (unsigned)strtoul(PATHS[p], NULL, 0);
        if ((mask & have) != mask) continue;
        setenv("ATS_CPU_FEATURES", PATHS[p], 1);
        CHECK(ex_cpu_matmul(&w, x, 1, p == 0 ? y0 : y) == ATS_OK);
        if (p > 0)
            for (int64_t j = 0; j < n; j++)
                CHECK_MSG(y[j] == y0[j], "K quantizer path %s, element %lld (x %g): %.9g vs scalar %.9g", PATHS[p],
                          (long long)j, x[j], y[j], y0[j]);
        ran++;
    }
    unsetenv("ATS_CPU_FEATURES");
    for (int64_t j = 0; j < n; j++) CHECK(y0[j] == y0[j]); /* NaN never passes (x has none here) */
    fprintf(stderr, "  K quantizer nb %lld: %d paths bit for bit\n", (long long)nbk, ran);
    free(buf); free(y0); free(y);
}

/* Q8_0 identity (d = 1, qs one-hot): y[j] = d_block(j) * q_j, exact, so every path shows its quantizer */
static void test_quantizer(int64_t nb)
{
    const unsigned have = ex_cpu_features();
    const int64_t n = 32 * nb;
    ex_tensor w = {ATS_Q_Q8_0, {n, n, 1}, 0, NULL};
    CHECK(ats_qtype_bytes(ATS_Q_Q8_0, n, &w.row_bytes) == ATS_OK);
    uint8_t *buf = calloc((size_t)(w.row_bytes * (uint64_t)n), 1);
    for (int64_t r = 0; r < n; r++) {
        ex_block_q8_0 *blk = (ex_block_q8_0 *)(buf + r * (int64_t)w.row_bytes);
        for (int64_t b = 0; b < nb; b++) blk[b].d = 0x3C00; /* 1.0 */
        blk[r / 32].qs[r % 32] = 1;
    }
    w.data = buf;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t b = 0; b < nb; b++) {
        float *xb = x + 32 * b;
        unsigned kind = (unsigned)(b % 4);
        for (int j = 0; j < 32; j++) {
            if (kind == 0) xb[j] = (float)tu_uniform(&rng, -3, 3);
            else if (kind == 1) xb[j] = j == 5 ? 127.0f : (float)(j - 16) + 0.5f; /* d = 1: ties at .5 */
            else if (kind == 2) xb[j] = j == 7 ? 0.0f : (float)tu_uniform(&rng, -1e-3, 1e-3);
            else xb[j] = 0.0f;
        }
    }
    float *y0 = malloc((size_t)n * sizeof *y0), *y = malloc((size_t)n * sizeof *y);
    int ran = 0;
    for (size_t p = 0; p < sizeof PATHS / sizeof PATHS[0]; p++) {
        unsigned mask = (unsigned)strtoul(PATHS[p], NULL, 0);
        if ((mask & have) != mask) continue;
        setenv("ATS_CPU_FEATURES", PATHS[p], 1);
        CHECK(ex_cpu_matmul(&w, x, 1, p == 0 ? y0 : y) == ATS_OK);
        if (p > 0)
            for (int64_t j = 0; j < n; j++)
                CHECK_MSG(memcmp(y + j, y0 + j, sizeof *y) == 0, "quantizer path %s, element %lld (x %g): %.9g vs scalar %.9g",
                          PATHS[p], (long long)j, x[j], y[j], y0[j]);
        ran++;
    }
    unsetenv("ATS_CPU_FEATURES");
    /* the scalar quantizer's values themselves: ties to even, the zero block 0 */
    for (int64_t b = 1; b < nb; b += 4)
        for (int j = 0; j < 32; j++) {
            float want = j == 5 ? 127.0f : nearbyintf((float)(j - 16) + 0.5f);
            CHECK_MSG(y0[32 * b + j] == want, "quantizer tie block %lld element %d: %g, want %g", (long long)b, j,
                      y0[32 * b + j], want);
        }
    for (int64_t b = 2; b < nb; b += 4) CHECK(y0[32 * b + 7] == 0.0f);
    for (int64_t b = 3; b < nb; b += 4)
        for (int j = 0; j < 32; j++) CHECK(y0[32 * b + j] == 0.0f);
    fprintf(stderr, "  quantizer nb %lld: %d paths bit for bit\n", (long long)nb, ran);
    test_quantizer_k(x, nb / 8);
    /* a NaN in x: its block's d is NaN (NaN x 0 = NaN, as float math), so every output is NaN on every
     * path, for the 32- and the 256-value quantizer alike (the NaN was coded 0 and the outputs stayed
     * finite: NaN activations ran silently) */
    x[(int64_t)(tu_rand(&rng) % (uint64_t)n)] = NAN;
    for (size_t p = 0; p < sizeof PATHS / sizeof PATHS[0]; p++) {
        unsigned mask = (unsigned)strtoul(PATHS[p], NULL, 0);
        if ((mask & have) != mask) continue;
        setenv("ATS_CPU_FEATURES", PATHS[p], 1);
        CHECK(ex_cpu_matmul(&w, x, 1, y) == ATS_OK);
        int64_t fin = 0;
        for (int64_t j = 0; j < n; j++) fin += !isnan(y[j]);
        CHECK_MSG(fin == 0, "quantizer path %s with a NaN in x: %lld of %lld outputs not NaN", PATHS[p], (long long)fin,
                  (long long)n);
    }
    unsetenv("ATS_CPU_FEATURES");
    free(buf); free(y0); free(y);
    if (nb % 8 == 0) {
        const int64_t n_k = 256 * (nb / 8);
        ex_tensor wk = {ATS_Q_Q4_K, {n_k, 1, 1}, 0, NULL};
        CHECK(ats_qtype_bytes(ATS_Q_Q4_K, n_k, &wk.row_bytes) == ATS_OK);
        uint8_t *bk = calloc(wk.row_bytes, 1);
        for (int64_t b = 0; b < nb / 8; b++) ((ex_block_q4_K *)bk)[b].d = 0x3C00; /* zero weights, d 1 */
        wk.data = bk;
        float yk = 0;
        for (size_t p = 0; p < sizeof PATHS / sizeof PATHS[0]; p++) {
            unsigned mask = (unsigned)strtoul(PATHS[p], NULL, 0);
            if ((mask & have) != mask) continue;
            setenv("ATS_CPU_FEATURES", PATHS[p], 1);
            CHECK(ex_cpu_matmul(&wk, x, 1, &yk) == ATS_OK);
            CHECK_MSG(isnan(yk), "K quantizer path %s with a NaN in x, zero weights: %g (want NaN)", PATHS[p], yk);
        }
        unsetenv("ATS_CPU_FEATURES");
        free(bk);
    }
    free(x);
}

/* one fp16 scale of the K-quant rows: normal, huge (65504), subnormal or zero */
static ex_fp16 k_scale(void)
{
    unsigned kind = (unsigned)(tu_rand(&rng) % 8);
    if (kind == 0) return 0x7BFF;
    if (kind == 1) return (ex_fp16)(1 + tu_rand(&rng) % 0x3FF);
    if (kind == 2) return 0;
    return ex_f32_to_fp16((float)tu_uniform(&rng, -0.1, 0.1));
}

/* Q4_K / Q6_K decode (4 weight rows a call on AVX-512 VNNI): random blocks (raw random quants and
 * scale bytes, fp16 d / dmin drawn by k_scale), activations at magnitudes 1e-20..1e3 per block; on every
 * path present each row of the matrix equals the row computed alone (the one-row kernel) bit for bit,
 * finite where the row alone is; n_out around the 4-row groups, the 16-row tiles and the next-rows
 * prefetch's end (8 rows). */
static void test_kquant_rows(ats_qtype t, int64_t nb, int64_t n_out)
{
    const unsigned have = ex_cpu_features();
    const int64_t n_in = 256 * nb;
    ex_tensor w = {t, {n_in, n_out, 1}, 0, NULL};
    CHECK(ats_qtype_bytes(t, n_in, &w.row_bytes) == ATS_OK);
    const size_t bb = t == ATS_Q_Q4_K ? sizeof(ex_block_q4_K) : sizeof(ex_block_q6_K);
    uint8_t *buf = malloc((size_t)w.row_bytes * (size_t)n_out);
    float *x = malloc((size_t)n_in * sizeof *x), *y = malloc((size_t)n_out * sizeof *y), y1;
    for (int64_t b = 0; b < nb * n_out; b++) {
        uint8_t *blk = buf + (size_t)b * bb;
        for (size_t j = 0; j < bb; j++) blk[j] = (uint8_t)tu_rand(&rng);
        if (t == ATS_Q_Q4_K) {
            ex_block_q4_K *q = (ex_block_q4_K *)blk;
            q->d = k_scale();
            q->dmin = k_scale();
        } else {
            ((ex_block_q6_K *)blk)->d = k_scale();
        }
    }
    w.data = buf;
    const double mags[] = {1.0, 1e-3, 1e3, 1e-20};
    for (int64_t b = 0; b < nb; b++) {
        double m = mags[tu_rand(&rng) % 4];
        for (int j = 0; j < 256; j++) x[256 * b + j] = (float)tu_uniform(&rng, -m, m);
    }
    int ran = 0;
    for (size_t p = 0; p < sizeof PATHS / sizeof PATHS[0]; p++) {
        unsigned mask = (unsigned)strtoul(PATHS[p], NULL, 0);
        if ((mask & have) != mask) continue;
        setenv("ATS_CPU_FEATURES", PATHS[p], 1);
        CHECK(ex_cpu_matmul(&w, x, 1, y) == ATS_OK);
        for (int64_t r = 0; r < n_out; r++) {
            ex_tensor v = w;
            v.ne[1] = 1;
            v.data = buf + r * (int64_t)w.row_bytes;
            CHECK(ex_cpu_matmul(&v, x, 1, &y1) == ATS_OK);
            CHECK_MSG(memcmp(&y1, y + r, sizeof y1) == 0, "%s path %s nb %lld row %lld of %lld: %.9g alone, %.9g in the matrix",
                      ats_qtype_name(t), PATHS[p], (long long)nb, (long long)r, (long long)n_out, y1, y[r]);
        }
        ran++;
    }
    unsetenv("ATS_CPU_FEATURES");
    CHECK(ran >= 1);
    fprintf(stderr, "  %-5s nb %3lld x %2lld rows: %d paths, rows in the matrix == alone\n", ats_qtype_name(t),
            (long long)nb, (long long)n_out, ran);
    free(buf); free(x); free(y);
}

int main(void)
{
    rng = tu_seed("test_exec_decode");
    fprintf(stderr, "test_exec_decode: CPU features %u (1 AVX2, 2 AVX-512, 4 VNNI)\n", ex_cpu_features());
    const ats_qtype types[] = {ATS_Q_Q4_0, ATS_Q_MXFP4};
    for (size_t k = 0; k < 2; k++) {
        const int64_t nbs[] = {1, 2, 3, 7, 160, 1 + 2 * (int64_t)(tu_rand(&rng) % 100)};
        for (size_t i = 0; i < sizeof nbs / sizeof nbs[0]; i++) {
            test_kernels(types[k], nbs[i], 1 + (int64_t)(tu_rand(&rng) % 40));
            test_kernels(types[k], nbs[i], 4 * (1 + (int64_t)(tu_rand(&rng) % 10)));
        }
    }
    const ats_qtype kq[] = {ATS_Q_Q4_K, ATS_Q_Q6_K};
    for (size_t k = 0; k < 2; k++) {
        const int64_t nbs[] = {1, 3, 8, 20};
        const int64_t rows[] = {1, 3, 4, 7, 8, 9, 12, 13, 16, 33, 4 * (1 + (int64_t)(tu_rand(&rng) % 12))};
        for (size_t i = 0; i < sizeof nbs / sizeof nbs[0]; i++)
            for (size_t j = 0; j < sizeof rows / sizeof rows[0]; j++) test_kquant_rows(kq[k], nbs[i], rows[j]);
    }
    test_quantizer(8);
    test_quantizer(8 * (1 + (int64_t)(tu_rand(&rng) % 6)) + 1);
    return tu_finish("test_exec_decode");
}
