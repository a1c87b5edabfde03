/*
 * load/src/record.c — load probes and the recorder behind `ats record` (ld/load.h).
 * CPU probe: a float GEMV over a pthread pool (rows handed out in chunks through an atomic counter, so
 * a thread slowed by a co-runner takes fewer chunks, as inference threads do); GPU and PCIe probes in
 * load/cuda/gpu_probe.cu when built with CUDA.
 */
#include "ld/load.h"

#include "atsc/outfile.h"
#include "atsc/text.h"

#include <dirent.h>
#include <errno.h>
#include <gsl/gsl_statistics_double.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gpu_probe.h"

#define CHUNK_ROWS 32

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ld_usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

struct ld_probe {
    ld_probe_opts o;
    /* CPU GEMV: y (rows) = A (rows, cols) x (cols) */
    float *A, *x, *y;
    size_t a_map;             /* A is the shared object's mapping of this many bytes; 0: malloc'ed */
    int a_shared;             /* A is the shared object ld_probe_matrix_name() names */
    char a_why[400];          /* why A is a private copy (a_shared 0) */
    int reps;                 /* GEMV repetitions per probe */
    pthread_t *tids;
    int nthreads;
    pthread_mutex_t mu;       /* guards gen, active, quit */
    pthread_cond_t cv_start, cv_done;
    unsigned gen;             /* incremented to start a probe */
    int active;               /* pool threads still working on the current probe */
    int quit;
    int sync_ok;              /* mutex and condition variables initialized */
    atomic_size_t next_chunk; /* chunk counter over reps * rows */
    atomic_int abort_probe;   /* 1: the pool takes no more chunks of the current probe */
    atomic_int next_index;    /* pool threads take their index (ld_pin_self) from it */
    /* GPU */
    int has_gpu;
    long gpu_iters;
    ld_gpu_probe *lp;
    char gpu_name[256];
    /* probe lock shared with other processes (flock) */
    int lock_fd;              /* -1: no lock (none asked, or the file could not be opened) */
    long lock_waits, lock_timeouts;
    double lock_wait_s;
    int lock_stuck;           /* the last wait timed out: try without waiting until the lock is free */
};

/* sched_setattr(2)'s argument, version 0 (48 bytes); glibc 2.36 has no wrapper or type. */
struct ex_sched_attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

int ld_sched_slice(long ns)
{
    if (ns <= 0) return 0;
#ifdef SYS_sched_setattr
    pid_t tid = (pid_t)syscall(SYS_gettid);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)tid);
    if (nice == -1 && errno) return errno;
    struct ex_sched_attr a = {.size = sizeof a, .policy = 0 /* SCHED_OTHER */, .nice = nice, .runtime = (uint64_t)ns};
    return syscall(SYS_sched_setattr, tid, &a, 0) == 0 ? 0 : errno;
#else
    return ENOSYS;
#endif
}


int ld_pin_self(int j)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return errno;
    int n = CPU_COUNT(&set);
    if (n < 1 || j < 0) return EINVAL;
    int want = j % n, cpu = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && want-- == 0) { cpu = c; break; }
    if (cpu < 0) return EINVAL;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void gemv_rows(const struct ld_probe *p, size_t r0, size_t r1)
{
    const size_t cols = p->o.gemv_cols;
    for (size_t r = r0; r < r1; r++) {
        const float *a = p->A + r * cols;
        float acc = 0.0f;
        for (size_t c = 0; c < cols; c++) acc += a[c] * p->x[c];
        p->y[r] = acc;
    }
}

static void *pool_main(void *arg)
{
    struct ld_probe *p = arg;
    const size_t rows = p->o.gemv_rows, chunks_per = (rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
    unsigned seen = 0;
    ld_sched_slice(p->o.slice_ns); /* a kernel without slice requests ignores it */
    const int index = atomic_fetch_add(&p->next_index, 1);
    if (p->o.pin) ld_pin_self(index); /* best effort: a thread that cannot be pinned still probes */
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->gen == seen && !p->quit) pthread_cond_wait(&p->cv_start, &p->mu);
        seen = p->gen;
        int quit = p->quit;
        pthread_mutex_unlock(&p->mu);
        if (quit) break;
        const size_t total = chunks_per * (size_t)p->reps;
        for (;;) {
            if (atomic_load_explicit(&p->abort_probe, memory_order_relaxed)) break;
            size_t c = atomic_fetch_add(&p->next_chunk, 1);
            if (c >= total) break;
            size_t r0 = (c % chunks_per) * CHUNK_ROWS, r1 = r0 + CHUNK_ROWS < rows ? r0 + CHUNK_ROWS : rows;
            gemv_rows(p, r0, r1);
        }
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0) pthread_cond_signal(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

/* One CPU probe: reps GEMVs over the pool; returns wall time [s]. Cut (the pool stops taking
 * chunks) after o.max_probe_s or once *o.stop is set, so a baseline with far too many repetitions
 * or a signal never keeps a probe running for minutes. */
static double cpu_probe(struct ld_probe *p)
{
    atomic_store(&p->next_chunk, 0);
    atomic_store(&p->abort_probe, 0);
    double t0 = now_s();
    pthread_mutex_lock(&p->mu);
    p->active = p->nthreads;
    p->gen++;
    pthread_cond_broadcast(&p->cv_start);
    while (p->active > 0) {
        struct timespec ts; /* the condition variable's clock is CLOCK_REALTIME: a 10 ms slice of it */
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&p->cv_done, &p->mu, &ts);
        if ((p->o.max_probe_s > 0 && now_s() - t0 > p->o.max_probe_s) || (p->o.stop && *p->o.stop))
            atomic_store(&p->abort_probe, 1);
    }
    pthread_mutex_unlock(&p->mu);
    return now_s() - t0;
}

ld_probe_opts ld_probe_opts_default(void)
{
    ld_probe_opts o = {.threads = 0, .gemv_rows = 2048, .gemv_cols = 2048, .cpu_target_s = 2e-3,
                       .gpu_target_s = 1e-3, .copy_bytes = 16u << 20, .use_gpu = 1, .device = 0,
                       .cpu_reps = 0, .gpu_iters = 0, .lock_path = "/tmp/ats-probes.lock", .max_probe_s = 1.0,
                       .stop = NULL, .slice_ns = LD_SLICE_NS_DEFAULT};
    const char *e = getenv("ATS_PROBE_PRIVATE");
    o.private_matrix = e && strcmp(e, "1") == 0;
    return o;
}

static double median3(double a, double b, double c)
{
    if (a > b) { double t = a; a = b; b = t; }
    if (b > c) b = c;
    return a > b ? a : b;
}

void ld_probe_free(ld_probe *p)
{
    if (!p) return;
    if (p->sync_ok) {
        pthread_mutex_lock(&p->mu);
        p->quit = 1;
        pthread_cond_broadcast(&p->cv_start);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->nthreads; i++) pthread_join(p->tids[i], NULL);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv_start);
        pthread_cond_destroy(&p->cv_done);
    }
    free(p->tids);
    ld_gpu_probe_free(p->lp);
    if (p->a_map) munmap(p->A, p->a_map);
    else free(p->A);
    free(p->x);
    free(p->y);
    if (p->lock_fd >= 0) close(p->lock_fd);
    free(p);
}

/* The probe matrix's values: a fixed LCG, so its data never changes the probe's speed. */
static float matrix_value(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) * (1.0f / 16777216.0f) - 0.5f;
}

static void fill_matrix(float *a, size_t n)
{
    uint32_t s = 12345u;
    for (size_t i = 0; i < n; i++) a[i] = matrix_value(&s);
}

static int matrix_ok(const float *a, size_t n)
{
    uint32_t s = 12345u;
    for (size_t i = 0; i < n; i++)
        if (a[i] != matrix_value(&s)) return 0;
    return 1;
}

void ld_probe_matrix_name(size_t rows, size_t cols, char *buf, size_t len)
{
    snprintf(buf, len, "/ats-probe-a1-%zux%zu", rows, cols);
}

/* Removes temporaries "<name>.<pid>" in /dev/shm whose creator is gone (killed while filling one). */
static void remove_stale_temporaries(const char *name)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    const size_t len = strlen(name + 1); /* without the leading '/' */
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end = NULL;
        if (strncmp(e->d_name, name + 1, len) != 0 || e->d_name[len] != '.') continue;
        long pid = strtol(e->d_name + len + 1, &end, 10);
        if (pid <= 0 || !end || *end || (kill((pid_t)pid, 0) != 0 && errno == ESRCH) == 0) continue;
        char tmp[300];
        snprintf(tmp, sizeof tmp, "/%s", e->d_name);
        shm_unlink(tmp);
    }
    closedir(d);
}

/* Maps the object open at fd (closed here) if it is this probe's matrix; *shape_ok: a regular file of the
 * right size (the contents may still differ). NULL otherwise. */
static float *map_fd(int fd, size_t rows, size_t cols, int *shape_ok)
{
    const size_t bytes = rows * cols * sizeof(float);
    struct stat st;
    *shape_ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == bytes;
    void *m = *shape_ok ? mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (m != MAP_FAILED && matrix_ok(m, rows * cols)) return m;
    if (m != MAP_FAILED) munmap(m, bytes);
    return NULL;
}

/* The shared matrix if it exists and is this probe's, else NULL. */
static float *map_existing(const char *name, size_t rows, size_t cols)
{
    int fd = shm_open(name, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0), ok;
    return fd >= 0 ? map_fd(fd, rows, cols, &ok) : NULL;
}

/* Maps the shared probe matrix read-only (ld_probe_opts.private_matrix): opens the POSIX shared-memory
 * object, or creates it under a temporary name, fills it and links it into place (a process never sees
 * it half-filled; of two racing creators one link wins and the other maps the winner's, so every
 * process reads the same pages). Anything else at that name — the wrong size or contents, not a
 * regular file (O_NONBLOCK: a FIFO there does not block) — is unlinked and replaced once. The space is
 * reserved with posix_fallocate, so a full /dev/shm is an error here, not a SIGBUS while filling. NULL:
 * no shared matrix (why: one phrase in why[len]); the caller makes a private copy. */
static float *map_shared_matrix(size_t rows, size_t cols, char *why, size_t len)
{
    const size_t bytes = rows * cols * sizeof(float);
    char name[96], path[128], tmp[128];
    ld_probe_matrix_name(rows, cols, name, sizeof name);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    remove_stale_temporaries(name);
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = shm_open(name, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
        if (fd < 0 && errno != ENOENT) {
            snprintf(why, len, "%s: %s", path, strerror(errno));
            if (attempt == 1) return NULL;
        }
        if (fd >= 0) {
            int ok;
            float *m = map_fd(fd, rows, cols, &ok);
            if (m) return m;
            snprintf(why, len, "%s is not this probe's matrix (%s) and could not be replaced", path,
                     !ok ? "not a regular file of the right size" : "other contents");
            if (attempt == 1) return NULL;
        }
        if (fd >= 0 || errno != ENOENT) shm_unlink(name); /* not ours, or unreadable: make it anew */
        snprintf(tmp, sizeof tmp, "%s.%ld", name, (long)getpid());
        fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            snprintf(why, len, "cannot create /dev/shm%s: %s", tmp, strerror(errno));
            return NULL;
        }
        fchmod(fd, 0644); /* readable by every user's ats, whatever the umask */
        int e = posix_fallocate(fd, 0, (off_t)bytes);
        void *w = e == 0 ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
        if (e == 0 && w == MAP_FAILED) e = errno;
        close(fd);
        char tpath[160];
        snprintf(tpath, sizeof tpath, "/dev/shm%s", tmp);
        if (w == MAP_FAILED) {
            snprintf(why, len, "cannot make %s (%zu bytes): %s", path, bytes, strerror(e));
            shm_unlink(tmp);
            /* no room for a second copy: another process may be filling the one it needs (runs started
             * together); wait up to 1 s for it to appear */
            for (int i = 0; i < 100; i++) {
                float *m = map_existing(name, rows, cols);
                if (m) return m;
                usleep(10000);
            }
            return NULL;
        }
        fill_matrix(w, rows * cols);
        munmap(w, bytes);
        const int linked = link(tpath, path) == 0 || errno == EEXIST; /* EEXIST: another creator won */
        if (!linked) snprintf(why, len, "cannot link %s: %s", path, strerror(errno));
        shm_unlink(tmp);
        if (!linked) return NULL;
    }
    return NULL;
}

enum ats_status ld_probe_new(const ld_probe_opts *opts, ld_probe **out, ats_err *err)
{
    *out = NULL;
    ld_probe_opts o = *opts;
    if (o.threads <= 0) o.threads = ld_usable_cpus();
    if (o.threads > 1024 || o.gemv_rows == 0 || o.gemv_cols == 0 || o.gemv_rows * o.gemv_cols > (1u << 28) ||
        !(o.cpu_target_s > 0) || !(o.gpu_target_s > 0) || o.cpu_reps < 0 || o.cpu_reps > 100000 || o.gpu_iters < 0 ||
        o.gpu_iters > 10000000000L)
        return ats_err_set(err, ATS_EINVAL,
                           "probe: bad options (threads %d, gemv %zu x %zu, repetitions %d (<= 100000), kernel "
                           "iterations %ld (<= 1e10))",
                           o.threads, o.gemv_rows, o.gemv_cols, o.cpu_reps, o.gpu_iters);
    if (o.slice_ns != 0 && !(o.slice_ns >= 100000 && o.slice_ns <= 100000000))
        return ats_err_set(err, ATS_EINVAL, "probe: slice %ld ns must be 0 (kernel default) or in [1e5, 1e8]",
                           o.slice_ns);
    struct ld_probe *p = calloc(1, sizeof *p);
    if (!p) return ats_err_set(err, ATS_ENOMEM, "probe: out of memory");
    p->o = o;
    p->lock_fd = -1;
    if (o.lock_path) { /* world-writable so that any user's ats can take it; read-only open suffices for flock */
        p->lock_fd = open(o.lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (p->lock_fd < 0) p->lock_fd = open(o.lock_path, O_RDONLY | O_CLOEXEC);
        if (p->lock_fd >= 0) fchmod(p->lock_fd, 0666); /* fails harmlessly when another user owns it */
    }
    snprintf(p->a_why, sizeof p->a_why, "ATS_PROBE_PRIVATE=1");
    if (!o.private_matrix && (p->A = map_shared_matrix(o.gemv_rows, o.gemv_cols, p->a_why, sizeof p->a_why))) {
        p->a_map = o.gemv_rows * o.gemv_cols * sizeof(float);
        p->a_shared = 1;
    } else if ((p->A = malloc(o.gemv_rows * o.gemv_cols * sizeof(float)))) { /* private copy */
        fill_matrix(p->A, o.gemv_rows * o.gemv_cols);
    }
    p->x = malloc(o.gemv_cols * sizeof(float));
    p->y = malloc(o.gemv_rows * sizeof(float));
    p->tids = calloc((size_t)o.threads, sizeof(pthread_t));
    if (!p->A || !p->x || !p->y || !p->tids) {
        ld_probe_free(p);
        return ats_err_set(err, ATS_ENOMEM, "probe: out of memory for a %zu x %zu GEMV", o.gemv_rows, o.gemv_cols);
    }
    for (size_t i = 0; i < o.gemv_cols; i++) p->x[i] = 1.0f / (float)(i + 1);
    p->reps = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_start, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    p->sync_ok = 1;
    for (int i = 0; i < o.threads; i++) {
        if (pthread_create(&p->tids[i], NULL, pool_main, p) != 0) {
            ld_probe_free(p); /* joins the i threads started so far */
            return ats_err_set(err, ATS_ENOMEM, "probe: cannot start thread %d of %d", i, o.threads);
        }
        p->nthreads = i + 1;
    }
    /* calibrate repetitions to the target duration: median of 3, twice (unless fixed by a baseline) */
    if (o.cpu_reps > 0) { /* fixed by a baseline: warm up anyway (fresh pool threads read slow: a recording
                              * with --baseline read its first 0.2-0.3 s as ~0.5 on an idle machine) */
        p->reps = o.cpu_reps;
        const double w0 = now_s();
        for (int i = 0; i < 50 && (i < 3 || now_s() - w0 < 0.2); i++) cpu_probe(p);
    }
    for (int pass = 0; pass < 2 && o.cpu_reps <= 0; pass++) {
        cpu_probe(p); /* warm-up */
        double t = median3(cpu_probe(p), cpu_probe(p), cpu_probe(p));
        int reps = (int)ceil(p->reps * o.cpu_target_s / (t > 1e-7 ? t : 1e-7));
        p->reps = reps < 1 ? 1 : reps > 100000 ? 100000 : reps;
    }
    if (o.use_gpu && ld_gpu_probe_device_count() > o.device) {
        char msg[256];
        if (ld_gpu_probe_new(o.device, o.copy_bytes, 0, &p->lp, msg, sizeof msg) != 0) {
            ld_probe_free(p);
            return ats_err_set(err, ATS_EINVAL, "probe: GPU setup failed: %s", msg);
        }
        ld_gpu_probe_name(p->lp, p->gpu_name, sizeof p->gpu_name);
        /* busy-kernel iterations for gpu_target_s: time 2 sizes and fit the slope */
        long it = 1000;
        double t1 = 0, t2 = 0;
        for (int k = 0; k < 12; k++) {
            double a = now_s();
            if (ld_gpu_probe_busy(p->lp, it, 1, msg, sizeof msg) != 0) goto gpu_fail;
            t1 = now_s() - a;
            a = now_s();
            if (ld_gpu_probe_busy(p->lp, 4 * it, 1, msg, sizeof msg) != 0) goto gpu_fail;
            t2 = now_s() - a;
            if (t2 - t1 >= 3e-4 && k >= 1) break; /* long enough to see the slope (and warmed up) */
            if (t2 - t1 < 3e-4) it *= 4;
        }
        double per_it = (t2 - t1) / (3.0 * (double)it);
        if (!(per_it > 0)) per_it = 1e-9;
        p->gpu_iters = (long)(o.gpu_target_s / per_it);
        if (p->gpu_iters < 100) p->gpu_iters = 100;
        if (o.gpu_iters > 0) p->gpu_iters = o.gpu_iters;
        p->has_gpu = 1;
        if (ld_gpu_probe_copy_h2d(p->lp, o.copy_bytes, 1, msg, sizeof msg) != 0) goto gpu_fail; /* warm-up */
        goto gpu_ok;
    gpu_fail:
        ld_probe_free(p);
        return ats_err_set(err, ATS_EINVAL, "probe: GPU calibration failed: %s", msg);
    gpu_ok:;
    }
    *out = p;
    return ATS_OK;
}

int ld_probe_has_gpu(const ld_probe *p) { return p->has_gpu; }

/* Takes the probe lock: waits for another process's probes, at most 0.2 s (then probes without it).
 * After such a timeout the holder is taken as stuck (a probe of minutes): later sets only try once,
 * without waiting, until the lock is free again, so one stuck holder costs 0.2 s, not 0.2 s a sample. */
static int lock_take(ld_probe *p)
{
    if (p->lock_fd < 0) return 0;
    if (flock(p->lock_fd, LOCK_EX | LOCK_NB) == 0) {
        p->lock_stuck = 0;
        return 1;
    }
    if (p->lock_stuck) {
        p->lock_timeouts++;
        return 0;
    }
    double t0 = now_s();
    p->lock_waits++;
    for (;;) {
        usleep(200);
        if (flock(p->lock_fd, LOCK_EX | LOCK_NB) == 0) {
            p->lock_wait_s += now_s() - t0;
            return 1;
        }
        if (now_s() - t0 > 0.2) {
            p->lock_wait_s += now_s() - t0;
            p->lock_timeouts++;
            p->lock_stuck = 1;
            return 0;
        }
    }
}

enum ats_status ld_probe_measure_some(ld_probe *p, unsigned mask, double t_s[ATSC_RES_COUNT], ats_err *err)
{
    enum ats_status st = ATS_OK;
    t_s[ATSC_RES_CPU] = t_s[ATSC_RES_GPU] = t_s[ATSC_RES_PCIE] = NAN;
    int locked = lock_take(p);
    if (mask & (1u << ATSC_RES_CPU)) t_s[ATSC_RES_CPU] = cpu_probe(p);
    if (p->has_gpu) {
        char msg[256];
        if (mask & (1u << ATSC_RES_GPU)) {
            double a = now_s();
            if (ld_gpu_probe_busy(p->lp, p->gpu_iters, 1, msg, sizeof msg) != 0) {
                st = ats_err_set(err, ATS_EINVAL, "GPU probe: %s", msg);
                goto out;
            }
            t_s[ATSC_RES_GPU] = now_s() - a;
        }
        if (mask & (1u << ATSC_RES_PCIE)) {
            double b = now_s();
            if (ld_gpu_probe_copy_h2d(p->lp, p->o.copy_bytes, 1, msg, sizeof msg) != 0) {
                st = ats_err_set(err, ATS_EINVAL, "PCIe probe: %s", msg);
                goto out;
            }
            t_s[ATSC_RES_PCIE] = now_s() - b;
        }
    }
out:
    if (locked) flock(p->lock_fd, LOCK_UN);
    return st;
}

enum ats_status ld_probe_measure(ld_probe *p, double t_s[ATSC_RES_COUNT], ats_err *err)
{
    return ld_probe_measure_some(p, (1u << ATSC_RES_COUNT) - 1, t_s, err);
}

void ld_probe_lock_stats(const ld_probe *p, long *waited, double *wait_s, long *timeouts, int *unlocked)
{
    if (waited) *waited = p->lock_waits;
    if (wait_s) *wait_s = p->lock_wait_s;
    if (timeouts) *timeouts = p->lock_timeouts;
    if (unlocked) *unlocked = p->o.lock_path && p->lock_fd < 0;
}

void ld_probe_opts_from_baseline(ld_probe_opts *o, const ld_baseline *b)
{
    o->threads = b->threads;
    o->cpu_reps = b->cpu_reps;
    o->gpu_iters = b->gpu_iters;
    if (b->slice_ns >= 0) o->slice_ns = b->slice_ns;
}

void ld_probe_describe(const ld_probe *p, char *buf, size_t len)
{
    char sl[48] = "the kernel's default slice";
    if (p->o.slice_ns > 0) snprintf(sl, sizeof sl, "%.3g ms slices", 1e-6 * (double)p->o.slice_ns);
    char nm[96], mat[448];
    ld_probe_matrix_name(p->o.gemv_rows, p->o.gemv_cols, nm, sizeof nm);
    if (p->a_shared) snprintf(mat, sizeof mat, "shared: /dev/shm%s", nm);
    else snprintf(mat, sizeof mat, "a private copy: %s", p->a_why);
    int n = snprintf(buf, len, "CPU probe: %d x GEMV float (%zu, %zu; %s) on %d %sthread%s (chunks of %d rows, %s)",
                     p->reps, p->o.gemv_rows, p->o.gemv_cols, mat, p->o.threads, p->o.pin ? "pinned " : "",
                     p->o.threads == 1 ? "" : "s", CHUNK_ROWS, sl);
    if (n < 0 || (size_t)n >= len) return;
    int m = p->lock_fd >= 0 ? snprintf(buf + n, len - (size_t)n, "; serialized with other ats probes by flock(%s)",
                                       p->o.lock_path)
                            : 0;
    if (m < 0 || (size_t)(n + m) >= len) return;
    n += m;
    if (p->has_gpu)
        snprintf(buf + n, len - (size_t)n,
                 "; GPU probe: busy kernel %ld dependent FMAs/thread on every SM of %s; PCIe probe: %zu MiB "
                 "H2D copy from pinned memory",
                 p->gpu_iters, p->gpu_name, p->o.copy_bytes >> 20);
    else
        snprintf(buf + n, len - (size_t)n, "; no GPU: gpu_avail and pcie_avail not measured (1)");
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
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        /* a signal: the caller checks its stop flag after we return */
        return;
    }
}

enum ats_status ld_probe_baseline(ld_probe *p, double seconds, double interval_s, const volatile sig_atomic_t *stop,
                                  ld_baseline *out, ats_err *err)
{
    size_t n = (size_t)ceil(seconds / interval_s);
    if (n < 3) n = 3;
    double *v[ATSC_RES_COUNT];
    for (int r = 0; r < ATSC_RES_COUNT; r++) v[r] = malloc(n * sizeof(double));
    enum ats_status st = ATS_OK;
    if (!v[0] || !v[1] || !v[2]) {
        st = ats_err_set(err, ATS_ENOMEM, "baseline: out of memory");
        goto done;
    }
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        if (stop && *stop) {
            st = ats_err_set(err, ATS_EINVAL, "baseline: interrupted");
            goto done;
        }
        double t[ATSC_RES_COUNT];
        if ((st = ld_probe_measure(p, t, err)) != ATS_OK) goto done;
        for (int r = 0; r < ATSC_RES_COUNT; r++) v[r][i] = t[r];
        sleep_until(t0 + (double)(i + 1) * interval_s);
    }
    out->cpu_reps = p->reps;
    out->gpu_iters = p->has_gpu ? p->gpu_iters : 0;
    out->threads = p->o.threads;
    out->slice_ns = p->o.slice_ns;
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        if (isnan(v[r][0])) {
            out->t_s[r] = NAN;
            continue;
        }
        out->t_s[r] = gsl_stats_median(v[r], 1, n); /* reorders v[r]; even n: the two middle values' mean */
    }
done:
    for (int r = 0; r < ATSC_RES_COUNT; r++) free(v[r]);
    return st;
}

enum ats_status ld_text_save(const char *path, const char *what, int (*write)(FILE *f, const void *ctx),
                             const void *ctx, ats_err *err)
{
    atsc_out *out = NULL; /* temporary + fsync + rename (atsc/outfile.h) */
    enum ats_status st = atsc_out_open(path, &out, err);
    if (st) return st;
    errno = 0;
    FILE *f = fopen(atsc_out_tmp(out), "w");
    int bad = !f;
    if (f) {
        bad |= write(f, ctx) != 0;
        bad |= ferror(f) != 0;
        bad |= fclose(f) != 0;
    }
    if (bad) {
        st = ats_err_set(err, ATS_EINVAL, "%s: write failed: %s (%s)", path, errno ? strerror(errno) : "I/O error", what);
        atsc_out_abort(out);
        return st;
    }
    return atsc_out_commit(out, err);
}

static int write_baseline(FILE *f, const void *ctx)
{
    const ld_baseline *b = ctx;
    return fprintf(f, "%.9g %.9g %.9g %d %ld %d %ld\n", b->t_s[0], b->t_s[1], b->t_s[2], b->cpu_reps, b->gpu_iters,
                   b->threads, b->slice_ns < 0 ? 0 : b->slice_ns) < 0 ? -1 : 0;
}

enum ats_status ld_baseline_save(const ld_baseline *b, const char *path, ats_err *err)
{
    return ld_text_save(path, "baseline", write_baseline, b, err);
}

enum ats_status ld_baseline_load(const char *path, ld_baseline *b, ats_err *err)
{
    atsc_in_note(path); /* never to be replaced by an output of this run */
    /* the path and the file's words escaped (\xNN): a binary file must not put raw bytes in a message */
    char pe[ATSC_ESC_PATH], we[ATSC_ESC_OUT];
    atsc_esc(path, strlen(path), pe, sizeof pe);
    FILE *f = fopen(path, "r");
    if (!f) return ats_err_set(err, ATS_ENOTFOUND, "%s: cannot open baseline: %s", pe, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return ats_err_set(err, ATS_ENOTFOUND, "%s: cannot read baseline: %s", pe,
                           S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file");
    }
    /* 6 fields (before the slice existed) or 7: cpu_s gpu_s pcie_s cpu_reps gpu_iters threads [slice_ns] */
    char w[8][64];
    int n = fscanf(f, "%63s %63s %63s %63s %63s %63s", w[0], w[1], w[2], w[3], w[4], w[5]);
    int nf = n == 6 ? 6 + (fscanf(f, "%63s", w[6]) == 1) : n;
    int extra = nf == 7 && fscanf(f, "%63s", w[7]) == 1; /* anything after the seventh field */
    fclose(f);
    if (n != 6)
        return ats_err_set(err, ATS_EINVAL,
                           "%s: line 1: need 6 or 7 fields (cpu_s gpu_s pcie_s cpu_reps gpu_iters threads [slice_ns])",
                           pe);
    static const char *const names[7] = {"cpu_s", "gpu_s", "pcie_s", "cpu_reps", "gpu_iters", "threads", "slice_ns"};
    double x[7];
    for (int r = 0; r < nf; r++) {
        char *end = NULL;
        x[r] = strtod(w[r], &end);
        /* the limits ld_probe_new itself applies: 1..100000 GEMV repetitions, 1..1024 threads; busy-kernel
         * iterations up to 1e10 (about 10 s); probe times up to 10 s; a slice of 0 (the kernel's) or
         * 1e5..1e8 ns. Beyond them a probe would run for minutes (and hold the probe lock meanwhile), or the
         * counts would overflow. */
        static const double lo[7] = {0, 0, 0, 1, 0, 1, 0}, hi[7] = {10, 10, 10, 100000, 1e10, 1024, 1e8};
        int ok = *end == '\0' && (r < 3 ? (isnan(x[r]) || (x[r] > lo[r] && x[r] <= hi[r]))
                                        : (x[r] >= lo[r] && x[r] <= hi[r] && x[r] == floor(x[r])));
        if (r == 6 && ok && x[r] != 0 && x[r] < 1e5) ok = 0;
        if (!ok)
            return ats_err_set(err, ATS_EINVAL, "%s: line 1, field %d (%s) = '%s': out of range (%s%g .. %g%s)", pe,
                               r + 1, names[r], atsc_esc(w[r], strlen(w[r]), we, sizeof we), r < 3 ? "> " : r == 6 ? "0, or an integer " : "an integer ",
                               r == 6 ? 1e5 : lo[r], hi[r], r < 3 ? " s, or nan" : r == 6 ? " ns" : "");
    }
    if (extra) /* after the fields themselves: a second baseline line names its first field */
        return ats_err_set(err, ATS_EINVAL,
                           "%s: '%s' after the 7 fields (cpu_s gpu_s pcie_s cpu_reps gpu_iters threads slice_ns): a "
                           "baseline is one line of 6 or 7 fields", pe, atsc_esc(w[7], strlen(w[7]), we, sizeof we));
    for (int r = 0; r < 3; r++) b->t_s[r] = x[r];
    b->cpu_reps = (int)x[3];
    b->gpu_iters = (long)x[4];
    b->threads = (int)x[5];
    b->slice_ns = nf == 7 ? (long)x[6] : -1;
    return ATS_OK;
}

double ld_avail_from_times(double base_s, double t_s)
{
    if (isnan(base_s) || isnan(t_s)) return 1.0;
    double a = t_s > 0 ? base_s / t_s : 1.0;
    if (a > 1.0) a = 1.0;
    if (!(a >= 0.01)) a = 0.01;
    return a;
}

ld_record_opts ld_record_opts_default(void)
{
    ld_record_opts o = {.interval_s = 0.1, .duration_s = 60.0, .stop = NULL, .progress = 0};
    return o;
}

enum ats_status ld_record_run(ld_probe *p, const ld_baseline *base, const ld_record_opts *o, atsc_trace **out,
                              ld_record_stats *stats, ats_err *err)
{
    *out = NULL;
    if (!(o->interval_s > 0) || !(o->duration_s > 0) || o->duration_s / o->interval_s > 1e8)
        return ats_err_set(err, ATS_EINVAL, "record: bad interval %g s / duration %g s", o->interval_s,
                           o->duration_s);
    size_t cap = (size_t)ceil(o->duration_s / o->interval_s) + 1;
    atsc_trace *tr = atsc_trace_new(cap);
    if (!tr) return ats_err_set(err, ATS_ENOMEM, "record: out of memory for %zu samples", cap);
    memset(stats, 0, sizeof *stats);
    enum ats_status st = ATS_OK;
    double t0 = now_s(), last_progress = t0;
    size_t n = 0;
    /* sample n is due at n * interval for n = 0 .. floor(duration / interval) (a relative 1e-9 of slack
     * so that 1800 * 0.1 counts as 180: the last sample lands at t = duration, and the trace covers the
     * whole duration); one that comes late (slow probes) is still taken unless it would fall more than
     * half an interval past the end */
    const double end_s = o->duration_s * (1 + 1e-9);
    for (size_t i = 0; i < cap; i++) {
        if (o->stop && *o->stop) break;
        double ts = now_s();
        if (n > 0 && ts - t0 > o->duration_s + 0.5 * o->interval_s) break;
        double t[ATSC_RES_COUNT];
        if ((st = ld_probe_measure(p, t, err)) != ATS_OK) break;
        tr->t_s[n] = n == 0 ? 0.0 : ts - t0;
        if (n > 0 && !(tr->t_s[n] > tr->t_s[n - 1])) tr->t_s[n] = nextafter(tr->t_s[n - 1], INFINITY);
        for (int r = 0; r < ATSC_RES_COUNT; r++) {
            atsc_trace_res(tr, (enum atsc_resource)r)[n] = ld_avail_from_times(base->t_s[r], t[r]);
            if (!isnan(t[r])) stats->probe_s[r] += t[r];
        }
        n++;
        if (n == 1) t0 = ts; /* t = 0 at the first sample */
        double now = now_s();
        if (o->progress && now - last_progress >= 10.0) {
            last_progress = now;
            fprintf(stderr, "record: %6.1f s, %zu samples, last cpu %.3f gpu %.3f pcie %.3f\n", now - t0, n,
                    tr->cpu_avail[n - 1], tr->gpu_avail[n - 1], tr->pcie_avail[n - 1]);
        }
        if ((double)n * o->interval_s > end_s) break; /* the next sample would be past the end */
        sleep_until(t0 + (double)n * o->interval_s);
    }
    stats->wall_s = now_s() - t0;
    stats->samples = n;
    double busy = stats->probe_s[0] + stats->probe_s[1] + stats->probe_s[2];
    stats->duty = stats->wall_s > 0 ? busy / stats->wall_s : 0;
    if (st != ATS_OK || n == 0) {
        atsc_trace_free(tr);
        if (st == ATS_OK) st = ats_err_set(err, ATS_EINVAL, "record: stopped before the first sample");
        return st;
    }
    tr->n = n;
    *out = tr;
    return ATS_OK;
}
