/*
 * sim/src/prefetch.c — decode prefetches (plan rule R2): weight transfers issued during the previous
 * round. The engine cannot go back in time, so the part the copy engine could have moved in the previous
 * decode round's idle tail (from its last busy end to the round end, at the link rate of now, without
 * sharing) is taken as done; the rest moves at the start of this round. An approximation, stated in
 * sim/README.md.
 */
#include <stdlib.h>
#include <string.h>

#include "session_impl.h"

enum ats_status sim_sess_xfer_capacity(session *s, int32_t n_wxfers)
{
    if (n_wxfers <= s->cap_x) return ATS_OK;
    int32_t nc = n_wxfers * 2;
    int32_t *x = realloc(s->xfer_task, (size_t)nc * sizeof *x);
    if (!x) return ATS_ENOMEM;
    s->xfer_task = x;
    double *pf = realloc(s->prefetched, (size_t)nc * sizeof *pf);
    if (!pf) return ATS_ENOMEM;
    s->prefetched = pf;
    s->cap_x = nc;
    return ATS_OK;
}

double sim_sess_prefetch(session *s, int k, const ats_plan *plan)
{
    const sim_session_cfg *cfg = s->cfg;
    double pre_bytes = 0.0, a_pcie;
    sim_engine_avail(s->eng, NULL, NULL, &a_pcie);
    double rate = (s->hw->pcie_h2d_bw < s->hw->pcie_link_bw ? s->hw->pcie_h2d_bw : s->hw->pcie_link_bw) * a_pcie;
    double free_at[SIM_MAX_CE];
    memcpy(free_at, s->ce_last_end, sizeof free_at);
    for (int32_t x = 0; x < plan->n_wxfers; x++) {
        const ats_wxfer *w = &plan->wxfers[x];
        s->prefetched[x] = 0.0;
        if (!w->prefetch || plan->serialized || cfg->force_serialized || k != 1 || !s->prev_was_decode) continue;
        double window = s->prev_end - free_at[w->ce] - s->hw->pcie_latency_s;
        if (window <= 0.0) continue;
        double b = (double)w->bytes < window * rate ? (double)w->bytes : window * rate;
        s->prefetched[x] = b;
        free_at[w->ce] += s->hw->pcie_latency_s + b / rate;
        pre_bytes += b;
    }
    return pre_bytes;
}

void sim_sess_ce_idle(session *s, int k, double t0, double t1)
{
    s->prev_end = t1;
    s->prev_was_decode = k == 1;
    for (int e = 0; e < SIM_MAX_CE; e++) s->ce_last_end[e] = t0;
    for (int32_t t = 0; t < s->prog.n; t++) {
        const sim_task *tk = &s->prog.tasks[t];
        if (tk->queue >= SIM_Q_CE0 && tk->t_end_s > s->ce_last_end[tk->queue - SIM_Q_CE0])
            s->ce_last_end[tk->queue - SIM_Q_CE0] = tk->t_end_s;
    }
}
