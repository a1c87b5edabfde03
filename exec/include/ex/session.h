/*
 * ex/session.h — the runtime of one model: a session holds the KV cache and scratch of a model and runs
 * its forward pass over sched's op graph of a round (ats_graph_build: the same op indices as the
 * simulator and the planner), each op dispatched to the backend table (ex/backend.h) it is assigned to.
 *
 * Lifecycle: s = ex_session_new(model, opts); ex_session_forward(s, tokens, n, logits) repeatedly
 * (prefill chunks, then one token per decode step); ex_session_free(s) before the model and before the
 * backends it uses. A session is used by one thread at a time (its ops use OpenMP inside).
 */
#ifndef EX_SESSION_H
#define EX_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "ats/graph.h"
#include "ats/status.h"
#include "ex/backend.h"
#include "ex/model.h"

#ifdef __cplusplus
extern "C" {
#endif
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
    /* Optional: pins host buffers the backends copy to and from (the activation scratch, one
       allocation, and the K and V caches) so a device's copies of them are asynchronous DMA instead
       of staged pageable copies; returns 0 when done. A refusal is not an error (the buffer stays
       pageable; ex_session_pinned tells). unpin(pin_ctx, host) is called before a pinned buffer is
       freed. The CUDA backend's copies at a backend switch then queue without a wait each; every
       host write to these buffers follows a flush (the session's protocol), so none races a copy. */
    int (*pin)(void *pin_ctx, void *host, size_t bytes);
    void (*unpin)(void *pin_ctx, void *host);
    void *pin_ctx;
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
/** Allocates the scratch buffers for forwards of up to n_tokens now (else the first forward of
 *  more tokens than before does), pinned where opts->pin is given. ATS_EINVAL for n_tokens outside
 *  [1, n_ctx] (no forward has more), ATS_ENOMEM when refused. */
enum ats_status ex_session_reserve(ex_session *s, int64_t n_tokens);

/** Host bytes the session asked opts->pin to pin (*asked) and those it pinned (*pinned). */
void ex_session_pinned(const ex_session *s, size_t *asked, size_t *pinned);

/** The KV capacity a session over m with opts gets [tokens]: opts->n_ctx, else the model's context up
 *  to 4096 (opts NULL: the defaults). */
int64_t ex_session_ctx_of(const ex_model *m, const ex_session_opts *opts);
int64_t ex_session_n_ctx(const ex_session *s);
/** Empties the KV cache: the next forward starts at position 0 (a new request over the same
 *  session; `ats profile` times rounds from position 0 this way). A device backend keeps its copy of
 *  the KV slabs of the layers it appended last (it rewrites them from row 0: no reallocation while it
 *  keeps running them) and drops every other copy now (its `forget` entry); when another backend
 *  later runs such a layer's attention, the old appender flushes and drops its copy first. */
void ex_session_clear(ex_session *s);
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
 *  (graph->n_ops entries each, borrowed; valid until the next forward). The start is when the
 *  op's backend call began: a wait for the previous backend (its flush) and the hook's work before
 *  the op are not the op's time (ex_session_op_ns counts them). */
void ex_session_last_op_times(const ex_session *s, const int64_t **t_start_ns, const int64_t **t_end_ns);
/** The host's work before each op's backend call in the last forward [ns of CLOCK_MONOTONIC]:
 *  t_in[i] when the session took op i up, t_sw[i] when the backend switch before it (the previous
 *  backend's flush, KV rows coming back) had ended; [t_sw, t_start) is the hook's work (the plan
 *  executor issuing transfers). Borrowed, valid until the next forward. */
void ex_session_last_op_host(const ex_session *s, const int64_t **t_in_ns, const int64_t **t_sw_ns);

/* ---- hooks of the plan executor (ex/runtime.h) --------------------------------------------- */

/** Sets the backend of graph op i for the next forward calls (the plan of a round; i in
 *  [0, n_ops), be borrowed and outliving the session). The residency protocol (flush at a
 *  backend change) holds across the change. ATS_EINVAL for i out of range or be NULL. */
enum ats_status ex_session_set_op_backend(ex_session *s, int32_t i, const ex_backend *be);

/** Called by ex_session_forward around every graph op: after = 0 before op i runs (after the
 *  residency switch: the previous backend's writes are in host memory when i's backend differs),
 *  after = 1 once its backend calls returned. A status other than ATS_OK stops the forward with
 *  that status (message from the hook's err). */
typedef enum ats_status (*ex_session_hook)(void *user, int32_t op, int after, ats_err *err);
/** Installs (hook NULL: removes) the op hook; user borrowed. */
void ex_session_set_hook(ex_session *s, ex_session_hook hook, void *user);

/** Graph of one round of this session's model (phase kind, n_tokens, ctx_pos) with the op sizes
 *  of the session's graph (the model's real tensor types and KV cache): the graph the scheduler
 *  plans a round on. Same ops in the same order as ex_session_graph. *out new (ats_graph_free).
 *  ATS_EINVAL / ATS_ENOMEM from ats_graph_build. */
enum ats_status ex_session_round_graph(const ex_session *s, ats_phase_kind kind, int64_t n_tokens,
                                       int64_t ctx_pos, ats_graph **out, ats_err *err);

/** The weight bytes graph op i reads on a device: *host = start of its host bytes, *bytes their
 *  length (all experts for routed experts; NULL / 0 for attention, whose data is the KV cache). */
void ex_session_op_weight(const ex_session *s, int32_t i, const void **host, size_t *bytes);

/** Host KV cache of layer `layer`: K and V slabs (n_ctx rows of the session's kv_type each, *bytes
 *  bytes each; borrowed). NULL / 0 for a layer out of range. */
void ex_session_kv_layer(const ex_session *s, int64_t layer, void **k, void **v, size_t *bytes);

/** The routed-expert ids of the last router op that ran (host buffer (n_tokens, k), borrowed):
 *  valid once that router ran on the CPU or its backend flushed (exec/README.md "Residency"). */
void ex_session_router_ids(const ex_session *s, const int32_t **ids, int64_t *n_tokens, int64_t *k);

/** The next run of layer `layer`'s fused routed experts reads only the experts with
 *  slot_of[e] >= 0 (n_expert entries, copied), laid out compactly: its expert tensors are views
 *  with n_sel experts (same host data pointers, which the device table binds to the compact copy)
 *  and each id e is replaced by slot_of[e] (an id with slot_of -1: ATS_EINVAL from that op).
 *  One-shot: cleared when the layer's experts ran. slot_of NULL clears it. ATS_EINVAL (layer out
 *  of range, n_sel < 1), ATS_ENOMEM. */
enum ats_status ex_session_set_expert_map(ex_session *s, int64_t layer, const int32_t *slot_of, int64_t n_sel);

#ifdef __cplusplus
}
#endif
#endif
