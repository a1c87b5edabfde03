/*
 * sim/engine.h — the discrete-event core of the simulator: fluid resources with piecewise-constant
 * rates, max-min fair sharing of the PCIe link, host-memory interference, load-trace replay.
 *
 * A round is described as a *program* (sim_prog): tasks, each on one in-order queue (the CPU
 * thread, the GPU compute stream, or one copy engine), each with a list of tasks it waits for.
 * The plan → program translation (sim/session.h) encodes the executor's dependency rules; the
 * engine knows nothing about ops or plans, only work, queues and dependencies.
 *
 * Resources (DESIGN.md "What the simulator models"):
 *  - CPU: one task at a time; with a = cpu_avail, speed = 1 / max(flop_frac / a, mem_frac /
 *    (f_hm · β(a))): the compute share slows by a, the memory share by β(a) = ats_hw_cpu_mem_share(hw, a)
 *    = bw(a · cpu_threads) / bw(cpu_threads), the DRAM read rate over threads of the description
 *    (cpu.mem_bw_over_threads; β(a) = a without it, which gives a / max(flop_frac, mem_frac / f_hm)
 *    bit for bit). f_hm is the host-memory factor: 1 - (1 - hostmem_cpu_factor) · min(1, DMA rate /
 *    (pcie_h2d_bw · hostmem_dma_factor)); at the measured point (a copy engine streaming while 8
 *    threads read) this gives exactly the DESIGN.md table's pair of rates.
 *  - GPU compute stream: one task at a time (GPU op at speed gpu_avail, or an SM copy flow).
 *  - PCIe, one link per direction of capacity pcie_link_bw · pcie_avail, shared by its flows by
 *    max-min fairness with per-flow caps (copy engine: pcie_h2d_bw / pcie_d2h_bw, SM copy kernel:
 *    pcie_sm_copy_bw, each · pcie_avail). Host-to-device flows read host memory: their caps are
 *    multiplied by 1 - (1 - hostmem_dma_factor) · u_cpu, u_cpu the memory share of the CPU task.
 *  - Every transfer first waits pcie_latency_s (not shared), then moves its bytes; a transfer of
 *    0 bytes (e.g. a prefetch already done) takes no time.
 *  - The load trace multiplies the rates at its change points; remaining work carries over.
 *
 * Lifecycle: sim_engine_new(hw, trace) → sim_engine_run(prog) per round (time advances) →
 * sim_engine_free. sim_prog_init / sim_prog_add / sim_prog_clear build programs; a program can be
 * run many times (the engine writes only its result fields). Single-threaded and deterministic:
 * the event queue is a binary heap ordered by (time, insertion sequence). No allocation per event.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include <stdint.h>

#include "ats/hw.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Queue index of the CPU thread and of the GPU compute stream; copy engine e is SIM_Q_CE0 + e. */
enum { SIM_Q_CPU = 0, SIM_Q_GPU = 1, SIM_Q_CE0 = 2 };
/** Most copy engines the engine models. */
#define SIM_MAX_CE 8
#define SIM_MAX_QUEUES (SIM_Q_CE0 + SIM_MAX_CE)

typedef enum sim_task_kind {
    SIM_TASK_CPU = 0,  /**< CPU op: work = seconds at idle speed, slowed by load and host memory */
    SIM_TASK_GPU,      /**< GPU op: work = seconds at idle speed, slowed by gpu load */
    SIM_TASK_CE_H2D,   /**< copy-engine host→device transfer: work = bytes */
    SIM_TASK_CE_D2H,   /**< copy-engine device→host transfer: work = bytes */
    SIM_TASK_SM_H2D,   /**< SM copy kernel reading zero-copy host memory: work = bytes */
    SIM_TASK_SM_D2H,   /**< SM copy kernel writing zero-copy host memory: work = bytes */
    SIM_TASK_KIND_COUNT
} sim_task_kind;

/** Resource classes for statistics and the timeline. */
typedef struct sim_task {
    /* input */
    uint8_t kind;       /**< sim_task_kind */
    uint8_t queue;      /**< SIM_Q_CPU, SIM_Q_GPU or SIM_Q_CE0 + e */
    uint8_t tag;        /**< caller's label (e.g. weight vs activation transfer); not used */
    double work;        /**< [s] at idle speed (CPU/GPU) or [bytes] (transfers) */
    double mem_frac;    /**< CPU: memory-time share of the roofline at idle (0..1); default 1 */
    double flop_frac;   /**< CPU: compute-time share of the roofline at idle (0..1); default 0 */
    double latency_s;   /**< transfers: fixed time before the bytes move, beyond the link's latency
                             (an activation crossing's host switch) [s]; default 0 */
    int32_t op;         /**< caller's op index (or -1) */
    int32_t dep_off;    /**< first entry in sim_prog.deps */
    int32_t n_dep;      /**< number of tasks this one waits for (all earlier in the program) */
    /* output of the last sim_engine_run */
    double t_start_s;   /**< when the task began (after its dependencies and its queue) [s] */
    double t_end_s;     /**< when it finished [s] */
} sim_task;

/** A round program: tasks in insertion order, dependencies as indices of earlier tasks. */
typedef struct sim_prog {
    sim_task *tasks;
    int32_t n, cap;
    int32_t *deps;
    int32_t n_deps, cap_deps;
} sim_prog;

/** Empty program (no allocation until the first add). */
void sim_prog_init(sim_prog *p);
void sim_prog_free(sim_prog *p);
/** Forgets the tasks, keeps the storage. */
void sim_prog_clear(sim_prog *p);
/**
 * Appends a task on `queue` with `n_dep` dependencies `deps` (indices of earlier tasks; borrowed,
 * copied). Returns the new task's index in *out_idx. ATS_ENOMEM; ATS_EINVAL (message in err) for a
 * dependency that is not an earlier task, a negative or NaN work, a bad kind/queue pairing (CPU on
 * SIM_Q_CPU, GPU and SM copies on SIM_Q_GPU, copy-engine transfers on a SIM_Q_CE0 + e queue).
 */
enum ats_status sim_prog_add(sim_prog *p, sim_task_kind kind, int queue, double work,
                             const int32_t *deps, int32_t n_dep, int32_t *out_idx, ats_err *err);
/** Adds one dependency to the last task added (dep < index of that task). */
enum ats_status sim_prog_add_dep(sim_prog *p, int32_t dep, ats_err *err);

/** A load trace in memory (borrowed arrays, n ≥ 1, t_s[0] = 0, strictly increasing; each value in
 *  (0, 1] holds until the next t_s). Validated by the trace loader (common/). */
typedef struct sim_trace {
    int32_t n;
    const double *t_s, *cpu, *gpu, *pcie;
} sim_trace;

/** Engine options. */
typedef struct sim_engine_opts {
    int hostmem;          /**< 1 = model host-memory interference (default), 0 = off */
    double trace_offset_s;/**< simulated time 0 maps to this trace time [s] (default 0); after the
                               last change point its values hold forever */
} sim_engine_opts;
sim_engine_opts sim_engine_opts_default(void);

/** Statistics accumulated over all runs since sim_engine_new (or sim_engine_reset_stats). */
typedef struct sim_stats {
    uint64_t events;          /**< events popped and processed (stale ones excluded) */
    uint64_t tasks;           /**< tasks completed */
    double busy_s[SIM_MAX_QUEUES]; /**< time each queue had a task running [s] */
    double gpu_op_busy_s;     /**< time the GPU executed GPU ops (not copies) [s] */
    double bytes_h2d;         /**< bytes moved host→device (all flows) [bytes] */
    double bytes_d2h;         /**< bytes moved device→host [bytes] */
} sim_stats;

/** Called when a task ends (for timelines); `user` as given to sim_engine_set_hook. */
typedef void (*sim_task_hook)(void *user, const sim_prog *p, int32_t task);
/** Called when the PCIe h2d rate changes (for bandwidth counters): time [s], rate [bytes/s]. */
typedef void (*sim_rate_hook)(void *user, double t_s, double h2d_bytes_per_s, double d2h_bytes_per_s);

typedef struct sim_engine sim_engine;

/**
 * New engine at simulated time 0. `hw` is copied; `trace` is borrowed (must outlive the engine; NULL
 * = idle machine). ATS_EINVAL when hw is invalid or has more than SIM_MAX_CE copy engines.
 */
enum ats_status sim_engine_new(const ats_hw *hw, const sim_trace *trace, const sim_engine_opts *opts,
                               sim_engine **out, ats_err *err);
void sim_engine_free(sim_engine *e);

/** Current simulated time [s]. */
double sim_engine_now(const sim_engine *e);
/** Load factors at the current time (trace lookup). */
void sim_engine_avail(const sim_engine *e, double *cpu, double *gpu, double *pcie);
/** Advances the clock to t (≥ now) with nothing running (idle gap). */
void sim_engine_advance(sim_engine *e, double t_s);

/**
 * Runs a program from the current time until every task has finished; the clock ends at the last
 * finish. Writes t_start_s / t_end_s of every task. `p` is borrowed; its task inputs are not
 * modified. ATS_EINVAL if a task's queue does not exist on this hardware (copy engine ≥ n).
 * Deterministic. Not thread-safe on one engine; distinct engines are independent.
 */
enum ats_status sim_engine_run(sim_engine *e, const sim_prog *p, ats_err *err);

/** Statistics since creation (borrowed pointer, valid while the engine lives). */
const sim_stats *sim_engine_stats(const sim_engine *e);
void sim_engine_reset_stats(sim_engine *e);
/** Hooks (NULL to remove). */
void sim_engine_set_hook(sim_engine *e, sim_task_hook task_hook, sim_rate_hook rate_hook, void *user);

/**
 * Max-min fair share with caps (water-filling), exposed for tests: `n` flows with caps `cap`
 * [bytes/s] on a link of capacity `capacity` [bytes/s]; writes `rate`. Each flow gets
 * min(cap, fair level), the level chosen so that Σ rate = min(capacity, Σ cap). n ≤ 16.
 */
void sim_maxmin_share(int n, const double *cap, double capacity, double *rate);

#ifdef __cplusplus
}
#endif
#endif
