/*
 * ats bench sched — flags and printing of libats_bench's scheduling benchmark (bench/sched.h): wall time
 * of static placement, the dynamic-transfer DPs and plan building for decode rounds of Qwen3-14B,
 * Qwen3-30B-A3B and Llama-3.1-70B, next to the paper's figures for Qwen3-14B (§4.4.3: DP ≈ 9 ms, graph
 * rebuild ≈ 7 ms). `--format json` prints
 * {"<model>": {"static_placement_us": …, "dynamic_transfer_us": …, "plan_build_us": …, "n_ops": …}, …};
 * --out FILE also writes the result document (every parameter, the commit, the machine, all figures).
 */
#include <sys/stat.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ats_version.h"
#include "atsc/hw_json.h"
#include "atsc/model_json.h"
#include "atsc/outfile.h"
#include "bench/sched.h"
#include "cli.h"

#define MAX_MODELS 16

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
            "Defaults: --hw rtx3060-laptop, --vram-budget 85%% of its VRAM (as ats sim), --models qwen3-14b,qwen3-30b-a3b,llama-3.1-70b.\n"
            "Prints a table (or JSON); --out FILE also writes the result file (the committed figures are\n"
            "experiments/sched-speed/bench-sched.json). Paper (Qwen3-14B, RTX 3060): DP ~9 ms, graph rebuild ~7 ms.\n");
}

typedef struct sched_args {
    const char *hw_name, *out;
    char models[512];
    uint64_t budget; /* 0: the hw's default (ats_cli_vram_default), as ats sim's */
    long long runs;
    int json;
} sched_args;

/* the flags into a; ATS_EXIT_OK, or the exit code (help printed: -1 for exit 0) */
static int parse_args(int argc, char **argv, sched_args *a)
{
    static const struct option opts[] = {{"hw", required_argument, 0, 'w'},    {"vram-budget", required_argument, 0, 'b'},
                                         {"models", required_argument, 0, 'm'}, {"runs", required_argument, 0, 'r'},
                                         {"format", required_argument, 0, 'f'}, {"out", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch;
    ats_cli_seen seen = {0};
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ats_cli_once_opt("bench sched", &seen, opts, ch, optarg)) return ATS_EXIT_USAGE; /* the last one won */
        switch (ch) {
        case 'w':
            if (ats_cli_file_value("bench sched", "--hw", optarg)) return ATS_EXIT_USAGE;
            a->hw_name = optarg;
            break;
        case 'b':
            if (ats_cli_parse_vram("bench sched", optarg, &a->budget)) return ATS_EXIT_USAGE;
            break;
        case 'm': snprintf(a->models, sizeof a->models, "%s", optarg); break;
        case 'r':
            if (ats_cli_parse_int(optarg, &a->runs) || a->runs < 1 || a->runs > 100000) {
                ats_cli_error("bench sched", "--runs: bad value '%s' (1..100000)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'f':
            if (strcmp(optarg, "json") == 0) a->json = 1;
            else if (strcmp(optarg, "text") == 0) a->json = 0;
            else {
                ats_cli_error("bench sched", "--format: '%s' (text or json)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'o':
            if (ats_cli_file_value("bench sched", "--out", optarg)) return ATS_EXIT_USAGE;
            a->out = optarg;
            break;
        case 'h': sched_usage(stdout); return -1;
        default: ats_cli_bad_option("bench sched", argv[optind - 1], optopt, opts); return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error("bench sched", "unexpected argument '%s' (ats bench sched --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    return ATS_EXIT_OK;
}

/* --models into model[] (pointers into buf); the count, or -1 after one error line */
static int split_models(char *buf, char *model[MAX_MODELS])
{
    int n = 0;
    /* the list first: an empty one would measure nothing and exit 0 */
    if (strspn(buf, ", \t") < strlen(buf) && ats_cli_list_has_empty(buf, ',')) { /* ',' alone: empty */
        ats_cli_error("bench sched", "--models: '%.60s' has an empty entry (names separated by single commas)", buf);
        return -1;
    }
    /* names separated by commas, spaces around them dropped (as --policy's): "a, b" */
    for (char *save = NULL, *m = strtok_r(buf, ", \t", &save); m; m = strtok_r(NULL, ", \t", &save)) {
        if (n == MAX_MODELS) {
            ats_cli_error("bench sched", "--models: more than %d models", MAX_MODELS);
            return -1;
        }
        for (int k = 0; k < n; k++)
            if (strcmp(model[k], m) == 0 || same_model_file(model[k], m)) {
                ats_cli_error("bench sched", "--models: '%s' given twice (entries %d and %d%s)", m, k + 1, n + 1,
                              strcmp(model[k], m) ? ", the same file" : "");
                return -1;
            }
        model[n++] = m;
    }
    if (n == 0) {
        ats_cli_error("bench sched", "--models: empty list (give one or more names or paths, comma-separated, "
                                     "e.g. qwen3-14b)");
        return -1;
    }
    return n;
}

static void print_table(const bench_sched_opts *o, const bench_sched_fig *figs, int nf, const bench_machine *mc)
{
    printf("ats bench sched: decode at context %d, hw %s, VRAM budget %.2f GiB, medians of %d runs\n", (int)o->ctx,
           o->hw->name, (double)o->vram_budget_bytes / (1ull << 30), o->runs);
    printf("machine: %s (%s), commit %s\n\n", mc->host, mc->cpu, ATS_GIT_COMMIT);
    printf("%-15s %5s %6s %13s %13s %13s %11s %11s %9s %9s\n", "model", "ops", "promot", "placement_us", "dp_ats_us",
           "dp_paper_us", "plan_us", "graph_us", "static_ms", "ats_ms");
    for (int i = 0; i < nf; i++)
        printf("%-15s %5d %6d %13.1f %13.1f %13.1f %11.1f %11.1f %9.2f %9.2f\n", figs[i].model, (int)figs[i].n_ops,
               (int)figs[i].n_promotable, figs[i].place_us, figs[i].dyn_ats_us, figs[i].dyn_paper_us, figs[i].plan_us,
               figs[i].graph_us, figs[i].pred_static_ms, figs[i].pred_ats_ms);
    printf("\npaper (Qwen3-14B, RTX 3060, §4.4.3): dynamic-transfer DP ~9000 us, graph rebuild ~7000 us\n"
           "targets: Qwen3-14B dynamic DP + plan rebuild <= 100 us; static placement <= 50000 us\n");
}

static void print_json(const bench_sched_fig *figs, int nf)
{
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
}

int ats_bench_sched(int argc, char **argv)
{
    sched_args a = {"rtx3060-laptop", NULL, "qwen3-14b,qwen3-30b-a3b,llama-3.1-70b", 0, 201, 0};
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? ATS_EXIT_OK : rc;
    char *model[MAX_MODELS];
    int n_model = split_models(a.models, model);
    if (n_model < 0) return ATS_EXIT_USAGE;
    char path[1024];
    ats_hw hw;
    ats_err err = {{0}};
    if (ats_cli_check_json_out("bench sched", "--out", a.out, "the result file (parameters, commit, machine, figures)"))
        return ATS_EXIT_USAGE;
    if (atsc_hw_load(ats_cli_hw_path(a.hw_name, path, sizeof path), &hw, &err) != ATS_OK) {
        ats_cli_error("bench sched", "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_budget_for_hw("bench sched", &a.budget, hw.gpu_vram_bytes, hw.name, path)) return ATS_EXIT_USAGE;
    bench_sched_opts o = bench_sched_opts_default();
    o.hw = &hw;
    o.vram_budget_bytes = a.budget;
    o.runs = (int)a.runs;
    bench_sched_fig figs[MAX_MODELS];
    for (int i = 0; i < n_model; i++) {
        ats_arch arch;
        if (atsc_model_load(ats_cli_model_path(model[i], path, sizeof path), &arch, &err) != ATS_OK) {
            ats_cli_error("bench sched", "%s", err.msg);
            return ATS_EXIT_USAGE;
        }
        enum ats_status st = bench_sched_model(&o, &arch, model[i], &figs[i], &err);
        if (st != ATS_OK) {
            ats_cli_error("bench sched", "%s", err.msg);
            return st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
        }
    }
    bench_machine mc;
    bench_machine_get(&mc);
    if (a.json) print_json(figs, n_model);
    else print_table(&o, figs, n_model, &mc);
    if (!a.out) return ATS_EXIT_OK;
    json_t *doc = bench_sched_json(&o, figs, n_model, &mc);
    rc = ats_cli_bench_write("bench sched", a.out, doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6),
                             NULL);
    json_decref(doc);
    if (rc == ATS_EXIT_OK) fprintf(a.json ? stderr : stdout, "result file: %s\n", a.out);
    return rc;
}
