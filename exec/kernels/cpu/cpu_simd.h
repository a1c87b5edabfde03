/* Private: float vector helpers of the CPU kernels (AVX2 / AVX-512 when present, scalar otherwise),
 * picked by ex_cpu_features() (ATS_CPU_FEATURES lowers the choice, for tests). */
#ifndef EX_CPU_SIMD_H
#define EX_CPU_SIMD_H

#include <stdint.h>

#include "ex/quant_blocks.h"

/** Σ a[i] b[i] over n floats. */
typedef float (*ex_dot_f32_fn)(const float *a, const float *b, int64_t n);
/** y[i] += s * x[i] over n floats. */
typedef void (*ex_axpy_f32_fn)(float *y, float s, const float *x, int64_t n);

/** One query row of attention: att[p] = scale * q·k_p for p < len (k_p = kb + p*kv_stride), softmax,
 *  o = Σ_p att[p] v_p (v_p = vb + p*kv_stride); hd elements per vector; att has len entries. */
typedef void (*ex_attn_row_fn)(const float *q, const float *kb, const float *vb, int64_t kv_stride, int64_t len,
                               int64_t hd, float scale, float *att, float *o);

/** ex_attn_row_fn over an F16 KV cache: k_p and v_p are hd F16 values widened to F32 as they are
 *  read; q and o F32; kv_stride in elements; F32 arithmetic, paths differ only in summation order. */
typedef void (*ex_attn_row_f16_fn)(const float *q, const ex_fp16 *kb, const ex_fp16 *vb, int64_t kv_stride,
                                   int64_t len, int64_t hd, float scale, float *att, float *o);

/** dst[i] = F16 of src[i] over n (round to nearest even: bit for bit ex_f32_to_fp16, NaN payloads aside). */
typedef void (*ex_f32_to_f16_fn)(const float *src, ex_fp16 *dst, int64_t n);

/** The fastest implementations for ex_cpu_features(). */
ex_attn_row_fn ex_pick_attn_row(void);
ex_attn_row_f16_fn ex_pick_attn_row_f16(void);
ex_f32_to_f16_fn ex_pick_f32_to_f16(void);
ex_dot_f32_fn ex_pick_dot_f32(void);
ex_axpy_f32_fn ex_pick_axpy_f32(void);

#endif
