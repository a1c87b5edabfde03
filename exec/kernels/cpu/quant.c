/* Row dequantization and quantization of the GGUF weight types. Formulas: QUANT_FORMATS.md. */
#include "ex/quant.h"

#include <math.h>
#include <string.h>

#include "ex/quant_blocks.h"

int ex_qtype_supported(ats_qtype t)
{
    switch (t) {
    case ATS_Q_F32: case ATS_Q_F16: case ATS_Q_BF16: case ATS_Q_Q4_0: case ATS_Q_Q8_0:
    case ATS_Q_Q4_K: case ATS_Q_Q6_K: case ATS_Q_MXFP4:
        return 1;
    }
    return 0;
}

static int row_ok(ats_qtype t, int64_t n)
{
    if (!ex_qtype_supported(t) || n < 0) return 0;
    return n % ats_qtype_block_elems(t) == 0;
}

/* ---- dequantize -------------------------------------------------------------------------- */

static void deq_q4_0(const ex_block_q4_0 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = ex_fp16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = ((int)(b[i].qs[j] & 0xF) - 8) * d;
            y[j + 16] = ((int)(b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void deq_q8_0(const ex_block_q8_0 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = ex_fp16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) y[j] = b[i].qs[j] * d;
    }
}

static void deq_q4_K(const ex_block_q4_K *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += 256) {
        float d = ex_fp16_to_f32(b[i].d), dmin = ex_fp16_to_f32(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            ex_q4k_scale_min(b[i].scales, 2 * c, &sc0, &m0);
            ex_q4k_scale_min(b[i].scales, 2 * c + 1, &sc1, &m1);
            const uint8_t *q = b[i].qs + 32 * c;
            for (int l = 0; l < 32; l++) {
                y[64 * c + l] = d * sc0 * (q[l] & 0xF) - dmin * m0;
                y[64 * c + 32 + l] = d * sc1 * (q[l] >> 4) - dmin * m1;
            }
        }
    }
}

static void deq_q6_K(const ex_block_q6_K *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += 256) {
        float d = ex_fp16_to_f32(b[i].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *L = b[i].ql + 64 * h, *H = b[i].qh + 32 * h;
            const int8_t *S = b[i].scales + 8 * h;
            float *yh = y + 128 * h;
            for (int l = 0; l < 32; l++) {
                int s = l / 16;
                int q0 = (L[l] & 0xF) | (((H[l] >> 0) & 3) << 4);
                int q1 = (L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4);
                int q2 = (L[l] >> 4) | (((H[l] >> 4) & 3) << 4);
                int q3 = (L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4);
                yh[l] = d * S[s] * (q0 - 32);
                yh[l + 32] = d * S[s + 2] * (q1 - 32);
                yh[l + 64] = d * S[s + 4] * (q2 - 32);
                yh[l + 96] = d * S[s + 6] * (q3 - 32);
            }
        }
    }
}

static void deq_mxfp4(const ex_block_mxfp4 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += 32) {
        float d = ex_e8m0_to_f32(b[i].e);
        for (int j = 0; j < 16; j++) {
            y[j] = ex_e2m1_to_f32(b[i].qs[j] & 0xF) * d;
            y[j + 16] = ex_e2m1_to_f32(b[i].qs[j] >> 4) * d;
        }
    }
}

enum ats_status ex_dequantize_row(ats_qtype t, const void *src, float *dst, int64_t n)
{
    if (!row_ok(t, n)) return ATS_EINVAL;
    int64_t nb = n / ats_qtype_block_elems(t);
    switch (t) {
    case ATS_Q_F32: memcpy(dst, src, (size_t)n * 4); break;
    case ATS_Q_F16: {
        const uint8_t *s = src;
        for (int64_t i = 0; i < n; i++) {
            ex_fp16 h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = ex_fp16_to_f32(h);
        }
        break;
    }
    case ATS_Q_BF16: {
        const uint8_t *s = src;
        for (int64_t i = 0; i < n; i++) {
            ex_bf16 h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = ex_bf16_to_f32(h);
        }
        break;
    }
    case ATS_Q_Q4_0: deq_q4_0(src, dst, nb); break;
    case ATS_Q_Q8_0: deq_q8_0(src, dst, nb); break;
    case ATS_Q_Q4_K: deq_q4_K(src, dst, nb); break;
    case ATS_Q_Q6_K: deq_q6_K(src, dst, nb); break;
    case ATS_Q_MXFP4: deq_mxfp4(src, dst, nb); break;
    }
    return ATS_OK;
}

/* ---- quantize ---------------------------------------------------------------------------- */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The signed value of largest magnitude (ggml's choice for symmetric types). */
static float signed_absmax(const float *x, int n)
{
    float amax = 0, m = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); m = x[j]; }
    return m;
}

static void q_q4_0(const float *x, ex_block_q4_0 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float m = signed_absmax(x, 32);
        float d = m / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = ex_f32_to_fp16(d);
        for (int j = 0; j < 16; j++) {
            int q0 = clampi((int)lrintf(x[j] * id) + 8, 0, 15);
            int q1 = clampi((int)lrintf(x[j + 16] * id) + 8, 0, 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q_q8_0(const float *x, ex_block_q8_0 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = ex_f32_to_fp16(d);
        for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)clampi((int)lrintf(x[j] * id), -127, 127);
    }
}

/* Q4_K sub-block fit: x ≈ s * q - m with q in 0..15, s >= 0, m >= 0. Tries 21 candidate scales
 * around (max - min) / 15, refits s and m by least squares for each rounding, keeps the smallest
 * squared error (the idea of ggml's make_qkx2_quants, written from its description). */
static void fit_q4k(const float *x, int n, float *scale, float *minv)
{
    float lo = 0, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    if (!(hi > lo)) {
        *scale = 0;
        *minv = -lo;
        return;
    }
    float best_s = (hi - lo) / 15.0f, best_m = -lo, best_e = INFINITY;
    for (int k = -10; k <= 10; k++) {
        float is = (15.0f + 0.1f * (float)k) / (hi - lo);
        double sq = 0, sx = 0, sqq = 0, sqx = 0;
        int q[256];
        for (int i = 0; i < n; i++) {
            q[i] = clampi((int)lrintf((x[i] - lo) * is), 0, 15);
            sq += q[i];
            sx += x[i];
            sqq += (double)q[i] * q[i];
            sqx += (double)q[i] * x[i];
        }
        double den = n * sqq - sq * sq, s_, m_;
        if (den <= 0) continue;
        s_ = (n * sqx - sq * sx) / den;
        m_ = (s_ * sq - sx) / n;
        if (m_ < 0) { /* the offset must be <= 0: fit s alone */
            m_ = 0;
            s_ = sqq > 0 ? sqx / sqq : 0;
        }
        if (s_ < 0) continue;
        double e = 0;
        for (int i = 0; i < n; i++) {
            double d = s_ * q[i] - m_ - x[i];
            e += d * d;
        }
        if (e < best_e) {
            best_e = (float)e;
            best_s = (float)s_;
            best_m = (float)m_;
        }
    }
    *scale = best_s;
    *minv = best_m;
}

static void q_q4_K(const float *x, ex_block_q4_K *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float scale[8], mins[8], max_scale = 0, max_min = 0;
        for (int k = 0; k < 8; k++) {
            fit_q4k(x + 32 * k, 32, &scale[k], &mins[k]);
            max_scale = fmaxf(max_scale, scale[k]);
            max_min = fmaxf(max_min, mins[k]);
        }
        float d = max_scale / 63.0f, dmin = max_min / 63.0f;
        b[i].d = ex_f32_to_fp16(d);
        b[i].dmin = ex_f32_to_fp16(dmin);
        d = ex_fp16_to_f32(b[i].d);
        dmin = ex_fp16_to_f32(b[i].dmin);
        uint8_t sc[8], mq[8];
        for (int k = 0; k < 8; k++) {
            sc[k] = (uint8_t)clampi(d > 0 ? (int)lrintf(scale[k] / d) : 0, 0, 63);
            mq[k] = (uint8_t)clampi(dmin > 0 ? (int)lrintf(mins[k] / dmin) : 0, 0, 63);
        }
        memset(b[i].scales, 0, 12);
        for (int k = 0; k < 4; k++) {
            b[i].scales[k] = sc[k];
            b[i].scales[k + 4] = mq[k];
        }
        for (int k = 4; k < 8; k++) {
            b[i].scales[k + 4] = (uint8_t)((sc[k] & 0xF) | ((mq[k] & 0xF) << 4));
            b[i].scales[k - 4] |= (uint8_t)((sc[k] >> 4) << 6);
            b[i].scales[k] |= (uint8_t)((mq[k] >> 4) << 6);
        }
        uint8_t q[256];
        for (int k = 0; k < 8; k++) {
            float s = d * sc[k], m = dmin * mq[k];
            for (int l = 0; l < 32; l++)
                q[32 * k + l] = (uint8_t)clampi(s > 0 ? (int)lrintf((x[32 * k + l] + m) / s) : 0, 0, 15);
        }
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
}

static void q_q6_K(const float *x, ex_block_q6_K *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float scale[16], amax = 0;
        for (int s = 0; s < 16; s++) {
            scale[s] = signed_absmax(x + 16 * s, 16) / -32.0f;
            amax = fmaxf(amax, fabsf(scale[s]));
        }
        float d = amax / 127.0f;
        b[i].d = ex_f32_to_fp16(d);
        d = ex_fp16_to_f32(b[i].d);
        uint8_t q[256];
        for (int s = 0; s < 16; s++) {
            int sq = clampi(d > 0 ? (int)lrintf(scale[s] / d) : 0, -127, 127);
            b[i].scales[s] = (int8_t)sq;
            float sd = d * sq;
            for (int l = 0; l < 16; l++) {
                int v = sd != 0.0f ? (int)lrintf(x[16 * s + l] / sd) : 0;
                q[16 * s + l] = (uint8_t)(clampi(v, -32, 31) + 32);
            }
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *qh = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                int q0 = qh[l], q1 = qh[l + 32], q2 = qh[l + 64], q3 = qh[l + 96];
                b[i].ql[64 * h + l] = (uint8_t)((q0 & 0xF) | ((q2 & 0xF) << 4));
                b[i].ql[64 * h + l + 32] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
                b[i].qh[32 * h + l] =
                    (uint8_t)((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
            }
        }
    }
}

static uint8_t nearest_e2m1(float v)
{
    uint8_t best = 0;
    float bd = INFINITY;
    for (uint8_t c = 0; c < 16; c++) {
        float dd = fabsf(ex_e2m1_to_f32(c) - v);
        if (dd < bd) { bd = dd; best = c; }
    }
    return best;
}

static void q_mxfp4(const float *x, ex_block_mxfp4 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        int e = 1;
        if (amax > 0) e = clampi((int)ceilf(log2f(amax / 6.0f)) + 127, 1, 254);
        b[i].e = (uint8_t)e;
        float id = 1.0f / ex_e8m0_to_f32((uint8_t)e);
        for (int j = 0; j < 16; j++)
            b[i].qs[j] = (uint8_t)(nearest_e2m1(x[j] * id) | (nearest_e2m1(x[j + 16] * id) << 4));
    }
}

enum ats_status ex_quantize_row(ats_qtype t, const float *src, void *dst, int64_t n)
{
    if (!row_ok(t, n)) return ATS_EINVAL;
    int64_t nb = n / ats_qtype_block_elems(t);
    switch (t) {
    case ATS_Q_F32: memcpy(dst, src, (size_t)n * 4); break;
    case ATS_Q_F16: {
        uint8_t *d = dst;
        for (int64_t i = 0; i < n; i++) {
            ex_fp16 h = ex_f32_to_fp16(src[i]);
            memcpy(d + 2 * i, &h, 2);
        }
        break;
    }
    case ATS_Q_BF16: {
        uint8_t *d = dst;
        for (int64_t i = 0; i < n; i++) {
            ex_bf16 h = ex_f32_to_bf16(src[i]);
            memcpy(d + 2 * i, &h, 2);
        }
        break;
    }
    case ATS_Q_Q4_0: q_q4_0(src, dst, nb); break;
    case ATS_Q_Q8_0: q_q8_0(src, dst, nb); break;
    case ATS_Q_Q4_K: q_q4_K(src, dst, nb); break;
    case ATS_Q_Q6_K: q_q6_K(src, dst, nb); break;
    case ATS_Q_MXFP4: q_mxfp4(src, dst, nb); break;
    }
    return ATS_OK;
}
