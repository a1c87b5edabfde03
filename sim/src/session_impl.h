/*
 * sim/src/session_impl.h — the state of one sim_session_run, shared by its files (private to libats_sim):
 * session.c (set-up, the request and round loop, the controller), prefetch.c (decode prefetches into
 * the previous round's copy-engine idle tail), rows.c (result rows and the summary figures), print.c
 * (sim_summary_print).
 */
#ifndef SIM_SESSION_IMPL_H
#define SIM_SESSION_IMPL_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "ats/policy.h"
#include "sim/session.h"

/* Costs and CPU roofline shares of one round shape (prefill chunk j or decode step g). */
typedef struct round_shape {
    ats_costs nominal;
    double *mem_frac, *flop_frac; /* CPU roofline shares per op */
} round_shape;

typedef struct phase_state {
    ats_graph *g;            /* graph the plans are built on (first chunk / first decode step) */
    ats_costs ctrl_nominal;  /* what the controller borrows as "nominal": updated every round */
    ats_controller *ctrl;
    int started;
    int pending_resched;     /* the last observe re-scheduled: charge it at the next round */
    /* routing of this controller's next round */
    double *n_sel;
    uint8_t routed_ready;
} phase_state;

typedef struct session {
    const ats_arch *arch;
    const ats_hw *hw;
    const sim_session_cfg *cfg;
    ats_policy *pol;
    ats_placement place;
    ats_placement place_dec; /* the decode placement (ats_policy_decode_placement; n 0: none) */
    double dec_upload_bytes; /* its weights beyond `place`: uploaded at a request's first decode round */
    int dec_loaded;          /* they are on the GPU (since the last decode round; a prefill drops them) */
    int64_t n_chunks;
    round_shape *pre;        /* n_chunks */
    round_shape *dec;        /* gen_tok */
    phase_state ph[2];
    sim_engine *eng;
    sim_prog prog;
    int32_t *op_task, *xfer_task, *act_task;
    int32_t cap_x;
    double *work_scale, *prefetched;
    ats_round_obs obs;
    gsl_rng *rng;
    sim_routing *routing;
    uint8_t *sel;
    ats_costs truth;         /* scratch for the routed nominal of a round */
    /* previous engine round: end and per-engine last busy end, for prefetches */
    double prev_end, ce_last_end[SIM_MAX_CE];
    int prev_was_decode;
    double pred_err_sum;
    int64_t pred_err_n;
    /* timeline */
    int tl_pid, tl_tid[SIM_MAX_QUEUES], tl_rounds;
    const ats_graph *tl_graph;
    double tl_t0;
    sim_session_result *res;
    size_t cap_rounds, cap_ops;
} session;

/* prefetch.c: room for n_wxfers transfers in xfer_task and prefetched (ATS_ENOMEM) */
enum ats_status sim_sess_xfer_capacity(session *s, int32_t n_wxfers);
/* prefetch.c: s->prefetched[x] of each transfer of plan taken as moved in the previous decode round's
 * copy-engine idle tail (round of phase k about to run); returns their sum [bytes] */
double sim_sess_prefetch(session *s, int k, const ats_plan *plan);
/* prefetch.c: after a round of phase k that ran [t0, t1]: the copy engines' last busy ends */
void sim_sess_ce_idle(session *s, int k, double t0, double t1);

/* rows.c: the row of the round just run (s->prog holds its tasks; h2d: engine bytes it moved,
 * pre: prefetched bytes) and, with cfg->record_ops, its op rows */
enum ats_status sim_sess_rows_add(session *s, int k, const ats_plan *plan, int64_t round_idx, int64_t n_tok, double t0,
                                  double latency, double h2d, double pre);
/* rows.c: the summary figures of s->res at the end of the run */
enum ats_status sim_sess_summarize(session *s, double ttft_sum, int64_t ttft_n);

#endif
