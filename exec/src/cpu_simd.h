/* Private: float vector helpers of the CPU kernels (AVX2 when present, scalar otherwise). */
#ifndef EX_CPU_SIMD_H
#define EX_CPU_SIMD_H

#include <stdint.h>

/** Σ a[i] b[i] over n floats. */
typedef float (*ex_dot_f32_fn)(const float *a, const float *b, int64_t n);
/** y[i] += s * x[i] over n floats. */
typedef void (*ex_axpy_f32_fn)(float *y, float s, const float *x, int64_t n);

/** One query row of attention: att[p] = scale * q·k_p for p < len (k_p = kb + p*kv_stride), softmax,
 *  o = Σ_p att[p] v_p (v_p = vb + p*kv_stride); hd elements per vector; att has len entries. */
typedef void (*ex_attn_row_fn)(const float *q, const float *kb, const float *vb, int64_t kv_stride, int64_t len,
                               int64_t hd, float scale, float *att, float *o);

/** The fastest implementations for ex_cpu_features(). */
ex_attn_row_fn ex_pick_attn_row(void);
ex_dot_f32_fn ex_pick_dot_f32(void);
ex_axpy_f32_fn ex_pick_axpy_f32(void);

#endif
