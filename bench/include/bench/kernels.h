/*
 * bench/kernels.h — `ats bench kernels`: speed of the executor's kernels against measured ceilings.
 * - GPU decode GEMV per weight type at Qwen3-14B shapes, as a fraction of the measured HBM read
 *   bandwidth (ex_cuda_read_probe over 4 GiB); bytes counted = weight bytes (activations are < 0.2%).
 * - GPU prefill GEMM (dequantize + cublasGemmEx, n_tok tokens) in TFLOP/s next to cuBLAS's own F16
 *   GEMM on the same shape and on 8192^3 (the ceiling).
 * - CPU prefill GEMM (ex_cpu_matmul over n_tok rows, at most 2048, at the ffn_up shape) in GMAC/s
 *   (compute-bound).
 * - CPU decode GEMV (ex_cpu_matmul, `threads` threads) as a fraction of the measured DRAM read
 *   bandwidth (bench/dram.h, 2 GiB, the same thread count).
 * - The whole model (dummy Q4_K_M weights of `arch`) on each backend measured: prefill and decode
 *   tok/s against bytes / bandwidth floors.
 * Timing: GPU with CUDA events around each call after warm-up, CPU with CLOCK_MONOTONIC; the median
 * of `reps` runs. Weights are random values quantized by the CPU code (ex_quantize_row); several
 * copies are cycled so the working set exceeds the GPU's L2 / the CPU's last-level cache.
 *
 * Usage: o = bench_kernels_opts_default(); set the fields, o.sink (the tables, written as they are
 * measured, and one note per failure); bench_kernels_run(&o, &doc, &err); doc is the result document
 * (commit, machine, parameters, figures), also after a part failed.
 */
#ifndef BENCH_KERNELS_H
#define BENCH_KERNELS_H

#include <jansson.h>

#include "ats/arch.h"
#include "ats/status.h"
#include "bench/bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Timed calls of each CPU prefill GEMM (one call is long). */
#define BENCH_KERNELS_CPU_PREFILL_REPS 3
/** At most this many tokens in the CPU prefill GEMM (n_tok goes to 100000 for the GPU GEMM). */
#define BENCH_KERNELS_CPU_PREFILL_MAX_TOK 2048

typedef struct bench_kernels_opts {
    int threads;           /* CPU threads [1 .. 1024] */
    int reps;              /* timed calls of every GEMV, CPU and GPU (GPU prefill GEMM: reps / 2 + 3) */
    int n_tok;             /* prefill GEMM tokens */
    int skip_cpu, skip_gpu, skip_model;
    const ats_arch *arch;  /* the whole model's architecture (borrowed; required unless skip_model) */
    int prompt, decode;    /* whole model: prompt tokens as one chunk, greedy decode steps */
    bench_sink sink;       /* the tables and the notes */
} bench_kernels_opts;
/** threads 16, reps 50, n_tok 512, prompt 256, decode 16, nothing skipped, arch NULL, no sink. */
bench_kernels_opts bench_kernels_opts_default(void);

/** Why the GPU part cannot run in this process (a static string), NULL when it can. */
const char *bench_kernels_gpu_missing(void);

/** Runs the parts not skipped: GPU, CPU, then the whole model on the backends whose ceilings were
 *  measured. *doc (new reference, the caller decrefs) receives the result document whenever it could
 *  be made, also when a part failed. ATS_OK; ATS_EINVAL for bad options; ATS_EIO when a part failed (a
 *  GEMV differs from the CPU oracle, CUDA or memory failed: each said as a note, err says which part). */
enum ats_status bench_kernels_run(const bench_kernels_opts *o, json_t **doc, ats_err *err);

#ifdef __cplusplus
}
#endif
#endif
