/*
 * ex/quant.h — dequantize and quantize rows of the GGUF weight types (CPU reference code).
 *
 * A row is n contiguous elements (n a multiple of the type's block size, ats_qtype_block_elems);
 * its bytes follow ex/quant_blocks.h. Dequantization follows ../shared/models/QUANT_FORMATS.md
 * exactly. Quantization uses round-to-nearest with the scale choices below (simpler than ggml's
 * search-based K-quant quantizers; the round-trip bounds are tested in tests/exec/):
 * - Q8_0: d = max|x| / 127, q = round(x / d).
 * - Q4_0: d = m / -8 where m is the signed value of largest magnitude (as ggml), q = round(x/d) + 8
 *   clamped to 0..15.
 * - Q4_K: per sub-block of 32, x ≈ scale * q - min (q 0..15, min >= 0) fitted by least squares over
 *   21 candidate roundings around (max - min) / 15; the 8 scales and 8 mins are then quantized to
 *   6 bits against the super-block's d and dmin.
 * - Q6_K: per sub-block of 16, scale = m / -32 (m the signed value of largest magnitude), scales to
 *   int8 against d = max|scale| / 127.
 * - MXFP4: e = shared exponent so that max|x| fits 6 * 2^(e-127), codes by nearest E2M1 value.
 * - F16 / BF16: round to nearest even. F32: copy.
 * All functions are pure and thread-safe.
 */
#ifndef EX_QUANT_H
#define EX_QUANT_H

#include <stdint.h>

#include "ats/quant.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Dequantizes n elements of type t from src (borrowed, ats_qtype_bytes(t, n) bytes) into dst (n
 *  floats, caller-owned). ATS_EINVAL for an unknown type or n not a multiple of the block size. */
enum ats_status ex_dequantize_row(ats_qtype t, const void *src, float *dst, int64_t n);

/** Quantizes n floats into type t (dst: ats_qtype_bytes(t, n) bytes, caller-owned). Same errors. */
enum ats_status ex_quantize_row(ats_qtype t, const float *src, void *dst, int64_t n);

/** 1 when ex_dequantize_row / ex_quantize_row / ex_cpu_matmul support type t. */
int ex_qtype_supported(ats_qtype t);

#ifdef __cplusplus
}
#endif
#endif
