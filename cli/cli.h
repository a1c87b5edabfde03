/*
 * cli/cli.h — what the subcommands of `ats` share: the command table entry, exit codes, and parsers
 * for the flags that keep one spelling everywhere (--model, --hw, --trace, --policy, --vram-budget,
 * --eps, --interval, --threads, --seed, --out).
 *
 * A subcommand is `int ats_cmd_<name>(int argc, char **argv)`; argv[0] is the subcommand name. It
 * parses with getopt_long, prints its own usage on --help (exit 0) and on a bad flag (exit 2), and
 * returns the process exit code: 0 ok, 1 runtime failure, 2 bad input (ATS_EXIT_*).
 */
#ifndef ATS_CLI_H
#define ATS_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "ats/arch.h"
#include "ats/quant.h"
#include "bench/bench.h"

#define ATS_EXIT_OK 0
#define ATS_EXIT_FAIL 1
#define ATS_EXIT_USAGE 2

typedef int (*ats_cmd_fn)(int argc, char **argv);

typedef struct ats_cmd {
    const char *name;
    ats_cmd_fn fn;
    const char *summary;
} ats_cmd;

/** Parses a byte size with a unit: "6GiB", "512MiB", "6G" (=GiB), "1.5GB" (10^9), "4096B". A bare
 *  number ("6") and hexadecimal are refused. Returns 0 on success, -1 on a malformed, unitless,
 *  non-positive or out-of-range (over 16 EiB) value. */
int ats_cli_parse_bytes(const char *s, uint64_t *out);
/** ats_cli_parse_bytes with the reason of a refusal in why (may be NULL), e.g. "6: add a unit, e.g. 6GiB". */
int ats_cli_parse_bytes_why(const char *s, uint64_t *out, char *why, size_t len);
/* --vram-budget SIZE for every command (sim, sweep, bench sim/sched, inspect): a size with a unit
 * (ats_cli_parse_bytes_why), at least 64 MiB (no GPU runtime fits below; '6' meant GiB). 0 ok, else
 * one line "ats CMD: --vram-budget: ..." on stderr and -1. */
int ats_cli_parse_vram(const char *cmd, const char *s, uint64_t *out);
/* The default VRAM budget of a GPU with vram_bytes: 85% of it in whole MiB (room for the runtime and
 * compute buffers); sim, sweep and bench sched use it when --vram-budget is not given. */
uint64_t ats_cli_vram_default(uint64_t vram_bytes);
/* *budget (bytes; 0 = not given) against a GPU of vram_bytes named hw_name (hw_path for the message):
 * 0 sets the default (ats_cli_vram_default); more than the VRAM is one line "ats CMD: --vram-budget: X GiB
 * (N bytes) exceeds the Y GiB (M bytes) of VRAM of hw 'H' (PATH)" and ATS_EXIT_USAGE; else 0. */
int ats_cli_budget_for_hw(const char *cmd, uint64_t *budget, uint64_t vram_bytes, const char *hw_name,
                          const char *hw_path);
/* 1 when list s, entries separated by `sep`, has an empty entry ('ats,', ',ats', 'a,,b' for ','; '0.1:'
 * for ':'; an entry of spaces only is empty, and so is ""), which strtok_r would skip silently; 0
 * otherwise. Policy and model lists, --eps/--interval ranges, trace synth SPECs. */
int ats_cli_list_has_empty(const char *s, char sep);
/* errno of a failed write to stdout that a command saw itself (a block fwrite, as inspect's): main()'s
 * stdout check reports it when the later fflush no longer knows why (0: none). */
extern int ats_cli_stdout_errno;
/* git's help words for a dispatcher's (argc, argv) = (NAME, SUB, ...): "NAME SUB help" and "NAME help SUB"
 * (three words) become "NAME SUB --help" in buf (4 slots, the caller's), which *argv then points at;
 * anything else is left as it is. Used by main (ats sim help), bench and trace (ats trace help synth). */
void ats_cli_help_words(int argc, char ***argv, char *buf[4]);
/** Strict double / integer parsing (whole string, finite). 0 on success, -1 otherwise. */
int ats_cli_parse_double(const char *s, double *out);
/** --slice-us: microseconds, 0 (the kernel's default slice) or 100 .. 100000, into *ns; one error line
 *  naming `cmd` and the value and -1 when it is not. */
int ats_cli_parse_slice_us(const char *cmd, const char *s, long *ns);
/** The one line for getopt_long's '?' (opterr = 0): a long option of `opts` (may be NULL) that needs a
 *  value and got none, "--flag=value" for a flag that takes no value, an unknown or ambiguous long
 *  option (its text as given), or an unknown letter. `arg` = argv[optind - 1]. */
struct option;
void ats_cli_bad_option(const char *cmd, const char *arg, int optopt_, const struct option *opts);
/** The one line for getopt_long's ':' (an optstring that starts with ':', opterr = 0): a value-taking
 *  option given last without its value, e.g. "ats run: option -n needs a value (ats run --help)", or for
 *  a long option "ats run: --model: needs a value (ats run --help)". `arg` = argv[optind - 1]. Without
 *  the leading ':' getopt reports a short option's missing value as an unknown option ('?'). */
void ats_cli_missing_value(const char *cmd, const char *arg, int optopt_);
struct ld_baseline;
/** Loads `ats record --save-baseline`'s file for `ats record` / `ats stress` (`cmd`) and checks it
 *  against the options: threads_asked > 0 must equal the baseline's; a baseline that records its slice
 *  refuses a different --slice-us (slice_given) and otherwise sets *slice_ns to it; warns (without
 *  failing) when the baseline has more probe threads than this machine's CPUs, naming `users` ("the
 *  probes", "probes and hogs"). One line on stderr and -1 on an error (exit 2), else 0. */
int ats_cli_load_baseline(const char *cmd, const char *path, int threads_asked, int slice_given, long *slice_ns,
                          const char *users, struct ld_baseline *out);
/** The --slice-us paragraph of `ats record --help` and `ats stress --help`. */
extern const char ats_cli_slice_help[];
/** Help text of --pin (ats record, ats stress). */
extern const char ats_cli_pin_help[];
/** Help text of the shared probe matrix (ats record, ats stress). */
extern const char ats_cli_matrix_help[];
extern const char ats_cli_rebase_help[]; /* --baseline FILE --baseline-s S (record, stress) */
/** Parses a whole decimal integer. Returns 0, -1 when s is not one, -2 when it is out of the range
 *  of long long (e.g. "99999999999999999999"), so a caller can say "out of range". */
int ats_cli_parse_int(const char *s, long long *out);

/** Resolves a model name ("qwen3-14b") or a path to a JSON file: a value containing '/' or ending
 *  in ".json" is a path; otherwise $ATS_MODELS_DIR/<name>.json, then the source tree's models/.
 *  Writes the path into buf. Always succeeds (the loader reports a missing file). */
const char *ats_cli_model_path(const char *name, char *buf, size_t len);
/** 1 when a --model value names a GGUF file: it ends in ".gguf", or it is an existing regular file that
 *  starts with the GGUF magic; else 0 (a model name or JSON path: ats_cli_model_path). */
int ats_cli_model_is_gguf(const char *value);
/** The model of a --model value for the commands that build op graphs (sim, sweep, bench sim,
 *  inspect; cli/model_gguf.c). A GGUF file: the architecture from its metadata and *types = the
 *  type of every tensor (ex_model_tensor_types, new: free()), read by the executor's loader (header
 *  and tensor table; the weights are mapped, not read); `quant` (--quant) given with it is refused, as
 *  the file says the types; *recipe is left as the arch's default. A name or JSON: atsc_model_load,
 *  *types = NULL, *recipe = --quant or the model's default_quant. path receives the file read. Returns
 *  ATS_EXIT_OK, or ATS_EXIT_USAGE / ATS_EXIT_FAIL (out of memory) after one line naming the file and
 *  the field. */
int ats_cli_load_model(const char *cmd, const char *model, const char *quant, char *path, size_t len,
                       ats_arch *arch, ats_recipe *recipe, ats_qtype **types);
/** The quantization a run uses, for headers and results: "gguf" (the file's per-tensor types) when
 *  types is non-NULL, else the recipe's name. */
const char *ats_cli_quant_name(ats_recipe recipe, const ats_qtype *types);
/** Same for hardware descriptions: sim/hw/<name>.json ($ATS_HW_DIR overrides). */
const char *ats_cli_hw_path(const char *name, char *buf, size_t len);
/** Same for load traces: a path (with '/' or ending in .h5) as given; a bare name that is a regular
 *  file in the current directory is used as that file; else traces/<name>.h5 ($ATS_TRACES_DIR
 *  overrides). Error messages name both places looked (atsc_trace_lookup_note). */
const char *ats_cli_trace_path(const char *name, char *buf, size_t len);

/** Progress of long work, only when stderr is a terminal (nothing otherwise): "ats <cmd>: <message>"
 *  rewritten in place on one line (\r, erase); ats_cli_progress_end() erases it before other output. */
void ats_cli_progress(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ats_cli_progress_end(void);
/** An ex_progress_fn (ex/model.h) for ats_cli_progress: ctx is the label, e.g. "run: building dummy weights";
 *  prints "ats <label>: X.XX of Y.YY GiB" and ends the line at done == total. */
void ats_cli_progress_bytes(void *ctx, uint64_t done, uint64_t total);

/** This machine for a results file's 'hw' attribute: the CPU's model name from /proc/cpuinfo ("?" when
 *  unknown), then ", " and gpu_name when it is non-empty. Writes into buf and returns it. */
const char *ats_cli_machine(char *buf, size_t len, const char *gpu_name);

/** Prints "ats <cmd>: <message>" to stderr (printf-style). */
void ats_cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/** A file-name value of option `flag` (NULL = not given: 0) that starts with '-' is refused: getopt took
 *  the next option as the value (`ats sim --out --help` wrote a file named --help), or it is "-", which
 *  means standard input or output nowhere in ats. One line, e.g. "ats sim: --out: missing value (got
 *  the option '--help'); a file named like an option needs ./ before it", and ATS_EXIT_USAGE; else 0.
 *  A `flag` without a leading '-' names a positional argument ("OUT"): "OUT: '-x' looks like an option". */
int ats_cli_file_value(const char *cmd, const char *flag, const char *value);
/** Up-front check of an output flag's path (ats_cli_file_value, also for a positional argument such as
 *  quantize's "OUT": `ats quantize IN - ...` wrote a file named '-'; then atsc_out_check; NULL = not given: 0;
 *  "" refused). Prints "ats <cmd>: <flag>: <path>: <why>" and returns ATS_EXIT_USAGE when it cannot be
 *  written (cli/cli_out.c). */
int ats_cli_check_out(const char *cmd, const char *flag, const char *path);
/** ats_cli_check_out for a flag whose file is JSON (the bench result files, profile's hardware profile):
 *  a path that does not end in ".json" is refused too (`bench sched --out r.h5` wrote JSON into r.h5), one
 *  line "ats <cmd>: <flag>: <path>: <what> is written as JSON: give a file name ending in .json" and
 *  ATS_EXIT_USAGE, before any work. */
int ats_cli_check_json_out(const char *cmd, const char *flag, const char *path, const char *what);
/** For a getopt loop: 1 (with one line "--NAME given twice ('a', then 'b')" on stderr) when option
 *  character c (a value-taking option) was already seen in `seen` (zeroed by the caller, 256 slots
 *  of the previous values' pointers), else records optarg and returns 0. Options that may repeat
 *  (lists such as sweep's --trace) are simply not passed here. */
int ats_cli_once(const char *cmd, const char *seen[256], int c, const char *name, const char *optarg_);
/** The value options seen so far by ats_cli_once_opt (zero it: `ats_cli_seen seen = {0};`). */
#define ATS_CLI_SEEN_MAX 64
typedef struct ats_cli_seen {
    int n;
    int id[ATS_CLI_SEEN_MAX];          /* getopt ids */
    const char *val[ATS_CLI_SEEN_MAX]; /* their first values (borrowed from argv) */
} ats_cli_seen;
struct option;
/** ats_cli_once for any getopt id c: a letter or a long-only id >= 256 (sim_cli's SIMF_*). The
 *  option is named by the long name of the first entry of `opts` with val c ("--NAME"), else by
 *  its letter ("-n"); the line and the return value are ats_cli_once's. Returns 0 (records nothing)
 *  for ':' and '?', for an option of `opts` without a value and when optarg_ is NULL, so a getopt
 *  loop may call it first for every c; options that may repeat (lists) are not passed here. */
int ats_cli_once_opt(const char *cmd, ats_cli_seen *seen, const struct option *opts, int c, const char *optarg_);

/** Long runs that stop early and keep what they did (record, stress): SIGINT, SIGTERM and SIGHUP set
 *  ats_cli_stop (and ats_cli_stop_sig to the signal) instead of killing the process. SIGINT and SIGTERM
 *  are caught also where the parent ignored them (a non-interactive shell starts `ats record ... &` with
 *  SIGINT ignored: `kill -INT` must still stop it); an ignored SIGHUP stays ignored (nohup). */
extern volatile sig_atomic_t ats_cli_stop, ats_cli_stop_sig;
void ats_cli_catch_stop_signals(void);
/** For commands that die of a stop signal (sweep): SIGINT and SIGTERM given common/outfile's handler
 *  (temporaries removed, then the default action: exit status 130, 143) also where the parent ignored
 *  them, as ats_cli_catch_stop_signals. */
void ats_cli_take_stop_signals(void);
/** rc, or, when a stop signal was caught: flush stdio and die of that signal (exit status 128 + sig:
 *  130 SIGINT, 143 SIGTERM, 129 SIGHUP, as `ats sim` after Ctrl-C). */
int ats_cli_exit_after_signal(int rc);

/** `ats run`'s prompt against the session's context: a prompt longer than ctx [tokens] is refused (one line,
 *  ATS_EXIT_USAGE); *n_gen is limited to what fits after it (ctx - n_prompt + 1: the last sampled token needs
 *  no forward), with a note on stderr. ATS_EXIT_OK otherwise. */
int ats_cli_fit_context(int64_t n_prompt, int64_t ctx, int64_t *n_gen);

/* Subcommands (each in cli/cmd_<name>.c). */
int ats_cmd_inspect(int argc, char **argv);
int ats_cmd_sim(int argc, char **argv);   /* cli/cmd_sim.c */
int ats_cmd_sweep(int argc, char **argv); /* cli/cmd_sweep.c */
int ats_cmd_bench(int argc, char **argv); /* `ats bench <what>` dispatcher (cli/cmd_bench.c) */
int ats_bench_sched(int argc, char **argv);   /* `ats bench sched` (cli/cmd_bench_sched.c) */
int ats_bench_sim(int argc, char **argv);     /* `ats bench sim` (cli/cmd_bench_sim.c) */
int ats_bench_kernels(int argc, char **argv); /* `ats bench kernels` (cli/cmd_bench_kernels.c) */
int ats_bench_model(int argc, char **argv);   /* `ats bench model` (cli/cmd_bench_model.c; bench/model.h) */
/* What the `ats bench` subcommands share (cli/cmd_bench.c): a sink whose table goes to stdout and whose
 * notes go to stderr as "ats CMD: line" (cmd borrowed, e.g. "bench kernels"); and the result file:
 * nothing when out is NULL (no --out), else doc written through common/outfile with jansson's `flags`,
 * "wrote OUT" on `said` (stdout, stderr or NULL) and ATS_EXIT_OK, or one error line and ATS_EXIT_FAIL. */
bench_sink ats_cli_bench_sink(const char *cmd);
int ats_cli_bench_write(const char *cmd, const char *out, json_t *doc, size_t flags, FILE *said);
struct ats_arch;
struct ats_graph_opts;
struct ats_graph;
/* `ats inspect --policy P --vram-budget B`: placement, GPU bytes, predicted latency, plan (cli/inspect_plan.c),
 * printed to `out`; errors to stderr (the exit code returned) */
int ats_inspect_plan(const struct ats_arch *arch, const struct ats_graph_opts *go, const struct ats_graph *g,
                     const char *policy, uint64_t budget, const char *hw_name, int64_t chunk, int64_t gen, FILE *out);
int ats_cmd_trace(int argc, char **argv);
int ats_cmd_record(int argc, char **argv);
int ats_cmd_stress(int argc, char **argv);
int ats_cmd_run(int argc, char **argv);
int ats_cmd_quantize(int argc, char **argv);
int ats_cmd_validate(int argc, char **argv); /* cli/cmd_validate.c */
int ats_cmd_profile(int argc, char **argv); /* cli/cmd_profile.c (bench/profile.h) */

#endif
