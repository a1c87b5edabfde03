/* sim/src/sweep.c — the sweep driver (sim/sweep.h): grid points, one simulation per point, dynamic
 * assignment over OpenMP threads and MPI ranks (sim/par.h), --resume. */
#include "sim/sweep.h"

#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

/* message tags: another rank asks (and reports finished points), rank 0 gives points */
enum { TAG_ASK = 11, TAG_GIVE = 12 };
/* a simulating thread's slot: thread 0 gives it a point (GIVEN), the thread reports DONE, thread 0 takes
 * the result (IDLE); STOP ends the thread */
enum { SLOT_IDLE, SLOT_GIVEN, SLOT_DONE, SLOT_STOP };
#define MAX_THREADS 1024
#define HEARTBEAT_S 1.0 /* another rank writes to rank 0 at least this often */

typedef struct slot {
    _Atomic int state;
    long k;
} slot;

/* one finished point on the wire */
typedef struct point_msg {
    int64_t k;
    int32_t status, pad;
    atsc_sweep_row row;
    sim_sweep_done done;
    char err[ATS_ERR_LEN];
} point_msg;
typedef struct ask_hdr { int32_t want, n; } ask_hdr;  /* + n point_msg */
typedef struct give_hdr { int32_t done, n; } give_hdr; /* + n int64_t grid indices */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* idle wait with back-off: 20 us doubling up to max_us; reset *us to 20 on activity */
static void nap(int *us, int max_us)
{
    struct timespec t = {0, (long)*us * 1000L};
    nanosleep(&t, NULL);
    if (*us < max_us) *us *= 2;
}

/* ---------------------------------------------------------------- grid */

static long block_size(const sim_sweep_spec *s, int ip)
{
    return s->dynamic[ip] ? (long)s->n_eps * s->n_interval : 1;
}

enum ats_status sim_sweep_grid_init(sim_sweep_grid *g, const sim_sweep_spec *s, ats_err *err)
{
    memset(g, 0, sizeof *g);
    g->spec = s;
    for (int ip = 0; ip < s->n_policies; ip++) g->n += block_size(s, ip);
    g->n *= s->n_traces;
    size_t n = g->n > 0 ? (size_t)g->n : 1;
    g->pt = calloc(n, sizeof *g->pt);
    g->rows = calloc(n, sizeof *g->rows);
    g->status = calloc(n, sizeof *g->status);
    g->err = calloc(n, sizeof *g->err);
    g->done = calloc(n, sizeof *g->done);
    g->have = calloc(n, 1);
    if (!g->pt || !g->rows || !g->status || !g->err || !g->done || !g->have) {
        sim_sweep_grid_free(g);
        return ats_err_set(err, ATS_ENOMEM, "out of memory for %ld points", g->n);
    }
    long k = 0;
    for (int it = 0; it < s->n_traces; it++)
        for (int ip = 0; ip < s->n_policies; ip++)
            for (int ie = 0; ie < (s->dynamic[ip] ? s->n_eps : 1); ie++)
                for (int ii = 0; ii < (s->dynamic[ip] ? s->n_interval : 1); ii++) {
                    g->pt[k][0] = it, g->pt[k][1] = ip, g->pt[k][2] = ie, g->pt[k][3] = ii;
                    k++;
                }
    return ATS_OK;
}

void sim_sweep_grid_free(sim_sweep_grid *g)
{
    free(g->pt);
    free(g->rows);
    free(g->status);
    free(g->err);
    free(g->done);
    free(g->have);
    memset(g, 0, sizeof *g);
}

/* grid index of (trace, policy, eps index, interval index) */
static long point_index(const sim_sweep_grid *g, int it, int ip, int ie, int ii)
{
    const sim_sweep_spec *s = g->spec;
    long per_trace = 0, k = 0;
    for (int q = 0; q < s->n_policies; q++) per_trace += block_size(s, q);
    for (int q = 0; q < ip; q++) k += block_size(s, q);
    return it * per_trace + k + (s->dynamic[ip] ? (long)ie * s->n_interval + ii : 0);
}

const char *sim_sweep_point_label(const sim_sweep_grid *g, long k, char *buf, size_t len)
{
    const sim_sweep_spec *s = g->spec;
    const int it = g->pt[k][0], ip = g->pt[k][1], ie = g->pt[k][2], ii = g->pt[k][3];
    if (s->dynamic[ip])
        snprintf(buf, len, "%s / %s / eps %g / interval %g %s", s->trace_names[it], s->policies[ip], s->eps[ie],
                 s->interval[ii], s->interval_s ? "s" : "xTPOT");
    else
        snprintf(buf, len, "%s / %s", s->trace_names[it], s->policies[ip]);
    return buf;
}

void sim_sweep_run_point(sim_sweep_grid *g, long k)
{
    const sim_sweep_spec *s = g->spec;
    const int it = g->pt[k][0], ip = g->pt[k][1], ie = g->pt[k][2], ii = g->pt[k][3];
    sim_session_cfg cfg = *s->base;
    cfg.policy = s->policies[ip];
    cfg.resched_cost_s = s->resched_s[ip];
    if (s->dynamic[ip]) { /* otherwise the defaults: the controller never fires (controller.h) */
        cfg.ctrl.eps = s->eps[ie];
        if (s->interval_s) cfg.ctrl.tau_s = s->interval[ii];
        else cfg.ctrl.tau_s = 0, cfg.ctrl.tau_tpot_mult = s->interval[ii];
    }
    if (s->trace_length_is_duration) {
        double d = s->trace_len_s[it] - cfg.trace_offset_s;
        if (d > 0) cfg.duration_s = d, cfg.n_requests = 0;
    }
    atsc_sweep_row *w = &g->rows[k];
    memset(w, 0, sizeof *w);
    snprintf(w->trace, sizeof w->trace, "%s", s->trace_names[it]);
    snprintf(w->policy, sizeof w->policy, "%s", s->policies[ip]);
    w->eps = s->dynamic[ip] ? s->eps[ie] : 0.0; /* not applicable; /sweep takes finite values only */
    w->interval = s->dynamic[ip] ? s->interval[ii] : 0.0;
    w->interval_in_tpot = !s->interval_s;
    /* fault injection for the tests (tests/cli/test_sweep_mpi.c): this point fails as a session would */
    const char *fail = getenv("ATS_SWEEP_TEST_FAIL_POINT");
    sim_session_result r;
    if (fail && *fail && atol(fail) == k)
        g->status[k] = ats_err_set(&g->err[k], ATS_EIO, "injected failure (ATS_SWEEP_TEST_FAIL_POINT=%ld)", k);
    else
        g->status[k] = sim_session_run(s->arch, s->hw, &s->traces[it], &cfg, &r, &g->err[k]);
    if (g->status[k] == ATS_OK) {
        w->n_resched = (int32_t)r.n_resched;
        w->tpot_mean_s = r.tpot_mean_s;
        w->tpot_p50_s = r.tpot_p50_s;
        w->tpot_p99_s = r.tpot_p99_s;
        w->decode_tok_s = r.decode_tok_s;
        w->ttft_s = r.ttft_mean_s;
        g->done[k] = (sim_sweep_done){r.n_requests_done, r.sim_s, (int64_t)r.n_rounds};
        sim_session_result_free(&r);
    } else {
        w->tpot_mean_s = w->tpot_p50_s = w->tpot_p99_s = w->decode_tok_s = w->ttft_s = NAN;
    }
    g->have[k] = 1;
}

/* ---------------------------------------------------------------- rank 0 */

/* rank 0's view of the run: the next point to give, which points each rank has in flight */
typedef struct lead_state {
    sim_sweep_grid *g;
    const sim_sweep_opts *o;
    int n_ranks;
    long next, known;
    long **fl;      /* (n_ranks) points in flight per rank */
    int *n_fl, *cap_fl, *active;
    double *heard;  /* last message of each rank [s, monotonic] */
    char *text[2];  /* the in-flight text, double-buffered for a signal handler */
    int cur;
} lead_state;

#define TEXT_LEN 16384

static int fl_add(lead_state *L, int r, long k)
{
    if (L->n_fl[r] == L->cap_fl[r]) {
        int cap = L->cap_fl[r] ? 2 * L->cap_fl[r] : 16;
        long *v = realloc(L->fl[r], (size_t)cap * sizeof *v);
        if (!v) return -1;
        L->fl[r] = v, L->cap_fl[r] = cap;
    }
    L->fl[r][L->n_fl[r]++] = k;
    return 0;
}

static void fl_remove(lead_state *L, int r, long k)
{
    for (int i = 0; i < L->n_fl[r]; i++)
        if (L->fl[r][i] == k) {
            L->fl[r][i] = L->fl[r][--L->n_fl[r]];
            return;
        }
}

/* the next point not yet known, or -1 */
static long take_next(lead_state *L)
{
    while (L->next < L->g->n && L->g->have[L->next]) L->next++;
    return L->next < L->g->n ? L->next++ : -1;
}

/* "point K (label) on rank R; ..." of the points in flight (of rank only_rank, or all when -1) */
static void in_flight_text(lead_state *L, int only_rank, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int r = 0; r < L->n_ranks; r++) {
        if (only_rank >= 0 && r != only_rank) continue;
        for (int i = 0; i < L->n_fl[r] && at + 8 < len; i++) {
            char lab[256];
            int w = snprintf(buf + at, len - at, "%spoint %ld (%s) on rank %d", at ? "; " : "", L->fl[r][i],
                             sim_sweep_point_label(L->g, L->fl[r][i], lab, sizeof lab), r);
            at = w > 0 && (size_t)w < len - at ? at + (size_t)w : len - 1;
        }
    }
    if (!at) snprintf(buf, len, "none");
}

static void publish_in_flight(lead_state *L)
{
    if (!L->o->in_flight) return;
    char *b = L->text[L->cur ^ 1];
    int n = snprintf(b, TEXT_LEN, "%ld of %ld points done; in flight: ", L->known, L->g->n);
    in_flight_text(L, -1, b + n, TEXT_LEN - (size_t)n - 2);
    strcat(b, "\n");
    L->cur ^= 1;
    *L->o->in_flight = b;
}

/* a point's result arrived from rank `from` */
static void take_result(lead_state *L, int from, const point_msg *m)
{
    sim_sweep_grid *g = L->g;
    long k = (long)m->k;
    if (k < 0 || k >= g->n || g->have[k]) return;
    g->rows[k] = m->row;
    g->status[k] = (enum ats_status)m->status;
    memcpy(g->err[k].msg, m->err, sizeof m->err);
    g->err[k].msg[sizeof g->err[k].msg - 1] = 0;
    g->done[k] = m->done;
    g->have[k] = 1;
    L->known++;
    fl_remove(L, from, k);
}

/* rank `from` asked: record its finished points, give it up to `want` more */
static enum ats_status serve(sim_par *p, lead_state *L, int from, const char *buf, long n, char *out, ats_err *err)
{
    ask_hdr h;
    memcpy(&h, buf, sizeof h);
    if (n != (long)(sizeof h + (size_t)h.n * sizeof(point_msg)) || h.want < 0 || h.want > MAX_THREADS)
        return ats_err_set(err, ATS_EIO, "rank %d sent a malformed message (%ld bytes)", from, n);
    for (int i = 0; i < h.n; i++) {
        point_msg m;
        memcpy(&m, buf + sizeof h + (size_t)i * sizeof m, sizeof m);
        take_result(L, from, &m);
    }
    give_hdr gh = {0, 0};
    int64_t *ks = (int64_t *)(out + sizeof gh);
    for (int i = 0; i < h.want; i++) {
        long k = take_next(L);
        if (k < 0) break;
        if (fl_add(L, from, k)) return ats_err_set(err, ATS_ENOMEM, "out of memory");
        ks[gh.n++] = k;
    }
    gh.done = L->next >= L->g->n && take_next(L) < 0;
    if (gh.done && L->n_fl[from] == 0) L->active[from] = 0;
    memcpy(out, &gh, sizeof gh);
    L->heard[from] = now_s();
    if (sim_par_send(p, from, TAG_GIVE, out, sizeof gh + (size_t)gh.n * sizeof(int64_t)))
        return ats_err_set(err, ATS_EIO, "cannot send to rank %d", from);
    return ATS_OK;
}

/* rank 0's thread 0: gives points to its own threads and to the other ranks until every point is known
 * and every other rank has been told that none is left (the loop of sim_sweep_run's comment) */
static enum ats_status lead(sim_par *p, lead_state *L, slot *sl, int n_slots, int inline_run, ats_err *err)
{
    sim_sweep_grid *g = L->g;
    const sim_sweep_opts *o = L->o;
    size_t cap = sizeof(ask_hdr) + MAX_THREADS * sizeof(point_msg);
    char *in = malloc(cap), *out = malloc(sizeof(give_hdr) + MAX_THREADS * sizeof(int64_t));
    if (!in || !out) {
        free(in);
        free(out);
        return ats_err_set(err, ATS_ENOMEM, "out of memory");
    }
    enum ats_status st = ATS_OK;
    double t_prog = 0, t_ckpt = now_s();
    long prog_known = -1;
    int us = 20, n_active = 0;
    for (int r = 1; r < L->n_ranks; r++) n_active += L->active[r];
    publish_in_flight(L);
    while (!st && (L->known < g->n || n_active > 0)) {
        int busy = 0;
        for (int i = 0; i < n_slots; i++) { /* this rank's threads */
            int s = atomic_load_explicit(&sl[i].state, memory_order_acquire);
            if (s == SLOT_DONE) {
                L->known++;
                fl_remove(L, 0, sl[i].k);
                atomic_store_explicit(&sl[i].state, SLOT_IDLE, memory_order_release);
                busy = 1, s = SLOT_IDLE;
            }
            long k;
            if (s == SLOT_IDLE && (k = take_next(L)) >= 0) {
                if (fl_add(L, 0, k)) {
                    st = ats_err_set(err, ATS_ENOMEM, "out of memory");
                    break;
                }
                sl[i].k = k;
                atomic_store_explicit(&sl[i].state, SLOT_GIVEN, memory_order_release);
                busy = 1;
                if (inline_run) { /* OpenMP gave no simulating thread: thread 0 simulates */
                    publish_in_flight(L);
                    sim_sweep_run_point(g, k);
                    atomic_store_explicit(&sl[i].state, SLOT_DONE, memory_order_release);
                }
            }
        }
        int from;
        long n;
        while (!st && (n = sim_par_poll(p, -1, TAG_ASK, &from, in, cap)) != 0) { /* the other ranks */
            if (n < 0) st = ats_err_set(err, ATS_EIO, "receiving from another rank failed");
            else st = serve(p, L, from, in, n, out, err);
            busy = 1;
        }
        n_active = 0;
        double t = now_s();
        for (int r = 1; r < L->n_ranks && !st; r++) {
            n_active += L->active[r];
            if (L->active[r] && t - L->heard[r] > o->rank_timeout_s) {
                char what[TEXT_LEN];
                in_flight_text(L, r, what, sizeof what);
                st = ats_err_set(err, ATS_EIO, "rank %d sent nothing for %.0f s (it writes every %.0f s "
                                 "while it runs): it died or hangs; its points in flight: %s", r, t - L->heard[r],
                                 HEARTBEAT_S, what);
            }
        }
        if (busy) publish_in_flight(L);
        if (o->progress && L->known != prog_known && (t - t_prog >= 0.2 || L->known == g->n)) {
            o->progress(o->ctx, L->known, g->n);
            prog_known = L->known, t_prog = t;
        }
        if (!st && o->checkpoint && o->checkpoint_s > 0 && t - t_ckpt >= o->checkpoint_s) {
            int bad;
#pragma omp critical(ats_hdf5) /* HDF5 is not thread-safe: sessions may be reading a routing file */
            bad = o->checkpoint(o->ctx, g);
            if (bad) st = ats_err_set(err, ATS_EIO, "writing the checkpoint failed");
            t_ckpt = now_s();
        }
        if (busy) us = 20;
        else nap(&us, 200);
    }
    free(in);
    free(out);
    return st;
}

/* ---------------------------------------------------------------- other ranks */

/* another rank's thread 0: asks rank 0 for a point per idle thread, reports finished points, writes at
 * least every HEARTBEAT_S, until rank 0 says that none is left and its threads are idle */
static enum ats_status follow(sim_par *p, sim_sweep_grid *g, const sim_sweep_opts *o, slot *sl, int n_slots,
                              int inline_run, ats_err *err)
{
    size_t cap = sizeof(ask_hdr) + MAX_THREADS * sizeof(point_msg);
    char *out = malloc(cap), *in = malloc(sizeof(give_hdr) + MAX_THREADS * sizeof(int64_t));
    if (!in || !out) {
        free(in);
        free(out);
        return ats_err_set(err, ATS_ENOMEM, "out of memory");
    }
    enum ats_status st = ATS_OK;
    int told_done = 0, waiting = 0, us = 20;
    double last_sent = -1e30, wait_since = 0;
    for (;;) {
        double t = now_s();
        if (waiting) {
            int from;
            long n = sim_par_poll(p, 0, TAG_GIVE, &from, in, sizeof(give_hdr) + MAX_THREADS * sizeof(int64_t));
            if (n < 0) {
                st = ats_err_set(err, ATS_EIO, "rank %d: receiving from rank 0 failed", sim_par_rank(p));
                break;
            }
            if (n == 0) {
                if (t - wait_since > o->rank_timeout_s) {
                    st = ats_err_set(err, ATS_EIO, "rank %d: rank 0 did not answer for %.0f s", sim_par_rank(p),
                                     t - wait_since);
                    break;
                }
                nap(&us, 200);
                continue;
            }
            give_hdr gh;
            memcpy(&gh, in, sizeof gh);
            const int64_t *ks = (const int64_t *)(in + sizeof gh);
            for (int i = 0, j = 0; i < gh.n; i++) {
                while (j < n_slots && atomic_load_explicit(&sl[j].state, memory_order_acquire) != SLOT_IDLE) j++;
                if (j == n_slots) break; /* cannot happen: rank 0 gives at most `want` */
                sl[j].k = (long)ks[i];
                atomic_store_explicit(&sl[j].state, SLOT_GIVEN, memory_order_release);
                if (inline_run) {
                    sim_sweep_run_point(g, sl[j].k);
                    atomic_store_explicit(&sl[j].state, SLOT_DONE, memory_order_release);
                }
            }
            told_done |= gh.done;
            waiting = 0, us = 20;
            continue;
        }
        ask_hdr h = {0, 0};
        int busy = 0;
        for (int i = 0; i < n_slots; i++) {
            int s = atomic_load_explicit(&sl[i].state, memory_order_acquire);
            if (s == SLOT_DONE) {
                long k = sl[i].k;
                point_msg m;
                memset(&m, 0, sizeof m);
                m.k = k, m.status = (int32_t)g->status[k], m.row = g->rows[k], m.done = g->done[k];
                memcpy(m.err, g->err[k].msg, sizeof m.err);
                memcpy(out + sizeof h + (size_t)h.n * sizeof m, &m, sizeof m);
                h.n++;
                atomic_store_explicit(&sl[i].state, SLOT_IDLE, memory_order_release);
                s = SLOT_IDLE;
            }
            if (s == SLOT_IDLE) h.want++;
            else busy++;
        }
        if (told_done) h.want = 0;
        if (told_done && !busy && !h.n) break; /* everything reported, and rank 0 knows it */
        if (h.n || h.want || t - last_sent >= HEARTBEAT_S) {
            memcpy(out, &h, sizeof h);
            if (sim_par_send(p, 0, TAG_ASK, out, sizeof h + (size_t)h.n * sizeof(point_msg))) {
                st = ats_err_set(err, ATS_EIO, "rank %d: cannot send to rank 0", sim_par_rank(p));
                break;
            }
            waiting = 1, wait_since = last_sent = t, us = 20;
        } else {
            nap(&us, 200);
        }
    }
    free(in);
    free(out);
    return st;
}

/* ---------------------------------------------------------------- both */

/* the simulating threads: wait for a point in their slot, simulate it, report it */
static void simulate_loop(sim_sweep_grid *g, slot *s, int die_first)
{
    int us = 20;
    for (;;) {
        int st = atomic_load_explicit(&s->state, memory_order_acquire);
        if (st == SLOT_STOP) return;
        if (st != SLOT_GIVEN) {
            nap(&us, 100);
            continue;
        }
        us = 20;
        if (die_first) raise(SIGKILL); /* ATS_SWEEP_TEST_KILL_RANK: a rank dies in the middle of a point */
        sim_sweep_run_point(g, s->k);
        atomic_store_explicit(&s->state, SLOT_DONE, memory_order_release);
    }
}

enum ats_status sim_sweep_run(sim_par *p, sim_sweep_grid *g, const sim_sweep_opts *o, ats_err *err)
{
    const int rank = sim_par_rank(p), T = o->threads < 1 ? 1 : o->threads > MAX_THREADS ? MAX_THREADS : o->threads;
    const char *kill_env = getenv("ATS_SWEEP_TEST_KILL_RANK"); /* fault injection for the tests */
    const int die = kill_env && *kill_env && atoi(kill_env) == rank && rank > 0;
    slot *sl = calloc((size_t)T, sizeof *sl);
    lead_state L = {.g = g, .o = o, .n_ranks = sim_par_size(p)};
    if (!sl) return ats_err_set(err, ATS_ENOMEM, "out of memory");
    enum ats_status st = ATS_OK;
    if (rank == 0) {
        int R = L.n_ranks;
        L.fl = calloc((size_t)R, sizeof *L.fl);
        L.n_fl = calloc((size_t)R, sizeof *L.n_fl);
        L.cap_fl = calloc((size_t)R, sizeof *L.cap_fl);
        L.active = calloc((size_t)R, sizeof *L.active);
        L.heard = calloc((size_t)R, sizeof *L.heard);
        L.text[0] = calloc(TEXT_LEN, 1);
        L.text[1] = calloc(TEXT_LEN, 1);
        if (!L.fl || !L.n_fl || !L.cap_fl || !L.active || !L.heard || !L.text[0] || !L.text[1])
            st = ats_err_set(err, ATS_ENOMEM, "out of memory");
        for (long k = 0; !st && k < g->n; k++) L.known += g->have[k];
        for (int r = 1; !st && r < R; r++) L.active[r] = 1, L.heard[r] = now_s();
    }
    if (!st) {
#pragma omp parallel num_threads(T + 1)
        {
            const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
            const int n_slots = nt > 1 ? (nt - 1 < T ? nt - 1 : T) : 1;
            if (tid == 0) {
                enum ats_status s = rank == 0 ? lead(p, &L, sl, n_slots, nt == 1, err)
                                              : follow(p, g, o, sl, n_slots, nt == 1, err);
                for (int i = 0; i < T; i++) atomic_store_explicit(&sl[i].state, SLOT_STOP, memory_order_release);
                st = s;
            } else if (tid - 1 < n_slots) {
                simulate_loop(g, &sl[tid - 1], die);
            }
        }
    }
    if (rank == 0 && L.fl) {
        if (o->in_flight) *o->in_flight = NULL; /* the buffers go now */
        if (!st && o->progress) o->progress(o->ctx, L.known, g->n);
        for (int r = 0; r < L.n_ranks; r++) free(L.fl[r]);
    }
    free(L.fl);
    free(L.n_fl);
    free(L.cap_fl);
    free(L.active);
    free(L.heard);
    free(L.text[0]);
    free(L.text[1]);
    free(sl);
    return st;
}

/* ---------------------------------------------------------------- --resume */

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fmax(fabs(a), fabs(b))); }

static int index_of(const double *v, int n, double x)
{
    for (int i = 0; i < n; i++)
        if (near(v[i], x)) return i;
    return -1;
}

int sim_sweep_config_diff(const char *a_json, const char *b_json, const char *skip_key, char *why, size_t len)
{
    json_error_t je;
    json_t *a = json_loads(a_json, 0, &je), *b = json_loads(b_json, 0, &je);
    int differ = 0;
    if (!json_is_object(a) || !json_is_object(b)) {
        snprintf(why, len, "%s configuration is not a JSON object", json_is_object(a) ? "the second" : "the first");
        differ = 1;
    } else {
        const char *key;
        json_t *v;
        json_object_foreach(b, key, v) {
            if (skip_key && strcmp(key, skip_key) == 0) continue;
            json_t *u = json_object_get(a, key);
            if (u && json_equal(u, v)) continue;
            char *us = u ? json_dumps(u, JSON_ENCODE_ANY) : NULL, *vs = json_dumps(v, JSON_ENCODE_ANY);
            snprintf(why, len, "field '%s' is %.120s there, %.120s here", key, us ? us : "missing", vs ? vs : "?");
            free(us);
            free(vs);
            differ = 1;
            break;
        }
    }
    json_decref(a);
    json_decref(b);
    return differ;
}

enum ats_status sim_sweep_resume_match(sim_sweep_grid *g, const atsc_results_file *prev, const char *prev_path,
                                       const char *config_json, long *n_taken, ats_err *err)
{
    const sim_sweep_spec *s = g->spec;
    if (n_taken) *n_taken = 0;
    if (!prev->producer || strcmp(prev->producer, "ats sweep") != 0)
        return ats_err_set(err, ATS_EINVAL, "%s: attribute '/producer': '%s' (not a results file of ats sweep)",
                           prev_path, prev->producer ? prev->producer : "");
    if (!prev->has_sweep)
        return ats_err_set(err, ATS_EINVAL, "%s: dataset '/sweep': missing (not a results file of ats sweep)",
                           prev_path);
    char why[400];
    if (sim_sweep_config_diff(prev->config_json, config_json, "policies", why, sizeof why))
        return ats_err_set(err, ATS_EINVAL, "%s: written with other arguments: configuration %s", prev_path, why);
    long taken = 0;
    for (size_t i = 0; i < prev->n_sweep; i++) {
        const atsc_sweep_row *r = &prev->sweep[i];
        if (!isfinite(r->tpot_mean_s)) continue; /* failed or no request completed: simulated again */
        int it = -1, ip = -1;
        for (int q = 0; q < s->n_traces && it < 0; q++)
            if (strcmp(s->trace_names[q], r->trace) == 0) it = q;
        for (int q = 0; q < s->n_policies && ip < 0; q++)
            if (strcmp(s->policies[q], r->policy) == 0) ip = q;
        if (it < 0 || ip < 0) continue;
        int ie = 0, ii = 0;
        if (s->dynamic[ip]) {
            if (r->interval_in_tpot != !s->interval_s) continue;
            ie = index_of(s->eps, s->n_eps, r->eps);
            ii = index_of(s->interval, s->n_interval, r->interval);
            if (ie < 0 || ii < 0) continue;
        } else if (r->eps != 0 || r->interval != 0) {
            continue;
        }
        long k = point_index(g, it, ip, ie, ii);
        if (g->have[k]) continue;
        g->rows[k] = *r;
        g->rows[k].eps = s->dynamic[ip] ? s->eps[ie] : 0.0; /* this grid's values, to the bit */
        g->rows[k].interval = s->dynamic[ip] ? s->interval[ii] : 0.0;
        g->status[k] = ATS_OK;
        g->done[k] = (sim_sweep_done){1, NAN, -1}; /* a TPOT: at least one request completed */
        g->have[k] = 1;
        taken++;
    }
    if (n_taken) *n_taken = taken;
    return ATS_OK;
}
