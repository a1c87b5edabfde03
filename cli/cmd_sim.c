/*
 * ats sim — replay a load trace in the discrete-event simulator and compare policies.
 *
 * With no arguments: Qwen3-14B (Q4_K_M) on rtx3060-laptop with 85% of its 6 GiB as VRAM budget
 * (the model needs ~9 GB, so it is offloaded), the committed recorded trace traces/h200-cpu-compile.h5 (a parallel build co-running on the
 * H200 host's CPU, recorded with `ats record`),
 * requests of 2048 prompt + 128 generated tokens back to back for the trace's 180 s, every policy;
 * prints the summary table. Exit codes: 0 ok, 1 runtime failure, 2 bad input.
 */
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ats/policy.h"
#include "atsc/results.h"
#include "atsc/timeline.h"
#include "atsc/outfile.h"
#include "cli.h"
#include "sim_cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats sim [--policy P[,P...]] [--eps E] [--interval I] [--threads N]\n"
            "               [--format table|csv|json] [--out results.h5] [--timeline out.json] [--ops]\n"
            "               [simulation flags]\n\n"
            "Simulates requests (chunked prefill, then decode with a growing KV cache) under a load trace\n"
            "for each policy, with the scheduling controller in the loop, and prints one line per policy:\n"
            "prefill tok/s, decode tok/s, TTFT, TPOT mean/p50/p99, re-schedules, GB moved host->device,\n"
            "GPU busy fraction.\n\n"
            "  --policy P         comma-separated policies, or 'all' [all]: %s\n"
            "  --eps E            re-scheduling threshold (fraction) [0.15]\n"
            "  --interval I       minimum re-scheduling interval: multiple of the recent TPOT, or with\n"
            "                     'ms' / 's' an absolute time [5]\n"
            "  --threads N        policies simulated in parallel [1]\n"
            "  --format F         table, csv or json [table]\n"
            "  --out FILE         HDF5 results (one run per policy; written to a temporary name, renamed)\n"
            "  --timeline FILE    Chrome trace-event JSON (Perfetto): CPU, GPU, copy-engine tracks\n"
            "  --ops              also store per-op times in the results file\n"
            "%s"
            "example: ats sim --policy layer,ats --trace fig13-synth --format csv\n",
            ats_policy_names(), sim_cli_help);
}

typedef struct progress_state {
    int n;
    double *frac;
} progress_state;

typedef struct progress_slot {
    progress_state *ps;
    int i;
} progress_slot;

static void on_progress(void *user, double f)
{
    progress_slot *sl = user;
    double sum = 0;
#pragma omp critical(ats_sim_progress)
    {
        sl->ps->frac[sl->i] = f;
        for (int k = 0; k < sl->ps->n; k++) sum += sl->ps->frac[k];
        sim_cli_progress("ats sim", sum / sl->ps->n, 0);
    }
}

typedef struct sim_args {
    const char *policy_arg, *out_path, *tl_path;
    sim_format fmt;
    long long threads;
} sim_args;

/* the flags into o (the shared ones, sim_cli_flag) and a: ATS_EXIT_OK, ATS_EXIT_USAGE after one line,
   -1 after --help */
static int parse_args(int argc, char **argv, sim_cli *o, sim_args *a)
{
    enum { O_POLICY = 1, O_EPS, O_INTERVAL, O_THREADS, O_FORMAT, O_OUT, O_TIMELINE, O_OPS, O_HELP };
    static const struct option opts[] = {
        {"policy", required_argument, 0, O_POLICY}, {"eps", required_argument, 0, O_EPS},
        {"interval", required_argument, 0, O_INTERVAL}, {"threads", required_argument, 0, O_THREADS},
        {"format", required_argument, 0, O_FORMAT}, {"out", required_argument, 0, O_OUT},
        {"timeline", required_argument, 0, O_TIMELINE}, {"ops", no_argument, 0, O_OPS},
        {"help", no_argument, 0, O_HELP}, SIM_CLI_LONG_OPTIONS, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        double d;
        if (ats_cli_once_opt("sim", &seen, opts, c, optarg)) return ATS_EXIT_USAGE; /* the last one won */
        int r = sim_cli_flag(o, "sim", c, optarg);
        if (r < 0) return ATS_EXIT_USAGE;
        if (r > 0) continue;
        switch (c) {
        case O_POLICY: a->policy_arg = optarg; break;
        case O_EPS:
            if (ats_cli_parse_double(optarg, &d) || !(d >= 0 && d <= 10.0)) { /* sweep's range */
                ats_cli_error("sim", "--eps: bad value '%s' (a fraction, 0..10)", optarg);
                return ATS_EXIT_USAGE;
            }
            o->cfg.ctrl.eps = d;
            break;
        case O_INTERVAL: {
            size_t n = strlen(optarg);
            int abs_time = n > 0 && optarg[n - 1] == 's';
            if (abs_time ? sim_cli_parse_time(optarg, &d) : ats_cli_parse_double(optarg, &d)) d = -1;
            if (!(d > 0)) {
                ats_cli_error("sim", "--interval: bad value '%s' (TPOT multiple > 0, or e.g. 200ms)", optarg);
                return ATS_EXIT_USAGE;
            }
            if (abs_time) o->cfg.ctrl.tau_s = d;
            else o->cfg.ctrl.tau_s = 0, o->cfg.ctrl.tau_tpot_mult = d;
            break;
        }
        case O_THREADS:
            if (ats_cli_parse_int(optarg, &a->threads) || a->threads < 1 || a->threads > 1024) {
                ats_cli_error("sim", "--threads: bad value '%s' (an integer 1..1024)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case O_FORMAT:
            if (strcmp(optarg, "table") == 0) a->fmt = SIM_FMT_TABLE;
            else if (strcmp(optarg, "csv") == 0) a->fmt = SIM_FMT_CSV;
            else if (strcmp(optarg, "json") == 0) a->fmt = SIM_FMT_JSON;
            else {
                ats_cli_error("sim", "--format: '%s' (table, csv or json)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case O_OUT: a->out_path = optarg; break;
        case O_TIMELINE: a->tl_path = optarg; break;
        case O_OPS: o->cfg.record_ops = 1; break;
        case O_HELP:
        case 'h': usage(stdout); return -1;
        case ':':
            ats_cli_error("sim", "%s: missing value (see ats sim --help)", argv[optind - 1]);
            return ATS_EXIT_USAGE;
        default:
            ats_cli_error("sim", "unknown option '%s' (see ats sim --help)", argv[optind - 1]);
            return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error("sim", "unexpected argument '%s'", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    return ATS_EXIT_OK;
}

/* --policy (or every policy for "all") into pol[] (pointers into pbuf, 1024 bytes); *n_pol of them, or
   ATS_EXIT_USAGE after one line */
static int parse_policies(const char *policy_arg, int all_pol, char *pbuf, const char *pol[32], int *n_out)
{
    int n_pol = 0;
    snprintf(pbuf, 1024, "%s", all_pol ? ats_policy_names() : policy_arg);
    if (ats_cli_list_has_empty(pbuf, ',')) {
        ats_cli_error("sim", "--policy: '%.60s' has an empty entry (names separated by single commas)", policy_arg);
        return ATS_EXIT_USAGE;
    }
    char *save = NULL;
    for (char *t = strtok_r(pbuf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        const ats_policy_ops *ops;
        if (ats_policy_find(t, &ops) != ATS_OK) {
            if (strcmp(t, "all") == 0) { /* said "unknown policy 'all'" */
                ats_cli_error("sim", "--policy: 'all' stands alone (every policy), not in a list");
                return ATS_EXIT_USAGE;
            }
            ats_cli_error("sim", "--policy: unknown policy '%.60s' (known: %s)", t, ats_policy_names());
            return ATS_EXIT_USAGE;
        }
        for (int k = 0; k < n_pol; k++)
            if (strcmp(pol[k], t) == 0) {
                ats_cli_error("sim", "--policy: '%s' given twice (entries %d and %d)", t, k + 1, n_pol + 1);
                return ATS_EXIT_USAGE;
            }
        if (n_pol == 32) {
            ats_cli_error("sim", "--policy: more than 32 policies");
            return ATS_EXIT_USAGE;
        }
        pol[n_pol++] = t;
    }
    if (n_pol == 0) {
        ats_cli_error("sim", "--policy: none given");
        return ATS_EXIT_USAGE;
    }
    *n_out = n_pol;
    return ATS_EXIT_OK;
}

/* policies that cannot run the model: an explicit one is an error (ATS_EXIT_USAGE); with "all" it is left
   out and noted in na_note (512 bytes) */
static int applicable_policies(const sim_cli *o, int all_pol, const char *pol[32], int *n_io, char *na_note)
{
    int n_pol = *n_io;
    /* the default 'all' leaves out policies that cannot apply to this model (noted in the table
       header); an explicit one stays and its error is reported */
    na_note[0] = '\0';
    for (int i = 0; i < n_pol && !all_pol; i++) {
        char why[128];
        if (sim_cli_policy_applies(o, pol[i], why, sizeof why)) {
            ats_cli_error("sim", "--policy: '%s' is %s (%s)", pol[i], why, o->arch.name);
            return ATS_EXIT_USAGE;
        }
    }
    if (all_pol) {
        int k = 0;
        for (int i = 0; i < n_pol; i++) {
            char why[128];
            if (sim_cli_policy_applies(o, pol[i], why, sizeof why)) {
                size_t l = strlen(na_note);
                snprintf(na_note + l, 512 - l, "# %s: %s\n", pol[i], why);
            } else {
                pol[k++] = pol[i];
            }
        }
        n_pol = k;
        if (n_pol == 0) {
            ats_cli_error("sim", "--policy all: no policy applies to model %s", o->arch.name);
            return ATS_EXIT_USAGE;
        }
    }
    *n_io = n_pol;
    return ATS_EXIT_OK;
}

/* the header lines of the table: model, machine, trace, budget, request shape, re-schedule costs */
static void print_header(const sim_cli *o, const char *pol[32], int n_pol, const char *na_note)
{
    printf("# %s (%s) on %s, trace %s, VRAM budget %.2f GiB, prompt %lld + gen %lld, chunk %lld, seed %llu\n"
           "# re-schedule cost %.3g ms (%s)\n",
           o->arch.name, ats_recipe_name(o->cfg.recipe), o->hw_desc.name, o->trace_name,
           (double)o->cfg.vram_budget_bytes / (1 << 30), (long long)o->cfg.prompt_tok, (long long)o->cfg.gen_tok,
           (long long)o->cfg.chunk_tok, (unsigned long long)o->cfg.seed, 1e3 * o->resched_s, o->resched_src);
    for (int i = 0; i < n_pol; i++)
        if (strcmp(pol[i], "ats-paper") == 0 && o->resched_paper_s != o->resched_s)
            printf("# re-schedule cost of ats-paper %.3g ms (%s)\n", 1e3 * o->resched_paper_s, o->resched_paper_src);
    fputs(na_note, stdout);
}

/* --out: one run per policy that finished, through common/results; ATS_EXIT_OK or ATS_EXIT_FAIL */
static int write_results(const char *out_path, const sim_cli *o, const char *cfg_json, const char *pol[32], int n_pol,
                         const double *rcost, const sim_session_result *res, const enum ats_status *st)
{
    ats_err err = {{0}};
    atsc_results_meta meta = {"ats sim", cfg_json, o->cfg.seed, o->arch.name, o->hw_desc.name, o->trace_name};
    atsc_results *w = NULL;
    enum ats_status s2 = atsc_results_open(out_path, &meta, &w, &err);
    for (int i = 0; i < n_pol && s2 == ATS_OK; i++) {
        if (st[i] != ATS_OK) continue;
        char run_cfg[320];
        snprintf(run_cfg, sizeof run_cfg,
                 "{\"policy\": \"%s\", \"resched_cost_s\": %.9g, \"resident_bytes\": %llu, \"temp_bytes\": %llu, "
                 "\"events\": %llu}", pol[i], rcost[i],
                 (unsigned long long)res[i].resident_bytes, (unsigned long long)res[i].temp_bytes,
                 (unsigned long long)res[i].events);
        s2 = atsc_results_begin_run(w, pol[i], pol[i], run_cfg, o->cfg.record_ops, &err);
        if (s2 == ATS_OK) s2 = atsc_results_append_rounds(w, res[i].rounds, res[i].n_rounds, &err);
        if (s2 == ATS_OK && o->cfg.record_ops) s2 = atsc_results_append_ops(w, res[i].ops, res[i].n_ops, &err);
    }
    if (s2 == ATS_OK) s2 = atsc_results_close(w, &err);
    else atsc_results_abort(w);
    if (s2 != ATS_OK) {
        ats_cli_error("sim", "%s", err.msg);
        return ATS_EXIT_FAIL;
    }
    return ATS_EXIT_OK;
}

int ats_cmd_sim(int argc, char **argv)
{
    sim_cli o;
    sim_cli_init(&o);
    sim_args A = {"all", NULL, NULL, SIM_FMT_TABLE, 1}, *a = &A;
    int rc = parse_args(argc, argv, &o, a);
    if (rc) return rc < 0 ? ATS_EXIT_OK : rc;
    const char *out_path = a->out_path, *tl_path = a->tl_path, *policy_arg = a->policy_arg;
    const sim_format fmt = a->fmt;
    const long long threads = a->threads;
    if ((rc = ats_cli_check_out("sim", "--out", out_path)) || (rc = ats_cli_check_out("sim", "--timeline", tl_path)))
        return rc; /* before any work (common/outfile) */
    /* policies */
    char pbuf[1024];
    const int all_pol = strcmp(policy_arg, "all") == 0;
    const char *pol[32];
    int n_pol = 0;
    if ((rc = parse_policies(policy_arg, all_pol, pbuf, pol, &n_pol))) return rc;
    if (out_path && tl_path && atsc_out_same_target(out_path, tl_path)) {
        ats_cli_error("sim", "--out and --timeline name the same file '%s' (give two paths)", out_path);
        return ATS_EXIT_USAGE;
    }
    if ((rc = sim_cli_load(&o, "sim"))) return rc;
    /* again now that the inputs (model, hw, trace, routing) are known: an output must not replace one */
    if ((rc = ats_cli_check_out("sim", "--out", out_path)) || (rc = ats_cli_check_out("sim", "--timeline", tl_path))) {
        sim_cli_free(&o);
        return rc;
    }
    char na_note[512];
    if ((rc = applicable_policies(&o, all_pol, pol, &n_pol, na_note))) {
        sim_cli_free(&o);
        return rc;
    }
    char cfg_json[4096];
    char plist[1024] = "";
    for (int i = 0; i < n_pol; i++) {
        strncat(plist, pol[i], sizeof plist - strlen(plist) - 2);
        if (i + 1 < n_pol) strcat(plist, ",");
    }
    sim_cli_config_json(&o, plist, cfg_json, sizeof cfg_json);

    atsc_timeline *tl = NULL;
    ats_err err = {{0}};
    if (tl_path && atsc_timeline_open(tl_path, cfg_json, &tl, &err) != ATS_OK) {
        ats_cli_error("sim", "%s", err.msg);
        sim_cli_free(&o);
        return ATS_EXIT_USAGE;
    }
    sim_session_result *res = calloc((size_t)n_pol, sizeof *res);
    enum ats_status *st = calloc((size_t)n_pol, sizeof *st);
    ats_err *errs = calloc((size_t)n_pol, sizeof *errs);
    double *frac = calloc((size_t)n_pol, sizeof *frac);
    progress_slot *slots = calloc((size_t)n_pol, sizeof *slots);
    if (!res || !st || !errs || !frac || !slots) {
        ats_cli_error("sim", "out of memory");
        rc = ATS_EXIT_FAIL;
        goto done;
    }
    progress_state ps = {n_pol, frac};
    double rcost[32];
    for (int i = 0; i < n_pol; i++) rcost[i] = sim_cli_resched_for(&o, pol[i], NULL);
    int nthr = tl ? 1 : (int)threads; /* a timeline handle is not thread-safe */
#pragma omp parallel for schedule(dynamic) num_threads(nthr)
    for (int i = 0; i < n_pol; i++) {
        sim_session_cfg cfg = o.cfg;
        cfg.policy = pol[i];
        cfg.resched_cost_s = rcost[i];
        cfg.timeline = tl;
        slots[i].ps = &ps;
        slots[i].i = i;
        cfg.progress = on_progress;
        cfg.progress_user = &slots[i];
        st[i] = sim_session_run(&o.arch, &o.hw_desc, o.tr ? &o.st : NULL, &cfg, &res[i], &errs[i]);
        if (st[i] != ATS_OK) frac[i] = 1.0;
    }
    sim_cli_progress("ats sim", 1.0, 1);
    /* policies that cannot run this model in this budget are reported and skipped */
    sim_session_result *ok = calloc((size_t)n_pol, sizeof *ok);
    int n_ok = 0;
    if (!ok) {
        ats_cli_error("sim", "out of memory");
        rc = ATS_EXIT_FAIL;
        goto done;
    }
    for (int i = 0; i < n_pol; i++) {
        if (st[i] == ATS_OK) {
            ok[n_ok++] = res[i];
        } else if (st[i] == ATS_EINFEASIBLE || st[i] == ATS_EINVAL) {
            fprintf(stderr, "ats sim: policy %s skipped: %s (%s)\n", pol[i], errs[i].msg, ats_status_str(st[i]));
            if (st[i] == ATS_EINVAL) rc = ATS_EXIT_USAGE;
        } else {
            fprintf(stderr, "ats sim: policy %s failed: %s (%s)\n", pol[i], errs[i].msg, ats_status_str(st[i]));
            rc = ATS_EXIT_FAIL;
        }
    }
    if (fmt == SIM_FMT_TABLE && n_ok > 0) print_header(&o, pol, n_pol, na_note); /* none ran: no empty table */
    if (n_ok > 0) sim_summary_print(stdout, ok, n_ok, fmt);
    for (int i = 0; i < n_ok; i++)
        if (ok[i].n_requests_done == 0) {
            ats_cli_error("sim", "policy %s: no request completed in %.3g s simulated (%zu rounds; a longer "
                          "--duration or trace?)", ok[i].policy, ok[i].sim_s, ok[i].n_rounds);
            if (rc == ATS_EXIT_OK) rc = ATS_EXIT_FAIL;
        }
    free(ok);
    if (n_ok == 0 && rc == ATS_EXIT_OK) rc = ATS_EXIT_USAGE;

    if (out_path && n_ok > 0) {
        int wrc = write_results(out_path, &o, cfg_json, pol, n_pol, rcost, res, st);
        if (wrc) rc = wrc;
    }
    if (tl) {
        if (atsc_timeline_close(tl, &err) != ATS_OK) {
            ats_cli_error("sim", "%s", err.msg);
            rc = ATS_EXIT_FAIL;
        }
        tl = NULL;
    }
done:
    if (tl) atsc_timeline_abort(tl);
    if (res)
        for (int i = 0; i < n_pol; i++) sim_session_result_free(&res[i]);
    free(res);
    free(st);
    free(errs);
    free(frac);
    free(slots);
    sim_cli_free(&o);
    return rc;
}
