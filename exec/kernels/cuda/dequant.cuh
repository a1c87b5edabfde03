/* exec/kernels/cuda/dequant.cuh — private: 32 consecutive elements of any weight type as floats, exact per
 * ../shared/models/QUANT_FORMATS.md (used by the dequantize and embedding kernels). */
#ifndef EXC_DEQUANT_CUH
#define EXC_DEQUANT_CUH

#include "common.cuh"
#include "ats/quant.h"

/* ---- dequantize: one thread per 32 consecutive elements --------------------------------------- */
/* chunk = index of the group of 32 elements from `base` (the start of a row or tensor). */
static __device__ __forceinline__ void deq32(int type, const uint8_t *base, int64_t chunk, float *v)
{
    switch (type) {
    case ATS_Q_Q4_0: {
        const uint8_t *bp = base + chunk * EXC_Q4_0_BYTES;
        float d = exc_h2f(*(const uint16_t *)bp);
        for (int j = 0; j < 16; j++) {
            uint8_t q = bp[2 + j];
            v[j] = (float)((q & 15) - 8) * d;
            v[j + 16] = (float)((q >> 4) - 8) * d;
        }
        break;
    }
    case ATS_Q_Q8_0: {
        const uint8_t *bp = base + chunk * EXC_Q8_0_BYTES;
        float d = exc_h2f(*(const uint16_t *)bp);
        for (int j = 0; j < 32; j++) v[j] = (float)(int8_t)bp[2 + j] * d;
        break;
    }
    case ATS_Q_MXFP4: {
        const uint8_t *bp = base + chunk * EXC_MXFP4_BYTES;
        float sc = ex_e8m0_to_f32(bp[0]);
        for (int j = 0; j < 16; j++) {
            v[j] = ex_e2m1_to_f32(bp[1 + j] & 15) * sc;
            v[j + 16] = ex_e2m1_to_f32(bp[1 + j] >> 4) * sc;
        }
        break;
    }
    case ATS_Q_Q4_K: {
        const uint8_t *bp = base + (chunk >> 3) * EXC_Q4_K_BYTES;
        int k = (int)(chunk & 7), c = k >> 1;
        uint8_t sc, m;
        ex_q4k_scale_min(bp + 4, k, &sc, &m);
        float d = exc_h2f(*(const uint16_t *)bp) * sc, dm = exc_h2f(*(const uint16_t *)(bp + 2)) * m;
        const uint8_t *qs = bp + 16 + 32 * c;
        for (int j = 0; j < 32; j++) v[j] = d * (float)((k & 1) ? qs[j] >> 4 : qs[j] & 15) - dm;
        break;
    }
    case ATS_Q_Q6_K: {
        const uint8_t *bp = base + (chunk >> 3) * EXC_Q6_K_BYTES;
        int k = (int)(chunk & 7), h = k >> 2, g = k & 3;
        const uint8_t *L = bp + 64 * h, *H = bp + 128 + 32 * h;
        const int8_t *S = (const int8_t *)(bp + 192 + 8 * h);
        float d = exc_h2f(*(const uint16_t *)(bp + 208));
        for (int l = 0; l < 32; l++) {
            int lo = (g & 1) ? L[l + 32] : L[l];
            lo = (g & 2) ? lo >> 4 : lo & 15;
            int q = lo | (((H[l] >> (2 * g)) & 3) << 4);
            v[l] = d * (float)S[l / 16 + 2 * g] * (float)(q - 32);
        }
        break;
    }
    case ATS_Q_F16:
        for (int j = 0; j < 32; j++) v[j] = exc_h2f(((const uint16_t *)base)[chunk * 32 + j]);
        break;
    case ATS_Q_BF16:
        for (int j = 0; j < 32; j++) v[j] = exc_bf2f(((const uint16_t *)base)[chunk * 32 + j]);
        break;
    default: /* F32 */
        for (int j = 0; j < 32; j++) v[j] = ((const float *)base)[chunk * 32 + j];
        break;
    }
}

#endif
