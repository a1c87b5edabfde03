/*
 * bench/sched.h — `ats bench sched`: wall time of the scheduling code on this machine for a decode
 * round at context 2048: static placement (Algorithm 1 DP at 1 MiB quanta), the dynamic-transfer DPs
 * (`ats` = model A, `ats-paper` = Algorithm 2), plan building and graph building, each the median of
 * many runs on one thread, next to the paper's figures for Qwen3-14B (§4.4.3: DP ~9 ms, graph
 * rebuild ~7 ms).
 *
 * Usage: o = bench_sched_opts_default(); set o.hw, o.vram_budget_bytes; for each model
 * bench_sched_model(&o, &arch, name, &fig, &err); then bench_sched_json(&o, figs, n, &machine) is the
 * result document (every parameter, the commit, the machine, all figures).
 */
#ifndef BENCH_SCHED_H
#define BENCH_SCHED_H

#include <stdint.h>

#include <jansson.h>

#include "ats/arch.h"
#include "ats/hw.h"
#include "ats/status.h"
#include "bench/bench.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bench_sched_opts {
    const ats_hw *hw;           /* borrowed; the cost model's machine (required) */
    uint64_t vram_budget_bytes; /* [bytes] GPU budget of the `ats` policy (required, > 0) */
    int runs;                   /* timed runs of the DPs and plan building [1 .. 100000]; placement and
                                   graph building: runs / 10, at least 11 */
    int32_t ctx;                /* context of the decode round [tok] */
} bench_sched_opts;
/** runs 201, ctx 2048, hw NULL and budget 0 (the caller sets both). */
bench_sched_opts bench_sched_opts_default(void);

/** One model's figures: wall times [us] (medians), op counts, predicted round latencies [ms]. */
typedef struct bench_sched_fig {
    char model[64];
    int32_t n_ops, n_promotable, n_promoted_ats, n_promoted_paper;
    double place_us, dyn_ats_us, dyn_paper_us, plan_us, graph_us;
    double pred_static_ms, pred_ats_ms;
    int runs_place, runs_dyn, runs_plan;
} bench_sched_fig;

/** Times one model (arch borrowed; name is what the figure is called). ATS_EINVAL with a message when
 *  the graph cannot be built for it, another status (message in err) when the policy, placement, DPs
 *  or plan fail; ATS_ENOMEM. Not thread-safe only in that it measures wall time. */
enum ats_status bench_sched_model(const bench_sched_opts *o, const ats_arch *arch, const char *name,
                                  bench_sched_fig *fig, ats_err *err);

/** The result document (new reference, the caller decrefs): benchmark, version, commit, machine, cpu,
 *  parameters, the paper's figures and results {model: {...}} of figs[0..n). */
json_t *bench_sched_json(const bench_sched_opts *o, const bench_sched_fig *figs, int n, const bench_machine *m);

#ifdef __cplusplus
}
#endif
#endif
