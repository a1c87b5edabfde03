/*
 * test_sweep_mpi — `ats sweep` over MPI ranks (`mpirun -n N --oversubscribe`, with --allow-run-as-root as
 * root) gives the bytes of the single-process sweep, and the sweep's units:
 *  units    --interval 50ms:100ms:50ms stores 0.05 and 0.1 (seconds, interval_in_tpot 0) in /sweep, and
 *           --interval 1s:2s:1s is taken (one process; runs in every build)
 *  same     a 2 x 2 grid of ats plus a policy without controller: stdout and every /sweep row (memcmp)
 *           of mpirun -n 2 (1 thread each) and -n 3 (2 threads each) equal one process with 2 threads;
 *           h5diff says the files hold the same (when hdf5-tools is installed)
 *  fail     a point that fails (ATS_SWEEP_TEST_FAIL_POINT, on whichever rank gets it): the same stdout and
 *           the same stderr line naming the point as one process, exit 1
 *  mismatch ranks with another configuration (--resched-cost on rank 1) or a rank that cannot load its
 *           inputs (ATS_BENCH_SCHED) are refused before any work, rank 0 naming the field or quoting it
 *  kill     a rank killed in the middle of a point (ATS_SWEEP_TEST_KILL_RANK=1, SIGKILL): the run ends
 *           (no hang: under `timeout`) with a non-zero exit, a line naming the point in flight on rank 1,
 *           and no --out file nor temporary
 *  resume   a sweep of a sub-grid, then the whole grid with --resume under mpirun -n 2: the table and
 *           /sweep of a sweep of the whole grid at once; a --resume file written with another --prompt
 *           is refused naming the field
 * Exit 77 (skipped) when the build has no MPI, after the units checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "atsc/results.h"
#include "testutil.h"

static char tmpdir[256], ats[512], mpirun[600];
static const char *grid = "--model qwen3-14b --trace fig13-synth --trace-offset 55 --duration 8 --prompt 256 --gen 16 "
                          "--policy ats,static --interval 1:2:1";

/* runs a shell command line with stdout and stderr into tmpdir/NAME.out, NAME.err; the exit code */
static int sh(const char *name, const char *cmd)
{
    char line[8192];
    snprintf(line, sizeof line, "cd %s && timeout 300 %s > %s.out 2> %s.err", tmpdir, cmd, name, name);
    int st = system(line);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* the contents of tmpdir/NAME (malloc'd, "" when missing) */
static char *slurp(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "rb");
    char *s = calloc(1, 1 << 20);
    if (f) {
        size_t n = fread(s, 1, (1 << 20) - 1, f);
        s[n] = 0;
        fclose(f);
    }
    return s;
}

static int same_text(const char *a, const char *b)
{
    char *x = slurp(a), *y = slurp(b);
    int same = strcmp(x, y) == 0 && *x;
    if (!same) fprintf(stderr, "--- %s:\n%s--- %s:\n%s", a, x, b, y);
    free(x);
    free(y);
    return same;
}

static atsc_results_file *read_h5(const char *name)
{
    char p[512];
    ats_err e = {{0}};
    atsc_results_file *f = NULL;
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    CHECK_MSG(atsc_results_read(p, &f, &e) == ATS_OK, "%s", e.msg);
    return f;
}

/* every /sweep row bit for bit, and the configuration */
static int same_rows(const char *a, const char *b)
{
    atsc_results_file *x = read_h5(a), *y = read_h5(b);
    int same = x && y && x->has_sweep && y->has_sweep && x->n_sweep == y->n_sweep && x->n_sweep > 0 &&
               memcmp(x->sweep, y->sweep, x->n_sweep * sizeof *x->sweep) == 0 && strcmp(x->config_json, y->config_json) == 0;
    atsc_results_file_free(x);
    atsc_results_file_free(y);
    return same;
}

static void test_units(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s sweep %s --eps 0.1 --interval 50ms:100ms:50ms --out ms.h5", ats,
             "--model qwen3-14b --trace fig13-synth --trace-offset 55 --duration 8 --prompt 256 --gen 16 --policy ats");
    int rc = sh("ms", cmd);
    CHECK_MSG(rc == 0, "rc %d", rc);
    atsc_results_file *f = read_h5("ms.h5");
    CHECK(f && f->n_sweep == 2);
    if (f && f->n_sweep == 2)
        CHECK_MSG(f->sweep[0].interval == 50 * 1e-3 && f->sweep[1].interval == 100 * 1e-3 &&
                  f->sweep[0].interval_in_tpot == 0, "intervals %g %g", f->sweep[0].interval, f->sweep[1].interval);
    atsc_results_file_free(f);
    char *t = slurp("ms.out");
    CHECK_MSG(strstr(t, "interval in s") && strstr(t, "0.05 s"), "%s", t);
    free(t);
    snprintf(cmd, sizeof cmd, "%s sweep %s --eps 0.1 --interval 1s:2s:1s --format csv", ats,
             "--model qwen3-14b --trace fig13-synth --trace-offset 55 --duration 8 --prompt 256 --gen 16 --policy ats");
    rc = sh("s", cmd);
    t = slurp("s.out");
    CHECK_MSG(rc == 0 && strstr(t, "ats,0.1,1,s,") && strstr(t, "ats,0.1,2,s,"), "rc %d: %s", rc, t);
    free(t);
}

static void test_same(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s sweep %s --eps 0.1:0.2:0.1 --threads 2 --out one.h5", ats, grid);
    int rc1 = sh("one", cmd);
    snprintf(cmd, sizeof cmd, "%s -n 2 %s sweep %s --eps 0.1:0.2:0.1 --threads 1 --out two.h5", mpirun, ats, grid);
    int rc2 = sh("two", cmd);
    snprintf(cmd, sizeof cmd, "%s -n 3 %s sweep %s --eps 0.1:0.2:0.1 --threads 2 --out three.h5", mpirun, ats, grid);
    int rc3 = sh("three", cmd);
    CHECK_MSG(rc1 == 0 && rc2 == 0 && rc3 == 0, "rc %d %d %d", rc1, rc2, rc3);
    char *e = slurp("two.err");
    CHECK_MSG(strstr(e, "2 ranks x 1 threads, 5 points"), "%s", e);
    free(e);
    CHECK(same_text("one.out", "two.out"));
    CHECK(same_text("one.out", "three.out"));
    CHECK(same_rows("one.h5", "two.h5"));
    CHECK(same_rows("one.h5", "three.h5"));
    if (system("command -v h5diff > /dev/null 2>&1") == 0) {
        rc1 = sh("h5diff", "h5diff one.h5 two.h5");
        CHECK_MSG(rc1 == 0, "h5diff one.h5 two.h5: %d", rc1);
    }
}

static void test_fail(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "env ATS_SWEEP_TEST_FAIL_POINT=3 %s sweep %s --eps 0.1:0.2:0.1", ats, grid);
    int rc1 = sh("f1", cmd);
    snprintf(cmd, sizeof cmd, "%s -n 2 -x ATS_SWEEP_TEST_FAIL_POINT=3 %s sweep %s --eps 0.1:0.2:0.1 --threads 1",
             mpirun, ats, grid);
    int rc2 = sh("f2", cmd);
    CHECK_MSG(rc1 == 1 && rc2 == 1, "rc %d %d", rc1, rc2);
    CHECK(same_text("f1.out", "f2.out"));
    char *e1 = slurp("f1.err"), *e2 = slurp("f2.err");
    const char *line = "ats sweep: fig13-synth / ats / eps 0.2 / interval 2: injected failure";
    CHECK_MSG(strstr(e1, line) && strstr(e2, line), "%s\n%s", e1, e2);
    free(e1);
    free(e2);
}

/* ranks that would simulate different things (here another --resched-cost on rank 1, as another
 * ATS_BENCH_SCHED would give) are refused before any work, naming the field; so is a rank that cannot load
 * its inputs, with its own message */
static void test_mismatch(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s -n 1 %s sweep %s --eps 0.1 --resched-cost 16ms : -n 1 %s sweep %s --eps 0.1 "
             "--resched-cost 17ms", mpirun, ats, grid, ats, grid);
    int rc = sh("mm", cmd);
    char *e = slurp("mm.err");
    CHECK_MSG(rc == 2 && strstr(e, "ats sweep: rank 1 (") &&
              strstr(e, "would simulate something else than rank 0: configuration field 'resched_cost_s' is 0.016 there"),
              "rc %d: %s", rc, e);
    free(e);
    snprintf(cmd, sizeof cmd, "%s -n 1 %s sweep %s --eps 0.1 : -n 1 env ATS_BENCH_SCHED=nothere.json %s sweep %s --eps 0.1",
             mpirun, ats, grid, ats, grid);
    rc = sh("mm2", cmd);
    e = slurp("mm2.err");
    CHECK_MSG(rc == 2 && strstr(e, "ats sweep: on rank 1 (") && strstr(e, "ATS_BENCH_SCHED: 'nothere.json': cannot read it"),
              "rc %d: %s", rc, e);
    free(e);
}

static void test_kill(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s -n 2 -x ATS_SWEEP_TEST_KILL_RANK=1 %s sweep %s --eps 0.1:0.2:0.1 --threads 1 --out k.h5",
             mpirun, ats, grid);
    int rc = sh("k", cmd);
    char *e = slurp("k.err");
    CHECK_MSG(rc != 0 && rc != 124 && strstr(e, "ats sweep: stopped by a signal with") && strstr(e, "in flight: point") &&
              strstr(e, "on rank 1"), "rc %d: %s", rc, e);
    free(e);
    char p[512];
    struct stat sb;
    snprintf(p, sizeof p, "%s/k.h5", tmpdir);
    CHECK_MSG(stat(p, &sb) != 0, "%s exists", p);
    rc = sh("ls", "ls | grep -c tmp");
    char *l = slurp("ls.out");
    CHECK_MSG(atoi(l) == 0, "temporaries left: %s", l);
    free(l);
}

static void test_resume(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s sweep %s --eps 0.1 --out part.h5", ats, grid);
    int rc1 = sh("part", cmd);
    snprintf(cmd, sizeof cmd, "%s -n 2 %s sweep %s --eps 0.1:0.2:0.1 --threads 1 --resume part.h5 --out part.h5", mpirun,
             ats, grid);
    int rc2 = sh("resumed", cmd);
    snprintf(cmd, sizeof cmd, "%s sweep %s --eps 0.1:0.2:0.1 --threads 2 --out whole.h5", ats, grid);
    int rc3 = sh("whole", cmd);
    CHECK_MSG(rc1 == 0 && rc2 == 0 && rc3 == 0, "rc %d %d %d", rc1, rc2, rc3);
    char *e = slurp("resumed.err");
    CHECK_MSG(strstr(e, "--resume part.h5: 3 of 5 points taken from it"), "%s", e);
    free(e);
    CHECK(same_text("resumed.out", "whole.out"));
    CHECK(same_rows("part.h5", "whole.h5"));
    snprintf(cmd, sizeof cmd, "%s sweep %s --eps 0.1:0.2:0.1 --resume whole.h5 --gen 17", ats,
             "--model qwen3-14b --trace fig13-synth --trace-offset 55 --duration 8 --prompt 256 --policy ats,static "
             "--interval 1:2:1");
    int rc = sh("refused", cmd);
    e = slurp("refused.err");
    CHECK_MSG(rc == 2 && strstr(e, "written with other arguments: configuration field 'gen_tok' is 16 there, 17 here"),
              "rc %d: %s", rc, e);
    free(e);
}

int main(void)
{
    tu_seed("test_sweep_mpi");
    const char *bin = getenv("ATS_BIN");
    if (!tu_tmpdir(tmpdir, sizeof tmpdir, "test_sweep_mpi")) return 1;
    char cwd[256];
    /* the commands run in the scratch folder: an absolute path */
    snprintf(ats, sizeof ats, "%s%s%s", bin && bin[0] == '/' ? "" : getcwd(cwd, sizeof cwd) ? cwd : ".",
             bin && bin[0] == '/' ? "" : "/", bin ? bin : "build/cli/ats");
    test_units();
#ifdef ATS_TEST_MPIEXEC
    /* Open MPI refuses root without --allow-run-as-root; two cores run 3 ranks only with --oversubscribe */
    snprintf(mpirun, sizeof mpirun, "%s --oversubscribe%s", ATS_TEST_MPIEXEC, geteuid() == 0 ? " --allow-run-as-root" : "");
    test_same();
    test_fail();
    test_mismatch();
    test_kill();
    test_resume();
    return tu_finish("test_sweep_mpi");
#else
    int rc = tu_finish("test_sweep_mpi");
    if (rc) return rc;
    fprintf(stderr, "test_sweep_mpi: this build has no MPI (-DATS_MPI): the MPI checks did not run\n");
    return TU_SKIP;
#endif
}
