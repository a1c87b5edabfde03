/* bench/src/profile_impl.h — between profile.c (op tables, DRAM, the document) and profile_gpu.c (link
 * and interference probes on the GPU). Private to libats_bench. */
#ifndef BENCH_PROFILE_IMPL_H
#define BENCH_PROFILE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "ats/status.h"
#include "bench/profile.h"

#define BP_MAX_SIZES 12

/** The GPU machine's figures as measured (rates [B/s], times [s]). */
typedef struct bp_gpu_figs {
    char name[256];
    int n_sizes;
    size_t sizes[BP_MAX_SIZES];                   /* copy sizes [bytes], 4 KiB .. 256 MiB */
    double h2d_Bps[BP_MAX_SIZES], d2h_Bps[BP_MAX_SIZES];
    double h2d_lat_s, d2h_lat_s;                  /* one copy of the smallest size [s] */
    double sm_copy_Bps;                           /* SM copy kernel reading mapped pinned memory */
    double link_ce_Bps, link_sm_Bps, link_Bps;    /* CE H2D and SM copy at once: each, and the total */
    double read_Bps;                              /* device memory read (ex_cuda_read_probe) */
    int copy_engines;
    uint64_t vram_bytes;
    double cpu_alone_Bps, cpu_with_dma_Bps;       /* CPU DRAM read at o->threads, alone / during CE H2D */
    double dma_alone_Bps, dma_with_cpu_Bps;       /* CE H2D, alone / during the CPU read */
} bp_gpu_figs;

/** Measures *f on device 0. ATS_ENOTFOUND (message) when there is no device or no CUDA in the build;
 *  ATS_ERANGE / ATS_ENOMEM on a CUDA failure (message names the call). */
enum ats_status bp_gpu_measure(const bench_profile_opts *o, bp_gpu_figs *f, ats_err *err);

#endif
