/* SentencePiece-style BPE tokenizer from GGUF metadata (llama2.c's encode/decode, GGUF spelling). */
#include "ex/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SP_SPACE "\xE2\x96\x81" /* U+2581 */

typedef struct piece {
    char *s;
    size_t len;
    float score;
    int type; /* GGUF token type: 1 normal, 2 unknown, 3 control, 6 byte */
} piece;

struct ex_tokenizer {
    int64_t n;
    piece *v;
    int32_t *sorted; /* ids sorted by string */
    int32_t bos, eos;
    int32_t byte_id[256];
};

static int cmp_str(const char *a, size_t an, const char *b, size_t bn)
{
    size_t m = an < bn ? an : bn;
    int c = memcmp(a, b, m);
    if (c) return c;
    return an < bn ? -1 : an > bn;
}

static int cmp_ids(const void *x, const void *y, void *ctx)
{
    const ex_tokenizer *t = ctx;
    const piece *a = &t->v[*(const int32_t *)x], *b = &t->v[*(const int32_t *)y];
    return cmp_str(a->s, a->len, b->s, b->len);
}

static int32_t lookup(const ex_tokenizer *t, const char *s, size_t len)
{
    int64_t lo = 0, hi = t->n - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        const piece *p = &t->v[t->sorted[mid]];
        int c = cmp_str(p->s, p->len, s, len);
        if (c == 0) return t->sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

void ex_tokenizer_free(ex_tokenizer *t)
{
    if (!t) return;
    if (t->v)
        for (int64_t i = 0; i < t->n; i++) free(t->v[i].s);
    free(t->v);
    free(t->sorted);
    free(t);
}

int64_t ex_tokenizer_n_vocab(const ex_tokenizer *t) { return t->n; }

static int parse_byte(const char *s, size_t len)
{
    unsigned v;
    char tmp[8];
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    memcpy(tmp, s + 3, 2);
    tmp[2] = 0;
    if (sscanf(tmp, "%2x", &v) != 1) return -1;
    return (int)v;
}

enum ats_status ex_tokenizer_from_gguf(const ex_gguf *g, ex_tokenizer **out, ats_err *err)
{
    const char *P = ex_gguf_path(g);
    ex_gguf_vtype et;
    uint64_t n;
    enum ats_status st = ex_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, err);
    if (st == ATS_ENOTFOUND)
        return ats_err_set(err, ATS_EINVAL, "%s: metadata 'tokenizer.ggml.tokens' missing (no vocabulary)", P);
    if (st != ATS_OK) return st;
    if (et != EX_GGUF_STRING || n == 0 || n > (1u << 24))
        return ats_err_set(err, ATS_EINVAL, "%s: metadata 'tokenizer.ggml.tokens': %llu elements of type %u "
                           "(expected 1..2^24 strings)", P, (unsigned long long)n, et);
    ex_gguf_vtype st_t, tt_t;
    uint64_t ns = 0, ntt = 0;
    int has_scores = ex_gguf_get_arr(g, "tokenizer.ggml.scores", &st_t, &ns, NULL) == ATS_OK;
    int has_types = ex_gguf_get_arr(g, "tokenizer.ggml.token_type", &tt_t, &ntt, NULL) == ATS_OK;
    if (has_scores && ns != n)
        return ats_err_set(err, ATS_EINVAL, "%s: metadata 'tokenizer.ggml.scores': %llu entries, expected %llu",
                           P, (unsigned long long)ns, (unsigned long long)n);
    if (has_types && ntt != n)
        return ats_err_set(err, ATS_EINVAL, "%s: metadata 'tokenizer.ggml.token_type': %llu entries, expected %llu",
                           P, (unsigned long long)ntt, (unsigned long long)n);
    ex_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ATS_ENOMEM;
    t->n = (int64_t)n;
    t->v = calloc(n, sizeof *t->v);
    t->sorted = malloc(n * sizeof *t->sorted);
    if (!t->v || !t->sorted) {
        ex_tokenizer_free(t);
        return ATS_ENOMEM;
    }
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        double d = 0;
        ex_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s, &len);
        t->v[i].s = malloc(len + 1);
        if (!t->v[i].s) {
            ex_tokenizer_free(t);
            return ATS_ENOMEM;
        }
        memcpy(t->v[i].s, s, len);
        t->v[i].s[len] = 0;
        t->v[i].len = len;
        if (has_scores && ex_gguf_arr_num(g, "tokenizer.ggml.scores", i, &d) == ATS_OK) t->v[i].score = (float)d;
        t->v[i].type = 1;
        if (has_types && ex_gguf_arr_num(g, "tokenizer.ggml.token_type", i, &d) == ATS_OK) t->v[i].type = (int)d;
        int b = parse_byte(s, len);
        if (b >= 0 && (t->v[i].type == 6 || !has_types) && t->byte_id[b] < 0) t->byte_id[b] = (int32_t)i;
        t->sorted[i] = (int32_t)i;
    }
    qsort_r(t->sorted, n, sizeof *t->sorted, cmp_ids, t);
    int64_t v;
    t->bos = ex_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v, NULL) == ATS_OK && v >= 0 && v < (int64_t)n ? (int32_t)v : -1;
    t->eos = ex_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v, NULL) == ATS_OK && v >= 0 && v < (int64_t)n ? (int32_t)v : -1;
    *out = t;
    return ATS_OK;
}

static size_t utf8_len(unsigned char c)
{
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 1;
}

enum ats_status ex_tokenizer_encode(const ex_tokenizer *t, const char *text, int add_bos,
                                    int32_t *tokens, int64_t cap, int64_t *n_out)
{
    size_t tl = strlen(text);
    /* normalised text: dummy prefix + spaces as U+2581 */
    char *norm = malloc(3 * tl + 4);
    int32_t *ids = malloc((4 * tl + 2) * sizeof *ids);
    if (!norm || !ids) {
        free(norm);
        free(ids);
        return ATS_ENOMEM;
    }
    size_t nl = 0;
    int64_t n = 0;
    if (add_bos && t->bos >= 0) ids[n++] = t->bos;
    if (tl > 0) {
        memcpy(norm, SP_SPACE, 3);
        nl = 3;
    }
    for (size_t i = 0; i < tl; i++) {
        if (text[i] == ' ') {
            memcpy(norm + nl, SP_SPACE, 3);
            nl += 3;
        } else {
            norm[nl++] = text[i];
        }
    }
    for (size_t i = 0; i < nl;) {
        size_t cl = utf8_len((unsigned char)norm[i]);
        if (i + cl > nl) cl = nl - i;
        int32_t id = lookup(t, norm + i, cl);
        if (id >= 0) {
            ids[n++] = id;
        } else {
            for (size_t j = 0; j < cl; j++) {
                int32_t b = t->byte_id[(unsigned char)norm[i + j]];
                if (b >= 0) ids[n++] = b; /* no byte token: the byte is dropped */
            }
        }
        i += cl;
    }
    /* merges: best-scoring adjacent pair present in the vocabulary */
    char *buf = malloc(2 * 64 + 1);
    for (;;) {
        float best = -1e30f;
        int64_t bi = -1;
        int32_t bid = -1;
        int64_t start = (add_bos && t->bos >= 0) ? 1 : 0;
        for (int64_t i = start; i + 1 < n; i++) {
            const piece *a = &t->v[ids[i]], *b = &t->v[ids[i + 1]];
            if (a->len + b->len > 128) continue;
            memcpy(buf, a->s, a->len);
            memcpy(buf + a->len, b->s, b->len);
            int32_t id = lookup(t, buf, a->len + b->len);
            if (id >= 0 && t->v[id].score > best) {
                best = t->v[id].score;
                bi = i;
                bid = id;
            }
        }
        if (bi < 0) break;
        ids[bi] = bid;
        memmove(ids + bi + 1, ids + bi + 2, (size_t)(n - bi - 2) * sizeof *ids);
        n--;
    }
    free(buf);
    free(norm);
    enum ats_status st = ATS_OK;
    if (n > cap) st = ATS_ERANGE;
    else memcpy(tokens, ids, (size_t)n * sizeof *ids);
    *n_out = n;
    free(ids);
    return st;
}

size_t ex_tokenizer_decode(const ex_tokenizer *t, int32_t prev, int32_t id, char *buf, size_t cap)
{
    if (cap == 0) return 0;
    buf[0] = 0;
    if (id < 0 || id >= t->n) return 0;
    const piece *p = &t->v[id];
    if (p->type == 3 || p->type == 2) return 0; /* control / unknown */
    int b = parse_byte(p->s, p->len);
    if (b >= 0) {
        if (cap < 2) return 0;
        buf[0] = (char)b;
        buf[1] = 0;
        return 1;
    }
    const char *s = p->s;
    size_t len = p->len, o = 0;
    if (prev == t->bos && len >= 3 && memcmp(s, SP_SPACE, 3) == 0) {
        s += 3;
        len -= 3;
    }
    for (size_t i = 0; i < len && o + 1 < cap;) {
        if (i + 3 <= len && memcmp(s + i, SP_SPACE, 3) == 0) {
            buf[o++] = ' ';
            i += 3;
        } else {
            buf[o++] = s[i++];
        }
    }
    buf[o] = 0;
    return o;
}
