/*
 * The CUDA backend table (ex_backend of ex/model.h) over host pointers, with activations kept on
 * the device between ops (exec/README.md "Residency").
 *
 * The session (exec/runtime/session.c) keeps its activations, KV cache and weights in host memory and
 * calls a backend's ops with those pointers (often interior ones: the last row of x for the output
 * norm, one layer's slab of the KV arrays). This table runs each op on the GPU's compute stream and
 * copies as little as it can:
 * - weights (ex_tensor data, norm vectors) are uploaded once, on first use, into device "mirrors"
 *   found by host address through a hash index;
 * - activations live in "resident ranges": a host range [host, host + bytes) with a device buffer of
 *   the same size, a usable interval [u0, u1) (device bytes equal the host's or are newer) and a
 *   dirty interval [d0, d1) ⊆ usable (device newer than host). An op's input is uploaded (async)
 *   only where it is not usable; its output is written on the device and marked usable and dirty,
 *   NOT copied back. flush(with_kv) copies each dirty interval back (one D2H each) and waits once;
 *   host_wrote empties the usable intervals of activations (another backend wrote host memory);
 *   forget(host, bytes) drops every range inside freed host memory;
 * - each layer's KV slab (kv_store's k_cache / v_cache, n_ctx rows of kv_dim F32 values, or F16 with
 *   kv_store_f16 / attention_f16: the session's host cache byte for byte) is a resident range too, whose
 *   usable interval is the row prefix [0, dev_rows): positions only grow within a session, so
 *   kv_store uploads rows [dev_rows, pos0) the host wrote meanwhile (a CPU op ran that layer),
 *   writes rows [pos0, pos0 + n) on the device only and marks them dirty; they come back only on
 *   flush(ctx, 1), which the session requests when another backend is about to run that layer's
 *   attention. host_wrote leaves KV ranges alone.
 * - token ids from the caller are always copied (never cached: the caller may reuse its buffer).
 * No op synchronizes the stream; the only waits are flush, the growth of a device buffer (cudaFree)
 * and a weight's first upload. So the same session code runs CPU-only, GPU-only or split per
 * layer / per op, and GPU-only decode is one stream of kernels per token plus one flush (the logits).
 * Mirrors and resident ranges are keyed by host address: free a session before the backend (the
 * session's forget calls reach the table), and free the backend with the model, or call
 * ex_backend_cuda_reset in between (a model freed and another loaded at the same addresses would
 * alias the weight mirrors).
 * This file is host code in the C subset of C++ (C linkage from ex/gpu.h's declarations, no CUDA
 * syntax): tests/exec/test_exec_residency.c compiles it as C over an emulated CUDA runtime, so CI
 * checks its bookkeeping against the CPU bit for bit without a GPU. Keep it so.
 */
#include "common.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ex/gpu.h"
#include "ex/model.h"
#include "ex/session.h"

typedef struct mirror {
    const void *host;
    void *dev;
    size_t bytes;
    int bound;     /* 1: dev belongs to the runtime (bind_weight): never uploaded, never freed here */
} mirror;

/* A host range whose device copy the table manages (offsets in bytes from host). */
typedef struct resid {
    char *host, *dev;
    size_t bytes;
    size_t u0, u1;    /* usable: device == host or newer on [u0, u1); empty when u0 == u1 */
    size_t d0, d1;    /* dirty: device newer than host on [d0, d1) ⊆ [u0, u1); empty when d0 == d1 */
    uint64_t used;    /* tick of the last lookup (least recently used clean range is evicted first) */
} resid;

typedef struct rlist {
    resid *r;
    int n, cap;
} rlist;

#define MAX_ACT_RANGES 64 /* a session uses ~15 (scratch + logits); more come from several sessions */

typedef struct cuda_be {
    ex_backend be; /* first: the table handed out */
    ex_gpu *g;
    cudaStream_t s;
    mirror *m;     /* weight mirrors */
    int n_m, cap_m;
    int *hash;     /* open addressing over m (index + 1, 0 = empty), hcap a power of two ≥ 2 n_m */
    int hcap;
    rlist act, kv; /* resident activation ranges and KV slabs */
    uint64_t tick;
    int queued;    /* work queued since the last flush (else flush has nothing to wait for) */
    int32_t *tok;  /* device copy of the caller's token ids */
    size_t tok_bytes;
    int bound_only; /* bound_only(1): an unbound weight is an error, not an upload */
} cuda_be;

static enum ats_status to_ats(ex_gpu_status st)
{
    switch (st) {
    case EX_GPU_OK: return ATS_OK;
    case EX_GPU_EINVAL: return ATS_EINVAL;
    case EX_GPU_ENOMEM: return ATS_ENOMEM;
    default: return ATS_ERANGE; /* device failure: the message was printed where it happened */
    }
}
#define TRY(call)                                                  \
    do {                                                           \
        ex_gpu_status st_ = (call);                                \
        if (st_ != EX_GPU_OK) return to_ats(st_);                  \
    } while (0)

/* ---- weight mirrors ---------------------------------------------------------------------------- */

static size_t hash_ptr(const void *p, int hcap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (size_t)(hcap - 1);
}

static int rehash(cuda_be *c, int hcap)
{
    int *h = (int *)calloc((size_t)hcap, sizeof *h);
    if (!h) return -1;
    for (int i = 0; i < c->n_m; i++) {
        size_t k = hash_ptr(c->m[i].host, hcap);
        while (h[k]) k = (k + 1) & (size_t)(hcap - 1);
        h[k] = i + 1;
    }
    free(c->hash);
    c->hash = h;
    c->hcap = hcap;
    return 0;
}

static int find_mirror(const cuda_be *c, const void *host)
{
    if (!c->hcap) return -1;
    for (size_t k = hash_ptr(host, c->hcap);; k = (k + 1) & (size_t)(c->hcap - 1)) {
        int i = c->hash[k] - 1;
        if (i < 0) return -1;
        if (c->m[i].host == host) return i;
    }
}

/* Device mirror of host bytes [host, host+bytes), uploaded (synchronously) when created;
 * recreated when the size grows. */
static ex_gpu_status get_mirror(cuda_be *c, const void *host, size_t bytes, void **out)
{
    int i = find_mirror(c, host);
    if (i >= 0) {
        if (c->m[i].bytes >= bytes) {
            *out = c->m[i].dev;
            return EX_GPU_OK;
        }
        if (c->m[i].bound) { /* the runtime bound fewer bytes than the op reads: its bug, said once here */
            fprintf(stderr, "ats cuda backend: weight at host %p: %zu bytes bound, the op reads %zu\n", host,
                    c->m[i].bytes, bytes);
            return EX_GPU_EINVAL;
        }
        EXC_CUDA(cudaStreamSynchronize(c->s));
        cudaFree(c->m[i].dev);
        c->m[i] = c->m[--c->n_m];
        if (rehash(c, c->hcap)) return EX_GPU_ENOMEM;
    }
    if (c->bound_only) { /* a weight the runtime did not place: its bug, said here */
        fprintf(stderr, "ats cuda backend: weight at host %p (%zu bytes) has no device address (bound_only)\n", host,
                bytes);
        return EX_GPU_EINVAL;
    }
    if (c->n_m == c->cap_m) {
        int cap = c->cap_m ? 2 * c->cap_m : 64;
        mirror *m = (mirror *)realloc(c->m, (size_t)cap * sizeof *m);
        if (!m) return EX_GPU_ENOMEM;
        c->m = m;
        c->cap_m = cap;
    }
    if (2 * (c->n_m + 1) > c->hcap && rehash(c, c->hcap ? 2 * c->hcap : 256)) return EX_GPU_ENOMEM;
    void *d = NULL;
    EXC_CUDA(cudaMalloc(&d, bytes ? bytes : 1));
    cudaError_t e = cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, c->s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->s);
    if (e != cudaSuccess) {
        cudaFree(d);
        return exc_fail(e, "upload of a weight mirror", __FILE__, __LINE__);
    }
    c->m[c->n_m].host = host;
    c->m[c->n_m].dev = d;
    c->m[c->n_m].bytes = bytes;
    c->m[c->n_m].bound = 0;
    c->n_m++;
    size_t k = hash_ptr(host, c->hcap);
    while (c->hash[k]) k = (k + 1) & (size_t)(c->hcap - 1);
    c->hash[k] = c->n_m;
    *out = d;
    return EX_GPU_OK;
}

/* bind_weight: the runtime's device address of a weight (dev NULL: unbind). An owned mirror of
 * the same host bytes is freed first (after the stream drains: queued ops may read it). */
static enum ats_status be_bind_weight(void *ctx, const void *host, size_t bytes, void *dev)
{
    cuda_be *c = (cuda_be *)ctx;
    int i = find_mirror(c, host);
    if (i >= 0) {
        if (!c->m[i].bound) {
            if (cudaStreamSynchronize(c->s) != cudaSuccess) return ATS_ERANGE;
            cudaFree(c->m[i].dev);
        }
        c->m[i] = c->m[--c->n_m];
        if (rehash(c, c->hcap)) return ATS_ENOMEM;
    }
    if (!dev) return ATS_OK;
    if (c->n_m == c->cap_m) {
        int cap = c->cap_m ? 2 * c->cap_m : 64;
        mirror *m = (mirror *)realloc(c->m, (size_t)cap * sizeof *m);
        if (!m) return ATS_ENOMEM;
        c->m = m;
        c->cap_m = cap;
    }
    if (2 * (c->n_m + 1) > c->hcap && rehash(c, c->hcap ? 2 * c->hcap : 256)) return ATS_ENOMEM;
    mirror *m = &c->m[c->n_m++];
    m->host = host;
    m->dev = dev;
    m->bytes = bytes;
    m->bound = 1;
    size_t k = hash_ptr(host, c->hcap);
    while (c->hash[k]) k = (k + 1) & (size_t)(c->hcap - 1);
    c->hash[k] = c->n_m;
    return ATS_OK;
}

static void be_bound_only(void *ctx, int on) { ((cuda_be *)ctx)->bound_only = on; }

static ex_gpu_status dev_tensor(cuda_be *c, const ex_tensor *w, ex_tensor *out)
{
    *out = *w;
    int64_t mats = w->ne[2] > 0 ? w->ne[2] : 1;
    return get_mirror(c, w->data, (size_t)(w->row_bytes * (uint64_t)w->ne[1] * (uint64_t)mats), (void **)&out->data);
}

/* ---- resident ranges ----------------------------------------------------------------------------- */

static int overlaps(const resid *r, const char *p, size_t bytes)
{
    return p < r->host + r->bytes && r->host < p + bytes;
}

/* Copies r's dirty bytes back to the host (async; the caller waits). */
static ex_gpu_status write_back(cuda_be *c, resid *r)
{
    if (r->d1 > r->d0)
        EXC_CUDA(cudaMemcpyAsync(r->host + r->d0, r->dev + r->d0, r->d1 - r->d0, cudaMemcpyDeviceToHost, c->s));
    r->d0 = r->d1 = 0;
    return EX_GPU_OK;
}

static void drop(cudaStream_t s, rlist *l, int i)
{
    if (s) (void)cudaStreamSynchronize(s); /* queued work may still use the buffer (NULL: waited for) */
    cudaFree(l->r[i].dev);
    l->r[i] = l->r[--l->n];
}

/* The range of `l` that contains [p, p + bytes) (with `exact`: that starts at p), created (device
 * buffer of exactly that size, nothing usable) when none does. The pointer is valid until the next
 * lookup in `l` (the array may move); the device buffer until the range is dropped. A range that
 * overlaps [p, p + bytes) without containing it belongs to host memory that was freed and
 * reallocated without forget: it is dropped, its dirty bytes discarded (copying them would write
 * into memory that now belongs to someone else).
 * Activation lists hold at most MAX_ACT_RANGES ranges: the least recently used clean one goes. */
static ex_gpu_status find_range(cuda_be *c, rlist *l, const void *hp, size_t bytes, int limit, int exact, resid **out)
{
    const char *p = (const char *)hp;
    c->tick++;
    for (int i = 0; i < l->n; i++) {
        resid *r = &l->r[i];
        if (p >= r->host && p + bytes <= r->host + r->bytes && (!exact || p == r->host)) {
            r->used = c->tick;
            *out = r;
            return EX_GPU_OK;
        }
    }
    for (int i = 0; i < l->n;)
        if (overlaps(&l->r[i], p, bytes)) drop(c->s, l, i);
        else i++;
    if (limit && l->n >= limit) {
        int lru = -1;
        for (int i = 0; i < l->n; i++)
            if (l->r[i].d1 == l->r[i].d0 && (lru < 0 || l->r[i].used < l->r[lru].used)) lru = i;
        if (lru >= 0) drop(c->s, l, lru);
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        resid *r = (resid *)realloc(l->r, (size_t)cap * sizeof *r);
        if (!r) return EX_GPU_ENOMEM;
        l->r = r;
        l->cap = cap;
    }
    resid *r = &l->r[l->n];
    memset(r, 0, sizeof *r);
    EXC_CUDA(cudaMalloc((void **)&r->dev, bytes ? bytes : 1));
    r->host = (char *)p;
    r->bytes = bytes;
    r->used = c->tick;
    l->n++;
    *out = r;
    return EX_GPU_OK;
}

/* Makes [a, b) (offsets in r) usable on the device: uploads what is not. Where [a, b) is disjoint
 * from the usable interval, the old interval is given up (its dirty bytes copied back first, and
 * waited for: never happens with the session's buffers, which are used from their start). */
static ex_gpu_status make_usable(cuda_be *c, resid *r, size_t a, size_t b)
{
    if (r->u0 <= a && b <= r->u1 && r->u1 > r->u0) return EX_GPU_OK;
    if (r->u1 == r->u0 || b < r->u0 || a > r->u1) {
        if (r->d1 > r->d0) {
            ex_gpu_status st = write_back(c, r);
            if (st) return st;
            EXC_CUDA(cudaStreamSynchronize(c->s));
        }
        EXC_CUDA(cudaMemcpyAsync(r->dev + a, r->host + a, b - a, cudaMemcpyHostToDevice, c->s));
        r->u0 = a;
        r->u1 = b;
        return EX_GPU_OK;
    }
    if (a < r->u0) EXC_CUDA(cudaMemcpyAsync(r->dev + a, r->host + a, r->u0 - a, cudaMemcpyHostToDevice, c->s));
    if (b > r->u1) EXC_CUDA(cudaMemcpyAsync(r->dev + r->u1, r->host + r->u1, b - r->u1, cudaMemcpyHostToDevice, c->s));
    if (a < r->u0) r->u0 = a;
    if (b > r->u1) r->u1 = b;
    return EX_GPU_OK;
}

/* [a, b) is about to be written on the device: usable and dirty. */
static ex_gpu_status mark_written(cuda_be *c, resid *r, size_t a, size_t b)
{
    c->queued = 1;
    if (r->u1 == r->u0 || b < r->u0 || a > r->u1) {
        if (r->d1 > r->d0) {
            ex_gpu_status st = write_back(c, r);
            if (st) return st;
            EXC_CUDA(cudaStreamSynchronize(c->s));
        }
        r->u0 = r->d0 = a;
        r->u1 = r->d1 = b;
        return EX_GPU_OK;
    }
    if (a < r->u0) r->u0 = a;
    if (b > r->u1) r->u1 = b;
    /* dirty: the hull (inside the usable interval; bytes in between equal the host's) */
    if (r->d1 == r->d0) {
        r->d0 = a;
        r->d1 = b;
    } else {
        if (a < r->d0) r->d0 = a;
        if (b > r->d1) r->d1 = b;
    }
    return EX_GPU_OK;
}

/* Activation input [p, p + bytes): the device copy, uploaded where needed. */
static ex_gpu_status act_in(cuda_be *c, const void *p, size_t bytes, void **dev)
{
    resid *r;
    ex_gpu_status st = find_range(c, &c->act, p, bytes, MAX_ACT_RANGES, 0, &r);
    if (st) return st;
    size_t a = (size_t)((const char *)p - r->host);
    if ((st = make_usable(c, r, a, a + bytes))) return st;
    *dev = r->dev + a;
    return EX_GPU_OK;
}

/* Activation output [p, p + bytes): the device buffer the op writes (stays on the device). */
static ex_gpu_status act_out(cuda_be *c, void *p, size_t bytes, void **dev)
{
    resid *r;
    ex_gpu_status st = find_range(c, &c->act, p, bytes, MAX_ACT_RANGES, 0, &r);
    if (st) return st;
    size_t a = (size_t)((char *)p - r->host);
    if ((st = mark_written(c, r, a, a + bytes))) return st;
    *dev = r->dev + a;
    return EX_GPU_OK;
}

/* Activation read and written in place. */
static ex_gpu_status act_io(cuda_be *c, void *p, size_t bytes, void **dev)
{
    ex_gpu_status st = act_in(c, p, bytes, dev);
    return st ? st : act_out(c, p, bytes, dev);
}

static resid *kv_find(cuda_be *c, const void *cache)
{
    for (int i = 0; i < c->kv.n; i++)
        if (c->kv.r[i].host == (const char *)cache) return &c->kv.r[i];
    return NULL;
}

/* KV slab of `rows` rows of row_bytes at host `cache` whose rows [0, need) must be usable: rows the
 * device lacks are uploaded from the host (written there by another backend). *out as find_range. */
static ex_gpu_status kv_rows(cuda_be *c, const void *cache, size_t rows, size_t row_bytes, size_t need, resid **out)
{
    resid *r = kv_find(c, cache);
    if (r && r->bytes < rows * row_bytes) { /* a larger slab at the same address */
        ex_gpu_status st = write_back(c, r);
        if (st) return st;
        EXC_CUDA(cudaStreamSynchronize(c->s));
        drop(c->s, &c->kv, (int)(r - c->kv.r));
    }
    ex_gpu_status st = find_range(c, &c->kv, cache, rows * row_bytes, 0, 1, &r);
    if (st) return st;
    size_t have = r->u1; /* usable interval of a slab: [0, u1) */
    if (need * row_bytes > have)
        EXC_CUDA(cudaMemcpyAsync(r->dev + have, r->host + have, need * row_bytes - have, cudaMemcpyHostToDevice, c->s));
    if (need * row_bytes > r->u1) r->u1 = need * row_bytes;
    r->u0 = 0;
    *out = r;
    return EX_GPU_OK;
}

/* ---- residency entries of the table ------------------------------------------------------------ */

static enum ats_status be_flush(void *ctx, int with_kv)
{
    cuda_be *c = (cuda_be *)ctx;
    int copies = 0;
    for (int i = 0; i < c->act.n; i++) {
        copies += c->act.r[i].d1 > c->act.r[i].d0;
        TRY(write_back(c, &c->act.r[i]));
    }
    if (with_kv)
        for (int i = 0; i < c->kv.n; i++) {
            copies += c->kv.r[i].d1 > c->kv.r[i].d0;
            TRY(write_back(c, &c->kv.r[i]));
        }
    if (!copies && !c->queued) return ATS_OK; /* nothing ran since the last flush: nothing to wait for */
    c->queued = 0;
    cudaError_t e = cudaStreamSynchronize(c->s);
    if (e != cudaSuccess) return to_ats(exc_fail(e, "cudaStreamSynchronize (flush)", __FILE__, __LINE__));
    return ATS_OK;
}

static void be_host_wrote(void *ctx)
{
    cuda_be *c = (cuda_be *)ctx;
    int copied = 0;
    for (int i = 0; i < c->act.n; i++) {
        resid *r = &c->act.r[i];
        if (r->d1 > r->d0) { /* not flushed (a caller outside the session's protocol): keep its writes */
            if (write_back(c, r) != EX_GPU_OK) continue;
            copied = 1;
        }
        r->u0 = r->u1 = 0;
    }
    if (copied) (void)cudaStreamSynchronize(c->s);
}

static void forget_list(cuda_be *c, rlist *l, const char *p, size_t bytes)
{
    int waited = 0;
    for (int i = 0; i < l->n;)
        if (overlaps(&l->r[i], p, bytes)) {
            if (!waited) (void)cudaStreamSynchronize(c->s);
            waited = 1;
            drop(NULL, l, i);
        } else {
            i++;
        }
}

static void be_forget(void *ctx, const void *host, size_t bytes)
{
    cuda_be *c = (cuda_be *)ctx;
    forget_list(c, &c->act, (const char *)host, bytes);
    forget_list(c, &c->kv, (const char *)host, bytes);
}

/* Copies back the dirty bytes of every range of `l` inside [p, p + bytes) (queued on the stream);
 * *any: one was found. */
static ex_gpu_status evict_copy(cuda_be *c, rlist *l, const char *p, size_t bytes, int *any)
{
    for (int i = 0; i < l->n; i++)
        if (overlaps(&l->r[i], p, bytes)) {
            *any = 1;
            ex_gpu_status st = write_back(c, &l->r[i]);
            if (st) return st;
        }
    return EX_GPU_OK;
}

static enum ats_status be_evict(void *ctx, const void *host, size_t bytes)
{
    cuda_be *c = (cuda_be *)ctx;
    const char *p = (const char *)host;
    int any = 0;
    TRY(evict_copy(c, &c->act, p, bytes, &any));
    TRY(evict_copy(c, &c->kv, p, bytes, &any));
    if (!any) return ATS_OK;
    cudaError_t e = cudaStreamSynchronize(c->s);
    if (e != cudaSuccess) return to_ats(exc_fail(e, "cudaStreamSynchronize (evict)", __FILE__, __LINE__));
    forget_list(c, &c->act, p, bytes); /* clean now: dropped without another wait */
    forget_list(c, &c->kv, p, bytes);
    return ATS_OK;
}

/* ---- ops ------------------------------------------------------------------------------------------ */

#define F4(n) ((size_t)(n) * sizeof(float))

static enum ats_status be_embedding(void *ctx, const ex_tensor *tok_embd, const int32_t *tokens, int64_t n, float *x)
{
    cuda_be *c = (cuda_be *)ctx;
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= tok_embd->ne[1]) return ATS_EINVAL;
    ex_tensor w;
    void *dx;
    size_t tb = (size_t)n * sizeof(int32_t);
    TRY(dev_tensor(c, tok_embd, &w));
    if (tb > c->tok_bytes) {
        if (cudaStreamSynchronize(c->s) != cudaSuccess) return ATS_ERANGE; /* queued work may read it */
        cudaFree(c->tok);
        c->tok = NULL;
        c->tok_bytes = 0;
        if (cudaMalloc((void **)&c->tok, tb) != cudaSuccess) return ATS_ENOMEM;
        c->tok_bytes = tb;
    }
    /* pageable source: staged before the call returns, so the caller may reuse its buffer */
    if (cudaMemcpyAsync(c->tok, tokens, tb, cudaMemcpyHostToDevice, c->s) != cudaSuccess) return ATS_ERANGE;
    TRY(act_out(c, x, F4(n * tok_embd->ne[0]), &dx));
    TRY(ex_cuda_embedding(&w, c->tok, n, (float *)dx, c->s));
    return ATS_OK;
}

static enum ats_status be_rmsnorm(void *ctx, const float *x, const float *w, int64_t n_rows, int64_t n, float eps, float *y)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dw, *dx, *dy;
    TRY(get_mirror(c, w, F4(n), &dw));
    TRY(act_in(c, x, F4(n_rows * n), &dx));
    TRY(act_out(c, y, F4(n_rows * n), &dy));
    TRY(ex_cuda_rmsnorm((const float *)dx, (const float *)dw, n_rows, n, eps, (float *)dy, c->s));
    return ATS_OK;
}

static enum ats_status be_matmul(void *ctx, const ex_tensor *w, const float *x, int64_t n, float *y)
{
    cuda_be *c = (cuda_be *)ctx;
    ex_tensor dw;
    void *dx, *dy;
    TRY(dev_tensor(c, w, &dw));
    TRY(act_in(c, x, F4(n * w->ne[0]), &dx));
    TRY(act_out(c, y, F4(n * w->ne[1]), &dy));
    TRY(ex_cuda_matmul(c->g, &dw, (const float *)dx, n, (float *)dy, c->s));
    return ATS_OK;
}

static enum ats_status be_output(void *ctx, const ex_tensor *w, const float *x, int64_t n, float *logits)
{
    return be_matmul(ctx, w, x, n, logits);
}

static enum ats_status be_qk_norm(void *ctx, float *x, const float *w, int64_t n_tokens, int64_t n_head, int64_t hd,
                                  float eps)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dw, *dx;
    TRY(get_mirror(c, w, F4(hd), &dw));
    TRY(act_io(c, x, F4(n_tokens * n_head * hd), &dx));
    TRY(ex_cuda_qk_norm((float *)dx, (const float *)dw, n_tokens, n_head, hd, eps, c->s));
    return ATS_OK;
}

static enum ats_status be_rope(void *ctx, float *x, int64_t n_tokens, int64_t n_head, int64_t hd, int64_t n_rot,
                               int64_t pos0, float theta, ats_rope_type type)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dx;
    TRY(act_io(c, x, F4(n_tokens * n_head * hd), &dx));
    TRY(ex_cuda_rope((float *)dx, n_tokens, n_head, hd, n_rot, pos0, theta, type, c->s));
    return ATS_OK;
}

/* Appends rows [pos0, pos0 + n) to one layer's KV slabs on the device (F32 or F16 slabs: row_bytes
 * = kvd * elem_bytes, the session's host cache mirrored byte for byte). Rows [dev_rows, pos0) that
 * another backend wrote into the host slab are uploaded first; rows past pos0 the device holds from
 * an earlier attempt (a failed forward is retried at the same position) are given up. On success
 * dslab[0..1] are the device K and V slabs (row 0), dk / dv the device copies of k, v. */
static ex_gpu_status kv_store_rows(cuda_be *c, const float *k, const float *v, int64_t n, int64_t pos0, int64_t kvd,
                                   int64_t n_ctx, void *kc, void *vc, size_t elem_bytes, void **dk, void **dv,
                                   char *dslab[2])
{
    ex_gpu_status st;
    if (!k || !v || !kc || !vc || n < 1 || pos0 < 0 || kvd < 1 || pos0 + n > n_ctx) return EX_GPU_EINVAL;
    size_t row = (size_t)kvd * elem_bytes, a = (size_t)pos0 * row, b = (size_t)(pos0 + n) * row;
    void *slab[2] = {kc, vc};
    if ((st = act_in(c, k, F4(n * kvd), dk))) return st;
    if ((st = act_in(c, v, F4(n * kvd), dv))) return st;
    for (int i = 0; i < 2; i++) {
        resid *r = kv_find(c, slab[i]);
        if (r && r->u1 > a) { /* positions went back (a failed forward retried): keep rows [0, pos0) */
            r->u1 = a;
            if (r->d1 > a) r->d1 = a;
            if (r->d0 >= r->d1) r->d0 = r->d1 = 0;
        }
        if ((st = kv_rows(c, slab[i], (size_t)n_ctx, row, (size_t)pos0, &r))) return st;
        if ((st = mark_written(c, r, a, b))) return st;
        dslab[i] = r->dev;
    }
    return EX_GPU_OK;
}

static enum ats_status be_kv_store(void *ctx, const float *k, const float *v, int64_t n, int64_t pos0, int64_t kvd,
                                   int64_t n_ctx, float *kc, float *vc)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dk, *dv;
    char *dslab[2];
    TRY(kv_store_rows(c, k, v, n, pos0, kvd, n_ctx, kc, vc, sizeof(float), &dk, &dv, dslab));
    TRY(ex_cuda_kv_store((const float *)dk, (const float *)dv, n, pos0, kvd, n_ctx, (float *)dslab[0],
                         (float *)dslab[1], c->s));
    return ATS_OK;
}

static enum ats_status be_kv_store_f16(void *ctx, const float *k, const float *v, int64_t n, int64_t pos0, int64_t kvd,
                                       int64_t n_ctx, ex_fp16 *kc, ex_fp16 *vc)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dk, *dv;
    char *dslab[2];
    TRY(kv_store_rows(c, k, v, n, pos0, kvd, n_ctx, kc, vc, sizeof(ex_fp16), &dk, &dv, dslab));
    TRY(ex_cuda_kv_store_f16((const float *)dk, (const float *)dv, n, pos0, kvd, n_ctx, (ex_fp16 *)dslab[0],
                             (ex_fp16 *)dslab[1], c->s));
    return ATS_OK;
}

/* Device K and V slabs with rows [0, pos0 + n) usable, q on the device, out's device buffer. */
static ex_gpu_status attention_args(cuda_be *c, const float *q, int64_t n, int64_t pos0, const void *kc,
                                    const void *vc, int64_t H, int64_t Hkv, int64_t hd, size_t elem_bytes,
                                    const void **dkc, const void **dvc, void **dq, float *out, void **dout)
{
    ex_gpu_status st;
    resid *r;
    size_t rows = (size_t)(pos0 + n), row = (size_t)(Hkv * hd) * elem_bytes;
    if ((st = kv_rows(c, kc, rows, row, rows, &r))) return st;
    *dkc = r->dev;
    if ((st = kv_rows(c, vc, rows, row, rows, &r))) return st;
    *dvc = r->dev;
    if ((st = act_in(c, q, F4(n * H * hd), dq))) return st;
    if ((st = act_out(c, out, F4(n * H * hd), dout))) return st;
    return EX_GPU_OK;
}

static enum ats_status be_attention(void *ctx, const float *q, int64_t n, int64_t pos0, const float *kc, const float *vc,
                                    int64_t H, int64_t Hkv, int64_t hd, float scale, float *out)
{
    cuda_be *c = (cuda_be *)ctx;
    const void *dkc, *dvc;
    void *dq, *dout;
    TRY(attention_args(c, q, n, pos0, kc, vc, H, Hkv, hd, sizeof(float), &dkc, &dvc, &dq, out, &dout));
    TRY(ex_cuda_attention((const float *)dq, n, pos0, (const float *)dkc, (const float *)dvc, H, Hkv, hd, scale,
                          (float *)dout, c->s));
    return ATS_OK;
}

static enum ats_status be_attention_f16(void *ctx, const float *q, int64_t n, int64_t pos0, const ex_fp16 *kc,
                                        const ex_fp16 *vc, int64_t H, int64_t Hkv, int64_t hd, float scale, float *out)
{
    cuda_be *c = (cuda_be *)ctx;
    const void *dkc, *dvc;
    void *dq, *dout;
    TRY(attention_args(c, q, n, pos0, kc, vc, H, Hkv, hd, sizeof(ex_fp16), &dkc, &dvc, &dq, out, &dout));
    TRY(ex_cuda_attention_f16((const float *)dq, n, pos0, (const ex_fp16 *)dkc, (const ex_fp16 *)dvc, H, Hkv, hd,
                              scale, (float *)dout, c->s));
    return ATS_OK;
}

static enum ats_status be_add(void *ctx, float *y, const float *x, int64_t n)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dy, *dx;
    TRY(act_in(c, x, F4(n), &dx));
    TRY(act_io(c, y, F4(n), &dy));
    TRY(ex_cuda_add((float *)dy, (const float *)dx, n, c->s));
    return ATS_OK;
}

static enum ats_status be_swiglu(void *ctx, const float *gate, const float *up, int64_t n, float *out)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dg, *du, *dout;
    TRY(act_in(c, gate, F4(n), &dg));
    TRY(act_in(c, up, F4(n), &du));
    TRY(act_out(c, out, F4(n), &dout)); /* in place over gate allowed */
    TRY(ex_cuda_swiglu((const float *)dg, (const float *)du, n, (float *)dout, c->s));
    return ATS_OK;
}

static enum ats_status be_ffn(void *ctx, const ex_tensor *gate, const ex_tensor *up, const ex_tensor *down,
                              const float *x, int64_t n, float *out)
{
    cuda_be *c = (cuda_be *)ctx;
    ex_tensor g, u, d;
    void *dx, *dout;
    TRY(dev_tensor(c, gate, &g));
    TRY(dev_tensor(c, up, &u));
    TRY(dev_tensor(c, down, &d));
    TRY(act_in(c, x, F4(n * gate->ne[0]), &dx));
    TRY(act_out(c, out, F4(n * gate->ne[0]), &dout));
    TRY(ex_cuda_ffn(c->g, &g, &u, &d, (const float *)dx, n, (float *)dout, c->s));
    return ATS_OK;
}

static enum ats_status be_router_topk(void *ctx, const float *logits, int64_t n, int64_t n_expert, int64_t k,
                                      int norm_topk, int32_t *ids, float *weights)
{
    cuda_be *c = (cuda_be *)ctx;
    void *dl, *di, *dw;
    TRY(act_in(c, logits, F4(n * n_expert), &dl));
    TRY(act_out(c, ids, (size_t)(n * k) * sizeof(int32_t), &di));
    TRY(act_out(c, weights, F4(n * k), &dw));
    TRY(ex_cuda_router_topk((const float *)dl, n, n_expert, k, norm_topk, (int32_t *)di, (float *)dw, c->s));
    return ATS_OK;
}

/* ids may exist only on the device (the router's output): they are validated by ex_cuda_moe on the
 * device (an id outside [0, n_expert) gives that token a NaN row, never an out-of-range read). */
static enum ats_status be_moe(void *ctx, const ex_tensor *gate_exps, const ex_tensor *up_exps,
                              const ex_tensor *down_exps, const float *x, int64_t n, const int32_t *ids,
                              const float *weights, int64_t k, float *out)
{
    cuda_be *c = (cuda_be *)ctx;
    ex_tensor g, u, d;
    void *dx, *di, *dw, *dout;
    int64_t E = gate_exps->ne[0];
    TRY(dev_tensor(c, gate_exps, &g));
    TRY(dev_tensor(c, up_exps, &u));
    TRY(dev_tensor(c, down_exps, &d));
    TRY(act_in(c, x, F4(n * E), &dx));
    TRY(act_in(c, ids, (size_t)(n * k) * sizeof(int32_t), &di));
    TRY(act_in(c, weights, F4(n * k), &dw));
    TRY(act_out(c, out, F4(n * E), &dout));
    TRY(ex_cuda_moe(c->g, &g, &u, &d, (const float *)dx, n, (const int32_t *)di, (const float *)dw, k, (float *)dout,
                    c->s));
    return ATS_OK;
}

ex_gpu_status ex_backend_cuda_new(ex_gpu *g, ex_backend **out)
{
    *out = NULL;
    if (!g) return EX_GPU_EINVAL;
    cuda_be *c = (cuda_be *)calloc(1, sizeof *c);
    if (!c) return EX_GPU_ENOMEM;
    c->g = g;
    c->s = ex_gpu_stream(g, EX_GPU_STREAM_COMPUTE);
    ex_backend *b = &c->be;
    b->name = "cuda";
    b->ctx = c;
    b->embedding = be_embedding;
    b->rmsnorm = be_rmsnorm;
    b->matmul = be_matmul;
    b->qk_norm = be_qk_norm;
    b->rope = be_rope;
    b->kv_store = be_kv_store;
    b->attention = be_attention;
    b->add = be_add;
    b->swiglu = be_swiglu;
    b->ffn = be_ffn;
    b->router_topk = be_router_topk;
    b->moe = be_moe;
    b->output = be_output;
    b->flush = be_flush;
    b->host_wrote = be_host_wrote;
    b->forget = be_forget;
    b->evict = be_evict;
    b->kv_store_f16 = be_kv_store_f16;
    b->attention_f16 = be_attention_f16;
    b->bind_weight = be_bind_weight;
    b->bound_only = be_bound_only;
    *out = b;
    return EX_GPU_OK;
}

/* Drops weight mirrors and resident ranges. Dirty bytes (KV rows of a live session) are copied
 * back first, so a session that outlives a reset stays correct (its KV rows are uploaded again). */
void ex_backend_cuda_reset(ex_backend *b)
{
    if (!b) return;
    cuda_be *c = (cuda_be *)b->ctx;
    for (int i = 0; i < c->act.n; i++) (void)write_back(c, &c->act.r[i]);
    for (int i = 0; i < c->kv.n; i++) (void)write_back(c, &c->kv.r[i]);
    cudaStreamSynchronize(c->s);
    for (int i = 0; i < c->n_m; i++)
        if (!c->m[i].bound) cudaFree(c->m[i].dev);
    c->n_m = 0;
    if (c->hcap) memset(c->hash, 0, (size_t)c->hcap * sizeof *c->hash);
    while (c->act.n) drop(c->s, &c->act, 0);
    while (c->kv.n) drop(c->s, &c->kv, 0);
    (void)cudaGetLastError();
}

void ex_backend_cuda_free(ex_backend *b)
{
    if (!b) return;
    cuda_be *c = (cuda_be *)b->ctx;
    ex_backend_cuda_reset(b);
    cudaFree(c->tok);
    free(c->m);
    free(c->hash);
    free(c->act.r);
    free(c->kv.r);
    free(c);
}

uint64_t ex_backend_cuda_mirror_bytes(const ex_backend *b)
{
    const cuda_be *c = (const cuda_be *)b->ctx;
    uint64_t t = 0;
    for (int i = 0; i < c->n_m; i++) t += c->m[i].bound ? 0 : c->m[i].bytes; /* bound: the runtime's */
    for (int i = 0; i < c->kv.n; i++) t += c->kv.r[i].bytes;
    for (int i = 0; i < c->act.n; i++) t += c->act.r[i].bytes;
    return t;
}
