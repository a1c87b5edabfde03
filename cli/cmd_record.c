/*
 * cli/cmd_record.c — `ats record`: sample the machine's CPU, GPU and PCIe availability with small
 * probes (exec/load_record.c) and write a load trace. SIGINT/SIGTERM end the recording early; what was
 * recorded is still written.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atsc/outfile.h"
#include "atsc/trace_io.h"
#include "cli.h"
#include "ld/load.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats record --out FILE.h5 [--duration S] [--interval S] [--threads N] [--cpu-only]\n"
            "                  [--baseline FILE] [--baseline-s S] [--save-baseline FILE] [--device N]\n"
            "                  [--machine NAME] [--description TEXT] [--progress] [--cpu-probe-ms MS]\n"
            "                  [--slice-us US] [--pin]\n"
            "Samples CPU, GPU and PCIe availability every --interval (default 0.1 s) for --duration (default\n"
            "60 s) with probes: a float GEMV (2048 x 2048) on --threads (default: the CPUs it may use), a ~1 ms busy\n"
            "kernel, a 16 MiB pinned host-to-device copy. Availability = idle probe time / probe time, clipped\n"
            "to [0.01, 1]. The idle baseline is measured first for --baseline-s (default 3 s) on the idle\n"
            "machine, or read from --baseline (written by --save-baseline; --save-baseline without --out only\n"
            "measures it; both: below). --interval may not exceed --duration.\n"
            "Without a GPU (or device N, or with --cpu-only) only the CPU is recorded (gpu/pcie = 1; stderr says\n"
            "so, and names a --device N it did not use). SIGINT/SIGTERM/SIGHUP stop early and still\n"
            "write the samples so far (exit status that of the signal: 130, 143, 129; during the baseline\n"
            "nothing is written). The probes of all ats processes take one lock\n"
            "(/tmp/ats-probes.lock): a sample that falls on a probe of `ats stress --baseline` waits for it\n"
            "(untimed), so the stressor's probes never overlap the recorder's.\n"
            "--cpu-probe-ms MS (0.5 .. 200, default 2): idle length of one CPU probe when the baseline is\n"
            "measured (the GEMV repetitions are chosen to reach it and saved in --save-baseline); longer probes\n"
            "average over more of a stressor's duty period and of the scheduler's time slices, at a higher\n"
            "probe duty cycle.\n");
    fputs(ats_cli_matrix_help, f);
    fputs(ats_cli_rebase_help, f);
    fputs(ats_cli_slice_help, f);
    fputs(ats_cli_pin_help, f);
}

/* what the flags of ats record ask for */
typedef struct record_args {
    ld_probe_opts po;
    ld_record_opts ro;
    const char *out, *base_in, *base_out, *descr;
    char machine[256];
    double base_s;
    int base_s_given, probe_ms_given, device_given, slice_given;
} record_args;

/* the flags into a: ATS_EXIT_OK, ATS_EXIT_USAGE after one line, -1 after --help */
static int parse_args(int argc, char **argv, record_args *a)
{
    static const struct option lo[] = {
        {"out", required_argument, 0, 'o'},         {"duration", required_argument, 0, 'd'},
        {"interval", required_argument, 0, 'i'},    {"threads", required_argument, 0, 't'},
        {"cpu-only", no_argument, 0, 'C'},          {"baseline", required_argument, 0, 'b'},
        {"baseline-s", required_argument, 0, 'B'},  {"save-baseline", required_argument, 0, 'S'},
        {"device", required_argument, 0, 'D'},      {"machine", required_argument, 0, 'm'},
        {"description", required_argument, 0, 'x'}, {"progress", no_argument, 0, 'p'},
        {"cpu-probe-ms", required_argument, 0, 'P'}, {"slice-us", required_argument, 0, 'u'},
        {"pin", no_argument, 0, 'n'},               {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    long long v;
    int c, li = 0;
    optind = 1;
    opterr = 0; /* one line of our own per bad option, not getopt's plus the usage */
    const char *seen[256] = {0};
    while ((c = getopt_long(argc, argv, ":o:h", lo, &li)) != -1) {
        if (c != ':' && c != '?' && c != 'h' && c != 'C' && c != 'p' && optarg &&
            ats_cli_once("record", seen, c, c == 'o' ? "out" : lo[li].name, optarg))
            return ATS_EXIT_USAGE;
        if (c == 'o' || c == 'b' || c == 'S') { /* file names (cli.h) */
            char flag[64];
            snprintf(flag, sizeof flag, "--%s", c == 'o' ? "out" : lo[li].name);
            if (ats_cli_file_value("record", flag, optarg)) return ATS_EXIT_USAGE;
        }
        switch (c) {
        case 'o': a->out = optarg; break;
        case 'b': a->base_in = optarg; break;
        case 'S': a->base_out = optarg; break;
        case 'x': a->descr = optarg; break;
        case 'm': snprintf(a->machine, sizeof a->machine, "%s", optarg); break;
        case 'C': a->po.use_gpu = 0; break;
        case 'p': a->ro.progress = 1; break;
        case 'd': case 'i': case 'B': {
            double *dst = c == 'd' ? &a->ro.duration_s : c == 'i' ? &a->ro.interval_s : &a->base_s;
            if (c == 'B') a->base_s_given = 1;
            if (ats_cli_parse_double(optarg, dst) || !(*dst > 0) || *dst > 1e7) {
                ats_cli_error("record", "--%s '%s': need a number of seconds in (0, 1e7]",
                              c == 'd' ? "duration" : c == 'i' ? "interval" : "baseline-s", optarg);
                return ATS_EXIT_USAGE;
            }
            break;
        }
        case 'n': a->po.pin = 1; break;
        case 'u':
            if (ats_cli_parse_slice_us("record", optarg, &a->po.slice_ns)) return ATS_EXIT_USAGE;
            a->slice_given = 1;
            break;
        case 'P': {
            double ms;
            if (ats_cli_parse_double(optarg, &ms) || !(ms >= 0.5) || ms > 200) {
                ats_cli_error("record", "--cpu-probe-ms '%s': need milliseconds in [0.5, 200]", optarg);
                return ATS_EXIT_USAGE;
            }
            a->po.cpu_target_s = ms * 1e-3;
            a->probe_ms_given = 1;
            break;
        }
        case 't': case 'D':
            /* threads: the probe's limit (ld_probe_new, baseline files: 1 .. 1024) */
            if (ats_cli_parse_int(optarg, &v) || v < (c == 't' ? 1 : 0) || v > (c == 't' ? 1024 : 4096)) {
                ats_cli_error("record", "--%s '%s': need an integer %d .. %d", c == 't' ? "threads" : "device",
                              optarg, c == 't' ? 1 : 0, c == 't' ? 1024 : 4096);
                return ATS_EXIT_USAGE;
            }
            if (c == 't') a->po.threads = (int)v;
            else a->po.device = (int)v, a->device_given = 1;
            break;
        case 'h': usage(stdout); return -1;
        case ':':
            ats_cli_missing_value("record", argv[optind - 1], optopt);
            return ATS_EXIT_USAGE;
        default:
            ats_cli_bad_option("record", argv[optind - 1], optopt, lo);
            return ATS_EXIT_USAGE;
        }
    }
    return ATS_EXIT_OK;
}

/* what does not go together, the paths checked before the work, the machine's name: ATS_EXIT_OK or
   ATS_EXIT_USAGE after one line */
static int check_args(int argc, char **argv, record_args *a)
{
    if (optind != argc) {
        ats_cli_error("record", "unexpected argument '%s' (ats record --help)", argv[optind]);
        return ATS_EXIT_USAGE;
    }
    if (!a->out && !a->base_out) {
        ats_cli_error("record", "--out FILE is required (or --save-baseline FILE alone; ats record --help)");
        return ATS_EXIT_USAGE;
    }
    if (a->ro.interval_s < 0.01) {
        ats_cli_error("record", "--interval %g s: below 0.01 s the probes would dominate", a->ro.interval_s);
        return ATS_EXIT_USAGE;
    }
    if (a->out && a->ro.interval_s > a->ro.duration_s) {
        ats_cli_error("record", "--interval %g s is longer than --duration %g s: at most one sample; give an interval "
                                "<= the duration", a->ro.interval_s, a->ro.duration_s);
        return ATS_EXIT_USAGE;
    }
    if (a->base_in && a->probe_ms_given) {
        ats_cli_error("record", "--baseline FILE and --cpu-probe-ms do not combine: the probe size is the file's "
                                "(set it when the baseline is measured)");
        return ATS_EXIT_USAGE;
    }
    if (a->base_in) atsc_in_note(a->base_in); /* the input first: an output naming it is refused here */
    if (a->out && a->base_out && atsc_out_same_target(a->out, a->base_out)) {
        ats_cli_error("record", "--out and --save-baseline name the same file '%s' (give two paths)", a->out);
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_check_out("record", "--out", a->out) || ats_cli_check_out("record", "--save-baseline", a->base_out))
        return ATS_EXIT_USAGE; /* before the recording, not after its whole duration */
    if (!a->machine[0] && gethostname(a->machine, sizeof a->machine) != 0) snprintf(a->machine, sizeof a->machine, "unknown");
    a->machine[sizeof a->machine - 1] = '\0';

    return ATS_EXIT_OK;
}

/* the idle baseline measured here (without --baseline, or with --baseline-s: then re-measured with the
   file's settings and compared with the file's times in `rebased`, 160 bytes). ATS_EXIT_OK or ATS_EXIT_FAIL */
static int measure_baseline(const record_args *a, ld_probe *p, ld_baseline *base, char *rebased)
{
    ats_err err = {{0}};
    double file_t[ATSC_RES_COUNT] = {NAN, NAN, NAN}; /* --baseline FILE --baseline-s S: the file's times */
    /* ld_probe_baseline takes max(3, ceil(S / interval)) probe sets, one every --interval: say that span */
    const double base_span_s = fmax(3.0, ceil(a->base_s / a->ro.interval_s)) * a->ro.interval_s;
    if (!a->base_in || a->base_s_given) {
        if (a->base_in) memcpy(file_t, base->t_s, sizeof file_t);
        fprintf(stderr, "ats record: measuring the idle baseline for %g s%s (keep the machine idle)\n", base_span_s,
                a->base_in ? " with the settings of --baseline" : "");
        if (ld_probe_baseline(p, a->base_s, a->ro.interval_s, &ats_cli_stop, base, &err) != ATS_OK) {
            fprintf(stderr, "ats record: %s\n", err.msg);
            return ATS_EXIT_FAIL;
        }
    }
    if (isnan(base->t_s[1]))
        fprintf(stderr, "ats record: baseline probe time: cpu %.4g ms (no GPU or PCIe probe)\n", 1e3 * base->t_s[0]);
    else
        fprintf(stderr, "ats record: baseline probe times: cpu %.4g ms, gpu %.4g ms, pcie %.4g ms\n",
                1e3 * base->t_s[0], 1e3 * base->t_s[1], 1e3 * base->t_s[2]);
    rebased[0] = '\0';
    if (!isnan(file_t[0])) {
        size_t l = (size_t)snprintf(rebased, 160, "re-measured here over %g s (--baseline's: cpu %.4g ms",
                                    base_span_s, 1e3 * file_t[0]);
        if (!isnan(file_t[1]) && !isnan(base->t_s[1]))
            snprintf(rebased + l, 160 - l, ", gpu %.4g ms, pcie %.4g ms", 1e3 * file_t[1], 1e3 * file_t[2]);
        strncat(rebased, ")", 160 - strlen(rebased) - 1);
        fprintf(stderr, "ats record: idle times %s: cpu x%.3f\n", rebased, base->t_s[0] / file_t[0]);
        if (!(base->t_s[0] / file_t[0] >= 0.8 && base->t_s[0] / file_t[0] <= 1.25))
            fprintf(stderr, "ats record: warning: the re-measured idle CPU time is x%.3f the file's: the file is from "
                            "elsewhere, or this machine was not idle while re-measuring\n", base->t_s[0] / file_t[0]);
    }
    return ATS_EXIT_OK;
}

/* the recording into the trace file --out, its attributes, the summary lines. ATS_EXIT_OK or ATS_EXIT_FAIL */
static int record_trace(int argc, char **argv, record_args *a, ld_probe *p, const ld_baseline *base,
                        const char *rebased, const char *pdesc)
{
    ats_err err = {{0}};
    atsc_trace *tr = NULL;
    int rc = ATS_EXIT_OK;
    a->ro.stop = &ats_cli_stop;
    long waits0 = 0, timeouts0 = 0; /* the baseline's probes waited too: count the recording's only */
    double wait_s0 = 0;
    ld_probe_lock_stats(p, &waits0, &wait_s0, &timeouts0, NULL);
    ld_record_stats stats;
    if (ld_record_run(p, base, &a->ro, &tr, &stats, &err) != ATS_OK) {
        fprintf(stderr, "ats record: %s\n", err.msg);
        rc = ATS_EXIT_FAIL;
        goto done;
    }
    char cmdline[ATSC_TRACE_ATTR_LEN] = "ats record";
    for (int i = 1; i < argc; i++) {
        size_t l = strlen(cmdline);
        snprintf(cmdline + l, sizeof cmdline - l, strpbrk(argv[i], " \t;()") ? " '%s'" : " %s", argv[i]);
    }
    snprintf(tr->source, sizeof tr->source, "%s", cmdline);
    snprintf(tr->machine, sizeof tr->machine, "%s", a->machine);
    /* a --description near the attribute's size cuts the probe description's tail (said on stderr) */
    if (snprintf(tr->description, sizeof tr->description,
             "%s%srecorded %zu samples every %g s over %.1f s%s; probe duty cycle %.2f%% (cpu %.2f%%, gpu %.2f%%, "
             "pcie %.2f%%); baseline probe times [ms] cpu %.4g gpu %.4g pcie %.4g%s%s; %s",
             a->descr ? a->descr : "", a->descr ? "; " : "", stats.samples, a->ro.interval_s, stats.wall_s,
             ats_cli_stop ? " (stopped early by a signal)" : "", 100 * stats.duty, 100 * stats.probe_s[0] / stats.wall_s,
             100 * stats.probe_s[1] / stats.wall_s, 100 * stats.probe_s[2] / stats.wall_s, 1e3 * base->t_s[0],
             1e3 * base->t_s[1], 1e3 * base->t_s[2], rebased[0] ? " " : "", rebased, pdesc) >= (int)sizeof tr->description)
        fprintf(stderr, "ats record: note: the trace's description attribute is cut at %zu bytes\n",
                sizeof tr->description - 1);
    if (atsc_trace_save(tr, a->out, &err) != ATS_OK) {
        fprintf(stderr, "ats record: %s\n", err.msg);
        rc = ATS_EXIT_FAIL;
        goto done;
    }
    double span = atsc_trace_duration(tr) > 0 ? atsc_trace_duration(tr) : 1.0, mean[3];
    for (int r = 0; r < ATSC_RES_COUNT; r++) atsc_trace_stats(tr, (enum atsc_resource)r, span, &mean[r], NULL, NULL);
    printf("wrote %s: %zu samples over %.1f s%s; mean availability cpu %.3f gpu %.3f pcie %.3f; probe duty cycle "
           "%.2f%% (cpu %.2f%%, gpu %.2f%%, pcie %.2f%%)\n",
           a->out, stats.samples, stats.wall_s, ats_cli_stop ? " (stopped early)" : "", mean[0], mean[1], mean[2],
           100 * stats.duty, 100 * stats.probe_s[0] / stats.wall_s, 100 * stats.probe_s[1] / stats.wall_s,
           100 * stats.probe_s[2] / stats.wall_s);
    long waits, timeouts;
    double wait_s;
    int unlocked;
    ld_probe_lock_stats(p, &waits, &wait_s, &timeouts, &unlocked);
    waits -= waits0;
    wait_s -= wait_s0;
    timeouts -= timeouts0;
    if (unlocked)
        fprintf(stderr, "ats record: could not open the probe lock file: probes may have overlapped with another "
                        "ats process's probes\n");
    else
        printf("probe lock: %ld of %zu samples waited for another process's probes (%.1f ms in all); %ld ran "
               "without the lock (its holder busy > 0.2 s)\n", waits, stats.samples, 1e3 * wait_s, timeouts);
done:
    atsc_trace_free(tr);
    return rc;
}

int ats_cmd_record(int argc, char **argv)
{
    record_args A = {.po = ld_probe_opts_default(), .ro = ld_record_opts_default(), .base_s = 3.0}, *a = &A;
    a->po.stop = &ats_cli_stop; /* a signal cuts a probe in progress */
    int rc = parse_args(argc, argv, a);
    if (rc) return rc < 0 ? ATS_EXIT_OK : rc;
    if ((rc = check_args(argc, argv, a))) return rc;
    ats_cli_catch_stop_signals();

    ats_err err = {{0}};
    ld_baseline base;
    if (a->base_in) {
        if (ats_cli_load_baseline("record", a->base_in, a->po.threads, a->slice_given, &a->po.slice_ns, "the probes", &base))
            return ATS_EXIT_USAGE;
        ld_probe_opts_from_baseline(&a->po, &base); /* the very probes the baseline timed */
    }
    ld_probe *p = NULL;
    if (ld_probe_new(&a->po, &p, &err) != ATS_OK) {
        fprintf(stderr, "ats record: %s\n", err.msg);
        return ATS_EXIT_FAIL;
    }
    int gpu = ld_probe_has_gpu(p);
    if (!gpu)
        fprintf(stderr, "ats record: %s: recording the CPU only (gpu_avail and pcie_avail written as 1)\n",
                a->po.use_gpu ? "no CUDA device" : "--cpu-only");
    if (!gpu && a->device_given) /* as ats stress words hogs it cannot run: the option, why, what happens */
        fprintf(stderr, "ats record: --device %d: %s; no GPU or PCIe probe runs\n", a->po.device,
                a->po.use_gpu ? "no such CUDA device here" : "not used (--cpu-only)");
    if (a->base_in && gpu && (base.t_s[ATSC_RES_GPU] != base.t_s[ATSC_RES_GPU])) {
        fprintf(stderr, "ats record: %s: the baseline has no GPU/PCIe times but this machine has a GPU; "
                        "measure a baseline here (--save-baseline)\n", a->base_in);
        ld_probe_free(p);
        return ATS_EXIT_USAGE;
    }
    char pdesc[768];
    ld_probe_describe(p, pdesc, sizeof pdesc);
    fprintf(stderr, "ats record: %s\n", pdesc);
    char rebased[160];
    if ((rc = measure_baseline(a, p, &base, rebased))) goto done;
    if (a->base_out) {
        if (ld_baseline_save(&base, a->base_out, &err) != ATS_OK) {
            fprintf(stderr, "ats record: %s\n", err.msg);
            rc = ATS_EXIT_FAIL;
            goto done;
        }
        printf("wrote baseline %s\n", a->base_out);
    }
    if (!a->out) goto done;
    rc = record_trace(argc, argv, a, p, &base, rebased, pdesc);
done:
    ld_probe_free(p);
    return ats_cli_exit_after_signal(rc);
}
