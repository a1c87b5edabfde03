/* Private: float vector helpers of the CPU kernels (AVX2 when present, scalar otherwise). */
#ifndef EX_CPU_SIMD_H
#define EX_CPU_SIMD_H

#include <stdint.h>

/** Σ a[i] b[i] over n floats. */
typedef float (*ex_dot_f32_fn)(const float *a, const float *b, int64_t n);
/** y[i] += s * x[i] over n floats. */
typedef void (*ex_axpy_f32_fn)(float *y, float s, const float *x, int64_t n);

/** The fastest implementations for ex_cpu_features(). */
ex_dot_f32_fn ex_pick_dot_f32(void);
ex_axpy_f32_fn ex_pick_axpy_f32(void);

#endif
