/*
 * bench/profile.h — `ats profile`: measures the machine it runs on for one model and writes a hardware
 * profile (the sim/hw JSON format plus an "op_table") that `ats sim --hw` and `ats run --policy --hw` load.
 *
 * What it measures (each figure replaces the base description's, with a source "measured by ats profile
 * <date> on <host>: <how>"; the others keep the base's figures and sources):
 * - op table, CPU (at `threads` OpenMP threads) and GPU: the executor's own per-op times (ex_rt, the
 *   runtime behind `ats run --policy`: CPU ops by the host clock, GPU ops by CUDA events) with every op
 *   on one backend (CPU: no device; GPU: policy "layer" with the whole model resident), for a decode step
 *   at context `decode_ctx` and a prefill chunk of N tokens from position 0 for each N of the token list
 *   ({1, 16, 32, ..., 2048}; N = 1 is the decode step); per (role, type, shape) the median over the
 *   model's layers (and over the decode steps). KV cache F16 (sched's count; `ats run --kv-type f16`).
 * - cpu.mem_bw_GBps: bench_dram_probe at `threads`; the DRAM read rate over thread counts 1, 2, 4, ...
 *   is printed and kept in the result document.
 * - GPU (bench/src/profile_gpu.c): copy-engine H2D and D2H rate over sizes 4 KiB .. 256 MiB
 *   (pcie.h2d/d2h_GBps at the largest, pcie.latency_us = the 4 KiB H2D time), the SM copy kernel over
 *   zero-copy memory (pcie.sm_copy_GBps), both at once (pcie.link_GBps), the device read rate
 *   (gpu.mem_bw_GBps, ex_cuda_read_probe), copy engines (pcie.copy_engines), device memory
 *   (gpu.vram_bytes), and the interference of CPU reads with copy-engine H2D (host_memory.cpu_factor and
 *   dma_factor: each one's rate together over alone, at `threads`).
 * Not measured (kept from the base): peaks (cpu.int8_peak_TOPS, gpu.fp16_tensor_peak_TFLOPS), the
 * op overheads and the roofline efficiencies (the fallback for op kinds the table lacks).
 *
 * Usage: o = bench_profile_opts_default(); o.model = m; o.base_path = "sim/hw/h200-host.json"; ...;
 * bench_profile_run(&o, &doc, &err) → doc (the profile, a JSON document) → atsc_out_write_json.
 */
#ifndef BENCH_PROFILE_H
#define BENCH_PROFILE_H

#include <jansson.h>
#include <stdint.h>

#include "ats/status.h"
#include "bench/bench.h"
#include "ex/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Token counts of the op table (`ats profile`): a decode step (1) and prefill chunks. */
#define BENCH_PROFILE_N_TOKENS 9
extern const int64_t bench_profile_tokens[BENCH_PROFILE_N_TOKENS]; /* 1, 16, 32, ..., 2048 */

typedef struct bench_profile_opts {
    const ex_model *model;   /* borrowed: GGUF or dummy weights */
    const char *model_desc;  /* borrowed: how the model was given (for the sources), e.g. "qwen3-14b
                                --dummy-weights q4_k_m" */
    const char *base_path;   /* borrowed: the base hardware description (sim/hw/<name>.json) */
    int threads;             /* CPU threads of the CPU op table and the DRAM probe [1 .. 1024] */
    int quick;               /* 1: token counts {1, 16, 64}, decode context 64, fewer reps, small
                                buffers (a smoke test; figures are rough) */
    int skip_gpu;            /* 1: no GPU part (GPU figures and table from the base / none) */
    int skip_cpu_table;      /* 1: no CPU op table */
    bench_sink sink;         /* the tables and the progress line */
} bench_profile_opts;
/** threads 16, full run, nothing skipped, no sink. */
bench_profile_opts bench_profile_opts_default(void);

/**
 * Runs the measurements and builds the profile: *doc (new reference; the caller decrefs) is the base
 * description with the measured figures and their sources replaced, "op_table" added, and
 * "measurements" (the DRAM rates over threads, the copy rates over sizes, the interference rates, the
 * parameters; not read by the loader)
 * beside them, in the format atsc_hw_load reads.
 * ATS_EINVAL: bad options or base description (message names file and field); ATS_EIO / ATS_ENOMEM /
 * ATS_ERANGE: a measurement failed (message names it). GPU absent (no device, or built without CUDA):
 * the GPU part is skipped with a note, not an error.
 */
enum ats_status bench_profile_run(const bench_profile_opts *o, json_t **doc, ats_err *err);

#ifdef __cplusplus
}
#endif
#endif
