/* sim/src/plan_exec.c — one round's ats_plan → engine program (rules R1–R7 of sched/plan.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/session.h"

sim_exec_opts sim_exec_opts_default(void)
{
    sim_exec_opts o;
    memset(&o, 0, sizeof o);
    o.act_path = -1;
    return o;
}

static enum ats_status add(sim_prog *p, sim_task_kind k, int q, double work, const int32_t *deps,
                           int32_t nd, int tag, int32_t op, int32_t *idx, ats_err *err)
{
    enum ats_status st = sim_prog_add(p, k, q, work, deps, nd, idx, err);
    if (st) return st;
    p->tasks[*idx].tag = (uint8_t)tag;
    p->tasks[*idx].op = op;
    return ATS_OK;
}

enum ats_status sim_prog_from_plan(sim_prog *prog, const ats_graph *g, const ats_plan *plan,
                                   const ats_costs *truth, const sim_exec_opts *opts,
                                   int32_t *op_task, int32_t *xfer_task, int32_t *act_task,
                                   ats_err *err)
{
    sim_exec_opts def = sim_exec_opts_default();
    if (!opts) opts = &def;
    const int32_t n = plan->n_ops;
    if (n != g->n_ops || truth->n != n)
        return ats_err_set(err, ATS_EINVAL, "plan has %d ops, graph %d, costs %d", n, g->n_ops, truth->n);
    sim_prog_clear(prog);
    enum ats_status st;
    int32_t *otask = op_task, *xtask = xfer_task, *own = NULL;
    if (!otask || !xtask) {
        own = malloc(((size_t)n + (size_t)plan->n_wxfers + 1) * sizeof *own);
        if (!own) return ATS_ENOMEM;
        if (!otask) otask = own;
        if (!xtask) xtask = own + n;
    }
    int32_t base = -1, prev = -1, bar[2], nbar = 0; /* tasks everything of the round waits for */
    if (opts->resched_cost_s > 0.0) {
        st = add(prog, SIM_TASK_CPU, SIM_Q_CPU, opts->resched_cost_s, NULL, 0, SIM_TAG_RESCHED, -1, &base,
                 err);
        if (st) goto out;
        prog->tasks[base].mem_frac = 0.0; /* the DP is compute-bound */
        prog->tasks[base].flop_frac = 1.0;
        prev = base;
        bar[nbar++] = base;
    }
    if (opts->upload_bytes > 0.0) {
        int32_t up;
        st = add(prog, SIM_TASK_CE_H2D, SIM_Q_CE0, opts->upload_bytes, NULL, 0, SIM_TAG_UPLOAD, -1, &up, err);
        if (st) goto out;
        bar[nbar++] = up;
    }
    const int serial = opts->force_serialized || plan->serialized;
    int32_t k = 0;
    for (int32_t i = 0; i <= n; i++) {
        /* issue, in plan order, every weight transfer whose waits are already in the program */
        while (k < plan->n_wxfers) {
            const ats_wxfer *x = &plan->wxfers[k];
            int has_w = x->has_wait_op;
            int32_t w_op = x->wait_op;
            const int32_t fh = x->op >= 0 && x->op < n ? ats_op_fused_head(g, x->op) : x->op; /* R7: a fused group's
                                                                                        transfers before its first op */
            if (opts->force_serialized && fh >= 1 && (!has_w || fh - 1 > w_op)) {
                w_op = fh - 1;
                has_w = 1;
            }
            int pre = x->prefetch && !serial;
            if (pre) has_w = 0;
            /* the last op it waits for, if any */
            int has_need = has_w || x->has_wait_router;
            int32_t need = !has_w ? x->wait_router
                           : !x->has_wait_router ? w_op
                           : x->wait_router > w_op ? x->wait_router : w_op;
            if (has_need && need >= i) break;
            if ((has_need && need >= x->op) || x->op < 0 || x->op >= n) {
                st = ats_err_set(err, ATS_EINVAL, "plan: weight transfer %d into op %d waits for op %d", k,
                                 x->op, need);
                goto out;
            }
            if (x->ce < 0 || x->ce >= SIM_MAX_CE) {
                st = ats_err_set(err, ATS_EINVAL, "plan: weight transfer %d on copy engine %d", k, x->ce);
                goto out;
            }
            int32_t deps[4], nd = 0, idx;
            if (!pre) {
                if (x->has_wait_router) deps[nd++] = otask[x->wait_router];
                if (has_w) deps[nd++] = otask[w_op];
                for (int b = 0; b < nbar; b++) deps[nd++] = bar[b];
            }
            double bytes = (double)x->bytes;
            if (pre && opts->prefetched_bytes) {
                bytes -= opts->prefetched_bytes[k];
                if (bytes < 0.0) bytes = 0.0;
            }
            st = add(prog, SIM_TASK_CE_H2D, SIM_Q_CE0 + x->ce, bytes, deps, nd, SIM_TAG_WXFER, x->op, &idx, err);
            if (st) goto out;
            xtask[k] = idx;
            k++;
        }
        if (i == n) break;
        const ats_plan_op *po = &plan->ops[i];
        if (act_task) act_task[i] = -1;
        /* activation copy into op i (R1: on the compute timeline) */
        if (po->has_act_xfer) {
            const ats_axfer *a = &plan->axfers[po->act_xfer];
            int path = opts->act_path >= 0 ? opts->act_path : a->path;
            sim_task_kind kind;
            int q;
            if (path == ATS_ACT_CE) {
                kind = a->dir == ATS_H2D ? SIM_TASK_CE_H2D : SIM_TASK_CE_D2H;
                q = SIM_Q_CE0;
            } else {
                kind = a->dir == ATS_H2D ? SIM_TASK_SM_H2D : SIM_TASK_SM_D2H;
                q = SIM_Q_GPU;
            }
            int32_t adeps[4], nad = 0, idx;
            if (prev >= 0) adeps[nad++] = prev;
            for (int b = 0; b < nbar; b++)
                if (bar[b] != prev) adeps[nad++] = bar[b];
            /* R7: in serialized plans the activation follows the op's weight transfer */
            if (serial && po->has_wait_xfer && po->wait_xfer < k) adeps[nad++] = xtask[po->wait_xfer];
            st = add(prog, kind, q, (double)a->bytes, adeps, nad, SIM_TAG_AXFER, i, &idx, err);
            if (st) goto out;
            prog->tasks[idx].latency_s = opts->act_switch_s; /* the host's switch (ats_hw.host_switch_s) */
            if (act_task) act_task[i] = idx;
            prev = idx;
        }
        /* op i: after the previous step of the compute stream and its weights (R1, R3) */
        int32_t deps[4], nd = 0, idx;
        if (prev >= 0) deps[nd++] = prev;
        if (po->has_wait_xfer) {
            if (po->wait_xfer >= k) {
                st = ats_err_set(err, ATS_EINVAL, "plan: op %d waits for transfer %d, not issued before it", i,
                                 po->wait_xfer);
                goto out;
            }
            deps[nd++] = xtask[po->wait_xfer];
        }
        for (int b = 0; b < nbar; b++)
            if (bar[b] != prev) deps[nd++] = bar[b];
        int gpu = po->backend == ATS_GPU;
        double work = gpu ? truth->t_gpu[i] : truth->t_cpu[i];
        if (opts->work_scale) work *= opts->work_scale[i];
        st = add(prog, gpu ? SIM_TASK_GPU : SIM_TASK_CPU, gpu ? SIM_Q_GPU : SIM_Q_CPU, work, deps, nd,
                 SIM_TAG_OP, i, &idx, err);
        if (st) goto out;
        if (!gpu && opts->cpu_mem_frac && opts->cpu_flop_frac) {
            prog->tasks[idx].mem_frac = opts->cpu_mem_frac[i];
            prog->tasks[idx].flop_frac = opts->cpu_flop_frac[i];
        }
        otask[i] = idx;
        prev = idx;
    }
    if (k != plan->n_wxfers)
        st = ats_err_set(err, ATS_EINVAL, "plan: weight transfer %d waits for an op that never runs", k);
    else
        st = ATS_OK;
out:
    free(own);
    return st;
}
