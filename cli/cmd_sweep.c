/*
 * ats sweep — the controller's threshold ε and minimum interval τ over a grid, for several traces
 * and policies. Parsing, checks and printing live here; the sweep driver (sim/sweep.h) simulates the
 * points on OpenMP threads and, under `mpirun -n N` / `srun`, over MPI ranks (sim/par.h), and gathers
 * the rows in grid order on rank 0, so the table is bit for bit the same whatever the ranks and
 * threads. Rank 0 prints the table and writes one HDF5 table (/sweep) with --out; the other ranks print
 * nothing but their own failures.
 *
 * Policies without a re-scheduling controller (ops->dynamic == 0: layer, expert, static, ...) never
 * re-plan, so ε and τ do not change their result: they get one simulated point per trace, shown as
 * "n/a" in the table, with empty eps/interval fields in the CSV and eps = interval = 0 in /sweep (the
 * table's writer takes finite values only), so a sweep over several policies keeps its baselines.
 *
 * A point that completes no request (as in `ats sim`) makes the exit code 1 with one stderr line per
 * trace and policy; it has no TPOT or TTFT (even when decode rounds ran): '-' in the table, empty
 * CSV fields and NaN in /sweep (HDF5 doubles have no null), and it is never the best point.
 *
 * τ with a time unit (50ms:800ms:50ms, 1s:2s:1s) is stored in seconds in /sweep (interval_in_tpot 0)
 * and printed in seconds.
 */
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ats/policy.h"
#include "atsc/outfile.h"
#include "atsc/results.h"
#include "cli.h"
#include "sim/par.h"
#include "sim/sweep.h"
#include "sim_cli.h"

#define MAX_GRID 1024
#define MAX_TRACES 32
#define MAX_POL 16

/* everything one sweep needs, from the flags to the loaded traces */
typedef struct sweep_args {
    sim_cli o;
    double eps[MAX_GRID], itv[MAX_GRID];
    int n_eps, n_itv, itv_s, csv, n_trace_flags;
    int quiet; /* a rank other than 0: no usage on --help (rank 0 prints it) */
    long long threads;
    int threads_given;
    double checkpoint_s;
    const char *out_path, *resume_path;
    char pbuf[512], tbuf[4096];         /* --policy, --trace lists (tokenized in place) */
    char pol_list[512], trace_list[4096]; /* untokenized copies for the metadata */
    const char *pol[MAX_POL];
    int n_pol, dyn[MAX_POL];            /* dyn: the policy has a re-scheduling controller (eps, tau apply) */
    double resched[MAX_POL];
    atsc_trace *tr[MAX_TRACES];
    sim_trace st[MAX_TRACES];
    double tr_len[MAX_TRACES];
    char tname[MAX_TRACES][ATSC_RESULTS_NAME_LEN];
    const char *tname_p[MAX_TRACES];
    int n_tr;
    char cfg_json[8192];
} sweep_args;

/* The policies that re-schedule (ops->dynamic), comma-separated into buf, e.g. "ats-paper, ats". */
static const char *controller_policies(char *buf, size_t len)
{
    buf[0] = 0;
    char names[512];
    snprintf(names, sizeof names, "%s", ats_policy_names());
    char *save = NULL;
    for (char *t = strtok_r(names, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        const ats_policy_ops *ops;
        if (ats_policy_find(t, &ops) != ATS_OK || !ops->dynamic) continue;
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s", l ? ", " : "", t);
    }
    return buf;
}

static void usage(FILE *f)
{
    char ctl[256];
    fprintf(f,
            "usage: ats sweep --eps A:B:S --interval A:B:S --trace T [--trace T2 ...] [--policy P[,P...]]\n"
            "                 [--threads N] [--format table|csv] [--out sweep.h5] [--resume OLD.h5]\n"
            "                 [--checkpoint S] [simulation flags]\n"
            "       mpirun -n N ats sweep ...   (or srun --mpi=pmix): the points spread over N ranks\n\n"
            "Simulates every (trace, policy, eps, interval) point and prints the best (eps, interval)\n"
            "per trace and policy by mean TPOT; --format csv prints every point. Policies without a\n"
            "re-scheduling controller (all but %s) ignore eps and the interval: one point per\n"
            "trace, eps/interval 'n/a' in the table, empty in the CSV, 0 in the HDF5 table.\n"
            "A point that completes no request makes the exit code 1 (one stderr line per trace and\n"
            "policy) and has no TPOT or TTFT: '-' in the table, an empty CSV field, NaN in /sweep; it is\n"
            "never the best point. Under MPI (a build with -DATS_MPI) rank 0 hands out points one per idle\n"
            "thread, prints the table and writes --out: the same bytes as one process gives.\n\n"
            "  --eps A:B:S        threshold grid, fractions 0..10 (A alone: one point; A:B: the two points A and B;\n"
            "                     A:B:S: A, A+S, ... up to B)\n"
            "  --interval A:B:S   interval grid in multiples of the recent TPOT, or with a time unit on every\n"
            "                     field (s, ms, us; e.g. 50ms:800ms:50ms, 1s:2s:1s), stored in seconds\n"
            "  --trace T          a trace name or path; repeat or comma-separate for several\n"
            "  --policy P         policies [ats]\n"
            "  --threads N        OpenMP threads per process over grid points [all cores; under MPI the\n"
            "                     node's cores divided among its ranks]\n"
            "  --format F         table (best points) or csv (every point) [table]\n"
            "  --out FILE         HDF5 file with the /sweep table\n"
            "  --resume OLD       take the points already in OLD, a results file of ats sweep with the same\n"
            "                     simulation flags (refused otherwise, naming the field); may equal --out\n"
            "  --checkpoint S     with --out: rewrite it with the points done so far every S seconds, so a\n"
            "                     run stopped by a time limit can --resume [300; 0: only at the end]\n"
            "%s"
            "example: ats sweep --eps 0.05:0.5:0.05 --interval 1:20:1 --trace fig13-synth --policy ats\n",
            controller_policies(ctl, sizeof ctl), sim_cli_help);
}

enum { O_POLICY = 1, O_EPS, O_INTERVAL, O_THREADS, O_FORMAT, O_OUT, O_RESUME, O_CHECKPOINT, O_HELP };

/* one value flag of sweep's own (not the simulation flags); 0 ok, else the exit code */
static int own_flag(sweep_args *a, int c, const char *arg)
{
    char why[200];
    switch (c) {
    case O_POLICY: snprintf(a->pbuf, sizeof a->pbuf, "%s", arg); return 0;
    case O_EPS:
        a->n_eps = sim_cli_parse_range(arg, a->eps, MAX_GRID, NULL, why, sizeof why);
        if (a->n_eps < 1 || a->eps[0] < 0 || a->eps[a->n_eps - 1] > 10.0) {
            ats_cli_error("sweep", "--eps: bad range '%.60s': %s", arg,
                          a->n_eps < 1 ? why : "A:B:S with 0 <= A <= B <= 10, S > 0 (fractions)");
            return ATS_EXIT_USAGE;
        }
        return 0;
    case O_INTERVAL:
        a->n_itv = sim_cli_parse_range(arg, a->itv, MAX_GRID, &a->itv_s, why, sizeof why);
        if (a->n_itv < 1 || !(a->itv[0] > 0) || a->itv[a->n_itv - 1] > (a->itv_s ? 1e4 : 1e6)) {
            ats_cli_error("sweep", "--interval: bad range '%.60s': %s", arg,
                          a->n_itv < 1 ? why : "A:B:S with 0 < A <= B, S > 0 (B <= 1e6 x TPOT or 1e4 s)");
            return ATS_EXIT_USAGE;
        }
        return 0;
    case O_THREADS:
        if (ats_cli_parse_int(arg, &a->threads) || a->threads < 1 || a->threads > 1024) {
            ats_cli_error("sweep", "--threads: bad value '%s' (an integer 1..1024)", arg);
            return ATS_EXIT_USAGE;
        }
        a->threads_given = 1;
        return 0;
    case O_FORMAT:
        if (strcmp(arg, "csv") == 0) a->csv = 1;
        else if (strcmp(arg, "table") == 0) a->csv = 0;
        else {
            ats_cli_error("sweep", "--format: '%s' (table or csv)", arg);
            return ATS_EXIT_USAGE;
        }
        return 0;
    case O_OUT: a->out_path = arg; return 0;
    case O_RESUME:
        if (ats_cli_file_value("sweep", "--resume", arg)) return ATS_EXIT_USAGE;
        a->resume_path = arg;
        return 0;
    case O_CHECKPOINT:
        if (sim_cli_parse_time(arg, &a->checkpoint_s) || a->checkpoint_s > 1e7) {
            ats_cli_error("sweep", "--checkpoint: bad value '%s' (seconds >= 0, e.g. 600 or 600s; 0: only at the end)", arg);
            return ATS_EXIT_USAGE;
        }
        return 0;
    }
    return -1;
}

/* the getopt loop; 0, or the exit code (ATS_EXIT_OK for --help, -1 then) */
static int parse_flags(sweep_args *a, int argc, char **argv)
{
    static const struct option opts[] = {
        {"policy", required_argument, 0, O_POLICY}, {"eps", required_argument, 0, O_EPS},
        {"interval", required_argument, 0, O_INTERVAL}, {"threads", required_argument, 0, O_THREADS},
        {"format", required_argument, 0, O_FORMAT}, {"out", required_argument, 0, O_OUT},
        {"resume", required_argument, 0, O_RESUME}, {"checkpoint", required_argument, 0, O_CHECKPOINT},
        {"help", no_argument, 0, O_HELP}, SIM_CLI_LONG_OPTIONS, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == SIMF_TRACE) { /* several traces: a list, may repeat */
            if (ats_cli_file_value("sweep", "--trace", optarg)) return ATS_EXIT_USAGE;
            if (strlen(a->tbuf) + strlen(optarg) + 2 >= sizeof a->tbuf) {
                ats_cli_error("sweep", "--trace: too many traces");
                return ATS_EXIT_USAGE;
            }
            if (a->n_trace_flags++) strcat(a->tbuf, ","); /* --trace '' stays an (empty) entry */
            strcat(a->tbuf, optarg);
            continue;
        }
        if (ats_cli_once_opt("sweep", &seen, opts, c, optarg)) return ATS_EXIT_USAGE; /* the last one won */
        int r = sim_cli_flag(&a->o, "sweep", c, optarg);
        if (r < 0) return ATS_EXIT_USAGE;
        if (r > 0) continue;
        if (c == O_HELP || c == 'h') {
            if (!a->quiet) usage(stdout);
            return -1;
        }
        if (c == ':') {
            ats_cli_error("sweep", "%s: missing value (see ats sweep --help)", argv[optind - 1]);
            return ATS_EXIT_USAGE;
        }
        r = own_flag(a, c, optarg);
        if (r > 0) return r;
        if (r < 0) {
            ats_cli_error("sweep", "unknown option '%s' (see ats sweep --help)", argv[optind - 1]);
            return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error("sweep", "unexpected argument '%s'", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    return 0;
}

/* required flags, empty list entries, a trace or policy twice, unknown policies; 0 or the exit code */
static int check_lists(sweep_args *a)
{
    if (a->out_path) { /* the traces are inputs: --out must not name one (refused before any work) */
        char names[sizeof a->tbuf], *sv = NULL;
        memcpy(names, a->tbuf, sizeof a->tbuf);
        for (char *t = strtok_r(names, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
            char path[1024];
            if (strcmp(t, "none") != 0) atsc_in_note(ats_cli_trace_path(t, path, sizeof path));
        }
    }
    if (ats_cli_check_out("sweep", "--out", a->out_path)) return ATS_EXIT_USAGE; /* before any work */
    if (a->n_eps == 0 || a->n_itv == 0 || !a->n_trace_flags) {
        ats_cli_error("sweep", "--eps, --interval and --trace are required (see ats sweep --help)");
        return ATS_EXIT_USAGE;
    }
    /* lists: no empty entry ("ats,", ",ats", "a,,b", --trace '') and no trace twice */
    const char *empty_in = ats_cli_list_has_empty(a->pbuf, ',')   ? "--policy"
                           : ats_cli_list_has_empty(a->tbuf, ',') ? "--trace"
                                                                  : NULL;
    if (empty_in) {
        ats_cli_error("sweep", "%s '%s': an empty entry (a comma too many, or an empty value)", empty_in,
                      empty_in[2] == 'p' ? a->pbuf : a->tbuf);
        return ATS_EXIT_USAGE;
    }
    char names[sizeof a->tbuf], *sv = NULL, *seen[MAX_TRACES + 1];
    int n_seen = 0;
    memcpy(names, a->tbuf, sizeof a->tbuf);
    for (char *t = strtok_r(names, ",", &sv); t && n_seen <= MAX_TRACES; t = strtok_r(NULL, ",", &sv)) {
        for (int k = 0; k < n_seen; k++)
            if (strcmp(seen[k], t) == 0) {
                ats_cli_error("sweep", "--trace '%s' given twice (entries %d and %d)", t, k + 1, n_seen + 1);
                return ATS_EXIT_USAGE;
            }
        seen[n_seen++] = t;
    }
    memcpy(a->pol_list, a->pbuf, sizeof a->pbuf);
    memcpy(a->trace_list, a->tbuf, sizeof a->tbuf);
    char *save = NULL;
    for (char *t = strtok_r(a->pbuf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        const ats_policy_ops *ops;
        if (ats_policy_find(t, &ops) != ATS_OK) {
            ats_cli_error("sweep", "--policy: unknown policy '%.60s' (known: %s)", t, ats_policy_names());
            return ATS_EXIT_USAGE;
        }
        if (a->n_pol == MAX_POL) {
            ats_cli_error("sweep", "--policy: more than %d policies", MAX_POL);
            return ATS_EXIT_USAGE;
        }
        for (int k = 0; k < a->n_pol; k++)
            if (strcmp(a->pol[k], t) == 0) {
                ats_cli_error("sweep", "--policy: '%s' given twice (entries %d and %d)", t, k + 1, a->n_pol + 1);
                return ATS_EXIT_USAGE;
            }
        a->dyn[a->n_pol] = ops->dynamic;
        a->pol[a->n_pol++] = t;
    }
    if (a->n_pol == 0) {
        ats_cli_error("sweep", "--policy '%s': no policy given (known: %s)", a->pol_list, ats_policy_names());
        return ATS_EXIT_USAGE;
    }
    return 0;
}

/* one trace of the list: loaded, its offset and round bound checked; 0 or the exit code */
static int load_trace(sweep_args *a, const char *t)
{
    sim_cli *o = &a->o;
    char path[1024];
    ats_err err = {{0}};
    if (a->n_tr == MAX_TRACES) {
        ats_cli_error("sweep", "--trace: more than %d traces", MAX_TRACES);
        return ATS_EXIT_USAGE;
    }
    if (strcmp(t, "none") == 0) {
        ats_cli_error("sweep", "--trace none: a sweep of eps and the interval needs a load trace (on an idle "
                      "machine the controller never re-plans); use ats sim for the idle machine");
        return ATS_EXIT_USAGE;
    }
    ats_cli_trace_path(t, path, sizeof path);
    if (atsc_trace_load(path, &a->tr[a->n_tr], &err) != ATS_OK) {
        ats_cli_error("sweep", "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    atsc_trace *tr = a->tr[a->n_tr++];
    double tr_len = atsc_trace_duration(tr);
    if (o->cfg.trace_offset_s > 0 && !(o->cfg.trace_offset_s < tr_len)) {
        ats_cli_error("sweep", "--trace-offset: %g s is at or past the end of trace %s (%g s long)",
                      o->cfg.trace_offset_s, path, tr_len);
        return ATS_EXIT_USAGE;
    }
    sim_session_cfg cb = o->cfg;
    if (!o->duration_given && !o->requests_given) cb.duration_s = tr_len - cb.trace_offset_s, cb.n_requests = 0;
    char why[160];
    double bound = sim_session_round_bound(&o->arch, &o->hw_desc, &cb, why, sizeof why);
    if (cb.max_rounds > 0 && !(bound <= (double)cb.max_rounds)) {
        ats_cli_error("sweep", "trace %s: the run may simulate up to %.3g rounds (%s), over the limit of "
                      "%lld (--max-rounds, --duration, --requests)", path, bound, why, (long long)cb.max_rounds);
        return ATS_EXIT_USAGE;
    }
    int i = a->n_tr - 1;
    a->st[i] = (sim_trace){(int32_t)tr->n, tr->t_s, tr->cpu_avail, tr->gpu_avail, tr->pcie_avail};
    a->tr_len[i] = tr_len;
    const char *b = strrchr(path, '/');
    snprintf(a->tname[i], sizeof a->tname[i], "%.63s", b ? b + 1 : path);
    char *dot = strrchr(a->tname[i], '.');
    if (dot && strcmp(dot, ".h5") == 0) *dot = 0;
    a->tname_p[i] = a->tname[i];
    return 0;
}

/* model, hardware, policies' applicability, traces; the configuration JSON; 0 or the exit code */
static int load_inputs(sweep_args *a)
{
    sim_cli *o = &a->o;
    o->trace = "none"; /* model and hardware through the shared loader; the traces here */
    int rc = sim_cli_load(o, "sweep");
    if (rc) return rc;
    /* again now that the inputs are known: --out must not replace one (other traces: at open) */
    if ((rc = ats_cli_check_out("sweep", "--out", a->out_path))) return rc;
    for (int i = 0; i < a->n_pol; i++) {
        char why[128];
        if (sim_cli_policy_applies(o, a->pol[i], why, sizeof why)) {
            ats_cli_error("sweep", "--policy: '%s' is %s (%s)", a->pol[i], why, o->arch.name);
            return ATS_EXIT_USAGE;
        }
    }
    char *save = NULL;
    for (char *t = strtok_r(a->tbuf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if ((rc = load_trace(a, t))) return rc;
    for (int i = 0; i < a->n_pol; i++) a->resched[i] = sim_cli_resched_for(o, a->pol[i], NULL);
    sim_cli_config_json(o, a->pol_list, a->cfg_json, sizeof a->cfg_json);
    return 0;
}

/* FNV-1a of every trace's samples, "name:hex,..." (the ranks must replay the same traces) */
static void trace_digests(const sweep_args *a, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < a->n_tr && at < len; i++) {
        uint64_t h = 1469598103934665603ull;
        const double *col[4] = {a->tr[i]->t_s, a->tr[i]->cpu_avail, a->tr[i]->gpu_avail, a->tr[i]->pcie_avail};
        for (int c = 0; c < 4; c++) {
            const unsigned char *p = (const unsigned char *)col[c];
            for (size_t j = 0; j < a->tr[i]->n * sizeof(double); j++) h = (h ^ p[j]) * 1099511628211ull;
        }
        int w = snprintf(buf + at, len - at, "%s%s:%016llx", i ? "," : "", a->tname[i], (unsigned long long)h);
        at += w > 0 ? (size_t)w : 0;
    }
}

/* ---------------------------------------------------------------- output */

/* the /sweep table with the rows known so far (all of them at the end), through a temporary file */
static int write_results(const sweep_args *a, const sim_sweep_grid *g)
{
    atsc_sweep_row *rows = malloc((size_t)(g->n > 0 ? g->n : 1) * sizeof *rows);
    ats_err err = {{0}};
    if (!rows) {
        ats_cli_error("sweep", "%s: out of memory", a->out_path);
        return ATS_EXIT_FAIL;
    }
    size_t n = 0;
    for (long k = 0; k < g->n; k++)
        if (g->have[k]) rows[n++] = g->rows[k];
    atsc_results_meta meta = {"ats sweep", a->cfg_json, a->o.cfg.seed, a->o.arch.name, a->o.hw_desc.name,
                              a->trace_list};
    atsc_results *w = NULL;
    enum ats_status s = atsc_results_open(a->out_path, &meta, &w, &err);
    if (s == ATS_OK) s = atsc_results_write_sweep(w, rows, n, &err);
    if (s == ATS_OK) s = atsc_results_close(w, &err);
    else atsc_results_abort(w);
    free(rows);
    if (s != ATS_OK) {
        ats_cli_error("sweep", "%s", err.msg);
        return ATS_EXIT_FAIL;
    }
    return 0;
}

/* one line per failed point; the exit code they make (0 when none failed) */
static int report_failures(const sweep_args *a, const sim_sweep_grid *g)
{
    int rc = 0;
    for (long p = 0; p < g->n; p++)
        if (g->status[p] != ATS_OK) {
            if (a->dyn[g->pt[p][1]])
                fprintf(stderr, "ats sweep: %s / %s / eps %g / interval %g: %s\n", g->rows[p].trace,
                        g->rows[p].policy, g->rows[p].eps, g->rows[p].interval, g->err[p].msg);
            else
                fprintf(stderr, "ats sweep: %s / %s: %s\n", g->rows[p].trace, g->rows[p].policy, g->err[p].msg);
            rc = g->status[p] == ATS_EINVAL || g->status[p] == ATS_EINFEASIBLE ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
        }
    return rc;
}

static void print_csv(const sweep_args *a, const sim_sweep_grid *g)
{
    printf("trace,policy,eps,interval,interval_unit,reschedules,tpot_mean_ms,tpot_p50_ms,tpot_p99_ms,decode_tok_s,ttft_s\n");
    for (long p = 0; p < g->n; p++) {
        const atsc_sweep_row *r = &g->rows[p];
        const int dyn = a->dyn[g->pt[p][1]];
        char ev[64] = "", iv[64] = ""; /* empty: not applicable (no controller) */
        if (dyn) {
            snprintf(ev, sizeof ev, "%.6g", r->eps);
            snprintf(iv, sizeof iv, "%.6g", r->interval);
        }
        char f[5][32]; /* empty: not measured (no decode round) */
        const double v[5] = {1e3 * r->tpot_mean_s, 1e3 * r->tpot_p50_s, 1e3 * r->tpot_p99_s, r->decode_tok_s,
                             r->ttft_s};
        for (int k = 0; k < 5; k++)
            if (isfinite(v[k])) snprintf(f[k], sizeof f[k], "%.6f", v[k]);
            else f[k][0] = 0;
        printf("%s,%s,%s,%s,%s,%d,%s,%s,%s,%s,%s\n", r->trace, r->policy, ev, iv, dyn ? (a->itv_s ? "s" : "xTPOT") : "",
               r->n_resched, f[0], f[1], f[2], f[3], f[4]);
    }
}

/* the best point per (trace, policy): lowest mean TPOT, ties to the earlier grid point; a point that
   completed no request has no TPOT (NaN, sim_session_result) and is never picked */
static void print_best(const sweep_args *a, const sim_sweep_grid *g)
{
    const char *unit = a->itv_s ? "s" : "xTPOT";
    if (!a->csv) {
        printf("# %s (%s) on %s, %d x %d grid (eps x interval in %s), %ld points\n", a->o.arch.name,
               ats_cli_quant_name(a->o.cfg.recipe, a->o.cfg.tensor_types), a->o.hw_desc.name, a->n_eps, a->n_itv, unit, g->n);
        printf("%-20s %-16s %8s %10s %10s %10s %8s\n", "trace", "policy", "best eps", "interval", "TPOT ms", "p99 ms",
               "resched");
    }
    for (int it = 0; it < a->n_tr; it++)
        for (int ip = 0; ip < a->n_pol; ip++) {
            long best = -1, first = -1;
            for (long p = 0; p < g->n; p++) {
                if (g->pt[p][0] != it || g->pt[p][1] != ip) continue;
                if (first < 0 && g->status[p] == ATS_OK) first = p;
                if (isfinite(g->rows[p].tpot_mean_s) && (best < 0 || g->rows[p].tpot_mean_s < g->rows[best].tpot_mean_s))
                    best = p;
            }
            const char *tn = a->tname[it], *pn = a->pol[ip];
            if (best < 0) { /* no point completed a request (no TPOT): '-' (failed points: their stderr line) */
                if (first < 0) continue;
                if (a->csv) fprintf(stderr, "%s %s: no point completed a request: no best point\n", tn, pn);
                else
                    printf("%-20s %-16s %8s %7s %-2s %10s %10s %8d\n", tn, pn, a->dyn[ip] ? "-" : "n/a",
                           a->dyn[ip] ? "-" : "n/a", "", "-", "-", g->rows[first].n_resched);
                continue;
            }
            const atsc_sweep_row *b = &g->rows[best];
            if (!a->dyn[ip] && a->csv)
                fprintf(stderr, "%s %s: no controller, eps/interval n/a (TPOT %.3f ms)\n", tn, pn, 1e3 * b->tpot_mean_s);
            else if (!a->dyn[ip])
                printf("%-20s %-16s %8s %7s %-2s %10.3f %10.3f %8d\n", tn, pn, "n/a", "n/a", "", 1e3 * b->tpot_mean_s,
                       1e3 * b->tpot_p99_s, b->n_resched);
            else if (a->csv)
                fprintf(stderr, "best %s %s: eps %.4g interval %.4g %s (TPOT %.3f ms)\n", tn, pn, b->eps, b->interval,
                        unit, 1e3 * b->tpot_mean_s);
            else
                printf("%-20s %-16s %8.4g %7.4g %-2s %10.3f %10.3f %8d\n", tn, pn, b->eps, b->interval,
                       a->itv_s ? "s" : "x", 1e3 * b->tpot_mean_s, 1e3 * b->tpot_p99_s, b->n_resched);
        }
}

/* as ats sim: a point that completes no request is a failed run (exit 1); one line per trace and policy */
static int report_no_request(const sweep_args *a, const sim_sweep_grid *g)
{
    int rc = 0;
    for (int it = 0; it < a->n_tr; it++)
        for (int ip = 0; ip < a->n_pol; ip++) {
            long n_none = 0, n_all = 0, first = -1;
            for (long p = 0; p < g->n; p++) {
                if (g->pt[p][0] != it || g->pt[p][1] != ip || g->status[p] != ATS_OK) continue;
                n_all++;
                if (g->done[p].requests == 0 && n_none++ == 0) first = p;
            }
            if (!n_none) continue;
            if (a->dyn[ip])
                ats_cli_error("sweep", "%s / %s: %ld of %ld points completed no request (first: eps %g, interval "
                              "%g %s: %.3g s simulated, %lld rounds; a longer --duration or trace?)", a->tname[it],
                              a->pol[ip], n_none, n_all, g->rows[first].eps, g->rows[first].interval,
                              a->itv_s ? "s" : "xTPOT", g->done[first].sim_s, (long long)g->done[first].rounds);
            else
                ats_cli_error("sweep", "%s / %s: no request completed in %.3g s simulated (%lld rounds; a longer "
                              "--duration or trace?)", a->tname[it], a->pol[ip], g->done[first].sim_s,
                              (long long)g->done[first].rounds);
            rc = ATS_EXIT_FAIL;
        }
    return rc;
}

/* ---------------------------------------------------------------- the run */

/* progress on a terminal: "ats sweep: 120/480 points, 13.2 points/s, ETA 27 s" (none when stderr is not
 * one); rate and ETA count only the points simulated by this run, not those taken by --resume */
typedef struct progress_ctx {
    const sweep_args *a;
    double t0;
    long done0; /* points known when the run started */
    int tty, ended;
} progress_ctx;

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void on_progress(void *ctx, long done, long total)
{
    progress_ctx *c = ctx;
    if (!c->tty || c->ended) return;
    double dt = wall_s() - c->t0, rate = dt > 0 ? (double)(done - c->done0) / dt : 0;
    char eta[32] = "?";
    if (rate > 0) snprintf(eta, sizeof eta, "%.0f s", (double)(total - done) / rate);
    fprintf(stderr, "\rats sweep: %ld/%ld points, %.3g points/s, ETA %s   ", done, total, rate, eta);
    if (done == total) fputc('\n', stderr), c->ended = 1;
    fflush(stderr);
}

static int on_checkpoint(void *ctx, const sim_sweep_grid *g)
{
    progress_ctx *c = ctx;
    return write_results(c->a, g);
}

/* rank 0: on SIGINT/SIGTERM/SIGHUP (Ctrl-C, mpirun ending the job because a rank died, a time limit)
 * name the points in flight, then the handler that was there (common's: remove temporaries, die; for
 * SIGINT and SIGTERM also where the parent ignored them: ats_cli_take_stop_signals; an ignored SIGHUP,
 * nohup's, stays ignored) */
static const char *volatile in_flight_text;
static struct sigaction prev_action[3];
static const int stop_signals[3] = {SIGINT, SIGTERM, SIGHUP};

static void on_stop_signal(int sig)
{
    static const char head[] = "\nats sweep: stopped by a signal with ";
    const char *t = in_flight_text;
    if (t) {
        ssize_t w = write(STDERR_FILENO, head, sizeof head - 1);
        w = write(STDERR_FILENO, t, strlen(t));
        (void)w;
    }
    for (int i = 0; i < 3; i++)
        if (stop_signals[i] == sig) sigaction(sig, &prev_action[i], NULL);
    raise(sig);
}

static void catch_stop_signals(int on)
{
    for (int i = 0; i < 3; i++) {
        if (on) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_stop_signal;
            sigemptyset(&sa.sa_mask);
            sigaction(stop_signals[i], NULL, &prev_action[i]);
            if (prev_action[i].sa_handler != SIG_IGN) sigaction(stop_signals[i], &sa, NULL);
        } else {
            sigaction(stop_signals[i], &prev_action[i], NULL);
        }
    }
}

/* the points (--resume: those not in OLD) over the ranks, then rank 0's table, messages and file */
static int run_grid(sim_par *par, sweep_args *a)
{
    const int rank = sim_par_rank(par);
    sim_sweep_spec spec = {&a->o.arch, &a->o.hw_desc, &a->o.cfg, a->n_tr, a->st, a->tr_len, a->tname_p,
                           !a->o.duration_given && !a->o.requests_given, a->n_pol, a->pol, a->dyn, a->resched,
                           a->n_eps, a->n_itv, a->eps, a->itv, a->itv_s};
    sim_sweep_grid g;
    ats_err err = {{0}};
    if (sim_sweep_grid_init(&g, &spec, &err) != ATS_OK) {
        ats_cli_error("sweep", "%s", err.msg);
        return ATS_EXIT_FAIL;
    }
    int rc = 0;
    long taken = 0;
    if (rank == 0 && a->resume_path) { /* only rank 0 needs to know: it hands out the points */
        atsc_results_file *prev = NULL;
        if (atsc_results_read(a->resume_path, &prev, &err) != ATS_OK ||
            sim_sweep_resume_match(&g, prev, a->resume_path, a->cfg_json, &taken, &err) != ATS_OK) {
            ats_cli_error("sweep", "--resume: %s", err.msg);
            rc = ATS_EXIT_USAGE;
        }
        atsc_results_file_free(prev);
        if (!rc) fprintf(stderr, "ats sweep: --resume %s: %ld of %ld points taken from it\n", a->resume_path, taken, g.n);
    }
    char msg[ATS_ERR_LEN];
    snprintf(msg, sizeof msg, "%s", err.msg);
    if ((rc = sim_par_agree(par, rc, msg, NULL, NULL, 0))) { /* rank 0's refusal ends every rank */
        sim_sweep_grid_free(&g);
        return rc;
    }
    if (rank == 0) {
        char fixed[512] = "", ctl[256];
        for (int ip = 0; ip < a->n_pol; ip++)
            if (!a->dyn[ip]) snprintf(fixed + strlen(fixed), sizeof fixed - strlen(fixed), "%s%s", *fixed ? ", " : "", a->pol[ip]);
        if (*fixed)
            fprintf(stderr, "ats sweep: %s: no re-scheduling controller, so eps and the interval do not apply: one "
                    "point per trace, eps/interval n/a (policies with a controller: %s)\n", fixed,
                    controller_policies(ctl, sizeof ctl));
        if (sim_par_size(par) > 1)
            fprintf(stderr, "ats sweep: %d ranks x %lld threads, %ld points\n", sim_par_size(par), a->threads, g.n);
    }
    progress_ctx pc = {a, wall_s(), taken, rank == 0 && isatty(STDERR_FILENO), 0};
    sim_sweep_opts opt = {(int)a->threads, 60.0, on_progress, a->out_path ? on_checkpoint : NULL,
                          a->checkpoint_s, &pc, &in_flight_text};
    if (rank == 0) catch_stop_signals(1);
    enum ats_status s = sim_sweep_run(par, &g, &opt, &err);
    if (rank == 0) catch_stop_signals(0);
    if (s != ATS_OK) {
        if (pc.tty && !pc.ended) fputc('\n', stderr); /* after the progress line */
        ats_cli_error("sweep", "%s", err.msg);
        sim_sweep_grid_free(&g);
        sim_par_abort(par, ATS_EXIT_FAIL); /* the other ranks may be waiting for rank 0 */
        return ATS_EXIT_FAIL;
    }
    if (rank == 0) {
        rc = report_failures(a, &g);
        if (a->csv) print_csv(a, &g);
        print_best(a, &g);
        int r2 = report_no_request(a, &g);
        if (r2 && !rc) rc = r2;
        if (a->out_path && (r2 = write_results(a, &g))) rc = r2;
    }
    sim_sweep_grid_free(&g);
    return rc;
}

/* the default --threads: all cores, or under MPI the node's cores divided among its ranks (at most the
 * cores this rank may run on) */
static long long default_threads(const sim_par *par)
{
    long long cores = omp_get_num_procs();
    if (sim_par_size(par) > 1) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        long long share = online > 0 ? online / sim_par_local_size(par) : 1;
        if (share < cores) cores = share;
    }
    return cores < 1 ? 1 : cores;
}

/* every rank parses and loads the same inputs; the other ranks' messages go to a temporary file and
 * are printed by rank 0 only when rank 0 itself had none (a file missing on one node, another
 * ATS_BENCH_SCHED there): one line per failure, not one per rank */
static int setup(sim_par *par, sweep_args *a, int argc, char **argv)
{
    const int rank = sim_par_rank(par);
    FILE *cap = NULL;
    int saved = -1;
    a->quiet = rank > 0;
    if (rank > 0 && (cap = tmpfile()) != NULL) {
        fflush(stderr);
        saved = dup(STDERR_FILENO);
        dup2(fileno(cap), STDERR_FILENO);
    }
    int rc = parse_flags(a, argc, argv);
    if (rc < 0) rc = ATS_EXIT_OK + 100; /* --help: done, on every rank */
    if (!rc) rc = check_lists(a);
    if (!rc) rc = load_inputs(a);
    char msg[ATS_ERR_LEN] = "";
    if (cap) {
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        rewind(cap);
        int w = snprintf(msg, sizeof msg, "on rank %d (%s): ", rank, sim_par_host(par));
        size_t n = fread(msg + w, 1, sizeof msg - (size_t)w - 1, cap);
        msg[w + (int)n] = 0;
        fclose(cap);
    }
    /* the ranks must simulate the same thing: rank 0's configuration and traces are the reference */
    char ref[sizeof a->cfg_json], dig[2048], ref_dig[sizeof dig], why[400];
    if (!rc) {
        trace_digests(a, dig, sizeof dig);
        memcpy(ref, a->cfg_json, sizeof ref);
        memcpy(ref_dig, dig, sizeof dig);
    }
    int bad = 0, all = sim_par_agree(par, rc, msg, &bad, msg, sizeof msg);
    if (all && rank == 0 && !rc && bad > 0) fprintf(stderr, "ats sweep: %s", msg);
    if (all) return all == ATS_EXIT_OK + 100 ? -1 : all;
    sim_par_bcast_text(par, ref, sizeof ref);
    sim_par_bcast_text(par, ref_dig, sizeof ref_dig);
    rc = 0;
    if (rank > 0 && sim_sweep_config_diff(ref, a->cfg_json, NULL, why, sizeof why)) rc = ATS_EXIT_USAGE;
    else if (rank > 0 && strcmp(ref_dig, dig) != 0) rc = ATS_EXIT_USAGE, snprintf(why, sizeof why, "trace digests %.180s there, %.180s here", ref_dig, dig);
    snprintf(msg, sizeof msg, "rank %d (%s) would simulate something else than rank 0: configuration %s", rank,
             sim_par_host(par), rc ? why : "");
    if ((all = sim_par_agree(par, rc, msg, NULL, msg, sizeof msg)) && rank == 0) ats_cli_error("sweep", "%s", msg);
    if (!all && !a->threads_given) a->threads = default_threads(par);
    return all;
}

int ats_cmd_sweep(int argc, char **argv)
{
    sim_par *par = NULL;
    ats_err err = {{0}};
    if (sim_par_init(&argc, &argv, &par, &err) != ATS_OK) {
        ats_cli_error("sweep", "%s", err.msg);
        return ATS_EXIT_USAGE;
    }
    sweep_args *a = calloc(1, sizeof *a);
    if (!a) {
        ats_cli_error("sweep", "out of memory");
        sim_par_finalize(par);
        return ATS_EXIT_FAIL;
    }
    sim_cli_init(&a->o);
    snprintf(a->pbuf, sizeof a->pbuf, "ats");
    a->threads = omp_get_num_procs();
    a->checkpoint_s = 300;
    ats_cli_take_stop_signals(); /* `ats sweep ... &` in a script: kill -INT stops it, no half file left */
    int rc = setup(par, a, argc, argv);
    if (rc < 0) rc = ATS_EXIT_OK; /* --help */
    else if (rc == 0) rc = run_grid(par, a);
    for (int i = 0; i < a->n_tr; i++) atsc_trace_free(a->tr[i]);
    sim_cli_free(&a->o);
    free(a);
    fflush(stdout);
    sim_par_finalize(par);
    return rc;
}
