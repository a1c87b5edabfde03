/*
 * test_exec_gguf_bad — bad inputs give one clear message and exit code 2, never a crash.
 * A tiny valid llama GGUF is written with ex_gguf_write (fresh random weights, seed printed), then
 * broken one way at a time: truncated (several cut points), bad magic, unknown version, tensor offset
 * outside the file, unknown quant type, a missing tensor, a shape mismatch, bad metadata, block_count
 * smaller than the file's blk.N layers (refused, naming the first tensor outside) or larger; messages
 * name the GGUF keys behind a number (llama.attention.head_count_kv, not n_head_kv); plus a
 * prompt longer than the context on the real stories260K. Each case is checked in-process
 * (ex_gguf_open / ex_model_load_gguf status and message) and through the `ats` binary ($ATS_BIN):
 * exit code 2 and one stderr line naming the file and the offending field.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ex/gguf.h"
#include "ex/model.h"
#include "ex/quant.h"
#include "testutil.h"

static uint64_t rng;
static char dir[64];

static size_t kv_str(uint8_t *p, const char *key, const char *val)
{
    uint64_t n = strlen(key), m = strlen(val);
    uint32_t t = EX_GGUF_STRING;
    memcpy(p, &n, 8);
    memcpy(p + 8, key, n);
    memcpy(p + 8 + n, &t, 4);
    memcpy(p + 12 + n, &m, 8);
    memcpy(p + 20 + n, val, m);
    return 20 + n + m;
}

static size_t kv_f32(uint8_t *p, const char *key, float v)
{
    uint64_t n = strlen(key);
    uint32_t t = EX_GGUF_F32;
    memcpy(p, &n, 8);
    memcpy(p + 8, key, n);
    memcpy(p + 8 + n, &t, 4);
    memcpy(p + 12 + n, &v, 4);
    return 16 + n;
}

enum { DROP_NONE = 0, DROP_ATTN_K = 1, BAD_SHAPE = 2, BAD_HEADS = 3, EXTRA_LAYERS = 4, MISSING_LAYER = 5, BAD_KV_HEADS = 6,
       BAD_ROT = 7, BAD_BOS = 8, BAD_EOS = 9, HEAD_DIM_1 = 10 };

/* Writes a 1-layer llama (n_embd 32, 2 heads, 1 KV head, n_ff 64, vocab 40) to path. EXTRA_LAYERS:
 * block_count 1 but the tensors of layers 0, 2 and 1 (in that order); MISSING_LAYER: block_count 2,
 * the tensors of layer 0 only. BAD_KV_HEADS: 3 KV heads for 2 heads; BAD_ROT: key_length 16 and an odd
 * rope.dimension_count 7; BAD_BOS: bos_token_id 40 (vocab 40); BAD_EOS: an F32 eos_token_id; HEAD_DIM_1: 32 heads, 16 KV heads. */
static void write_model(const char *path, int variant)
{
    static uint8_t kvbuf[12][256];
    const void *kv[12];
    size_t kl[12];
    int nk = 0;
    kl[nk] = kv_str(kvbuf[nk], "general.architecture", "llama"); nk++;
    kl[nk] = ex_gguf_kv_u32(kvbuf[nk], "llama.embedding_length", 32); nk++;
    kl[nk] = ex_gguf_kv_u32(kvbuf[nk], "llama.block_count", variant == MISSING_LAYER ? 2 : 1); nk++;
    kl[nk] = ex_gguf_kv_u32(kvbuf[nk], "llama.attention.head_count", variant == BAD_HEADS ? 3 : variant == HEAD_DIM_1 ? 32 : 2); nk++;
    kl[nk] = ex_gguf_kv_u32(kvbuf[nk], "llama.attention.head_count_kv", variant == BAD_KV_HEADS ? 3 : variant == HEAD_DIM_1 ? 16 : 1); nk++;
    kl[nk] = ex_gguf_kv_u32(kvbuf[nk], "llama.feed_forward_length", 64); nk++;
    kl[nk] = ex_gguf_kv_u32(kvbuf[nk], "llama.context_length", 64); nk++;
    kl[nk] = kv_f32(kvbuf[nk], "llama.attention.layer_norm_rms_epsilon", 1e-5f); nk++;
    if (variant == BAD_BOS) { kl[nk] = ex_gguf_kv_u32(kvbuf[nk], "tokenizer.ggml.bos_token_id", 40); nk++; }
    if (variant == BAD_EOS) { kl[nk] = kv_f32(kvbuf[nk], "tokenizer.ggml.eos_token_id", 2.0f); nk++; }
    if (variant == BAD_ROT) {
        kl[nk] = ex_gguf_kv_u32(kvbuf[nk], "llama.attention.key_length", 16); nk++;
        kl[nk] = ex_gguf_kv_u32(kvbuf[nk], "llama.rope.dimension_count", 7); nk++;
    }
    for (int i = 0; i < nk; i++) kv[i] = kvbuf[i];
    struct { const char *name; int nd; int64_t ne0, ne1; ats_qtype t; } T[] = {
        {"token_embd.weight", 2, 32, 40, ATS_Q_Q8_0}, {"output_norm.weight", 1, 32, 1, ATS_Q_F32},
        {"blk.0.attn_norm.weight", 1, 32, 1, ATS_Q_F32}, {"blk.0.attn_q.weight", 2, 32, 32, ATS_Q_Q4_0},
        {"blk.0.attn_k.weight", 2, 32, variant == BAD_SHAPE ? 32 : 16, ATS_Q_Q8_0},
        {"blk.0.attn_v.weight", 2, 32, 16, ATS_Q_F16}, {"blk.0.attn_output.weight", 2, 32, 32, ATS_Q_Q8_0},
        {"blk.0.ffn_norm.weight", 1, 32, 1, ATS_Q_F32}, {"blk.0.ffn_gate.weight", 2, 32, 64, ATS_Q_Q4_0},
        {"blk.0.ffn_up.weight", 2, 32, 64, ATS_Q_Q4_0}, {"blk.0.ffn_down.weight", 2, 64, 32, ATS_Q_BF16},
    };
    int nt = (int)(sizeof T / sizeof T[0]);
    ex_gguf_out_tensor ot[48];
    static char names[48][64];
    int n = 0;
    const int layers[] = {0, 2, 1};
    for (int j = 0; j < (variant == EXTRA_LAYERS ? 3 : 1) * nt; j++) {
        int i = j % nt, in_blk = strncmp(T[i].name, "blk.0.", 6) == 0;
        if (variant == DROP_ATTN_K && strcmp(T[i].name, "blk.0.attn_k.weight") == 0) continue;
        if (j >= nt && !in_blk) continue; /* the layers again, not the global tensors */
        if (in_blk) snprintf(names[n], sizeof names[n], "blk.%d.%s", layers[j / nt], T[i].name + 6);
        else snprintf(names[n], sizeof names[n], "%s", T[i].name);
        int64_t cnt = T[i].ne0 * T[i].ne1;
        float *f = malloc((size_t)cnt * sizeof *f);
        for (int64_t j = 0; j < cnt; j++) f[j] = (float)tu_uniform(&rng, -0.5, 0.5) + (T[i].nd == 1 ? 1.0f : 0.0f);
        uint64_t rb;
        ats_qtype_bytes(T[i].t, T[i].ne0, &rb);
        uint8_t *q = malloc((size_t)(rb * (uint64_t)T[i].ne1));
        for (int64_t r = 0; r < T[i].ne1; r++) ex_quantize_row(T[i].t, f + r * T[i].ne0, q + r * rb, T[i].ne0);
        free(f);
        ot[n] = (ex_gguf_out_tensor){names[n], (uint32_t)T[i].nd, {T[i].ne0, T[i].ne1, 1, 1}, T[i].t, q, rb * (uint64_t)T[i].ne1};
        n++;
    }
    ats_err err;
    CHECK(ex_gguf_write(path, nk, kv, kl, n, ot, 32, &err) == ATS_OK);
    for (int i = 0; i < n; i++) free((void *)ot[i].data);
}

static uint8_t *load(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len);
    CHECK(fread(b, 1, *len, f) == *len);
    fclose(f);
    return b;
}

static void save(const char *path, const uint8_t *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, len, f);
    fclose(f);
}

/* offset of the tensor info field after the name `name` (n_dims at +0) */
static size_t info_pos(const uint8_t *b, size_t len, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 8; i + n < len; i++)
        if (memcmp(b + i, name, n) == 0) {
            uint64_t l;
            memcpy(&l, b + i - 8, 8);
            if (l == n) return i + n;
        }
    return 0;
}

/* Runs `ats run --model path` and checks exit 2 and a message containing `want` and the file. */
static void expect_cli(const char *path, const char *extra, const char *want)
{
    const char *bin = getenv("ATS_BIN");
    if (!bin || !*bin) return;
    char cmd[2048], errf[1024];
    snprintf(errf, sizeof errf, "%s/stderr.txt", dir);
    snprintf(cmd, sizeof cmd, "'%s' run --model '%s' -n 2 %s >/dev/null 2>'%s'", bin, path, extra, errf);
    int st = system(cmd);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    size_t len = 0;
    uint8_t *e = load(errf, &len);
    char *msg = calloc(1, len + 1);
    memcpy(msg, e, len);
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += msg[i] == '\n';
    CHECK_MSG(code == 2, "%s: exit code %d (want 2); stderr: %s", path, code, msg);
    CHECK_MSG(strstr(msg, want) != NULL, "%s: message lacks '%s': %s", path, want, msg);
    CHECK_MSG(lines == 1, "%s: %d stderr lines (want one): %s", path, lines, msg);
    fprintf(stderr, "  ok: %s", msg);
    free(msg);
    free(e);
}

static void expect_open_fail(const char *path, const char *want)
{
    ex_gguf *g = NULL;
    ats_err err = {{0}};
    enum ats_status st = ex_gguf_open(path, &g, &err);
    CHECK_MSG(st == ATS_EINVAL && g == NULL, "%s: status %d", path, (int)st);
    CHECK_MSG(strstr(err.msg, want) != NULL && strstr(err.msg, path) != NULL, "message '%s' lacks '%s' or the path", err.msg, want);
    expect_cli(path, "", want);
}

/* Non-finite weights (a file that parses and loads): --check-tensors (ex_model_check_tensors) names the
 * first bad tensor, row and element, exit 2; without it the run stops at the first step whose logits
 * are not finite, exit 1 (greedy picked token 0 for ever). An F32 norm element, then a Q8_0 block scale. */
static void test_non_finite(const uint8_t *good, size_t len)
{
    static const struct { const char *tensor; int64_t row, elem; uint16_t f16; const char *want; } cases[] = {
        {"blk.0.attn_norm.weight", 0, 5, 0, "tensor 'blk.0.attn_norm.weight' (F32): NaN or Inf in row 0, element 5"},
        {"blk.0.attn_output.weight", 3, 0, 0x7c00 /* +Inf as F16: the block's d */,
         "tensor 'blk.0.attn_output.weight' (Q8_0): NaN or Inf in row 3, element 0"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint8_t *buf = malloc(len);
        memcpy(buf, good, len);
        ex_gguf *g = NULL;
        ats_err err = {{0}};
        CHECK_MSG(ex_gguf_open_mem(buf, len, "good", &g, &err) == ATS_OK, "%s", err.msg);
        const ex_gguf_tensor *t = g ? ex_gguf_find_tensor(g, cases[k].tensor) : NULL;
        CHECK(t != NULL);
        if (!t) { ex_gguf_free(g); free(buf); continue; }
        uint64_t rb;
        ats_qtype_bytes(t->type, t->ne[0], &rb);
        uint8_t *at = (uint8_t *)t->data + cases[k].row * rb;
        if (t->type == ATS_Q_F32) {
            const float nan = NAN;
            memcpy(at + 4 * cases[k].elem, &nan, 4);
        } else {
            memcpy(at, &cases[k].f16, 2);
        }
        ex_gguf_free(g);
        char p[300];
        snprintf(p, sizeof p, "%s/nonfinite%zu.gguf", dir, k);
        save(p, buf, len);
        free(buf);
        ex_model *m = NULL;
        CHECK_MSG(ex_model_load_gguf(p, &m, &err) == ATS_OK, "%s", err.msg);
        if (m) {
            enum ats_status st = ex_model_check_tensors(m, 2, &err);
            CHECK_MSG(st == ATS_EINVAL && strstr(err.msg, cases[k].want), "check: status %d, '%s' (want '%s')", (int)st,
                      err.msg, cases[k].want);
            ex_model_free(m);
        }
        expect_cli(p, "--check-tensors", cases[k].want);
        const char *bin = getenv("ATS_BIN");
        if (bin && *bin) {
            char cmd[3072], errf[400];
            snprintf(errf, sizeof errf, "%s/nf.txt", dir);
            char outf[400], txt[400];
            snprintf(outf, sizeof outf, "%s/nf.h5", dir);
            snprintf(txt, sizeof txt, "%s/nf-out.txt", dir);
            snprintf(cmd, sizeof cmd, "'%s' run --model '%s' -n 4 --out '%s' >'%s' 2>'%s'", bin, p, outf, txt, errf);
            int st = system(cmd);
            size_t el = 0;
            uint8_t *e = load(errf, &el);
            char *msg = calloc(1, el + 1);
            memcpy(msg, e, el);
            CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(msg, "step 0: ") &&
                          strstr(msg, "logits are NaN or Inf"), "run without --check-tensors: status %#x: %s", st, msg);
            /* --out is not left half-written, and says so; stdout's line ends once (no blank line after) */
            CHECK_MSG(strstr(msg, "not written (the run failed") && access(outf, F_OK) != 0, "--out after the stop: %s",
                      msg);
            size_t tl = 0;
            uint8_t *t = load(txt, &tl);
            CHECK_MSG(tl >= 1 && t[tl - 1] == '\n' && (tl < 2 || t[tl - 2] != '\n'), "stdout after the stop: %zu bytes",
                      tl);
            free(t);
            free(msg);
            free(e);
        }
    }
    /* the good file passes the scan */
    char p[300];
    snprintf(p, sizeof p, "%s/good.gguf", dir);
    ex_model *m = NULL;
    ats_err err = {{0}};
    CHECK_MSG(ex_model_load_gguf(p, &m, &err) == ATS_OK && ex_model_check_tensors(m, 2, &err) == ATS_OK, "%s", err.msg);
    ex_model_free(m);
}

int main(void)
{
    rng = tu_seed("test_exec_gguf_bad");
    snprintf(dir, sizeof dir, "/tmp/ats_bad_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char good[256], p[256];
    snprintf(good, sizeof good, "%s/good.gguf", dir);
    write_model(good, DROP_NONE);
    /* the valid file loads and runs */
    ex_model *m = NULL;
    ats_err err = {{0}};
    CHECK_MSG(ex_model_load_gguf(good, &m, &err) == ATS_OK, "%s", err.msg);
    ex_model_free(m);
    const char *bin = getenv("ATS_BIN");
    if (bin && *bin) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' run --model '%s' -n 4 >/dev/null 2>&1", bin, good);
        int st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    size_t len;
    uint8_t *b = load(good, &len);
    uint8_t *c = malloc(len);

    /* truncated at several points: header, metadata, tensor infos, data */
    size_t cuts[] = {3, 20, 60, info_pos(b, len, "blk.0.attn_q.weight"), len / 2, len - 1};
    const char *cut_want[] = {"truncated", "truncated", "metadata", "truncated", "outside the data section", "outside the data section"};
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "%s/trunc%d.gguf", dir, i);
        save(p, b, cuts[i]);
        expect_open_fail(p, cut_want[i]);
    }
    snprintf(p, sizeof p, "%s/empty.gguf", dir);
    save(p, b, 0);
    expect_open_fail(p, "truncated");
    /* bad magic */
    memcpy(c, b, len);
    memcpy(c, "GGML", 4);
    snprintf(p, sizeof p, "%s/magic.gguf", dir);
    save(p, c, len);
    expect_open_fail(p, "bad magic");
    /* unknown version */
    memcpy(c, b, len);
    uint32_t v = 7;
    memcpy(c + 4, &v, 4);
    snprintf(p, sizeof p, "%s/version.gguf", dir);
    save(p, c, len);
    expect_open_fail(p, "unknown GGUF version 7");
    /* offset outside the file */
    size_t ip = info_pos(b, len, "blk.0.ffn_down.weight");
    CHECK(ip > 0);
    memcpy(c, b, len);
    uint64_t off = 1ull << 30;
    memcpy(c + ip + 4 + 16 + 4, &off, 8);
    snprintf(p, sizeof p, "%s/offset.gguf", dir);
    save(p, c, len);
    expect_open_fail(p, "outside the data section");
    /* misaligned offset */
    memcpy(c, b, len);
    off = 8;
    memcpy(c + ip + 4 + 16 + 4, &off, 8);
    snprintf(p, sizeof p, "%s/misaligned.gguf", dir);
    save(p, c, len);
    expect_open_fail(p, "not a multiple of the alignment");
    /* unknown quant types: Q4_1 (3, valid ggml, not supported) and 200 */
    uint32_t bad_types[] = {3, 200};
    for (int i = 0; i < 2; i++) {
        memcpy(c, b, len);
        memcpy(c + ip + 4 + 16, &bad_types[i], 4);
        snprintf(p, sizeof p, "%s/type%u.gguf", dir, bad_types[i]);
        save(p, c, len);
        expect_open_fail(p, "unknown or unsupported quant type id");
    }
    /* n_dims = 9 */
    memcpy(c, b, len);
    v = 9;
    memcpy(c + ip, &v, 4);
    snprintf(p, sizeof p, "%s/ndims.gguf", dir);
    save(p, c, len);
    expect_open_fail(p, "n_dims = 9");
    /* huge tensor count */
    memcpy(c, b, len);
    uint64_t big = 1ull << 60;
    memcpy(c + 8, &big, 8);
    snprintf(p, sizeof p, "%s/count.gguf", dir);
    save(p, c, len);
    expect_open_fail(p, "tensor_count");
    /* missing tensor, shape mismatch, inconsistent hyper-parameters, layers: parse fine, model load fails */
    struct { int variant; const char *want; } mv[] = {
        {DROP_ATTN_K, "tensor 'blk.0.attn_k.weight' missing (architecture llama needs it)"},
        /* messages name the GGUF keys the numbers came from (not struct fields or config.json keys) */
        {BAD_SHAPE, "tensor 'blk.0.attn_k.weight': shape [32, 32, 1] but the metadata needs [32, 16, 1] (ne[1] = "
                    "llama.attention.head_count_kv x head dim (llama.embedding_length / llama.attention.head_count))"},
        {BAD_HEADS, "tensor 'blk.0.attn_q.weight': shape [32, 32, 1] but the metadata needs [32, 30, 1] (ne[1] = "
                    "llama.attention.head_count x head dim (llama.embedding_length / llama.attention.head_count))"},
        {BAD_KV_HEADS, "hyper-parameters from metadata: 'llama.attention.head_count_kv': 3 (must divide "
                       "llama.attention.head_count 2)"},
        {BAD_ROT, "metadata 'llama.rope.dimension_count' = 7 (must be even, 2..16 = head dim (llama.attention.key_length))"},
        /* a BOS id outside the vocabulary of 40 read as "the vocabulary has no BOS token" */
        {BAD_BOS, "metadata 'tokenizer.ggml.bos_token_id' = 40 is outside the vocabulary (0..39)"},
        {BAD_EOS, "metadata 'tokenizer.ggml.eos_token_id' is not an integer"},
        /* 32 heads of 32 values: head dim 1 (the message said "must be even, 2..1") */
        {HEAD_DIM_1, "head dim 1 (llama.embedding_length / llama.attention.head_count) is below 2"},
        /* more blk.N groups than block_count: refused (the extra layers were silently ignored), naming
         * the lowest layer outside it even when a higher one comes first in the file */
        {EXTRA_LAYERS, "tensor 'blk.1.attn_norm.weight' is in layer 1, outside metadata 'llama.block_count' = 1 "
                       "(the file has tensors up to layer 2"},
        /* fewer: the first missing tensor, and the key that asks for it */
        {MISSING_LAYER, "tensor 'blk.1.attn_norm.weight' missing: the file has no tensor of layer 1 but metadata "
                        "'llama.block_count' = 2 asks for layers 0..1"},
    };
    for (int i = 0; i < (int)(sizeof mv / sizeof mv[0]); i++) {
        snprintf(p, sizeof p, "%s/model%d.gguf", dir, i);
        write_model(p, mv[i].variant);
        m = NULL;
        enum ats_status st = ex_model_load_gguf(p, &m, &err);
        CHECK_MSG(st == ATS_EINVAL && m == NULL, "variant %d: status %d (want EINVAL)", mv[i].variant, (int)st);
        if (m) ex_model_free(m);
        CHECK_MSG(strstr(err.msg, mv[i].want) != NULL, "message '%s' lacks '%s'", err.msg, mv[i].want);
        expect_cli(p, "", mv[i].want);
    }
    /* a file that does not exist */
    snprintf(p, sizeof p, "%s/nonexistent.gguf", dir);
    expect_cli(p, "", "cannot open");
    /* prompt longer than the context */
    char real[1024];
    tu_shared_path(real, sizeof real, "models/stories260K/stories260K.gguf");
    expect_cli(real, "--ctx 8 -p 'Once upon a time there was a little girl named Lily who loved to play'",
               "longer than the context");
    test_non_finite(b, len);
    free(b);
    free(c);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return tu_finish("test_exec_gguf_bad");
}
