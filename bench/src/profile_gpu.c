/*
 * bench/src/profile_gpu.c — the GPU half of `ats profile` (bench/profile.h): copy-engine H2D/D2H over
 * sizes, the SM copy kernel over zero-copy memory, both at once, the device read rate, and the
 * interference of CPU DRAM reads with copy-engine H2D. The method of sim/hw/measure/linkprobe.cu, through
 * the executor's own helpers (ex/gpu.h: pinned mapped memory, streams, events, ex_cuda_copy).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/dram.h"
#include "profile_impl.h"

#ifndef ATS_HAVE_CUDA
enum ats_status bp_gpu_measure(const bench_profile_opts *o, bp_gpu_figs *f, ats_err *err)
{
    (void)o;
    (void)f;
    return ats_err_set(err, ATS_ENOTFOUND, "built without the CUDA backend");
}
#else
#include "ex/gpu.h"

#define CK(call, what)                                                                                   \
    do {                                                                                                 \
        ex_gpu_status s_ = (call);                                                                       \
        if (s_) {                                                                                        \
            st = ats_err_set(err, s_ == EX_GPU_ENOMEM ? ATS_ENOMEM : ATS_ERANGE, "ats profile: %s: %s", \
                             what, ex_gpu_status_str(s_));                                               \
            goto done;                                                                                   \
        }                                                                                                \
    } while (0)

/* Median time of one copy of `bytes` [s]: `reps` batches of m back-to-back copies timed by events. */
static ex_gpu_status time_copies(int dir, void *dev, void *host, size_t bytes, ex_stream s, ex_event e0, ex_event e1,
                                 int reps, double *out)
{
    int m = (int)((64u << 20) / bytes);
    m = m < 3 ? 3 : (m > 200 ? 200 : m);
    double v[16];
    ex_gpu_status st;
    for (int r = 0; r <= reps; r++) {
        if ((st = ex_gpu_event_record(e0, s))) return st;
        for (int i = 0; i < m; i++)
            if ((st = dir ? ex_gpu_memcpy_d2h(host, dev, bytes, s) : ex_gpu_memcpy_h2d(dev, host, bytes, s))) return st;
        if ((st = ex_gpu_event_record(e1, s)) || (st = ex_gpu_event_sync(e1))) return st;
        int64_t ns = 0;
        if ((st = ex_gpu_event_elapsed_ns(e0, e1, &ns))) return st;
        if (r > 0) v[r - 1] = (double)ns * 1e-9 / m; /* r = 0: warm-up */
    }
    *out = bench_median(v, reps);
    return EX_GPU_OK;
}

/* The background copier of the interference probe: H2D copies of `chunk` bytes until stop is set. */
typedef struct copier {
    void *dev, *host;
    size_t chunk;
    ex_stream s;
    volatile int stop;
    double bytes, t_s;
    ex_gpu_status st;
} copier;

static void *copier_main(void *p)
{
    copier *c = p;
    int64_t t0 = bench_now_ns();
    while (!c->stop) {
        if ((c->st = ex_gpu_memcpy_h2d(c->dev, c->host, c->chunk, c->s)) || (c->st = ex_gpu_stream_sync(c->s))) break;
        c->bytes += (double)c->chunk;
    }
    c->t_s = (double)(bench_now_ns() - t0) * 1e-9;
    return NULL;
}

enum ats_status bp_gpu_measure(const bench_profile_opts *o, bp_gpu_figs *f, ats_err *err)
{
    ex_gpu *g = NULL;
    ex_gpu_status gs = ex_gpu_open(0, &g);
    if (gs == EX_GPU_ENODEV) return ats_err_set(err, ATS_ENOTFOUND, "no CUDA device");
    if (gs) return ats_err_set(err, ATS_ERANGE, "ats profile: ex_gpu_open: %s", ex_gpu_status_str(gs));
    enum ats_status st = ATS_OK;
    const ex_gpu_props *pr = ex_gpu_info(g);
    snprintf(f->name, sizeof f->name, "%s", pr->name);
    f->copy_engines = pr->async_engines > 0 ? pr->async_engines : 1;
    f->vram_bytes = pr->mem_bytes;
    const size_t big = o->quick ? (size_t)16 << 20 : (size_t)256 << 20;
    const int reps = o->quick ? 3 : 7;
    void *h1 = NULL, *h1d = NULL, *h2 = NULL, *h2d = NULL, *d1 = NULL, *d2 = NULL, *dr = NULL;
    ex_event e0 = NULL, e1 = NULL, e2 = NULL, e3 = NULL;
    ex_stream sc = ex_gpu_stream(g, EX_GPU_STREAM_COMPUTE), st0 = ex_gpu_stream(g, EX_GPU_STREAM_TRANSFER0);
    CK(ex_gpu_host_alloc(g, big, &h1, &h1d), "pinned host buffer");
    CK(ex_gpu_host_alloc(g, big, &h2, &h2d), "pinned host buffer");
    memset(h1, 1, big);
    memset(h2, 2, big);
    CK(ex_gpu_malloc(g, big, &d1), "device buffer");
    CK(ex_gpu_malloc(g, big, &d2), "device buffer");
    CK(ex_gpu_event_new(&e0), "event");
    CK(ex_gpu_event_new(&e1), "event");
    CK(ex_gpu_event_new(&e2), "event");
    CK(ex_gpu_event_new(&e3), "event");
    /* copy engine over sizes: 4 KiB x 4^k up to `big` */
    f->n_sizes = 0;
    for (size_t sz = 4096; sz <= big && f->n_sizes < BP_MAX_SIZES; sz *= 4) {
        bench_progress(&o->sink, "ats profile: copy engine, %zu bytes", sz);
        double th = 0, td = 0;
        CK(time_copies(0, d1, h1, sz, st0, e0, e1, reps, &th), "copy-engine H2D");
        CK(time_copies(1, d1, h1, sz, st0, e0, e1, reps, &td), "copy-engine D2H");
        f->sizes[f->n_sizes] = sz;
        f->h2d_Bps[f->n_sizes] = (double)sz / th;
        f->d2h_Bps[f->n_sizes] = (double)sz / td;
        if (f->n_sizes == 0) {
            f->h2d_lat_s = th;
            f->d2h_lat_s = td;
        }
        f->n_sizes++;
        if (sz * 4 > big && sz != big) sz = big / 4; /* end exactly at `big` */
    }
    /* SM copy kernel over zero-copy memory */
    bench_progress(&o->sink, "%s", "ats profile: SM copy, both paths together");
    double v[16];
    for (int r = 0; r <= reps; r++) {
        int64_t ns = 0;
        CK(ex_gpu_event_record(e0, sc), "event");
        CK(ex_cuda_copy(d2, h2d, big, sc), "SM copy");
        CK(ex_gpu_event_record(e1, sc), "event");
        CK(ex_gpu_event_sync(e1), "event");
        CK(ex_gpu_event_elapsed_ns(e0, e1, &ns), "event");
        if (r > 0) v[r - 1] = (double)big / ((double)ns * 1e-9);
    }
    f->sm_copy_Bps = bench_median(v, reps);
    /* both at once: CE H2D of h1 and SM copy of h2, started together; each path's time by its events */
    double vt[16], vc[16], vs[16];
    for (int r = 0; r <= reps; r++) {
        CK(ex_gpu_stream_sync(sc), "sync");
        CK(ex_gpu_stream_sync(st0), "sync");
        int64_t t0 = bench_now_ns();
        CK(ex_gpu_event_record(e0, st0), "event");
        CK(ex_gpu_event_record(e2, sc), "event");
        CK(ex_gpu_memcpy_h2d(d1, h1, big, st0), "copy-engine H2D");
        CK(ex_cuda_copy(d2, h2d, big, sc), "SM copy");
        CK(ex_gpu_event_record(e1, st0), "event");
        CK(ex_gpu_event_record(e3, sc), "event");
        CK(ex_gpu_event_sync(e1), "event");
        CK(ex_gpu_event_sync(e3), "event");
        double wall = (double)(bench_now_ns() - t0) * 1e-9;
        int64_t nc = 0, ns = 0;
        CK(ex_gpu_event_elapsed_ns(e0, e1, &nc), "event");
        CK(ex_gpu_event_elapsed_ns(e2, e3, &ns), "event");
        if (r > 0) {
            vt[r - 1] = 2.0 * (double)big / wall;
            vc[r - 1] = (double)big / ((double)nc * 1e-9);
            vs[r - 1] = (double)big / ((double)ns * 1e-9);
        }
    }
    f->link_Bps = bench_median(vt, reps);
    f->link_ce_Bps = bench_median(vc, reps);
    f->link_sm_Bps = bench_median(vs, reps);
    /* device read rate */
    size_t rbytes = o->quick ? (size_t)256 << 20 : (size_t)2 << 30;
    CK(ex_gpu_malloc(g, rbytes, &dr), "device buffer (read probe)");
    CK(ex_gpu_memset(dr, 1, rbytes, sc), "memset");
    for (int r = 0; r <= reps; r++) {
        int64_t ns = 0;
        CK(ex_gpu_event_record(e0, sc), "event");
        CK(ex_cuda_read_probe(g, dr, rbytes, sc), "read probe");
        CK(ex_gpu_event_record(e1, sc), "event");
        CK(ex_gpu_event_sync(e1), "event");
        CK(ex_gpu_event_elapsed_ns(e0, e1, &ns), "event");
        if (r > 0) v[r - 1] = (double)rbytes / ((double)ns * 1e-9);
    }
    f->read_Bps = bench_median(v, reps);
    /* interference: CPU DRAM read at o->threads alone, then while a thread streams H2D copies */
    bench_progress(&o->sink, "%s", "ats profile: CPU reads and copy-engine H2D, alone and together");
    bench_dram_opts dopt = bench_dram_opts_default();
    dopt.threads = o->threads;
    dopt.reps = o->quick ? 1 : 3;
    dopt.bytes = o->quick ? (size_t)64 << 20 : (size_t)1 << 30;
    bench_dram_result dres;
    if ((st = bench_dram_probe(&dopt, &dres, err))) goto done;
    f->cpu_alone_Bps = dres.best_Bps;
    f->dma_alone_Bps = f->h2d_Bps[f->n_sizes - 1];
    copier c = {d1, h1, big, st0, 0, 0, 0, EX_GPU_OK};
    pthread_t th;
    if (pthread_create(&th, NULL, copier_main, &c) != 0) {
        st = ats_err_set(err, ATS_ENOMEM, "ats profile: cannot start the copy thread");
        goto done;
    }
    st = bench_dram_probe(&dopt, &dres, err);
    c.stop = 1;
    pthread_join(th, NULL);
    if (st) goto done;
    CK(c.st, "copy-engine H2D (interference)");
    f->cpu_with_dma_Bps = dres.best_Bps;
    f->dma_with_cpu_Bps = c.t_s > 0 ? c.bytes / c.t_s : 0.0;
    if (!(f->dma_with_cpu_Bps > 0)) st = ats_err_set(err, ATS_ERANGE, "ats profile: no H2D copy finished during the CPU read");
done:
    if (e0) ex_gpu_event_free(e0);
    if (e1) ex_gpu_event_free(e1);
    if (e2) ex_gpu_event_free(e2);
    if (e3) ex_gpu_event_free(e3);
    ex_gpu_free(g, d1);
    ex_gpu_free(g, d2);
    ex_gpu_free(g, dr);
    if (h1) ex_gpu_host_free(g, h1);
    if (h2) ex_gpu_host_free(g, h2);
    ex_gpu_close(g);
    return st;
}
#endif
