/* cli/run_policy.h — `ats run --policy P`: the plan executor's run of one request (run_policy.c). */
#ifndef ATS_CLI_RUN_POLICY_H
#define ATS_CLI_RUN_POLICY_H

#include <stdint.h>

#include "ats/controller.h"
#include "ex/model.h"
#include "ex/session.h"

typedef struct run_policy_args {
    const char *policy, *hw, *out_path, *timeline_path;
    uint64_t vram_budget;        /* [bytes] */
    ats_controller_cfg ctrl;     /* --eps, --interval */
    ex_session_opts so;          /* --ctx, --kv-type */
    const int32_t *prompt;       /* n_prompt token ids */
    int64_t n_prompt, n_gen, chunk;
    double temp;
    uint64_t seed;
    int serialized, cpu_only, print_ids, record_ops;
} run_policy_args;

/** Runs the request; generated ids on stdout, summary on stderr. Returns an ATS_EXIT_* code. */
int ats_run_policy(const ex_model *m, const run_policy_args *a);

#endif
