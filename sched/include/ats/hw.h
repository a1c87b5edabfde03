/*
 * ats/hw.h — a hardware description: CPU, GPU, PCIe link, copy engines, host-memory interference,
 * and effective efficiencies per op class and backend.
 *
 * Plain data (no pointers: copied by value, sent over MPI). Filled from sim/hw/<name>.json or from a
 * profile written by `ats profile` (the same format plus an "op_table" section) by the common/ loader
 * (atsc_hw_load). The cost model (ats/costs.h) turns a graph and an ats_hw into a nominal cost
 * snapshot: from the measured op table where it has the op's kind, from the roofline efficiencies
 * otherwise; the simulator uses the same figures as resource rates.
 * Units: bytes, seconds, FLOP; rates in bytes/s and FLOP/s.
 */
#ifndef ATS_HW_H
#define ATS_HW_H

#include <stdint.h>
#include "ats/arch.h"
#include "ats/quant.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Effective efficiency of one backend for one op class: achieved / peak. */
typedef struct ats_hw_eff {
    double gemv_bw;    /* decode matmul (N < gemm_min_tokens): fraction of memory bandwidth */
    double gemm_flop;  /* prefill matmul: fraction of peak FLOP/s */
    double attn_bw;    /* attention: fraction of memory bandwidth reading the KV cache */
    double attn_flop;  /* attention: fraction of peak FLOP/s */
    double q_scale[64];/* per-qtype multiplier on compute time for dequantization cost, indexed by
                          ggml type id (1.0 = free; unset entries are 1.0) */
} ats_hw_eff;

/** Most token counts one table entry holds (`ats profile` measures 9: 1, 16, 32, ..., 2048). */
#define ATS_PROF_MAX_POINTS 12
/** Most entries of a measured op table (both backends together; a dense model has ~14 per backend). */
#define ATS_PROF_MAX_ENTRIES 96

/** Measured times of one op shape on one backend over token counts (`ats profile`): an op of role
 *  `role` with weight type `qtype` and weight shape (n_out, n_in) took t_s[k] seconds in a round of
 *  tokens[k] tokens, when its work was flop[k] FLOP and bytes[k] bytes (ats_op_work's counts of the
 *  measured op, so shapes and contexts not measured scale by the roofline ratio). */
typedef struct ats_prof_entry {
    int32_t backend;                      /* 0 = CPU, 1 = GPU (ats_backend) */
    int32_t kind;                         /* ats_op_kind */
    int32_t role;                         /* ats_role */
    int32_t qtype;                        /* ats_qtype of the weight (attention: of the KV cache) */
    int64_t n_out, n_in;                  /* weight shape of one matrix (ats_op's); 0 for attention */
    int32_t n_points;                     /* 1 .. ATS_PROF_MAX_POINTS */
    int64_t tokens[ATS_PROF_MAX_POINTS];  /* strictly increasing [tok] */
    double t_s[ATS_PROF_MAX_POINTS];      /* measured time (median) [s], > 0 */
    double flop[ATS_PROF_MAX_POINTS];     /* work of the measured op [FLOP], >= 0 */
    double bytes[ATS_PROF_MAX_POINTS];    /* bytes of the measured op [bytes], >= 0 */
} ats_prof_entry;

/** A measured op table; n = 0: none (the roofline efficiencies alone). */
typedef struct ats_prof_table {
    int32_t n;
    ats_prof_entry e[ATS_PROF_MAX_ENTRIES];
} ats_prof_table;

/** Most points of the DRAM-read-over-threads curve (`ats profile` measures 1, 2, 4, ... threads). */
#define ATS_HW_MAX_BW_POINTS 16

typedef struct ats_hw {
    char name[ATS_NAME_LEN];
    char source[ATS_SOURCE_LEN]; /* where the figures come from */
    /* CPU */
    int cpu_threads;           /* threads the runtime uses */
    double cpu_flops;          /* peak FLOP/s at cpu_threads for the int8 dot products of quantized
                                  matmuls (AVX2/AVX-512 VNNI) [FLOP/s] */
    double cpu_mem_bw;         /* DRAM read bandwidth at cpu_threads [bytes/s] */
    double cpu_op_overhead_s;  /* fixed cost per CPU op (thread wake-up, sync) [s] */
    /* DRAM read rate over reading threads (optional; `ats profile`'s cpu_read_over_threads): the
       memory part of a CPU op under CPU availability a runs at ats_hw_cpu_mem_share(hw, a) of its
       idle speed. cpu_bw_n = 0: no curve (the memory part slows by a, as the compute part). */
    int32_t cpu_bw_n;                                /* 0 .. ATS_HW_MAX_BW_POINTS */
    int32_t cpu_bw_threads[ATS_HW_MAX_BW_POINTS];    /* strictly increasing, >= 1 [threads] */
    double cpu_bw_Bps[ATS_HW_MAX_BW_POINTS];         /* DRAM read rate at that count, > 0 [bytes/s] */
    /* Measured response of memory-bound CPU ops to CPU load (optional; experiments/validation/
       cpu-load-response.sh): the executor's CPU decode step at cpu_threads under `ats stress` holding
       the CPU availability at avail takes slowdown times its idle time. When present it is what
       ats_hw_cpu_mem_share gives (1 / slowdown), before the DRAM curve. */
    int32_t cpu_load_n;                               /* 0 .. ATS_HW_MAX_BW_POINTS */
    double cpu_load_avail[ATS_HW_MAX_BW_POINTS];      /* strictly increasing, in (0, 1) */
    double cpu_load_slow[ATS_HW_MAX_BW_POINTS];       /* >= 1, finite */
    /* GPU */
    double gpu_flops;          /* peak dense FP16 tensor-core FLOP/s [FLOP/s] */
    double gpu_mem_bw;         /* device memory bandwidth [bytes/s] */
    uint64_t gpu_vram_bytes;   /* total device memory [bytes] */
    double gpu_op_overhead_s;  /* kernel launch + tail per GPU op [s] */
    /* link */
    double pcie_h2d_bw;        /* copy-engine host→device from pinned memory [bytes/s] */
    double pcie_d2h_bw;        /* copy-engine device→host [bytes/s] */
    double pcie_sm_copy_bw;    /* SM copy kernel over zero-copy memory [bytes/s] */
    double pcie_link_bw;       /* both paths together (the link's shared capacity) [bytes/s] */
    double pcie_latency_s;     /* per-transfer latency [s] */
    double host_switch_s;      /* host time of an activation crossing between CPU and GPU [s]: at
                                  GPU→CPU the device backend's flush (its D2H copies issued and the
                                  stream waited for), at CPU→GPU the re-upload of what the host wrote;
                                  per crossing, the mean of both. 0 where not measured (optional) */
    int n_copy_engines;        /* host→device copy engines usable concurrently (consumer RTX: 1) */
    /* host memory interference (DESIGN.md table): while DMA streams from host memory at the full
       link rate, CPU ops see cpu_mem_bw · hostmem_cpu_factor; the DMA sees its rate times
       hostmem_dma_factor while the CPU reads at full bandwidth. Linear in between. */
    double hostmem_cpu_factor;
    double hostmem_dma_factor;
    int64_t gemm_min_tokens;   /* rounds with ≥ this many tokens use the GEMM efficiencies */
    ats_hw_eff eff_cpu, eff_gpu;
    ats_prof_table op_table;   /* measured per-op times (`ats profile`); n = 0 in a plain description */
} ats_hw;

/** Zeroes `hw`, sets every q_scale to 1 and gemm_min_tokens to 8. */
void ats_hw_init(ats_hw *hw);

/** ATS_EINVAL with "field: value (why)" in err when a rate is ≤ 0 or NaN, a fraction outside (0,1],
 *  n_copy_engines < 1, the DRAM curve malformed (cpu_bw_n outside 0..ATS_HW_MAX_BW_POINTS, threads
 *  not strictly increasing from ≥ 1, a rate ≤ 0 or not finite; the message names the point), or an
 *  op-table entry is malformed (backend, kind, role, points, tokens not
 *  strictly increasing, a time ≤ 0, work < 0; the message names the entry and point). */
enum ats_status ats_hw_validate(const ats_hw *hw, ats_err *err);

/**
 * Memory-bandwidth share β(a) of the CPU under CPU availability `a` (the fraction of CPU time the
 * runtime's threads get, (0, 1]): the memory part of a CPU op runs at β(a) of its idle speed, the
 * compute part at a. With T = hw->cpu_threads, β(a) = bw(a·T) / bw(T), bw(n) the DRAM read rate at n
 * threads: linear between the curve's points (cpu_bw_threads, cpu_bw_Bps), through bw(0) = 0, and
 * constant beyond the last point. Reason: T threads each running a fraction a of the time read like
 * a·T threads, and DRAM bandwidth saturates below T, so a memory-bound op slows by less than a.
 * Without a curve (cpu_bw_n = 0) it returns `a` exactly (the compute-fraction model). β(1) = 1.
 * A measured load response (cpu_load_n > 0) comes first: 1 / slowdown(a), linear in the slowdown
 * between its points and (1, 1), the lowest point's share times a / its avail below it.
 * `hw` borrowed, valid (ats_hw_validate); `a` ≤ 0 gives 0. Pure, thread-safe.
 */
double ats_hw_cpu_mem_share(const ats_hw *hw, double a);

#ifdef __cplusplus
}
#endif
#endif
