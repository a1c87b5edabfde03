/*
 * test_exec_cli — `ats run` and `ats quantize` as programs ($ATS_BIN): --dummy-weights on a tiny
 * qwen3moe JSON written here (seeded: same seed same tokens, --split and --threads do not change
 * them, another seed changes the weights), sampling (temperature/top-k/top-p seeded: same seed same
 * text), `--out` results files (read back with atsc_results_read: one round per forward, one op row
 * per graph op and round, times ordered), `ats quantize` to real K-quants on an F32 llama GGUF
 * written here (n_embd 256: tensor types as requested, tied head at Q6_K, relative RMS error of the
 * logits within a per-type bound of the F32 model's; no fallback note), on stories260K one note on the
 * matrices whose rows do not fit the type's blocks (and one saying why when nothing changed), an
 * already-quantized output head kept as it is, NaN/Inf sources and finite values the target type
 * cannot hold (an F16 block scale or F16 value past 65504) refused with nothing written, and usage errors (exit 2 with one message; --help exit 0).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "atsc/results.h"
#include "ex/gguf.h"
#include "ex/model.h"
#include "ex/session.h"
#include "ex/quant.h"
#include "testutil.h"

static const char *bin;
static char dir[64];

static char *run(const char *args, int *code)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>%s/err.txt", bin, args, dir);
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, n = 0, k;
    char *b = calloc(1, cap);
    while (p && (k = fread(b + n, 1, cap - n - 1, p)) > 0) n += k;
    int st = p ? pclose(p) : -1;
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return b;
}

static char err[16384]; /* stderr of the last expect_code */

static void expect_code(const char *args, int want, const char *msg_part)
{
    int code;
    free(run(args, &code));
    char path[256];
    err[0] = 0;
    snprintf(path, sizeof path, "%s/err.txt", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(err, 1, sizeof err - 1, f);
        err[n] = 0;
        fclose(f);
    }
    CHECK_MSG(code == want, "`ats %s`: exit %d, want %d (%s)", args, code, want, err);
    if (msg_part) CHECK_MSG(strstr(err, msg_part) != NULL, "`ats %s`: stderr lacks '%s': %s", args, msg_part, err);
}


static size_t kv_str(uint8_t *p, const char *key, const char *val)
{
    uint64_t n = strlen(key), m = strlen(val);
    uint32_t t = EX_GGUF_STRING;
    memcpy(p, &n, 8); memcpy(p + 8, key, n); memcpy(p + 8 + n, &t, 4); memcpy(p + 12 + n, &m, 8); memcpy(p + 20 + n, val, m);
    return 20 + n + m;
}

/* An F32 1-layer llama with n_embd 256 (K-quant friendly), tied head, fresh random weights. */
static void write_f32_llama(const char *path, uint64_t *rng)
{
    static uint8_t kb[8][128];
    const void *kv[8];
    size_t kl[8];
    int nk = 0;
    kl[nk] = kv_str(kb[nk], "general.architecture", "llama"); nk++;
    kl[nk] = ex_gguf_kv_u32(kb[nk], "llama.embedding_length", 256); nk++;
    kl[nk] = ex_gguf_kv_u32(kb[nk], "llama.block_count", 1); nk++;
    kl[nk] = ex_gguf_kv_u32(kb[nk], "llama.attention.head_count", 4); nk++;
    kl[nk] = ex_gguf_kv_u32(kb[nk], "llama.attention.head_count_kv", 2); nk++;
    kl[nk] = ex_gguf_kv_u32(kb[nk], "llama.feed_forward_length", 512); nk++;
    kl[nk] = ex_gguf_kv_u32(kb[nk], "llama.context_length", 64); nk++;
    for (int i = 0; i < nk; i++) kv[i] = kb[i];
    struct { const char *name; int nd; int64_t ne0, ne1; } T[] = {
        {"token_embd.weight", 2, 256, 64}, {"output_norm.weight", 1, 256, 1}, {"blk.0.attn_norm.weight", 1, 256, 1},
        {"blk.0.attn_q.weight", 2, 256, 256}, {"blk.0.attn_k.weight", 2, 256, 128}, {"blk.0.attn_v.weight", 2, 256, 128},
        {"blk.0.attn_output.weight", 2, 256, 256}, {"blk.0.ffn_norm.weight", 1, 256, 1},
        {"blk.0.ffn_gate.weight", 2, 256, 512}, {"blk.0.ffn_up.weight", 2, 256, 512}, {"blk.0.ffn_down.weight", 2, 512, 256},
    };
    ex_gguf_out_tensor ot[11];
    for (int i = 0; i < 11; i++) {
        int64_t cnt = T[i].ne0 * T[i].ne1;
        float *f = malloc((size_t)cnt * sizeof *f);
        for (int64_t j = 0; j < cnt; j++)
            f[j] = T[i].nd == 1 ? (float)tu_uniform(rng, 0.8, 1.2) : (float)tu_uniform(rng, -1, 1) / 16.0f;
        ot[i] = (ex_gguf_out_tensor){T[i].name, (uint32_t)T[i].nd, {T[i].ne0, T[i].ne1, 1, 1}, ATS_Q_F32, f, (uint64_t)cnt * 4};
    }
    ats_err err;
    CHECK(ex_gguf_write(path, nk, kv, kl, 11, ot, 32, &err) == ATS_OK);
    for (int i = 0; i < 11; i++) free((void *)ot[i].data);
}

static void last_logits(const char *path, const int32_t *tok, int n, float *out, ex_model **keep)
{
    ex_model *m = NULL;
    ex_session *s = NULL;
    ats_err err = {{0}};
    CHECK_MSG(ex_model_load_gguf(path, &m, &err) == ATS_OK, "%s", err.msg);
    if (!m) return;
    CHECK(ex_session_new(m, NULL, &s, &err) == ATS_OK);
    CHECK(ex_session_forward(s, tok, n, out, &err) == ATS_OK);
    ex_session_free(s);
    *keep = m;
}

static void test_quantize_kquants(uint64_t *rng)
{
    char f32[256], q[256], args[1024];
    snprintf(f32, sizeof f32, "%s/f32.gguf", dir);
    write_f32_llama(f32, rng);
    int32_t tok[6];
    for (int i = 0; i < 6; i++) tok[i] = (int32_t)(tu_rand(rng) % 64);
    float ref[64], got[64];
    ex_model *m0 = NULL;
    last_logits(f32, tok, 6, ref, &m0);
    double scale = 0; /* relative RMS error: ||got - ref|| / ||ref|| */
    for (int i = 0; i < 64; i++) scale += (double)ref[i] * ref[i];
    scale = sqrt(scale);
    struct { const char *type; ats_qtype mat, head; double bound; } cases[] = {
        /* relative RMS bounds: ~2x the worst of 25 seeds (2.2%, 17%, 19%); a wrong block layout gives ~100% */
        {"q8_0", ATS_Q_Q8_0, ATS_Q_Q8_0, 0.05}, {"q4_k", ATS_Q_Q4_K, ATS_Q_Q6_K, 0.35}, {"q4_0", ATS_Q_Q4_0, ATS_Q_Q6_K, 0.35},
    };
    for (int c = 0; c < 3; c++) {
        snprintf(q, sizeof q, "%s/%s.gguf", dir, cases[c].type);
        snprintf(args, sizeof args, "quantize %s %s --type %s", f32, q, cases[c].type);
        expect_code(args, 0, "re-quantized");
        CHECK_MSG(!strstr(err, "note:"), "%s: every row fits its blocks, yet: %s", cases[c].type, err);
        ex_model *m = NULL;
        last_logits(q, tok, 6, got, &m);
        if (!m) continue;
        CHECK(m->layers[0].wq.type == cases[c].mat && m->layers[0].ffn_down.type == cases[c].mat);
        CHECK_MSG(m->tok_embd.type == cases[c].head, "%s: tied head type %s", cases[c].type, ats_qtype_name(m->tok_embd.type));
        CHECK(m->output_norm.type == ATS_Q_F32);
        double e = 0;
        for (int i = 0; i < 64; i++) e += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        e = e == e ? sqrt(e) : INFINITY;
        fprintf(stderr, "test_exec_cli: %s: ||logits - F32|| = %.3g of ||F32|| %.3g\n", cases[c].type, e, scale);
        CHECK_MSG(e <= cases[c].bound * scale, "%s logits differ by %.3g (scale %.3g)", cases[c].type, e, scale);
        ex_model_free(m);
    }
    ex_model_free(m0);
}

/* Copies the F32 GGUF `from` to `to` with one value replaced: tensor `name`, row `row`, element `elem`. */
static void write_patched(const char *from, const char *to, const char *name, int64_t row, int64_t elem, float v)
{
    size_t len = 0;
    char *buf = tu_slurp(from, &len);
    ex_gguf *g = NULL;
    ats_err e = {{0}};
    CHECK_MSG(buf && ex_gguf_open_mem(buf, len, from, &g, &e) == ATS_OK, "%s", e.msg);
    const ex_gguf_tensor *t = g ? ex_gguf_find_tensor(g, name) : NULL;
    CHECK(t != NULL && t->type == ATS_Q_F32);
    if (t) memcpy((uint8_t *)t->data + 4 * (row * t->ne[0] + elem), &v, 4);
    ex_gguf_free(g);
    FILE *f = fopen(to, "wb");
    CHECK(f && fwrite(buf, 1, len, f) == len);
    if (f) fclose(f);
    free(buf);
}

/* A NaN or Inf weight (one value of an F32 source written here): quantize refuses it, exit 2, in the words
 * of `ats run --check-tensors`, and writes nothing (the quantizers dropped a NaN from the block max and
 * wrote normal-looking numbers; an Inf became an Inf scale; both exit 0). So does a finite value whose
 * block scale overflows F16 (max 65504: 1e30 or FLT_MAX gave an Inf scale), or one past 65504 in a matrix
 * that falls back to F16 (stories260K's rows of 172: 1e6 became Inf), all with exit 0 before. */
static void test_quantize_non_finite(uint64_t *rng, const char *stories)
{
    static const struct { int stories; const char *type, *tensor; int64_t row, elem; float v; const char *want; } cases[] = {
        {0, "q8_0", "blk.0.ffn_down.weight", 3, 7, NAN, "tensor 'blk.0.ffn_down.weight' (F32): NaN or Inf in row 3, element 7"},
        {0, "q4_0", "blk.0.attn_q.weight", 0, 255, INFINITY, "tensor 'blk.0.attn_q.weight' (F32): NaN or Inf in row 0, element 255"},
        {0, "q4_k", "output_norm.weight", 0, 1, -INFINITY, "tensor 'output_norm.weight' (F32): NaN or Inf in row 0, element 1"},
        {0, "q8_0", "blk.0.attn_q.weight", 0, 5, 1e30f,
         "tensor 'blk.0.attn_q.weight': row 0, element 5 = 1e+30 does not fit Q8_0 (its block scale overflows F16, max 65504)"},
        {0, "q4_0", "blk.0.ffn_up.weight", 2, 40, -3.4e38f,
         "tensor 'blk.0.ffn_up.weight': row 2, element 40 = -3.4e+38 does not fit Q4_0 (its block scale overflows F16"},
        {0, "q4_k", "blk.0.attn_k.weight", 1, 44, 1e30f,
         "tensor 'blk.0.attn_k.weight': row 1, element 44 = 1e+30 does not fit Q4_K (its block scale overflows F16"},
        {0, "q4_k", "token_embd.weight", 4, 9, 1e30f, /* the tied head: Q6_K */
         "tensor 'token_embd.weight': row 4, element 9 = 1e+30 does not fit Q6_K (its block scale overflows F16"},
        {1, "q4_k", "blk.1.ffn_down.weight", 6, 171, 1e6f,
         "tensor 'blk.1.ffn_down.weight': row 6, element 171 = 1e+06 does not fit F16 (max 65504), the fallback of Q4_K "
         "for its row length"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char src[256], q[256], args[1024];
        snprintf(src, sizeof src, "%s/nonfinite%zu.gguf", dir, k);
        snprintf(q, sizeof q, "%s/nonfinite%zu-%s.gguf", dir, k, cases[k].type);
        if (!cases[k].stories) write_f32_llama(src, rng);
        write_patched(cases[k].stories ? stories : src, src, cases[k].tensor, cases[k].row, cases[k].elem, cases[k].v);
        snprintf(args, sizeof args, "quantize %s %s --type %s", src, q, cases[k].type);
        expect_code(args, 2, cases[k].want);
        char *hit = strstr(err, cases[k].want), *line = hit, head[300];
        while (line && line > err && line[-1] != '\n') line--;
        snprintf(head, sizeof head, "ats quantize: %s: ", src);
        CHECK_MSG(line && strncmp(line, head, strlen(head)) == 0 && strstr(hit, "(nothing written)\n"),
                  "a line naming the file: %s", err);
        FILE *o = fopen(q, "rb");
        CHECK_MSG(o == NULL, "%s written", q);
        if (o) fclose(o);
    }
}

int main(void)
{
    uint64_t rng = tu_seed("test_exec_cli");
    bin = getenv("ATS_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "test_exec_cli: ATS_BIN not set\n");
        return 1;
    }
    snprintf(dir, sizeof dir, "/tmp/ats_cli_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char json[256];
    snprintf(json, sizeof json, "%s/tiny-moe.json", dir);
    FILE *f = fopen(json, "w");
    fprintf(f, "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 256, \"intermediate_size\": 512,\n"
               " \"moe_intermediate_size\": 256, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,\n"
               " \"num_key_value_heads\": 2, \"head_dim\": 64, \"vocab_size\": 300, \"num_experts\": 8,\n"
               " \"num_experts_per_tok\": 2, \"shared_experts\": 1, \"shared_expert_intermediate_size\": 256,\n"
               " \"tie_word_embeddings\": false, \"qk_norm\": true, \"max_position_embeddings\": 128,\n"
               " \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-06, \"rope_type\": \"neox\",\n"
               " \"default_quant\": \"q4_k_m\", \"source\": \"test_exec_cli: a tiny qwen3moe\"}\n");
    fclose(f);
    unsigned long long seed = tu_rand(&rng) % 1000000;
    char args[4096];
    int code;
    snprintf(args, sizeof args, "run --model %s --dummy-weights --seed %llu --prompt-tokens 9 -n 12 --print-ids", json, seed);
    char *a = run(args, &code);
    CHECK(code == 0);
    int n_ids = 0;
    for (char *p = a; *p; p++) n_ids += (*p >= '0' && *p <= '9') && (p == a || p[-1] == ' ');
    CHECK_MSG(n_ids == 12, "expected 12 ids, got '%s'", a);
    const char *same[] = {"--split 1", "--threads 1", "--chunk 2", "--quant q4_k_m"};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "run --model %s --dummy-weights --seed %llu --prompt-tokens 9 -n 12 --print-ids %s", json,
                 seed, same[i]);
        char *b = run(args, &code);
        CHECK(code == 0);
        CHECK_MSG(strcmp(a, b) == 0, "%s changed the tokens: '%s' vs '%s'", same[i], a, b);
        free(b);
    }
    snprintf(args, sizeof args, "run --model %s --dummy-weights --seed %llu --prompt-tokens 9 -n 12 --print-ids --quant q8_0", json, seed);
    char *c = run(args, &code);
    CHECK(code == 0 && strlen(c) > 0);
    free(c);
    free(a);
    /* sampling on the real model: seeded */
    char model[1024];
    tu_shared_path(model, sizeof model, "models/stories260K/stories260K.gguf");
    snprintf(args, sizeof args, "run --model %s --temp 0.9 --top-k 40 --top-p 0.95 --seed %llu -n 60 -p 'Lily'", model, seed);
    char *s1 = run(args, &code);
    CHECK(code == 0 && strncmp(s1, "Lily", 4) == 0);
    char *s2 = run(args, &code);
    CHECK_MSG(strcmp(s1, s2) == 0, "same seed, different text");
    snprintf(args, sizeof args, "run --model %s --temp 0.9 --top-k 40 --top-p 0.95 --seed %llu -n 60 -p 'Lily'", model, seed + 1);
    char *s3 = run(args, &code);
    CHECK_MSG(strcmp(s1, s3) != 0, "another seed gave the same 60 tokens");
    free(s1); free(s2); free(s3);
    /* results file: prompt of 5 tokens in chunks of 2 → 3 prefill rounds, then 7 decode rounds */
    snprintf(args, sizeof args, "run --model %s -p 'Once upon a time' --chunk 2 -n 8 --out %s/r.h5 >/dev/null", model, dir);
    free(run(args, &code));
    CHECK(code == 0);
    snprintf(args, sizeof args, "%s/r.h5", dir);
    atsc_results_file *rf = NULL;
    ats_err rerr = {{0}};
    CHECK_MSG(atsc_results_read(args, &rf, &rerr) == ATS_OK, "%s", rerr.msg);
    if (rf) {
        CHECK(strcmp(rf->producer, "ats run") == 0 && rf->n_runs == 1);
        const atsc_results_run *r = &rf->runs[0];
        CHECK_MSG(r->n_rounds == 10, "rounds %zu", r->n_rounds);
        int ok = r->n_rounds == 10 && r->has_ops && r->n_ops % r->n_rounds == 0;
        for (size_t i = 0; ok && i < r->n_rounds; i++) {
            ok &= r->rounds[i].phase == (i < 3 ? 0 : 1) && r->rounds[i].tokens == (i < 2 ? 2 : 1);
            if (i) ok &= r->rounds[i].t_start_s >= r->rounds[i - 1].t_start_s + r->rounds[i - 1].latency_s;
        }
        size_t per = r->n_rounds ? r->n_ops / r->n_rounds : 0;
        for (size_t i = 0; ok && i < r->n_ops; i++) {
            ok &= r->ops[i].round == (int64_t)(i / per) && r->ops[i].op == (int32_t)(i % per);
            ok &= r->ops[i].t_end_s >= r->ops[i].t_start_s;
            if (i % per) ok &= r->ops[i].t_start_s >= r->ops[i - 1].t_end_s;
        }
        CHECK_MSG(ok, "rounds/ops tables not as expected (%zu rounds, %zu ops)", r->n_rounds, r->n_ops);
        CHECK_MSG(strcmp(r->name, "cpu") == 0 && strstr(rf->config_json, "\"backend\": \"cpu\""), "run '%s', config %s",
                  r->name, rf->config_json);
        atsc_results_file_free(rf);
    }
    /* a split run is named after both backends (',' is not allowed in a run name) */
    snprintf(args, sizeof args, "run --model %s -n 2 --backend cpu,cpu --split 1 --out %s/r2.h5 >/dev/null", model, dir);
    free(run(args, &code));
    CHECK(code == 0);
    snprintf(args, sizeof args, "%s/r2.h5", dir);
    rf = NULL;
    CHECK_MSG(atsc_results_read(args, &rf, &rerr) == ATS_OK, "%s", rerr.msg);
    if (rf) {
        CHECK_MSG(rf->n_runs == 1 && strcmp(rf->runs[0].name, "cpu+cpu") == 0 &&
                      strstr(rf->config_json, "\"backend\": \"cpu,cpu\""),
                  "split run: '%s', config %s", rf->n_runs ? rf->runs[0].name : "", rf->config_json);
        atsc_results_file_free(rf);
    }
    snprintf(args, sizeof args, "run --model %s -n 2 --out /nonexistent-dir/r.h5", model);
    expect_code(args, 2, "--out");
    test_quantize_kquants(&rng);
    test_quantize_non_finite(&rng, model);
    /* usage */
    expect_code("run --help", 0, NULL);
    expect_code("run", 2, "--model is required");
    expect_code("run --model x.gguf --temp -1", 2, "bad value");
    expect_code("run --model x.gguf --bogus", 2, NULL);
    snprintf(args, sizeof args, "run --model %s --dummy-weights --quant q9_9", json);
    expect_code(args, 2, "unknown recipe");
    snprintf(args, sizeof args, "run --model %s --split 9", model);
    expect_code(args, 2, "--split 9");
    expect_code("run --model no-such-model --dummy-weights", 2, "no-such-model");
    /* the models/NAME.json field, not the struct's */
    expect_code("run --model gpt-oss-20b --dummy-weights -n 1", 2, "model 'gpt-oss-20b': model_type 'gpt_oss' not supported");
    expect_code("quantize --help", 0, NULL);
    expect_code("quantize a.gguf", 2, "needs IN.gguf and OUT.gguf, got 1 file argument");
    expect_code("quantize --type q8_0 a.gguf b.gguf c.gguf", 2, "got 3 file arguments");
    expect_code("quantize a.gguf b.gguf", 2, "--type is required");
    expect_code("quantize --bogus a.gguf b.gguf", 2, "unknown or ambiguous option '--bogus'");
    /* OUT is checked as every output flag is: '-' wrote a file named '-'; an option-looking name after "--" */
    expect_code("quantize a.gguf - --type q8_0", 2, "ats quantize: OUT: '-' (standard input or output) is not accepted");
    expect_code("quantize --type q8_0 a.gguf -- -o.gguf", 2, "ats quantize: OUT: '-o.gguf' looks like an option");
    expect_code("run --n-predict 3", 2, "unknown or ambiguous option '--n-predict'");
    expect_code("run --model", 2, "--model: needs a value");
    snprintf(args, sizeof args, "quantize %s %s/o.gguf --type q5_1", model, dir);
    expect_code(args, 2, "expected q8_0, q4_0 or q4_k");
    snprintf(args, sizeof args, "quantize %s %s/o.gguf --type q8_0", json, dir);
    expect_code(args, 2, "bad magic");
    snprintf(args, sizeof args, "quantize %s %s/q.gguf --type q8_0", model, dir);
    expect_code(args, 0, "re-quantized");
    /* again: nothing changes, and the 5 matrices already F16 in the input did not "fall back" */
    snprintf(args, sizeof args, "quantize %s/q.gguf %s/q2.gguf --type q8_0", dir, dir);
    expect_code(args, 0, ": 0 of 48 tensors re-quantized");
    CHECK_MSG(!strstr(err, "note:"), "a fallback note for tensors left as they were: %s", err);
    /* stories260K's rows (64, 172) hold no Q4_K block: one note says how many fell back to what, and why */
    snprintf(args, sizeof args, "quantize %s %s/q.gguf --type q4_k", model, dir);
    expect_code(args, 0, "\nats quantize: note: 37 of 37 matrices fell back to another type: 31 Q4_K -> Q4_0 (row "
                         "length not a multiple of 256), 1 Q6_K (output head) -> Q8_0 (row length not a multiple of "
                         "256), 5 Q4_K -> F16 (row length not a multiple of 256 nor of 32)\n");
    const char *note = strstr(err, "note:");
    CHECK_MSG(note && !strstr(note + 1, "note:"), "one note expected: %s", err);
    /* a Q4_0 file (head at Q8_0) asked for q4_k: every matrix already has the type the fallbacks give it;
       "0 of 48" alone did not say why the output holds no Q4_K */
    snprintf(args, sizeof args, "quantize %s %s/n4.gguf --type q4_0", model, dir);
    expect_code(args, 0, "re-quantized");
    snprintf(args, sizeof args, "quantize %s/n4.gguf %s/n4k.gguf --type q4_k", dir, dir);
    expect_code(args, 0, ": 0 of 48 tensors re-quantized");
    CHECK_MSG(strstr(err, "\nats quantize: note: no tensor re-quantized: every matrix already has the type --type q4_k "
                          "gives it here: 31 Q4_K -> Q4_0 (row length not a multiple of 256), 1 Q6_K (output head) -> "
                          "Q8_0 (row length not a multiple of 256), 5 Q4_K -> F16 (row length not a multiple of 256 "
                          "nor of 32)\n"), "no note saying why nothing changed: %s", err);
    /* a --pure Q4_0 file re-quantized to q4_0: its Q4_0 head stays Q4_0 (it became Q8_0: the file grew) */
    snprintf(args, sizeof args, "quantize %s %s/p4.gguf --type q4_0 --pure", model, dir);
    expect_code(args, 0, "re-quantized");
    snprintf(args, sizeof args, "quantize %s/p4.gguf %s/p4b.gguf --type q4_0", dir, dir);
    expect_code(args, 0, ": 0 of 48 tensors re-quantized");
    CHECK_MSG(strstr(err, "\nats quantize: note: 1 output head kept as Q4_0 (already quantized; --pure re-quantizes it)\n"),
              "no note on the kept head: %s", err);
    snprintf(args, sizeof args, "%s/p4b.gguf", dir);
    ex_gguf *g = NULL;
    ats_err gerr = {{0}};
    CHECK_MSG(ex_gguf_open(args, &g, &gerr) == ATS_OK, "%s", gerr.msg);
    const ex_gguf_tensor *ho = g ? ex_gguf_find_tensor(g, "output.weight") : NULL;
    CHECK_MSG(ho && ho->type == ATS_Q_Q4_0, "output head %s", ho ? ats_qtype_name(ho->type) : "missing");
    ex_gguf_free(g);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    CHECK(system(args) == 0);
    return tu_finish("test_exec_cli");
}
