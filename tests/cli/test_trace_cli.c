/*
 * test_trace_cli — `ats trace compare|import|show` and `ats sweep` as a fresh user attacks them:
 * compare that skips segments (margin, offset, short recording) says so and fails --max-err when a
 * loaded segment or everything went uncompared; sweep's point that completes no request ('-', empty
 * CSV field, exit 1), outputs naming an input and an empty --policy refused up front (exit 2, one
 * line); import's invalid dates, hex numbers, repeated --filter and negative values; show/import's
 * min/max including the last sample; --trace FILE resolution of a local file without .h5.
 * A value option given twice: refused by every command (one line naming it and both values, exit 2),
 * lists (sweep --trace, synth --cpu) still repeat; sweep --trace '' is an empty entry, not a missing
 * --trace; compare with a one-sample (0 s) target says so and exits 1; record --device N that it
 * cannot use says so; a short option given last without its value says it needs one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[256];
static char out[1 << 20], err[1 << 16];

/* Runs `ats <args>` (from dir when non-NULL); captures stdout and stderr; returns the exit code. */
static int run_in(const char *dir, const char *args)
{
    return tu_run_ats_split(dir, args, 300, tmpdir, out, sizeof out, err, sizeof err);
}

static int run(const char *args) { return run_in(NULL, args); }

static const char *tmp(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
    return buf;
}

/* ---------------------------------------------------------------- compare ---------------------- */

static void test_compare_skipped(void)
{
    char tgt[400], rec[400], shortrec[400], off[400], args[2048];
    tmp(tgt, sizeof tgt, "tgt.h5");
    tmp(rec, sizeof rec, "rec.h5");
    tmp(shortrec, sizeof shortrec, "short.h5");
    tmp(off, sizeof off, "off.h5");
    /* target: cpu 1 / 0.4 / 1 over 20 s each; the recording matches it exactly; a short one ends at 25 s;
     * an off one is 30 % low in the loaded phase */
    snprintf(args, sizeof args, "trace synth --duration 60 --cpu step:20=0.4,40=1 --out %s", tgt);
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    snprintf(args, sizeof args, "trace synth --duration 60 --cpu step:20=0.4,40=1 --out %s", rec);
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    snprintf(args, sizeof args, "trace synth --duration 25 --cpu step:20=0.4 --out %s", shortrec);
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    snprintf(args, sizeof args, "trace synth --duration 60 --cpu step:20=0.28,40=1 --out %s", off);
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);

    /* everything compared, exact: exit 0 */
    snprintf(args, sizeof args, "trace compare %s %s --margin 5 --max-err 0.1", rec, tgt);
    int rc = run(args);
    CHECK_MSG(rc == 0 && strstr(out, "compared 5 segments; not compared: 0 loaded segments") &&
              strstr(out, "max |rel.err| = 0.0000") && !strstr(out, "not compared: outside") , "%s: rc %d: %s%s",
              args, rc, out, err);
    /* a real error still fails */
    snprintf(args, sizeof args, "trace compare %s %s --margin 5 --max-err 0.1", off, tgt);
    rc = run(args);
    CHECK_MSG(rc == 1 && strstr(out, "max |rel.err| = 0.3000"), "%s: rc %d: %s%s", args, rc, out, err);

    /* --loaded-only: an unloaded segment 15 % low (another resource's load, e.g. copies slowing the CPU)
     * fails the plain check, passes when only loaded segments are judged; a loaded error still fails;
     * a target without loaded segments fails (nothing judged) */
    char interf[400], idle[400];
    tmp(interf, sizeof interf, "interf.h5");
    tmp(idle, sizeof idle, "idle.h5");
    snprintf(args, sizeof args, "trace synth --duration 60 --cpu step:20=0.4,40=0.85 --out %s", interf);
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    snprintf(args, sizeof args, "trace synth --duration 60 --out %s", idle);
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    snprintf(args, sizeof args, "trace compare %s %s --margin 5 --max-err 0.1", interf, tgt);
    rc = run(args);
    CHECK_MSG(rc == 1 && strstr(out, "max |rel.err| = 0.1500 (loaded segments: 0.0000 over 1; unloaded: 0.1500 over 4)"),
              "%s: rc %d: %s%s", args, rc, out, err);
    snprintf(args, sizeof args, "trace compare %s %s --margin 5 --max-err 0.1 --loaded-only", interf, tgt);
    rc = run(args);
    CHECK_MSG(rc == 0 && strstr(out, "   45.00     55.00   1.0000   0.8500   -0.150"), "%s: rc %d: %s%s", args, rc, out, err);
    snprintf(args, sizeof args, "trace compare %s %s --margin 5 --max-err 0.1 --loaded-only", off, tgt);
    rc = run(args);
    CHECK_MSG(rc == 1 && strstr(out, "loaded segments: 0.3000 over 1"), "%s: rc %d: %s%s", args, rc, out, err);
    /* a loaded target just below 1 does not print as 1.0000 (pass U, D8) */
    char near1[400];
    tmp(near1, sizeof near1, "near1.h5");
    snprintf(args, sizeof args, "trace synth --duration 60 --cpu step:20=0.999999,40=1 --out %s", near1);
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    snprintf(args, sizeof args, "trace compare %s %s --margin 5", rec, near1);
    rc = run(args);
    CHECK_MSG(rc == 0 && strstr(out, "   25.00     35.00 0.999999") && strstr(out, "loaded segments: 0.6000 over 1"),
              "%s: rc %d: %s%s", args, rc, out, err);
    /* a failed check says so on stderr (one line); --loaded-only needs --max-err; misspelled forms are named
     * (fresh-user pass U: D4, D5, D6, D7, D12) */
    snprintf(args, sizeof args, "trace compare %s %s --margin 5 --max-err 0.1", off, tgt);
    rc = run(args);
    CHECK_MSG(rc == 1 && tu_count_lines(err) == 1 && strstr(err, "--max-err 0.1: max |rel.err| 0.3000"),
              "%s: rc %d: stderr '%s'", args, rc, err);
    static const struct { const char *opts, *want; int no_stdout; } usage_bad[] = {
        {"--loaded-only", "give --max-err", 1},
        {"-loaded-only", "'-l'", 0},
        {"--loaded-only=1 --max-err 0.1", "takes no value", 0},
        {"3 --max-err 0.1", "the third '3'", 0},
    };
    for (size_t k = 0; k < sizeof usage_bad / sizeof usage_bad[0]; k++) {
        snprintf(args, sizeof args, "trace compare %s %s %s", rec, tgt, usage_bad[k].opts);
        rc = run(args);
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, usage_bad[k].want) && (!usage_bad[k].no_stdout || !out[0]),
                  "%s: rc %d: %s", args, rc, err);
    }
    snprintf(args, sizeof args, "trace compare %s %s --margin 5 --max-err 0.1 --loaded-only", rec, idle);
    rc = run(args);
    CHECK_MSG(rc == 1 && strstr(out, "loaded segments: none compared") && tu_count_lines(err) == 1 &&
              strstr(err, "no loaded segment"), "%s: rc %d: %s%s", args, rc, out, err);

    /* --margin 20: every 20 s segment is too short (gpu/pcie: one 60 s segment, compared) */
    snprintf(args, sizeof args, "trace compare %s %s --margin 20 --max-err 0.1", rec, tgt);
    rc = run(args);
    CHECK_MSG(rc == 1, "%s: rc %d (compared no cpu segment, must fail): %s", args, rc, out);
    CHECK_MSG(strstr(out, "not compared: 1 loaded segments") && strstr(out, "not longer than 2*margin") &&
              strstr(out, "   20.00     40.00   0.4000"), "%s: %s", args, out);
    CHECK_MSG(tu_count_lines(err) == 1 && strstr(err, "loaded segment") && strstr(err, "--margin 20"),
              "%s: stderr '%s'", args, err);
    /* without --max-err: the same lines, exit 0 */
    snprintf(args, sizeof args, "trace compare %s %s --margin 20", rec, tgt);
    rc = run(args);
    CHECK_MSG(rc == 0 && strstr(out, "not compared: 1 loaded segments"), "%s: rc %d: %s", args, rc, out);
    /* --margin 40: nothing at all compared (all unloaded skipped ones too) */
    snprintf(args, sizeof args, "trace compare %s %s --margin 40 --max-err 0.1", rec, tgt);
    rc = run(args);
    CHECK_MSG(rc == 1 && strstr(out, "compared 0 segments") && strstr(err, "no segment compared"),
              "%s: rc %d: %s%s", args, rc, out, err);

    /* --offset 1000: past the end of the recording */
    snprintf(args, sizeof args, "trace compare %s %s --offset 1000 --max-err 0.1", rec, tgt);
    rc = run(args);
    CHECK_MSG(rc == 1 && strstr(out, "outside the recording") && strstr(out, "compared 0 segments"),
              "%s: rc %d: %s%s", args, rc, out, err);
    /* a recording that ends inside the loaded segment: 5 s of it, shorter than 2*margin */
    snprintf(args, sizeof args, "trace compare %s %s --margin 5 --max-err 0.1", shortrec, tgt);
    rc = run(args);
    CHECK_MSG(rc == 1 && strstr(out, "partly outside the recording") && strstr(out, "not compared: 1 loaded"),
              "%s: rc %d: %s%s", args, rc, out, err);
    CHECK_MSG(strstr(out, "\ngpu        5.00     20.00   1.0000   1.0000   +0.000  (segment 0.00..60.00 s; the recording "
                          "covers 0.00..25.00 of it)"), "%s: %s", args, out);
    /* bad numbers: one line naming the option */
    snprintf(args, sizeof args, "trace compare %s %s --margin -3", rec, tgt);
    rc = run(args);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "--margin '-3'"), "%s: rc %d: %s", args, rc, err);
    CHECK(run("trace compare --help") == 0 && strstr(out, "not compared"));
}

/* ---------------------------------------------------------------- sweep ------------------------ */

/* A point that completes no request: '-' in the table (the row is there), empty CSV fields (no
 * "nan"), exit 1 with a stderr line naming trace and policy, as ats sim does on the same input. */
static void test_sweep_no_request(void)
{
    const char *base = "sweep --trace fig13-synth --duration 5 --policy ats,layer --eps 0.1 --interval 1";
    char args[1024];
    CHECK(run("sim --trace fig13-synth --duration 5 --policy layer") == 1); /* the reference behaviour */
    int rc = run(base);
    char *row = strstr(out, "\nfig13-synth          layer ");
    CHECK_MSG(rc == 1 && row && strstr(row, " n/a ") && strstr(row, "  -  "), "%s: rc %d: %s%s", base, rc, out, err);
    CHECK_MSG(strstr(err, "fig13-synth / layer: no request completed") && !strstr(out, "nan"), "%s: %s", base, err);
    snprintf(args, sizeof args, "%s --format csv", base);
    rc = run(args);
    CHECK_MSG(rc == 1 && strstr(out, "\nfig13-synth,layer,,,,0,,,,0.000000,\n") && !strstr(out, "nan"),
              "%s: rc %d: %s", args, rc, out);
    /* long enough: every point completes requests, exit 0, numbers everywhere */
    rc = run("sweep --trace fig13-synth --duration 60 --policy ats,layer --eps 0.1 --interval 1");
    row = strstr(out, "\nfig13-synth          layer ");
    CHECK_MSG(rc == 0 && row && !strstr(row, "  -  ") && !strstr(err, "no request"), "rc %d: %s%s", rc, out, err);
}

/* an output naming an input, an empty --policy: exit 2, one line naming it, nothing done */
static void test_refused_up_front(void)
{
    char h5[400], csv[400], args[2048];
    tmp(h5, sizeof h5, "in.h5");
    tmp(csv, sizeof csv, "in.csv");
    snprintf(args, sizeof args, "trace synth --duration 20 --cpu const:0.5 --out %s", h5);
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    FILE *f = fopen(csv, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("t,v\n0,1\n1,2\n", f);
        fclose(f);
    }
    size_t n0 = 0, n1 = 0;
    char *before = tu_slurp(h5, &n0);
    const char *fmts[] = {"sweep --trace %s --eps 0.1 --interval 1 --duration 2 --out %s",
                          "trace import %s --resource cpu --out %s"};
    const char *ins[] = {h5, csv};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, fmts[k], ins[k], ins[k]);
        int rc = run(args);
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, ins[k]) && strstr(err, "input") &&
                  out[0] == '\0', "ats %s: rc %d: stdout '%.200s' stderr '%s'", args, rc, out, err);
    }
    char *after = tu_slurp(h5, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
    char *c = tu_slurp(csv, &n1);
    CHECK_MSG(c && strcmp(c, "t,v\n0,1\n1,2\n") == 0, "the CSV changed: '%s'", c ? c : "(gone)");
    free(c);
    /* --policy "" and ",", empty entries, a trace twice */
    const char *pols[] = {"\"\"", ",", "ats,", ",ats", "ats,,layer", "ats --trace fig13-synth",
                          "ats --trace fig13-synth,fig13-synth"};
    for (int k = 0; k < 7; k++) {
        snprintf(args, sizeof args, "sweep --trace fig13-synth --eps 0.1 --interval 1 --duration 2 --policy %s", pols[k]);
        int rc = run(args);
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, k < 5 ? "--policy" : "given twice") && out[0] == '\0',
                  "ats %s: rc %d: stdout '%.200s' stderr '%s'", args, rc, out, err);
    }
}

/* a value option given twice is refused (record, stress, trace compare): the last one used to win */
static void test_option_twice(void)
{
    const char *cmds[] = {"record --out a.h5 --baseline x.txt --baseline y.txt",
                          "stress --trace fig13-synth --log a.csv --log b.csv",
                          "trace compare a.h5 b.h5 --margin 5 --margin 6"};
    int rc0 = run("trace compare only-one.h5");
    CHECK_MSG(rc0 == 2 && tu_count_lines(err) == 1 && strstr(err, "need two files"), "trace compare, one file: rc %d: '%s'",
              rc0, err);
    for (int k = 0; k < 3; k++) {
        int rc = run(cmds[k]);
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "given twice"), "ats %s: rc %d: '%s'", cmds[k], rc,
                  err);
    }
    /* the other commands (the last value used to win silently): the option and both values named, nothing
     * done (no stdout); a short and a long spelling of one option count as one; shared sim flags too */
    struct { const char *cmd, *line; } twice[] = {
        {"sim --eps 0.1 --duration 1 --eps 0.2", "ats sim: --eps given twice ('0.1', then '0.2')"},
        {"sim --trace fig13-synth --trace none", "ats sim: --trace given twice ('fig13-synth', then 'none')"},
        {"sim --policy ats --policy layer", "ats sim: --policy given twice ('ats', then 'layer')"},
        {"sim --vram-budget 5GiB --vram-budget 4GiB", "ats sim: --vram-budget given twice ('5GiB', then '4GiB')"},
        {"run --model a.gguf -m b.gguf", "ats run: --model given twice ('a.gguf', then 'b.gguf')"},
        {"run --model a.gguf -n 3 -n 4", "ats run: -n given twice ('3', then '4')"},
        {"run --model a.gguf --temp 0 --temp 1", "ats run: --temp given twice ('0', then '1')"},
        {"sweep --trace fig13-synth --eps 0.1 --interval 1 --interval 2", "ats sweep: --interval given twice ('1', then '2')"},
        {"sweep --trace fig13-synth --eps 0.1 --interval 1 --policy ats --policy layer",
         "ats sweep: --policy given twice ('ats', then 'layer')"},
        {"sweep --trace fig13-synth --eps 0.1 --interval 1 --duration 2 --duration 3",
         "ats sweep: --duration given twice ('2', then '3')"},
        {"bench sched --runs 3 --runs 5 --out b.json", "ats bench sched: --runs given twice ('3', then '5')"},
        {"bench kernels --reps 3 --reps 4 --out k.json", "ats bench kernels: --reps given twice ('3', then '4')"},
        {"bench sched --seed 1", "ats bench sched: unknown or ambiguous option '--seed'"},
        {"bench sched --runs", "ats bench sched: --runs: needs a value"},
        {"trace show a.h5 b.h5", "ats trace show: one FILE|NAME, got 2 ('a.h5', 'b.h5')"},
        {"bench sim --threads 1 --threads 2", "ats bench sim: --threads given twice ('1', then '2')"},
        {"inspect --model qwen3-14b --model qwen3-8b", "ats inspect: --model given twice ('qwen3-14b', then 'qwen3-8b')"},
        {"quantize a.gguf b.gguf --type q8_0 -t q4_0", "ats quantize: --type given twice ('q8_0', then 'q4_0')"},
        {"trace synth --out x.h5 --dt 1 --dt 2", "ats trace synth: --dt given twice ('1', then '2')"},
        {"trace synth --out x.h5 --out y.h5", "ats trace synth: --out given twice ('x.h5', then 'y.h5')"},
        {"trace import a.csv --resource cpu --resource gpu --out x.h5",
         "ats trace import: --resource given twice ('cpu', then 'gpu')"},
        /* a shape whose change comes after the last sample never shows: refused (was a flat trace, exit 0) */
        {"trace synth --out x.h5 --duration 10 --cpu step:5=0.5,20=1",
         "--cpu 'step:5=0.5,20=1': its last step at 20 s, at or after --duration 10 s"},
        {"trace synth --out x.h5 --gpu thermal:20,5,0.5 --duration 10", "--gpu 'thermal:20,5,0.5': it starts at 20 s"},
        {"trace synth --out x.h5 --duration 10 --pcie bursts:30,2,0.5", "first burst starts at the earliest at 28 s"},
        /* at the last sample: flat too (the mean over [0, last) never sees it); an empty field refused */
        {"trace synth --out x.h5 --duration 100 --cpu thermal:100,10,0.5", "it starts at 100 s, at or after --duration"},
        {"trace synth --out x.h5 --duration 100 --cpu step:100=0.5", "its step at 100 s, at or after --duration"},
        {"trace synth --out x.h5 --cpu step:5=0.5,", "--cpu 'step:5=0.5,': an empty field"},
        {"trace synth --out x.h5 --cpu ramp:1,1,2,0.5,", "--cpu 'ramp:1,1,2,0.5,': four numbers T0,A0,T1,A1"},
        /* each refusal says what is wrong (all said "bad arguments for this shape") */
        {"trace synth --out x.h5 --cpu step:5=0.5,3=0.7", "the times T must increase"},
        {"trace synth --out x.h5 --cpu step:5=1.5", "each A must be in (0, 1]"},
        {"trace synth --out x.h5 --cpu ramp:2,1,1,0.5", "need 0 <= T0 < T1"},
        {"trace synth --out x.h5 --cpu bursts:2,3,0.5", "need 0 < L < P"},
        {"trace synth --out x.h5 --cpu bursts:5,5,0.5", "(L = P: const:A)"}, /* read 1 at its end */
    };
    for (size_t k = 0; k < sizeof twice / sizeof twice[0]; k++) {
        int rc = run_in(tmpdir, twice[k].cmd); /* where a binary that takes the last value writes x.h5, y.h5 */
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, twice[k].line) && !out[0],
                  "ats %s: rc %d: stdout '%.200s' stderr '%s'", twice[k].cmd, rc, out, err);
    }
    /* lists by design still repeat: synth's SPECs multiply (0.5 x 0.5), sweep's traces add up */
    char h5[400], args[1024];
    snprintf(args, sizeof args, "trace synth --duration 10 --cpu const:0.5 --cpu const:0.5 --out %s",
             tmp(h5, sizeof h5, "twice.h5"));
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    snprintf(args, sizeof args, "trace show %s", h5);
    CHECK_MSG(run(args) == 0 && strstr(out, "\ncpu      0.2500"), "%s: %s", args, out);
    snprintf(args, sizeof args, "sweep --trace fig13-synth --trace %s --eps 0.1 --interval 1 --duration 2 --policy layer", h5);
    int rc = run(args);
    CHECK_MSG(rc != 2 && strstr(out, "\nfig13-synth ") && strstr(out, "\ntwice "), "%s: rc %d: %s%s", args, rc, out, err);
}

/* A value option given last without its value: "option -n needs a value", not "unknown option '-n'"
 * (short letters; long options say "--model: needs a value"); an unknown letter is still unknown */
static void test_missing_value(void)
{
    struct { const char *cmd, *line; } cases[] = {
        {"run -n", "ats run: option -n needs a value (ats run --help)"},
        {"run --model a.gguf -m", "ats run: option -m needs a value"},
        {"run --model a.gguf -p", "ats run: option -p needs a value"},
        {"run --model", "ats run: --model: needs a value"},
        {"run -x", "ats run: unknown option '-x'"},
        {"quantize a.gguf b.gguf -t", "ats quantize: option -t needs a value"},
        {"bench kernels -r", "ats bench kernels: option -r needs a value"},
        {"bench kernels --skip-gpu -t", "ats bench kernels: option -t needs a value"},
        {"bench kernels --reps", "ats bench kernels: --reps: needs a value"},
        {"bench kernels -z", "ats bench kernels: unknown option '-z'"},
        {"trace synth --duration 10 -o", "ats trace synth: option -o needs a value"},
        {"record -o", "ats record: option -o needs a value"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int rc = run_in(tmpdir, cases[k].cmd);
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, cases[k].line) && !out[0],
                  "ats %s: rc %d: stdout '%.200s' stderr '%s'", cases[k].cmd, rc, out, err);
    }
}

/* sweep --trace '': an empty entry, as "a,,b" (it said --trace was required); alone or next to a trace */
static void test_sweep_empty_trace(void)
{
    const char *cmds[] = {"sweep --trace '' --eps 0.1 --interval 1",
                          "sweep --trace '' --trace fig13-synth --eps 0.1 --interval 1 --duration 2",
                          "sweep --trace fig13-synth --trace '' --eps 0.1 --interval 1 --duration 2"};
    for (int k = 0; k < 3; k++) {
        int rc = run(cmds[k]);
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 &&
                      ((strstr(err, "--trace '") && strstr(err, "an empty entry")) ||
                       strstr(err, "--trace: empty value")) &&
                  !strstr(err, "required") && !out[0], "ats %s: rc %d: stdout '%.200s' stderr '%s'", cmds[k], rc, out,
                  err);
    }
    int rc = run("sweep --eps 0.1 --interval 1");
    CHECK_MSG(rc == 2 && strstr(err, "--trace are required"), "no --trace: rc %d: %s", rc, err);
}

/* a target of one sample covers 0 s: one stderr line saying so, exit 1 (a comparison of nothing), with
 * or without --max-err; the same recording against a real target still compares */
static void test_compare_one_sample(void)
{
    char csv[400], one[400], rec[400], args[2048];
    tu_write_text(tmp(csv, sizeof csv, "one.csv"), "t,v\n0,0.5\n");
    snprintf(args, sizeof args, "trace import %s --resource cpu --out %s", csv, tmp(one, sizeof one, "one.h5"));
    CHECK_MSG(run(args) == 0 && strstr(out, "1 samples"), "%s: %s%s", args, out, err);
    snprintf(args, sizeof args, "trace synth --duration 30 --cpu const:0.5 --out %s", tmp(rec, sizeof rec, "rec30.h5"));
    CHECK_MSG(run(args) == 0, "%s: %s", args, err);
    const char *extra[] = {"", " --max-err 0.1", " --margin 0"};
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "trace compare %s %s%s", rec, one, extra[k]);
        int rc = run(args);
        CHECK_MSG(rc == 1 && tu_count_lines(err) == 1 && strstr(err, one) &&
                  strstr(err, "the target covers 0 s (one sample)") && strstr(out, "compared 0 segments"),
                  "%s: rc %d: stdout '%s' stderr '%s'", args, rc, out, err);
    }
    snprintf(args, sizeof args, "trace compare %s %s --max-err 0.1", rec, rec);
    int rc = run(args);
    CHECK_MSG(rc == 0 && !strstr(err, "covers 0 s"), "%s: rc %d: %s%s", args, rc, out, err);
}

/* record --device N that it cannot use (no such device, or --cpu-only): one stderr line naming it; the
 * recording (here: the baseline alone) still runs on the CPU and says so, as before */
static void test_record_device_unused(void)
{
    char base[400], args[1024];
    tmp(base, sizeof base, "base.txt");
    struct { const char *flags, *line; } c[] = {
        {"--device 4096", "ats record: --device 4096: no such CUDA device here; no GPU or PCIe probe runs"},
        {"--cpu-only --device 0", "ats record: --device 0: not used (--cpu-only); no GPU or PCIe probe runs"},
    };
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "record --save-baseline %s --baseline-s 0.2 %s", base, c[k].flags);
        int rc = run(args);
        CHECK_MSG(rc == 0 && strstr(err, c[k].line) && strstr(err, "recording the CPU only"), "%s: rc %d: %s", args,
                  rc, err);
    }
    snprintf(args, sizeof args, "record --save-baseline %s --baseline-s 0.2 --cpu-only", base);
    int rc = run(args);
    CHECK_MSG(rc == 0 && !strstr(err, "--device"), "%s: rc %d: %s", args, rc, err);
}

/* ---------------------------------------------------------------- import ----------------------- */

/* invalid dates and hex: exit 2, one line with file, line, column, value; a second --filter: exit 2
 * naming both; negative values: imported, one stderr line saying how many and what became of them */
static void test_import_values(void)
{
    char csv[400], h5[400], args[2048];
    tmp(csv, sizeof csv, "imp.csv");
    tmp(h5, sizeof h5, "imp.h5");
    struct { const char *text, *must; } bad[] = {
        {"t,v\n2023-02-28 00:00:00,1\n2023-02-30 00:00:00,2\n", "line 3, column '0': bad time '2023-02-30 00:00:00'"},
        {"t,v\n0,1\n1,0x10\n", "line 3, column '1': bad value '0x10'"},
    };
    for (int k = 0; k < 2; k++) {
        tu_write_text(csv, bad[k].text);
        snprintf(args, sizeof args, "trace import %s --resource cpu --out %s", csv, h5);
        int rc = run(args);
        CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, csv) && strstr(err, bad[k].must) && !out[0],
                  "%s: rc %d: %s", bad[k].text, rc, err);
    }
    tu_write_text(csv, "t,v,a,b\n0,1,x,y\n1,-2,x,y\n2,4,x,z\n3,-3,x,y\n4,2,w,y\n");
    snprintf(args, sizeof args, "trace import %s --filter a=x --filter b=y --resource cpu --out %s", csv, h5);
    int rc = run(args);
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "--filter given twice ('a=x', then 'b=y')") && !out[0],
              "%s: rc %d: %s", args, rc, err);
    snprintf(args, sizeof args, "trace import %s --filter a=x --resource cpu --percentile 100 --out %s", csv, h5);
    rc = run(args);
    CHECK_MSG(rc == 0 && tu_count_lines(err) == 1 && strstr(err, "2 rows have negative values (first -2 at line 3)") &&
              strstr(err, "floor availability 0.01"), "%s: rc %d: %s", args, rc, err);
}

/* the last sample counts in min/max (import's message and show): a two-sample 0.667, 1 trace */
static void test_last_sample(void)
{
    char csv[400], h5[400], args[2048];
    tmp(csv, sizeof csv, "two.csv");
    tmp(h5, sizeof h5, "two.h5");
    tu_write_text(csv, "t,v\n0,0.667\n2,1\n");
    snprintf(args, sizeof args, "trace import %s --resource gpu --percentile 100 --out %s", csv, h5);
    int rc = run(args);
    CHECK_MSG(rc == 0 && strstr(out, "gpu availability mean 0.6670 min 0.6670 max 1.0000"), "%s: rc %d: %s%s", args,
              rc, out, err);
    snprintf(args, sizeof args, "trace show %s", h5);
    rc = run(args);
    CHECK_MSG(rc == 0 && strstr(out, "\ngpu      0.6670   0.6670   1.0000"), "%s: rc %d: %s", args, rc, out);
    CHECK(run("trace show --help") == 0 && strstr(out, "including the last"));
}

/* --trace/show NAME without '/' or .h5: a local regular file of that name is used (and a non-HDF5 one
 * is called that, naming the trace-name path too); a missing one names both places looked at */
static void test_local_trace_name(void)
{
    char p[400], args[2048];
    tu_write_text(tmp(p, sizeof p, "base.txt"), "not a trace\n");
    char h5[400], bare[400];
    snprintf(args, sizeof args, "trace synth --duration 30 --gpu const:0.5 --out %s", tmp(h5, sizeof h5, "mytrace.h5"));
    CHECK(run(args) == 0);
    CHECK(rename(h5, tmp(bare, sizeof bare, "mytrace")) == 0);
    int rc = run_in(tmpdir, "trace show mytrace");
    CHECK_MSG(rc == 0 && strstr(out, "\ngpu      0.5000"), "trace show mytrace (a local HDF5 file): rc %d: %s%s", rc,
              out, err);
    rc = run_in(tmpdir, "trace show base.txt");
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "base.txt: not an HDF5 file") &&
              strstr(err, "local file") && strstr(err, "/base.txt.h5"), "trace show base.txt: rc %d: %s", rc, err);
    rc = run_in(tmpdir, "sim --trace base.txt --duration 1");
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "base.txt: not an HDF5 file"), "sim: rc %d: %s", rc,
              err);
    rc = run_in(tmpdir, "sweep --trace nothere.txt --eps 0.1 --interval 1");
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "/nothere.txt.h5: cannot open") &&
              strstr(err, "no local file nothere.txt"), "sweep --trace nothere.txt: rc %d: %s", rc, err);
    /* a local directory of that name, an empty name: said as such (fresh-user pass U, D11) */
    char sub[400];
    CHECK(mkdir(tmp(sub, sizeof sub, "adir"), 0755) == 0);
    rc = run_in(tmpdir, "trace show adir");
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "adir here is a directory, not a trace"),
              "trace show adir: rc %d: %s", rc, err);
    /* options: '--' ends them, other dashed words are refused as options, not looked up as traces (pass V, V6) */
    rc = run_in(tmpdir, "trace show -- mytrace");
    CHECK_MSG(rc == 0 && strstr(out, "\ngpu      0.5000"), "trace show -- mytrace: rc %d: %s%s", rc, out, err);
    rc = run_in(tmpdir, "trace show --bogus");
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "unknown option '--bogus'"), "trace show --bogus: rc %d: %s",
              rc, err);
    rc = run_in(tmpdir, "trace show mytrace -x");
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "unknown option '-x'"), "trace show mytrace -x: rc %d: %s",
              rc, err);
    rc = run_in(tmpdir, "trace show ''");
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "the trace name was empty"), "trace show '': rc %d: %s",
              rc, err);
}

int main(void)
{
    setenv("ATS_PROBE_PRIVATE", "1", 1); /* the ats record runs leave no shared probe matrix in /dev/shm */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ats-test-trace-cli-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_compare_skipped();
    test_sweep_no_request();
    test_refused_up_front();
    test_import_values();
    test_last_sample();
    test_local_trace_name();
    test_option_twice();
    test_missing_value();
    test_sweep_empty_trace();
    test_compare_one_sample();
    test_record_device_unused();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_trace_cli");
}
