/*
 * ats run — generate text with the executor. Generated text on stdout, statistics and diagnostics
 * on stderr (as llama.cpp's tools do). Weights from a GGUF file, or seeded random weights of a
 * models/<name>.json architecture with --dummy-weights (for timing at full size).
 */
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "atsc/model_json.h"
#include "ats/costs.h"
#include "ats/policy.h"
#include "atsc/results.h"
#include "cli.h"
#include "ex/model.h"
#include "ex/session.h"
#ifdef ATS_HAVE_CUDA
#include "atsc/outfile.h"
#include "ex/gpu.h"
#endif
#include "ex/tokenizer.h"
#include "run_policy.h"
#include "sim_cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats run --model M [options]\n"
            "  --model M          GGUF file (path ending in .gguf), or with --dummy-weights a model name/JSON\n"
            "  --dummy-weights    seeded random weights of the model's exact shapes and quantization\n"
            "  --quant R          recipe for --dummy-weights (f32 f16 bf16 q8_0 q4_0 q4_k_m; default: the model's)\n"
            "  -p, --prompt TEXT  prompt (default: empty, generation starts from BOS)\n"
            "  --prompt-tokens N  (dummy weights) a synthetic prompt of N token ids\n"
            "  -n N               tokens to generate (default 256)\n"
            "  --temp T           temperature (0 = greedy, the default)\n"
            "  --top-k K          top-k filter (0 = off)\n"
            "  --top-p P          top-p filter (1 = off)\n"
            "  --seed S           sampling / dummy-weight seed (default 42)\n"
            "  --threads N        CPU threads (default: all)\n"
            "  --ctx N            KV cache capacity in tokens (default min(context_length, 4096))\n"
            "  --kv-type T        KV cache element: f32 (default; matches llama2.c's F32 run) or f16 (llama.cpp's\n"
            "                     default -ctk/-ctv f16: half the bytes, what sched counts; K/V rounded to F16)\n"
            "  --chunk N          prefill chunk size in tokens (default 512)\n"
            "  --backend A[,B]    backend of layers [0,K) and of the rest: cpu or cuda (default cpu; one\n"
            "                     name = both). e.g. --backend cuda, or --backend cpu,cuda --split 3\n"
            "  --split K          layers [0,K) on backend A, the rest on backend B\n"
            "  --print-ids        print generated token ids (one line, space-separated) instead of text\n"
            "                     (always so without a vocabulary, e.g. --dummy-weights)\n"
            "  --no-eos           do not stop at end-of-sequence\n"
            "  --check-tensors    scan every weight for NaN/Inf after loading (llama.cpp's flag); exit 2 naming the\n"
            "                     first bad tensor, row and element. Without it, non-finite logits stop the run\n"
            "                     (exit 1) at the step they appear\n"
            "  --out FILE         write the results file (HDF5, DESIGN.md schema): /rounds and per-op /ops\n"
            "                     (ops then wait for the device one by one, so GPU runs are slower)\n"
            "plan executor (exec/runtime/plan_exec.c; replaces --backend/--split):\n"
            "  --policy P         run every round by sched's plan of policy P (%s)\n"
            "  --vram-budget B    device bytes for everything the run puts there, e.g. 4.5GiB (with --policy)\n"
            "  --hw H             starting cost snapshot: sim/hw/H.json (default h200-host)\n"
            "  --eps E            re-plan when the load deviates by >= E (default 0.15)\n"
            "  --interval I       minimum re-plan interval: TPOT multiple (default 5) or e.g. 200ms\n"
            "  --serialized       every plan serialized (llama.cpp's path: no copy/compute overlap)\n"
            "  --no-warmup        no warm-up before timing (default: a prompt chunk of token 0 (2 tokens when\n"
            "                     every op is on the CPU) and one decode step, then the KV cache emptied, as\n"
            "                     llama.cpp warms up; with --policy or --backend)\n"
            "  --cpu-only         no device even where there is one (every op on the CPU)\n"
            "  --timeline FILE    Chrome trace-event JSON (Perfetto) as ats sim writes: CPU, GPU compute stream,\n"
            "                     copy engine, PCIe H2D (GPU op times from events on timed rounds); the host's\n"
            "                     own work before an op, >= 2 us, on the CPU track as category host: switch to\n"
            "                     cpu/cuda (the previous backend's flush) and issue (transfers, stream waits)\n",
            ats_policy_names());
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Results recording: one round row per forward call, one op row per graph op. */
typedef struct recorder {
    atsc_results *w;
    int64_t epoch_ns, round;
    atsc_op_row *ops;
    const ex_backend *gpu; /* the CUDA table, if any: its ops are recorded as ATS_GPU */
} recorder;

static enum ats_status record_round(recorder *r, const ex_session *s, int64_t t0_ns, int64_t tokens, int decode,
                                    ats_err *err)
{
    if (!r->w) return ATS_OK;
    atsc_round_row row = {r->round, decode ? ATSC_PHASE_DECODE : ATSC_PHASE_PREFILL, (int32_t)tokens,
                          (double)(t0_ns - r->epoch_ns) * 1e-9, (double)(now_ns() - t0_ns) * 1e-9, 0, 0, 0, 1.0, 1.0, 1.0};
    enum ats_status st = atsc_results_append_rounds(r->w, &row, 1, err);
    const ats_graph *g = ex_session_graph(s);
    const int64_t *a, *b;
    ex_session_last_op_times(s, &a, &b);
    for (int32_t i = 0; i < g->n_ops && st == ATS_OK; i++)
        r->ops[i] = (atsc_op_row){r->round, i,
                                  r->gpu && ex_session_op_backend(s, i) == r->gpu ? ATS_GPU : ATS_CPU,
                                  (double)(a[i] - r->epoch_ns) * 1e-9,
                                  (double)(b[i] - r->epoch_ns) * 1e-9, 0, 0, NAN, NAN};
    if (st == ATS_OK) st = atsc_results_append_ops(r->w, r->ops, (size_t)g->n_ops, err);
    r->round++;
    return st;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The prompt's token ids: the tokenized text (real vocabulary), or N seeded ids (dummy weights).
 * *out new (free). Returns an ATS_EXIT_* code (message printed). */
static int make_prompt(const ex_model *m, const char *model, const char *prompt, long long prompt_tokens, uint64_t seed,
                       int32_t **out, int64_t *n_out)
{
    const ats_arch *a = &m->arch;
    int32_t *ptok = NULL;
    int64_t n_prompt = 0;
    *out = NULL;
    *n_out = 0;
    if (m->tok) {
        if (prompt_tokens > 0) {
            ats_cli_error("run", "--prompt-tokens is for --dummy-weights; use -p with a real vocabulary");
            return ATS_EXIT_USAGE;
        }
        int64_t cap = (int64_t)strlen(prompt) * 4 + 8;
        ptok = malloc((size_t)cap * sizeof *ptok);
        if (!ptok || ex_tokenizer_encode(m->tok, prompt, 1, ptok, cap, &n_prompt) != ATS_OK) {
            free(ptok);
            ats_cli_error("run", "cannot tokenize the prompt");
            return ATS_EXIT_FAIL;
        }
    } else {
        if (prompt[0]) {
            ats_cli_error("run", "model '%s' has no vocabulary (dummy weights): use --prompt-tokens N", model);
            return ATS_EXIT_USAGE;
        }
        n_prompt = prompt_tokens > 0 ? prompt_tokens : 1;
        ptok = malloc((size_t)n_prompt * sizeof *ptok);
        if (!ptok) return ATS_EXIT_FAIL;
        uint64_t z = seed;
        for (int64_t i = 0; i < n_prompt; i++) {
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            ptok[i] = (int32_t)((z >> 33) % (uint64_t)a->n_vocab);
        }
    }
    *out = ptok;
    *n_out = n_prompt;
    return ATS_EXIT_OK;
}

/* The options of `ats run` (run_parse fills it). */
typedef struct run_opts {
    const char *model;
    const char *prompt;
    const char *quant;
    const char *out_path;
    const char *policy;
    const char *hw;
    const char *tl_path;
    const char *backend;
    long long n_gen;
    long long threads;
    long long n_ctx;
    long long chunk;
    long long split;
    long long prompt_tokens;
    long long seed;
    long long top_k;
    double temp;
    double top_p;
    int dummy;
    int print_ids;
    int no_eos;
    int check_tensors;
    int serialized;
    int cpu_only;
    int no_warmup;
    uint64_t vram;
    ats_controller_cfg ctrl;
    ats_qtype kv_type;
} run_opts;

/* Parses and checks the options; -1 when the run goes on (o filled), else the exit code. Long because
 * it is one switch over the ~30 options, each with its own one-line message. */
static int run_parse(int argc, char **argv, run_opts *o)
{
    const char *model = NULL, *prompt = "", *quant = NULL, *out_path = NULL;
    long long n_gen = 256, threads = 0, n_ctx = 0, chunk = 512, split = -1, prompt_tokens = 0;
    long long seed = 42, top_k = 0;
    double temp = 0.0, top_p = 1.0;
    int dummy = 0, print_ids = 0, no_eos = 0, check_tensors = 0;
    enum { O_DUMMY = 256, O_QUANT, O_TEMP, O_TOPK, O_TOPP, O_SEED, O_THREADS, O_CTX, O_CHUNK, O_SPLIT,
           O_IDS, O_NOEOS, O_PTOK, O_OUT, O_BACKEND, O_KVTYPE, O_CHECK, O_POLICY, O_VRAM, O_HW, O_EPS,
           O_INTERVAL, O_SERIAL, O_CPUONLY, O_TIMELINE, O_NOWARM };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"dummy-weights", no_argument, 0, O_DUMMY},
        {"quant", required_argument, 0, O_QUANT}, {"prompt", required_argument, 0, 'p'},
        {"temp", required_argument, 0, O_TEMP}, {"top-k", required_argument, 0, O_TOPK},
        {"top-p", required_argument, 0, O_TOPP}, {"seed", required_argument, 0, O_SEED},
        {"threads", required_argument, 0, O_THREADS}, {"ctx", required_argument, 0, O_CTX},
        {"chunk", required_argument, 0, O_CHUNK}, {"split", required_argument, 0, O_SPLIT},
        {"print-ids", no_argument, 0, O_IDS}, {"no-eos", no_argument, 0, O_NOEOS},
        {"prompt-tokens", required_argument, 0, O_PTOK}, {"out", required_argument, 0, O_OUT},
        {"backend", required_argument, 0, O_BACKEND}, {"kv-type", required_argument, 0, O_KVTYPE},
        {"check-tensors", no_argument, 0, O_CHECK}, {"policy", required_argument, 0, O_POLICY},
        {"vram-budget", required_argument, 0, O_VRAM}, {"hw", required_argument, 0, O_HW},
        {"eps", required_argument, 0, O_EPS}, {"interval", required_argument, 0, O_INTERVAL},
        {"serialized", no_argument, 0, O_SERIAL}, {"cpu-only", no_argument, 0, O_CPUONLY},
        {"timeline", required_argument, 0, O_TIMELINE}, {"no-warmup", no_argument, 0, O_NOWARM},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *policy = NULL, *hw = "h200-host", *tl_path = NULL;
    uint64_t vram = 0;
    int serialized = 0, cpu_only = 0, no_warmup = 0, backend_given = 0;
    ats_controller_cfg ctrl = ats_controller_cfg_default();
    const char *backend = "cpu";
    ats_qtype kv_type = ATS_Q_F32;
    optind = 1;
    opterr = 0; /* one line of our own per bad option */
    int c, li = -1;
    ats_cli_seen seen = {0};
    while ((li = -1, c = getopt_long(argc, argv, ":m:p:n:h", opts, &li)) != -1) {
        int bad = 0;
        const char *want = "";
        if (ats_cli_once_opt("run", &seen, opts, c, optarg)) return ATS_EXIT_USAGE; /* the last one won */
        switch (c) {
        case 'm':
            if (ats_cli_file_value("run", "--model", optarg)) return ATS_EXIT_USAGE;
            model = optarg;
            break;
        case 'p': prompt = optarg; break;
        case 'n': bad = ats_cli_parse_int(optarg, &n_gen) || n_gen < 0, want = "an integer >= 0"; break;
        case O_DUMMY: dummy = 1; break;
        case O_CHECK: check_tensors = 1; break;
        case O_QUANT: quant = optarg; break;
        case O_TEMP: bad = ats_cli_parse_double(optarg, &temp) || temp < 0, want = "a number >= 0"; break;
        case O_TOPK: bad = ats_cli_parse_int(optarg, &top_k) || top_k < 0, want = "an integer >= 0; 0 = off"; break;
        case O_TOPP:
            bad = ats_cli_parse_double(optarg, &top_p) || top_p <= 0 || top_p > 1;
            want = "a number in (0, 1]";
            break;
        case O_SEED: bad = ats_cli_parse_int(optarg, &seed) || seed < 0, want = "an integer >= 0"; break;
        case O_THREADS:
            bad = ats_cli_parse_int(optarg, &threads) || threads < 1 || threads > 1024;
            want = "an integer 1..1024";
            break;
        case O_CTX:
            bad = ats_cli_parse_int(optarg, &n_ctx) || n_ctx < 1 || n_ctx > ATS_ARCH_MAX_CTX;
            want = "an integer 1..16777216 tokens";
            break;
        case O_CHUNK: bad = ats_cli_parse_int(optarg, &chunk) || chunk < 1, want = "an integer >= 1 tokens"; break;
        case O_SPLIT: bad = ats_cli_parse_int(optarg, &split) || split < 0, want = "a layer index >= 0"; break;
        case O_IDS: print_ids = 1; break;
        case O_NOEOS: no_eos = 1; break;
        case O_PTOK:
            bad = ats_cli_parse_int(optarg, &prompt_tokens) || prompt_tokens < 0;
            want = "an integer >= 0";
            break;
        case O_OUT: out_path = optarg; break;
        case O_BACKEND: backend = optarg, backend_given = 1; break;
        case O_KVTYPE:
            if (!strcasecmp(optarg, "f32")) kv_type = ATS_Q_F32; /* F16 too, as the stats line prints it */
            else if (!strcasecmp(optarg, "f16")) kv_type = ATS_Q_F16;
            else {
                ats_cli_error("run", "--kv-type: bad value '%s' (f32 or f16)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case O_POLICY: {
            const ats_policy_ops *po;
            if (ats_policy_find(optarg, &po) != ATS_OK) {
                ats_cli_error("run", "--policy: unknown policy '%s' (%s)", optarg, ats_policy_names());
                return ATS_EXIT_USAGE;
            }
            policy = optarg;
            break;
        }
        case O_VRAM:
            if (ats_cli_parse_vram("run", optarg, &vram)) return ATS_EXIT_USAGE;
            break;
        case O_HW: hw = optarg; break;
        case O_EPS: bad = ats_cli_parse_double(optarg, &ctrl.eps) || !(ctrl.eps >= 0 && ctrl.eps <= 10), want = "0..10"; break;
        case O_INTERVAL: {
            size_t n = strlen(optarg);
            double d = -1;
            int abs_time = n > 0 && optarg[n - 1] == 's';
            if (abs_time ? sim_cli_parse_time(optarg, &d) : ats_cli_parse_double(optarg, &d)) d = -1;
            bad = !(d > 0), want = "TPOT multiple > 0, or e.g. 200ms";
            if (!bad && abs_time) ctrl.tau_s = d;
            else if (!bad) ctrl.tau_s = 0, ctrl.tau_tpot_mult = d;
            break;
        }
        case O_SERIAL: serialized = 1; break;
        case O_CPUONLY: cpu_only = 1; break;
        case O_NOWARM: no_warmup = 1; break;
        case O_TIMELINE: tl_path = optarg; break;
        case 'h': usage(stdout); return ATS_EXIT_OK;
        case ':': ats_cli_missing_value("run", argv[optind - 1], optopt); return ATS_EXIT_USAGE;
        default: ats_cli_bad_option("run", argv[optind - 1], optopt, opts); return ATS_EXIT_USAGE;
        }
        if (bad) {
            if (li >= 0) ats_cli_error("run", "--%s: bad value '%s' (%s)", opts[li].name, optarg, want);
            else ats_cli_error("run", "-%c: bad value '%s' (%s)", c, optarg, want);
            return ATS_EXIT_USAGE;
        }
    }
    if (!model || optind < argc) {
        if (optind < argc) ats_cli_error("run", "unexpected argument '%s' (ats run --help)", argv[optind]);
        else ats_cli_error("run", "--model is required: a GGUF file, or a model name with --dummy-weights (ats run --help)");
        return ATS_EXIT_USAGE;
    }
    /* before loading the model; an explicit --backend cpu too (it was taken for the default and ignored) */
    if (policy && (backend_given || split >= 0)) {
        char what[96];
        if (backend_given) snprintf(what, sizeof what, "--backend %s", backend);
        else snprintf(what, sizeof what, "--split %lld", split);
        ats_cli_error("run", "%s with --policy %s: --backend/--split are the split-run options; --policy runs sched's "
                      "plans (--cpu-only keeps a policy run on the CPU)", what, policy);
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_check_out("run", "--out", out_path)) return ATS_EXIT_USAGE; /* before loading the model */
    run_opts r = {0};
    r.model = model;
    r.prompt = prompt;
    r.quant = quant;
    r.out_path = out_path;
    r.policy = policy;
    r.hw = hw;
    r.tl_path = tl_path;
    r.backend = backend;
    r.n_gen = n_gen;
    r.threads = threads;
    r.n_ctx = n_ctx;
    r.chunk = chunk;
    r.split = split;
    r.prompt_tokens = prompt_tokens;
    r.seed = seed;
    r.top_k = top_k;
    r.temp = temp;
    r.top_p = top_p;
    r.dummy = dummy;
    r.print_ids = print_ids;
    r.no_eos = no_eos;
    r.check_tensors = check_tensors;
    r.serialized = serialized;
    r.cpu_only = cpu_only;
    r.no_warmup = no_warmup;
    r.vram = vram;
    r.ctrl = ctrl;
    r.kv_type = kv_type;
    *o = r;
    return -1;
}

/* Loads the model of o (GGUF, or dummy weights of a model description), scans it with --check-tensors;
 * *t_load_ns the time it took. -1 when the run goes on (*out new), else the exit code (message printed). */
static int load_model(const run_opts *o, ex_model **out, int64_t *t_load_ns)
{
    ats_err err = {{0}};
    ex_model *m = NULL;
    enum ats_status st;
    int64_t t0 = now_ns();
    if (o->dummy) {
        char path[1024];
        ats_arch arch;
        st = atsc_model_load(ats_cli_model_path(o->model, path, sizeof path), &arch, &err);
        if (st != ATS_OK) {
            ats_cli_error("run", "%s", err.msg);
            return ATS_EXIT_USAGE;
        }
        ats_recipe r = arch.default_recipe;
        if (o->quant && ats_recipe_from_name(o->quant, &r) != ATS_OK) {
            ats_cli_error("run", "--quant '%s': unknown recipe (f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4)", o->quant);
            return ATS_EXIT_USAGE;
        }
        /* the session's context (exec/runtime/session.c: --ctx, else min(context_length, 4096)), checked
           before building gigabytes of dummy weights */
        long long ctx0 = o->n_ctx > 0 ? o->n_ctx : (arch.n_ctx_max > 0 && arch.n_ctx_max < 4096 ? arch.n_ctx_max : 4096);
        if (o->prompt_tokens > ctx0) {
            ats_cli_error("run", "--prompt-tokens %lld: longer than the context (%lld tokens; --ctx)", o->prompt_tokens, ctx0);
            return ATS_EXIT_USAGE;
        }
        st = ex_model_new_dummy_progress(&arch, r, (uint64_t)o->seed, ats_cli_progress_bytes,
                                         (void *)"run: building dummy weights", &m, &err);
    } else {
        if (o->quant) {
            ats_cli_error("run", "--quant only applies to --dummy-weights (use `ats quantize` for a GGUF file)");
            return ATS_EXIT_USAGE;
        }
        if (!ends_with(o->model, ".gguf"))
            fprintf(stderr, "ats run: note: '%s' does not end in .gguf; reading it as GGUF\n", o->model);
        st = ex_model_load_gguf(o->model, &m, &err);
    }
    if (st != ATS_OK) {
        /* a JSON model description given as a GGUF file: say what would run it */
        FILE *mf = o->dummy ? NULL : fopen(o->model, "rb");
        int c = ' ';
        while (mf && (c = fgetc(mf)) != EOF && isspace(c)) {}
        if (mf) fclose(mf);
        if (mf && c == '{')
            ats_cli_error("run", "%s (a JSON model description? --dummy-weights runs its shapes with random weights)",
                          err.msg);
        else
            ats_cli_error("run", "%s", err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    if (o->check_tensors) {
        int64_t tc = now_ns();
        if ((st = ex_model_check_tensors(m, omp_get_max_threads(), &err)) != ATS_OK) {
            ats_cli_error("run", "%s: %s (--check-tensors)", o->model, err.msg);
            ex_model_free(m);
            return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
        }
        fprintf(stderr, "ats run: --check-tensors: every weight finite (%.2f s)\n", (double)(now_ns() - tc) * 1e-9);
    }
    *t_load_ns = now_ns() - t0;
    *out = m;
    return -1;
}

/* --policy: the plan executor (cli/run_policy.c) over model m with session options so. Exit code. */
static int run_with_policy(const run_opts *o, const ex_model *m, const ex_session_opts *so)
{
    if (o->vram == 0) { /* --backend and --split with --policy: refused by run_parse */
        ats_cli_error("run", "--policy needs --vram-budget");
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_check_out("run", "--timeline", o->tl_path)) return ATS_EXIT_USAGE;
    if (o->tl_path && o->out_path && atsc_out_same_target(o->tl_path, o->out_path)) {
        ats_cli_error("run", "--out and --timeline name the same file '%s' (give two paths)", o->out_path);
        return ATS_EXIT_USAGE;
    }
    run_policy_args ra;
    memset(&ra, 0, sizeof ra);
    ra.policy = o->policy;
    ra.hw = o->hw;
    ra.out_path = o->out_path;
    ra.timeline_path = o->tl_path;
    ra.vram_budget = o->vram;
    ra.ctrl = o->ctrl;
    ra.so = *so;
    ra.so.sync_ops = 0;
    ra.chunk = o->chunk;
    ra.n_gen = o->n_gen;
    ra.temp = o->temp;
    ra.seed = (uint64_t)o->seed;
    ra.serialized = o->serialized;
    ra.cpu_only = o->cpu_only;
    ra.no_warmup = o->no_warmup;
    ra.print_ids = o->print_ids;
    ra.no_eos = o->no_eos;
    ra.top_k = (int32_t)o->top_k;
    ra.top_p = o->top_p;
    ra.record_ops = o->out_path != NULL;
    int32_t *pt = NULL;
    int64_t np = 0;
    int rc = make_prompt(m, o->model, o->prompt, o->prompt_tokens, (uint64_t)o->seed, &pt, &np);
    if (rc == ATS_EXIT_OK) {
        ra.prompt = pt;
        ra.n_prompt = np;
        ats_cli_catch_stop_signals();
        rc = ats_run_policy(m, &ra);
    }
    free(pt);
    return ats_cli_exit_after_signal(rc);
}

/* What a split-backend run holds; run_free releases it. */
typedef struct run_state {
    const run_opts *o;
    ex_model *m;
    ex_session *s;
    void *gpu, *cuda;     /* ex_gpu *, struct ex_backend * (CUDA builds) */
    recorder rec;
    int32_t *ptok;
    int64_t n_prompt, n_gen, generated;
    float *logits;
    int64_t t_load, t_prefill, t_decode, t_warm; /* [ns] */
    ex_op_times warm_ot;  /* the session's op times after the warm-up (subtracted in the statistics) */
} run_state;

static void run_free(run_state *r)
{
    if (r->rec.w) atsc_results_abort(r->rec.w);
    free(r->rec.ops);
    free(r->ptok);
    free(r->logits);
    ex_session_free(r->s);
#ifdef ATS_HAVE_CUDA
    if (r->cuda) ex_backend_cuda_free(r->cuda); /* before the model whose weights it mirrored */
    if (r->gpu) ex_gpu_close(r->gpu);
#endif
    ex_model_free(r->m);
}

#ifdef ATS_HAVE_CUDA
/* ex_session_opts.pin over cudaHostRegister: activations and KV cache copied by DMA at switches */
static int pin_host(void *ctx, void *host, size_t bytes)
{
    (void)ctx;
    return ex_gpu_host_register(host, bytes) == EX_GPU_OK ? 0 : -1;
}
static void unpin_host(void *ctx, void *host)
{
    (void)ctx;
    ex_gpu_host_unregister(host);
}
#endif

/* --backend A[,B] ("cpu" or "cuda" for layers [0, split) and for the rest) into so; the CUDA device opened
 * when one is named. ATS_EXIT_OK or the exit code (message printed). */
static int open_backends(run_state *r, ex_session_opts *so)
{
    const char *backend = r->o->backend;
    char bk[2][16] = {"cpu", "cpu"};
    const char *comma = strchr(backend, ',');
    size_t n0 = comma ? (size_t)(comma - backend) : strlen(backend);
    snprintf(bk[0], sizeof bk[0], "%.*s", (int)(n0 < 15 ? n0 : 15), backend);
    snprintf(bk[1], sizeof bk[1], "%s", comma ? comma + 1 : bk[0]);
    for (int i = 0; i < 2; i++)
        if (strcmp(bk[i], "cpu") && strcmp(bk[i], "cuda")) {
            ats_cli_error("run", "--backend: '%s' (each must be cpu or cuda)", backend);
            return ATS_EXIT_USAGE;
        }
    int want = !strcmp(bk[0], "cuda") || !strcmp(bk[1], "cuda");
#ifdef ATS_HAVE_CUDA
    if (want) {
        ex_gpu *gpu = NULL;
        struct ex_backend *cuda = NULL;
        ex_gpu_status gs = ex_gpu_open(0, &gpu);
        if (gs == EX_GPU_OK) gs = ex_backend_cuda_new(gpu, &cuda);
        r->gpu = gpu;
        r->cuda = cuda;
        if (gs != EX_GPU_OK) {
            ats_cli_error("run", "--backend %s: %s", backend, ex_gpu_status_str(gs));
            return gs == EX_GPU_ENODEV ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
        }
        if (!strcmp(bk[0], "cuda")) so->backend_a = cuda;
        if (!strcmp(bk[1], "cuda")) so->backend_b = cuda;
        if (strcmp(bk[0], bk[1])) { /* a split: activations cross at the split layer */
            so->pin = pin_host;
            so->unpin = unpin_host;
        }
        r->rec.gpu = cuda;
    }
#else
    if (want) {
        ats_cli_error("run", "--backend %s: this build has no CUDA backend (configure with nvcc, -DATS_CUDA=ON)", backend);
        return ATS_EXIT_USAGE;
    }
#endif
    return ATS_EXIT_OK;
}

/* The prompt's ids, checked against the context; -n limited to what fits. ATS_EXIT_OK or the exit code. */
static int prepare_prompt(run_state *r)
{
    const run_opts *o = r->o;
    int64_t ctx = ex_session_n_ctx(r->s);
    int rc = make_prompt(r->m, o->model, o->prompt, o->prompt_tokens, (uint64_t)o->seed, &r->ptok, &r->n_prompt);
    if (rc != ATS_EXIT_OK) return rc;
    if (r->n_prompt == 0) {
        ats_cli_error("run", "empty prompt and the vocabulary has no BOS token");
        return ATS_EXIT_USAGE;
    }
    r->n_gen = o->n_gen;
    if ((rc = ats_cli_fit_context(r->n_prompt, ctx, &r->n_gen)) != ATS_EXIT_OK) return rc;
    r->logits = malloc((size_t)r->m->arch.n_vocab * sizeof *r->logits);
    return r->logits ? ATS_EXIT_OK : ATS_EXIT_FAIL;
}

/* --out: the results file opened with the run's configuration; one run named after the backend(s). */
static int open_results(run_state *r)
{
    const run_opts *o = r->o;
    const ats_arch *a = &r->m->arch;
    ats_err err = {{0}};
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"command\": \"run\", \"model\": \"%s\", \"dummy_weights\": %s, \"threads\": %d, \"ctx\": %lld, "
             "\"chunk\": %lld, \"split\": %lld, \"n\": %lld, \"temp\": %g, \"top_k\": %lld, \"top_p\": %g, "
             "\"prompt_tokens\": %lld, \"backend\": \"%s\", \"kv_type\": \"%s\"}",
             a->name, o->dummy ? "true" : "false", omp_get_max_threads(), (long long)ex_session_n_ctx(r->s), o->chunk,
             o->split, (long long)r->n_gen, o->temp, o->top_k, o->top_p, (long long)r->n_prompt, o->backend,
             ats_qtype_name(o->kv_type));
    char machine[512]; /* the hardware of the run, for the results' 'hw' (analysis titles name it) */
    const char *gpu_name = "";
#ifdef ATS_HAVE_CUDA
    if (r->gpu) gpu_name = ex_gpu_info(r->gpu)->name;
#endif
    atsc_results_meta meta = {"ats run", cfg, (uint64_t)o->seed, a->name, ats_cli_machine(machine, sizeof machine, gpu_name), ""};
    char run_name[64]; /* the run is named after the backend(s): "cpu", "cuda", "cpu+cuda" (no ',' in names) */
    snprintf(run_name, sizeof run_name, "%s", o->backend);
    for (char *c = run_name; *c; c++)
        if (*c == ',') *c = '+';
    r->rec.ops = malloc((size_t)ex_session_graph(r->s)->n_ops * sizeof *r->rec.ops);
    if (!r->rec.ops || atsc_results_open(o->out_path, &meta, &r->rec.w, &err) != ATS_OK ||
        atsc_results_begin_run(r->rec.w, run_name, run_name, NULL, 1, &err) != ATS_OK) {
        ats_cli_error("run", "--out: %s", err.msg);
        return ATS_EXIT_USAGE;
    }
    return ATS_EXIT_OK;
}

/* The prompt in chunks of --chunk tokens; *rc set on a failure. */
static void prefill(run_state *r, int *rc)
{
    ats_err err = {{0}};
    int64_t chunk = r->o->chunk, t0 = now_ns();
    r->rec.epoch_ns = t0;
    for (int64_t i = 0; i < r->n_prompt && *rc == ATS_EXIT_OK; i += chunk) {
        int64_t nn = r->n_prompt - i < chunk ? r->n_prompt - i : chunk, tr = now_ns();
        if (ex_session_forward(r->s, r->ptok + i, nn, r->logits, &err) != ATS_OK ||
            record_round(&r->rec, r->s, tr, nn, 0, &err) != ATS_OK) {
            ats_cli_error("run", "%s", err.msg);
            *rc = ATS_EXIT_FAIL;
        }
    }
    r->t_prefill = now_ns() - t0;
}

/* -n decode steps: sample, print, forward; stops at EOS (unless --no-eos), on non-finite logits (said
 * where) or a failure (*rc set). */
static void decode(run_state *r, int *rc)
{
    const run_opts *o = r->o;
    const ex_model *m = r->m;
    const int64_t n_vocab = m->arch.n_vocab;
    ats_err err = {{0}};
    ex_sample_params sp = {(float)o->temp, (int32_t)o->top_k, (float)o->top_p};
    uint64_t rng = (uint64_t)o->seed ^ 0x5DEECE66Dull;
    int print_ids = o->print_ids || !m->tok; /* no vocabulary (dummy weights): the output is token ids */
    char piece[512];
    if (!print_ids) /* echo the prompt as the model sees it (llama2.c and llama.cpp do) */
        for (int64_t i = 1; i < r->n_prompt; i++) {
            ex_tokenizer_decode(m->tok, r->ptok[i - 1], r->ptok[i], piece, sizeof piece);
            fputs(piece, stdout);
        }
    int64_t t0 = now_ns();
    int32_t prev = r->ptok[r->n_prompt - 1];
    int line_ended = 0; /* the non-finite stop ended the text's line already */
    for (int64_t i = 0; i < r->n_gen && *rc == ATS_EXIT_OK; i++) {
        int32_t next;
        int64_t n_bad = 0;
        for (int64_t v = 0; v < n_vocab; v++) n_bad += !isfinite(r->logits[v]);
        if (n_bad) { /* greedy would pick token 0 for ever, sampling garbage: stop and say where */
            printf("\n");
            line_ended = 1;
            fflush(stdout); /* the text's line ends before the message (stderr is unbuffered) */
            ats_cli_error("run", "step %lld: %lld of %lld logits are NaN or Inf (weights or activations not finite; "
                          "--check-tensors scans the weights)", (long long)i, (long long)n_bad, (long long)n_vocab);
            *rc = ATS_EXIT_FAIL;
            break;
        }
        if (ex_cpu_sample(r->logits, n_vocab, &sp, &rng, &next) != ATS_OK) { *rc = ATS_EXIT_FAIL; break; }
        if (!o->no_eos && m->tok && next == m->eos_id) break;
        r->generated++;
        if (print_ids) {
            printf(i ? " %d" : "%d", next);
        } else {
            ex_tokenizer_decode(m->tok, prev, next, piece, sizeof piece);
            fputs(piece, stdout);
        }
        fflush(stdout);
        prev = next;
        int64_t tr = now_ns();
        if (i + 1 < r->n_gen && (ex_session_forward(r->s, &next, 1, r->logits, &err) != ATS_OK ||
                                 record_round(&r->rec, r->s, tr, 1, 1, &err) != ATS_OK)) {
            ats_cli_error("run", "%s", err.msg);
            *rc = ATS_EXIT_FAIL;
        }
    }
    r->t_decode = now_ns() - t0;
    if (!line_ended) printf("\n");
}

/* Warm-up before timing, as llama.cpp: a prompt chunk of token 0 (up to the prompt's length; 2 tokens
 * when every op runs on the CPU: enough to touch every weight page) and one decode step, then the KV
 * cache emptied. On a device its weights upload, kernels load and workspaces grow here, not in the
 * timed prefill. */
static void warm_up(run_state *r, int *rc)
{
    int64_t t0 = now_ns();
    int on_dev = r->cuda != NULL;
    int64_t n = on_dev ? (r->n_prompt < r->o->chunk ? r->n_prompt : r->o->chunk) : 2;
    if (n > ex_session_n_ctx(r->s) - 1) n = ex_session_n_ctx(r->s) - 1;
    int32_t *tok = n > 0 ? calloc((size_t)n, sizeof *tok) : NULL;
    ats_err err = {{0}};
    if (n > 0 && !tok) {
        ats_cli_error("run", "warm-up: out of memory");
        *rc = ATS_EXIT_FAIL;
        return;
    }
    if (n > 0 && (ex_session_forward(r->s, tok, n, r->logits, &err) != ATS_OK ||
                  (n + 1 < ex_session_n_ctx(r->s) && ex_session_forward(r->s, tok, 1, r->logits, &err) != ATS_OK))) {
        ats_cli_error("run", "warm-up: %s", err.msg);
        *rc = ATS_EXIT_FAIL;
    }
    free(tok);
    ex_session_clear(r->s);
    r->warm_ot = ex_session_times(r->s);
    r->t_warm = now_ns() - t0;
}

/* The statistics lines on stderr. */
static void print_stats(const run_state *r)
{
    const ex_model *m = r->m;
    const ats_arch *a = &m->arch;
    ex_op_times ot = ex_session_times(r->s);
    ot.embed_ns -= r->warm_ot.embed_ns, ot.norm_ns -= r->warm_ot.norm_ns, ot.matmul_ns -= r->warm_ot.matmul_ns;
    ot.attn_ns -= r->warm_ot.attn_ns, ot.ffn_ns -= r->warm_ot.ffn_ns, ot.moe_ns -= r->warm_ot.moe_ns;
    ot.output_ns -= r->warm_ot.output_ns;
    double dec_steps = r->generated > 1 ? (double)(r->generated - 1) : 0;
    double t_prefill = (double)r->t_prefill * 1e-9, t_decode = (double)r->t_decode * 1e-9;
    char dec_rate[32] = "n/a"; /* no decode step ran: the one token came from the prompt's logits */
    if (dec_steps > 0) snprintf(dec_rate, sizeof dec_rate, "%.2f", dec_steps / (t_decode + 1e-12));
    fprintf(stderr,
            "ats run: model %s (%s, %lld layers, %.3f GiB weights), threads %d, ctx %lld (%s KV cache %.1f MiB), "
            "load %.3f s, warm-up %.3f s%s\n"
            "ats run: prompt %lld tok in %.3f s (%.2f tok/s); generated %lld tok, decode %.3f s (%s tok/s)\n"
            "ats run: decode reads %.3f GiB of weights per token: %.1f GB/s effective\n"
            "ats run: op time [s]: embed %.3f norm+add %.3f matmul %.3f attn %.3f ffn %.3f moe %.3f output %.3f\n",
            a->name, a->family, (long long)a->n_layer, (double)m->weight_bytes / 1073741824.0,
            omp_get_max_threads(), (long long)ex_session_n_ctx(r->s), ats_qtype_name(ex_session_kv_type(r->s)),
            (double)ex_session_kv_bytes(r->s) / 1048576.0, (double)r->t_load * 1e-9, (double)r->t_warm * 1e-9,
            r->o->no_warmup ? " (--no-warmup)" : "", (long long)r->n_prompt,
            t_prefill, (double)r->n_prompt / (t_prefill + 1e-12), (long long)r->generated, t_decode, dec_rate,
            (double)ex_model_decode_bytes(m) / 1073741824.0,
            dec_steps > 0 ? (double)ex_model_decode_bytes(m) * dec_steps / ((double)r->t_decode + 1e-3) : 0.0,
            ot.embed_ns * 1e-9, ot.norm_ns * 1e-9, ot.matmul_ns * 1e-9, ot.attn_ns * 1e-9, ot.ffn_ns * 1e-9,
            ot.moe_ns * 1e-9, ot.output_ns * 1e-9);
}

/* --out closed when the run succeeded, else dropped (a failed run's rounds are no result: said). */
static void close_results(run_state *r, int *rc)
{
    ats_err err = {{0}};
    if (!r->rec.w) return;
    if (*rc == ATS_EXIT_OK && atsc_results_close(r->rec.w, &err) != ATS_OK) {
        ats_cli_error("run", "--out: %s", err.msg);
        *rc = ATS_EXIT_FAIL;
    } else if (*rc != ATS_EXIT_OK) {
        atsc_results_abort(r->rec.w);
        fprintf(stderr, "ats run: --out %s not written (the run failed after %lld rounds)\n", r->o->out_path,
                (long long)r->rec.round);
    } else {
        fprintf(stderr, "ats run: wrote %s (%lld rounds)\n", r->o->out_path, (long long)r->rec.round);
    }
    r->rec.w = NULL;
}

/* ats run: options (run_parse), the model (load_model), then --policy's plan executor (run_with_policy) or
 * the split-backend run: backends, session, prompt, results file, prefill, decode, statistics. */
int ats_cmd_run(int argc, char **argv)
{
    run_opts o;
    int prc = run_parse(argc, argv, &o);
    if (prc >= 0) return prc;
    if (o.threads > 0) omp_set_num_threads((int)o.threads);
    run_state r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    int rc = load_model(&o, &r.m, &r.t_load);
    if (rc >= 0) return rc;
    ex_session_opts so = ex_session_opts_default();
    so.n_ctx = o.n_ctx;
    so.split_layer = o.split;
    so.sync_ops = o.out_path != NULL; /* --out's per-op rows: real op durations, not GPU enqueue times */
    so.kv_type = o.kv_type;
    if (o.split > r.m->arch.n_layer) {
        ats_cli_error("run", "--split %lld: model has %lld layers", o.split, (long long)r.m->arch.n_layer);
        run_free(&r);
        return ATS_EXIT_USAGE;
    }
    if (o.policy) {
        rc = run_with_policy(&o, r.m, &so);
        run_free(&r);
        return rc;
    }
    if (o.vram || o.serialized || o.cpu_only || o.tl_path) {
        ats_cli_error("run", "--vram-budget, --serialized, --cpu-only and --timeline go with --policy");
        run_free(&r);
        return ATS_EXIT_USAGE;
    }
    ats_err err = {{0}};
    enum ats_status st;
    rc = open_backends(&r, &so);
    if (rc == ATS_EXIT_OK && (st = ex_session_new(r.m, &so, &r.s, &err)) != ATS_OK) {
        ats_cli_error("run", "%s", err.msg);
        rc = st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    if (rc == ATS_EXIT_OK) rc = prepare_prompt(&r);
    if (rc == ATS_EXIT_OK) { /* the scratch of the largest prefill chunk (pinned in a split) before timing */
        int64_t nr = o.chunk < r.n_prompt ? o.chunk : r.n_prompt;
        if (nr > ex_session_n_ctx(r.s)) nr = ex_session_n_ctx(r.s);
        if (nr >= 1 && (st = ex_session_reserve(r.s, nr)) != ATS_OK) {
            ats_cli_error("run", "scratch for a prefill chunk of %lld tokens: %s", (long long)nr, ats_status_str(st));
            rc = ATS_EXIT_FAIL;
        }
    }
    if (rc == ATS_EXIT_OK && !o.no_warmup) warm_up(&r, &rc);
    if (rc == ATS_EXIT_OK && o.out_path) rc = open_results(&r);
    if (rc == ATS_EXIT_OK) {
        prefill(&r, &rc);
        decode(&r, &rc);
        print_stats(&r);
        close_results(&r, &rc);
    }
    run_free(&r);
    return rc;
}
