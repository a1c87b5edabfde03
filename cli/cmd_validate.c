/*
 * ats validate — sim versus real. For each policy: the executor (`ats run --policy`'s plan executor,
 * in this process) runs one request while `ats stress` (a child process of this binary) replays the
 * trace window on the machine; the simulator runs the same request, policy and configuration under the
 * same window with the hardware description --hw (a measured profile is given the same way). Rounds
 * are matched by index (common/validate.c); the table, one HDF5 file with both runs (/real, /sim) and
 * /validation, and one record per policy appended to summary.json.
 *
 * Order per policy: the simulator first (milliseconds to seconds), because with --gen auto it sizes the
 * request: as many decode steps as the simulator fits into the window, so the real run spans the window
 * too when the simulator is right; then the real run with exactly that request.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ats/policy.h"
#include "ats_version.h"
#include "atsc/model_json.h"
#include "atsc/outfile.h"
#include "atsc/results.h"
#include "atsc/trace_io.h"
#include "atsc/validate.h"
#include "cli.h"
#include "ex/model.h"
#include "ld/load.h"
#include "run_policy.h"
#include "sim_cli.h"

extern char **environ;

#define VAL_MAX_POLICIES 16
#define VAL_MAX_STRESS_ARGS 16
#define VAL_CHANGE_TOL 0.05 /* a load change: > 0.05 in some resource (the stressor's step threshold) */
#define VAL_MAX_SEGS 4096   /* load segments per policy kept in /validation_segments */
#define VAL_PRINT_SEGS 8    /* at most this many are printed and put into the summary record */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats validate --model M [--dummy-weights] --vram-budget B --trace T --out FILE.h5 [options]\n\n"
            "Sim versus real, per policy: the executor runs one request (prompt, then decode steps) while\n"
            "`ats stress` replays the trace (window) on this machine; the simulator runs the same request,\n"
            "policy and configuration under the same window with --hw. Rounds are matched by index. Prints per\n"
            "policy the mean TPOT both ways, the error of the mean, per-round MAPE and p90 error (decode rounds),\n"
            "prefill tok/s and re-schedules both ways, and the mean TPOT errors by load segment of the window;\n"
            "writes FILE.h5 (/real and /sim in the results schema, /validation, /validation_segments) and\n"
            "appends one record per policy to the summary list.\n\n"
            "  --model M          GGUF file, or with --dummy-weights a model name/JSON (as ats run)\n"
            "  --dummy-weights    seeded random weights of the model's shapes and quantization\n"
            "  --quant R          recipe for --dummy-weights [the model's]\n"
            "  --hw H             hardware description or measured profile of the simulator [h200-host]\n"
            "  --trace T          load trace (traces/T.h5 or a path)\n"
            "  --window A:B       trace time A to B (s, or with ms/s units), e.g. 50:130; it must hold at least\n"
            "                     two load changes (> 0.05 in a resource) [the whole trace]\n"
            "  --policy P[,P...]  policies [layer,static,ats]: %s\n"
            "  --vram-budget B    device bytes of the executor and the simulator, e.g. 4.5GiB\n"
            "  --threads N        CPU threads of the executor [all]\n"
            "  --prompt N         prompt tokens [512]\n"
            "  --gen G|auto       decode steps of the request; auto: as many as the simulator fits into the\n"
            "                     window (at most the context minus the prompt) [auto]\n"
            "  --chunk C          prefill chunk [512]\n"
            "  --ctx N            context for --gen auto's upper bound [min(model's, 4096)]\n"
            "  --kv-type T        the executor's KV cache: f16 (what sched and the simulator count) or f32 [f16]\n"
            "  --eps E, --interval I   controller threshold and minimum interval (as ats run / ats sim)\n"
            "  --seed S           weights, prompt ids, simulator seed [42]\n"
            "  --cpu-only         the executor uses no GPU even where there is one\n"
            "  --no-stress        no stressor: the real run sees whatever load the machine has (tests, a 2-core\n"
            "                     CI box); the simulator still replays the window\n"
            "  --baseline FILE    closed-loop stressor (ats record --save-baseline FILE); else open loop\n"
            "  --lead S           the stressor starts S s earlier in the trace and S s before the first round [2]\n"
            "  --stress-args 'A B'  more flags of ats stress, split at spaces (e.g. '--hogs-gpu 16')\n"
            "  --ops              per-op rows in both runs\n"
            "  --out FILE.h5      the validation file (required)\n"
            "  --summary FILE     JSON list the records are appended to (the committed one of the GPU machine:\n"
            "                     experiments/validation/summary.json) [none: no record appended]\n",
            ats_policy_names());
}

typedef struct val_opts {
    const char *model, *quant, *hw, *trace, *policy, *out, *summary, *baseline, *stress_args;
    int dummy, cpu_only, no_stress, ops, window_given, gen_auto;
    ats_qtype kv_type;
    double win0, win1, lead_s;
    long long threads, prompt, gen, chunk, ctx, seed;
    uint64_t vram;
    ats_controller_cfg ctrl;
} val_opts;

/* "A:B" in seconds (each part as sim_cli_parse_time); 0 or -1 */
static int parse_window(const char *s, double *a, double *b)
{
    const char *c = strchr(s, ':');
    char lhs[64];
    if (!c || (size_t)(c - s) >= sizeof lhs) return -1;
    memcpy(lhs, s, (size_t)(c - s));
    lhs[c - s] = 0;
    return sim_cli_parse_time(lhs, a) || sim_cli_parse_time(c + 1, b) ? -1 : 0;
}

/* The options into o: ATS_EXIT_OK, ATS_EXIT_USAGE after one line, -1 after --help. One switch over the
   ~25 options, each with its one-line message. */
static int parse_args(int argc, char **argv, val_opts *o)
{
    enum { O_MODEL = 256, O_DUMMY, O_QUANT, O_HW, O_TRACE, O_WINDOW, O_POLICY, O_VRAM, O_THREADS, O_PROMPT, O_GEN,
           O_CHUNK, O_CTX, O_EPS, O_INTERVAL, O_SEED, O_CPUONLY, O_NOSTRESS, O_BASELINE, O_LEAD, O_OPS, O_OUT,
           O_SUMMARY, O_STRESS_ARGS, O_KVTYPE, O_HELP };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL}, {"dummy-weights", no_argument, 0, O_DUMMY},
        {"quant", required_argument, 0, O_QUANT}, {"hw", required_argument, 0, O_HW},
        {"trace", required_argument, 0, O_TRACE}, {"window", required_argument, 0, O_WINDOW},
        {"policy", required_argument, 0, O_POLICY}, {"vram-budget", required_argument, 0, O_VRAM},
        {"threads", required_argument, 0, O_THREADS}, {"prompt", required_argument, 0, O_PROMPT},
        {"gen", required_argument, 0, O_GEN}, {"chunk", required_argument, 0, O_CHUNK},
        {"ctx", required_argument, 0, O_CTX}, {"eps", required_argument, 0, O_EPS},
        {"interval", required_argument, 0, O_INTERVAL}, {"seed", required_argument, 0, O_SEED},
        {"cpu-only", no_argument, 0, O_CPUONLY}, {"no-stress", no_argument, 0, O_NOSTRESS},
        {"baseline", required_argument, 0, O_BASELINE}, {"lead", required_argument, 0, O_LEAD},
        {"ops", no_argument, 0, O_OPS}, {"out", required_argument, 0, O_OUT},
        {"summary", required_argument, 0, O_SUMMARY}, {"stress-args", required_argument, 0, O_STRESS_ARGS},
        {"kv-type", required_argument, 0, O_KVTYPE},
        {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c, li;
    ats_cli_seen seen = {0};
    while ((li = -1, c = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
        int bad = 0;
        const char *want = "";
        double d;
        if (ats_cli_once_opt("validate", &seen, opts, c, optarg)) return ATS_EXIT_USAGE;
        if (c == O_MODEL || c == O_HW || c == O_TRACE || c == O_BASELINE) { /* file names (cli.h) */
            char flag[64];
            snprintf(flag, sizeof flag, "--%s", opts[li].name);
            if (ats_cli_file_value("validate", flag, optarg)) return ATS_EXIT_USAGE;
        }
        switch (c) {
        case O_MODEL: o->model = optarg; break;
        case O_DUMMY: o->dummy = 1; break;
        case O_QUANT: o->quant = optarg; break;
        case O_HW: o->hw = optarg; break;
        case O_TRACE: o->trace = optarg; break;
        case O_WINDOW:
            bad = parse_window(optarg, &o->win0, &o->win1) || !(o->win1 > o->win0);
            want = o->win1 == o->win0 ? "a zero-length window: need A < B" : "A:B in seconds with A < B, e.g. 50:130";
            o->window_given = 1;
            break;
        case O_POLICY: o->policy = optarg; break;
        case O_VRAM:
            if (ats_cli_parse_vram("validate", optarg, &o->vram)) return ATS_EXIT_USAGE;
            break;
        case O_THREADS: bad = ats_cli_parse_int(optarg, &o->threads) || o->threads < 1 || o->threads > 1024, want = "an integer 1..1024"; break;
        case O_PROMPT: bad = ats_cli_parse_int(optarg, &o->prompt) || o->prompt < 1 || o->prompt > ATS_ARCH_MAX_CTX, want = "1..16777216 tokens"; break;
        case O_GEN:
            o->gen_auto = strcmp(optarg, "auto") == 0;
            bad = !o->gen_auto && (ats_cli_parse_int(optarg, &o->gen) || o->gen < 1 || o->gen > ATS_ARCH_MAX_CTX);
            want = "auto, or 1..16777216 decode steps";
            break;
        case O_CHUNK: bad = ats_cli_parse_int(optarg, &o->chunk) || o->chunk < 1 || o->chunk > ATS_ARCH_MAX_CTX, want = "1..16777216 tokens"; break;
        case O_CTX: bad = ats_cli_parse_int(optarg, &o->ctx) || o->ctx < 2 || o->ctx > ATS_ARCH_MAX_CTX, want = "2..16777216 tokens"; break;
        case O_EPS: bad = ats_cli_parse_double(optarg, &o->ctrl.eps) || !(o->ctrl.eps >= 0 && o->ctrl.eps <= 10), want = "0..10"; break;
        case O_INTERVAL: {
            size_t n = strlen(optarg);
            int abs_time = n > 0 && optarg[n - 1] == 's';
            if (abs_time ? sim_cli_parse_time(optarg, &d) : ats_cli_parse_double(optarg, &d)) d = -1;
            bad = !(d > 0), want = "TPOT multiple > 0, or e.g. 200ms";
            if (!bad && abs_time) o->ctrl.tau_s = d;
            else if (!bad) o->ctrl.tau_s = 0, o->ctrl.tau_tpot_mult = d;
            break;
        }
        case O_SEED: bad = ats_cli_parse_int(optarg, &o->seed) || o->seed < 0, want = "an integer >= 0"; break;
        case O_CPUONLY: o->cpu_only = 1; break;
        case O_NOSTRESS: o->no_stress = 1; break;
        case O_BASELINE: o->baseline = optarg; break;
        case O_LEAD: bad = sim_cli_parse_time(optarg, &o->lead_s) || o->lead_s > 600, want = "0..600 s"; break;
        case O_OPS: o->ops = 1; break;
        case O_OUT: o->out = optarg; break;
        case O_SUMMARY: o->summary = optarg; break;
        case O_KVTYPE:
            bad = strcmp(optarg, "f16") && strcmp(optarg, "f32"), want = "f16 or f32";
            o->kv_type = strcmp(optarg, "f32") ? ATS_Q_F16 : ATS_Q_F32;
            break;
        case O_STRESS_ARGS: {
            int nw = 0, in = 0;
            for (const char *p = optarg; *p; p++) nw += !in && *p != ' ', in = *p != ' ';
            bad = nw > VAL_MAX_STRESS_ARGS, want = "at most 16 words";
            o->stress_args = optarg;
            break;
        }
        case O_HELP:
        case 'h': usage(stdout); return -1;
        case ':': ats_cli_missing_value("validate", argv[optind - 1], optopt); return ATS_EXIT_USAGE;
        default: ats_cli_bad_option("validate", argv[optind - 1], optopt, opts); return ATS_EXIT_USAGE;
        }
        if (bad) {
            ats_cli_error("validate", "--%s: bad value '%s' (%s)", opts[li].name, optarg, want);
            return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error("validate", "unexpected argument '%s' (ats validate --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    const char *missing = !o->model ? "--model" : !o->vram ? "--vram-budget" : !o->trace ? "--trace" : !o->out ? "--out" : NULL;
    if (missing) {
        ats_cli_error("validate", "%s is required (ats validate --help)", missing);
        return ATS_EXIT_USAGE;
    }
    if (o->quant && !o->dummy) {
        ats_cli_error("validate", "--quant only applies to --dummy-weights (a GGUF file says its types)");
        return ATS_EXIT_USAGE;
    }
    if (o->no_stress && (o->baseline || o->stress_args)) {
        ats_cli_error("validate", "--baseline and --stress-args are the stressor's; they do not go with --no-stress");
        return ATS_EXIT_USAGE;
    }
    /* no default list: a run elsewhere (a CPU-only machine, a test) must not add records to the
       committed GPU-machine list of the source tree */
    if (ats_cli_check_out("validate", "--out", o->out) || (o->summary && ats_cli_check_out("validate", "--summary", o->summary)))
        return ATS_EXIT_USAGE;
    if (o->model && atsc_out_same_target(o->out, o->model)) {
        ats_cli_error("validate", "--out '%s' is the model file (give another path)", o->out);
        return ATS_EXIT_USAGE;
    }
    if (o->summary && atsc_out_same_target(o->out, o->summary)) {
        ats_cli_error("validate", "--out and --summary name the same file '%s' (give two paths)", o->out);
        return ATS_EXIT_USAGE;
    }
    ats_err err = {{0}};
    if (o->baseline && atsc_in_readable(o->baseline, "baseline (ats record --save-baseline)", &err) != ATS_OK) {
        ats_cli_error("validate", "--baseline: %s", err.msg);
        return ATS_EXIT_USAGE;
    }
    if (o->summary && atsc_val_summary_check(o->summary, &err) != ATS_OK) { /* before hours of runs, not after */
        ats_cli_error("validate", "--summary: %s", err.msg);
        return ATS_EXIT_USAGE;
    }
    return ATS_EXIT_OK;
}

/* --policy into pol[] (pointers into buf): ATS_EXIT_OK or ATS_EXIT_USAGE after one line */
static int parse_policies(const char *arg, char *buf, size_t len, const char *pol[VAL_MAX_POLICIES], int *n)
{
    snprintf(buf, len, "%s", arg);
    if (ats_cli_list_has_empty(buf, ',')) {
        ats_cli_error("validate", "--policy: '%s' has an empty entry", arg);
        return ATS_EXIT_USAGE;
    }
    *n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const ats_policy_ops *po;
        if (ats_policy_find(t, &po) != ATS_OK) {
            ats_cli_error("validate", "--policy: unknown policy '%.60s' (%s)", t, ats_policy_names());
            return ATS_EXIT_USAGE;
        }
        for (int k = 0; k < *n; k++)
            if (!strcmp(pol[k], t)) {
                ats_cli_error("validate", "--policy: '%s' given twice", t);
                return ATS_EXIT_USAGE;
            }
        if (*n == VAL_MAX_POLICIES) {
            ats_cli_error("validate", "--policy: more than %d policies", VAL_MAX_POLICIES);
            return ATS_EXIT_USAGE;
        }
        pol[(*n)++] = t;
    }
    return ATS_EXIT_OK;
}

/* What one validation holds: inputs, the scratch folder and its files, per-policy results. */
typedef struct val_state {
    val_opts *o;
    const char *pol[VAL_MAX_POLICIES];
    int n_pol;
    atsc_trace *tr;             /* the whole trace */
    atsc_trace *win;            /* its window, time 0 = the window's start */
    char trace_path[1024], trace_name[64];
    char dir[1024];             /* scratch folder */
    char win_path[1100], stress_path[1100], sim_path[1100], real_path[1100];
    double lead_s;              /* the stressor's head start actually used [s] */
    sim_cli sc;                 /* the simulator's inputs (model, hw, window trace) */
    int sc_loaded;
    sim_session_result res[VAL_MAX_POLICIES];
    int sim_ok[VAL_MAX_POLICIES], real_ok[VAL_MAX_POLICIES];
    int64_t gen[VAL_MAX_POLICIES]; /* decode steps of each policy's request */
    ex_model *m;
    int32_t *prompt;
    pid_t stress_pid;
    int stress_gpu;             /* the stressor may load GPU and PCIe */
    char stress_note[256];      /* set when the stressor ended before it was stopped: the run is left out */
} val_state;

static void rm_scratch(val_state *s)
{
    if (!s->dir[0]) return;
    const char *files[4] = {s->win_path, s->stress_path, s->sim_path, s->real_path};
    for (int i = 0; i < 4; i++)
        if (files[i][0]) unlink(files[i]);
    for (int i = 0; i < s->n_pol; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/real-%s.h5", s->dir, s->pol[i]);
        unlink(p);
    }
    rmdir(s->dir);
}

/* The trace, the window (checked), and the window files of the simulator and of the stressor. */
static int load_window(val_state *s)
{
    val_opts *o = s->o;
    ats_err err = {{0}};
    ats_cli_trace_path(o->trace, s->trace_path, sizeof s->trace_path);
    enum ats_status st = atsc_trace_load(s->trace_path, &s->tr, &err);
    if (st != ATS_OK) {
        ats_cli_error("validate", "%s", err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    const char *b = strrchr(s->trace_path, '/');
    snprintf(s->trace_name, sizeof s->trace_name, "%.63s", b ? b + 1 : s->trace_path);
    char *dot = strrchr(s->trace_name, '.');
    if (dot && !strcmp(dot, ".h5")) *dot = 0;
    double len = atsc_trace_duration(s->tr);
    if (!o->window_given) {
        o->win0 = 0;
        o->win1 = len;
        if (!(len > 0)) {
            ats_cli_error("validate", "trace %s: one sample (0 s long): a zero-length window; give --window A:B",
                          s->trace_path);
            return ATS_EXIT_USAGE;
        }
    } else {
        if (!(o->win1 <= len)) {
            ats_cli_error("validate", "--window %g:%g: ends past the end of trace %s (%g s long)", o->win0, o->win1,
                          s->trace_path, len);
            return ATS_EXIT_USAGE;
        }
        size_t nc = atsc_val_trace_changes(s->tr, o->win0, o->win1, VAL_CHANGE_TOL);
        if (nc < 2) {
            ats_cli_error("validate", "--window %g:%g: trace %s changes load %zu time%s inside it (by more than %g in a "
                          "resource); a validation window needs at least 2", o->win0, o->win1, s->trace_path, nc,
                          nc == 1 ? "" : "s", VAL_CHANGE_TOL);
            return ATS_EXIT_USAGE;
        }
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/ats-validate.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir)) {
        ats_cli_error("validate", "cannot create a scratch folder %s: %s", s->dir, strerror(errno));
        s->dir[0] = 0;
        return ATS_EXIT_FAIL;
    }
    snprintf(s->win_path, sizeof s->win_path, "%s/window.h5", s->dir);
    snprintf(s->stress_path, sizeof s->stress_path, "%s/stress-window.h5", s->dir);
    snprintf(s->sim_path, sizeof s->sim_path, "%s/sim.h5", s->dir);
    snprintf(s->real_path, sizeof s->real_path, "%s/real.h5", s->dir);
    s->lead_s = o->lead_s < o->win0 ? o->lead_s : o->win0; /* no trace before its time 0 */
    atsc_trace *w = NULL, *ws = NULL;
    st = atsc_val_trace_window(s->tr, s->trace_path, o->win0, o->win1, &w, &err);
    if (!st) st = atsc_val_trace_window(s->tr, s->trace_path, o->win0 - s->lead_s, o->win1, &ws, &err);
    if (!st) st = atsc_trace_save(w, s->win_path, &err);
    if (!st) st = atsc_trace_save(ws, s->stress_path, &err);
    s->win = w;
    atsc_trace_free(ws);
    if (st) {
        ats_cli_error("validate", "%s", err.msg);
        return ATS_EXIT_FAIL;
    }
    return ATS_EXIT_OK;
}

/* The simulator's inputs: model, hw, the window trace; P, C, the controller, the budget. */
static int sim_setup(val_state *s, int64_t gen, double duration_s)
{
    val_opts *o = s->o;
    sim_cli *c = &s->sc;
    if (s->sc_loaded) sim_cli_free(c);
    sim_cli_init(c);
    c->model = o->model;
    c->quant = o->quant;
    c->hw = o->hw;
    c->trace = s->win_path;
    c->trace_given = 1;
    c->cfg.vram_budget_bytes = o->vram;
    c->cfg.prompt_tok = o->prompt;
    c->cfg.gen_tok = gen;
    c->cfg.chunk_tok = o->chunk;
    c->cfg.n_requests = 1;
    c->requests_given = 1;
    c->cfg.duration_s = duration_s;
    c->duration_given = duration_s > 0;
    c->cfg.ctrl.eps = o->ctrl.eps;
    c->cfg.ctrl.tau_s = o->ctrl.tau_s;
    c->cfg.ctrl.tau_tpot_mult = o->ctrl.tau_tpot_mult;
    c->cfg.seed = (uint64_t)o->seed;
    c->cfg.record_ops = o->ops;
    int rc = sim_cli_load(c, "validate");
    s->sc_loaded = rc == 0;
    if (!rc) /* the results name the trace, not the scratch file of its window (the window: in /validation) */
        snprintf(c->trace_name, sizeof c->trace_name, "%s", s->trace_name);
    return rc;
}

/* The simulated run of policy i (s->gen[i] decode steps, or with --gen auto first sized to the window). */
static int sim_policy(val_state *s, int i, int64_t gen_max)
{
    val_opts *o = s->o;
    ats_err err = {{0}};
    int rc;
    if (o->gen_auto) { /* sizing: the decode steps that the simulator fits into the window */
        if ((rc = sim_setup(s, gen_max, o->win1 - o->win0))) return rc;
        sim_session_cfg cfg = s->sc.cfg;
        cfg.policy = s->pol[i];
        cfg.resched_cost_s = sim_cli_resched_for(&s->sc, s->pol[i], NULL);
        sim_session_result r;
        memset(&r, 0, sizeof r);
        enum ats_status st = sim_session_run(&s->sc.arch, &s->sc.hw_desc, &s->sc.st, &cfg, &r, &err);
        int64_t nd = 0;
        for (size_t k = 0; st == ATS_OK && k < r.n_rounds; k++) nd += r.rounds[k].phase == ATSC_PHASE_DECODE;
        sim_session_result_free(&r);
        if (st != ATS_OK) {
            ats_cli_error("validate", "policy %s: simulator: %s", s->pol[i], err.msg);
            return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
        }
        if (nd == 0) {
            ats_cli_error("validate", "policy %s: the simulator ends the window %g:%g in the prefill of %lld tokens: "
                          "no decode step to compare (a longer --window or a shorter --prompt)", s->pol[i], o->win0,
                          o->win1, o->prompt);
            return ATS_EXIT_USAGE;
        }
        s->gen[i] = nd;
    } else {
        s->gen[i] = o->gen;
    }
    if ((rc = sim_setup(s, s->gen[i], 0))) return rc;
    sim_session_cfg cfg = s->sc.cfg;
    cfg.policy = s->pol[i];
    cfg.resched_cost_s = sim_cli_resched_for(&s->sc, s->pol[i], NULL);
    enum ats_status st = sim_session_run(&s->sc.arch, &s->sc.hw_desc, &s->sc.st, &cfg, &s->res[i], &err);
    if (st != ATS_OK) {
        ats_cli_error("validate", "policy %s: simulator: %s", s->pol[i], err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    s->sim_ok[i] = 1;
    fprintf(stderr, "ats validate: policy %s: simulated %lld + %lld tokens, %zu rounds, %.3f s\n", s->pol[i],
            o->prompt, (long long)s->gen[i], s->res[i].n_rounds, s->res[i].sim_s);
    return ATS_EXIT_OK;
}

/* The simulated runs into one results file (one run per policy), as `ats sim --out` writes it. */
static int write_sim(val_state *s)
{
    ats_err err = {{0}};
    char cfg[4096], plist[1024] = "";
    for (int i = 0; i < s->n_pol; i++) {
        if (!s->sim_ok[i]) continue;
        if (plist[0]) strcat(plist, ",");
        strncat(plist, s->pol[i], sizeof plist - strlen(plist) - 2);
    }
    sim_cli_config_json(&s->sc, plist, cfg, sizeof cfg);
    atsc_results_meta meta = {"ats sim", cfg, (uint64_t)s->o->seed, s->sc.arch.name, s->sc.hw_desc.name, s->trace_name};
    atsc_results *w = NULL;
    enum ats_status st = atsc_results_open(s->sim_path, &meta, &w, &err);
    for (int i = 0; i < s->n_pol && !st; i++) {
        if (!s->sim_ok[i]) continue;
        char rc[256];
        snprintf(rc, sizeof rc, "{\"policy\": \"%s\", \"gen_tok\": %lld, \"resched_cost_s\": %.9g}", s->pol[i],
                 (long long)s->gen[i], sim_cli_resched_for(&s->sc, s->pol[i], NULL));
        st = atsc_results_begin_run(w, s->pol[i], s->pol[i], rc, s->o->ops, &err);
        if (!st) st = atsc_results_append_rounds(w, s->res[i].rounds, s->res[i].n_rounds, &err);
        if (!st && s->o->ops) st = atsc_results_append_ops(w, s->res[i].ops, s->res[i].n_ops, &err);
    }
    if (!st) st = atsc_results_close(w, &err);
    else atsc_results_abort(w);
    if (st) {
        ats_cli_error("validate", "%s", err.msg);
        return ATS_EXIT_FAIL;
    }
    return ATS_EXIT_OK;
}

/* ---------------------------------------------------------------- the stressor (a child process) */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* before_rounds: `ats stress --trace <window from A - lead>` started, then lead s of head start; the
   stressor alive at the end of it, or the run does not start. */
static int stress_start(void *ctx)
{
    val_state *s = ctx;
    if (s->o->no_stress) return ATS_EXIT_OK;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        ats_cli_error("validate", "cannot find this program (/proc/self/exe) to start ats stress: %s", strerror(errno));
        return ATS_EXIT_FAIL;
    }
    self[n] = 0;
    /* posix_spawn (vfork-like): no copy of this process's page tables, which map the model's gigabytes */
    const char *argv[16 + VAL_MAX_STRESS_ARGS];
    char words[1024];
    int k = 0;
    argv[k++] = self;
    argv[k++] = "stress";
    argv[k++] = "--trace";
    argv[k++] = s->stress_path;
    argv[k++] = "--duration";
    argv[k++] = "1000000"; /* past any run: the last value holds until validate stops it */
    if (s->o->baseline) argv[k++] = "--baseline", argv[k++] = s->o->baseline;
    if (!s->stress_gpu) argv[k++] = "--cpu-only";
    snprintf(words, sizeof words, "%s", s->o->stress_args ? s->o->stress_args : "");
    char *save = NULL;
    for (char *w = strtok_r(words, " ", &save); w && k < 15 + VAL_MAX_STRESS_ARGS; w = strtok_r(NULL, " ", &save))
        argv[k++] = w;
    argv[k] = NULL;
    fflush(NULL);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO); /* its report: stdout is the table's */
    pid_t pid;
    int e = posix_spawn(&pid, self, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
        ats_cli_error("validate", "cannot start %s stress: %s", self, strerror(e));
        return ATS_EXIT_FAIL;
    }
    s->stress_pid = pid;
    int64_t end = now_ns() + (int64_t)((s->lead_s > 0.2 ? s->lead_s : 0.2) * 1e9);
    while (now_ns() < end && !ats_cli_stop) {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            s->stress_pid = 0;
            ats_cli_error("validate", "ats stress ended before the run (exit %d; its message above)",
                          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
            return ATS_EXIT_FAIL;
        }
    }
    return ats_cli_stop ? ATS_EXIT_FAIL : ATS_EXIT_OK;
}

/* after_rounds: the stressor stopped (SIGTERM: it stops and reaps every hog) and reaped. */
static void stress_stop(void *ctx)
{
    val_state *s = ctx;
    if (s->stress_pid <= 0) return;
    int status = 0;
    if (waitpid(s->stress_pid, &status, WNOHANG) == s->stress_pid) {
        snprintf(s->stress_note, sizeof s->stress_note, "ats stress ended during the run (exit %d; its message "
                 "above): the end of the run had no stressor", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    } else {
        kill(s->stress_pid, SIGTERM);
        waitpid(s->stress_pid, &status, 0);
    }
    s->stress_pid = 0;
}

/* ---------------------------------------------------------------- the real runs */

/* The executor's model (once for every policy): a GGUF file or dummy weights; and the prompt's ids. */
static int load_model(val_state *s)
{
    val_opts *o = s->o;
    ats_err err = {{0}};
    enum ats_status st;
    if (o->dummy) {
        char path[1024];
        ats_arch arch;
        if ((st = atsc_model_load(ats_cli_model_path(o->model, path, sizeof path), &arch, &err)) != ATS_OK) {
            ats_cli_error("validate", "%s", err.msg);
            return ATS_EXIT_USAGE;
        }
        ats_recipe r = arch.default_recipe;
        if (o->quant && ats_recipe_from_name(o->quant, &r) != ATS_OK) {
            ats_cli_error("validate", "--quant '%s': unknown recipe", o->quant);
            return ATS_EXIT_USAGE;
        }
        st = ex_model_new_dummy_progress(&arch, r, (uint64_t)o->seed, ats_cli_progress_bytes,
                                         (void *)"validate: building dummy weights", &s->m, &err);
    } else {
        st = ex_model_load_gguf(o->model, &s->m, &err);
    }
    if (st != ATS_OK) {
        ats_cli_error("validate", "%s", err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    s->prompt = malloc((size_t)o->prompt * sizeof *s->prompt);
    if (!s->prompt) return ATS_EXIT_FAIL;
    uint64_t z = (uint64_t)o->seed; /* seeded ids: the same request whatever the vocabulary */
    for (long long i = 0; i < o->prompt; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        s->prompt[i] = (int32_t)((z >> 33) % (uint64_t)s->m->arch.n_vocab);
    }
    return ATS_EXIT_OK;
}

/* The real run of policy i under the stressor, into <dir>/real-<policy>.h5. */
static int real_policy(val_state *s, int i)
{
    val_opts *o = s->o;
    char out[1200];
    snprintf(out, sizeof out, "%s/real-%s.h5", s->dir, s->pol[i]);
    run_policy_args ra;
    memset(&ra, 0, sizeof ra);
    ra.policy = s->pol[i];
    ra.hw = o->hw;
    ra.out_path = out;
    ra.vram_budget = o->vram;
    ra.ctrl = o->ctrl;
    ra.so = ex_session_opts_default();
    ra.so.n_ctx = o->prompt + s->gen[i]; /* the simulator's context (prompt + decode steps): same KV bytes */
    ra.so.kv_type = o->kv_type;          /* f16 by default: what sched and the simulator count */
    ra.prompt = s->prompt;
    ra.n_prompt = o->prompt;
    ra.n_gen = s->gen[i] + 1; /* the first token comes from the prefill: gen decode rounds */
    ra.chunk = o->chunk;
    ra.seed = (uint64_t)o->seed;
    ra.top_p = 1.0;
    ra.cpu_only = o->cpu_only;
    ra.record_ops = o->ops;
    ra.print_ids = 1;
    ra.no_eos = 1;
    ra.quiet = 1;
    ra.before_rounds = stress_start;
    ra.after_rounds = stress_stop;
    ra.hook_ctx = s;
    s->stress_note[0] = 0;
    fprintf(stderr, "ats validate: policy %s: real run of %lld + %lld tokens%s\n", s->pol[i], o->prompt,
            (long long)s->gen[i], o->no_stress ? " (no stressor)" : " under ats stress");
    int rc = ats_run_policy(s->m, &ra);
    if (rc == ATS_EXIT_OK && s->stress_note[0]) { /* not the load the simulator saw: no comparison */
        ats_cli_error("validate", "policy %s: %s", s->pol[i], s->stress_note);
        rc = ATS_EXIT_FAIL;
    }
    if (rc == ATS_EXIT_OK) s->real_ok[i] = 1;
    return rc;
}

/* The real runs' files merged into one results file, a run per policy (each run's config: its file's). */
static int write_real(val_state *s)
{
    ats_err err = {{0}};
    char cfg[1024], machine[512];
    snprintf(cfg, sizeof cfg, "{\"command\": \"validate\", \"model\": \"%s\", \"vram_budget\": %llu, \"threads\": %d, "
             "\"stress\": \"%s\", \"trace\": \"%s\", \"window_s\": [%.9g, %.9g], \"lead_s\": %.9g}",
             s->m->arch.name, (unsigned long long)s->o->vram, omp_get_max_threads(),
             s->o->no_stress ? "off" : s->o->baseline ? "closed loop" : "open loop", s->trace_name, s->o->win0,
             s->o->win1, s->lead_s);
    atsc_results_meta meta = {"ats run", cfg, (uint64_t)s->o->seed, s->m->arch.name,
                              ats_cli_machine(machine, sizeof machine, ""), s->trace_name};
    atsc_results *w = NULL;
    enum ats_status st = atsc_results_open(s->real_path, &meta, &w, &err);
    for (int i = 0; i < s->n_pol && !st; i++) {
        if (!s->real_ok[i]) continue;
        char p[1200];
        snprintf(p, sizeof p, "%s/real-%s.h5", s->dir, s->pol[i]);
        atsc_results_file *f = NULL;
        st = atsc_results_read(p, &f, &err);
        const atsc_results_run *r = f ? atsc_results_find_run(f, s->pol[i]) : NULL;
        if (!st && !r) st = ats_err_set(&err, ATS_EINVAL, "%s: no run '%s'", p, s->pol[i]);
        if (!st) st = atsc_results_begin_run(w, s->pol[i], s->pol[i], f->config_json, r->has_ops, &err);
        if (!st) st = atsc_results_append_rounds(w, r->rounds, r->n_rounds, &err);
        if (!st && r->has_ops) st = atsc_results_append_ops(w, r->ops, r->n_ops, &err);
        atsc_results_file_free(f);
    }
    if (!st) st = atsc_results_close(w, &err);
    else atsc_results_abort(w);
    if (st) {
        ats_cli_error("validate", "%s", err.msg);
        return ATS_EXIT_FAIL;
    }
    return ATS_EXIT_OK;
}

/* ---------------------------------------------------------------- comparison, outputs */

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* The device of a real run from its configuration ("cuda" or "cpu"). */
static const char *real_device(const char *real_path, const char *policy, char *buf, size_t len)
{
    atsc_results_file *f = NULL;
    ats_err err;
    snprintf(buf, len, "?");
    if (atsc_results_read(real_path, &f, &err) != ATS_OK) return buf;
    const atsc_results_run *r = atsc_results_find_run(f, policy);
    json_t *j = r ? json_loads(r->config_json, 0, NULL) : NULL;
    const char *d = j ? json_string_value(json_object_get(j, "device")) : NULL;
    if (d) snprintf(buf, len, "%s", d);
    json_decref(j);
    atsc_results_file_free(f);
    return buf;
}

static json_t *record_of(const val_state *s, const atsc_val_row *r, const char *device)
{
    const val_opts *o = s->o;
    char machine[512];
    json_t *j = json_object();
    json_object_set_new(j, "policy", json_string(r->policy));
    json_object_set_new(j, "trace", json_string(r->trace));
    json_object_set_new(j, "real_tpot_ms", json_real(1e3 * r->s.real_tpot_s));
    json_object_set_new(j, "sim_tpot_ms", json_real(1e3 * r->s.sim_tpot_s));
    json_object_set_new(j, "mean_tpot_error_pct", json_real(r->s.mean_tpot_error_pct));
    json_object_set_new(j, "p90_round_error_pct", json_real(r->s.p90_round_error_pct));
    json_object_set_new(j, "mape_pct", json_real(r->s.mape_pct));
    json_object_set_new(j, "real_prefill_tok_s", num_or_null(r->s.real_prefill_tok_s));
    json_object_set_new(j, "sim_prefill_tok_s", num_or_null(r->s.sim_prefill_tok_s));
    json_object_set_new(j, "real_resched", json_integer(r->s.real_resched));
    json_object_set_new(j, "sim_resched", json_integer(r->s.sim_resched));
    json_object_set_new(j, "n_rounds", json_integer(r->s.n_rounds));
    json_object_set_new(j, "n_decode", json_integer(r->s.n_decode));
    json_object_set_new(j, "window_s", json_pack("[f, f]", r->window_start_s, r->window_end_s));
    json_object_set_new(j, "model", json_string(s->m->arch.name));
    json_object_set_new(j, "prompt_tok", json_integer(o->prompt));
    json_object_set_new(j, "vram_budget_bytes", json_integer((json_int_t)o->vram));
    json_object_set_new(j, "threads", json_integer(omp_get_max_threads()));
    json_object_set_new(j, "hw", json_string(s->sc.hw_desc.name));
    json_object_set_new(j, "machine", json_string(ats_cli_machine(machine, sizeof machine, "")));
    json_object_set_new(j, "real_device", json_string(device));
    json_object_set_new(j, "stress", json_string(o->no_stress ? "off" : o->baseline ? "closed loop" : "open loop"));
    json_object_set_new(j, "validation_file", json_string(o->out));
    json_object_set_new(j, "commit", json_string(ATS_GIT_COMMIT));
    return j;
}

/* One line per load segment under the policy's line (a recorded trace has hundreds: counted only). */
static void print_segments(const atsc_val_seg *g, size_t n)
{
    size_t unseen = 0; /* loaded segments no decode round reached: the request ended before them */
    for (size_t k = 0; k < n; k++) unseen += g[k].n_decode == 0 && (g[k].cpu < 1 || g[k].gpu < 1 || g[k].pcie < 1);
    if (unseen)
        fprintf(stderr, "ats validate: %zu loaded segment%s of the window saw no decode round of both runs (the request "
                        "ended first): give a larger --gen or a shorter --window\n", unseen, unseen == 1 ? "" : "s");
    if (n > VAL_PRINT_SEGS) {
        printf("  %zu load segments (per-segment errors in /validation_segments)\n", n);
        return;
    }
    for (size_t k = 0; k < n; k++) {
        char t1[32];
        snprintf(t1, sizeof t1, isfinite(g[k].t1_s) ? "%.1f" : "end", g[k].t1_s);
        if (g[k].n_decode == 0)
            printf("  %6.1f-%-5s s  cpu %.2f gpu %.2f pcie %.2f: no decode round of both runs\n", g[k].t0_s, t1,
                   g[k].cpu, g[k].gpu, g[k].pcie);
        else
            printf("  %6.1f-%-5s s  cpu %.2f gpu %.2f pcie %.2f: %5lld rounds, real %.3f ms, sim %.3f ms, %+.2f %%\n",
                   g[k].t0_s, t1, g[k].cpu, g[k].gpu, g[k].pcie, (long long)g[k].n_decode, 1e3 * g[k].real_tpot_s,
                   1e3 * g[k].sim_tpot_s, g[k].mean_tpot_error_pct);
    }
}

static json_t *segments_json(const atsc_val_seg *g, size_t n)
{
    json_t *a = json_array();
    for (size_t k = 0; k < n; k++)
        json_array_append_new(a, json_pack("{s:f, s:o, s:f, s:f, s:f, s:I, s:o, s:o, s:o}", "t0_s", g[k].t0_s, "t1_s",
                                           num_or_null(g[k].t1_s), "cpu", g[k].cpu, "gpu", g[k].gpu, "pcie", g[k].pcie,
                                           "n_decode", (json_int_t)g[k].n_decode, "real_tpot_ms",
                                           num_or_null(1e3 * g[k].real_tpot_s), "sim_tpot_ms",
                                           num_or_null(1e3 * g[k].sim_tpot_s), "mean_tpot_error_pct",
                                           num_or_null(g[k].mean_tpot_error_pct)));
    return a;
}

/* Compares, prints, writes the validation file and appends the records. The exit code. */
static int report(val_state *s, int rc)
{
    val_opts *o = s->o;
    ats_err err = {{0}};
    atsc_val_row rows[VAL_MAX_POLICIES];
    size_t seg_first[VAL_MAX_POLICIES] = {0}, seg_n[VAL_MAX_POLICIES] = {0}, n_seg = 0;
    atsc_val_seg *segs = malloc((size_t)s->n_pol * VAL_MAX_SEGS * sizeof *segs);
    int n = 0;
    if (!segs) {
        ats_cli_error("validate", "out of memory");
        return ATS_EXIT_FAIL;
    }
    atsc_results_file *real = NULL;
    if (atsc_results_read(s->real_path, &real, &err) != ATS_OK) {
        ats_cli_error("validate", "%s", err.msg);
        free(segs);
        return ATS_EXIT_FAIL;
    }
    for (int i = 0; i < s->n_pol; i++) {
        const atsc_results_run *r = s->real_ok[i] ? atsc_results_find_run(real, s->pol[i]) : NULL;
        if (!r || !s->sim_ok[i]) continue;
        atsc_val_row *v = &rows[n];
        memset(v, 0, sizeof *v);
        snprintf(v->policy, sizeof v->policy, "%s", s->pol[i]);
        snprintf(v->trace, sizeof v->trace, "%s", s->trace_name);
        v->window_start_s = o->win0;
        v->window_end_s = o->win1;
        if (atsc_val_compare(r->rounds, r->n_rounds, s->res[i].rounds, s->res[i].n_rounds, &v->s, &err) != ATS_OK) {
            ats_cli_error("validate", "policy %s: %s", s->pol[i], err.msg);
            rc = ATS_EXIT_FAIL;
            continue;
        }
        size_t ns = 0;
        if (n_seg < VAL_MAX_SEGS * VAL_MAX_POLICIES &&
            atsc_val_segments(r->rounds, s->res[i].rounds, r->n_rounds, s->win, VAL_CHANGE_TOL, segs + n_seg,
                              VAL_MAX_SEGS, &ns, &err) == ATS_OK) {
            seg_first[n] = n_seg;
            seg_n[n] = ns < VAL_MAX_SEGS ? ns : VAL_MAX_SEGS;
            for (size_t k = 0; k < seg_n[n]; k++) snprintf(segs[n_seg + k].policy, ATSC_RESULTS_NAME_LEN, "%s", s->pol[i]);
            n_seg += seg_n[n];
        }
        n++;
    }
    atsc_results_file_free(real);
    if (n == 0) {
        ats_cli_error("validate", "no policy has both runs to compare; %s not written", o->out);
        free(segs);
        return ATS_EXIT_FAIL;
    }
    printf("# ats validate: %s, trace %s window %g:%g s, VRAM budget %.2f GiB, %d threads, prompt %lld, hw %s, "
           "stressor %s\n", s->m->arch.name, s->trace_name, o->win0, o->win1, (double)o->vram / (1 << 30),
           omp_get_max_threads(), o->prompt, s->sc.hw_desc.name,
           o->no_stress ? "off" : o->baseline ? "closed loop" : "open loop");
    printf("%-10s %6s %10s %10s %8s %8s %8s %11s %11s %9s\n", "policy", "rounds", "real TPOT", "sim TPOT", "err mean",
           "MAPE", "p90 err", "real pre", "sim pre", "resched");
    printf("%-10s %6s %10s %10s %8s %8s %8s %11s %11s %9s\n", "", "", "ms", "ms", "%", "%", "%", "tok/s", "tok/s",
           "real/sim");
    for (int i = 0; i < n; i++) {
        const atsc_val_row *v = &rows[i];
        printf("%-10s %6lld %10.3f %10.3f %+8.2f %8.2f %8.2f %11.1f %11.1f %4d/%-4d\n", v->policy,
               (long long)v->s.n_rounds, 1e3 * v->s.real_tpot_s, 1e3 * v->s.sim_tpot_s, v->s.mean_tpot_error_pct,
               v->s.mape_pct, v->s.p90_round_error_pct, v->s.real_prefill_tok_s, v->s.sim_prefill_tok_s,
               v->s.real_resched, v->s.sim_resched);
        print_segments(segs + seg_first[i], seg_n[i]); /* rows[i] has its segments at seg_first[i] */
        char dev[32];
        if (strcmp(real_device(s->real_path, v->policy, dev, sizeof dev), "cpu") == 0)
            fprintf(stderr, "ats validate: %s: the real run had no GPU (every op on the CPU) while the simulator models "
                            "--hw %s with its GPU: the errors compare unlike runs, not the simulator's accuracy\n",
                    v->policy, s->sc.hw_desc.name);
    }
    char cfg[2048];
    snprintf(cfg, sizeof cfg, "{\"command\": \"validate\", \"model\": \"%s\", \"hw\": \"%s\", \"trace\": \"%s\", "
             "\"window_s\": [%.9g, %.9g], \"lead_s\": %.9g, \"vram_budget_bytes\": %llu, \"threads\": %d, "
             "\"prompt_tok\": %lld, \"chunk_tok\": %lld, \"gen\": \"%s\", \"eps\": %.9g, \"tau_s\": %.9g, "
             "\"tau_tpot_mult\": %.9g, \"seed\": %lld, \"stress\": \"%s\", \"cpu_only\": %d, \"kv_type\": \"%s\"}",
             s->m->arch.name, s->sc.hw_desc.name, s->trace_name, o->win0, o->win1, s->lead_s,
             (unsigned long long)o->vram, omp_get_max_threads(), o->prompt, o->chunk, o->gen_auto ? "auto" : "given",
             o->ctrl.eps, o->ctrl.tau_s, o->ctrl.tau_tpot_mult, o->seed,
             o->no_stress ? "off" : o->baseline ? "closed loop" : "open loop", o->cpu_only, ats_qtype_name(o->kv_type));
    if (atsc_val_write(o->out, s->real_path, s->sim_path, cfg, rows, (size_t)n, segs, n_seg, &err) != ATS_OK) {
        ats_cli_error("validate", "%s", err.msg);
        free(segs);
        return ATS_EXIT_FAIL;
    }
    printf("wrote %s\n", o->out);
    json_t *recs = json_array();
    for (int i = 0; i < n; i++) {
        char dev[32];
        json_t *r = record_of(s, &rows[i], real_device(s->real_path, rows[i].policy, dev, sizeof dev));
        if (seg_n[i] <= VAL_PRINT_SEGS) json_object_set_new(r, "segments", segments_json(segs + seg_first[i], seg_n[i]));
        json_array_append_new(recs, r);
    }
    if (!o->summary) {
        /* no --summary: the records stay in the validation file's /validation */
    } else if (atsc_val_summary_append(o->summary, recs, &err) != ATS_OK) {
        ats_cli_error("validate", "--summary: %s (the validation file %s is written)", err.msg, o->out);
        rc = ATS_EXIT_FAIL;
    } else {
        printf("appended %d record%s to %s\n", n, n == 1 ? "" : "s", o->summary);
    }
    json_decref(recs);
    free(segs);
    return rc;
}

static void state_free(val_state *s)
{
    if (s->stress_pid > 0) stress_stop(s);
    for (int i = 0; i < s->n_pol; i++) sim_session_result_free(&s->res[i]);
    if (s->sc_loaded) sim_cli_free(&s->sc);
    atsc_trace_free(s->tr);
    atsc_trace_free(s->win);
    free(s->prompt);
    ex_model_free(s->m);
    rm_scratch(s);
}

int ats_cmd_validate(int argc, char **argv)
{
    val_opts o;
    memset(&o, 0, sizeof o);
    o.hw = "h200-host";
    o.policy = "layer,static,ats";
    o.prompt = 512;
    o.gen_auto = 1;
    o.chunk = 512;
    o.seed = 42;
    o.lead_s = 2.0;
    o.kv_type = ATS_Q_F16;
    o.ctrl = ats_controller_cfg_default();
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc < 0 ? ATS_EXIT_OK : rc;
    if (o.threads > 0) omp_set_num_threads((int)o.threads);
    val_state *s = calloc(1, sizeof *s);
    if (!s) return ATS_EXIT_FAIL;
    s->o = &o;
    char pbuf[1024];
    if ((rc = parse_policies(o.policy, pbuf, sizeof pbuf, s->pol, &s->n_pol))) goto done;
    if ((rc = load_window(s))) goto done;
    /* --gen auto's bound: the context after the prompt */
    if ((rc = sim_setup(s, 1, 0))) goto done; /* model, hw, trace checked once before any run */
    int64_t ctx_max = s->sc.arch.n_ctx_max > 0 && s->sc.arch.n_ctx_max < 4096 ? s->sc.arch.n_ctx_max : 4096;
    if (o.ctx > 0) ctx_max = o.ctx;
    int64_t gen_max = ctx_max - o.prompt;
    if (o.gen_auto && gen_max < 1) {
        ats_cli_error("validate", "--prompt %lld leaves no room for decode steps in a context of %lld tokens (--ctx)",
                      o.prompt, (long long)ctx_max);
        rc = ATS_EXIT_USAGE;
        goto done;
    }
    if (s->sc.hw_desc.cpu_threads != omp_get_max_threads())
        fprintf(stderr, "ats validate: note: the executor runs %d CPU threads; hw '%s' describes %d (its CPU figures "
                "are the simulator's)\n", omp_get_max_threads(), s->sc.hw_desc.name, s->sc.hw_desc.cpu_threads);
    ats_cli_catch_stop_signals();
    for (int i = 0; i < s->n_pol && !rc; i++) rc = sim_policy(s, i, gen_max);
    if (rc || (rc = write_sim(s))) goto done;
    if ((rc = load_model(s))) goto done;
    s->stress_gpu = !o.no_stress && ld_gpu_present(0);
    if (!o.no_stress && !s->stress_gpu)
        fprintf(stderr, "ats validate: no CUDA device: the stressor follows the trace's CPU column only (--cpu-only)\n");
    int failed = 0;
    for (int i = 0; i < s->n_pol && !ats_cli_stop; i++)
        if (real_policy(s, i) != ATS_EXIT_OK) {
            ats_cli_error("validate", "policy %s: the real run failed (above); left out", s->pol[i]);
            failed = 1;
        }
    if (ats_cli_stop) {
        rc = ATS_EXIT_FAIL;
        goto done;
    }
    if ((rc = write_real(s))) goto done;
    rc = report(s, failed ? ATS_EXIT_FAIL : ATS_EXIT_OK);
done:
    state_free(s);
    free(s);
    return ats_cli_exit_after_signal(rc);
}
