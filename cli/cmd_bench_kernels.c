/*
 * ats bench kernels — flags and checks of libats_bench's kernel benchmark (bench/kernels.h): decode
 * GEMV and prefill GEMM of every weight type on the GPU and the CPU against the measured HBM / DRAM
 * read ceilings, and the whole model on dummy weights. The tables go to stdout as they are measured,
 * one line per failure to stderr; --out FILE also writes the result file (the committed H200 figures:
 * experiments/kernels/README.md, with the JSON and text results beside it).
 */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "atsc/model_json.h"
#include "atsc/outfile.h"
#include "bench/kernels.h"
#include "cli.h"

/* The --model's architecture, loaded before any work, and --prompt + --decode against its context: one
 * line and -1 when either is bad (exit 2), so a typo is not found after minutes of kernel timing. */
static int model_check(const char *model, int prompt, int decode, ats_arch *a)
{
    char path[1024];
    ats_err err = {{0}};
    ats_cli_model_path(model, path, sizeof path);
    if (atsc_model_load(path, a, &err) != ATS_OK) {
        ats_cli_error("bench kernels", "--model %s: %s", model, err.msg);
        return -1;
    }
    long long ctx = a->n_ctx_max > 0 ? (long long)a->n_ctx_max : ATS_ARCH_MAX_CTX;
    if ((long long)prompt + decode > ctx) {
        ats_cli_error("bench kernels", "--prompt %d + --decode %d: %d tokens, longer than %s's context (%lld tokens)",
                      prompt, decode, prompt + decode, a->name, ctx);
        return -1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ats bench kernels [--threads N] [--reps N] [--tokens N] [--skip-cpu] [--skip-gpu]\n"
               "                         [--skip-model] [--model NAME] [--prompt N] [--decode N] [--out FILE]\n"
               "  decode GEMV per weight type at Qwen3-14B shapes vs measured HBM / DRAM read bandwidth,\n"
               "  CPU routed experts of one decode token (Qwen3-30B-A3B: 8 of 128, gate/up Q4_K, down Q6_K) vs DRAM,\n"
               "  prefill GEMM TFLOP/s vs cuBLAS (GPU) and GMAC/s (CPU, at most 2048 tokens: compute-bound, no ceiling),\n"
               "  whole-model (dummy Q4_K_M weights) prefill/decode tok/s on each backend vs bytes/bandwidth\n"
               "  floors (a CPU prefill chunk is compute-bound: far below its bandwidth floor).\n"
               "  Defaults: --threads 16 (1..1024) --reps 50 --tokens 512 --model qwen3-14b --prompt 256 --decode 16\n"
               "  --reps N: timed calls of each GEMV, CPU and GPU, the median reported (GPU prefill GEMM: N/2 + 3;\n"
               "  CPU prefill GEMM: 3); params in the JSON file say the counts used\n"
               "  --out FILE: also write the result file (JSON); --prompt + --decode at most the model's context\n"
               "  (--out, --model and that are checked before any work; --skip-cpu where the GPU part cannot run\n"
               "  is refused: nothing to run)\n"
               "  (the committed figures: experiments/kernels/README.md, with the JSON and text results beside\n"
               "  it)\n");
}

int ats_bench_kernels(int argc, char **argv)
{
    bench_kernels_opts o = bench_kernels_opts_default();
    const char *out = NULL, *model = "qwen3-14b";
    static const struct option lo[] = {{"threads", required_argument, 0, 't'}, {"reps", required_argument, 0, 'r'},
                                       {"tokens", required_argument, 0, 'n'},  {"skip-cpu", no_argument, 0, 'C'},
                                       {"skip-gpu", no_argument, 0, 'G'},      {"out", required_argument, 0, 'o'},
                                       {"skip-model", no_argument, 0, 'M'},    {"model", required_argument, 0, 'm'},
                                       {"prompt", required_argument, 0, 'p'},  {"decode", required_argument, 0, 'd'},
                                       {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    int c;
    long long v;
    optind = 1;
    opterr = 0; /* one line of our own per bad option */
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":t:r:n:o:m:p:d:h", lo, NULL)) != -1) {
        if (ats_cli_once_opt("bench kernels", &seen, lo, c, optarg)) return ATS_EXIT_USAGE;
        switch (c) {
        case 't':
            /* the rule of `ats run --threads` (cmd_run.c; also sim, record): 1 .. 1024. More asks libgomp
             * for threads it cannot create (99999 crashed in the DRAM probe) */
            if (ats_cli_parse_int(optarg, &v) || v < 1 || v > 1024) {
                ats_cli_error("bench kernels", "--threads: bad value '%s' (an integer 1..1024)", optarg);
                return ATS_EXIT_USAGE;
            }
            o.threads = (int)v;
            break;
        case 'r':
        case 'n':
        case 'p':
        case 'd':
            if (ats_cli_parse_int(optarg, &v) || v < 1 || v > 100000) {
                ats_cli_error("bench kernels", "--%s: '%s' is not a positive integer (1..100000)",
                              c == 'r' ? "reps" : c == 'n' ? "tokens" : c == 'p' ? "prompt" : "decode", optarg);
                return ATS_EXIT_USAGE;
            }
            if (c == 'r') o.reps = (int)v;
            else if (c == 'n') o.n_tok = (int)v;
            else if (c == 'p') o.prompt = (int)v;
            else o.decode = (int)v;
            break;
        case 'M': o.skip_model = 1; break;
        case 'm':
            if (ats_cli_file_value("bench kernels", "--model", optarg)) return ATS_EXIT_USAGE;
            model = optarg;
            break;
        case 'C': o.skip_cpu = 1; break;
        case 'G': o.skip_gpu = 1; break;
        case 'o':
            if (ats_cli_file_value("bench kernels", "--out", optarg)) return ATS_EXIT_USAGE;
            out = optarg;
            break;
        case 'h': usage(stdout); return ATS_EXIT_OK;
        case ':': ats_cli_missing_value("bench kernels", argv[optind - 1], optopt); return ATS_EXIT_USAGE;
        default: ats_cli_bad_option("bench kernels", argv[optind - 1], optopt, lo); return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error("bench kernels", "unexpected argument '%s' (ats bench kernels --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    /* before the work */
    if (ats_cli_check_json_out("bench kernels", "--out", out, "the result file (parameters, commit, machine, rows)"))
        return ATS_EXIT_USAGE;
    /* the whole-model part runs on the backends measured above it: with neither, nothing would run (it
     * built the dummy model's weights, ~25 s, for no row) */
    const char *no_gpu = o.skip_gpu ? NULL : bench_kernels_gpu_missing();
    if (o.skip_cpu && (o.skip_gpu || no_gpu)) {
        if (o.skip_gpu)
            ats_cli_error("bench kernels", "nothing to run: --skip-cpu and --skip-gpu (the whole model runs only on "
                                           "the backends measured)");
        else
            ats_cli_error("bench kernels", "nothing to run: --skip-cpu, and the GPU part cannot run: %s", no_gpu);
        return ATS_EXIT_USAGE;
    }
    ats_arch arch;
    if (!o.skip_model && model_check(model, o.prompt, o.decode, &arch)) return ATS_EXIT_USAGE; /* before the work too */
    o.arch = &arch;
    o.sink = ats_cli_bench_sink("bench kernels");
    json_t *doc = NULL;
    ats_err oerr = {{0}};
    enum ats_status st = bench_kernels_run(&o, &doc, &oerr);
    if (!doc) { /* bad options only: the parsing above should have refused them */
        ats_cli_error("bench kernels", "%s", oerr.msg);
        return ATS_EXIT_USAGE;
    }
    int rc = ats_cli_bench_write("bench kernels", out, doc, JSON_INDENT(1) | JSON_REAL_PRECISION(6), stderr);
    json_decref(doc);
    return rc ? rc : st != ATS_OK ? ATS_EXIT_FAIL : ATS_EXIT_OK;
}
