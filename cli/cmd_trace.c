/*
 * cli/cmd_trace.c — `ats trace synth|show|import|compare`: make, inspect, import and compare load traces
 * (HDF5 schema of DESIGN.md, through common/trace_io; synthesis and comparison: common/trace_synth).
 * Here the flags, the checks of user input and the printing.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atsc/outfile.h"
#include "atsc/trace_import.h"
#include "atsc/trace_io.h"
#include "atsc/trace_synth.h"
#include "cli.h"

/* ------------------------------------------------------------------ synth ----------------------- */

#define MAX_SHAPES 16

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

/* --cpu/--gpu/--pcie SPEC into sh: one line naming the flag and 0 / ATS_EXIT_USAGE */
static int parse_shape(const char *spec, int c, atsc_synth_shape *sh)
{
    enum atsc_resource res = c == 'c' ? ATSC_RES_CPU : c == 'g' ? ATSC_RES_GPU : ATSC_RES_PCIE;
    ats_err err = {{0}};
    enum ats_status st = atsc_synth_shape_parse(spec, res, sh, &err);
    if (st == ATS_OK) return 0;
    ats_cli_error("trace synth", "--%s %s%s", atsc_resource_name(res), err.msg,
                  st == ATS_EINVAL ? " (see ats trace synth --help)" : "");
    return ATS_EXIT_USAGE;
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
    const char *out = NULL;
    atsc_synth_opts so = atsc_synth_opts_default();
    long long seed = 1;
    atsc_synth_shape shapes[MAX_SHAPES];
    int nsh = 0, c;
    char cmdline[ATSC_TRACE_ATTR_LEN] = "ats trace synth";
    for (int i = 1; i < argc; i++) {
        size_t l = strlen(cmdline);
        int q = strpbrk(argv[i], " \t;()") != NULL;
        snprintf(cmdline + l, sizeof cmdline - l, q ? " '%s'" : " %s", argv[i]);
    }
    so.source = cmdline;
    optind = 1;
    opterr = 0;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":o:h", lo, NULL)) != -1) {
        /* --cpu/--gpu/--pcie may repeat (their SPECs multiply); a value option given twice is refused */
        if (c != 'c' && c != 'g' && c != 'p' && ats_cli_once_opt("trace synth", &seen, lo, c, optarg))
            return ATS_EXIT_USAGE;
        switch (c) {
        case 'o': out = optarg; break;
        case 'm': so.machine = optarg; break;
        case 'D': so.description = optarg; break;
        case 'd':
            if (ats_cli_parse_double(optarg, &so.duration_s) || !(so.duration_s > 0)) {
                ats_cli_error("trace synth", "--duration '%s': need a number of seconds > 0", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 't':
            if (ats_cli_parse_double(optarg, &so.dt_s) || !(so.dt_s > 0)) {
                ats_cli_error("trace synth", "--dt '%s': need a number of seconds > 0", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 'n':
            if (ats_cli_parse_double(optarg, &so.noise) || so.noise < 0) {
                ats_cli_error("trace synth", "--noise '%s': need a number >= 0", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case 's':
            if (ats_cli_parse_int(optarg, &seed) || seed < 0) {
                ats_cli_error("trace synth", "--seed '%s': need an integer >= 0", optarg);
                return ATS_EXIT_USAGE;
            }
            so.seed = (uint64_t)seed;
            break;
        case 'c': case 'g': case 'p':
            if (nsh == MAX_SHAPES) {
                ats_cli_error("trace synth", "at most %d shapes", MAX_SHAPES);
                return ATS_EXIT_USAGE;
            }
            if (parse_shape(optarg, c, &shapes[nsh])) return ATS_EXIT_USAGE;
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
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_check_out("trace synth", "--out", out)) return ATS_EXIT_USAGE; /* before any work */
    if (so.duration_s / so.dt_s > 5e7) {
        ats_cli_error("trace synth", "--duration %g / --dt %g gives too many samples", so.duration_s, so.dt_s);
        return ATS_EXIT_USAGE;
    }
    /* a shape whose change comes after the last sample would never show in the trace */
    for (int k = 0; k < nsh; k++) {
        const char *what = NULL;
        double t0 = atsc_synth_shape_start(&shapes[k], &what);
        if (t0 >= so.duration_s) { /* at the last sample: the mean over [0, last) and the plot never show it */
            ats_cli_error("trace synth", "--%s '%s': %s at %g s, at or after --duration %g s (the trace ends before it)",
                          atsc_resource_name(shapes[k].res), shapes[k].spec, what, t0, so.duration_s);
            return ATS_EXIT_USAGE;
        }
    }
    atsc_trace *tr = NULL;
    ats_err err = {{0}};
    if (atsc_trace_synth(&so, shapes, nsh, &tr, &err) != ATS_OK || atsc_trace_save(tr, out, &err) != ATS_OK) {
        fprintf(stderr, "ats trace synth: %s\n", err.msg);
        atsc_trace_free(tr);
        return ATS_EXIT_FAIL;
    }
    printf("wrote %s: %zu samples, %g s\n", out, tr->n, so.duration_s);
    atsc_trace_free(tr);
    return ATS_EXIT_OK;
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

/* the table of trace compare: one line per segment, compared or why not */
static void print_segments(const atsc_cmp_result *cr, double margin, double offset, double rec_len)
{
    printf("%-5s %9s %9s %8s %8s %8s\n", "res", "from [s]", "to [s]", "target", "recorded", "rel.err");
    for (size_t k = 0; k < cr->n; k++) {
        const atsc_cmp_segment *s = &cr->seg[k];
        const char *rn = atsc_resource_name(s->res);
        char tb[32], eb[32], why[160];
        if (s->skip == ATSC_CMP_COMPARED) {
            printf("%-5s %9.2f %9.2f %8s %8.4f %8s", rn, s->c0 + margin, s->c1 - margin,
                   fmt_target(s->target, tb, sizeof tb), s->recorded, fmt_err(s->rel_err, 1, eb, sizeof eb));
            if (s->c0 > s->s0 || s->c1 < s->s1) /* the segment reaches outside the recording: say which part */
                printf("  (segment %.2f..%.2f s; the recording covers %.2f..%.2f of it)", s->s0, s->s1, s->c0, s->c1);
            putchar('\n');
            continue;
        }
        if (s->skip == ATSC_CMP_OUTSIDE)
            snprintf(why, sizeof why, "outside the recording (target %.2f..%.2f s = recorded %.2f..%.2f s; "
                     "recorded length %.2f s)", s->s0, s->s1, s->s0 + offset, s->s1 + offset, rec_len);
        else if (s->skip == ATSC_CMP_PARTLY)
            snprintf(why, sizeof why, "partly outside the recording: %.3g s inside, not longer than 2*margin = %g s",
                     s->c1 - s->c0, 2 * margin);
        else
            snprintf(why, sizeof why, "%.3g s long, not longer than 2*margin = %g s", s->s1 - s->s0, 2 * margin);
        printf("%-5s %9.2f %9.2f %8s %8s %8s  not compared: %s\n", rn, s->s0, s->s1,
               fmt_target(s->target, tb, sizeof tb), "-", "-", why);
    }
}

static void print_summary(const atsc_cmp_result *cr)
{
    const int n_cmp = cr->n_cmp, n_cmp_l = cr->n_cmp_loaded;
    const double worst = cr->worst_loaded > cr->worst_idle ? cr->worst_loaded : cr->worst_idle;
    printf("compared %d segments; not compared: %d loaded segments (target < 1), %d unloaded\n", n_cmp,
           cr->n_skip_loaded, cr->n_skip_idle);
    if (!n_cmp) {
        printf("max |rel.err| = - (no segment compared)\n");
        return;
    }
    char b0[32], b1[32], b2[32];
    printf("max |rel.err| = %s (loaded segments: ", fmt_err(worst, 0, b0, sizeof b0));
    if (n_cmp_l) printf("%s over %d", fmt_err(cr->worst_loaded, 0, b1, sizeof b1), n_cmp_l);
    else printf("none compared");
    printf("; unloaded: ");
    if (n_cmp > n_cmp_l) printf("%s over %d)\n", fmt_err(cr->worst_idle, 0, b2, sizeof b2), n_cmp - n_cmp_l);
    else printf("none compared)\n");
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
    atsc_cmp_result cr;
    ats_err err = {{0}};
    if (atsc_trace_compare(rec, tgt, margin, offset, &cr, &err) != ATS_OK) {
        ats_cli_error("trace compare", "%s", err.msg);
        atsc_trace_free(rec);
        atsc_trace_free(tgt);
        return ATS_EXIT_FAIL;
    }
    print_segments(&cr, margin, offset, atsc_trace_duration(rec));
    const double worst_l = cr.worst_loaded, worst_u = cr.worst_idle, worst = worst_l > worst_u ? worst_l : worst_u;
    const int n_cmp = cr.n_cmp, n_cmp_l = cr.n_cmp_loaded, n_skip_loaded = cr.n_skip_loaded;
    print_summary(&cr);
    atsc_cmp_result_free(&cr);
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
