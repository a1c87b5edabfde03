/*
 * exec/model/quantize.c — re-quantizing a GGUF file (ex/quantize.h).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ex/gguf.h"
#include "ex/model.h"
#include "ex/quant.h"
#include "ex/quantize.h"

ex_requant_opts ex_requant_opts_default(void)
{
    ex_requant_opts o;
    memset(&o, 0, sizeof o);
    o.type = ATS_Q_Q8_0;
    return o;
}

/* llama.cpp's LLAMA_FTYPE values for general.file_type */
static uint32_t file_type_of(ats_qtype t)
{
    switch (t) {
    case ATS_Q_Q8_0: return 7;
    case ATS_Q_Q4_0: return 2;
    case ATS_Q_Q4_K: return 15; /* MOSTLY_Q4_K_M is 15; plain Q4_K everywhere is our recipe */
    default: return 0;
    }
}

static void add_kind(ex_requant_kind *k, int *n, ats_qtype asked, ats_qtype got, int kept)
{
    int i = 0;
    while (i < *n && !(k[i].asked == asked && k[i].got == got && k[i].kept == kept)) i++;
    if (i == *n && *n < EX_REQUANT_MAX_KINDS) k[(*n)++] = (ex_requant_kind){asked, got, kept, 0};
    if (i < *n) k[i].n++;
}

static int is_quantized(ats_qtype t) { return t != ATS_Q_F32 && t != ATS_Q_F16 && t != ATS_Q_BF16; }

static int n_threads(const ex_requant_opts *o) { return o->threads > 0 ? o->threads : omp_get_max_threads(); }

/* ATS_OK, or (one line naming the tensor, row and element in `ats run --check-tensors`' words:
   ex_tensor_check_finite) ATS_EINVAL when source tensor t of file `in` holds NaN or Inf; ATS_ENOMEM */
static enum ats_status refuse_non_finite(const char *in, const ex_gguf_tensor *t, int threads, ats_err *err)
{
    ex_tensor x = {t->type, {t->ne[0], t->ne[1], t->ne[2] * t->ne[3]}, 0, t->data};
    ats_qtype_bytes(t->type, t->ne[0], &x.row_bytes);
    ats_err e = {{0}};
    enum ats_status st = ex_tensor_check_finite(t->name, &x, threads, &e);
    if (st == ATS_OK) return ATS_OK;
    return ats_err_set(err, st == ATS_ENOMEM ? ATS_ENOMEM : ATS_EINVAL, "%s: %s (nothing written)", in, e.msg);
}

/* Tensor t of `in` as `target` (asked: the type the rules asked for, for the message) into o: rows
 * dequantized (each checked for NaN / Inf), quantized, read back (a block scale or F16 value past 65504
 * is refused). o->data new on ATS_OK. */
static enum ats_status requant_tensor(const char *in, const ex_gguf_tensor *t, ats_qtype target, ats_qtype asked,
                                      int threads, ex_gguf_out_tensor *o, ats_err *err)
{
    const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3], n = t->ne[0];
    uint64_t rb_in, rb_out;
    ats_qtype_bytes(t->type, n, &rb_in);
    ats_qtype_bytes(target, n, &rb_out);
    uint8_t *buf = malloc((size_t)(rb_out * (uint64_t)rows));
    float *row = malloc((size_t)n * sizeof(float)), *back = malloc((size_t)n * sizeof(float));
    int64_t bad_row = -1, bad_col = 0;
    enum ats_status st = ATS_OK;
    if (!buf || !row || !back) {
        st = ats_err_set(err, ATS_ENOMEM, "%s: tensor '%s': out of memory", in, t->name);
        goto fail;
    }
    for (int64_t r = 0; r < rows && bad_row < 0; r++) {
        uint8_t *q = buf + (size_t)(rb_out * (uint64_t)r);
        ex_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)(rb_in * (uint64_t)r), row, n);
        int64_t j = 0;
        while (j < n && isfinite(row[j])) j++;
        /* a NaN or Inf: the whole-tensor scan words the message */
        if (j < n && (st = refuse_non_finite(in, t, threads, err)) != ATS_OK) goto fail;
        ex_quantize_row(target, row, q, n);
        /* finite source, yet a block scale (or an F16 value) past F16's 65504 is Inf: read the row back and
           name the largest source value of the first block that did not survive */
        ex_dequantize_row(target, q, back, n);
        for (int64_t k = 0; k < n && bad_row < 0; k++)
            if (!isfinite(back[k])) {
                int64_t be = ats_qtype_block_elems(target), j0 = k / be * be;
                bad_row = r, bad_col = j0;
                for (int64_t m = j0; m < j0 + be; m++)
                    if (fabsf(row[m]) > fabsf(row[bad_col])) bad_col = m;
            }
    }
    if (bad_row >= 0) {
        char where[64] = "";
        if (t->ne[2] * t->ne[3] > 1) snprintf(where, sizeof where, "expert %lld, ", (long long)(bad_row / t->ne[1]));
        if (target == ATS_Q_F16)
            st = ats_err_set(err, ATS_EINVAL,
                             "%s: tensor '%s': %srow %lld, element %lld = %g does not fit F16 (max 65504)%s%s%s "
                             "(nothing written)",
                             in, t->name, where, (long long)(bad_row % t->ne[1]), (long long)bad_col,
                             (double)row[bad_col], asked != ATS_Q_F16 ? ", the fallback of " : "",
                             asked != ATS_Q_F16 ? ats_qtype_name(asked) : "",
                             asked != ATS_Q_F16 ? " for its row length" : "");
        else
            st = ats_err_set(err, ATS_EINVAL,
                             "%s: tensor '%s': %srow %lld, element %lld = %g does not fit %s (its block scale "
                             "overflows F16, max 65504) (nothing written)",
                             in, t->name, where, (long long)(bad_row % t->ne[1]), (long long)bad_col,
                             (double)row[bad_col], ats_qtype_name(target));
        goto fail;
    }
    free(row);
    free(back);
    o->type = target;
    o->data = buf;
    o->bytes = rb_out * (uint64_t)rows;
    return ATS_OK;
fail:
    free(buf);
    free(row);
    free(back);
    return st;
}

/* The type tensor t gets (the rules of ex/quantize.h), what was asked, whether it is a kept head; the
 * counts of rep updated for a matrix. */
static ats_qtype target_of(const ex_requant_opts *o, const ex_gguf_tensor *t, const char *head,
                           ex_requant_report *rep, ats_qtype *asked_out)
{
    ats_qtype want = o->type;
    const int head_rule = !o->pure && o->type != ATS_Q_Q8_0 && strcmp(t->name, head) == 0;
    if (head_rule) want = ATS_Q_Q6_K;
    const ats_qtype asked = *asked_out = want;
    if (want == ATS_Q_Q6_K && t->ne[0] % 256 != 0) want = ATS_Q_Q8_0; /* llama.cpp's Q6_K fallback */
    ats_qtype target = t->n_dims >= 2 ? ats_qtype_fallback(want, t->ne[0]) : t->type;
    /* an already-quantized head stays as it is: its Q6_K/Q8_0 would not win back what its quantization
       lost, only grow the file (a Q4_0 --pure head became Q8_0) */
    const int head_kept = head_rule && t->n_dims >= 2 && is_quantized(t->type) && target != t->type;
    if (head_kept) target = t->type;
    if (t->n_dims >= 2) {
        rep->n_mat++;
        rep->n_asked += target == o->type;
        if (head_kept) {
            add_kind(rep->same, &rep->n_same_kinds, asked, target, 1);
            rep->n_head_kept++;
        } else if (target != asked && target != t->type) { /* what this run changed: an F16 input stays F16 */
            add_kind(rep->fell, &rep->n_fell_kinds, asked, target, 0);
            rep->n_fell++;
        } else if (target != asked) {
            add_kind(rep->same, &rep->n_same_kinds, asked, target, 0);
        }
    }
    return target;
}

enum ats_status ex_gguf_requantize(const char *in, const char *out, const ex_requant_opts *o, ex_requant_report *rep,
                                   ats_err *err)
{
    memset(rep, 0, sizeof *rep);
    if (o->type != ATS_Q_Q8_0 && o->type != ATS_Q_Q4_0 && o->type != ATS_Q_Q4_K)
        return ats_err_set(err, ATS_EINVAL, "re-quantize: type %s (expected Q8_0, Q4_0 or Q4_K)",
                           ats_qtype_name(o->type));
    ex_gguf *g = NULL;
    if (ex_gguf_open(in, &g, err) != ATS_OK) return ATS_EINVAL;
    const int threads = n_threads(o);
    int64_t nkv = ex_gguf_n_kv(g), nt = ex_gguf_n_tensors(g), n_out_kv = 0;
    const void **kv = calloc((size_t)nkv + 1, sizeof *kv);
    size_t *kvl = calloc((size_t)nkv + 1, sizeof *kvl);
    ex_gguf_out_tensor *ot = calloc((size_t)(nt ? nt : 1), sizeof *ot);
    uint8_t ftbuf[64];
    enum ats_status st = ATS_OK;
    if (!kv || !kvl || !ot) {
        st = ats_err_set(err, ATS_ENOMEM, "re-quantize %s: out of memory", in);
        goto done;
    }
    for (int64_t i = 0; i < nkv; i++) {
        if (strcmp(ex_gguf_kv_key(g, i), "general.file_type") == 0) continue;
        ex_gguf_kv_raw(g, i, &kv[n_out_kv], &kvl[n_out_kv]);
        n_out_kv++;
    }
    kvl[n_out_kv] = ex_gguf_kv_u32(ftbuf, "general.file_type", file_type_of(o->type));
    kv[n_out_kv++] = ftbuf;
    const char *head = ex_gguf_find_tensor(g, "output.weight") ? "output.weight" : "token_embd.weight";
    rep->n_tensors = nt;
    for (int64_t i = 0; i < nt; i++) {
        const ex_gguf_tensor *t = ex_gguf_tensor_at(g, i);
        ex_gguf_out_tensor *x = &ot[i];
        ats_qtype asked;
        const ats_qtype target = target_of(o, t, head, rep, &asked);
        x->name = t->name;
        x->n_dims = t->n_dims;
        memcpy(x->ne, t->ne, sizeof x->ne);
        x->type = t->type;
        x->data = t->data;
        x->bytes = t->bytes;
        rep->bytes_in += t->bytes;
        /* a source holding NaN or Inf is refused: the quantizers would hide a NaN (the block max skips it)
           and write an Inf scale. A copied tensor is scanned whole; a re-quantized one row by row, as each
           row is dequantized anyway (the scan then only words the message) */
        if (target != t->type && t->n_dims >= 2) {
            if ((st = requant_tensor(in, t, target, asked, threads, x, err)) != ATS_OK) goto done;
            rep->n_changed++;
            if (o->on_tensor) o->on_tensor(o->ctx, t->name, t->ne, t->type, target);
        } else if ((st = refuse_non_finite(in, t, threads, err)) != ATS_OK) {
            goto done;
        }
        rep->bytes_out += x->bytes;
    }
    if ((st = ex_gguf_write(out, n_out_kv, kv, kvl, nt, ot, ex_gguf_alignment(g), err)) != ATS_OK && st != ATS_ENOMEM)
        st = ATS_EIO; /* the output, not the input */
done:
    if (ot)
        for (int64_t i = 0; i < nt; i++)
            if (ot[i].data && ot[i].data != ex_gguf_tensor_at(g, i)->data) free((void *)ot[i].data);
    free(ot);
    free(kv);
    free(kvl);
    ex_gguf_free(g);
    return st;
}
