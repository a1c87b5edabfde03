/*
 * ex/model.h — a loaded model (weights + hyper-parameters + tokenizer) and a session that runs its
 * forward pass over a KV cache, op by op, each op dispatched to a backend table.
 *
 * Architectures: "llama" (Llama-3.x, stories260K; RoPE on adjacent pairs), "qwen3" (dense, Q/K
 * norms, neox RoPE), "qwen3moe" (router top-k with softmax, routed experts, optional shared
 * experts). Weights come from a GGUF file (ex_model_load_gguf, memory-mapped, every tensor's
 * presence, shape and type checked) or are seeded random data of an architecture's exact shapes
 * and quantization recipe (ex_model_new_dummy, like vLLM's dummy load format).
 *
 * Lifecycle: model = ex_model_load_gguf(...) or ex_model_new_dummy(...); s = ex_session_new(model,
 * opts); ex_session_forward(s, tokens, n, logits) repeatedly (prefill chunks, then one token per
 * decode step); ex_session_free(s); ex_model_free(model). A model is read-only after loading and may
 * back several sessions; a session is used by one thread at a time (its ops use OpenMP inside).
 *
 * Backend hooks: a session holds one ex_backend (a named table of op functions plus a context) per
 * layer, plus one for the embedding and one for the output head; --split k puts layers [0, k) on
 * backend A and [k, n_layer) on backend B. The CPU table is ex_backend_cpu(); the CUDA table
 * (ex/gpu.h, ex_backend_cuda_new) takes the same host pointers and keeps what its ops write on the
 * device until the session asks for it (the residency hooks flush / host_wrote / forget).
 */
#ifndef EX_MODEL_H
#define EX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ats/arch.h"
#include "ats/graph.h"
#include "ats/status.h"
#include "ex/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Weights of one layer (borrowed views into the model's storage). Shapes as GGUF ne (in, out). */
typedef struct ex_layer {
    ex_tensor attn_norm;            /* (n_embd) F32 */
    ex_tensor wq, wk, wv, wo;       /* (n_embd, n_head*hd), (n_embd, n_kv*hd) x2, (n_head*hd, n_embd) */
    ex_tensor q_norm, k_norm;       /* (hd) F32; qk_norm only */
    ex_tensor ffn_norm;             /* (n_embd) F32 */
    ex_tensor ffn_gate, ffn_up, ffn_down; /* dense: (n_embd, n_ff) x2, (n_ff, n_embd) */
    ex_tensor gate_inp;             /* MoE router (n_embd, n_expert) */
    ex_tensor gate_exps, up_exps, down_exps; /* (n_embd, n_ff_exp, n_expert) x2, (n_ff_exp, n_embd, n_expert) */
    ex_tensor gate_shexp, up_shexp, down_shexp; /* (n_embd, n_ff_shexp) x2, (n_ff_shexp, n_embd) */
    int moe;                        /* 1 when this layer uses routed experts */
    int has_shexp;
} ex_layer;

/** Tokenizer (SentencePiece-style vocabulary from the GGUF, byte fallback). Opaque. */
typedef struct ex_tokenizer ex_tokenizer;

typedef struct ex_model {
    ats_arch arch;          /* hyper-parameters; family is "llama", "qwen3" or "qwen3moe" */
    int64_t n_rot;          /* rotated dims per head */
    int norm_topk;          /* MoE: renormalise the top-k weights */
    ex_tensor tok_embd;     /* (n_embd, n_vocab) */
    ex_tensor output_norm;  /* (n_embd) F32 */
    ex_tensor output;       /* (n_embd, n_vocab); == tok_embd when tied */
    ex_tensor rope_freqs;   /* (n_rot/2) F32 RoPE frequency factors (Llama-3.1); data NULL when absent */
    ex_layer *layers;       /* n_layer entries, owned */
    ex_tokenizer *tok;      /* NULL for dummy weights */
    int32_t bos_id, eos_id; /* -1 when the vocabulary has none */
    uint64_t weight_bytes;  /* Σ tensor bytes [bytes] */
    void *storage;          /* owned: the GGUF handle or the dummy buffer */
    int storage_is_gguf;
} ex_model;

/** Loads a GGUF file. Checks: architecture known, every tensor present with the expected shape
 *  and a supported type, no blk.N tensor with N >= block_count, hyper-parameters consistent
 *  (ats_arch_validate). *out is new (free with
 *  ex_model_free). ATS_EINVAL/ATS_ENOTFOUND with one line in err naming file, tensor/key, values. */
enum ats_status ex_model_load_gguf(const char *path, ex_model **out, ats_err *err);

/** Builds seeded random weights (deterministic for a seed) of `arch` with the types of `recipe`
 *  (ats_recipe_type + ats_qtype_fallback), in memory. Block scales are set so that every weight is
 *  finite and of order 1/sqrt(n_in). family must be llama, qwen3, or qwen3moe/qwen3_moe.
 *  Multi-threaded fill (OpenMP). *out is new. ATS_EINVAL (message) for an unsupported family,
 *  ATS_ENOMEM when the weights do not fit. */
enum ats_status ex_model_new_dummy(const ats_arch *arch, ats_recipe recipe, uint64_t seed,
                                   ex_model **out, ats_err *err);

void ex_model_free(ex_model *m);

/** Weight bytes one decode step reads [bytes]: every matrix once, one embedding row, and of each
 *  MoE layer's routed experts only n_expert_used / n_expert (uniform routing). The
 *  bytes-over-bandwidth floor of a decode step is this over the memory bandwidth. */
uint64_t ex_model_decode_bytes(const ex_model *m);

/**
 * Scans every weight of m (dequantized row by row, n_threads OpenMP threads) for NaN or Inf, as
 * llama.cpp's --check-tensors does: a non-finite F32/F16/BF16 value or block scale (Q8_0, Q4_0,
 * Q4_K, Q6_K d/dmin; MXFP4's E8M0 0xFF) makes its row non-finite. ATS_EINVAL naming the first such
 * tensor, its row (and expert) and element; ATS_ENOMEM; ATS_OK when all are finite. Reads every byte
 * of the weights (seconds for a 14B model).
 */
enum ats_status ex_model_check_tensors(const ex_model *m, int n_threads, ats_err *err);
/** The scan of ex_model_check_tensors for one tensor t (rows of ne[0] elements over ne[1] x ne[2];
 *  borrowed; data NULL = absent: ATS_OK), named `name` in the message: ATS_EINVAL "tensor 'NAME' (TYPE):
 *  NaN or Inf in [expert X, ]row R, element E" for the first non-finite row, ATS_ENOMEM, ATS_OK. Used
 *  by `ats quantize` on its source tensors. */
enum ats_status ex_tensor_check_finite(const char *name, const ex_tensor *t, int n_threads, ats_err *err);

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
    /* ---- F16 KV cache (optional; needed only by sessions with kv_type ATS_Q_F16) ----
       kv_store and attention over F16 slabs: k_cache / v_cache are one layer's (n_ctx, kv_dim)
       ex_fp16 caches (ex_cpu_kv_store_f16, ex_cpu_attention_f16). NULL: the backend cannot run an
       F16 session's attention (ex_session_new says so). */
    enum ats_status (*kv_store_f16)(void *ctx, const float *k, const float *v, int64_t n_tokens, int64_t pos0,
                                    int64_t kv_dim, int64_t n_ctx, ex_fp16 *k_cache, ex_fp16 *v_cache);
    enum ats_status (*attention_f16)(void *ctx, const float *q, int64_t n_tokens, int64_t pos0,
                                     const ex_fp16 *k_cache, const ex_fp16 *v_cache, int64_t n_head,
                                     int64_t n_head_kv, int64_t head_dim, float scale, float *out);
} ex_backend;

/** The CPU backend table (static, ctx NULL). */
const ex_backend *ex_backend_cpu(void);

/* ---- sessions ------------------------------------------------------------------------------ */

typedef struct ex_session_opts {
    int64_t n_ctx;          /* KV cache capacity [tokens]; 0 = min(arch n_ctx_max, 4096) */
    int64_t split_layer;    /* ops of layers [0, split) use backend_a, the rest backend_b (output norm
                               and head: the last layer's); -1 = all on backend_a */
    const ex_backend *backend_a; /* NULL = CPU */
    const ex_backend *backend_b; /* NULL = CPU */
    const ex_backend *const *op_backend; /* optional, borrowed: backend of each op of the session's
                                            graph (ex_session_graph order); NULL entries fall back
                                            to the split rule */
    int sync_ops;           /* 1: flush the op's backend after every op, so per-op wall-clock times
                               (ex_session_last_op_times, ex_session_op_ns) are the ops' real
                               durations; 0 (default): a device backend's op times are the times to
                               enqueue its work, and the wait lands in the first op after a
                               backend switch or in the forward's last op */
    ats_qtype kv_type;      /* element type of the KV cache: ATS_Q_F32 (default; exact against
                               llama2.c's F32 run) or ATS_Q_F16 (llama.cpp's default, half the bytes;
                               what sched counts); anything else: ATS_EINVAL from ex_session_new */
} ex_session_opts;

ex_session_opts ex_session_opts_default(void);

/** Wall-clock time spent per op kind in the last forward calls [ns] (accumulated). */
typedef struct ex_op_times {
    int64_t embed_ns, norm_ns, matmul_ns, attn_ns, ffn_ns, moe_ns, output_ns;
} ex_op_times;

typedef struct ex_session ex_session;

/** New session over a borrowed model (must outlive it). KV cache of opts->kv_type (F32 or F16), K
 *  and V each (n_layer, n_ctx, kv_dim) with kv_dim = n_head_kv * head_dim (ex_session_kv_bytes).
 *  With F16 every backend the session uses needs the kv_store_f16 / attention_f16 entries
 *  (ATS_EINVAL with a message naming the backend otherwise).
 *  The forward pass is a loop over the ops of sched's graph of one round (ats_graph_build, the same
 *  op indices as the simulator and the planner), each op run by its backend's table entry; the
 *  routed experts of a layer run fused at the layer's FFN_GATE_EXPS op (likewise shared experts).
 *  ATS_EINVAL (message) for an architecture with ops the executor does not implement. */
enum ats_status ex_session_new(const ex_model *m, const ex_session_opts *opts, ex_session **out,
                               ats_err *err);
void ex_session_free(ex_session *s);

/** Runs tokens (n_tokens, consecutive positions starting at ex_session_pos) through the model,
 *  appends them to the KV cache and writes the logits of the LAST token into logits (n_vocab).
 *  ATS_ERANGE (message) when pos + n_tokens > n_ctx; ATS_EINVAL for an out-of-vocabulary token. */
enum ats_status ex_session_forward(ex_session *s, const int32_t *tokens, int64_t n_tokens,
                                   float *logits, ats_err *err);

/** Tokens in the KV cache. */
int64_t ex_session_pos(const ex_session *s);
int64_t ex_session_n_ctx(const ex_session *s);
/** The KV cache's element type (ATS_Q_F32 or ATS_Q_F16, from ex_session_opts.kv_type). */
ats_qtype ex_session_kv_type(const ex_session *s);
/** Bytes of the session's KV cache, K and V of every layer at its n_ctx capacity [bytes]:
 *  2 * n_layer * n_ctx * kv_dim * (4 for F32, 2 for F16); equals ex_session_graph(s)->kv_cache_bytes. */
uint64_t ex_session_kv_bytes(const ex_session *s);
/** Accumulated per-op-kind wall-clock times since the session started. */
ex_op_times ex_session_times(const ex_session *s);
/** The session's op graph (borrowed; valid while the session lives): one decode round, each op's
 *  qtype / weight_bytes / expert_bytes those of the model's actual tensor, attention ops with qtype
 *  the session's kv_type and its KV cache bytes (kv_cache_bytes; kv_read_bytes: sched's F16 count,
 *  doubled for an F32 cache); FLOPs and activation bytes as ats_graph_build computed them. */
const ats_graph *ex_session_graph(const ex_session *s);
/** Accumulated wall-clock time of each graph op [ns] (graph->n_ops entries, borrowed). */
const int64_t *ex_session_op_ns(const ex_session *s);
/** The backend table graph op i runs on (borrowed; NULL for i outside [0, n_ops)). */
const ex_backend *ex_session_op_backend(const ex_session *s, int32_t i);
/** Start and end of each graph op in the last ex_session_forward [ns of CLOCK_MONOTONIC]
 *  (graph->n_ops entries each, borrowed; valid until the next forward). */
void ex_session_last_op_times(const ex_session *s, const int64_t **t_start_ns, const int64_t **t_end_ns);

#ifdef __cplusplus
}
#endif
#endif
