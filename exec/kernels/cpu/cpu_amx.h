/* Private: the AMX (TMUL int8) prefill matmul of the K-quants (cpu_amx.c), called by ex_cpu_matmul. */
#ifndef EX_CPU_AMX_H
#define EX_CPU_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "ex/ops.h"

/** Asks Linux for the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) once for
 *  the process; returns 1 when granted (or already), 0 otherwise (not Linux, old kernel, no AMX). Called
 *  by the feature detection once. */
int ex_amx_request_perm(void);

/** y (n_tokens, n_out) = W x for w of type Q4_K or Q6_K with AMX tiles: xq holds the n_tokens
 *  activation rows as ex_block_q8_K (abytes apart, w->ne[0] / 256 blocks each). Every output is bit for
 *  bit dot_q4_K_scalar / dot_q6_K_scalar's (same integer sums per super-block, same F32 operations in
 *  the same order). OpenMP over 16-row groups when par. Returns ATS_OK or ATS_ENOMEM. The caller has
 *  checked ex_cpu_features() for EX_CPU_AMX, EX_CPU_AVX512VNNI and EX_CPU_AVX512, and the type. */
enum ats_status ex_amx_matmul_kq(const ex_tensor *w, const uint8_t *xq, size_t abytes, int64_t n_tokens, float *y,
                                 int par);

#endif
