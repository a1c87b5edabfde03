/*
 * atsc/trace_io.h — load traces: availability of CPU, GPU and PCIe over time, in HDF5.
 *
 * A load trace says, for each resource, which fraction of the idle machine's speed is left for
 * inference at each moment: 1 = idle machine, 0.4 = a co-runner takes 60%. Values are piecewise
 * constant: sample i holds on [t_s[i], t_s[i+1]) and the last sample holds forever.
 *
 * File schema (DESIGN.md): group `/load` with float64 1-D datasets `t_s` (strictly increasing,
 * t_s[0] == 0), `cpu_avail`, `gpu_avail`, `pcie_avail` (same length, each value in (0, 1]); string
 * attributes `source`, `machine`, `description` on `/load`. Anything else is refused with one line
 * naming the file, the dataset and the index.
 *
 * Lifecycle: atsc_trace_new(n) (or atsc_trace_load) gives an owned trace; fill t_s/avail arrays and
 * the strings; atsc_trace_validate; atsc_trace_save; atsc_trace_free. Lookups (atsc_trace_at,
 * atsc_trace_next_change) are read-only and thread-safe on a trace nobody modifies.
 *
 * Usage sketch (simulator): load once, then at simulated time t ask atsc_trace_at(tr, t, &a) for the
 * factors and atsc_trace_next_change(tr, t) for the time of the next change point to schedule.
 * This is the only module of ATS that talks to HDF5 about traces; it turns off HDF5's automatic
 * error printing and reports failures as statuses with messages.
 */
#ifndef ATSC_TRACE_IO_H
#define ATSC_TRACE_IO_H

#include <math.h>
#include <stddef.h>

#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Time of "no further change point" [s]. */
#define ATSC_TRACE_NEVER INFINITY

/** Longest stored attribute string [bytes, including the NUL]; longer strings are truncated on load. */
#define ATSC_TRACE_ATTR_LEN 1024

/** Availability factors of one moment, each in (0, 1] (fraction of the idle machine's speed). */
typedef struct atsc_avail {
    double cpu;  /**< CPU compute availability */
    double gpu;  /**< GPU compute availability */
    double pcie; /**< PCIe link availability (both directions) */
} atsc_avail;

/** Resources of a trace, for code that loops over them (import, stress, record). */
enum atsc_resource { ATSC_RES_CPU = 0, ATSC_RES_GPU = 1, ATSC_RES_PCIE = 2, ATSC_RES_COUNT = 3 };

/** A load trace. All arrays are owned by the trace, length n, allocated by atsc_trace_new. */
typedef struct atsc_trace {
    size_t n;            /**< number of samples (>= 1) */
    double *t_s;         /**< (n) sample start times [s], strictly increasing, t_s[0] == 0 */
    double *cpu_avail;   /**< (n) CPU availability in (0, 1] */
    double *gpu_avail;   /**< (n) GPU availability in (0, 1] */
    double *pcie_avail;  /**< (n) PCIe availability in (0, 1] */
    char source[ATSC_TRACE_ATTR_LEN];      /**< how it was made: command line or "recorded by ..." */
    char machine[ATSC_TRACE_ATTR_LEN];     /**< machine it describes ("h200-host", "synthetic") */
    char description[ATSC_TRACE_ATTR_LEN]; /**< free text: load, probes, duty cycle, ... */
} atsc_trace;

/** Allocates a trace of n >= 1 samples; arrays zeroed, strings empty. Returns NULL on n == 0 or
 *  out of memory. Caller frees with atsc_trace_free. */
atsc_trace *atsc_trace_new(size_t n);

/** Frees the trace and its arrays; NULL is a no-op. */
void atsc_trace_free(atsc_trace *tr);

/** Pointer to the availability array of resource r (cpu_avail, gpu_avail or pcie_avail); borrowed. */
double *atsc_trace_res(atsc_trace *tr, enum atsc_resource r);

/** Name of resource r ("cpu", "gpu", "pcie") and its dataset path ("/load/cpu_avail", ...). */
const char *atsc_resource_name(enum atsc_resource r);
const char *atsc_resource_dataset(enum atsc_resource r);

/** Checks the schema invariants in memory: n >= 1, t_s[0] == 0, t_s strictly increasing and finite,
 *  every availability finite and in (0, 1]. `name` (a file name, or NULL) prefixes the message:
 *  "<name>: /load/gpu_avail[17] = 1.2: availability must be in (0, 1]".
 *  Returns ATS_OK or ATS_EINVAL (message in err, may be NULL). */
enum ats_status atsc_trace_validate(const atsc_trace *tr, const char *name, ats_err *err);

/** Loads a trace from an HDF5 file. On success *out is a new trace (caller frees). On failure *out is
 *  NULL and err holds one line naming the file, the dataset (or attribute) and the index:
 *  ATS_ENOTFOUND when the file does not exist, ATS_EINVAL when it is not HDF5 or breaks the schema
 *  (missing group/dataset/attribute, type other than float64, rank != 1, length mismatch, empty,
 *  t_s[0] != 0, non-increasing time, NaN/inf, value <= 0 or > 1), ATS_ENOMEM. */
enum ats_status atsc_trace_load(const char *path, atsc_trace **out, ats_err *err);

/** Validates then writes the trace to `path` through a temporary file in the same directory that is
 *  fsync'ed and renamed over `path` (atsc/outfile.h: an interrupted write never leaves a half file;
 *  a directory, device or FIFO at `path` is refused, never replaced). Returns ATS_OK, ATS_EINVAL
 *  (invalid trace, or the file could not be created/written/renamed; message names the path). */
enum ats_status atsc_trace_save(const atsc_trace *tr, const char *path, ats_err *err);

/** Index of the sample in force at time t [s]: the largest i with t_s[i] <= t (0 for t < 0).
 *  O(log n). */
size_t atsc_trace_index(const atsc_trace *tr, double t);

/** Availability in force at time t [s] into *avail; returns its sample index (atsc_trace_index). */
size_t atsc_trace_at(const atsc_trace *tr, double t, atsc_avail *avail);

/** Time [s] of the first change point strictly after t: the smallest t_s[i] > t, or
 *  ATSC_TRACE_NEVER after the last sample. Samples whose three values equal the previous ones still
 *  count as change points (cheap and harmless for a simulator). */
double atsc_trace_next_change(const atsc_trace *tr, double t);

/** Records, for messages only, where a trace name was also looked for before it resolved to `path`
 *  (both copied; NULL clears): atsc_trace_load's "cannot open" and "not an HDF5 file" messages for
 *  exactly `path` then end with " (<also>)". The CLI's trace-name resolver sets it, e.g. path
 *  "traces/base.txt.h5", also "no local file base.txt either". One note per process; not
 *  thread-safe (resolve and load traces from one thread). */
void atsc_trace_lookup_note(const char *path, const char *also);

/** Duration covered by explicit samples [s]: t_s[n-1] (the last value holds beyond it). */
double atsc_trace_duration(const atsc_trace *tr);

/** Time-weighted mean of resource r over [0, t_end) [s], minimum and maximum over the samples at
 *  times <= t_end (t_end > 0; pass atsc_trace_duration for the recorded span, or the last sample alone
 *  when that is 0). The last sample holds forever: with t_end = the duration it counts in min/max but
 *  has weight 0 in the mean; with a later t_end it is weighted by t_end - its time. Any output pointer
 *  may be NULL. */
void atsc_trace_stats(const atsc_trace *tr, enum atsc_resource r, double t_end, double *mean,
                      double *min, double *max);

#ifdef __cplusplus
}
#endif
#endif
