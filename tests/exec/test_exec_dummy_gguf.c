/*
 * test_exec_dummy_gguf — ex_model_write_dummy_gguf / `ats quantize --dummy-weights`: the GGUF holds the
 * weights ex_model_new_dummy builds. For a tiny llama (tied head, Q4_0), qwen3 (Q4_K_M with its Q6_K
 * layers) and qwen3moe with a shared expert (Q8_0), at a fresh seed (printed):
 *  1. the file opens through the reader's validation (ex_gguf_open) and holds the metadata llama.cpp's
 *     loader reads: general.architecture, <arch>.block_count, context_length, embedding_length,
 *     feed_forward_length (dense), attention.head_count(_kv), key_length, value_length, rope.freq_base,
 *     attention.layer_norm_rms_epsilon (F32), expert_count, expert_used_count,
 *     expert_feed_forward_length (MoE), a "gpt2" vocabulary of n_vocab tokens with scores, types,
 *     merges, BOS and EOS;
 *  2. ex_model_load_gguf reads it back: same hyper-parameters, every weight tensor byte-identical to
 *     the in-memory dummy's, and a session over each gives bit-identical logits for a prefill chunk and
 *     three decode steps;
 *  3. the vocabulary tokenizes text and decodes it back to the same bytes;
 *  4. progress reaches total; a vocabulary below 257 tokens and an unwritable path are refused with a
 *     message and no file left;
 *  5. `ats quantize --dummy-weights` ($ATS_BIN) writes the same file byte for byte, `ats run` runs it,
 *     and its usage errors are one line with exit 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ex/gguf.h"
#include "ex/model.h"
#include "ex/session.h"
#include "ex/tokenizer.h"
#include "testutil.h"

static char dir[512];

static ats_arch make_arch(const char *family, int moe, int shexp)
{
    ats_arch a;
    ats_arch_init(&a);
    snprintf(a.name, sizeof a.name, "tiny-%s", family);
    snprintf(a.family, sizeof a.family, "%s", family);
    snprintf(a.source, sizeof a.source, "test");
    a.n_embd = 256;
    a.n_layer = 3;
    a.n_head = 4;
    a.n_head_kv = 2;
    a.head_dim = 64;
    a.n_vocab = 300;
    a.n_ff = moe ? 0 : 512;
    a.n_ctx_max = 64;
    a.rms_norm_eps = 1e-6;
    a.rope_theta = 1e6;
    a.rope_type = strcmp(family, "llama") == 0 ? ATS_ROPE_NORM : ATS_ROPE_NEOX;
    a.qk_norm = strcmp(family, "llama") != 0;
    a.tied_embd = strcmp(family, "llama") == 0;
    if (moe) {
        a.n_expert = 8;
        a.n_expert_used = 2;
        a.n_ff_exp = 256;
        a.n_expert_shared = shexp;
        a.n_ff_shexp = shexp ? 256 : 0;
    }
    return a;
}

static void progress(void *ctx, uint64_t done, uint64_t total)
{
    uint64_t *last = ctx;
    CHECK(done <= total && done >= last[0]);
    last[0] = done;
    last[1] = total;
}

static int has_key(const ex_gguf *g, const char *arch, const char *key)
{
    char full[160];
    int64_t i;
    if (arch) snprintf(full, sizeof full, "%s.%s", arch, key);
    else snprintf(full, sizeof full, "%s", key);
    int ok = ex_gguf_find_kv(g, full, &i) == ATS_OK;
    CHECK_MSG(ok, "metadata '%s' missing", full);
    return ok;
}

static void check_tensor_same(const char *name, const ex_tensor *a, const ex_tensor *b)
{
    CHECK_MSG(a->type == b->type && a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] &&
              a->row_bytes == b->row_bytes, "%s: type/shape differ", name);
    if (!a->data || !b->data) {
        CHECK_MSG(!a->data && !b->data, "%s: present in one model only", name);
        return;
    }
    CHECK_MSG(memcmp(a->data, b->data, (size_t)(a->row_bytes * (uint64_t)(a->ne[1] * a->ne[2]))) == 0,
              "%s: bytes differ", name);
}

static void logits_of(const ex_model *m, const int32_t *tok, int n, float *out /* 4 * n_vocab */)
{
    ex_session_opts so = ex_session_opts_default();
    ex_session *s = NULL;
    ats_err err = {{0}};
    CHECK_MSG(ex_session_new(m, &so, &s, &err) == ATS_OK, "%s", err.msg);
    if (!s) return;
    int64_t V = m->arch.n_vocab;
    CHECK(ex_session_forward(s, tok, n, out, &err) == ATS_OK);
    for (int k = 0; k < 3; k++) CHECK(ex_session_forward(s, &tok[k], 1, out + (k + 1) * V, &err) == ATS_OK);
    ex_session_free(s);
}

static void one_model(const char *family, int moe, int shexp, ats_recipe recipe, uint64_t seed)
{
    ats_arch a = make_arch(family, moe, shexp);
    char path[600];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, family);
    ats_err err = {{0}};
    ex_model *m1 = NULL, *m2 = NULL;
    uint64_t prog[2] = {0, 1};
    CHECK_MSG(ex_model_new_dummy(&a, recipe, seed, &m1, &err) == ATS_OK, "%s", err.msg);
    CHECK_MSG(ex_model_write_dummy_gguf(&a, recipe, seed, path, progress, prog, &err) == ATS_OK, "%s", err.msg);
    CHECK_MSG(prog[0] == prog[1] && prog[1] > 0, "progress %llu of %llu", (unsigned long long)prog[0],
              (unsigned long long)prog[1]);
    /* 1. the reader's validation and the metadata llama.cpp reads */
    ex_gguf *g = NULL;
    CHECK_MSG(ex_gguf_open(path, &g, &err) == ATS_OK, "%s", err.msg);
    if (g) {
        const char *A = moe ? "qwen3moe" : family, *s;
        size_t sl;
        CHECK(ex_gguf_get_str(g, "general.architecture", &s, &sl, &err) == ATS_OK && sl == strlen(A) &&
              memcmp(s, A, sl) == 0);
        static const char *const keys[] = {"block_count", "context_length", "embedding_length", "attention.head_count",
                                           "attention.head_count_kv", "attention.key_length", "attention.value_length",
                                           "rope.freq_base", "attention.layer_norm_rms_epsilon"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) has_key(g, A, keys[k]);
        int64_t i;
        if (has_key(g, A, "attention.layer_norm_rms_epsilon")) {
            char full[128];
            snprintf(full, sizeof full, "%s.attention.layer_norm_rms_epsilon", A);
            ex_gguf_find_kv(g, full, &i);
            CHECK(ex_gguf_kv_type(g, i) == EX_GGUF_F32); /* llama.cpp's get_key wants F32 */
        }
        if (moe) {
            has_key(g, A, "expert_count");
            has_key(g, A, "expert_used_count");
            has_key(g, A, "expert_feed_forward_length");
        } else {
            has_key(g, A, "feed_forward_length");
        }
        static const char *const tk[] = {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                         "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                                         "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"};
        for (size_t k = 0; k < sizeof tk / sizeof tk[0]; k++) has_key(g, NULL, tk[k]);
        CHECK(ex_gguf_get_str(g, "tokenizer.ggml.model", &s, &sl, &err) == ATS_OK && sl == 4 && memcmp(s, "gpt2", 4) == 0);
        ex_gguf_vtype et;
        uint64_t n = 0;
        CHECK(ex_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &err) == ATS_OK && et == EX_GGUF_STRING &&
              n == (uint64_t)a.n_vocab);
        CHECK(ex_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n, &err) == ATS_OK && n == (uint64_t)a.n_vocab - 257);
        CHECK((ex_gguf_find_tensor(g, "output.weight") == NULL) == (a.tied_embd != 0));
        ex_gguf_free(g);
    }
    /* 2. read back: the same weights, bit-identical logits */
    CHECK_MSG(ex_model_load_gguf(path, &m2, &err) == ATS_OK, "%s", err.msg);
    if (m1 && m2) {
        const ats_arch *b = &m2->arch;
        CHECK(b->n_embd == a.n_embd && b->n_layer == a.n_layer && b->n_head == a.n_head && b->n_head_kv == a.n_head_kv &&
              b->head_dim == a.head_dim && b->n_vocab == a.n_vocab && b->n_ff == a.n_ff && b->n_ctx_max == a.n_ctx_max &&
              b->n_expert == a.n_expert && b->n_expert_used == a.n_expert_used && b->n_ff_exp == a.n_ff_exp &&
              b->n_expert_shared == a.n_expert_shared && b->n_ff_shexp == a.n_ff_shexp && b->tied_embd == a.tied_embd &&
              b->qk_norm == a.qk_norm && b->rope_type == a.rope_type && m2->n_rot == m1->n_rot &&
              m2->norm_topk == m1->norm_topk && (float)b->rms_norm_eps == (float)a.rms_norm_eps &&
              (float)b->rope_theta == (float)a.rope_theta);
        CHECK(m1->weight_bytes == m2->weight_bytes);
        check_tensor_same("token_embd", &m1->tok_embd, &m2->tok_embd);
        check_tensor_same("output", &m1->output, &m2->output);
        check_tensor_same("output_norm", &m1->output_norm, &m2->output_norm);
        for (int l = 0; l < a.n_layer; l++) {
            const ex_layer *x = &m1->layers[l], *y = &m2->layers[l];
            const ex_tensor *tx[] = {&x->attn_norm, &x->wq, &x->wk, &x->wv, &x->wo, &x->q_norm, &x->k_norm, &x->ffn_norm,
                                     &x->ffn_gate, &x->ffn_up, &x->ffn_down, &x->gate_inp, &x->gate_exps, &x->up_exps,
                                     &x->down_exps, &x->gate_shexp, &x->up_shexp, &x->down_shexp};
            const ex_tensor *ty[] = {&y->attn_norm, &y->wq, &y->wk, &y->wv, &y->wo, &y->q_norm, &y->k_norm, &y->ffn_norm,
                                     &y->ffn_gate, &y->ffn_up, &y->ffn_down, &y->gate_inp, &y->gate_exps, &y->up_exps,
                                     &y->down_exps, &y->gate_shexp, &y->up_shexp, &y->down_shexp};
            for (size_t k = 0; k < sizeof tx / sizeof tx[0]; k++) {
                char nm[64];
                snprintf(nm, sizeof nm, "layer %d tensor %zu", l, k);
                check_tensor_same(nm, tx[k], ty[k]);
            }
        }
        int32_t tok[5];
        for (int k = 0; k < 5; k++) tok[k] = (int32_t)(tu_rand(&seed) % (uint64_t)a.n_vocab);
        size_t nl = 4 * (size_t)a.n_vocab;
        float *l1 = calloc(nl, sizeof *l1), *l2 = calloc(nl, sizeof *l2);
        logits_of(m1, tok, 5, l1);
        logits_of(m2, tok, 5, l2);
        CHECK_MSG(memcmp(l1, l2, nl * sizeof *l1) == 0, "%s: logits differ (first %g vs %g)", family, l1[0], l2[0]);
        int finite = 1;
        for (size_t k = 0; k < nl; k++) finite &= isfinite(l1[k]) && l1[k] != 0.0f;
        CHECK(finite);
        free(l1);
        free(l2);
        /* 3. the vocabulary round-trips text */
        CHECK(m2->tok != NULL && m2->eos_id == a.n_vocab - 1);
        if (m2->tok) {
            const char *text = "Hi, \xc3\xa9t\xc3\xa9\n\t42!";
            int32_t ids[64];
            int64_t n = 0;
            CHECK(ex_tokenizer_encode(m2->tok, text, 0, ids, 64, &n) == ATS_OK && n > 0);
            char back[256] = "", piece[64];
            for (int64_t k = 0; k < n; k++) {
                ex_tokenizer_decode(m2->tok, k ? ids[k - 1] : -1, ids[k], piece, sizeof piece);
                strncat(back, piece, sizeof back - strlen(back) - 1);
            }
            CHECK_MSG(strcmp(back, text) == 0, "decoded '%s' from %lld tokens", back, (long long)n);
        }
    }
    ex_model_free(m1);
    ex_model_free(m2);
}

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_usage(const char *bin, const char *args, const char *part)
{
    char cmd[2048], path[600], buf[4096] = "";
    snprintf(path, sizeof path, "%s/err.txt", dir);
    snprintf(cmd, sizeof cmd, "'%s' %s 2>'%s' >/dev/null", bin, args, path);
    int code = sh(cmd);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    int lines = 0;
    for (char *p = buf; *p; p++) lines += *p == '\n';
    CHECK_MSG(code == 2 && lines == 1 && strstr(buf, part), "`ats %s`: exit %d, stderr '%s' (want one line with '%s')",
              args, code, buf, part);
    unlink(path);
}

static void cli(uint64_t seed)
{
    const char *bin = getenv("ATS_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "test_exec_dummy_gguf: ATS_BIN not set, CLI checks skipped\n");
        CHECK(0);
        return;
    }
    char json[600], out[600], lib[600], cmd[4096];
    snprintf(json, sizeof json, "%s/tiny.json", dir);
    tu_write_tiny_qwen3(json, "test_exec_dummy_gguf");
    snprintf(out, sizeof out, "%s/cli.gguf", dir);
    snprintf(cmd, sizeof cmd, "'%s' quantize --dummy-weights --model '%s' --quant q8_0 --seed %llu '%s' 2>/dev/null", bin,
             json, (unsigned long long)seed, out);
    CHECK(sh(cmd) == 0);
    /* the library's file of the same model, recipe and seed: the same bytes */
    ats_arch a = make_arch("qwen3", 0, 0);
    snprintf(a.name, sizeof a.name, "tiny");
    a.n_layer = 2;
    a.n_vocab = 320;
    a.n_ctx_max = 128;
    snprintf(lib, sizeof lib, "%s/lib.gguf", dir);
    ats_err err = {{0}};
    CHECK_MSG(ex_model_write_dummy_gguf(&a, ATS_RECIPE_Q8_0, seed, lib, NULL, NULL, &err) == ATS_OK, "%s", err.msg);
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", out, lib);
    CHECK_MSG(sh(cmd) == 0, "`ats quantize --dummy-weights` and ex_model_write_dummy_gguf wrote different files");
    snprintf(cmd, sizeof cmd, "'%s' run --model '%s' -p 'Hello' -n 4 --print-ids >/dev/null 2>&1", bin, out);
    CHECK(sh(cmd) == 0);
    char args[2048];
    snprintf(args, sizeof args, "quantize --dummy-weights --quant q8_0 %s/x.gguf", dir);
    expect_usage(bin, args, "needs --model");
    snprintf(args, sizeof args, "quantize --model '%s' %s/x.gguf", json, dir);
    expect_usage(bin, args, "go with --dummy-weights");
    snprintf(args, sizeof args, "quantize --dummy-weights --model '%s' --quant q3 %s/x.gguf", json, dir);
    expect_usage(bin, args, "unknown recipe");
    snprintf(args, sizeof args, "quantize --dummy-weights --model '%s' --type q8_0 %s/x.gguf", json, dir);
    expect_usage(bin, args, "--type and --pure");
    snprintf(args, sizeof args, "quantize --dummy-weights --model '%s' %s/x.gguf %s/y.gguf", json, dir, dir);
    expect_usage(bin, args, "one file argument");
    snprintf(args, sizeof args, "quantize --dummy-weights --model %s/none.json %s/x.gguf", dir, dir);
    expect_usage(bin, args, "none.json");
    snprintf(args, sizeof args, "%s/x.gguf", dir);
    CHECK_MSG(access(args, F_OK) != 0, "a refused command left %s", args);
    unlink(out);
    unlink(lib);
    unlink(json);
}

int main(void)
{
    uint64_t seed = tu_seed("test_exec_dummy_gguf") % 1000000;
    if (!tu_tmpdir(dir, sizeof dir, "test_exec_dummy_gguf")) return 1;
    one_model("llama", 0, 0, ATS_RECIPE_Q4_0, seed);
    one_model("qwen3", 0, 0, ATS_RECIPE_Q4_K_M, seed + 1);
    one_model("qwen3_moe", 1, 1, ATS_RECIPE_Q8_0, seed + 2);
    /* 4. refusals leave nothing */
    ats_arch a = make_arch("qwen3", 0, 0);
    a.n_vocab = 256;
    ats_err err = {{0}};
    char path[600];
    snprintf(path, sizeof path, "%s/small-vocab.gguf", dir);
    CHECK(ex_model_write_dummy_gguf(&a, ATS_RECIPE_Q8_0, seed, path, NULL, NULL, &err) == ATS_EINVAL &&
          strstr(err.msg, "vocab_size 256") != NULL);
    CHECK(access(path, F_OK) != 0);
    a.n_vocab = 300;
    snprintf(path, sizeof path, "%s/no-such-dir/x.gguf", dir);
    CHECK(ex_model_write_dummy_gguf(&a, ATS_RECIPE_Q8_0, seed, path, NULL, NULL, &err) != ATS_OK && err.msg[0]);
    char name[600];
    snprintf(name, sizeof name, "%s/llama.gguf", dir);
    unlink(name);
    snprintf(name, sizeof name, "%s/qwen3.gguf", dir);
    unlink(name);
    snprintf(name, sizeof name, "%s/qwen3_moe.gguf", dir);
    unlink(name);
    cli(seed);
    return tu_finish("test_exec_dummy_gguf");
}
