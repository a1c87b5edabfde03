/*
 * atsc/trace_import.h — turn a public time series (CSV: a time column and a value column) into a load
 * trace that drives one resource (`ats trace import`).
 *
 * Steps: read the CSV (header row; comma separated; a time column holding seconds, or timestamps
 * "YYYY-MM-DD HH:MM:SS[.fff]" read as UTC), keep rows whose filter column equals the filter value,
 * average rows with equal times, sort by time, map each value to an availability
 *   throughput-like series:  avail = value / ref        (higher value = more speed left)
 *   slowdown-like series:    avail = ref / value        (--invert: higher value = slower, e.g. batch times)
 * where ref is the chosen percentile of the values, then clip to [floor, 1]; divide times (relative to
 * the first row) by the compression factor. The other two resources stay at 1.
 *
 * Lifecycle: fill atsc_import_opts from atsc_import_opts_default(), call atsc_trace_import_csv, free the
 * returned trace with atsc_trace_free. Library code: no exit(), every failure a status + one message
 * naming the file, the line and the column.
 */
#ifndef ATSC_TRACE_IMPORT_H
#define ATSC_TRACE_IMPORT_H

#include "atsc/trace_io.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct atsc_import_opts {
    const char *time_col;        /**< header name or 0-based index of the time column (borrowed) */
    const char *value_col;       /**< header name or 0-based index of the value column (borrowed) */
    const char *filter_col;      /**< optional: keep only rows where this column ... (NULL: all rows) */
    const char *filter_value;    /**< ... equals this string exactly */
    enum atsc_resource resource; /**< which availability the values drive */
    double ref_percentile;       /**< percentile of the values used as the idle reference, in (0, 100] */
    int invert;                  /**< 1: slowdown-like values (avail = ref / value) */
    double compress;             /**< time compression factor >= 1e-9: t_out = (t - t_first) / compress */
    double floor;                /**< lowest availability after clipping, in (0, 1] (default 0.01) */
} atsc_import_opts;

/** Defaults: columns "0" and "1", no filter, resource CPU, percentile 50, not inverted, compress 1,
 *  floor 0.01. */
atsc_import_opts atsc_import_opts_default(void);

/** Imports `csv_path` into a new trace (*out, caller frees). Rows with an empty or non-numeric value
 *  are errors naming the line; rows excluded by the filter are skipped. Sets the trace's source
 *  (the file and the options) and description. Returns ATS_OK, ATS_ENOTFOUND (file, or a named
 *  column missing from the header), ATS_EINVAL (bad number/timestamp, no rows left, non-positive
 *  reference, bad option), ATS_ENOMEM. */
enum ats_status atsc_trace_import_csv(const char *csv_path, const atsc_import_opts *opts, atsc_trace **out,
                                      ats_err *err);

/** Percentile p in [0, 100] of v[0..n) by linear interpolation between order statistics (as numpy's
 *  default); sorts v in place. n >= 1. */
double atsc_percentile(double *v, size_t n, double p);

/** Parses "YYYY-MM-DD HH:MM:SS[.fraction]" (or with 'T') as UTC seconds since the epoch; a plain number
 *  is returned as is. 0 on success, -1 otherwise. */
int atsc_parse_time(const char *s, double *out_s);

#ifdef __cplusplus
}
#endif
#endif
