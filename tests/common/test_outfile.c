/* Output files (atsc/outfile.h): up-front refusals (missing directory, path under a regular file,
 * directory target, devices, FIFO) name the given path; tmp + commit replaces a good file only when
 * finished; abort and failed commits leave it as it was; a link to a file stays a link; a target
 * turned special during the work is not replaced; /sys and dangling links refused; SIGINT, SIGTERM,
 * SIGHUP, SIGQUIT, SIGPIPE and SIGXFSZ remove the open temporaries and the process dies of the signal
 * (an ignored SIGPIPE stays ignored), while a forked child's death leaves its parent's files; JSON
 * writer, also on a full disk (RLIMIT_FSIZE). */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "atsc/outfile.h"
#include "testutil.h"

static char tmpdir[256];

static const char *tpath(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static int exists(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0;
}

/* Writes n random bytes to path; the bytes go to buf. */
static void write_random(const char *path, unsigned char *buf, size_t n, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)tu_rand(rng);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(buf, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

static int same_content(const char *path, const unsigned char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char *got = malloc(n + 1);
    size_t m = fread(got, 1, n + 1, f);
    fclose(f);
    int ok = m == n && memcmp(got, buf, n) == 0;
    free(got);
    return ok;
}

/* Refused with a message naming `path` and not a temporary name. */
static void expect_refused(const char *path, const char *why_part)
{
    ats_err e = {{0}};
    enum ats_status st = atsc_out_check(path, &e);
    CHECK_MSG(st == ATS_EINVAL, "%s: status %d", path, (int)st);
    CHECK_MSG(strncmp(e.msg, path, strlen(path)) == 0, "message does not start with %s: %s", path, e.msg);
    CHECK_MSG(strstr(e.msg, ".tmp") == NULL, "message names a temporary: %s", e.msg);
    CHECK_MSG(strstr(e.msg, why_part) != NULL, "message lacks '%s': %s", why_part, e.msg);
    atsc_out *o = NULL;
    int before = atsc_out_registered();
    CHECK(atsc_out_open(path, &o, &e) == ATS_EINVAL && o == NULL);
    CHECK(atsc_out_registered() == before);
}

static void test_check(uint64_t *rng)
{
    unsigned char buf[64];
    write_random(tpath("regular"), buf, sizeof buf, rng);
    expect_refused(tpath("no-such-dir/x.h5"), "does not exist");
    expect_refused(tpath("regular/x.h5"), "not a directory");
    expect_refused(tmpdir, "is a directory");
    CHECK(mkdir(tpath("sub"), 0755) == 0);
    expect_refused(tpath("sub/"), "is a directory");
    CHECK(mkfifo(tpath("fifo"), 0644) == 0);
    expect_refused(tpath("fifo"), "a FIFO");
    expect_refused("/dev/null", "character device");
    if (exists("/dev/full")) expect_refused("/dev/full", "character device");
    /* streams: /dev/stdout is a link to /proc/self/fd/1, which leads to whatever file the shell
     * redirected stdout to; renaming over that file would lose it (and stderr lines in it) */
    FILE *redir = fopen(tpath("redirected"), "w");
    CHECK(redir != NULL);
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fileno(redir));
    expect_refused(fdpath, "/dev, /proc or /sys");
    /* kernel files under /sys (its cgroup folder may be a writable tmpfs) */
    expect_refused("/sys/x.h5", "/dev, /proc or /sys");
    expect_refused("/sys/kernel/x.h5", "/dev, /proc or /sys");
    /* a dangling link: replacing it by a regular file would surprise; say where it points */
    CHECK(symlink("no-such-target.h5", tpath("dangling")) == 0);
    expect_refused(tpath("dangling"), "a symbolic link to no-such-target.h5, which does not exist");
    struct stat lsb;
    CHECK(lstat(tpath("dangling"), &lsb) == 0 && S_ISLNK(lsb.st_mode));
    if (exists("/dev/stdout")) expect_refused("/dev/stdout", "refusing to write"); /* file, pipe or tty */
    CHECK(symlink(fdpath, tpath("to-fd")) == 0);
    expect_refused(tpath("to-fd"), "leads through /proc/self/fd/");
    CHECK(symlink("to-fd", tpath("to-to-fd")) == 0); /* relative hop first */
    expect_refused(tpath("to-to-fd"), "leads through /proc/self/fd/");
    CHECK(fclose(redir) == 0);
    CHECK(exists(tpath("redirected")));
    ats_err e = {{0}};
    CHECK(atsc_out_check("", &e) == ATS_EINVAL);
    /* fine: absent file in an existing directory, an existing regular file, a bare name (cwd) */
    CHECK_MSG(atsc_out_check(tpath("new.h5"), &e) == ATS_OK, "%s", e.msg);
    CHECK_MSG(atsc_out_check(tpath("regular"), &e) == ATS_OK, "%s", e.msg);
    CHECK_MSG(atsc_out_check("bench-x.json", &e) == ATS_OK, "%s", e.msg);
    CHECK(!exists(tpath("new.h5")) && same_content(tpath("regular"), buf, sizeof buf));
    CHECK(!exists("bench-x.json"));
    /* /dev/null still a character device after all this */
    struct stat sb;
    CHECK(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
}

static void test_commit_abort(uint64_t *rng)
{
    unsigned char good[300], fresh[500];
    const char *p = tpath("out.bin");
    write_random(p, good, sizeof good, rng);
    int before = atsc_out_registered();
    /* abort: the good file stays */
    atsc_out *o = NULL;
    ats_err e = {{0}};
    CHECK_MSG(atsc_out_open(p, &o, &e) == ATS_OK, "%s", e.msg);
    CHECK(atsc_out_registered() == before + 1);
    CHECK(strcmp(atsc_out_path(o), p) == 0);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", atsc_out_tmp(o));
    CHECK(strstr(tmp, ".tmp.") != NULL && exists(tmp));
    write_random(tmp, fresh, sizeof fresh, rng);
    CHECK(same_content(p, good, sizeof good));
    atsc_out_abort(o);
    CHECK(!exists(tmp) && same_content(p, good, sizeof good));
    CHECK(atsc_out_registered() == before);
    /* commit: replaced */
    CHECK(atsc_out_open(p, &o, &e) == ATS_OK);
    snprintf(tmp, sizeof tmp, "%s", atsc_out_tmp(o));
    write_random(tmp, fresh, sizeof fresh, rng);
    CHECK_MSG(atsc_out_commit(o, &e) == ATS_OK, "%s", e.msg);
    CHECK(!exists(tmp) && same_content(p, fresh, sizeof fresh));
    CHECK(atsc_out_registered() == before);
    /* two open temporaries of one target get distinct names */
    atsc_out *a = NULL, *b = NULL;
    CHECK(atsc_out_open(p, &a, &e) == ATS_OK && atsc_out_open(p, &b, &e) == ATS_OK);
    CHECK(strcmp(atsc_out_tmp(a), atsc_out_tmp(b)) != 0);
    CHECK(atsc_out_registered() == before + 2);
    atsc_out_abort(a);
    atsc_out_abort(b);
    CHECK(same_content(p, fresh, sizeof fresh));
    /* the target becomes a FIFO while we work: not replaced, temporary removed, path named */
    const char *q = tpath("becomes-fifo");
    CHECK(atsc_out_open(q, &o, &e) == ATS_OK);
    snprintf(tmp, sizeof tmp, "%s", atsc_out_tmp(o));
    CHECK(mkfifo(q, 0644) == 0);
    CHECK(atsc_out_commit(o, &e) == ATS_EINVAL);
    CHECK_MSG(strncmp(e.msg, q, strlen(q)) == 0 && strstr(e.msg, "FIFO"), "%s", e.msg);
    struct stat sb;
    CHECK(lstat(q, &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK(!exists(tmp));
    /* the temporary vanished (e.g. removed by a signal handler): commit fails, target kept */
    CHECK(atsc_out_open(p, &o, &e) == ATS_OK);
    unlink(atsc_out_tmp(o));
    CHECK(atsc_out_commit(o, &e) == ATS_EINVAL);
    CHECK_MSG(strncmp(e.msg, p, strlen(p)) == 0, "%s", e.msg);
    CHECK(same_content(p, fresh, sizeof fresh));
}

static void test_symlink(uint64_t *rng)
{
    unsigned char a[100], b[200];
    const char *file = tpath("real.bin"), *link = tpath("link.bin");
    write_random(file, a, sizeof a, rng);
    CHECK(symlink(file, link) == 0);
    atsc_out *o = NULL;
    ats_err e = {{0}};
    CHECK_MSG(atsc_out_open(link, &o, &e) == ATS_OK, "%s", e.msg);
    write_random(atsc_out_tmp(o), b, sizeof b, rng);
    CHECK_MSG(atsc_out_commit(o, &e) == ATS_OK, "%s", e.msg);
    struct stat sb;
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode));
    CHECK(same_content(file, b, sizeof b));
    /* a link to /dev/null is refused like /dev/null */
    CHECK(symlink("/dev/null", tpath("null-link")) == 0);
    expect_refused(tpath("null-link"), "character device");
}

/* A child opens two outputs, writes to them, reports their names and waits for `sig`. */
static void test_signal(int sig, uint64_t *rng)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    char p1[512], p2[512], n1[64], n2[64];
    snprintf(n1, sizeof n1, "sig%d-1.h5", sig);
    snprintf(n2, sizeof n2, "sig%d-2.json", sig);
    snprintf(p1, sizeof p1, "%s", tpath(n1));
    snprintf(p2, sizeof p2, "%s", tpath(n2));
    unsigned char good[128];
    write_random(p2, good, sizeof good, rng); /* p2 holds a good file that must survive */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        struct rlimit core = {0, 0};
        setrlimit(RLIMIT_CORE, &core); /* SIGQUIT and SIGXFSZ dump core by default */
        if (atsc_out_cleanup_signal_install() != 0) _exit(3);
        atsc_out *a = NULL, *b = NULL;
        if (atsc_out_open(p1, &a, NULL) || atsc_out_open(p2, &b, NULL)) _exit(4);
        FILE *f = fopen(atsc_out_tmp(a), "wb");
        for (int i = 0; f && i < 100000; i++) fputc(i & 0xff, f);
        if (f) fflush(f); /* left open, as in a write in progress */
        char line[1300];
        int n = snprintf(line, sizeof line, "%s\n%s\n", atsc_out_tmp(a), atsc_out_tmp(b));
        if (write(fds[1], line, (size_t)n) != n) _exit(5);
        close(fds[1]);
        for (;;) pause();
    }
    close(fds[1]);
    char names[1400] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof names - 1 && (r = read(fds[0], names + got, sizeof names - 1 - got)) > 0)
        got += (size_t)r;
    close(fds[0]);
    char *t1 = names, *nl = strchr(names, '\n');
    CHECK(nl != NULL);
    if (!nl) return;
    *nl = 0;
    char *t2 = nl + 1;
    if ((nl = strchr(t2, '\n'))) *nl = 0;
    CHECK(exists(t1) && exists(t2));
    CHECK(kill(pid, sig) == 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == sig, "child status %#x", status);
    CHECK_MSG(!exists(t1) && !exists(t2), "temporaries left: %s %s", t1, t2);
    CHECK(!exists(p1) && same_content(p2, good, sizeof good));
}

/* SIGPIPE ignored by the parent stays ignored (the write fails with EPIPE instead), and the other
 * signals are still handled. */
static void test_sigpipe_ignored(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_IGN);
        if (atsc_out_cleanup_signal_install() != 0) _exit(3);
        struct sigaction sa;
        if (sigaction(SIGPIPE, NULL, &sa) != 0 || sa.sa_handler != SIG_IGN) _exit(4);
        if (sigaction(SIGQUIT, NULL, &sa) != 0 || sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN) _exit(5);
        raise(SIGPIPE);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
}

/* A write that fails (a full disk, played by RLIMIT_FSIZE with SIGXFSZ ignored) is reported as
 * "PATH: write failed: File too large" and leaves neither the file nor its temporary. */
static void test_json_disk_full(void)
{
    const char *p = tpath("full.json");
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit fs = {1024, 1024};
        if (setrlimit(RLIMIT_FSIZE, &fs) != 0) _exit(3);
        json_t *root = json_array();
        for (int i = 0; i < 2000; i++) json_array_append_new(root, json_real(i * 0.125));
        ats_err e = {{0}};
        enum ats_status st = atsc_out_write_json(p, root, 0, &e);
        char want[600];
        snprintf(want, sizeof want, "%s: write failed: File too large", p);
        _exit(st == ATS_EINVAL && strcmp(e.msg, want) == 0 ? 0 : (fprintf(stderr, "got '%s'\n", e.msg), 4));
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q '^full.json'", tmpdir);
    CHECK_MSG(system(cmd) != 0, "full.json or its temporary left in %s", tmpdir);
}

/* A forked child that dies of SIGTERM through the handler leaves its parent's temporary alone. */
static void test_fork_child(void)
{
    atsc_out *o = NULL;
    ats_err e = {{0}};
    CHECK(atsc_out_cleanup_signal_install() == 0);
    CHECK_MSG(atsc_out_open(tpath("parent.bin"), &o, &e) == ATS_OK, "%s", e.msg);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        raise(SIGTERM);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "child status %#x", status);
    CHECK_MSG(exists(atsc_out_tmp(o)), "the child removed the parent's %s", atsc_out_tmp(o));
    CHECK_MSG(atsc_out_commit(o, &e) == ATS_OK, "%s", e.msg);
    CHECK(exists(tpath("parent.bin")));
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
}

/* atsc_out_write_json: random values read back; refused on a special file. */
static void test_json(uint64_t *rng)
{
    json_t *root = json_object();
    double v[8];
    json_t *arr = json_array();
    for (int i = 0; i < 8; i++) {
        v[i] = tu_uniform(rng, -1e3, 1e3);
        json_array_append_new(arr, json_real(v[i]));
    }
    json_object_set_new(root, "figures", arr);
    ats_err e = {{0}};
    const char *p = tpath("bench.json");
    CHECK_MSG(atsc_out_write_json(p, root, JSON_REAL_PRECISION(17), &e) == ATS_OK, "%s", e.msg);
    json_error_t je;
    json_t *back = json_load_file(p, 0, &je);
    CHECK(back != NULL);
    json_t *ba = back ? json_object_get(back, "figures") : NULL;
    CHECK(ba && json_array_size(ba) == 8);
    for (size_t i = 0; ba && i < 8; i++) CHECK(json_real_value(json_array_get(ba, i)) == v[i]);
    json_decref(back);
    CHECK(atsc_out_write_json("/dev/null", root, 0, &e) == ATS_EINVAL);
    CHECK_MSG(strncmp(e.msg, "/dev/null: ", 11) == 0, "%s", e.msg);
    json_decref(root);
}

int main(void)
{
    uint64_t rng = tu_seed("test_outfile");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ats-test-outfile-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_check(&rng);
    test_commit_abort(&rng);
    test_symlink(&rng);
    test_signal(SIGINT, &rng);
    test_signal(SIGTERM, &rng);
    test_signal(SIGHUP, &rng);
    test_signal(SIGQUIT, &rng);
    test_signal(SIGPIPE, &rng);
    test_signal(SIGXFSZ, &rng);
    test_signal(SIGUSR1, &rng); /* kill -USR1 left the temporary (fresh-user pass) */
    test_signal(SIGUSR2, &rng);
    test_signal(SIGALRM, &rng);
    test_sigpipe_ignored();
    test_json_disk_full();
    test_fork_child();
    test_json(&rng);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_outfile");
}
