/*
 * atsc/validate.h — sim versus real: what `ats validate` computes and writes, on results tables only
 * (atsc/results.h), so it depends on neither the simulator nor the executor.
 *
 * Rounds are matched by index: both runs execute the same request (same prompt, chunk and decode
 * steps), so round i is the same prefill chunk or decode step in both, and atsc_val_compare refuses
 * runs whose rounds differ in number, phase or tokens. Per policy it gives the mean TPOT both ways, the
 * error of the mean, the per-round MAPE and 90th percentile of |sim - real| / real over decode rounds,
 * prefill tok/s both ways and the re-schedule counts both ways.
 *
 * A validation file (HDF5) holds the two runs as complete results trees plus the table:
 *   /                 attributes: schema = "ats-validation", schema_version (int), version, commit,
 *                     config (JSON text of the whole validation)
 *   /real, /sim       each a results tree: the attributes and runs/ of a results file (atsc/results.h,
 *                     read with atsc_results_read_group(path, "/real"))
 *   /validation       compound table, one row per policy (atsc_val_row)
 *   /validation_segments  compound table, one row per policy and load segment of the window
 *                     (atsc_val_seg)
 * It is written through atsc/outfile.h (temporary, fsync, rename).
 *
 * summary.json (experiments/validation/): a JSON list of records, one per policy and validation run;
 * atsc_val_summary_append adds records atomically and keeps every existing one; a file that is not such
 * a list is refused and left as it is.
 *
 * Usage: atsc_val_trace_window → (runs) → atsc_val_compare per policy → atsc_val_write →
 * atsc_val_summary_append. Thread safety: as the HDF5 build (serialise calls); the pure functions are
 * thread-safe.
 */
#ifndef ATSC_VALIDATE_H
#define ATSC_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "ats/status.h"
#include "atsc/results.h"
#include "atsc/trace_io.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATSC_VAL_SCHEMA_VERSION 1

/** What one policy's two runs give. Errors are signed where the name says error of the mean, and
 *  absolute per round. */
typedef struct atsc_val_stats {
    int64_t n_rounds;           /**< rounds compared (each run has exactly these) */
    int64_t n_decode;           /**< decode rounds among them (the TPOT samples) */
    int64_t prefill_tok;        /**< tokens of the prefill rounds [tok] */
    double real_tpot_s;         /**< mean decode round latency of the real run [s] */
    double sim_tpot_s;          /**< same, simulated [s] */
    double mean_tpot_error_pct; /**< 100 (sim_tpot - real_tpot) / real_tpot [%], signed */
    double mape_pct;            /**< 100 mean_i |sim_i - real_i| / real_i over decode rounds [%] */
    double p90_round_error_pct; /**< 90th percentile of 100 |sim_i - real_i| / real_i over decode rounds [%]
                                     (linear interpolation between order statistics: GSL's
                                     gsl_stats_quantile_from_sorted_data, numpy's default) */
    double real_prefill_tok_s;  /**< prefill tokens / time in prefill rounds [tok/s]; NaN without prefill */
    double sim_prefill_tok_s;   /**< same, simulated [tok/s] */
    int32_t real_resched;       /**< rounds with rescheduled = 1 in the real run */
    int32_t sim_resched;        /**< same, simulated */
} atsc_val_stats;

/**
 * Compares round tables real (n_real rows) and sim (n_sim rows), both borrowed, matched by index.
 * ATS_EINVAL with one line in err when: either is empty ("zero-length window"), the counts differ, a
 * round's phase or token count differs between them (naming the index and both values), no round is
 * a decode round, or a real decode round's latency is not > 0 (no reference for a relative error).
 * On success *out is filled. Pure; thread-safe.
 */
enum ats_status atsc_val_compare(const atsc_round_row *real, size_t n_real, const atsc_round_row *sim,
                                 size_t n_sim, atsc_val_stats *out, ats_err *err);

/** Decode rounds of one load segment of the window: where the per-round error sits tells which
 *  resource's model is off (a CPU-loaded segment: the CPU's; a GPU/PCIe-loaded one: the GPU's or the
 *  link's). */
typedef struct atsc_val_seg {
    char policy[ATSC_RESULTS_NAME_LEN]; /**< filled by the caller (the /validation_segments table) */
    double t0_s, t1_s;          /**< the segment in window time [s] (0 = the window's start); t1_s of the
                                     last segment is +inf: its load holds after the window */
    double cpu, gpu, pcie;      /**< availability at the segment's start */
    int64_t n_decode;           /**< decode rounds that both runs started inside the segment */
    double real_tpot_s, sim_tpot_s; /**< their mean latencies [s]; NaN when n_decode == 0 */
    double mean_tpot_error_pct; /**< 100 (sim - real) / real of those means [%]; NaN when n_decode == 0 */
} atsc_val_seg;

/**
 * The decode rounds of real and sim (n rows each, matched by index as atsc_val_compare) by load
 * segment of `window` (atsc_val_trace_window's trace: time 0 = the window's start = the start of both
 * runs' first round): a new segment starts at every sample whose availability of some resource differs
 * from the previous sample's by more than tol. A round counts in a segment when both runs started it
 * there (round i at t_start_s[i] - t_start_s[0] in each run); rounds whose runs were in different
 * segments (the runs drift apart in time) count in none. Writes at most max segments into segs (n_segs:
 * how many the window has; more than max: the first max are written). ATS_EINVAL on n == 0 or NULL.
 * Pure; thread-safe.
 */
enum ats_status atsc_val_segments(const atsc_round_row *real, const atsc_round_row *sim, size_t n,
                                  const atsc_trace *window, double tol, atsc_val_seg *segs, size_t max,
                                  size_t *n_segs, ats_err *err);

/** One row of /validation. */
typedef struct atsc_val_row {
    char policy[ATSC_RESULTS_NAME_LEN]; /**< policy name (the run's name in /real and /sim) */
    char trace[ATSC_RESULTS_NAME_LEN];  /**< trace name (file stem) */
    double window_start_s;              /**< trace time of the window's start [s] */
    double window_end_s;                /**< trace time of the window's end [s] */
    atsc_val_stats s;                   /**< the comparison (its members are the table's columns) */
} atsc_val_row;

/**
 * Writes the validation file `path` (atomically): the results files real_path and sim_path (read
 * only; written by `ats run --policy --out` and `ats sim --out`, every run of each) copied whole under
 * /real and /sim (their /rounds and /ops shortcut links left out: they point at the file's root), root
 * attributes with `config_json` (must be JSON), the n rows (borrowed) as /validation and the n_segs
 * segment rows (borrowed; atsc_val_segments with the policy filled in) as /validation_segments.
 * ATS_EINVAL (a bad input file, a path that cannot be written; the message names it), ATS_ENOMEM.
 */
enum ats_status atsc_val_write(const char *path, const char *real_path, const char *sim_path,
                               const char *config_json, const atsc_val_row *rows, size_t n,
                               const atsc_val_seg *segs, size_t n_segs, ats_err *err);

/**
 * Reads a validation file: *real and *sim (new, atsc_results_file_free; either pointer may be NULL to
 * skip it) and the rows (*rows new, free(); *n of them). Checks the schema attribute and version and
 * the table's members. ATS_ENOTFOUND (no file), ATS_EINVAL (message names file and dataset), ATS_ENOMEM.
 */
enum ats_status atsc_val_read(const char *path, atsc_results_file **real, atsc_results_file **sim,
                              atsc_val_row **rows, size_t *n, ats_err *err);

/** The /validation_segments rows of a validation file (*segs new, free(); *n of them). Errors as
 *  atsc_val_read. */
enum ats_status atsc_val_read_segments(const char *path, atsc_val_seg **segs, size_t *n, ats_err *err);

struct json_t;

/**
 * Appends the records of JSON array `records` (borrowed; objects) to the JSON list in `path`: a
 * missing file is an empty list; a file that is not JSON, or whose top level is not a list, or a
 * list with an entry that is not an object, is refused (ATS_EINVAL naming the path, the line or the
 * entry) and not touched. The new list is written through a temporary and renamed (atsc/outfile.h),
 * under an exclusive lock (flock) on the file's directory, so two appends at once both land. A record
 * of `records` that is not an object is ATS_EINVAL too.
 */
enum ats_status atsc_val_summary_append(const char *path, const struct json_t *records, ats_err *err);

/** The checks of atsc_val_summary_append on the list in `path` as it is now (writable place, a list of
 *  objects or no file), without writing: `ats validate` refuses a bad list before its runs. ATS_OK or
 *  ATS_EINVAL with the same message. */
enum ats_status atsc_val_summary_check(const char *path, ats_err *err);

/**
 * The window [t0_s, t1_s) of trace tr (borrowed) as a trace of its own (new, atsc_trace_free) that
 * starts at 0: the value in force at t0_s, then every sample strictly inside the window shifted by
 * -t0_s, then the value in force just before t1_s once more at t1_s - t0_s (so its duration is the
 * window's, and that last value holds beyond it). Source, machine and description say which window
 * of which trace. ATS_EINVAL unless 0 <= t0_s < t1_s (finite): "zero-length window" when t1_s == t0_s.
 */
enum ats_status atsc_val_trace_window(const atsc_trace *tr, const char *name, double t0_s, double t1_s,
                                      atsc_trace **out, ats_err *err);

/** Load changes of tr inside (t0_s, t1_s): samples whose availability of some resource differs from the
 *  previous sample's by more than tol (the stressor's step threshold is 0.05). */
size_t atsc_val_trace_changes(const atsc_trace *tr, double t0_s, double t1_s, double tol);

#ifdef __cplusplus
}
#endif
#endif
