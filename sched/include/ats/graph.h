/*
 * ats/graph.h — the op graph of one round (one prefill chunk or one decode step, batch size 1).
 *
 * An ats_graph is the ordered list of ops that consume a weight tensor or the KV cache, in
 * execution order: token embedding; per layer attention norm, Q, K, V, attention over the KV cache,
 * O, [post-attention norm], FFN norm, then gate/up/down (dense) or router, routed-expert gate/up/down
 * and shared-expert gate/up/down (MoE), [post-FFN norm]; output norm and output head.
 * Every op knows its bytes (exact at its quantization type), its FLOPs for this round, the bytes of
 * activations it reads and writes, and the KV-cache bytes it reads.
 *
 * Lifecycle: ats_graph_build() allocates; ats_graph_free() frees. The graph is immutable afterwards
 * and may be shared read-only between threads. Both the simulator and the executor build their
 * graphs with this one function, so op i means the same tensor on both sides.
 */
#ifndef ATS_GRAPH_H
#define ATS_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include "ats/arch.h"
#include "ats/quant.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ats_op_kind {
    ATS_OP_EMBED = 0, /* token embedding lookup: reads n_tokens rows of token_embd */
    ATS_OP_NORM,      /* RMSNorm with a weight vector */
    ATS_OP_MATMUL,    /* y = W x (+ b): Q, K, V, O, dense gate/up/down, router, output head */
    ATS_OP_ATTN,      /* RoPE, q/k norm, softmax(q k^T / sqrt(d)) v over the KV cache */
    ATS_OP_EXPERTS,   /* routed experts of one role in one layer (gate, up or down) */
    ATS_OP_SHEXP,     /* shared experts of one role in one layer */
    ATS_OP_KIND_COUNT
} ats_op_kind;

typedef enum ats_phase_kind { ATS_PHASE_PREFILL = 0, ATS_PHASE_DECODE = 1 } ats_phase_kind;

/** The round a graph describes. */
typedef struct ats_phase {
    ats_phase_kind kind;
    int64_t n_tokens; /* tokens in this round: the chunk size for prefill, 1 for decode */
    int64_t ctx_pos;  /* tokens already in the KV cache before this round (decode: L - 1 for a
                         step at context length L) */
} ats_phase;

/** One op. Sizes in bytes, work in FLOPs (multiply-add = 2 FLOPs). */
typedef struct ats_op {
    ats_op_kind kind;
    ats_role role;
    int32_t layer;            /* 0-based layer; -1 for embedding, output norm and output head */
    ats_qtype qtype;          /* type of the weight (F32 for norms, F16 for the KV cache of ATTN) */
    int64_t n_out, n_in;      /* weight shape (rows = outputs, cols = inputs) of one matrix; for
                                 EXPERTS/SHEXP of one expert; 0 for ATTN */
    uint64_t weight_bytes;    /* all weight bytes of the op (all experts for EXPERTS), biases incl. */
    double n_params;          /* weight elements of the op (all experts), biases incl. [parameters] */
    double flop;              /* FLOPs this round [FLOP] */
    uint64_t act_in_bytes;    /* F32 activations read this round [bytes] */
    uint64_t act_out_bytes;   /* F32 activations written this round [bytes] */
    uint64_t kv_read_bytes;   /* KV-cache bytes read this round (ATTN) [bytes] */
    uint64_t kv_cache_bytes;  /* KV-cache bytes of this layer at the graph's configured context
                                 length (ATTN; the placement item that pins attention) [bytes] */
    int32_t n_expert;         /* EXPERTS/SHEXP: experts in the op */
    double n_expert_active;   /* EXPERTS: expected distinct experts touched this round (uniform
                                 routing: E·(1-(1-k/E)^N)); SHEXP: n_expert */
    uint64_t expert_bytes;    /* EXPERTS/SHEXP: bytes of one expert's matrix (incl. bias) */
    int32_t router;           /* EXPERTS: index of this layer's router op; 0 when !has_router */
    uint8_t has_router;       /* 1: router is an op (EXPERTS ops of ats_graph_build graphs) */
    char name[48];            /* GGUF tensor name, e.g. "blk.3.attn_q.weight", "blk.3.attn" */
} ats_op;

typedef struct ats_graph {
    ats_arch arch;         /* copy of the architecture */
    ats_recipe recipe;
    ats_phase phase;
    int64_t n_ctx;         /* configured context length (KV cache capacity) [tokens] */
    int32_t n_ops;
    ats_op *ops;           /* owned; n_ops entries in execution order */
    uint64_t weight_bytes; /* Σ weight_bytes */
    uint64_t kv_cache_bytes; /* Σ kv_cache_bytes */
} ats_graph;

/**
 * The routing of one round (MoE). All pointers borrowed.
 * n_selected[i]: distinct experts selected this round by op i's router (EXPERTS ops; other entries
 * ignored). ids/ids_off: optional CSR of the selected expert ids (ids_off has n+1 entries; op i's
 * ids are ids[ids_off[i] .. ids_off[i+1]) ); NULL when only counts are known.
 */
typedef struct ats_routing {
    int32_t n;
    const double *n_selected;
    const int32_t *ids_off;
    const int32_t *ids;
} ats_routing;

/**
 * Bytes that move host→device when op i is promoted this round [bytes]: weight_bytes, or for
 * EXPERTS n_selected (routing) or ceil(n_expert_active) experts × expert_bytes, or for ATTN the
 * layer's KV cache (kv_cache_bytes; moved only under ats_transfer_opts.promote_kv). Shared by the
 * transfer DPs (transfer.c) and plan building (plan.c), so it lives with the graph: calls point one
 * way, transfer → plan → graph.
 */
uint64_t ats_op_xfer_bytes(const ats_graph *g, const ats_routing *routing, int32_t i);

/**
 * Temp bytes a promoted op i holds [bytes]: ats_op_xfer_bytes, except for EXPERTS without a routing
 * count, where the round's router may select more experts than the expected ceil(n_expert_active):
 * there the most it can select, min(n_expert, n_tokens·n_expert_used) experts × expert_bytes, so the
 * executor's compact copy of the chosen experts always fits its slot. Decode (1 token): the same.
 */
uint64_t ats_op_slot_bytes(const ats_graph *g, const ats_routing *routing, int32_t i);

/** Options of ats_graph_build. */
typedef struct ats_graph_opts {
    ats_recipe recipe; /* quantization recipe */
    ats_phase phase;   /* the round */
    int64_t n_ctx;     /* KV cache capacity [tokens]; 0 = ctx_pos + n_tokens */
    const ats_qtype *tensor_types; /* NULL: types from `recipe`; else the type of every weight tensor
                                      as a file has it (borrowed, ats_tensor_types_len(n_layer)
                                      entries at ats_tensor_type_index): used as given, no fallback */
} ats_graph_opts;

/** Entries of a tensor-type table for `n_layer` layers: (n_layer + 1) × ATS_ROLE_COUNT. */
size_t ats_tensor_types_len(int64_t n_layer);
/** Index of (role, layer) in a tensor-type table; layer -1 (embedding, output) is row 0. */
size_t ats_tensor_type_index(ats_role role, int32_t layer);

/** Defaults: arch's default recipe is not known here, so Q4_K_M; decode at ctx_pos 2047; n_ctx 0;
 *  no tensor-type table. */
ats_graph_opts ats_graph_opts_default(void);

/**
 * Builds the graph of one round. `arch` is borrowed (copied). `*out` is new; free it with
 * ats_graph_free(). ATS_EINVAL (message in err) when the arch is invalid, n_tokens < 1, ctx_pos < 0,
 * or a tensor's row width does not divide into blocks of its type after fallback.
 * Formulas: matmul FLOPs 2·N·n_out·n_in; attention FLOPs 4·N·n_head·head_dim·(ctx_pos + (N+1)/2)
 * (causal, windowed where the layer slides); routed experts 2·N·k·(n_out·n_in).
 * Thread-safe (no shared state).
 */
enum ats_status ats_graph_build(const ats_arch *arch, const ats_graph_opts *opts, ats_graph **out,
                                ats_err *err);

/** Frees a graph (NULL is fine). */
void ats_graph_free(ats_graph *g);

/** Number of ops per layer of layer `l` (for tests and inspect). */
int ats_graph_ops_in_layer(const ats_graph *g, int32_t l);

/** The first op of op i's fused group: the executor's session runs a layer's routed experts (gate,
 *  up, down: FFN_GATE_EXPS, FFN_UP_EXPS, FFN_DOWN_EXPS) as one op at FFN_GATE_EXPS, and its shared
 *  experts (FFN_GATE_SHEXP, FFN_UP_SHEXP, FFN_DOWN_SHEXP) as one op at FFN_GATE_SHEXP, reading all
 *  three weights there. Policies keep a group on one backend, all resident or all promoted, and a
 *  plan moves a promoted group's weights before its first op (exec/README.md "Plans"). i itself
 *  when op i is in no group. */
int32_t ats_op_fused_head(const ats_graph *g, int32_t i);

/** Static spelling of an op kind ("matmul", "attn", …). */
const char *ats_op_kind_name(ats_op_kind k);

#ifdef __cplusplus
}
#endif
#endif
