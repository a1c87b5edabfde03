/*
 * test_cli_out — output files of `ats` ($ATS_BIN) when things go wrong, as a fresh user met them:
 *  - a full disk, played by RLIMIT_FSIZE with SIGXFSZ ignored (writes fail with EFBIG; no root needed):
 *    `sim --out`, `run --out`, `sim --timeline`, `trace synth --out`, `bench sched --out` exit 1 (a
 *    normal exit, not SIGSEGV: HDF5 crashed at exit after a failed close), with one line
 *    "FILE: write failed: File too large", and leave neither FILE nor FILE.tmp.*; with SIGXFSZ at its
 *    default the process dies of it and still leaves no temporary;
 *  - SIGPIPE (stdout closed under `ats run --out`), SIGINT, SIGQUIT and SIGHUP mid-write: no temporary left;
 *  - `ats sweep --out s.h5 &` from a script (SIGINT ignored by the shell) stopped by kill -INT: status 130,
 *    no s.h5, no temporary;
 *  - a file option given the next option as its value (`sim --out --help` wrote a file named
 *    --help), or "-", in every command: exit 2, one line, nothing written;
 *  - a dangling symbolic link and paths under /sys as OUT: refused before any work (exit 2);
 *  - a JSON file (bench sched/model/sim/kernels --out, profile --out) named other than *.json: exit 2, one
 *    line naming the file and what is written, nothing written.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[256];
static const char *bin;
static char err[1 << 16];

enum { STDOUT_NULL, STDOUT_FILE, STDOUT_CLOSED_PIPE, STDOUT_FULL };

/* Runs `$ATS_BIN <args>` through sh in dir with stderr in dir/err.txt (read into err), stdout as
 * asked, RLIMIT_FSIZE fsize bytes (0: none) and SIGXFSZ ignored when ign_xfsz; returns the wait
 * status. */
static int spawn(const char *dir, const char *args, long fsize, int ign_xfsz, int out_mode)
{
    char ef[512], cmd[4096];
    snprintf(ef, sizeof ef, "%s/err.txt", dir);
    snprintf(cmd, sizeof cmd, "exec '%s' %s", bin, args);
    fflush(NULL);
    /* a limit below 1 KiB would cut stderr's own file: stderr then goes through a pipe (read after the
       child ends: its few lines fit the pipe's buffer) */
    int ep[2] = {-1, -1};
    if (fsize > 0 && fsize < 1024 && pipe(ep) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(97);
        if (ep[1] >= 0) {
            close(ep[0]);
            dup2(ep[1], 2);
            close(ep[1]);
        } else if (!freopen(ef, "w", stderr)) {
            _exit(96);
        }
        if (out_mode == STDOUT_CLOSED_PIPE) {
            int p[2];
            if (pipe(p) != 0) _exit(95);
            close(p[0]); /* the reader went away (`| head -c 3` after its bytes) */
            dup2(p[1], 1);
            close(p[1]);
        } else if (!freopen(out_mode == STDOUT_FILE ? "out.txt" : out_mode == STDOUT_FULL ? "/dev/full" : "/dev/null", "w",
                            stdout)) {
            _exit(94);
        }
        struct rlimit core = {0, 0};
        setrlimit(RLIMIT_CORE, &core); /* SIGQUIT and SIGXFSZ dump core by default */
        if (fsize > 0) {
            struct rlimit fs = {(rlim_t)fsize, (rlim_t)fsize};
            if (setrlimit(RLIMIT_FSIZE, &fs) != 0) _exit(93);
        }
        signal(SIGXFSZ, ign_xfsz ? SIG_IGN : SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(92);
    }
    int status = -1;
    if (ep[1] >= 0) close(ep[1]);
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        if (ep[0] >= 0) close(ep[0]);
        return -1;
    }
    if (ep[0] >= 0) {
        ssize_t n = read(ep[0], err, sizeof err - 1);
        err[n > 0 ? n : 0] = '\0';
        close(ep[0]);
        return status;
    }
    FILE *f = fopen(ef, "r");
    size_t n = f ? fread(err, 1, sizeof err - 1, f) : 0;
    err[n] = '\0';
    if (f) fclose(f);
    return status;
}

/* Entries of dir other than the test's own (err.txt, out.txt and those in keep, space-separated),
 * into buf; returns their number. */
static int others(const char *dir, const char *keep, char *buf, size_t len)
{
    DIR *d = opendir(dir);
    int n = 0;
    buf[0] = '\0';
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *s = e->d_name;
        if (!strcmp(s, ".") || !strcmp(s, "..") || !strcmp(s, "err.txt") || !strcmp(s, "out.txt")) continue;
        char pad[300];
        snprintf(pad, sizeof pad, " %s ", s);
        char kp[600];
        snprintf(kp, sizeof kp, " %s ", keep ? keep : "");
        if (strstr(kp, pad)) continue;
        n++;
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s ", s);
    }
    if (d) closedir(d);
    return n;
}

static void fresh_dir(char *dir, size_t len, const char *name)
{
    snprintf(dir, len, "%s/%s", tmpdir, name);
    CHECK(mkdir(dir, 0755) == 0);
}

static const char tiny_model[] =
    "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 256, \"intermediate_size\": 512,\n"
    " \"moe_intermediate_size\": 256, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,\n"
    " \"num_key_value_heads\": 2, \"head_dim\": 64, \"vocab_size\": 300, \"num_experts\": 8,\n"
    " \"num_experts_per_tok\": 2, \"shared_experts\": 1, \"shared_expert_intermediate_size\": 256,\n"
    " \"tie_word_embeddings\": false, \"qk_norm\": true, \"max_position_embeddings\": 128,\n"
    " \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-06, \"rope_type\": \"neox\",\n"
    " \"default_quant\": \"q4_k_m\", \"source\": \"test_cli_out: a tiny qwen3moe\"}\n";

/* A full disk: every writer exits 1 with "FILE: write failed: File too large", leaves nothing. */
static void test_disk_full(void)
{
    static const struct { const char *name, *args, *file; long limit; } cases[] = {
        {"sim-out", "sim --policy layer --requests 1 --out r.h5", "r.h5", 8192},
        {"sim-out-ops", "sim --policy layer,ats --requests 2 --ops --out r.h5", "r.h5", 200 * 1024},
        {"run-out", "run --model ../tiny.json --dummy-weights --prompt-tokens 9 -n 4 --out r.h5", "r.h5", 4096},
        {"sim-timeline", "sim --policy layer --requests 1 --timeline t.json", "t.json", 4096},
        {"synth-out", "trace synth --out t.h5", "t.h5", 4096},
        {"bench-out", "bench sched --runs 1 --out b.json", "b.json", 512},
        {"synth-create", "trace synth --out t.h5", "t.h5", 1}, /* fails in H5Fcreate: "HDF5 refused it" before */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[400], left[2048], want[300];
        fresh_dir(dir, sizeof dir, cases[i].name);
        int st = spawn(dir, cases[i].args, cases[i].limit, 1, STDOUT_NULL);
        snprintf(want, sizeof want, "%s: write failed: File too large", cases[i].file);
        CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "ats %s (file size limit %ld): status %#x%s, stderr '%s'",
                  cases[i].args, cases[i].limit, st, WIFSIGNALED(st) ? " (a signal)" : "", err);
        CHECK_MSG(strstr(err, want) != NULL, "ats %s: stderr lacks '%s': '%s'", cases[i].args, want, err);
        CHECK_MSG(others(dir, NULL, left, sizeof left) == 0, "ats %s: left %s", cases[i].args, left);
    }
    /* SIGXFSZ at its default action: the process dies of it, its temporary removed first */
    char dir[400], left[2048];
    fresh_dir(dir, sizeof dir, "xfsz");
    int st = spawn(dir, "sim --policy layer --requests 1 --out r.h5", 8192, 0, STDOUT_NULL);
    CHECK_MSG(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGXFSZ, "ats sim under ulimit -f: status %#x", st);
    CHECK_MSG(others(dir, NULL, left, sizeof left) == 0, "ats sim killed by SIGXFSZ: left %s", left);
}

/* Standard output on a full disk (`ats sim > res.csv`): exit 1 and "standard output: write failed" (exit 0
 * with an empty or cut file before); stderr (the same size limit) has room for the one line. */
static void test_stdout_full(void)
{
    static const struct { const char *name, *args; } cases[] = {
        {"stdout-sim", "sim --policy all --requests 1 --prompt 64 --gen 4 --trace none --format csv"},
        {"stdout-inspect", "inspect --model ../tiny.json"},
        {"stdout-show", "trace show fig13-synth"},
        {"stdout-run", "run --model ../tiny.json --dummy-weights --prompt-tokens 9 -n 200 --print-ids"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[400];
        fresh_dir(dir, sizeof dir, cases[i].name);
        int st = spawn(dir, cases[i].args, 300, 1, STDOUT_FILE);
        /* run's statistics lines fill stderr's 300 bytes first: its exit status says it */
        CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
                      (strstr(err, "standard output: write failed") || strncmp(cases[i].args, "run ", 4) == 0),
                  "ats %s > file under a 300-byte limit: status %#x, stderr '%s'", cases[i].args, st, err);
    }
    /* /dev/full (every write ENOSPC): help, --version and the usage of every way in (they exited 0) */
    if (access("/dev/full", W_OK) == 0) {
        static const char *const full[] = {"help", "--version", "help sim", "sim help", "help trace synth",
                                           "trace synth help", "sim --help", "inspect"};
        for (size_t i = 0; i < sizeof full / sizeof full[0]; i++) {
            char d[400], name[32];
            snprintf(name, sizeof name, "stdout-devfull%zu", i);
            fresh_dir(d, sizeof d, name);
            int stf = spawn(d, full[i], 0, 0, STDOUT_FULL);
            CHECK_MSG(stf != -1 && WIFEXITED(stf) && WEXITSTATUS(stf) == 1 &&
                          strstr(err, "standard output: write failed: No space left on device"),
                      "ats %s > /dev/full: status %#x, stderr '%s'", full[i], stf, err);
        }
    }
    /* the same commands with room: exit 0, no such line */
    char dir[400];
    fresh_dir(dir, sizeof dir, "stdout-room");
    int st = spawn(dir, cases[1].args, 0, 1, STDOUT_FILE);
    CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && !strstr(err, "standard output"),
              "ats %s > file: status %#x, stderr '%s'", cases[1].args, st, err);
}

/* The reader of stdout went away mid-run (`ats run --out r.h5 | head -c 3`): SIGPIPE, no temporary. */
static void test_sigpipe(void)
{
    char dir[400], left[2048];
    fresh_dir(dir, sizeof dir, "pipe");
    int st = spawn(dir, "run --model ../tiny.json --dummy-weights --prompt-tokens 9 -n 100 --print-ids --out r.h5", 0,
                   0, STDOUT_CLOSED_PIPE);
    CHECK_MSG(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE, "ats run | closed: status %#x, stderr '%s'", st,
              err);
    CHECK_MSG(others(dir, NULL, left, sizeof left) == 0, "ats run killed by SIGPIPE: left %s", left);
}

static int has_tmp(const char *dir)
{
    char left[2048];
    others(dir, NULL, left, sizeof left);
    return strstr(left, ".tmp.") != NULL;
}

/* SIGINT (Ctrl-C), SIGQUIT (Ctrl-\) and SIGHUP while a timeline is being written: the temporary goes with
 * the process, which dies of the signal, and no half timeline is left under the final name either. */
static void test_kill(int sig, const char *name)
{
    char dir[400], ef[500];
    fresh_dir(dir, sizeof dir, name);
    snprintf(ef, sizeof ef, "%s/err.txt", dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit core = {0, 0};
        setrlimit(RLIMIT_CORE, &core);
        if (chdir(dir) != 0 || !freopen("/dev/null", "w", stdout) || !freopen(ef, "w", stderr)) _exit(99);
        execl(bin, "ats", "sim", "--trace", "none", "--policy", "ats", "--gen", "30000", "--timeline", "big.json",
              (char *)NULL);
        _exit(98);
    }
    int seen = 0;
    for (int i = 0; i < 3000 && !seen; i++) {
        seen = has_tmp(dir);
        if (!seen) usleep(10000);
    }
    CHECK_MSG(seen, "no big.json.tmp.* appeared in %s", dir);
    usleep(100000); /* mid-write */
    kill(pid, sig);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == sig, "ats sim, %s: status %#x", name, status);
    char left[2048];
    CHECK_MSG(others(dir, NULL, left, sizeof left) == 0, "ats sim killed by %s: left %s", name, left);
}

/* `ats sweep ... --out s.h5 &` from a script: the shell starts it with SIGINT ignored, and `kill -INT PID` did
 * nothing (the sweep ran to its end and wrote s.h5). It dies of the signal now (the shell's $? 130, as after
 * Ctrl-C) and leaves neither s.h5 nor a temporary. */
static void test_sweep_background_sigint(void)
{
    char dir[400], script[2048], f[500];
    fresh_dir(dir, sizeof dir, "sweep-bg");
    /* 40 points, several seconds on one thread: the signal comes mid-run */
    snprintf(script, sizeof script,
             "cd '%s' || exit 1; '%s' sweep --trace fig13-synth --eps 0.05:0.5:0.05 --interval 1:4:1 --threads 1 --policy ats "
             "--duration 60 --out s.h5 >/dev/null 2>err.txt & echo $! >pid.txt; wait $!; echo $? >rc.txt",
             dir, bin);
    fflush(NULL);
    pid_t sh = fork();
    if (sh == 0) {
        signal(SIGINT, SIG_DFL); /* the shell, not the test's own disposition, makes the job ignore it */
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(98);
    }
    snprintf(f, sizeof f, "%s/pid.txt", dir);
    long pid = 0;
    for (int i = 0; i < 500 && pid <= 0; i++) {
        char *t = tu_slurp(f, NULL);
        if (t) pid = strtol(t, NULL, 10);
        free(t);
        if (pid <= 0) usleep(10000);
    }
    CHECK_MSG(pid > 0, "no pid of the background sweep in %s", f);
    usleep(1500000); /* the sweep under way */
    if (pid > 0) kill((pid_t)pid, SIGINT);
    int st = 0;
    CHECK(waitpid(sh, &st, 0) == sh);
    snprintf(f, sizeof f, "%s/rc.txt", dir);
    char *rc = tu_slurp(f, NULL);
    snprintf(f, sizeof f, "%s/err.txt", dir);
    char *e = tu_slurp(f, NULL);
    CHECK_MSG(rc && atoi(rc) == 128 + SIGINT, "ats sweep & then kill -INT: exit status %s (want %d), stderr '%s'",
              rc ? rc : "?", 128 + SIGINT, e ? e : "");
    free(rc);
    free(e);
    char left[2048];
    CHECK_MSG(others(dir, "pid.txt rc.txt", left, sizeof left) == 0, "ats sweep & then kill -INT: left %s", left);
}

/* A file option followed by another option (or "-"): refused in every command, nothing written. */
static void test_option_as_value(void)
{
    static const struct { const char *args, *want; } cases[] = {
        {"sim --out --help", "ats sim: --out: missing value (got the option '--help'); a file named like an option "
                             "needs ./ before it"},
        {"sim --policy layer --timeline --help", "ats sim: --timeline: missing value (got the option '--help')"},
        {"sim --out --ops", "ats sim: --out: missing value (got the option '--ops')"},
        {"sim --trace --help", "ats sim: --trace: missing value (got the option '--help')"},
        {"sim --model --help", "ats sim: --model: missing value (got the option '--help')"},
        {"sim --hw --ops", "ats sim: --hw: missing value (got the option '--ops')"},
        {"sweep --out --help", "ats sweep: --out: missing value (got the option '--help')"},
        {"sweep --eps 0.1 --interval 5 --trace --help", "ats sweep: --trace: missing value (got the option '--help')"},
        {"run --model ../tiny.json --dummy-weights -n 2 --out --help", "ats run: --out: missing value"},
        {"run --model --help", "ats run: --model: missing value"},
        {"inspect --model --help", "ats inspect: --model: missing value"},
        {"inspect --policy layer --hw --help", "ats inspect: --hw: missing value"},
        {"bench sched --out --help", "ats bench sched: --out: missing value"},
        {"bench sched --hw --help", "ats bench sched: --hw: missing value"},
        {"bench sim --out --help", "ats bench sim: --out: missing value"},
        {"bench kernels --out --help", "ats bench kernels: --out: missing value"},
        {"trace synth --out --help", "ats trace synth: --out: missing value"},
        {"trace import x.csv --resource cpu --out --help", "ats trace import: --out: missing value"},
        {"record --out --help", "ats record: --out: missing value"},
        {"record --save-baseline --help", "ats record: --save-baseline: missing value"},
        {"stress --log --help", "ats stress: --log: missing value"},
        {"stress --calibrate --help", "ats stress: --calibrate: missing value"},
        /* "-" is standard output nowhere in ats: not a file of that name either */
        {"sim --policy layer --requests 1 --out -", "ats sim: --out: '-' (standard input or output) is not accepted"},
        {"sim --policy layer --requests 1 --timeline -", "ats sim: --timeline: '-' (standard input or output)"},
        {"trace synth --out -", "ats trace synth: --out: '-' (standard input or output)"},
        {"sim --trace -", "ats sim: --trace: '-' (standard input or output)"},
    };
    char dir[400];
    fresh_dir(dir, sizeof dir, "optval");
    char csv[500];
    snprintf(csv, sizeof csv, "%s/x.csv", dir);
    tu_write_text(csv, "t,v\n0,0.5\n1,0.7\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = spawn(dir, cases[i].args, 0, 0, STDOUT_FILE);
        char out[4096] = "", left[2048], of[500];
        snprintf(of, sizeof of, "%s/out.txt", dir);
        char *o = tu_slurp(of, NULL);
        if (o) snprintf(out, sizeof out, "%s", o);
        free(o);
        CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && tu_count_lines(err) == 1 &&
                      strstr(err, cases[i].want),
                  "ats %s: status %#x, stderr '%s' (want '%s')", cases[i].args, st, err, cases[i].want);
        CHECK_MSG(out[0] == '\0', "ats %s: printed '%.200s'", cases[i].args, out);
        CHECK_MSG(others(dir, "x.csv", left, sizeof left) == 0, "ats %s: wrote %s", cases[i].args, left);
    }
    /* ./ before it: a file of that name */
    int st = spawn(dir, "sim --policy layer --requests 1 --out ./--help", 0, 0, STDOUT_NULL);
    CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "ats sim --out ./--help: status %#x, '%s'", st, err);
    char f[500];
    snprintf(f, sizeof f, "%s/--help", dir);
    struct stat sb;
    CHECK(stat(f, &sb) == 0 && S_ISREG(sb.st_mode));
}

/* A JSON result file under another extension (`bench sched --out X.h5` wrote JSON into X.h5): refused up front,
 * one line naming the file and what is written, nothing printed or written. */
static void test_json_out(void)
{
    static const char res[] = "the result file (parameters, commit, machine, figures) is written as JSON: give a "
                              "file name ending in .json";
    static const struct { const char *args, *file, *what; } cases[] = {
        {"bench sched --runs 1 --out X.h5", "X.h5", res},
        {"bench sched --runs 1 --out X", "X", res},
        {"bench sched --runs 1 --out X.JSON.h5", "X.JSON.h5", res},
        {"bench model --dummy-weights -m ../tiny.json -p 8 -n 0 -r 1 --out X.h5", "X.h5",
         "the result file (rows, parameters, commit, machine) is written as JSON"},
        {"bench sim --quick --out X.csv", "X.csv", res},
        {"bench kernels --skip-gpu --out X.h5", "X.h5", "the result file (parameters, commit, machine, rows) is written"},
        {"profile --model ../tiny.json --dummy-weights --skip-gpu --out X.h5", "X.h5", "the hardware profile is written as JSON"},
    };
    char dir[400];
    fresh_dir(dir, sizeof dir, "json-out");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = spawn(dir, cases[i].args, 0, 0, STDOUT_FILE);
        char want[600], of[500], left[2048];
        snprintf(want, sizeof want, "--out: %s: %s", cases[i].file, cases[i].what);
        snprintf(of, sizeof of, "%s/out.txt", dir);
        char *o = tu_slurp(of, NULL);
        CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && tu_count_lines(err) == 1 && strstr(err, want),
                  "ats %s: status %#x, stderr '%s' (want '%s')", cases[i].args, st, err, want);
        CHECK_MSG(!o || !o[0], "ats %s: printed '%.200s'", cases[i].args, o);
        free(o);
        CHECK_MSG(others(dir, NULL, left, sizeof left) == 0, "ats %s: wrote %s", cases[i].args, left);
    }
}

/* A dangling link and /sys as OUT: refused up front, one line naming the path, nothing done. */
static void test_bad_targets(void)
{
    char dir[400], link[500], args[1200], left[2048];
    fresh_dir(dir, sizeof dir, "targets");
    snprintf(link, sizeof link, "%s/dangling.h5", dir);
    CHECK(symlink("no-such-file.h5", link) == 0);
    static const struct { const char *fmt, *want; } cases[] = {
        {"sim --policy layer --requests 1 --out %s", "refusing to write: it is a symbolic link to no-such-file.h5, "
                                                      "which does not exist"},
        {"sim --policy layer --requests 1 --timeline %s", "a symbolic link to no-such-file.h5"},
        {"trace synth --out %s", "a symbolic link to no-such-file.h5"},
        {"sim --policy layer --requests 1 --out /sys/x.h5", "/sys/x.h5: refusing to write: it is in /dev, /proc or /sys"},
        {"trace synth --out /sys/kernel/x.h5", "/sys/kernel/x.h5: refusing to write: it is in /dev, /proc or /sys"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, cases[i].fmt, "dangling.h5");
        int st = spawn(dir, args, 0, 0, STDOUT_FILE);
        CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && tu_count_lines(err) == 1 &&
                      strstr(err, cases[i].want),
                  "ats %s: status %#x, stderr '%s' (want '%s')", args, st, err, cases[i].want);
        CHECK_MSG(others(dir, "dangling.h5", left, sizeof left) == 0, "ats %s: wrote %s", args, left);
        struct stat sb;
        CHECK_MSG(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode), "ats %s: the link was replaced", args);
    }
}

int main(void)
{
    bin = getenv("ATS_BIN");
    if (!bin || !*bin) bin = "./build/cli/ats";
    if (!tu_tmpdir(tmpdir, sizeof tmpdir, "cli_out")) return 1; /* removed by tu_finish when every check passed */
    char model[400];
    snprintf(model, sizeof model, "%s/tiny.json", tmpdir);
    tu_write_text(model, tiny_model);
    test_disk_full();
    test_stdout_full();
    test_sigpipe();
    test_kill(SIGINT, "sigint"); /* Ctrl-C (test_cli had its own copy of this) */
    test_kill(SIGQUIT, "sigquit");
    test_kill(SIGHUP, "sighup");
    test_sweep_background_sigint();
    test_option_as_value();
    test_bad_targets();
    test_json_out();
    return tu_finish("test_cli_out");
}
