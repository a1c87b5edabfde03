/*
 * ats inspect — print the op graph of one round of a model: every op with its tensor bytes (exact at
 * its quantization type), FLOPs, activation bytes and KV-cache bytes, and the totals.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ats/graph.h"
#include "atsc/model_json.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats inspect [--model M] [--quant Q] [--phase decode|prefill] [--ctx L] [--tokens N]\n"
            "                   [--n-ctx C] [--format table|csv]\n\n"
            "Prints the ordered ops of one round (those that read weights or the KV cache) with sizes,\n"
            "FLOPs and bytes, then totals: weights, KV cache, bytes read per round.\n\n"
            "  --model M        model name (models/M.json), path to a JSON file, or a GGUF file (its\n"
            "                   architecture and per-tensor types, read from the header) [qwen3-14b]\n"
            "  --quant Q        f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4 [the model's default_quant]; not with a GGUF\n"
            "  --phase P        decode (one token) or prefill (a chunk of --tokens) [decode]\n"
            "  --ctx L          decode: context length L incl. the new token; prefill: tokens already\n"
            "                   in the KV cache before the chunk [decode 2048, prefill 0]\n"
            "  --tokens N       prefill chunk size [512]\n"
            "  --n-ctx C        KV cache capacity [tokens] [ctx + tokens]\n"
            "  --format F       table or csv [table]\n"
            "  --policy P       also print P's placement (per layer and role), GPU bytes, predicted round\n"
            "                   latency and the plan (layer layer-opoffload expert gpu-stream static ats-paper ats)\n"
            "  --vram-budget B  VRAM budget for --policy, e.g. 6GiB (required with --policy, refused without)\n"
            "  --hw H           hardware description for --policy's cost model (sim/hw/H.json)\n"
            "                   [rtx3060-laptop] (refused without --policy)\n"
            "  --gen G          decode steps of the request --policy's temp ring is chosen for, as ats sim and\n"
            "                   ats run choose it (the prompt: this round's context, in chunks of --tokens) [128]\n"
            "example: ats inspect --model qwen3-14b --quant q4_k_m --phase decode --ctx 2048\n");
}

static void human_bytes(double b, char *buf, size_t len)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024.0 && i < 4) { b /= 1024.0; i++; }
    snprintf(buf, len, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

/* Bytes of weights an op actually reads this round (routed experts: the active ones only). */
static double weight_read(const ats_op *op)
{
    if (op->kind == ATS_OP_EXPERTS) return op->n_expert_active * (double)op->expert_bytes;
    if (op->kind == ATS_OP_EMBED) return (double)op->weight_bytes / (double)op->n_out; /* one row per token, x N below */
    return (double)op->weight_bytes;
}

/* what the flags of ats inspect ask for */
typedef struct inspect_args {
    const char *model, *quant, *phase, *format, *policy, *hw;
    long long ctx, tokens, n_ctx; /* ctx -1: the phase's default */
    long long gen;                /* --gen: decode steps of the request --policy's temp ring is chosen for */
    int gen_given;
    uint64_t vram_budget;
    int hw_given;
} inspect_args;

/* the flags into a, and what does not go together: ATS_EXIT_OK, ATS_EXIT_USAGE after one line, -1 after --help */
static int parse_args(int argc, char **argv, inspect_args *a)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"quant", required_argument, 0, 'q'},
        {"phase", required_argument, 0, 'p'}, {"ctx", required_argument, 0, 'c'},
        {"tokens", required_argument, 0, 't'}, {"n-ctx", required_argument, 0, 'n'},
        {"format", required_argument, 0, 'f'}, {"help", no_argument, 0, 'h'},
        {"policy", required_argument, 0, 'P'}, {"vram-budget", required_argument, 0, 'B'},
        {"hw", required_argument, 0, 'W'}, {"gen", required_argument, 0, 'g'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (ats_cli_once_opt("inspect", &seen, opts, c, optarg)) return ATS_EXIT_USAGE;
        switch (c) {
        case 'm':
            if (ats_cli_file_value("inspect", "--model", optarg)) return ATS_EXIT_USAGE;
            a->model = optarg;
            break;
        case 'q': a->quant = optarg; break;
        case 'p': a->phase = optarg; break;
        case 'f': a->format = optarg; break;
        case 'P': a->policy = optarg; break;
        case 'W':
            if (ats_cli_file_value("inspect", "--hw", optarg)) return ATS_EXIT_USAGE;
            a->hw = optarg;
            a->hw_given = 1;
            break;
        case 'B':
            if (ats_cli_parse_vram("inspect", optarg, &a->vram_budget)) return ATS_EXIT_USAGE;
            break;
        case 'c':
        case 't':
        case 'g':
        case 'n': {
            long long v;
            const char *name = c == 'c' ? "ctx" : c == 't' ? "tokens" : c == 'g' ? "gen" : "n-ctx";
            int r = ats_cli_parse_int(optarg, &v);
            if (r == -1 || (r == 0 && v < 0)) {
                ats_cli_error("inspect", "--%s: '%s' is not a non-negative integer", name, optarg);
                return ATS_EXIT_USAGE;
            }
            if (r == -2 || v > ATS_ARCH_MAX_CTX) {
                ats_cli_error("inspect", "--%s: '%s' is out of range (0..%d tokens)", name, optarg, ATS_ARCH_MAX_CTX);
                return ATS_EXIT_USAGE;
            }
            if (c == 'c') a->ctx = v; else if (c == 't') a->tokens = v; else if (c == 'g') a->gen = v; else a->n_ctx = v;
            a->gen_given |= c == 'g';
            break;
        }
        case 'h': usage(stdout); return -1;
        case ':': ats_cli_missing_value("inspect", argv[optind - 1], optopt); return ATS_EXIT_USAGE;
        default: ats_cli_bad_option("inspect", argv[optind - 1], optopt, opts); return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error("inspect", "unexpected argument '%s' (ats inspect --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    if (!a->policy && (a->hw_given || a->vram_budget)) { /* the op graph does not depend on them */
        int both = a->hw_given && a->vram_budget;
        ats_cli_error("inspect", "%s only appl%s with --policy (the op graph alone does not use %s)",
                      both ? "--hw and --vram-budget" : a->hw_given ? "--hw" : "--vram-budget", both ? "y" : "ies",
                      both ? "them" : "it");
        return ATS_EXIT_USAGE;
    }
    if (!a->policy && a->gen_given) {
        ats_cli_error("inspect", "--gen only applies with --policy (the request its temp ring is chosen for)");
        return ATS_EXIT_USAGE;
    }
    if (a->gen_given && a->gen < 1) {
        ats_cli_error("inspect", "--gen: %lld (must be >= 1)", a->gen);
        return ATS_EXIT_USAGE;
    }
    if (a->policy && strchr(a->policy, ',')) {
        ats_cli_error("inspect", "--policy: '%s': inspect shows one policy at a time (ats sim compares several)", a->policy);
        return ATS_EXIT_USAGE;
    }
    if (a->policy && a->vram_budget == 0) {
        ats_cli_error("inspect", "--policy needs --vram-budget (e.g. --vram-budget 6GiB)");
        return ATS_EXIT_USAGE;
    }
    if (strcmp(a->format, "table") && strcmp(a->format, "csv")) {
        ats_cli_error("inspect", "--format: '%s' (must be table or csv)", a->format);
        return ATS_EXIT_USAGE;
    }
    return ATS_EXIT_OK;
}

/* --phase, --ctx, --tokens and --n-ctx into go (its recipe set): ATS_EXIT_OK or ATS_EXIT_USAGE after one line */
static int round_of_args(const inspect_args *a, ats_graph_opts *go)
{
    if (strcmp(a->phase, "decode") == 0) {
        if (a->ctx == 0) {
            ats_cli_error("inspect", "--ctx: 0 (a decode step needs a context length >= 1)");
            return ATS_EXIT_USAGE;
        }
        go->phase.kind = ATS_PHASE_DECODE;
        go->phase.n_tokens = 1;
        go->phase.ctx_pos = (a->ctx < 0 ? 2048 : a->ctx) - 1;
    } else if (strcmp(a->phase, "prefill") == 0) {
        if (a->tokens < 1) {
            ats_cli_error("inspect", "--tokens: %lld (must be >= 1)", a->tokens);
            return ATS_EXIT_USAGE;
        }
        go->phase.kind = ATS_PHASE_PREFILL;
        go->phase.n_tokens = a->tokens;
        go->phase.ctx_pos = a->ctx < 0 ? 0 : a->ctx;
        if (go->phase.ctx_pos + a->tokens > ATS_ARCH_MAX_CTX) { /* each is <= ATS_ARCH_MAX_CTX: no overflow */
            ats_cli_error("inspect", "--ctx %lld + --tokens %lld: more than %d tokens", (long long)go->phase.ctx_pos,
                          a->tokens, ATS_ARCH_MAX_CTX);
            return ATS_EXIT_USAGE;
        }
    } else {
        ats_cli_error("inspect", "--phase: '%s' (must be decode or prefill)", a->phase);
        return ATS_EXIT_USAGE;
    }
    if (a->n_ctx > 0 && a->n_ctx < go->phase.ctx_pos + go->phase.n_tokens) {
        ats_cli_error("inspect", "--n-ctx %lld: smaller than the %lld tokens of this round (--ctx%s%s)", a->n_ctx,
                      (long long)(go->phase.ctx_pos + go->phase.n_tokens), go->phase.kind == ATS_PHASE_PREFILL ? " + --tokens" : "",
                      a->ctx < 0 && go->phase.kind == ATS_PHASE_DECODE ? ", 2048 by default" : "");
        return ATS_EXIT_USAGE;
    }
    go->n_ctx = a->n_ctx;
    return ATS_EXIT_OK;
}

/* the op graph as a table (with totals) or CSV into gf */
static void print_graph(FILE *gf, const ats_arch *arch, const ats_graph_opts *go, const ats_graph *g, const char *phase,
                        int csv)
{
    double tot_flop = 0, tot_read = 0, tot_act = 0, tot_kv_read = 0, params = 0;
    if (csv)
        fprintf(gf, "index,name,kind,type,n_out,n_in,weight_bytes,flop,act_in_bytes,act_out_bytes,kv_read_bytes,kv_cache_bytes,n_expert,n_expert_active,expert_bytes\n");
    else {
        char quant[600];
        if (go->tensor_types) snprintf(quant, sizeof quant, "gguf (per-tensor types from the %s)", arch->source);
        else snprintf(quant, sizeof quant, "%s", ats_recipe_name(go->recipe));
        fprintf(gf, "# %s (%s), quant %s, %s: %lld token(s) at context position %lld, KV cache %lld tokens\n", arch->name,
               arch->family, quant, phase, (long long)go->phase.n_tokens,
               (long long)go->phase.ctx_pos, (long long)g->n_ctx);
        fprintf(gf, "%5s  %-26s %-7s %-5s %13s %12s %12s %10s %10s %12s  %s\n", "op", "name", "kind", "type", "shape",
               "weights", "FLOP", "act in", "act out", "KV read", "experts");
    }
    for (int32_t i = 0; i < g->n_ops; i++) {
        const ats_op *op = &g->ops[i];
        double wr = weight_read(op) * (op->kind == ATS_OP_EMBED ? (double)go->phase.n_tokens : 1.0);
        tot_flop += op->flop;
        tot_read += wr + (double)op->kv_read_bytes;
        tot_kv_read += (double)op->kv_read_bytes;
        tot_act += (double)(op->act_in_bytes + op->act_out_bytes);
        params += op->n_params;
        if (csv) {
            fprintf(gf, "%d,%s,%s,%s,%lld,%lld,%" PRIu64 ",%.6g,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%d,%.4g,%" PRIu64 "\n",
                   i, op->name, ats_op_kind_name(op->kind), ats_qtype_name(op->qtype), (long long)op->n_out,
                   (long long)op->n_in, op->weight_bytes, op->flop, op->act_in_bytes, op->act_out_bytes,
                   op->kv_read_bytes, op->kv_cache_bytes, op->n_expert, op->n_expert_active, op->expert_bytes);
            continue;
        }
        char shape[32] = "-", wb[24], ai[24], ao[24], kr[24], ex[48] = "";
        if (op->kind == ATS_OP_NORM) snprintf(shape, sizeof shape, "%lld", (long long)op->n_out);
        else if (op->n_out) snprintf(shape, sizeof shape, "%lldx%lld", (long long)op->n_out, (long long)op->n_in);
        human_bytes((double)op->weight_bytes, wb, sizeof wb);
        human_bytes((double)op->act_in_bytes, ai, sizeof ai);
        human_bytes((double)op->act_out_bytes, ao, sizeof ao);
        if (op->kind == ATS_OP_ATTN) human_bytes((double)op->kv_read_bytes, kr, sizeof kr);
        else snprintf(kr, sizeof kr, "-");
        if (op->n_expert) snprintf(ex, sizeof ex, "%d x %.2f MiB, %.2f active", op->n_expert,
                                   (double)op->expert_bytes / 1048576.0, op->n_expert_active);
        fprintf(gf, "%5d  %-26s %-7s %-5s %13s %12s %12.4g %10s %10s %12s  %s\n", i, op->name, ats_op_kind_name(op->kind),
               ats_qtype_name(op->qtype), shape, wb, op->flop, ai, ao, kr, ex);
    }
    if (!csv) {
        char w[24], kv[24], rd[24], act[24], kvr[24];
        human_bytes((double)g->weight_bytes, w, sizeof w);
        human_bytes((double)g->kv_cache_bytes, kv, sizeof kv);
        human_bytes(tot_read, rd, sizeof rd);
        human_bytes(tot_act, act, sizeof act);
        human_bytes(tot_kv_read, kvr, sizeof kvr);
        fprintf(gf, "\ntotals: %d ops (%d per layer in layer 0), %.3f B parameters\n", g->n_ops,
               ats_graph_ops_in_layer(g, 0), params / 1e9);
        fprintf(gf, "  weights          %s (%" PRIu64 " bytes)\n", w, g->weight_bytes);
        fprintf(gf, "  KV cache         %s at %lld tokens (%" PRIu64 " bytes)\n", kv, (long long)g->n_ctx, g->kv_cache_bytes);
        fprintf(gf, "  bytes read/round %s (weights touched + KV %s)\n", rd, kvr);
        fprintf(gf, "  activations      %s in+out\n", act);
        fprintf(gf, "  FLOP/round       %.4g\n", tot_flop);
    }
}

int ats_cmd_inspect(int argc, char **argv)
{
    inspect_args A = {.model = "qwen3-14b", .phase = "decode", .format = "table", .hw = "rtx3060-laptop",
                      .ctx = -1, .tokens = 512, .gen = 128}, *a = &A;
    int rc = parse_args(argc, argv, a);
    if (rc) return rc < 0 ? ATS_EXIT_OK : rc;
    char path[4096];
    ats_arch arch;
    ats_err err;
    ats_graph_opts go = ats_graph_opts_default();
    ats_qtype *types = NULL; /* a GGUF file's per-tensor types */
    if ((rc = ats_cli_load_model("inspect", a->model, a->quant, path, sizeof path, &arch, &go.recipe, &types)))
        return rc;
    go.tensor_types = types;
    if ((rc = round_of_args(a, &go))) {
        free(types);
        return rc;
    }
    ats_graph *g;
    if (ats_graph_build(&arch, &go, &g, &err) != ATS_OK) {
        fprintf(stderr, "ats inspect: %s: %s\n", path, err.msg);
        free(types);
        return ATS_EXIT_USAGE;
    }
    /* the graph table, then the plan: both held back until the plan is made, so a policy or --hw that
       fails prints its error alone (the table came first, then the error) */
    char *gbuf = NULL, *pbuf = NULL;
    size_t glen = 0, plen = 0;
    FILE *gf = open_memstream(&gbuf, &glen);
    if (!gf) {
        ats_cli_error("inspect", "out of memory");
        ats_graph_free(g);
        free(types);
        return ATS_EXIT_FAIL;
    }
    const int csv = strcmp(a->format, "csv") == 0;
    print_graph(gf, &arch, &go, g, a->phase, csv);
    fclose(gf);
    if (a->policy) {
        FILE *pf = open_memstream(&pbuf, &plen);
        rc = pf ? ats_inspect_plan(&arch, &go, g, a->policy, a->vram_budget, a->hw, a->tokens, a->gen, pf) : ATS_EXIT_FAIL;
        if (pf) fclose(pf);
        else ats_cli_error("inspect", "out of memory");
    }
    if (rc == ATS_EXIT_OK) {
        errno = 0;
        if (fwrite(gbuf, 1, glen, stdout) != glen || (pbuf && fwrite(pbuf, 1, plen, stdout) != plen))
            ats_cli_stdout_errno = errno; /* reported by main()'s stdout check */
    }
    free(gbuf);
    free(pbuf);
    ats_graph_free(g);
    free(types);
    return rc;
}
