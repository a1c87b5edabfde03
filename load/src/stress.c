/*
 * load/src/stress.c — the stressor behind `ats stress` (ld/load.h): duty-cycle arithmetic, hog
 * threads and hog processes, the trace follower, and the calibration that measures what the hogs do.
 *
 * Hog processes are forked before this process initializes CUDA (CUDA is not fork-safe); they share
 * one anonymous MAP_SHARED page with the parent holding the duties, a stop flag and a ready counter.
 * They ignore SIGINT (the parent, which gets it too, stops them through the flag) and die with the
 * parent (PR_SET_PDEATHSIG), so no hog outlives `ats stress`, whatever signal ends it.
 */
#include "ld/load.h"

#include "atsc/outfile.h"

#include <errno.h>
#include <gsl/gsl_statistics_double.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_probe.h"

/* ------------------------------------------------------------------ arithmetic ------------------ */

double ld_stress_avail(double duty, int k)
{
    ATS_ASSERT(k >= 1);
    if (!(duty > 0)) duty = 0;
    if (duty > 1) duty = 1;
    return 1.0 - duty * (double)k / (double)(k + 1);
}

double ld_stress_duty(double avail, int k)
{
    ATS_ASSERT(k >= 1);
    double d = (1.0 - avail) * (double)(k + 1) / (double)k;
    if (!(d > 0)) return 0.0; /* avail >= 1 (or NaN: no load) */
    return d > 1.0 ? 1.0 : d;
}

double ld_stress_avail_st(double duty, int k, int staggered)
{
    ATS_ASSERT(k >= 1);
    if (!staggered) return ld_stress_avail(duty, k);
    if (!(duty > 0)) duty = 0;
    if (duty > 1) duty = 1;
    return 1.0 / (1.0 + duty * (double)k);
}

double ld_stress_duty_st(double avail, int k, int staggered)
{
    ATS_ASSERT(k >= 1);
    if (!staggered) return ld_stress_duty(avail, k);
    if (!(avail < 1.0)) return 0.0; /* avail >= 1 (or NaN: no load) */
    double d = avail > 0 ? (1.0 / avail - 1.0) / (double)k : 1.0;
    return d > 1.0 ? 1.0 : d;
}

int ld_stress_hogs_needed(double a_min)
{
    if (!(a_min > 0)) a_min = 0.01;
    if (a_min >= 1.0) return 1;
    /* smallest k with 1/(k+1) <= a_min, i.e. k >= 1/a_min - 1 (tolerance for 1/a rounding up) */
    int k = (int)ceil(1.0 / a_min - 1.0 - 1e-9);
    return k < 1 ? 1 : k;
}

/* ------------------------------------------------------------------ calibration table ----------- */

double ld_stress_calib_invert(const ld_stress_calib *c, enum atsc_resource r, double target)
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

static int write_calib(FILE *f, const void *ctx)
{
    const ld_stress_calib *c = ctx;
    int bad = fprintf(f, "# ats stress calibration: resource hogs model_avail measured_avail\n") < 0;
    for (int r = 0; r < ATSC_RES_COUNT; r++)
        for (int i = 0; i < c->n[r]; i++)
            bad |= fprintf(f, "%s %d %.6f %.6f\n", atsc_resource_name((enum atsc_resource)r), c->k[r], c->model[r][i],
                           c->measured[r][i]) < 0;
    return bad ? -1 : 0;
}

enum ats_status ld_stress_calib_save(const ld_stress_calib *c, const char *path, ats_err *err)
{
    return ld_text_save(path, "calibration", write_calib, c, err);
}

enum ats_status ld_stress_calib_load(const char *path, ld_stress_calib *c, ats_err *err)
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
        if (r < 0 || k < 1 || i >= LD_CALIB_MAX || !(m > 0 && m <= 1) || !(a > 0 && a <= 1) ||
            (i > 0 && (!(m < c->model[r][i - 1]) || k != c->k[r]))) {
            st = ats_err_set(err, ATS_EINVAL,
                             "%s: line %d: bad entry (resource cpu|gpu|pcie, hogs >= 1 and constant, model "
                             "decreasing in (0,1], measured in (0,1], at most %d levels)",
                             path, lineno, LD_CALIB_MAX);
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


typedef struct hog_shared {
    _Atomic double duty[ATSC_RES_COUNT];
    atomic_int gen[ATSC_RES_COUNT]; /* futex word per resource: bumped on every duty change and on stop */
    atomic_int stop;
    atomic_int ready;  /* hog processes initialized */
    atomic_int failed; /* hog processes that could not start */
    double period_s;
    double epoch_s;    /* CLOCK_MONOTONIC origin of the periods (system-wide clock) */
    long cpu_slice_ns; /* ld_sched_slice of the CPU hogs */
} hog_shared;

#define MAX_PROCS 64

typedef struct cpu_hog_arg {
    hog_shared *sh;
    double shift; /* ld_stress_window's shift of this hog */
    int pin;      /* >= 0: ld_pin_self(pin) first; -1: unpinned */
} cpu_hog_arg;

struct ld_hogs {
    hog_shared *sh;
    pthread_t *cpu;
    cpu_hog_arg *cpu_arg;
    int ncpu;
    pid_t pid[MAX_PROCS];
    int npid;
};

void ld_stress_window(double epoch_s, double period_s, double duty, double shift, double now_s, double *busy_start_s,
                      double *busy_end_s, double *period_end_s)
{
    if (!(duty > 0)) duty = 0;
    if (duty > 1) duty = 1;
    double k = floor((now_s - epoch_s) / period_s);
    double start = epoch_s + k * period_s, end = start + period_s;
    /* splitmix64 of the period index: the same pseudo-random phase in every hog of every process */
    uint64_t z = (uint64_t)(int64_t)k * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u = (double)(z >> 11) * 0x1.0p-53 + shift; /* a hog's own shift of the common phase */
    u -= floor(u);
    /* circular window: busy for duty·P from start + u·P, wrapping around to the period's start, so a
     * victim at ANY fixed phase of the period is inside it with probability duty (a window kept
     * inside [start + u(1-d)P, …) is never over the period's first and last moments when d is large:
     * the recorder's 0.1 s grid, locked to the 20 ms periods, read CPU +26% and PCIe -23% off) */
    double o = start + u * period_s, w = duty * period_s, wrap_end = o + w - period_s;
    if (duty >= 1) {
        *busy_start_s = start;
        *busy_end_s = *period_end_s = end;
    } else if (!(duty > 0)) {
        *busy_start_s = *busy_end_s = *period_end_s = end;
    } else if (wrap_end > start && now_s < wrap_end) { /* the wrapped part at the period's start */
        *busy_start_s = start;
        *busy_end_s = wrap_end;
        *period_end_s = o; /* ask again there for the main part */
    } else if (now_s < o + w) { /* the main part, from o to o + w or the period's end */
        *busy_start_s = o;
        *busy_end_s = o + w < end ? o + w : end;
        *period_end_s = end;
    } else { /* after this period's busy parts */
        *busy_start_s = *busy_end_s = *period_end_s = end;
    }
}

/* Futex on a word of the MAP_SHARED page (shared, not FUTEX_PRIVATE: hog processes wait on it too). */
static void futex_wait(atomic_int *w, int val, double timeout_s)
{
    struct timespec ts = {(time_t)timeout_s, (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
    syscall(SYS_futex, (int *)w, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake_all(atomic_int *w) { syscall(SYS_futex, (int *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); }

/* Busy window of the current period for resource r: sleeps until it starts; returns its end and the
 * period's end. While the duty is 0 the hog sleeps on the resource's futex word (no periodic wake-ups:
 * a resource whose target is 1 has hogs that do nothing at all) and returns with an empty window once
 * woken by a duty change or the stop flag. */
static void window(hog_shared *sh, enum atsc_resource r, double shift, double *busy_end, double *period_end)
{
    int g = atomic_load(&sh->gen[r]);
    if (!(atomic_load(&sh->duty[r]) > 0)) {
        if (!atomic_load(&sh->stop)) futex_wait(&sh->gen[r], g, 1.0);
        *busy_end = *period_end = 0; /* callers: nothing to do, sleep_until(0) returns at once */
        return;
    }
    double bs, now = now_s();
    ld_stress_window(sh->epoch_s, sh->period_s, atomic_load(&sh->duty[r]), shift, now, &bs, busy_end, period_end);
    if (*busy_end > bs && now < bs) sleep_until(bs);
}

static void *cpu_hog(void *arg_)
{
    const cpu_hog_arg *arg = arg_;
    hog_shared *sh = arg->sh;
    volatile double sink = 0;
    double a = 1.0, b = 1.0000001;
    ld_sched_slice(sh->cpu_slice_ns);
    if (arg->pin >= 0) ld_pin_self(arg->pin); /* best effort, as the probe threads */
    while (!atomic_load(&sh->stop)) {
        double be, pe;
        window(sh, ATSC_RES_CPU, arg->shift, &be, &pe);
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

/* Body of a GPU (r = GPU) or PCIe (r = PCIE) hog process. Never returns. */
static void hog_process(hog_shared *sh, enum atsc_resource r, int device, double shift)
{
    char msg[256];
    ld_gpu_probe *lp = NULL;
    /* Long pieces of work: a victim's kernel or copy that arrives while a hog's is running waits for it
     * (or for the GPU's time slice), so short hog kernels (0.25 ms, the first version) only cost a
     * victim a fraction of a millisecond: on the H200 host the GPU probe read a steady 0.90 next to
     * hogs busy 70 % of the time. About 1 ms kernels and 64 MiB copies (~1.2 ms at 55 GB/s), 2 per wait. */
    const size_t copy = 64u << 20;
    if (ld_gpu_probe_new(device, r == ATSC_RES_PCIE ? copy : 0, 1, &lp, msg, sizeof msg) != 0) {
        fprintf(stderr, "ats stress: %s hog: %s\n", atsc_resource_name(r), msg);
        atomic_fetch_add(&sh->failed, 1);
        _exit(3);
    }
    long iters = 2000; /* busy-kernel chunk: grow to about 1 ms */
    if (r == ATSC_RES_GPU)
        for (int k = 0; k < 14; k++) {
            double a = now_s();
            if (ld_gpu_probe_busy(lp, iters, 1, msg, sizeof msg) != 0) break;
            if (now_s() - a > 1e-3) break;
            iters *= 2;
        }
    atomic_fetch_add(&sh->ready, 1);
    int rc = 0;
    while (!atomic_load(&sh->stop)) {
        double be, pe;
        window(sh, r, shift, &be, &pe);
        double now = now_s();
        while (now < be && !atomic_load(&sh->stop)) {
            /* 2 back to back per wait (about 2 ms of work): the blocking-sync wake-up gap is a few % */
            int e = r == ATSC_RES_GPU ? ld_gpu_probe_busy(lp, iters, 2, msg, sizeof msg)
                                      : ld_gpu_probe_copy_h2d(lp, copy, 2, msg, sizeof msg);
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
    ld_gpu_probe_free(lp);
    _exit(rc);
}

ld_stress_opts ld_stress_opts_default(void)
{
    ld_stress_opts o = {.threads = 0, .k = {0, 0, 0}, .period_s = 0.02, .duration_s = 0, .delay_s = 0,
                        .calib = NULL, .stop = NULL, .device = 0, .verbose = 0, .interval_s = 0.5, .probes = 5,
                        .ki_per_s = 0.8, .settle_s = 5.0, .rebaseline_s = 0, .lock_path = "/tmp/ats-probes.lock", .probe = NULL,
                        .on_step = NULL, .step_ctx = NULL, .hog_slice_ns = LD_SLICE_NS_DEFAULT,
                        .stagger = LD_STRESS_STAGGER_DEFAULT};
    return o;
}

int ld_gpu_present(int device)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) _exit(ld_gpu_probe_device_count() > device ? 0 : 1);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void reap(ld_hogs *h)
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

void ld_hogs_stop(ld_hogs *h)
{
    if (!h) return;
    atomic_store(&h->sh->stop, 1);
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        atomic_fetch_add(&h->sh->gen[r], 1);
        futex_wake_all(&h->sh->gen[r]);
    }
    for (int i = 0; i < h->ncpu; i++) pthread_join(h->cpu[i], NULL);
    reap(h);
    free(h->cpu);
    free(h->cpu_arg);
    munmap(h->sh, sizeof *h->sh);
    free(h);
}

void ld_hogs_set(ld_hogs *h, enum atsc_resource r, double duty)
{
    if (!(duty > 0)) duty = 0;
    if (duty > 1) duty = 1;
    double old = atomic_exchange(&h->sh->duty[r], duty);
    if (old != duty) {
        atomic_fetch_add(&h->sh->gen[r], 1);
        if (!(old > 0)) futex_wake_all(&h->sh->gen[r]); /* hogs asleep at duty 0 */
    }
}

int ld_hogs_alive(ld_hogs *h)
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

enum ats_status ld_hogs_start(const ld_stress_opts *o, const int k[ATSC_RES_COUNT], ld_hogs **out, ats_err *err)
{
    *out = NULL;
    if (!(o->period_s >= 1e-3 && o->period_s <= 10))
        return ats_err_set(err, ATS_EINVAL, "period %g s must be in [0.001, 10]", o->period_s);
    if (o->hog_slice_ns != 0 && !(o->hog_slice_ns >= 100000 && o->hog_slice_ns <= 100000000))
        return ats_err_set(err, ATS_EINVAL, "hog slice %ld ns must be 0 (kernel default) or in [1e5, 1e8]",
                           o->hog_slice_ns);
    int threads = o->threads > 0 ? o->threads : ld_usable_cpus();
    if (k[ATSC_RES_CPU] < 0 || k[ATSC_RES_CPU] * threads > 4096 || k[ATSC_RES_GPU] < 0 || k[ATSC_RES_PCIE] < 0 ||
        k[ATSC_RES_GPU] + k[ATSC_RES_PCIE] > MAX_PROCS)
        return ats_err_set(err, ATS_EINVAL, "bad hog counts cpu %d x %d threads, gpu %d, pcie %d",
                           k[ATSC_RES_CPU], threads, k[ATSC_RES_GPU], k[ATSC_RES_PCIE]);
    if (!ld_gpu_probe_built() && (k[ATSC_RES_GPU] > 0 || k[ATSC_RES_PCIE] > 0))
        return ats_err_set(err, ATS_ENOTFOUND, "GPU/PCIe hogs need CUDA, and this build has none");
    ld_hogs *h = calloc(1, sizeof *h);
    if (!h) return ats_err_set(err, ATS_ENOMEM, "out of memory");
    h->sh = mmap(NULL, sizeof *h->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (h->sh == MAP_FAILED) {
        free(h);
        return ats_err_set(err, ATS_ENOMEM, "mmap of the shared page failed: %s", strerror(errno));
    }
    memset(h->sh, 0, sizeof *h->sh);
    h->sh->period_s = o->period_s;
    h->sh->cpu_slice_ns = o->hog_slice_ns;
    h->sh->epoch_s = now_s();
    enum ats_status st = ATS_OK;
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
                /* staggered hogs (hog i's window shifted by i/k of the period): floor(d*k) or ceil(d*k)
                 * of them busy at any moment instead of all k or none (ld_stress_opts.stagger) */
                double shift = o->stagger & (1u << r) ? (double)i / (double)k[r] : 0.0;
                hog_process(h->sh, (enum atsc_resource)r, o->device, shift);
            }
            h->pid[h->npid++] = pid;
        }
    /* wait until every hog process has its CUDA context (so t = 0 means load) */
    double deadline = now_s() + 60.0;
    while (atomic_load(&h->sh->ready) + atomic_load(&h->sh->failed) < h->npid) {
        if ((o->stop && *o->stop) || now_s() > deadline || !ld_hogs_alive(h)) break;
        usleep(10000);
    }
    if (atomic_load(&h->sh->ready) < h->npid) {
        st = ats_err_set(err, ATS_EINVAL, "%d of %d GPU/PCIe hog processes failed to start",
                         h->npid - atomic_load(&h->sh->ready), h->npid);
        goto fail;
    }
    const int ncpu = k[ATSC_RES_CPU] * threads;
    h->cpu = calloc((size_t)(ncpu + 1), sizeof(pthread_t));
    h->cpu_arg = calloc((size_t)(ncpu + 1), sizeof(cpu_hog_arg));
    if (!h->cpu || !h->cpu_arg) {
        st = ats_err_set(err, ATS_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < ncpu; i++) {
        h->cpu_arg[i].sh = h->sh;
        h->cpu_arg[i].shift = o->stagger & (1u << ATSC_RES_CPU) ? (double)i / (double)ncpu : 0.0;
        h->cpu_arg[i].pin = o->pin_hogs ? i : -1;
        if (pthread_create(&h->cpu[i], NULL, cpu_hog, &h->cpu_arg[i]) != 0) {
            st = ats_err_set(err, ATS_ENOMEM, "cannot start CPU hog thread %d", i);
            goto fail;
        }
        h->ncpu = i + 1;
    }
    *out = h;
    return ATS_OK;
fail:
    ld_hogs_stop(h);
    return st;
}

/* "hogs staggered: cpu,gpu; CPU hog slice 0.1 ms" for the verbose lines (resources with hogs only). */
static void hog_settings(const ld_stress_opts *o, const int k[ATSC_RES_COUNT], char *buf, size_t len)
{
    char st[32] = "";
    for (int r = 0; r < ATSC_RES_COUNT; r++)
        if (k[r] > 0 && (o->stagger & (1u << r)))
            snprintf(st + strlen(st), sizeof st - strlen(st), "%s%s", st[0] ? "," : "", atsc_resource_name((enum atsc_resource)r));
    char sl[40] = "the kernel's default";
    if (o->hog_slice_ns > 0) snprintf(sl, sizeof sl, "%.3g ms", 1e-6 * (double)o->hog_slice_ns);
    snprintf(buf, len, "hogs staggered: %s; CPU hog slice %s%s%s", st[0] ? st : "none", sl,
             o->pin ? "; probe threads pinned" : "", o->pin_hogs ? "; CPU hogs pinned" : "");
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

unsigned ld_stress_plan_hogs(const atsc_trace *target, const ld_stress_opts *o, int closed,
                             int k[ATSC_RES_COUNT], double amin_out[ATSC_RES_COUNT])
{
    double dur = o->duration_s > 0 ? o->duration_s : atsc_trace_duration(target);
    unsigned short_of = 0;
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        double amin = min_over(target, (enum atsc_resource)r, dur);
        if (amin_out) amin_out[r] = amin;
        if (amin >= 1.0) {
            k[r] = 0;
            continue;
        }
        if (closed) {
            k[r] = o->k[r] > 0 ? o->k[r] : ld_stress_hogs_needed(amin / 2.5);
            if (o->k[r] <= 0 && k[r] > LD_STRESS_K_DEFAULT_MAX) k[r] = LD_STRESS_K_DEFAULT_MAX;
        } else {
            double m = o->calib ? ld_stress_calib_invert(o->calib, (enum atsc_resource)r, amin) : amin;
            k[r] = (o->calib && o->calib->n[r] >= 2) ? o->calib->k[r]
                   : o->k[r] > 0                      ? o->k[r]
                                                      : ld_stress_hogs_needed(m);
            if (o->k[r] <= 0 && k[r] > LD_STRESS_K_MAX) k[r] = LD_STRESS_K_MAX;
        }
        if (amin < 1.0 / (k[r] + 1) - 1e-12) short_of |= 1u << r;
    }
    return short_of;
}

/* One tick of a trace-following loop (open and closed): *t = seconds since t0; 1 = stop (a signal,
 * the duration reached, or a GPU/PCIe hog died: *st set to the error). */
static int follow_tick(const ld_stress_opts *o, ld_hogs *h, double t0, double dur, double *t, enum ats_status *st,
                       ats_err *err)
{
    if (o->stop && *o->stop) return 1;
    *t = now_s() - t0;
    if (*t >= dur) return 1;
    if (!ld_hogs_alive(h)) {
        *st = ats_err_set(err, ATS_EINVAL, "a GPU/PCIe hog process died at t = %.1f s", *t);
        return 1;
    }
    return 0;
}

enum ats_status ld_stress_run(const atsc_trace *target, const ld_stress_opts *o, ats_err *err)
{
    double dur = o->duration_s > 0 ? o->duration_s : atsc_trace_duration(target);
    if (!(dur > 0))
        return ats_err_set(err, ATS_EINVAL, "the trace covers 0 s (one sample): give a duration");
    int k[ATSC_RES_COUNT];
    double amin[ATSC_RES_COUNT];
    ld_stress_plan_hogs(target, o, 0, k, amin);
    if ((k[ATSC_RES_GPU] > 0 || k[ATSC_RES_PCIE] > 0) && !ld_gpu_present(o->device))
        return ats_err_set(err, ATS_ENOTFOUND,
                           "the trace asks for GPU/PCIe load (lowest gpu_avail %.3g, pcie_avail %.3g) "
                           "but there is no CUDA device %d (--cpu-only follows its CPU column only)",
                           amin[ATSC_RES_GPU], amin[ATSC_RES_PCIE], o->device);
    if (o->delay_s > 0) {
        double until = now_s() + o->delay_s;
        while (now_s() < until && !(o->stop && *o->stop)) usleep(10000);
    }
    if (o->stop && *o->stop) return ATS_OK;
    ld_hogs *h = NULL;
    enum ats_status st = ld_hogs_start(o, k, &h, err);
    if (st != ATS_OK) return st;
    if (o->verbose) {
        char hs[128];
        hog_settings(o, k, hs, sizeof hs);
        fprintf(stderr, "stress: hogs cpu %d/thread, gpu %d, pcie %d; period %g s; %g s; %s\n", k[0], k[1], k[2],
                o->period_s, dur, hs);
    }
    double t0 = now_s(), last[ATSC_RES_COUNT] = {-1, -1, -1};
    for (;;) {
        double t;
        if (follow_tick(o, h, t0, dur, &t, &st, err)) break;
        atsc_avail a;
        atsc_trace_at(target, t, &a);
        double av[ATSC_RES_COUNT] = {a.cpu, a.gpu, a.pcie};
        for (int r = 0; r < ATSC_RES_COUNT; r++) {
            if (k[r] == 0) continue;
            double m = o->calib ? ld_stress_calib_invert(o->calib, (enum atsc_resource)r, av[r]) : av[r];
            double d = ld_stress_duty_st(m, k[r], (int)((o->stagger >> r) & 1u));
            ld_hogs_set(h, (enum atsc_resource)r, d);
            if (o->verbose && av[r] != last[r])
                fprintf(stderr, "stress: t = %7.2f s: %s target %.3f -> model %.3f, duty %.3f\n", t,
                        atsc_resource_name((enum atsc_resource)r), av[r], m, d);
            last[r] = av[r];
        }
        usleep(10000);
    }
    ld_hogs_stop(h);
    return st;
}

/* ------------------------------------------------------------------ controller ------------------ */

ld_ctl_opts ld_ctl_opts_default(int k, enum atsc_resource res)
{
    ld_ctl_opts o = {.ki_per_s = 0.8, .k = k, .calib = NULL, .res = res, .step_tol = 0.05, .staggered = 0};
    return o;
}

void ld_ctl_init(ld_ctl *c)
{
    memset(c, 0, sizeof *c);
    c->target = 1.0;
    c->u = 1.0;
}

int ld_ctl_is_step(const ld_ctl *c, const ld_ctl_opts *o, double target)
{
    if (!(target < 1.0)) return c->active; /* to "no control" */
    if (target < 0.01) target = 0.01;
    return !c->active || fabs(target - c->target) > o->step_tol;
}

double ld_ctl_update(ld_ctl *c, const ld_ctl_opts *o, double target, double measured, double dt_s)
{
    ATS_ASSERT(o->k >= 1);
    if (!(target < 1.0)) { /* 1 (or NaN): not controlled, hogs off */
        ld_ctl_init(c);
        return 0.0;
    }
    if (target < 0.01) target = 0.01;
    double ff = o->calib ? ld_stress_calib_invert(o->calib, o->res, target) : target;
    if (ld_ctl_is_step(c, o, target)) {
        c->active = 1; /* a step: feed-forward jump, the old target's integral forgotten */
        c->target = target;
        c->trim = 0.0;
    } else {
        c->target = target; /* a small change (a recorded trace's wiggle): the feed-forward follows it */
        if (!isnan(measured) && dt_s > 0)
            c->trim -= o->ki_per_s * (measured - target) * dt_s; /* measured above target: more load */
    }
    const double u_min = 1.0 / (double)(o->k + 1); /* duty 1 */
    /* anti-windup: the integral may run at most LD_CTL_WINDUP beyond what duty 0..1 can do. Not
     * clipped exactly at the limits: on a plant with a cliff near duty 1 the loop dithers across the
     * cliff, and every step cut at the limit would bias its time average */
    double v = ff + c->trim;
    if (!(v >= u_min - LD_CTL_WINDUP) || v > 1.0 + LD_CTL_WINDUP) { /* (a NaN goes to the lower edge) */
        v = v > 1.0 + LD_CTL_WINDUP ? 1.0 + LD_CTL_WINDUP : u_min - LD_CTL_WINDUP;
        c->trim = v - ff;
    }
    double u = v < u_min ? u_min : v > 1.0 ? 1.0 : v;
    c->saturated = u != v;
    c->u = u;
    c->duty = ld_stress_duty_st(u, o->k, o->staggered);
    return c->duty;
}

/* ------------------------------------------------------------------ sensor process -------------- */

/* The closed loop's probes run in a child process of their own (the sensor), as a recorder's do, not in
 * the process whose threads are the CPU hogs. On the H200 host and on the 2-core development VM the
 * probes inside the hog process read the CPU ~10% more loaded than an `ats record` next to them, also
 * when all probes were spaced apart (experiments/stress-accuracy/README.md); the controller then held its own probes on
 * target and the recorder read +5...+13%. The sensor answers one request (a resource mask) at a time
 * over a pipe pair. It is forked while the stressor still has one thread (before any hog: a child of a
 * multi-threaded process may find a lock of malloc or of a sanitizer's allocator held forever; the
 * ASan build hung so), and it is killed at the end (the hog processes forked later hold copies of the
 * pipe ends, so end-of-file would not reach it) or dies with the stressor (PR_SET_PDEATHSIG). */
typedef struct sensor_msg {
    int32_t status; /* enum ats_status of the request */
    int32_t has_gpu;
    double t_s[ATSC_RES_COUNT];
    long lock_waits, lock_timeouts;
    char text[768]; /* the error message, or (first answer) the probes' description */
} sensor_msg;

typedef struct sensor {
    pid_t pid;
    int req, resp; /* write end of the requests, read end of the answers; -1: closed */
    sensor_msg last;
} sensor;

static int io_all(int fd, void *buf, size_t n, int writing)
{
    char *b = buf;
    while (n > 0) {
        ssize_t k = writing ? write(fd, b, n) : read(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static void sensor_main(ld_probe_opts po, int req, int resp)
{
    signal(SIGINT, SIG_IGN); /* the stressor stops it (pipe closed) after its report */
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    po.stop = NULL; /* the parent's flag is not seen here; a probe is cut after max_probe_s anyway */
    sensor_msg m;
    memset(&m, 0, sizeof m);
    ld_probe *p = NULL;
    ats_err e = {{0}};
    m.status = (int32_t)ld_probe_new(&po, &p, &e);
    if (m.status == ATS_OK) {
        m.has_gpu = ld_probe_has_gpu(p);
        ld_probe_describe(p, m.text, sizeof m.text);
    } else {
        snprintf(m.text, sizeof m.text, "%s", e.msg);
    }
    if (io_all(resp, &m, sizeof m, 1) != 0 || m.status != ATS_OK) _exit(0);
    uint32_t mask;
    while (io_all(req, &mask, sizeof mask, 0) == 0) {
        memset(&m, 0, sizeof m);
        m.status = (int32_t)ld_probe_measure_some(p, mask, m.t_s, &e);
        if (m.status != ATS_OK) snprintf(m.text, sizeof m.text, "%s", e.msg);
        ld_probe_lock_stats(p, &m.lock_waits, NULL, &m.lock_timeouts, NULL);
        if (io_all(resp, &m, sizeof m, 1) != 0) break;
    }
    ld_probe_free(p);
    _exit(0);
}

static void sensor_stop(sensor *s)
{
    if (s->req >= 0) close(s->req);
    if (s->resp >= 0) close(s->resp);
    s->req = s->resp = -1;
    if (s->pid > 0) {
        kill(s->pid, SIGKILL); /* between requests: nothing of its own to finish (the flock dies with it) */
        int status;
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
        }
        s->pid = 0;
    }
}

/* The probe process's pipe broke: says how it ended (a SIGBUS, say, from a shared probe matrix cut short).
 * Its pipes close a moment before it can be reaped, so this waits up to 0.1 s for that. */
static enum ats_status sensor_ended(sensor *s, ats_err *err)
{
    int ws = 0;
    pid_t r = 0;
    for (int i = 0; i < 20 && s->pid > 0 && (r = waitpid(s->pid, &ws, WNOHANG)) == 0; i++) usleep(5000);
    if (r == s->pid) s->pid = -1; /* reaped here: sensor_stop must not wait for it again */
    if (r > 0 && WIFSIGNALED(ws))
        return ats_err_set(err, ATS_EIO, "closed loop: the probe process ended on signal %d (%s)", WTERMSIG(ws),
                           strsignal(WTERMSIG(ws)));
    if (r > 0 && WIFEXITED(ws))
        return ats_err_set(err, ATS_EIO, "closed loop: the probe process exited with status %d", WEXITSTATUS(ws));
    return ats_err_set(err, ATS_EIO, "closed loop: the probe process ended");
}

/* The sensor's next answer into s->last, waited for in 0.1 s steps: *stop set (a signal) returns at once
 * with *stopped = 1; no answer within limit_s is an error, so a stuck probe process never leaves the
 * stressor deaf to SIGTERM. */
static enum ats_status sensor_read(sensor *s, double limit_s, const volatile sig_atomic_t *stop, int *stopped,
                                   ats_err *err)
{
    *stopped = 0;
    const double t0 = now_s();
    for (;;) {
        struct pollfd pf = {.fd = s->resp, .events = POLLIN, .revents = 0};
        int n = poll(&pf, 1, 100);
        if (n > 0) break;
        if (n < 0 && errno != EINTR) return ats_err_set(err, ATS_EIO, "closed loop: poll: %s", strerror(errno));
        if (stop && *stop) {
            *stopped = 1;
            return ATS_OK;
        }
        if (now_s() - t0 > limit_s)
            return ats_err_set(err, ATS_EIO, "closed loop: the probe process has not answered for %g s", limit_s);
    }
    if (io_all(s->resp, &s->last, sizeof s->last, 0) != 0) return sensor_ended(s, err);
    return ATS_OK;
}

/* Starts the sensor; on success s->last.text holds the probes' description and s->last.has_gpu. */
static enum ats_status sensor_start(const ld_probe_opts *po, sensor *s, const volatile sig_atomic_t *stop,
                                    ats_err *err)
{
    int rq[2], rs[2];
    s->pid = 0;
    s->req = s->resp = -1;
    memset(&s->last, 0, sizeof s->last);
    /* a request written after the probe process died must fail with EPIPE (one error line, the report
     * still written), not kill this process with SIGPIPE: ignored process-wide unless a caller handles it */
    struct sigaction old_pipe;
    if (sigaction(SIGPIPE, NULL, &old_pipe) == 0 && old_pipe.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
    if (pipe(rq) != 0) return ats_err_set(err, ATS_ENOMEM, "closed loop: pipe: %s", strerror(errno));
    if (pipe(rs) != 0) {
        close(rq[0]);
        close(rq[1]);
        return ats_err_set(err, ATS_ENOMEM, "closed loop: pipe: %s", strerror(errno));
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(rq[0]), close(rq[1]), close(rs[0]), close(rs[1]);
        return ats_err_set(err, ATS_ENOMEM, "closed loop: fork of the probe process failed: %s", strerror(errno));
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(4);
        close(rq[1]);
        close(rs[0]);
        sensor_main(*po, rq[0], rs[1]);
    }
    close(rq[0]);
    close(rs[1]);
    s->pid = pid;
    s->req = rq[1];
    s->resp = rs[0];
    int stopped; /* a signal while the probes start (a GPU context takes a moment): s->last.status stays 0 */
    enum ats_status rst = sensor_read(s, 120.0, stop, &stopped, err);
    if (rst != ATS_OK) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg); /* err->msg is both the source and the target below */
        sensor_stop(s);
        return ats_err_set(err, rst, "the probe process did not get ready (%s)", why);
    }
    if (s->last.status != ATS_OK) {
        enum ats_status st = (enum ats_status)s->last.status;
        sensor_stop(s);
        return ats_err_set(err, st, "%s", s->last.text);
    }
    return ATS_OK;
}

/* One probe set by the sensor (a probe is cut after 1 s: 10 s without an answer is an error). */
static enum ats_status sensor_measure(sensor *s, unsigned mask, double t_s[ATSC_RES_COUNT],
                                      const volatile sig_atomic_t *stop, int *stopped, ats_err *err)
{
    uint32_t m = mask;
    if (io_all(s->req, &m, sizeof m, 1) != 0) return sensor_ended(s, err);
    enum ats_status st = sensor_read(s, 10.0, stop, stopped, err);
    if (st != ATS_OK || *stopped) return st;
    if (s->last.status != ATS_OK) return ats_err_set(err, (enum ats_status)s->last.status, "%s", s->last.text);
    for (int r = 0; r < ATSC_RES_COUNT; r++) t_s[r] = s->last.t_s[r];
    return ATS_OK;
}

/* ------------------------------------------------------------------ closed loop ----------------- */

/* splitmix64 step -> uniform [0, 1) (probe moments inside a control interval). */
static double rand01(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* Sorted random moments for n probe sets in [t, t + interval): stratified (one at a random moment of each
 * n-th of the interval), so the interval is covered and no fixed phase aliases with the duty period or
 * with a recorder's sampling grid. */
static void probe_moments(uint64_t *rng, double t, double interval, int n, double *at)
{
    for (int i = 0; i < n; i++) at[i] = t + interval * ((double)i + rand01(rng)) / (double)n;
}

/* How long [s] the value of resource r in force at t stays unchanged (INFINITY: to the end). */
static double holds_for(const atsc_trace *tr, enum atsc_resource r, double t)
{
    const double *a = atsc_trace_res((atsc_trace *)tr, r);
    size_t i = atsc_trace_index(tr, t), j = i + 1;
    while (j < tr->n && a[j] == a[i]) j++;
    return j < tr->n ? tr->t_s[j] - t : INFINITY;
}

typedef struct seg_acc {
    int open;     /* index into report->seg, -1: none */
    double sum_meas, sum_duty, sum_target;
    size_t n_meas, steps, sat;
} seg_acc;

static void seg_close(ld_stress_report *rep, seg_acc *a, double t_end)
{
    if (a->open < 0) return;
    ld_stress_seg *g = &rep->seg[a->open];
    g->t1_s = t_end;
    g->measured = a->n_meas ? a->sum_meas / (double)a->n_meas : NAN;
    if (a->steps) g->target = a->sum_target / (double)a->steps; /* a varying target: its mean */
    g->duty = a->steps ? a->sum_duty / (double)a->steps : 0.0;
    g->sat_frac = a->steps ? (double)a->sat / (double)a->steps : 0.0;
    g->steps = a->steps;
    a->open = -1;
}

static void seg_open(ld_stress_report *rep, seg_acc *a, enum atsc_resource r, double t, double target)
{
    seg_close(rep, a, t);
    memset(a, 0, sizeof *a);
    a->open = -1;
    if (rep->nseg >= LD_STRESS_MAX_SEGS) {
        rep->nseg_dropped++;
        return;
    }
    a->open = rep->nseg++;
    ld_stress_seg *g = &rep->seg[a->open];
    memset(g, 0, sizeof *g);
    g->res = r;
    g->t0_s = g->t1_s = t;
    g->target = target;
    g->measured = NAN;
}

static void wait_s(double s, const volatile sig_atomic_t *stop)
{
    double until = now_s() + s;
    while (now_s() < until && !(stop && *stop)) usleep(5000);
}

/* ns probe sets of the resources in `mask` through the sensor, one every `interval` s, probe times into
 * v[r * ns + i] (calibration, and the closed loop's re-measured baseline); a signal is "<what>: interrupted". */
static enum ats_status cal_measure(sensor *s, unsigned mask, size_t ns, double interval,
                                   const volatile sig_atomic_t *stop, double *v, const char *what, ats_err *err)
{
    const double t0 = now_s();
    for (size_t i = 0; i < ns; i++) {
        double t[ATSC_RES_COUNT];
        int stopped;
        enum ats_status st = sensor_measure(s, mask, t, stop, &stopped, err);
        if (st != ATS_OK) return st;
        if (stopped || (stop && *stop)) return ats_err_set(err, ATS_EINVAL, "%s: interrupted", what);
        for (int r = 0; r < ATSC_RES_COUNT; r++) v[(size_t)r * ns + i] = t[r];
        sleep_until(t0 + (double)(i + 1) * interval);
    }
    return ATS_OK;
}

enum ats_status ld_stress_run_closed(const atsc_trace *target, const ld_stress_opts *o, const ld_baseline *base,
                                     ld_stress_report *report, ats_err *err)
{
    ld_stress_report local;
    ld_stress_report *rep = report ? report : &local;
    memset(rep, 0, sizeof *rep);
    double dur = o->duration_s > 0 ? o->duration_s : atsc_trace_duration(target);
    if (!(dur > 0))
        return ats_err_set(err, ATS_EINVAL, "the trace covers 0 s (one sample): give a duration");
    if (!(o->interval_s >= 0.05 && o->interval_s <= 60) || o->probes < 1 || o->probes > 100 ||
        !(o->ki_per_s > 0 && o->ki_per_s * o->interval_s < 2.0) || !(o->settle_s >= 0))
        return ats_err_set(err, ATS_EINVAL,
                           "closed loop: interval %g s must be in [0.05, 60], probes %d in [1, 100], gain %g /s "
                           "> 0 with gain x interval < 2 (stability), settle %g s >= 0",
                           o->interval_s, o->probes, o->ki_per_s, o->settle_s);
    if (!(base->t_s[ATSC_RES_CPU] > 0) || base->cpu_reps < 1 || base->threads < 1)
        return ats_err_set(err, ATS_EINVAL, "closed loop: the baseline has no CPU probe time");
    if (!(o->rebaseline_s >= 0 && o->rebaseline_s <= 600))
        return ats_err_set(err, ATS_EINVAL, "closed loop: rebaseline %g s must be in [0, 600]", o->rebaseline_s);
    ld_baseline own = *base; /* the times the control uses: the file's, or re-measured below */
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        rep->base_file_s[r] = base->t_s[r];
        rep->base_own_s[r] = NAN;
    }
    int k[ATSC_RES_COUNT];
    double amin[ATSC_RES_COUNT];
    ld_stress_plan_hogs(target, o, 1, k, amin);
    for (int r = 0; r < ATSC_RES_COUNT; r++) rep->k[r] = k[r];
    /* the stressor's own probes must stay a small load: their idle time per interval, from the baseline */
    double probe_idle_s = 0;
    for (int r = 0; r < ATSC_RES_COUNT; r++)
        if (k[r] > 0 && base->t_s[r] > 0) probe_idle_s += base->t_s[r];
    if (o->probes * probe_idle_s > 0.2 * o->interval_s)
        return ats_err_set(err, ATS_EINVAL,
                           "closed loop: %d probe sets of %.3g ms (idle) every %g s would keep the probes busy %.0f%% "
                           "of the time (at most 20%%): fewer --probes or a longer --interval",
                           o->probes, 1e3 * probe_idle_s, o->interval_s, 100 * o->probes * probe_idle_s / o->interval_s);
    int want_gpu = k[ATSC_RES_GPU] > 0 || k[ATSC_RES_PCIE] > 0;
    if (want_gpu && !ld_gpu_present(o->device))
        return ats_err_set(err, ATS_ENOTFOUND,
                           "the trace asks for GPU/PCIe load (lowest gpu_avail %.3g, pcie_avail %.3g) "
                           "but there is no CUDA device %d (--cpu-only follows its CPU column only)",
                           amin[ATSC_RES_GPU], amin[ATSC_RES_PCIE], o->device);
    for (int r = ATSC_RES_GPU; r <= ATSC_RES_PCIE; r++)
        if (k[r] > 0 && !(base->t_s[r] > 0))
            return ats_err_set(err, ATS_EINVAL,
                               "closed loop: the trace loads %s but the baseline has no %s probe time (measured "
                               "without a GPU?); measure one here with `ats record --save-baseline`",
                               atsc_resource_name((enum atsc_resource)r), atsc_resource_name((enum atsc_resource)r));
    if (o->delay_s > 0) {
        double until = now_s() + o->delay_s;
        while (now_s() < until && !(o->stop && *o->stop)) usleep(10000);
    }
    if (o->stop && *o->stop) return ATS_OK;

    /* the probe process first (forked from this one thread), then the hog processes (this process must
     * not have touched CUDA when it forks), then the CPU hog threads */
    sensor sens = {.pid = 0, .req = -1, .resp = -1};
    ld_probe_opts po = o->probe ? *o->probe : ld_probe_opts_default();
    ld_probe_opts_from_baseline(&po, base);
    po.slice_ns = o->hog_slice_ns; /* one slice setting per stressor (`--slice-us`): its probes and its hogs */
    po.pin = o->pin;
    po.use_gpu = want_gpu;
    po.device = o->device;
    po.lock_path = o->lock_path;
    ld_hogs *h = NULL;
    enum ats_status st = sensor_start(&po, &sens, o->stop, err);
    if (st != ATS_OK) return st;
    if (o->stop && *o->stop) { /* a signal while it started: nothing ran, nothing to report */
        sensor_stop(&sens);
        return ATS_OK;
    }
    const sensor_msg ready = sens.last; /* its first answer (GPU, description): sens.last is each answer */
    unsigned mask = 0; /* the resources under control: their probes run */
    for (int r = 0; r < ATSC_RES_COUNT; r++)
        if (k[r] > 0) mask |= 1u << r;
    if (o->rebaseline_s > 0 && mask) { /* idle: no hog exists yet (no resource under load: nothing to measure) */
        size_t ns = (size_t)ceil(o->rebaseline_s / 0.1);
        if (ns < 3) ns = 3;
        double *v = malloc(ns * ATSC_RES_COUNT * sizeof(double));
        if (!v) {
            st = ats_err_set(err, ATS_ENOMEM, "closed loop: out of memory for the re-measured baseline");
            goto done;
        }
        st = cal_measure(&sens, mask, ns, 0.1, o->stop, v, "closed loop: re-measuring the idle baseline", err);
        if (o->stop && *o->stop) { /* a signal: nothing ran, nothing to report (as above) */
            free(v);
            st = ATS_OK;
            goto done;
        }
        for (int r = 0; r < ATSC_RES_COUNT && st == ATS_OK; r++) {
            if (!(mask & (1u << r))) continue;
            double m = gsl_stats_median(v + (size_t)r * ns, 1, ns); /* as ld_probe_baseline */
            if (!(m > 0)) {
                st = ats_err_set(err, ATS_EIO, "closed loop: the re-measured idle %s probe time is %g s",
                                 atsc_resource_name((enum atsc_resource)r), m);
                break;
            }
            own.t_s[r] = rep->base_own_s[r] = m;
        }
        free(v);
        if (st != ATS_OK) goto done;
        rep->rebased = 1;
        double own_idle_s = 0; /* the probe-duty limit above, again with the times the control will use */
        for (int r = 0; r < ATSC_RES_COUNT; r++)
            if (k[r] > 0 && own.t_s[r] > 0) own_idle_s += own.t_s[r];
        if (o->probes * own_idle_s > 0.2 * o->interval_s) {
            st = ats_err_set(err, ATS_EINVAL,
                             "closed loop: re-measured, %d probe sets of %.3g ms (idle; the baseline file's %.3g ms) "
                             "every %g s would keep the probes busy %.0f%% of the time (at most 20%%): fewer --probes, "
                             "a longer --interval, or an idle machine while re-measuring",
                             o->probes, 1e3 * own_idle_s, 1e3 * probe_idle_s, o->interval_s,
                             100 * o->probes * own_idle_s / o->interval_s);
            goto done;
        }
    }
    base = &own; /* from here on every availability is against these times */
    ld_stress_opts ho = *o;
    ho.threads = base->threads; /* CPU hogs sized for the probe threads */
    if ((st = ld_hogs_start(&ho, k, &h, err)) != ATS_OK) goto done;
    if (want_gpu && !ready.has_gpu) {
        st = ats_err_set(err, ATS_ENOTFOUND, "closed loop: the GPU probes could not start on device %d", o->device);
        goto done;
    }
    if (o->verbose) {
        char hs[128];
        hog_settings(o, k, hs, sizeof hs);
        fprintf(stderr, "stress: closed loop, hogs cpu %d/thread x %d threads, gpu %d, pcie %d; period %g s; "
                        "control every %g s from %d probe sets, gain %g /s; %g s; %s\nstress: %s (in a probe process "
                        "of its own)\n",
                k[0], base->threads, k[1], k[2], o->period_s, o->interval_s, o->probes, o->ki_per_s, dur, hs,
                ready.text);
    } else if (strstr(ready.text, "a private copy: ") && !strstr(ready.text, "a private copy: ATS_PROBE_PRIVATE")) {
        /* a fallback is said always: an experiment's arm may depend on it */
        const char *why = strstr(ready.text, "a private copy: "), *end = strstr(why, ") on ");
        fprintf(stderr, "ats stress: note: the CPU probe uses %.*s\n", end ? (int)(end - why) : (int)strlen(why), why);
    }

    ld_ctl ctl[ATSC_RES_COUNT];
    ld_ctl_opts co[ATSC_RES_COUNT];
    seg_acc acc[ATSC_RES_COUNT];
    double sum[ATSC_RES_COUNT] = {0}, last_upd[ATSC_RES_COUNT] = {0}, cur[ATSC_RES_COUNT] = {NAN, NAN, NAN};
    double sum_err[ATSC_RES_COUNT] = {0}, sum_tgt[ATSC_RES_COUNT] = {0}; /* probe minus target, target */
    int cnt[ATSC_RES_COUNT] = {0}, paused[ATSC_RES_COUNT] = {0};
    const double hold_s = o->interval_s * 2 > 1.0 ? o->interval_s * 2 : 1.0; /* a step holds this long */
    double v_sum[ATSC_RES_COUNT] = {0}, v_duty[ATSC_RES_COUNT] = {0}; /* verbose: means over 5 s */
    int v_n[ATSC_RES_COUNT] = {0}, v_steps[ATSC_RES_COUNT] = {0};
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        ld_ctl_init(&ctl[r]);
        co[r] = ld_ctl_opts_default(k[r] > 0 ? k[r] : 1, (enum atsc_resource)r);
        co[r].ki_per_s = o->ki_per_s;
        co[r].calib = o->calib;
        co[r].staggered = (int)((o->stagger >> r) & 1u);
        acc[r].open = -1;
    }
    double at[100];
    uint64_t rng = (uint64_t)(now_s() * 1e9);
    const double t0 = now_s();
    if (o->verbose) fprintf(stderr, "stress: t = 0: hogs and probes ready, following the trace\n");
    double next_ctl = o->interval_s, next_verbose = 5.0;
    probe_moments(&rng, 0.0, o->interval_s, o->probes, at);
    int next_probe = 0;
    for (;;) {
        double t;
        if (follow_tick(o, h, t0, dur, &t, &st, err)) break;
        /* target of this moment: a step changes the duty at once (feed-forward), not at the next tick.
         * A change is a step when it exceeds step_tol and the new value holds >= hold_s; a recorded
         * trace's sample-to-sample wiggle (values held 0.1 s) only moves the feed-forward, and its brief
         * 1.0 samples pause the hogs without ending the control (the integral is kept). */
        atsc_avail a;
        atsc_trace_at(target, t, &a);
        double av[ATSC_RES_COUNT] = {a.cpu, a.gpu, a.pcie};
        for (int r = 0; r < ATSC_RES_COUNT; r++) {
            if (k[r] == 0) continue;
            if (av[r] == cur[r]) continue;
            int first = isnan(cur[r]);
            int holds = first || holds_for(target, (enum atsc_resource)r, t) >= hold_s;
            cur[r] = av[r];
            int step = first || (!ctl[r].active && av[r] < 1.0) ||
                       (ctl[r].active && holds && ld_ctl_is_step(&ctl[r], &co[r], av[r]));
            double d;
            if (step || !ctl[r].active) {
                d = ld_ctl_update(&ctl[r], &co[r], av[r], NAN, 0.0);
                paused[r] = 0;
            } else if (!(av[r] < 1.0)) { /* a brief 1.0 in an active stretch */
                d = 0.0;
                paused[r] = 1;
            } else { /* a wiggle: the feed-forward follows, the integral and the interval go on */
                ctl[r].target = av[r];
                d = ld_ctl_update(&ctl[r], &co[r], av[r], NAN, 0.0);
                paused[r] = 0;
            }
            ld_hogs_set(h, (enum atsc_resource)r, d);
            if (!step) continue;
            sum[r] = sum_err[r] = sum_tgt[r] = 0;
            cnt[r] = 0;
            last_upd[r] = t;
            seg_open(rep, &acc[r], (enum atsc_resource)r, t, av[r]);
            if (o->verbose)
                fprintf(stderr, "stress: t = %7.2f s: %s target %.3f -> %s, duty %.3f\n", t,
                        atsc_resource_name((enum atsc_resource)r), av[r],
                        ctl[r].active ? "controlled (feed-forward)" : "hogs off", d);
        }
        unsigned mask = 0;
        for (int r = 0; r < ATSC_RES_COUNT; r++)
            if (ctl[r].active) mask |= 1u << r;
        if (next_probe < o->probes && t >= at[next_probe]) {
            next_probe++;
            if (mask) {
                double ts[ATSC_RES_COUNT];
                int stopped;
                if ((st = sensor_measure(&sens, mask, ts, o->stop, &stopped, err)) != ATS_OK) break;
                if (stopped) continue; /* follow_tick sees the stop flag next */
                for (int r = 0; r < ATSC_RES_COUNT; r++) {
                    if (!(mask & (1u << r)) || isnan(ts[r])) continue;
                    double m = ld_avail_from_times(base->t_s[r], ts[r]);
                    rep->probe_s[r] += ts[r];
                    sum[r] += m;
                    sum_err[r] += m - cur[r]; /* against the target of the probe's moment */
                    sum_tgt[r] += cur[r];
                    cnt[r]++;
                }
            }
        }
        t = now_s() - t0;
        if (t >= next_ctl) {
            for (int r = 0; r < ATSC_RES_COUNT; r++) {
                if (!ctl[r].active) continue;
                double meas = cnt[r] ? sum[r] / cnt[r] : NAN, tgt = cnt[r] ? sum_tgt[r] / cnt[r] : cur[r];
                /* the controller compares with its own target: hand it that target plus the mean error */
                double meas_eff = cnt[r] ? ctl[r].target + sum_err[r] / cnt[r] : NAN;
                double d = ld_ctl_update(&ctl[r], &co[r], ctl[r].target, meas_eff, t - last_upd[r]);
                if (paused[r]) d = 0.0;
                ld_hogs_set(h, (enum atsc_resource)r, d);
                if (o->on_step) {
                    ld_stress_step s = {.t_s = t, .res = (enum atsc_resource)r, .target = tgt, .measured = meas,
                                        .u = ctl[r].u, .duty = d, .saturated = ctl[r].saturated, .probes = cnt[r]};
                    o->on_step(o->step_ctx, &s);
                }
                seg_acc *g = &acc[r];
                if (g->open >= 0 && t - rep->seg[g->open].t0_s >= o->settle_s) {
                    if (cnt[r]) {
                        g->sum_meas += meas;
                        g->n_meas++;
                    }
                    g->sum_duty += d;
                    g->sum_target += tgt;
                    g->steps++;
                    g->sat += ctl[r].saturated;
                }
                if (cnt[r]) {
                    v_sum[r] += meas;
                    v_n[r]++;
                }
                v_duty[r] += d;
                v_steps[r]++;
                sum[r] = sum_err[r] = sum_tgt[r] = 0;
                cnt[r] = 0;
                last_upd[r] = t;
            }
            while (next_ctl <= t) next_ctl += o->interval_s;
            probe_moments(&rng, next_ctl - o->interval_s, o->interval_s, o->probes, at);
            next_probe = 0;
            while (next_probe < o->probes && at[next_probe] < t) next_probe++; /* late: skip past moments */
        }
        if (o->verbose && t >= next_verbose) {
            next_verbose += 5.0;
            for (int r = 0; r < ATSC_RES_COUNT; r++)
                if (v_steps[r])
                    fprintf(stderr, "stress: t = %7.2f s: %-4s target %.3f, probes saw %.3f, duty %.3f (5 s means)\n",
                            t, atsc_resource_name((enum atsc_resource)r), cur[r], v_n[r] ? v_sum[r] / v_n[r] : NAN,
                            v_duty[r] / v_steps[r]);
            memset(v_sum, 0, sizeof v_sum);
            memset(v_duty, 0, sizeof v_duty);
            memset(v_n, 0, sizeof v_n);
            memset(v_steps, 0, sizeof v_steps);
        }
        double wake = next_ctl;
        if (next_probe < o->probes && at[next_probe] < wake) wake = at[next_probe];
        size_t ti = atsc_trace_index(target, t); /* the next target change wakes the loop on time */
        double tnext = ti + 1 < target->n ? target->t_s[ti + 1] : dur;
        if (tnext < wake) wake = tnext;
        if (dur < wake) wake = dur;
        if (wake > t + 0.1) wake = t + 0.1; /* the stop flag and dead hogs noticed within 0.1 s */
        sleep_until(t0 + wake);
    }
    rep->wall_s = now_s() - t0;
    for (int r = 0; r < ATSC_RES_COUNT; r++) seg_close(rep, &acc[r], rep->wall_s < dur ? rep->wall_s : dur);
    double ps = rep->probe_s[0] + rep->probe_s[1] + rep->probe_s[2];
    rep->probe_duty = rep->wall_s > 0 ? ps / rep->wall_s : 0;
    rep->lock_waits = sens.last.lock_waits;
    rep->lock_timeouts = sens.last.lock_timeouts;
done:
    sensor_stop(&sens);
    ld_hogs_stop(h);
    return st;
}

/* ------------------------------------------------------------------ report ---------------------- */

void ld_stress_report_print(FILE *f, const ld_stress_report *rep, double margin_s)
{
    fprintf(f, "stressor's own probes per target segment (first %g s of each left out):\n", margin_s);
    fprintf(f, "%-5s %9s %9s %8s %8s %8s %6s %5s  %s\n", "res", "from [s]", "to [s]", "target", "probes", "rel.err",
           "duty", "sat%", "note");
    for (int i = 0; i < rep->nseg; i++) {
        const ld_stress_seg *g = &rep->seg[i];
        int k = rep->k[g->res];
        /* probe availability is clipped at 0.01: a reading "on target" there says nothing more */
        const char *note = g->target >= 1 ? ""
                           : g->target <= 0.01 + 1e-9 ? "at the clip floor (probes read >= 0.01)"
                           : k > 0 && g->target < 1.0 / (k + 1) ? "below the hogs' reach by the model"
                                                                : "";
        if (isnan(g->measured) && g->target >= 1)
            fprintf(f, "%-5s %9.2f %9.2f %8.4f %8s %8s %6s %5s  %s\n", atsc_resource_name(g->res), g->t0_s, g->t1_s,
                   g->target, "-", "-", "0", "off", note);
        else if (isnan(g->measured)) /* shorter than the margin */
            fprintf(f, "%-5s %9.2f %9.2f %8.4f %8s %8s %6s %5s  %s\n", atsc_resource_name(g->res), g->t0_s, g->t1_s,
                   g->target, "-", "-", "-", "-", note);
        else
            fprintf(f, "%-5s %9.2f %9.2f %8.4f %8.4f %+8.3f %6.3f %5.1f  %s\n", atsc_resource_name(g->res), g->t0_s,
                   g->t1_s, g->target, g->measured, (g->measured - g->target) / g->target, g->duty,
                   100 * g->sat_frac, note);
    }
    if (rep->nseg_dropped > 0)
        fprintf(f, "%d more segments not reported (the report keeps the first %d; --log FILE has every control step)\n",
               rep->nseg_dropped, LD_STRESS_MAX_SEGS);
    if (rep->rebased) {
        fprintf(f, "idle probe times re-measured in the probe process (the control's; the baseline file's):");
        for (int r = 0; r < ATSC_RES_COUNT; r++)
            if (!isnan(rep->base_own_s[r]))
                fprintf(f, " %s %.4g ms (%.4g ms, x%.3f)", atsc_resource_name((enum atsc_resource)r),
                        1e3 * rep->base_own_s[r], 1e3 * rep->base_file_s[r], rep->base_own_s[r] / rep->base_file_s[r]);
        int far = 0;
        for (int r = 0; r < ATSC_RES_COUNT; r++)
            far |= !isnan(rep->base_own_s[r]) && !(rep->base_own_s[r] / rep->base_file_s[r] >= 0.8 &&
                                                    rep->base_own_s[r] / rep->base_file_s[r] <= 1.25);
        if (far) fprintf(f, "; a factor outside 0.8 .. 1.25: the file is from elsewhere, or the machine was busy then");
        fputc('\n', f);
    }
    fprintf(f, "hogs cpu %d/thread, gpu %d, pcie %d; stressor probe duty cycle %.2f%% (cpu %.2f%%, gpu %.2f%%, pcie "
           "%.2f%%) over %.1f s; probe sets that waited for another process's probes: %ld (ran without the lock: %ld)\n",
           rep->k[0], rep->k[1], rep->k[2], 100 * rep->probe_duty,
           rep->wall_s > 0 ? 100 * rep->probe_s[0] / rep->wall_s : 0,
           rep->wall_s > 0 ? 100 * rep->probe_s[1] / rep->wall_s : 0,
           rep->wall_s > 0 ? 100 * rep->probe_s[2] / rep->wall_s : 0, rep->wall_s, rep->lock_waits,
           rep->lock_timeouts);
}

/* ------------------------------------------------------------------ calibration ----------------- */

enum ats_status ld_stress_calibrate(const ld_stress_opts *o, const ld_probe_opts *popts, double settle_s,
                                    double measure_s, ld_stress_calib *out, ats_err *err)
{
    static const double levels[] = {1.0, 0.85, 0.7, 0.55, 0.45, 0.4, 0.35, 0.3, 0.25};
    const int nlev = (int)(sizeof levels / sizeof levels[0]);
    memset(out, 0, sizeof *out);
    if ((o->k[ATSC_RES_GPU] > 0 || o->k[ATSC_RES_PCIE] > 0) && !ld_gpu_present(o->device))
        return ats_err_set(err, ATS_ENOTFOUND, "calibrate: GPU/PCIe hogs asked for but there is no CUDA device %d",
                           o->device);
    /* the probes in a process of their own, as the closed loop's (sensor_start, forked before the hogs) */
    sensor sens = {.pid = 0, .req = -1, .resp = -1};
    ld_hogs *h = NULL;
    const double interval = 0.1;
    size_t ns = (size_t)ceil(measure_s / interval);
    if (ns < 3) ns = 3;
    double *v = malloc(ns * ATSC_RES_COUNT * sizeof(double));
    if (!v) return ats_err_set(err, ATS_ENOMEM, "calibrate: out of memory");
    enum ats_status st = sensor_start(popts, &sens, o->stop, err);
    if (st != ATS_OK) goto done;
    const int has_gpu = sens.last.has_gpu;
    if ((st = ld_hogs_start(o, o->k, &h, err)) != ATS_OK) goto done;
    /* idle baseline: the median probe time per resource (as ld_probe_baseline), hogs at duty 0 */
    double base[ATSC_RES_COUNT];
    if ((st = cal_measure(&sens, 7u, ns, interval, o->stop, v, "calibrate", err)) != ATS_OK) goto done;
    for (int r = 0; r < ATSC_RES_COUNT; r++) base[r] = gsl_stats_median(v + (size_t)r * ns, 1, ns);
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        if (o->k[r] <= 0) continue;
        if (r != ATSC_RES_CPU && !has_gpu) continue;
        out->k[r] = o->k[r];
        for (int li = 0; li < nlev && levels[li] >= 1.0 / (o->k[r] + 1) - 1e-9; li++) {
            const double duty = ld_stress_duty_st(levels[li], o->k[r], (int)((o->stagger >> r) & 1u));
            ld_hogs_set(h, (enum atsc_resource)r, duty);
            wait_s(settle_s, o->stop);
            if ((st = cal_measure(&sens, 1u << r, ns, interval, o->stop, v, "calibrate", err)) != ATS_OK) goto done;
            /* the mean, not the median: with duty d < 1/2 most samples miss the busy window, and a trace
             * (and `ats trace compare`) averages over time */
            double mean = 0;
            for (size_t i = 0; i < ns; i++) mean += ld_avail_from_times(base[r], v[(size_t)r * ns + i]) / (double)ns;
            int i = out->n[r];
            out->model[r][i] = levels[li];
            out->measured[r][i] = (i > 0 && mean > out->measured[r][i - 1]) ? out->measured[r][i - 1] : mean;
            out->n[r] = i + 1;
            if (o->verbose)
                fprintf(stderr, "calibrate: %s k=%d model %.3f (duty %.3f) -> measured %.3f\n",
                        atsc_resource_name((enum atsc_resource)r), o->k[r], levels[li], duty, mean);
        }
        ld_hogs_set(h, (enum atsc_resource)r, 0.0);
    }
done:
    sensor_stop(&sens);
    free(v);
    ld_hogs_stop(h);
    return st;
}
