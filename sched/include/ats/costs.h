/*
 * ats/costs.h — cost snapshots, the analytic cost model, load scaling and load estimation.
 *
 * A cost snapshot holds, per op i of a graph: t_cpu[i], t_gpu[i] (execution [s]), w[i] (weight
 * transfer host→device [s]; for routed-expert ops only the experts selected this round move) and
 * c[i] (activation switch at the boundary between op i-1 and op i [s]). It is the only input of the
 * scheduling DPs besides sizes and the budget.
 *
 * Flow: ats_costs_from_model() fills a *nominal* snapshot (idle machine) from a graph and an
 * ats_hw; a measured profile may overwrite it field by field (ats_costs_set_op). Under load, a
 * resource speed factor per resource (ats_load: 1 = idle speed, 0.4 = 40% of idle speed) turns the
 * nominal snapshot into the current one (ats_costs_scale). The simulator and the executor both
 * record per-op observed times into an ats_round_obs and estimate the factors with
 * ats_load_estimate(), so both sides estimate load identically (DESIGN.md contract 3).
 */
#ifndef ATS_COSTS_H
#define ATS_COSTS_H

#include <stdint.h>
#include "ats/graph.h"
#include "ats/hw.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ats_backend { ATS_CPU = 0, ATS_GPU = 1 } ats_backend;

/** Per-op cost snapshot (struct of arrays, each of n entries). */
typedef struct ats_costs {
    int32_t n;
    double *t_cpu;    /* [s] */
    double *t_gpu;    /* [s] */
    double *w;        /* [s] host→device transfer of the op's weights this round */
    double *c;        /* [s] activation switch into op i (c[0] = 0) */
    double *w_expert; /* [s] transfer of one expert (EXPERTS/SHEXP ops), 0 otherwise */
} ats_costs;

/** Allocates the arrays for n ops (all zero). ATS_ENOMEM / ATS_EINVAL (n < 1). */
enum ats_status ats_costs_init(ats_costs *c, int32_t n);
void ats_costs_free(ats_costs *c);
/** Deep copy; dst must be initialised with the same n. */
void ats_costs_copy(ats_costs *dst, const ats_costs *src);
/** ATS_EINVAL naming op index and field when a value is NaN, negative or infinite. */
enum ats_status ats_costs_validate(const ats_costs *c, ats_err *err);

/** One op's costs [s] (set per op by a caller that measured them). */
typedef struct ats_op_cost {
    double t_cpu, t_gpu, w, c, w_expert;
} ats_op_cost;

/**
 * The measured-profile hook: overwrites op i of `c` with `m` (every field; read the old values
 * first to keep some). ATS_EINVAL naming the op and field when i is outside [0, n) or a value is
 * NaN, negative or infinite (the snapshot is left unchanged).
 */
enum ats_status ats_costs_set_op(ats_costs *c, int32_t i, const ats_op_cost *m, ats_err *err);

/**
 * The work of op i in its round as the cost model counts it: *flop [FLOP] (op->flop; 0 for EMBED) and
 * *bytes [bytes] read and written: weights actually read (EXPERTS: n_expert_active · expert_bytes;
 * EMBED: the n_tokens rows gathered) + KV-cache bytes read (ATTN) + activations in and out.
 * `ats profile` stores these counts of each measured op beside its time (ats_prof_entry).
 */
void ats_op_work(const ats_graph *g, const ats_op *op, double *flop, double *bytes);

/** Roofline time of `flop` FLOP and `bytes` bytes of an op of kind `kind` and weight type `qtype`
 *  on backend `b` of `hw`, without the per-op overhead [s]: max(flop / (peak · eff_flop),
 *  bytes / (bw · eff_bw)) · q_scale (q_scale 1 for ATTN; EMBED: bytes only). */
double ats_roofline_s(const ats_hw *hw, ats_backend b, ats_op_kind kind, ats_qtype qtype, double flop,
                      double bytes);

/** The shape a profile's op table keys op i by: its (n_out, n_in), and for attention (whose graph op
 *  has none) the query and key/value widths n_head·head_dim and n_head_kv·head_dim. */
void ats_prof_op_shape(const ats_graph *g, const ats_op *op, int64_t *n_out, int64_t *n_in);
/**
 * Time of op i of `g` on backend `b` from hw->op_table [s], or NAN when the table has no entry for
 * it. The entry: the one with the op's role, type and shape (ats_prof_op_shape); else the nearest in
 * n_out · n_in of the op's kind and type within a factor 4 in size; else none (NAN: a table measured
 * on another model prices none of its ops; an attention entry of shape 0x0, written before attention
 * entries carried their widths, prices none). Within the entry, piecewise
 * linear in tokens between the bracketing measured points (time, flop and bytes alike; the first or
 * last point outside the measured range): t, rm = ats_roofline_s(that work). When the op's own work
 * has another roofline time rq (another shape, context or token count outside the range):
 *   t + slope · (rq - rm), at least t · rq / rm,
 * slope = (t_last - t_first) / (roofline of the last point's work - of the first's), the entry's
 * marginal time per roofline second (0 when not positive; t / rm for an entry of one point), so a
 * fixed cost per op (kernel launches, the host's issue time) is not scaled with the work.
 * Exactly the table's time at a measured point of the op's own shape.
 */
double ats_prof_op_time(const ats_graph *g, const ats_op *op, const ats_hw *hw, ats_backend b);

/**
 * Cost model. t_cpu, t_gpu: ats_prof_op_time where hw->op_table has the op's kind on that backend,
 * else the analytic roofline. Per op and backend b:
 *   t_b = max(flop / (peak_b · eff), bytes / (bw_b · eff)) · q_scale + overhead_b
 * with bytes = weight bytes actually read (routed experts: active experts only) + KV bytes read +
 * activations; GEMV efficiencies when n_tokens < gemm_min_tokens, GEMM ones otherwise.
 * w = pcie_latency + moved bytes / pcie_h2d_bw (moved: all weights; EXPERTS: n_expert_active ·
 * expert_bytes); c[i] = pcie_latency + host_switch + act_in_bytes[i] / pcie_sm_copy_bw (host_switch:
 * the host's time for a CPU↔GPU crossing, pcie.switch_us, 0 when the description has none).
 * `out` must be initialised with n = g->n_ops. Source: the roofline model (Williams et al. 2009);
 * the PCIe term as in paper §4.3.2 (c_i = S_in,i / B_pcie).
 */
enum ats_status ats_costs_from_model(const ats_graph *g, const ats_hw *hw, ats_costs *out,
                                     ats_err *err);

/** Resource speed factors, each in (0, 1] relative to the idle machine (1 = full speed). */
typedef struct ats_load {
    double cpu, gpu, pcie;
} ats_load;

static inline ats_load ats_load_idle(void) { ats_load l = {1.0, 1.0, 1.0}; return l; }

/** cur = nominal with t_cpu / cpu, t_gpu / gpu, w and c / pcie. Same n. */
void ats_costs_scale(const ats_costs *nominal, ats_load load, ats_costs *cur);

/** What ran on which backend in one round, and how long it took (observed). */
typedef struct ats_round_obs {
    int32_t n;
    uint8_t *backend;  /* ats_backend per op */
    double *t_exec;    /* observed execution time per op [s] */
    double *t_xfer;    /* observed weight-transfer time per op [s]; NaN when nothing moved */
} ats_round_obs;

enum ats_status ats_round_obs_init(ats_round_obs *o, int32_t n);
void ats_round_obs_free(ats_round_obs *o);

/**
 * Estimates speed factors from one round: per resource, Σ nominal / Σ observed over the ops that
 * ran on it (CPU: t_cpu of CPU ops, GPU: t_gpu of GPU ops, PCIe: w of ops with a transfer). A
 * resource with no op keeps `prev`'s factor. Factors are clipped to [0.01, 4] (above 1 when the
 * nominal profile was pessimistic). `nominal` borrowed; thread-safe.
 */
void ats_load_estimate(const ats_costs *nominal, const ats_round_obs *obs, ats_load prev,
                       ats_load *out);

#ifdef __cplusplus
}
#endif
#endif
