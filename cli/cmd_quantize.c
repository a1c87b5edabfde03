/*
 * ats quantize IN.gguf OUT.gguf --type q8_0|q4_0|q4_k [--pure] — re-quantizes the matrices of a GGUF
 * (ex/quantize.h: the rules, the refusals of NaN / Inf and of values the target type cannot hold).
 * Here the flags, the checks of the paths (OUT checked before the work, never the input itself), one
 * stderr line per re-quantized tensor, and the notes at the end: the matrices per fallback and why, as
 * llama.cpp's quantize does; when nothing is re-quantized and no matrix has the asked type, why.
 * Exit 2 for a bad input (nothing written), 1 when the output cannot be written.
 * ats quantize --dummy-weights --model M [--quant R] [--seed S] OUT.gguf — writes the seeded random
 * weights `ats run --dummy-weights` builds (ex_model_write_dummy_gguf: the same bytes, streamed one
 * tensor at a time) with the metadata and a byte-level vocabulary that llama.cpp's loader needs, so
 * any GGUF runtime can be timed on the very same file.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atsc/model_json.h"

#include "cli.h"
#include "ex/model.h"
#include "ex/quantize.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: ats quantize IN.gguf OUT.gguf --type q8_0|q4_0|q4_k [--pure]\n"
               "       ats quantize --dummy-weights --model M [--quant R] [--seed S] OUT.gguf\n"
               "  --pure            also quantize the output head (default for 4-bit types: Q6_K, as llama.cpp;\n"
               "                    an output head already quantized keeps its type)\n"
               "  --dummy-weights   write the seeded random weights of model M (name or JSON) that\n"
               "                    `ats run --dummy-weights --model M --quant R --seed S` runs, as a GGUF file\n"
               "                    with a byte-level vocabulary of the model's vocab_size (for llama.cpp too)\n"
               "  --quant R         recipe: f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4 (default: the model's)\n"
               "  --seed S          weight seed (default 42, as ats run's)\n");
}

/* ", 31 Q4_K -> Q4_0 (row length not a multiple of 256), 1 output head kept as Q4_0 (...)" and a newline */
static void print_fallbacks(const ex_requant_kind *fb, int n_fb)
{
    for (int k = 0; k < n_fb; k++) {
        if (fb[k].kept) {
            fprintf(stderr, "%s %lld output head kept as %s (already quantized; --pure re-quantizes it)", k ? "," : "",
                    (long long)fb[k].n, ats_qtype_name(fb[k].got));
            continue;
        }
        int b1 = ats_qtype_block_elems(fb[k].asked), b2 = fb[k].got == ATS_Q_F16 ? 32 : 0;
        fprintf(stderr, "%s %lld %s%s -> %s (row length not a multiple of %d%s)", k ? "," : "", (long long)fb[k].n,
                ats_qtype_name(fb[k].asked), fb[k].asked == ATS_Q_Q6_K ? " (output head)" : "", ats_qtype_name(fb[k].got),
                b1, b2 && b2 != b1 ? " nor of 32" : "");
    }
    fputc('\n', stderr);
}

static int write_dummy(const char *model, const char *quant, long long seed, const char *out)
{
    char path[1024];
    ats_arch arch;
    ats_err err = {{0}};
    if (atsc_model_load(ats_cli_model_path(model, path, sizeof path), &arch, &err) != ATS_OK) {
        ats_cli_error("quantize", "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    ats_recipe r = arch.default_recipe;
    if (quant && ats_recipe_from_name(quant, &r) != ATS_OK) {
        ats_cli_error("quantize", "--quant '%s': unknown recipe (f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4)", quant);
        return ATS_EXIT_USAGE;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* progress on stderr when it is a terminal (ats_cli_progress) */
    enum ats_status st = ex_model_write_dummy_gguf(&arch, r, (uint64_t)seed, out, ats_cli_progress_bytes,
                                                   (void *)"quantize: writing dummy weights", &err);
    if (st != ATS_OK) {
        ats_cli_error("quantize", "%s", err.msg);
        return st == ATS_EINVAL && strstr(err.msg, "write failed") == NULL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct stat so;
    fprintf(stderr, "ats quantize: wrote %s: dummy weights of %s, recipe %s, seed %lld, %.3f GiB in %.1f s\n", out,
            arch.name, ats_recipe_name(r), seed, stat(out, &so) == 0 ? (double)so.st_size / 1073741824.0 : 0.0,
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return ATS_EXIT_OK;
}

static void on_tensor(void *ctx, const char *name, const int64_t ne[3], ats_qtype from, ats_qtype to)
{
    (void)ctx;
    fprintf(stderr, "ats quantize: %-28s [%lld, %lld, %lld] %s -> %s\n", name, (long long)ne[0], (long long)ne[1],
            (long long)ne[2], ats_qtype_name(from), ats_qtype_name(to));
}

/* the notes after a finished run */
static void print_report(const char *in, const char *out, const char *type_name, const ex_requant_report *r)
{
    fprintf(stderr, "ats quantize: %s -> %s: %lld of %lld tensors re-quantized, %.3f MiB -> %.3f MiB\n", in, out,
            (long long)r->n_changed, (long long)r->n_tensors, (double)r->bytes_in / 1048576.0,
            (double)r->bytes_out / 1048576.0);
    if (r->n_fell) { /* one line: e.g. "31 Q4_K -> Q4_0 (row length not a multiple of 256)" */
        fprintf(stderr, "ats quantize: note: %lld of %lld matrices fell back to another type:", (long long)r->n_fell,
                (long long)r->n_mat);
        print_fallbacks(r->fell, r->n_fell_kinds);
    }
    if (r->n_changed == 0 && r->n_mat > 0 && r->n_asked == 0) { /* say why the output has no matrix of --type */
        fprintf(stderr, "ats quantize: note: no tensor re-quantized: every matrix already has the type --type %s "
                        "gives it here:", type_name);
        print_fallbacks(r->same, r->n_same_kinds);
    } else if (r->n_head_kept) {
        int k = 0;
        while (!r->same[k].kept) k++;
        fprintf(stderr, "ats quantize: note:");
        print_fallbacks(&r->same[k], 1);
    }
}

int ats_cmd_quantize(int argc, char **argv)
{
    const char *type_name = NULL, *model = NULL, *quant = NULL;
    int pure = 0, dummy = 0;
    long long seed = 42;
    static const struct option opts[] = {{"type", required_argument, 0, 't'}, {"pure", no_argument, 0, 'P'},
                                         {"dummy-weights", no_argument, 0, 'D'}, {"model", required_argument, 0, 'm'},
                                         {"quant", required_argument, 0, 'Q'}, {"seed", required_argument, 0, 'S'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0; /* one line of our own per bad option */
    int c;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":t:h", opts, NULL)) != -1) {
        if (ats_cli_once_opt("quantize", &seen, opts, c, optarg)) return ATS_EXIT_USAGE; /* the last one won */
        if (c == 't') type_name = optarg;
        else if (c == 'P') pure = 1;
        else if (c == 'D') dummy = 1;
        else if (c == 'm') {
            if (ats_cli_file_value("quantize", "--model", optarg)) return ATS_EXIT_USAGE;
            model = optarg;
        } else if (c == 'Q') quant = optarg;
        else if (c == 'S') {
            if (ats_cli_parse_int(optarg, &seed) || seed < 0) {
                ats_cli_error("quantize", "--seed: bad value '%s' (an integer >= 0)", optarg);
                return ATS_EXIT_USAGE;
            }
        }
        else if (c == 'h') { usage(stdout); return ATS_EXIT_OK; }
        else if (c == ':') { ats_cli_missing_value("quantize", argv[optind - 1], optopt); return ATS_EXIT_USAGE; }
        else { ats_cli_bad_option("quantize", argv[optind - 1], optopt, opts); return ATS_EXIT_USAGE; }
    }
    if (dummy || model || quant) { /* --dummy-weights --model M [--quant R] [--seed S] OUT.gguf */
        if (!dummy || !model || type_name || pure || argc - optind != 1) {
            if (!dummy) ats_cli_error("quantize", "--model and --quant go with --dummy-weights (ats quantize --help)");
            else if (!model) ats_cli_error("quantize", "--dummy-weights needs --model NAME (ats quantize --help)");
            else if (type_name || pure) ats_cli_error("quantize", "--dummy-weights writes the recipe of --quant; --type and --pure are for IN.gguf");
            else ats_cli_error("quantize", "--dummy-weights needs one file argument, OUT.gguf, got %d (ats quantize --help)", argc - optind);
            return ATS_EXIT_USAGE;
        }
        if (ats_cli_check_out("quantize", "OUT", argv[optind])) return ATS_EXIT_USAGE; /* before the work */
        return write_dummy(model, quant, seed, argv[optind]);
    }
    if (argc - optind != 2 || !type_name) {
        if (argc - optind != 2)
            ats_cli_error("quantize", "needs IN.gguf and OUT.gguf, got %d file argument%s (ats quantize --help)",
                          argc - optind, argc - optind == 1 ? "" : "s");
        else
            ats_cli_error("quantize", "--type is required: q8_0, q4_0 or q4_k (ats quantize --help)");
        return ATS_EXIT_USAGE;
    }
    const char *in = argv[optind], *out = argv[optind + 1];
    ats_qtype qt;
    if (ats_qtype_from_name(type_name, &qt) != ATS_OK || (qt != ATS_Q_Q8_0 && qt != ATS_Q_Q4_0 && qt != ATS_Q_Q4_K)) {
        ats_cli_error("quantize", "--type '%s': expected q8_0, q4_0 or q4_k", type_name);
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_check_out("quantize", "OUT", out)) return ATS_EXIT_USAGE; /* before the work */
    {   /* the output must not be the input (also through ../, links or hard links): the rename
           would replace the original with its lossy re-quantization */
        struct stat si, so;
        if (stat(in, &si) == 0 && stat(out, &so) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            ats_cli_error("quantize", "OUT '%s' is the input file '%s' (write the result elsewhere)", out, in);
            return ATS_EXIT_USAGE;
        }
    }
    ats_err err = {{0}};
    ex_requant_opts o = ex_requant_opts_default();
    o.type = qt;
    o.pure = pure;
    o.on_tensor = on_tensor;
    ex_requant_report rep;
    enum ats_status st = ex_gguf_requantize(in, out, &o, &rep, &err);
    if (st != ATS_OK) {
        ats_cli_error("quantize", "%s", err.msg);
        return st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
    }
    print_report(in, out, type_name, &rep);
    return ATS_EXIT_OK;
}
