/*
 * ex/backend.h — a backend: the named table of ex/ops.h's ops (same arguments on every backend) plus
 * its context. The runtime (ex/session.h) dispatches each op of a round to the table of the backend
 * the op is assigned to. ex_backend_cpu() is the CPU table (kernels/cpu); the CUDA table is made by
 * ex_backend_cuda_new (ex/gpu.h) and keeps what its ops write on the device until the runtime asks
 * for it (the residency hooks flush / host_wrote / forget, exec/README.md "Residency").
 *
 * Lifecycle: the CPU table is static; a device table is created over a device handle, used by any
 * number of sessions one after another, and freed after the last session that uses it.
 */
#ifndef EX_BACKEND_H
#define EX_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ats/status.h"
#include "ex/ops.h"

#ifdef __cplusplus
extern "C" {
#endif
/* ---- backends ----------------------------------------------------------------------------- */

/** A backend: a named table of the ops of ex/ops.h with the same arguments, plus its context.
 *  The session passes host pointers (weights in the model's storage, activations and KV cache in
 *  the session); a device backend mirrors or copies what it needs. Every entry returns an
 *  ats_status. Fill entries by name: fields may be added. */
typedef struct ex_backend {
    const char *name;
    void *ctx;
    enum ats_status (*embedding)(void *ctx, const ex_tensor *tok_embd, const int32_t *tokens,
                                 int64_t n_tokens, float *x);
    enum ats_status (*rmsnorm)(void *ctx, const float *x, const float *w, int64_t n_rows, int64_t n,
                               float eps, float *y);
    enum ats_status (*matmul)(void *ctx, const ex_tensor *w, const float *x, int64_t n_tokens, float *y);
    enum ats_status (*qk_norm)(void *ctx, float *x, const float *w, int64_t n_tokens, int64_t n_head,
                               int64_t head_dim, float eps);
    enum ats_status (*rope)(void *ctx, float *x, int64_t n_tokens, int64_t n_head, int64_t head_dim,
                            int64_t n_rot, int64_t pos0, float theta, ats_rope_type type);
    enum ats_status (*kv_store)(void *ctx, const float *k, const float *v, int64_t n_tokens, int64_t pos0,
                                int64_t kv_dim, int64_t n_ctx, float *k_cache, float *v_cache);
    enum ats_status (*attention)(void *ctx, const float *q, int64_t n_tokens, int64_t pos0,
                                 const float *k_cache, const float *v_cache, int64_t n_head,
                                 int64_t n_head_kv, int64_t head_dim, float scale, float *out);
    enum ats_status (*add)(void *ctx, float *y, const float *x, int64_t n);
    /* optional: RoPE with frequency factors (models with rope_freqs); NULL runs ex_cpu_rope_ff on the
       (host) pointers */
    enum ats_status (*rope_ff)(void *ctx, float *x, int64_t n_tokens, int64_t n_head, int64_t head_dim,
                               int64_t n_rot, int64_t pos0, float theta, ats_rope_type type,
                               const float *freq_factors);
    /* optional: NULL runs ex_cpu_swiglu on the (host) pointers, for tables over host memory */
    enum ats_status (*swiglu)(void *ctx, const float *gate, const float *up, int64_t n, float *out);
    enum ats_status (*ffn)(void *ctx, const ex_tensor *gate, const ex_tensor *up, const ex_tensor *down,
                           const float *x, int64_t n_tokens, float *out);
    enum ats_status (*router_topk)(void *ctx, const float *logits, int64_t n_tokens, int64_t n_expert,
                                   int64_t k, int norm_topk, int32_t *ids, float *weights);
    enum ats_status (*moe)(void *ctx, const ex_tensor *gate_exps, const ex_tensor *up_exps,
                           const ex_tensor *down_exps, const float *x, int64_t n_tokens,
                           const int32_t *ids, const float *weights, int64_t k, float *out);
    enum ats_status (*output)(void *ctx, const ex_tensor *w_out, const float *x, int64_t n_tokens,
                              float *logits);
    /* ---- residency (optional; NULL for tables that work on host memory, like the CPU's) ----
       A device backend may keep the activations its ops write on the device instead of copying
       them back after every op. The session (exec/README.md "Residency") then calls: */
    /** Every activation this backend wrote since its last flush is in host memory when this
     *  returns (copies back, then waits); with_kv != 0 also brings back the KV-cache rows it
     *  wrote (kv_store), otherwise those may stay newer on the device. Called when the next op
     *  runs on another backend (with_kv only when that op is the attention of a layer whose KV
     *  rows this backend wrote), at the end of every ex_session_forward and on its error returns,
     *  and after every op with ex_session_opts.sync_ops. ATS_OK, or the device failure's status. */
    enum ats_status (*flush)(void *ctx, int with_kv);
    /** Host activation buffers may have changed since this backend's last op (another backend or
     *  a host fallback ran): forget cached device copies of activations (not weights, not KV rows:
     *  those only grow, see kv_store). Called before the first op of a run of ops on this backend. */
    void (*host_wrote)(void *ctx);
    /** Host bytes [host, host + bytes) are about to be freed (session scratch reallocated, session
     *  freed): drop every cached copy and pending write-back inside them, never copy into them.
     *  (So a session must be freed before the backends it uses.) */
    void (*forget)(void *ctx, const void *host, size_t bytes);
    /** [host, host + bytes) leaves the device: the bytes this backend wrote inside it (KV rows or
     *  activations) are copied back to host memory first (waited for), then its device copies are
     *  freed. Nothing else is copied back: other activations stay newer on the device. The plan
     *  executor calls it on a promoted attention's KV slab after that attention (cheaper than
     *  flush(ctx, 1), which copies every activation back). NULL: the caller flushes with_kv, then
     *  forgets. ATS_OK, or the device failure's status. */
    enum ats_status (*evict)(void *ctx, const void *host, size_t bytes);
    /* ---- F16 KV cache (optional; needed only by sessions with kv_type ATS_Q_F16) ----
       kv_store and attention over F16 slabs: k_cache / v_cache are one layer's (n_ctx, kv_dim)
       ex_fp16 caches (ex_cpu_kv_store_f16, ex_cpu_attention_f16). NULL: the backend cannot run an
       F16 session's attention (ex_session_new says so). */
    enum ats_status (*kv_store_f16)(void *ctx, const float *k, const float *v, int64_t n_tokens, int64_t pos0,
                                    int64_t kv_dim, int64_t n_ctx, ex_fp16 *k_cache, ex_fp16 *v_cache);
    enum ats_status (*attention_f16)(void *ctx, const float *q, int64_t n_tokens, int64_t pos0,
                                     const ex_fp16 *k_cache, const ex_fp16 *v_cache, int64_t n_head,
                                     int64_t n_head_kv, int64_t head_dim, float scale, float *out);
    /* ---- weights at runtime-given addresses (optional; ex/runtime.h, exec/README.md "Plans") ----
       The plan executor keeps weights in its own device memory: a resident region uploaded before
       the run and temp slots its transfer stream fills. It tells the table where a weight is: */
    /** From now on the weight whose host bytes are [host, host + bytes) is at device address `dev`
     *  (borrowed; the runtime's resident region or a temp slot, bytes long): ops read it there and
     *  never upload or free it. dev NULL removes the binding. ATS_ENOMEM, ATS_OK. */
    enum ats_status (*bind_weight)(void *ctx, const void *host, size_t bytes, void *dev);
    /** on != 0: a weight without a binding is an error (ATS_EINVAL from the op) instead of an
     *  upload at first use, so the runtime's VRAM budget bounds every weight byte on the device. */
    void (*bound_only)(void *ctx, int on);
} ex_backend;

/** The CPU backend table (static, ctx NULL). */
const ex_backend *ex_backend_cpu(void);

#ifdef __cplusplus
}
#endif
#endif
