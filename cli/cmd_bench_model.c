/*
 * ats bench model — llama-bench's form for ATS: tokens/s of whole models (bench/model.h does the work;
 * this file parses the flags, checks them before any model is loaded, and prints).
 *   ats bench model -m a.gguf,b.gguf [-p 512] [-n 128] [-r 5] [-t 8,16] [--backend cpu] [--backend cuda]
 *   ats bench model --dummy-weights -m qwen3-14b [--quant q4_k_m] ...
 *   ats bench model ... --policy layer,ats --vram-budget 4.5GiB [--hw h200-host] [--serialized]
 * One row per (model, backend or policy, threads, test), mean ± std tok/s; -o md|csv|json on stdout; with --out the
 * result file holds the rows, every parameter, the commit and the machine.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ats/policy.h"
#include "atsc/hw_json.h"
#include "atsc/model_json.h"
#include "atsc/outfile.h"
#include "bench/model.h"
#include "cli.h"
#include "ex/model.h"

#define CMD "bench model"
#define MAX_LIST 16

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats bench model -m A.gguf[,B.gguf...] [options]\n"
            "       ats bench model --dummy-weights -m NAME[,NAME...] [--quant R[,R...]] [options]\n\n"
            "Tokens/s of whole models, as llama-bench: for each model, backend or policy, thread count and test\n"
            "one row with the mean ± sample standard deviation over -r runs after one warm-up run (not counted).\n"
            "Weights are loaded, and uploaded by the warm-up (a policy: placed and uploaded first), before\n"
            "timing; load, placement/upload and warm-up times are printed apart.\n"
            "  -m, --model LIST        GGUF files (comma-separated), or model names/JSON with --dummy-weights\n"
            "  --dummy-weights         seeded random weights of each model's shapes (ats run --dummy-weights)\n"
            "  --quant LIST            recipes for --dummy-weights (f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4;\n"
            "                          default: each model's own)\n"
            "  -p, --n-prompt LIST     prompt lengths: test ppN times one prompt of N tokens (default 512; 0: none)\n"
            "  -n, --n-gen LIST        decode lengths: test tgN times N steps of one token (default 128; 0: none)\n"
            "  -r, --repetitions N     timed runs per row (default 5)\n"
            "  -t, --threads LIST      CPU threads (default: all)\n"
            "  --backend A[,B]         as ats run: backend of layers [0,K) and of the rest, cpu or cuda\n"
            "                          (default cpu); give it again for more rows (--backend cpu --backend cuda)\n"
            "  --split K               layers [0,K) on A, the rest on B\n"
            "  --policy P[,P...]       as ats run --policy: the rounds follow sched's plans (plan executor); one row\n"
            "                          group per policy, backend column P@BGiB; without a CUDA device every op\n"
            "                          runs on the CPU (said on stderr). One runtime per row (placement and upload\n"
            "                          before timing); each repetition from an empty KV cache, the controller's\n"
            "                          state kept (a server that keeps running); tgN: N decode rounds after a\n"
            "                          1-token prefill round. Without --backend: the policy rows only.\n"
            "                          Policies: %s\n"
            "  --vram-budget B         device bytes of the policy rows, e.g. 4.5GiB (required with --policy)\n"
            "  --hw H                  policy rows' starting cost snapshot: sim/hw/H.json (default h200-host)\n"
            "  --serialized            policy rows: every plan serialized (no copy/compute overlap)\n"
            "  --chunk N               prefill chunk in tokens (default 512)\n"
            "  --kv-type f16|f32       KV cache element (default f16, llama-bench's -ctk/-ctv)\n"
            "  --seed S                weight seed of --dummy-weights and token ids (default 42)\n"
            "  -o, --output md|csv|json  format on stdout (default md)\n"
            "  --out FILE              also write the result file (JSON: rows, parameters, commit, machine)\n"
            "CSV/JSON columns of policy rows (after the others; 0 or empty on backend rows): policy,\n"
            "vram_budget_bytes, serialized, setup_s (placement + upload), upload_s, resident_bytes,\n"
            "n_reschedules (over the timed runs), gb_h2d (GB host->device per run).\n",
            ats_policy_names());
}

/* comma-separated integers in [lo, hi] into v (at most MAX_LIST); -1 with one error line */
static int parse_int_list(const char *flag, const char *s, long long lo, long long hi, long long *v, int *n)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    if (!*s || ats_cli_list_has_empty(s, ',')) {
        ats_cli_error(CMD, "%s: bad value '%s' (integers %lld..%lld, comma-separated)", flag, s, lo, hi);
        return -1;
    }
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        long long x;
        if (ats_cli_parse_int(p, &x) || x < lo || x > hi || *n == MAX_LIST) {
            ats_cli_error(CMD, "%s: bad value '%s' in '%s' (integers %lld..%lld, comma-separated, at most %d)", flag, p, s,
                          lo, hi, MAX_LIST);
            return -1;
        }
        v[(*n)++] = x;
    }
    return 0;
}

/* comma-separated names into v (pointers into buf); -1 with one error line */
static int split_names(const char *flag, char *buf, char **v, int *n)
{
    *n = 0;
    if (!*buf || ats_cli_list_has_empty(buf, ',')) {
        ats_cli_error(CMD, "%s: '%s' has an empty entry (names separated by single commas)", flag, buf);
        return -1;
    }
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIST) {
            ats_cli_error(CMD, "%s: more than %d entries", flag, MAX_LIST);
            return -1;
        }
        v[(*n)++] = p;
    }
    return 0;
}

static void progress(int k, int total, const char *model, const char *backend, int threads, const bench_model_test *t)
{
    ats_cli_progress(CMD, "[%d/%d] %s, %s, %d threads, %s%lld", k, total, model, backend, threads,
                     t->n_prompt > 0 ? "pp" : "tg", (long long)(t->n_prompt > 0 ? t->n_prompt : t->n_gen));
}

enum { O_DUMMY = 256, O_QUANT, O_BACKEND, O_SPLIT, O_CHUNK, O_KV, O_SEED, O_OUT, O_POLICY, O_VRAM, O_HW, O_SERIAL };

/* the command line, as given and as checked */
typedef struct bm_args {
    char models_buf[2048], quants_buf[256], policies_buf[512];
    const char *p_arg, *n_arg, *t_arg, *out, *hw_name;
    const char *backends[MAX_LIST];
    int n_backends, dummy, serialized;
    uint64_t vram; /* --vram-budget [bytes]; 0: not given */
    long long reps, split, chunk, seed;
    bench_model_fmt fmt;
    bench_model_opts o;
    /* checked */
    long long tv[MAX_LIST];
    int nt;
    bench_model_test tests[2 * MAX_LIST];
    int n_tests;
    bench_model_exec execs[2 * MAX_LIST]; /* the backends, then the policies */
    int n_execs;
    char *names[MAX_LIST], *quants[MAX_LIST], *policies[MAX_LIST];
    int n_names, n_quants, n_policies;
    ats_hw hw; /* --hw's snapshot, loaded when there are policies */
    ats_arch archs[MAX_LIST];
    ats_recipe recipes[MAX_LIST];
} bm_args;

/* one option of the getopt loop into a; ATS_EXIT_OK to go on, anything else: return it (-1: --help done) */
static int parse_opt(bm_args *a, int c, int argc, char **argv, const struct option *opts)
{
    (void)argc;
    switch (c) {
    case 'm':
        if (ats_cli_file_value(CMD, "--model", optarg)) return ATS_EXIT_USAGE;
        snprintf(a->models_buf, sizeof a->models_buf, "%s", optarg);
        break;
    case O_DUMMY: a->dummy = 1; break;
    case O_QUANT: snprintf(a->quants_buf, sizeof a->quants_buf, "%s", optarg); break;
    case 'p': a->p_arg = optarg; break;
    case 'n': a->n_arg = optarg; break;
    case 't': a->t_arg = optarg; break;
    case 'r':
        if (ats_cli_parse_int(optarg, &a->reps) || a->reps < 1 || a->reps > 1000) {
            ats_cli_error(CMD, "-r: bad value '%s' (an integer 1..1000)", optarg);
            return ATS_EXIT_USAGE;
        }
        break;
    case O_BACKEND:
        if (a->n_backends == MAX_LIST) {
            ats_cli_error(CMD, "--backend: more than %d", MAX_LIST);
            return ATS_EXIT_USAGE;
        }
        a->backends[a->n_backends++] = optarg;
        break;
    case O_SPLIT:
        if (ats_cli_parse_int(optarg, &a->split) || a->split < 0 || a->split > ATS_ARCH_MAX_LAYERS) {
            ats_cli_error(CMD, "--split: bad value '%s' (a layer index 0..%d)", optarg, ATS_ARCH_MAX_LAYERS);
            return ATS_EXIT_USAGE;
        }
        break;
    case O_CHUNK:
        if (ats_cli_parse_int(optarg, &a->chunk) || a->chunk < 1 || a->chunk > 1000000) {
            ats_cli_error(CMD, "--chunk: bad value '%s' (an integer 1..1000000 tokens)", optarg);
            return ATS_EXIT_USAGE;
        }
        break;
    case O_KV:
        if (!strcasecmp(optarg, "f16")) a->o.kv_type = ATS_Q_F16;
        else if (!strcasecmp(optarg, "f32")) a->o.kv_type = ATS_Q_F32;
        else {
            ats_cli_error(CMD, "--kv-type: bad value '%s' (f16 or f32)", optarg);
            return ATS_EXIT_USAGE;
        }
        break;
    case O_SEED:
        if (ats_cli_parse_int(optarg, &a->seed) || a->seed < 0) {
            ats_cli_error(CMD, "--seed: bad value '%s' (an integer >= 0)", optarg);
            return ATS_EXIT_USAGE;
        }
        break;
    case 'o':
        if (bench_model_fmt_from_name(optarg, &a->fmt) != ATS_OK) {
            ats_cli_error(CMD, "-o: bad value '%s' (md, csv or json)", optarg);
            return ATS_EXIT_USAGE;
        }
        break;
    case O_OUT:
        if (ats_cli_file_value(CMD, "--out", optarg)) return ATS_EXIT_USAGE;
        a->out = optarg;
        break;
    case O_POLICY:
        if (!*optarg) {
            ats_cli_error(CMD, "--policy: empty (one or more of %s, comma-separated)", ats_policy_names());
            return ATS_EXIT_USAGE;
        }
        snprintf(a->policies_buf, sizeof a->policies_buf, "%s", optarg);
        break;
    case O_VRAM:
        if (ats_cli_parse_vram(CMD, optarg, &a->vram)) return ATS_EXIT_USAGE;
        if (a->vram == 0) {
            ats_cli_error(CMD, "--vram-budget: bad value '%s' (a size > 0, e.g. 4.5GiB)", optarg);
            return ATS_EXIT_USAGE;
        }
        break;
    case O_HW: a->hw_name = optarg; break;
    case O_SERIAL: a->serialized = 1; break;
    case 'h': usage(stdout); return -1;
    case ':': ats_cli_missing_value(CMD, argv[optind - 1], optopt); return ATS_EXIT_USAGE;
    default: ats_cli_bad_option(CMD, argv[optind - 1], optopt, opts); return ATS_EXIT_USAGE;
    }
    return ATS_EXIT_OK;
}

/* argv into a (defaults first); ATS_EXIT_OK, ATS_EXIT_USAGE, or -1 after --help */
static int parse_args(bm_args *a, int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},      {"dummy-weights", no_argument, 0, O_DUMMY},
        {"quant", required_argument, 0, O_QUANT},  {"n-prompt", required_argument, 0, 'p'},
        {"n-gen", required_argument, 0, 'n'},      {"repetitions", required_argument, 0, 'r'},
        {"threads", required_argument, 0, 't'},    {"backend", required_argument, 0, O_BACKEND},
        {"split", required_argument, 0, O_SPLIT},  {"chunk", required_argument, 0, O_CHUNK},
        {"kv-type", required_argument, 0, O_KV},   {"seed", required_argument, 0, O_SEED},
        {"output", required_argument, 0, 'o'},     {"out", required_argument, 0, O_OUT},
        {"policy", required_argument, 0, O_POLICY}, {"vram-budget", required_argument, 0, O_VRAM},
        {"hw", required_argument, 0, O_HW},        {"serialized", no_argument, 0, O_SERIAL},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    a->p_arg = "512";
    a->n_arg = "128";
    a->reps = 5, a->split = -1, a->chunk = 512, a->seed = 42;
    a->fmt = BENCH_MODEL_MD;
    a->o = bench_model_opts_default();
    optind = 1;
    opterr = 0;
    int c;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":m:p:n:r:t:o:h", opts, NULL)) != -1) {
        if (c != O_BACKEND && ats_cli_once_opt(CMD, &seen, opts, c, optarg)) return ATS_EXIT_USAGE;
        int rc = parse_opt(a, c, argc, argv, opts);
        if (rc != ATS_EXIT_OK) return rc;
    }
    if (optind < argc) {
        ats_cli_error(CMD, "unexpected argument '%s' (ats bench model --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    if (!a->models_buf[0]) {
        ats_cli_error(CMD, "-m is required: GGUF files, or model names with --dummy-weights (ats bench model --help)");
        return ATS_EXIT_USAGE;
    }
    if (a->quants_buf[0] && !a->dummy) {
        ats_cli_error(CMD, "--quant only applies to --dummy-weights (use `ats quantize` for a GGUF file)");
        return ATS_EXIT_USAGE;
    }
    if (a->policies_buf[0] && !a->vram) {
        ats_cli_error(CMD, "--policy needs --vram-budget (the device bytes of the policy rows, e.g. 4.5GiB)");
        return ATS_EXIT_USAGE;
    }
    if (!a->policies_buf[0] && (a->vram || a->hw_name || a->serialized)) {
        ats_cli_error(CMD, "--vram-budget, --hw and --serialized go with --policy");
        return ATS_EXIT_USAGE;
    }
    return ATS_EXIT_OK;
}

/* -p / -n / -t lists into the tests and thread counts; the backends into execs */
static int check_tests_backends(bm_args *a)
{
    long long pv[MAX_LIST], nv[MAX_LIST];
    int np, nn;
    if (parse_int_list("-p", a->p_arg, 0, 1 << 20, pv, &np) || parse_int_list("-n", a->n_arg, 0, 1 << 20, nv, &nn))
        return ATS_EXIT_USAGE;
    if (a->t_arg && parse_int_list("-t", a->t_arg, 1, 1024, a->tv, &a->nt)) return ATS_EXIT_USAGE;
    for (int i = 0; i < np; i++)
        if (pv[i] > 0) a->tests[a->n_tests++] = (bench_model_test){pv[i], 0};
    for (int i = 0; i < nn; i++)
        if (nv[i] > 0) a->tests[a->n_tests++] = (bench_model_test){0, nv[i]};
    if (a->n_tests == 0) {
        ats_cli_error(CMD, "-p %s -n %s: no test (every value is 0)", a->p_arg, a->n_arg);
        return ATS_EXIT_USAGE;
    }
    /* --policy alone: its rows only; else --backend's (default cpu) */
    if (a->n_backends == 0 && !a->policies_buf[0]) a->backends[a->n_backends++] = "cpu";
    for (int i = 0; i < a->n_backends; i++) {
        const char *be = a->backends[i];
        bench_model_exec *x = &a->execs[i];
        if (strlen(be) >= sizeof x->backend) {
            ats_cli_error(CMD, "--backend: '%s' (cpu, cuda or a pair of them)", be);
            return ATS_EXIT_USAGE;
        }
        snprintf(x->backend, sizeof x->backend, "%s", be);
        x->split = strchr(be, ',') ? a->split : -1;
        const char *cm = strchr(be, ',');
        size_t n0 = cm ? (size_t)(cm - be) : strlen(be);
        int ok = (n0 == 3 && !strncmp(be, "cpu", 3)) || (n0 == 4 && !strncmp(be, "cuda", 4));
        ok = ok && (!cm || !strcmp(cm + 1, "cpu") || !strcmp(cm + 1, "cuda"));
        if (!ok) {
            ats_cli_error(CMD, "--backend: '%s' (each must be cpu or cuda)", be);
            return ATS_EXIT_USAGE;
        }
    }
    a->n_execs = a->n_backends;
    if (a->policies_buf[0] && split_names("--policy", a->policies_buf, a->policies, &a->n_policies)) return ATS_EXIT_USAGE;
    if (a->n_policies > 0 && a->n_backends == 0 && a->split >= 0) {
        ats_cli_error(CMD, "--split %lld goes with --backend A,B (the split rows), not with --policy (its plans place "
                           "every tensor)", a->split);
        return ATS_EXIT_USAGE;
    }
    for (int i = 0; i < a->n_policies; i++) {
        const ats_policy_ops *po;
        ats_err err = {{0}};
        for (int j = 0; j < i; j++)
            if (!strcmp(a->policies[i], a->policies[j])) {
                ats_cli_error(CMD, "--policy: '%s' given twice (one row group each)", a->policies[i]);
                return ATS_EXIT_USAGE;
            }
        if (ats_policy_find(a->policies[i], &po) != ATS_OK) {
            ats_cli_error(CMD, "--policy: unknown policy '%s' (%s)", a->policies[i], ats_policy_names());
            return ATS_EXIT_USAGE;
        }
        if (bench_model_exec_policy(a->policies[i], a->vram, a->serialized, &a->execs[a->n_execs++], &err) != ATS_OK) {
            ats_cli_error(CMD, "%s", err.msg);
            return ATS_EXIT_USAGE;
        }
    }
    return ATS_EXIT_OK;
}

/* --hw's snapshot for the policy rows, and --vram-budget against its VRAM (as ats run) */
static int check_hw(bm_args *a)
{
    if (!a->n_policies) return ATS_EXIT_OK;
    char path[1024];
    ats_err err = {{0}};
    const char *name = a->hw_name ? a->hw_name : "h200-host";
    if (atsc_hw_load(ats_cli_hw_path(name, path, sizeof path), &a->hw, &err) != ATS_OK) {
        ats_cli_error(CMD, "--hw: %s", err.msg); /* the message names the file */
        return ATS_EXIT_USAGE;
    }
    uint64_t budget = a->vram;
    if (ats_cli_budget_for_hw(CMD, &budget, a->hw.gpu_vram_bytes, a->hw.name, path)) return ATS_EXIT_USAGE;
    a->o.hw = &a->hw;
    return ATS_EXIT_OK;
}

/* every test of a fits model `name`'s context of ctx tokens (its max_position_embeddings, a GGUF's
 * context_length; 0: not known, nothing checked). A test runs in a session of n_prompt + n_gen tokens. */
static int check_context(const bm_args *a, const char *name, int64_t ctx)
{
    for (int k = 0; k < a->n_tests && ctx > 0; k++) {
        const bench_model_test *t = &a->tests[k];
        if (t->n_prompt + t->n_gen > ctx) {
            ats_cli_error(CMD, "%s %lld: longer than the context of %s (%lld tokens)", t->n_prompt > 0 ? "-p" : "-n",
                          (long long)(t->n_prompt > 0 ? t->n_prompt : t->n_gen), name, (long long)ctx);
            return ATS_EXIT_USAGE;
        }
    }
    return ATS_EXIT_OK;
}

/* -m and --quant lists: names, recipes, model descriptions (dummy) or readable files (a GGUF's header read
 * for its context: the file is memory-mapped, its weights not read); --out */
static int check_models(bm_args *a)
{
    if (split_names("-m", a->models_buf, a->names, &a->n_names)) return ATS_EXIT_USAGE;
    if (a->quants_buf[0] && split_names("--quant", a->quants_buf, a->quants, &a->n_quants)) return ATS_EXIT_USAGE;
    ats_err err = {{0}};
    for (int q = 0; q < a->n_quants; q++)
        if (ats_recipe_from_name(a->quants[q], &a->recipes[q]) != ATS_OK) {
            ats_cli_error(CMD, "--quant '%s': unknown recipe (f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4)", a->quants[q]);
            return ATS_EXIT_USAGE;
        }
    for (int i = 0; i < a->n_names; i++) {
        if (a->dummy) {
            char path[1024];
            if (atsc_model_load(ats_cli_model_path(a->names[i], path, sizeof path), &a->archs[i], &err) != ATS_OK) {
                ats_cli_error(CMD, "%s", err.msg);
                return ATS_EXIT_USAGE;
            }
            if (check_context(a, a->names[i], a->archs[i].n_ctx_max)) return ATS_EXIT_USAGE;
        } else if (access(a->names[i], R_OK) != 0) {
            ats_cli_error(CMD, "-m: '%s': cannot open: %s", a->names[i], strerror(errno));
            return ATS_EXIT_USAGE;
        } else {
            ex_model *m = NULL;
            enum ats_status st = ex_model_load_gguf(a->names[i], &m, &err);
            if (st != ATS_OK) {
                ats_cli_error(CMD, "%s", err.msg);
                return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
            }
            int bad = check_context(a, a->names[i], m->arch.n_ctx_max);
            ex_model_free(m);
            if (bad) return ATS_EXIT_USAGE;
        }
    }
    if (ats_cli_check_json_out(CMD, "--out", a->out, "the result file (rows, parameters, commit, machine)"))
        return ATS_EXIT_USAGE;
    if (check_hw(a) != ATS_EXIT_OK) return ATS_EXIT_USAGE;
    /* every backend opened once before any model is built (a missing CUDA device is said before minutes of
       CPU rows, not after them) */
    int said = 0;
    for (int b = 0; b < a->n_execs; b++) {
        bench_model_dev *d = NULL;
        enum ats_status st = bench_model_dev_open(&a->execs[b], &d, &err);
        if (st != ATS_OK) {
            ats_cli_error(CMD, "%s", err.msg);
            return st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
        }
        if (a->execs[b].policy[0] && !bench_model_dev_gpu_name(d)[0] && !said++) /* as ats run --policy says it */
            fprintf(stderr, "ats bench model: no CUDA device: the policy rows run every op on the CPU (the plans still "
                            "come from sched; nothing is promoted)\n");
        bench_model_dev_free(d);
    }
    return ATS_EXIT_OK;
}

/* every (backend, threads, test) row of one loaded model m, appended to rows[*n_rows] */
static int run_model_rows(bm_args *a, ex_model *m, const char *name, const char *desc, double load_s,
                          int total, bench_model_row *rows, int *n_rows)
{
    ats_err err = {{0}};
    enum ats_status st;
    double n_params = 0;
    ats_arch_param_count(&m->arch, &n_params, NULL);
    for (int b = 0; b < a->n_execs; b++) {
        bench_model_dev *d = NULL;
        if ((st = bench_model_dev_open(&a->execs[b], &d, &err)) != ATS_OK) {
            ats_cli_error(CMD, "%s", err.msg);
            return st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
        }
        int rc = ATS_EXIT_OK;
        for (int t = 0; t < a->nt && rc == ATS_EXIT_OK; t++)
            for (int k = 0; k < a->n_tests && rc == ATS_EXIT_OK; k++) {
                a->o.threads = (int)a->tv[t];
                progress(*n_rows + 1, total, name, a->execs[b].backend, a->o.threads, &a->tests[k]);
                bench_model_row *r = &rows[*n_rows];
                if ((st = bench_model_run(m, d, &a->tests[k], &a->o, r, &err)) != ATS_OK) {
                    ats_cli_progress_end();
                    ats_cli_error(CMD, "%s: %s", name, err.msg);
                    /* a policy's layout over the budget is bad input, as in ats run --policy */
                    rc = st == ATS_EINVAL || st == ATS_EINFEASIBLE ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
                    break;
                }
                snprintf(r->model, sizeof r->model, "%s", name);
                snprintf(r->desc, sizeof r->desc, "%s", desc);
                r->size_bytes = m->weight_bytes;
                r->n_params = n_params;
                r->load_s = load_s;
                (*n_rows)++;
            }
        bench_model_dev_free(d); /* before the model whose weights it mirrored */
        if (rc != ATS_EXIT_OK) return rc;
    }
    return ATS_EXIT_OK;
}

/* model i at variant q (its recipe with --dummy-weights) loaded once, then its rows */
static int run_variant(bm_args *a, int i, int q, int total, bench_model_row *rows, int *n_rows)
{
    ats_err err = {{0}};
    bench_model_src src = {a->dummy ? NULL : a->names[i], a->dummy ? &a->archs[i] : NULL,
                           a->dummy ? (a->n_quants ? a->recipes[q] : a->archs[i].default_recipe) : ATS_RECIPE_F32,
                           (uint64_t)a->seed, ats_cli_progress_bytes, (void *)"bench model: building dummy weights"};
    ex_model *m = NULL;
    double load_s = 0;
    ats_cli_progress(CMD, "loading %s", a->names[i]);
    enum ats_status st = bench_model_load(&src, &m, &load_s, &err);
    if (st != ATS_OK) {
        ats_cli_progress_end();
        ats_cli_error(CMD, "%s", err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    if (a->split > m->arch.n_layer) {
        ats_cli_error(CMD, "--split %lld: model %s has %lld layers", a->split, a->names[i], (long long)m->arch.n_layer);
        ex_model_free(m);
        return ATS_EXIT_USAGE;
    }
    char desc[BENCH_MODEL_NAME_LEN];
    /* the recipe, or a GGUF's type of its first attention matrix ("llama F32", "qwen3 Q4_K") */
    snprintf(desc, sizeof desc, "%s %s", m->arch.family,
             a->dummy ? ats_recipe_name(src.recipe) : ats_qtype_name(m->layers[0].wq.type));
    int rc = run_model_rows(a, m, a->names[i], desc, load_s, total, rows, n_rows);
    ex_model_free(m);
    return rc;
}

int ats_bench_model(int argc, char **argv)
{
    bm_args *a = calloc(1, sizeof *a);
    if (!a) return ATS_EXIT_FAIL;
    int rc = parse_args(a, argc, argv);
    /* every value checked before any model is loaded */
    if (rc == ATS_EXIT_OK) rc = check_tests_backends(a);
    if (rc == ATS_EXIT_OK) rc = check_models(a);
    if (rc != ATS_EXIT_OK) {
        free(a);
        return rc < 0 ? ATS_EXIT_OK : rc;
    }
    a->o.reps = (int)a->reps;
    a->o.chunk = a->chunk;
    a->o.seed = (uint64_t)a->seed;
    if (a->nt == 0) a->tv[a->nt++] = 0; /* all threads */
    /* models x recipes, each loaded once */
    const int n_variants = a->dummy && a->n_quants ? a->n_quants : 1;
    const int total = a->n_names * n_variants * a->n_execs * a->nt * a->n_tests;
    bench_model_row *rows = calloc((size_t)total, sizeof *rows);
    int n_rows = 0;
    if (!rows) {
        free(a);
        return ATS_EXIT_FAIL;
    }
    for (int i = 0; i < a->n_names && rc == ATS_EXIT_OK; i++)
        for (int q = 0; q < n_variants && rc == ATS_EXIT_OK; q++) rc = run_variant(a, i, q, total, rows, &n_rows);
    ats_cli_progress_end();
    if (rc == ATS_EXIT_OK) {
        bench_model_print(stdout, a->fmt, rows, n_rows);
        json_t *root = a->out ? bench_model_json(rows, n_rows, &a->o) : NULL;
        rc = ats_cli_bench_write(CMD, a->out, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6), stderr);
        json_decref(root);
    }
    for (int i = 0; i < n_rows; i++) bench_model_row_free(&rows[i]);
    free(rows);
    free(a);
    return rc;
}
