/*
 * exec/runtime/plan_exec.c — where a plan runs on hardware (ex/runtime.h): the executor's twin of
 * sim/src/plan_exec.c, rule for rule (ats/plan.h R1-R7):
 *  R1 compute stream in op order: the session runs the ops in graph order; each op on the backend
 *     the plan gives it (ex_session_set_op_backend); a GPU op is queued on the compute stream, a CPU
 *     op runs on the host thread, which waits for the compute stream only when execution moves from
 *     GPU to CPU (the session's residency flush at a backend change: the plan's sync_compute).
 *  R2 the transfer stream (copy engine 0) in plan order: before op i, every transfer whose waits are
 *     ops < i is issued (the same loop as the simulator's), after the transfer stream waits for the
 *     events recorded after those ops (GPU ops; a CPU op has ended when the host reaches op i).
 *     Prefetch transfers have no waits: they go before op 0 (every slot is free at a round start:
 *     the previous round ended with a sync of both streams).
 *  R3 a promoted op's compute-stream work waits for its transfer's event.
 *  R4 a temp range is refilled only after its last reader: the transfer waits for the event of its
 *     wait_op; after a promoted op ran, its slot is retired (the host device poisons it).
 *  R5 routed-expert transfers wait for the router's event (wait_router).
 *  R7 --serialized: every transfer also waits for the op before its consumer, no prefetch.
 * The fused ops of the session (routed experts of a layer run at their FFN_GATE_EXPS op, shared
 * experts at FFN_GATE_SHEXP, reading the up/down weights there) need a group's three weights on one
 * backend when the group's first op runs: a group runs on the GPU only when the plan puts all three
 * ops there and every promoted member's transfer can be issued before the group's first op.
 * Promoted routed experts: after the layer's router the host reads its choice (a flush when the
 * router ran on the GPU), each expert transfer copies only the selected experts, compactly, and the
 * session runs the group with ids renumbered into that layout (ex_session_set_expert_map).
 * sched plans each group as a unit (ats_op_fused_head, ats_plan_opts.fused_groups), so the policies'
 * plans meet all of this; a plan that does not (a group split across backends, mixing promoted and
 * resident routed-expert tensors, a member's weights issued after the group's first op, or more
 * experts chosen than its slot holds) runs that group on the CPU. Such ops count as off-plan
 * (ex_rt_round.n_off_plan); their transfers are not issued.
 * Measurements (contract 3): CPU ops by the host clock, GPU ops by events around each op on timed
 * rounds (every cfg.time_every-th), transfers by events around each copy; ats_round_obs →
 * ats_controller_observe after every round, as sim/src/session.c does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ats/costs.h"
#include "ats/policy.h"
#include "ats/transfer.h"
#include "ex/runtime.h"

#define ALIGN_BYTES 256u

typedef struct phase_rt {
    double *m_cpu, *m_gpu, *m_w; /* measured snapshot: last time of op i on the CPU, the GPU, its
                                    transfer in this phase [s] (NaN: never measured) */
    double r_cpu, r_gpu, r_w;    /* measured / model over the ops measured in the last round (0: none) */
    int64_t n_obs;               /* rounds fed to a controller of this phase */
    int64_t n_calib;             /* re-plans on a new measured snapshot (not counted by the controller) */
    int calibrated;              /* the nominal is the measured snapshot (frozen; the controller's load
                                    factors are relative to it from then on) */
    double lat_sum[2];           /* Σ latency of this phase's untimed [0] and timed [1] rounds [s] ... */
    double tok_sum[2];           /* ... and their tokens: time_every 0 keeps the events' cost ~2% */
    ats_graph *g;          /* graph the controller plans on (the phase's first round shape) */
    ats_costs nominal;     /* the controller's nominal: this round's shape, set before each round */
    ats_controller *ctrl;
    int started;
    int pending_resched;   /* the last observe re-planned: reported with the next round */
    double pending_cost_s;
} phase_rt;

struct ex_rt {
    const ex_model *m;
    ex_session *s;
    ex_device *dev;        /* NULL: CPU only */
    const ex_backend *cpu, *gbe;
    ex_rt_cfg cfg;
    ats_policy *pol;
    ats_placement place;
    ats_placement place_dec;   /* the decode placement (ats_policy_decode_placement; n 0: none) */
    uint64_t dec_base;         /* its ring starts there in the temp region; its extra weights below */
    uint64_t *dec_off;         /* per op: offset of its extra weight in the temp region (UINT64_MAX: none) */
    uint8_t *dec_own;          /* per op: its weight is copied for it (0: another op's copy shares its host bytes) */
    int dec_loaded;            /* the extra weights are on the device and bound (until a prefill round) */
    uint64_t dec_bytes;        /* their bytes (deduplicated by host address) */
    int64_t dec_uploads;       /* times they were uploaded */
    uint64_t up_round;         /* bytes of them uploaded before the round being run */
    void *ev_upload;           /* recorded on the transfer stream after their upload */
    const ats_placement *cur;  /* the placement of the round being run ... */
    uint64_t ring_base;        /* ... and where its plans' ring starts in the temp region */
    phase_rt ph[2];
    int32_t n;
    /* weights per op */
    const void **w_host;
    size_t *w_bytes;
    /* device memory */
    void *res_region, *temp_region;
    uint64_t res_bytes, temp_bytes, kv_bytes, compute_bytes;
    void *pinned;
    int pin_warned;            /* the one warning for refused pins was printed */
    double upload_s;
    /* events */
    void **ev_end, **ev_start; /* per op */
    void **xev0, **xev1;       /* per transfer */
    void *ev_round;            /* recorded on the transfer stream at each round's start */
    int32_t cap_x;
    /* per-round state */
    const ats_plan *plan;
    uint8_t *eff;              /* backend each op runs on this round */
    uint8_t *need_ev;          /* some transfer waits for this op's end */
    uint8_t *skip;             /* per transfer: not issued (off-plan consumer) */
    uint8_t *kv_drop;          /* per op: a promoted attention: its KV slab leaves the device after it */
    int32_t *issue_at;         /* per transfer: before which op it is issued */
    int32_t *wait_of;          /* per transfer: serialized-adjusted wait_op (-1 none) */
    int32_t *xfer_of;          /* per op: transfer feeding it, -1 none (and not skipped) */
    int32_t *group_first;      /* per op: first op of its fused group (itself when none) */
    int32_t next_x;
    int timed;
    int32_t n_off;             /* ops moved off the plan this round */
    size_t *x_bytes;           /* per op: bytes its transfer moves this round */
    double *xiv;               /* 4 n: the round's copy intervals and ats_cpu_idle_time's scratch */
    int32_t *sel, n_sel;       /* the selected experts of the layer being run (sorted) */
    int32_t *slot_of;          /* expert → compact slot, -1 (n_expert) */
    uint64_t round_h2d;
    ats_err *err;              /* the forward's err, for the hook */
    /* measurements */
    ats_round_obs obs;
    double *t_gpu_last;        /* last measured GPU time per op [s]; NaN never */
    double *t_start, *t_end, *t_exec, *x_start, *x_end;
    double *h_in, *h_sw, *h_call;  /* the host's work before each op (ex_rt_op_times) */
    int64_t epoch_ns, round_idx, x_t0_ns;
    double gpu_busy_s, timed_round_s;
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

ex_rt_cfg ex_rt_cfg_default(void)
{
    ex_rt_cfg c;
    memset(&c, 0, sizeof c);
    c.policy = "ats";
    c.ctrl = ats_controller_cfg_default();
    c.prompt_tok = 512;
    c.chunk_tok = 512;
    c.gen_tok = -1;
    c.act_path = -1;
    c.measured = 1;
    return c;
}

static uint64_t align_up(uint64_t x) { return (x + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES; }

/* Device bytes of the compute buffers the op table allocates for a round of `chunk` tokens: the
 * session's activation scratch mirrored (x, xb, q, k, v, att, tmp, tmp2, router, ids, weights, g,
 * u, logits) and the prefill GEMM workspace (the largest matrix dequantized to F16, activations in
 * F16). An estimate of ex_backend_cuda's allocations, stated as such in the refusal message. */
static uint64_t compute_estimate(const ats_arch *a, const ats_graph *g, int64_t chunk)
{
    const uint64_t n = (uint64_t)(chunk > 0 ? chunk : 1), f = 4;
    const uint64_t E = (uint64_t)a->n_embd, qd = (uint64_t)(a->n_head * a->head_dim);
    const uint64_t kvd = (uint64_t)(a->n_head_kv * a->head_dim);
    const uint64_t X = (uint64_t)(a->n_expert > 0 ? a->n_expert : 1), K = (uint64_t)(a->n_expert_used > 0 ? a->n_expert_used : 1);
    uint64_t F = (uint64_t)(a->n_ff > 0 ? a->n_ff : 1);
    if ((uint64_t)a->n_ff_exp > F) F = (uint64_t)a->n_ff_exp;
    uint64_t act = n * f * (4 * E + 2 * qd + 2 * kvd + X + 2 * K + 2 * F) + (uint64_t)a->n_vocab * f;
    uint64_t mat = 0, wid = E;
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        if (op->role == ATS_ROLE_OUTPUT || op->kind == ATS_OP_EMBED) continue; /* last token only (GEMV) / a row lookup */
        uint64_t e = (uint64_t)op->n_out * (uint64_t)op->n_in;
        if (e > mat) mat = e;
        if ((uint64_t)op->n_in > wid) wid = (uint64_t)op->n_in;
    }
    uint64_t ws = chunk > 8 ? 2 * mat + 2 * n * wid * 2 : 4 * n * wid;
    return act + ws + (32u << 20); /* + cuBLAS workspace */
}

static int is_member(const ats_op *op)
{
    return op->role == ATS_ROLE_FFN_UP_EXPS || op->role == ATS_ROLE_FFN_DOWN_EXPS ||
           op->role == ATS_ROLE_FFN_UP_SHEXP || op->role == ATS_ROLE_FFN_DOWN_SHEXP;
}
static int is_group_head(const ats_op *op)
{
    return op->role == ATS_ROLE_FFN_GATE_EXPS || op->role == ATS_ROLE_FFN_GATE_SHEXP;
}

void ex_rt_free(ex_rt *rt)
{
    if (!rt) return;
    if (rt->dev) {
        ats_err e;
        (void)rt->dev->sync(rt->dev->ctx, EX_DEV_COMPUTE, &e);
        (void)rt->dev->sync(rt->dev->ctx, EX_DEV_TRANSFER, &e);
        if (rt->gbe && rt->gbe->bind_weight && rt->w_host)
            for (int32_t i = 0; i < rt->n; i++)
                if (rt->w_host[i]) (void)rt->gbe->bind_weight(rt->gbe->ctx, rt->w_host[i], 0, NULL);
        if (rt->gbe && rt->gbe->bound_only) rt->gbe->bound_only(rt->gbe->ctx, 0);
        for (int32_t i = 0; rt->ev_end && i < rt->n; i++) {
            if (rt->ev_end[i]) rt->dev->event_free(rt->dev->ctx, rt->ev_end[i]);
            if (rt->ev_start[i]) rt->dev->event_free(rt->dev->ctx, rt->ev_start[i]);
        }
        for (int32_t k = 0; rt->xev0 && k < rt->cap_x; k++) {
            if (rt->xev0[k]) rt->dev->event_free(rt->dev->ctx, rt->xev0[k]);
            if (rt->xev1[k]) rt->dev->event_free(rt->dev->ctx, rt->xev1[k]);
        }
        if (rt->ev_round) rt->dev->event_free(rt->dev->ctx, rt->ev_round);
        if (rt->ev_upload) rt->dev->event_free(rt->dev->ctx, rt->ev_upload);
        if (rt->res_region) rt->dev->free_mem(rt->dev->ctx, rt->res_region);
        if (rt->temp_region) rt->dev->free_mem(rt->dev->ctx, rt->temp_region);
        if (rt->pinned && rt->dev->host_unpin) rt->dev->host_unpin(rt->dev->ctx, rt->pinned);
    }
    ex_session_free(rt->s); /* before the op table's owner frees it (forget) */
    for (int k = 0; k < 2; k++) {
        free(rt->ph[k].m_cpu);
        free(rt->ph[k].m_gpu);
        free(rt->ph[k].m_w);
        ats_controller_free(rt->ph[k].ctrl);
        ats_costs_free(&rt->ph[k].nominal);
        ats_graph_free(rt->ph[k].g);
    }
    ats_placement_free(&rt->place);
    ats_placement_free(&rt->place_dec);
    free(rt->dec_off);
    free(rt->dec_own);
    ats_policy_free(rt->pol);
    ats_round_obs_free(&rt->obs);
    free(rt->w_host); free(rt->w_bytes); free(rt->ev_end); free(rt->ev_start); free(rt->xev0); free(rt->xev1);
    free(rt->eff); free(rt->need_ev); free(rt->kv_drop); free(rt->skip); free(rt->issue_at); free(rt->wait_of); free(rt->xfer_of);
    free(rt->group_first); free(rt->t_gpu_last); free(rt->t_start); free(rt->t_end); free(rt->t_exec);
    free(rt->x_start); free(rt->x_end); free(rt->h_in); free(rt->h_sw); free(rt->h_call); free(rt->x_bytes); free(rt->xiv); free(rt->sel); free(rt->slot_of);
    free(rt);
}

/* Nominal costs of a round shape of this session's model. */
static enum ats_status shape_costs(ex_rt *rt, ats_phase_kind kind, int64_t n_tok, int64_t ctx_pos, ats_costs *out,
                                   ats_graph **keep, ats_err *err)
{
    ats_graph *g = NULL;
    enum ats_status st = ex_session_round_graph(rt->s, kind, n_tok, ctx_pos, &g, err);
    if (st) return st;
    st = ats_costs_from_model(g, rt->cfg.hw, out, err);
    if (st == ATS_OK && keep) *keep = g;
    else ats_graph_free(g);
    return st;
}

static enum ats_status grow_x(ex_rt *rt, int32_t nx, ats_err *err)
{
    if (nx <= rt->cap_x) return ATS_OK;
    int32_t nc = nx * 2;
    void **a = realloc(rt->xev0, (size_t)nc * sizeof *a), **b;
    if (!a) return ATS_ENOMEM;
    rt->xev0 = a;
    b = realloc(rt->xev1, (size_t)nc * sizeof *b);
    if (!b) return ATS_ENOMEM;
    rt->xev1 = b;
    for (int32_t k = rt->cap_x; k < nc; k++) rt->xev0[k] = rt->xev1[k] = NULL;
    int32_t old = rt->cap_x;
    rt->cap_x = nc;
    if (rt->dev)
        for (int32_t k = old; k < nc; k++) {
            enum ats_status st = rt->dev->event_new(rt->dev->ctx, &rt->xev0[k], err);
            if (!st) st = rt->dev->event_new(rt->dev->ctx, &rt->xev1[k], err);
            if (st) return st;
        }
    uint8_t *sk = realloc(rt->skip, (size_t)nc);
    int32_t *ia = realloc(rt->issue_at, (size_t)nc * sizeof *ia);
    if (sk) rt->skip = sk;
    if (ia) rt->issue_at = ia;
    int32_t *wo = realloc(rt->wait_of, (size_t)nc * sizeof *wo);
    if (wo) rt->wait_of = wo;
    if (!sk || !ia || !wo) return ATS_ENOMEM;
    return ATS_OK;
}

/* The placement rounds of phase k (0 prefill, 1 decode) run on. */
static const ats_placement *phase_place(const ex_rt *rt, int k)
{
    return k == 1 && rt->place_dec.n ? &rt->place_dec : &rt->place;
}

/* The decode placement's extra weights (ats_policy_decode_placement): before a decode round, when
 * not there yet, copied into the front of the temp region on the transfer stream and bound (the
 * compute stream waits for them: the round's first op runs after them, as the simulator's upload
 * task); before a prefill round, unbound (its transfers overwrite the ring that held them). */
static enum ats_status decode_weights(ex_rt *rt, int decode, ats_err *err)
{
    ex_device *d = rt->dev;
    const ats_graph *g = ex_session_graph(rt->s);
    enum ats_status st;
    if (decode == rt->dec_loaded) return ATS_OK;
    for (int32_t i = 0; i < rt->n; i++) {
        if (rt->dec_off[i] == UINT64_MAX) continue;
        char *dst = (char *)rt->temp_region + rt->dec_off[i];
        const int own = rt->dec_own[i];
        if (decode && own && (st = d->h2d(d->ctx, dst, rt->w_host[i], rt->w_bytes[i], EX_DEV_TRANSFER, err)))
            return ats_err_set(err, st, "uploading the decode placement's weight of op %d '%s': %s", i, g->ops[i].name,
                               err->msg);
        if (decode && own) rt->round_h2d += rt->w_bytes[i], rt->up_round += rt->w_bytes[i];
        if ((st = rt->gbe->bind_weight(rt->gbe->ctx, rt->w_host[i], decode ? rt->w_bytes[i] : 0, decode ? dst : NULL)))
            return ats_err_set(err, st, "binding the decode placement's weight of op %d '%s'", i, g->ops[i].name);
    }
    if (decode && ((st = d->record(d->ctx, rt->ev_upload, EX_DEV_TRANSFER, err)) ||
                   (st = d->wait(d->ctx, EX_DEV_COMPUTE, rt->ev_upload, err))))
        return st;
    rt->dec_loaded = decode;
    rt->dec_uploads += decode;
    return ATS_OK;
}

/* Lays out and uploads the resident region (the placement's GPU weights, deduplicated by host
 * address, plus the Q/K norm vectors and RoPE factors that attention reads), checks the budget. */
static enum ats_status layout(ex_rt *rt, const ats_graph *gd, ats_err *err)
{
    ex_device *d = rt->dev;
    const ex_model *m = rt->m;
    const ats_arch *a = &m->arch;
    /* extras: per-layer q_norm / k_norm, rope_freqs */
    uint64_t off = 0;
    const int32_t n = rt->n;
    uint64_t *w_off = calloc((size_t)n, sizeof *w_off);
    uint8_t *w_own = calloc((size_t)n, 1);
    if (!w_off || !w_own) {
        free(w_off); free(w_own);
        return ATS_ENOMEM;
    }
    for (int32_t i = 0; i < n; i++) {
        if (rt->place.backend[i] != ATS_GPU) continue;
        if (gd->ops[i].kind == ATS_OP_ATTN) rt->kv_bytes += gd->ops[i].kv_cache_bytes;
        if (!rt->w_host[i]) continue;
        int dup = -1;
        for (int32_t j = 0; j < i && dup < 0; j++)
            if (w_own[j] && rt->w_host[j] == rt->w_host[i]) dup = j;
        if (dup >= 0) {
            w_off[i] = w_off[dup];
            continue;
        }
        w_own[i] = 1;
        w_off[i] = off;
        off = align_up(off + rt->w_bytes[i]);
    }
    uint64_t extras = 0;
    const size_t hd4 = (size_t)a->head_dim * sizeof(float);
    if (a->qk_norm) extras += 2 * (uint64_t)a->n_layer * align_up(hd4);
    if (m->rope_freqs.data) extras += align_up((uint64_t)(m->n_rot / 2) * sizeof(float));
    rt->res_bytes = off + extras;
    rt->temp_bytes = ats_policy_temp_bytes(rt->pol);
    uint64_t total = rt->res_bytes + rt->temp_bytes + rt->kv_bytes + rt->compute_bytes;
    enum ats_status st = ATS_OK;
    if (total > rt->cfg.vram_budget_bytes) {
        st = ats_err_set(err, ATS_EINFEASIBLE,
                         "policy %s: the layout needs %.3f GiB on the device (resident weights %.3f + temp ring %.3f + "
                         "KV cache %.3f + compute buffers %.3f, estimated) > --vram-budget %.3f GiB",
                         rt->cfg.policy, total / 1073741824.0, rt->res_bytes / 1073741824.0,
                         rt->temp_bytes / 1073741824.0, rt->kv_bytes / 1073741824.0, rt->compute_bytes / 1073741824.0,
                         rt->cfg.vram_budget_bytes / 1073741824.0);
        goto out;
    }
    if ((st = d->alloc(d->ctx, rt->res_bytes, &rt->res_region, err))) goto out;
    if (rt->temp_bytes && (st = d->alloc(d->ctx, rt->temp_bytes, &rt->temp_region, err))) goto out;
    if (rt->place_dec.n) { /* the decode placement's extra weights: packed in op order below its ring */
        uint64_t eo = 0;
        for (int32_t i = 0; i < n; i++) {
            rt->dec_off[i] = UINT64_MAX;
            rt->dec_own[i] = 0;
            if (rt->place_dec.backend[i] != ATS_GPU || rt->place.backend[i] == ATS_GPU || !rt->w_host[i]) continue;
            int res = 0; /* a weight shared with a resident op (tied embeddings) is there already */
            for (int32_t j = 0; j < n && !res; j++) res = rt->place.backend[j] == ATS_GPU && rt->w_host[j] == rt->w_host[i];
            if (res) continue;
            for (int32_t j = 0; j < i && rt->dec_off[i] == UINT64_MAX; j++)
                if (rt->dec_off[j] != UINT64_MAX && rt->w_host[j] == rt->w_host[i]) rt->dec_off[i] = rt->dec_off[j];
            if (rt->dec_off[i] != UINT64_MAX) continue;
            rt->dec_off[i] = eo;
            rt->dec_own[i] = 1;
            rt->dec_bytes += rt->w_bytes[i];
            eo = align_up(eo + rt->w_bytes[i]);
        }
        if (eo > rt->dec_base) {
            st = ats_err_set(err, ATS_EINVAL,
                             "policy %s: the decode placement's extra weights take %llu bytes, its ring starts at %llu",
                             rt->cfg.policy, (unsigned long long)eo, (unsigned long long)rt->dec_base);
            goto out;
        }
    }
    const ex_backend *be = rt->gbe;
    int64_t t0 = mono_ns();
    for (int32_t i = 0; i < n; i++) {
        if (rt->place.backend[i] != ATS_GPU || !rt->w_host[i]) continue;
        char *dst = (char *)rt->res_region + w_off[i];
        if (w_own[i] && (st = d->h2d(d->ctx, dst, rt->w_host[i], rt->w_bytes[i], EX_DEV_TRANSFER, err))) goto out;
        if ((st = be->bind_weight(be->ctx, rt->w_host[i], rt->w_bytes[i], dst))) {
            st = ats_err_set(err, st, "binding the resident weight of op %d '%s'", i, gd->ops[i].name);
            goto out;
        }
    }
    {
        char *p = (char *)rt->res_region + off;
        for (int64_t l = 0; a->qk_norm && l < a->n_layer; l++) {
            const void *hs[2] = {m->layers[l].q_norm.data, m->layers[l].k_norm.data};
            for (int q = 0; q < 2; q++) {
                if ((st = d->h2d(d->ctx, p, hs[q], hd4, EX_DEV_TRANSFER, err))) goto out;
                if ((st = be->bind_weight(be->ctx, hs[q], hd4, p))) goto out;
                p += align_up(hd4);
            }
        }
        if (m->rope_freqs.data) {
            size_t b = (size_t)(m->n_rot / 2) * sizeof(float);
            if ((st = d->h2d(d->ctx, p, m->rope_freqs.data, b, EX_DEV_TRANSFER, err))) goto out;
            if ((st = be->bind_weight(be->ctx, m->rope_freqs.data, b, p))) goto out;
        }
    }
    if ((st = d->sync(d->ctx, EX_DEV_TRANSFER, err))) goto out;
    rt->upload_s = (double)(mono_ns() - t0) * 1e-9;
    be->bound_only(be->ctx, 1);
out:
    free(w_off);
    free(w_own);
    return st;
}

/* Pins the host span of all weights (one registration; refused: one warning, pageable copies). */
static void pin_weights(ex_rt *rt)
{
    if (!rt->dev->host_pin) return;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int32_t i = 0; i < rt->n; i++) {
        if (!rt->w_host[i]) continue;
        uintptr_t a = (uintptr_t)rt->w_host[i], b = a + rt->w_bytes[i];
        if (a < lo) lo = a;
        if (b > hi) hi = b;
    }
    if (hi <= lo) return;
    lo &= ~(uintptr_t)4095;
    hi = (hi + 4095) & ~(uintptr_t)4095;
    ats_err e;
    if (rt->dev->host_pin(rt->dev->ctx, (void *)lo, (size_t)(hi - lo), &e) == ATS_OK)
        rt->pinned = (void *)lo;
    else if (!rt->pin_warned) /* one warning for all refused pins */
        fprintf(stderr, "ats run: warning: pinning %.2f GiB of host weights was refused (%s; ulimit -l?): weight "
                        "copies run from pageable memory, slower and not overlapped\n",
                (double)(hi - lo) / 1073741824.0, e.msg);
}

/* The session's pin hooks over the device's (ex_session_opts.pin). */
static int session_pin(void *ctx, void *host, size_t bytes)
{
    ex_device *d = ctx;
    ats_err e;
    return d->host_pin(d->ctx, host, bytes, &e) == ATS_OK ? 0 : -1;
}
static void session_unpin(void *ctx, void *host)
{
    ex_device *d = ctx;
    d->host_unpin(d->ctx, host);
}

enum ats_status ex_rt_new(const ex_model *m, const ex_session_opts *so, ex_device *dev, const ex_rt_cfg *cfg,
                          ex_rt **out, ats_err *err)
{
    *out = NULL;
    if (!cfg || !cfg->policy || !cfg->hw) return ats_err_set(err, ATS_EINVAL, "runtime: no policy or hardware snapshot");
    if (cfg->vram_budget_bytes == 0) return ats_err_set(err, ATS_EINVAL, "--vram-budget: 0 bytes");
    if (cfg->prompt_tok < 1 || cfg->chunk_tok < 1)
        return ats_err_set(err, ATS_EINVAL, "runtime: prompt %lld, chunk %lld tokens (must be >= 1)",
                           (long long)cfg->prompt_tok, (long long)cfg->chunk_tok);
    if (dev && (!dev->backend || !dev->backend->bind_weight || !dev->backend->bound_only))
        return ats_err_set(err, ATS_EINVAL, "device %s: its op table cannot run weights at given addresses", dev->name);
    ex_rt *rt = calloc(1, sizeof *rt);
    if (!rt) return ATS_ENOMEM;
    rt->m = m;
    rt->dev = dev;
    rt->cfg = *cfg;
    rt->cpu = ex_backend_cpu();
    rt->gbe = dev ? dev->backend : NULL;
    ex_session_opts o = so ? *so : ex_session_opts_default();
    o.split_layer = -1;
    o.backend_a = o.backend_b = rt->cpu;
    o.op_backend = NULL;
    o.sync_ops = 0;
    if (dev && dev->host_pin && dev->host_unpin) { /* activations and KV cache: DMA at backend switches */
        o.pin = session_pin;
        o.unpin = session_unpin;
        o.pin_ctx = dev;
    }
    enum ats_status st = ex_session_new(m, &o, &rt->s, err);
    if (st) goto fail;
    int64_t n_res = cfg->chunk_tok < cfg->prompt_tok ? cfg->chunk_tok : cfg->prompt_tok;
    if (n_res > ex_session_n_ctx(rt->s)) n_res = ex_session_n_ctx(rt->s);
    if ((st = ex_session_reserve(rt->s, n_res))) {
        st = ats_err_set(err, st, "scratch for a prefill chunk of %lld tokens", (long long)n_res);
        goto fail;
    }
    size_t pin_asked, pin_done;
    ex_session_pinned(rt->s, &pin_asked, &pin_done);
    if (pin_done < pin_asked) {
        fprintf(stderr, "ats run: warning: pinning %.1f MiB of KV cache and activations was refused (ulimit -l?): "
                        "their copies at CPU/GPU switches run from pageable memory, each one waited for\n",
                (double)(pin_asked - pin_done) / 1048576.0);
        rt->pin_warned = 1;
    }
    const ats_graph *sg = ex_session_graph(rt->s);
    const int32_t n = rt->n = sg->n_ops;
    if (rt->gbe) {
        /* the device table joins the session's tables up front (for forget); ops start on the CPU */
        if ((st = ex_session_set_op_backend(rt->s, 0, rt->gbe)) || (st = ex_session_set_op_backend(rt->s, 0, rt->cpu)))
            goto fail;
    }
    if (cfg->prompt_tok >= ex_session_n_ctx(rt->s)) {
        st = ats_err_set(err, ATS_EINVAL,
                         "a prompt of %lld token(s) leaves no room for a decode round in the context of %lld (the "
                         "plan executor needs prompt + 1 <= --ctx; without --policy a full context still gives "
                         "the prompt's next token)",
                         (long long)cfg->prompt_tok, (long long)ex_session_n_ctx(rt->s));
        goto fail;
    }
    rt->w_host = calloc((size_t)n, sizeof *rt->w_host);
    rt->w_bytes = calloc((size_t)n, sizeof *rt->w_bytes);
    rt->ev_end = calloc((size_t)n, sizeof *rt->ev_end);
    rt->ev_start = calloc((size_t)n, sizeof *rt->ev_start);
    rt->eff = calloc((size_t)n, 1);
    rt->need_ev = calloc((size_t)n, 1);
    rt->kv_drop = calloc((size_t)n, 1);
    rt->xfer_of = calloc((size_t)n, sizeof *rt->xfer_of);
    rt->group_first = calloc((size_t)n, sizeof *rt->group_first);
    rt->t_gpu_last = calloc((size_t)n, sizeof *rt->t_gpu_last);
    rt->t_start = calloc((size_t)n, sizeof(double));
    rt->t_end = calloc((size_t)n, sizeof(double));
    rt->t_exec = calloc((size_t)n, sizeof(double));
    rt->x_start = calloc((size_t)n, sizeof(double));
    rt->h_in = calloc((size_t)n, sizeof(double));
    rt->h_sw = calloc((size_t)n, sizeof(double));
    rt->h_call = calloc((size_t)n, sizeof(double));
    rt->x_end = calloc((size_t)n, sizeof(double));
    rt->x_bytes = calloc((size_t)n, sizeof *rt->x_bytes);
    rt->xiv = calloc(4 * (size_t)n, sizeof *rt->xiv);
    {
        int64_t ne = m->arch.n_expert > 0 ? m->arch.n_expert : 1;
        rt->sel = calloc((size_t)ne, sizeof *rt->sel);
        rt->slot_of = calloc((size_t)ne, sizeof *rt->slot_of);
        if (!rt->sel || !rt->slot_of || !rt->x_bytes || !rt->xiv) {
            st = ATS_ENOMEM;
            goto fail;
        }
    }
    if (!rt->w_host || !rt->w_bytes || !rt->ev_end || !rt->ev_start || !rt->eff || !rt->need_ev || !rt->kv_drop || !rt->xfer_of ||
        !rt->group_first || !rt->t_gpu_last || !rt->t_start || !rt->t_end || !rt->t_exec || !rt->x_start || !rt->x_end ||
        !rt->h_in || !rt->h_sw || !rt->h_call) {
        st = ATS_ENOMEM;
        goto fail;
    }
    if ((st = ats_round_obs_init(&rt->obs, n))) goto fail;
    for (int32_t i = 0; i < n; i++) {
        ex_session_op_weight(rt->s, i, &rt->w_host[i], &rt->w_bytes[i]);
        rt->t_gpu_last[i] = NAN;
        const ats_op *op = &sg->ops[i];
        rt->group_first[i] = i;
        if (is_member(op))
            for (int32_t j = i - 1; j >= 0 && j >= i - 2; j--)
                if (is_group_head(&sg->ops[j]) && sg->ops[j].layer == op->layer) rt->group_first[i] = j;
    }
    /* graphs, nominal costs, policy, placement (decode round at the prompt's context), controllers */
    const int64_t P = cfg->prompt_tok, C = cfg->chunk_tok < P ? cfg->chunk_tok : P;
    for (int k = 0; k < 2; k++) {
        phase_rt *ph = &rt->ph[k];
        if ((st = ats_costs_init(&ph->nominal, n))) goto fail;
        ph->m_cpu = malloc((size_t)n * sizeof(double));
        ph->m_gpu = malloc((size_t)n * sizeof(double));
        ph->m_w = malloc((size_t)n * sizeof(double));
        if (!ph->m_cpu || !ph->m_gpu || !ph->m_w) {
            st = ATS_ENOMEM;
            goto fail;
        }
        for (int32_t i = 0; i < n; i++) ph->m_cpu[i] = ph->m_gpu[i] = ph->m_w[i] = NAN;
    }
    if ((st = shape_costs(rt, ATS_PHASE_PREFILL, C, 0, &rt->ph[0].nominal, &rt->ph[0].g, err))) goto fail;
    if ((st = shape_costs(rt, ATS_PHASE_DECODE, 1, P, &rt->ph[1].nominal, &rt->ph[1].g, err))) goto fail;
    rt->compute_bytes = dev ? compute_estimate(&m->arch, rt->ph[0].g, C) : 0;
    uint64_t extras = 0;
    if (m->arch.qk_norm) extras += 2 * (uint64_t)m->arch.n_layer * align_up((uint64_t)m->arch.head_dim * 4);
    ats_policy_cfg pc = ats_policy_cfg_default();
    if (cfg->vram_budget_bytes <= rt->compute_bytes + extras) {
        st = ats_err_set(err, ATS_EINFEASIBLE,
                         "--vram-budget %.3f GiB: the compute buffers alone take %.3f GiB (estimated, %lld-token chunks)",
                         cfg->vram_budget_bytes / 1073741824.0, (rt->compute_bytes + extras) / 1073741824.0,
                         (long long)C);
        goto fail;
    }
    /* in 64 KiB units: the policy's temp ring is then a multiple of 512 bytes (M/4, M/8, M/16, or twice a
       weight's size), so double-buffer slots (capacity/2) and ring offsets (sums of weight sizes) keep the
       16-byte alignment the GPU's vector loads need */
    pc.vram_budget_bytes = (cfg->vram_budget_bytes - rt->compute_bytes - extras) & ~(uint64_t)65535;
    pc.n_copy_engines = 1;
    if (cfg->quantum_bytes) pc.quantum_bytes = cfg->quantum_bytes;
    pc.hostmem_cpu_factor = cfg->hw->hostmem_cpu_factor > 0 ? cfg->hw->hostmem_cpu_factor : 1.0;
    if ((st = ats_policy_new(cfg->policy, &pc, &rt->pol, err))) goto fail;
    if ((st = ats_placement_init(&rt->place, n))) goto fail;
    { /* the temp ring for the request (ats_policy_place_request), as the simulator does */
        const ats_request_shape req = {rt->ph[0].g, &rt->ph[0].nominal, (double)((P + C - 1) / C), (double)cfg->gen_tok};
        if ((st = ats_policy_place_request(rt->pol, rt->ph[1].g, &rt->ph[1].nominal, cfg->gen_tok >= 0 ? &req : NULL,
                                           &rt->place, err)))
            goto fail;
    }
    {
        const ats_placement *pd = ats_policy_decode_placement(rt->pol, &rt->dec_base);
        if (pd) {
            if ((st = ats_placement_init(&rt->place_dec, n))) goto fail;
            ats_placement_copy(&rt->place_dec, pd);
            rt->dec_own = calloc((size_t)n, 1);
            if (!(rt->dec_off = malloc((size_t)n * sizeof *rt->dec_off)) || !rt->dec_own) {
                st = ATS_ENOMEM;
                goto fail;
            }
        }
    }
    for (int k = 0; k < 2; k++)
        if ((st = ats_controller_new(rt->pol, rt->ph[k].g, phase_place(rt, k), &rt->ph[k].nominal, &cfg->ctrl,
                                     &rt->ph[k].ctrl, err)))
            goto fail;
    if (dev) {
        for (int32_t i = 0; i < n; i++)
            if ((st = dev->event_new(dev->ctx, &rt->ev_end[i], err)) || (st = dev->event_new(dev->ctx, &rt->ev_start[i], err)))
                goto fail;
        if ((st = dev->event_new(dev->ctx, &rt->ev_round, err))) goto fail;
        if ((st = dev->event_new(dev->ctx, &rt->ev_upload, err))) goto fail;
        pin_weights(rt);
        if ((st = layout(rt, rt->ph[1].g, err))) goto fail;
    }
    if ((st = grow_x(rt, 16, err))) goto fail;
    rt->epoch_ns = mono_ns();
    *out = rt;
    return ATS_OK;
fail:
    ex_rt_free(rt);
    return st;
}

/* ---- one round --------------------------------------------------------------------------- */

/* The serialized-adjusted op transfer k waits for (-1: none). */
static int32_t xfer_need(const ex_rt *rt, int32_t k, int32_t *w_op_out)
{
    const ats_wxfer *x = &rt->plan->wxfers[k];
    const int serial = rt->cfg.serialized || rt->plan->serialized;
    int has_w = x->has_wait_op;
    int32_t w_op = x->wait_op;
    const int32_t h = rt->group_first[x->op]; /* R7 for a fused group: the op before its first */
    if (rt->cfg.serialized && h >= 1 && (!has_w || h - 1 > w_op)) {
        w_op = h - 1;
        has_w = 1;
    }
    int pre = x->prefetch && !serial;
    if (pre) has_w = 0;
    *w_op_out = has_w ? w_op : -1;
    int32_t need = -1;
    if (has_w) need = w_op;
    if (!pre && x->has_wait_router && x->wait_router > need) need = x->wait_router;
    return need;
}

/* Decides where each op runs this round and which transfers are issued when. */
static enum ats_status prepare(ex_rt *rt, int32_t *n_off, ats_err *err)
{
    const ats_plan *pl = rt->plan;
    const ats_graph *g = ex_session_graph(rt->s);
    const int32_t n = rt->n;
    enum ats_status st = grow_x(rt, pl->n_wxfers + 1, err);
    if (st) return st;
    *n_off = 0;
    for (int32_t i = 0; i < n; i++) {
        rt->eff[i] = rt->dev ? pl->ops[i].backend : ATS_CPU;
        rt->need_ev[i] = 0;
        rt->kv_drop[i] = 0;
        rt->xfer_of[i] = -1;
    }
    int32_t prev = 0;
    for (int32_t k = 0; k < pl->n_wxfers; k++) {
        const ats_wxfer *x = &pl->wxfers[k];
        if (x->op < 0 || x->op >= n) return ats_err_set(err, ATS_EINVAL, "plan: weight transfer %d into op %d", k, x->op);
        int32_t w_op, need = xfer_need(rt, k, &w_op);
        if (need >= x->op)
            return ats_err_set(err, ATS_EINVAL, "plan: weight transfer %d into op %d waits for op %d", k, x->op, need);
        rt->wait_of[k] = w_op;
        rt->issue_at[k] = need + 1 > prev ? need + 1 : prev; /* FIFO: never before the previous one */
        prev = rt->issue_at[k];
        rt->skip[k] = !rt->dev;
    }
    if (!rt->dev) return ATS_OK;
    /* fused groups: all on the GPU with every member's weights there in time, else all on the CPU */
    for (int32_t i = 0; i < n; i++) {
        if (!is_group_head(&g->ops[i])) continue;
        int32_t last = i;
        while (last + 1 < n && rt->group_first[last + 1] == i) last++;
        int ok = 1, n_pe = 0, n_e = 0;
        for (int32_t j = i; j <= last && ok; j++) {
            if (pl->ops[j].backend != ATS_GPU) ok = 0;
            else if (pl->ops[j].has_wait_xfer && rt->issue_at[pl->ops[j].wait_xfer] > i) ok = 0;
            n_e += g->ops[j].kind == ATS_OP_EXPERTS;
            n_pe += g->ops[j].kind == ATS_OP_EXPERTS && pl->ops[j].promoted;
        }
        /* compact selected experts apply to all three tensors of the fused kernel (one id map) */
        if (n_pe > 0 && n_pe < n_e) ok = 0;
        if (ok) continue;
        for (int32_t j = i; j <= last; j++) {
            if (rt->eff[j] == ATS_GPU) (*n_off)++;
            rt->eff[j] = ATS_CPU;
        }
    }
    for (int32_t k = 0; k < pl->n_wxfers; k++) {
        const ats_wxfer *x = &pl->wxfers[k];
        if (g->ops[x->op].kind == ATS_OP_ATTN) { /* promote_kv: the op table moves the KV rows itself */
            rt->skip[k] = 1;
            rt->kv_drop[x->op] = rt->eff[x->op] == ATS_GPU;
            continue;
        }
        rt->skip[k] = rt->eff[x->op] != ATS_GPU || !rt->w_host[x->op];
        rt->x_bytes[x->op] = rt->w_bytes[x->op]; /* routed experts: set when the router has chosen */
        if (!rt->skip[k]) {
            const int exps = g->ops[x->op].kind == ATS_OP_EXPERTS;
            if ((!exps && rt->w_bytes[x->op] > x->bytes) || rt->ring_base + x->offset_bytes + x->slot_bytes > rt->temp_bytes)
                return ats_err_set(err, ATS_EINVAL,
                                   "plan: transfer %d of op %d moves %llu bytes at offset %llu; the weight has %zu, the "
                                   "temp ring %llu from %llu", k, x->op, (unsigned long long)x->bytes,
                                   (unsigned long long)x->offset_bytes, rt->w_bytes[x->op],
                                   (unsigned long long)(rt->temp_bytes - rt->ring_base), (unsigned long long)rt->ring_base);
            if (x->offset_bytes % 16)
                return ats_err_set(err, ATS_EINVAL,
                                   "plan: transfer %d of op %d at temp offset %llu: not 16-byte aligned (the GPU kernels' "
                                   "vector loads need it)", k, x->op, (unsigned long long)x->offset_bytes);
            rt->xfer_of[x->op] = k;
            if (rt->wait_of[k] >= 0) rt->need_ev[rt->wait_of[k]] = 1;
            if (x->has_wait_router && !(x->prefetch && !(rt->cfg.serialized || pl->serialized)))
                rt->need_ev[x->wait_router] = 1;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        if (rt->eff[i] != ATS_GPU || !rt->w_host[i] || is_member(&g->ops[i])) continue;
        int placed = rt->cur->backend[i] == ATS_GPU;
        int32_t k = rt->xfer_of[i];
        if (!placed && (k < 0 || rt->issue_at[k] > i))
            return ats_err_set(err, ATS_EINVAL,
                               "plan: op %d '%s' runs on the GPU but its weight is neither resident nor moved before it "
                               "(transfer %d, issued before op %d)", i, g->ops[i].name, k, k >= 0 ? rt->issue_at[k] : -1);
    }
    for (int32_t i = 0; i < n; i++) {
        ex_session_set_op_backend(rt->s, i, rt->eff[i] == ATS_GPU ? rt->gbe : rt->cpu);
        if (rt->eff[i] == ATS_GPU) rt->need_ev[i] |= (uint8_t)rt->timed;
    }
    return ATS_OK;
}

/* Issues transfer k on the transfer stream: waits for its ops' events, copies, records its event,
 * binds its weight to the slot. */
static enum ats_status issue(ex_rt *rt, int32_t k, ats_err *err)
{
    ex_device *d = rt->dev;
    const ats_wxfer *x = &rt->plan->wxfers[k];
    const ats_graph *g = ex_session_graph(rt->s);
    enum ats_status st;
    int32_t ws[2] = {rt->wait_of[k], -1};
    if (x->has_wait_router && !(x->prefetch && !(rt->cfg.serialized || rt->plan->serialized))) ws[1] = x->wait_router;
    for (int q = 0; q < 2; q++)
        if (ws[q] >= 0 && rt->eff[ws[q]] == ATS_GPU && (st = d->wait(d->ctx, EX_DEV_TRANSFER, rt->ev_end[ws[q]], err)))
            return ats_err_set(err, st, "transfer %d into op %d '%s': %s", k, x->op, g->ops[x->op].name, err->msg);
    char *slot = (char *)rt->temp_region + rt->ring_base + x->offset_bytes;
    const int exps = g->ops[x->op].kind == ATS_OP_EXPERTS;
    const size_t eb = (size_t)g->ops[x->op].expert_bytes;
    const size_t b = exps ? (size_t)rt->n_sel * eb : rt->w_bytes[x->op];
    if ((st = d->record(d->ctx, rt->xev0[k], EX_DEV_TRANSFER, err))) goto fail;
    if (exps) { /* R5: only the experts the router chose, compact, in expert order */
        for (int32_t j = 0; j < rt->n_sel; j++)
            if ((st = d->h2d(d->ctx, slot + (size_t)j * eb, (const char *)rt->w_host[x->op] + (size_t)rt->sel[j] * eb, eb,
                             EX_DEV_TRANSFER, err)))
                goto fail;
    } else if ((st = d->h2d(d->ctx, slot, rt->w_host[x->op], b, EX_DEV_TRANSFER, err))) {
        goto fail;
    }
    if ((st = d->record(d->ctx, rt->xev1[k], EX_DEV_TRANSFER, err))) goto fail;
    if ((st = rt->gbe->bind_weight(rt->gbe->ctx, rt->w_host[x->op], b, slot)))
        return ats_err_set(err, st, "binding op %d '%s' to its temp slot", x->op, g->ops[x->op].name);
    if (exps && d->note_gather) d->note_gather(d->ctx, rt->w_host[x->op], eb, rt->sel, rt->n_sel);
    rt->x_bytes[x->op] = b;
    rt->round_h2d += b;
    return ATS_OK;
fail:
    return ats_err_set(err, st, "transfer %d into op %d '%s': %s", k, x->op, g->ops[x->op].name, err->msg);
}

/* After layer L's router (op i): where the layer's experts group runs on the GPU with promoted
 * routed experts, the router's choice decides what moves: the ids reach the host (a flush when the
 * router ran on the GPU), the selected experts are numbered in expert order and the session runs
 * the group on that compact layout. More experts than the plan's slots hold: the group runs on the
 * CPU this round (off the plan). */
static enum ats_status after_router(ex_rt *rt, int32_t i, ats_err *err)
{
    const ats_graph *g = ex_session_graph(rt->s);
    const ats_plan *pl = rt->plan;
    int32_t head = -1, last = -1;
    for (int32_t j = i + 1; j < rt->n && g->ops[j].layer == g->ops[i].layer; j++)
        if (g->ops[j].role == ATS_ROLE_FFN_GATE_EXPS) head = j;
    if (head < 0 || rt->eff[head] != ATS_GPU) return ATS_OK;
    int promoted = 0;
    for (last = head; last < rt->n && rt->group_first[last] == head; last++)
        promoted |= rt->xfer_of[last] >= 0 && g->ops[last].kind == ATS_OP_EXPERTS;
    if (!promoted) return ATS_OK;
    enum ats_status st;
    if (rt->eff[i] == ATS_GPU && rt->gbe->flush && (st = rt->gbe->flush(rt->gbe->ctx, 0)))
        return ats_err_set(err, st, "op %d '%s': reading the router's choice back", i, g->ops[i].name);
    const int32_t *ids;
    int64_t nt, kk;
    ex_session_router_ids(rt->s, &ids, &nt, &kk);
    const int32_t E = (int32_t)rt->m->arch.n_expert;
    for (int32_t e = 0; e < E; e++) rt->slot_of[e] = -1;
    for (int64_t j = 0; j < nt * kk; j++)
        if (ids[j] >= 0 && ids[j] < E) rt->slot_of[ids[j]] = 0;
    rt->n_sel = 0;
    for (int32_t e = 0; e < E; e++)
        if (rt->slot_of[e] == 0) rt->sel[rt->n_sel] = e, rt->slot_of[e] = rt->n_sel++;
    int fit = rt->n_sel > 0;
    for (int32_t j = head; j < last && fit; j++) {
        int32_t k = rt->xfer_of[j];
        if (k >= 0 && (uint64_t)rt->n_sel * g->ops[j].expert_bytes > pl->wxfers[k].slot_bytes) fit = 0;
    }
    if (fit) return ex_session_set_expert_map(rt->s, g->ops[i].layer, rt->slot_of, rt->n_sel);
    for (int32_t j = head; j < last; j++) { /* the group on the CPU this round */
        rt->n_off++;
        rt->eff[j] = ATS_CPU;
        if (rt->xfer_of[j] >= 0) rt->skip[rt->xfer_of[j]] = 1;
        rt->xfer_of[j] = -1;
        if ((st = ex_session_set_op_backend(rt->s, j, rt->cpu))) return st;
    }
    return ATS_OK;
}

static enum ats_status hook(void *user, int32_t i, int after, ats_err *err)
{
    ex_rt *rt = user;
    ex_device *d = rt->dev;
    const ats_graph *g = ex_session_graph(rt->s);
    enum ats_status st;
    if (!d) return ATS_OK;
    if (!after) {
        while (rt->next_x < rt->plan->n_wxfers && rt->issue_at[rt->next_x] <= i) {
            int32_t k = rt->next_x++;
            if (!rt->skip[k] && (st = issue(rt, k, err))) return st;
        }
        if (rt->eff[i] != ATS_GPU) return ATS_OK;
        /* R3: the op (a fused group's head: each member's too) waits for its weights */
        for (int32_t j = i; j < rt->n && rt->group_first[j] == i; j++) {
            int32_t k = rt->xfer_of[j];
            if (k >= 0 && (st = d->wait(d->ctx, EX_DEV_COMPUTE, rt->xev1[k], err)))
                return ats_err_set(err, st, "op %d '%s' waiting for transfer %d: %s", i, g->ops[i].name, k, err->msg);
        }
        if (rt->timed && (st = d->record(d->ctx, rt->ev_start[i], EX_DEV_COMPUTE, err)))
            return ats_err_set(err, st, "op %d '%s': %s", i, g->ops[i].name, err->msg);
        return ATS_OK;
    }
    if (g->ops[i].role == ATS_ROLE_FFN_GATE_INP && (st = after_router(rt, i, err))) return st;
    if (rt->eff[i] != ATS_GPU) return ATS_OK;
    if (rt->need_ev[i] && (st = d->record(d->ctx, rt->ev_end[i], EX_DEV_COMPUTE, err)))
        return ats_err_set(err, st, "op %d '%s': %s", i, g->ops[i].name, err->msg);
    if (rt->kv_drop[i]) { /* a promoted attention: its new KV rows back to the host, its slab off the device */
        void *kc, *vc;
        size_t kb;
        ex_session_kv_layer(rt->s, g->ops[i].layer, &kc, &vc, &kb);
        if (rt->gbe->evict) { /* only this layer's KV rows come back; activations stay on the device */
            if ((st = rt->gbe->evict(rt->gbe->ctx, kc, kb)) || (st = rt->gbe->evict(rt->gbe->ctx, vc, kb)))
                return ats_err_set(err, st, "op %d '%s': bringing its KV rows back", i, g->ops[i].name);
        } else {
            if (rt->gbe->flush && (st = rt->gbe->flush(rt->gbe->ctx, 1)))
                return ats_err_set(err, st, "op %d '%s': bringing its KV rows back", i, g->ops[i].name);
            if (rt->gbe->forget) {
                rt->gbe->forget(rt->gbe->ctx, kc, kb);
                rt->gbe->forget(rt->gbe->ctx, vc, kb);
            }
        }
        rt->round_h2d += 2 * kb * (size_t)ex_session_pos(rt->s) / (size_t)ex_session_n_ctx(rt->s); /* rows uploaded */
    }
    int32_t k = rt->xfer_of[i];
    if (k >= 0) { /* R4: its slot is free once this op ended */
        const ats_wxfer *x = &rt->plan->wxfers[k];
        if ((st = rt->gbe->bind_weight(rt->gbe->ctx, rt->w_host[i], 0, NULL))) return st;
        if (d->retire) d->retire(d->ctx, (char *)rt->temp_region + rt->ring_base + x->offset_bytes, rt->x_bytes[i], rt->ev_end[i]);
    }
    return ATS_OK;
}

/* The cost snapshot from measurements (DESIGN.md: "measured (exec)"): op i's last measured time on
 * a resource where there is one, else the model's time scaled by measured / model of the ops
 * measured there in the last round. ATTN ops keep the model's shape dependence (their time grows
 * with the context) through the same ratio. Before any measurement: the model's (--hw). */
static void measured_snapshot(const ex_rt *rt, const phase_rt *ph)
{
    const ats_graph *g = ex_session_graph(rt->s);
    ats_costs *c = (ats_costs *)&ph->nominal;
    for (int32_t i = 0; i < rt->n; i++) {
        const int attn = g->ops[i].kind == ATS_OP_ATTN, exps = g->ops[i].kind == ATS_OP_EXPERTS;
        if (!attn && !isnan(ph->m_cpu[i])) c->t_cpu[i] = ph->m_cpu[i];
        else if (ph->r_cpu > 0) c->t_cpu[i] *= ph->r_cpu;
        if (!attn && !isnan(ph->m_gpu[i])) c->t_gpu[i] = ph->m_gpu[i];
        else if (ph->r_gpu > 0) c->t_gpu[i] *= ph->r_gpu;
        if (!exps && !isnan(ph->m_w[i])) c->w[i] = ph->m_w[i];
        else if (ph->r_w > 0) c->w[i] *= ph->r_w;
    }
}

/* Records a round's measurements into the phase's snapshot (model = the round's model costs). A CPU
 * op's time is its idle time (ats_cpu_idle_time: the part that ran beside a weight copy counted at the
 * host-memory factor), as the model's nominal: prediction applies R6 itself. Measured on Qwen3-14B at
 * 4.5 GiB (ats validate, fig13-synth 55-125 s): with the raw times the first decode round's copies
 * made every CPU op look ~1/0.62 slower, the plans moved more, the copies slowed the CPU ops more:
 * 3.6 GB a step, 96 ms per token where the simulator predicted 46-72 ms. */
static void measure_into(ex_rt *rt, phase_rt *ph, const ats_costs *model)
{
    double sm[3] = {0, 0, 0}, so[3] = {0, 0, 0};
    int32_t nx = 0; /* this round's copy intervals, compact: x_start at [0, nx), x_end at [n, n + nx) */
    for (int32_t i = 0; i < rt->n; i++)
        if (!isnan(rt->x_start[i]) && !isnan(rt->x_end[i])) {
            rt->xiv[nx] = rt->x_start[i];
            rt->xiv[rt->n + nx] = rt->x_end[i];
            nx++;
        }
    const double f = rt->cfg.hw->hostmem_cpu_factor > 0 ? rt->cfg.hw->hostmem_cpu_factor : 1.0;
    for (int32_t i = 0; i < rt->n; i++) {
        double t = rt->obs.t_exec[i];
        if (rt->eff[i] == ATS_CPU) {
            if (nx > 0 && f < 1.0)
                t = ats_cpu_idle_time(rt->t_start[i], rt->t_start[i] + t, rt->xiv, rt->xiv + rt->n, nx, f, rt->xiv + 2 * rt->n);
            ph->m_cpu[i] = t;
            sm[0] += model->t_cpu[i], so[0] += t;
        } else if (rt->timed) {
            ph->m_gpu[i] = t;
            sm[1] += model->t_gpu[i], so[1] += t;
        }
        if (!isnan(rt->obs.t_xfer[i])) {
            ph->m_w[i] = rt->obs.t_xfer[i];
            sm[2] += model->w[i], so[2] += rt->obs.t_xfer[i];
        }
    }
    if (sm[0] > 0 && so[0] > 0) ph->r_cpu = so[0] / sm[0];
    if (sm[1] > 0 && so[1] > 0) ph->r_gpu = so[1] / sm[1];
    if (sm[2] > 0 && so[2] > 0) ph->r_w = so[2] / sm[2];
}

/* One forward under the phase's plan: the nominal costs of this round shape (until calibrated),
 * the controller started on the phase's first round, the plan prepared, the ops run with the hook,
 * both streams drained. *t0 (ns): when the round started, after the nominal costs were set. */
static enum ats_status run_forward(ex_rt *rt, ats_phase_kind phase, const int32_t *tokens, int64_t n_tok,
                                   float *logits, int timed, int64_t *t0, ats_err *err)
{
    const int k = phase == ATS_PHASE_DECODE ? 1 : 0;
    phase_rt *ph = &rt->ph[k];
    enum ats_status st;
    const int64_t pos = ex_session_pos(rt->s);
    /* this round's nominal costs (the controller re-predicts the plan that ran under them): the
     * model's for this round shape, then, once measured, the measured snapshot */
    if (!ph->calibrated && (st = shape_costs(rt, phase, n_tok, pos, &ph->nominal, NULL, err))) return st;
    *t0 = mono_ns();
    if (!ph->started) {
        ats_load l0 = k == 1 && rt->ph[0].started ? ats_controller_load(rt->ph[0].ctrl) : ats_load_idle();
        if ((st = ats_controller_start(ph->ctrl, (double)(*t0 - rt->epoch_ns) * 1e-9, l0, NULL, err))) return st;
        ph->started = 1;
    }
    rt->plan = ats_controller_plan(ph->ctrl);
    rt->timed = timed;
    rt->n_off = 0;
    rt->cur = phase_place(rt, k);
    rt->ring_base = k == 1 && rt->place_dec.n ? rt->dec_base : 0;
    if ((st = prepare(rt, &rt->n_off, err))) return st;
    rt->next_x = 0;
    rt->round_h2d = 0;
    rt->up_round = 0;
    rt->err = err;
    if (rt->dev && (st = rt->dev->record(rt->dev->ctx, rt->ev_round, EX_DEV_TRANSFER, err))) return st;
    if (rt->dev && rt->place_dec.n && (st = decode_weights(rt, k == 1, err))) return st;
    ex_session_set_hook(rt->s, hook, rt);
    st = ex_session_forward(rt->s, tokens, n_tok, logits, err);
    ex_session_set_hook(rt->s, NULL, NULL);
    if (st == ATS_OK && rt->dev) { /* transfers nobody waited for, then every event is complete */
        if ((st = rt->dev->sync(rt->dev->ctx, EX_DEV_TRANSFER, err)) == ATS_OK)
            st = rt->dev->sync(rt->dev->ctx, EX_DEV_COMPUTE, err);
    }
    return st;
}

enum ats_status ex_rt_warmup(ex_rt *rt, int64_t n_tok, ats_err *err)
{
    if (!rt->dev || n_tok < 1) return ATS_OK;
    const int64_t n_ctx = ex_session_n_ctx(rt->s), pos = ex_session_pos(rt->s);
    if (pos != 0) return ats_err_set(err, ATS_EINVAL, "warm-up after %lld tokens (before the first round only)", (long long)pos);
    if (n_tok > n_ctx - 1) n_tok = n_ctx - 1;
    int32_t *tok = calloc((size_t)n_tok, sizeof *tok); /* token 0: any valid id does */
    float *logits = malloc((size_t)rt->m->arch.n_vocab * sizeof *logits);
    enum ats_status st = tok && logits ? ATS_OK : ATS_ENOMEM;
    int64_t t0;
    if (st == ATS_OK && n_tok >= 1) st = run_forward(rt, ATS_PHASE_PREFILL, tok, n_tok, logits, 0, &t0, err);
    if (st == ATS_OK && n_tok + 1 <= n_ctx) st = run_forward(rt, ATS_PHASE_DECODE, tok, 1, logits, 0, &t0, err);
    free(tok);
    free(logits);
    if (st == ATS_ENOMEM && !err->msg[0]) return ats_err_set(err, st, "warm-up: out of host memory");
    if (st) return st;
    ex_session_clear(rt->s);
    return ATS_OK;
}

/* time_every 0: time GPU ops every `every` rounds of a phase so that the events' cost, measured as
 * the timed rounds' latency per token over the untimed ones', stays near 2% of the phase's time
 * (events around ~400 ops cost ~30% of a Qwen3-14B decode step on the H200, ~2% of a 512-token
 * prefill: `ats profile`'s GPU table); at least every 8th round (the controller's measurements
 * stay fresh), at most every 64th; 8 until both kinds of round were seen. */
static int auto_every(const phase_rt *ph)
{
    if (ph->tok_sum[0] <= 0 || ph->tok_sum[1] <= 0) return 8;
    const double over = (ph->lat_sum[1] / ph->tok_sum[1]) / (ph->lat_sum[0] / ph->tok_sum[0]) - 1.0;
    const double e = ceil(over / 0.02);
    return e <= 8 ? 8 : e >= 64 ? 64 : (int)e;
}

enum ats_status ex_rt_round_run(ex_rt *rt, ats_phase_kind phase, const int32_t *tokens, int64_t n_tok, float *logits,
                                ex_rt_round *info, ats_err *err)
{
    const int k = phase == ATS_PHASE_DECODE ? 1 : 0;
    phase_rt *ph = &rt->ph[k];
    const int32_t n = rt->n;
    enum ats_status st;
    const int64_t pos = ex_session_pos(rt->s);
    const int every = rt->cfg.time_every > 0 ? rt->cfg.time_every : auto_every(ph);
    int64_t t0;
    if ((st = run_forward(rt, phase, tokens, n_tok, logits,
                          rt->dev && (rt->round_idx < 4 || rt->round_idx % every == 0), &t0, err)))
        return st;
    int64_t t1 = mono_ns();
    const double latency = (double)(t1 - t0) * 1e-9;
    ph->lat_sum[rt->timed] += latency;
    ph->tok_sum[rt->timed] += (double)n_tok;
    /* measurements (contract 3) */
    const int64_t *a, *b, *hi, *hs;
    ex_session_last_op_times(rt->s, &a, &b);
    ex_session_last_op_host(rt->s, &hi, &hs);
    double gpu_sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        rt->h_in[i] = (double)(hi[i] - rt->epoch_ns) * 1e-9;
        rt->h_sw[i] = (double)(hs[i] - rt->epoch_ns) * 1e-9;
        rt->h_call[i] = (double)(a[i] - rt->epoch_ns) * 1e-9;
        rt->obs.backend[i] = rt->eff[i];
        rt->t_start[i] = (double)(a[i] - rt->epoch_ns) * 1e-9;
        rt->t_end[i] = (double)(b[i] - rt->epoch_ns) * 1e-9;
        double t = (double)(b[i] - a[i]) * 1e-9;
        if (rt->eff[i] == ATS_GPU) {
            if (rt->timed) { /* device times: duration, and start/end from the round's first event */
                int64_t ns = 0, s0 = 0;
                if ((st = rt->dev->elapsed_ns(rt->dev->ctx, rt->ev_start[i], rt->ev_end[i], &ns, err)) ||
                    (st = rt->dev->elapsed_ns(rt->dev->ctx, rt->ev_round, rt->ev_start[i], &s0, err)))
                    return st;
                rt->t_gpu_last[i] = (double)ns * 1e-9;
                gpu_sum += rt->t_gpu_last[i];
                rt->t_start[i] = (double)(t0 - rt->epoch_ns + s0) * 1e-9;
                rt->t_end[i] = rt->t_start[i] + rt->t_gpu_last[i];
            }
            /* never timed yet: the plan's own prediction, so an untimed op reads as no load */
            t = isnan(rt->t_gpu_last[i]) ? ats_controller_costs(ph->ctrl)->t_gpu[i] : rt->t_gpu_last[i];
        }
        rt->t_exec[i] = t;
        rt->obs.t_exec[i] = t;
        rt->obs.t_xfer[i] = NAN;
        rt->x_start[i] = rt->x_end[i] = NAN;
    }
    if (rt->timed) {
        rt->gpu_busy_s += gpu_sum;
        rt->timed_round_s += latency;
    }
    for (int32_t x = 0; rt->dev && x < rt->plan->n_wxfers; x++) {
        if (rt->skip[x]) continue;
        int32_t op = rt->plan->wxfers[x].op;
        int64_t ns = 0, s0 = 0;
        if ((st = rt->dev->elapsed_ns(rt->dev->ctx, rt->xev0[x], rt->xev1[x], &ns, err)) ||
            (st = rt->dev->elapsed_ns(rt->dev->ctx, rt->ev_round, rt->xev0[x], &s0, err)))
            return st;
        rt->obs.t_xfer[op] = (isnan(rt->obs.t_xfer[op]) ? 0.0 : rt->obs.t_xfer[op]) + (double)ns * 1e-9;
        rt->x_start[op] = (double)(t0 - rt->epoch_ns + s0) * 1e-9;
        rt->x_end[op] = rt->x_start[op] + (double)ns * 1e-9;
    }
    if (info) {
        memset(info, 0, sizeof *info);
        info->phase = phase;
        info->tokens = n_tok;
        info->t_start_s = (double)(t0 - rt->epoch_ns) * 1e-9;
        info->latency_s = latency;
        info->n_promoted = rt->dev ? rt->plan->n_promoted : 0;
        info->bytes_h2d = rt->round_h2d;
        info->rescheduled = ph->pending_resched;
        info->resched_cost_s = ph->pending_cost_s;
        info->n_off_plan = rt->n_off;
        info->timed_gpu = rt->timed;
        if (rt->up_round > 0) {
            int64_t ns = 0;
            if ((st = rt->dev->elapsed_ns(rt->dev->ctx, rt->ev_round, rt->ev_upload, &ns, err))) return st;
            info->upload_bytes = rt->up_round;
            info->upload_s = (double)ns * 1e-9;
        }
    }
    /* feed the controller; a re-plan's cost is measured here and reported with the next round */
    if (rt->cfg.measured && !ph->calibrated) {
        ats_costs model;
        if ((st = ats_costs_init(&model, n))) return st;
        st = shape_costs(rt, phase, n_tok, pos, &model, NULL, err);
        if (st == ATS_OK) measure_into(rt, ph, &model);
        ats_costs_free(&model);
        if (st) return st;
    }
    int64_t tc = mono_ns();
    ats_resched_report rep;
    st = ats_controller_observe(ph->ctrl, &rt->obs, latency, (double)(tc - rt->epoch_ns) * 1e-9, NULL, &rep, err);
    if (st) return st;
    ph->n_obs++;
    ph->pending_resched = rep.rescheduled;
    /* the phase's first measured round (GPU ops timed): from now on its nominal snapshot is the
     * measured one, and the controller re-plans on it (a re-schedule, counted and costed here) */
    if (rt->cfg.measured && !ph->calibrated && (rt->timed || !rt->dev)) {
        measured_snapshot(rt, ph);
        ph->calibrated = 1;
        ats_controller_free(ph->ctrl);
        ph->ctrl = NULL;
        if ((st = ats_controller_new(rt->pol, ph->g, phase_place(rt, k), &ph->nominal, &rt->cfg.ctrl, &ph->ctrl, err)) ||
            (st = ats_controller_start(ph->ctrl, (double)(mono_ns() - rt->epoch_ns) * 1e-9, ats_load_idle(), NULL, err)))
            return st;
        ph->pending_resched = 1;
        ph->n_calib++;
    }
    ph->pending_cost_s = ph->pending_resched ? (double)(mono_ns() - tc) * 1e-9 : 0.0;
    if (info) info->load = ats_controller_load(ph->ctrl);
    rt->round_idx++;
    return ATS_OK;
}

ex_session *ex_rt_session(ex_rt *rt) { return rt->s; }
double ex_rt_upload_s(const ex_rt *rt) { return rt->upload_s; }
void ex_rt_layout(const ex_rt *rt, uint64_t *resident, uint64_t *temp, uint64_t *kv, uint64_t *compute)
{
    *resident = rt->res_bytes;
    *temp = rt->temp_bytes;
    *kv = rt->kv_bytes;
    *compute = rt->compute_bytes;
}
void ex_rt_decode_placement(const ex_rt *rt, uint64_t *extra_bytes, int64_t *uploads)
{
    *extra_bytes = rt->dec_bytes;
    *uploads = rt->dec_uploads;
}
int64_t ex_rt_n_reschedules(const ex_rt *rt)
{
    return ats_controller_n_reschedules(rt->ph[0].ctrl) + ats_controller_n_reschedules(rt->ph[1].ctrl) +
           rt->ph[0].n_calib + rt->ph[1].n_calib;
}
int64_t ex_rt_n_observed(const ex_rt *rt)
{
    return rt->ph[0].n_obs + rt->ph[1].n_obs;
}
void ex_rt_gpu_busy(const ex_rt *rt, double *gpu_s, double *timed_round_s)
{
    *gpu_s = rt->gpu_busy_s;
    *timed_round_s = rt->timed_round_s;
}
ex_rt_op_times ex_rt_last_ops(const ex_rt *rt)
{
    ex_rt_op_times t = {rt->n,     rt->obs.backend, rt->t_start, rt->t_end, rt->t_exec, rt->x_start,
                        rt->x_end, rt->x_bytes,     rt->h_in,    rt->h_sw,  rt->h_call};
    return t;
}
const ats_plan *ex_rt_last_plan(const ex_rt *rt) { return rt->plan; }
