/*
 * ats/transfer.h — dynamic transfer: the per-round backend assignment rb (paper §4.4, Algorithm 2).
 *
 * Given a placement b (placement.h) and the current cost snapshot, choose for each CPU-resident op
 * whether to promote it this round (copy its weights to a GPU temp buffer on the copy engine and run
 * it on the GPU). GPU-resident ops always run on the GPU. Two solvers, each exact for the latency
 * model stated below; both return an ats_assignment.
 *
 * Ops that can be promoted ("promotable"): b_i = CPU, kind not EMBED and not ATTN (attention runs
 * where its KV cache lives), weight bytes this round > 0 and ≤ the temp capacity.
 * With opts.promote_kv (policy "ats" sets it in prefill rounds) an ATTN op is promotable too: its
 * layer's KV cache (kv_cache_bytes, the whole configured capacity, as the cost model's w_i) moves to
 * a temp slot on the copy engine and attention runs on the GPU. In a prefill chunk attention is
 * compute-bound and grows with the context (FLOPs ∝ N·(ctx_pos + N/2)), while moving the cache costs
 * kv_cache_bytes / B_pcie: for Qwen3-14B at 4096 tokens 16 MiB (0.7 ms) against ~31 ms of CPU
 * attention per layer in the last 512-token chunk (experiments/paper-check/README.md). Not modelled:
 * writing the chunk's new K/V rows back to the host cache (device→host, N·2·n_head_kv·head_dim·2
 * bytes per layer, 2 MiB for that chunk, on the other link direction, off the compute stream).
 *
 * ── Model P (policy "ats-paper", §4.4.1 exactly) ───────────────────────────────────────────────
 * Ops 0..n−1 run one after another. G = promoted ops. With default backends b and t_i^b, c_i:
 *   seg(j,i) = Σ_{k=j+1}^{i−1} t_k^{b_k} + Σ_{k=j+1}^{i−1, k≥1} c_k·[b_{k−1} ≠ b_k]
 *   δ_i      = max(w_i − seg(j(i), i), 0)
 *   T(rb)    = Σ_i t_i^{rb_i} + Σ_{i≥1} c_i·[rb_{i−1} ≠ rb_i] + Σ_{i∈G} δ_i
 * where j(i), "the previous CPU-side endpoint" at which i's transfer starts, is the virtual round
 * start j = −1 when i is the first promoted op, else the first op after the previous promoted op
 * that runs on the CPU; an rb with two promoted ops and no CPU-run op between them is infeasible
 * (T = +∞). This is exactly the set of schedules Algorithm 2 enumerates (dp[j,CPU] +
 * max(w_i, seg[j,i]) with every op between j and i at its default backend); we read its line 17
 * "c_i·1{b_{i−1} = GPU}" as the switch into i, i.e. c_i·[b_{i−1} = CPU], which is what T charges.
 * Solver: O(n²) time, O(n) auxiliary memory (prefix sums of the default path + dp + argmin).
 *
 * ── Model A (policy "ats") ─────────────────────────────────────────────────────────────────────
 * The round as the plan executes it (plan.h rules, ats_plan_predict with the same options), with
 * one copy engine and the temp region split into two slots of temp_bytes/2 (double buffering):
 *  - compute: op i starts at S_i = max(E_{i−1} + c_i·[rb_{i−1} ≠ rb_i], F_i if i is promoted)
 *    (E_{−1} = 0) and ends at E_i = S_i + t_i^{rb_i}, except that a CPU op progresses at rate
 *    h = hostmem_cpu_factor (≤ 1) while the copy engine is busy (DESIGN.md host-memory table:
 *    the CPU op overlapping a transfer is slowed, which model P ignores);
 *  - copy engine: promoted ops' weights move in op order on one queue; transfer k (for promoted op
 *    g_k) starts at max(end of transfer k−1, release_k) and lasts w_{g_k}, so the queue runs back
 *    to back whenever the compute stream keeps up. release_0 = −prefetch_lead_s (decode: the
 *    previous round's idle copy-engine tail; a transfer starting before 0 is a prefetch, issued
 *    during the previous round); release_k = E_{g_{k−1}−1} for k ≥ 1 (slot k mod 2 is free once
 *    the compute stream has reached the previous promoted op: the engine runs at most one promoted
 *    op ahead); EXPERTS ops additionally wait for the end of their router (only the selected
 *    experts move, after routing);
 *  - temp capacity: each promoted op's bytes ≤ temp_bytes/2.
 * Solver: DP over promoted ops in order with a Pareto frontier of states (E, R) = (end of the
 * promoted op, release time of the next transfer); the latency is monotone in both (argument in
 * transfer.c), so dominated states are dropped and the DP is exact (tested against brute force).
 * States of earlier positions are also dropped when a newer state dominates them for every
 * continuation (R is capped below at E − the largest transfer still to come, where it no longer
 * matters); each transition costs O(log n) through prefix sums of the default path. Measured:
 * 16 µs for Qwen3-14B decode, 0.13-0.2 ms for Llama-3.1-70B (experiments/sched-speed/bench-sched.json).
 * Requires the graph property that ops strictly between an EXPERTS op and its router are EXPERTS ops
 * of the same router (true for ats_graph_build graphs); ATS_EINVAL otherwise.
 *
 * Routing: for EXPERTS ops the weight-transfer time w_i covers only the experts selected this round.
 * ats_costs_route() rewrites w for a given routing; without a routing the snapshot's expected value
 * (op.n_expert_active experts) is used.
 */
#ifndef ATS_TRANSFER_H
#define ATS_TRANSFER_H

#include <stdint.h>
#include "ats/costs.h"
#include "ats/graph.h"
#include "ats/placement.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Runtime backend per op for one round. */
typedef struct ats_assignment {
    int32_t n;
    uint8_t *backend;     /* ats_backend rb_i per op (owned) */
    int32_t n_promoted;   /* ops with b = CPU and rb = GPU */
    uint8_t serialized;   /* 1: the round runs without overlap (llama.cpp path; see plan.h) */
    double predicted_s;   /* round latency under the solver's model [s]; NaN when not computed */
} ats_assignment;

enum ats_status ats_assignment_init(ats_assignment *a, int32_t n);
void ats_assignment_free(ats_assignment *a);
void ats_assignment_copy(ats_assignment *dst, const ats_assignment *src);
/** rb = b (nothing promoted). */
void ats_assignment_from_placement(ats_assignment *a, const ats_placement *p);

/**
 * out = in with, for every EXPERTS op i: w[i] += (n_selected[i] − op.n_expert_active)·w_expert[i]
 * (execution times unchanged). `in` and `out` may alias. ATS_EINVAL when routing->n ≠ g->n_ops
 * or a count is negative, NaN or > op.n_expert (message names the op).
 */
enum ats_status ats_costs_route(const ats_graph *g, const ats_costs *in, const ats_routing *routing,
                                ats_costs *out, ats_err *err);

/** Options shared by both solvers. */
typedef struct ats_transfer_opts {
    uint64_t temp_bytes;        /* temp-buffer capacity for promoted weights [bytes]; model P:
                                   ops larger than this are not promotable; model A: ops larger
                                   than temp_bytes/2 (one slot) are not promotable */
    double hostmem_cpu_factor;  /* model A: CPU op rate while the copy engine is busy, (0, 1];
                                   1 = no interference (default 1) */
    double prefetch_lead_s;     /* model A: copy engine free from −prefetch_lead_s [s] (≥ 0;
                                   default 0 = no prefetch) */
    const ats_routing *routing; /* borrowed; this round's routing (bytes of EXPERTS transfers);
                                   NULL = expected routing (op.n_expert_active) */
    int no_prune;               /* model A: 1 disables the cross-position dominance pruning (same
                                   result, O(P²) transitions; for tests); default 0 */
    int promote_kv;             /* 1: ATTN ops are promotable with their KV cache (see the file
                                   comment); default 0. Prefill rounds switch it on
                                   (ats_policy_cfg.promote_kv_prefill; experiments/paper-check §2). */
} ats_transfer_opts;

ats_transfer_opts ats_transfer_opts_default(void);

/** 1 when op i of g may be promoted under placement p and opts (see the file comment). */
int ats_op_promotable(const ats_graph *g, const ats_placement *p, const ats_transfer_opts *opts,
                      int32_t i);

/**
 * Model P solver (Algorithm 2). `cur` borrowed: current costs (routing already applied).
 * `out` initialised with n = g->n_ops; predicted_s = T(rb*). Returns ATS_EINVAL for mismatched n or
 * invalid costs, ATS_ENOMEM. O(n²) time, O(n) extra memory. Thread-safe.
 */
enum ats_status ats_transfer_paper(const ats_graph *g, const ats_placement *p, const ats_costs *cur,
                                   const ats_transfer_opts *opts, ats_assignment *out, ats_err *err);

/** Model P latency T(rb) of an arbitrary assignment [s] (+INFINITY when infeasible under P).
 *  For brute-force tests and inspect. */
double ats_transfer_paper_eval(const ats_placement *p, const ats_costs *cur, const uint8_t *rb);

/**
 * Model A solver. Same contract as ats_transfer_paper; predicted_s = latency under model A, which
 * equals ats_plan_predict() of the plan built from this assignment with the same options.
 * Time O(P·A·log n) for P promotable ops and A live states (A ≤ P·F, F the per-position frontier;
 * A is small in practice thanks to the pruning); memory O(P·F).
 */
enum ats_status ats_transfer_ats(const ats_graph *g, const ats_placement *p, const ats_costs *cur,
                                 const ats_transfer_opts *opts, ats_assignment *out, ats_err *err);

/** Model A latency of an arbitrary assignment [s] (+INFINITY when a promoted op is not promotable
 *  under model A). Reference for brute-force tests, independent of the DP: builds the plan
 *  (double_buffer, one engine) and runs ats_plan_predict. */
double ats_transfer_ats_eval(const ats_graph *g, const ats_placement *p, const ats_costs *cur,
                             const ats_transfer_opts *opts, const uint8_t *rb);

#ifdef __cplusplus
}
#endif
#endif
