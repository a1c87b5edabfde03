/*
 * ats/placement.h — static tensor placement (paper §4.3, Algorithm 1).
 *
 * A placement is the default backend of every op's tensor: GPU-resident (kept in VRAM for the whole
 * run) or CPU (pinned host memory; may still be promoted per round by dynamic transfer, transfer.h).
 * It is computed once, from the graph, a nominal cost snapshot and the part of the VRAM budget that
 * is reserved for residency. The item of op i has size s_i = weight_bytes + kv_cache_bytes: the KV
 * cache of a layer is attached to its ATTN op, so attention runs where its KV cache lives.
 *
 * Objective (§4.3.2): maximize Σ r_i·[b_i = GPU] − Σ_{i≥1} c_i·[b_i ≠ b_{i−1}] subject to
 * Σ s_i·[b_i = GPU] ≤ M, with r_i = t_cpu_i − t_gpu_i. Sizes are rounded UP and M DOWN to whole
 * quanta (default 1 MiB), so a placement is never over budget in real bytes. The solver is a DP over
 * (op, memory units used, last backend) with backtracking: O(n·M/q) time, O(n·M/q) bytes of
 * backtracking bits (2 per state), O(M/q) doubles of DP state.
 * MoE graphs use Algorithm 1's expert / non-expert partition (EXPERTS ops are "expert", everything
 * else, including shared experts, "non-expert"); switch penalties are still counted over the whole
 * op sequence (the other group is fixed, not removed).
 *
 * A session's mix of rounds (experiments/paper-check §5 measures it). The objective is linear in
 * the costs, so placing for a weighted mix of round shapes k (each prefill chunk, each decode step)
 *     maximize Σ_k n_k·(Σ_i r_i^k·[b_i = GPU] − Σ_i c_i^k·[b_i ≠ b_{i−1}])
 * is the same DP on one snapshot whose fields are Σ_k n_k·x^k (ats_placement_mix_costs). With n_k =
 * the number of rounds of shape k in a session (1 per chunk and per decode step when every round is
 * its own shape), the objective is the session time the placement saves over all-CPU, in seconds,
 * to the extent that a round's latency is the sum of its ops' times and switches (the placement
 * model of §4.3.2). Pass the mixed snapshot to ats_place_static / ats_policy_place instead of the
 * decode round's; the decode-only placement is the mix with one decode round. The objective assumes
 * that CPU-resident ops run on the CPU in every round, so it misjudges rounds in which a policy
 * promotes them (op offload, dynamic transfer). The simulator does not call it yet: for `static` the
 * mix cut the simulated session time (P = 2048, G = 128, rtx3060-laptop) from 36.3 s to 33.9 s,
 * but for `static-opoffload` and `ats` it was no better (experiments/paper-check/README.md).
 *
 * Lifecycle: ats_placement_init(n) → ats_place_static() fills it → ats_placement_free().
 * All functions are pure and thread-safe on distinct outputs.
 */
#ifndef ATS_PLACEMENT_H
#define ATS_PLACEMENT_H

#include <stdint.h>
#include "ats/costs.h"
#include "ats/graph.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Default backend per op. */
typedef struct ats_placement {
    int32_t n;
    uint8_t *backend;      /* ats_backend per op (n entries, owned) */
    uint64_t gpu_bytes;    /* Σ s_i over GPU ops, unquantized [bytes] */
    double objective_s;    /* Σ r_i[GPU] − Σ c_i[switch] of this placement under the costs used [s] */
} ats_placement;

/** Allocates n entries, all ATS_CPU. ATS_EINVAL (n < 1) / ATS_ENOMEM. */
enum ats_status ats_placement_init(ats_placement *p, int32_t n);
void ats_placement_free(ats_placement *p);
/** Deep copy; dst initialised with the same n. */
void ats_placement_copy(ats_placement *dst, const ats_placement *src);

/** Item forcing for the raw DP. */
typedef enum ats_place_fix { ATS_FIX_FREE = 0, ATS_FIX_CPU = 1, ATS_FIX_GPU = 2 } ats_place_fix;

typedef struct ats_placement_opts {
    uint64_t quantum_bytes; /* DP memory unit [bytes]; default 1 MiB (paper §4.3.3) */
    int moe_partition;      /* 1 (default): Algorithm 1 expert/non-expert partition on MoE graphs;
                               0: one DP over all ops */
} ats_placement_opts;

ats_placement_opts ats_placement_opts_default(void);

/** Placement item size of op i: weight_bytes + kv_cache_bytes [bytes]. */
uint64_t ats_op_resident_bytes(const ats_op *op);

/**
 * The raw knapsack DP with switch penalty, on arrays (used by ats_place_static and by tests).
 * n items in order; size_units[i] (already quantized) ≥ 0; r[i], c[i] finite [s] (c[0] ignored);
 * fix NULL or per-item ats_place_fix (a forced-GPU item still consumes its size);
 * budget_units ≥ 0. Writes backend_out[n] (ats_backend) and *objective_out (NULL ok).
 * Ties are broken towards CPU (fewer GPU bytes). ATS_EINFEASIBLE when the forced-GPU items alone
 * exceed the budget; ATS_ENOMEM; ATS_EINVAL for n < 1 or a non-finite value (message in err).
 * Memory: (budget_units+1)·n·1 byte of backtracking + 4·(budget_units+1) doubles.
 */
enum ats_status ats_place_dp(int32_t n, const uint64_t *size_units, const double *r, const double *c,
                             const uint8_t *fix, uint64_t budget_units, uint8_t *backend_out,
                             double *objective_out, ats_err *err);

/**
 * Static placement of graph `g` under residency budget `budget_bytes` (the part of the VRAM budget
 * not reserved for temp buffers; see ats_policy_cfg). `nominal` borrowed (n = g->n_ops), r_i =
 * t_cpu − t_gpu, c_i from nominal->c. `out` initialised with n = g->n_ops. Returns ATS_EINVAL for
 * budget_bytes == 0, an empty graph, mismatched n or invalid costs (message names op and field),
 * ATS_ENOMEM. Algorithm 1: dense → one DP; MoE → if M ≥ s_nonexp all non-expert ops GPU and the
 * DP over expert ops with M − s_nonexp, else experts CPU and the DP over non-expert ops with M.
 */
/**
 * Fused groups (ats_op_fused_head: a layer's routed-expert gate/up/down, or its shared-expert ones,
 * which the executor runs as one op reading all three weights): a group partly on the GPU leaves the
 * device whole, so a group is resident whole or not at all (gpu_bytes only shrink; the freed bytes are
 * not refilled). gpu_bytes and objective_s recomputed as ats_place_static does. Policies call it after
 * placing (ats_policy_place).
 */
void ats_placement_fuse_groups(const ats_graph *g, const ats_costs *nominal, ats_placement *p);

enum ats_status ats_place_static(const ats_graph *g, const ats_costs *nominal, uint64_t budget_bytes,
                                 const ats_placement_opts *opts, ats_placement *out, ats_err *err);

/**
 * A placement that keeps base's GPU ops and makes more ops resident in extra_bytes more bytes: the
 * DP of ats_place_static (fused groups whole) over the ops base leaves on the CPU, base's GPU ops
 * fixed there at no size, ops with a KV cache (attention) and the embedding lookup fixed on the CPU.
 * The decode placement of `ats` (ats_policy_decode_placement): the prefill's temp ring holds these
 * weights between prefills. Sizes in whole quanta, extra_bytes rounded down to quanta (0: base).
 * out ⊇ base; out->gpu_bytes ≤ base->gpu_bytes + extra_bytes. ATS_EINVAL on mismatched sizes, out
 * aliasing base, or invalid costs; ATS_ENOMEM.
 */
enum ats_status ats_place_extend(const ats_graph *g, const ats_costs *nominal, const ats_placement *base,
                                 uint64_t extra_bytes, const ats_placement_opts *opts, ats_placement *out,
                                 ats_err *err);

/**
 * out = Σ_k weight[k]·costs[k], field by field (t_cpu, t_gpu, w, c, w_expert) [s·rounds]: the
 * snapshot whose placement objective is the weighted sum of the rounds' objectives (see the file
 * comment). costs: n_rounds borrowed snapshots of the same n (the graphs' ops must mean the same
 * tensors: one model, any phases); weight[k] ≥ 0 and finite, not all 0; `out` initialised with that
 * n (may not alias an input). ATS_EINVAL (message names the round and the value) on n_rounds < 1,
 * a size mismatch, a bad weight or invalid costs. Pure, thread-safe on distinct outputs.
 */
enum ats_status ats_placement_mix_costs(const ats_costs *const *costs, const double *weight, int32_t n_rounds,
                                        ats_costs *out, ats_err *err);

/** Objective Σ r_i[GPU] − Σ c_i[switch] of an arbitrary backend vector [s] (for tests/inspect). */
double ats_placement_objective(int32_t n, const double *r, const double *c, const uint8_t *backend);

#ifdef __cplusplus
}
#endif
#endif
