/*
 * outfile.c — up-front checks of output paths, temporary + fsync + rename, and the registry of open
 * temporaries that the CLI's signal handler removes (atsc/outfile.h).
 */
#include "atsc/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct atsc_out {
    char *path;   /* as the caller gave it (for messages) */
    char *target; /* what is renamed over: path, or the file a link at path points to */
    char *tmp;
    int slot;     /* registry slot, -1 when the registry was full */
};

/* ------------------------------------------------------------ registry */

#define REG_SLOTS 32
#define REG_PATH 4096
/* state: 0 free, 1 being filled or emptied, 2 live (the handler unlinks it) */
static atomic_int reg_state[REG_SLOTS];
static char reg_path[REG_SLOTS][REG_PATH];
static pid_t reg_owner[REG_SLOTS]; /* a forked child (stress hogs) never removes its parent's files */
static atomic_uint reg_seq;

static int reg_add(const char *tmp)
{
    size_t n = strlen(tmp);
    if (n >= REG_PATH) return -1;
    for (int i = 0; i < REG_SLOTS; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&reg_state[i], &expect, 1)) {
            memcpy(reg_path[i], tmp, n + 1);
            reg_owner[i] = getpid();
            atomic_store(&reg_state[i], 2);
            return i;
        }
    }
    return -1; /* full: still works, only not removed on a signal */
}

static void reg_remove(int slot)
{
    if (slot >= 0) atomic_store(&reg_state[slot], 0);
}

void atsc_out_cleanup_all(void)
{
    pid_t me = getpid();
    for (int i = 0; i < REG_SLOTS; i++)
        if (atomic_load(&reg_state[i]) == 2 && reg_owner[i] == me) unlink(reg_path[i]);
}

int atsc_out_registered(void)
{
    int n = 0;
    for (int i = 0; i < REG_SLOTS; i++) n += atomic_load(&reg_state[i]) == 2;
    return n;
}

static void on_signal(int sig)
{
    atsc_out_cleanup_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

int atsc_out_cleanup_signal_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* every signal whose default action ends the process while a temporary may be open: Ctrl-C,
     * kill, a closed terminal, Ctrl-\; a reader that went away (`ats run --out r.h5 | head -c 3`
     * left r.h5.tmp.PID); a file size limit (ulimit -f); the user signals and an alarm (kill -USR1,
     * `timeout -s ALRM`: they end a process by default too). SIGPROF and SIGVTALRM are left to
     * profilers. */
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ, SIGUSR1, SIGUSR2, SIGALRM};
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct sigaction old;
        if (sigaction(sigs[k], NULL, &old) != 0) return -1;
        /* a signal ignored by whoever started us stays ignored (SIGPIPE, SIGXFSZ: the write then fails
         * with EPIPE or EFBIG, which the writers report, removing their temporaries) */
        if (old.sa_handler == SIG_IGN) continue;
        if (sigaction(sigs[k], &sa, NULL) != 0) return -1;
    }
    return 0;
}

int atsc_out_cleanup_signal_take(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ checks */

/* Directory part of path ("." when there is none); new string or NULL. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static const char *kind_of(mode_t m)
{
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* Checks the target's type; 1 if it exists (regular), 0 if absent, -1 (err set) if refused. */
static int check_target(const char *path, ats_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        struct stat lst;
        char link[PATH_MAX];
        ssize_t n;
        if (e == ENOENT && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) &&
            (n = readlink(path, link, sizeof link - 1)) >= 0) {
            /* a dangling link: writing would replace the link itself with a regular file */
            link[n] = '\0';
            ats_err_set(err, ATS_EINVAL, "%s: refusing to write: it is a symbolic link to %s, which does not "
                        "exist (create that file first, or remove the link)", path, link);
            return -1;
        }
        errno = e;
        if (errno == ENOENT) return 0;
        if (errno == ENOTDIR) {
            ats_err_set(err, ATS_EINVAL, "%s: cannot write: a part of the directory path is not a directory",
                        path);
            return -1;
        }
        ats_err_set(err, ATS_EINVAL, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        ats_err_set(err, ATS_EINVAL, "%s: cannot write: is a directory (give a file name)", path);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        ats_err_set(err, ATS_EINVAL, "%s: refusing to write: exists and is %s, not a regular file "
                    "(give a regular file path)", path, kind_of(st.st_mode));
        return -1;
    }
    return 1;
}

static enum ats_status check_dir(const char *path, const char *target, ats_err *err)
{
    char *dir = dir_of(target);
    if (!dir) return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
    struct stat st;
    enum ats_status s = ATS_OK;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT)
            s = ats_err_set(err, ATS_EINVAL, "%s: cannot write: directory %s does not exist", path, dir);
        else if (errno == ENOTDIR)
            s = ats_err_set(err, ATS_EINVAL, "%s: cannot write: a part of directory %s is not a directory",
                            path, dir);
        else
            s = ats_err_set(err, ATS_EINVAL, "%s: cannot write: directory %s: %s", path, dir, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        s = ats_err_set(err, ATS_EINVAL, "%s: cannot write: %s is not a directory", path, dir);
    } else if (access(dir, W_OK | X_OK) != 0) {
        s = ats_err_set(err, ATS_EINVAL, "%s: cannot write: directory %s is not writable (%s)", path, dir,
                        strerror(errno));
    }
    free(dir);
    return s;
}

/* The file that will be replaced: path itself, or what a symbolic link at path resolves to. */
static char *target_of(const char *path)
{
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        char *real = realpath(path, NULL);
        if (real) return real;
    }
    return strdup(path);
}

/* 1 if `dir` (canonical) is /dev, /proc or /sys or lies under one. */
static int pseudo_dir(const char *dir)
{
    static const char *const roots[3] = {"/dev", "/proc", "/sys"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(roots[k]);
        if (strncmp(dir, roots[k], n) == 0 && (dir[n] == '\0' || dir[n] == '/')) return 1;
    }
    return 0;
}

/* Whether writing `path` would go through /dev, /proc or /sys (kernel files, never ours to replace;
 * /sys/fs/cgroup may even be a writable tmpfs): the path itself or any hop of the symbolic
 * links it leads through (/dev/stdout -> /proc/self/fd/1 -> the shell's redirected file). Such a path
 * names a stream, not a file: temporary + rename would replace the file that a redirection or another
 * process has open (a tester's `--out /dev/stdout > log.json` replaced log.json and lost stderr lines
 * written to it). Returns the first hop found there (malloc'd) or NULL. */
static char *pseudo_hop(const char *path)
{
    char cur[PATH_MAX];
    if (strlen(path) >= sizeof cur) return NULL;
    strcpy(cur, path);
    for (int hop = 0; hop < 40; hop++) {
        char *dir = dir_of(cur);
        char *real = dir ? realpath(dir, NULL) : NULL;
        int bad = real && pseudo_dir(real);
        free(dir);
        free(real);
        if (bad) return strdup(cur);
        struct stat lst;
        if (lstat(cur, &lst) != 0 || !S_ISLNK(lst.st_mode)) return NULL;
        char link[PATH_MAX];
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) return NULL;
        link[n] = '\0';
        if (link[0] == '/') {
            strcpy(cur, link);
        } else {
            /* relative link: resolved against the directory of the link itself */
            char *d = dir_of(cur);
            if (!d) return NULL;
            char next[PATH_MAX];
            int w = snprintf(next, sizeof next, "%s/%s", d, link);
            free(d);
            if (w < 0 || (size_t)w >= sizeof next) return NULL;
            strcpy(cur, next);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ inputs of this run */

/* Files this process has read as inputs (device + inode), so that no output replaces one of them:
 * a tester's `ats trace import X.csv --out X.csv` replaced its own input. Loaders call atsc_in_note;
 * atsc_out_check (hence atsc_out_open, again just before writing) refuses such a target. A second
 * deliberate exception to "no mutable globals" (see the temporaries registry above), guarded by a
 * mutex since sweeps load from several threads. */
#define IN_SLOTS 64
static struct { dev_t dev; ino_t ino; } in_ids[IN_SLOTS];
static int n_in;
static pthread_mutex_t in_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int in_guard; /* off for library users (tests rewrite files they read); the CLI turns it on */

void atsc_in_guard_enable(void) { atomic_store(&in_guard, 1); }

void atsc_in_note(const char *path)
{
    struct stat st;
    if (!atomic_load(&in_guard)) return;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;
    pthread_mutex_lock(&in_lock);
    int known = 0;
    for (int i = 0; i < n_in; i++) known |= in_ids[i].dev == st.st_dev && in_ids[i].ino == st.st_ino;
    if (!known && n_in < IN_SLOTS) {
        in_ids[n_in].dev = st.st_dev;
        in_ids[n_in].ino = st.st_ino;
        n_in++;
    }
    pthread_mutex_unlock(&in_lock);
}

static int is_input(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    int hit = 0;
    pthread_mutex_lock(&in_lock);
    for (int i = 0; i < n_in; i++) hit |= in_ids[i].dev == st.st_dev && in_ids[i].ino == st.st_ino;
    pthread_mutex_unlock(&in_lock);
    return hit;
}

int atsc_out_same_target(const char *a, const char *b)
{
    if (!a || !b) return 0;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    /* not both existing: compare the canonical directory and the base name */
    char *da = dir_of(a), *db = dir_of(b);
    char *ra = da ? realpath(da, NULL) : NULL, *rb = db ? realpath(db, NULL) : NULL;
    const char *ba = strrchr(a, '/'), *bb = strrchr(b, '/');
    ba = ba ? ba + 1 : a;
    bb = bb ? bb + 1 : b;
    int same = ra && rb && strcmp(ra, rb) == 0 && strcmp(ba, bb) == 0;
    free(da);
    free(db);
    free(ra);
    free(rb);
    return same;
}

enum ats_status atsc_out_check(const char *path, ats_err *err)
{
    if (!path || !*path) return ats_err_set(err, ATS_EINVAL, "output path: empty");
    int exists = check_target(path, err);
    if (exists < 0) return ATS_EINVAL;
    /* a regular file (or none) reached through /dev, /proc or /sys */
    char *hop = pseudo_hop(path);
    if (hop) {
        const char *why = "a device, stream or kernel file rather than a file that can be replaced whole "
                          "(give a regular file path, then cat it)";
        enum ats_status s =
            strcmp(hop, path) == 0
                ? ats_err_set(err, ATS_EINVAL, "%s: refusing to write: it is in /dev, /proc or /sys, %s", path, why)
                : ats_err_set(err, ATS_EINVAL, "%s: refusing to write: it leads through %s, in /dev, /proc or /sys, %s",
                              path, hop, why);
        free(hop);
        return s;
    }
    if (exists && is_input(path))
        return ats_err_set(err, ATS_EINVAL, "%s: refusing to write: it is an input of this run (give another output path)",
                           path);
    char *target = target_of(path);
    if (!target) return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
    enum ats_status s = check_dir(path, target, err);
    free(target);
    return s;
}

/* ------------------------------------------------------------ writer */

static void out_free(atsc_out *o)
{
    if (!o) return;
    reg_remove(o->slot);
    free(o->path);
    free(o->target);
    free(o->tmp);
    free(o);
}

enum ats_status atsc_out_open(const char *path, atsc_out **out, ats_err *err)
{
    if (!out) return ats_err_set(err, ATS_EINVAL, "atsc_out_open: NULL argument");
    *out = NULL;
    enum ats_status s = atsc_out_check(path, err);
    if (s) return s;
    atsc_out *o = calloc(1, sizeof *o);
    size_t len = 0;
    if (o) {
        o->slot = -1;
        o->path = strdup(path);
        o->target = target_of(path);
        len = (o->target ? strlen(o->target) : 0) + 48;
        o->tmp = malloc(len);
    }
    if (!o || !o->path || !o->target || !o->tmp) {
        out_free(o);
        return ats_err_set(err, ATS_ENOMEM, "%s: out of memory", path);
    }
    /* a process may hold several temporaries of one target (threads): add a sequence number */
    unsigned seq = atomic_fetch_add(&reg_seq, 1u);
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++, seq = atomic_fetch_add(&reg_seq, 1u)) {
        if (seq == 0)
            snprintf(o->tmp, len, "%s.tmp.%ld", o->target, (long)getpid());
        else
            snprintf(o->tmp, len, "%s.tmp.%ld.%u", o->target, (long)getpid(), seq);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        s = ats_err_set(err, ATS_EINVAL, "%s: cannot create its temporary file %s: %s", path, o->tmp,
                        strerror(errno));
        out_free(o);
        return s;
    }
    close(fd);
    o->slot = reg_add(o->tmp);
    *out = o;
    return ATS_OK;
}

const char *atsc_out_tmp(const atsc_out *o) { return o ? o->tmp : NULL; }
const char *atsc_out_path(const atsc_out *o) { return o ? o->path : NULL; }

enum ats_status atsc_out_commit(atsc_out *o, ats_err *err)
{
    if (!o) return ats_err_set(err, ATS_EINVAL, "atsc_out_commit: NULL handle");
    enum ats_status s = ATS_OK;
    int fd = open(o->tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        s = ats_err_set(err, ATS_EINVAL, "%s: temporary file %s vanished: %s", o->path, o->tmp,
                        strerror(errno));
    } else {
        if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
            s = ats_err_set(err, ATS_EINVAL, "%s: write failed: %s", o->path, strerror(errno));
        close(fd);
    }
    if (!s && check_target(o->target, err) < 0) {
        /* replaced by a directory or special file while we worked: name the user's path */
        s = check_target(o->path, err) < 0 ? ATS_EINVAL
                                           : ats_err_set(err, ATS_EINVAL, "%s: target %s is not a regular file",
                                                         o->path, o->target);
    }
    if (!s && rename(o->tmp, o->target) != 0)
        s = ats_err_set(err, ATS_EINVAL, "%s: cannot move the finished file into place: %s", o->path,
                        strerror(errno));
    if (s) unlink(o->tmp);
    out_free(o);
    return s;
}

void atsc_out_abort(atsc_out *o)
{
    if (!o) return;
    unlink(o->tmp);
    out_free(o);
}

enum ats_status atsc_out_write_json(const char *path, const json_t *root, size_t flags, ats_err *err)
{
    atsc_out *o = NULL;
    enum ats_status s = atsc_out_open(path, &o, err);
    if (s) return s;
    errno = 0;
    if (!root || json_dump_file(root, atsc_out_tmp(o), flags) != 0) {
        int e = errno;
        atsc_out_abort(o);
        return ats_err_set(err, ATS_EINVAL, "%s: write failed: %s", path, e ? strerror(e) : "cannot write the JSON");
    }
    return atsc_out_commit(o, err);
}

/* ------------------------------------------------------------------ inputs: readable? ------------ */

enum ats_status atsc_in_readable(const char *path, const char *what, ats_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ats_err_set(err, errno == ENOENT ? ATS_ENOTFOUND : ATS_EINVAL, "%s: cannot open %s: %s", path, what,
                           strerror(errno));
    struct stat sb;
    const int st = fstat(fd, &sb);
    close(fd);
    if (st != 0) return ats_err_set(err, ATS_EINVAL, "%s: cannot open %s: %s", path, what, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return ats_err_set(err, ATS_EINVAL, "%s: is a directory, not a %s", path, what);
    return ATS_OK;
}
