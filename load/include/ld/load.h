/*
 * ld/load.h — real machine load: probes that measure how much of the idle machine's CPU, GPU and PCIe
 * speed is left (`ats record`), and a stressor that generates background load following a load trace
 * (`ats stress`). Both write / read the load-trace schema of DESIGN.md through atsc/trace_io.h.
 *
 * Probes (ld_probe): a fixed CPU GEMV (float, row-major (rows, cols), rows split in chunks over a pool
 * of `threads` pthreads, like the inference threads), a short GPU kernel (dependent FMAs on every SM),
 * and a 16 MiB host-to-device copy from pinned memory. Availability of a resource =
 * idle probe time / probe time now, clipped to [0.01, 1]. The idle baseline is measured first (or read
 * from a file written on the idle machine). Probes run one after another, never concurrently, so they
 * do not load each other; their summed wall time over the interval is their duty cycle.
 *
 * Stressor: per resource k "hogs" (CPU: k spinning threads per probe thread; GPU: k processes, each
 * its own CUDA context launching busy kernels; PCIe: k processes copying host-to-device). All hogs
 * of a resource are busy together for d*P of every period P, at a pseudo-random phase within the period
 * (ld_stress_window), and sleep the rest. At d = 0 they sleep on a futex until the duty changes (no
 * periodic wake-ups); GPU and PCIe hogs wait for their kernels and copies on blocking-sync events (no
 * CPU burnt while waiting); CPU hogs never touch the GPU.
 * With a fair-share scheduler a victim running next to k busy hogs gets 1/(k+1) of the resource, so
 * its availability is  a = 1 - d * k / (k+1)  (ld_stress_avail), and the duty for a target a is
 * d = (1 - a) (k+1) / k  (ld_stress_duty), feasible when a >= 1/(k+1) (ld_stress_hogs_needed).
 * A calibration (ld_stress_calibrate) measures the real availability at a few model levels with the
 * probes; ld_stress_calib_invert then maps a target through it.
 *
 * Closed loop (ld_stress_run_closed, `ats stress --baseline FILE`): the stressor runs the very probes of
 * `ats record` against the same idle baseline every control interval (a few probes at random moments,
 * only of the resources under control) and trims each resource's duty with an integral controller
 * (ld_ctl_update: feed-forward from the model / calibration, integral trim, anti-windup, reset at
 * target steps; a resource whose target is 1 is not controlled and its hogs are off). Probes of all
 * ats processes on a machine take one flock (ld_probe_opts.lock_path) so that the stressor's and the
 * recorder's probes never overlap.
 *
 * Without a GPU (no driver or no device): probes measure the CPU only (GPU and PCIe stay 1, and the
 * trace's description says so); the stressor refuses traces with GPU or PCIe load (ATS_ENOTFOUND).
 * Nothing here calls exit(); stop flags make every long call return early (SIGINT/SIGTERM handlers in
 * the CLI set them). Handles are not thread-safe.
 */
#ifndef LD_LOAD_H
#define LD_LOAD_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "ats/status.h"
#include "atsc/trace_io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ probes ---------------------- */

typedef struct ld_probe_opts {
    int threads;          /**< CPU probe threads (the inference thread count); <= 0: ld_usable_cpus() */
    size_t gemv_rows;     /**< GEMV matrix rows (default 2048) */
    size_t gemv_cols;     /**< GEMV matrix columns (default 2048: 16 MiB of float) */
    double cpu_target_s;  /**< idle duration of one CPU probe [s] (repetitions chosen to reach it; 2e-3) */
    double gpu_target_s;  /**< idle duration of one GPU probe kernel [s] (1e-3) */
    size_t copy_bytes;    /**< PCIe probe copy size [bytes] (16 MiB) */
    int use_gpu;          /**< 1: probe GPU and PCIe if a device exists; 0: CPU only */
    int device;           /**< CUDA device index (0) */
    int cpu_reps;         /**< > 0: GEMV repetitions per CPU probe, fixed (from a baseline); 0: calibrate */
    long gpu_iters;       /**< > 0: busy-kernel iterations, fixed (from a baseline); 0: calibrate */
    const char *lock_path; /**< file flock'ed around each ld_probe_measure, shared by every ats process
                                that probes ("/tmp/ats-probes.lock"); NULL: no lock */
    double max_probe_s;   /**< a CPU probe still running after this wall time [s] is cut there (its
                               time then reads >= max_probe_s, availability at the clip floor); 1.0 */
    const volatile sig_atomic_t *stop; /**< optional (a signal handler's flag): a CPU probe stops within one
                                   32-row chunk once *stop != 0 (its time is then not meaningful) */
    long slice_ns;        /**< scheduler time slice asked for by the CPU probe threads [ns] (ld_sched_slice;
                               LD_SLICE_NS_DEFAULT = 0.1 ms); 0: the kernel's default. On the H200 host
                               (Linux 6.18, EEVDF) a woken probe thread with the default slice (~3 ms on 16
                               CPUs) often ran its whole 2 ms probe before the hogs got the CPU back: the
                               recorder read CPU +23...+55% above the target while the stressor's own
                               probes read it on target; with 0.1 ms slices for probes and hogs -6%
                               (experiments/stress-accuracy/README.md) */
    int pin;              /**< 1: probe thread j runs only on the j-th CPU of the process's affinity set
                               (modulo its size; ld_pin_self). H200 (experiments/stress-accuracy/
                               observers.sh): two recorders of one CPU stressed to 0.4
                               read 0.425 / 0.388 unpinned, 0.400 / 0.436 and 0.379 / 0.385 pinned — pinning
                               did not remove the disagreement. 0: unpinned */
    int private_matrix;   /**< 0 (default): the CPU probe's matrix is one POSIX shared-memory object
                               (ld_probe_matrix_name), the same physical pages in every ats process; 1 (or
                               ATS_PROBE_PRIVATE=1 in the environment, read by ld_probe_opts_default): a
                               private copy (malloc; also the fallback where the
                               shared object cannot be used, ld_probe_describe says why). Private copies
                               ran at 0.243-0.314 ms a GEMV at idle in 17 processes on the H200, and two
                               recorders sharing one baseline read one stressed CPU up to 21% apart; the
                               shared matrix does not remove that per-process factor (idle 0.295-0.366 ms
                               shared, 0.299-0.428 private; experiments/stress-accuracy/README.md) */
} ld_probe_opts;

ld_probe_opts ld_probe_opts_default(void);

/** The POSIX shared-memory name of the CPU probe's (rows, cols) float matrix, "/ats-probe-a1-RxC" (the object
 *  is /dev/shm/ats-probe-a1-RxC: made by the first probe, kept for every later one; removing it is harmless). */
void ld_probe_matrix_name(size_t rows, size_t cols, char *buf, size_t len);

/** Default ld_stress_opts.stagger: the hogs of every resource staggered. */
#define LD_STRESS_STAGGER_DEFAULT ((1u << ATSC_RES_CPU) | (1u << ATSC_RES_GPU) | (1u << ATSC_RES_PCIE))

/** CPUs this process may run on (its sched_getaffinity set; `taskset` narrows it), else the online CPUs: the
 *  default thread count of the probes (ld_probe_opts.threads) and of the stressor (ld_stress_opts.threads). */
int ld_usable_cpus(void);

/** Pins the calling thread to the (j mod n)-th CPU of the process's CPU affinity set (n CPUs in it,
 *  read with sched_getaffinity of the calling thread before pinning, so call it once per thread,
 *  first thing). Returns 0 or an errno value (the thread then stays unpinned). */
int ld_pin_self(int j);

/** Default EEVDF slice of probe and CPU hog threads [ns] (ld_probe_opts.slice_ns, ld_stress_opts.hog_slice_ns). */
#define LD_SLICE_NS_DEFAULT 100000L

/** Asks the scheduler for a time slice of `ns` nanoseconds for the calling thread (Linux >= 6.12: EEVDF
 *  slice request, sched_attr.sched_runtime of a SCHED_OTHER thread, kernel range 0.1-100 ms; older
 *  kernels ignore it). ns <= 0 does nothing. Returns 0 or an errno value. */
int ld_sched_slice(long ns);



typedef struct ld_probe ld_probe;

/** Creates the probes: allocates the GEMV (seeded, non-zero data), starts the thread pool, calibrates
 *  the repetition counts, and (with use_gpu and a device) creates a CUDA stream, the kernel's work size
 *  and pinned/device buffers. No GPU is not an error: ld_probe_has_gpu says 0. Returns ATS_OK,
 *  ATS_EINVAL (bad option), ATS_ENOMEM. *out freed with ld_probe_free. */
enum ats_status ld_probe_new(const ld_probe_opts *opts, ld_probe **out, ats_err *err);
void ld_probe_free(ld_probe *p);

/** 1 if GPU and PCIe probes run. */
int ld_probe_has_gpu(const ld_probe *p);

/** Runs the probes once, in order CPU, GPU, PCIe; writes each one's wall time [s] into t_s[ATSC_RES_*]
 *  (NAN for GPU/PCIe without a GPU). Returns ATS_OK or ATS_EINVAL (a CUDA call failed; message).
 *  Holds the probe lock (opts.lock_path) meanwhile: waits for another process's probes (at most
 *  0.2 s, then probes anyway and counts a lock timeout; after a timeout later sets do not wait until
 *  the lock is free again: a stuck holder costs one 0.2 s wait); the wait is not part of the times. */
enum ats_status ld_probe_measure(ld_probe *p, double t_s[ATSC_RES_COUNT], ats_err *err);

/** As ld_probe_measure, but only the probes of resources r with bit (1 << r) in `mask`; the others'
 *  times are NAN. */
enum ats_status ld_probe_measure_some(ld_probe *p, unsigned mask, double t_s[ATSC_RES_COUNT], ats_err *err);

/** Probe-lock statistics: sets that had to wait for another process's probes, total wait [s], sets
 *  that ran without the lock (after a 0.2 s wait, or at once while the holder seemed stuck), and
 *  whether the lock file could not be opened (*unlocked). Any pointer may be NULL. */
void ld_probe_lock_stats(const ld_probe *p, long *waited, double *wait_s, long *timeouts, int *unlocked);

/** One line describing the probes (sizes, threads, repetitions, device). */
void ld_probe_describe(const ld_probe *p, char *buf, size_t len);

/** Idle probe times [s] per resource (NAN: not measured), with the probe sizes they belong to: a
 *  recorder using a saved baseline must run the very same probes (same repetitions and threads). */
typedef struct ld_baseline {
    double t_s[ATSC_RES_COUNT];
    int cpu_reps;   /**< GEMV repetitions per CPU probe */
    long gpu_iters; /**< busy-kernel iterations (0 without GPU) */
    int threads;    /**< CPU probe threads */
    long slice_ns;  /**< the probe threads' scheduler slice when it was measured (ld_probe_opts.slice_ns);
                         -1: not recorded (a file of 6 fields, before the slice existed) */
} ld_baseline;

/** Measures the baseline: median of the probe times over `seconds` of samples every interval_s.
 *  Returns early (ATS_EINVAL, "interrupted") when *stop becomes non-zero. */
enum ats_status ld_probe_baseline(ld_probe *p, double seconds, double interval_s, const volatile sig_atomic_t *stop,
                                  ld_baseline *out, ats_err *err);

/** Baseline as one text line "cpu_s gpu_s pcie_s cpu_reps gpu_iters threads" (times may be nan); save
 *  writes tmp + rename; load refuses anything else with the file, field and value. */
enum ats_status ld_baseline_save(const ld_baseline *b, const char *path, ats_err *err);
enum ats_status ld_baseline_load(const char *path, ld_baseline *b, ats_err *err);

/** Fixes the probe sizes of *o to those the baseline was measured with (threads, GEMV repetitions,
 *  busy-kernel iterations), so that probe times compare with b->t_s. */
void ld_probe_opts_from_baseline(ld_probe_opts *o, const ld_baseline *b);

/** Writes a small text file through a temporary + fsync + rename (atsc/outfile.h): calls
 *  write(f, ctx) on the open temporary (it returns 0, or -1 after a failed write), then commits.
 *  `what` names the file in messages ("baseline", "calibration", "control log"). The one writer of the
 *  baseline, the calibration table and `ats stress --log`. ATS_OK, ATS_EINVAL (names path). */
enum ats_status ld_text_save(const char *path, const char *what, int (*write)(FILE *f, const void *ctx),
                             const void *ctx, ats_err *err);

/** Availability from a baseline and a probe time: base / t clipped to [0.01, 1]; 1 when either is NAN. */
double ld_avail_from_times(double base_s, double t_s);

/* ------------------------------------------------------------------ recorder -------------------- */

typedef struct ld_record_opts {
    double interval_s;                 /**< sampling interval Δ [s] (0.1) */
    double duration_s;                 /**< recording length [s] (60) */
    const volatile sig_atomic_t *stop; /**< optional: non-zero ends the recording early (kept) */
    int progress;                      /**< 1: one status line on stderr every 10 s */
} ld_record_opts;

ld_record_opts ld_record_opts_default(void);

typedef struct ld_record_stats {
    size_t samples;                    /**< samples written */
    double wall_s;                     /**< recording wall time [s] */
    double probe_s[ATSC_RES_COUNT];    /**< summed probe wall time per resource [s] */
    double duty;                       /**< sum(probe_s) / wall_s: fraction of time a probe runs */
} ld_record_stats;

/** Samples every interval (absolute schedule on CLOCK_MONOTONIC; a late sample starts at once) and
 *  returns a new trace (*out; caller frees) with t_s = sample start since the first one. Resources the
 *  probes do not measure are 1. The trace's source/machine/description are left for the caller.
 *  Returns ATS_OK (also when stopped early with >= 1 sample), ATS_EINVAL, ATS_ENOMEM. */
enum ats_status ld_record_run(ld_probe *p, const ld_baseline *base, const ld_record_opts *opts, atsc_trace **out,
                              ld_record_stats *stats, ats_err *err);

/* ------------------------------------------------------------------ stressor -------------------- */

/** Availability of a victim next to k hogs busy a fraction d of the time: 1 - d k / (k+1).
 *  d is clipped to [0, 1]; k >= 1. */
double ld_stress_avail(double duty, int k);
/** Duty giving availability a next to k hogs: (1 - a)(k+1)/k, clipped to [0, 1] (1 when a < 1/(k+1)). */
double ld_stress_duty(double avail, int k);
/** The same two for hogs staggered over the period (ld_stress_opts.stagger): about d k of the k hogs busy at
 *  any moment, a fair share of 1 / (1 + d k); duty (1/a - 1) / k, clipped to [0, 1]. Same ends as the
 *  synchronized model (a = 1 at d = 0, 1/(k+1) at d = 1). staggered = 0: ld_stress_avail / ld_stress_duty. */
double ld_stress_avail_st(double duty, int k, int staggered);
double ld_stress_duty_st(double avail, int k, int staggered);
/** Smallest k >= 1 with 1/(k+1) <= a_min (the lowest availability to produce), a_min in (0, 1]. */
int ld_stress_hogs_needed(double a_min);

/** Most hogs per resource (per probe thread for the CPU): the limit of `ats stress --hogs-*`, and the
 *  cap of every automatic count (a trace down to the clip floor 0.01 would ask for 99 .. 249). */
#define LD_STRESS_K_MAX 64


/** Busy window of hogs with period P = period_s counted from epoch_s (CLOCK_MONOTONIC [s]): in every
 *  period the hogs are busy for duty·P (duty clipped to [0, 1]) on a CIRCULAR window starting at a
 *  pseudo-random offset u·P that depends only on the period index (all hogs of a resource agree),
 *  wrapping around to the period's start when it passes the end. So a victim sampling at any fixed
 *  phase of the period (the recorder every 0.1 s = 5 periods of 20 ms) is inside it with probability
 *  duty, not 0 or 1. Returns the busy interval [*busy_start_s, *busy_end_s) that contains now_s or
 *  comes next in this period (empty at the period's end when none is left) and *period_end_s, the
 *  moment to ask again: the start of the main part after a wrapped part, else the period's end.
 *  Callers: sleep until busy_start, be busy until busy_end, sleep until period_end, repeat.
 *  shift in [0, 1): this hog's offset is frac(u + shift)·P (0: all hogs together; i/k for hog i of k:
 *  staggered, floor(d·k) or ceil(d·k) of them busy at any moment). */
void ld_stress_window(double epoch_s, double period_s, double duty, double shift, double now_s,
                      double *busy_start_s, double *busy_end_s, double *period_end_s);

/** Calibration: measured availability at model availabilities m_i (decreasing), per resource. */
#define LD_CALIB_MAX 16
typedef struct ld_stress_calib {
    int k[ATSC_RES_COUNT];                 /**< hogs per resource the table was measured with */
    int n[ATSC_RES_COUNT];                 /**< levels measured (0: uncalibrated resource) */
    double model[ATSC_RES_COUNT][LD_CALIB_MAX];    /**< model availability, decreasing, model[0] = 1 */
    double measured[ATSC_RES_COUNT][LD_CALIB_MAX]; /**< probe availability there, made non-increasing */
} ld_stress_calib;

/** Model availability to ask for so that the measured one is `target`, by linear interpolation in the
 *  table of resource r (identity when uncalibrated; clipped to the lowest level). */
double ld_stress_calib_invert(const ld_stress_calib *c, enum atsc_resource r, double target);
enum ats_status ld_stress_calib_save(const ld_stress_calib *c, const char *path, ats_err *err);
enum ats_status ld_stress_calib_load(const char *path, ld_stress_calib *c, ats_err *err);

struct ld_stress_step;

typedef struct ld_stress_opts {
    int threads;                       /**< probe threads T the CPU hogs are sized for (<= 0: ld_usable_cpus()) */
    int k[ATSC_RES_COUNT];             /**< hogs per resource (0: ld_stress_hogs_needed of the trace) */
    double period_s;                   /**< duty period P [s] (0.02) */
    double duration_s;                 /**< run length [s] (<= 0: the target trace's duration) */
    double delay_s;                    /**< wait before t = 0 of the trace [s] */
    const ld_stress_calib *calib;      /**< optional calibration (borrowed) */
    const volatile sig_atomic_t *stop; /**< non-zero: stop all hogs and return */
    int device;                        /**< CUDA device (0) */
    int verbose;                       /**< 1: print each change of the targets on stderr */
    long hog_slice_ns;                 /**< scheduler slice of the CPU hog threads [ns] (LD_SLICE_NS_DEFAULT;
                                            0: the kernel's default); see ld_probe_opts.slice_ns */
    int pin;                           /**< 1: the stressor's probe threads pinned as ld_probe_opts.pin */
    int pin_hogs;                      /**< 1: CPU hog i runs only on CPU (i mod n) of the affinity set (n CPUs:
                                            hog i and hog i + n share a CPU, their windows staggered by n/k
                                            of a period). H200 fig13 (experiments/stress-accuracy): the recorder's GPU and
                                            PCIe probes then read 0.76-0.78 during the CPU-only phase (their
                                            host thread finds no CPU without hogs; unpinned 0.94-0.98) */
    unsigned stagger;                  /**< bit (1 << r): resource r's hogs are staggered, hog i of k runs its
                                            busy windows shifted by i/k of a period, so floor(d*k)..ceil(d*k)
                                            hogs are busy at any moment instead of all k or none
                                            (LD_STRESS_STAGGER_DEFAULT: all three). Together, each busy
                                            window held a victim behind all k hogs (H200 fig13: GPU probes
                                            read 0.1 or 0.9, CPU probes 0.14 or 1.0; the recorder's mean
                                            then wandered -6...+15% around the stressor's) */
    /* closed loop only (ld_stress_run_closed) */
    double interval_s;                 /**< control interval [s] (0.5) */
    int probes;                        /**< probe sets per interval, at random moments in it (5. H200 fig13 with
                                            `ats record` beside it, unpinned: 5 or 6 sets passed the 10 % check in
                                            3 of 3 runs, 3 sets in 1 of 4; experiments/stress-accuracy) */
    double ki_per_s;                   /**< integral gain [1/s] (ld_ctl_opts; 0.8) */
    double settle_s;                   /**< report: first seconds of each target segment left out (5) */
    double rebaseline_s;               /**< > 0: before the hogs start, the probe process re-measures the idle
                                            probe times for this long (one probe set every 0.1 s, medians) and
                                            they replace the baseline's times; its repetitions, threads and
                                            slice stay (0: the file's times). A diagnostic: on the H200 idle
                                            probe times varied between processes (0.29-0.37 ms a GEMV) where
                                            loaded ones agreed, and re-measured baselines widened four
                                            recorders' spread (0.294-0.327 against 0.318-0.331 with one file;
                                            experiments/stress-accuracy/README.md) */
    const char *lock_path;             /**< probe lock (ld_probe_opts.lock_path; "/tmp/ats-probes.lock") */
    const struct ld_probe_opts *probe; /**< optional probe sizes (borrowed; NULL: ld_probe_opts_default,
                                            as `ats record` uses); threads, repetitions and iterations
                                            always come from the baseline */
    void (*on_step)(void *ctx, const struct ld_stress_step *s); /**< optional: each control step */
    void *step_ctx;                    /**< passed to on_step (borrowed) */
} ld_stress_opts;

ld_stress_opts ld_stress_opts_default(void);

/** The hogs per resource that ld_stress_run (closed = 0) or ld_stress_run_closed (closed = 1) starts
 *  for `target` over opts->duration_s (<= 0: the trace's duration) into k[]: 0 where the trace does not
 *  load the resource; else opts->k[r] when > 0 (open loop with a calibration row: its k), else the
 *  default (open: ld_stress_hogs_needed of the lowest target, through the calibration when given;
 *  closed: of the lowest target / 2.5, at most LD_STRESS_K_DEFAULT_MAX), every automatic count capped
 *  at LD_STRESS_K_MAX. amin[] (may be NULL) gets the lowest target per resource. Returns a bit mask
 *  (1 << r) of the resources whose lowest target is below what k[r] hogs reach by the model
 *  (amin < 1/(k+1)): there the hogs run at duty 1 and the target is not reached. Pure. */
unsigned ld_stress_plan_hogs(const atsc_trace *target, const ld_stress_opts *opts, int closed,
                             int k[ATSC_RES_COUNT], double amin[ATSC_RES_COUNT]);

/** 1 if a CUDA device is usable; probed in a short-lived child process so that this process can still
 *  fork CUDA-using children afterwards. */
int ld_gpu_present(int device);

/** Generates load following `target` until its duration (or opts->duration_s) or *stop. Forks GPU and
 *  PCIe hog processes (only for resources the trace loads), starts CPU hog threads, sets their duties
 *  every 10 ms, then stops and reaps every hog before returning (also on errors and signals).
 *  Returns ATS_OK, ATS_ENOTFOUND (GPU/PCIe load asked but no GPU), ATS_EINVAL, ATS_ENOMEM. */
enum ats_status ld_stress_run(const atsc_trace *target, const ld_stress_opts *opts, ats_err *err);

/** Hogs of the stressor, for callers that set duties themselves. ld_hogs_start forks the GPU/PCIe
 *  hog processes for resources with k[r] > 0 (call it before this process touches CUDA) and starts
 *  k[CPU] * threads CPU hog threads, all idle (duty 0). ld_hogs_set sets a resource's duty in [0, 1]
 *  (takes effect at the next period). ld_hogs_stop stops, joins and reaps all of them and frees h. */
typedef struct ld_hogs ld_hogs;
enum ats_status ld_hogs_start(const ld_stress_opts *opts, const int k[ATSC_RES_COUNT], ld_hogs **out, ats_err *err);
void ld_hogs_set(ld_hogs *h, enum atsc_resource r, double duty);
/** 1 while every hog process of the set is alive (a crashed hog makes the stress run fail). */
int ld_hogs_alive(ld_hogs *h);
void ld_hogs_stop(ld_hogs *h);

/* ------------------------------------------------------------------ closed loop ----------------- */

/** One resource's controller. The controlled variable is u, the model availability asked of the hogs
 *  (duty = ld_stress_duty(u, k)); u = ff(target) + trim, where ff is the feed-forward (the calibration
 *  inverse, or the model itself: u = target) and trim the integral of the error. */
typedef struct ld_ctl_opts {
    double ki_per_s;             /**< integral gain [1/s]: trim -= ki * (measured - target) * dt. For the
                                      model plant (measured = u) the error shrinks by (1 - ki dt) a step:
                                      stable for ki dt < 2. Negative: a wrong-sign controller (tests) */
    int k;                       /**< hogs of the resource (>= 1): u in [1/(k+1), 1] is duty in [0, 1] */
    const ld_stress_calib *calib; /**< optional feed-forward table (borrowed) */
    enum atsc_resource res;      /**< the calibration table's row */
    double step_tol;             /**< a target change larger than this is a step (0.05); a smaller one
                                      (a recorded trace's wiggle) moves the feed-forward, keeps the trim */
    int staggered;               /**< 1: the hogs are staggered, duty = ld_stress_duty_st(u, k, 1) (0) */
} ld_ctl_opts;

ld_ctl_opts ld_ctl_opts_default(int k, enum atsc_resource res);

/** Controller state (caller-owned; ld_ctl_init before the first update). */
typedef struct ld_ctl {
    int active;     /**< 1: under control (target < 1); 0: hogs off */
    double target;  /**< target of the current segment (availability) */
    double trim;    /**< integral term [availability] */
    double u;       /**< model availability asked for by the last update */
    double duty;    /**< duty returned by the last update, in [0, 1] */
    int saturated;  /**< 1: the last update was clipped to u = 1/(k+1) (duty 1) or u = 1 (duty 0) */
} ld_ctl;

/** How far [model availability] the integral may run beyond the duty range (bounded windup). */
#define LD_CTL_WINDUP 0.25

void ld_ctl_init(ld_ctl *c);

/** One control step (pure: no clock, no I/O): target availability of this moment, `measured` the mean
 *  probe availability over the last dt_s [s] under the previous duty (NAN: none, hold). Returns the
 *  duty for the next interval, always in [0, 1]:
 *   - target >= 1 (or NAN): no control, state reset, duty 0 (hogs off);
 *   - a step (ld_ctl_is_step: inactive before, or |target - c->target| > step_tol): feed-forward
 *     jump, trim reset to 0, `measured` ignored (it belongs to the old target); a smaller change only
 *     moves the feed-forward (the trim is kept and integrates as below);
 *   - else trim -= ki * (measured - target) * dt_s, u = ff + trim, and the duty is that of u clipped
 *     to [1/(k+1), 1] (duty 1 .. 0). Anti-windup: the integral itself is kept within LD_CTL_WINDUP of
 *     that range, so after a stretch of an unreachable target it is back in a few steps.
 *  Over any stretch where the integral stays inside its band, sum((measured - target) dt) =
 *  -(trim change) / ki: the time average of the measured availability approaches the target even
 *  for a plant with a cliff (the loop dithers across it; a cliff near duty 1 is why the band is wider
 *  than the duty range: steps cut at the limit would bias the average). No adaptive gain: one that
 *  depends on the errors' signs biases the average of a dither. */
double ld_ctl_update(ld_ctl *c, const ld_ctl_opts *o, double target, double measured, double dt_s);

/** 1 if `target` is a step for c (see ld_ctl_update), or turns an active control off (target >= 1). */
int ld_ctl_is_step(const ld_ctl *c, const ld_ctl_opts *o, double target);

/** One control step of the closed loop (for logs): time since t = 0 [s], resource, target (mean over the
 *  interval's probe moments), mean probe availability over the interval (NAN: no probe), model
 *  availability u, duty, clipped or not. */
typedef struct ld_stress_step {
    double t_s;
    enum atsc_resource res;
    double target, measured, u, duty;
    int saturated;
    int probes; /**< probe sets averaged into measured */
} ld_stress_step;

/** Per segment between target steps of each resource: what the stressor's own probes saw. */
#define LD_STRESS_MAX_SEGS 96
typedef struct ld_stress_seg {
    enum atsc_resource res;
    double t0_s, t1_s;  /**< segment [s] from one target step to the next (t1: end of the run inside it) */
    double target;      /**< mean target over the reported steps (the step's target when none) */
    double measured;    /**< mean probe availability after settle_s (NAN: no probes: uncontrolled) */
    double duty;        /**< mean duty after settle_s */
    double sat_frac;    /**< fraction of those control steps clipped at duty 0 or 1 */
    size_t steps;       /**< control steps after settle_s */
} ld_stress_seg;

typedef struct ld_stress_report {
    int k[ATSC_RES_COUNT];      /**< hogs per resource */
    int nseg;                   /**< segments (LD_STRESS_MAX_SEGS at most; later ones not reported) */
    ld_stress_seg seg[LD_STRESS_MAX_SEGS];
    int nseg_dropped;           /**< segments after the first LD_STRESS_MAX_SEGS: not in seg[] */
    double wall_s;              /**< run time from t = 0 [s] */
    double probe_s[ATSC_RES_COUNT]; /**< the stressor's own probe wall time per resource [s] */
    double probe_duty;          /**< sum(probe_s) / wall_s */
    long lock_waits, lock_timeouts; /**< probe sets that waited for another process's probes / gave up */
    int rebased;                /**< 1: opts->rebaseline_s re-measured the idle times (below) */
    double base_file_s[ATSC_RES_COUNT], base_own_s[ATSC_RES_COUNT]; /**< idle probe times [s]: the baseline
                                     file's and the probe process's own (rebased; NAN: not measured) */
} ld_stress_report;

/** Closed-loop stressor: like ld_stress_run, but measures availability with the probes of `ats record`
 *  (sizes fixed from `base`, borrowed; its GPU/PCIe times must be present when the trace loads them)
 *  and sets each controlled resource's duty every opts->interval_s with ld_ctl_update (feed-forward
 *  from opts->calib when given), the error being the mean of (probe - target of the probe's moment).
 *  A target change is a step (trim reset, new report segment) when it exceeds step_tol and the new
 *  value holds at least max(1 s, 2 intervals); shorter changes (a recorded trace's 0.1 s wiggle) only
 *  move the feed-forward, and a brief 1.0 inside a loaded stretch pauses the hogs (duty 0) without
 *  ending the control. Hogs per resource: opts->k, or by default enough for 2.5 times
 *  less availability than the trace's lowest (room for a plant weaker than the model), at most
 *  LD_STRESS_K_DEFAULT_MAX. Only the probes of controlled resources run; probes x their idle times
 *  (from the baseline) must stay within 20 % of the interval (ATS_EINVAL). Fills *report (may be NULL). Returns as ld_stress_run; ATS_EINVAL for
 *  a baseline without GPU times when GPU/PCIe load is asked, or bad closed-loop options. */
/** Default hogs per resource of the closed loop at most (more with --hogs-*). */
#define LD_STRESS_K_DEFAULT_MAX 16

enum ats_status ld_stress_run_closed(const atsc_trace *target, const ld_stress_opts *opts, const ld_baseline *base,
                                     ld_stress_report *report, ats_err *err);

/** Prints the report of ld_stress_run_closed to f: a table per target segment (resource, span,
 *  target, what the probes saw, relative error, mean duty, saturated %, a note: "at the clip floor"
 *  for a target at 0.01, where probes cannot read lower and "on target" says nothing, or "below the
 *  hogs' reach by the model" for a target under 1/(k+1)), then "N more segments not reported" when
 *  segments were dropped, then one line of hogs, probe duty cycle and probe-lock counts.
 *  margin_s: the report margin (opts->settle_s) named in the header. */
void ld_stress_report_print(FILE *f, const ld_stress_report *rep, double margin_s);

/** Calibrates: starts hogs (opts->k, each >= 1 where to calibrate; 0 skips a resource), then creates the
 *  probes (`popts`), and for model levels 1, 0.85, 0.7, 0.55, 0.45, 0.4, 0.35, 0.3, 0.25 (down to 1/(k+1)) holds
 *  each resource at that level for settle_s and records the mean probe availability over measure_s
 *  (baseline: level 1). Other resources stay idle meanwhile. Output table in *out. */
enum ats_status ld_stress_calibrate(const ld_stress_opts *opts, const ld_probe_opts *popts, double settle_s,
                                    double measure_s, ld_stress_calib *out, ats_err *err);

#ifdef __cplusplus
}
#endif
#endif
