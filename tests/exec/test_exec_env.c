/*
 * test_exec_env — the executor's ATS_* environment knobs are checked, not silently ignored:
 * ex_env_check (exec/runtime/env_check.c) on every knob with values its reader accepts (ATS_OK) and values
 * it would ignore (ATS_EINVAL, one line naming the variable, the value and what is valid); unset and
 * empty mean the default. Then `ats` ($ATS_BIN) with a bad ATS_PROBE_PRIVATE (a word knob), an
 * out-of-range ATS_CPU_FEATURES (a range knob) and a bad ATS_ATTN_SHAPE: exit 2 with that line
 * before the command runs; help (`ats help run`, `ats run --help`, `ats bench kernels -h`) still works,
 * with the line as a warning. And `ats bench kernels --threads` with 0, a negative
 * number, a non-number and 99999 (which crashed libgomp before the rule of `ats run`, 1..1024): exit 2
 * with one line naming the flag and the value; a missing --model and a --prompt + --decode longer than
 * the model's context: exit 2 before any kernel is timed; --skip-cpu where no GPU part can run: nothing
 * to run, exit 2 at once.
 * Unknown names: ex_env_unknown_next names each ATS_* variable no reader knows (ATS_ATTN_SHAPES: did
 * you mean ATS_ATTN_SHAPE?) and `ats` warns with it (exit 0); every getenv("ATS_...") in the sources,
 * every $ATS_... of the scripts in traces/ and tools/ and every ATS_...= CTest sets is known
 * (ex_env_known), so no test run and no script warns. A value (or an unknown name) with control
 * characters or of any length stays one line: escaped (\n, \t, \xNN) and cut after 64 bytes ("...").
 */
#include <ctype.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ex/ops.h"
#ifdef ATS_HAVE_CUDA
#include "ex/gpu.h"
#endif
#include "testutil.h"

/* Every knob the check knows, with values that must pass and values that must not. */
typedef struct knob_case {
    const char *name;
    const char *good[6];
    const char *bad[8];
} knob_case;

static const knob_case CASES[] = {
    {"ATS_ATTN_SHAPE", {"4,1", "16,8", "0,0", "32,0", "0,3"}, {"3,0", "0,9", "16", "16,", ",8", "4,1x", "64,1", "a,b"}},
    {"ATS_CPU_FEATURES", {"0", "1", "7", "0x7", "15", "0xf"}, {"16", "-1", "abc", "08", "3 ", "0xff"}},
    {"ATS_PROBE_PRIVATE", {"0", "1"}, {"yes", "2"}},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

static void unset_all(void)
{
    for (size_t i = 0; i < N_CASES; i++) unsetenv(CASES[i].name);
}

static char tmpdir[] = "/tmp/test_exec_env.XXXXXX";
static char out[1 << 16], err[1 << 16];

static int run(const char *args)
{
    return tu_run_ats_split(NULL, args, 120, tmpdir, out, sizeof out, err, sizeof err);
}

static void test_check_function(void)
{
    char msg[512];
    unset_all();
    CHECK(ex_env_check(msg, sizeof msg) == ATS_OK && msg[0] == '\0');
    CHECK(ex_env_check(NULL, 0) == ATS_OK);
    int n_good = 0, n_bad = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        const knob_case *k = &CASES[i];
        setenv(k->name, "", 1); /* empty: the default, as every reader takes it */
        CHECK_MSG(ex_env_check(msg, sizeof msg) == ATS_OK, "%s='' refused: %s", k->name, msg);
        for (int j = 0; j < 6 && k->good[j]; j++, n_good++) {
            setenv(k->name, k->good[j], 1);
            enum ats_status st = ex_env_check(msg, sizeof msg);
            CHECK_MSG(st == ATS_OK, "%s='%s' refused: %s", k->name, k->good[j], msg);
        }
        for (int j = 0; j < 8 && k->bad[j]; j++, n_bad++) {
            setenv(k->name, k->bad[j], 1);
            msg[0] = '\0';
            enum ats_status st = ex_env_check(msg, sizeof msg);
            char want[128];
            snprintf(want, sizeof want, "%s='%s'", k->name, k->bad[j]);
            CHECK_MSG(st == ATS_EINVAL, "%s='%s' accepted", k->name, k->bad[j]);
            CHECK_MSG(strstr(msg, want) && strstr(msg, "not ") && !strchr(msg, '\n'),
                      "%s='%s': message '%s' does not name the variable, the value and what is valid", k->name,
                      k->bad[j], msg);
            CHECK(ex_env_check(NULL, 0) == ATS_EINVAL); /* no message buffer: still refused */
        }
        unsetenv(k->name);
    }
    /* the message says what is valid */
    setenv("ATS_PROBE_PRIVATE", "yes", 1);
    CHECK(ex_env_check(msg, sizeof msg) == ATS_EINVAL && strstr(msg, "one of 0, 1"));
    unsetenv("ATS_PROBE_PRIVATE");
    setenv("ATS_CPU_FEATURES", "16", 1);
    CHECK(ex_env_check(msg, sizeof msg) == ATS_EINVAL && strstr(msg, "0..15"));
    /* a short buffer is truncated, never overrun */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    CHECK(ex_env_check(tiny, sizeof tiny) == ATS_EINVAL && memchr(tiny, '\0', sizeof tiny));
    unsetenv("ATS_CPU_FEATURES");
    fprintf(stderr, "  ex_env_check: %zu knobs, %d good values accepted, %d bad refused\n", N_CASES, n_good, n_bad);
}

/* A value with control characters or of any length stays one short line: escaped, cut after 64 bytes */
static void test_value_escaped(void)
{
    char msg[512];
    unset_all();
    setenv("ATS_PROBE_PRIVATE", "1\nrm -rf /\t\x1b[31mred\r", 1);
    CHECK(ex_env_check(msg, sizeof msg) == ATS_EINVAL);
    CHECK_MSG(strstr(msg, "ATS_PROBE_PRIVATE='1\\nrm -rf /\\t\\x1b[31mred\\r': not one of 0, 1") && !strchr(msg, '\n') &&
                  !strchr(msg, '\t') && !strchr(msg, '\x1b') && !strchr(msg, '\r'),
              "control characters not escaped: '%s'", msg);
    char big[4096];
    memset(big, 'A', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big + 100, "\n", 1);
    unsetenv("ATS_PROBE_PRIVATE");
    setenv("ATS_CPU_FEATURES", big, 1);
    CHECK(ex_env_check(msg, sizeof msg) == ATS_EINVAL);
    char want[128];
    snprintf(want, sizeof want, "ATS_CPU_FEATURES='%.64s...': not a bit mask 0..15", big);
    CHECK_MSG(strstr(msg, want) && strlen(msg) < 200 && !strchr(msg, '\n'), "long value not cut: '%.300s'", msg);
    unsetenv("ATS_CPU_FEATURES");
    /* a cut never splits a UTF-8 character: 63 ASCII bytes then 'é' (2 bytes) keeps 63 */
    char utf[80];
    memset(utf, 'b', 63);
    strcpy(utf + 63, "\xc3\xa9\xc3\xa9");
    setenv("ATS_PROBE_PRIVATE", utf, 1);
    CHECK(ex_env_check(msg, sizeof msg) == ATS_EINVAL);
    snprintf(want, sizeof want, "='%.63s...'", utf);
    CHECK_MSG(strstr(msg, want), "UTF-8 cut: '%s'", msg);
    unsetenv("ATS_PROBE_PRIVATE");
    /* `ats`: one line */
    setenv("ATS_ATTN_SHAPE", "4,1\n\nsecond line", 1);
    int rc = run("inspect --model qwen3-14b");
    CHECK_MSG(rc == 2 && tu_count_lines(err) == 1 && strstr(err, "ATS_ATTN_SHAPE='4,1\\n\\nsecond line'"),
              "rc %d, stderr '%s'", rc, err);
    unsetenv("ATS_ATTN_SHAPE");
    /* an unknown name with a newline in it (env(1) can make one; the shell that tu_run_ats starts drops
     * it, so the function): escaped too */
    setenv("ATS_X\nY", "1", 1);
    size_t cur = 0;
    CHECK(ex_env_unknown_next(&cur, msg, sizeof msg) == 1);
    CHECK_MSG(strstr(msg, "ATS_X\\nY is not a variable") && !strchr(msg, '\n'), "'%s'", msg);
    unsetenv("ATS_X\nY");
}

/* ---- unknown names -------------------------------------------------------------------------- */

/* the known names found in the sources, and how many reads were scanned */
static int n_scanned, n_files;

/* Every name matching `prefix`ATS_[A-Z0-9_]+ in text is known to ex_env_known */
static void scan_text(const char *path, const char *text, const char *prefix)
{
    size_t pl = strlen(prefix);
    for (const char *p = strstr(text, prefix); p; p = strstr(p + 1, prefix)) {
        const char *name = p + pl;
        if (strncmp(name, "ATS_", 4) != 0) continue;
        char buf[96];
        size_t n = 0;
        while (n + 1 < sizeof buf && (isupper((unsigned char)name[n]) || isdigit((unsigned char)name[n]) || name[n] == '_'))
            buf[n] = name[n], n++;
        buf[n] = '\0';
        if (n <= 4) continue; /* "ATS_..." in a comment */
        n_scanned++;
        CHECK_MSG(ex_env_known(buf), "%s reads %s, which exec/runtime/env_check.c does not know ('%.40s')", path, buf, p);
    }
}

static int scan_file(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)ftw;
    if (type != FTW_F) return 0;
    const char *dot = strrchr(path, '.'), *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    int src = dot && (!strcmp(dot, ".c") || !strcmp(dot, ".h") || !strcmp(dot, ".cu") || !strcmp(dot, ".cuh"));
    int sh = dot && !strcmp(dot, ".sh") && (strstr(path, "/traces/") || strstr(path, "/tools/"));
    int cm = !strcmp(base, "CMakeLists.txt") || (dot && !strcmp(dot, ".cmake"));
    if (!src && !sh && !cm) return 0;
    char *text = tu_slurp(path, NULL);
    if (!text) return 0;
    n_files++;
    if (src) {
        scan_text(path, text, "getenv(\"");
        scan_text(path, text, "resolve(name, \""); /* cli_util.c: the directory variables */
    }
    if (sh) scan_text(path, text, "${");
    if (cm) { /* ENVIRONMENT "ATS_A=...;ATS_B=..." */
        scan_text(path, text, "ENVIRONMENT \"");
        scan_text(path, text, ";");
    }
    free(text);
    return 0;
}

static void test_unknown_names(void)
{
    unset_all();
    char msg[512];
    /* the test run's own environment (CTest sets ATS_SHARED_DIR, ATS_SOURCE_DIR, ATS_BIN) is clean */
    size_t cur = 0;
    while (ex_env_unknown_next(&cur, msg, sizeof msg)) CHECK_MSG(0, "unknown in the test environment: %s", msg);
    const char *known[] = {"ATS_ATTN_SHAPE", "ATS_TEST_SEED", "ATS_SHARED_DIR", "ATS_SOURCE_DIR", "ATS_BIN",
                           "ATS_UPDATE_GOLDEN", "ATS_MODELS_DIR", "ATS_HW_DIR", "ATS_TRACES_DIR", "ATS_BENCH_SCHED"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) CHECK_MSG(ex_env_known(known[i]), "%s", known[i]);
    for (size_t i = 0; i < N_CASES; i++) CHECK_MSG(ex_env_known(CASES[i].name), "%s", CASES[i].name);
    CHECK(!ex_env_known("ATS_ATTN_SHAPES") && !ex_env_known("ATS_") && !ex_env_known("ATTN_SHAPE"));
    setenv("ATS_TEST_SEED", "7", 1);
    setenv("ATS_ATTN_SHAPES", "4,1", 1);
    setenv("ATS_ZZZZZZZZZZZZZZZZ", "1", 1);
    setenv("XATS_ATTN_SHAPE", "v9", 1); /* not ATS_*: not ours */
    int n = 0, typo = 0, far = 0;
    for (cur = 0; ex_env_unknown_next(&cur, msg, sizeof msg); n++) {
        CHECK_MSG(!strchr(msg, '\n'), "two lines: %s", msg);
        if (strstr(msg, "ATS_ATTN_SHAPES is not a variable") && strstr(msg, "did you mean ATS_ATTN_SHAPE?"))
            typo++;
        else if (strstr(msg, "ATS_ZZZZZZZZZZZZZZZZ is not a variable") && strstr(msg, "the closest known one is ATS_"))
            far++;
        else
            CHECK_MSG(0, "unexpected: %s", msg);
    }
    CHECK_MSG(n == 2 && typo == 1 && far == 1, "%d unknown (typo %d, far %d)", n, typo, far);
    cur = 0;
    CHECK(ex_env_unknown_next(&cur, NULL, 0) == 1); /* no message buffer: still found */
    /* `ats`: a warning line each, the command runs */
    int rc = run("inspect --model qwen3-14b");
    CHECK_MSG(rc == 0 && out[0] && tu_count_lines(err) == 2 &&
                  strstr(err, "ats inspect: warning: environment: ATS_ATTN_SHAPES is not a variable ats reads "
                              "(ignored): did you mean ATS_ATTN_SHAPE?\n") &&
                  strstr(err, "ats inspect: warning: environment: ATS_ZZZZZZZZZZZZZZZZ "),
              "rc %d, stderr '%s'", rc, err);
    unsetenv("ATS_ATTN_SHAPES");
    unsetenv("ATS_ZZZZZZZZZZZZZZZZ");
    unsetenv("XATS_ATTN_SHAPE");
    rc = run("inspect --model qwen3-14b");
    CHECK_MSG(rc == 0 && err[0] == '\0', "known names only: rc %d, stderr '%s'", rc, err);
    unsetenv("ATS_TEST_SEED");
    /* every name the sources, scripts and CTest read is known */
    const char *dirs[] = {"exec", "load", "cli", "common", "sim", "sched", "tests", "cmake", "traces", "tools"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char d[1024];
        tu_source_path(d, sizeof d, dirs[i]);
        nftw(d, scan_file, 16, FTW_PHYS);
    }
    CHECK_MSG(n_files > 50 && n_scanned >= 30, "scanned %d files, %d reads: is ATS_SOURCE_DIR right?", n_files,
              n_scanned);
    fprintf(stderr, "  unknown names: %d reads of ATS_* variables in %d files, all known\n", n_scanned, n_files);
}

/* `ats` refuses a bad knob before any command; the line names the command, the variable and the value */
static void test_cli_env(void)
{
    unset_all();
    CHECK_MSG(run("inspect --model qwen3-14b") == 0, "ats inspect with no knob set: %s", err);
    const struct { const char *var, *val, *must; } bad[] = {
        {"ATS_PROBE_PRIVATE", "yes", "one of 0, 1"},
        {"ATS_CPU_FEATURES", "300", "0..15"},
        {"ATS_ATTN_SHAPE", "3,0", "NW,S"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i].var, bad[i].val, 1);
        char want[128], args[512];
        snprintf(want, sizeof want, "%s='%s'", bad[i].var, bad[i].val);
        int rc = run("inspect --model qwen3-14b");
        CHECK_MSG(rc == 2 && strstr(err, "ats inspect: environment: ") && strstr(err, want) && strstr(err, bad[i].must) &&
                      tu_count_lines(err) == 1 && out[0] == '\0',
                  "%s=%s ats inspect: rc %d, stdout '%.80s', stderr '%s'", bad[i].var, bad[i].val, rc, out, err);
        rc = run("run --model /nonexistent.gguf");
        CHECK_MSG(rc == 2 && strstr(err, "ats run: environment: ") && strstr(err, want) && tu_count_lines(err) == 1,
                  "%s=%s ats run: rc %d, stderr '%s'", bad[i].var, bad[i].val, rc, err);
        snprintf(args, sizeof args, "bench kernels --skip-cpu --skip-gpu --skip-model --out %s/bk.json", tmpdir);
        rc = run(args);
        CHECK_MSG(rc == 2 && strstr(err, want), "%s=%s ats bench kernels: rc %d, stderr '%s'", bad[i].var, bad[i].val,
                  rc, err);
        /* help and --version still answer (to find out what is valid) */
        CHECK(run("--version") == 0 && strstr(out, "ats "));
        CHECK(run("help run") == 0 && strstr(out, "usage: ats run"));
        /* and `ats <cmd> --help` (-h, after other flags, a subcommand's): the usage, a warning line, exit 0 */
        const char *helps[] = {"run --help", "run -n 3 -h", "bench kernels --help", "inspect --model x --help",
                               "bench help"};
        for (size_t j = 0; j < sizeof helps / sizeof helps[0]; j++) {
            rc = run(helps[j]);
            CHECK_MSG(rc == 0 && strstr(out, "usage: ats ") && strstr(err, "warning: environment: ") &&
                          strstr(err, want) && tu_count_lines(err) == 1,
                      "%s=%s ats %s: rc %d, stdout '%.80s', stderr '%s'", bad[i].var, bad[i].val, helps[j], rc, out,
                      err);
        }
        /* "--help" after "--" is no request for help */
        CHECK(run("run --model /nonexistent.gguf -- --help") == 2 && strstr(err, "ats run: environment: "));
        unsetenv(bad[i].var);
    }
    /* good and empty values pass */
    setenv("ATS_PROBE_PRIVATE", "1", 1);
    setenv("ATS_CPU_FEATURES", "3", 1);
    setenv("ATS_ATTN_SHAPE", "", 1);
    CHECK_MSG(run("inspect --model qwen3-14b") == 0, "good knobs refused: %s", err);
    unset_all();
}

/* --threads: the rule of `ats run` (1..1024), one line, exit 2, before any work */
static void test_bench_threads(void)
{
    unset_all();
    const char *bad[] = {"0", "-3", "abc", "99999", "1025", "4x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[256], want[64];
        snprintf(args, sizeof args, "bench kernels --threads %s --skip-gpu --skip-model --out %s/bk.json", bad[i], tmpdir);
        snprintf(want, sizeof want, "'%s'", bad[i]);
        int rc = run(args);
        CHECK_MSG(rc == 2 && strstr(err, "--threads") && strstr(err, want) && strstr(err, "1..1024") &&
                      tu_count_lines(err) == 1,
                  "ats %s: rc %d, stderr '%s'", args, rc, err);
    }
    /* the same values through `ats run`, whose rule this is */
    CHECK(run("run --model /nonexistent.gguf --threads 99999") == 2 && strstr(err, "--threads"));
}

/* --model and --prompt / --decode are checked before the kernel timing (which takes minutes): exit 2, one
 * line naming the flag and the value, no result file, within seconds */
static void test_bench_upfront(void)
{
    unset_all();
    const struct { const char *flags, *must; } bad[] = {
        {"--model no-such-model-xyz", "--model no-such-model-xyz"},
        {"--model /no/such/dir/m.json", "/no/such/dir/m.json"},
        {"--prompt 100000", "--prompt 100000"},
        {"--prompt 40000 --decode 961", "40961 tokens"}, /* qwen3-14b: 40960 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[512], res[400];
        snprintf(res, sizeof res, "%s/bk-upfront.json", tmpdir);
        snprintf(args, sizeof args, "bench kernels %s --out %s", bad[i].flags, res);
        int rc = tu_run_ats_split(NULL, args, 10, tmpdir, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 2 && strstr(err, bad[i].must) && tu_count_lines(err) == 1 && out[0] == '\0' &&
                      access(res, F_OK) != 0,
                  "ats %s: rc %d, stdout '%.200s', stderr '%s'", args, rc, out, err);
    }
}

/* --skip-cpu where the GPU part cannot run (this build has no CUDA backend, or no device), or with
 * --skip-gpu: nothing to run, exit 2 at once with one line (it built the dummy model for ~25 s, then
 * measured nothing, exit 0) */
static void test_bench_nothing_to_run(void)
{
    unset_all();
    int gpu = 0;
#ifdef ATS_HAVE_CUDA
    gpu = ex_gpu_device_count() > 0;
#endif
    const char *cases[] = {"--skip-cpu --skip-gpu", "--skip-cpu --skip-gpu --skip-model", "--skip-cpu",
                           "--skip-cpu --skip-model"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int no_gpu_case = !strstr(cases[i], "--skip-gpu");
        if (no_gpu_case && gpu) continue; /* the GPU part runs there */
        char args[512], res[400];
        snprintf(res, sizeof res, "%s/bk-nothing.json", tmpdir);
        snprintf(args, sizeof args, "bench kernels %s --out %s", cases[i], res);
        int rc = tu_run_ats_split(NULL, args, 10, tmpdir, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 2 && strstr(err, "ats bench kernels: nothing to run: --skip-cpu") &&
                      strstr(err, no_gpu_case ? "the GPU part cannot run: " : "--skip-gpu") && tu_count_lines(err) == 1 &&
                      out[0] == '\0' && access(res, F_OK) != 0,
                  "ats %s: rc %d, stdout '%.200s', stderr '%s'", args, rc, out, err);
    }
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_check_function();
    test_value_escaped();
    test_cli_env();
    test_bench_threads();
    test_bench_upfront();
    test_bench_nothing_to_run();
    test_unknown_names();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_exec_env");
}
