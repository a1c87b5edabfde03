/* Tokenizers from GGUF metadata: SentencePiece-style BPE (tokenizer.ggml.model "llama"; llama2.c's
 * encode/decode, GGUF spelling) and byte-level BPE ("gpt2": Llama-3, Qwen; merges by rank from
 * tokenizer.ggml.merges, a simplified GPT-2/Llama-3 pre-tokenizer). */
#include "ex/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SP_SPACE "\xE2\x96\x81" /* U+2581 */

typedef struct piece {
    char *s;
    size_t len;
    float score;
    int type; /* GGUF token type: 1 normal, 2 unknown, 3 control, 6 byte */
} piece;

typedef struct merge {
    char *s; /* "left right" */
    size_t len;
    int32_t rank;
} merge;

struct ex_tokenizer {
    int64_t n;
    piece *v;
    int32_t *sorted; /* ids sorted by string */
    int32_t bos, eos;
    int32_t byte_id[256];
    int byte_level;         /* 1: "gpt2" byte-level BPE */
    int add_bos;            /* tokenizer.ggml.add_bos_token (default: 1 for "llama", 0 for "gpt2") */
    merge *merges;          /* byte-level: sorted by string */
    int64_t n_merges;
    uint16_t b2u[256];      /* byte → code point of GPT-2's printable byte alphabet */
    int16_t u2b[512];       /* code point → byte, -1 if none */
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
    if (t->merges)
        for (int64_t i = 0; i < t->n_merges; i++) free(t->merges[i].s);
    free(t->merges);
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

/* ---- byte-level BPE ("gpt2") ----------------------------------------------------------------- */

static int cmp_merge(const void *x, const void *y)
{
    const merge *a = x, *b = y;
    return cmp_str(a->s, a->len, b->s, b->len);
}

static int32_t merge_rank(const ex_tokenizer *t, const char *a, size_t an, const char *b, size_t bn)
{
    char buf[512];
    if (an + bn + 1 > sizeof buf) return -1;
    memcpy(buf, a, an);
    buf[an] = ' ';
    memcpy(buf + an + 1, b, bn);
    merge key = {buf, an + bn + 1, 0};
    const merge *m = bsearch(&key, t->merges, (size_t)t->n_merges, sizeof *t->merges, cmp_merge);
    return m ? m->rank : -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 63)); o[2] = (char)(0x80 | (cp & 63));
    return 3;
}

static uint32_t get_utf8(const char *s, size_t len, size_t *used)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || len < 2) { *used = 1; return u[0]; }
    if ((u[0] & 0xE0) == 0xC0) { *used = 2; return ((uint32_t)(u[0] & 31) << 6) | (u[1] & 63); }
    if ((u[0] & 0xF0) == 0xE0 && len >= 3) { *used = 3; return ((uint32_t)(u[0] & 15) << 12) | ((uint32_t)(u[1] & 63) << 6) | (u[2] & 63); }
    *used = 1;
    return 0xFFFD;
}

static enum ats_status byte_level_init(ex_tokenizer *t, const ex_gguf *g, ats_err *err)
{
    t->byte_level = 1;
    /* GPT-2's byte alphabet: printable bytes map to themselves, the other 68 to 256, 257, … */
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        t->b2u[b] = (uint16_t)(printable ? b : next++);
    }
    for (int i = 0; i < 512; i++) t->u2b[i] = -1;
    for (int b = 0; b < 256; b++) t->u2b[t->b2u[b]] = (int16_t)b;
    ex_gguf_vtype et;
    uint64_t n;
    if (ex_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n, NULL) != ATS_OK || et != EX_GGUF_STRING)
        return ats_err_set(err, ATS_EINVAL, "%s: metadata 'tokenizer.ggml.merges' missing or not strings (gpt2 tokenizer)",
                           ex_gguf_path(g));
    t->merges = calloc(n ? n : 1, sizeof *t->merges);
    if (!t->merges) return ATS_ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        const char *ms;
        size_t ml;
        ex_gguf_arr_str(g, "tokenizer.ggml.merges", i, &ms, &ml);
        t->merges[i].s = malloc(ml + 1);
        if (!t->merges[i].s) return ATS_ENOMEM;
        memcpy(t->merges[i].s, ms, ml);
        t->merges[i].s[ml] = 0;
        t->merges[i].len = ml;
        t->merges[i].rank = (int32_t)i;
        t->n_merges = (int64_t)i + 1;
    }
    qsort(t->merges, (size_t)t->n_merges, sizeof *t->merges, cmp_merge);
    return ATS_OK;
}

static int is_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Length of the next pre-token at s (simplified GPT-2 / Llama-3 pattern): contractions 's 't 're 've
 * 'm 'll 'd; [one non-letter, non-digit, non-newline char] + letters; 1-3 digits; [space] +
 * punctuation + newlines; whitespace ending in newlines; whitespace not followed by a word. */
static size_t pretoken(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] == '\'' && len >= 2) {
        static const char *const con[] = {"'s", "'t", "'m", "'d", "'re", "'ve", "'ll"};
        for (int i = 0; i < 7; i++) {
            size_t cl = strlen(con[i]);
            if (len >= cl && strncasecmp(s, con[i], cl) == 0) return cl;
        }
    }
    size_t i = 0;
    if (!is_letter(u[0]) && !is_digit(u[0]) && u[0] != '\n' && u[0] != '\r' && len >= 2 && is_letter(u[1])) i = 1;
    if (is_letter(u[i])) {
        while (i < len && is_letter(u[i])) i++;
        return i;
    }
    if (is_digit(u[0])) {
        for (i = 0; i < len && i < 3 && is_digit(u[i]);) i++;
        return i;
    }
    if (!is_space(u[0]) || (u[0] == ' ' && len >= 2 && !is_space(u[1]) && !is_letter(u[1]) && !is_digit(u[1]))) {
        i = u[0] == ' ' ? 1 : 0;
        while (i < len && !is_space(u[i]) && !is_letter(u[i]) && !is_digit(u[i])) i++;
        while (i < len && (u[i] == '\n' || u[i] == '\r')) i++;
        return i;
    }
    /* whitespace run */
    size_t j = 0, last_nl = 0;
    while (j < len && is_space(u[j])) {
        if (u[j] == '\n' || u[j] == '\r') last_nl = j + 1;
        j++;
    }
    if (last_nl) return last_nl;
    if (j < len && j > 1) return j - 1; /* leave one space for the next word */
    return j;
}

/* BPE over one pre-token: symbols are the byte-alphabet characters; merge the lowest rank first. */
static int64_t bpe_piece(const ex_tokenizer *t, const char *s, size_t len, int32_t *out, int64_t cap)
{
    /* symbols as (offset, length) into a mapped string */
    char *m = malloc(3 * len + 1);
    size_t *off = malloc((len + 1) * sizeof *off), *ln = malloc((len + 1) * sizeof *ln);
    if (!m || !off || !ln) {
        free(m); free(off); free(ln);
        return -1;
    }
    size_t ml = 0, ns = 0;
    for (size_t i = 0; i < len; i++) {
        off[ns] = ml;
        ln[ns] = put_utf8(m + ml, t->b2u[(unsigned char)s[i]]);
        ml += ln[ns++];
    }
    for (;;) {
        int32_t best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < ns; i++) {
            int32_t r = merge_rank(t, m + off[i], ln[i], m + off[i + 1], ln[i + 1]);
            if (r >= 0 && (best < 0 || r < best)) { best = r; bi = i; }
        }
        if (best < 0) break;
        ln[bi] += ln[bi + 1]; /* symbols are contiguous in m */
        memmove(off + bi + 1, off + bi + 2, (ns - bi - 2) * sizeof *off);
        memmove(ln + bi + 1, ln + bi + 2, (ns - bi - 2) * sizeof *ln);
        ns--;
    }
    int64_t n = 0;
    for (size_t i = 0; i < ns; i++) {
        int32_t id = lookup(t, m + off[i], ln[i]);
        if (id >= 0) {
            if (n < cap) out[n] = id;
            n++;
        } else { /* not in the vocabulary: one token per byte character */
            for (size_t k = 0; k < ln[i];) {
                size_t used;
                get_utf8(m + off[i] + k, ln[i] - k, &used);
                int32_t b = lookup(t, m + off[i] + k, used);
                if (b >= 0) {
                    if (n < cap) out[n] = b;
                    n++;
                }
                k += used;
            }
        }
    }
    free(m); free(off); free(ln);
    return n;
}

static enum ats_status encode_byte_level(const ex_tokenizer *t, const char *text, int add_bos, int32_t *tokens,
                                         int64_t cap, int64_t *n_out)
{
    int64_t n = 0;
    if (add_bos && t->add_bos && t->bos >= 0) {
        if (n < cap) tokens[n] = t->bos;
        n++;
    }
    size_t len = strlen(text);
    for (size_t i = 0; i < len;) {
        size_t pl = pretoken(text + i, len - i);
        if (pl == 0) pl = 1;
        int64_t k = bpe_piece(t, text + i, pl, n < cap ? tokens + n : tokens, n < cap ? cap - n : 0);
        if (k < 0) return ATS_ENOMEM;
        n += k;
        i += pl;
    }
    *n_out = n;
    return n > cap ? ATS_ERANGE : ATS_OK;
}

static size_t decode_byte_level(const ex_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    const piece *p = &t->v[id];
    size_t o = 0;
    if (p->type == 3 || id == t->bos || id == t->eos) return 0; /* control */
    for (size_t i = 0; i < p->len && o + 1 < cap;) {
        size_t used;
        uint32_t cp = get_utf8(p->s + i, p->len - i, &used);
        if (cp < 512 && t->u2b[cp] >= 0) buf[o++] = (char)t->u2b[cp];
        else {
            for (size_t k = 0; k < used && o + 1 < cap; k++) buf[o++] = p->s[i + k]; /* added tokens: verbatim */
        }
        i += used;
    }
    buf[o] = 0;
    return o;
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
    const char *ms;
    size_t ml;
    if (ex_gguf_get_str(g, "tokenizer.ggml.model", &ms, &ml, NULL) == ATS_OK && ml == 4 && memcmp(ms, "gpt2", 4) == 0) {
        enum ats_status bst = byte_level_init(t, g, err);
        if (bst != ATS_OK) {
            ex_tokenizer_free(t);
            return bst;
        }
    }
    t->add_bos = !t->byte_level;
    if (ex_gguf_get_int(g, "tokenizer.ggml.add_bos_token", &v, NULL) == ATS_OK) t->add_bos = v != 0;
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
    if (t->byte_level) return encode_byte_level(t, text, add_bos, tokens, cap, n_out);
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
    if (t->byte_level) return decode_byte_level(t, id, buf, cap);
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
