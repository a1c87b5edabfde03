/*
 * ats/policy.h — scheduling policies: a named table of function pointers plus a context (STYLE.md).
 *
 * The simulator and the executor look a policy up by name and drive it the same way:
 *   ats_policy *pol; ats_policy_new("ats", &cfg, &pol, &err);
 *   ats_policy_place(pol, g_decode, nominal, &placement, &err);          once, before the run
 *   per round: ats_policy_assign(pol, g_round, &placement, cur, &ctx, &asg, &err);
 *              ats_policy_plan(pol, g_round, &placement, &asg, cur, &ctx, &plan, &err);
 *   ats_policy_free(pol);
 * (or let the controller, controller.h, decide when to re-assign). Op i means the same tensor in the
 * prefill and decode graphs of a model, so one placement serves every round.
 *
 * Policies ("ats_policy_names()" lists them):
 *  layer            llama.cpp -ngl: whole layers on the GPU as fit (KV cache included), the output
 *                   head (and output norm) first, then the last layers, going down; nothing promoted.
 *  layer-opoffload  layer + llama.cpp's prefill rule: rounds with ≥ opoffload_min_tokens tokens
 *                   copy CPU-resident MATMUL/EXPERTS/SHEXP weights to the GPU and run them there,
 *                   serialized (plan R7); activations over the copy engine.
 *  expert           KTransformers: every non-expert op (incl. KV cache) on the GPU, routed experts
 *                   on the CPU; ATS_EINFEASIBLE when the non-expert part does not fit.
 *  gpu-stream       FlexGen/vLLM-style offload: every op runs on the GPU; residency chosen by the
 *                   placement DP with r_i = w_i (transfer time saved); the rest streamed every round
 *                   through the temp ring.
 *  static           ATS static placement (Algorithm 1), no dynamic transfer.
 *  static-opoffload static placement + layer-opoffload's prefill rule (same temp ring), but the
 *                   plan overlaps the weight copies with compute (not serialized), activations by
 *                   SM copy kernels: the paper's Fig. 15 "+TP+AC"; with the simulator's
 *                   --serialized --act-path ce it is "+TP" (llama.cpp's execution, ATS placement).
 *  ats-paper        static placement + Algorithm 2 exactly (transfer.h model P) each (re)schedule.
 *  ats              static placement + model A (transfer.h): copy-engine queue, prefetch, router
 *                   release, host-memory interference, temp capacity; in prefill rounds attention
 *                   ops may be promoted with their KV cache (promote_kv_prefill). The placement is
 *                   made from the decode round (the sim and exec pass the decode graph), where a KV
 *                   cache is cheap to read from host memory, so every KV cache may stay on the CPU;
 *                   in long prefill chunks attention is compute-bound, and moving the cache for the
 *                   round (kv_cache_bytes / B_pcie) costs far less than CPU attention.
 *                   Placed for a request with a prefill, also a decode placement in the ring's
 *                   front (ats_policy_decode_placement) where its model predicts a faster decode.
 * Every policy except the ATTN pinning respects the VRAM budget: resident bytes ≤ budget − temp.
 */
#ifndef ATS_POLICY_H
#define ATS_POLICY_H

#include <stdint.h>
#include "ats/costs.h"
#include "ats/graph.h"
#include "ats/placement.h"
#include "ats/plan.h"
#include "ats/status.h"
#include "ats/transfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Configuration shared by all policies. */
typedef struct ats_policy_cfg {
    uint64_t vram_budget_bytes;  /* M: resident weights + KV caches + temp ring [bytes]; > 0 */
    uint64_t temp_bytes;         /* temp ring for promoted weights [bytes]; 0 = automatic:
                                    ats / ats-paper try {0, 2 × the largest movable op, M/16, M/8,
                                    M/4} and keep the lowest predicted latency of the placement
                                    graph; layer-opoffload and static-opoffload take the
                                    largest whole MATMUL/EXPERTS/SHEXP weight (one copy at a time,
                                    like llama.cpp's compute buffer), gpu-stream max(2 × the
                                    largest movable op, M/8), both capped at M/2; the others 0 */
    uint64_t quantum_bytes;      /* placement DP unit [bytes]; default 1 MiB */
    int64_t opoffload_min_tokens;/* layer-opoffload: prefill rounds with ≥ this many tokens offload
                                    (llama.cpp default 32) */
    int n_copy_engines;          /* default 1 (consumer RTX); ats/ats-paper plans use engine 0 */
    double hostmem_cpu_factor;   /* model A R6 factor, (0,1]; default 1; set from ats_hw */
    int moe_partition;           /* static placement: Algorithm 1 partition (default 1) */
    int promote_kv_prefill;      /* ats: in prefill rounds ATTN ops are promotable with their KV
                                    cache (transfer.h promote_kv); default 1 (prefill 1.34-1.75x over
                                    layer-opoffload, experiments/paper-check §2); 0: attention
                                    stays where the placement put it */
} ats_policy_cfg;

ats_policy_cfg ats_policy_cfg_default(void);

/** What one round needs besides the costs. */
typedef struct ats_round_ctx {
    const ats_routing *routing;  /* borrowed; NULL = expected routing */
    double prefetch_lead_s;      /* decode only: copy-engine idle tail of the previous round [s];
                                    0 = no prefetch (prefill, first round) */
} ats_round_ctx;

static inline ats_round_ctx ats_round_ctx_default(void)
{
    ats_round_ctx c = {0, 0.0};
    return c;
}

typedef struct ats_policy ats_policy;

/** The function table of one policy. `self` is the policy handle (its cfg and context). */
typedef struct ats_policy_ops {
    const char *name;
    const char *summary;
    int dynamic;                 /* 1: assignment depends on the current costs (re-run by the
                                    controller); 0: fixed per phase */
    ats_act_path act_path;       /* how its plans move activations */
    enum ats_status (*place)(ats_policy *self, const ats_graph *g, const ats_costs *nominal,
                             ats_placement *out, ats_err *err);
    enum ats_status (*assign)(ats_policy *self, const ats_graph *g, const ats_placement *p,
                              const ats_costs *cur, const ats_round_ctx *ctx, ats_assignment *out,
                              ats_err *err);
} ats_policy_ops;

/** Looks a policy up by name. ATS_ENOTFOUND for unknown names (out untouched). */
enum ats_status ats_policy_find(const char *name, const ats_policy_ops **out);
/** Comma-separated list of policy names, for help text (static string). */
const char *ats_policy_names(void);

/**
 * New policy handle: looks `name` up and copies `cfg`. *out is new; free with ats_policy_free().
 * ATS_ENOTFOUND (message lists the names), ATS_EINVAL (budget 0, factor outside (0,1], quantum 0,
 * n_copy_engines < 1), ATS_ENOMEM. Handles are independent; one handle is not thread-safe.
 */
enum ats_status ats_policy_new(const char *name, const ats_policy_cfg *cfg, ats_policy **out,
                               ats_err *err);
void ats_policy_free(ats_policy *pol);
const ats_policy_ops *ats_policy_get_ops(const ats_policy *pol);
const ats_policy_cfg *ats_policy_get_cfg(const ats_policy *pol);

/**
 * Static placement (once). `nominal` borrowed (n = g->n_ops, validated); `out` initialised with
 * n = g->n_ops. Also fixes the temp capacity the handle uses afterwards (ats_policy_temp_bytes).
 * ATS_EINVAL (empty graph, bad costs), ATS_EINFEASIBLE (e.g. `expert` when non-experts do not fit).
 */
enum ats_status ats_policy_place(ats_policy *pol, const ats_graph *g, const ats_costs *nominal,
                                 ats_placement *out, ats_err *err);

/** The request a placement is made for (ats_policy_place_request). Borrowed pointers. */
typedef struct ats_request_shape {
    const ats_graph *g_prefill;  /* a prefill round (its first chunk), same ops as the decode graph */
    const ats_costs *c_prefill;  /* its nominal costs (n = g_prefill->n_ops) */
    double n_prefill;            /* prefill rounds of a request (prompt / chunk, rounded up), >= 0 */
    double n_decode;             /* decode rounds of a request, >= 0 */
} ats_request_shape;

/**
 * ats_policy_place for a request shape: where the policy chooses its temp ring automatically
 * (ats, ats-paper with cfg.temp_bytes 0), the candidate that minimises the request's predicted time
 * n_prefill × (prefill round) + n_decode × (decode round) wins, instead of the decode round's alone.
 * A ring sized for decode can be 0 (everything resident that fits, as `static`), which leaves a
 * prefill nothing to stream through: Qwen3-30B-A3B at 9.5 GiB on h200-host kept 27 layers of routed
 * experts on the CPU for a 512-token prefill. req NULL (or no prefill graph): ats_policy_place.
 * ATS_EINVAL for a prefill graph with another op count or costs of another size.
 */
enum ats_status ats_policy_place_request(ats_policy *pol, const ats_graph *g, const ats_costs *nominal,
                                         const ats_request_shape *req, ats_placement *out, ats_err *err);

/** Temp ring capacity chosen at placement [bytes] (0 before ats_policy_place). */
uint64_t ats_policy_temp_bytes(const ats_policy *pol);

/**
 * The decode placement of `ats` placed by ats_policy_place_request for a request with a prefill and
 * decode rounds (automatic ring): decode rounds stream far less than prefill chunks, so the front of
 * the temp ring, [0, *ring_base), holds more resident weights from a request's first decode round
 * to its next prefill round (ats_place_extend: a superset of the placement; weights only, no KV
 * cache), and decode plans use the ring [*ring_base, temp_bytes) (at least an eighth of the ring),
 * their slot offsets relative to *ring_base. Chosen when ats's model predicts a faster decode round,
 * its upload spread over the request's decode rounds included, than with the whole ring.
 * NULL (and *ring_base 0) when decode rounds use the placement itself. The caller runs decode
 * rounds on it (controller, plans), uploads its extra weights (GPU here, CPU in the placement) before
 * the first decode round after a prefill, packed in op order, each in at most its whole quanta
 * (cfg.quantum_bytes), and drops them at the next prefill. Borrowed: valid until the next place or
 * ats_policy_free.
 */
const ats_placement *ats_policy_decode_placement(const ats_policy *pol, uint64_t *ring_base);

/**
 * Per-round assignment. `cur`: current costs (load-scaled, routing applied with ats_costs_route);
 * ctx may be NULL (defaults). `out` initialised with n = g->n_ops; its serialized flag says whether
 * the plan runs without overlap. ATS_EINVAL on mismatched sizes / bad costs.
 */
enum ats_status ats_policy_assign(ats_policy *pol, const ats_graph *g, const ats_placement *p,
                                  const ats_costs *cur, const ats_round_ctx *ctx,
                                  ats_assignment *out, ats_err *err);

/** Builds the plan of an assignment with the policy's temp capacity, copy engines, activation
 *  path and the ctx's routing / prefetch lead (ats_plan_build). */
enum ats_status ats_policy_plan(ats_policy *pol, const ats_graph *g, const ats_placement *p,
                                const ats_assignment *a, const ats_costs *cur,
                                const ats_round_ctx *ctx, ats_plan *out, ats_err *err);

/** Predict options matching the policy (hostmem factor from cfg, prefetch lead from ctx). */
ats_predict_opts ats_policy_predict_opts(const ats_policy *pol, const ats_round_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
