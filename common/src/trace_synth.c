/*
 * common/src/trace_synth.c — synthetic load traces and trace comparison (atsc/trace_synth.h).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "atsc/trace_synth.h"

/* ---- parsing ------------------------------------------------------------------------------------ */

/* strict double: the whole string, finite (an underflow is that tiny number) */
static int parse_double(const char *s, double *out)
{
    if (!s || !*s) return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if ((errno && !(errno == ERANGE && fabs(v) < 1.0)) || end == s || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* 1 when the comma list s has an empty entry ("a,,b", "a,", ",a", "" or spaces only): strtok_r would skip it */
static int list_has_empty(const char *s)
{
    int filled = 0;
    for (const char *p = s;; p++) {
        if (*p == ',' || *p == '\0') {
            if (!filled) return 1;
            if (*p == '\0') return 0;
            filled = 0;
        } else if (!isspace((unsigned char)*p)) {
            filled = 1;
        }
    }
}

/* numbers separated by commas into v (at most max): their count, -1 when one is not a number or too many */
static int parse_list(const char *s, double *v, int max)
{
    int n = 0;
    if (s[0] && list_has_empty(s)) return -1;
    char *copy = strdup(s), *save = NULL;
    if (!copy) return -1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max || parse_double(tok, &v[n]) != 0) {
            free(copy);
            return -1;
        }
        n++;
    }
    free(copy);
    return n;
}

static int valid_avail(double a) { return a > 0.0 && a <= 1.0; }

/* step:T=A,T=A,...: pairs separated by '=' and ','; NULL or what is wrong */
static const char *parse_steps(const char *args, atsc_synth_shape *sh)
{
    if (args[0] && list_has_empty(args)) return "an empty field"; /* ('step:5=0.5,'): strtok_r would skip it */
    char *copy = strdup(args), *save = NULL;
    if (!copy) return "out of memory";
    int k = 0;
    const char *w = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && !w; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || k == ATSC_SHAPE_MAX_STEPS) {
            w = k == ATSC_SHAPE_MAX_STEPS ? "more than 64 steps" : "pairs T=A separated by commas";
            break;
        }
        *eq = '\0';
        w = parse_double(tok, &sh->t[k]) || parse_double(eq + 1, &sh->a[k]) ? "T and A must be numbers"
            : !valid_avail(sh->a[k])                                          ? "each A must be in (0, 1]"
            : sh->t[k] < 0                                                    ? "each T must be >= 0"
            : k > 0 && !(sh->t[k] > sh->t[k - 1])                             ? "the times T must increase"
                                                                              : NULL;
        k++;
    }
    free(copy);
    if (!w && k == 0) w = "at least one T=A";
    sh->n = k;
    return w;
}

enum ats_status atsc_synth_shape_parse(const char *spec, enum atsc_resource res, atsc_synth_shape *sh, ats_err *err)
{
    memset(sh, 0, sizeof *sh);
    sh->res = res;
    sh->spec = spec;
    const char *colon = strchr(spec, ':');
    const char *args = colon ? colon + 1 : "";
    size_t kl = colon ? (size_t)(colon - spec) : strlen(spec);
    double v[2 * ATSC_SHAPE_MAX_STEPS];
    int n = parse_list(args, v, 2 * ATSC_SHAPE_MAX_STEPS);
    const char *why = NULL; /* what is wrong, for the message */
    if (kl == 5 && strncmp(spec, "const", 5) == 0) {
        sh->kind = ATSC_SHAPE_CONST;
        why = n != 1 ? "one number A" : !valid_avail(v[0]) ? "A must be in (0, 1]" : NULL;
        sh->p[0] = v[0];
    } else if (kl == 4 && strncmp(spec, "step", 4) == 0) {
        sh->kind = ATSC_SHAPE_STEP;
        why = parse_steps(args, sh);
    } else if (kl == 4 && strncmp(spec, "ramp", 4) == 0) {
        sh->kind = ATSC_SHAPE_RAMP;
        why = n != 4                                     ? "four numbers T0,A0,T1,A1"
              : v[0] < 0 || !(v[2] > v[0])               ? "need 0 <= T0 < T1"
              : !valid_avail(v[1]) || !valid_avail(v[3]) ? "A0 and A1 must be in (0, 1]"
                                                         : NULL;
        if (!why) memcpy(sh->p, v, 4 * sizeof(double));
    } else if (kl == 6 && strncmp(spec, "bursts", 6) == 0) {
        sh->kind = ATSC_SHAPE_BURSTS;
        if (n == 3) v[n++] = 0.0;
        why = n != 4                                     ? "three or four numbers P,L,A[,J]"
              : !(v[0] > 0) || !(v[1] > 0) || !(v[1] < v[0]) ? "need 0 < L < P (L = P: const:A)"
              : !valid_avail(v[2])                       ? "A must be in (0, 1]"
              : v[3] < 0 || v[3] > 1                     ? "J must be in [0, 1]"
                                                         : NULL;
        if (!why) memcpy(sh->p, v, 4 * sizeof(double));
    } else if (kl == 7 && strncmp(spec, "thermal", 7) == 0) {
        sh->kind = ATSC_SHAPE_THERMAL;
        why = n != 3                         ? "three numbers T0,TAU,AMIN"
              : v[0] < 0 || !(v[1] > 0)      ? "need T0 >= 0 and TAU > 0"
              : !valid_avail(v[2])           ? "AMIN must be in (0, 1]"
                                             : NULL;
        if (!why) memcpy(sh->p, v, 3 * sizeof(double));
    } else {
        return ats_err_set(err, ATS_ENOTFOUND, "'%s': unknown shape (const, step, ramp, bursts, thermal)", spec);
    }
    if (why) return ats_err_set(err, ATS_EINVAL, "'%s': %s", spec, why);
    return ATS_OK;
}

double atsc_synth_shape_start(const atsc_synth_shape *sh, const char **what)
{
    const char *w = "it starts";
    double t0 = 0.0;
    switch (sh->kind) {
    case ATSC_SHAPE_STEP:
        t0 = sh->t[sh->n - 1];
        w = sh->n > 1 ? "its last step" : "its step";
        break;
    case ATSC_SHAPE_RAMP:
    case ATSC_SHAPE_THERMAL: t0 = sh->p[0]; break;
    case ATSC_SHAPE_BURSTS:
        t0 = (1.0 - sh->p[3]) * (sh->p[0] - sh->p[1]); /* the first burst's earliest start */
        w = "its first burst starts at the earliest";
        break;
    case ATSC_SHAPE_CONST: break;
    }
    if (what) *what = w;
    return t0;
}

/* ---- synthesis ---------------------------------------------------------------------------------- */

/* Value of a shape at time t [s]; bursts (their start times in bs) and steps are right-continuous, ramp
 * and thermal smooth. */
static double shape_at(const atsc_synth_shape *sh, const double *bs, int nb, double t)
{
    switch (sh->kind) {
    case ATSC_SHAPE_CONST: return sh->p[0];
    case ATSC_SHAPE_STEP: {
        double a = 1.0;
        for (int k = 0; k < sh->n && sh->t[k] <= t; k++) a = sh->a[k];
        return a;
    }
    case ATSC_SHAPE_RAMP:
        if (t <= sh->p[0]) return sh->p[1];
        if (t >= sh->p[2]) return sh->p[3];
        return sh->p[1] + (sh->p[3] - sh->p[1]) * (t - sh->p[0]) / (sh->p[2] - sh->p[0]);
    case ATSC_SHAPE_BURSTS:
        for (int k = 0; k < nb; k++)
            if (t >= bs[k] && t < bs[k] + sh->p[1]) return sh->p[2];
        return 1.0;
    case ATSC_SHAPE_THERMAL:
        if (t < sh->p[0]) return 1.0;
        return sh->p[2] + (1.0 - sh->p[2]) * exp(-(t - sh->p[0]) / sh->p[1]);
    }
    return 1.0;
}

static int shape_smooth(const atsc_synth_shape *sh)
{
    return sh->kind == ATSC_SHAPE_RAMP || sh->kind == ATSC_SHAPE_THERMAL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

atsc_synth_opts atsc_synth_opts_default(void)
{
    atsc_synth_opts o;
    memset(&o, 0, sizeof o);
    o.duration_s = 180;
    o.dt_s = 1;
    o.seed = 1;
    return o;
}

/* the sample times: the dt grid (when needed), step and burst edges, duration; sorted, distinct, in
 * [0, duration]. *n_out of them, new (free); NULL when out of memory. */
static double *sample_times(const atsc_synth_opts *o, const atsc_synth_shape *shapes, int n, double *const *bs,
                            const int *nb, size_t *n_out)
{
    int need_grid = o->noise > 0;
    size_t cap = 2, m = 0;
    for (int k = 0; k < n; k++) {
        need_grid |= shape_smooth(&shapes[k]);
        if (shapes[k].kind == ATSC_SHAPE_STEP) cap += (size_t)shapes[k].n;
        cap += 2 * (size_t)nb[k];
    }
    size_t ngrid = need_grid ? (size_t)floor(o->duration_s / o->dt_s) + 1 : 1;
    cap += ngrid;
    double *ts = malloc(cap * sizeof(double));
    if (!ts) return NULL;
    for (size_t i = 0; i < ngrid; i++) ts[m++] = (double)i * o->dt_s;
    ts[m++] = o->duration_s;
    for (int k = 0; k < n; k++) {
        if (shapes[k].kind == ATSC_SHAPE_STEP)
            for (int j = 0; j < shapes[k].n; j++) ts[m++] = shapes[k].t[j];
        for (int b = 0; b < nb[k]; b++) {
            ts[m++] = bs[k][b];
            ts[m++] = bs[k][b] + shapes[k].p[1];
        }
    }
    qsort(ts, m, sizeof *ts, cmp_d);
    size_t w = 0;
    for (size_t i = 0; i < m; i++)
        if (ts[i] >= 0 && ts[i] <= o->duration_s && (w == 0 || ts[i] > ts[w - 1])) ts[w++] = ts[i];
    *n_out = w;
    return ts;
}

/* the samples at ts[0..m) into tr (n set): products of the shapes, noise, clipped, repeats dropped */
static void fill_samples(const atsc_synth_opts *o, const atsc_synth_shape *shapes, int n, double *const *bs,
                         const int *nb, const double *ts, size_t m, gsl_rng *rng, atsc_trace *tr)
{
    size_t w = 0;
    for (size_t i = 0; i < m; i++) {
        double t = ts[i], tmid = i + 1 < m ? 0.5 * (t + ts[i + 1]) : t;
        double a[ATSC_RES_COUNT] = {1.0, 1.0, 1.0};
        for (int k = 0; k < n; k++)
            a[shapes[k].res] *= shape_at(&shapes[k], bs[k], nb[k], shape_smooth(&shapes[k]) ? tmid : t);
        for (int r = 0; r < ATSC_RES_COUNT; r++) {
            if (o->noise > 0) a[r] *= 1.0 + gsl_ran_gaussian(rng, o->noise);
            if (a[r] > 1.0) a[r] = 1.0;
            if (!(a[r] >= 0.01)) a[r] = 0.01;
        }
        /* drop a sample equal to the previous one, except the last (it marks the duration) */
        if (w > 0 && i + 1 < m && a[0] == tr->cpu_avail[w - 1] && a[1] == tr->gpu_avail[w - 1] &&
            a[2] == tr->pcie_avail[w - 1])
            continue;
        tr->t_s[w] = t;
        tr->cpu_avail[w] = a[0];
        tr->gpu_avail[w] = a[1];
        tr->pcie_avail[w] = a[2];
        w++;
    }
    tr->n = w;
}

enum ats_status atsc_trace_synth(const atsc_synth_opts *o, const atsc_synth_shape *shapes, int n, atsc_trace **out,
                                 ats_err *err)
{
    *out = NULL;
    if (!o || !(o->duration_s > 0) || !(o->dt_s > 0) || !(o->noise >= 0) || n < 0 || (n > 0 && !shapes))
        return ats_err_set(err, ATS_EINVAL, "trace synthesis: need duration > 0, dt > 0, noise >= 0");
    enum ats_status st = ATS_ENOMEM;
    double **bs = calloc((size_t)(n > 0 ? n : 1), sizeof *bs), *ts = NULL;
    int *nb = calloc((size_t)(n > 0 ? n : 1), sizeof *nb);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    atsc_trace *tr = NULL;
    if (!bs || !nb || !rng) goto done;
    gsl_rng_set(rng, (unsigned long)o->seed);
    for (int k = 0; k < n; k++) { /* burst start times, drawn in the order of the shapes */
        if (shapes[k].kind != ATSC_SHAPE_BURSTS) continue;
        double P = shapes[k].p[0], L = shapes[k].p[1], J = shapes[k].p[3];
        nb[k] = (int)ceil(o->duration_s / P);
        if (!(bs[k] = malloc((size_t)(nb[k] > 0 ? nb[k] : 1) * sizeof(double)))) goto done;
        for (int b = 0; b < nb[k]; b++) bs[k][b] = b * P + (P - L) * (1.0 - J * gsl_rng_uniform(rng));
    }
    size_t m = 0;
    if (!(ts = sample_times(o, shapes, n, bs, nb, &m)) || !(tr = atsc_trace_new(m))) goto done;
    fill_samples(o, shapes, n, bs, nb, ts, m, rng, tr);
    snprintf(tr->source, sizeof tr->source, "%s", o->source ? o->source : "");
    snprintf(tr->machine, sizeof tr->machine, "%s", o->machine ? o->machine : "synthetic");
    if (o->description)
        snprintf(tr->description, sizeof tr->description, "%s", o->description);
    else
        snprintf(tr->description, sizeof tr->description, "synthetic trace, %g s, seed %llu", o->duration_s,
                 (unsigned long long)o->seed);
    *out = tr;
    tr = NULL;
    st = ATS_OK;
done:
    if (st) ats_err_set(err, st, "trace synthesis: out of memory");
    atsc_trace_free(tr);
    free(ts);
    for (int k = 0; bs && k < n; k++) free(bs[k]);
    free(bs);
    free(nb);
    gsl_rng_free(rng);
    return st;
}

/* ---- comparison --------------------------------------------------------------------------------- */

/* time-weighted mean of resource r of tr over [t0, t1) */
static double mean_over(const atsc_trace *tr, enum atsc_resource r, double t0, double t1)
{
    const double *a = atsc_trace_res((atsc_trace *)tr, r);
    double acc = 0;
    size_t i = atsc_trace_index(tr, t0);
    double t = t0;
    while (t < t1) {
        double next = i + 1 < tr->n ? tr->t_s[i + 1] : INFINITY;
        double e = next < t1 ? next : t1;
        acc += a[i] * (e - t);
        t = e;
        i++;
    }
    return acc / (t1 - t0);
}

enum ats_status atsc_trace_compare(const atsc_trace *rec, const atsc_trace *tgt, double margin, double offset,
                                   atsc_cmp_result *out, ats_err *err)
{
    memset(out, 0, sizeof *out);
    /* at most one segment per sample and resource */
    out->seg = malloc((tgt->n ? tgt->n : 1) * ATSC_RES_COUNT * sizeof *out->seg);
    if (!out->seg) return ats_err_set(err, ATS_ENOMEM, "trace compare: out of memory");
    /* target times whose recorded time (target time + offset) lies inside the recording */
    const double tgt_end = atsc_trace_duration(tgt);
    const double rlo = -offset > 0 ? -offset : 0, rhi = atsc_trace_duration(rec) - offset;
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        const double *a = atsc_trace_res((atsc_trace *)tgt, (enum atsc_resource)r);
        size_t i = 0;
        while (i < tgt->n && tgt->t_s[i] < tgt_end) {
            size_t j = i + 1;
            while (j < tgt->n && a[j] == a[i]) j++;
            atsc_cmp_segment *s = &out->seg[out->n++];
            memset(s, 0, sizeof *s);
            s->res = (enum atsc_resource)r;
            s->target = a[i];
            s->s0 = tgt->t_s[i];
            s->s1 = j < tgt->n ? tgt->t_s[j] : tgt_end;
            s->c0 = s->s0 > rlo ? s->s0 : rlo; /* the part inside the recording */
            s->c1 = s->s1 < rhi ? s->s1 : rhi;
            const int loaded = a[i] < 1.0;
            if (s->c1 - s->c0 > 2 * margin) {
                s->recorded = mean_over(rec, s->res, s->c0 + margin + offset, s->c1 - margin + offset);
                s->rel_err = (s->recorded - a[i]) / a[i];
                double *w = loaded ? &out->worst_loaded : &out->worst_idle;
                if (fabs(s->rel_err) > *w) *w = fabs(s->rel_err);
                out->n_cmp++;
                out->n_cmp_loaded += loaded;
            } else {
                s->skip = !(s->c1 > s->c0) ? ATSC_CMP_OUTSIDE : s->c0 > s->s0 || s->c1 < s->s1 ? ATSC_CMP_PARTLY
                                                                                               : ATSC_CMP_SHORT;
                if (loaded) out->n_skip_loaded++;
                else out->n_skip_idle++;
            }
            i = j;
        }
    }
    return ATS_OK;
}

void atsc_cmp_result_free(atsc_cmp_result *r)
{
    if (!r) return;
    free(r->seg);
    memset(r, 0, sizeof *r);
}
