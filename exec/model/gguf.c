/* GGUF v2/v3 reader (mmap) and writer. Format: ../shared/models/QUANT_FORMATS.md §1. Every read goes
 * through a bounds-checked cursor, so no input makes it read outside the buffer. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ex/gguf.h"

#include "atsc/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct kv {
    const char *key; /* NUL-terminated copy */
    ex_gguf_vtype type;
    const uint8_t *val;   /* value bytes in the buffer (after the type) */
    ex_gguf_vtype elem;   /* arrays: element type */
    uint64_t count;       /* arrays: element count */
    uint64_t *str_off;    /* arrays of strings: offset of each element (from val) */
    size_t raw_start, raw_end;
} kv;

struct ex_gguf {
    char path[256];
    const uint8_t *buf;
    size_t len;
    int mapped;
    uint32_t version;
    uint64_t alignment, data_off;
    int64_t n_kv, n_tensors;
    kv *kvs;
    ex_gguf_tensor *tensors;
};

typedef struct cursor {
    const uint8_t *p;
    size_t pos, len;
} cursor;

static int take(cursor *c, size_t n, const uint8_t **out)
{
    if (n > c->len - c->pos) return -1;
    *out = c->p + c->pos;
    c->pos += n;
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v)
{
    const uint8_t *b;
    if (take(c, 4, &b)) return -1;
    memcpy(v, b, 4);
    return 0;
}

static int rd_u64(cursor *c, uint64_t *v)
{
    const uint8_t *b;
    if (take(c, 8, &b)) return -1;
    memcpy(v, b, 8);
    return 0;
}

static int rd_str(cursor *c, const uint8_t **s, uint64_t *n)
{
    if (rd_u64(c, n)) return -1;
    if (*n > c->len - c->pos) return -1;
    return take(c, (size_t)*n, s);
}

static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case EX_GGUF_U8: case EX_GGUF_I8: case EX_GGUF_BOOL: return 1;
    case EX_GGUF_U16: case EX_GGUF_I16: return 2;
    case EX_GGUF_U32: case EX_GGUF_I32: case EX_GGUF_F32: return 4;
    case EX_GGUF_U64: case EX_GGUF_I64: case EX_GGUF_F64: return 8;
    }
    return 0;
}

/* Skips one value of type t (arrays recursively, depth-limited). */
static int skip_value(cursor *c, uint32_t t, int depth)
{
    size_t sz = scalar_size(t);
    if (sz) {
        const uint8_t *b;
        return take(c, sz, &b);
    }
    if (t == EX_GGUF_STRING) {
        const uint8_t *s;
        uint64_t n;
        return rd_str(c, &s, &n);
    }
    if (t == EX_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (depth > 4 || rd_u32(c, &et) || rd_u64(c, &n)) return -1;
        size_t esz = scalar_size(et);
        if (esz) {
            const uint8_t *b;
            if (n > (c->len - c->pos) / esz) return -1;
            return take(c, (size_t)(n * esz), &b);
        }
        if (et != EX_GGUF_STRING && et != EX_GGUF_ARRAY) return -1;
        /* every string or array element takes at least 8 bytes */
        if (n > (c->len - c->pos) / 8) return -1;
        for (uint64_t i = 0; i < n; i++)
            if (skip_value(c, et, depth + 1)) return -1;
        return 0;
    }
    return -1;
}

static void copy_name(char *dst, size_t cap, const uint8_t *s, uint64_t n)
{
    size_t m = n < cap - 1 ? (size_t)n : cap - 1;
    for (size_t i = 0; i < m; i++) dst[i] = (s[i] >= 32 && s[i] < 127) ? (char)s[i] : '?';
    dst[m] = 0;
}

void ex_gguf_free(ex_gguf *g)
{
    if (!g) return;
    if (g->kvs) {
        for (int64_t i = 0; i < g->n_kv; i++) {
            free((void *)g->kvs[i].key);
            free(g->kvs[i].str_off);
        }
        free(g->kvs);
    }
    free(g->tensors);
    if (g->mapped && g->buf) munmap((void *)g->buf, g->len);
    free(g);
}

#define FAIL(...) do { st = ats_err_set(err, ATS_EINVAL, __VA_ARGS__); goto fail; } while (0)

/* One pass over the file in its own order (header, key/values, tensor infos, data section) with one cursor
 * and one cleanup label: ~160 lines, kept whole because each check reads the cursor where the previous one
 * left it, and the file's layout is easiest to check against the spec read top to bottom. */
static enum ats_status parse(ex_gguf *g, ats_err *err)
{
    enum ats_status st = ATS_OK;
    const char *P = g->path;
    cursor c = {g->buf, 0, g->len};
    const uint8_t *magic;
    if (take(&c, 4, &magic)) FAIL("%s: truncated file: %zu bytes, a GGUF header needs at least 24", P, g->len);
    if (memcmp(magic, "GGUF", 4) != 0)
        FAIL("%s: bad magic 0x%02x%02x%02x%02x at byte 0 (expected 'GGUF')", P, magic[0], magic[1],
             magic[2], magic[3]);
    if (rd_u32(&c, &g->version)) FAIL("%s: truncated file in the header (version)", P);
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1)
            FAIL("%s: unsupported GGUF version 1 (32-bit counts); expected 2 or 3", P);
        FAIL("%s: unknown GGUF version %u (expected 3; a big-endian file reads as 0x%08x)", P,
             g->version, g->version);
    }
    uint64_t nt, nkv;
    if (rd_u64(&c, &nt) || rd_u64(&c, &nkv)) FAIL("%s: truncated file in the header (counts)", P);
    /* a KV takes >= 8+1+4 bytes, a tensor info >= 8+4+8+4+8 */
    if (nkv > (c.len - c.pos) / 13)
        FAIL("%s: header: metadata_kv_count %llu does not fit in the %zu bytes that follow", P,
             (unsigned long long)nkv, c.len - c.pos);
    if (nt > (c.len - c.pos) / 32)
        FAIL("%s: header: tensor_count %llu does not fit in the %zu bytes that follow", P,
             (unsigned long long)nt, c.len - c.pos);
    g->kvs = calloc(nkv ? nkv : 1, sizeof *g->kvs);
    g->tensors = calloc(nt ? nt : 1, sizeof *g->tensors);
    if (!g->kvs || !g->tensors) { st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", P); goto fail; }
    g->alignment = 32;
    for (uint64_t i = 0; i < nkv; i++) {
        kv *k = &g->kvs[i];
        k->raw_start = c.pos;
        const uint8_t *ks;
        uint64_t kn;
        uint32_t vt;
        if (rd_str(&c, &ks, &kn)) FAIL("%s: metadata KV %llu: truncated key string", P, (unsigned long long)i);
        char *key = malloc((size_t)kn + 1);
        if (!key) { st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", P); goto fail; }
        memcpy(key, ks, (size_t)kn);
        key[kn] = 0;
        k->key = key;
        g->n_kv = (int64_t)i + 1;
        if (strlen(key) != kn) FAIL("%s: metadata KV %llu: key contains a NUL byte", P, (unsigned long long)i);
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->kvs[j].key, key) == 0)
                FAIL("%s: metadata key '%s' (KV %llu) duplicates KV %llu", P, key, (unsigned long long)i,
                     (unsigned long long)j);
        if (rd_u32(&c, &vt)) FAIL("%s: metadata '%s': truncated value type", P, key);
        if (vt > EX_GGUF_F64) FAIL("%s: metadata '%s': unknown value type %u", P, key, vt);
        k->type = (ex_gguf_vtype)vt;
        k->val = c.p + c.pos;
        if (vt == EX_GGUF_ARRAY) {
            cursor c2 = c;
            uint32_t et;
            uint64_t n;
            if (rd_u32(&c2, &et) || rd_u64(&c2, &n)) FAIL("%s: metadata '%s': truncated array header", P, key);
            if (et > EX_GGUF_F64) FAIL("%s: metadata '%s': unknown array element type %u", P, key, et);
            k->elem = (ex_gguf_vtype)et;
            k->count = n;
            if (et == EX_GGUF_STRING) {
                if (n > (c2.len - c2.pos) / 8)
                    FAIL("%s: metadata '%s': array of %llu strings does not fit in the file", P, key,
                         (unsigned long long)n);
                k->str_off = malloc((n ? n : 1) * sizeof *k->str_off);
                if (!k->str_off) { st = ats_err_set(err, ATS_ENOMEM, "%s: out of memory", P); goto fail; }
                for (uint64_t j = 0; j < n; j++) {
                    const uint8_t *s;
                    uint64_t sn;
                    k->str_off[j] = (uint64_t)(c2.pos - c.pos);
                    if (rd_str(&c2, &s, &sn))
                        FAIL("%s: metadata '%s': string %llu of %llu runs past the end of the file", P,
                             key, (unsigned long long)j, (unsigned long long)n);
                }
            }
        }
        if (skip_value(&c, vt, 0))
            FAIL("%s: metadata '%s' (type %u): value runs past the end of the file or is malformed", P,
                 key, vt);
        k->raw_end = c.pos;
        if (strcmp(key, "general.alignment") == 0) {
            uint32_t a;
            if (vt != EX_GGUF_U32) FAIL("%s: metadata 'general.alignment': type %u, expected uint32 (4)", P, vt);
            memcpy(&a, k->val, 4);
            if (a == 0 || a % 8 != 0 || a > (1u << 20))
                FAIL("%s: metadata 'general.alignment' = %u: must be a positive multiple of 8", P, a);
            g->alignment = a;
        }
    }
    for (uint64_t i = 0; i < nt; i++) {
        ex_gguf_tensor *t = &g->tensors[i];
        const uint8_t *s;
        uint64_t sn;
        uint32_t nd, ty;
        g->n_tensors = (int64_t)i + 1;
        if (rd_str(&c, &s, &sn)) FAIL("%s: tensor info %llu: truncated name", P, (unsigned long long)i);
        copy_name(t->name, sizeof t->name, s, sn);
        if (sn == 0 || sn > EX_GGUF_NAME_MAX)
            FAIL("%s: tensor info %llu: name length %llu (must be 1..%d)", P, (unsigned long long)i,
                 (unsigned long long)sn, EX_GGUF_NAME_MAX);
        if (memchr(s, 0, (size_t)sn)) FAIL("%s: tensor info %llu: name contains a NUL byte", P, (unsigned long long)i);
        if (rd_u32(&c, &nd)) FAIL("%s: tensor '%s' (index %llu): truncated n_dims", P, t->name, (unsigned long long)i);
        if (nd < 1 || nd > 4)
            FAIL("%s: tensor '%s' (index %llu): n_dims = %u (must be 1..4)", P, t->name, (unsigned long long)i, nd);
        t->n_dims = nd;
        uint64_t nel = 1;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t v;
            if (rd_u64(&c, &v)) FAIL("%s: tensor '%s' (index %llu): truncated dims", P, t->name, (unsigned long long)i);
            if (v == 0 || v > (1ull << 40))
                FAIL("%s: tensor '%s' (index %llu): dims[%u] = %llu (must be 1..2^40)", P, t->name,
                     (unsigned long long)i, d, (unsigned long long)v);
            if (nel > (1ull << 48) / v)
                FAIL("%s: tensor '%s' (index %llu): element count overflows (dims[%u] = %llu)", P,
                     t->name, (unsigned long long)i, d, (unsigned long long)v);
            nel *= v;
            t->ne[d] = (int64_t)v;
        }
        if (rd_u32(&c, &ty) || rd_u64(&c, &t->offset))
            FAIL("%s: tensor '%s' (index %llu): truncated type/offset", P, t->name, (unsigned long long)i);
        if (!ats_qtype_valid((int)ty))
            FAIL("%s: tensor '%s' (index %llu): unknown or unsupported quant type id %u "
                 "(supported: F32 0, F16 1, Q4_0 2, Q8_0 8, Q4_K 12, Q6_K 14, BF16 30, MXFP4 39)",
                 P, t->name, (unsigned long long)i, ty);
        t->type = (ats_qtype)ty;
        int be = ats_qtype_block_elems(t->type);
        if (t->ne[0] % be != 0)
            FAIL("%s: tensor '%s' (index %llu): dims[0] = %lld is not a multiple of the %s block size %d",
                 P, t->name, (unsigned long long)i, (long long)t->ne[0], ats_qtype_name(t->type), be);
        t->bytes = nel / (uint64_t)be * (uint64_t)ats_qtype_block_bytes(t->type);
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->tensors[j].name, t->name) == 0)
                FAIL("%s: tensor '%s' (index %llu) duplicates index %llu", P, t->name,
                     (unsigned long long)i, (unsigned long long)j);
    }
    uint64_t a = g->alignment;
    uint64_t data_off = (c.pos + a - 1) / a * a;
    if (data_off > g->len && nt > 0)
        FAIL("%s: truncated file: tensor data would start at byte %llu but the file has %zu bytes", P,
             (unsigned long long)data_off, g->len);
    g->data_off = data_off;
    uint64_t data_len = data_off <= g->len ? g->len - data_off : 0;
    for (uint64_t i = 0; i < nt; i++) {
        ex_gguf_tensor *t = &g->tensors[i];
        if (t->offset % a != 0)
            FAIL("%s: tensor '%s' (index %llu): offset %llu is not a multiple of the alignment %llu", P,
                 t->name, (unsigned long long)i, (unsigned long long)t->offset, (unsigned long long)a);
        if (t->offset > data_len || t->bytes > data_len - t->offset)
            FAIL("%s: tensor '%s' (index %llu): offset %llu + size %llu bytes lies outside the data "
                 "section (%llu bytes from file offset %llu; file truncated?)",
                 P, t->name, (unsigned long long)i, (unsigned long long)t->offset,
                 (unsigned long long)t->bytes, (unsigned long long)data_len, (unsigned long long)data_off);
        t->data = g->buf + data_off + t->offset;
    }
    return ATS_OK;
fail:
    return st;
}

enum ats_status ex_gguf_open_mem(const void *buf, size_t len, const char *name, ex_gguf **out,
                                 ats_err *err)
{
    ex_gguf *g = calloc(1, sizeof *g);
    if (!g) return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", name);
    snprintf(g->path, sizeof g->path, "%s", name ? name : "<memory>");
    g->buf = buf;
    g->len = len;
    enum ats_status st = parse(g, err);
    if (st != ATS_OK) {
        ex_gguf_free(g);
        return st;
    }
    *out = g;
    return ATS_OK;
}

enum ats_status ex_gguf_open(const char *path, ex_gguf **out, ats_err *err)
{
    atsc_in_note(path); /* never to be replaced by an output of this run */
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ats_err_set(err, ATS_ENOTFOUND, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ats_err_set(err, ATS_EINVAL, "%s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    const void *buf = NULL;
    if (len > 0) {
        buf = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (buf == MAP_FAILED) {
            close(fd);
            return ats_err_set(err, ATS_EINVAL, "%s: mmap failed: %s", path, strerror(errno));
        }
    }
    close(fd);
    static const uint8_t empty[1];
    ex_gguf *g = NULL;
    enum ats_status st = ex_gguf_open_mem(len ? buf : empty, len, path, &g, err);
    if (st != ATS_OK) {
        if (len) munmap((void *)buf, len);
        return st;
    }
    g->mapped = len > 0;
    *out = g;
    return ATS_OK;
}

uint32_t ex_gguf_version(const ex_gguf *g) { return g->version; }
uint64_t ex_gguf_alignment(const ex_gguf *g) { return g->alignment; }
uint64_t ex_gguf_data_offset(const ex_gguf *g) { return g->data_off; }
const char *ex_gguf_path(const ex_gguf *g) { return g->path; }
int64_t ex_gguf_n_tensors(const ex_gguf *g) { return g->n_tensors; }
const ex_gguf_tensor *ex_gguf_tensor_at(const ex_gguf *g, int64_t i)
{
    return (i >= 0 && i < g->n_tensors) ? &g->tensors[i] : NULL;
}

const ex_gguf_tensor *ex_gguf_find_tensor(const ex_gguf *g, const char *name)
{
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

int64_t ex_gguf_n_kv(const ex_gguf *g) { return g->n_kv; }
const char *ex_gguf_kv_key(const ex_gguf *g, int64_t i) { return g->kvs[i].key; }
ex_gguf_vtype ex_gguf_kv_type(const ex_gguf *g, int64_t i) { return g->kvs[i].type; }

void ex_gguf_kv_raw(const ex_gguf *g, int64_t i, const void **bytes, size_t *len)
{
    *bytes = g->buf + g->kvs[i].raw_start;
    *len = g->kvs[i].raw_end - g->kvs[i].raw_start;
}

enum ats_status ex_gguf_find_kv(const ex_gguf *g, const char *key, int64_t *index)
{
    for (int64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kvs[i].key, key) == 0) { *index = i; return ATS_OK; }
    return ATS_ENOTFOUND;
}

static int num_at(ex_gguf_vtype t, const uint8_t *p, double *d, int64_t *iv)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32;
            uint64_t u64; int64_t i64; double f64; } u;
    size_t sz = scalar_size(t);
    if (!sz) return -1;
    memcpy(&u, p, sz);
    switch (t) {
    case EX_GGUF_U8: case EX_GGUF_BOOL: *iv = u.u8; *d = u.u8; return 0;
    case EX_GGUF_I8: *iv = u.i8; *d = u.i8; return 0;
    case EX_GGUF_U16: *iv = u.u16; *d = u.u16; return 0;
    case EX_GGUF_I16: *iv = u.i16; *d = u.i16; return 0;
    case EX_GGUF_U32: *iv = u.u32; *d = u.u32; return 0;
    case EX_GGUF_I32: *iv = u.i32; *d = u.i32; return 0;
    case EX_GGUF_U64: *iv = (int64_t)u.u64; *d = (double)u.u64; return u.u64 > INT64_MAX ? -2 : 0;
    case EX_GGUF_I64: *iv = u.i64; *d = (double)u.i64; return 0;
    case EX_GGUF_F32: *d = u.f32; return 1;
    case EX_GGUF_F64: *d = u.f64; return 1;
    default: return -1;
    }
}

enum ats_status ex_gguf_get_int(const ex_gguf *g, const char *key, int64_t *out, ats_err *err)
{
    int64_t i;
    if (ex_gguf_find_kv(g, key, &i) != ATS_OK) return ATS_ENOTFOUND;
    double d;
    int64_t v = 0;
    if (num_at(g->kvs[i].type, g->kvs[i].val, &d, &v) != 0)
        return ats_err_set(err, ATS_EINVAL, "%s: metadata '%s': type %u is not an integer", g->path, key,
                           g->kvs[i].type);
    *out = v;
    return ATS_OK;
}

enum ats_status ex_gguf_get_double(const ex_gguf *g, const char *key, double *out, ats_err *err)
{
    int64_t i;
    if (ex_gguf_find_kv(g, key, &i) != ATS_OK) return ATS_ENOTFOUND;
    double d = 0;
    int64_t v;
    if (num_at(g->kvs[i].type, g->kvs[i].val, &d, &v) < 0)
        return ats_err_set(err, ATS_EINVAL, "%s: metadata '%s': type %u is not a number", g->path, key,
                           g->kvs[i].type);
    *out = d;
    return ATS_OK;
}

enum ats_status ex_gguf_get_str(const ex_gguf *g, const char *key, const char **s, size_t *len,
                                ats_err *err)
{
    int64_t i;
    if (ex_gguf_find_kv(g, key, &i) != ATS_OK) return ATS_ENOTFOUND;
    if (g->kvs[i].type != EX_GGUF_STRING)
        return ats_err_set(err, ATS_EINVAL, "%s: metadata '%s': type %u is not a string", g->path, key,
                           g->kvs[i].type);
    uint64_t n;
    memcpy(&n, g->kvs[i].val, 8);
    *s = (const char *)g->kvs[i].val + 8;
    *len = (size_t)n;
    return ATS_OK;
}

enum ats_status ex_gguf_get_arr(const ex_gguf *g, const char *key, ex_gguf_vtype *elem_type,
                                uint64_t *count, ats_err *err)
{
    int64_t i;
    if (ex_gguf_find_kv(g, key, &i) != ATS_OK) return ATS_ENOTFOUND;
    if (g->kvs[i].type != EX_GGUF_ARRAY)
        return ats_err_set(err, ATS_EINVAL, "%s: metadata '%s': type %u is not an array", g->path, key,
                           g->kvs[i].type);
    *elem_type = g->kvs[i].elem;
    *count = g->kvs[i].count;
    return ATS_OK;
}

enum ats_status ex_gguf_arr_str(const ex_gguf *g, const char *key, uint64_t j, const char **s,
                                size_t *len)
{
    int64_t i;
    if (ex_gguf_find_kv(g, key, &i) != ATS_OK) return ATS_ENOTFOUND;
    const kv *k = &g->kvs[i];
    if (k->type != EX_GGUF_ARRAY || k->elem != EX_GGUF_STRING || j >= k->count) return ATS_EINVAL;
    uint64_t n;
    memcpy(&n, k->val + k->str_off[j], 8);
    *s = (const char *)k->val + k->str_off[j] + 8;
    *len = (size_t)n;
    return ATS_OK;
}

enum ats_status ex_gguf_arr_num(const ex_gguf *g, const char *key, uint64_t j, double *out)
{
    int64_t i;
    if (ex_gguf_find_kv(g, key, &i) != ATS_OK) return ATS_ENOTFOUND;
    const kv *k = &g->kvs[i];
    size_t sz = scalar_size(k->elem);
    if (k->type != EX_GGUF_ARRAY || !sz || j >= k->count) return ATS_EINVAL;
    int64_t v;
    if (num_at(k->elem, k->val + 12 + j * sz, out, &v) < 0) return ATS_EINVAL;
    return ATS_OK;
}

/* ---- writer ------------------------------------------------------------------------------- */

size_t ex_gguf_kv_u32(void *buf, const char *key, uint32_t value)
{
    uint8_t *p = buf;
    uint64_t n = strlen(key);
    uint32_t t = EX_GGUF_U32;
    memcpy(p, &n, 8);
    memcpy(p + 8, key, (size_t)n);
    memcpy(p + 8 + n, &t, 4);
    memcpy(p + 12 + n, &value, 4);
    return (size_t)(16 + n);
}

static int wr(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

static int pad_to(FILE *f, uint64_t *pos, uint64_t a)
{
    static const uint8_t zeros[64];
    while (*pos % a) {
        size_t k = (size_t)(a - *pos % a);
        if (k > sizeof zeros) k = sizeof zeros;
        if (wr(f, zeros, k)) return -1;
        *pos += k;
    }
    return 0;
}

enum ats_status ex_gguf_write(const char *path, int64_t n_kv, const void *const *kv_raw,
                              const size_t *kv_len, int64_t n_tensors, const ex_gguf_out_tensor *t,
                              uint64_t alignment, ats_err *err)
{
    return ex_gguf_write_fill(path, n_kv, kv_raw, kv_len, n_tensors, t, alignment, NULL, NULL, err);
}

enum ats_status ex_gguf_write_fill(const char *path, int64_t n_kv, const void *const *kv_raw,
                                   const size_t *kv_len, int64_t n_tensors, const ex_gguf_out_tensor *t,
                                   uint64_t alignment, ex_gguf_fill_fn fill, void *fill_ctx, ats_err *err)
{
    atsc_out *out = NULL; /* temporary + fsync + rename, removed on SIGINT/SIGTERM (atsc/outfile.h) */
    enum ats_status ost = atsc_out_open(path, &out, err);
    if (ost) return ost;
    uint8_t *buf = NULL; /* fill: one tensor's bytes at a time (the largest tensor's size) */
    if (fill) {
        uint64_t most = 1;
        for (int64_t i = 0; i < n_tensors; i++)
            if (t[i].bytes > most) most = t[i].bytes;
        buf = malloc((size_t)most);
        if (!buf) {
            ost = ats_err_set(err, ATS_ENOMEM, "%s: no memory for a tensor of %llu bytes", path, (unsigned long long)most);
            atsc_out_abort(out);
            return ost;
        }
    }
    FILE *f = fopen(atsc_out_tmp(out), "wb");
    if (!f) {
        ost = ats_err_set(err, ATS_EINVAL, "%s: cannot create: %s", path, strerror(errno));
        free(buf);
        atsc_out_abort(out);
        return ost;
    }
    uint64_t pos = 0;
    uint32_t version = 3;
    uint64_t nt = (uint64_t)n_tensors, nk = (uint64_t)n_kv;
    int bad = wr(f, "GGUF", 4) || wr(f, &version, 4) || wr(f, &nt, 8) || wr(f, &nk, 8);
    pos = 24;
    for (int64_t i = 0; i < n_kv && !bad; i++) {
        bad = wr(f, kv_raw[i], kv_len[i]);
        pos += kv_len[i];
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < n_tensors && !bad; i++) {
        uint64_t n = strlen(t[i].name);
        uint32_t nd = t[i].n_dims, ty = (uint32_t)t[i].type;
        bad = wr(f, &n, 8) || wr(f, t[i].name, (size_t)n) || wr(f, &nd, 4);
        for (uint32_t d = 0; d < nd && !bad; d++) {
            uint64_t v = (uint64_t)t[i].ne[d];
            bad = wr(f, &v, 8);
        }
        bad = bad || wr(f, &ty, 4) || wr(f, &off, 8);
        pos += 8 + n + 4 + 8ull * nd + 4 + 8;
        off = (off + t[i].bytes + alignment - 1) / alignment * alignment;
    }
    bad = bad || pad_to(f, &pos, alignment);
    uint64_t data_start = pos;
    enum ats_status fst = ATS_OK;
    for (int64_t i = 0; i < n_tensors && !bad; i++) {
        const void *data = t[i].data;
        if (fill) {
            if ((fst = fill(fill_ctx, i, buf, t[i].bytes, err)) != ATS_OK) break;
            data = buf;
        }
        bad = wr(f, data, (size_t)t[i].bytes);
        pos += t[i].bytes;
        if (i + 1 < n_tensors) {
            uint64_t rel = pos - data_start;
            while (rel % alignment && !bad) {
                bad = fputc(0, f) == EOF;
                rel++;
                pos++;
            }
        }
    }
    free(buf);
    if (fclose(f) != 0) bad = 1;
    if (fst != ATS_OK) {
        atsc_out_abort(out);
        return fst;
    }
    if (bad) {
        ost = ats_err_set(err, ATS_EINVAL, "%s: write failed: %s", path, strerror(errno));
        atsc_out_abort(out);
        return ost;
    }
    return atsc_out_commit(out, err);
}
