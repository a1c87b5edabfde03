/*
 * sim/session.h — executing plans and whole inference sessions in the simulator.
 *
 * Two levels:
 *  1. sim_prog_from_plan(): translates one round's ats_plan (sched/plan.h, THE interface) into an
 *     engine program with the executor's dependency rules R1–R7: compute stream in op order (CPU and
 *     GPU ops chained, activation copies between them on the GPU stream or a copy engine), one FIFO
 *     per copy engine in plan issue order, a promoted op waits for its weights, a transfer waits for
 *     its router and for the last reader of its temp range. With hostmem off, no link contention
 *     and no jitter the simulated round latency equals ats_plan_predict() (test_sim_session).
 *  2. sim_session_run(): requests of P prompt tokens (chunked prefill, chunk C) then G decode steps
 *     with a growing KV cache, MoE routing per token and layer, lognormal jitter on op times, the
 *     sched controller in the loop (a re-schedule costs CPU time on the critical path), one policy,
 *     under a load trace. Produces per-round rows (common/results.h schema) and a summary.
 *
 * Ground truth of the simulation: op execution times are the hardware description's roofline
 * (ats_costs_from_model at each round's context length; routed experts scaled by the experts
 * actually selected), times jitter, stretched by the load trace, host-memory interference and
 * max-min sharing of the link (sim/engine.h). The scheduler sees only observed times.
 *
 * Determinism: everything is a function of the configuration and the seed (GSL mt19937 streams
 * for jitter and routing); sessions share nothing, so sweeps may run them on any number of threads.
 */
#ifndef SIM_SESSION_H
#define SIM_SESSION_H

#include <stdint.h>
#include <stdio.h>

#include "ats/arch.h"
#include "ats/controller.h"
#include "ats/costs.h"
#include "ats/graph.h"
#include "ats/hw.h"
#include "ats/plan.h"
#include "atsc/results.h"
#include "atsc/timeline.h"
#include "sim/engine.h"
#include "sim/routing.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Task tags (sim_task.tag) used by sim_prog_from_plan. */
enum { SIM_TAG_OP = 0, SIM_TAG_WXFER = 1, SIM_TAG_AXFER = 2, SIM_TAG_RESCHED = 3, SIM_TAG_UPLOAD = 4 };

/** Execution options of one round. */
typedef struct sim_exec_opts {
    int force_serialized;   /**< 1: every weight transfer also waits for the op before its consumer
                                 and nothing is prefetched (llama.cpp path, R7) */
    int act_path;           /**< -1: the plan's path; ATS_ACT_SM or ATS_ACT_CE to override */
    double resched_cost_s;  /**< > 0: a CPU task of this many seconds [s at idle] runs first and
                                 everything waits for it (controller re-schedule) */
    const double *work_scale;    /**< NULL or n_ops multipliers on each op's execution time
                                      (jitter × routed-expert scaling) */
    const double *cpu_mem_frac;  /**< NULL or n_ops: memory share of each CPU op's roofline */
    const double *cpu_flop_frac; /**< NULL or n_ops: compute share of each CPU op's roofline */
    const double *prefetched_bytes; /**< NULL or n_wxfers: bytes of prefetch transfers already
                                         moved during the previous round */
    double act_switch_s;    /**< host time of each activation crossing (ats_hw.host_switch_s) [s] */
    double upload_bytes;    /**< > 0: a copy-engine H2D of this many bytes runs first (copy engine 0)
                                 and everything waits for it: the decode placement's extra weights
                                 (ats_policy_decode_placement) at the first decode round after a
                                 prefill */
} sim_exec_opts;

sim_exec_opts sim_exec_opts_default(void);

/**
 * Fills `prog` (cleared first) with the round of `plan`. `truth` (n = plan->n_ops) gives each op's
 * execution time at idle (t_cpu or t_gpu by backend); transfers move plan bytes (weights) and
 * op.act_in_bytes of `g` (activations). op_task (n_ops) and xfer_task (n_wxfers) receive the task
 * index of each op and weight transfer (either may be NULL); act_task (n_ops, NULL ok) the task of
 * the activation copy into each op or -1. All pointers borrowed. ATS_EINVAL on size mismatch or a
 * transfer that waits for an op at or after its consumer; ATS_ENOMEM.
 */
enum ats_status sim_prog_from_plan(sim_prog *prog, const ats_graph *g, const ats_plan *plan,
                                   const ats_costs *truth, const sim_exec_opts *opts,
                                   int32_t *op_task, int32_t *xfer_task, int32_t *act_task,
                                   ats_err *err);

/** Progress callback: fraction done in [0, 1]. */
typedef void (*sim_progress_fn)(void *user, double frac);

/** Session configuration. */
typedef struct sim_session_cfg {
    const char *policy;           /**< policy name (ats_policy_names) */
    uint64_t vram_budget_bytes;   /**< resident + temp ring [bytes] */
    uint64_t temp_bytes;          /**< temp ring [bytes]; 0 = the policy's automatic choice */
    ats_recipe recipe;            /**< quantization recipe */
    const ats_qtype *tensor_types; /**< NULL, or every tensor's type as a file has it (borrowed;
                                       ats_graph_opts.tensor_types): used instead of recipe */
    int64_t prompt_tok;           /**< P (default 2048) */
    int64_t gen_tok;              /**< G decode steps (default 128) */
    int64_t chunk_tok;            /**< C prefill chunk (default 512) */
    int64_t n_requests;           /**< requests back to back (default 1); ≤ 0 = no limit (then
                                       duration_s must be > 0) */
    double duration_s;            /**< > 0: stop after the round that crosses this simulated time
                                       [s]; with both limits the first one reached ends the run */
    double gap_s;                 /**< idle time between requests [s] (default 0) */
    double jitter_sigma;          /**< lognormal σ on op times (mean 1); 0 = none */
    sim_routing_kind routing;     /**< MoE routing source (default uniform) */
    double zipf_skew;             /**< Zipf exponent (default 1.0) */
    const char *routing_path;     /**< HDF5 routing file when routing == SIM_ROUTE_FILE */
    ats_controller_cfg ctrl;      /**< ε, τ, prefetch (sched defaults) */
    double resched_cost_s;        /**< CPU time of one re-schedule (DP + plan rebuild) [s] */
    int hostmem;                  /**< host-memory interference (default 1) */
    int act_path;                 /**< -1 policy's; ATS_ACT_SM / ATS_ACT_CE override (ablation) */
    int force_serialized;         /**< 1: no transfer/compute overlap (ablation) */
    uint64_t seed;
    int record_ops;               /**< 1: keep per-op rows (large) */
    double trace_offset_s;        /**< session time 0 = this trace time [s] */
    sim_progress_fn progress;     /**< NULL or called every few hundred rounds */
    void *progress_user;
    atsc_timeline *timeline;      /**< NULL or a timeline to write this run into (borrowed) */
    const char *timeline_name;    /**< process name in the timeline (default: policy) */
    int64_t max_rounds;           /**< refuse (ATS_EINVAL) a run whose bound on rounds
                                       (sim_session_round_bound) exceeds this, and stop with
                                       ATS_EINVAL should it ever get there; 0 = no limit
                                       (default SIM_MAX_ROUNDS_DEFAULT) */
} sim_session_cfg;

/** Default bound on the rounds one session may simulate (each round keeps a 72-byte results
 *  row, so 10^7 rounds is ~0.7 GB, plus minutes of CPU time). */
#define SIM_MAX_ROUNDS_DEFAULT 10000000LL

sim_session_cfg sim_session_cfg_default(void);

/** What a session produced. Arrays owned; free with sim_session_result_free. */
typedef struct sim_session_result {
    char policy[64];
    int64_t n_requests_done;   /**< requests whose last decode step finished */
    int64_t prefill_tok, decode_tok;
    double prefill_s, decode_s;       /**< time in prefill / decode rounds [s] */
    double prefill_tok_s, decode_tok_s;
    double ttft_mean_s;               /**< mean time to first token [s] (end of prefill); NaN
                                           when no request completed */
    double tpot_mean_s, tpot_p50_s, tpot_p99_s; /**< decode round latencies [s]; NaN when no
                                           request completed (the rounds stay in `rounds`) */
    int64_t n_resched;
    double bytes_h2d;                 /**< host→device bytes (weights + activations) [bytes] */
    double bytes_prefetched;          /**< of which moved by decode prefetches in the previous
                                           round's copy-engine idle tail [bytes] */
    double pred_err_mean;             /**< mean |predicted − simulated| / simulated round latency
                                           over decode rounds: how far sched's latency model (the
                                           controller's prediction for the plan) is from the
                                           simulation (sharing, interference, jitter, load) */
    double gpu_busy_frac;             /**< GPU-op time / time in rounds */
    double sim_s;                     /**< simulated time at the end [s] */
    uint64_t events;                  /**< engine events processed */
    uint64_t resident_bytes, temp_bytes; /**< of the plan in force at the end [bytes] */
    size_t n_rounds;
    atsc_round_row *rounds;
    size_t n_ops;
    atsc_op_row *ops;
} sim_session_result;

void sim_session_result_free(sim_session_result *r);

/**
 * Checks cfg's policy-independent fields against `arch` (what sim_session_run checks before it runs):
 * prompt, gen and chunk >= 1 token, a request count or a duration, jitter in [0, 5), finite non-negative
 * costs, gap and duration, prompt + gen within arch->n_ctx_max (when > 0). cfg->policy is not looked at.
 * ATS_EINVAL with a message naming the field and its value; ATS_OK otherwise. A CLI calls it once before
 * any output, so a bad configuration is one error, not one per policy.
 */
enum ats_status sim_session_check(const ats_arch *arch, const sim_session_cfg *cfg, ats_err *err);

/**
 * Runs one session of `arch` (borrowed) on `hw` under `trace` (NULL = idle machine) with cfg.
 * ATS_ENOTFOUND (unknown policy), ATS_EINFEASIBLE (the policy cannot place the model in the
 * budget), ATS_EINVAL (bad configuration; message names the field and value), ATS_ENOMEM.
 * Thread-safe for distinct results (no shared state).
 */
enum ats_status sim_session_run(const ats_arch *arch, const ats_hw *hw, const sim_trace *trace,
                                const sim_session_cfg *cfg, sim_session_result *out, ats_err *err);

/**
 * Upper bound on the rounds a session with `cfg` simulates, before running it: with a request
 * limit, n_requests x rounds per request (ceil(P/C) + G); with a duration, the duration divided by
 * a lower bound on the time of one request (rounds per request x the shortest possible round, plus
 * the gap), plus one request. The shortest possible round is the larger of (a) one op per layer at
 * the smaller per-op overhead of CPU and GPU and (b) the active parameters at 0.25 bytes each (no
 * recipe is below 4 bits per weight; half of that leaves room for weights a decode round does not
 * read, such as the embedding table) read at the CPU's and GPU's memory bandwidth together.
 * The tighter of both limits applies. A bound without --jitter (lognormal jitter can make a round
 * shorter than its roofline); the session's own cap (max_rounds) holds regardless. `why` (may be NULL) receives a short explanation naming
 * the limit that bounds the run. Returns +inf for a configuration without a finite bound.
 */
double sim_session_round_bound(const ats_arch *arch, const ats_hw *hw, const sim_session_cfg *cfg,
                               char *why, size_t len);

/** Output formats of the summary. */
typedef enum sim_format { SIM_FMT_TABLE = 0, SIM_FMT_CSV, SIM_FMT_JSON } sim_format;

/** Prints the summary of n results (one line per policy) in `fmt` to f. A run that completed no
 *  request (its TTFT and TPOT are NaN) shows "-" and "no request completed" in the table, empty
 *  fields in CSV and null in JSON instead of NaN. */
void sim_summary_print(FILE *f, const sim_session_result *r, int n, sim_format fmt);

/** p-th percentile (0..100) of n values by linear interpolation between order statistics
 *  (sorts a copy; n ≥ 1). NaN when n == 0 or on allocation failure. */
double sim_percentile(const double *v, size_t n, double p);

#ifdef __cplusplus
}
#endif
#endif
