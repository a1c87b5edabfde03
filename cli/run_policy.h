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
    int32_t top_k;               /* --top-k (0 off) */
    double top_p;                /* --top-p (1 off) */
    int serialized, cpu_only, record_ops;
    int no_warmup;               /* 1: no ex_rt_warmup before the first round */
    int print_ids;               /* 1: generated ids (always so without a vocabulary); 0: the text, as plain ats run */
    int no_eos;                  /* 1: do not stop at the vocabulary's end-of-sequence token */
    int quiet;                   /* 1: nothing on stdout (the generated text or ids are not printed) */
    /* optional: called once after the runtime is set up (weights resident) and right before the first
       round (ATS_EXIT_OK to go on, else the run stops with that code), and once after the last round
       or a failure, whenever the first one was called; `ats validate` starts and stops its stressor here */
    int (*before_rounds)(void *ctx);
    void (*after_rounds)(void *ctx);
    void *hook_ctx;
} run_policy_args;

/** Runs the request; the prompt as the model sees it and the generated text (or with print_ids / no
 *  vocabulary the generated ids) on stdout, summary on stderr. Returns an ATS_EXIT_* code. */
int ats_run_policy(const ex_model *m, const run_policy_args *a);

#endif
