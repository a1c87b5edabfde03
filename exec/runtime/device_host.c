/* A device emulated over host memory (ex/runtime.h ex_device_host_new): the plan executor's test bed
 * without a GPU. Memory is malloc'd; copies run at once (so a copy issued before the previous reader
 * of its slot ran overwrites what that reader is about to read); events hold the host clock at
 * record time. Its op table is the CPU's kernels reading every weight through the runtime's binding
 * (an unbound weight with bound_only is ATS_EINVAL) and comparing the bound bytes with the host
 * weight first: a stale or poisoned slot counts as a bad read and computes with the bad bytes.
 * retire() fills a range with 0xFF bytes (NaN scales in every quantized type, NaN floats). Streams
 * are checked too: a copy over bytes an op read without the transfer stream having waited for an
 * event recorded after that op, or a read of bytes whose copy the compute stream did not wait for,
 * is counted (unwaited): on real streams either would be a race. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ex/ops.h"
#include "ex/runtime.h"

typedef struct binding {
    const void *host;
    void *dev;
    size_t bytes;
    size_t expert_bytes; /* > 0: a compact copy of experts ids[0..n_ids) (note_gather) */
    int32_t *ids, n_ids;
} binding;

/* A device range and the sequence number of what touched it (a read by an op, or a copy). */
typedef struct touch {
    const char *lo, *hi;
    int64_t seq;
} touch;

typedef struct tlist {
    touch *t;
    int n, cap;
} tlist;

typedef struct hdev {
    ex_device d;
    ex_backend be;
    binding *b;
    int n_b, cap_b;
    int bound_only;
    ex_device_host_stats st;
    /* stream discipline (what asynchronous streams would make a race): */
    int64_t op_seq;      /* ops that read a bound weight so far */
    int64_t copy_seq;    /* copies into device memory so far */
    int64_t xfer_waited; /* the transfer stream has waited for reads up to this op_seq */
    int64_t comp_waited; /* the compute stream has waited for copies up to this copy_seq */
    tlist reads, copies;
    struct { const char *lo, *hi; } *pin; /* host_pin ledger: page-rounded ranges pinned now */
    int n_pin, cap_pin;
    int refuse_pins;                      /* ex_device_host_refuse_pins */
} hdev;

typedef struct hevent {
    int64_t ns;
    int64_t op_seq, copy_seq; /* what had been queued on its stream when it was recorded */
} hevent;

static void tl_add(tlist *l, const void *lo, size_t bytes, int64_t seq)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        touch *t = realloc(l->t, (size_t)cap * sizeof *t);
        if (!t) return; /* the check loses a record, never the run */
        l->t = t;
        l->cap = cap;
    }
    l->t[l->n++] = (touch){(const char *)lo, (const char *)lo + bytes, seq};
}

/* Drops records at or below seq (waited for: they can no longer race). */
static void tl_prune(tlist *l, int64_t seq)
{
    int j = 0;
    for (int i = 0; i < l->n; i++)
        if (l->t[i].seq > seq) l->t[j++] = l->t[i];
    l->n = j;
}

/* Highest seq of a record overlapping [lo, lo + bytes), 0 when none. */
static int64_t tl_max(const tlist *l, const void *lo, size_t bytes)
{
    const char *a = lo, *b = a + bytes;
    int64_t m = 0;
    for (int i = 0; i < l->n; i++)
        if (l->t[i].lo < b && a < l->t[i].hi && l->t[i].seq > m) m = l->t[i].seq;
    return m;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- device entries ------------------------------------------------------------------------ */

static enum ats_status h_alloc(void *ctx, size_t bytes, void **dev, ats_err *err)
{
    hdev *h = ctx;
    size_t *p = malloc(bytes + 64);
    if (!p) return ats_err_set(err, ATS_ENOMEM, "host device: allocation of %zu bytes", bytes);
    p[0] = bytes;
    *dev = (char *)p + 64;
    h->st.alloc_bytes += bytes;
    if (h->st.alloc_bytes > h->st.peak_alloc_bytes) h->st.peak_alloc_bytes = h->st.alloc_bytes;
    return ATS_OK;
}

static void h_free(void *ctx, void *dev)
{
    hdev *h = ctx;
    if (!dev) return;
    size_t *p = (size_t *)((char *)dev - 64);
    h->st.alloc_bytes -= p[0];
    free(p);
}

static enum ats_status h_h2d(void *ctx, void *dev, const void *host, size_t bytes, int stream, ats_err *err)
{
    (void)stream;
    (void)err;
    hdev *h = ctx;
    /* a copy into bytes that an op read, with no wait of the transfer stream for that op's end */
    if (tl_max(&h->reads, dev, bytes) > h->xfer_waited) h->st.unwaited++;
    memcpy(dev, host, bytes);
    h->st.copies++;
    tl_add(&h->copies, dev, bytes, ++h->copy_seq);
    return ATS_OK;
}

static enum ats_status h_event_new(void *ctx, void **ev, ats_err *err)
{
    (void)ctx;
    *ev = calloc(1, sizeof(hevent));
    return *ev ? ATS_OK : ats_err_set(err, ATS_ENOMEM, "host device: event");
}
static void h_event_free(void *ctx, void *ev) { (void)ctx; free(ev); }
static enum ats_status h_record(void *ctx, void *ev, int stream, ats_err *err)
{
    (void)err;
    hdev *h = ctx;
    hevent *e = ev;
    e->ns = mono_ns();
    e->op_seq = stream == EX_DEV_COMPUTE ? h->op_seq : 0;
    e->copy_seq = stream == EX_DEV_TRANSFER ? h->copy_seq : 0;
    return ATS_OK;
}
/* Work runs at once, but what a stream has waited for is tracked: a copy over bytes an op read
 * without a wait for that op, or an op reading bytes whose copy it did not wait for, would be a race
 * on real streams (counted in unwaited). */
static enum ats_status h_wait(void *ctx, int stream, void *ev, ats_err *err)
{
    (void)err;
    hdev *h = ctx;
    const hevent *e = ev;
    if (stream == EX_DEV_TRANSFER && e->op_seq > h->xfer_waited) h->xfer_waited = e->op_seq;
    if (stream == EX_DEV_COMPUTE && e->copy_seq > h->comp_waited) h->comp_waited = e->copy_seq;
    return ATS_OK;
}
static enum ats_status h_sync(void *ctx, int stream, ats_err *err)
{
    (void)err;
    hdev *h = ctx;
    /* the host waited: later work on any stream is ordered after this stream's */
    if (stream == EX_DEV_COMPUTE) h->xfer_waited = h->op_seq;
    if (stream == EX_DEV_TRANSFER) h->comp_waited = h->copy_seq;
    tl_prune(&h->reads, h->xfer_waited);
    tl_prune(&h->copies, h->comp_waited);
    return ATS_OK;
}
static enum ats_status h_elapsed(void *ctx, void *a, void *b, int64_t *ns, ats_err *err)
{
    (void)ctx; (void)err;
    *ns = ((hevent *)b)->ns - ((hevent *)a)->ns;
    return ATS_OK;
}
static void h_retire(void *ctx, void *dev, size_t bytes, void *ev)
{
    (void)ev;
    hdev *h = ctx;
    memset(dev, 0xFF, bytes);
    h->st.retired++;
}

/* ---- op table: CPU kernels over bound weights ------------------------------------------------- */

static int find_b(const hdev *h, const void *host)
{
    for (int i = h->n_b - 1; i >= 0; i--)
        if (h->b[i].host == host) return i;
    return -1;
}

static enum ats_status h_bind(void *ctx, const void *host, size_t bytes, void *dev)
{
    hdev *h = ctx;
    int i = find_b(h, host);
    if (i >= 0) {
        free(h->b[i].ids);
        h->b[i] = h->b[--h->n_b];
    }
    if (!dev) return ATS_OK;
    if (h->n_b == h->cap_b) {
        int cap = h->cap_b ? 2 * h->cap_b : 64;
        binding *nb = realloc(h->b, (size_t)cap * sizeof *nb);
        if (!nb) return ATS_ENOMEM;
        h->b = nb;
        h->cap_b = cap;
    }
    h->b[h->n_b++] = (binding){host, dev, bytes, 0, NULL, 0};
    return ATS_OK;
}

static void h_note_gather(void *ctx, const void *host, size_t expert_bytes, const int32_t *ids, int32_t n)
{
    hdev *h = ctx;
    int i = find_b(h, host);
    if (i < 0) return;
    free(h->b[i].ids);
    h->b[i].ids = malloc((size_t)n * sizeof *ids);
    if (!h->b[i].ids) {
        h->b[i].expert_bytes = 0;
        return;
    }
    memcpy(h->b[i].ids, ids, (size_t)n * sizeof *ids);
    h->b[i].n_ids = n;
    h->b[i].expert_bytes = expert_bytes;
    h->st.gathers++;
}

/* The residency flush of the op table (ex/backend.h): the host waits for the ops queued so far, as the
 * CUDA table's flush waits for its compute stream (the session calls it at every change of backend,
 * so a CPU op always runs after the GPU ops before it ended). */
static enum ats_status h_flush(void *ctx, int with_kv)
{
    (void)with_kv;
    hdev *h = ctx;
    h->xfer_waited = h->op_seq;
    tl_prune(&h->reads, h->xfer_waited);
    return ATS_OK;
}

static void h_bound_only(void *ctx, int on) { ((hdev *)ctx)->bound_only = on; }

/* The device address of host weight bytes [host, host + bytes): its binding (checked against the
 * host bytes), or the host bytes themselves when nothing binds it and bound_only is off. */
static enum ats_status weight(hdev *h, const void *host, size_t bytes, const void **out)
{
    int i = find_b(h, host);
    if (i < 0) {
        if (h->bound_only) return ATS_EINVAL;
        *out = host;
        return ATS_OK;
    }
    if (h->b[i].bytes < bytes) return ATS_EINVAL;
    h->st.bound_reads++;
    const binding *bd = &h->b[i];
    if (tl_max(&h->copies, bd->dev, bytes) > h->comp_waited) h->st.unwaited++; /* read before its copy's event */
    tl_add(&h->reads, bd->dev, bytes, ++h->op_seq);
    if (bd->expert_bytes) {
        for (int32_t j = 0; j < bd->n_ids && (size_t)j * bd->expert_bytes < bytes; j++)
            if (memcmp((const char *)bd->dev + (size_t)j * bd->expert_bytes,
                       (const char *)host + (size_t)bd->ids[j] * bd->expert_bytes, bd->expert_bytes) != 0) {
                h->st.bad_reads++;
                break;
            }
    } else if (memcmp(bd->dev, host, bytes) != 0) {
        h->st.bad_reads++;
    }
    *out = h->b[i].dev;
    return ATS_OK;
}

static size_t tbytes(const ex_tensor *t)
{
    return (size_t)(t->row_bytes * (uint64_t)t->ne[1] * (uint64_t)(t->ne[2] > 0 ? t->ne[2] : 1));
}

static enum ats_status tview(hdev *h, const ex_tensor *t, ex_tensor *out)
{
    *out = *t;
    return weight(h, t->data, tbytes(t), &out->data);
}

#define TRYS(x)                                                                                    \
    do {                                                                                           \
        enum ats_status s_ = (x);                                                                  \
        if (s_) return s_;                                                                         \
    } while (0)

static enum ats_status d_embedding(void *c, const ex_tensor *t, const int32_t *tok, int64_t n, float *x)
{
    ex_tensor w;
    TRYS(tview(c, t, &w));
    return ex_cpu_embedding(&w, tok, n, x);
}
static enum ats_status d_rmsnorm(void *c, const float *x, const float *w, int64_t r, int64_t n, float eps, float *y)
{
    const void *dw;
    TRYS(weight(c, w, (size_t)n * sizeof(float), &dw));
    return ex_cpu_rmsnorm(x, dw, r, n, eps, y);
}
static enum ats_status d_matmul(void *c, const ex_tensor *t, const float *x, int64_t n, float *y)
{
    ex_tensor w;
    TRYS(tview(c, t, &w));
    return ex_cpu_matmul(&w, x, n, y);
}
static enum ats_status d_qk_norm(void *c, float *x, const float *w, int64_t n, int64_t hh, int64_t hd, float eps)
{
    const void *dw;
    TRYS(weight(c, w, (size_t)hd * sizeof(float), &dw));
    return ex_cpu_qk_norm(x, dw, n, hh, hd, eps);
}
static enum ats_status d_rope(void *c, float *x, int64_t n, int64_t hh, int64_t hd, int64_t nr, int64_t p0, float th,
                              ats_rope_type ty)
{ (void)c; return ex_cpu_rope(x, n, hh, hd, nr, p0, th, ty); }
static enum ats_status d_rope_ff(void *c, float *x, int64_t n, int64_t hh, int64_t hd, int64_t nr, int64_t p0,
                                 float th, ats_rope_type ty, const float *ff)
{
    const void *dff;
    TRYS(weight(c, ff, (size_t)(nr / 2) * sizeof(float), &dff));
    return ex_cpu_rope_ff(x, n, hh, hd, nr, p0, th, ty, dff);
}
static enum ats_status d_kv_store(void *c, const float *k, const float *v, int64_t n, int64_t p0, int64_t kvd,
                                  int64_t nctx, float *kc, float *vc)
{ (void)c; return ex_cpu_kv_store(k, v, n, p0, kvd, nctx, kc, vc); }
static enum ats_status d_attention(void *c, const float *q, int64_t n, int64_t p0, const float *kc, const float *vc,
                                   int64_t hh, int64_t hkv, int64_t hd, float sc, float *o)
{ (void)c; return ex_cpu_attention(q, n, p0, kc, vc, hh, hkv, hd, sc, o); }
static enum ats_status d_kv_store_f16(void *c, const float *k, const float *v, int64_t n, int64_t p0, int64_t kvd,
                                      int64_t nctx, ex_fp16 *kc, ex_fp16 *vc)
{ (void)c; return ex_cpu_kv_store_f16(k, v, n, p0, kvd, nctx, kc, vc); }
static enum ats_status d_attention_f16(void *c, const float *q, int64_t n, int64_t p0, const ex_fp16 *kc,
                                       const ex_fp16 *vc, int64_t hh, int64_t hkv, int64_t hd, float sc, float *o)
{ (void)c; return ex_cpu_attention_f16(q, n, p0, kc, vc, hh, hkv, hd, sc, o); }
static enum ats_status d_add(void *c, float *y, const float *x, int64_t n) { (void)c; return ex_cpu_add(y, x, n); }
static enum ats_status d_swiglu(void *c, const float *g, const float *u, int64_t n, float *o)
{ (void)c; return ex_cpu_swiglu(g, u, n, o); }
static enum ats_status d_ffn(void *c, const ex_tensor *g, const ex_tensor *u, const ex_tensor *d, const float *x,
                             int64_t n, float *o)
{
    ex_tensor wg, wu, wd;
    TRYS(tview(c, g, &wg));
    TRYS(tview(c, u, &wu));
    TRYS(tview(c, d, &wd));
    return ex_cpu_ffn(&wg, &wu, &wd, x, n, o);
}
static enum ats_status d_router(void *c, const float *l, int64_t n, int64_t ne, int64_t k, int norm, int32_t *ids,
                                float *w)
{ (void)c; return ex_cpu_router_topk(l, n, ne, k, norm, ids, w); }
static enum ats_status d_moe(void *c, const ex_tensor *g, const ex_tensor *u, const ex_tensor *d, const float *x,
                             int64_t n, const int32_t *ids, const float *w, int64_t k, float *o)
{
    ex_tensor wg, wu, wd;
    TRYS(tview(c, g, &wg));
    TRYS(tview(c, u, &wu));
    TRYS(tview(c, d, &wd));
    return ex_cpu_moe(&wg, &wu, &wd, x, n, ids, w, k, o);
}
static enum ats_status d_output(void *c, const ex_tensor *t, const float *x, int64_t n, float *l)
{
    ex_tensor w;
    TRYS(tview(c, t, &w));
    return ex_cpu_output(&w, x, n, l);
}

/* host_pin as cudaHostRegister: the pages of [host, host + bytes); one overlapping a pinned range is
 * refused (cudaErrorHostMemoryAlreadyRegistered) and counted. Nothing is locked: bookkeeping only. */
static enum ats_status h_pin(void *ctx, void *host, size_t bytes, ats_err *err)
{
    hdev *h = ctx;
    if (h->refuse_pins) {
        h->st.pins_refused++;
        return ats_err_set(err, ATS_ENOMEM, "host_pin: refused (ex_device_host_refuse_pins)");
    }
    const char *lo = (const char *)((uintptr_t)host & ~(uintptr_t)4095);
    const char *hi = (const char *)(((uintptr_t)host + bytes + 4095) & ~(uintptr_t)4095);
    for (int i = 0; i < h->n_pin; i++)
        if (lo < h->pin[i].hi && h->pin[i].lo < hi) {
            h->st.pin_overlaps++;
            return ats_err_set(err, ATS_ENOMEM, "host_pin: [%p, +%zu) overlaps a pinned range", host, bytes);
        }
    if (h->n_pin == h->cap_pin) {
        int cap = h->cap_pin ? 2 * h->cap_pin : 8;
        void *p = realloc(h->pin, (size_t)cap * sizeof *h->pin);
        if (!p) return ats_err_set(err, ATS_ENOMEM, "host_pin: ledger");
        h->pin = p;
        h->cap_pin = cap;
    }
    h->pin[h->n_pin].lo = lo;
    h->pin[h->n_pin].hi = hi;
    h->n_pin++;
    h->st.pins++;
    h->st.pins_live++;
    h->st.pinned_bytes += (uint64_t)(hi - lo);
    return ATS_OK;
}

static void h_unpin(void *ctx, void *host)
{
    hdev *h = ctx;
    const char *lo = (const char *)((uintptr_t)host & ~(uintptr_t)4095);
    for (int i = 0; i < h->n_pin; i++)
        if (h->pin[i].lo == lo) {
            h->st.pinned_bytes -= (uint64_t)(h->pin[i].hi - h->pin[i].lo);
            h->st.pins_live--;
            h->pin[i] = h->pin[--h->n_pin];
            return;
        }
    h->st.unpin_unknown++;
}

enum ats_status ex_device_host_new(ex_device **out)
{
    hdev *h = calloc(1, sizeof *h);
    if (!h) return ATS_ENOMEM;
    ex_backend *b = &h->be;
    b->name = "hostdev";
    b->ctx = h;
    b->embedding = d_embedding;
    b->rmsnorm = d_rmsnorm;
    b->matmul = d_matmul;
    b->qk_norm = d_qk_norm;
    b->rope = d_rope;
    b->kv_store = d_kv_store;
    b->attention = d_attention;
    b->add = d_add;
    b->rope_ff = d_rope_ff;
    b->swiglu = d_swiglu;
    b->ffn = d_ffn;
    b->router_topk = d_router;
    b->moe = d_moe;
    b->output = d_output;
    b->kv_store_f16 = d_kv_store_f16;
    b->attention_f16 = d_attention_f16;
    b->flush = h_flush;
    b->bind_weight = h_bind;
    b->bound_only = h_bound_only;
    ex_device *d = &h->d;
    d->name = "hostdev";
    d->ctx = h;
    d->backend = b;
    d->alloc = h_alloc;
    d->free_mem = h_free;
    d->h2d = h_h2d;
    d->event_new = h_event_new;
    d->event_free = h_event_free;
    d->record = h_record;
    d->wait = h_wait;
    d->sync = h_sync;
    d->elapsed_ns = h_elapsed;
    d->retire = h_retire;
    d->note_gather = h_note_gather;
    d->host_pin = h_pin;
    d->host_unpin = h_unpin;
    *out = d;
    return ATS_OK;
}

void ex_device_host_free(ex_device *d)
{
    if (!d) return;
    hdev *h = d->ctx;
    free(h->pin);
    for (int i = 0; i < h->n_b; i++) free(h->b[i].ids);
    free(h->b);
    free(h->reads.t);
    free(h->copies.t);
    free(h);
}

ex_device_host_stats ex_device_host_get_stats(const ex_device *d) { return ((const hdev *)d->ctx)->st; }
void ex_device_host_refuse_pins(ex_device *d, int on) { ((hdev *)d->ctx)->refuse_pins = on; }
