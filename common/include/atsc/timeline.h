/*
 * atsc/timeline.h — Chrome trace-event JSON writer (open the file in https://ui.perfetto.dev or
 * chrome://tracing), written by both `ats sim --timeline` and `ats run --timeline`.
 *
 * Model: a process per run (e.g. per policy), inside it one track ("thread") per resource: CPU,
 * GPU compute stream, each copy engine. Work on a track is a complete event ("ph":"X") with a
 * start and a duration; link bandwidth is a counter event ("ph":"C") whose value holds until its
 * next sample. Times are given in seconds (simulated or since the run's start) and written in
 * microseconds with nanosecond resolution, as the format wants.
 *
 * Streaming: each event is written to the file as it comes (one buffered FILE), so a long run never
 * holds its timeline in memory. The file is "<path>.tmp.<pid>" until atsc_timeline_close() finishes
 * the JSON and renames it; atsc_timeline_abort() removes it.
 *
 * Usage: atsc_timeline_open → pid = atsc_timeline_process("ats") → tid = atsc_timeline_track(pid,
 * "CPU") … → atsc_timeline_slice(tid, "blk.3.ffn_up", "cpu", t0, dur, NULL) …,
 * atsc_timeline_counter(pid, "PCIe H2D", "GB/s", t, 23.5) … → atsc_timeline_close.
 * A handle is not thread-safe; distinct handles are independent.
 */
#ifndef ATSC_TIMELINE_H
#define ATSC_TIMELINE_H

#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct atsc_timeline atsc_timeline;

/**
 * Creates "<path>.tmp.<pid>" (atsc/outfile.h: `path` must pass atsc_out_check; the temporary is
 * removed on SIGINT/SIGTERM) and writes the JSON header. `meta_json` (borrowed, may be NULL) is a
 * JSON object stored under "otherData" (configuration, seed, version); it must parse as a JSON
 * object. On success *out is new. ATS_EINVAL (cannot create the file, bad meta_json; message names
 * `path`), ATS_ENOMEM.
 */
enum ats_status atsc_timeline_open(const char *path, const char *meta_json, atsc_timeline **out,
                                   ats_err *err);

/** Declares a process (a group of tracks; one per run or policy) named `name` (borrowed, copied
 *  into the file). Returns its id (>= 1), or -1 after a write error (reported by close). */
int atsc_timeline_process(atsc_timeline *tl, const char *name);

/** Declares a track named `name` inside process `pid`; tracks are shown in declaration order.
 *  Returns its id (>= 1, unique in the file), or -1 on an unknown pid or a write error. */
int atsc_timeline_track(atsc_timeline *tl, int pid, const char *name);

/**
 * A complete event on track `tid`: `name` and `cat` (category; may be NULL) borrowed, start
 * `t_start_s` [s] and duration `dur_s` [s] (>= 0, finite). `args_json` (may be NULL) is a JSON
 * object text stored as the event's "args" (e.g. "{\"op\":12,\"bytes\":4194304}"), written as is:
 * the caller guarantees it is valid JSON (use atsc_timeline_slice_args for numeric args instead).
 * ATS_EINVAL on an unknown track or a bad time (message names the event), after which the handle
 * still works.
 */
enum ats_status atsc_timeline_slice(atsc_timeline *tl, int tid, const char *name, const char *cat,
                                    double t_start_s, double dur_s, const char *args_json,
                                    ats_err *err);

/** Same with n numeric args: keys[i] → vals[i] (borrowed). */
enum ats_status atsc_timeline_slice_args(atsc_timeline *tl, int tid, const char *name,
                                         const char *cat, double t_start_s, double dur_s,
                                         int n, const char *const *keys, const double *vals,
                                         ats_err *err);

/**
 * A counter sample: series `name` of process `pid` takes value `value` (finite) in unit `unit`
 * (the series' key in Perfetto, e.g. "GB/s") from time `t_s` [s] until its next sample. A sample
 * equal to the series' previous value is dropped (it changes nothing; ATS_OK), so callers may
 * report the link rate at every event without bloating the file.
 * ATS_EINVAL on an unknown pid or a non-finite time or value; ATS_ENOMEM.
 */
enum ats_status atsc_timeline_counter(atsc_timeline *tl, int pid, const char *name,
                                      const char *unit, double t_s, double value, ats_err *err);

/** Number of events written so far (metadata included). */
long long atsc_timeline_n_events(const atsc_timeline *tl);

/** Path of the temporary file being written (borrowed; valid until close/abort). */
const char *atsc_timeline_tmp_path(const atsc_timeline *tl);

/**
 * Finishes the JSON, flushes, closes and renames to the final path; frees tl in all cases.
 * ATS_EINVAL (naming the file) when any write failed along the way or the rename fails; the
 * temporary file is then removed.
 */
enum ats_status atsc_timeline_close(atsc_timeline *tl, ats_err *err);

/** Closes and removes the temporary file; frees tl. NULL is a no-op. */
void atsc_timeline_abort(atsc_timeline *tl);

#ifdef __cplusplus
}
#endif
#endif
