/*
 * cli/sim_cli.h — what `ats sim`, `ats sweep` and `ats bench sim` share: the simulation flags
 * (model, hw, trace, request shape, controller, ablation modes), their parsing and the loading of the
 * model, hardware description and load trace. Private to cli/.
 *
 * Usage: sim_cli_init(&o); for each getopt option call sim_cli_flag(&o, cmd, id, optarg) (returns
 * 1 when it took the flag, 0 when not ours, -1 on a bad value, message printed); then
 * sim_cli_load(&o, cmd) fills arch / hw / trace and the session configuration; sim_cli_free.
 */
#ifndef ATS_SIM_CLI_H
#define ATS_SIM_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "ats/arch.h"
#include "ats/hw.h"
#include "atsc/trace_io.h"
#include "sim/session.h"

/* getopt ids of the shared flags (long options only) */
enum {
    SIMF_MODEL = 1000, SIMF_QUANT, SIMF_HW, SIMF_TRACE, SIMF_VRAM, SIMF_TEMP, SIMF_PROMPT, SIMF_GEN,
    SIMF_CHUNK, SIMF_REQUESTS, SIMF_DURATION, SIMF_GAP, SIMF_JITTER, SIMF_ROUTING, SIMF_RESCHED,
    SIMF_NO_HOSTMEM, SIMF_SERIAL, SIMF_ACT_PATH, SIMF_SEED, SIMF_TRACE_OFFSET, SIMF_NO_PREFETCH,
    SIMF_WINDOW, SIMF_MAX_ROUNDS
};

/** The long options of the shared flags, to append to a command's own table. */
#define SIM_CLI_LONG_OPTIONS                                                                          \
    {"model", required_argument, 0, SIMF_MODEL}, {"quant", required_argument, 0, SIMF_QUANT},         \
    {"hw", required_argument, 0, SIMF_HW}, {"trace", required_argument, 0, SIMF_TRACE},               \
    {"vram-budget", required_argument, 0, SIMF_VRAM}, {"temp-bytes", required_argument, 0, SIMF_TEMP}, \
    {"prompt", required_argument, 0, SIMF_PROMPT}, {"gen", required_argument, 0, SIMF_GEN},           \
    {"chunk", required_argument, 0, SIMF_CHUNK}, {"requests", required_argument, 0, SIMF_REQUESTS},   \
    {"duration", required_argument, 0, SIMF_DURATION}, {"gap", required_argument, 0, SIMF_GAP},       \
    {"jitter", required_argument, 0, SIMF_JITTER}, {"routing", required_argument, 0, SIMF_ROUTING},   \
    {"resched-cost", required_argument, 0, SIMF_RESCHED}, {"no-hostmem", no_argument, 0, SIMF_NO_HOSTMEM}, \
    {"serialized", no_argument, 0, SIMF_SERIAL}, {"act-path", required_argument, 0, SIMF_ACT_PATH},   \
    {"seed", required_argument, 0, SIMF_SEED}, {"trace-offset", required_argument, 0, SIMF_TRACE_OFFSET}, \
    {"no-prefetch", no_argument, 0, SIMF_NO_PREFETCH}, {"tpot-window", required_argument, 0, SIMF_WINDOW}, \
    {"max-rounds", required_argument, 0, SIMF_MAX_ROUNDS}

/** Help text of the shared flags. */
extern const char sim_cli_help[];

typedef struct sim_cli {
    const char *model, *quant, *hw, *trace; /* names or paths; trace "none" = idle machine */
    int trace_given, duration_given, requests_given, resched_given;
    sim_session_cfg cfg;
    char routing_path[1024];
    /* loaded by sim_cli_load */
    ats_arch arch;
    ats_hw hw_desc;
    atsc_trace *tr;
    sim_trace st;
    char model_path[1024], hw_path[1024], trace_path[1024];
    char trace_name[64];
    /* re-schedule cost actually used (sim_cli_load): for every policy but ats-paper, for ats-paper,
       and where each figure came from */
    double resched_s, resched_paper_s;
    char resched_src[600], resched_paper_src[600];
} sim_cli;

void sim_cli_init(sim_cli *o);
void sim_cli_free(sim_cli *o);
/** 1 took the flag, 0 not a shared flag, -1 bad value (message printed). */
int sim_cli_flag(sim_cli *o, const char *cmd, int id, const char *arg);
/** Loads model, hw and trace; default VRAM budget (85% of the GPU's memory) when none given, a
 *  budget above the GPU's memory refused; default duration = the trace's length when a trace is
 *  given and neither --requests nor --duration; --trace-offset past the trace's end refused; the
 *  run refused when sim_session_round_bound exceeds --max-rounds; the re-schedule costs resolved
 *  (resched_s / resched_paper_s with their sources). Returns 0, or 2 (bad input, message
 *  printed). */
int sim_cli_load(sim_cli *o, const char *cmd);
/** The re-schedule cost for `policy` into *cost_s [s]: --resched-cost when given; else the DP +
 *  plan-build times that `ats bench sched` measured on this machine for this model
 *  (experiments/sched-speed/bench-sched.json in the source tree, $ATS_BENCH_SCHED overrides); else the
 *  paper's 16 ms (§4.4.3). `source` (may be NULL) receives where the figure came from. Returns 0,
 *  or 2 when $ATS_BENCH_SCHED is set (non-empty) and names a file that cannot be read, a directory, not
 *  JSON, without an object "results", or whose entry for the model has a dynamic_transfer_us,
 *  dynamic_transfer_paper_us or plan_build_us that is missing, not a number or outside 0 .. 1e7 us (or
 *  a sum over 10 s), --resched-cost's range (one line printed for `cmd`, naming the variable, the
 *  path, the field and the value or the reason); a file without the model keeps the paper's figure;
 *  unset or empty, a missing or unreadable default file means the paper's figure. */
int sim_cli_resched_cost(const sim_cli *o, const char *cmd, const char *policy, double *cost_s, char *source,
                         size_t len);
/** 0 when `policy` can run `o->arch` at all; else 1 with a short reason in why (the `expert`
 *  policy needs routed experts). Used to skip inapplicable policies of the default 'all'. */
int sim_cli_policy_applies(const sim_cli *o, const char *policy, char *why, size_t len);
/** The re-schedule cost sim_cli_load resolved for `policy` [s]; source (may be NULL) receives its
 *  origin. */
double sim_cli_resched_for(const sim_cli *o, const char *policy, const char **source);
/** Parses a time: "16ms", "2.5s", "300us" or a plain number of seconds. 0 ok, -1 bad. */
int sim_cli_parse_time(const char *s, double *out_s);
/** Parses "a:b:s" into a ≤ b, s > 0 (inclusive grid); a single value is a:a:1. Returns the number
 *  of points (≤ max) or -1 with the reason in why (may be NULL; e.g. "too many grid points (N,
 *  limit M)"). With in_s (else units are refused as not numbers), values may carry a time unit (s, ms,
 *  us; all fields or none): the points are then in seconds and *in_s = 1, else *in_s = 0. */
int sim_cli_parse_range(const char *s, double *vals, int max, int *in_s, char *why, size_t len);
/** The configuration as a JSON object (for results files and timelines); static buffer per call
 *  site is not used: writes into buf. */
const char *sim_cli_config_json(const sim_cli *o, const char *policies, char *buf, size_t len);
/** Progress bar on stderr (only when stderr is a terminal): call with 0..1; "done" ends the line. */
void sim_cli_progress(const char *label, double frac, int done);

#endif
