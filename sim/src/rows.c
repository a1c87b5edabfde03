/*
 * sim/src/rows.c — what a session hands back: one row per round (and per op with record_ops), the
 * summary figures at the end (throughputs, TTFT, TPOT mean and percentiles, prediction error).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "session_impl.h"

void sim_session_result_free(sim_session_result *r)
{
    if (!r) return;
    free(r->rounds);
    free(r->ops);
    r->rounds = NULL;
    r->ops = NULL;
    r->n_rounds = r->n_ops = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sim_percentile(const double *v, size_t n, double p)
{
    if (n == 0) return NAN;
    double *s = malloc(n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    double pos = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    double r = s[lo] + (s[hi] - s[lo]) * (pos - (double)lo);
    free(s);
    return r;
}

static enum ats_status grow_rows(session *s)
{
    sim_session_result *r = s->res;
    if (r->n_rounds < s->cap_rounds) return ATS_OK;
    size_t nc = s->cap_rounds ? 2 * s->cap_rounds : 1024;
    atsc_round_row *p = realloc(r->rounds, nc * sizeof *p);
    if (!p) return ATS_ENOMEM;
    r->rounds = p;
    s->cap_rounds = nc;
    return ATS_OK;
}

/* the op rows of the round just run: times of each op and of the weight transfer it waited for */
static enum ats_status op_rows_add(session *s, const ats_plan *plan, int32_t n, int64_t round_idx)
{
    sim_session_result *r = s->res;
    if (r->n_ops + (size_t)n > s->cap_ops) {
        size_t nc = s->cap_ops ? 2 * s->cap_ops : 4096;
        while (nc < r->n_ops + (size_t)n) nc *= 2;
        atsc_op_row *p = realloc(r->ops, nc * sizeof *p);
        if (!p) return ATS_ENOMEM;
        r->ops = p;
        s->cap_ops = nc;
    }
    for (int32_t i = 0; i < n; i++) {
        const sim_task *tk = &s->prog.tasks[s->op_task[i]];
        atsc_op_row *o = &r->ops[r->n_ops++];
        o->round = round_idx;
        o->op = i;
        o->backend = s->obs.backend[i];
        o->t_start_s = tk->t_start_s;
        o->t_end_s = tk->t_end_s;
        o->has_xfer = 0;
        o->copy_engine = 0;
        o->xfer_start_s = NAN;
        o->xfer_end_s = NAN;
        if (plan->ops[i].has_wait_xfer) {
            const sim_task *x = &s->prog.tasks[s->xfer_task[plan->ops[i].wait_xfer]];
            o->has_xfer = 1;
            o->copy_engine = x->queue - SIM_Q_CE0;
            o->xfer_start_s = x->t_start_s;
            o->xfer_end_s = x->t_end_s;
        }
    }
    return ATS_OK;
}

enum ats_status sim_sess_rows_add(session *s, int k, const ats_plan *plan, int64_t round_idx, int64_t n_tok, double t0,
                                  double latency, double h2d, double pre)
{
    sim_session_result *r = s->res;
    enum ats_status st = grow_rows(s);
    if (st) return st;
    atsc_round_row *row = &r->rounds[r->n_rounds++];
    memset(row, 0, sizeof *row);
    row->index = round_idx;
    row->phase = k == 0 ? ATSC_PHASE_PREFILL : ATSC_PHASE_DECODE;
    row->tokens = (int32_t)n_tok;
    row->t_start_s = t0;
    row->latency_s = latency;
    row->n_promoted = plan->n_promoted;
    row->rescheduled = s->ph[k].pending_resched ? 1 : 0;
    row->bytes_h2d = (uint64_t)llround(h2d + pre);
    r->bytes_h2d += pre;
    r->bytes_prefetched += pre;
    ats_load ld = ats_controller_load(s->ph[k].ctrl);
    row->load_cpu = ld.cpu;
    row->load_gpu = ld.gpu;
    row->load_pcie = ld.pcie;
    r->resident_bytes = plan->resident_bytes;
    r->temp_bytes = plan->temp_capacity_bytes;
    return s->cfg->record_ops ? op_rows_add(s, plan, s->ph[k].g->n_ops, round_idx) : ATS_OK;
}

enum ats_status sim_sess_summarize(session *s, double ttft_sum, int64_t ttft_n)
{
    sim_session_result *out = s->res;
    const sim_stats *es = sim_engine_stats(s->eng);
    out->bytes_h2d += es->bytes_h2d;
    out->events = es->events;
    out->sim_s = sim_engine_now(s->eng);
    out->n_resched = ats_controller_n_reschedules(s->ph[0].ctrl) + ats_controller_n_reschedules(s->ph[1].ctrl);
    out->prefill_tok_s = out->prefill_s > 0 ? (double)out->prefill_tok / out->prefill_s : 0.0;
    out->decode_tok_s = out->decode_s > 0 ? (double)out->decode_tok / out->decode_s : 0.0;
    out->ttft_mean_s = ttft_n ? ttft_sum / (double)ttft_n : NAN;
    out->pred_err_mean = s->pred_err_n ? s->pred_err_sum / (double)s->pred_err_n : NAN;
    double busy = out->prefill_s + out->decode_s;
    out->gpu_busy_frac = busy > 0 ? es->gpu_op_busy_s / busy : 0.0;
    size_t nd = 0;
    double *tp = malloc((out->n_rounds + 1) * sizeof *tp);
    if (!tp) return ATS_ENOMEM;
    for (size_t i = 0; i < out->n_rounds; i++)
        if (out->rounds[i].phase == ATSC_PHASE_DECODE) tp[nd++] = out->rounds[i].latency_s;
    out->tpot_mean_s = nd ? out->decode_s / (double)nd : NAN;
    out->tpot_p50_s = sim_percentile(tp, nd, 50);
    out->tpot_p99_s = sim_percentile(tp, nd, 99);
    free(tp);
    /* request metrics need a completed request: a run cut by --duration after its prefill or
       in its decode has rounds, not a TTFT or TPOT (README: `-`, empty in CSV, null in JSON) */
    if (out->n_requests_done == 0) out->ttft_mean_s = out->tpot_mean_s = out->tpot_p50_s = out->tpot_p99_s = NAN;
    return ATS_OK;
}
