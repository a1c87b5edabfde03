/*
 * ats run --policy P — the rounds of one request run by the plan executor (ex/runtime.h): chunked
 * prefill then -n decode steps, each round following the plan of sched's controller; the summary
 * the simulator prints (prefill and decode tok/s, TTFT, TPOT mean/p50/p99, re-schedules, GB moved
 * host→device, GPU busy) and with --out the results schema with every round field measured.
 * Argument parsing lives in cmd_run.c; this file runs and prints.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ats/policy.h"
#include "atsc/hw_json.h"
#include "atsc/results.h"
#include "atsc/timeline.h"
#include "cli.h"
#include "ex/runtime.h"
#include "ex/tokenizer.h"
#include "run_policy.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double p)
{
    if (!n) return NAN;
    qsort(v, n, sizeof *v, cmp_d);
    double pos = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
}

/* Timeline tracks (the simulator's layout: rounds, CPU, GPU compute stream, copy engine 0, PCIe). */
typedef struct tl_ids {
    atsc_timeline *tl;
    int pid, rounds, cpu, gpu, ce;
    const ats_graph *g;
} tl_ids;

/* One round on the timeline: CPU ops by the host clock; GPU ops by their events on timed rounds (on
 * the others their host enqueue interval, args timed 0); transfers by their events (the decode
 * placement's upload as "w decode placement", as `ats sim` names it); the PCIe H2D
 * counter at each transfer's mean rate. The host thread's own work before an op, where it took at
 * least 2 µs, on the CPU track as category "host": "switch to cpu/cuda" (the previous backend's
 * flush: its activations copied back and waited for; KV rows back) and "issue" (transfers issued,
 * stream waits, the router's choice read back). */
static void tl_round(tl_ids *t, ex_rt *rt, const ex_rt_round *info, int64_t idx)
{
    if (!t->tl) return;
    ats_err err;
    const char *rk[4] = {"round", "tokens", "promoted", "rescheduled"};
    double rv[4] = {(double)idx, (double)info->tokens, (double)info->n_promoted, (double)info->rescheduled};
    (void)atsc_timeline_slice_args(t->tl, t->rounds, info->phase == ATS_PHASE_DECODE ? "decode" : "prefill", "round",
                                   info->t_start_s, info->latency_s, 4, rk, rv, &err);
    if (info->upload_bytes > 0) { /* the decode placement's weights, before the round's first op */
        const char *uk[1] = {"bytes"};
        double uv[1] = {(double)info->upload_bytes};
        (void)atsc_timeline_slice_args(t->tl, t->ce, "w decode placement", "weights", info->t_start_s, info->upload_s, 1,
                                       uk, uv, &err);
        if (info->upload_s > 0) {
            (void)atsc_timeline_counter(t->tl, t->pid, "PCIe H2D", "GB/s", info->t_start_s,
                                        (double)info->upload_bytes / info->upload_s / 1e9, &err);
            (void)atsc_timeline_counter(t->tl, t->pid, "PCIe H2D", "GB/s", info->t_start_s + info->upload_s, 0.0, &err);
        }
    }
    ex_rt_op_times o = ex_rt_last_ops(rt);
    const char *ok[3] = {"op", "timed", "exec_s"};
    for (int32_t i = 0; i < o.n; i++) {
        int gpu = o.backend[i] == ATS_GPU;
        const double hsw = o.h_sw_s[i] - o.h_in_s[i], his = o.h_call_s[i] - o.h_sw_s[i];
        if (hsw >= 2e-6)
            (void)atsc_timeline_slice(t->tl, t->cpu, gpu ? "switch to cuda" : "switch to cpu", "host", o.h_in_s[i], hsw,
                                      NULL, &err);
        if (his >= 2e-6) (void)atsc_timeline_slice(t->tl, t->cpu, "issue", "host", o.h_sw_s[i], his, NULL, &err);
        double ov[3] = {(double)i, gpu ? (double)info->timed_gpu : 1.0, o.t_exec_s[i]};
        double d = o.t_end_s[i] - o.t_start_s[i];
        (void)atsc_timeline_slice_args(t->tl, gpu ? t->gpu : t->cpu, t->g->ops[i].name, "op", o.t_start_s[i],
                                       d > 0 ? d : 0, 3, ok, ov, &err);
        if (!isnan(o.x_start_s[i])) {
            char nm[64];
            snprintf(nm, sizeof nm, "w %s", t->g->ops[i].name);
            double xd = o.x_end_s[i] - o.x_start_s[i];
            const char *xk[2] = {"op", "bytes"};
            double xv[2] = {(double)i, (double)o.x_bytes[i]};
            (void)atsc_timeline_slice_args(t->tl, t->ce, nm, "weights", o.x_start_s[i], xd > 0 ? xd : 0, 2, xk, xv, &err);
            if (xd > 0) {
                (void)atsc_timeline_counter(t->tl, t->pid, "PCIe H2D", "GB/s", o.x_start_s[i],
                                            (double)o.x_bytes[i] / xd / 1e9, &err);
                (void)atsc_timeline_counter(t->tl, t->pid, "PCIe H2D", "GB/s", o.x_end_s[i], 0.0, &err);
            }
        }
    }
}

/* One round through the runtime plus its results rows. */
static int one_round(ex_rt *rt, const run_policy_args *a, atsc_results *w, int64_t idx, ats_phase_kind ph,
                     const int32_t *tok, int64_t n, float *logits, ex_rt_round *info, uint64_t *h2d, int32_t *off,
                     atsc_op_row *ops, tl_ids *tl)
{
    ats_err err = {{0}};
    if (ex_rt_round_run(rt, ph, tok, n, logits, info, &err) != ATS_OK) {
        ats_cli_error("run", "round %lld: %s", (long long)idx, err.msg);
        return ATS_EXIT_FAIL;
    }
    *h2d += info->bytes_h2d;
    *off += info->n_off_plan;
    tl_round(tl, rt, info, idx);
    if (!w) return ATS_EXIT_OK;
    atsc_round_row row = {idx, ph == ATS_PHASE_DECODE ? ATSC_PHASE_DECODE : ATSC_PHASE_PREFILL, (int32_t)n,
                          info->t_start_s, info->latency_s, info->n_promoted, info->rescheduled, info->bytes_h2d,
                          info->load.cpu, info->load.gpu, info->load.pcie};
    enum ats_status st = atsc_results_append_rounds(w, &row, 1, &err);
    ex_rt_op_times t = ex_rt_last_ops(rt);
    for (int32_t i = 0; i < t.n && st == ATS_OK && a->record_ops; i++)
        ops[i] = (atsc_op_row){idx, i, t.backend[i], t.t_start_s[i], t.t_end_s[i], !isnan(t.x_start_s[i]), 0,
                               t.x_start_s[i], t.x_end_s[i]};
    if (st == ATS_OK && a->record_ops) st = atsc_results_append_ops(w, ops, (size_t)t.n, &err);
    if (st != ATS_OK) {
        ats_cli_error("run", "--out: %s", err.msg);
        return ATS_EXIT_FAIL;
    }
    return ATS_EXIT_OK;
}

/* The run's counters for the summary line [s], [bytes]. */
typedef struct policy_stats {
    double pre_s, dec_s, ttft, resched_s, t_new_s, warm_s;
    double *tpot; /* nd decode latencies [s]; sorted in place by the percentiles */
    int64_t nd;
    uint64_t h2d;
    int32_t off;
    int cuda;
} policy_stats;

/* --out and --timeline opened (w, tl->tl; NULL when not asked). ATS_EXIT_OK or the exit code. */
static int open_outputs(const ex_model *m, const run_policy_args *a, int cuda, int64_t n_gen, atsc_results **w,
                        tl_ids *tl)
{
    ats_err err = {{0}};
    if (a->out_path) {
        char cf[1024];
        snprintf(cf, sizeof cf,
                 "{\"command\": \"run\", \"model\": \"%s\", \"policy\": \"%s\", \"vram_budget\": %llu, \"hw\": \"%s\", "
                 "\"device\": \"%s\", \"threads\": %d, \"chunk\": %lld, \"n\": %lld, \"prompt_tokens\": %lld, "
                 "\"eps\": %g, \"serialized\": %d}",
                 m->arch.name, a->policy, (unsigned long long)a->vram_budget, a->hw, cuda ? "cuda" : "cpu",
                 omp_get_max_threads(), (long long)a->chunk, (long long)n_gen, (long long)a->n_prompt, a->ctrl.eps,
                 a->serialized);
        atsc_results_meta meta = {"ats run", cf, a->seed, m->arch.name, "", ""};
        if (atsc_results_open(a->out_path, &meta, w, &err) != ATS_OK ||
            atsc_results_begin_run(*w, a->policy, a->policy, NULL, a->record_ops, &err) != ATS_OK) {
            ats_cli_error("run", "--out: %s", err.msg);
            return ATS_EXIT_USAGE;
        }
    }
    if (a->timeline_path) {
        char cf[256];
        snprintf(cf, sizeof cf, "{\"command\": \"run\", \"policy\": \"%s\", \"model\": \"%s\", \"vram_budget\": %llu}",
                 a->policy, m->arch.name, (unsigned long long)a->vram_budget);
        if (atsc_timeline_open(a->timeline_path, cf, &tl->tl, &err) != ATS_OK) {
            ats_cli_error("run", "--timeline: %s", err.msg);
            return ATS_EXIT_USAGE;
        }
        tl->pid = atsc_timeline_process(tl->tl, a->policy);
        tl->rounds = atsc_timeline_track(tl->tl, tl->pid, "rounds");
        tl->cpu = atsc_timeline_track(tl->tl, tl->pid, "CPU");
        tl->gpu = atsc_timeline_track(tl->tl, tl->pid, "GPU compute stream");
        tl->ce = atsc_timeline_track(tl->tl, tl->pid, "copy engine 0");
    }
    return ATS_EXIT_OK;
}

/* The summary on stderr, in the simulator's columns. */
static void print_summary(ex_rt *rt, const run_policy_args *a, const policy_stats *ps)
{
    uint64_t res, tmp, kv, comp;
    ex_rt_layout(rt, &res, &tmp, &kv, &comp);
    double gb, tr;
    ex_rt_gpu_busy(rt, &gb, &tr);
    const int64_t nd = ps->nd;
    double tmean = nd ? ps->dec_s / (double)nd : NAN, p50 = pct(ps->tpot, (size_t)nd, 50),
           p99 = pct(ps->tpot, (size_t)nd, 99);
    fprintf(stderr,
            "ats run: policy %s on %s, --vram-budget %.3f GiB: resident %.3f GiB + temp %.3f + KV %.3f + compute "
            "%.3f (est.); setup %.3f s, resident upload %.3f s (%.1f GB/s), warm-up %.3f s%s\n",
            a->policy, ps->cuda ? "cuda" : "cpu only", a->vram_budget / 1073741824.0, res / 1073741824.0,
            tmp / 1073741824.0, kv / 1073741824.0, comp / 1073741824.0, ps->t_new_s, ex_rt_upload_s(rt),
            ex_rt_upload_s(rt) > 0 ? res / ex_rt_upload_s(rt) / 1e9 : 0.0, ps->warm_s,
            a->no_warmup ? " (--no-warmup)" : "");
    fprintf(stderr, "%-16s %10s %10s %9s %10s %10s %10s %7s %9s %6s\n", "policy", "prefill", "decode", "TTFT",
            "TPOT mean", "TPOT p50", "TPOT p99", "resched", "GB h2d", "GPU");
    fprintf(stderr, "%-16s %10s %10s %9s %10s %10s %10s %7s %9s %6s\n", "", "tok/s", "tok/s", "s", "ms", "ms", "ms",
            "", "", "busy");
    char tp[3][32]; /* TPOT mean, p50, p99 [ms]; '-' without a decode round (as ats sim prints) */
    const double tv[3] = {tmean, p50, p99};
    for (int k = 0; k < 3; k++) {
        if (nd > 0 && isfinite(tv[k])) snprintf(tp[k], sizeof tp[k], "%.2f", 1e3 * tv[k]);
        else snprintf(tp[k], sizeof tp[k], "-");
    }
    fprintf(stderr, "%-16s %10.2f %10.2f %9.3f %10s %10s %10s %7lld %9.3f %5.1f%%\n", a->policy,
            ps->pre_s > 0 ? (double)a->n_prompt / ps->pre_s : 0.0, ps->dec_s > 0 ? (double)nd / ps->dec_s : 0.0,
            ps->ttft, tp[0], tp[1], tp[2], (long long)ex_rt_n_reschedules(rt), ps->h2d / 1e9,
            tr > 0 ? 100.0 * gb / tr : 0.0);
    fprintf(stderr, "ats run: re-plans cost %.3f ms in all; %d op runs off the plan (exec/README.md \"Plans\")\n",
            1e3 * ps->resched_s, ps->off);
    uint64_t xb = 0;
    int64_t ups = 0;
    ex_rt_decode_placement(rt, &xb, &ups);
    if (xb > 0)
        fprintf(stderr, "ats run: decode placement: %.3f GiB more weights resident in the temp ring's front during "
                        "decode, uploaded %lld time%s (exec/README.md \"Plans\")\n",
                (double)xb / 1073741824.0, (long long)ups, ups == 1 ? "" : "s");
}

/* --timeline and --out closed when the run succeeded, else dropped (nothing half-written). */
static void close_outputs(const run_policy_args *a, atsc_results *w, tl_ids *tl, int *rc)
{
    ats_err err = {{0}};
    if (tl->tl) {
        if (*rc == ATS_EXIT_OK && atsc_timeline_close(tl->tl, &err) != ATS_OK) {
            ats_cli_error("run", "--timeline: %s", err.msg);
            *rc = ATS_EXIT_FAIL;
        } else if (*rc != ATS_EXIT_OK) {
            atsc_timeline_abort(tl->tl);
        }
        tl->tl = NULL;
    }
    if (w) {
        if (*rc == ATS_EXIT_OK && atsc_results_close(w, &err) != ATS_OK) {
            ats_cli_error("run", "--out: %s", err.msg);
            *rc = ATS_EXIT_FAIL;
        } else if (*rc != ATS_EXIT_OK) {
            atsc_results_abort(w); /* nothing half-written */
            fprintf(stderr, "ats run: --out %s not written\n", a->out_path);
        } else {
            fprintf(stderr, "ats run: wrote %s\n", a->out_path);
        }
    }
}

int ats_run_policy(const ex_model *m, const run_policy_args *a)
{
    ats_err err = {{0}};
    char path[1024];
    ats_hw hw;
    if (atsc_hw_load(ats_cli_hw_path(a->hw, path, sizeof path), &hw, &err) != ATS_OK) {
        ats_cli_error("run", "--hw: %s", err.msg); /* the message names the file */
        return ATS_EXIT_USAGE;
    }
    hw.cpu_threads = omp_get_max_threads();
    uint64_t budget = a->vram_budget; /* a budget above the snapshot's VRAM is refused, as ats sim does */
    if (ats_cli_budget_for_hw("run", &budget, hw.gpu_vram_bytes, hw.name, path)) return ATS_EXIT_USAGE;
    ex_device *dev = NULL;
    int cuda = 0;
    if (!a->cpu_only) {
        enum ats_status ds = ex_device_cuda_new(&dev, &err);
        if (ds == ATS_OK) cuda = 1;
        else if (ds != ATS_ENOTFOUND) {
            ats_cli_error("run", "%s", err.msg);
            return ATS_EXIT_FAIL;
        }
    }
    if (!dev && !a->cpu_only)
        fprintf(stderr, "ats run: no CUDA device: policy %s runs every op on the CPU (the plans still come from "
                        "sched; nothing is promoted)\n", a->policy);
    ex_rt_cfg cfg = ex_rt_cfg_default();
    cfg.policy = a->policy;
    cfg.vram_budget_bytes = a->vram_budget;
    cfg.hw = &hw;
    cfg.ctrl = a->ctrl;
    cfg.prompt_tok = a->n_prompt;
    cfg.chunk_tok = a->chunk;
    { /* the temp ring for this request: prompt + decode (ats_policy_place_request), -n as the context holds
         it (the session's n_ctx) */
        const int64_t room = ex_session_ctx_of(m, &a->so) - a->n_prompt;
        cfg.gen_tok = a->n_gen < room ? a->n_gen : room > 0 ? room : 0;
    }
    cfg.serialized = a->serialized;
    ex_rt *rt = NULL;
    int64_t t_new = now_ns();
    enum ats_status st = ex_rt_new(m, &a->so, dev, &cfg, &rt, &err);
    t_new = now_ns() - t_new;
    int64_t t_warm = now_ns();
    if (st == ATS_OK && !a->no_warmup) st = ex_rt_warmup(rt, a->n_prompt < a->chunk ? a->n_prompt : a->chunk, &err);
    t_warm = now_ns() - t_warm;
    if (st != ATS_OK) {
        ats_cli_error("run", "%s", err.msg);
        ex_rt_free(rt);
        if (dev) ex_device_cuda_free(dev);
        return st == ATS_EINFEASIBLE || st == ATS_ENOTFOUND || st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
    }
    ex_session *s = ex_rt_session(rt);
    const ats_graph *g = ex_session_graph(s);
    /* -n limited to what the context holds after the prompt, as the split-backend run does */
    int64_t n_gen = a->n_gen;
    if (ats_cli_fit_context(a->n_prompt, ex_session_n_ctx(s), &n_gen) != ATS_EXIT_OK) {
        ex_rt_free(rt);
        if (dev) ex_device_cuda_free(dev);
        return ATS_EXIT_USAGE;
    }
    const int64_t V = m->arch.n_vocab;
    float *logits = malloc((size_t)V * sizeof *logits);
    atsc_op_row *ops = malloc((size_t)g->n_ops * sizeof *ops);
    double *tpot = malloc((size_t)(n_gen + 1) * sizeof *tpot);
    atsc_results *w = NULL;
    tl_ids tl = {NULL, 0, 0, 0, 0, 0, g};
    int rc = ATS_EXIT_OK;
    if (!logits || !ops || !tpot) {
        rc = ATS_EXIT_FAIL;
        goto done;
    }
    rc = open_outputs(m, a, cuda, n_gen, &w, &tl);
    if (rc != ATS_EXIT_OK) goto done;
    int hooked = 0; /* before_rounds called: after_rounds is owed */
    if (a->before_rounds) {
        hooked = 1;
        rc = a->before_rounds(a->hook_ctx);
    }
    uint64_t h2d = 0;
    int32_t off = 0;
    int64_t idx = 0;
    double pre_s = 0.0, dec_s = 0.0, ttft = 0.0, resched_s = 0.0;
    ex_rt_round info;
    for (int64_t i = 0; i < a->n_prompt && rc == ATS_EXIT_OK && !ats_cli_stop; i += a->chunk) {
        int64_t nn = a->n_prompt - i < a->chunk ? a->n_prompt - i : a->chunk;
        rc = one_round(rt, a, w, idx++, ATS_PHASE_PREFILL, a->prompt + i, nn, logits, &info, &h2d, &off, ops, &tl);
        pre_s += info.latency_s;
        resched_s += info.resched_cost_s;
    }
    ttft = pre_s; /* the first token comes from the last prefill chunk's logits */
    int64_t nd = 0;
    int32_t next = 0;
    ex_sample_params sp = {(float)a->temp, a->top_k, (float)a->top_p};
    uint64_t rng = a->seed ^ 0x5DEECE66Dull;
    /* as plain ats run: ids without a vocabulary or with --print-ids, else the prompt as the model
       sees it, then the generated text piece by piece */
    const int ids = a->print_ids || !m->tok;
    char piece[512];
    if (!ids && rc == ATS_EXIT_OK && !a->quiet)
        for (int64_t i = 1; i < a->n_prompt; i++) {
            ex_tokenizer_decode(m->tok, a->prompt[i - 1], a->prompt[i], piece, sizeof piece);
            fputs(piece, stdout);
        }
    int32_t prev = a->n_prompt > 0 ? a->prompt[a->n_prompt - 1] : 0;
    if (rc == ATS_EXIT_OK) fflush(stdout);
    for (int64_t d = 0; d < n_gen && rc == ATS_EXIT_OK && !ats_cli_stop; d++) {
        if (ex_cpu_sample(logits, V, &sp, &rng, &next) != ATS_OK) {
            rc = ATS_EXIT_FAIL;
            break;
        }
        if (!a->no_eos && m->tok && next == m->eos_id) break;
        if (a->quiet) {
        } else if (ids) {
            printf(d ? " %d" : "%d", next);
        } else {
            ex_tokenizer_decode(m->tok, prev, next, piece, sizeof piece);
            fputs(piece, stdout);
        }
        if (!a->quiet) fflush(stdout);
        prev = next;
        if (d + 1 == n_gen) break;
        rc = one_round(rt, a, w, idx++, ATS_PHASE_DECODE, &next, 1, logits, &info, &h2d, &off, ops, &tl);
        if (rc == ATS_EXIT_OK) {
            tpot[nd++] = info.latency_s;
            dec_s += info.latency_s;
            resched_s += info.resched_cost_s;
        }
    }
    if (hooked && a->after_rounds) a->after_rounds(a->hook_ctx);
    if (!a->quiet) printf("\n");
    if (ats_cli_stop) rc = ATS_EXIT_FAIL;
    if (rc == ATS_EXIT_OK) {
        policy_stats ps = {pre_s, dec_s, ttft, resched_s, (double)t_new * 1e-9, (double)t_warm * 1e-9, tpot, nd, h2d, off, cuda};
        print_summary(rt, a, &ps);
    }
done:
    close_outputs(a, w, &tl, &rc);
    free(logits);
    free(ops);
    free(tpot);
    ex_rt_free(rt);
    if (dev) ex_device_cuda_free(dev);
    return rc;
}
