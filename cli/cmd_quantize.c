/*
 * ats quantize IN.gguf OUT.gguf --type q8_0|q4_0|q4_k [--pure] — re-quantizes the matrices of a GGUF.
 * ats quantize --dummy-weights --model M [--quant R] [--seed S] OUT.gguf — writes the seeded random
 * weights `ats run --dummy-weights` builds (ex_model_write_dummy_gguf: the same bytes, streamed one
 * tensor at a time) with the metadata and a byte-level vocabulary that llama.cpp's loader needs, so
 * any GGUF runtime can be timed on the very same file.
 * 2-D and 3-D weight tensors become the requested type (with ats_qtype_fallback when a row does not
 * divide into its blocks: Q4_K → Q4_0 → F16, Q8_0 → F16; one stderr note at the end counts the
 * matrices per fallback and says why, as llama.cpp's quantize does); 1-D tensors (norms) stay as they are.
 * As llama.cpp does, the output head (output.weight, or token_embd.weight when the head is tied to
 * it) gets Q6_K (fallback Q8_0) for the 4-bit types; --pure quantizes it like every other matrix
 * (llama.cpp's --pure). A matrix whose type already is the one this run gives it is copied; another
 * type, quantized or not, is dequantized and re-quantized (llama.cpp refuses a quantized source unless
 * --allow-requantize), except that an already-quantized output head keeps its type (its Q6_K/Q8_0
 * would not win back the precision lost, only grow the file). When nothing is re-quantized and no
 * matrix has the asked type, one note says why (the fallbacks, the kept head). A source tensor
 * holding NaN or Inf is refused (exit 2, nothing written, naming tensor, row and element as `ats run
 * --check-tensors`: ex_tensor_check_finite), since the quantizers would hide it; a copied tensor is
 * scanned whole, a re-quantized one row by row as it is dequantized (one pass over the source).
 * A finite value the target type cannot hold (a block whose scale overflows F16's 65504,
 * e.g. 1e30 in Q8_0; a value past 65504 in a matrix written as F16) is refused too (exit 2, nothing
 * written, naming tensor, row, element, value and type): each quantized row is read back and checked.
 * All metadata is copied, general.file_type is rewritten. Output goes to
 * OUT.tmp.PID (checked before the work; fsync, rename; removed on Ctrl-C: common/outfile), then is renamed.
 */
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atsc/model_json.h"

#include "cli.h"
#include "ex/gguf.h"
#include "ex/model.h"
#include "ex/quant.h"

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

/* llama.cpp's LLAMA_FTYPE values for general.file_type */
static uint32_t file_type_of(ats_qtype t)
{
    switch (t) {
    case ATS_Q_Q8_0: return 7;
    case ATS_Q_Q4_0: return 2;
    case ATS_Q_Q4_K: return 15; /* MOSTLY_Q4_K_M is 15; plain Q4_K everywhere is our recipe */
    default: return 0;
    }
}

/* (asked, got) -> count of matrices, for the notes at the end; kept: an already-quantized output head
   left as it is (got = its type) */
struct fallback { ats_qtype asked, got; int kept; int64_t n; };

static void add_fallback(struct fallback *fb, int *n_fb, ats_qtype asked, ats_qtype got, int kept)
{
    int k = 0;
    while (k < *n_fb && !(fb[k].asked == asked && fb[k].got == got && fb[k].kept == kept)) k++;
    if (k == *n_fb && *n_fb < 8) fb[(*n_fb)++] = (struct fallback){asked, got, kept, 0};
    if (k < *n_fb) fb[k].n++;
}

/* ", 31 Q4_K -> Q4_0 (row length not a multiple of 256), 1 output head kept as Q4_0 (...)" and a newline */
static void print_fallbacks(const struct fallback *fb, int n_fb)
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

static int is_quantized(ats_qtype t) { return t != ATS_Q_F32 && t != ATS_Q_F16 && t != ATS_Q_BF16; }

/* ATS_EXIT_OK, or (one line naming the tensor, row and element in `ats run --check-tensors`' words:
   ex_tensor_check_finite) ATS_EXIT_USAGE when source tensor t of file `in` holds NaN or Inf */
static int refuse_non_finite(const char *in, const ex_gguf_tensor *t)
{
    ex_tensor x = {t->type, {t->ne[0], t->ne[1], t->ne[2] * t->ne[3]}, 0, t->data};
    ats_qtype_bytes(t->type, t->ne[0], &x.row_bytes);
    ats_err err = {{0}};
    enum ats_status st = ex_tensor_check_finite(t->name, &x, omp_get_max_threads(), &err);
    if (st == ATS_OK) return ATS_EXIT_OK;
    ats_cli_error("quantize", "%s: %s (nothing written)", in, err.msg);
    return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
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
    ex_gguf *g = NULL;
    enum ats_status st = ex_gguf_open(in, &g, &err);
    if (st != ATS_OK) {
        ats_cli_error("quantize", "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    int64_t nkv = ex_gguf_n_kv(g), nt = ex_gguf_n_tensors(g);
    const void **kv = calloc((size_t)nkv + 1, sizeof *kv);
    size_t *kvl = calloc((size_t)nkv + 1, sizeof *kvl);
    ex_gguf_out_tensor *ot = calloc((size_t)(nt ? nt : 1), sizeof *ot);
    uint8_t ftbuf[64];
    int rc = ATS_EXIT_OK;
    int64_t n_out_kv = 0, n_changed = 0;
    uint64_t bytes_in = 0, bytes_out = 0;
    if (!kv || !kvl || !ot) { rc = ATS_EXIT_FAIL; goto done; }
    for (int64_t i = 0; i < nkv; i++) {
        if (strcmp(ex_gguf_kv_key(g, i), "general.file_type") == 0) continue;
        ex_gguf_kv_raw(g, i, &kv[n_out_kv], &kvl[n_out_kv]);
        n_out_kv++;
    }
    kvl[n_out_kv] = ex_gguf_kv_u32(ftbuf, "general.file_type", file_type_of(qt));
    kv[n_out_kv++] = ftbuf;
    const char *head = ex_gguf_find_tensor(g, "output.weight") ? "output.weight" : "token_embd.weight";
    /* matrices whose rows do not divide into the asked type's blocks: (asked, got) -> count, for one note
       at the end, as llama.cpp's quantize reports its fallbacks */
    struct fallback fb[8], same[8]; /* changed by this run; left as they were */
    int n_fb = 0, n_same = 0;
    int64_t n_mat = 0, n_fell = 0, n_asked = 0, n_head_kept = 0;
    for (int64_t i = 0; i < nt; i++) {
        const ex_gguf_tensor *t = ex_gguf_tensor_at(g, i);
        ex_gguf_out_tensor *o = &ot[i];
        ats_qtype want = qt;
        const int head_rule = !pure && qt != ATS_Q_Q8_0 && strcmp(t->name, head) == 0;
        if (head_rule) want = ATS_Q_Q6_K;
        const ats_qtype asked = want;
        if (want == ATS_Q_Q6_K && t->ne[0] % 256 != 0) want = ATS_Q_Q8_0; /* llama.cpp's Q6_K fallback */
        o->name = t->name;
        o->n_dims = t->n_dims;
        memcpy(o->ne, t->ne, sizeof o->ne);
        o->type = t->type;
        o->data = t->data;
        o->bytes = t->bytes;
        bytes_in += t->bytes;
        ats_qtype target = t->n_dims >= 2 ? ats_qtype_fallback(want, t->ne[0]) : t->type;
        /* an already-quantized head stays as it is: its Q6_K/Q8_0 would not win back what its quantization
           lost, only grow the file (a Q4_0 --pure head became Q8_0) */
        const int head_kept = head_rule && t->n_dims >= 2 && is_quantized(t->type) && target != t->type;
        if (head_kept) target = t->type;
        if (t->n_dims >= 2) {
            n_mat++;
            n_asked += target == qt;
            if (head_kept) {
                add_fallback(same, &n_same, asked, target, 1);
                n_head_kept++;
            } else if (target != asked && target != t->type) { /* what this run changed: an F16 input stays F16 */
                add_fallback(fb, &n_fb, asked, target, 0);
                n_fell++;
            } else if (target != asked) {
                add_fallback(same, &n_same, asked, target, 0);
            }
        }
        /* a source holding NaN or Inf is refused: the quantizers would hide a NaN (the block max skips it)
           and write an Inf scale. A copied tensor is scanned whole; a re-quantized one row by row below,
           as each row is dequantized anyway (the scan then only words the message) */
        const int requant = target != t->type && t->n_dims >= 2;
        if (!requant && (rc = refuse_non_finite(in, t)) != ATS_EXIT_OK) goto done;
        if (requant) {
            int64_t rows = t->ne[1] * t->ne[2] * t->ne[3], n = t->ne[0];
            uint64_t rb_in, rb_out;
            ats_qtype_bytes(t->type, n, &rb_in);
            ats_qtype_bytes(target, n, &rb_out);
            uint8_t *buf = malloc((size_t)(rb_out * (uint64_t)rows));
            float *row = malloc((size_t)n * sizeof(float));
            float *back = malloc((size_t)n * sizeof(float));
            int64_t bad_row = -1, bad_col = 0;
            if (!buf || !row || !back) {
                free(buf);
                free(row);
                free(back);
                rc = ATS_EXIT_FAIL;
                goto done;
            }
            for (int64_t r = 0; r < rows && bad_row < 0; r++) {
                uint8_t *q = buf + (size_t)(rb_out * (uint64_t)r);
                ex_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)(rb_in * (uint64_t)r), row, n);
                int64_t j = 0;
                while (j < n && isfinite(row[j])) j++;
                if (j < n && (rc = refuse_non_finite(in, t)) != ATS_EXIT_OK) {
                    free(buf);
                    free(row);
                    free(back);
                    goto done;
                }
                ex_quantize_row(target, row, q, n);
                /* finite source, yet a block scale (or an F16 value) past F16's 65504 is Inf: read the row
                   back and name the largest source value of the first block that did not survive */
                ex_dequantize_row(target, q, back, n);
                for (int64_t j = 0; j < n && bad_row < 0; j++)
                    if (!isfinite(back[j])) {
                        int64_t be = ats_qtype_block_elems(target), j0 = j / be * be;
                        bad_row = r, bad_col = j0;
                        for (int64_t k = j0; k < j0 + be; k++)
                            if (fabsf(row[k]) > fabsf(row[bad_col])) bad_col = k;
                    }
            }
            if (bad_row >= 0) {
                char where[64] = "";
                if (t->ne[2] * t->ne[3] > 1)
                    snprintf(where, sizeof where, "expert %lld, ", (long long)(bad_row / t->ne[1]));
                if (target == ATS_Q_F16)
                    ats_cli_error("quantize", "%s: tensor '%s': %srow %lld, element %lld = %g does not fit F16 (max 65504)%s%s%s (nothing written)",
                                  in, t->name, where, (long long)(bad_row % t->ne[1]), (long long)bad_col, (double)row[bad_col],
                                  asked != ATS_Q_F16 ? ", the fallback of " : "", asked != ATS_Q_F16 ? ats_qtype_name(asked) : "",
                                  asked != ATS_Q_F16 ? " for its row length" : "");
                else
                    ats_cli_error("quantize", "%s: tensor '%s': %srow %lld, element %lld = %g does not fit %s (its block scale overflows F16, max 65504) (nothing written)",
                                  in, t->name, where, (long long)(bad_row % t->ne[1]), (long long)bad_col, (double)row[bad_col],
                                  ats_qtype_name(target));
                free(buf);
                free(row);
                free(back);
                rc = ATS_EXIT_USAGE;
                goto done;
            }
            free(row);
            free(back);
            o->type = target;
            o->data = buf;
            o->bytes = rb_out * (uint64_t)rows;
            n_changed++;
            fprintf(stderr, "ats quantize: %-28s [%lld, %lld, %lld] %s -> %s\n", t->name, (long long)t->ne[0],
                    (long long)t->ne[1], (long long)t->ne[2], ats_qtype_name(t->type), ats_qtype_name(target));
        }
        bytes_out += o->bytes;
    }
    st = ex_gguf_write(out, n_out_kv, kv, kvl, nt, ot, ex_gguf_alignment(g), &err);
    if (st != ATS_OK) {
        ats_cli_error("quantize", "%s", err.msg);
        rc = ATS_EXIT_FAIL;
    } else {
        fprintf(stderr, "ats quantize: %s -> %s: %lld of %lld tensors re-quantized, %.3f MiB -> %.3f MiB\n", in, out,
                (long long)n_changed, (long long)nt, (double)bytes_in / 1048576.0, (double)bytes_out / 1048576.0);
        if (n_fell) { /* one line: e.g. "31 Q4_K -> Q4_0 (row length not a multiple of 256)" */
            fprintf(stderr, "ats quantize: note: %lld of %lld matrices fell back to another type:", (long long)n_fell,
                    (long long)n_mat);
            print_fallbacks(fb, n_fb);
        }
        if (n_changed == 0 && n_mat > 0 && n_asked == 0) { /* say why the output has no matrix of --type */
            fprintf(stderr, "ats quantize: note: no tensor re-quantized: every matrix already has the type --type %s "
                            "gives it here:", type_name);
            print_fallbacks(same, n_same);
        } else if (n_head_kept) {
            int k = 0;
            while (!same[k].kept) k++;
            fprintf(stderr, "ats quantize: note:");
            print_fallbacks(&same[k], 1);
        }
    }
done:
    if (ot)
        for (int64_t i = 0; i < nt; i++)
            if (ot[i].data != ex_gguf_tensor_at(g, i)->data) free((void *)ot[i].data);
    free(ot);
    free(kv);
    free(kvl);
    ex_gguf_free(g);
    return rc;
}
