/*
 * bench/bench.h — what the benchmarks of libats_bench share: where their text goes, the wall clock,
 * medians, and the machine they ran on.
 *
 * A benchmark is `bench_<what>_run(opts, result, err)`: options in a struct with a
 * `bench_<what>_opts_default()` constructor, figures in a result struct (or, for the long kernel
 * tables, written row by row through a bench_sink as they are measured), an `enum ats_status` with a
 * one-line message in `ats_err`; never exit(), never a file of its own: the caller (cli/cmd_bench.c)
 * prints and, with --out, writes the result document that `bench_<what>_json` builds.
 * Wall-clock times are int64_t nanoseconds (CLOCK_MONOTONIC); they never enter the simulator.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Where a benchmark's running text goes: `table` receives the table as it is measured (text with its
 *  own newlines), `note` one line (no newline) per warning or failed row; either may be NULL (dropped).
 *  Both are called from the benchmark's thread only. The CLI sends table to stdout and note to stderr
 *  as "ats bench <what>: <line>". */
typedef struct bench_sink {
    void (*table)(void *ctx, const char *text);
    void (*note)(void *ctx, const char *line);
    void *ctx; /* borrowed; passed back to all three */
    /* where the work stands, one line (no newline) that replaces the previous one; NULL drops it. The
       CLI shows it on stderr only when stderr is a terminal, and erases it before table or note text */
    void (*progress)(void *ctx, const char *line);
} bench_sink;

/** printf-style text into sink->table / one line into sink->note (sink may be NULL). */
void bench_table(const bench_sink *sink, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void bench_note(const bench_sink *sink, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/** printf-style progress line into sink->progress (sink may be NULL). Call from one thread. */
void bench_progress(const bench_sink *sink, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/** An ex_progress_fn (ex/model.h) whose ctx is a bench_sink: "building dummy weights: X of Y GiB". */
void bench_progress_bytes(void *sink, uint64_t done, uint64_t total);

/** CLOCK_MONOTONIC now [ns]. Thread-safe. */
int64_t bench_now_ns(void);
/** Median of v[0..n) (n >= 1); sorts v in place. */
double bench_median(double *v, int n);

/** The machine a result was measured on: host name and /proc/cpuinfo's first "model name" and its
 *  count of logical CPUs ("?" and 0 where unknown). */
typedef struct bench_machine {
    char host[256];
    char cpu[256];
    int n_cpu;
} bench_machine;
void bench_machine_get(bench_machine *m);

#ifdef __cplusplus
}
#endif
#endif
