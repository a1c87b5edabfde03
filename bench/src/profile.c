/*
 * bench/src/profile.c — `ats profile` (bench/profile.h): the op tables measured through the executor's
 * runtime (ex_rt), the DRAM rates over thread counts, and the profile document (the base description
 * with the measured figures, their sources and the op table). The GPU link probes: profile_gpu.c.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ats/costs.h"
#include "atsc/hw_json.h"
#include "bench/dram.h"
#include "bench/profile.h"
#include "ex/runtime.h"
#include "ex/session.h"
#include "profile_impl.h"

const int64_t bench_profile_tokens[BENCH_PROFILE_N_TOKENS] = {1, 16, 32, 64, 128, 256, 512, 1024, 2048};
static const int64_t QUICK_TOKENS[] = {1, 16, 64};

bench_profile_opts bench_profile_opts_default(void)
{
    bench_profile_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 16;
    return o;
}

/* ---- op table ------------------------------------------------------------------------------ */

/* One backend's measurement: which entry each op of the graph belongs to, and the samples. */
typedef struct table_run {
    const bench_profile_opts *o;
    int backend;              /* ATS_CPU / ATS_GPU */
    ats_prof_table *t;        /* entries are appended here */
    int32_t first;            /* t->e[first .. t->n) are this backend's */
    int32_t n_ops;
    int32_t *entry;           /* per op: index into t->e, -1: not measured (another backend ran it) */
    double *samples;          /* per entry, up to max_samples times of the current point */
    int *n_samples;
    int max_samples;
    double lat_t[64], lat_u[64]; /* GPU: latency of rounds with per-op events / without, this point [s] */
    int n_t, n_u;
    double scale[ATS_PROF_MAX_POINTS]; /* per point: median untimed / median timed latency (1: CPU) */
} table_run;

static int32_t entry_of(table_run *r, const ats_graph *g, const ats_op *op)
{
    int64_t no, ni;
    ats_prof_op_shape(g, op, &no, &ni);
    for (int32_t i = r->first; i < r->t->n; i++) {
        const ats_prof_entry *e = &r->t->e[i];
        if (e->kind == (int32_t)op->kind && e->role == (int32_t)op->role && e->qtype == (int32_t)op->qtype &&
            e->n_out == no && e->n_in == ni)
            return i;
    }
    if (r->t->n >= ATS_PROF_MAX_ENTRIES) return -1;
    ats_prof_entry *e = &r->t->e[r->t->n];
    memset(e, 0, sizeof *e);
    e->backend = r->backend;
    e->kind = (int32_t)op->kind;
    e->role = (int32_t)op->role;
    e->qtype = (int32_t)op->qtype;
    e->n_out = no;
    e->n_in = ni;
    return r->t->n++;
}

static void rand_tokens(int32_t *tok, int64_t n, int64_t n_vocab, uint64_t *seed)
{
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((*seed >> 33) % (uint64_t)n_vocab);
    }
}

/* Adds the last round's per-op times of the ops that ran on r->backend to the samples. */
static void collect(table_run *r, ex_rt *rt)
{
    ex_rt_op_times ot = ex_rt_last_ops(rt);
    for (int32_t i = 0; i < ot.n && i < r->n_ops; i++) {
        int32_t k = r->entry[i];
        if (k < 0 || ot.backend[i] != (uint8_t)r->backend) continue;
        double t = ot.t_exec_s[i];
        if (!isfinite(t) || t < 0) continue;
        k -= r->first;
        if (r->n_samples[k] < r->max_samples) r->samples[(size_t)k * (size_t)r->max_samples + (size_t)r->n_samples[k]++] = t;
    }
}

/* Runs one round; CPU: its op times are samples; GPU: a round with events around every op gives the
 * samples and its latency, a round without (ex_rt times every 2nd) only its latency. */
static enum ats_status run_round(table_run *r, ex_rt *rt, ats_phase_kind kind, const int32_t *tok, int64_t n,
                             float *logits, int timed, ats_err *err)
{
    ex_rt_round info;
    enum ats_status st = ex_rt_round_run(rt, kind, tok, n, logits, &info, err);
    if (st || !timed) return st;
    if (r->backend == ATS_CPU) {
        collect(r, rt);
    } else if (info.timed_gpu) {
        collect(r, rt);
        if (r->n_t < 64) r->lat_t[r->n_t++] = info.latency_s;
    } else if (r->n_u < 64) {
        r->lat_u[r->n_u++] = info.latency_s;
    }
    return ATS_OK;
}

/* Point p of every entry: the median of its samples, and the work of its first op in the round graph.
 * GPU: the samples are scaled by median untimed / median timed round latency (the events' own cost:
 * the executor times every 8th round only). */
static enum ats_status close_point(table_run *r, ex_rt *rt, int p, int64_t tokens, ats_phase_kind kind,
                                   int64_t ctx_pos, ats_err *err)
{
    ats_graph *g = NULL;
    enum ats_status st = ex_session_round_graph(ex_rt_session(rt), kind, tokens, ctx_pos, &g, err);
    if (st) return st;
    double sc = 1.0;
    if (r->backend == ATS_GPU && r->n_t > 0 && r->n_u > 0)
        sc = bench_median(r->lat_u, r->n_u) / bench_median(r->lat_t, r->n_t);
    r->scale[p] = sc;
    r->n_t = r->n_u = 0;
    for (int32_t k = r->first; k < r->t->n; k++) {
        ats_prof_entry *e = &r->t->e[k];
        int32_t kk = k - r->first;
        if (r->n_samples[kk] == 0) {
            e->n_points = -1; /* not measured at this point: the entry is dropped */
            continue;
        }
        double t = bench_median(r->samples + (size_t)kk * (size_t)r->max_samples, r->n_samples[kk]);
        r->n_samples[kk] = 0;
        if (e->n_points < 0) continue;
        int32_t op = -1;
        for (int32_t i = 0; i < r->n_ops && op < 0; i++)
            if (r->entry[i] == k) op = i;
        double f = 0, b = 0;
        ats_op_work(g, &g->ops[op], &f, &b);
        e->tokens[p] = tokens;
        t *= sc;
        e->t_s[p] = t > 1e-9 ? t : 1e-9; /* fused members (routed experts' up/down) measure ~0 */
        e->flop[p] = f;
        e->bytes[p] = b;
        e->n_points = p + 1;
    }
    ats_graph_free(g);
    return ATS_OK;
}

/* Drops the entries of this run that missed a point (n_points < 0). */
static void compact(table_run *r)
{
    int32_t w = r->first;
    for (int32_t k = r->first; k < r->t->n; k++)
        if (r->t->e[k].n_points > 0) r->t->e[w++] = r->t->e[k];
    r->t->n = w;
}

/*
 * The op table of one backend: dev NULL = CPU (every op on the host), else the device with the whole
 * model resident (policy "layer", budget = the device's memory). Per token count: ex_session_clear,
 * one untimed round (warm-up: the device's KV slabs, the caches), `reps` timed rounds; the decode step
 * (1 token) at context decode_ctx (reached by untimed prefill chunks of 512).
 */
static enum ats_status op_table(const bench_profile_opts *o, ex_device *dev, uint64_t budget, const ats_hw *base,
                                ats_prof_table *t, ats_err *err)
{
    const int gpu = dev != NULL;
    const int64_t *toks = o->quick ? QUICK_TOKENS : bench_profile_tokens;
    const int n_tok = o->quick ? (int)(sizeof QUICK_TOKENS / sizeof QUICK_TOKENS[0]) : BENCH_PROFILE_N_TOKENS;
    const ats_arch *a = &o->model->arch;
    int64_t max_ctx = a->n_ctx_max > 0 ? a->n_ctx_max : 4096;
    int64_t decode_ctx = o->quick ? 64 : 512;
    if (decode_ctx > max_ctx / 2) decode_ctx = max_ctx / 2;
    const int dec_reps = o->quick ? 4 : gpu ? 16 : 8; /* GPU: half of them with events */
    int64_t need = toks[n_tok - 1] > decode_ctx + dec_reps + 2 ? toks[n_tok - 1] : decode_ctx + dec_reps + 2;
    ex_session_opts so = ex_session_opts_default();
    so.kv_type = ATS_Q_F16;
    so.n_ctx = need < max_ctx ? need : max_ctx;
    ats_hw hw = *base;
    hw.cpu_threads = o->threads;
    ex_rt_cfg cfg = ex_rt_cfg_default();
    cfg.policy = "layer";
    cfg.vram_budget_bytes = budget;
    cfg.hw = &hw;
    cfg.ctrl.eps = 1e9; /* one plan: no re-planning between the timed rounds */
    cfg.prompt_tok = decode_ctx;
    cfg.chunk_tok = 512;
    cfg.time_every = 2;
    cfg.measured = 0;
    ex_rt *rt = NULL;
    enum ats_status st = ex_rt_new(o->model, &so, dev, &cfg, &rt, err);
    if (st) return st;
    const ats_graph *g = ex_session_graph(ex_rt_session(rt));
    table_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.backend = gpu ? ATS_GPU : ATS_CPU;
    r.t = t;
    r.first = t->n;
    r.n_ops = g->n_ops;
    r.max_samples = 8 * (int)(a->n_layer + 2) * (dec_reps > 3 ? dec_reps : 3);
    r.entry = malloc((size_t)g->n_ops * sizeof *r.entry);
    int32_t *tok = malloc((size_t)so.n_ctx * sizeof *tok);
    float *logits = malloc((size_t)a->n_vocab * sizeof *logits);
    if (!r.entry || !tok || !logits) {
        st = ats_err_set(err, ATS_ENOMEM, "ats profile: out of memory (op table)");
        goto done;
    }
    for (int32_t i = 0; i < g->n_ops; i++) r.entry[i] = entry_of(&r, g, &g->ops[i]);
    int32_t n_entries = t->n - r.first;
    r.samples = malloc((size_t)n_entries * (size_t)r.max_samples * sizeof *r.samples);
    r.n_samples = calloc((size_t)n_entries, sizeof *r.n_samples);
    if (!r.samples || !r.n_samples) {
        st = ats_err_set(err, ATS_ENOMEM, "ats profile: out of memory (op table)");
        goto done;
    }
    uint64_t seed = 0x5eedu;
    const char *side = gpu ? "GPU" : "CPU";
    for (int p = 0; p < n_tok && !st; p++) {
        int64_t n = toks[p];
        if (n > so.n_ctx) {
            bench_note(&o->sink, "%s op table: %lld tokens exceed the model's context %lld: not measured", side,
                       (long long)n, (long long)so.n_ctx);
            break;
        }
        bench_progress(&o->sink, "ats profile: %s op table: %lld token%s (%d of %d)", side, (long long)n,
                       n == 1 ? " (decode)" : "s", p + 1, n_tok);
        ex_session_clear(ex_rt_session(rt));
        int64_t ctx = 0;
        if (n == 1) { /* decode: fill the context first (untimed), then decode steps */
            for (int64_t i = 0; i < decode_ctx && !st; i += 512) {
                int64_t c = decode_ctx - i < 512 ? decode_ctx - i : 512;
                rand_tokens(tok, c, a->n_vocab, &seed);
                st = run_round(&r, rt, ATS_PHASE_PREFILL, tok, c, logits, 0, err);
            }
            for (int rep = 0; rep <= dec_reps && !st; rep++) { /* the first step is the warm-up */
                rand_tokens(tok, 1, a->n_vocab, &seed);
                st = run_round(&r, rt, ATS_PHASE_DECODE, tok, 1, logits, rep > 0, err);
            }
            ctx = decode_ctx + (dec_reps + 1) / 2; /* the median timed step's context */
        } else {
            /* GPU: one warm-up round, 3 timed; CPU (warmed up by the decode point before): chunks of
               >= 256 tokens are long and steady, one timed round, else 2; --quick: one of each */
            int warm = o->quick || gpu ? 1 : 0, timed = o->quick ? 1 : gpu ? 3 : n >= 256 ? 1 : 2;
            if (gpu) timed *= 2; /* every 2nd round has events */
            for (int rep = 0; rep < warm + timed && !st; rep++) {
                ex_session_clear(ex_rt_session(rt));
                rand_tokens(tok, n, a->n_vocab, &seed);
                st = run_round(&r, rt, ATS_PHASE_PREFILL, tok, n, logits, rep >= warm, err);
            }
        }
        if (!st) st = close_point(&r, rt, p, n, n == 1 ? ATS_PHASE_DECODE : ATS_PHASE_PREFILL,
                                  ctx, err);
    }
    if (!st && gpu) {
        bench_table(&o->sink, "\nGPU op table: per-op event times scaled by untimed / timed round latency:");
        for (int p = 0; p < n_tok && toks[p] <= so.n_ctx; p++)
            bench_table(&o->sink, " %lld tok %.3f%s", (long long)toks[p], r.scale[p], p + 1 < n_tok ? "," : "\n");
    }
    if (!st) compact(&r);
done:
    free(r.entry);
    free(r.samples);
    free(r.n_samples);
    free(tok);
    free(logits);
    ex_rt_free(rt);
    if (st) t->n = r.first;
    return st;
}

/* ---- printing ------------------------------------------------------------------------------- */

static void print_table(const bench_profile_opts *o, const ats_prof_table *t, const ats_hw *hw, int backend)
{
    const bench_sink *sk = &o->sink;
    double bw = backend ? hw->gpu_mem_bw : hw->cpu_mem_bw, peak = backend ? hw->gpu_flops : hw->cpu_flops;
    bench_table(sk, "\n%s op table (median per op; %% of %s %.1f GB/s read or %.1f T%s/s peak, the larger):\n",
                backend ? "GPU" : "CPU", backend ? "gpu.mem_bw_GBps" : "cpu.mem_bw_GBps", bw * 1e-9, peak * 1e-12,
                backend ? "FLOP" : "OP");
    bench_table(sk, "%-8s %-18s %-6s %-13s", "kind", "role", "type", "shape");
    const ats_prof_entry *first = NULL;
    for (int32_t i = 0; i < t->n && !first; i++)
        if (t->e[i].backend == backend) first = &t->e[i];
    for (int p = 0; first && p < first->n_points; p++) bench_table(sk, " %15lld", (long long)first->tokens[p]);
    bench_table(sk, "\n");
    for (int32_t i = 0; i < t->n; i++) {
        const ats_prof_entry *e = &t->e[i];
        if (e->backend != backend) continue;
        char shape[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)e->n_out, (long long)e->n_in);
        bench_table(sk, "%-8s %-18s %-6s %-13s", ats_op_kind_name((ats_op_kind)e->kind),
                    ats_role_name((ats_role)e->role), ats_qtype_name((ats_qtype)e->qtype), shape);
        for (int p = 0; p < e->n_points; p++) {
            double fb = e->bytes[p] / e->t_s[p] / bw, ff = e->flop[p] / e->t_s[p] / peak;
            bench_table(sk, " %8.1fus %4.0f%%", e->t_s[p] * 1e6, 100.0 * (fb > ff ? fb : ff));
        }
        bench_table(sk, "\n");
    }
}

/* ---- the document ---------------------------------------------------------------------------- */

/* Sets section.key = v (a JSON real, or an integer when is_int) and section.sources.key = src. */
static void set_fig(json_t *doc, const char *section, const char *key, double v, int is_int, const char *src)
{
    json_t *s = json_object_get(doc, section);
    json_object_set_new(s, key, is_int ? json_integer((json_int_t)llround(v)) : json_real(v));
    json_object_set_new(json_object_get(s, "sources"), key, json_string(src));
}

static void print_fig_header(const bench_profile_opts *o)
{
    bench_table(&o->sink, "\n%-26s %12s %-6s  %-17s %7s  %s\n", "figure", "measured", "unit", "base (ceiling)", "ratio",
                "what the base figure is");
}

static void print_fig(const bench_profile_opts *o, const char *name, double v, double base, const char *unit,
                      const char *vs)
{
    bench_table(&o->sink, "%-26s %12.4g %-6s  %17.4g %6.1f%%  %s\n", name, v, unit, base,
                base > 0 ? 100.0 * v / base : 0.0, vs);
}

static double clampf(double x) { return x > 1.0 ? 1.0 : (x < 0.01 ? 0.01 : x); }

/* Measures the DRAM read rate at 1, 2, 4, ... threads up to o->threads: into prof's
 * "cpu_read_over_threads" and *curve (a copy, for the description's cpu.mem_bw_over_threads); the
 * rate at o->threads into *at_threads. */
static enum ats_status dram_rates(const bench_profile_opts *o, json_t *prof, double *at_threads, json_t **curve,
                                  ats_err *err)
{
    json_t *arr = json_array();
    bench_table(&o->sink, "\nCPU DRAM read (bench_dram_probe, best of %d passes, %s):\n", o->quick ? 2 : 6,
                o->quick ? "64 MiB" : "1 GiB");
    for (int th = 1;; th = th * 2 > o->threads ? o->threads : th * 2) {
        bench_progress(&o->sink, "ats profile: DRAM read, %d thread%s", th, th == 1 ? "" : "s");
        bench_dram_opts d = bench_dram_opts_default();
        d.threads = th;
        d.reps = o->quick ? 1 : 3;
        d.bytes = o->quick ? (size_t)64 << 20 : (size_t)1 << 30;
        bench_dram_result res;
        enum ats_status st = bench_dram_probe(&d, &res, err);
        if (st) {
            json_decref(arr);
            return st;
        }
        bench_table(&o->sink, "  %3d threads %8.1f GB/s\n", th, res.best_Bps * 1e-9);
        json_t *x = json_object();
        json_object_set_new(x, "threads", json_integer(th));
        json_object_set_new(x, "GBps", json_real(res.best_Bps * 1e-9));
        json_array_append_new(arr, x);
        if (th == o->threads) {
            *at_threads = res.best_Bps;
            break;
        }
    }
    *curve = json_deep_copy(arr);
    json_object_set_new(prof, "cpu_read_over_threads", arr);
    if (!*curve) return ats_err_set(err, ATS_ENOMEM, "ats profile: out of memory");
    return ATS_OK;
}

enum ats_status bench_profile_run(const bench_profile_opts *o, json_t **doc, ats_err *err)
{
    *doc = NULL;
    if (!o->model || !o->base_path) return ats_err_set(err, ATS_EINVAL, "ats profile: no model or base description");
    if (o->threads < 1 || o->threads > 1024)
        return ats_err_set(err, ATS_EINVAL, "ats profile: threads %d (must be in 1..1024)", o->threads);
    ats_hw base;
    enum ats_status st = atsc_hw_load(o->base_path, &base, err);
    if (st) return st;
    json_error_t je;
    json_t *d = json_load_file(o->base_path, JSON_REJECT_DUPLICATES, &je);
    if (!d) return ats_err_set(err, ATS_EINVAL, "%s: %s", o->base_path, je.text);
    json_object_del(d, "op_table"); /* a profile as the base: its table is measured again */
    { /* and its CPU load response belongs to the machine and threads it was measured on: not carried
         over (experiments/validation/cpu-load-response.sh measures one for this profile) */
        json_t *cpu = json_object_get(d, "cpu");
        if (json_is_object(cpu)) {
            json_object_del(cpu, "load_response");
            json_object_del(json_object_get(cpu, "sources"), "load_response");
        }
    }
    char date[32], host_note[640];
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(date, sizeof date, "%Y-%m-%d", &tmv);
    bench_machine mc;
    bench_machine_get(&mc);
    snprintf(host_note, sizeof host_note, "measured by ats profile %s on %s (%s)", date, mc.host, mc.cpu);
    char src[1600];
    json_t *prof = json_object();
    ats_hw hw = base;
    hw.op_table.n = 0;
    omp_set_num_threads(o->threads);

    bench_table(&o->sink, "ats profile: %s, base %s, %d CPU threads%s\n\n", o->model_desc ? o->model_desc : "model",
                o->base_path, o->threads, o->quick ? ", --quick" : "");
    /* threads */
    snprintf(src, sizeof src, "%s: the --threads of the run (the CPU op table and DRAM rate are at this count)", host_note);
    set_fig(d, "cpu", "threads", o->threads, 1, src);
    hw.cpu_threads = o->threads;

    /* DRAM */
    double cpu_bw = 0;
    json_t *curve = NULL;
    if ((st = dram_rates(o, prof, &cpu_bw, &curve, err))) goto fail;
    snprintf(src, sizeof src, "%s: best DRAM read rate at %d threads (bench_dram_probe, %s buffer)", host_note,
             o->threads, o->quick ? "64 MiB" : "1 GiB");
    set_fig(d, "cpu", "mem_bw_GBps", cpu_bw * 1e-9, 0, src);
    snprintf(src, sizeof src, "%s: best DRAM read rate at 1, 2, 4, ... %d threads (bench_dram_probe, %s buffer; "
             "the same figures as measurements.cpu_read_over_threads)", host_note, o->threads,
             o->quick ? "64 MiB" : "1 GiB");
    json_object_set_new(json_object_get(d, "cpu"), "mem_bw_over_threads", curve);
    json_object_set_new(json_object_get(json_object_get(d, "cpu"), "sources"), "mem_bw_over_threads", json_string(src));
    print_fig_header(o);
    print_fig(o, "cpu.mem_bw_GBps", cpu_bw * 1e-9, base.cpu_mem_bw * 1e-9, "GB/s", "base description's DRAM read");
    hw.cpu_mem_bw = cpu_bw;

    /* GPU link and interference */
    bp_gpu_figs gf;
    memset(&gf, 0, sizeof gf);
    int have_gpu = 0;
    if (!o->skip_gpu) {
        ats_err ge = {{0}};
        enum ats_status gs = bp_gpu_measure(o, &gf, &ge);
        if (gs == ATS_ENOTFOUND) {
            bench_note(&o->sink, "GPU part skipped: %s", ge.msg);
        } else if (gs) {
            ats_err_set(err, gs, "%s", ge.msg);
            st = gs;
            goto fail;
        } else {
            have_gpu = 1;
        }
    }
    if (have_gpu) {
        json_t *cs = json_array();
        for (int i = 0; i < gf.n_sizes; i++) {
            json_t *x = json_object();
            json_object_set_new(x, "bytes", json_integer((json_int_t)gf.sizes[i]));
            json_object_set_new(x, "h2d_GBps", json_real(gf.h2d_Bps[i] * 1e-9));
            json_object_set_new(x, "d2h_GBps", json_real(gf.d2h_Bps[i] * 1e-9));
            json_array_append_new(cs, x);
        }
        json_object_set_new(prof, "copy_engine_over_sizes", cs);
        json_object_set_new(prof, "h2d_latency_us", json_real(gf.h2d_lat_s * 1e6));
        json_object_set_new(prof, "d2h_latency_us", json_real(gf.d2h_lat_s * 1e6));
        json_object_set_new(prof, "link_ce_GBps", json_real(gf.link_ce_Bps * 1e-9));
        json_object_set_new(prof, "link_sm_GBps", json_real(gf.link_sm_Bps * 1e-9));
        json_object_set_new(prof, "gpu", json_string(gf.name));
        size_t big = gf.sizes[gf.n_sizes - 1];
        const char *fmt_ce = "%s: copy engine %s, %zu MiB copies from pinned memory, median (%s)";
        snprintf(src, sizeof src, fmt_ce, host_note, "H2D", big >> 20, gf.name);
        set_fig(d, "pcie", "h2d_GBps", gf.h2d_Bps[gf.n_sizes - 1] * 1e-9, 0, src);
        snprintf(src, sizeof src, fmt_ce, host_note, "D2H", big >> 20, gf.name);
        set_fig(d, "pcie", "d2h_GBps", gf.d2h_Bps[gf.n_sizes - 1] * 1e-9, 0, src);
        snprintf(src, sizeof src, "%s: SM copy kernel (ex_cuda_copy) reading %zu MiB of mapped pinned memory, median",
                 host_note, big >> 20);
        set_fig(d, "pcie", "sm_copy_GBps", gf.sm_copy_Bps * 1e-9, 0, src);
        snprintf(src, sizeof src,
                 "%s: copy-engine H2D and SM copy of %zu MiB each at once, total bytes / time to both done (CE %.1f, SM %.1f GB/s)",
                 host_note, big >> 20, gf.link_ce_Bps * 1e-9, gf.link_sm_Bps * 1e-9);
        set_fig(d, "pcie", "link_GBps", gf.link_Bps * 1e-9, 0, src);
        snprintf(src, sizeof src, "%s: one %zu-byte H2D copy, back to back, median", host_note, gf.sizes[0]);
        set_fig(d, "pcie", "latency_us", gf.h2d_lat_s * 1e6, 0, src);
        snprintf(src, sizeof src, "%s: cudaDevAttrAsyncEngineCount", host_note);
        set_fig(d, "pcie", "copy_engines", gf.copy_engines, 1, src);
        snprintf(src, sizeof src, "%s: device memory read rate (ex_cuda_read_probe), median", host_note);
        set_fig(d, "gpu", "mem_bw_GBps", gf.read_Bps * 1e-9, 0, src);
        snprintf(src, sizeof src, "%s: cudaDeviceProp.totalGlobalMem", host_note);
        set_fig(d, "gpu", "vram_bytes", (double)gf.vram_bytes, 1, src);
        double cf = clampf(gf.cpu_with_dma_Bps / gf.cpu_alone_Bps), df = clampf(gf.dma_with_cpu_Bps / gf.dma_alone_Bps);
        snprintf(src, sizeof src, "%s: CPU DRAM read at %d threads %.1f GB/s during copy-engine H2D vs %.1f alone",
                 host_note, o->threads, gf.cpu_with_dma_Bps * 1e-9, gf.cpu_alone_Bps * 1e-9);
        set_fig(d, "host_memory", "cpu_factor", cf, 0, src);
        snprintf(src, sizeof src, "%s: copy-engine H2D %.1f GB/s during a CPU DRAM read at %d threads vs %.1f alone",
                 host_note, gf.dma_with_cpu_Bps * 1e-9, o->threads, gf.dma_alone_Bps * 1e-9);
        set_fig(d, "host_memory", "dma_factor", df, 0, src);
        json_t *itf = json_object();
        json_object_set_new(itf, "cpu_alone_GBps", json_real(gf.cpu_alone_Bps * 1e-9));
        json_object_set_new(itf, "cpu_with_dma_GBps", json_real(gf.cpu_with_dma_Bps * 1e-9));
        json_object_set_new(itf, "dma_alone_GBps", json_real(gf.dma_alone_Bps * 1e-9));
        json_object_set_new(itf, "dma_with_cpu_GBps", json_real(gf.dma_with_cpu_Bps * 1e-9));
        json_object_set_new(prof, "interference", itf);
        print_fig_header(o);
        print_fig(o, "pcie.h2d_GBps", gf.h2d_Bps[gf.n_sizes - 1] * 1e-9, base.pcie_h2d_bw * 1e-9, "GB/s", "link");
        print_fig(o, "pcie.d2h_GBps", gf.d2h_Bps[gf.n_sizes - 1] * 1e-9, base.pcie_d2h_bw * 1e-9, "GB/s", "link");
        print_fig(o, "pcie.sm_copy_GBps", gf.sm_copy_Bps * 1e-9, base.pcie_sm_copy_bw * 1e-9, "GB/s", "link");
        print_fig(o, "pcie.link_GBps", gf.link_Bps * 1e-9, base.pcie_link_bw * 1e-9, "GB/s", "link");
        print_fig(o, "pcie.latency_us", gf.h2d_lat_s * 1e6, base.pcie_latency_s * 1e6, "us", "");
        print_fig(o, "gpu.mem_bw_GBps", gf.read_Bps * 1e-9, base.gpu_mem_bw * 1e-9, "GB/s", "HBM");
        print_fig(o, "host_memory.cpu_factor", cf, base.hostmem_cpu_factor, "", "");
        print_fig(o, "host_memory.dma_factor", df, base.hostmem_dma_factor, "", "");
        bench_table(&o->sink, "\ncopy engine over sizes:\n%12s %10s %10s\n", "bytes", "H2D GB/s", "D2H GB/s");
        for (int i = 0; i < gf.n_sizes; i++)
            bench_table(&o->sink, "%12zu %10.2f %10.2f\n", gf.sizes[i], gf.h2d_Bps[i] * 1e-9, gf.d2h_Bps[i] * 1e-9);
        hw.pcie_h2d_bw = gf.h2d_Bps[gf.n_sizes - 1];
        hw.gpu_mem_bw = gf.read_Bps;
        hw.gpu_vram_bytes = gf.vram_bytes;
    }

    /* op tables */
    if (!o->skip_cpu_table) {
        if ((st = op_table(o, NULL, base.gpu_vram_bytes, &hw, &hw.op_table, err))) goto fail;
        print_table(o, &hw.op_table, &hw, ATS_CPU);
    }
    int have_gpu_table = 0;
    if (have_gpu) {
        ex_device *dev = NULL;
        if ((st = ex_device_cuda_new(&dev, err))) goto fail;
        int32_t before = hw.op_table.n;
        st = op_table(o, dev, (uint64_t)(0.9 * (double)hw.gpu_vram_bytes), &hw, &hw.op_table, err);
        ex_device_cuda_free(dev);
        if (st) goto fail;
        have_gpu_table = hw.op_table.n > before;
        print_table(o, &hw.op_table, &hw, ATS_GPU);
    }
    bench_progress(&o->sink, "%s", "");
    char src_cpu[1600], src_gpu[1600];
    snprintf(src_cpu, sizeof src_cpu,
             "%s: per-op times of the executor (ex_rt, every op on the CPU, %d threads, KV cache F16) over %s; median "
             "over the layers, decode at context %d",
             host_note, o->threads, o->model_desc ? o->model_desc : "the model", o->quick ? 64 : 512);
    snprintf(src_gpu, sizeof src_gpu,
             "%s: per-op times of the executor (ex_rt, policy layer with the whole model resident, CUDA events, KV "
             "cache F16) over %s on %s; median over the layers, decode at context %d",
             host_note, o->model_desc ? o->model_desc : "the model", gf.name, o->quick ? 64 : 512);
    if (hw.op_table.n > 0) {
        json_t *tj = atsc_hw_table_json(&hw.op_table, o->skip_cpu_table ? NULL : src_cpu,
                                        have_gpu_table ? src_gpu : NULL);
        if (!tj) {
            st = ats_err_set(err, ATS_ENOMEM, "ats profile: out of memory (op table document)");
            goto fail;
        }
        json_object_set_new(d, "op_table", tj);
    }
    char desc[512];
    snprintf(desc, sizeof desc, "ats profile %s on %s over %s; figures not measured from %s", date, mc.host,
             o->model_desc ? o->model_desc : "the model", o->base_path);
    json_object_set_new(d, "source", json_string(desc));
    { /* this machine, not the base's words (its peaks and unmeasured figures stay the base's: "source") */
        char what[1400];
        snprintf(what, sizeof what, "Measured by ats profile %s on %s: %s, %d threads; %s", date, mc.host, mc.cpu,
                 o->threads, have_gpu ? gf.name : "no GPU part");
        json_object_set_new(d, "description", json_string(what));
    }
    json_t *params = json_object();
    json_object_set_new(params, "threads", json_integer(o->threads));
    json_object_set_new(params, "quick", json_boolean(o->quick));
    json_object_set_new(params, "model", json_string(o->model_desc ? o->model_desc : ""));
    json_object_set_new(params, "base", json_string(o->base_path));
    json_object_set_new(params, "date", json_string(date));
    json_object_set_new(prof, "params", params);
    json_object_set_new(d, "measurements", prof);
    prof = NULL;
    *doc = d;
    return ATS_OK;
fail:
    bench_progress(&o->sink, "%s", "");
    json_decref(prof);
    json_decref(d);
    return st;
}
