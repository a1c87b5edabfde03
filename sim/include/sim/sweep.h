/*
 * sim/sweep.h — the sweep driver behind `ats sweep`: simulates every (trace, policy, ε, τ) grid point,
 * each an independent seeded session (sim_session_run), on OpenMP threads and over the ranks of an MPI
 * job (sim/par.h), and gathers the rows in grid order on rank 0. A point's row depends on its inputs
 * only, so the table is bit for bit the same whatever the number of ranks and threads.
 *
 * Grid order: trace-major, then policy, ε, τ; a policy without a re-scheduling controller
 * (dynamic[p] == 0) has one point per trace (ε and τ do not change its result), with eps = interval = 0
 * in its row.
 *
 * Work assignment is dynamic (points differ in cost by orders of magnitude): on every rank, thread 0
 * talks to the other ranks and threads 1..T simulate, one point at a time. Rank 0 hands out grid
 * indices in order from one counter, one per idle thread of the asking rank, and collects the rows;
 * the other ranks ask when a thread is idle and report each point as it finishes (at least once a
 * second, so that rank 0 can tell a rank that stopped answering: after `rank_timeout_s` the run ends
 * with an error naming the rank, its host and its points in flight).
 *
 * Usage: sim_sweep_grid_init(&g, spec) → (resume: sim_sweep_resume_match) → sim_sweep_run on every
 * rank with the same spec → rank 0 reads g's arrays → sim_sweep_grid_free.
 */
#ifndef SIM_SWEEP_H
#define SIM_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "ats/arch.h"
#include "ats/hw.h"
#include "atsc/results.h"
#include "sim/par.h"
#include "sim/session.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What a sweep simulates (all pointers borrowed for the sweep's duration; the same on every rank). */
typedef struct sim_sweep_spec {
    const ats_arch *arch;
    const ats_hw *hw;
    const sim_session_cfg *base; /**< every flag but policy, re-schedule cost, ε and τ */
    int n_traces;
    const sim_trace *traces;     /**< (n_traces) */
    const double *trace_len_s;   /**< (n_traces) each trace's length [s] */
    const char *const *trace_names; /**< (n_traces) names for the rows (< ATSC_RESULTS_NAME_LEN bytes) */
    int trace_length_is_duration; /**< 1: each point runs for its trace's length minus the offset */
    int n_policies;
    const char *const *policies; /**< (n_policies) */
    const int *dynamic;          /**< (n_policies) 1: the policy has a controller (ε, τ apply) */
    const double *resched_s;     /**< (n_policies) re-schedule cost [s] */
    int n_eps, n_interval;
    const double *eps;           /**< (n_eps) thresholds (fractions) */
    const double *interval;      /**< (n_interval) τ: multiples of the recent TPOT, or [s] (interval_s) */
    int interval_s;              /**< 1: interval is in seconds */
} sim_sweep_spec;

/** A point's bookkeeping besides its row. */
typedef struct sim_sweep_done {
    int64_t requests;  /**< requests completed */
    double sim_s;      /**< simulated time [s] */
    int64_t rounds;    /**< rounds simulated */
} sim_sweep_done;

/** The grid and its results (rank 0 holds the results; other ranks only the point list). */
typedef struct sim_sweep_grid {
    const sim_sweep_spec *spec;
    long n;                  /**< points */
    int32_t (*pt)[4];        /**< (n, 4): trace, policy, ε index, τ index (0 for a policy without controller) */
    atsc_sweep_row *rows;    /**< (n) */
    enum ats_status *status; /**< (n) ATS_OK or the session's failure */
    ats_err *err;            /**< (n) the failure's message */
    sim_sweep_done *done;    /**< (n) */
    unsigned char *have;     /**< (n) 1: the row is known (simulated, or taken by sim_sweep_resume_match) */
} sim_sweep_grid;

/** Builds the point list and zeroed result arrays. ATS_ENOMEM. */
enum ats_status sim_sweep_grid_init(sim_sweep_grid *g, const sim_sweep_spec *spec, ats_err *err);
void sim_sweep_grid_free(sim_sweep_grid *g);

/** "fig13-synth / ats / eps 0.1 / interval 2 xTPOT" (or "fig13-synth / layer" without a controller) of
 *  point k into buf; returns buf. */
const char *sim_sweep_point_label(const sim_sweep_grid *g, long k, char *buf, size_t len);

/** Simulates point k alone (the unit of work of sim_sweep_run) into g's arrays at k. Thread-safe for
 *  distinct k. */
void sim_sweep_run_point(sim_sweep_grid *g, long k);

/** Options of sim_sweep_run. */
typedef struct sim_sweep_opts {
    int threads;              /**< simulating threads on this rank (>= 1) */
    double rank_timeout_s;    /**< rank 0 ends the run when another rank is silent this long [s] */
    /** Rank 0, from its thread 0, at most every 0.2 s and at the end: points done of total (both
     *  counting points taken from a previous file). May be NULL. */
    void (*progress)(void *ctx, long done, long total);
    /** Rank 0, from its thread 0, every checkpoint_s seconds: write the rows known so far (g->have).
     *  Returns 0, or non-zero to end the run (its message is the callback's to print). May be NULL.
     *  Called inside `omp critical(ats_hdf5)`, the lock every HDF5 use of libats_sim holds (Debian's
     *  HDF5 is not thread-safe; sessions may be reading a routing file meanwhile). */
    int (*checkpoint)(void *ctx, const sim_sweep_grid *g);
    double checkpoint_s;      /**< [s]; 0: never */
    void *ctx;
    /** Rank 0: where the driver publishes a line "N of M points done; in flight: point K (label) on
     *  rank R; ...\n", kept up to date as points start and finish (one of two buffers it owns, swapped after each update), for
     *  a signal handler to write(2). May be NULL. */
    const char *volatile *in_flight;
} sim_sweep_opts;

/**
 * Runs the points of g that are not yet known (g->have) over the ranks of p: every rank calls it with
 * the same grid. On rank 0 every point's row, status, message and bookkeeping are in g afterwards;
 * a point whose session failed is a status there, not a failure of the sweep. ATS_EIO (message)
 * when a rank stopped answering or a message could not be sent, or a checkpoint asked to stop;
 * ATS_ENOMEM. Other ranks return ATS_OK once rank 0 has told them that every point is handed out.
 */
enum ats_status sim_sweep_run(sim_par *p, sim_sweep_grid *g, const sim_sweep_opts *opt, ats_err *err);

/**
 * --resume: takes the rows of a previous `ats sweep` results file `prev` whose point is in g (same trace
 * name, policy, ε and τ within 1e-9 relative, same τ unit), setting g->have; a row without a mean TPOT
 * (a failed point, or one that completed no request) is left to simulate again, so its messages and the
 * exit code are those of a fresh run. `config_json` is this run's configuration: every field of it
 * but "policies" must be in prev's /config with the same value, and prev's producer must be "ats
 * sweep", else ATS_EINVAL naming the file and the field with both values. *n_taken (may be NULL)
 * receives the number of rows taken.
 */
enum ats_status sim_sweep_resume_match(sim_sweep_grid *g, const atsc_results_file *prev, const char *prev_path,
                                       const char *config_json, long *n_taken, ats_err *err);

/** 1 when a field of configuration b (JSON object text), other than skip_key (may be NULL), is missing
 *  from a or has another value there, with "field 'K' is A there, B here" in why; also 1 when either is
 *  not a JSON object; else 0. */
int sim_sweep_config_diff(const char *a_json, const char *b_json, const char *skip_key, char *why, size_t len);

#ifdef __cplusplus
}
#endif
#endif
