/*
 * ats — one program, git-style subcommands. `ats help`, `ats <cmd> --help` (or `ats <cmd> help`, `ats help <cmd>
 * [<sub>]`; `ats bench sim help`, `ats trace show help` likewise), `ats --version`.
 * Unknown subcommands (also after `ats help`) give the usage and exit 2. The table below is the whole command list; each
 * entry lives in cli/cmd_<name>.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "ats_version.h"
#include "atsc/outfile.h"
#include "atsc/results.h"
#include "cli.h"
#include "ex/ops.h"

static const ats_cmd commands[] = {
    {"inspect", ats_cmd_inspect, "print a model's op graph, placement and plan for one round"},
    {"sim", ats_cmd_sim, "simulate requests under a load trace and compare policies"},
    {"sweep", ats_cmd_sweep, "sweep the re-scheduling threshold and interval over traces (OpenMP; MPI ranks under mpirun)"},
    {"trace", ats_cmd_trace, "load traces: synth, show, import (CSV), compare"},
    {"record", ats_cmd_record, "record a load trace of this machine with CPU/GPU/PCIe probes"},
    {"stress", ats_cmd_stress, "generate CPU/GPU/PCIe background load that follows a load trace"},
    {"run", ats_cmd_run, "generate text with the executor (GGUF or --dummy-weights)"},
    {"validate", ats_cmd_validate, "sim versus real: the executor under ats stress and the simulator, per policy"},
    {"profile", ats_cmd_profile, "measure this machine for a model: a hardware profile for --hw (op times, link, DRAM)"},
    {"bench", ats_cmd_bench, "benchmarks: sched, sim, kernels (tables + JSON result files)"},
    {"quantize", ats_cmd_quantize, "re-quantize a GGUF file: q8_0, q4_0 or q4_k"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* "ats: unknown command 'x' (commands: inspect, sim, ...; ats help)": one line, exit 2 */
static int unknown_command(const char *name)
{
    char list[256] = "";
    for (size_t i = 0; i < N_COMMANDS; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", commands[i].name);
    fprintf(stderr, "ats: unknown command '%s' (commands: %s; ats help)\n", name, list);
    return ATS_EXIT_USAGE;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ats <command> [options]    (ats <command> --help for its options)\n\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n  help       this message\n  --version  print the version and the commit\n");
}

/* A command's tables, CSV, JSON and generated text go to stdout: a write that failed there (disk full
 * under `> file`, /dev/full, a closed pipe with SIGPIPE ignored) is an error, as a failed --out is
 * (coreutils' close_stdout): "ats CMD: standard output: write failed: <errno>" (the errno of an earlier
 * failed write is gone by now: then without it), exit 1 (exit 0 with an empty or cut file before). */
static int stdout_checked(const char *cmd, int rc)
{
    errno = 0;
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (fclose(stdout) != 0 && !bad) bad = 1, e = errno;
    if (!bad) return rc;
    if (!e) e = ats_cli_stdout_errno; /* a command that wrote a block itself recorded its errno */
    if (e) fprintf(stderr, "ats %s: standard output: write failed: %s\n", cmd, strerror(e));
    else fprintf(stderr, "ats %s: standard output: write failed (disk full, or its reader went away)\n", cmd);
    return rc == ATS_EXIT_OK ? ATS_EXIT_FAIL : rc;
}

/* 1 when the arguments after the command name hold --help or -h (before a "--"), or start with "help"
 * (`ats bench help`, `ats trace help`): the command prints its usage and does nothing else */
static int asks_help(int n, char **args)
{
    if (n > 0 && strcmp(args[0], "help") == 0) return 1;
    for (int i = 0; i < n && strcmp(args[i], "--") != 0; i++)
        if (strcmp(args[i], "--help") == 0 || strcmp(args[i], "-h") == 0) return 1;
    return 0;
}

static int run_main(int argc, char **argv)
{
    atsc_h5_no_atexit();         /* first: a failed HDF5 close must not crash the exit (atsc/results.h) */
    gsl_set_error_handler_off(); /* GSL reports through return codes, never aborts (STYLE.md) */
    atsc_out_cleanup_signal_install(); /* INT/TERM/HUP/QUIT/PIPE/XFSZ remove unfinished OUT.tmp.PID files */
    atsc_in_guard_enable();            /* no output may replace a file this run read */
    if (argc < 2) {
        usage(stderr);
        return ATS_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc >= 3 && strcmp(argv[2], "help") != 0) { /* `ats help trace synth`: trace synth's usage */
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (strcmp(argv[2], commands[i].name) == 0) {
                    char *sub[16] = {argv[2]};
                    int n = 1;
                    for (int k = 3; k < argc && n < 14; k++) sub[n++] = argv[k];
                    sub[n++] = "--help";
                    return commands[i].fn(n, sub);
                }
            return unknown_command(argv[2]); /* was the general help, exit 0 */
        }
        usage(stdout);
        return ATS_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        if (argc > 2) {
            fprintf(stderr, "ats %s: unexpected argument '%s'\n", cmd, argv[2]);
            return ATS_EXIT_USAGE;
        }
        printf("ats %s (commit %s)\n", ATS_VERSION_STRING, ATS_GIT_COMMIT);
        return ATS_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(cmd, commands[i].name) == 0) {
            /* the executor's ATS_* knobs, which its readers would silently ignore when misspelt (help and
             * --version above, and `ats <cmd> ... --help`, still work with a bad one, to find out what is
             * valid: there it is a warning) */
            char why[512];
            size_t cursor = 0; /* a misspelt name (ATS_ATTN_SHAPES) is ignored by every reader: say so */
            while (ex_env_unknown_next(&cursor, why, sizeof why))
                fprintf(stderr, "ats %s: warning: environment: %s\n", cmd, why);
            if (ex_env_check(why, sizeof why) != ATS_OK) {
                int help = asks_help(argc - 2, argv + 2);
                fprintf(stderr, "ats %s: %senvironment: %s\n", cmd, help ? "warning: " : "", why);
                if (!help) return ATS_EXIT_USAGE;
            }
            char *help_buf[4]; /* `ats sim help` as `ats help sim` (git's way) */
            ats_cli_help_words(argc, &argv, help_buf);
            return commands[i].fn(argc - 1, argv + 1);
        }
    return unknown_command(cmd);
}

int main(int argc, char **argv)
{
    /* every way out, help and --version included, through the stdout check (`ats help > /dev/full`) */
    const int rc = run_main(argc, argv);
    return stdout_checked(argc > 1 ? argv[1] : "", rc);
}
