/* Plan building (splits, temp ring, transfers, events), prediction under rules R1-R7, and the text
 * dump (ats/plan.h). */
#include "ats/plan.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ats_plan_opts ats_plan_opts_default(void)
{
    ats_plan_opts o;
    memset(&o, 0, sizeof o);
    o.n_copy_engines = 1;
    o.act_path = ATS_ACT_SM;
    return o;
}

ats_predict_opts ats_predict_opts_default(void)
{
    ats_predict_opts o = {1.0, 0.0};
    return o;
}

void ats_plan_init(ats_plan *pl) { memset(pl, 0, sizeof *pl); }

void ats_plan_free(ats_plan *pl)
{
    if (!pl) return;
    free(pl->ops);
    free(pl->splits);
    free(pl->wxfers);
    free(pl->axfers);
    free(pl->expert_ids);
    memset(pl, 0, sizeof *pl);
}

static enum ats_status reserve(ats_plan *pl, int32_t n, int32_t n_ids)
{
    if (pl->cap_ < n) {
        ats_plan_op *o = realloc(pl->ops, (size_t)n * sizeof *o);
        if (!o) return ATS_ENOMEM;
        pl->ops = o;
        ats_split *s = realloc(pl->splits, (size_t)n * sizeof *s);
        if (!s) return ATS_ENOMEM;
        pl->splits = s;
        ats_wxfer *w = realloc(pl->wxfers, (size_t)n * sizeof *w);
        if (!w) return ATS_ENOMEM;
        pl->wxfers = w;
        ats_axfer *a = realloc(pl->axfers, (size_t)n * sizeof *a);
        if (!a) return ATS_ENOMEM;
        pl->axfers = a;
        pl->cap_ = n;
        pl->cap_wx_ = n;
    }
    if (pl->cap_ids_ < n_ids) {
        int32_t *ids = realloc(pl->expert_ids, (size_t)n_ids * sizeof *ids);
        if (!ids) return ATS_ENOMEM;
        pl->expert_ids = ids;
        pl->cap_ids_ = n_ids;
    }
    return ATS_OK;
}

typedef struct live_rng {
    uint64_t lo, hi;
    int32_t reader;
} live_rng;

/* x waits (also) for the end of op `op`: the later of what it waited for and op */
static void wxfer_wait_after(ats_wxfer *x, int32_t op)
{
    if (!x->has_wait_op || op > x->wait_op) x->wait_op = op;
    x->has_wait_op = 1;
}

enum ats_status ats_plan_build(const ats_graph *g, const ats_placement *p, const ats_assignment *a,
                               const ats_costs *cur, const ats_plan_opts *opts, ats_plan *out,
                               ats_err *err)
{
    ats_plan_opts o = opts ? *opts : ats_plan_opts_default();
    if (!g || g->n_ops < 1) return ats_err_set(err, ATS_EINVAL, "plan: empty graph (no ops)");
    int32_t n = g->n_ops;
    if (!p || p->n != n || !a || a->n != n || !cur || cur->n != n)
        return ats_err_set(err, ATS_EINVAL, "plan: placement/assignment/costs size mismatch with %d ops", (int)n);
    if (o.n_copy_engines < 1)
        return ats_err_set(err, ATS_EINVAL, "plan: n_copy_engines %d (must be >= 1)", o.n_copy_engines);
    if (!(o.prefetch_lead_s >= 0) || !isfinite(o.prefetch_lead_s))
        return ats_err_set(err, ATS_EINVAL, "plan: prefetch_lead_s %g (must be finite and >= 0)", o.prefetch_lead_s);
    const ats_routing *rt = o.routing;
    int32_t n_ids = 0;
    if (rt && rt->ids && rt->ids_off) n_ids = rt->ids_off[n] > 0 ? rt->ids_off[n] : 0;
    if (reserve(out, n, n_ids > 0 ? n_ids : 1)) return ats_err_set(err, ATS_ENOMEM, "plan: out of memory");
    live_rng *live = malloc((size_t)n * sizeof *live);
    if (!live) return ats_err_set(err, ATS_ENOMEM, "plan: out of memory");
    enum ats_status st = ATS_OK;

    out->n_ops = n;
    out->n_splits = out->n_wxfers = out->n_axfers = out->n_expert_ids = 0;
    out->serialized = a->serialized;
    out->double_buffer = (uint8_t)(o.double_buffer != 0);
    out->act_path = (uint8_t)o.act_path;
    out->n_copy_engines = o.n_copy_engines;
    out->temp_capacity_bytes = o.temp_bytes;
    out->peak_temp_bytes = out->h2d_weight_bytes = out->resident_bytes = 0;
    out->n_promoted = 0;
    uint64_t head = 0, unit_off = 0;
    int32_t n_live = 0, unit = -1, unit_first = -1, unit_prev_first = -1;
    for (int32_t i = 0; i < n; i++) {
        const ats_op *op = &g->ops[i];
        uint8_t bk = a->backend[i];
        if (p->backend[i] == ATS_GPU) out->resident_bytes += ats_op_resident_bytes(op);
        if (p->backend[i] == ATS_GPU && bk != ATS_GPU) {
            st = ats_err_set(err, ATS_EINVAL, "plan: op %d (%s) is GPU-resident but assigned to the CPU", (int)i, op->name);
            goto done;
        }
        ats_plan_op *po = &out->ops[i];
        memset(po, 0, sizeof *po);
        po->backend = bk;
        po->promoted = p->backend[i] == ATS_CPU && bk == ATS_GPU;
        /* splits */
        if (i == 0 || bk != a->backend[i - 1]) {
            out->splits[out->n_splits++] = (ats_split){i, 0, bk};
            if (i > 0) {
                ats_axfer *ax = &out->axfers[out->n_axfers];
                ax->op = i;
                ax->dir = bk == ATS_GPU ? ATS_H2D : ATS_D2H;
                ax->path = (uint8_t)o.act_path;
                ax->bytes = op->act_in_bytes;
                po->act_xfer = out->n_axfers++;
                po->has_act_xfer = 1;
                po->sync_compute = bk == ATS_CPU;
            }
        }
        po->split = out->n_splits - 1;
        out->splits[po->split].n_ops++;
        if (!po->promoted) continue;
        /* weight transfer */
        if (op->kind == ATS_OP_EMBED) {
            st = ats_err_set(err, ATS_EINVAL, "plan: op %d (%s) of kind %s cannot be promoted", (int)i, op->name,
                             ats_op_kind_name(op->kind));
            goto done;
        }
        uint64_t bytes = ats_op_xfer_bytes(g, rt, i), sb = o.fused_groups ? ats_op_slot_bytes(g, rt, i) : bytes;
        uint64_t room = o.double_buffer ? o.temp_bytes / 2 : o.temp_bytes;
        if (sb > room) {
            st = ats_err_set(err, ATS_EINVAL, "plan: op %d (%s) holds %llu temp bytes, a temp %s holds %llu", (int)i,
                             op->name, (unsigned long long)sb, o.double_buffer ? "slot" : "ring",
                             (unsigned long long)room);
            goto done;
        }
        out->n_promoted++;
        int32_t k = out->n_wxfers++;
        ats_wxfer *x = &out->wxfers[k];
        memset(x, 0, sizeof *x);
        x->op = i;
        x->ce = k % o.n_copy_engines;
        x->bytes = bytes;
        x->slot_bytes = sb;
        if (op->kind == ATS_OP_EXPERTS && op->has_router) {
            x->wait_router = op->router;
            x->has_wait_router = 1;
        }
        if (op->kind == ATS_OP_EXPERTS) {
            x->n_experts = (rt && rt->n_selected && rt->n == n) ? rt->n_selected[i] : op->n_expert_active;
            if (n_ids > 0) {
                int32_t b0 = rt->ids_off[i], b1 = rt->ids_off[i + 1];
                x->ids_off = out->n_expert_ids;
                x->n_ids = b1 - b0;
                for (int32_t q = b0; q < b1; q++) out->expert_ids[out->n_expert_ids++] = rt->ids[q];
            }
        }
        /* a fused group's transfers (ats_op_fused_head) form one unit: all land before the group's
           first op h, side by side in one slot (double buffer) or one ring range */
        const int32_t h = o.fused_groups ? ats_op_fused_head(g, i) : i;
        const int new_unit = k == 0 || h == i || ats_op_fused_head(g, out->wxfers[k - 1].op) != h;
        if (new_unit) {
            unit_prev_first = unit_first;
            unit_first = i;
            unit++;
            unit_off = 0;
        }
        if (o.double_buffer) {
            /* two slots, one per unit; released when the compute stream reached the previous unit's
               first consumer */
            if (unit_off + sb > room) {
                st = ats_err_set(err, ATS_EINVAL, "plan: fused group of op %d (%s) holds %llu temp bytes, a temp slot holds %llu",
                                 (int)h, g->ops[h].name, (unsigned long long)(unit_off + sb), (unsigned long long)room);
                goto done;
            }
            x->offset_bytes = (uint64_t)(unit % 2) * room + unit_off;
            unit_off += sb;
            if (unit >= 1) wxfer_wait_after(x, unit_prev_first - 1);
            if (x->offset_bytes + sb > out->peak_temp_bytes) out->peak_temp_bytes = x->offset_bytes + sb;
            if (a->serialized && h > 0) wxfer_wait_after(x, h - 1);
            out->h2d_weight_bytes += bytes;
            po->wait_xfer = k;
            po->has_wait_xfer = 1;
            continue;
        }
        /* temp ring: allocate at head, wrap when it does not fit; wait for overlapped readers */
        if (new_unit && o.fused_groups) { /* the unit's bytes: its promoted ops from i on (a group's, or op i's) */
            uint64_t ub = 0;
            for (int32_t j = i; j < n && ats_op_fused_head(g, j) == h; j++)
                if (p->backend[j] == ATS_CPU && a->backend[j] == ATS_GPU) ub += ats_op_slot_bytes(g, rt, j);
            if (ub > o.temp_bytes) {
                st = ats_err_set(err, ATS_EINVAL, "plan: fused group of op %d (%s) holds %llu temp bytes, the temp ring holds %llu",
                                 (int)h, g->ops[h].name, (unsigned long long)ub, (unsigned long long)o.temp_bytes);
                goto done;
            }
            if (head + ub > o.temp_bytes) head = 0;
        }
        if (head + sb > o.temp_bytes) head = 0;
        uint64_t lo = head, hi = head + sb;
        /* a live range fully covered by the new one is dropped (later overlaps also overlap the
           new range, whose reader is later); partially covered ones stay */
        int32_t w = 0;
        for (int32_t q = 0; q < n_live; q++) {
            int over = live[q].lo < hi && lo < live[q].hi;
            if (over) wxfer_wait_after(x, live[q].reader);
            if (!(over && lo <= live[q].lo && live[q].hi <= hi)) live[w++] = live[q];
        }
        n_live = w;
        live[n_live++] = (live_rng){lo, hi, i};
        head = hi;
        x->offset_bytes = lo;
        if (hi > out->peak_temp_bytes) out->peak_temp_bytes = hi;
        if (a->serialized && h > 0) wxfer_wait_after(x, h - 1);
        out->h2d_weight_bytes += bytes;
        po->wait_xfer = k;
        po->has_wait_xfer = 1;
    }
    for (int32_t k = 0; k < out->n_wxfers; k++) {
        const ats_wxfer *x = &out->wxfers[k];
        if (x->has_wait_router) out->ops[x->wait_router].record_event = 1;
        if (x->has_wait_op) out->ops[x->wait_op].record_event = 1;
    }
    /* prefetch flags: per engine, the leading transfers without waits that start before 0 */
    if (!a->serialized && o.prefetch_lead_s > 0) {
        for (int ce = 0; ce < o.n_copy_engines; ce++) {
            double t = -o.prefetch_lead_s;
            for (int32_t k = ce; k < out->n_wxfers; k += o.n_copy_engines) {
                ats_wxfer *x = &out->wxfers[k];
                if (x->has_wait_router || x->has_wait_op || t >= 0) break;
                x->prefetch = 1;
                t += cur->w[x->op];
                if (o.double_buffer) break; /* later transfers wait for the compute stream */
            }
        }
    }
    ATS_ASSERT(out->peak_temp_bytes <= out->temp_capacity_bytes);
done:
    free(live);
    return st;
}

/* ---- prediction -------------------------------------------------------------------------- */

enum ats_status ats_timeline_init(ats_timeline *t, int32_t n_ops, int32_t n_wxfers)
{
    memset(t, 0, sizeof *t);
    size_t m = (size_t)n_ops * 2 + (size_t)n_wxfers * 2;
    double *all = calloc(m ? m : 1, sizeof(double));
    if (!all) return ATS_ENOMEM;
    t->n_ops = n_ops;
    t->n_wxfers = n_wxfers;
    t->op_start = all;
    t->op_end = all + n_ops;
    t->xfer_start = all + 2 * (size_t)n_ops;
    t->xfer_end = t->xfer_start + n_wxfers;
    return ATS_OK;
}

void ats_timeline_free(ats_timeline *t)
{
    if (!t) return;
    free(t->op_start);
    memset(t, 0, sizeof *t);
}

typedef struct ivl {
    double s, e;
} ivl;

static int ivl_cmp(const void *a, const void *b)
{
    double x = ((const ivl *)a)->s, y = ((const ivl *)b)->s;
    return x < y ? -1 : x > y;
}

/* CPU op of nominal duration t from s, rate h while any interval in iv (sorted by start, may
 * overlap) is active. With one interval this is exactly transfer.c's cpu_end1. */
static double cpu_end(double s, double t, const ivl *iv, int m, double h)
{
    if (h >= 1.0 || m == 0) return s + t;
    double tau = s, W = t;
    int q = 0;
    while (q < m) {
        double a = iv[q].s, b = iv[q].e;
        while (q + 1 < m && iv[q + 1].s <= b) { /* merge overlapping */
            if (iv[q + 1].e > b) b = iv[q + 1].e;
            q++;
        }
        q++;
        if (b <= tau) continue;
        if (a > tau) {
            if (tau + W <= a) return tau + W;
            W -= a - tau;
            tau = a;
        }
        double prog = h * (b - tau);
        if (prog >= W) return tau + W / h;
        W -= prog;
        tau = b;
    }
    return tau + W;
}

enum ats_status ats_plan_predict(const ats_plan *plan, const ats_costs *costs,
                                 const ats_predict_opts *opts, double *latency_s, ats_timeline *tl,
                                 ats_err *err)
{
    ats_predict_opts o = opts ? *opts : ats_predict_opts_default();
    if (!plan || !costs || costs->n != plan->n_ops || plan->n_ops < 1)
        return ats_err_set(err, ATS_EINVAL, "predict: plan/costs size mismatch");
    if (tl && (tl->n_ops != plan->n_ops || tl->n_wxfers != plan->n_wxfers))
        return ats_err_set(err, ATS_EINVAL, "predict: timeline sized for %d ops/%d transfers, plan has %d/%d",
                           (int)tl->n_ops, (int)tl->n_wxfers, (int)plan->n_ops, (int)plan->n_wxfers);
    if (!(o.hostmem_cpu_factor > 0 && o.hostmem_cpu_factor <= 1))
        return ats_err_set(err, ATS_EINVAL, "predict: hostmem_cpu_factor %g (must be in (0, 1])", o.hostmem_cpu_factor);
    int32_t n = plan->n_ops, nx = plan->n_wxfers, nce = plan->n_copy_engines;
    if (nce < 1 || nce > 64) return ats_err_set(err, ATS_EINVAL, "predict: n_copy_engines %d", nce);
    double *E = malloc((size_t)n * sizeof *E);
    double *xs = malloc((size_t)(nx ? nx : 1) * sizeof *xs), *xe = malloc((size_t)(nx ? nx : 1) * sizeof *xe);
    ivl *iv = malloc((size_t)(nx ? nx : 1) * sizeof *iv);
    int32_t *sched = malloc((size_t)(nx ? nx : 1) * sizeof *sched);
    if (!E || !xs || !xe || !iv || !sched) {
        free(E);
        free(xs);
        free(xe);
        free(iv);
        free(sched);
        return ats_err_set(err, ATS_ENOMEM, "predict: out of memory");
    }
    double ce_free[64];
    int32_t head[64];
    for (int c = 0; c < nce; c++) {
        ce_free[c] = -o.prefetch_lead_s;
        head[c] = c; /* transfers go round-robin: engine c holds k ≡ c (mod nce) */
    }
    int32_t n_sched = 0, lo = 0;
    double Eprev = 0.0;
    for (int32_t i = 0; i < n; i++) {
        /* issue every transfer whose waits are ops < i, FIFO per engine */
        for (int c = 0; c < nce; c++) {
            while (head[c] < nx) {
                int32_t k = head[c];
                const ats_wxfer *x = &plan->wxfers[k];
                ATS_ASSERT(x->ce == c);
                double rel;
                if (x->prefetch) {
                    rel = -o.prefetch_lead_s;
                } else {
                    if ((x->has_wait_router && x->wait_router >= i) || (x->has_wait_op && x->wait_op >= i)) break;
                    rel = 0.0;
                    if (x->has_wait_router && E[x->wait_router] > rel) rel = E[x->wait_router];
                    if (x->has_wait_op && E[x->wait_op] > rel) rel = E[x->wait_op];
                }
                xs[k] = ce_free[c] > rel ? ce_free[c] : rel;
                xe[k] = xs[k] + costs->w[x->op];
                ce_free[c] = xe[k];
                sched[n_sched++] = k;
                head[c] += nce;
            }
        }
        const ats_plan_op *po = &plan->ops[i];
        double act = po->has_act_xfer ? costs->c[i] : 0.0;
        double S = Eprev + act;
        if (po->has_wait_xfer) {
            int32_t k = po->wait_xfer;
            ATS_ASSERT(head[k % nce] > k); /* issued */
            if (plan->serialized) S = (xe[k] > Eprev ? xe[k] : Eprev) + act; /* R7 */
            else if (xe[k] > S) S = xe[k];
        }
        double Ei;
        if (po->backend == ATS_GPU) {
            Ei = S + costs->t_gpu[i];
        } else {
            while (lo < n_sched && xe[sched[lo]] <= S) lo++; /* S only grows: ended before every later op */
            int m = 0;
            for (int32_t q = lo; q < n_sched; q++) {
                int32_t k = sched[q];
                if (xe[k] > S) iv[m++] = (ivl){xs[k], xe[k]};
            }
            if (m > 1) qsort(iv, (size_t)m, sizeof *iv, ivl_cmp);
            Ei = cpu_end(S, costs->t_cpu[i], iv, m, o.hostmem_cpu_factor);
        }
        E[i] = Ei;
        if (tl) {
            tl->op_start[i] = S;
            tl->op_end[i] = Ei;
        }
        Eprev = Ei;
    }
    if (tl)
        for (int32_t k = 0; k < nx; k++) {
            int issued = head[k % nce] > k;
            tl->xfer_start[k] = issued ? xs[k] : NAN;
            tl->xfer_end[k] = issued ? xe[k] : NAN;
        }
    *latency_s = E[n - 1];
    free(E);
    free(xs);
    free(xe);
    free(iv);
    free(sched);
    return ATS_OK;
}

/* ---- dump -------------------------------------------------------------------------------- */

typedef struct sbuf {
    char *buf;
    size_t len, pos;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->pos < b->len ? b->len - b->pos : 0;
    int k = vsnprintf(room ? b->buf + b->pos : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) b->pos += (size_t)k;
}

static const char *opname(const ats_graph *g, int32_t i, char *tmp, size_t len)
{
    if (g && i >= 0 && i < g->n_ops) return g->ops[i].name;
    snprintf(tmp, len, "op%d", (int)i);
    return tmp;
}

size_t ats_plan_dump(const ats_plan *pl, const ats_graph *g, char *buf, size_t len)
{
    sbuf b = {buf, len, 0};
    char t1[32], t2[32];
    if (len) buf[0] = '\0';
    sb_printf(&b, "plan: %d ops, %d splits, %d weight transfers (%.1f MiB), %d activation transfers%s\n",
              (int)pl->n_ops, (int)pl->n_splits, (int)pl->n_wxfers, (double)pl->h2d_weight_bytes / 1048576.0,
              (int)pl->n_axfers, pl->serialized ? ", serialized" : "");
    sb_printf(&b, "  resident %.1f MiB, temp ring %.1f MiB (peak %.1f MiB), %d copy engine(s), activations via %s\n",
              (double)pl->resident_bytes / 1048576.0, (double)pl->temp_capacity_bytes / 1048576.0,
              (double)pl->peak_temp_bytes / 1048576.0, pl->n_copy_engines, pl->act_path == ATS_ACT_CE ? "copy engine" : "SM copy kernel");
    for (int32_t s = 0; s < pl->n_splits; s++) {
        const ats_split *sp = &pl->splits[s];
        int32_t a = sp->first_op, z = sp->first_op + sp->n_ops - 1;
        sb_printf(&b, "split %3d %s ops %d..%d (%s .. %s)\n", (int)s, sp->backend == ATS_GPU ? "GPU" : "CPU",
                  (int)a, (int)z, opname(g, a, t1, sizeof t1), opname(g, z, t2, sizeof t2));
        for (int32_t i = a; i <= z; i++) {
            const ats_plan_op *po = &pl->ops[i];
            if (po->has_act_xfer) {
                const ats_axfer *ax = &pl->axfers[po->act_xfer];
                sb_printf(&b, "  act  %s %llu B into op %d%s\n", ax->dir == ATS_H2D ? "H2D" : "D2H",
                          (unsigned long long)ax->bytes, (int)i, po->sync_compute ? " (host syncs compute stream)" : "");
            }
            if (po->has_wait_xfer) {
                const ats_wxfer *x = &pl->wxfers[po->wait_xfer];
                sb_printf(&b, "  xfer %d ce%d [%llu, +%llu) -> op %d %s", (int)po->wait_xfer, x->ce,
                          (unsigned long long)x->offset_bytes, (unsigned long long)x->bytes, (int)i,
                          opname(g, i, t1, sizeof t1));
                if (x->n_experts > 0) sb_printf(&b, " experts=%.2f", x->n_experts);
                if (x->has_wait_router) sb_printf(&b, " after-router=%d", (int)x->wait_router);
                if (x->has_wait_op) sb_printf(&b, " after-op=%d", (int)x->wait_op);
                if (x->prefetch) sb_printf(&b, " prefetch");
                sb_printf(&b, "\n");
            }
        }
    }
    return b.pos;
}

static int cmp_start(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

double ats_cpu_idle_time(double t0, double t1, const double *x0, const double *x1, int32_t nx, double factor,
                         double *scratch)
{
    if (!(t1 > t0)) return 0.0;
    int32_t m = 0; /* clipped intervals as (start, end) pairs */
    for (int32_t k = 0; k < nx; k++) {
        if (isnan(x0[k]) || isnan(x1[k])) continue;
        double a = x0[k] > t0 ? x0[k] : t0, b = x1[k] < t1 ? x1[k] : t1;
        if (!(b > a)) continue; /* empty or outside */
        scratch[2 * m] = a;
        scratch[2 * m + 1] = b;
        m++;
    }
    if (m > 1) qsort(scratch, (size_t)m, 2 * sizeof *scratch, cmp_start);
    double ov = 0.0, cs = 0.0, ce = -INFINITY;
    for (int32_t k = 0; k < m; k++) {
        if (scratch[2 * k] > ce) { /* a new run of the union */
            if (ce > cs) ov += ce - cs;
            cs = scratch[2 * k];
            ce = scratch[2 * k + 1];
        } else if (scratch[2 * k + 1] > ce) {
            ce = scratch[2 * k + 1];
        }
    }
    if (m > 0 && ce > cs) ov += ce - cs;
    return (t1 - t0) - (1.0 - factor) * ov;
}
