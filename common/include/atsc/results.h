/*
 * atsc/results.h — the one results schema (DESIGN.md) that `ats sim` and `ats run` both write, and
 * its reader (tests, `ats validate`, analysis/ reads the same layout with h5py).
 *
 * Layout of a results file (HDF5; common/README.md has the full table):
 *   /                      attributes: schema = "ats-results", schema_version (int), producer
 *                          ("ats sim" | "ats run"), version, commit, config (JSON text), seed,
 *                          model, hw, trace, policy (the runs' policies, comma-separated),
 *                          runs (the run names, comma-separated, in write order)
 *   /runs/<run>/           one group per run (usually one per policy); attributes: policy, config
 *   /runs/<run>/rounds     compound table, one row per round (atsc_round_row)
 *   /runs/<run>/ops        optional compound table, one row per op and round (atsc_op_row)
 *   /sweep                 optional compound table, one row per sweep grid point (atsc_sweep_row)
 *   /rounds, /ops          soft links to the only run's tables when the file holds exactly one run
 *
 * Writing streams: rows are buffered (a few thousand) and appended to chunked, extensible datasets,
 * so a long run never holds all its ops in memory. Everything is written to "<path>.tmp.<pid>" and
 * renamed to <path> by atsc_results_close(), so an interrupted run never leaves a half file where a
 * good one was; atsc_results_abort() removes the temporary file.
 *
 * Usage (writer): atsc_results_open → for each policy { atsc_results_begin_run; append rounds
 * (and ops) as the run goes } → optionally atsc_results_write_sweep → atsc_results_close.
 * Usage (reader): atsc_results_read → use f->runs[i].rounds … → atsc_results_file_free.
 * This module is the only one that talks to HDF5 about results; it turns HDF5's automatic error
 * printing off and reports failures as statuses whose message names the file and the dataset.
 * A writer handle is not thread-safe; distinct handles may be used from distinct threads only if
 * the HDF5 library was built thread-safe (Debian's serial build is not: serialise calls).
 */
#ifndef ATSC_RESULTS_H
#define ATSC_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Version of the layout above; bumped on any incompatible change. */
#define ATSC_RESULTS_SCHEMA_VERSION 1
/** Longest run name, policy name and sweep trace name [bytes, including the NUL]. */
#define ATSC_RESULTS_NAME_LEN 64

/** Phase of a round. */
typedef enum atsc_phase { ATSC_PHASE_PREFILL = 0, ATSC_PHASE_DECODE = 1 } atsc_phase;

/** One row of /runs/<run>/rounds. Simulated or wall-clock times, both in seconds since the start
 *  of the run. */
typedef struct atsc_round_row {
    int64_t index;       /**< round index in the run, from 0, strictly increasing */
    int32_t phase;       /**< atsc_phase */
    int32_t tokens;      /**< tokens processed in this round (prefill chunk size, or 1) [tok] */
    double t_start_s;    /**< start of the round [s] */
    double latency_s;    /**< duration of the round [s]; for decode rounds this is the TPOT sample */
    int32_t n_promoted;  /**< CPU-resident tensors promoted to the GPU this round */
    int32_t rescheduled; /**< 1 when the controller re-planned before this round, else 0 */
    uint64_t bytes_h2d;  /**< bytes moved host→device this round (weights + activations) [bytes] */
    double load_cpu;     /**< CPU speed factor the controller saw (ats_load.cpu), in (0, 4] */
    double load_gpu;     /**< GPU speed factor seen */
    double load_pcie;    /**< PCIe speed factor seen */
} atsc_round_row;

/** One row of /runs/<run>/ops: one op of one round. */
typedef struct atsc_op_row {
    int64_t round;       /**< round index (atsc_round_row.index) */
    int32_t op;          /**< op index in the graph's execution order */
    int32_t backend;     /**< ats_backend: 0 CPU, 1 GPU */
    double t_start_s;    /**< execution start [s since run start] */
    double t_end_s;      /**< execution end [s] */
    int32_t has_xfer;    /**< 1 when the op's weights moved host→device this round */
    int32_t copy_engine; /**< copy engine of the transfer (0-based); meaningful when has_xfer */
    double xfer_start_s; /**< weight transfer start [s]; NaN when has_xfer == 0 */
    double xfer_end_s;   /**< weight transfer end [s]; NaN when has_xfer == 0 */
} atsc_op_row;

/** One row of /sweep: one (trace, policy, ε, τ) grid point. */
typedef struct atsc_sweep_row {
    char trace[ATSC_RESULTS_NAME_LEN];  /**< trace name (file stem) */
    char policy[ATSC_RESULTS_NAME_LEN]; /**< policy name */
    double eps;             /**< re-scheduling threshold ε (fraction) */
    double interval;        /**< minimum re-scheduling interval τ: TPOT multiples or [s] (interval_in_tpot) */
    int32_t interval_in_tpot; /**< 1: interval is in multiples of the recent TPOT; 0: seconds */
    int32_t n_resched;      /**< re-schedules during the run */
    double tpot_mean_s;     /**< mean decode round latency [s] */
    double tpot_p50_s;      /**< median [s] */
    double tpot_p99_s;      /**< 99th percentile [s] */
    double decode_tok_s;    /**< decode throughput [tok/s] */
    double ttft_s;          /**< time to first token [s] */
} atsc_sweep_row;

/** Root metadata of a results file. All pointers borrowed for the duration of atsc_results_open;
 *  NULL strings are written as "". */
typedef struct atsc_results_meta {
    const char *producer;    /**< "ats sim", "ats run" or "ats sweep" */
    const char *config_json; /**< the full configuration as JSON text (must parse as JSON) */
    uint64_t seed;           /**< the run's seed */
    const char *model;       /**< model name ("qwen3-14b") */
    const char *hw;          /**< hardware description name ("rtx3060-laptop") */
    const char *trace;       /**< load trace name or path ("" for none) */
} atsc_results_meta;

/** Opaque writer handle. */
typedef struct atsc_results atsc_results;

/**
 * Creates "<path>.tmp.<pid>" (atsc/outfile.h: `path` must pass atsc_out_check — never a directory,
 * device or FIFO; the temporary is removed on SIGINT/SIGTERM) and writes the root attributes (plus
 * version and commit from the build). On success *out is a new writer; finish with
 * atsc_results_close (fsync, renames) or atsc_results_abort. ATS_EINVAL (bad argument, config_json
 * not valid JSON, file cannot be created; message names `path`, never the temporary), ATS_ENOMEM.
 */
enum ats_status atsc_results_open(const char *path, const atsc_results_meta *meta,
                                  atsc_results **out, ats_err *err);

/**
 * Starts run `run_name` (a group /runs/<run_name>; names: letters, digits, '-', '_', '.', '+', at
 * most ATSC_RESULTS_NAME_LEN-1 bytes, unique in the file) for `policy`, with its own configuration
 * `run_config_json` (JSON text or NULL for "{}"). `with_ops` creates /runs/<run>/ops. Flushes and
 * ends the previous run. ATS_EINVAL on a bad or duplicate name or an HDF5 failure.
 */
enum ats_status atsc_results_begin_run(atsc_results *w, const char *run_name, const char *policy,
                                       const char *run_config_json, int with_ops, ats_err *err);

/**
 * Appends n rounds (borrowed; copied) to the current run. Checks each row (index strictly
 * increasing across calls, phase 0/1, tokens >= 1, finite t_start_s, latency_s >= 0, rescheduled
 * 0/1, load factors finite and > 0); ATS_EINVAL names the run, the field and the row index.
 */
enum ats_status atsc_results_append_rounds(atsc_results *w, const atsc_round_row *rows, size_t n,
                                           ats_err *err);

/**
 * Appends n ops (borrowed; copied) to the current run, which must have been begun with with_ops.
 * Checks backend 0/1, op >= 0, t_end_s >= t_start_s, has_xfer 0/1 and, when set, finite
 * xfer_start_s <= xfer_end_s. ATS_EINVAL names run, field and row.
 */
enum ats_status atsc_results_append_ops(atsc_results *w, const atsc_op_row *rows, size_t n,
                                        ats_err *err);

/** Writes the /sweep table (n rows, borrowed; once per file). ATS_EINVAL on an HDF5 failure, a
 *  second call, or a row with empty/unterminated names or non-finite eps/interval. */
enum ats_status atsc_results_write_sweep(atsc_results *w, const atsc_sweep_row *rows, size_t n,
                                         ats_err *err);

/**
 * Flushes, writes the run list, closes the file and renames it to its final path. Frees w in all
 * cases. On failure the temporary file is removed and ATS_EINVAL names the file: a failed write
 * (disk full, file size limit) as "<path>: write failed: <strerror> (<where>)", also when an
 * earlier call already reported it.
 */
enum ats_status atsc_results_close(atsc_results *w, ats_err *err);

/** Closes and removes the temporary file, frees w. NULL is a no-op. */
void atsc_results_abort(atsc_results *w);

/**
 * For a program's main(), before any other HDF5 call (it has no effect after one): HDF5 is not shut
 * down at process exit. A writer here flushes before it closes and discards a file whose write failed,
 * so that its close cannot fail; where a close still fails (HDF5 1.10 then keeps the file's id pointing
 * at freed memory; seen when a failed flush could not truncate the file past RLIMIT_FSIZE), HDF5's own
 * exit handler would touch that id and the process would die of SIGSEGV after reporting the error.
 * Every file ATS writes is closed (or aborted and removed) explicitly, so nothing is lost. Not
 * thread-safe (call once).
 */
void atsc_h5_no_atexit(void);

/** Path of the temporary file being written (borrowed; valid until close/abort). */
const char *atsc_results_tmp_path(const atsc_results *w);

/** One run as read back. All arrays owned by the enclosing atsc_results_file. */
typedef struct atsc_results_run {
    char name[ATSC_RESULTS_NAME_LEN];
    char policy[ATSC_RESULTS_NAME_LEN];
    char *config_json;       /**< the run's configuration (JSON text) */
    size_t n_rounds;
    atsc_round_row *rounds;  /**< (n_rounds) */
    int has_ops;             /**< 1 when the run has an ops table */
    size_t n_ops;
    atsc_op_row *ops;        /**< (n_ops), NULL when has_ops == 0 or empty */
} atsc_results_run;

/** A whole results file as read back (owned by the caller; free with atsc_results_file_free). */
typedef struct atsc_results_file {
    int schema_version;
    char *producer, *version, *commit, *config_json, *model, *hw, *trace, *policy;
    uint64_t seed;
    size_t n_runs;
    atsc_results_run *runs;  /**< (n_runs), in write order */
    int has_sweep;
    size_t n_sweep;
    atsc_sweep_row *sweep;   /**< (n_sweep) */
} atsc_results_file;

/**
 * Reads and checks a results file: schema attribute and version, every root attribute present and
 * of string type (seed and schema_version integers), config JSON parses, each run's tables have
 * the members of the structs above, rounds and ops pass the same row checks as the writer.
 * On success *out is new (caller frees). On failure *out is NULL and err names the file and the
 * dataset or attribute (and the row index): ATS_ENOTFOUND when the file does not exist,
 * ATS_EINVAL otherwise, ATS_ENOMEM.
 */
enum ats_status atsc_results_read(const char *path, atsc_results_file **out, ats_err *err);

/**
 * atsc_results_read of a results tree stored under `group` (absolute, e.g. "/real") of a larger file:
 * the group carries the root attributes and holds runs/ (and sweep) exactly as a results file's root
 * does (`ats validate` keeps its two runs so, atsc/validate.h). "/" is atsc_results_read. Messages
 * name every attribute and dataset with the group in front ("out.h5: dataset '/sim/runs/ats/rounds'
 * row 3: ..."); a missing group is ATS_EINVAL naming it.
 */
enum ats_status atsc_results_read_group(const char *path, const char *group, atsc_results_file **out,
                                        ats_err *err);

/** Frees a file read by atsc_results_read; NULL is a no-op. */
void atsc_results_file_free(atsc_results_file *f);

/** The run named `name`, or NULL. */
const atsc_results_run *atsc_results_find_run(const atsc_results_file *f, const char *name);

#ifdef __cplusplus
}
#endif
#endif
