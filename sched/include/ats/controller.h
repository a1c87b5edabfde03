/*
 * ats/controller.h — load-aware re-scheduling (paper §4.4.3, Algorithm 3).
 *
 * The controller sits in the decode loop of both the simulator and the executor. After every round
 * the caller hands it the round's observed per-op times (ats_round_obs) and the current time `now`
 * (simulated seconds in sim, wall seconds in exec — the controller never reads a clock). It
 * estimates the resource speed factors (ats_load_estimate, costs.h; against the plan's predicted
 * CPU op durations, so the host-memory interference the plan itself causes is not read as CPU
 * load) and re-runs the policy's
 * assignment only when
 *     deviation ≥ ε   and   now − t_last ≥ τ,
 * where deviation = max over r ∈ {cpu, gpu, pcie} of |f_r − f_r^ref| / f_r^ref, f^ref being the
 * factors used by the last (re)schedule, and τ = tau_s when tau_s > 0, else tau_tpot_mult × the
 * median of the last tpot_window round latencies (the "recent TPOT"). Defaults ε = 0.15,
 * τ = 5 × recent TPOT (paper §4.4.3).
 *
 * Lifecycle: ats_controller_new(policy, graph, placement, nominal) → ats_controller_start(now)
 * (first schedule) → per round: read ats_controller_plan(), run it, ats_controller_observe(obs,
 * latency, now, ctx) → ats_controller_free(). Policies whose ops->dynamic is 0 never re-schedule
 * (deviation is still tracked and reported). The graph, placement, policy and nominal costs are
 * borrowed and must outlive the controller. The caller may update the nominal costs in place
 * between rounds (per prefill chunk or decode step, whose costs grow with the context): at observe
 * the plan that ran is re-predicted under the nominal as it is then, so a round's observed times
 * are compared with that same round's prediction. Not thread-safe (one per run).
 */
#ifndef ATS_CONTROLLER_H
#define ATS_CONTROLLER_H

#include <stdint.h>
#include "ats/costs.h"
#include "ats/graph.h"
#include "ats/placement.h"
#include "ats/plan.h"
#include "ats/policy.h"
#include "ats/status.h"
#include "ats/transfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ats_controller_cfg {
    double eps;            /* deviation threshold ε (default 0.15) */
    double tau_s;          /* absolute minimum interval τ [s]; ≤ 0 = use tau_tpot_mult (default 0) */
    double tau_tpot_mult;  /* τ = mult × recent TPOT (default 5) */
    int tpot_window;       /* rounds in the recent-TPOT median (default 8, max 64) */
    int prefetch;          /* 1 (default): pass the previous round's predicted copy-engine idle
                              tail as prefetch_lead_s to the next round (decode graphs only) */
    double min_busy_frac;  /* a resource's factor is re-estimated only from a round in which its
                              observed busy time (CPU/GPU: Σ op times on it; PCIe: Σ transfer
                              times) is at least this fraction of the round latency; else the
                              previous estimate stays (default 0.02). A few ms of CPU ops in a
                              GPU-bound prefill chunk say more about the model's interference
                              term than about load. 0 = every round counts */
} ats_controller_cfg;

ats_controller_cfg ats_controller_cfg_default(void);

/** What one re-schedule changed (or, with rescheduled = 0, what the last observation saw). */
typedef struct ats_resched_report {
    int rescheduled;         /* 1 when this observation triggered a re-schedule */
    double deviation;        /* as defined above */
    double tau_s;            /* the τ in force [s] */
    ats_load load;           /* estimated factors after this observation */
    ats_load load_ref;       /* factors of the schedule in force (after a re-schedule: = load) */
    int32_t n_changed;       /* ops whose backend changed */
    int32_t n_promoted_before, n_promoted_after;
    double predicted_before_s; /* old assignment's latency under the new costs [s] */
    double predicted_after_s;  /* new assignment's latency under the new costs [s] */
} ats_resched_report;

typedef struct ats_controller ats_controller;

/**
 * New controller. All pointers borrowed. cfg NULL = defaults. ATS_EINVAL (eps < 0 or NaN,
 * tau_tpot_mult ≤ 0 with tau_s ≤ 0, window outside [1, 64], size mismatch), ATS_ENOMEM.
 */
enum ats_status ats_controller_new(ats_policy *pol, const ats_graph *g, const ats_placement *p,
                                   const ats_costs *nominal, const ats_controller_cfg *cfg,
                                   ats_controller **out, ats_err *err);
void ats_controller_free(ats_controller *c);

/** First schedule at time now_s [s] with load `load` (ats_load_idle() when unknown). ctx NULL ok. */
enum ats_status ats_controller_start(ats_controller *c, double now_s, ats_load load,
                                     const ats_round_ctx *ctx, ats_err *err);

/**
 * Feeds one finished round: observed per-op times `obs` (borrowed), its latency [s] and the time
 * now_s [s] at which the next round starts; `next` = the next round's context (routing for MoE;
 * NULL = expected routing). Re-schedules when the rule above fires, then rebuilds the plan for the
 * next round (always, so MoE routing is applied every round). `report` (NULL ok) gets what
 * happened. ATS_EINVAL when obs->n mismatches.
 */
enum ats_status ats_controller_observe(ats_controller *c, const ats_round_obs *obs,
                                       double latency_s, double now_s, const ats_round_ctx *next,
                                       ats_resched_report *report, ats_err *err);

/** The plan of the next round (owned by the controller; valid until the next observe/free). */
const ats_plan *ats_controller_plan(const ats_controller *c);
/** The assignment in force. */
const ats_assignment *ats_controller_assignment(const ats_controller *c);
/** The current cost snapshot (nominal scaled by the load in force, routing applied). */
const ats_costs *ats_controller_costs(const ats_controller *c);
/** Latest load estimate. */
ats_load ats_controller_load(const ats_controller *c);
/** Re-schedules so far (the first schedule from ats_controller_start not counted). */
int64_t ats_controller_n_reschedules(const ats_controller *c);
/** Rounds observed so far. */
int64_t ats_controller_n_rounds(const ats_controller *c);
/** Predicted latency of the next round's plan under the current costs [s]. */
double ats_controller_predicted_s(const ats_controller *c);

#ifdef __cplusplus
}
#endif
#endif
