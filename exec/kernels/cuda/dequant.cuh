/* exec/kernels/cuda/dequant.cuh — private: 32 consecutive elements of any weight type as floats, exact per
 * ../shared/models/QUANT_FORMATS.md (used by the dequantize, embedding and grouped MoE kernels). */
#ifndef EXC_DEQUANT_CUH
#define EXC_DEQUANT_CUH

#include "common.cuh"
#include "ats/quant.h"

/* ---- dequantize: one thread per 32 consecutive elements --------------------------------------- */
/* chunk = index of the group of 32 elements from `base` (the start of a row or tensor). */
static __device__ __forceinline__ void deq32(int type, const uint8_t *base, int64_t chunk, float *v)
{
    switch (type) {
    case ATS_Q_Q4_0: { /* 2-byte aligned blocks: 16-bit loads */
        const uint8_t *bp = base + chunk * EXC_Q4_0_BYTES;
        float d = exc_h2f(*(const uint16_t *)bp);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t q = *(const uint16_t *)(bp + 2 + 2 * j);
            v[2 * j] = (float)((int)(q & 15) - 8) * d;
            v[2 * j + 1] = (float)((int)((q >> 8) & 15) - 8) * d;
            v[2 * j + 16] = (float)((int)((q >> 4) & 15) - 8) * d;
            v[2 * j + 17] = (float)((int)(q >> 12) - 8) * d;
        }
        break;
    }
    case ATS_Q_Q8_0: {
        const uint8_t *bp = base + chunk * EXC_Q8_0_BYTES;
        float d = exc_h2f(*(const uint16_t *)bp);
#pragma unroll
        for (int j = 0; j < 16; j++) {
            uint32_t q = *(const uint16_t *)(bp + 2 + 2 * j);
            v[2 * j] = (float)(int8_t)(q & 0xFF) * d;
            v[2 * j + 1] = (float)(int8_t)(q >> 8) * d;
        }
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
        if (((uintptr_t)bp & 15) == 0) { /* every row of a multiple of 256 columns from a 16-byte aligned base */
            uint4 h = *(const uint4 *)bp; /* d, dmin | 12 scale bytes */
            int sc, m;
            exc_q4k_scale_min(h.y, h.z, h.w, k, &sc, &m);
            float d = exc_h2f((uint16_t)(h.x & 0xFFFFu)) * (float)sc, dm = exc_h2f((uint16_t)(h.x >> 16)) * (float)m;
            const uint4 *q = (const uint4 *)(bp + 16 + 32 * c);
            uint4 qa = q[0], qb = q[1];
            const uint32_t w[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
            const int sh = (k & 1) * 4;
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int b = 0; b < 4; b++) v[4 * j + b] = d * (float)((w[j] >> (8 * b + sh)) & 15u) - dm;
            break;
        }
        uint8_t sc, m;
        ex_q4k_scale_min(bp + 4, k, &sc, &m);
        float d = exc_h2f(*(const uint16_t *)bp) * sc, dm = exc_h2f(*(const uint16_t *)(bp + 2)) * m;
        const uint8_t *qs = bp + 16 + 32 * c;
        for (int j = 0; j < 32; j++) v[j] = d * (float)((k & 1) ? qs[j] >> 4 : qs[j] & 15) - dm;
        break;
    }
    case ATS_Q_Q6_K: { /* 2-byte aligned blocks (210 bytes): 16-bit loads */
        const uint8_t *bp = base + (chunk >> 3) * EXC_Q6_K_BYTES;
        int k = (int)(chunk & 7), h = k >> 2, g = k & 3;
        const uint8_t *L = bp + 64 * h + ((g & 1) ? 32 : 0), *H = bp + 128 + 32 * h;
        uint32_t sp = *(const uint16_t *)(bp + 192 + 8 * h + 2 * g); /* scales 2g, 2g + 1 */
        float d = exc_h2f(*(const uint16_t *)(bp + 208));
        float d0 = d * (float)(int8_t)(sp & 0xFF), d1 = d * (float)(int8_t)(sp >> 8);
        const int lsh = (g & 2) ? 4 : 0, hsh = 2 * g;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            uint32_t l2 = *(const uint16_t *)(L + 2 * j), h2 = *(const uint16_t *)(H + 2 * j);
#pragma unroll
            for (int b = 0; b < 2; b++) {
                int q = (int)(((l2 >> (8 * b + lsh)) & 15u) | (((h2 >> (8 * b + hsh)) & 3u) << 4));
                v[2 * j + b] = (j < 8 ? d0 : d1) * (float)(q - 32);
            }
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
