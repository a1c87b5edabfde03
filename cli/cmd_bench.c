/*
 * ats bench <what> — benchmark programs (STYLE.md: benchmarks are programs, not timed tests).
 * A table of {name, fn}: `sched` lives here; `sim` (cli/bench_sim.c) and `kernels`
 * (cli/bench_kernels.c) are declared in cli.h.
 *
 * ats bench sched: wall time (median of many runs, this machine) of static placement (Algorithm 1
 * DP), the dynamic-transfer DPs (`ats` model A and `ats-paper` Algorithm 2) and plan building for
 * decode rounds of Qwen3-14B, Qwen3-30B-A3B and Llama-3.1-70B, next to the paper's figures for
 * Qwen3-14B (§4.4.3: DP ≈ 9 ms, graph rebuild ≈ 7 ms). `--format json` prints
 * {"<model>": {"static_placement_us": …, "dynamic_transfer_us": …, "plan_build_us": …, "n_ops": …}, …}
 * and the result file (--out, default ./bench-sched.json; never the committed experiments/bench/ one
 * unless asked) holds every parameter, the commit, the machine and all figures; the path is checked
 * before the work and written through common/outfile (temporary, fsync, rename).
 */
#include <sys/stat.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ats/costs.h"
#include "ats/graph.h"
#include "ats/placement.h"
#include "ats/plan.h"
#include "ats/policy.h"
#include "ats/transfer.h"
#include "ats_version.h"
#include "atsc/hw_json.h"
#include "atsc/model_json.h"
#include "atsc/outfile.h"
#include "cli.h"



typedef struct bench_entry {
    const char *name;
    ats_cmd_fn fn;
    const char *summary;
} bench_entry;

static const bench_entry BENCHES[] = {
    {"sched", ats_bench_sched, "placement DP, dynamic-transfer DPs and plan building (wall time)"},
    {"sim", ats_bench_sim, "simulator events/s, 10-minute replay, eps x tau sweep"},
    {"kernels", ats_bench_kernels, "CPU and GPU kernels against the measured ceilings"},
    {"model", ats_bench_model, "whole models: tokens/s of prompts and decode steps (llama-bench's form)"},
};
#define N_BENCHES (sizeof BENCHES / sizeof BENCHES[0])

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: ats bench <what> [options]    (ats bench <what> --help)\n\n");
    for (size_t i = 0; i < N_BENCHES; i++) fprintf(f, "  %-8s %s\n", BENCHES[i].name, BENCHES[i].summary);
    fprintf(f, "\nEach prints a table and writes its result file to --out (default ./bench-<what>.json in the\n"
               "current directory); the committed figures in experiments/bench/ change only when --out names them.\n");
}

int ats_cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        bench_usage(stderr);
        return ATS_EXIT_USAGE;
    }
    char *help_buf[4]; /* `ats bench help sched`, `ats bench sim help`: that benchmark's usage */
    ats_cli_help_words(argc, &argv, help_buf);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        bench_usage(stdout);
        return ATS_EXIT_OK;
    }
    for (size_t i = 0; i < N_BENCHES; i++)
        if (strcmp(argv[1], BENCHES[i].name) == 0) return BENCHES[i].fn(argc - 1, argv + 1);
    char names[128] = "";
    for (size_t i = 0; i < N_BENCHES; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", BENCHES[i].name);
    ats_cli_error("bench", "unknown benchmark '%s' (%s; ats bench --help)", argv[1], names);
    return ATS_EXIT_USAGE;
}

/* ---- ats bench sched ---------------------------------------------------------------------- */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct sched_fig {
    char model[64];
    int32_t n_ops, n_promotable, n_promoted_ats, n_promoted_paper;
    double place_us, dyn_ats_us, dyn_paper_us, plan_us, graph_us;
    double pred_static_ms, pred_ats_ms;
    int runs_place, runs_dyn, runs_plan;
} sched_fig;

/* 1 when model names or paths a and b resolve to one file (qwen3-14b and models/qwen3-14b.json) */
static int same_model_file(const char *a, const char *b)
{
    char pa[1024], pb[1024];
    struct stat sa, sb;
    return stat(ats_cli_model_path(a, pa, sizeof pa), &sa) == 0 &&
           stat(ats_cli_model_path(b, pb, sizeof pb), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void sched_usage(FILE *f)
{
    fprintf(f,
            "usage: ats bench sched [--hw H] [--vram-budget B] [--models a,b,c] [--runs N] [--format text|json]\n"
            "                       [--out FILE]\n\n"
            "Times the scheduling code on this machine for decode rounds (context 2048): static placement\n"
            "(Algorithm 1 DP at 1 MiB), the dynamic-transfer DPs (ats = model A, ats-paper = Algorithm 2)\n"
            "and plan building; medians of --runs runs (default 201; placement: runs/10, at least 11).\n"
            "Defaults: --hw rtx3060-laptop, --vram-budget 85%% of its VRAM (as ats sim), --models qwen3-14b,qwen3-30b-a3b,llama-3.1-70b,\n"
            "--out ./bench-sched.json (the committed figures are experiments/bench/bench-sched.json). Paper (Qwen3-14B, RTX 3060): DP ~9 ms, graph rebuild ~7 ms.\n");
}

static int bench_one(const char *model, const ats_hw *hw, uint64_t budget, int runs, sched_fig *f)
{
    char path[1024];
    ats_arch arch;
    ats_err err = {{0}};
    if (atsc_model_load(ats_cli_model_path(model, path, sizeof path), &arch, &err) != ATS_OK) {
        ats_cli_error("bench sched", "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    memset(f, 0, sizeof *f);
    snprintf(f->model, sizeof f->model, "%s", model);
    ats_graph_opts go = ats_graph_opts_default();
    go.recipe = arch.default_recipe;
    go.phase.kind = ATS_PHASE_DECODE;
    go.phase.n_tokens = 1;
    go.phase.ctx_pos = 2047;
    go.n_ctx = 2048;
    ats_graph *g = NULL;
    int rc = ATS_EXIT_FAIL;
    double *t = malloc((size_t)(runs > 11 ? runs : 11) * sizeof *t);
    ats_costs c;
    ats_placement pl;
    ats_assignment a;
    ats_plan plan;
    ats_policy *pol = NULL;
    memset(&c, 0, sizeof c);
    memset(&pl, 0, sizeof pl);
    memset(&a, 0, sizeof a);
    ats_plan_init(&plan);
    int gruns = runs / 10 > 11 ? runs / 10 : 11;
    for (int r = 0; r < gruns; r++) {
        int64_t t0 = now_ns();
        if (ats_graph_build(&arch, &go, &g, &err) != ATS_OK) {
            ats_cli_error("bench sched", "%s: %s", model, err.msg);
            rc = ATS_EXIT_USAGE;
            goto done;
        }
        t[r] = (double)(now_ns() - t0) * 1e-3;
        if (r + 1 < gruns) ats_graph_free(g);
    }
    f->graph_us = median(t, gruns);
    f->n_ops = g->n_ops;
    if (ats_costs_init(&c, g->n_ops) || ats_placement_init(&pl, g->n_ops) || ats_assignment_init(&a, g->n_ops)) goto done;
    if (ats_costs_from_model(g, hw, &c, &err)) {
        ats_cli_error("bench sched", "%s", err.msg);
        goto done;
    }
    ats_policy_cfg cfg = ats_policy_cfg_default();
    cfg.vram_budget_bytes = budget;
    cfg.hostmem_cpu_factor = hw->hostmem_cpu_factor;
    if (ats_policy_new("ats", &cfg, &pol, &err) || ats_policy_place(pol, g, &c, &pl, &err)) {
        ats_cli_error("bench sched", "%s: %s", model, err.msg);
        goto done;
    }
    uint64_t temp = ats_policy_temp_bytes(pol);
    if (temp == 0) temp = budget / 8; /* time the DPs with a non-empty temp ring even if ats chose 0 */
    uint64_t resident_budget = budget - temp;
    /* static placement (the DP alone, as Algorithm 1) */
    ats_placement_opts po = ats_placement_opts_default();
    f->runs_place = gruns;
    for (int r = 0; r < gruns; r++) {
        int64_t t0 = now_ns();
        if (ats_place_static(g, &c, resident_budget, &po, &pl, &err)) {
            ats_cli_error("bench sched", "%s: %s", model, err.msg);
            goto done;
        }
        t[r] = (double)(now_ns() - t0) * 1e-3;
    }
    f->place_us = median(t, gruns);
    ats_transfer_opts to = ats_transfer_opts_default();
    to.temp_bytes = temp;
    to.hostmem_cpu_factor = hw->hostmem_cpu_factor;
    for (int32_t i = 0; i < g->n_ops; i++) f->n_promotable += ats_op_promotable(g, &pl, &to, i);
    f->runs_dyn = f->runs_plan = runs;
    for (int r = 0; r < runs; r++) {
        int64_t t0 = now_ns();
        if (ats_transfer_paper(g, &pl, &c, &to, &a, &err)) goto dp_fail;
        t[r] = (double)(now_ns() - t0) * 1e-3;
    }
    f->dyn_paper_us = median(t, runs);
    f->n_promoted_paper = a.n_promoted;
    for (int r = 0; r < runs; r++) {
        int64_t t0 = now_ns();
        if (ats_transfer_ats(g, &pl, &c, &to, &a, &err)) goto dp_fail;
        t[r] = (double)(now_ns() - t0) * 1e-3;
    }
    f->dyn_ats_us = median(t, runs);
    f->n_promoted_ats = a.n_promoted;
    f->pred_ats_ms = a.predicted_s * 1e3;
    ats_plan_opts plo = ats_plan_opts_default();
    plo.temp_bytes = temp;
    plo.double_buffer = 1;
    for (int r = 0; r < runs; r++) {
        int64_t t0 = now_ns();
        if (ats_plan_build(g, &pl, &a, &c, &plo, &plan, &err)) goto dp_fail;
        t[r] = (double)(now_ns() - t0) * 1e-3;
    }
    f->plan_us = median(t, runs);
    ats_assignment_from_placement(&a, &pl);
    f->pred_static_ms = ats_transfer_ats_eval(g, &pl, &c, &to, a.backend) * 1e3;
    rc = ATS_EXIT_OK;
    goto done;
dp_fail:
    ats_cli_error("bench sched", "%s: %s", model, err.msg);
done:
    ats_policy_free(pol);
    ats_plan_free(&plan);
    if (a.backend) ats_assignment_free(&a);
    if (pl.backend) ats_placement_free(&pl);
    if (c.t_cpu) ats_costs_free(&c);
    ats_graph_free(g);
    free(t);
    return rc;
}

int ats_bench_sched(int argc, char **argv)
{
    static const struct option opts[] = {{"hw", required_argument, 0, 'w'},    {"vram-budget", required_argument, 0, 'b'},
                                         {"models", required_argument, 0, 'm'}, {"runs", required_argument, 0, 'r'},
                                         {"format", required_argument, 0, 'f'}, {"out", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *hw_name = "rtx3060-laptop", *out = "bench-sched.json";
    char models_buf[512] = "qwen3-14b,qwen3-30b-a3b,llama-3.1-70b";
    uint64_t budget = 0; /* 0: the hw's default (ats_cli_vram_default), as ats sim's */
    long long runs = 201;
    int json = 0;
    optind = 1;
    opterr = 0;
    int ch;
    ats_cli_seen seen = {0};
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ats_cli_once_opt("bench sched", &seen, opts, ch, optarg)) return ATS_EXIT_USAGE; /* the last one won */
        switch (ch) {
        case 'w':
            if (ats_cli_file_value("bench sched", "--hw", optarg)) return ATS_EXIT_USAGE;
            hw_name = optarg;
            break;
        case 'b':
            if (ats_cli_parse_vram("bench sched", optarg, &budget)) return ATS_EXIT_USAGE;
            break;
        case 'm': snprintf(models_buf, sizeof models_buf, "%s", optarg); break;
        case 'r':
            if (ats_cli_parse_int(optarg, &runs) || runs < 1 || runs > 100000) {
                ats_cli_error("bench sched", "--runs: bad value '%s' (1..100000)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'f':
            if (strcmp(optarg, "json") == 0) json = 1;
            else if (strcmp(optarg, "text") == 0) json = 0;
            else {
                ats_cli_error("bench sched", "--format: '%s' (text or json)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'o':
            if (ats_cli_file_value("bench sched", "--out", optarg)) return ATS_EXIT_USAGE;
            out = optarg;
            break;
        case 'h': sched_usage(stdout); return ATS_EXIT_OK;
        default: ats_cli_bad_option("bench sched", argv[optind - 1], optopt, opts); return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error("bench sched", "unexpected argument '%s' (ats bench sched --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    /* the list first: an empty one would measure nothing and exit 0 */
    char *model[16];
    int n_model = 0;
    if (strspn(models_buf, ", \t") < strlen(models_buf) && ats_cli_list_has_empty(models_buf, ',')) { /* ',' alone: empty */
        ats_cli_error("bench sched", "--models: '%.60s' has an empty entry (names separated by single commas)",
                      models_buf);
        return ATS_EXIT_USAGE;
    }
    /* names separated by commas, spaces around them dropped (as --policy's): "a, b" */
    for (char *save = NULL, *m = strtok_r(models_buf, ", \t", &save); m; m = strtok_r(NULL, ", \t", &save)) {
        if (n_model == 16) {
            ats_cli_error("bench sched", "--models: more than 16 models");
            return ATS_EXIT_USAGE;
        }
        for (int k = 0; k < n_model; k++)
            if (strcmp(model[k], m) == 0 || same_model_file(model[k], m)) {
                ats_cli_error("bench sched", "--models: '%s' given twice (entries %d and %d%s)", m, k + 1, n_model + 1,
                              strcmp(model[k], m) ? ", the same file" : "");
                return ATS_EXIT_USAGE;
            }
        model[n_model++] = m;
    }
    if (n_model == 0) {
        ats_cli_error("bench sched", "--models: empty list (give one or more names or paths, comma-separated, "
                                     "e.g. qwen3-14b)");
        return ATS_EXIT_USAGE;
    }
    char path[1024];
    ats_hw hw;
    ats_err err = {{0}};
    if (atsc_out_check(out, &err) != ATS_OK) {
        ats_cli_error("bench sched", "--out: %s", err.msg);
        return ATS_EXIT_USAGE;
    }
    if (atsc_hw_load(ats_cli_hw_path(hw_name, path, sizeof path), &hw, &err) != ATS_OK) {
        ats_cli_error("bench sched", "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_budget_for_hw("bench sched", &budget, hw.gpu_vram_bytes, hw.name, path)) return ATS_EXIT_USAGE;
    sched_fig figs[16];
    int nf = 0;
    for (int i = 0; i < n_model; i++) {
        int rc = bench_one(model[i], &hw, budget, (int)runs, &figs[nf]);
        if (rc) return rc;
        nf++;
    }
    char host[256] = "?";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    char cpu[256] = "?";
    FILE *ci = fopen("/proc/cpuinfo", "r");
    if (ci) {
        char line[512];
        while (fgets(line, sizeof line, ci))
            if (strncmp(line, "model name", 10) == 0) {
                char *p = strchr(line, ':');
                if (p) {
                    snprintf(cpu, sizeof cpu, "%s", p + 2);
                    cpu[strcspn(cpu, "\n")] = 0;
                }
                break;
            }
        fclose(ci);
    }
    if (json) {
        json_t *o = json_object();
        for (int i = 0; i < nf; i++) {
            json_t *m = json_object();
            json_object_set_new(m, "static_placement_us", json_real(figs[i].place_us));
            json_object_set_new(m, "dynamic_transfer_us", json_real(figs[i].dyn_ats_us));
            json_object_set_new(m, "plan_build_us", json_real(figs[i].plan_us));
            json_object_set_new(m, "n_ops", json_integer(figs[i].n_ops));
            json_object_set_new(o, figs[i].model, m);
        }
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        printf("ats bench sched: decode at context 2048, hw %s, VRAM budget %.2f GiB, medians of %lld runs\n", hw.name,
               (double)budget / (1ull << 30), runs);
        printf("machine: %s (%s), commit %s\n\n", host, cpu, ATS_GIT_COMMIT);
        printf("%-15s %5s %6s %13s %13s %13s %11s %11s %9s %9s\n", "model", "ops", "promot", "placement_us",
               "dp_ats_us", "dp_paper_us", "plan_us", "graph_us", "static_ms", "ats_ms");
        for (int i = 0; i < nf; i++)
            printf("%-15s %5d %6d %13.1f %13.1f %13.1f %11.1f %11.1f %9.2f %9.2f\n", figs[i].model, (int)figs[i].n_ops,
                   (int)figs[i].n_promotable, figs[i].place_us, figs[i].dyn_ats_us, figs[i].dyn_paper_us,
                   figs[i].plan_us, figs[i].graph_us, figs[i].pred_static_ms, figs[i].pred_ats_ms);
        printf("\npaper (Qwen3-14B, RTX 3060, §4.4.3): dynamic-transfer DP ~9000 us, graph rebuild ~7000 us\n"
               "targets (issue 3): Qwen3-14B dynamic DP + plan rebuild <= 100 us; static placement <= 50000 us\n");
    }
    /* result file */
    json_t *root = json_object();
    json_object_set_new(root, "benchmark", json_string("ats bench sched"));
    json_object_set_new(root, "version", json_string(ATS_VERSION_STRING));
    json_object_set_new(root, "commit", json_string(ATS_GIT_COMMIT));
    json_object_set_new(root, "machine", json_string(host));
    json_object_set_new(root, "cpu", json_string(cpu));
    json_t *par = json_object();
    json_object_set_new(par, "hw", json_string(hw.name));
    json_object_set_new(par, "vram_budget_bytes", json_integer((json_int_t)budget));
    json_object_set_new(par, "phase", json_string("decode"));
    json_object_set_new(par, "ctx", json_integer(2048));
    json_object_set_new(par, "quantum_bytes", json_integer(1 << 20));
    json_object_set_new(par, "runs", json_integer(runs));
    json_object_set_new(par, "statistic", json_string("median wall time, CLOCK_MONOTONIC, one thread"));
    json_object_set_new(root, "parameters", par);
    json_t *pap = json_object();
    json_object_set_new(pap, "model", json_string("qwen3-14b"));
    json_object_set_new(pap, "dynamic_transfer_us", json_real(9000));
    json_object_set_new(pap, "graph_rebuild_us", json_real(7000));
    json_object_set_new(pap, "source", json_string("ATSInfer 2026, §4.4.3 (RTX 3060)"));
    json_object_set_new(root, "paper", pap);
    json_t *res = json_object();
    for (int i = 0; i < nf; i++) {
        json_t *m = json_object();
        json_object_set_new(m, "static_placement_us", json_real(figs[i].place_us));
        json_object_set_new(m, "dynamic_transfer_us", json_real(figs[i].dyn_ats_us));
        json_object_set_new(m, "dynamic_transfer_paper_us", json_real(figs[i].dyn_paper_us));
        json_object_set_new(m, "plan_build_us", json_real(figs[i].plan_us));
        json_object_set_new(m, "graph_build_us", json_real(figs[i].graph_us));
        json_object_set_new(m, "n_ops", json_integer(figs[i].n_ops));
        json_object_set_new(m, "n_promotable", json_integer(figs[i].n_promotable));
        json_object_set_new(m, "n_promoted_ats", json_integer(figs[i].n_promoted_ats));
        json_object_set_new(m, "n_promoted_paper", json_integer(figs[i].n_promoted_paper));
        json_object_set_new(m, "predicted_static_ms", json_real(figs[i].pred_static_ms));
        json_object_set_new(m, "predicted_ats_ms", json_real(figs[i].pred_ats_ms));
        json_object_set_new(res, figs[i].model, m);
    }
    json_object_set_new(root, "results", res);
    enum ats_status wst =
        atsc_out_write_json(out, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6), &err);
    json_decref(root);
    if (wst != ATS_OK) {
        ats_cli_error("bench sched", "cannot write the result file: %s", err.msg);
        return ATS_EXIT_FAIL;
    }
    if (!json) printf("result file: %s\n", out);
    else fprintf(stderr, "result file: %s\n", out);
    return ATS_EXIT_OK;
}
