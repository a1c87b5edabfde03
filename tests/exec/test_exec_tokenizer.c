/*
 * test_exec_tokenizer — the byte-level BPE tokenizer ("gpt2" vocabularies: Llama-3, Qwen) on a
 * synthetic GGUF vocabulary written here: the 256 byte-alphabet symbols plus a few merges; BPE
 * applies merges by rank within pre-tokens, BOS follows tokenizer.ggml.add_bos_token, and
 * decode(encode(text)) == text for fresh random byte strings (seed printed), including control
 * bytes, newlines and multi-byte UTF-8. (The SentencePiece path is tested on stories260K in
 * test_exec_golden.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ex/gguf.h"
#include "ex/tokenizer.h"
#include "testutil.h"

typedef struct buf { uint8_t *p; size_t n, cap; } buf;
static void put(buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) { b->cap = (b->n + n) * 2 + 64; b->p = realloc(b->p, b->cap); }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) { put_u64(b, strlen(s)); put(b, s, strlen(s)); }

static size_t utf8(char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 63));
    return 2;
}

int main(void)
{
    uint64_t rng = tu_seed("test_exec_tokenizer");
    /* GPT-2 byte alphabet */
    unsigned b2u[256];
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int pr = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        b2u[b] = pr ? (unsigned)b : (unsigned)next++;
    }
    const char *extra[] = {"he", "\xC4\xA0t", "\xC4\xA0the", "\xC4\xA0\x63", "at", "\xC4\xA0\x63\x61\x74", "<|begin_of_text|>"};
    const char *merges[] = {"h e", "\xC4\xA0 t", "\xC4\xA0t he", "\xC4\xA0 c", "a t", "\xC4\xA0\x63\x20\x61\x74"};
    int n_tok = 256 + 7, n_merge = 6;
    buf kv[5] = {{0}};
    put_str(&kv[0], "tokenizer.ggml.model"); put_u32(&kv[0], EX_GGUF_STRING); put_str(&kv[0], "gpt2");
    put_str(&kv[1], "tokenizer.ggml.tokens"); put_u32(&kv[1], EX_GGUF_ARRAY); put_u32(&kv[1], EX_GGUF_STRING);
    put_u64(&kv[1], (uint64_t)n_tok);
    for (int b = 0; b < 256; b++) {
        char s[4];
        size_t l = utf8(s, b2u[b]);
        put_u64(&kv[1], l);
        put(&kv[1], s, l);
    }
    for (int i = 0; i < 7; i++) put_str(&kv[1], extra[i]);
    put_str(&kv[2], "tokenizer.ggml.merges"); put_u32(&kv[2], EX_GGUF_ARRAY); put_u32(&kv[2], EX_GGUF_STRING);
    put_u64(&kv[2], (uint64_t)n_merge);
    for (int i = 0; i < n_merge; i++) put_str(&kv[2], merges[i]);
    put_str(&kv[3], "tokenizer.ggml.bos_token_id"); put_u32(&kv[3], EX_GGUF_U32); put_u32(&kv[3], 262);
    put_str(&kv[4], "tokenizer.ggml.add_bos_token"); put_u32(&kv[4], EX_GGUF_BOOL); put(&kv[4], "\x01", 1);
    const void *kvp[5];
    size_t kvl[5];
    for (int i = 0; i < 5; i++) { kvp[i] = kv[i].p; kvl[i] = kv[i].n; }
    char path[] = "/tmp/ats_tok_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    ats_err err = {{0}};
    CHECK(ex_gguf_write(path, 5, kvp, kvl, 0, NULL, 32, &err) == ATS_OK);
    ex_gguf *g = NULL;
    CHECK_MSG(ex_gguf_open(path, &g, &err) == ATS_OK, "%s", err.msg);
    ex_tokenizer *t = NULL;
    if (g) CHECK_MSG(ex_tokenizer_from_gguf(g, &t, &err) == ATS_OK, "%s", err.msg);
    ex_gguf_free(g);
    unlink(path);
    for (int i = 0; i < 5; i++) free(kv[i].p);
    if (!t) return tu_finish("test_exec_tokenizer");
    int32_t ids[4096];
    int64_t n;
    /* "the cat": pre-tokens "the", " cat"; merges by rank: t|he, then Ġc → Ġc|at → Ġcat */
    CHECK(ex_tokenizer_encode(t, "the cat", 1, ids, 4096, &n) == ATS_OK);
    int32_t want[] = {262, 't', 256, 261};
    CHECK_MSG(n == 4 && memcmp(ids, want, sizeof want) == 0, "n %lld: %d %d %d %d", (long long)n, ids[0], ids[1], ids[2], ids[3]);
    CHECK(ex_tokenizer_encode(t, " the", 0, ids, 4096, &n) == ATS_OK && n == 1 && ids[0] == 258);
    char out[8192], piece[256];
    /* round trips on fresh random byte strings */
    for (int rep = 0; rep < 200; rep++) {
        char text[512];
        int len = 1 + (int)(tu_rand(&rng) % 300);
        for (int i = 0; i < len; i++) {
            uint64_t r = tu_rand(&rng) % 10;
            text[i] = r < 4 ? (char)('a' + tu_rand(&rng) % 26) : r < 6 ? ' ' : r < 7 ? '\n' : (char)(1 + tu_rand(&rng) % 255);
        }
        text[len] = 0;
        CHECK(ex_tokenizer_encode(t, text, 1, ids, 4096, &n) == ATS_OK);
        size_t o = 0;
        for (int64_t i = 0; i < n; i++) {
            size_t k = ex_tokenizer_decode(t, i ? ids[i - 1] : -1, ids[i], piece, sizeof piece);
            memcpy(out + o, piece, k);
            o += k;
        }
        out[o] = 0;
        CHECK_MSG(o == (size_t)len && memcmp(out, text, (size_t)len) == 0, "round trip failed (len %d -> %zu)", len, o);
    }
    CHECK(ex_tokenizer_encode(t, "the cat", 1, ids, 2, &n) == ATS_ERANGE && n == 4);
    ex_tokenizer_free(t);
    return tu_finish("test_exec_tokenizer");
}
