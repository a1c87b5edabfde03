/*
 * sim/src/engine.c — event heap, fluid rates, max-min sharing, host-memory interference, trace replay.
 * See sim/engine.h for the model. Hot path: sim_engine_run's loop; no allocation inside it.
 */
#include "sim/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- programs */

void sim_prog_init(sim_prog *p) { memset(p, 0, sizeof *p); }

void sim_prog_free(sim_prog *p)
{
    if (!p) return;
    free(p->tasks);
    free(p->deps);
    memset(p, 0, sizeof *p);
}

void sim_prog_clear(sim_prog *p)
{
    p->n = 0;
    p->n_deps = 0;
}

static int grow(void **ptr, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap) return 0;
    int32_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*ptr, (size_t)nc * elem);
    if (!np) return -1;
    *ptr = np;
    *cap = nc;
    return 0;
}

static int kind_fits_queue(sim_task_kind k, int q)
{
    switch (k) {
    case SIM_TASK_CPU: return q == SIM_Q_CPU;
    case SIM_TASK_GPU:
    case SIM_TASK_SM_H2D:
    case SIM_TASK_SM_D2H: return q == SIM_Q_GPU;
    case SIM_TASK_CE_H2D:
    case SIM_TASK_CE_D2H: return q >= SIM_Q_CE0 && q < SIM_MAX_QUEUES;
    default: return 0;
    }
}

enum ats_status sim_prog_add(sim_prog *p, sim_task_kind kind, int queue, double work,
                             const int32_t *deps, int32_t n_dep, int32_t *out_idx, ats_err *err)
{
    if ((int)kind < 0 || kind >= SIM_TASK_KIND_COUNT || !kind_fits_queue(kind, queue))
        return ats_err_set(err, ATS_EINVAL, "task %d: kind %d cannot run on queue %d", p->n, (int)kind,
                           queue);
    if (!(work >= 0.0) || isinf(work))
        return ats_err_set(err, ATS_EINVAL, "task %d: work %g (must be finite and >= 0)", p->n, work);
    if (n_dep < 0) return ats_err_set(err, ATS_EINVAL, "task %d: n_dep %d", p->n, n_dep);
    for (int32_t i = 0; i < n_dep; i++)
        if (deps[i] < 0 || deps[i] >= p->n)
            return ats_err_set(err, ATS_EINVAL, "task %d: dependency %d is not an earlier task", p->n,
                               deps[i]);
    if (grow((void **)&p->tasks, &p->cap, p->n + 1, sizeof *p->tasks) ||
        grow((void **)&p->deps, &p->cap_deps, p->n_deps + n_dep, sizeof *p->deps))
        return ATS_ENOMEM;
    sim_task *t = &p->tasks[p->n];
    memset(t, 0, sizeof *t);
    t->kind = (uint8_t)kind;
    t->queue = (uint8_t)queue;
    t->work = work;
    t->mem_frac = 1.0;
    t->flop_frac = 0.0;
    t->op = -1;
    t->dep_off = p->n_deps;
    t->n_dep = n_dep;
    if (n_dep) memcpy(p->deps + p->n_deps, deps, (size_t)n_dep * sizeof *deps);
    p->n_deps += n_dep;
    if (out_idx) *out_idx = p->n;
    p->n++;
    return ATS_OK;
}

enum ats_status sim_prog_add_dep(sim_prog *p, int32_t dep, ats_err *err)
{
    if (p->n < 1) return ats_err_set(err, ATS_EINVAL, "sim_prog_add_dep: empty program");
    int32_t last = p->n - 1;
    if (dep < 0 || dep >= last)
        return ats_err_set(err, ATS_EINVAL, "task %d: dependency %d is not an earlier task", last, dep);
    if (grow((void **)&p->deps, &p->cap_deps, p->n_deps + 1, sizeof *p->deps)) return ATS_ENOMEM;
    /* the last task's deps are at the end of the array */
    p->deps[p->n_deps++] = dep;
    p->tasks[last].n_dep++;
    return ATS_OK;
}

/* ---------------------------------------------------------------- max-min sharing */

void sim_maxmin_share(int n, const double *cap, double capacity, double *rate)
{
    ATS_ASSERT(n >= 0 && n <= 16);
    /* water-filling: visit flows by increasing cap; each gets min(cap, remaining / flows left) */
    int order[16];
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) { /* insertion sort, stable: ties keep flow order */
        int k = order[i], j = i - 1;
        while (j >= 0 && cap[order[j]] > cap[k]) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = k;
    }
    double left = capacity;
    for (int i = 0; i < n; i++) {
        int k = order[i];
        double fair = left / (double)(n - i);
        double r = cap[k] < fair ? cap[k] : fair;
        if (r < 0) r = 0;
        rate[k] = r;
        left -= r;
    }
}

/* ---------------------------------------------------------------- engine */

enum { EV_TASK = 0, EV_LAT = 1, EV_TRACE = 2 };

typedef struct ev {
    double t;
    uint64_t seq;
    int32_t kind;
    int32_t q;
} ev;

typedef struct slot {
    int32_t task;     /* running task or -1 */
    int32_t phase;    /* 0 latency, 1 moving work */
    double remaining; /* work left (seconds at idle speed, or bytes) */
    double rate;      /* work per second; 0 while in the latency phase */
} slot;

struct sim_engine {
    ats_hw hw;
    const sim_trace *tr;
    sim_engine_opts opts;
    double now;
    int32_t tr_idx;
    double a_cpu, a_gpu, a_pcie;
    ev heap[SIM_MAX_QUEUES + 1];
    int32_t n_heap;
    int32_t pos[SIM_MAX_QUEUES + 1]; /* heap index of each queue's event (last: trace), -1 none */
    uint64_t seq;
    sim_stats st;
    sim_task_hook task_hook;
    sim_rate_hook rate_hook;
    void *hook_user;
    double last_h2d, last_d2h;
    int n_queues;
    slot run[SIM_MAX_QUEUES];
    /* per-run scratch */
    int32_t *qlist;
    uint8_t *done;
    int32_t cap_scratch;
    int32_t qoff[SIM_MAX_QUEUES + 1], qhead[SIM_MAX_QUEUES];
};

sim_engine_opts sim_engine_opts_default(void)
{
    sim_engine_opts o;
    memset(&o, 0, sizeof o);
    o.hostmem = 1;
    o.trace_offset_s = 0.0;
    return o;
}

static int ev_less(const ev *a, const ev *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

/* The heap holds at most one event per queue (its task's latency end or completion) and one trace
 * event, so it never exceeds SIM_MAX_QUEUES + 1 entries; pos[] finds a queue's entry so a changed
 * completion time is updated in place (with a fresh insertion sequence, as if re-inserted). */
static inline int slot_of(int32_t q) { return q < 0 ? SIM_MAX_QUEUES : q; }

static inline void heap_place(sim_engine *e, int32_t i, ev x)
{
    e->heap[i] = x;
    e->pos[slot_of(x.q)] = i;
}

static void sift_up(sim_engine *e, int32_t i, ev x)
{
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!ev_less(&x, &e->heap[p])) break;
        heap_place(e, i, e->heap[p]);
        i = p;
    }
    heap_place(e, i, x);
}

static void sift_down(sim_engine *e, int32_t i, ev x)
{
    const int32_t n = e->n_heap;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ev_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!ev_less(&e->heap[c], &x)) break;
        heap_place(e, i, e->heap[c]);
        i = c;
    }
    heap_place(e, i, x);
}

/* schedules (or re-schedules) the one event of queue q (q = -1: the trace) at time t */
static void heap_set(sim_engine *e, double t, int32_t kind, int32_t q)
{
    ev x = {t, e->seq++, kind, q};
    int32_t i = e->pos[slot_of(q)];
    if (i < 0) {
        ATS_ASSERT(e->n_heap < SIM_MAX_QUEUES + 1);
        sift_up(e, e->n_heap++, x);
    } else if (ev_less(&x, &e->heap[i])) {
        sift_up(e, i, x);
    } else {
        sift_down(e, i, x);
    }
}

static ev heap_pop(sim_engine *e)
{
    ev top = e->heap[0];
    e->pos[slot_of(top.q)] = -1;
    ev x = e->heap[--e->n_heap];
    if (e->n_heap > 0) sift_down(e, 0, x);
    return top;
}

/* trace segment holding trace time tt, starting the search at the current index */
static void trace_seek(sim_engine *e)
{
    const sim_trace *tr = e->tr;
    if (!tr || tr->n < 1) {
        e->a_cpu = e->a_gpu = e->a_pcie = 1.0;
        return;
    }
    double tt = e->now + e->opts.trace_offset_s;
    int32_t i = e->tr_idx;
    if (i < 0) i = 0;
    while (i + 1 < tr->n && tr->t_s[i + 1] <= tt) i++;
    while (i > 0 && tr->t_s[i] > tt) i--;
    e->tr_idx = i;
    e->a_cpu = tr->cpu[i];
    e->a_gpu = tr->gpu[i];
    e->a_pcie = tr->pcie[i];
}

static int trace_schedule_next(sim_engine *e)
{
    const sim_trace *tr = e->tr;
    if (!tr || e->tr_idx + 1 >= tr->n) return 0;
    heap_set(e, tr->t_s[e->tr_idx + 1] - e->opts.trace_offset_s, EV_TRACE, -1);
    return 0;
}

enum ats_status sim_engine_new(const ats_hw *hw, const sim_trace *trace, const sim_engine_opts *opts,
                               sim_engine **out, ats_err *err)
{
    /* the figures the engine uses (ats_hw_validate checks the whole description at load time) */
    const struct { const char *name; double v; } rates[] = {
        {"pcie_h2d_bw", hw->pcie_h2d_bw},       {"pcie_d2h_bw", hw->pcie_d2h_bw},
        {"pcie_sm_copy_bw", hw->pcie_sm_copy_bw}, {"pcie_link_bw", hw->pcie_link_bw}};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        if (!(rates[i].v > 0.0) || isinf(rates[i].v))
            return ats_err_set(err, ATS_EINVAL, "hw %s: %s: %g (must be > 0)", hw->name, rates[i].name,
                               rates[i].v);
    if (!(hw->host_switch_s >= 0.0) || isinf(hw->host_switch_s))
        return ats_err_set(err, ATS_EINVAL, "hw %s: host_switch_s: %g (must be >= 0)", hw->name, hw->host_switch_s);
    if (!(hw->pcie_latency_s >= 0.0) || isinf(hw->pcie_latency_s))
        return ats_err_set(err, ATS_EINVAL, "hw %s: pcie_latency_s: %g (must be >= 0)", hw->name,
                           hw->pcie_latency_s);
    if (!(hw->hostmem_cpu_factor > 0.0 && hw->hostmem_cpu_factor <= 1.0) ||
        !(hw->hostmem_dma_factor > 0.0 && hw->hostmem_dma_factor <= 1.0))
        return ats_err_set(err, ATS_EINVAL, "hw %s: hostmem factors %g, %g (must be in (0, 1])", hw->name,
                           hw->hostmem_cpu_factor, hw->hostmem_dma_factor);
    if (hw->n_copy_engines < 1 || hw->n_copy_engines > SIM_MAX_CE)
        return ats_err_set(err, ATS_EINVAL, "n_copy_engines: %d (the simulator models 1 to %d)",
                           hw->n_copy_engines, SIM_MAX_CE);
    if (trace) {
        if (trace->n < 1 || !trace->t_s || !trace->cpu || !trace->gpu || !trace->pcie)
            return ats_err_set(err, ATS_EINVAL, "load trace: empty");
        for (int32_t i = 0; i < trace->n; i++) {
            if (i > 0 && !(trace->t_s[i] > trace->t_s[i - 1]))
                return ats_err_set(err, ATS_EINVAL, "load trace: t_s[%d] = %g not increasing", i,
                                   trace->t_s[i]);
            const double v[3] = {trace->cpu[i], trace->gpu[i], trace->pcie[i]};
            for (int k = 0; k < 3; k++)
                if (!(v[k] > 0.0 && v[k] <= 1.0))
                    return ats_err_set(err, ATS_EINVAL, "load trace: %s[%d] = %g (must be in (0, 1])",
                                       k == 0 ? "cpu_avail" : k == 1 ? "gpu_avail" : "pcie_avail", i,
                                       v[k]);
        }
    }
    sim_engine *e = calloc(1, sizeof *e);
    if (!e) return ATS_ENOMEM;
    e->hw = *hw;
    e->tr = trace;
    e->opts = opts ? *opts : sim_engine_opts_default();
    e->n_queues = SIM_Q_CE0 + hw->n_copy_engines;
    for (int q = 0; q < SIM_MAX_QUEUES; q++) e->run[q].task = -1;
    for (int q = 0; q <= SIM_MAX_QUEUES; q++) e->pos[q] = -1;
    trace_seek(e);
    if (trace_schedule_next(e)) {
        sim_engine_free(e);
        return ATS_ENOMEM;
    }
    *out = e;
    return ATS_OK;
}

void sim_engine_free(sim_engine *e)
{
    if (!e) return;
    free(e->qlist);
    free(e->done);
    free(e);
}

double sim_engine_now(const sim_engine *e) { return e->now; }

void sim_engine_avail(const sim_engine *e, double *cpu, double *gpu, double *pcie)
{
    if (cpu) *cpu = e->a_cpu;
    if (gpu) *gpu = e->a_gpu;
    if (pcie) *pcie = e->a_pcie;
}

const sim_stats *sim_engine_stats(const sim_engine *e) { return &e->st; }
void sim_engine_reset_stats(sim_engine *e) { memset(&e->st, 0, sizeof e->st); }

void sim_engine_set_hook(sim_engine *e, sim_task_hook task_hook, sim_rate_hook rate_hook, void *user)
{
    e->task_hook = task_hook;
    e->rate_hook = rate_hook;
    e->hook_user = user;
}

/* processes trace events up to time t (nothing is running) */
void sim_engine_advance(sim_engine *e, double t_s)
{
    ATS_ASSERT(t_s >= e->now);
    while (e->n_heap > 0 && e->heap[0].t <= t_s) {
        ev x = heap_pop(e);
        ATS_ASSERT(x.kind == EV_TRACE); /* nothing runs between programs */
        e->now = x.t > e->now ? x.t : e->now;
        e->st.events++;
        trace_seek(e);
        trace_schedule_next(e);
    }
    e->now = t_s;
}

static inline int is_xfer(int kind) { return kind >= SIM_TASK_CE_H2D; }
static inline int is_h2d(int kind) { return kind == SIM_TASK_CE_H2D || kind == SIM_TASK_SM_H2D; }

/* recomputes every running task's rate; re-schedules completions whose rate changed */
static int solve(sim_engine *e, const sim_prog *p)
{
    const ats_hw *hw = &e->hw;
    const int nq = e->n_queues;
    double rate[SIM_MAX_QUEUES];
    double u_cpu = 0.0;
    slot *cs = &e->run[SIM_Q_CPU];
    if (cs->task >= 0) u_cpu = p->tasks[cs->task].mem_frac;
    double dma_f = e->opts.hostmem ? 1.0 - (1.0 - hw->hostmem_dma_factor) * u_cpu : 1.0;

    /* PCIe flows per direction */
    double cap_h[SIM_MAX_QUEUES], cap_d[SIM_MAX_QUEUES], r_h[SIM_MAX_QUEUES], r_d[SIM_MAX_QUEUES];
    int qh[SIM_MAX_QUEUES], qd[SIM_MAX_QUEUES], nh = 0, nd = 0;
    for (int q = SIM_Q_GPU; q < nq; q++) {
        const slot *s = &e->run[q];
        rate[q] = 0.0;
        if (s->task < 0) continue;
        int k = p->tasks[s->task].kind;
        if (!is_xfer(k) || s->phase == 0) continue;
        double c;
        switch (k) {
        case SIM_TASK_CE_H2D: c = hw->pcie_h2d_bw; break;
        case SIM_TASK_CE_D2H: c = hw->pcie_d2h_bw; break;
        default: c = hw->pcie_sm_copy_bw; break;
        }
        c *= e->a_pcie * dma_f;
        if (is_h2d(k)) {
            cap_h[nh] = c;
            qh[nh++] = q;
        } else {
            cap_d[nd] = c;
            qd[nd++] = q;
        }
    }
    double link = hw->pcie_link_bw * e->a_pcie, dma = 0.0, sum_h = 0.0, sum_d = 0.0;
    if (nh == 1) r_h[0] = cap_h[0] < link ? cap_h[0] : link;
    else if (nh) sim_maxmin_share(nh, cap_h, link, r_h);
    if (nd == 1) r_d[0] = cap_d[0] < link ? cap_d[0] : link;
    else if (nd) sim_maxmin_share(nd, cap_d, link, r_d);
    for (int i = 0; i < nh; i++) rate[qh[i]] = r_h[i], sum_h += r_h[i];
    for (int i = 0; i < nd; i++) rate[qd[i]] = r_d[i], sum_d += r_d[i];
    dma = sum_h + sum_d;
    if (e->rate_hook && (sum_h != e->last_h2d || sum_d != e->last_d2h))
        e->rate_hook(e->hook_user, e->now, sum_h, sum_d);
    e->last_h2d = sum_h;
    e->last_d2h = sum_d;

    /* CPU: roofline time max(flop, mem / f_hm) */
    if (cs->task >= 0) {
        const sim_task *t = &p->tasks[cs->task];
        double f = 1.0;
        if (e->opts.hostmem && dma > 0.0) {
            /* u = 1 at the measured operating point (DMA at its rate under CPU reads), so the pair
             * (hostmem_cpu_factor, hostmem_dma_factor) reproduces the DESIGN.md table exactly */
            double u = dma / (hw->pcie_h2d_bw * hw->hostmem_dma_factor);
            if (u > 1.0) u = 1.0;
            f = 1.0 - (1.0 - hw->hostmem_cpu_factor) * u;
        }
        /* compute part at a_cpu, memory part at beta = ats_hw_cpu_mem_share(a_cpu) of idle speed:
         * speed = 1 / max(flop_frac / a_cpu, mem_frac / (f · beta)), written as a_cpu / max(flop_frac,
         * mem_frac / f · (a_cpu / beta)) so that beta == a_cpu (no DRAM curve) gives bit for bit the
         * earlier a_cpu / max(flop_frac, mem_frac / f) */
        double beta = ats_hw_cpu_mem_share(hw, e->a_cpu);
        double m = t->mem_frac / f * (e->a_cpu / beta), a = t->flop_frac;
        rate[SIM_Q_CPU] = e->a_cpu / (a > m ? a : m);
    }
    slot *gs = &e->run[SIM_Q_GPU];
    if (gs->task >= 0 && p->tasks[gs->task].kind == SIM_TASK_GPU) rate[SIM_Q_GPU] = e->a_gpu;

    for (int q = 0; q < nq; q++) {
        slot *s = &e->run[q];
        if (s->task < 0 || s->phase == 0) continue;
        if (rate[q] == s->rate) continue;
        s->rate = rate[q];
        ATS_ASSERT(s->rate > 0.0);
        heap_set(e, e->now + s->remaining / s->rate, EV_TASK, q);
    }
    return 0;
}

static int deps_done(const sim_engine *e, const sim_prog *p, int32_t ti)
{
    const sim_task *t = &p->tasks[ti];
    const int32_t *d = p->deps + t->dep_off;
    for (int32_t k = 0; k < t->n_dep; k++)
        if (!e->done[d[k]]) return 0;
    return 1;
}

/* starts the head task of every idle queue whose dependencies are done */
static int start_ready(sim_engine *e, const sim_prog *p)
{
    for (int q = 0; q < e->n_queues; q++) {
        slot *s = &e->run[q];
        if (s->task >= 0 || e->qhead[q] >= e->qoff[q + 1]) continue;
        int32_t ti = e->qlist[e->qhead[q]];
        if (!deps_done(e, p, ti)) continue;
        e->qhead[q]++;
        sim_task *t = &p->tasks[ti];
        t->t_start_s = e->now;
        s->task = ti;
        s->remaining = t->work;
        s->rate = 0.0;
        const double lat = e->hw.pcie_latency_s + t->latency_s;
        if (is_xfer(t->kind) && lat > 0.0 && t->work > 0.0) { /* nothing to move: no latency */
            s->phase = 0;
            heap_set(e, e->now + lat, EV_LAT, q);
        } else {
            s->phase = 1; /* solve() schedules the completion */
        }
    }
    return 0;
}

static void finish(sim_engine *e, const sim_prog *p, int q)
{
    slot *s = &e->run[q];
    sim_task *t = &p->tasks[s->task];
    t->t_end_s = e->now;
    e->done[s->task] = 1;
    double dur = t->t_end_s - t->t_start_s;
    e->st.tasks++;
    e->st.busy_s[q] += dur;
    if (t->kind == SIM_TASK_GPU) e->st.gpu_op_busy_s += dur;
    else if (is_h2d(t->kind)) e->st.bytes_h2d += t->work;
    else if (is_xfer(t->kind)) e->st.bytes_d2h += t->work;
    int32_t ti = s->task;
    s->task = -1;
    s->rate = 0.0;
    if (e->task_hook) e->task_hook(e->hook_user, p, ti);
}

enum ats_status sim_engine_run(sim_engine *e, const sim_prog *p, ats_err *err)
{
    const int32_t n = p->n;
    if (n == 0) return ATS_OK;
    if (n > e->cap_scratch) {
        int32_t nc = e->cap_scratch ? e->cap_scratch : 256;
        while (nc < n) nc *= 2;
        int32_t *ql = realloc(e->qlist, (size_t)nc * sizeof *ql);
        if (!ql) return ATS_ENOMEM;
        e->qlist = ql;
        uint8_t *dn = realloc(e->done, (size_t)nc);
        if (!dn) return ATS_ENOMEM;
        e->done = dn;
        e->cap_scratch = nc;
    }
    /* queue lists by counting sort, keeping program order inside a queue */
    int32_t cnt[SIM_MAX_QUEUES] = {0};
    for (int32_t i = 0; i < n; i++) {
        int q = p->tasks[i].queue;
        if (q >= e->n_queues)
            return ats_err_set(err, ATS_EINVAL, "task %d: queue %d but the hardware has %d copy engines",
                               i, q, e->hw.n_copy_engines);
        cnt[q]++;
    }
    e->qoff[0] = 0;
    for (int q = 0; q < SIM_MAX_QUEUES; q++) e->qoff[q + 1] = e->qoff[q] + cnt[q];
    for (int q = 0; q < SIM_MAX_QUEUES; q++) e->qhead[q] = e->qoff[q];
    {
        int32_t fill[SIM_MAX_QUEUES];
        memcpy(fill, e->qoff, sizeof fill);
        for (int32_t i = 0; i < n; i++) e->qlist[fill[p->tasks[i].queue]++] = i;
    }
    memset(e->done, 0, (size_t)n);
    int32_t n_done = 0;
    const uint64_t tasks0 = e->st.tasks;
    if (start_ready(e, p) || solve(e, p)) return ATS_ENOMEM;

    while (n_done < n) {
        ATS_ASSERT(e->n_heap > 0); /* progress is guaranteed: deps point to earlier tasks */
        ev x = heap_pop(e);
        /* advance the fluid state to x.t */
        double dt = x.t - e->now;
        if (dt > 0.0) {
            for (int q = 0; q < e->n_queues; q++) {
                slot *s = &e->run[q];
                if (s->task >= 0 && s->phase == 1) s->remaining -= s->rate * dt;
            }
            e->now = x.t;
        }
        for (;;) {
            e->st.events++;
            if (x.kind == EV_TASK) {
                finish(e, p, x.q);
                n_done++;
            } else if (x.kind == EV_LAT) {
                e->run[x.q].phase = 1;
            } else {
                trace_seek(e);
                if (trace_schedule_next(e)) return ATS_ENOMEM;
            }
            /* other events at the same instant */
            if (e->n_heap == 0 || e->heap[0].t > e->now) break;
            x = heap_pop(e);
        }
        if (start_ready(e, p) || solve(e, p)) return ATS_ENOMEM;
    }
    ATS_ASSERT(e->st.tasks - tasks0 == (uint64_t)n);
    ATS_ASSERT(e->n_heap <= 1); /* only the next trace change is left */
    return ATS_OK;
}
