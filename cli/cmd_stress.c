/*
 * cli/cmd_stress.c — `ats stress`: generate real background load on CPU, GPU and PCIe that follows a
 * load trace (exec/load_stress.c), or calibrate the hogs against the probes. SIGINT/SIGTERM stop all
 * hog threads and processes before exiting.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atsc/trace_io.h"
#include "cli.h"
#include "ex/load.h"

static volatile sig_atomic_t stress_stop = 0;
static void on_signal(int sig) { (void)sig; stress_stop = 1; }

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ats stress --trace T [--duration S] [--delay S] [--calibration FILE] [--threads N]\n"
            "                  [--period S] [--hogs-cpu K] [--hogs-gpu K] [--hogs-pcie K] [--device N] [--verbose]\n"
            "       ats stress --calibrate FILE [--settle S] [--measure S] [--hogs-cpu K] [--hogs-gpu K]\n"
            "                  [--hogs-pcie K] [--cpu-only] [--threads N] [--period S] [--verbose]\n"
            "Runs hogs whose duty cycles make a victim's availability follow trace T (a name in traces/ or a\n"
            "file): K spinning threads per --threads CPU (default: online CPUs), K GPU processes launching busy\n"
            "kernels, K processes copying host-to-device; busy for d*P of every period P (--period, default\n"
            "0.02 s) with d = (1 - a)(K+1)/K. K defaults to the fewest hogs that reach the trace's lowest value.\n"
            "--calibrate measures the probe availability (as `ats record` sees it) at model levels 1 .. 1/(K+1)\n"
            "(default K = 3) and writes FILE; --calibration FILE then maps targets through it.\n"
            "A trace with GPU or PCIe load on a machine without a GPU is refused (exit 2).\n");
}

int ats_cmd_stress(int argc, char **argv)
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
        {0, 0, 0, 0}};
    ex_stress_opts so = ex_stress_opts_default();
    const char *trace = NULL, *calib_in = NULL, *calib_out = NULL;
    double settle = 1.0, measure = 2.0;
    int cpu_only = 0, c;
    long long v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'T': trace = optarg; break;
        case 'c': calib_in = optarg; break;
        case 'C': calib_out = optarg; break;
        case 'o': cpu_only = 1; break;
        case 'v': so.verbose = 1; break;
        case 'd': case 'w': case 'P': case 's': case 'm': {
            double *dst = c == 'd' ? &so.duration_s : c == 'w' ? &so.delay_s : c == 'P' ? &so.period_s
                        : c == 's' ? &settle : &measure;
            if (ats_cli_parse_double(optarg, dst) || *dst < 0 || (c == 'P' && !(*dst >= 1e-3 && *dst <= 10))) {
                ats_cli_error("stress", "bad number of seconds '%s'%s", optarg,
                              c == 'P' ? " (period: 0.001 .. 10)" : "");
                return ATS_EXIT_USAGE;
            }
            break;
        }
        case 't': case 'D': case '0': case '1': case '2':
            if (ats_cli_parse_int(optarg, &v) || v < (c == 'D' ? 0 : 1) || v > 64) {
                ats_cli_error("stress", "bad count '%s' (1 .. 64)", optarg);
                return ATS_EXIT_USAGE;
            }
            if (c == 't') so.threads = (int)v;
            else if (c == 'D') so.device = (int)v;
            else so.k[c - '0'] = (int)v;
            break;
        case 'h': usage(stdout); return ATS_EXIT_OK;
        default: usage(stderr); return ATS_EXIT_USAGE;
        }
    }
    if (optind != argc || (!trace == !calib_out)) {
        ats_cli_error("stress", optind != argc ? "unexpected argument '%s'" : "give exactly one of --trace, --calibrate%s",
                      optind != argc ? argv[optind] : "");
        usage(stderr);
        return ATS_EXIT_USAGE;
    }
    if (ats_cli_check_out("stress", "--calibrate", calib_out)) return ATS_EXIT_USAGE; /* before calibrating */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    so.stop = &stress_stop;
    ats_err err = {{0}};
    enum ats_status st;

    if (calib_out) {
        for (int r = 0; r < ATSC_RES_COUNT; r++)
            if (so.k[r] == 0) so.k[r] = 3;
        ex_probe_opts po = ex_probe_opts_default();
        po.threads = so.threads;
        po.device = so.device;
        if (cpu_only || !ex_gpu_present(so.device)) {
            if (!cpu_only) fprintf(stderr, "ats stress: no CUDA device: calibrating the CPU hogs only\n");
            so.k[ATSC_RES_GPU] = so.k[ATSC_RES_PCIE] = 0;
            po.use_gpu = 0;
        }
        if (!(measure > 0)) measure = 2.0;
        ex_stress_calib cal;
        st = ex_stress_calibrate(&so, &po, settle, measure, &cal, &err);
        if (st == ATS_OK) st = ex_stress_calib_save(&cal, calib_out, &err);
        if (st != ATS_OK) {
            fprintf(stderr, "ats stress: %s\n", err.msg);
            return st == ATS_ENOTFOUND ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
        }
        printf("%-5s %4s %8s %8s\n", "res", "hogs", "model", "measured");
        for (int r = 0; r < ATSC_RES_COUNT; r++)
            for (int i = 0; i < cal.n[r]; i++)
                printf("%-5s %4d %8.3f %8.3f\n", atsc_resource_name((enum atsc_resource)r), cal.k[r], cal.model[r][i],
                       cal.measured[r][i]);
        printf("wrote %s\n", calib_out);
        return ATS_EXIT_OK;
    }

    char path[4096];
    ats_cli_trace_path(trace, path, sizeof path);
    atsc_trace *tr = NULL;
    st = atsc_trace_load(path, &tr, &err);
    if (st != ATS_OK) {
        fprintf(stderr, "ats stress: %s\n", err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    ex_stress_calib cal;
    if (calib_in) {
        if ((st = ex_stress_calib_load(calib_in, &cal, &err)) != ATS_OK) {
            fprintf(stderr, "ats stress: %s\n", err.msg);
            atsc_trace_free(tr);
            return ATS_EXIT_USAGE;
        }
        so.calib = &cal;
    }
    st = ex_stress_run(tr, &so, &err);
    atsc_trace_free(tr);
    if (st != ATS_OK) {
        fprintf(stderr, "ats stress: %s\n", err.msg);
        return st == ATS_ENOTFOUND || st == ATS_EINVAL ? ATS_EXIT_USAGE : ATS_EXIT_FAIL;
    }
    fprintf(stderr, "ats stress: %s\n", stress_stop ? "stopped by a signal; all hogs ended" : "done; all hogs ended");
    return ATS_EXIT_OK;
}
