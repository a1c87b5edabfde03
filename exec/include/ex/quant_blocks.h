/*
 * ex/quant_blocks.h — ggml block layouts of the quantized weight types, shared by the C and the
 * CUDA kernels (plain C; usable from .cu files; no CUDA headers).
 *
 * Layouts from ../shared/models/QUANT_FORMATS.md (ggml src/ggml-common.h): a row of n elements of
 * type T is n / EX_QK_<T> consecutive blocks; element i lives in block i / EX_QK_<T>. All multi-byte
 * fields are little-endian; fp16 is IEEE binary16 stored as its 16 raw bits (ex_fp16).
 * Q4_0, Q8_0 and MXFP4 blocks are 18, 34 and 17 bytes, so blocks inside a row are NOT 4-byte
 * aligned: kernels load them bytewise (or repack on upload).
 *
 * Activation blocks (ex_block_q8_1, ex_block_q8_K) hold an F32 activation row quantized to 8 bits
 * for the quantized dot products (as llama.cpp's Q8_1 / Q8_K): a weight block of 32 (Q4_0, Q8_0,
 * MXFP4) meets one ex_block_q8_1; a K-quant super-block of 256 (Q4_K, Q6_K) meets one ex_block_q8_K.
 *
 * The EX_HD helpers below (fp16/bf16/E8M0 conversions, Q4_K scale unpacking) are `static inline`
 * and `__host__ __device__` under nvcc, so both backends decode a block with the same code.
 */
#ifndef EX_QUANT_BLOCKS_H
#define EX_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define EX_HD __host__ __device__
#else
#define EX_HD
#endif

#ifdef __cplusplus
#define EX_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define EX_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

typedef uint16_t ex_fp16; /* IEEE binary16 bits */
typedef uint16_t ex_bf16; /* bfloat16 bits (upper half of an F32) */

#define EX_QK4_0 32
#define EX_QK8_0 32
#define EX_QK_MXFP4 32
#define EX_QK_K 256 /* K-quant super-block */

/** Q4_0 (ggml id 2): value = (nibble - 8) * d. Element j: low nibble of qs[j]; j+16: high nibble. */
typedef struct ex_block_q4_0 {
    ex_fp16 d;                 /* scale */
    uint8_t qs[EX_QK4_0 / 2];  /* nibbles */
} ex_block_q4_0;
EX_STATIC_ASSERT(sizeof(ex_block_q4_0) == 18, "Q4_0 block is 18 bytes");

/** Q8_0 (ggml id 8): value = qs[j] * d. */
typedef struct ex_block_q8_0 {
    ex_fp16 d;
    int8_t qs[EX_QK8_0];
} ex_block_q8_0;
EX_STATIC_ASSERT(sizeof(ex_block_q8_0) == 34, "Q8_0 block is 34 bytes");

/** Q4_K (ggml id 12): super-block of 8 sub-blocks of 32; value = d*sc[k]*q - dmin*m[k]
 *  (q unsigned 4-bit). Scales/mins 6-bit packed in scales[12] (see ex_q4k_scale_min). Quants: chunk
 *  c = 0..3 uses qs[32c..32c+31]; low nibbles = elements 64c+0..31, high = 64c+32..63. */
typedef struct ex_block_q4_K {
    ex_fp16 d;
    ex_fp16 dmin;
    uint8_t scales[12];
    uint8_t qs[EX_QK_K / 2];
} ex_block_q4_K;
EX_STATIC_ASSERT(sizeof(ex_block_q4_K) == 144, "Q4_K block is 144 bytes");

/** Q6_K (ggml id 14): 16 sub-blocks of 16; value = d * scales[s] * (q - 32), q 6-bit from the low
 *  4 bits in ql and the high 2 bits in qh (order: QUANT_FORMATS.md §Q6_K). d is at the END. */
typedef struct ex_block_q6_K {
    uint8_t ql[EX_QK_K / 2];
    uint8_t qh[EX_QK_K / 4];
    int8_t scales[EX_QK_K / 16];
    ex_fp16 d;
} ex_block_q6_K;
EX_STATIC_ASSERT(sizeof(ex_block_q6_K) == 210, "Q6_K block is 210 bytes");

/** MXFP4 (ggml id 39): value = E2M1(code) * 2^(e-127); nibble order as Q4_0. */
typedef struct ex_block_mxfp4 {
    uint8_t e; /* E8M0 shared exponent */
    uint8_t qs[EX_QK_MXFP4 / 2];
} ex_block_mxfp4;
EX_STATIC_ASSERT(sizeof(ex_block_mxfp4) == 17, "MXFP4 block is 17 bytes");

/** 8-bit activation block for the 32-element weight types: x[j] ≈ d * qs[j]; s = d * Σ qs[j]
 *  (used by Q4_0's -8 offset). F32 scales (not fp16 as ggml's Q8_1) so no precision is lost. */
typedef struct ex_block_q8_1 {
    float d;
    float s;
    int8_t qs[32];
} ex_block_q8_1;
EX_STATIC_ASSERT(sizeof(ex_block_q8_1) == 40, "q8_1 activation block is 40 bytes");

/** 8-bit activation super-block for the K-quants: x[j] ≈ d * qs[j]; bsums[i] = Σ qs[16i..16i+15]
 *  (used by Q4_K's mins and Q6_K's -32 offset). Same role as ggml's block_q8_K. */
typedef struct ex_block_q8_K {
    float d;
    int8_t qs[EX_QK_K];
    int16_t bsums[EX_QK_K / 16];
} ex_block_q8_K;
EX_STATIC_ASSERT(sizeof(ex_block_q8_K) == 292, "q8_K activation block is 292 bytes");

/* ---- conversions (bit-exact, host and device) ------------------------------------------------ */

/** IEEE binary16 bits → float (handles subnormals, inf, NaN). */
static inline EX_HD float ex_fp16_to_f32(ex_fp16 h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { e++; man <<= 1; } while ((man & 0x400u) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3FFu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/** float → IEEE binary16 bits, round to nearest even (overflow → inf, NaN kept). */
static inline EX_HD ex_fp16 ex_f32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) return (ex_fp16)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u));
    if (ax >= 0x477FF000u) return (ex_fp16)(sign | 0x7C00u); /* rounds to >= 65520 → inf */
    if (ax < 0x38800000u) {                                  /* result subnormal or zero */
        if (ax < 0x33000000u) return (ex_fp16)sign;          /* < 2^-25: rounds to 0 */
        uint32_t e = ax >> 23, m = (ax & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (ex_fp16)(sign | q);
    }
    uint32_t q = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (ex_fp16)(sign | q);
}

static inline EX_HD float ex_bf16_to_f32(ex_bf16 h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/** float → bf16 bits, round to nearest even (NaN kept quiet). */
static inline EX_HD ex_bf16 ex_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (ex_bf16)((x >> 16) | 0x40u);
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (ex_bf16)(x >> 16);
}

/** E8M0 exponent → 2^(e-127) as float (e = 0 gives 2^-127, a subnormal; e = 255 gives NaN). */
static inline EX_HD float ex_e8m0_to_f32(uint8_t e)
{
    uint32_t bits;
    if (e == 0) bits = 0x00200000u;      /* 2^-127 */
    else if (e == 255) bits = 0x7FC00000u;
    else bits = (uint32_t)e << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/** E2M1 code (4 bits) → value: magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6; bit 3 = sign. */
static inline EX_HD float ex_e2m1_to_f32(uint8_t code)
{
    float mag;
    switch (code & 7u) {
    case 0: mag = 0.0f; break;
    case 1: mag = 0.5f; break;
    case 2: mag = 1.0f; break;
    case 3: mag = 1.5f; break;
    case 4: mag = 2.0f; break;
    case 5: mag = 3.0f; break;
    case 6: mag = 4.0f; break;
    default: mag = 6.0f; break;
    }
    return (code & 8u) ? -mag : mag;
}

/** Q4_K: 6-bit scale and min of sub-block k (0..7) from the packed scales[12]. */
static inline EX_HD void ex_q4k_scale_min(const uint8_t *scales, int k, uint8_t *sc, uint8_t *m)
{
    if (k < 4) {
        *sc = scales[k] & 63u;
        *m = scales[k + 4] & 63u;
    } else {
        *sc = (uint8_t)((scales[k + 4] & 0x0Fu) | ((scales[k - 4] >> 6) << 4));
        *m = (uint8_t)((scales[k + 4] >> 4) | ((scales[k] >> 6) << 4));
    }
}

#ifdef __cplusplus
}
#endif
#endif
