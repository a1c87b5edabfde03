/*
 * cli/cmd_stress.c — `ats stress`: generate real background load on CPU, GPU and PCIe that follows a
 * load trace (exec/load_stress.c), or calibrate the hogs against the probes. SIGINT/SIGTERM stop all
 * hog threads and processes before exiting.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atsc/outfile.h"
#include "atsc/text.h"
#include "atsc/trace_io.h"
#include "cli.h"
#include "ld/load.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats stress --trace T --baseline FILE [--baseline-s S] [--interval S] [--probes N] [--gain KI]\n"
            "                  [--log FILE.csv] [--report-margin S] [common options]          (closed loop)\n"
            "       ats stress --trace T [common options]                                   (open loop)\n"
            "       ats stress --calibrate FILE [--settle S] [--measure S] [--cpu-only] [common options]\n"
            "--cpu-only: calibrate, or follow a trace's CPU column, only (its GPU and PCIe columns read as 1;\n"
            "            e.g. a recorded h200-* trace on a machine without a GPU)\n"
            "common options: [--duration S] [--delay S] [--calibration FILE] [--threads N] [--period S]\n"
            "                [--hogs-cpu K] [--hogs-gpu K] [--hogs-pcie K] [--device N] [--slice-us US]\n"
            "                [--stagger LIST] [--pin] [--pin-hogs] [--cpu-only] [--verbose]\n"
            "--threads N: the probe threads the CPU hogs are sized for (K hogs per thread; default: the CPUs\n"
            "             it may use, in the closed loop the baseline's); --device N: the CUDA device of the GPU/PCIe\n"
            "             hogs\n"
            "Runs hogs whose duty cycles make a victim's availability follow trace T (a name in traces/ or a\n"
            "file): K spinning threads per probe thread, K GPU processes launching busy kernels, K processes\n"
            "copying host-to-device; all hogs of a resource are busy for d*P of every period P (--period,\n"
            "default 0.02 s) at a random offset, and sleep (no CPU, no wake-ups) while d = 0. --stagger LIST\n"
            "(cpu, gpu, pcie comma-separated, or none; default cpu,gpu,pcie): those resources' hogs are staggered,\n"
            "hog i's window starts i/K of a period later, so about d*K of them are busy at any moment (all K\n"
            "at once held a probe behind all K: samples read 0.1 or 1.0 and the recorder's mean wandered).\n"
            "Closed loop (--baseline FILE, the idle baseline of `ats record --save-baseline`): every --interval\n"
            "(default 0.5 s) the stressor runs --probes (default 5) sets of the very probes of `ats record` at\n"
            "random moments, only for resources under load (in a child process of their own, as a recorder's:\n"
            "probes inside the hogs' process read ~10%% more load), and an integral controller (gain --gain,\n"
            "default 0.8 /s) trims each resource's duty toward the target of that moment: feed-forward from\n"
            "the model d = (1/a - 1)/K for staggered hogs, d = (1 - a)(K+1)/K for hogs together (or\n"
            "--calibration); the duty clipped to 0..1 (the integral at most 0.25 beyond: bounded windup).\n"
            "Steps: only a target change > 0.05 whose new value holds >= 1 s is a step (feed-forward jump,\n"
            "integral reset, new report segment); smaller or briefer changes (a\n"
            "recorded trace's 0.1 s wiggles) move the feed-forward, keep the integral and merge into one\n"
            "report segment (its target the mean). A resource whose target is 1 is not controlled and its\n"
            "hogs are off (a brief 1.0 inside a loaded stretch only pauses them). K defaults to enough\n"
            "hogs for 2.5 times less availability than the trace's lowest (at most 16). The probes may keep\n"
            "at most 20 %% of an interval busy (baseline times x --probes). Probes of all ats processes take\n"
            "one lock (/tmp/ats-probes.lock), so the stressor's and a recorder's probes never overlap. At the\n"
            "end it prints, per target segment without its first --report-margin seconds (default 5), what its\n"
            "own probes saw (a target at the clip floor 0.01, where probes cannot read lower, is noted so; one\n"
            "below what the hogs reach too; segments past the first 96 are counted); --log writes every\n"
            "control step as CSV. --probes 5 is the default since H200 fig13 runs with a recorder beside the\n"
            "stressor kept every loaded phase within 10 %% in 3 of 3 runs with 5 or 6 probe sets and in 1 of 4\n"
            "with 3 (experiments/stress-accuracy/README.md).\n"
            "Open loop (no --baseline): duties from the model (or --calibration) only; K defaults to the\n"
            "fewest hogs that reach the trace's lowest value (at most 64; a lower target is noted).\n"
            "--duration 0 (the default): the whole trace. --calibrate measures the probe availability (as\n"
            "`ats record` sees it) at model levels 1 .. 1/(K+1) (default K = 3), holding each --settle s, then\n"
            "measuring --measure s (both --calibrate only), and writes FILE; --calibration FILE then maps\n"
            "targets through it. Without a GPU the CPU is stressed alone; a trace with GPU or PCIe load is\n"
            "refused (exit 2). SIGINT/SIGTERM/SIGHUP stop every hog, write the report and --log, and the\n"
            "exit status is that of the signal (130, 143, 129).\n");
    fputs(ats_cli_slice_help, f);
    fputs(ats_cli_pin_help, f);
    fputs("--pin-hogs: CPU hog i runs only on CPU i mod n of the n CPUs it may use (each CPU carries the same\n"
          "staggered hogs). H200 fig13: the recorder's GPU and PCIe probes then read 0.76 / 0.78 while only the\n"
          "CPU was loaded (their launching thread finds no CPU free of hogs); hogs unpinned 0.94-0.99, or\n"
          "0.87 / 0.93 with the probe threads pinned. --pin pins the probes of the closed loop and of\n"
          "--calibrate, --pin-hogs the hogs of every mode.\n", f);
    fputs(ats_cli_matrix_help, f);
    fputs(ats_cli_rebase_help, f);
}

/* --log: control steps kept in memory, written at the end through a temporary. */
typedef struct step_log {
    ld_stress_step *s;
    size_t n, cap;
    int oom;
} step_log;

static void log_step(void *ctx, const ld_stress_step *s)
{
    step_log *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        ld_stress_step *n = realloc(l->s, cap * sizeof *n);
        if (!n) {
            l->oom = 1;
            return;
        }
        l->s = n;
        l->cap = cap;
    }
    l->s[l->n++] = *s;
}

static int write_log(FILE *f, const void *ctx)
{
    const step_log *l = ctx;
    int bad = fprintf(f, "t_s,resource,target,measured,u,duty,saturated,probes\n") < 0;
    for (size_t i = 0; i < l->n && !bad; i++) {
        const ld_stress_step *s = &l->s[i];
        bad |= fprintf(f, "%.3f,%s,%.4f,%.4f,%.4f,%.4f,%d,%d\n", s->t_s, atsc_resource_name(s->res), s->target,
                       s->measured, s->u, s->duty, s->saturated, s->probes) < 0;
    }
    return bad ? -1 : 0;
}

/* --stagger LIST: "none" or a comma list of cpu, gpu, pcie (each once) -> bit mask 1 << resource. */
static int parse_stagger(const char *arg, unsigned *mask)
{
    unsigned m = 0;
    if (strcmp(arg, "none") == 0) {
        *mask = 0;
        return 0;
    }
    const char *p = arg;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int r = n == 3 && strncmp(p, "cpu", 3) == 0   ? ATSC_RES_CPU
                : n == 3 && strncmp(p, "gpu", 3) == 0 ? ATSC_RES_GPU
                : n == 4 && strncmp(p, "pcie", 4) == 0 ? ATSC_RES_PCIE
                                                       : -1;
        if (r < 0 || (m & (1u << r))) {
            ats_cli_error("stress", "--stagger '%s': need none or a list of cpu, gpu, pcie (each once), e.g. cpu,gpu",
                          arg);
            return -1;
        }
        m |= 1u << r;
        if (!e) break;
        p = e + 1;
    }
    *mask = m;
    return 0;
}

/* what the flags of ats stress ask for */
typedef struct stress_args {
    ld_stress_opts so;
    const char *trace, *calib_in, *calib_out, *base_in, *log_out;
    int closed_flags; /* closed-loop options given */
    int calib_flags;  /* --settle / --measure given (--calibrate only) */
    double settle, measure;
    int cpu_only, slice_given;
} stress_args;

/* the flags into a: ATS_EXIT_OK, ATS_EXIT_USAGE after one line, or -1 after --help. One getopt loop
   over all 27 options of `ats stress` (a case per option or group; ~105 lines) */
static int parse_args(int argc, char **argv, stress_args *a)
{
    static const struct option lo[] = {
        {"trace", required_argument, 0, 'T'},       {"duration", required_argument, 0, 'd'},
        {"delay", required_argument, 0, 'w'},       {"calibration", required_argument, 0, 'c'},
        {"calibrate", required_argument, 0, 'C'},   {"threads", required_argument, 0, 't'},
        {"period", required_argument, 0, 'P'},      {"hogs-cpu", required_argument, 0, '0'},
        {"hogs-gpu", required_argument, 0, '1'},    {"hogs-pcie", required_argument, 0, '2'},
        {"device", required_argument, 0, 'D'},      {"settle", required_argument, 0, 's'},
        {"measure", required_argument, 0, 'm'},     {"cpu-only", no_argument, 0, 'o'},
        {"verbose", no_argument, 0, 'v'},           {"help", no_argument, 0, 'h'},
        {"baseline", required_argument, 0, 'b'},    {"interval", required_argument, 0, 'i'},
        {"probes", required_argument, 0, 'n'},      {"gain", required_argument, 0, 'g'},
        {"log", required_argument, 0, 'L'},         {"report-margin", required_argument, 0, 'R'},
        {"slice-us", required_argument, 0, 'u'},    {"stagger", required_argument, 0, 'G'},
        {"pin", no_argument, 0, 'N'},               {"pin-hogs", no_argument, 0, 'H'},
        {"baseline-s", required_argument, 0, 'B'},  {0, 0, 0, 0}};
    int c, li = 0;
    long long v;
    optind = 1;
    opterr = 0; /* one line of our own per bad option, not getopt's plus the usage */
    const char *seen[256] = {0};
    while ((c = getopt_long(argc, argv, ":h", lo, &li)) != -1) {
        if (c != ':' && c != '?' && c != 'h' && optarg && ats_cli_once("stress", seen, c, lo[li].name, optarg))
            return ATS_EXIT_USAGE;
        if (c == 'T' || c == 'c' || c == 'C' || c == 'b' || c == 'L') { /* file names (cli.h) */
            char flag[64];
            snprintf(flag, sizeof flag, "--%s", lo[li].name);
            if (ats_cli_file_value("stress", flag, optarg)) return ATS_EXIT_USAGE;
        }
        switch (c) {
        case 'T': a->trace = optarg; break;
        case 'c': a->calib_in = optarg; break;
        case 'C': a->calib_out = optarg; break;
        case 'o': a->cpu_only = 1; break;
        case 'v': a->so.verbose = 1; break;
        case 'N': a->so.pin = 1; break;
        case 'H': a->so.pin_hogs = 1; break;
        case 'b': a->base_in = optarg; break;
        case 'L': a->log_out = optarg; a->closed_flags = 1; break;
        case 'u':
            if (ats_cli_parse_slice_us("stress", optarg, &a->so.hog_slice_ns)) return ATS_EXIT_USAGE;
            a->slice_given = 1;
            break;
        case 'G':
            if (parse_stagger(optarg, &a->so.stagger)) return ATS_EXIT_USAGE;
            break;
        case 'd': case 'w': case 'P': case 's': case 'm': case 'i': case 'g': case 'R': {
            double *dst = c == 'd' ? &a->so.duration_s : c == 'w' ? &a->so.delay_s : c == 'P' ? &a->so.period_s
                        : c == 's' ? &a->settle : c == 'm' ? &a->measure : c == 'i' ? &a->so.interval_s
                        : c == 'g' ? &a->so.ki_per_s : &a->so.settle_s;
            const char *name = c == 'd' ? "duration" : c == 'w' ? "delay" : c == 'P' ? "period" : c == 's' ? "settle"
                             : c == 'm' ? "measure" : c == 'i' ? "interval" : c == 'g' ? "gain" : "report-margin";
            if (c == 'i' || c == 'g' || c == 'R') a->closed_flags = 1;
            if (c == 's' || c == 'm') a->calib_flags = 1;
            if (ats_cli_parse_double(optarg, dst) || *dst < 0 || (c == 'P' && !(*dst >= 1e-3 && *dst <= 10)) ||
                (c == 'i' && !(*dst >= 0.05 && *dst <= 60)) || (c == 'g' && !(*dst > 0 && *dst <= 100)) ||
                (c != 'g' && *dst > 1e7)) {
                ats_cli_error("stress", "--%s '%s': %s", name, optarg,
                              c == 'P' ? "need a period of 0.001 .. 10 s" : c == 'i' ? "need 0.05 .. 60 s"
                              : c == 'g' ? "need a gain in (0, 100] per s" : "need a number of seconds 0 .. 1e7");
                return ATS_EXIT_USAGE;
            }
            break;
        }
        case 'B':
            if (ats_cli_parse_double(optarg, &a->so.rebaseline_s) || !(a->so.rebaseline_s >= 0.3 && a->so.rebaseline_s <= 600)) {
                ats_cli_error("stress", "--baseline-s '%s': need 0.3 .. 600 s of idle probes", optarg);
                return ATS_EXIT_USAGE;
            }
            a->closed_flags = 1;
            break;
        case 'n':
            if (ats_cli_parse_int(optarg, &v) || v < 1 || v > 100) {
                ats_cli_error("stress", "--probes '%s': need 1 .. 100 probe sets per interval", optarg);
                return ATS_EXIT_USAGE;
            }
            a->so.probes = (int)v;
            a->closed_flags = 1;
            break;
        case 't': case 'D': case '0': case '1': case '2': {
            const char *name = c == 't' ? "threads" : c == 'D' ? "device" : c == '0' ? "hogs-cpu"
                             : c == '1' ? "hogs-gpu" : "hogs-pcie";
            int lo_v = c == 'D' ? 0 : 1, hi_v = c == 't' || c == 'D' ? 64 : LD_STRESS_K_MAX;
            if (ats_cli_parse_int(optarg, &v) || v < lo_v || v > hi_v) {
                ats_cli_error("stress", "--%s '%s': need an integer %d .. %d", name, optarg, lo_v, hi_v);
                return ATS_EXIT_USAGE;
            }
            if (c == 't') a->so.threads = (int)v;
            else if (c == 'D') a->so.device = (int)v;
            else a->so.k[c - '0'] = (int)v;
            break;
        }
        case 'h': usage(stdout); return -1;
        case ':':
            ats_cli_missing_value("stress", argv[optind - 1], optopt);
            return ATS_EXIT_USAGE;
        default:
            ats_cli_bad_option("stress", argv[optind - 1], optopt, lo);
            return ATS_EXIT_USAGE;
        }
    }
    return ATS_EXIT_OK;
}

/* flags that do not go together, or not without another: one line and ATS_EXIT_USAGE */
static int check_args(int argc, char **argv, const stress_args *a)
{
    if (optind != argc) {
        ats_cli_error("stress", "unexpected argument '%s' (ats stress --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    if (!a->trace == !a->calib_out) {
        ats_cli_error("stress", "give exactly one of --trace T, --calibrate FILE (ats stress --help)");
        return ATS_EXIT_USAGE;
    }
    if (a->closed_flags && a->calib_out) {
        ats_cli_error("stress", "--interval, --probes, --gain, --log, --report-margin and --baseline-s belong to the "
                                "closed loop (--trace T --baseline FILE), not to --calibrate");
        return ATS_EXIT_USAGE;
    }
    if (a->closed_flags && !a->base_in) {
        ats_cli_error("stress", "--interval, --probes, --gain, --log, --report-margin and --baseline-s belong to the "
                                "closed loop: "
                                "give --baseline FILE");
        return ATS_EXIT_USAGE;
    }
    if (a->base_in && a->calib_out) {
        ats_cli_error("stress", "--baseline is for following a trace (closed loop), not for --calibrate");
        return ATS_EXIT_USAGE;
    }
    if (a->calib_flags && !a->calib_out) {
        ats_cli_error("stress", "--settle and --measure belong to --calibrate; they do not combine with --trace");
        return ATS_EXIT_USAGE;
    }
    if (a->so.ki_per_s * a->so.interval_s >= 2.0) {
        ats_cli_error("stress", "--gain %g x --interval %g = %g: the loop is unstable from 2 on (keep it below 1)",
                      a->so.ki_per_s, a->so.interval_s, a->so.ki_per_s * a->so.interval_s);
        return ATS_EXIT_USAGE;
    }
    return ATS_EXIT_OK;
}

/* --calibrate FILE: the hog model measured and saved; the table printed. The exit code. */
static int run_calibrate(stress_args *a)
{
    ats_err err = {{0}};
    enum ats_status st;
    for (int r = 0; r < ATSC_RES_COUNT; r++)
        if (a->so.k[r] == 0) a->so.k[r] = 3;
    ld_probe_opts po = ld_probe_opts_default();
    po.slice_ns = a->so.hog_slice_ns; /* calibration probes as the stressor's and the recorder's */
    po.pin = a->so.pin;
    po.threads = a->so.threads;
    po.device = a->so.device;
    po.stop = &ats_cli_stop;
    if (a->cpu_only || !ld_gpu_present(a->so.device)) {
        if (!a->cpu_only) fprintf(stderr, "ats stress: no CUDA device: calibrating the CPU hogs only\n");
        a->so.k[ATSC_RES_GPU] = a->so.k[ATSC_RES_PCIE] = 0;
        po.use_gpu = 0;
    }
    if (!(a->measure > 0)) a->measure = 2.0;
    ld_stress_calib cal;
    st = ld_stress_calibrate(&a->so, &po, a->settle, a->measure, &cal, &err);
    if (st == ATS_OK) st = ld_stress_calib_save(&cal, a->calib_out, &err);
    if (st != ATS_OK) {
        fprintf(stderr, "ats stress: %s\n", err.msg);
        return ats_cli_exit_after_signal(st == ATS_ENOTFOUND ? ATS_EXIT_USAGE : ATS_EXIT_FAIL);
    }
    printf("%-5s %4s %8s %8s\n", "res", "hogs", "model", "measured");
    for (int r = 0; r < ATSC_RES_COUNT; r++)
        for (int i = 0; i < cal.n[r]; i++)
            printf("%-5s %4d %8.3f %8.3f\n", atsc_resource_name((enum atsc_resource)r), cal.k[r], cal.model[r][i],
                   cal.measured[r][i]);
    printf("wrote %s\n", a->calib_out);
    return ats_cli_exit_after_signal(ATS_EXIT_OK);
}

/* the trace at path, --cpu-only applied, a note for hogs asked where the trace puts no load; *out new,
   or the exit code after one line */
static int load_trace(const stress_args *a, const char *path, atsc_trace **out)
{
    ats_err err = {{0}};
    enum ats_status st;
    atsc_trace *tr = NULL;
    st = atsc_trace_load(path, &tr, &err);
    if (st != ATS_OK) {
        fprintf(stderr, "ats stress: %s\n", err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    if (a->cpu_only) { /* follow the trace's CPU column only: e.g. a recorded trace on a machine without a GPU */
        size_t n_gp = 0;
        for (size_t i = 0; i < tr->n; i++) {
            n_gp += tr->gpu_avail[i] < 1.0 || tr->pcie_avail[i] < 1.0;
            tr->gpu_avail[i] = tr->pcie_avail[i] = 1.0;
        }
        if (n_gp) fprintf(stderr, "ats stress: --cpu-only: the trace's GPU and PCIe columns ignored (%zu of %zu samples "
                                  "had load there)\n", n_gp, tr->n);
    }
    for (int r = ATSC_RES_GPU; r <= ATSC_RES_PCIE; r++) { /* hogs asked for a resource the trace never loads */
        const double *av = atsc_trace_res(tr, (enum atsc_resource)r);
        int loaded = 0;
        for (size_t i = 0; i < tr->n && !loaded; i++) loaded = av[i] < 1.0;
        if (a->so.k[r] > 0 && !loaded)
            fprintf(stderr, "ats stress: --hogs-%s %d: the trace puts no %s load%s; no %s hogs run\n",
                    atsc_resource_name((enum atsc_resource)r), a->so.k[r], atsc_resource_name((enum atsc_resource)r),
                    a->cpu_only ? " (--cpu-only)" : "", atsc_resource_name((enum atsc_resource)r));
    }
    *out = tr;
    return ATS_EXIT_OK;
}

/* targets below what the hogs reach (the automatic count is capped): the note said before and after the
   run, into short_note (len bytes; "" when every target is reached) */
static void shortfall_note(const atsc_trace *tr, const stress_args *a, char *short_note, size_t len)
{
    int kplan[ATSC_RES_COUNT];
    double amin[ATSC_RES_COUNT];
    unsigned short_of = ld_stress_plan_hogs(tr, &a->so, a->base_in != NULL, kplan, amin);
    short_note[0] = '\0';
    for (int r = 0; r < ATSC_RES_COUNT; r++) {
        if (!(short_of & (1u << r))) continue;
        const char *rn = atsc_resource_name((enum atsc_resource)r);
        char hint[64];
        if (kplan[r] >= LD_STRESS_K_MAX) snprintf(hint, sizeof hint, "%d is the most --hogs-%s allows", kplan[r], rn);
        else snprintf(hint, sizeof hint, "--hogs-%s up to %d", rn, LD_STRESS_K_MAX);
        size_t l = strlen(short_note);
        snprintf(short_note + l, len - l,
                 "%s%s: the trace's lowest target %.3g is below what %d hogs%s reach by the model (1/%d = %.3g); %s",
                 l ? "; " : "", rn, amin[r], kplan[r], r == ATSC_RES_CPU ? " per thread" : "", kplan[r] + 1,
                 1.0 / (kplan[r] + 1), hint);
    }
}

/* the closed loop: the report, the --log file, the last line. The exit code. */
static int run_closed(stress_args *a, atsc_trace *tr, const ld_baseline *base, const char *short_note)
{
    ats_err err = {{0}};
    enum ats_status st;
    int rc;
    step_log log = {0};
    if (a->log_out) {
        a->so.on_step = log_step;
        a->so.step_ctx = &log;
    }
    ld_stress_report rep;
    if (a->so.rebaseline_s > 0) /* S s with no output otherwise */
        fprintf(stderr, "ats stress: --baseline-s %g: the probe process will re-measure the idle probe times "
                        "first, before any hog starts (keep the machine idle)\n", a->so.rebaseline_s);
    st = ld_stress_run_closed(tr, &a->so, base, &rep, &err);
    atsc_trace_free(tr);
    rc = ATS_EXIT_OK;
    if (st != ATS_OK) {
        char be[ATSC_ESC_PATH];
        if (strstr(err.msg, "baseline"))
            fprintf(stderr, "ats stress: %s [--baseline %s]\n", err.msg, atsc_esc(a->base_in, strlen(a->base_in), be, sizeof be));
        else fprintf(stderr, "ats stress: %s\n", err.msg);
        if (!(rep.wall_s > 0)) { /* refused before the hogs ran: bad input (or no device) */
            free(log.s);
            return ats_cli_exit_after_signal(st == ATS_ENOTFOUND || st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL);
        }
        rc = ATS_EXIT_FAIL; /* failed while running (e.g. the probe process died): report and log what ran */
    }
    ld_stress_report_print(stdout, &rep, a->so.settle_s);
    if (short_note[0]) printf("targets not reached: %s\n", short_note);
    if (a->log_out) {
        if (log.oom) fprintf(stderr, "ats stress: --log %s: out of memory, the log is incomplete\n", a->log_out);
        if (ld_text_save(a->log_out, "control log", write_log, &log, &err) != ATS_OK) {
            fprintf(stderr, "ats stress: %s\n", err.msg);
            rc = ATS_EXIT_FAIL;
        } else {
            printf("wrote %s (%zu control steps)\n", a->log_out, log.n);
        }
        free(log.s);
    }
    fprintf(stderr, "ats stress: closed loop %s\n",
            ats_cli_stop ? "stopped by a signal; all hogs ended"
            : st != ATS_OK ? "failed (above) after the report's time; all hogs ended" : "done; all hogs ended");
    return ats_cli_exit_after_signal(rc);
}

int ats_cmd_stress(int argc, char **argv)
{
    stress_args A = {.so = ld_stress_opts_default(), .settle = 1.0, .measure = 2.0}, *a = &A;
    int rc = parse_args(argc, argv, a);
    if (rc) return rc < 0 ? ATS_EXIT_OK : rc;
    if ((rc = check_args(argc, argv, a))) return rc;
    /* the inputs first, so that an output naming one of them is refused here, before the run */
    char path[4096] = "";
    if (a->trace) {
        ats_cli_trace_path(a->trace, path, sizeof path);
        atsc_in_note(path);
    }
    if (a->base_in) atsc_in_note(a->base_in);
    if (a->calib_in) atsc_in_note(a->calib_in);
    if (ats_cli_check_out("stress", "--calibrate", a->calib_out) || ats_cli_check_out("stress", "--log", a->log_out))
        return ATS_EXIT_USAGE; /* before the work */
    ats_cli_catch_stop_signals();
    /* a write to the probe process after it died must fail with EPIPE, not end the stressor: the closed
     * loop ignores SIGPIPE itself only where it has its default action, and main's cleanup handler
     * (atsc_out_cleanup_signal_install) is not that */
    signal(SIGPIPE, SIG_IGN);
    a->so.stop = &ats_cli_stop;
    if (a->calib_out) return run_calibrate(a);
    atsc_trace *tr = NULL;
    if ((rc = load_trace(a, path, &tr))) return rc;
    ats_err err = {{0}};
    ld_stress_calib cal;
    if (a->calib_in) {
        if (ld_stress_calib_load(a->calib_in, &cal, &err) != ATS_OK) {
            fprintf(stderr, "ats stress: %s\n", err.msg);
            atsc_trace_free(tr);
            return ATS_EXIT_USAGE;
        }
        a->so.calib = &cal;
    }
    ld_baseline base;
    if (a->base_in && ats_cli_load_baseline("stress", a->base_in, a->so.threads, a->slice_given, &a->so.hog_slice_ns,
                                            "probes and hogs", &base)) {
        atsc_trace_free(tr);
        return ATS_EXIT_USAGE;
    }
    char short_note[1024];
    shortfall_note(tr, a, short_note, sizeof short_note);
    if (short_note[0]) fprintf(stderr, "ats stress: note: %s\n", short_note);
    if (a->base_in) return run_closed(a, tr, &base, short_note);
    enum ats_status st = ld_stress_run(tr, &a->so, &err);
    atsc_trace_free(tr);
    if (st != ATS_OK) {
        fprintf(stderr, "ats stress: %s\n", err.msg);
        return ats_cli_exit_after_signal(st == ATS_ENOTFOUND || st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL);
    }
    fprintf(stderr, "ats stress: open loop %s%s%s\n", ats_cli_stop ? "stopped by a signal; all hogs ended" : "done; all hogs ended",
            short_note[0] ? "; targets not reached: " : "", short_note);
    return ats_cli_exit_after_signal(ATS_EXIT_OK);
}
