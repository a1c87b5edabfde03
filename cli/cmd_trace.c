/*
 * cli/cmd_trace.c — `ats trace synth|show|import|compare`: make, inspect, import and compare load traces
 * (HDF5 schema of DESIGN.md, through common/trace_io).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "atsc/outfile.h"
#include "atsc/trace_import.h"
#include "atsc/trace_io.h"
#include "cli.h"

/* ------------------------------------------------------------------ synth ----------------------- */

enum shape_kind { SH_CONST, SH_STEP, SH_RAMP, SH_BURSTS, SH_THERMAL };

#define MAX_STEPS 64
#define MAX_SHAPES 16

typedef struct shape {
    enum shape_kind kind;
    int res;
    int n;                        /* steps: number of (t, a) pairs; bursts: number of bursts */
    double t[MAX_STEPS], a[MAX_STEPS];
    double p[4];                  /* ramp t0 a0 t1 a1; thermal t0 tau amin; bursts period len a jitter */
    double *burst_start;          /* bursts: start times (drawn from the RNG) */
    const char *spec;             /* the SPEC as given (argv), for messages */
} shape;

static int parse_list(const char *s, double *v, int max)
{
    int n = 0;
    if (s[0] && ats_cli_list_has_empty(s, ',')) return -1; /* an empty field: strtok_r would skip it */
    char *copy = strdup(s), *save = NULL;
    if (!copy) return -1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max || ats_cli_parse_double(tok, &v[n]) != 0) {
            free(copy);
            return -1;
        }
        n++;
    }
    free(copy);
    return n;
}

static int valid_avail(double a) { return a > 0.0 && a <= 1.0; }

/* Parses SPEC (see usage) into sh; on error prints one line and returns -1. */
static int parse_shape(const char *spec, int res, shape *sh)
{
    memset(sh, 0, sizeof *sh);
    sh->res = res;
    sh->spec = spec;
    const char *colon = strchr(spec, ':');
    const char *args = colon ? colon + 1 : "";
    size_t kl = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *rn = atsc_resource_name((enum atsc_resource)res);
    double v[2 * MAX_STEPS];
    int n = parse_list(args, v, 2 * MAX_STEPS);
    const char *why = NULL; /* what is wrong, for the message */
#define BAD(w) do { why = (w); goto bad; } while (0)
    if (kl == 5 && strncmp(spec, "const", 5) == 0) {
        sh->kind = SH_CONST;
        if (n != 1) BAD("one number A");
        if (!valid_avail(v[0])) BAD("A must be in (0, 1]");
        sh->p[0] = v[0];
    } else if (kl == 4 && strncmp(spec, "step", 4) == 0) {
        /* step:T=A,T=A,...: parse pairs separated by '=' and ',' */
        sh->kind = SH_STEP;
        if (args[0] && ats_cli_list_has_empty(args, ','))
            BAD("an empty field"); /* ('step:5=0.5,'): strtok_r below would skip it */
        char *copy = strdup(args), *save = NULL;
        if (!copy) return -1;
        int k = 0;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(tok, '=');
            if (!eq || k == MAX_STEPS) {
                free(copy);
                BAD(k == MAX_STEPS ? "more than 64 steps" : "pairs T=A separated by commas");
            }
            *eq = '\0';
            const char *w = ats_cli_parse_double(tok, &sh->t[k]) || ats_cli_parse_double(eq + 1, &sh->a[k])
                                ? "T and A must be numbers"
                            : !valid_avail(sh->a[k])                       ? "each A must be in (0, 1]"
                            : sh->t[k] < 0                                 ? "each T must be >= 0"
                            : k > 0 && !(sh->t[k] > sh->t[k - 1])          ? "the times T must increase"
                                                                           : NULL;
            if (w) {
                free(copy);
                BAD(w);
            }
            k++;
        }
        free(copy);
        if (k == 0) BAD("at least one T=A");
        sh->n = k;
    } else if (kl == 4 && strncmp(spec, "ramp", 4) == 0) {
        sh->kind = SH_RAMP;
        if (n != 4) BAD("four numbers T0,A0,T1,A1");
        if (v[0] < 0 || !(v[2] > v[0])) BAD("need 0 <= T0 < T1");
        if (!valid_avail(v[1]) || !valid_avail(v[3])) BAD("A0 and A1 must be in (0, 1]");
        memcpy(sh->p, v, 4 * sizeof(double));
    } else if (kl == 6 && strncmp(spec, "bursts", 6) == 0) {
        sh->kind = SH_BURSTS;
        if (n == 3) v[n++] = 0.0;
        if (n != 4) BAD("three or four numbers P,L,A[,J]");
        if (!(v[0] > 0) || !(v[1] > 0) || !(v[1] < v[0])) BAD("need 0 < L < P (L = P: const:A)");
        if (!valid_avail(v[2])) BAD("A must be in (0, 1]");
        if (v[3] < 0 || v[3] > 1) BAD("J must be in [0, 1]");
        memcpy(sh->p, v, 4 * sizeof(double));
    } else if (kl == 7 && strncmp(spec, "thermal", 7) == 0) {
        sh->kind = SH_THERMAL;
        if (n != 3) BAD("three numbers T0,TAU,AMIN");
        if (v[0] < 0 || !(v[1] > 0)) BAD("need T0 >= 0 and TAU > 0");
        if (!valid_avail(v[2])) BAD("AMIN must be in (0, 1]");
        memcpy(sh->p, v, 3 * sizeof(double));
    } else {
        ats_cli_error("trace synth", "--%s '%s': unknown shape (const, step, ramp, bursts, thermal)", rn, spec);
        return -1;
    }
#undef BAD
    return 0;
bad:
    ats_cli_error("trace synth", "--%s '%s': %s (see ats trace synth --help)", rn, spec, why);
    return -1;
}

/* Value of a shape at time t [s]. Bursts and steps are right-continuous; ramp and thermal are smooth. */
static double shape_at(const shape *sh, double t)
{
    switch (sh->kind) {
    case SH_CONST: return sh->p[0];
    case SH_STEP: {
        double a = 1.0;
        for (int k = 0; k < sh->n && sh->t[k] <= t; k++) a = sh->a[k];
        return a;
    }
    case SH_RAMP:
        if (t <= sh->p[0]) return sh->p[1];
        if (t >= sh->p[2]) return sh->p[3];
        return sh->p[1] + (sh->p[3] - sh->p[1]) * (t - sh->p[0]) / (sh->p[2] - sh->p[0]);
    case SH_BURSTS:
        for (int k = 0; k < sh->n; k++)
            if (t >= sh->burst_start[k] && t < sh->burst_start[k] + sh->p[1]) return sh->p[2];
        return 1.0;
    case SH_THERMAL:
        if (t < sh->p[0]) return 1.0;
        return sh->p[2] + (1.0 - sh->p[2]) * exp(-(t - sh->p[0]) / sh->p[1]);
    }
    return 1.0;
}

static int shape_smooth(const shape *sh) { return sh->kind == SH_RAMP || sh->kind == SH_THERMAL; }

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One line for a getopt failure: ':' missing value, else an unknown option, an option given a value it does not take (--loaded-only=1)
 * or a single-dash word (-loaded-only: named by its first letter, as record and stress do). */
static int opt_error(const char *cmd, int c, char **argv, const struct option *lo)
{
    if (c == ':')
        ats_cli_missing_value(cmd, argv[optind - 1], optopt);
    else
        ats_cli_bad_option(cmd, argv[optind - 1], optopt, lo);
    return ATS_EXIT_USAGE;
}

static void synth_usage(FILE *f)
{
    fprintf(f,
            "usage: ats trace synth --out FILE.h5 [--duration S] [--dt S] [--seed N] [--noise SIGMA]\n"
            "                       [--cpu SPEC]... [--gpu SPEC]... [--pcie SPEC]... [--machine M] [--description D]\n"
            "Writes a synthetic load trace. Each resource's availability is the product of its SPECs (1 if none):\n"
            "  const:A                 constant A in (0, 1]\n"
            "  step:T=A,T=A,...        A from time T on (1 before the first T)\n"
            "  ramp:T0,A0,T1,A1        A0 until T0, linear to A1 at T1, then A1 (sampled every --dt)\n"
            "  bursts:P,L,A[,J]        background bursts: in each period P a burst of length L at availability A,\n"
            "                          at the end of the period, started up to J*(P-L) earlier at random (J in [0,1])\n"
            "  thermal:T0,TAU,AMIN     thermal decay: 1 until T0, then AMIN + (1-AMIN) exp(-(t-T0)/TAU)\n"
            "--duration S (default 180): last sample time; --dt S (default 1): sampling of smooth shapes and noise;\n"
            "--noise SIGMA: multiplies every sample by (1 + SIGMA*N(0,1)); every sample (noise or not) is\n"
            "clipped to [0.01, 1] (a resource never stops completely: the simulator divides by it);\n"
            "--seed N (default 1): GSL mt19937 seed for bursts and noise. Example (the paper's Fig. 13):\n"
            "  ats trace synth --out traces/fig13-synth.h5 --duration 180 --cpu step:60=0.4,120=1 \\\n"
            "      --gpu step:120=0.4 --pcie step:120=0.4\n");
}

static int cmd_synth(int argc, char **argv)
{
    static const struct option lo[] = {
        {"out", required_argument, 0, 'o'},      {"duration", required_argument, 0, 'd'},
        {"dt", required_argument, 0, 't'},       {"seed", required_argument, 0, 's'},
        {"noise", required_argument, 0, 'n'},    {"cpu", required_argument, 0, 'c'},
        {"gpu", required_argument, 0, 'g'},      {"pcie", required_argument, 0, 'p'},
        {"machine", required_argument, 0, 'm'},  {"description", required_argument, 0, 'D'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    const char *out = NULL, *machine = "synthetic", *descr = NULL;
    double duration = 180, dt = 1, noise = 0;
    long long seed = 1;
    shape shapes[MAX_SHAPES];
    int nsh = 0, c, rc = ATS_EXIT_USAGE;
    char cmdline[ATSC_TRACE_ATTR_LEN] = "ats trace synth";
    for (int i = 1; i < argc; i++) {
        size_t l = strlen(cmdline);
        int q = strpbrk(argv[i], " \t;()") != NULL;
        snprintf(cmdline + l, sizeof cmdline - l, q ? " '%s'" : " %s", argv[i]);
    }
    optind = 1;
    opterr = 0;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":o:h", lo, NULL)) != -1) {
        /* --cpu/--gpu/--pcie may repeat (their SPECs multiply); a value option given twice is refused */
        if (c != 'c' && c != 'g' && c != 'p' && ats_cli_once_opt("trace synth", &seen, lo, c, optarg)) goto out;
        switch (c) {
        case 'o': out = optarg; break;
        case 'm': machine = optarg; break;
        case 'D': descr = optarg; break;
        case 'd':
            if (ats_cli_parse_double(optarg, &duration) || !(duration > 0)) {
                ats_cli_error("trace synth", "--duration '%s': need a number of seconds > 0", optarg);
                goto out;
            }
            break;
        case 't':
            if (ats_cli_parse_double(optarg, &dt) || !(dt > 0)) {
                ats_cli_error("trace synth", "--dt '%s': need a number of seconds > 0", optarg);
                goto out;
            }
            break;
        case 'n':
            if (ats_cli_parse_double(optarg, &noise) || noise < 0) {
                ats_cli_error("trace synth", "--noise '%s': need a number >= 0", optarg);
                goto out;
            }
            break;
        case 's':
            if (ats_cli_parse_int(optarg, &seed) || seed < 0) {
                ats_cli_error("trace synth", "--seed '%s': need an integer >= 0", optarg);
                goto out;
            }
            break;
        case 'c': case 'g': case 'p':
            if (nsh == MAX_SHAPES) {
                ats_cli_error("trace synth", "at most %d shapes", MAX_SHAPES);
                goto out;
            }
            if (parse_shape(optarg, c == 'c' ? ATSC_RES_CPU : c == 'g' ? ATSC_RES_GPU : ATSC_RES_PCIE,
                            &shapes[nsh]) != 0)
                goto out;
            nsh++;
            break;
        case 'h': synth_usage(stdout); return ATS_EXIT_OK;
        default: return opt_error("trace synth", c, argv, lo);
        }
    }
    if (!out || optind != argc) {
        ats_cli_error("trace synth", optind != argc ? "unexpected argument '%s' (ats trace synth --help)"
                                                    : "--out FILE is required%s (ats trace synth --help)",
                      optind != argc ? argv[optind] : "");
        goto out;
    }
    if (ats_cli_check_out("trace synth", "--out", out)) goto out; /* before any work */
    if (duration / dt > 5e7) {
        ats_cli_error("trace synth", "--duration %g / --dt %g gives too many samples", duration, dt);
        goto out;
    }
    /* a shape whose change comes after the last sample would never show in the trace */
    for (int k = 0; k < nsh; k++) {
        const shape *sh = &shapes[k];
        double t0 = sh->kind == SH_STEP ? sh->t[sh->n - 1]
                    : sh->kind == SH_RAMP || sh->kind == SH_THERMAL ? sh->p[0]
                    : sh->kind == SH_BURSTS ? (1.0 - sh->p[3]) * (sh->p[0] - sh->p[1]) /* first burst's earliest start */
                    : 0.0;
        if (t0 >= duration) { /* at the last sample: the mean over [0, last) and the plot never show it */
            ats_cli_error("trace synth", "--%s '%s': %s at %g s, at or after --duration %g s (the trace ends before it)",
                          atsc_resource_name((enum atsc_resource)sh->res), sh->spec,
                          sh->kind == SH_STEP ? (sh->n > 1 ? "its last step" : "its step")
                          : sh->kind == SH_BURSTS ? "its first burst starts at the earliest" : "it starts",
                          t0, duration);
            goto out;
        }
    }
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng) {
        rc = ATS_EXIT_FAIL;
        goto out;
    }
    gsl_rng_set(rng, (unsigned long)seed);
    /* sample times: the dt grid (needed for smooth shapes and noise), step and burst edges, duration */
    int need_grid = noise > 0;
    size_t cap = 2, n = 0;
    for (int k = 0; k < nsh; k++) {
        need_grid |= shape_smooth(&shapes[k]);
        if (shapes[k].kind == SH_STEP) cap += (size_t)shapes[k].n;
        if (shapes[k].kind == SH_BURSTS) {
            int nb = (int)ceil(duration / shapes[k].p[0]);
            shapes[k].n = nb;
            shapes[k].burst_start = malloc((size_t)(nb > 0 ? nb : 1) * sizeof(double));
            for (int b = 0; b < nb; b++) {
                double P = shapes[k].p[0], L = shapes[k].p[1], J = shapes[k].p[3];
                shapes[k].burst_start[b] = b * P + (P - L) * (1.0 - J * gsl_rng_uniform(rng));
            }
            cap += 2 * (size_t)nb;
        }
    }
    size_t ngrid = need_grid ? (size_t)floor(duration / dt) + 1 : 1;
    cap += ngrid;
    double *ts = malloc(cap * sizeof(double));
    atsc_trace *tr = NULL;
    ats_err err = {{0}};
    if (!ts) {
        rc = ATS_EXIT_FAIL;
        goto free_all;
    }
    for (size_t i = 0; i < ngrid; i++) ts[n++] = (double)i * dt;
    ts[n++] = duration;
    for (int k = 0; k < nsh; k++) {
        if (shapes[k].kind == SH_STEP)
            for (int j = 0; j < shapes[k].n; j++) ts[n++] = shapes[k].t[j];
        if (shapes[k].kind == SH_BURSTS)
            for (int b = 0; b < shapes[k].n; b++) {
                ts[n++] = shapes[k].burst_start[b];
                ts[n++] = shapes[k].burst_start[b] + shapes[k].p[1];
            }
    }
    qsort(ts, n, sizeof *ts, cmp_d);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (ts[i] >= 0 && ts[i] <= duration && (m == 0 || ts[i] > ts[m - 1])) ts[m++] = ts[i];
    if (!(tr = atsc_trace_new(m))) {
        rc = ATS_EXIT_FAIL;
        goto free_all;
    }
    size_t w = 0;
    for (size_t i = 0; i < m; i++) {
        double t = ts[i], tmid = i + 1 < m ? 0.5 * (t + ts[i + 1]) : t;
        double a[ATSC_RES_COUNT] = {1.0, 1.0, 1.0};
        for (int k = 0; k < nsh; k++) a[shapes[k].res] *= shape_at(&shapes[k], shape_smooth(&shapes[k]) ? tmid : t);
        for (int r = 0; r < ATSC_RES_COUNT; r++) {
            if (noise > 0) a[r] *= 1.0 + gsl_ran_gaussian(rng, noise);
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
    snprintf(tr->source, sizeof tr->source, "%s", cmdline);
    snprintf(tr->machine, sizeof tr->machine, "%s", machine);
    if (descr)
        snprintf(tr->description, sizeof tr->description, "%s", descr);
    else
        snprintf(tr->description, sizeof tr->description, "synthetic trace, %g s, seed %lld", duration, seed);
    if (atsc_trace_save(tr, out, &err) != ATS_OK) {
        fprintf(stderr, "ats trace synth: %s\n", err.msg);
        rc = ATS_EXIT_FAIL;
        goto free_all;
    }
    printf("wrote %s: %zu samples, %g s\n", out, tr->n, duration);
    rc = ATS_EXIT_OK;
free_all:
    atsc_trace_free(tr);
    free(ts);
    for (int k = 0; k < nsh; k++) free(shapes[k].burst_start);
    gsl_rng_free(rng);
    return rc;
out:
    for (int k = 0; k < nsh; k++) free(shapes[k].burst_start);
    return rc;
}

/* ------------------------------------------------------------------ show ------------------------ */

static int load_or_report(const char *cmd, const char *name, atsc_trace **tr)
{
    char path[4096];
    ats_cli_trace_path(name, path, sizeof path);
    ats_err err = {{0}};
    enum ats_status st = atsc_trace_load(path, tr, &err);
    if (st != ATS_OK) {
        fprintf(stderr, "ats %s: %s\n", cmd, err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    return ATS_EXIT_OK;
}

/* One character per column: the mean availability over the column's span, '9' = 0.9..1, '0' = below 0.1. */
static void strip(const atsc_trace *tr, enum atsc_resource r, double span, int cols)
{
    for (int c = 0; c < cols; c++) {
        double t0 = span * c / cols, t1 = span * (c + 1) / cols, acc = 0;
        int k = 8;
        for (int j = 0; j < k; j++) {
            atsc_avail v;
            atsc_trace_at(tr, t0 + (t1 - t0) * (j + 0.5) / k, &v);
            acc += r == ATSC_RES_CPU ? v.cpu : r == ATSC_RES_GPU ? v.gpu : v.pcie;
        }
        int d = (int)floor(acc / k * 10.0 + 1e-9);
        putchar(d >= 10 ? '#' : (char)('0' + (d < 0 ? 0 : d)));
    }
    putchar('\n');
}

static int cmd_show(int argc, char **argv)
{
    /* "--" ends the options (a file may then start with '-'); other words starting with '-' are options,
     * and the only ones are --help / -h. f: the first non-option argument, n: how many there are. */
    const int f = argc >= 2 && strcmp(argv[1], "--") == 0 ? 2 : 1, n = argc - f;
    for (int i = 1; f == 1 && i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1] && strcmp(argv[i], "--help") != 0 && strcmp(argv[i], "-h") != 0) {
            ats_cli_error("trace show", "unknown option '%s' (ats trace show --help; '--' before a file whose "
                          "name starts with '-')", argv[i]);
            return ATS_EXIT_USAGE;
        }
    if (f == 2 && n == 1 && argv[2][0] == '\0') {
        ats_cli_error("trace show", "an empty FILE after '--'");
        return ATS_EXIT_USAGE;
    }
    if (n > 1) {
        ats_cli_error("trace show", "one FILE|NAME, got %d ('%s', '%s'%s) (ats trace show --help)", n, argv[f],
                      argv[f + 1], n > 2 ? ", ..." : "");
        return ATS_EXIT_USAGE;
    }
    if (n != 1 || (f == 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))) {
        FILE *fp = n == 1 ? stdout : stderr;
        fprintf(fp, "usage: ats trace show FILE|NAME\n"
                    "Prints a load trace's attributes, its length, per resource the time-weighted mean over\n"
                    "[0, last sample time) (the last sample holds from there on forever, so it weighs 0 in the\n"
                    "mean), the min/max over every sample including the last, the time below 0.9, and a strip\n"
                    "per resource (one character per 1/60 of the duration: '#' = 1, '9' = 0.9.., '0' < 0.1).\n");
        return n == 1 ? ATS_EXIT_OK : ATS_EXIT_USAGE;
    }
    atsc_trace *tr = NULL;
    int rc = load_or_report("trace show", argv[f], &tr);
    if (rc) return rc;
    double dur = atsc_trace_duration(tr);
    printf("source:      %s\nmachine:     %s\ndescription: %s\n", tr->source, tr->machine, tr->description);
    printf("samples:     %zu over %.3f s", tr->n, dur);
    if (tr->n > 1) {
        double mind = INFINITY;
        for (size_t i = 1; i < tr->n; i++)
            if (tr->t_s[i] - tr->t_s[i - 1] < mind) mind = tr->t_s[i] - tr->t_s[i - 1];
        printf(" (shortest interval %.4g s)", mind);
    }
    printf("\n%-6s %8s %8s %8s %10s\n", "res", "mean", "min", "max", "t<0.9 [s]");
    double span = dur > 0 ? dur : 1.0;
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        double mean, mn, mx, below = 0;
        atsc_trace_stats(tr, (enum atsc_resource)r, span, &mean, &mn, &mx);
        const double *a = atsc_trace_res(tr, (enum atsc_resource)r);
        for (size_t i = 0; i + 1 < tr->n; i++)
            if (a[i] < 0.9) below += tr->t_s[i + 1] - tr->t_s[i];
        printf("%-6s %8.4f %8.4f %8.4f %10.2f\n", atsc_resource_name((enum atsc_resource)r), mean, mn, mx, below);
    }
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        printf("%-5s |", atsc_resource_name((enum atsc_resource)r));
        strip(tr, (enum atsc_resource)r, span, 60);
    }
    atsc_trace_free(tr);
    return ATS_EXIT_OK;
}

/* ------------------------------------------------------------------ import ---------------------- */

static void import_usage(FILE *f)
{
    fprintf(f,
            "usage: ats trace import CSV --out FILE.h5 --resource cpu|gpu|pcie [--time-col C] [--value-col C]\n"
            "                        [--filter COL=VALUE] [--percentile P] [--invert] [--compress F] [--floor A]\n"
            "Maps a CSV time series (columns by header name or 0-based index; times in seconds or\n"
            "'YYYY-MM-DD HH:MM:SS[.f]' UTC) to one resource's availability: value / p-th percentile (default\n"
            "p50), or with --invert (slowdown-like values, e.g. batch times) p-th percentile / value, clipped\n"
            "to [floor (0.01), 1]. Rows may come in any time order (sorted; stderr says how many were out\n"
            "of order); rows with equal times are averaged (stderr says how many). Times are shifted so the\n"
            "earliest row is 0 (negative times too: stderr says so) and divided by F (--compress 3600: an\n"
            "hour of samples becomes a second). Other resources stay 1. Numbers are decimal (no hex); dates\n"
            "must exist (2023-02-30 is refused). --filter keeps the rows whose column COL equals VALUE (one\n"
            "--filter only). Negative values are kept: their samples clip to the floor (stderr says how many).\n"
            "The summary line's mean is time-weighted over [0, last time); min/max include the last sample.\n"
            "Example: ats trace import ../shared/traces-raw/azure-vm-noise-2024/sysbench_cpu_long_eastus_B8ms_events_per_s.csv \\\n"
            "  --time-col starttime --value-col value --filter VM_id=0 --resource cpu --percentile 99 \\\n"
            "  --compress 3600 --out /tmp/b8ms.h5\n");
}

/* One stderr line for each thing the import did to the rows besides mapping them. */
static void import_notes(const char *csv, const atsc_import_report *r, double floor_)
{
    if (r->n_out_of_order)
        fprintf(stderr, "ats trace import: %s: %zu of %zu rows out of order (first at line %zu: time %.10g after %.10g); "
                "sorted by time\n", csv, r->n_out_of_order, r->n_rows, r->first_out_of_order_line, r->ooo_t,
                r->ooo_t_prev);
    if (r->n_dup_rows)
        fprintf(stderr, "ats trace import: %s: %zu rows share %zu time%s with other rows (first repeat at line %zu); "
                "each time's values averaged into one sample\n", csv, r->n_dup_rows + r->n_dup_times, r->n_dup_times,
                r->n_dup_times == 1 ? "" : "s", r->first_dup_line);
    if (r->n_neg_values)
        fprintf(stderr, "ats trace import: %s: %zu rows have negative values (first %.10g at line %zu); a sample "
                "with a negative value gets the floor availability %g\n", csv, r->n_neg_values, r->first_neg_value,
                r->first_neg_value_line, floor_);
    if (r->n_negative)
        fprintf(stderr, "ats trace import: %s: %zu rows have negative times (earliest %.10g at line %zu); all times "
                "shifted so the earliest row is t = 0\n", csv, r->n_negative, r->t_earliest, r->earliest_line);
}

static int cmd_import(int argc, char **argv)
{
    static const struct option lo[] = {
        {"out", required_argument, 0, 'o'},        {"resource", required_argument, 0, 'r'},
        {"time-col", required_argument, 0, 't'},   {"value-col", required_argument, 0, 'v'},
        {"filter", required_argument, 0, 'f'},     {"percentile", required_argument, 0, 'p'},
        {"invert", no_argument, 0, 'i'},           {"compress", required_argument, 0, 'c'},
        {"floor", required_argument, 0, 'F'},      {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    atsc_import_opts o = atsc_import_opts_default();
    const char *out = NULL;
    int have_res = 0, c;
    char *filter = NULL;
    optind = 1;
    opterr = 0;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":o:h", lo, NULL)) != -1) {
        if (ats_cli_once_opt("trace import", &seen, lo, c, optarg)) { /* the last one won (one --filter only) */
            free(filter);
            return ATS_EXIT_USAGE;
        }
        switch (c) {
        case 'o': out = optarg; break;
        case 't': o.time_col = optarg; break;
        case 'v': o.value_col = optarg; break;
        case 'i': o.invert = 1; break;
        case 'r':
            have_res = 1;
            if (strcmp(optarg, "cpu") == 0) o.resource = ATSC_RES_CPU;
            else if (strcmp(optarg, "gpu") == 0) o.resource = ATSC_RES_GPU;
            else if (strcmp(optarg, "pcie") == 0) o.resource = ATSC_RES_PCIE;
            else {
                ats_cli_error("trace import", "--resource '%s': need cpu, gpu or pcie", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'f': {
            filter = strdup(optarg); /* once: ats_cli_once_opt above */
            char *eq = filter ? strchr(filter, '=') : NULL;
            if (!eq || eq == filter) {
                ats_cli_error("trace import", "--filter '%s': need COLUMN=VALUE", optarg);
                free(filter);
                return ATS_EXIT_USAGE;
            }
            *eq = '\0';
            o.filter_col = filter;
            o.filter_value = eq + 1;
            break;
        }
        case 'p':
            if (ats_cli_parse_double(optarg, &o.ref_percentile) || !(o.ref_percentile > 0) || o.ref_percentile > 100) {
                ats_cli_error("trace import", "--percentile '%s': need a number in (0, 100]", optarg);
                free(filter);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'c':
            if (ats_cli_parse_double(optarg, &o.compress) || !(o.compress > 0)) {
                ats_cli_error("trace import", "--compress '%s': need a factor > 0", optarg);
                free(filter);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'F':
            if (ats_cli_parse_double(optarg, &o.floor) || !(o.floor > 0) || o.floor > 1) {
                ats_cli_error("trace import", "--floor '%s': need a number in (0, 1]", optarg);
                free(filter);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'h': import_usage(stdout); free(filter); return ATS_EXIT_OK;
        default: free(filter); return opt_error("trace import", c, argv, lo);
        }
    }
    if (optind != argc - 1 || !out || !have_res) {
        ats_cli_error("trace import", "need one CSV file, --out and --resource (ats trace import --help)");
        free(filter);
        return ATS_EXIT_USAGE;
    }
    atsc_in_note(argv[optind]); /* --out must not name the CSV: refused here, before reading it */
    if (ats_cli_check_out("trace import", "--out", out)) { /* before reading the CSV */
        free(filter);
        return ATS_EXIT_USAGE;
    }
    atsc_trace *tr = NULL;
    ats_err err = {{0}};
    atsc_import_report rp;
    enum ats_status st = atsc_trace_import_csv(argv[optind], &o, &tr, &rp, &err);
    free(filter);
    if (st != ATS_OK) {
        fprintf(stderr, "ats trace import: %s\n", err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    import_notes(argv[optind], &rp, o.floor);
    if (atsc_trace_save(tr, out, &err) != ATS_OK) {
        fprintf(stderr, "ats trace import: %s\n", err.msg);
        atsc_trace_free(tr);
        return ATS_EXIT_FAIL;
    }
    double mean, mn, mx;
    double span = atsc_trace_duration(tr) > 0 ? atsc_trace_duration(tr) : 1.0;
    atsc_trace_stats(tr, o.resource, span, &mean, &mn, &mx);
    printf("wrote %s: %zu samples over %.3f s; %s availability mean %.4f min %.4f max %.4f\n", out, tr->n,
           atsc_trace_duration(tr), atsc_resource_name(o.resource), mean, mn, mx);
    atsc_trace_free(tr);
    return ATS_EXIT_OK;
}

/* ------------------------------------------------------------------ compare --------------------- */

static void compare_usage(FILE *f)
{
    fprintf(f,
            "usage: ats trace compare RECORDED TARGET [--margin S] [--offset S] [--max-err E] [--loaded-only]\n"
            "For each resource and each constant segment of TARGET (up to its last sample) longer than\n"
            "2*margin (default 5 s) inside the recording, prints the time-weighted mean of RECORDED over the\n"
            "segment without its margins (recorded time = target time + offset) and the relative error.\n"
            "A segment that cannot be compared gets a line saying why (not longer than 2*margin, or outside the\n"
            "recording: the part of it inside the recording is not longer than 2*margin), and the summary says\n"
            "\"not compared: N loaded segments\" (target < 1). With --max-err E (e.g. 0.1) exits 1 if any\n"
            "|error| > E, if a loaded segment was not compared, or if no segment at all was compared\n"
            "(a check that compared nothing does not pass). A segment reaching past the recording is\n"
            "compared over the part the recording covers (its line says which). A TARGET of one sample\n"
            "covers 0 s: nothing to compare, one line on stderr, exit 1 (with or without --max-err).\n"
            "--loaded-only: --max-err judges the loaded segments only (target < 1: what a stressor was asked\n"
            "to produce); unloaded ones are still printed, with their own worst error in the summary. Use it\n"
            "for the stressor's accuracy where one resource's load lowers another's availability (copies from\n"
            "host memory slow the memory-bound CPU probe: traces/README.md); needs --max-err; fails if no\n"
            "loaded segment was compared. A failed --max-err check says so in one line on stderr.\n");
}

/* A target value as the table prints it: 4 decimals, more where 4 would hide that it is below 1 (a
 * loaded segment, target < 1, must not read "1.0000") or round it to 0. */
static const char *fmt_target(double a, char *buf, size_t len)
{
    if ((a < 1.0 && a >= 0.99995) || (a > 0 && a < 0.00005)) snprintf(buf, len, "%.6g", a);
    else snprintf(buf, len, "%.4f", a);
    return buf;
}

/* A relative error as printed: the table's signed %+.3f (table = 1) or the summary's |error| %.4f, in
 * exponent form past 999 (a target near 0). */
static const char *fmt_err(double e, int table, char *buf, size_t len)
{
    if (fabs(e) < 999.5) snprintf(buf, len, table ? "%+.3f" : "%.4f", e);
    else snprintf(buf, len, table ? "%+.2e" : "%.3e", e);
    return buf;
}

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

static int cmd_compare(int argc, char **argv)
{
    static const struct option lo[] = {{"margin", required_argument, 0, 'm'},
                                       {"offset", required_argument, 0, 'o'},
                                       {"max-err", required_argument, 0, 'e'},
                                       {"loaded-only", no_argument, 0, 'l'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    double margin = 5, offset = 0, max_err = INFINITY;
    int c, have_max = 0, loaded_only = 0;
    optind = 1;
    opterr = 0;
    const char *seen[256] = {0};
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        double *dst = c == 'm' ? &margin : c == 'o' ? &offset : c == 'e' ? &max_err : NULL;
        if (dst && ats_cli_once("trace compare", seen, c, c == 'm' ? "margin" : c == 'o' ? "offset" : "max-err", optarg))
            return ATS_EXIT_USAGE;
        if (c == ':' || c == '?') return opt_error("trace compare", c, argv, lo);
        if (c == 'h') {
            compare_usage(stdout);
            return ATS_EXIT_OK;
        }
        have_max |= c == 'e';
        if (c == 'l') {
            loaded_only = 1;
            continue;
        }
        if (!dst) return opt_error("trace compare", c, argv, lo);
        if (ats_cli_parse_double(optarg, dst) || (c != 'o' && *dst < 0)) {
            ats_cli_error("trace compare", "--%s '%s': need a %snumber", c == 'm' ? "margin" : c == 'o' ? "offset" : "max-err",
                          optarg, c == 'o' ? "" : "non-negative ");
            return ATS_EXIT_USAGE;
        }
    }
    if (optind != argc - 2) {
        if (argc - optind > 2)
            ats_cli_error("trace compare", "need two files, RECORDED and TARGET; got %d arguments, the third '%s' "
                          "(ats trace compare --help)", argc - optind, argv[optind + 2]);
        else
            ats_cli_error("trace compare", "need two files, RECORDED and TARGET; got %d argument%s (ats trace compare "
                          "--help)", argc - optind, argc - optind == 1 ? "" : "s");
        return ATS_EXIT_USAGE;
    }
    if (loaded_only && !have_max) {
        ats_cli_error("trace compare", "--loaded-only says which segments --max-err judges; give --max-err E too");
        return ATS_EXIT_USAGE;
    }
    atsc_trace *rec = NULL, *tgt = NULL;
    int rc = load_or_report("trace compare", argv[optind], &rec);
    if (!rc) rc = load_or_report("trace compare", argv[optind + 1], &tgt);
    if (rc) {
        atsc_trace_free(rec);
        return rc;
    }
    /* target times whose recorded time (target time + offset) lies inside the recording */
    const double tgt_end = atsc_trace_duration(tgt);
    double rlo = -offset > 0 ? -offset : 0, rhi = atsc_trace_duration(rec) - offset;
    printf("%-5s %9s %9s %8s %8s %8s\n", "res", "from [s]", "to [s]", "target", "recorded", "rel.err");
    double worst_l = 0, worst_u = 0; /* worst |error| of loaded (target < 1) and unloaded segments */
    int n_cmp = 0, n_cmp_l = 0, n_skip_loaded = 0, n_skip_idle = 0;
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        const char *rn = atsc_resource_name((enum atsc_resource)r);
        const double *a = atsc_trace_res(tgt, (enum atsc_resource)r);
        size_t i = 0;
        while (i < tgt->n && tgt->t_s[i] < tgt_end) {
            size_t j = i + 1;
            while (j < tgt->n && a[j] == a[i]) j++;
            double s0 = tgt->t_s[i], s1 = j < tgt->n ? tgt->t_s[j] : tgt_end;
            double c0 = s0 > rlo ? s0 : rlo, c1 = s1 < rhi ? s1 : rhi; /* the part inside the recording */
            if (c1 - c0 > 2 * margin) {
                double m = mean_over(rec, (enum atsc_resource)r, c0 + margin + offset, c1 - margin + offset);
                double e = (m - a[i]) / a[i];
                double *w = a[i] < 1.0 ? &worst_l : &worst_u;
                if (fabs(e) > *w) *w = fabs(e);
                n_cmp++;
                n_cmp_l += a[i] < 1.0;
                char tb[32], eb[32];
                printf("%-5s %9.2f %9.2f %8s %8.4f %8s", rn, c0 + margin, c1 - margin, fmt_target(a[i], tb, sizeof tb), m,
                       fmt_err(e, 1, eb, sizeof eb));
                if (c0 > s0 || c1 < s1) /* the segment reaches outside the recording: say which part */
                    printf("  (segment %.2f..%.2f s; the recording covers %.2f..%.2f of it)", s0, s1, c0, c1);
                putchar('\n');
            } else {
                char why[160];
                if (!(c1 > c0))
                    snprintf(why, sizeof why, "outside the recording (target %.2f..%.2f s = recorded %.2f..%.2f s; "
                             "recorded length %.2f s)", s0, s1, s0 + offset, s1 + offset, atsc_trace_duration(rec));
                else if (c0 > s0 || c1 < s1)
                    snprintf(why, sizeof why, "partly outside the recording: %.3g s inside, not longer than 2*margin = %g s",
                             c1 - c0, 2 * margin);
                else
                    snprintf(why, sizeof why, "%.3g s long, not longer than 2*margin = %g s", s1 - s0, 2 * margin);
                if (a[i] < 1.0) n_skip_loaded++;
                else n_skip_idle++;
                char tb[32];
                printf("%-5s %9.2f %9.2f %8s %8s %8s  not compared: %s\n", rn, s0, s1, fmt_target(a[i], tb, sizeof tb), "-",
                       "-", why);
            }
            i = j;
        }
    }
    const double worst = worst_l > worst_u ? worst_l : worst_u;
    printf("compared %d segments; not compared: %d loaded segments (target < 1), %d unloaded\n", n_cmp,
           n_skip_loaded, n_skip_idle);
    if (n_cmp) {
        char b0[32], b1[32], b2[32];
        printf("max |rel.err| = %s (loaded segments: ", fmt_err(worst, 0, b0, sizeof b0));
        if (n_cmp_l) printf("%s over %d", fmt_err(worst_l, 0, b1, sizeof b1), n_cmp_l);
        else printf("none compared");
        printf("; unloaded: ");
        if (n_cmp > n_cmp_l) printf("%s over %d)\n", fmt_err(worst_u, 0, b2, sizeof b2), n_cmp - n_cmp_l);
        else printf("none compared)\n");
    } else
        printf("max |rel.err| = - (no segment compared)\n");
    const size_t tgt_n = tgt->n;
    atsc_trace_free(rec);
    atsc_trace_free(tgt);
    if (tgt_n < 2) { /* no segment at all, whatever --margin and --offset: a check of nothing (exit 1) */
        ats_cli_error("trace compare", "%s: the target covers 0 s (one sample): no segment to compare (a target "
                      "needs a second sample, its end)", argv[optind + 1]);
        return ATS_EXIT_FAIL;
    }
    if (!have_max) return ATS_EXIT_OK;
    if (n_cmp == 0) {
        ats_cli_error("trace compare", "--max-err %g: no segment compared (--margin %g, --offset %g)", max_err,
                      margin, offset);
        return ATS_EXIT_FAIL;
    }
    if (n_skip_loaded) {
        ats_cli_error("trace compare", "--max-err %g: %d loaded segment%s not compared (--margin %g, --offset %g)",
                      max_err, n_skip_loaded, n_skip_loaded == 1 ? "" : "s", margin, offset);
        return ATS_EXIT_FAIL;
    }
    if (loaded_only && n_cmp_l == 0) {
        ats_cli_error("trace compare", "--max-err %g --loaded-only: the target has no loaded segment (target < 1) to "
                      "judge", max_err);
        return ATS_EXIT_FAIL;
    }
    const double judged = loaded_only ? worst_l : worst;
    if (judged > max_err) {
        char jb[32];
        ats_cli_error("trace compare", "--max-err %g%s: max |rel.err| %s%s", max_err, loaded_only ? " --loaded-only" : "",
                      fmt_err(judged, 0, jb, sizeof jb), loaded_only ? " over the loaded segments" : "");
        return ATS_EXIT_FAIL;
    }
    return ATS_EXIT_OK;
}

/* ------------------------------------------------------------------ dispatch -------------------- */

int ats_cmd_trace(int argc, char **argv)
{
    /* `ats trace help synth`, `ats trace show help`: that subcommand's usage (`ats trace show help` looked
       for traces/help.h5; ./help is that file) */
    char *help_buf[4];
    ats_cli_help_words(argc, &argv, help_buf);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: ats trace synth|show|import|compare ...   (ats trace <sub> --help)\n"
                   "  synth    write a synthetic load trace (constant, step, ramp, bursts, thermal decay)\n"
                   "  show     summarize a load trace\n"
                   "  import   turn a CSV time series into a load trace\n"
                   "  compare  compare a recorded trace with a target trace, segment by segment\n");
        return argc < 2 ? ATS_EXIT_USAGE : ATS_EXIT_OK;
    }
    if (strcmp(argv[1], "synth") == 0) return cmd_synth(argc - 1, argv + 1);
    if (strcmp(argv[1], "show") == 0) return cmd_show(argc - 1, argv + 1);
    if (strcmp(argv[1], "import") == 0) return cmd_import(argc - 1, argv + 1);
    if (strcmp(argv[1], "compare") == 0) return cmd_compare(argc - 1, argv + 1);
    ats_cli_error("trace", "unknown subcommand '%s' (synth, show, import, compare)", argv[1]);
    return ATS_EXIT_USAGE;
}
