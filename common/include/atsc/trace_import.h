/*
 * atsc/trace_import.h — turn a public time series (CSV: a time column and a value column) into a load
 * trace that drives one resource (`ats trace import`).
 *
 * Steps: read the CSV (header row; comma separated; a time column holding seconds, or timestamps
 * "YYYY-MM-DD HH:MM:SS[.fff]" read as UTC), keep rows whose filter column equals the filter value,
 * sort by time (stable: rows out of order are accepted and counted), average rows with equal times,
 * map each value to an availability
 *   throughput-like series:  avail = value / ref        (higher value = more speed left)
 *   slowdown-like series:    avail = ref / value        (--invert: higher value = slower, e.g. batch times)
 * where ref is the chosen percentile of the values, then clip to [floor, 1]; divide times (relative to
 * the earliest row: the trace schema's t_s starts at 0, so negative times are shifted like any others)
 * by the compression factor. The other two resources stay at 1. What was reordered, merged or
 * shifted comes back in an atsc_import_report for the caller to tell the user.
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

/** What an import did to the rows besides mapping them: the caller tells the user (the library prints
 *  nothing). Line numbers are 1-based lines of the CSV (the header is line 1); 0 = none. */
typedef struct atsc_import_report {
    size_t n_rows;             /**< data rows kept (after the filter) */
    size_t n_out_of_order;     /**< kept rows whose time is earlier than the kept row before them */
    size_t first_out_of_order_line; /**< line of the first of them */
    double ooo_t, ooo_t_prev;  /**< its time and the time of the kept row before it [CSV units] */
    size_t n_dup_rows;         /**< kept rows whose time equals an earlier kept row's (averaged with it) */
    size_t n_dup_times;        /**< distinct times held by more than one row */
    size_t first_dup_line;     /**< line of the first row averaged into an earlier one */
    size_t n_negative;         /**< kept rows with a time < 0 (shifted like the rest) */
    double t_earliest;         /**< earliest time in the CSV [CSV units]: becomes t_s = 0 */
    size_t earliest_line;      /**< its line */
    size_t n_neg_values;       /**< kept rows with a value < 0 (a negative sample maps to the floor) */
    size_t first_neg_value_line; /**< line of the first of them */
    double first_neg_value;    /**< its value */
} atsc_import_report;

/** Defaults: columns "0" and "1", no filter, resource CPU, percentile 50, not inverted, compress 1,
 *  floor 0.01. */
atsc_import_opts atsc_import_opts_default(void);

/** Imports `csv_path` into a new trace (*out, caller frees). Rows with an empty or non-numeric value
 *  (decimal only: no hex, inf, nan) and invalid dates are errors naming the line, the column and the
 *  value; rows excluded by the filter are skipped. Negative values are counted in the report (their
 *  samples clip to the floor). Rows in any time order are
 *  accepted (sorted; equal times averaged in file order). Sets the trace's source (the file and the
 *  options) and description. `report` (borrowed, may be NULL) is filled on ATS_OK. Returns ATS_OK,
 *  ATS_ENOTFOUND (file, or a named column missing from the header), ATS_EINVAL (bad number/timestamp,
 *  no rows left, non-positive reference, bad option, times coinciding after compression or spanning
 *  more than 1e7 s), ATS_ENOMEM. */
enum ats_status atsc_trace_import_csv(const char *csv_path, const atsc_import_opts *opts, atsc_trace **out,
                                      atsc_import_report *report, ats_err *err);

/** Percentile p in [0, 100] of v[0..n) by linear interpolation between order statistics (as numpy's
 *  default); sorts v in place. n >= 1. */
double atsc_percentile(double *v, size_t n, double p);

/** Parses "YYYY-MM-DD HH:MM:SS[.fraction][Z]" (or with 'T'; a real date: 2023-02-30 is refused) as
 *  UTC seconds since the epoch; a plain decimal number (atsc_parse_decimal) is returned as is. 0 on
 *  success, -1 otherwise. */
int atsc_parse_time(const char *s, double *out_s);

/** A finite decimal number, surrounding spaces allowed ("1.5", "-2e3"); hexadecimal ("0x10", which
 *  strtod reads as 16), "inf", "nan" and trailing text are refused. 0 on success, -1 otherwise. */
int atsc_parse_decimal(const char *s, double *out);

#ifdef __cplusplus
}
#endif
#endif
