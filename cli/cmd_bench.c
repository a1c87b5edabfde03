/*
 * ats bench <what> — benchmark programs (STYLE.md: benchmarks are programs, not timed tests). The
 * measuring is libats_bench (bench/); here the table of subcommands and what they share: where the
 * running text goes and the result file. Each `ats bench <what>` lives in cli/cmd_bench_<what>.c,
 * declared in cli.h; a new one is one line in BENCHES below.
 *
 * Every benchmark prints its table to stdout and writes its result file (JSON: commit, machine,
 * parameters, figures) only when --out names one, through common/outfile (checked before the work,
 * temporary, fsync, rename); the committed figures are in experiments/ (sched-speed, sim-speed, kernels).
 */
#include <stdio.h>
#include <string.h>

#include "atsc/outfile.h"
#include "cli.h"

typedef struct bench_entry {
    const char *name;
    ats_cmd_fn fn;
    const char *summary;
} bench_entry;

static const bench_entry BENCHES[] = {
    {"sched", ats_bench_sched, "placement DP, dynamic-transfer DPs and plan building (wall time)"},
    {"sim", ats_bench_sim, "simulator events/s, 10-minute replay, eps x tau sweep"},
    {"kernels", ats_bench_kernels, "CPU and GPU kernels against the measured ceilings"},
    {"model", ats_bench_model, "whole models: tokens/s of prompts and decode steps (llama-bench's form)"},
};
#define N_BENCHES (sizeof BENCHES / sizeof BENCHES[0])

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: ats bench <what> [options]    (ats bench <what> --help)\n\n");
    for (size_t i = 0; i < N_BENCHES; i++) fprintf(f, "  %-8s %s\n", BENCHES[i].name, BENCHES[i].summary);
    fprintf(f, "\nEach prints a table and writes a result file only with --out FILE; the committed figures are\n"
               "in experiments/sched-speed/, sim-speed/ and kernels/.\n");
}

int ats_cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        bench_usage(stderr);
        return ATS_EXIT_USAGE;
    }
    char *help_buf[4]; /* `ats bench help sched`, `ats bench sim help`: that benchmark's usage */
    ats_cli_help_words(argc, &argv, help_buf);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        bench_usage(stdout);
        return ATS_EXIT_OK;
    }
    for (size_t i = 0; i < N_BENCHES; i++)
        if (strcmp(argv[1], BENCHES[i].name) == 0) return BENCHES[i].fn(argc - 1, argv + 1);
    char names[128] = "";
    for (size_t i = 0; i < N_BENCHES; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", BENCHES[i].name);
    ats_cli_error("bench", "unknown benchmark '%s' (%s; ats bench --help)", argv[1], names);
    return ATS_EXIT_USAGE;
}

/* ---- what the benchmarks share ------------------------------------------------------------------ */

static void sink_table(void *ctx, const char *text)
{
    (void)ctx;
    ats_cli_progress_end(); /* a progress line on the terminal gives way to the table */
    fputs(text, stdout);
    fflush(stdout);
}

static void sink_note(void *ctx, const char *line)
{
    ats_cli_progress_end();
    fflush(stdout); /* the table so far first, when both go to one file */
    fprintf(stderr, "ats %s: %s\n", (const char *)ctx, line);
}

static void sink_progress(void *ctx, const char *line)
{
    if (*line) ats_cli_progress((const char *)ctx, "%s", line); /* stderr on a terminal only */
    else ats_cli_progress_end();                                 /* "": the progress is over */
}

bench_sink ats_cli_bench_sink(const char *cmd)
{
    bench_sink s = {sink_table, sink_note, (void *)cmd, sink_progress};
    return s;
}

int ats_cli_bench_write(const char *cmd, const char *out, json_t *doc, size_t flags, FILE *said)
{
    if (!out) return ATS_EXIT_OK;
    ats_err err = {{0}};
    if (atsc_out_write_json(out, doc, flags, &err) != ATS_OK) {
        ats_cli_error(cmd, "cannot write the result file: %s", err.msg);
        return ATS_EXIT_FAIL;
    }
    if (said) {
        fflush(stdout);
        fprintf(said, "wrote %s\n", out);
    }
    return ATS_EXIT_OK;
}
