/*
 * exec/src/load_stress.c — the stressor behind `ats stress` (ex/load.h): duty-cycle arithmetic, hog
 * threads and hog processes, the trace follower, and the calibration that measures what the hogs do.
 *
 * Hog processes are forked before this process initializes CUDA (CUDA is not fork-safe); they share
 * one anonymous MAP_SHARED page with the parent holding the duties, a stop flag and a ready counter.
 * They ignore SIGINT (the parent, which gets it too, stops them through the flag) and die with the
 * parent (PR_SET_PDEATHSIG), so no hog outlives `ats stress`, whatever signal ends it.
 */
#include "ex/load.h"

#include "atsc/outfile.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef ATS_HAVE_CUDA
#include "load_probe.h"
#endif

/* ------------------------------------------------------------------ arithmetic ------------------ */

double ex_stress_avail(double duty, int k)
{
    ATS_ASSERT(k >= 1);
    if (!(duty > 0)) duty = 0;
    if (duty > 1) duty = 1;
    return 1.0 - duty * (double)k / (double)(k + 1);
}

double ex_stress_duty(double avail, int k)
{
    ATS_ASSERT(k >= 1);
    double d = (1.0 - avail) * (double)(k + 1) / (double)k;
    if (!(d > 0)) return 0.0; /* avail >= 1 (or NaN: no load) */
    return d > 1.0 ? 1.0 : d;
}

int ex_stress_hogs_needed(double a_min)
{
    if (!(a_min > 0)) a_min = 0.01;
    if (a_min >= 1.0) return 1;
    /* smallest k with 1/(k+1) <= a_min, i.e. k >= 1/a_min - 1 (tolerance for 1/a rounding up) */
    int k = (int)ceil(1.0 / a_min - 1.0 - 1e-9);
    return k < 1 ? 1 : k;
}

/* ------------------------------------------------------------------ calibration table ----------- */

double ex_stress_calib_invert(const ex_stress_calib *c, enum atsc_resource r, double target)
{
    int n = c ? c->n[r] : 0;
    if (n < 2) return target;
    const double *m = c->model[r], *a = c->measured[r];
    if (target >= a[0]) return m[0]; /* at or above the idle reading: no load */
    for (int i = 0; i + 1 < n; i++) {
        if (target <= a[i] && target >= a[i + 1]) {
            if (a[i] == a[i + 1]) return m[i];
            return m[i] + (m[i + 1] - m[i]) * (a[i] - target) / (a[i] - a[i + 1]);
        }
    }
    return m[n - 1]; /* below the lowest measured level: the most load we calibrated */
}

enum ats_status ex_stress_calib_save(const ex_stress_calib *c, const char *path, ats_err *err)
{
    atsc_out *out = NULL; /* temporary + fsync + rename (atsc/outfile.h) */
    enum ats_status st = atsc_out_open(path, &out, err);
    if (st) return st;
    FILE *f = fopen(atsc_out_tmp(out), "w");
    int bad = !f;
    if (f) {
        fprintf(f, "# ats stress calibration: resource hogs model_avail measured_avail\n");
        for (int r = 0; r < ATSC_RES_COUNT; r++)
            for (int i = 0; i < c->n[r]; i++)
                fprintf(f, "%s %d %.6f %.6f\n", atsc_resource_name((enum atsc_resource)r), c->k[r], c->model[r][i],
                        c->measured[r][i]);
        bad |= fclose(f) != 0;
    }
    if (bad) {
        st = ats_err_set(err, ATS_EINVAL, "%s: cannot write calibration: %s", path, strerror(errno));
        atsc_out_abort(out);
        return st;
    }
    return atsc_out_commit(out, err);
}

enum ats_status ex_stress_calib_load(const char *path, ex_stress_calib *c, ats_err *err)
{
    memset(c, 0, sizeof *c);
    atsc_in_note(path); /* never to be replaced by an output of this run */
    FILE *f = fopen(path, "r");
    if (!f) return ats_err_set(err, ATS_ENOTFOUND, "%s: cannot open calibration: %s", path, strerror(errno));
    char line[256];
    int lineno = 0;
    enum ats_status st = ATS_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        char res[16];
        int k;
        double m, a;
        if (sscanf(line, "%15s %d %lf %lf", res, &k, &m, &a) != 4) {
            st = ats_err_set(err, ATS_EINVAL, "%s: line %d: need 'resource hogs model measured'", path, lineno);
            break;
        }
        int r = -1;
        for (int q = 0; q < ATSC_RES_COUNT; q++)
            if (strcmp(res, atsc_resource_name((enum atsc_resource)q)) == 0) r = q;
        int i = r >= 0 ? c->n[r] : 0;
        if (r < 0 || k < 1 || i >= EX_CALIB_MAX || !(m > 0 && m <= 1) || !(a > 0 && a <= 1) ||
            (i > 0 && (!(m < c->model[r][i - 1]) || k != c->k[r]))) {
            st = ats_err_set(err, ATS_EINVAL,
                             "%s: line %d: bad entry (resource cpu|gpu|pcie, hogs >= 1 and constant, model "
                             "decreasing in (0,1], measured in (0,1], at most %d levels)",
                             path, lineno, EX_CALIB_MAX);
            break;
        }
        c->k[r] = k;
        c->model[r][i] = m;
        c->measured[r][i] = (i > 0 && a > c->measured[r][i - 1]) ? c->measured[r][i - 1] : a;
        c->n[r] = i + 1;
    }
    fclose(f);
    return st;
}

/* ------------------------------------------------------------------ hogs ------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_until(double t_abs)
{
    struct timespec ts;
    ts.tv_sec = (time_t)t_abs;
    ts.tv_nsec = (long)((t_abs - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

typedef struct hog_shared {
    _Atomic double duty[ATSC_RES_COUNT];
    atomic_int stop;
    atomic_int ready;  /* hog processes initialized */
    atomic_int failed; /* hog processes that could not start */
    double period_s;
    double epoch_s;    /* CLOCK_MONOTONIC origin of the periods (system-wide clock) */
} hog_shared;

#define MAX_PROCS 64

struct ex_hogs {
    hog_shared *sh;
    pthread_t *cpu;
    int ncpu;
    pid_t pid[MAX_PROCS];
    int npid;
};

void ex_stress_window(double epoch_s, double period_s, double duty, double now_s, double *busy_start_s,
                      double *busy_end_s, double *period_end_s)
{
    if (!(duty > 0)) duty = 0;
    if (duty > 1) duty = 1;
    double k = floor((now_s - epoch_s) / period_s);
    double start = epoch_s + k * period_s;
    /* splitmix64 of the period index: the same pseudo-random phase in every hog of every process */
    uint64_t z = (uint64_t)(int64_t)k * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u = (double)(z >> 11) * 0x1.0p-53;
    *busy_start_s = start + (1.0 - duty) * period_s * u;
    *busy_end_s = *busy_start_s + duty * period_s;
    *period_end_s = start + period_s;
}

/* Busy window of the current period for resource r: sleeps until it starts; returns its end and the
 * period's end. */
static void window(const hog_shared *sh, enum atsc_resource r, double *busy_end, double *period_end)
{
    double bs, now = now_s();
    ex_stress_window(sh->epoch_s, sh->period_s, atomic_load(&sh->duty[r]), now, &bs, busy_end, period_end);
    if (*busy_end > bs && now < bs) sleep_until(bs);
}

static void *cpu_hog(void *arg)
{
    hog_shared *sh = arg;
    volatile double sink = 0;
    double a = 1.0, b = 1.0000001;
    while (!atomic_load(&sh->stop)) {
        double be, pe;
        window(sh, ATSC_RES_CPU, &be, &pe);
        double now = now_s();
        while (now < be && !atomic_load(&sh->stop)) {
            for (int i = 0; i < 512; i++) a = a * b + 1e-9; /* pure core work */
            now = now_s();
        }
        sink = a;
        if (a > 1e300) a = 1.0;
        sleep_until(pe);
    }
    (void)sink;
    return NULL;
}

#ifdef ATS_HAVE_CUDA
/* Body of a GPU (r = GPU) or PCIe (r = PCIE) hog process. Never returns. */
static void hog_process(hog_shared *sh, enum atsc_resource r, int device)
{
    char msg[256];
    ex_lp *lp = NULL;
    const size_t copy = 16u << 20; /* 16 MiB per copy: ~0.3 ms at 55 GB/s, queued 4 at a time */
    if (ex_lp_new(device, r == ATSC_RES_PCIE ? copy : 0, 1, &lp, msg, sizeof msg) != 0) {
        fprintf(stderr, "ats stress: %s hog: %s\n", atsc_resource_name(r), msg);
        atomic_fetch_add(&sh->failed, 1);
        _exit(3);
    }
    long iters = 2000; /* busy-kernel chunk: grow to about 0.25 ms */
    if (r == ATSC_RES_GPU)
        for (int k = 0; k < 12; k++) {
            double a = now_s();
            if (ex_lp_busy(lp, iters, 1, msg, sizeof msg) != 0) break;
            if (now_s() - a > 2.5e-4) break;
            iters *= 2;
        }
    atomic_fetch_add(&sh->ready, 1);
    int rc = 0;
    while (!atomic_load(&sh->stop)) {
        double be, pe;
        window(sh, r, &be, &pe);
        double now = now_s();
        while (now < be && !atomic_load(&sh->stop)) {
            /* 4 back to back per wait (about 1 ms of work): the 50 us polling gap is a few % */
            int e = r == ATSC_RES_GPU ? ex_lp_busy(lp, iters, 4, msg, sizeof msg)
                                      : ex_lp_copy_h2d(lp, copy, 4, msg, sizeof msg);
            if (e != 0) {
                fprintf(stderr, "ats stress: %s hog: %s\n", atsc_resource_name(r), msg);
                rc = 3;
                goto out;
            }
            now = now_s();
        }
        sleep_until(pe);
    }
out:
    ex_lp_free(lp);
    _exit(rc);
}
#endif

ex_stress_opts ex_stress_opts_default(void)
{
    ex_stress_opts o = {.threads = 0, .k = {0, 0, 0}, .period_s = 0.02, .duration_s = 0, .delay_s = 0,
                        .calib = NULL, .stop = NULL, .device = 0, .verbose = 0};
    return o;
}

int ex_gpu_present(int device)
{
#ifdef ATS_HAVE_CUDA
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) _exit(ex_lp_device_count() > device ? 0 : 1);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
#else
    (void)device;
    return 0;
#endif
}

static void reap(ex_hogs *h)
{
    double deadline = now_s() + 10.0;
    for (int i = 0; i < h->npid; i++) {
        int status;
        for (;;) {
            pid_t w = waitpid(h->pid[i], &status, WNOHANG);
            if (w == h->pid[i] || (w < 0 && errno != EINTR)) break;
            if (now_s() > deadline) {
                kill(h->pid[i], SIGKILL);
                waitpid(h->pid[i], &status, 0);
                break;
            }
            usleep(10000);
        }
    }
    h->npid = 0;
}

void ex_hogs_stop(ex_hogs *h)
{
    if (!h) return;
    atomic_store(&h->sh->stop, 1);
    for (int i = 0; i < h->ncpu; i++) pthread_join(h->cpu[i], NULL);
    reap(h);
    free(h->cpu);
    munmap(h->sh, sizeof *h->sh);
    free(h);
}

void ex_hogs_set(ex_hogs *h, enum atsc_resource r, double duty)
{
    if (!(duty > 0)) duty = 0;
    if (duty > 1) duty = 1;
    atomic_store(&h->sh->duty[r], duty);
}

int ex_hogs_alive(ex_hogs *h)
{
    for (int i = 0; i < h->npid; i++) {
        int status;
        if (waitpid(h->pid[i], &status, WNOHANG) == h->pid[i]) {
            h->pid[i] = h->pid[--h->npid]; /* already reaped */
            return 0;
        }
    }
    return 1;
}

enum ats_status ex_hogs_start(const ex_stress_opts *o, const int k[ATSC_RES_COUNT], ex_hogs **out, ats_err *err)
{
    *out = NULL;
    if (!(o->period_s >= 1e-3 && o->period_s <= 10))
        return ats_err_set(err, ATS_EINVAL, "period %g s must be in [0.001, 10]", o->period_s);
    int threads = o->threads > 0 ? o->threads : online_cpus();
    if (k[ATSC_RES_CPU] < 0 || k[ATSC_RES_CPU] * threads > 4096 || k[ATSC_RES_GPU] < 0 || k[ATSC_RES_PCIE] < 0 ||
        k[ATSC_RES_GPU] + k[ATSC_RES_PCIE] > MAX_PROCS)
        return ats_err_set(err, ATS_EINVAL, "bad hog counts cpu %d x %d threads, gpu %d, pcie %d",
                           k[ATSC_RES_CPU], threads, k[ATSC_RES_GPU], k[ATSC_RES_PCIE]);
#ifndef ATS_HAVE_CUDA
    if (k[ATSC_RES_GPU] > 0 || k[ATSC_RES_PCIE] > 0)
        return ats_err_set(err, ATS_ENOTFOUND, "GPU/PCIe hogs need CUDA, and this build has none");
#endif
    ex_hogs *h = calloc(1, sizeof *h);
    if (!h) return ats_err_set(err, ATS_ENOMEM, "out of memory");
    h->sh = mmap(NULL, sizeof *h->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (h->sh == MAP_FAILED) {
        free(h);
        return ats_err_set(err, ATS_ENOMEM, "mmap of the shared page failed: %s", strerror(errno));
    }
    memset(h->sh, 0, sizeof *h->sh);
    h->sh->period_s = o->period_s;
    h->sh->epoch_s = now_s();
    enum ats_status st = ATS_OK;
#ifdef ATS_HAVE_CUDA
    pid_t parent = getpid();
    fflush(NULL);
    for (int r = ATSC_RES_GPU; r <= ATSC_RES_PCIE; r++)
        for (int i = 0; i < k[r]; i++) {
            pid_t pid = fork();
            if (pid < 0) {
                st = ats_err_set(err, ATS_ENOMEM, "fork failed: %s", strerror(errno));
                goto fail;
            }
            if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent) _exit(4); /* parent already gone */
                signal(SIGINT, SIG_IGN);
                signal(SIGTERM, SIG_DFL);
                hog_process(h->sh, (enum atsc_resource)r, o->device);
            }
            h->pid[h->npid++] = pid;
        }
    /* wait until every hog process has its CUDA context (so t = 0 means load) */
    double deadline = now_s() + 60.0;
    while (atomic_load(&h->sh->ready) + atomic_load(&h->sh->failed) < h->npid) {
        if ((o->stop && *o->stop) || now_s() > deadline || !ex_hogs_alive(h)) break;
        usleep(10000);
    }
    if (atomic_load(&h->sh->ready) < h->npid) {
        st = ats_err_set(err, ATS_EINVAL, "%d of %d GPU/PCIe hog processes failed to start",
                         h->npid - atomic_load(&h->sh->ready), h->npid);
        goto fail;
    }
#endif
    h->cpu = calloc((size_t)(k[ATSC_RES_CPU] * threads + 1), sizeof(pthread_t));
    if (!h->cpu) {
        st = ats_err_set(err, ATS_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < k[ATSC_RES_CPU] * threads; i++) {
        if (pthread_create(&h->cpu[i], NULL, cpu_hog, h->sh) != 0) {
            st = ats_err_set(err, ATS_ENOMEM, "cannot start CPU hog thread %d", i);
            goto fail;
        }
        h->ncpu = i + 1;
    }
    *out = h;
    return ATS_OK;
fail:
    ex_hogs_stop(h);
    return st;
}

/* ------------------------------------------------------------------ trace follower -------------- */

/* Lowest availability of resource r over [0, dur] (the sample in force at dur included). */
static double min_over(const atsc_trace *tr, enum atsc_resource r, double dur)
{
    const double *a = atsc_trace_res((atsc_trace *)tr, r);
    double m = 1.0;
    for (size_t i = 0; i < tr->n && tr->t_s[i] <= dur; i++)
        if (a[i] < m) m = a[i];
    return m;
}

enum ats_status ex_stress_run(const atsc_trace *target, const ex_stress_opts *o, ats_err *err)
{
    double dur = o->duration_s > 0 ? o->duration_s : atsc_trace_duration(target);
    if (!(dur > 0))
        return ats_err_set(err, ATS_EINVAL, "the trace covers 0 s (one sample): give a duration");
    int k[ATSC_RES_COUNT];
    double amin[ATSC_RES_COUNT];
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        amin[r] = min_over(target, (enum atsc_resource)r, dur);
        double m = o->calib ? ex_stress_calib_invert(o->calib, (enum atsc_resource)r, amin[r]) : amin[r];
        k[r] = amin[r] >= 1.0 ? 0
               : (o->calib && o->calib->n[r] >= 2) ? o->calib->k[r]
               : o->k[r] > 0                      ? o->k[r]
                                                  : ex_stress_hogs_needed(m);
    }
    if ((k[ATSC_RES_GPU] > 0 || k[ATSC_RES_PCIE] > 0) && !ex_gpu_present(o->device))
        return ats_err_set(err, ATS_ENOTFOUND,
                           "the trace asks for GPU/PCIe load (lowest gpu_avail %.3g, pcie_avail %.3g) "
                           "but there is no CUDA device %d",
                           amin[ATSC_RES_GPU], amin[ATSC_RES_PCIE], o->device);
    if (o->delay_s > 0) {
        double until = now_s() + o->delay_s;
        while (now_s() < until && !(o->stop && *o->stop)) usleep(10000);
    }
    if (o->stop && *o->stop) return ATS_OK;
    ex_hogs *h = NULL;
    enum ats_status st = ex_hogs_start(o, k, &h, err);
    if (st != ATS_OK) return st;
    if (o->verbose)
        fprintf(stderr, "stress: hogs cpu %d/thread, gpu %d, pcie %d; period %g s; %g s\n", k[0], k[1], k[2],
                o->period_s, dur);
    double t0 = now_s(), last[ATSC_RES_COUNT] = {-1, -1, -1};
    for (;;) {
        if (o->stop && *o->stop) break;
        double t = now_s() - t0;
        if (t >= dur) break;
        if (!ex_hogs_alive(h)) {
            st = ats_err_set(err, ATS_EINVAL, "a GPU/PCIe hog process died at t = %.1f s", t);
            break;
        }
        atsc_avail a;
        atsc_trace_at(target, t, &a);
        double av[ATSC_RES_COUNT] = {a.cpu, a.gpu, a.pcie};
        for (int r = 0; r < ATSC_RES_COUNT; r++) {
            if (k[r] == 0) continue;
            double m = o->calib ? ex_stress_calib_invert(o->calib, (enum atsc_resource)r, av[r]) : av[r];
            double d = ex_stress_duty(m, k[r]);
            ex_hogs_set(h, (enum atsc_resource)r, d);
            if (o->verbose && av[r] != last[r])
                fprintf(stderr, "stress: t = %7.2f s: %s target %.3f -> model %.3f, duty %.3f\n", t,
                        atsc_resource_name((enum atsc_resource)r), av[r], m, d);
            last[r] = av[r];
        }
        usleep(10000);
    }
    ex_hogs_stop(h);
    return st;
}

/* ------------------------------------------------------------------ calibration ----------------- */

static void wait_s(double s, const volatile sig_atomic_t *stop)
{
    double until = now_s() + s;
    while (now_s() < until && !(stop && *stop)) usleep(5000);
}

enum ats_status ex_stress_calibrate(const ex_stress_opts *o, const ex_probe_opts *popts, double settle_s,
                                    double measure_s, ex_stress_calib *out, ats_err *err)
{
    static const double levels[] = {1.0, 0.85, 0.7, 0.55, 0.45, 0.4, 0.35, 0.3, 0.25};
    const int nlev = (int)(sizeof levels / sizeof levels[0]);
    memset(out, 0, sizeof *out);
    if ((o->k[ATSC_RES_GPU] > 0 || o->k[ATSC_RES_PCIE] > 0) && !ex_gpu_present(o->device))
        return ats_err_set(err, ATS_ENOTFOUND, "calibrate: GPU/PCIe hogs asked for but there is no CUDA device %d",
                           o->device);
    ex_hogs *h = NULL;
    enum ats_status st = ex_hogs_start(o, o->k, &h, err);
    if (st != ATS_OK) return st;
    ex_probe *p = NULL;
    const double interval = 0.1;
    size_t ns = (size_t)ceil(measure_s / interval);
    if (ns < 3) ns = 3;
    double *v = malloc(ns * sizeof(double));
    if (!v) {
        st = ats_err_set(err, ATS_ENOMEM, "calibrate: out of memory");
        goto done;
    }
    if ((st = ex_probe_new(popts, &p, err)) != ATS_OK) goto done;
    ex_baseline base;
    if ((st = ex_probe_baseline(p, measure_s, interval, o->stop, &base, err)) != ATS_OK) goto done;
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        if (o->k[r] <= 0) continue;
        if (r != ATSC_RES_CPU && !ex_probe_has_gpu(p)) continue;
        out->k[r] = o->k[r];
        for (int li = 0; li < nlev && levels[li] >= 1.0 / (o->k[r] + 1) - 1e-9; li++) {
            ex_hogs_set(h, (enum atsc_resource)r, ex_stress_duty(levels[li], o->k[r]));
            wait_s(settle_s, o->stop);
            double t0 = now_s();
            for (size_t i = 0; i < ns; i++) {
                double t[ATSC_RES_COUNT];
                if ((st = ex_probe_measure(p, t, err)) != ATS_OK) goto done;
                v[i] = ex_avail_from_times(base.t_s[r], t[r]);
                sleep_until(t0 + (double)(i + 1) * interval);
            }
            if (o->stop && *o->stop) {
                st = ats_err_set(err, ATS_EINVAL, "calibrate: interrupted");
                goto done;
            }
            /* the mean, not the median: with duty d < 1/2 most samples miss the busy window, and a trace
             * (and `ats trace compare`) averages over time */
            double med = 0;
            for (size_t i = 0; i < ns; i++) med += v[i] / (double)ns;
            int i = out->n[r];
            out->model[r][i] = levels[li];
            out->measured[r][i] = (i > 0 && med > out->measured[r][i - 1]) ? out->measured[r][i - 1] : med;
            out->n[r] = i + 1;
            if (o->verbose)
                fprintf(stderr, "calibrate: %s k=%d model %.3f (duty %.3f) -> measured %.3f\n",
                        atsc_resource_name((enum atsc_resource)r), o->k[r], levels[li],
                        ex_stress_duty(levels[li], o->k[r]), med);
        }
        ex_hogs_set(h, (enum atsc_resource)r, 0.0);
    }
done:
    ex_probe_free(p);
    free(v);
    ex_hogs_stop(h);
    return st;
}
