/*
 * bench/model.h — `ats bench model`: whole-model speed in llama-bench's form. For each model (a GGUF
 * file, or seeded dummy weights of an architecture and quantization recipe), each execution
 * configuration (`ats run`'s --backend A[,B] --split K, or `ats run --policy P --vram-budget B`: the
 * plan executor ex_rt), each CPU thread count and each test (ppN: one prompt of N tokens; tgN: N decode
 * steps of one token), one row with the mean ± sample standard deviation of tokens/s over the
 * repetitions, after one warm-up run that is not counted. Weights are loaded (bench_model_load) and, on
 * a device backend, uploaded (by the warm-up, or by ex_rt_new for a policy) before anything is timed;
 * the load, placement/upload and warm-up times are reported apart from the rates.
 *
 * Policy rows (bench_model_exec.policy set): one runtime (ex_rt_new: placement, upload of the resident
 * weights, controllers) per row, then ex_rt_warmup and one untimed run of the test, then the timed
 * repetitions, each from an empty KV cache (ex_session_clear on the runtime's session) with the
 * controllers' state carried over from the runs before (as in a server that keeps running; llama-bench
 * likewise keeps the loaded model and clears the KV cache between repetitions). ppN is one prefill of N
 * tokens in rounds of `chunk`; tgN a 1-token prefill round (not timed) then N decode rounds, as ats
 * run's rounds. Without a CUDA device every op runs on the CPU (ex_rt_new with no device), as ats run
 * --policy does.
 *
 * Lifecycle: bench_model_load → bench_model_dev_open (per execution configuration) → bench_model_run
 * for each (threads, test) → bench_model_dev_free → ex_model_free; then bench_model_print over all
 * rows and bench_model_row_free. A device handle must be freed before the model whose weights it
 * mirrored. Not thread-safe: one benchmark at a time per process (it sets OpenMP's thread count).
 *
 * The configuration of a row is bench_model_exec: adding a column (a scheduling policy, say) is a field
 * there and one entry in the column table of bench/src/model.c.
 */
#ifndef BENCH_MODEL_H
#define BENCH_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "ats/arch.h"
#include "ats/hw.h"
#include "ats/quant.h"
#include "ats/status.h"
#include "ex/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Where a model's weights come from: a GGUF file, or dummy weights (ex_model_new_dummy). */
typedef struct bench_model_src {
    const char *gguf_path;  /* GGUF file (borrowed), or NULL for dummy weights */
    const ats_arch *arch;   /* dummy weights: the architecture (borrowed) */
    ats_recipe recipe;      /* dummy weights: the quantization recipe */
    uint64_t seed;          /* dummy weights: the seed (`ats run --seed`) */
    ex_progress_fn progress;/* dummy weights: called while they are built (may be NULL) */
    void *progress_ctx;
} bench_model_src;

/** Loads src into *out (new; ex_model_free) and its wall time into *load_s [s]. Statuses of
 *  ex_model_load_gguf / ex_model_new_dummy, message in err. */
enum ats_status bench_model_load(const bench_model_src *src, ex_model **out, double *load_s, ats_err *err);

/** One execution configuration (a row's backend columns). */
typedef struct bench_model_exec {
    char backend[32];   /* "cpu", "cuda", or "A,B": backend of layers [0, split) and of the rest;
                           a policy row: its label "P@XGiB" (bench_model_exec_policy) */
    int64_t split;      /* layer index of the split; -1: none (backend A everywhere) */
    char policy[32];    /* sched policy name (ats_policy_names), "" for a backend row */
    uint64_t vram_budget_bytes; /* policy row: ex_rt_cfg.vram_budget_bytes [bytes]; 0 otherwise */
    int serialized;     /* policy row: every plan serialized (ex_rt_cfg.serialized) */
} bench_model_exec;

/** A policy row's configuration: policy (copied), budget, serialized, the label "P@XGiB" in backend
 *  (" serialized" appended when set), split -1. ATS_EINVAL (message) for a name too long for the
 *  fields; the policy name is checked by bench_model_dev_open. */
enum ats_status bench_model_exec_policy(const char *policy, uint64_t vram_budget_bytes, int serialized,
                                        bench_model_exec *out, ats_err *err);

/** The backend tables of an execution configuration (a CUDA device and its table where needed). */
typedef struct bench_model_dev bench_model_dev;

/** Opens the backends ex->backend names ("cpu", "cuda", comma-separated pair). ATS_EINVAL with a
 *  message for an unknown name or a CUDA backend in a build without CUDA or on a machine without a
 *  device; ATS_EIO for a device failure. A policy row (ex->policy set): ATS_EINVAL for an unknown
 *  policy; the CUDA device of the plan executor (ex_device_cuda_new) where there is one, else none
 *  (every op on the CPU: bench_model_dev_gpu_name is ""); ATS_EIO for a device failure.
 *  *out new (bench_model_dev_free). */
enum ats_status bench_model_dev_open(const bench_model_exec *ex, bench_model_dev **out, ats_err *err);
/** A policy row's handle over a given plan-executor device (borrowed: it outlives the handle), e.g.
 *  ex_device_host_new's device emulated over host memory, which runs the executor's device path
 *  (resident upload, transfers, gb_h2d) without a GPU; the gpu column is dev->name. ATS_EINVAL for a
 *  backend row or an unknown policy. *out new (bench_model_dev_free). */
struct ex_device;
enum ats_status bench_model_dev_open_on(const bench_model_exec *ex, struct ex_device *dev, bench_model_dev **out,
                                        ats_err *err);
void bench_model_dev_free(bench_model_dev *d);
/** The device's name ("NVIDIA H200"), or "" when the configuration uses no GPU (borrowed). */
const char *bench_model_dev_gpu_name(const bench_model_dev *d);

/** One test: n_prompt > 0 and n_gen == 0 is "pp<n_prompt>", n_prompt == 0 and n_gen > 0 "tg<n_gen>". */
typedef struct bench_model_test {
    int64_t n_prompt, n_gen; /* [tokens] */
} bench_model_test;

typedef struct bench_model_opts {
    int reps;           /* timed repetitions (default 5, as llama-bench's -r) */
    int threads;        /* CPU threads (OpenMP); 0 = omp_get_max_threads() */
    int64_t chunk;      /* prefill chunk [tokens] (default 512, as ats run) */
    ats_qtype kv_type;  /* KV cache: ATS_Q_F16 (default; llama-bench's -ctk/-ctv f16) or ATS_Q_F32 */
    uint64_t seed;      /* token ids of prompts and decode steps (uniform over the vocabulary) */
    const ats_hw *hw;   /* policy rows: the starting cost snapshot (ex_rt_cfg.hw; borrowed; its
                           cpu_threads is set to the row's threads); required for them */
} bench_model_opts;

bench_model_opts bench_model_opts_default(void);

#define BENCH_MODEL_NAME_LEN 128

/** One row of results. */
typedef struct bench_model_row {
    char model[BENCH_MODEL_NAME_LEN]; /* the model as given (file or name) */
    char desc[BENCH_MODEL_NAME_LEN];  /* "qwen3 q4_k_m" (family and recipe or file type) */
    uint64_t size_bytes;              /* weight bytes [bytes] */
    double n_params;                  /* parameters (ats_arch_param_count total) */
    bench_model_exec exec;
    char gpu[64];                     /* device name, "" without a GPU */
    int threads;
    bench_model_test test;
    int reps;
    double *samples_tok_s;            /* reps entries [tok/s], owned (bench_model_row_free) */
    double mean_tok_s, std_tok_s;     /* mean and sample standard deviation (n - 1) [tok/s] */
    double load_s;                    /* bench_model_load's time of this model [s] */
    double warmup_s;                  /* the row's warm-up run (a device backend's first one uploads the
                                         weights; a policy row: ex_rt_warmup and one run of the test) [s] */
    /* policy rows (0 for backend rows) */
    double setup_s;                   /* ex_rt_new: session, placement, controllers, resident upload [s] */
    double upload_s;                  /* of which the resident weights' upload (ex_rt_upload_s) [s] */
    uint64_t resident_bytes;          /* weights resident on the device (ex_rt_layout) [bytes] */
    int64_t n_reschedules;            /* re-plans during the timed repetitions, all of them together */
    double gb_h2d;                    /* weight (and KV) bytes copied host → device per run of the test,
                                         mean over the repetitions [GB = 1e9 bytes] */
} bench_model_row;

/** Runs test t of model m (borrowed) on the backends of d: one warm-up run, then o->reps timed runs,
 *  each in a fresh session of n_ctx = n_prompt + n_gen (session creation not timed); a policy row as
 *  the file's comment says (one ex_rt of n_ctx = N + 1). Fills *row (model, desc, size and load_s are
 *  left to the caller). ATS_EINVAL for a bad test or options (message), ex_rt_new's statuses
 *  (ATS_EINFEASIBLE: the layout does not fit the budget) and the session's otherwise. */
enum ats_status bench_model_run(const ex_model *m, const bench_model_dev *d, const bench_model_test *t,
                                const bench_model_opts *o, bench_model_row *row, ats_err *err);

void bench_model_row_free(bench_model_row *row);

/** Output formats: markdown table (llama-bench's default), CSV (one header line), JSON (array). */
typedef enum bench_model_fmt { BENCH_MODEL_MD = 0, BENCH_MODEL_CSV, BENCH_MODEL_JSON } bench_model_fmt;

/** "md", "csv", "json" → *out; ATS_ENOTFOUND otherwise. */
enum ats_status bench_model_fmt_from_name(const char *name, bench_model_fmt *out);

/** Prints rows[0..n) to f in fmt. Markdown: | model | size | params | backend | threads | test | t/s |
 *  with "mean ± std", then one line per model with its load time and per row with the warm-up time
 *  (a policy row: also placement/upload, re-plans and GB host → device); CSV and JSON: every field of
 *  the row, samples included (the policy fields after the others; 0 or "" on backend rows). */
void bench_model_print(FILE *f, bench_model_fmt fmt, const bench_model_row *rows, int n);

/** The rows as a JSON document (new jansson reference, caller decrefs) with the build's commit, this
 *  machine's host and CPU names and the options, for the result file. */
struct json_t *bench_model_json(const bench_model_row *rows, int n, const bench_model_opts *o);

#ifdef __cplusplus
}
#endif
#endif
