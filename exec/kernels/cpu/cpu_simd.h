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

/** One block partial of attention for the nh query heads that share a KV head (rows q + j·hd): over
 *  the n positions k_p = kb + p·kv_stride, v_p = vb + p·kv_stride (F32 for ex_pick_attn_part, F16
 *  widened as read for ex_pick_attn_part_f16), per head j: s_p = scale·q_j·k_p, m[j] = max_p s_p,
 *  l[j] = Σ_p exp(s_p − m[j]), o[j·hd..] = Σ_p exp(s_p − m[j]) v_p. s: n floats of scratch. F32
 *  arithmetic; paths differ only in summation order. ex_cpu_attention combines the blocks. */
typedef void (*ex_attn_part_fn)(const float *q, int64_t nh, const void *kb, const void *vb, int64_t kv_stride,
                                int64_t n, int64_t hd, float scale, float *s, float *m, float *l, float *o);

/** dst[i] = F16 of src[i] over n (round to nearest even: bit for bit ex_f32_to_fp16, NaN payloads aside). */
typedef void (*ex_f32_to_f16_fn)(const float *src, ex_fp16 *dst, int64_t n);

/** The fastest implementations for ex_cpu_features(). */
ex_attn_part_fn ex_pick_attn_part(void);
ex_attn_part_fn ex_pick_attn_part_f16(void);
ex_f32_to_f16_fn ex_pick_f32_to_f16(void);
ex_dot_f32_fn ex_pick_dot_f32(void);
ex_axpy_f32_fn ex_pick_axpy_f32(void);

#endif
