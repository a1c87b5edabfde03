/*
 * ex/quantize.h — re-quantizing a GGUF file (`ats quantize`).
 *
 * 2-D and 3-D weight tensors become the requested type (with ats_qtype_fallback when a row does not
 * divide into its blocks: Q4_K → Q4_0 → F16, Q8_0 → F16); 1-D tensors (norms) stay as they are. As
 * llama.cpp does, the output head (output.weight, or token_embd.weight when the head is tied to it)
 * gets Q6_K (fallback Q8_0) for the 4-bit types; `pure` quantizes it like every other matrix
 * (llama.cpp's --pure). A matrix whose type already is the one this run gives it is copied; another
 * type, quantized or not, is dequantized and re-quantized, except that an already-quantized output head
 * keeps its type (its Q6_K/Q8_0 would not win back the precision lost, only grow the file). A source
 * tensor holding NaN or Inf is refused (ex_tensor_check_finite's words), as the quantizers would hide it;
 * a copied tensor is scanned whole, a re-quantized one row by row as it is dequantized (one pass over
 * the source). A finite value the target type cannot hold (a block whose scale overflows F16's 65504,
 * e.g. 1e30 in Q8_0; a value past 65504 in a matrix written as F16) is refused too: each quantized row is
 * read back and checked. All metadata is copied, general.file_type is rewritten; the output goes through
 * common/outfile (temporary, fsync, rename), so nothing is written when anything is refused.
 *
 * Usage: o = ex_requant_opts_default(); o.type = ATS_Q_Q4_K; ex_gguf_requantize(in, out, &o, &rep, &err);
 * the report counts what was done, for the caller's notes.
 */
#ifndef EX_QUANTIZE_H
#define EX_QUANTIZE_H

#include <stdint.h>

#include "ats/quant.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_requant_opts {
    ats_qtype type; /* Q8_0, Q4_0 or Q4_K */
    int pure;       /* 1: the output head like every other matrix */
    int threads;    /* OpenMP threads of the NaN/Inf scans (0: omp_get_max_threads) */
    /* called (may be NULL) after each re-quantized tensor: name, shape (ne[0..2]), from, to */
    void (*on_tensor)(void *ctx, const char *name, const int64_t ne[3], ats_qtype from, ats_qtype to);
    void *ctx;      /* borrowed; passed back to on_tensor */
} ex_requant_opts;
/** type Q8_0, pure 0, threads 0, no callback. */
ex_requant_opts ex_requant_opts_default(void);

#define EX_REQUANT_MAX_KINDS 8
/** matrices that did not get the asked type: (asked, got) and how many; kept = an already-quantized
 *  output head left as it was (got = its type) */
typedef struct ex_requant_kind {
    ats_qtype asked, got;
    int kept;
    int64_t n;
} ex_requant_kind;

typedef struct ex_requant_report {
    int64_t n_tensors, n_changed;         /* tensors in the file, re-quantized */
    int64_t n_mat, n_asked;               /* matrices (2-D, 3-D), of which with the asked type */
    int64_t n_fell, n_head_kept;          /* matrices changed to a fallback type; heads kept */
    uint64_t bytes_in, bytes_out;         /* tensor data [bytes] */
    ex_requant_kind fell[EX_REQUANT_MAX_KINDS]; /* changed by this run to another type than asked */
    ex_requant_kind same[EX_REQUANT_MAX_KINDS]; /* left as they were, not of the asked type */
    int n_fell_kinds, n_same_kinds;
} ex_requant_report;

/** Re-quantizes GGUF `in` into `out` (paths borrowed; out should be checked by the caller with
 *  atsc_out_check, and must not be in). ATS_OK with *rep filled; ATS_EINVAL when `in` cannot be read as
 *  GGUF, or holds NaN / Inf, or a value the target type cannot hold (message "IN: tensor 'T': row R,
 *  element E = V does not fit ... (nothing written)"); ATS_ENOMEM; ATS_EIO when the output cannot be
 *  written (message). Nothing is left at `out` on failure. Not thread-safe (uses OpenMP inside). */
enum ats_status ex_gguf_requantize(const char *in, const char *out, const ex_requant_opts *o, ex_requant_report *rep,
                                   ats_err *err);

#ifdef __cplusplus
}
#endif
#endif
