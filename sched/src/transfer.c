/* Dynamic transfer (ats/transfer.h): assignments, routing, the paper's Algorithm 2 (model P) and
 * the ATS copy-engine model solved by a Pareto DP (model A).
 *
 * Why the model-A DP is exact. A state after promoted op p is (E, F): the end of op p on the
 * compute stream and the release of the next transfer F = max(end of p's transfer, E_{p−1}). The
 * rest of the round depends only on (E, F): the next transfer starts at T_s = F (non-expert, or
 * router at or before p) or at the end of its router inside the segment (which only depends on E,
 * since F ≤ E: a promoted op waits for its weights). Every earlier transfer ended by F, and the
 * next-but-one transfer is released only at E_{g−1}, so while ops p+1..g−1 run, g's transfer is the
 * only one in flight. Ops between p and the next promoted op g run on
 * their default backends; CPU ops progress at rate h while g's transfer runs, else at rate 1. Two
 * runs of the same op sequence under the same rate function (rate depends on time and op only)
 * cannot overtake each other, so every op end is non-decreasing in the start time E, and the rate
 * function only gets slower when the transfer ends later (larger F). Op g then starts at
 * max(E_{g−1} + c, T_f), also monotone, and so is the new F. Hence the final latency is
 * non-decreasing in E and F: a state dominated in (E, F) can be dropped.
 */
#include "ats/transfer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ats/plan.h"

/* ---- assignments and routing ------------------------------------------------------------- */

enum ats_status ats_assignment_init(ats_assignment *a, int32_t n)
{
    memset(a, 0, sizeof *a);
    if (n < 1) return ATS_EINVAL;
    a->backend = calloc((size_t)n, 1);
    if (!a->backend) return ATS_ENOMEM;
    a->n = n;
    a->predicted_s = NAN;
    return ATS_OK;
}

void ats_assignment_free(ats_assignment *a)
{
    if (!a) return;
    free(a->backend);
    memset(a, 0, sizeof *a);
}

void ats_assignment_copy(ats_assignment *dst, const ats_assignment *src)
{
    ATS_ASSERT(dst->n == src->n);
    memcpy(dst->backend, src->backend, (size_t)src->n);
    dst->n_promoted = src->n_promoted;
    dst->serialized = src->serialized;
    dst->predicted_s = src->predicted_s;
}

void ats_assignment_from_placement(ats_assignment *a, const ats_placement *p)
{
    ATS_ASSERT(a->n == p->n);
    memcpy(a->backend, p->backend, (size_t)p->n);
    a->n_promoted = 0;
    a->serialized = 0;
    a->predicted_s = NAN;
}

enum ats_status ats_costs_route(const ats_graph *g, const ats_costs *in, const ats_routing *routing,
                                ats_costs *out, ats_err *err)
{
    if (!g || !in || !out || in->n != g->n_ops || out->n != g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "route: costs/graph size mismatch");
    if (in != out) ats_costs_copy(out, in);
    if (!routing) return ATS_OK;
    if (routing->n != g->n_ops || !routing->n_selected)
        return ats_err_set(err, ATS_EINVAL, "routing: n = %d, graph has %d ops", (int)routing->n,
                           (int)g->n_ops);
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        if (op->kind != ATS_OP_EXPERTS) continue;
        double k = routing->n_selected[i];
        if (!(k >= 0) || k > (double)op->n_expert)
            return ats_err_set(err, ATS_EINVAL, "routing: op %d (%s) selects %g experts (must be in [0, %d])",
                               (int)i, op->name, k, (int)op->n_expert);
        double w = out->w[i] + (k - op->n_expert_active) * out->w_expert[i];
        out->w[i] = w > 0 ? w : 0;
    }
    return ATS_OK;
}

ats_transfer_opts ats_transfer_opts_default(void)
{
    ats_transfer_opts o;
    memset(&o, 0, sizeof o);
    o.temp_bytes = 0;
    o.hostmem_cpu_factor = 1.0;
    o.prefetch_lead_s = 0.0;
    o.routing = NULL;
    return o;
}

/* cap: temp_bytes (model P, ring) or temp_bytes / 2 (model A, one of two slots) */
static int promotable_cap(const ats_graph *g, const uint8_t *b, const ats_transfer_opts *o, int32_t i,
                          uint64_t cap)
{
    const ats_op *op = &g->ops[i];
    if (b[i] != ATS_CPU) return 0;
    if (op->kind == ATS_OP_EMBED) return 0;
    if (op->kind == ATS_OP_ATTN && !o->promote_kv) return 0;
    uint64_t x = ats_op_xfer_bytes(g, o->routing, i);
    return x > 0 && x <= cap;
}

static int promotable(const ats_graph *g, const uint8_t *b, const ats_transfer_opts *o, int32_t i)
{
    return promotable_cap(g, b, o, i, o->temp_bytes);
}

static int promotable_a(const ats_graph *g, const uint8_t *b, const ats_transfer_opts *o, int32_t i)
{
    return promotable_cap(g, b, o, i, o->temp_bytes / 2);
}

int ats_op_promotable(const ats_graph *g, const ats_placement *p, const ats_transfer_opts *opts,
                      int32_t i)
{
    return promotable(g, p->backend, opts, i);
}

static enum ats_status check_inputs(const ats_graph *g, const ats_placement *p, const ats_costs *cur,
                                    const ats_transfer_opts *o, const ats_assignment *out,
                                    ats_err *err)
{
    if (!g || g->n_ops < 1) return ats_err_set(err, ATS_EINVAL, "transfer: empty graph (no ops)");
    if (!p || p->n != g->n_ops || !cur || cur->n != g->n_ops || !out || out->n != g->n_ops)
        return ats_err_set(err, ATS_EINVAL, "transfer: placement/costs/assignment size mismatch with %d ops",
                           (int)g->n_ops);
    if (!(o->hostmem_cpu_factor > 0 && o->hostmem_cpu_factor <= 1))
        return ats_err_set(err, ATS_EINVAL, "transfer: hostmem_cpu_factor %g (must be in (0, 1])",
                           o->hostmem_cpu_factor);
    if (!(o->prefetch_lead_s >= 0) || !isfinite(o->prefetch_lead_s))
        return ats_err_set(err, ATS_EINVAL, "transfer: prefetch_lead_s %g (must be finite and >= 0)",
                           o->prefetch_lead_s);
    return ats_costs_validate(cur, err);
}

static void finish_assignment(const ats_placement *p, ats_assignment *out)
{
    out->n_promoted = 0;
    out->serialized = 0;
    for (int32_t i = 0; i < p->n; i++)
        if (p->backend[i] == ATS_CPU && out->backend[i] == ATS_GPU) out->n_promoted++;
}

/* ---- model P: Algorithm 2 ---------------------------------------------------------------- */

static double tb(const ats_costs *c, int b, int32_t i) { return b == ATS_GPU ? c->t_gpu[i] : c->t_cpu[i]; }

enum ats_status ats_transfer_paper(const ats_graph *g, const ats_placement *p, const ats_costs *cur,
                                   const ats_transfer_opts *opts, ats_assignment *out, ats_err *err)
{
    ats_transfer_opts o = opts ? *opts : ats_transfer_opts_default();
    enum ats_status st = check_inputs(g, p, cur, &o, out, err);
    if (st) return st;
    int32_t n = g->n_ops;
    const uint8_t *b = p->backend;
    /* O(n) auxiliary: prefix sums of the default path, dp, and backtracking pointers */
    double *P = malloc((size_t)(n + 1) * sizeof *P);
    double *dc = calloc((size_t)n, sizeof *dc), *dg = calloc((size_t)n, sizeof *dg);
    int32_t *fromc = malloc((size_t)n * sizeof *fromc), *fromg = malloc((size_t)n * sizeof *fromg);
    if (!P || !dc || !dg || !fromc || !fromg) {
        st = ats_err_set(err, ATS_ENOMEM, "transfer: out of memory");
        goto done;
    }
    P[0] = 0;
    for (int32_t k = 0; k < n; k++)
        P[k + 1] = P[k] + tb(cur, b[k], k) + ((k >= 1 && b[k - 1] != b[k]) ? cur->c[k] : 0.0);
    const double INF = INFINITY;
    /* fromc/fromg: predecessor backend (0 CPU, 1 GPU) for non-promoted states; for a promoted GPU
       state fromg = -(j + 2) encodes the transfer start j (j = -1: round start). */
    for (int32_t i = 0; i < n; i++) {
        double pc = i ? dc[i - 1] : 0.0, pg = i ? dg[i - 1] : INF;
        double ci = i ? cur->c[i] : 0.0;
        if (i == 0) pg = INF;
        dc[i] = dg[i] = INF;
        fromc[i] = fromg[i] = 0;
        if (b[i] == ATS_GPU) {
            double a = (i ? pc + ci : 0.0), gg = pg;
            if (i == 0) a = 0.0;
            if (gg < a) {
                dg[i] = gg + cur->t_gpu[i];
                fromg[i] = 1;
            } else {
                dg[i] = a + cur->t_gpu[i];
                fromg[i] = 0;
            }
            continue;
        }
        {
            double a = pc, gg = pg + ci;
            if (gg < a) {
                dc[i] = gg + cur->t_cpu[i];
                fromc[i] = 1;
            } else {
                dc[i] = a + cur->t_cpu[i];
                fromc[i] = 0;
            }
        }
        if (!promotable(g, b, &o, i)) continue;
        double best = INF;
        int32_t bj = -2;
        /* j = -1: round start */
        {
            double seg = P[i] - P[0];
            double v = (cur->w[i] > seg ? cur->w[i] : seg);
            best = v;
            bj = -1;
        }
        for (int32_t j = 0; j < i; j++) {
            if (b[j] != ATS_CPU || !(dc[j] < INF)) continue;
            double seg = P[i] - P[j + 1];
            double v = dc[j] + (cur->w[i] > seg ? cur->w[i] : seg);
            if (v < best) {
                best = v;
                bj = j;
            }
        }
        double sw = (i >= 1 && b[i - 1] == ATS_CPU) ? ci : 0.0;
        dg[i] = best + sw + cur->t_gpu[i];
        fromg[i] = -(bj + 2);
    }
    /* backtrack */
    int state = dg[n - 1] < dc[n - 1] ? ATS_GPU : ATS_CPU;
    out->predicted_s = state == ATS_GPU ? dg[n - 1] : dc[n - 1];
    int32_t i = n - 1;
    while (i >= 0) {
        if (state == ATS_CPU) {
            out->backend[i] = ATS_CPU;
            state = fromc[i] ? ATS_GPU : ATS_CPU;
            i--;
        } else if (b[i] == ATS_GPU) {
            out->backend[i] = ATS_GPU;
            state = fromg[i] ? ATS_GPU : ATS_CPU;
            i--;
        } else {
            out->backend[i] = ATS_GPU; /* promoted */
            int32_t j = -fromg[i] - 2;
            for (int32_t k = j + 1; k < i; k++) out->backend[k] = b[k];
            i = j;
            state = ATS_CPU;
        }
    }
    finish_assignment(p, out);
done:
    free(P);
    free(dc);
    free(dg);
    free(fromc);
    free(fromg);
    return st;
}

double ats_transfer_paper_eval(const ats_placement *p, const ats_costs *cur, const uint8_t *rb)
{
    int32_t n = p->n;
    const uint8_t *b = p->backend;
    double T = 0;
    int32_t prev_prom = -2; /* -2: none yet */
    for (int32_t i = 0; i < n; i++) {
        if (b[i] == ATS_GPU && rb[i] != ATS_GPU) return INFINITY;
        T += tb(cur, rb[i], i);
        if (i >= 1 && rb[i] != rb[i - 1]) T += cur->c[i];
        if (!(b[i] == ATS_CPU && rb[i] == ATS_GPU)) continue;
        int32_t j;
        if (prev_prom == -2) {
            j = -1;
        } else {
            j = -3;
            for (int32_t k = prev_prom + 1; k < i; k++)
                if (rb[k] == ATS_CPU) {
                    j = k;
                    break;
                }
            if (j == -3) return INFINITY;
        }
        double seg = 0;
        for (int32_t k = j + 1; k < i; k++) {
            seg += tb(cur, b[k], k);
            if (k >= 1 && b[k - 1] != b[k]) seg += cur->c[k];
        }
        double d = cur->w[i] - seg;
        T += d > 0 ? d : 0;
        prev_prom = i;
    }
    return T;
}

/* ---- model A: Pareto DP -------------------------------------------------------------------- */

/* End time of a CPU op of nominal duration t starting at s while the copy engine is busy on
 * [ws, wf]: rate h inside, 1 outside. Same arithmetic as plan.c's cpu_end for one interval. */
static double cpu_end1(double s, double t, double ws, double wf, double h)
{
    if (h >= 1.0 || wf <= s) return s + t;
    double tau = s, W = t;
    if (ws > tau) {
        if (tau + W <= ws) return tau + W;
        W -= ws - tau;
        tau = ws;
    }
    double prog = h * (wf - tau);
    if (prog >= W) return tau + W / h;
    W -= prog;
    return wf + W;
}

typedef struct st_a {
    double E, F;  /* F: release time of the next transfer (R above) */
    int32_t op;   /* promoted op of this state (-1: start) */
    int32_t from; /* index of predecessor state, -1 for start */
} st_a;

/* Default-path prefix sums: N = nominal time, Q = time with every CPU op stretched by 1/h, both
 * including the default switch into each op (sw_k = c_k·[b_{k−1} ≠ b_k], k ≥ 1). */
typedef struct dp_a {
    const ats_graph *g;
    const ats_costs *c;
    const uint8_t *b;
    double h, lead;
    double *N, *Q; /* n + 1 each */
} dp_a;

static double sw_def(const dp_a *d, int32_t k)
{
    return (k >= 1 && d->b[k - 1] != d->b[k]) ? d->c->c[k] : 0.0;
}

/* Ops from..to (from ≥ 1 past the state's first op, default switches) starting at time E, with the
 * copy engine busy from before E until Wf. Exact: CPU ops run at rate h until Wf, then at 1. */
static double run_window(const dp_a *d, int32_t from, int32_t to, double E, double Ws, double Wf)
{
    if (from > to) return E;
    if (d->h >= 1.0 || Wf <= E) return E + (d->N[to + 1] - d->N[from]);
    if (E + (d->Q[to + 1] - d->Q[from]) <= Wf) return E + (d->Q[to + 1] - d->Q[from]);
    /* first op m whose slowed end passes Wf */
    int32_t lo = from, hi = to;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (E + (d->Q[mid + 1] - d->Q[from]) > Wf) hi = mid;
        else lo = mid + 1;
    }
    int32_t m = lo;
    double s = E + (d->Q[m] - d->Q[from]) + sw_def(d, m);
    double Em = d->b[m] == ATS_GPU ? s + d->c->t_gpu[m] : cpu_end1(s, d->c->t_cpu[m], Ws, Wf, d->h);
    return Em + (d->N[to + 1] - d->N[m + 1]);
}

/* End of the first op a = p+1 after a state (previous backend GPU when p ≥ 0), window [Ws, Wf]. */
static double run_first(const dp_a *d, int32_t a, int pb, double E, double Ws, double Wf)
{
    int ba = d->b[a];
    double s = E + ((a >= 1 && pb >= 0 && pb != ba) ? d->c->c[a] : 0.0);
    return ba == ATS_GPU ? s + d->c->t_gpu[a] : cpu_end1(s, d->c->t_cpu[a], Ws, Wf, d->h);
}

/* Transition from state s (after promoted op s->op, on GPU) to promoting g. Returns E_g and the
 * release of the next transfer R_g = max(end of g's transfer, end of op g-1) (double buffering). */
static void step_a(const dp_a *d, const st_a *s, int32_t g, double *Eg, double *Fg)
{
    const ats_op *op = &d->g->ops[g];
    int32_t p = s->op, a = p + 1;
    int pb = p >= 0 ? ATS_GPU : -1;
    const int has_r = op->kind == ATS_OP_EXPERTS && op->has_router; /* a router to wait for */
    const int32_t r = op->router;
    double E = s->E, Ts, Tf;
    if (has_r && r >= a) {
        /* ops up to the router run with the copy engine idle (previous transfer ended at F ≤ E) */
        E = run_first(d, a, pb, E, 0, 0);
        E = run_window(d, a + 1, r, E, 0, -INFINITY);
        Ts = E > s->F ? E : s->F;
        Tf = Ts + d->c->w[g];
        E = run_window(d, r + 1, g - 1, E, Ts, Tf);
        pb = (g - 1 >= a) ? d->b[g - 1] : pb;
    } else {
        Ts = (has_r && r == p) ? (s->E > s->F ? s->E : s->F) : s->F;
        Tf = Ts + d->c->w[g];
        if (a <= g - 1) {
            E = run_first(d, a, pb, E, Ts, Tf);
            E = run_window(d, a + 1, g - 1, E, Ts, Tf);
            pb = d->b[g - 1];
        }
    }
    double Egm1 = E;
    double start = E + ((g >= 1 && pb >= 0 && pb != ATS_GPU) ? d->c->c[g] : 0.0);
    if (Tf > start) start = Tf;
    *Eg = start + d->c->t_gpu[g];
    *Fg = Tf > Egm1 ? Tf : Egm1;
}

/* End of op z when the state s runs ops s->op+1..z at default with the copy engine idle. */
static double advance(const dp_a *d, const st_a *s, int32_t z)
{
    int32_t a = s->op + 1;
    if (a > z) return s->E;
    double E = run_first(d, a, s->op >= 0 ? ATS_GPU : -1, s->E, 0, 0);
    return run_window(d, a + 1, z, E, 0, -INFINITY);
}

static int dominated(const st_a *x, const st_a *y) /* y dominates x (same position) */
{
    return y->E <= x->E && y->F <= x->F;
}

enum ats_status ats_transfer_ats(const ats_graph *g, const ats_placement *p, const ats_costs *cur,
                                 const ats_transfer_opts *opts, ats_assignment *out, ats_err *err)
{
    ats_transfer_opts o = opts ? *opts : ats_transfer_opts_default();
    enum ats_status st = check_inputs(g, p, cur, &o, out, err);
    if (st) return st;
    int32_t n = g->n_ops;
    /* graph property needed by the DP (see transfer.h) */
    for (int32_t i = 0; i < n; i++) {
        const ats_op *op = &g->ops[i];
        if (op->kind != ATS_OP_EXPERTS || !op->has_router) continue;
        if (op->router >= i)
            return ats_err_set(err, ATS_EINVAL, "transfer: op %d (%s) has router %d after it", (int)i,
                               op->name, (int)op->router);
        for (int32_t k = op->router + 1; k < i; k++)
            if (g->ops[k].kind != ATS_OP_EXPERTS || !g->ops[k].has_router || g->ops[k].router != op->router)
                return ats_err_set(err, ATS_EINVAL,
                                   "transfer: op %d (%s) lies between EXPERTS op %d and its router %d",
                                   (int)k, g->ops[k].name, (int)i, (int)op->router);
    }
    dp_a d = {g, cur, p->backend, o.hostmem_cpu_factor, o.prefetch_lead_s, NULL, NULL};
    d.N = malloc((size_t)(n + 1) * sizeof *d.N);
    d.Q = malloc((size_t)(n + 1) * sizeof *d.Q);
    size_t cap = 1024, ns = 0, na = 0, cap_alive = 1024;
    st_a *S = malloc(cap * sizeof *S);
    size_t *alive = malloc(cap_alive * sizeof *alive);
    double *Wsuf = NULL;
    if (!d.N || !d.Q || !S || !alive) {
        st = ats_err_set(err, ATS_ENOMEM, "transfer: out of memory");
        goto done;
    }
    Wsuf = malloc((size_t)(n + 1) * sizeof *Wsuf);
    if (!Wsuf) {
        st = ats_err_set(err, ATS_ENOMEM, "transfer: out of memory");
        goto done;
    }
    Wsuf[n] = 0;
    for (int32_t k = n - 1; k >= 0; k--) {
        double wk = promotable_a(g, p->backend, &o, k) ? cur->w[k] : 0.0;
        Wsuf[k] = wk > Wsuf[k + 1] ? wk : Wsuf[k + 1];
    }
    d.N[0] = d.Q[0] = 0;
    for (int32_t k = 0; k < n; k++) {
        double sw = sw_def(&d, k);
        int cpu = p->backend[k] == ATS_CPU;
        d.N[k + 1] = d.N[k] + sw + (cpu ? cur->t_cpu[k] : cur->t_gpu[k]);
        d.Q[k + 1] = d.Q[k] + sw + (cpu ? cur->t_cpu[k] / d.h : cur->t_gpu[k]);
    }
    /* state 0: round start */
    S[ns++] = (st_a){0.0, -o.prefetch_lead_s, -1, -1};
    alive[na++] = 0;
    for (int32_t gop = 0; gop < n; gop++) {
        if (!promotable_a(g, p->backend, &o, gop)) continue;
        size_t first = ns;
        for (size_t ai = 0; ai < na; ai++) {
            size_t si = alive[ai];
            st_a x;
            step_a(&d, &S[si], gop, &x.E, &x.F);
            x.op = gop;
            x.from = (int32_t)si;
            int dom = 0;
            for (size_t q = first; q < ns; q++)
                if (dominated(&x, &S[q])) {
                    dom = 1;
                    break;
                }
            if (dom) continue;
            size_t w = first;
            for (size_t q = first; q < ns; q++)
                if (!dominated(&S[q], &x)) S[w++] = S[q];
            ns = w;
            if (ns == cap) {
                cap *= 2;
                st_a *t = realloc(S, cap * sizeof *S);
                if (!t) {
                    st = ats_err_set(err, ATS_ENOMEM, "transfer: out of memory");
                    goto done;
                }
                S = t;
            }
            S[ns++] = x;
        }
        /* Drop earlier states that a new one dominates for every continuation. Compared at the
           end of op gop: the earlier state s1 (which ran gop on the CPU) is at best (E1, F1) with
           E1 its interference-free end of gop; the new state s2 is no worse than (E2 + c_{gop+1},
           F2). A release F ≤ E − W, W the largest transfer still to come, acts like F = E − W
           (every later transfer would end before the compute stream gets there), so s2 dominates
           when E2 + c ≤ E1 and F2 ≤ max(F1, E1 − W). Skipped where a later EXPERTS op's router
           lies at or before gop (its release would depend on s1's router end). */
        int can_prune = !o.no_prune && !(gop + 1 < n && g->ops[gop + 1].kind == ATS_OP_EXPERTS && g->ops[gop + 1].has_router &&
                          g->ops[gop + 1].router <= gop);
        double cnext = gop + 1 < n ? cur->c[gop + 1] : 0.0;
        double Wn = Wsuf[gop + 1];
        size_t w = 0;
        for (size_t ai = 0; ai < na; ai++) {
            const st_a *s1 = &S[alive[ai]];
            int dom = 0;
            if (can_prune) {
                double E1 = advance(&d, s1, gop);
                double F1 = s1->F > E1 - Wn ? s1->F : E1 - Wn;
                for (size_t q = first; q < ns && !dom; q++) dom = S[q].E + cnext <= E1 && S[q].F <= F1;
            }
            if (!dom) alive[w++] = alive[ai];
        }
        na = w;
        if (na + (ns - first) > cap_alive) {
            cap_alive = 2 * (na + (ns - first));
            size_t *t = realloc(alive, cap_alive * sizeof *alive);
            if (!t) {
                st = ats_err_set(err, ATS_ENOMEM, "transfer: out of memory");
                goto done;
            }
            alive = t;
        }
        for (size_t q = first; q < ns; q++) alive[na++] = q;
    }
    /* close: run the rest of the round from every live state */
    double best = INFINITY;
    int32_t bs = 0;
    for (size_t ai = 0; ai < na; ai++) {
        double E = advance(&d, &S[alive[ai]], n - 1);
        if (E < best) {
            best = E;
            bs = (int32_t)alive[ai];
        }
    }
    memcpy(out->backend, p->backend, (size_t)n);
    for (int32_t si = bs; si >= 0 && S[si].op >= 0; si = S[si].from) out->backend[S[si].op] = ATS_GPU;
    out->predicted_s = best;
    finish_assignment(p, out);
done:
    free(d.N);
    free(d.Q);
    free(S);
    free(alive);
    free(Wsuf);
    return st;
}

double ats_transfer_ats_eval(const ats_graph *g, const ats_placement *p, const ats_costs *cur,
                             const ats_transfer_opts *opts, const uint8_t *rb)
{
    ats_transfer_opts o = opts ? *opts : ats_transfer_opts_default();
    int32_t n = g->n_ops;
    for (int32_t i = 0; i < n; i++) {
        if (p->backend[i] == ATS_GPU && rb[i] != ATS_GPU) return INFINITY;
        if (p->backend[i] == ATS_CPU && rb[i] == ATS_GPU && !promotable_a(g, p->backend, &o, i))
            return INFINITY;
    }
    ats_assignment a;
    ats_plan pl;
    ats_plan_init(&pl);
    double lat = INFINITY;
    if (ats_assignment_init(&a, n)) return NAN;
    memcpy(a.backend, rb, (size_t)n);
    finish_assignment(p, &a);
    ats_plan_opts po = ats_plan_opts_default();
    po.temp_bytes = o.temp_bytes;
    po.n_copy_engines = 1;
    po.double_buffer = 1;
    po.prefetch_lead_s = o.prefetch_lead_s;
    po.routing = o.routing;
    ats_predict_opts pr = ats_predict_opts_default();
    pr.hostmem_cpu_factor = o.hostmem_cpu_factor;
    pr.prefetch_lead_s = o.prefetch_lead_s;
    if (ats_plan_build(g, p, &a, cur, &po, &pl, NULL) == ATS_OK) {
        if (ats_plan_predict(&pl, cur, &pr, &lat, NULL, NULL) != ATS_OK) lat = NAN;
    } else {
        lat = NAN;
    }
    ats_plan_free(&pl);
    ats_assignment_free(&a);
    return lat;
}
