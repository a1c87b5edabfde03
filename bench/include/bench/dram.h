/*
 * bench/dram.h — the DRAM read probe: the best rate this machine reads a large buffer at with a given
 * number of OpenMP threads, the ceiling that `ats bench kernels`' CPU GEMV rows are a fraction of.
 *
 * Reps alternate a static split (one contiguous range a thread, the pages' first-touch owner) and a
 * dynamic one (1 MiB chunks, as the GEMV's row tiles: a thread that is slowed down does not hold the rep
 * back); the ceiling is the fastest rep of either (STREAM's convention: the best the machine did), the
 * median and the slowest show the spread.
 * Usage: o = bench_dram_opts_default(); o.threads = 16; bench_dram_probe(&o, &r, &err).
 */
#ifndef BENCH_DRAM_H
#define BENCH_DRAM_H

#include <stddef.h>

#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bench_dram_opts {
    int threads;  /* OpenMP threads reading [1 .. 1024] */
    int reps;     /* reps of each split (2 * reps passes in all) */
    size_t bytes; /* buffer size [bytes], a multiple of 128 */
} bench_dram_opts;
/** threads 1, reps 7, bytes 2 GiB. */
bench_dram_opts bench_dram_opts_default(void);

typedef struct bench_dram_result {
    double best_Bps, median_Bps, slowest_Bps; /* over all passes [B/s] */
    double best_static_Bps, best_dynamic_Bps; /* fastest pass of each split [B/s] */
    int reps;                                 /* reps of each split */
} bench_dram_result;

/** Allocates the buffer, writes it once (first touch by the reading threads), times 2 * reps passes.
 *  ATS_ENOMEM with "cannot allocate its 2 GiB buffer (out of memory)" (the size as given) when the
 *  buffer cannot be had, ATS_EINVAL for bad options; *r zeroed then. Not to be run next to other
 *  measurements: it takes the whole memory bus. */
enum ats_status bench_dram_probe(const bench_dram_opts *o, bench_dram_result *r, ats_err *err);

#ifdef __cplusplus
}
#endif
#endif
