/*
 * test_exec_quant — fp16/bf16 conversions, dequantizers against the QUANT_FORMATS.md formulas on
 * hand-built blocks, and quantize → dequantize round trips within a per-type bound on fresh random
 * rows (seed printed; replay with ATS_TEST_SEED).
 *
 * Round-trip bounds (max |x - x'| over a block, relative to the block's max |x|):
 *   Q8_0 1/254 + fp16 scale rounding (≤ 0.5%)  → 0.005; Q4_0: ggml's d = m/-8 maps the extreme m to
 *   -8 exactly, so the opposite extreme clamps at +7: error ≤ amax/8 → 0.126;
 *   Q4_K: (max-min)/30 per sub-block plus 6-bit scale/min rounding → 0.10 of the super-block range;
 *   Q6_K: scale m/-32 puts the extreme at -32, the opposite extreme clamps at +31 → 1/32, times
 *   (1 + 31 * int8 scale rounding ≤ 1/126) → 0.04; MXFP4: amax/2^e in (3, 6], the widest E2M1 gap
 *   (4 → 6) leaves an error of 1 scaled unit while amax may be just 5 → 0.2 (+ rounding: 0.201);
 *   (rows scaled by 10^U(-0.3, 2.5) so the fp16 block scales are normal numbers);
 *   F16 2^-11 relative per element (+2^-25 absolute for subnormals), BF16 2^-8 relative.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ex/quant.h"
#include "ex/quant_blocks.h"
#include "testutil.h"

static uint64_t rng;

static void test_fp16(void)
{
    /* exact values */
    CHECK(ex_f32_to_fp16(1.0f) == 0x3C00);
    CHECK(ex_f32_to_fp16(-2.0f) == 0xC000);
    CHECK(ex_f32_to_fp16(65504.0f) == 0x7BFF);
    CHECK(ex_f32_to_fp16(65520.0f) == 0x7C00);           /* rounds to inf */
    CHECK(ex_f32_to_fp16(5.9604644775390625e-08f) == 1); /* smallest subnormal */
    CHECK(ex_f32_to_fp16(2.98023223876953125e-08f) == 0); /* half of it: tie to even → 0 */
    CHECK(ex_fp16_to_f32(0x0001) == 5.9604644775390625e-08f);
    CHECK(ex_fp16_to_f32(0x3555) == 0.333251953125f);
    CHECK(isinf(ex_fp16_to_f32(0x7C00)));
    CHECK(isnan(ex_fp16_to_f32(0x7E00)));
    /* every fp16 bit pattern round-trips */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ex_fp16_to_f32((ex_fp16)h);
        if (isnan(f)) continue;
        if (ex_f32_to_fp16(f) != h) bad++;
    }
    CHECK_MSG(bad == 0, "%d fp16 patterns do not round-trip", bad);
    /* random floats: nearest */
    for (int i = 0; i < 10000; i++) {
        float x = (float)tu_uniform(&rng, -70000, 70000) * (float)pow(10, -tu_uniform(&rng, 0, 8));
        float y = ex_fp16_to_f32(ex_f32_to_fp16(x));
        if (fabsf(x) < 65504.0f) CHECK_REL(y, x, 1.0 / 2048, 6e-8);
        float b = ex_bf16_to_f32(ex_f32_to_bf16(x));
        CHECK_REL(b, x, 1.0 / 256, 0);
    }
    CHECK(ex_e8m0_to_f32(127) == 1.0f);
    CHECK(ex_e8m0_to_f32(130) == 8.0f);
    CHECK(ex_e2m1_to_f32(7) == 6.0f && ex_e2m1_to_f32(9) == -0.5f);
}

/* Dequantizers on hand-built blocks, each element against the formula written out directly. */
static void test_dequant_formulas(void)
{
    ex_block_q4_0 b4;
    b4.d = ex_f32_to_fp16(0.5f);
    for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)(tu_rand(&rng) & 0xFF);
    float y[256];
    CHECK(ex_dequantize_row(ATS_Q_Q4_0, &b4, y, 32) == ATS_OK);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == ((b4.qs[j] & 15) - 8) * 0.5f);
        CHECK(y[j + 16] == ((b4.qs[j] >> 4) - 8) * 0.5f);
    }
    ex_block_q4_K k4;
    k4.d = ex_f32_to_fp16(0.25f);
    k4.dmin = ex_f32_to_fp16(0.125f);
    for (int j = 0; j < 12; j++) k4.scales[j] = (uint8_t)(tu_rand(&rng) & 0xFF);
    for (int j = 0; j < 128; j++) k4.qs[j] = (uint8_t)(tu_rand(&rng) & 0xFF);
    CHECK(ex_dequantize_row(ATS_Q_Q4_K, &k4, y, 256) == ATS_OK);
    for (int e = 0; e < 256; e++) {
        int sb = e / 32, c = e / 64, hi = (e % 64) >= 32, l = e % 32;
        int sc, m;
        if (sb < 4) { sc = k4.scales[sb] & 63; m = k4.scales[sb + 4] & 63; }
        else {
            sc = (k4.scales[sb + 4] & 15) | ((k4.scales[sb - 4] >> 6) << 4);
            m = (k4.scales[sb + 4] >> 4) | ((k4.scales[sb] >> 6) << 4);
        }
        int q = hi ? k4.qs[32 * c + l] >> 4 : k4.qs[32 * c + l] & 15;
        CHECK_NEAR(y[e], 0.25f * sc * q - 0.125f * m, 1e-6);
    }
    ex_block_q6_K k6;
    k6.d = ex_f32_to_fp16(0.5f);
    for (int j = 0; j < 128; j++) k6.ql[j] = (uint8_t)(tu_rand(&rng) & 0xFF);
    for (int j = 0; j < 64; j++) k6.qh[j] = (uint8_t)(tu_rand(&rng) & 0xFF);
    for (int j = 0; j < 16; j++) k6.scales[j] = (int8_t)(tu_rand(&rng) & 0xFF);
    CHECK(ex_dequantize_row(ATS_Q_Q6_K, &k6, y, 256) == ATS_OK);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
        const uint8_t *L = k6.ql + 64 * h, *H = k6.qh + 32 * h;
        int lo = (g == 0) ? (L[l] & 15) : (g == 1) ? (L[l + 32] & 15) : (g == 2) ? (L[l] >> 4) : (L[l + 32] >> 4);
        int q = lo | (((H[l] >> (2 * g)) & 3) << 4);
        CHECK_NEAR(y[e], 0.5f * k6.scales[e / 16] * (q - 32), 1e-6);
    }
    ex_block_mxfp4 mx;
    mx.e = 125;
    for (int j = 0; j < 16; j++) mx.qs[j] = (uint8_t)(tu_rand(&rng) & 0xFF);
    CHECK(ex_dequantize_row(ATS_Q_MXFP4, &mx, y, 32) == ATS_OK);
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int j = 0; j < 32; j++) {
        int code = j < 16 ? mx.qs[j] & 15 : mx.qs[j - 16] >> 4;
        float v = e2m1[code & 7] * ((code & 8) ? -1.0f : 1.0f) * 0.25f;
        CHECK(y[j] == v);
    }
    /* errors */
    CHECK(ex_dequantize_row(ATS_Q_Q4_K, &k4, y, 100) == ATS_EINVAL);
    CHECK(ex_dequantize_row((ats_qtype)3, &k4, y, 32) == ATS_EINVAL);
}

static double roundtrip(ats_qtype t, int64_t n, int block, double scale)
{
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    uint64_t bytes;
    ats_qtype_bytes(t, n, &bytes);
    void *q = malloc(bytes);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(tu_uniform(&rng, -1, 1) * scale + tu_uniform(&rng, -0.1, 0.3) * scale);
    CHECK(ex_quantize_row(t, x, q, n) == ATS_OK);
    CHECK(ex_dequantize_row(t, q, y, n) == ATS_OK);
    double worst = 0;
    for (int64_t b = 0; b < n / block; b++) {
        double amax = 0, range_lo = 0, range_hi = 0, err = 0;
        for (int j = 0; j < block; j++) {
            double v = x[b * block + j];
            amax = fmax(amax, fabs(v));
            range_lo = fmin(range_lo, v);
            range_hi = fmax(range_hi, v);
            double e = fabs(v - y[b * block + j]);
            if (!(e == e)) e = INFINITY;
            err = fmax(err, e);
        }
        double ref = t == ATS_Q_Q4_K ? range_hi - range_lo : amax;
        if (t == ATS_Q_F16) ref = amax + 2.98e-8 * 2048; /* subnormal floor: 2^-25 absolute */
        worst = fmax(worst, err / ref);
    }
    free(x);
    free(y);
    free(q);
    return worst;
}

static void test_roundtrips(void)
{
    struct { ats_qtype t; int block; double bound; } cases[] = {
        {ATS_Q_Q8_0, 32, 0.005}, {ATS_Q_Q4_0, 32, 0.126}, {ATS_Q_Q4_K, 256, 0.10},
        {ATS_Q_Q6_K, 256, 0.04}, {ATS_Q_MXFP4, 32, 0.201}, {ATS_Q_F16, 1, 1.0 / 2048 + 1e-6}, {ATS_Q_BF16, 1, 1.0 / 256},
        {ATS_Q_F32, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int rep = 0; rep < 5; rep++) {
            /* block scales stay in fp16's normal range (Q6_K's d = amax/4064 is normal for amax >= 0.25);
               below it the fp16 scale itself loses relative precision, as in ggml */
            double scale = pow(10, tu_uniform(&rng, -0.3, 2.5));
            double w = roundtrip(cases[i].t, 4096, cases[i].block, scale);
            CHECK_MSG(w <= cases[i].bound, "%s: round-trip error %.4g of the block scale > bound %.4g (scale %.3g)",
                      ats_qtype_name(cases[i].t), w, cases[i].bound, scale);
        }
    /* a zero block stays zero and finite */
    float z[256] = {0}, y[256];
    uint8_t q[512];
    ats_qtype all[] = {ATS_Q_Q8_0, ATS_Q_Q4_0, ATS_Q_Q4_K, ATS_Q_Q6_K, ATS_Q_MXFP4};
    for (size_t i = 0; i < 5; i++) {
        CHECK(ex_quantize_row(all[i], z, q, 256) == ATS_OK);
        CHECK(ex_dequantize_row(all[i], q, y, 256) == ATS_OK);
        int ok = 1;
        for (int j = 0; j < 256; j++) ok &= y[j] == 0.0f;
        CHECK_MSG(ok, "%s: zero row does not dequantize to zeros", ats_qtype_name(all[i]));
    }
}

int main(void)
{
    rng = tu_seed("test_exec_quant");
    test_fp16();
    test_dequant_formulas();
    test_roundtrips();
    return tu_finish("test_exec_quant");
}
