/*
 * cli/cmd_profile.c — `ats profile`: measures this machine for one model and writes a hardware profile
 * (bench/profile.h does the work; this file parses, loads the model, prints and writes):
 *   ats profile --model qwen3-14b --dummy-weights --threads 16 --hw h200-host --out h200-profile.json
 *   ats sim --hw h200-profile.json --model qwen3-14b --trace none
 */
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atsc/hw_json.h"
#include "atsc/model_json.h"
#include "bench/profile.h"
#include "cli.h"
#include "ex/model.h"

#define CMD "profile"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats profile --model M [--dummy-weights [--quant R]] [--threads N] [--hw BASE] [--out FILE]\n"
            "                   [--quick] [--skip-gpu] [--seed S]\n\n"
            "Measures this machine for model M and writes a hardware profile that `ats sim --hw FILE` and\n"
            "`ats run --policy P --hw FILE` load: the executor's per-op times on the CPU (at --threads) and on\n"
            "the GPU for a decode step and prefill chunks of 1..2048 tokens (the op table the cost model uses),\n"
            "DRAM read rate over thread counts, copy-engine H2D/D2H over 4 KiB..256 MiB, SM copy, both at once,\n"
            "GPU memory read rate, and CPU-read vs H2D interference. Figures not measured (peaks, overheads,\n"
            "efficiencies) come from BASE. Each figure is printed against BASE's. Progress on a terminal only.\n\n"
            "  --model M          GGUF file, or with --dummy-weights a model name/JSON (models/M.json)\n"
            "  --dummy-weights    seeded random weights of the model's shapes and quantization\n"
            "  --quant R          recipe for --dummy-weights (default: the model's)\n"
            "  --threads N        CPU threads of the CPU op table and the DRAM probe (default: OpenMP's)\n"
            "  --hw BASE          base hardware description (sim/hw/BASE.json) or path [h200-host]\n"
            "  --out FILE         the profile (JSON) [profile.json]\n"
            "  --quick            token counts 1, 16, 64 and small buffers: seconds, rough figures\n"
            "  --skip-gpu         no GPU part (GPU figures from BASE, no GPU op table)\n"
            "  --seed S           dummy-weight seed (default 42)\n");
}

enum { O_DUMMY = 256, O_QUANT, O_QUICK, O_SKIP_GPU, O_SEED };

int ats_cmd_profile(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"dummy-weights", no_argument, 0, O_DUMMY},
        {"quant", required_argument, 0, O_QUANT}, {"threads", required_argument, 0, 't'},
        {"hw", required_argument, 0, 'w'},      {"out", required_argument, 0, 'o'},
        {"quick", no_argument, 0, O_QUICK},     {"skip-gpu", no_argument, 0, O_SKIP_GPU},
        {"seed", required_argument, 0, O_SEED}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *model = NULL, *quant = NULL, *hw = "h200-host", *out = "profile.json";
    long long threads = 0, seed = 42;
    int dummy = 0, quick = 0, skip_gpu = 0, c;
    ats_cli_seen seen = {0};
    optind = 1;
    opterr = 0; /* one line of our own per bad option */
    while ((c = getopt_long(argc, argv, ":m:t:w:o:h", opts, NULL)) != -1) {
        if (ats_cli_once_opt(CMD, &seen, opts, c, optarg)) return ATS_EXIT_USAGE;
        switch (c) {
        case 'm':
            if (ats_cli_file_value(CMD, "--model", optarg)) return ATS_EXIT_USAGE;
            model = optarg;
            break;
        case O_DUMMY: dummy = 1; break;
        case O_QUANT: quant = optarg; break;
        case 't':
            if (ats_cli_parse_int(optarg, &threads) || threads < 1 || threads > 1024) {
                ats_cli_error(CMD, "--threads: bad value '%.40s' (an integer 1..1024)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'w': hw = optarg; break;
        case 'o': out = optarg; break;
        case O_QUICK: quick = 1; break;
        case O_SKIP_GPU: skip_gpu = 1; break;
        case O_SEED:
            if (ats_cli_parse_int(optarg, &seed) || seed < 0) {
                ats_cli_error(CMD, "--seed: bad value '%.40s' (an integer >= 0)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return ATS_EXIT_OK;
        case ':': ats_cli_missing_value(CMD, argv[optind - 1], optopt); return ATS_EXIT_USAGE;
        default: ats_cli_bad_option(CMD, argv[optind - 1], optopt, opts); return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error(CMD, "unexpected argument '%.60s' (ats profile --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    if (!model) {
        ats_cli_error(CMD, "--model is required: a GGUF file, or a model name with --dummy-weights");
        return ATS_EXIT_USAGE;
    }
    if (quant && !dummy) {
        ats_cli_error(CMD, "--quant only applies to --dummy-weights (the GGUF file says its types)");
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_check_json_out(CMD, "--out", out, "the hardware profile")) return ATS_EXIT_USAGE;
    char hw_path[1024];
    ats_cli_hw_path(hw, hw_path, sizeof hw_path);
    ats_err err = {{0}};
    ats_hw base;
    if (atsc_hw_load(hw_path, &base, &err) != ATS_OK) {
        ats_cli_error(CMD, "--hw: %s", err.msg); /* the message names the file */
        return ATS_EXIT_USAGE;
    }
    /* the model */
    ex_model *m = NULL;
    char desc[1200];
    enum ats_status st;
    if (dummy) {
        char path[1024];
        ats_arch arch;
        if (atsc_model_load(ats_cli_model_path(model, path, sizeof path), &arch, &err) != ATS_OK) {
            ats_cli_error(CMD, "%s", err.msg);
            return ATS_EXIT_USAGE;
        }
        ats_recipe r = arch.default_recipe;
        if (quant && ats_recipe_from_name(quant, &r) != ATS_OK) {
            ats_cli_error(CMD, "--quant '%s': unknown recipe (f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4)", quant);
            return ATS_EXIT_USAGE;
        }
        snprintf(desc, sizeof desc, "%s --dummy-weights %s", arch.name, ats_recipe_name(r));
        st = ex_model_new_dummy_progress(&arch, r, (uint64_t)seed, ats_cli_progress_bytes,
                                         (void *)"profile: building dummy weights", &m, &err);
    } else {
        const char *base_name = strrchr(model, '/');
        snprintf(desc, sizeof desc, "%s", base_name ? base_name + 1 : model);
        st = ex_model_load_gguf(model, &m, &err);
    }
    if (st != ATS_OK) {
        ats_cli_error(CMD, "%s", err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    bench_profile_opts o = bench_profile_opts_default();
    o.model = m;
    o.model_desc = desc;
    o.base_path = hw_path;
    o.threads = threads > 0 ? (int)threads : omp_get_max_threads();
    o.quick = quick;
    o.skip_gpu = skip_gpu;
    o.sink = ats_cli_bench_sink(CMD);
    json_t *doc = NULL;
    st = bench_profile_run(&o, &doc, &err);
    ats_cli_progress_end();
    ex_model_free(m);
    if (st != ATS_OK) {
        json_decref(doc);
        ats_cli_error(CMD, "%s", err.msg);
        return st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
    }
    { /* the profile's name: its file's stem (h200-host-profile.json -> h200-host-profile), not the base's */
        const char *b = strrchr(out, '/');
        b = b ? b + 1 : out;
        char name[256];
        snprintf(name, sizeof name, "%s", b);
        char *dot = strrchr(name, '.');
        if (dot && dot != name) *dot = 0;
        json_object_set_new(doc, "name", json_string(name));
    }
    int rc = ats_cli_bench_write(CMD, out, doc, JSON_INDENT(2), NULL);
    json_decref(doc);
    if (rc != ATS_EXIT_OK) return rc;
    ats_hw back; /* what the simulator will read: refused here rather than there */
    if (atsc_hw_load(out, &back, &err) != ATS_OK) {
        ats_cli_error(CMD, "the profile written does not load (removed): %s", err.msg);
        unlink(out);
        return ATS_EXIT_FAIL;
    }
    fflush(stdout);
    printf("\nwrote %s (%d op-table entries); use it with: ats sim --hw %s ...\n", out, (int)back.op_table.n, out);
    return ATS_EXIT_OK;
}
