/*
 * ats sweep — the controller's threshold ε and minimum interval τ over a grid, for several traces
 * and policies; OpenMP over grid points (each point is an independent, seeded simulation, so the
 * table is bit-for-bit the same whatever --threads is). Writes one HDF5 table (/sweep) with --out
 * and prints the best (ε, τ) per trace and policy (lowest mean TPOT).
 *
 * Policies without a re-scheduling controller (ops->dynamic == 0: layer, expert, static, ...) never
 * re-plan, so ε and τ do not change their result: they get one simulated point per trace, shown as
 * "n/a" in the table, with empty eps/interval fields in the CSV and eps = interval = 0 in /sweep (the
 * table's writer takes finite values only), so a sweep over several policies keeps its baselines.
 *
 * A point that completes no request (as in `ats sim`) makes the exit code 1 with one stderr line per
 * trace and policy; it has no TPOT or TTFT (even when decode rounds ran): '-' in the table, empty
 * CSV fields and NaN in /sweep (HDF5 doubles have no null), and it is never the best point.
 */
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ats/policy.h"
#include "atsc/outfile.h"
#include "atsc/results.h"
#include "cli.h"
#include "sim_cli.h"

#define MAX_GRID 1024
#define MAX_TRACES 32
#define MAX_POL 16

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
            "                 [--threads N] [--format table|csv] [--out sweep.h5] [simulation flags]\n\n"
            "Simulates every (trace, policy, eps, interval) point and prints the best (eps, interval)\n"
            "per trace and policy by mean TPOT; --format csv prints every point. Policies without a\n"
            "re-scheduling controller (all but %s) ignore eps and the interval: one point per\n"
            "trace, eps/interval 'n/a' in the table, empty in the CSV, 0 in the HDF5 table.\n"
            "A point that completes no request makes the exit code 1 (one stderr line per trace and\n"
            "policy) and has no TPOT or TTFT: '-' in the table, an empty CSV field, NaN in /sweep; it is\n"
            "never the best point.\n\n"
            "  --eps A:B:S        threshold grid, fractions 0..10 (A alone: one point; A:B: the two points A and B;\n"
            "                     A:B:S: A, A+S, ... up to B)\n"
            "  --interval A:B:S   interval grid in multiples of the recent TPOT, or with 'ms' absolute\n"
            "                     (e.g. 50ms:800ms:50ms)\n"
            "  --trace T          a trace name or path; repeat or comma-separate for several\n"
            "  --policy P         policies [ats]\n"
            "  --threads N        OpenMP threads over grid points [all cores]\n"
            "  --format F         table (best points) or csv (every point) [table]\n"
            "  --out FILE         HDF5 file with the /sweep table\n"
            "%s"
            "example: ats sweep --eps 0.05:0.5:0.05 --interval 1:20:1 --trace fig13-synth --policy ats\n",
            controller_policies(ctl, sizeof ctl), sim_cli_help);
}

int ats_cmd_sweep(int argc, char **argv)
{
    enum { O_POLICY = 1, O_EPS, O_INTERVAL, O_THREADS, O_FORMAT, O_OUT, O_HELP };
    static const struct option opts[] = {
        {"policy", required_argument, 0, O_POLICY}, {"eps", required_argument, 0, O_EPS},
        {"interval", required_argument, 0, O_INTERVAL}, {"threads", required_argument, 0, O_THREADS},
        {"format", required_argument, 0, O_FORMAT}, {"out", required_argument, 0, O_OUT},
        {"help", no_argument, 0, O_HELP}, SIM_CLI_LONG_OPTIONS, {0, 0, 0, 0}};
    sim_cli o;
    sim_cli_init(&o);
    static double eps[MAX_GRID], itv[MAX_GRID];
    int n_eps = 0, n_itv = 0, itv_ms = 0, csv = 0;
    const char *out_path = NULL;
    char pbuf[512] = "ats", tbuf[4096] = "";
    long long threads = omp_get_num_procs();
    optind = 1;
    opterr = 0;
    int c, n_trace_flags = 0;
    ats_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        char why[160];
        if (c == SIMF_TRACE) { /* several traces: a list, may repeat */
            if (ats_cli_file_value("sweep", "--trace", optarg)) return ATS_EXIT_USAGE;
            if (strlen(tbuf) + strlen(optarg) + 2 >= sizeof tbuf) {
                ats_cli_error("sweep", "--trace: too many traces");
                return ATS_EXIT_USAGE;
            }
            if (n_trace_flags++) strcat(tbuf, ","); /* --trace '' stays an (empty) entry */
            strcat(tbuf, optarg);
            continue;
        }
        if (ats_cli_once_opt("sweep", &seen, opts, c, optarg)) return ATS_EXIT_USAGE; /* the last one won */
        int r = sim_cli_flag(&o, "sweep", c, optarg);
        if (r < 0) return ATS_EXIT_USAGE;
        if (r > 0) continue;
        switch (c) {
        case O_POLICY: snprintf(pbuf, sizeof pbuf, "%s", optarg); break;
        case O_EPS:
            n_eps = sim_cli_parse_range(optarg, eps, MAX_GRID, NULL, why, sizeof why);
            if (n_eps < 1 || eps[0] < 0 || eps[n_eps - 1] > 10.0) {
                ats_cli_error("sweep", "--eps: bad range '%.60s': %s", optarg,
                              n_eps < 1 ? why : "A:B:S with 0 <= A <= B <= 10, S > 0 (fractions)");
                return ATS_EXIT_USAGE;
            }
            break;
        case O_INTERVAL:
            n_itv = sim_cli_parse_range(optarg, itv, MAX_GRID, &itv_ms, why, sizeof why);
            if (n_itv < 1 || !(itv[0] > 0) || itv[n_itv - 1] > (itv_ms ? 1e7 : 1e6)) {
                ats_cli_error("sweep", "--interval: bad range '%.60s': %s", optarg,
                              n_itv < 1 ? why : "A:B:S with 0 < A <= B, S > 0 (B <= 1e6 x TPOT or 1e7 ms)");
                return ATS_EXIT_USAGE;
            }
            break;
        case O_THREADS:
            if (ats_cli_parse_int(optarg, &threads) || threads < 1 || threads > 1024) {
                ats_cli_error("sweep", "--threads: bad value '%s' (an integer 1..1024)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case O_FORMAT:
            if (strcmp(optarg, "csv") == 0) csv = 1;
            else if (strcmp(optarg, "table") == 0) csv = 0;
            else {
                ats_cli_error("sweep", "--format: '%s' (table or csv)", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        case O_OUT: out_path = optarg; break;
        case O_HELP:
        case 'h': usage(stdout); return ATS_EXIT_OK;
        case ':':
            ats_cli_error("sweep", "%s: missing value (see ats sweep --help)", argv[optind - 1]);
            return ATS_EXIT_USAGE;
        default:
            ats_cli_error("sweep", "unknown option '%s' (see ats sweep --help)", argv[optind - 1]);
            return ATS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ats_cli_error("sweep", "unexpected argument '%s'", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    if (out_path) { /* the traces are inputs: --out must not name one (refused before any work) */
        char names[sizeof tbuf], *sv = NULL;
        memcpy(names, tbuf, sizeof tbuf);
        for (char *t = strtok_r(names, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
            char path[1024];
            if (strcmp(t, "none") != 0) atsc_in_note(ats_cli_trace_path(t, path, sizeof path));
        }
    }
    if (ats_cli_check_out("sweep", "--out", out_path)) return ATS_EXIT_USAGE; /* before any work */
    if (n_eps == 0 || n_itv == 0 || !n_trace_flags) {
        ats_cli_error("sweep", "--eps, --interval and --trace are required (see ats sweep --help)");
        return ATS_EXIT_USAGE;
    }
    /* lists: no empty entry ("ats,", ",ats", "a,,b", --trace '') and no trace twice */
    const char *empty_in = ats_cli_list_has_empty(pbuf, ',') ? "--policy" : ats_cli_list_has_empty(tbuf, ',') ? "--trace" : NULL;
    if (empty_in) {
        ats_cli_error("sweep", "%s '%s': an empty entry (a comma too many, or an empty value)", empty_in,
                      empty_in[2] == 'p' ? pbuf : tbuf);
        return ATS_EXIT_USAGE;
    }
    {
        char names[sizeof tbuf], *sv = NULL, *seen[MAX_TRACES + 1];
        int n_seen = 0;
        memcpy(names, tbuf, sizeof tbuf);
        for (char *t = strtok_r(names, ",", &sv); t && n_seen <= MAX_TRACES; t = strtok_r(NULL, ",", &sv)) {
            for (int k = 0; k < n_seen; k++)
                if (strcmp(seen[k], t) == 0) {
                    ats_cli_error("sweep", "--trace '%s' given twice (entries %d and %d)", t, k + 1, n_seen + 1);
                    return ATS_EXIT_USAGE;
                }
            seen[n_seen++] = t;
        }
    }
    const char *pol[MAX_POL];
    int n_pol = 0, dyn[MAX_POL]; /* dyn: the policy has a re-scheduling controller (eps, tau apply) */
    char *save = NULL;
    char pol_list[sizeof pbuf], trace_list[sizeof tbuf]; /* untokenized copies for the metadata */
    memcpy(pol_list, pbuf, sizeof pbuf);
    memcpy(trace_list, tbuf, sizeof tbuf);
    for (char *t = strtok_r(pbuf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        const ats_policy_ops *ops;
        if (ats_policy_find(t, &ops) != ATS_OK) {
            ats_cli_error("sweep", "--policy: unknown policy '%.60s' (known: %s)", t, ats_policy_names());
            return ATS_EXIT_USAGE;
        }
        if (n_pol == MAX_POL) {
            ats_cli_error("sweep", "--policy: more than %d policies", MAX_POL);
            return ATS_EXIT_USAGE;
        }
        for (int k = 0; k < n_pol; k++)
            if (strcmp(pol[k], t) == 0) {
                ats_cli_error("sweep", "--policy: '%s' given twice (entries %d and %d)", t, k + 1, n_pol + 1);
                return ATS_EXIT_USAGE;
            }
        dyn[n_pol] = ops->dynamic;
        pol[n_pol++] = t;
    }
    if (n_pol == 0) {
        ats_cli_error("sweep", "--policy '%s': no policy given (known: %s)", pol_list, ats_policy_names());
        return ATS_EXIT_USAGE;
    }
    /* model and hardware through the shared loader; the traces here */
    o.trace = "none";
    int rc = sim_cli_load(&o, "sweep");
    if (rc) return rc;
    /* again now that the inputs are known: --out must not replace one (other traces: at open) */
    if ((rc = ats_cli_check_out("sweep", "--out", out_path))) {
        sim_cli_free(&o);
        return rc;
    }
    for (int i = 0; i < n_pol; i++) {
        char why[128];
        if (sim_cli_policy_applies(&o, pol[i], why, sizeof why)) {
            ats_cli_error("sweep", "--policy: '%s' is %s (%s)", pol[i], why, o.arch.name);
            sim_cli_free(&o);
            return ATS_EXIT_USAGE;
        }
    }
    atsc_trace *tr[MAX_TRACES] = {0};
    sim_trace st[MAX_TRACES];
    char tname[MAX_TRACES][ATSC_RESULTS_NAME_LEN];
    int n_tr = 0;
    ats_err err = {{0}};
    save = NULL;
    for (char *t = strtok_r(tbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n_tr == MAX_TRACES) {
            ats_cli_error("sweep", "--trace: more than %d traces", MAX_TRACES);
            rc = ATS_EXIT_USAGE;
            goto done;
        }
        char path[1024];
        if (strcmp(t, "none") == 0) {
            ats_cli_error("sweep", "--trace none: a sweep of eps and the interval needs a load trace (on an idle "
                          "machine the controller never re-plans); use ats sim for the idle machine");
            rc = ATS_EXIT_USAGE;
            goto done;
        }
        ats_cli_trace_path(t, path, sizeof path);
        if (atsc_trace_load(path, &tr[n_tr], &err) != ATS_OK) {
            ats_cli_error("sweep", "%s", err.msg);
            rc = ATS_EXIT_USAGE;
            goto done;
        }
        {
            double tr_len = atsc_trace_duration(tr[n_tr]);
            if (o.cfg.trace_offset_s > 0 && !(o.cfg.trace_offset_s < tr_len)) {
                ats_cli_error("sweep", "--trace-offset: %g s is at or past the end of trace %s (%g s long)",
                              o.cfg.trace_offset_s, path, tr_len);
                n_tr++;
                rc = ATS_EXIT_USAGE;
                goto done;
            }
            sim_session_cfg cb = o.cfg;
            if (!o.duration_given && !o.requests_given) cb.duration_s = tr_len - cb.trace_offset_s, cb.n_requests = 0;
            char why[160];
            double bound = sim_session_round_bound(&o.arch, &o.hw_desc, &cb, why, sizeof why);
            if (cb.max_rounds > 0 && !(bound <= (double)cb.max_rounds)) {
                ats_cli_error("sweep", "trace %s: the run may simulate up to %.3g rounds (%s), over the limit of "
                              "%lld (--max-rounds, --duration, --requests)", path, bound, why,
                              (long long)cb.max_rounds);
                n_tr++;
                rc = ATS_EXIT_USAGE;
                goto done;
            }
        }
        st[n_tr] = (sim_trace){(int32_t)tr[n_tr]->n, tr[n_tr]->t_s, tr[n_tr]->cpu_avail, tr[n_tr]->gpu_avail,
                               tr[n_tr]->pcie_avail};
        const char *b = strrchr(path, '/');
        snprintf(tname[n_tr], sizeof tname[n_tr], "%.63s", b ? b + 1 : path);
        char *dot = strrchr(tname[n_tr], '.');
        if (dot && strcmp(dot, ".h5") == 0) *dot = 0;
        n_tr++;
    }
    double resched[MAX_POL];
    for (int i = 0; i < n_pol; i++) resched[i] = sim_cli_resched_for(&o, pol[i], NULL);
    /* the points, trace-major then policy, eps, interval; one per trace for a policy without a
     * controller (it never re-plans, so eps and tau cannot change its result) */
    long n_pts = 0;
    for (int ip = 0; ip < n_pol; ip++) n_pts += dyn[ip] ? (long)n_eps * n_itv : 1;
    n_pts *= n_tr;
    struct point { int it, ip, ie, ii; } *pt = calloc((size_t)n_pts, sizeof *pt);
    atsc_sweep_row *rows = calloc((size_t)n_pts, sizeof *rows);
    enum ats_status *pst = calloc((size_t)n_pts, sizeof *pst);
    ats_err *perr = calloc((size_t)n_pts, sizeof *perr);
    struct done { int64_t req; double sim_s; size_t rounds; } *pdone = calloc((size_t)n_pts, sizeof *pdone);
    if (!pt || !rows || !pst || !perr || !pdone) {
        ats_cli_error("sweep", "out of memory");
        rc = ATS_EXIT_FAIL;
        goto done2;
    }
    {
        long k = 0;
        for (int it = 0; it < n_tr; it++)
            for (int ip = 0; ip < n_pol; ip++)
                for (int ie = 0; ie < (dyn[ip] ? n_eps : 1); ie++)
                    for (int ii = 0; ii < (dyn[ip] ? n_itv : 1); ii++) pt[k++] = (struct point){it, ip, ie, ii};
    }
    {
        char fixed[512] = "", ctl[256];
        for (int ip = 0; ip < n_pol; ip++)
            if (!dyn[ip]) {
                size_t l = strlen(fixed);
                snprintf(fixed + l, sizeof fixed - l, "%s%s", l ? ", " : "", pol[ip]);
            }
        if (*fixed)
            fprintf(stderr, "ats sweep: %s: no re-scheduling controller, so eps and the interval do not apply: one "
                    "point per trace, eps/interval n/a (policies with a controller: %s)\n", fixed,
                    controller_policies(ctl, sizeof ctl));
    }
    long n_done = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads((int)threads)
    for (long p = 0; p < n_pts; p++) {
        const int it = pt[p].it, ip = pt[p].ip, ie = pt[p].ie, ii = pt[p].ii;
        sim_session_cfg cfg = o.cfg;
        cfg.policy = pol[ip];
        cfg.resched_cost_s = resched[ip];
        if (dyn[ip]) { /* otherwise the defaults: the controller never fires (controller.h) */
            cfg.ctrl.eps = eps[ie];
            if (itv_ms) cfg.ctrl.tau_s = itv[ii] * 1e-3;
            else cfg.ctrl.tau_s = 0, cfg.ctrl.tau_tpot_mult = itv[ii];
        }
        if (!o.duration_given && !o.requests_given) {
            double d = atsc_trace_duration(tr[it]) - cfg.trace_offset_s;
            if (d > 0) cfg.duration_s = d, cfg.n_requests = 0;
        }
        sim_session_result r;
        pst[p] = sim_session_run(&o.arch, &o.hw_desc, &st[it], &cfg, &r, &perr[p]);
        atsc_sweep_row *w = &rows[p];
        snprintf(w->trace, sizeof w->trace, "%s", tname[it]);
        snprintf(w->policy, sizeof w->policy, "%s", pol[ip]);
        w->eps = dyn[ip] ? eps[ie] : 0.0; /* not applicable; /sweep takes finite values only */
        w->interval = dyn[ip] ? itv[ii] : 0.0;
        w->interval_in_tpot = !itv_ms;
        if (pst[p] == ATS_OK) {
            w->n_resched = (int32_t)r.n_resched;
            w->tpot_mean_s = r.tpot_mean_s;
            w->tpot_p50_s = r.tpot_p50_s;
            w->tpot_p99_s = r.tpot_p99_s;
            w->decode_tok_s = r.decode_tok_s;
            w->ttft_s = r.ttft_mean_s;
            pdone[p] = (struct done){r.n_requests_done, r.sim_s, r.n_rounds};
            sim_session_result_free(&r);
        } else {
            w->tpot_mean_s = w->tpot_p50_s = w->tpot_p99_s = w->decode_tok_s = w->ttft_s = NAN;
        }
        long d;
#pragma omp atomic capture
        d = ++n_done;
        if (omp_get_thread_num() == 0 || d == n_pts) sim_cli_progress("ats sweep", (double)d / (double)n_pts, 0);
    }
    sim_cli_progress("ats sweep", 1.0, 1);
    for (long p = 0; p < n_pts; p++)
        if (pst[p] != ATS_OK) {
            if (dyn[pt[p].ip])
                fprintf(stderr, "ats sweep: %s / %s / eps %g / interval %g: %s\n", rows[p].trace, rows[p].policy,
                        rows[p].eps, rows[p].interval, perr[p].msg);
            else
                fprintf(stderr, "ats sweep: %s / %s: %s\n", rows[p].trace, rows[p].policy, perr[p].msg);
            rc = pst[p] == ATS_EINVAL || pst[p] == ATS_EINFEASIBLE ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
        }
    const char *unit = itv_ms ? "ms" : "xTPOT";
    if (csv) {
        printf("trace,policy,eps,interval,interval_unit,reschedules,tpot_mean_ms,tpot_p50_ms,tpot_p99_ms,decode_tok_s,ttft_s\n");
        for (long p = 0; p < n_pts; p++) {
            char ev[64] = "", iv[64] = ""; /* empty: not applicable (no controller) */
            if (dyn[pt[p].ip]) {
                snprintf(ev, sizeof ev, "%.6g", rows[p].eps);
                snprintf(iv, sizeof iv, "%.6g", rows[p].interval);
            }
            char f[5][32]; /* empty: not measured (no decode round) */
            const double v[5] = {1e3 * rows[p].tpot_mean_s, 1e3 * rows[p].tpot_p50_s, 1e3 * rows[p].tpot_p99_s,
                                 rows[p].decode_tok_s, rows[p].ttft_s};
            for (int k = 0; k < 5; k++)
                if (isfinite(v[k])) snprintf(f[k], sizeof f[k], "%.6f", v[k]);
                else f[k][0] = 0;
            printf("%s,%s,%s,%s,%s,%d,%s,%s,%s,%s,%s\n", rows[p].trace, rows[p].policy, ev, iv,
                   dyn[pt[p].ip] ? unit : "", rows[p].n_resched, f[0], f[1], f[2], f[3], f[4]);
        }
    } else {
        printf("# %s (%s) on %s, %d x %d grid (eps x interval in %s), %ld points\n", o.arch.name,
               ats_recipe_name(o.cfg.recipe), o.hw_desc.name, n_eps, n_itv, unit, n_pts);
        printf("%-20s %-16s %8s %10s %10s %10s %8s\n", "trace", "policy", "best eps", "interval", "TPOT ms",
               "p99 ms", "resched");
    }
    /* best point per (trace, policy): lowest mean TPOT, ties to the earlier grid point; a point that
       completed no request has no TPOT (NaN, sim_session_result) and is never picked */
    for (int it = 0; it < n_tr; it++)
        for (int ip = 0; ip < n_pol; ip++) {
            long best = -1, first = -1;
            for (long p = 0; p < n_pts; p++) {
                if (first < 0 && pst[p] == ATS_OK && !strcmp(rows[p].trace, tname[it]) &&
                    !strcmp(rows[p].policy, pol[ip]))
                    first = p;
                if (strcmp(rows[p].trace, tname[it]) || strcmp(rows[p].policy, pol[ip]) || !isfinite(rows[p].tpot_mean_s))
                    continue;
                if (best < 0 || rows[p].tpot_mean_s < rows[best].tpot_mean_s) best = p;
            }
            if (best < 0) { /* no point completed a request (no TPOT): '-' (points that failed: their
                               stderr line) */
                if (first < 0) continue;
                if (csv)
                    fprintf(stderr, "%s %s: no point completed a request: no best point\n", tname[it], pol[ip]);
                else
                    printf("%-20s %-16s %8s %7s %-2s %10s %10s %8d\n", tname[it], pol[ip], dyn[ip] ? "-" : "n/a",
                           dyn[ip] ? "-" : "n/a", "", "-", "-", rows[first].n_resched);
                continue;
            }
            if (!dyn[ip]) {
                if (csv)
                    fprintf(stderr, "%s %s: no controller, eps/interval n/a (TPOT %.3f ms)\n", tname[it], pol[ip],
                            1e3 * rows[best].tpot_mean_s);
                else
                    printf("%-20s %-16s %8s %7s %-2s %10.3f %10.3f %8d\n", tname[it], pol[ip], "n/a", "n/a", "",
                           1e3 * rows[best].tpot_mean_s, 1e3 * rows[best].tpot_p99_s, rows[best].n_resched);
                continue;
            }
            if (csv)
                fprintf(stderr, "best %s %s: eps %.4g interval %.4g %s (TPOT %.3f ms)\n", tname[it], pol[ip],
                        rows[best].eps, rows[best].interval, unit, 1e3 * rows[best].tpot_mean_s);
            else
                printf("%-20s %-16s %8.4g %7.4g %-2s %10.3f %10.3f %8d\n", tname[it], pol[ip], rows[best].eps,
                       rows[best].interval, itv_ms ? "ms" : "x", 1e3 * rows[best].tpot_mean_s,
                       1e3 * rows[best].tpot_p99_s, rows[best].n_resched);
        }
    /* as ats sim: a point that completes no request is a failed run (exit 1); one line per trace
     * and policy */
    for (int it = 0; it < n_tr; it++)
        for (int ip = 0; ip < n_pol; ip++) {
            long n_none = 0, n_all = 0, first = -1;
            for (long p = 0; p < n_pts; p++) {
                if (pt[p].it != it || pt[p].ip != ip || pst[p] != ATS_OK) continue;
                n_all++;
                if (pdone[p].req == 0 && n_none++ == 0) first = p;
            }
            if (!n_none) continue;
            if (dyn[ip])
                ats_cli_error("sweep", "%s / %s: %ld of %ld points completed no request (first: eps %g, interval "
                              "%g %s: %.3g s simulated, %zu rounds; a longer --duration or trace?)", tname[it],
                              pol[ip], n_none, n_all, rows[first].eps, rows[first].interval, unit,
                              pdone[first].sim_s, pdone[first].rounds);
            else
                ats_cli_error("sweep", "%s / %s: no request completed in %.3g s simulated (%zu rounds; a longer "
                              "--duration or trace?)", tname[it], pol[ip], pdone[first].sim_s, pdone[first].rounds);
            if (rc == ATS_EXIT_OK) rc = ATS_EXIT_FAIL;
        }
    if (out_path) {
        char cfg_json[4096];
        sim_cli_config_json(&o, pol_list, cfg_json, sizeof cfg_json);
        atsc_results_meta meta = {"ats sweep", cfg_json, o.cfg.seed, o.arch.name, o.hw_desc.name, trace_list};
        atsc_results *w = NULL;
        enum ats_status s2 = atsc_results_open(out_path, &meta, &w, &err);
        if (s2 == ATS_OK) s2 = atsc_results_write_sweep(w, rows, (size_t)n_pts, &err);
        if (s2 == ATS_OK) s2 = atsc_results_close(w, &err);
        else atsc_results_abort(w);
        if (s2 != ATS_OK) {
            ats_cli_error("sweep", "%s", err.msg);
            rc = ATS_EXIT_FAIL;
        }
    }
done2:
    free(pt);
    free(rows);
    free(pst);
    free(perr);
    free(pdone);
done:
    for (int i = 0; i < n_tr; i++) atsc_trace_free(tr[i]);
    sim_cli_free(&o);
    return rc;
}
