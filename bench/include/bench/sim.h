/*
 * bench/sim.h — `ats bench sim`: how fast the simulator is, three figures:
 *  1. engine events per second on one core: the round program of one decode round under the `ats`
 *     policy (plan from sched) run back to back by the engine alone (target >= 5 M/s); also the whole
 *     session's rate (plans, controller, routing included), from the replay;
 *  2. wall time to replay a 10-minute (quick: 1-minute) stream of requests with the `ats` policy
 *     (target <= 2 s);
 *  3. a 16 x 16 (quick: 4 x 4) eps x tau sweep of `ats` over three 180 s traces on `threads` cores
 *     (target <= 300 s on 2 cores).
 * Wall-clock times only here, never in the simulator.
 *
 * Usage: o = bench_sim_opts_default(); set arch, hw, cfg (model recipe, VRAM budget, request shape),
 * resched_cost_s, the replay trace and the sweep traces (or leave the synthetic ones);
 * bench_sim_run(&o, &r, &err); bench_sim_json(&o, &r, &machine) is the result document.
 */
#ifndef BENCH_SIM_H
#define BENCH_SIM_H

#include <stdint.h>

#include <jansson.h>

#include "ats/arch.h"
#include "ats/hw.h"
#include "ats/status.h"
#include "bench/bench.h"
#include "sim/engine.h"
#include "sim/session.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BENCH_SIM_N_TRACES 3
#define BENCH_SIM_TRACE_MAX 64 /* change points of a synthetic trace */

/** The two synthetic 180 s traces (periodic CPU+PCIe bursts; a GPU availability ramp) in
 *  caller-owned storage. */
typedef struct bench_sim_synth {
    double t_s[2][BENCH_SIM_TRACE_MAX], avail[2][3][BENCH_SIM_TRACE_MAX]; /* [trace][cpu,gpu,pcie][i] */
    sim_trace trace[2];                                               /* pointing into the arrays */
} bench_sim_synth;
/** Fills s: trace[0] "synth-bursts" (10 s of cpu 0.4 / pcie 0.5 every 20 s), trace[1]
 *  "synth-gpu-ramp" (gpu and pcie availability from 1 down to 0.4 in 10 s steps, then back). */
void bench_sim_synth_init(bench_sim_synth *s);

typedef struct bench_sim_opts {
    const ats_arch *arch;   /* borrowed (required) */
    const ats_hw *hw;       /* borrowed (required) */
    sim_session_cfg cfg;    /* the base session: recipe, VRAM budget, request shape, controller, seed;
                               policy, duration and request count are set by each part */
    double resched_cost_s;  /* CPU time of one `ats` re-schedule [s] */
    const sim_trace *replay_trace; /* the replay's machine load (borrowed); NULL = idle */
    const char *replay_trace_name; /* for the result file ("none" when idle) */
    /* the sweep's three traces (borrowed); a NULL trace is the idle machine */
    const sim_trace *sweep_trace[BENCH_SIM_N_TRACES];
    const char *sweep_trace_name[BENCH_SIM_N_TRACES];
    int threads;            /* OpenMP threads of the sweep [1 .. 1024] */
    int quick;              /* 1: 2000 engine reps, 1-minute replay, 4 x 4 sweep */
    bench_sink sink;        /* progress of the three parts (only its progress entry is used; zeroed: none) */
} bench_sim_opts;
/** threads 2, quick 0, cfg = sim_session_cfg_default(), resched 0, no traces (idle); arch and hw NULL. */
bench_sim_opts bench_sim_opts_default(void);

typedef struct bench_sim_result {
    /* 1. engine */
    int32_t program_tasks;
    double engine_events_per_s, session_events_per_s;
    /* 2. replay */
    double replay_sim_s, replay_wall_s;
    size_t replay_rounds;
    uint64_t replay_events;
    double replay_tpot_mean_s;
    /* 3. sweep */
    int grid;                    /* grid x grid points per trace */
    long sweep_sessions, sweep_failed, sweep_rounds;
    uint64_t sweep_events;
    double sweep_wall_s, sweep_scaled_s, session_setup_s;
    double best_tpot_s[BENCH_SIM_N_TRACES]; /* INFINITY where no point finished */
} bench_sim_result;

/** Runs the three parts. ATS_OK; else the status of the engine set-up or of the replay with a message
 *  (a failed sweep point is counted in sweep_failed, not an error). Uses `threads` OpenMP threads. */
enum ats_status bench_sim_run(const bench_sim_opts *o, bench_sim_result *r, ats_err *err);

/** The result document (new reference): commit, machine, every parameter and the figures. */
json_t *bench_sim_json(const bench_sim_opts *o, const bench_sim_result *r, const bench_machine *m);

#ifdef __cplusplus
}
#endif
#endif
