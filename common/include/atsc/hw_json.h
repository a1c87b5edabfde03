/*
 * atsc/hw_json.h — loads a hardware description (sim/hw/<name>.json) into an ats_hw.
 *
 * The JSON mirrors struct ats_hw section by section, with the unit in every key name (GB/s =
 * 1e9 bytes/s, TFLOPS = 1e12 FLOP/s, µs = 1e-6 s); the loader converts to the SI units of ats_hw.
 * Every section carries a "sources" object naming where each of its figures comes from (datasheet,
 * spec, or "measured on ... with ..."); a figure without a source is refused, so a description can
 * never silently mix guesses with measurements. Unknown keys are refused too (a typo must not
 * silently become a default). sim/hw/README.md lists every key; a sketch:
 *
 *   { "name": "rtx3060-laptop", "source": "...",
 *     "cpu":  { "model": "...", "threads": 8, "int8_peak_TOPS": 4.3, "mem_bw_GBps": 41,
 *               "op_overhead_us": 5,
 *               "mem_bw_over_threads": [ {"threads": 1, "GBps": 9.5}, ..., {"threads": 8, "GBps": 41} ],
 *               "sources": { "threads": "...", ... } },
 *     (mem_bw_over_threads optional: the DRAM read rate over reading threads, 1..ATS_HW_MAX_BW_POINTS
 *      points, threads strictly increasing integers >= 1, GBps > 0; the CPU load model's β(a),
 *      ats_hw_cpu_mem_share; with a source like every figure; "load_response": [{"avail": 0.4,
 *      "slowdown": 1.19}, ...] optional too: avail strictly increasing in (0, 1), slowdown in 1..1000,
 *      the measured response that ats_hw_cpu_mem_share prefers)
 *     "gpu":  { "model": "...", "fp16_tensor_peak_TFLOPS": 52.3, "mem_bw_GBps": 336,
 *               "vram_bytes": 6442450944, "op_overhead_us": 5, "sources": {...} },
 *     "pcie": { "h2d_GBps", "d2h_GBps", "sm_copy_GBps", "link_GBps", "latency_us",
 *               "copy_engines", "sources" },
 *     "host_memory": { "cpu_factor", "dma_factor", "sources" },
 *     "efficiency": { "gemm_min_tokens": 8,
 *                     "cpu": { "gemv_bw", "gemm_flop", "attn_bw", "attn_flop",
 *                              "quant_scale": { "Q4_K": 1.0, ... } },
 *                     "gpu": { ... }, "sources": {...} } }
 *
 * Usage: ats_hw hw; ats_err e; if (atsc_hw_load(path, &hw, &e) != ATS_OK) print e.msg, exit 2.
 */
#ifndef ATSC_HW_JSON_H
#define ATSC_HW_JSON_H

#include "ats/hw.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Reads `path` (borrowed) and fills `out` (caller-owned; initialised here with ats_hw_init, so
 * unset q_scale entries are 1.0). The hardware name is the "name" key. Checks every field (type,
 * range: rates and peaks > 0 and finite, overheads/latency >= 0, efficiencies and interference
 * factors in (0, 1], quant_scale > 0, integers >= 1, the optional cpu.mem_bw_over_threads curve),
 * that every figure has a source, then calls ats_hw_validate().
 * Returns ATS_OK, or ATS_EINVAL for any bad input (unreadable file, JSON syntax error, missing
 * field, wrong type, bad value, unknown key or quant type) with one line in err (may be NULL):
 *   "sim/hw/x.json: field 'gpu.mem_bw_GBps': -3 (must be > 0)"
 *   "sim/hw/x.json:12:5: JSON syntax error: ..."
 *   "sim/hw/x.json: field 'cpu.mem_bw_over_threads[2].threads': 2 (must be an integer in 1..4096, above
 *    the previous point's)"
 * ATS_ENOMEM when jansson runs out of memory. *out is unspecified on failure. Thread-safe.
 */
enum ats_status atsc_hw_load(const char *path, ats_hw *out, ats_err *err);

struct json_t;

/**
 * The "op_table" section of a profile (`ats profile`) for the entries of `t` (borrowed): one array
 * per backend ("cpu", "gpu") of objects {kind, role, type, n_out, n_in, tokens[], t_s[], flop[],
 * bytes[]} (names as ats_op_kind_name / ats_role_name / ats_qtype_name; times in seconds, doubles
 * written exactly, so atsc_hw_load reads the same numbers back) and "sources" with `source_cpu` /
 * `source_gpu` (borrowed; a side whose source is NULL or that has no entry is left out).
 * New reference (the caller decrefs), NULL when out of memory.
 * The loader reads it as hw->op_table: an optional top-level key; every entry checked (known kind,
 * role and type, 1..ATS_PROF_MAX_POINTS points, tokens strictly increasing, times in (0, 1e6] s,
 * work >= 0, arrays of one length), each side with a source; errors name the entry and point:
 *   "p.json: field 'op_table.cpu[3].t_s[2]': -1 (must be a number in (0, 1e6] s)"
 */
struct json_t *atsc_hw_table_json(const ats_prof_table *t, const char *source_cpu, const char *source_gpu);

#ifdef __cplusplus
}
#endif
#endif
