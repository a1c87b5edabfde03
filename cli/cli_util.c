#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ats_version.h"
#include "atsc/outfile.h"
#include "atsc/text.h"
#include "atsc/trace_io.h"
#include "ld/load.h"

int ats_cli_parse_double(const char *s, double *out)
{
    if (!s || !*s) return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    /* an underflow (1e-320: ERANGE with a subnormal or 0) is that tiny number, not "not a number";
       an overflow (1e999) is refused */
    if ((errno && !(errno == ERANGE && fabs(v) < 1.0)) || end == s || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int ats_cli_parse_slice_us(const char *cmd, const char *s, long *ns)
{
    double us;
    /* plain decimal microseconds only ("150", "150.5"): not "1e3", "0x64", "+100" or spaces */
    size_t digits = strspn(s, "0123456789"), frac = s[digits] == '.' ? strspn(s + digits + 1, "0123456789") : 0;
    int plain = digits > 0 && s[digits + (s[digits] == '.' ? 1 + frac : 0)] == '\0' && (s[digits] != '.' || frac > 0);
    if (!plain || ats_cli_parse_double(s, &us) || !(us == 0 || (us >= 100 && us <= 100000))) {
        ats_cli_error(cmd, "--slice-us '%s': need 0 (the kernel's default slice) or microseconds in [100, 100000]", s);
        return -1;
    }
    *ns = (long)(us * 1e3 + 0.5);
    return 0;
}

void ats_cli_bad_option(const char *cmd, const char *arg, int optopt_, const struct option *opts)
{
    if (arg && strncmp(arg, "--", 2) == 0) {
        const char *eq = strchr(arg, '=');
        size_t n = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        for (const struct option *o = opts; !eq && o && o->name; o++)
            if (o->has_arg == required_argument && strlen(o->name) == n && strncmp(o->name, arg + 2, n) == 0) {
                ats_cli_error(cmd, "%s: needs a value (ats %s --help)", arg, cmd);
                return;
            }
        if (eq && optopt_)
            ats_cli_error(cmd, "'%s': --%.*s takes no value (ats %s --help)", arg, (int)(eq - arg - 2), arg + 2, cmd);
        else
            ats_cli_error(cmd, "unknown or ambiguous option '%s' (ats %s --help)", arg, cmd);
    } else if (optopt_ > 32 && optopt_ < 127) {
        ats_cli_error(cmd, "unknown option '-%c' (ats %s --help)", optopt_, cmd);
    } else {
        ats_cli_error(cmd, "unknown option '%s' (ats %s --help)", arg ? arg : "", cmd);
    }
}

void ats_cli_missing_value(const char *cmd, const char *arg, int optopt_)
{
    if (arg && strncmp(arg, "--", 2) == 0)
        ats_cli_error(cmd, "%s: needs a value (ats %s --help)", arg, cmd);
    else if (optopt_ > 32 && optopt_ < 127)
        ats_cli_error(cmd, "option -%c needs a value (ats %s --help)", optopt_, cmd);
    else
        ats_cli_error(cmd, "option '%s' needs a value (ats %s --help)", arg ? arg : "", cmd);
}

int ats_cli_load_baseline(const char *cmd, const char *path, int threads_asked, int slice_given, long *slice_ns,
                          const char *users, ld_baseline *out)
{
    ats_err err = {{0}};
    if (ld_baseline_load(path, out, &err) != ATS_OK) {
        fprintf(stderr, "ats %s: %s\n", cmd, err.msg);
        return -1;
    }
    char pe[ATSC_ESC_PATH]; /* the path as ld_baseline_load names it: escaped */
    path = atsc_esc(path, strlen(path), pe, sizeof pe);
    if (threads_asked > 0 && threads_asked != out->threads) {
        fprintf(stderr, "ats %s: %s: baseline measured with %d probe threads, --threads %d asked\n", cmd, path,
                out->threads, threads_asked);
        return -1;
    }
    if (out->slice_ns >= 0) { /* the probes (and a stressor's hogs) run as the baseline's did */
        if (slice_given && out->slice_ns != *slice_ns) {
            fprintf(stderr, "ats %s: %s: baseline measured with %g us scheduler slices, --slice-us %g asked (the "
                            "probes run as the baseline's; leave --slice-us out)\n",
                    cmd, path, 1e-3 * (double)out->slice_ns, 1e-3 * (double)*slice_ns);
            return -1;
        }
        *slice_ns = out->slice_ns;
    }
    long cpus = ld_usable_cpus();
    if (cpus > 0 && out->threads > cpus)
        fprintf(stderr, "ats %s: warning: %s: the baseline was measured with %d probe threads, this process may use %ld "
                        "CPUs (%s oversubscribe them: was it measured elsewhere, or under taskset?)\n",
                cmd, path, out->threads, cpus, users);
    return 0;
}

const char ats_cli_slice_help[] =
    "--slice-us US (default 100; 0: the kernel's default): the scheduler time slice that CPU probe threads\n"
    "(and the stressor's CPU hogs) ask for (Linux >= 6.12, EEVDF; older kernels ignore it). With the\n"
    "default ~3 ms slice a probe thread woken next to hogs often ran its whole 2 ms probe before they got\n"
    "the CPU back, so the recorder read the CPU far less loaded than the stressor's own probes did\n"
    "(H200 host: +23% and +55%; with 0.1 ms slices -6%; experiments/stress-accuracy/). A baseline file\n"
    "records the slice it was measured with (7th field); with --baseline the probes (and the stressor's\n"
    "hogs) use it, and a different --slice-us is refused.\n";

const char ats_cli_pin_help[] =
    "--pin: CPU probe thread j runs only on the (j mod n)-th of the n CPUs this process may use (--threads\n"
    "above n shares CPUs). Give it to the baseline, the stressor and the recorder alike. H200, a stressor at\n"
    "CPU 0.4 and two recorders: unpinned they read 0.425 and 0.388 (0.447 and 0.362 with 2 hogs per\n"
    "thread), pinned 0.400 and 0.436, then 0.379 and 0.385 (experiments/stress-accuracy/): pinning\n"
    "did not remove the disagreement between observers.\n";

const char ats_cli_matrix_help[] =
    "The CPU probe's matrix is one shared-memory object, /dev/shm/ats-probe-a1-2048x2048 (16 MiB): the\n"
    "first probe makes it and it stays until removed (rm is harmless) or the machine restarts, so the\n"
    "baseline, the stressor's and the recorder's probes read the same physical pages. Where it cannot be\n"
    "used (less than 16 MiB free in /dev/shm and no other process making it within 1 s, another user's\n"
    "unusable file there) the probe uses a private copy and says why (ats stress: a note line);\n"
    "ATS_PROBE_PRIVATE=1 in the environment asks for one. Its owner can break it for everyone (a truncated\n"
    "object ends the probes mapping it with SIGBUS). Why: with private copies the idle probe took\n"
    "0.243-0.314 ms a GEMV in 17 processes on the H200, and two recorders sharing one baseline read one\n"
    "stressed CPU up to 21% apart. The shared pages did not remove that per-process part (H200,\n"
    "experiments/stress-accuracy/: idle 0.295-0.366 ms in 8 processes, private copies 0.299-0.428 ms; two recorders 0.385 and\n"
    "0.357 at a stressed 0.4): see --baseline-s below.\n";

const char ats_cli_rebase_help[] =
    "--baseline FILE --baseline-s S: the file's probe settings (repetitions, threads, slice), but the idle\n"
    "probe times re-measured in this process for S s (ats record: before the first sample; ats stress: in\n"
    "its probe process, before any hog starts) and used for every sample. Each process's CPU probe runs\n"
    "at a speed of its own when idle (above). The machine must be idle for those S s: start the recorder\n"
    "before the load, or in a target's idle stretch (fig13: its first 60 s). Measured on the H200\n"
    "(experiments/stress-accuracy/), it does not help: four recorders of one stressed CPU, each with its own re-measured times,\n"
    "read 0.294-0.327; with the one file's time 0.318-0.331. Loaded probe times agreed across processes\n"
    "(8.3-8.9 ms) where idle ones did not (2.52-2.71 ms; the stressor's probe process 3.54 ms), so one\n"
    "baseline file for every process stays the way to record; this is a diagnostic (ats stress prints\n"
    "its probe process's own idle times next to the file's).\n";

int ats_cli_parse_int(const char *s, long long *out)
{
    if (!s || !*s) return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') return -1;
    if (errno == ERANGE) return -2;
    if (errno) return -1;
    *out = v;
    return 0;
}

int ats_cli_parse_bytes_why(const char *s, uint64_t *out, char *why, size_t len)
{
    char dummy[8];
    if (!why) why = dummy, len = sizeof dummy;
    if (!s || !*s) {
        snprintf(why, len, "empty (a size with a unit, e.g. 6GiB)");
        return -1;
    }
    const char *p = s;
    while (*p == '+' || *p == '-' || isspace((unsigned char)*p)) p++;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        snprintf(why, len, "%.60s: hexadecimal is not accepted (a decimal size with a unit, e.g. 6GiB)", s);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end != s && ((errno == ERANGE && v > 1) || (isfinite(v) && v > 1.8e19))) { /* too large in any unit */
        snprintf(why, len, "%.60s: out of range (1 B .. 16 EiB)", s);
        return -1;
    }
    if (errno || end == s || !isfinite(v) || v <= 0) {
        snprintf(why, len, "%.60s: not a positive size (e.g. 6GiB, 512MiB, 4GB)", s);
        return -1;
    }
    if (*end == '\0') {
        snprintf(why, len, "%.60s: add a unit, e.g. %.40sGiB (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s, s);
        return -1;
    }
    static const struct { const char *suffix; double mult; } units[] = {
        {"B", 1.0},
        {"K", 1024.0},      {"KiB", 1024.0},      {"KB", 1e3},
        {"M", 1048576.0},   {"MiB", 1048576.0},   {"MB", 1e6},
        {"G", 1073741824.0},{"GiB", 1073741824.0},{"GB", 1e9},
        {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            double b = v * units[i].mult;
            if (b < 1.0 || !(b < 0x1p64)) { /* 2^64 B and up do not fit (1e19B came out as 2^63) */
                snprintf(why, len, "%.60s: out of range (1 B .. 16 EiB)", s);
                return -1;
            }
            /* llround is a long long: past 2^63 (where every double is whole) convert directly */
            *out = b < 0x1p62 ? (uint64_t)llround(b) : (uint64_t)b;
            return 0;
        }
    }
    snprintf(why, len, "%.60s: unknown unit '%.20s' (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s, end);
    return -1;
}

int ats_cli_stdout_errno = 0;

void ats_cli_help_words(int argc, char ***argv, char *buf[4])
{
    char **a = *argv;
    if (argc != 3 || (strcmp(a[2], "help") != 0 && strcmp(a[1], "help") != 0)) return;
    buf[0] = a[0];
    buf[1] = strcmp(a[2], "help") == 0 ? a[1] : a[2];
    buf[2] = "--help";
    buf[3] = NULL;
    *argv = buf;
}

uint64_t ats_cli_vram_default(uint64_t vram_bytes)
{
    return (uint64_t)((double)vram_bytes * 0.85) & ~((1ull << 20) - 1);
}

int ats_cli_budget_for_hw(const char *cmd, uint64_t *budget, uint64_t vram_bytes, const char *hw_name,
                          const char *hw_path)
{
    if (*budget == 0) {
        *budget = ats_cli_vram_default(vram_bytes);
        return 0;
    }
    if (*budget <= vram_bytes) return 0;
    /* bytes too: 6.0001GiB read "6.00 GiB ... exceeds the 6.00 GiB" */
    ats_cli_error(cmd, "--vram-budget: %.2f GiB (%llu bytes) exceeds the %.2f GiB (%llu bytes) of VRAM of hw '%s' (%s)",
                  (double)*budget / (1 << 30), (unsigned long long)*budget, (double)vram_bytes / (1 << 30),
                  (unsigned long long)vram_bytes, hw_name, hw_path);
    return ATS_EXIT_USAGE;
}

int ats_cli_list_has_empty(const char *s, char sep)
{
    int filled = 0; /* the current entry has a non-space character */
    for (const char *p = s;; p++) {
        if (*p == sep || *p == '\0') {
            if (!filled) return 1;
            if (*p == '\0') return 0;
            filled = 0;
        } else if (!isspace((unsigned char)*p)) {
            filled = 1;
        }
    }
}

int ats_cli_parse_vram(const char *cmd, const char *s, uint64_t *out)
{
    char why[200];
    uint64_t v;
    if (ats_cli_parse_bytes_why(s, &v, why, sizeof why)) {
        ats_cli_error(cmd, "--vram-budget: %s", why);
        return -1;
    }
    if (v < (64ull << 20)) {
        ats_cli_error(cmd, "--vram-budget: '%s' is below 64 MiB (no GPU runtime fits; did you mean GiB?)", s);
        return -1;
    }
    *out = v;
    return 0;
}

int ats_cli_parse_bytes(const char *s, uint64_t *out)
{
    return ats_cli_parse_bytes_why(s, out, NULL, 0);
}

static const char *resolve(const char *name, const char *env, const char *dflt, const char *ext,
                           char *buf, size_t len)
{
    size_t n = strlen(name), e = strlen(ext);
    if (strchr(name, '/') || (n > e && strcmp(name + n - e, ext) == 0)) {
        snprintf(buf, len, "%s", name);
        return buf;
    }
    const char *dir = getenv(env);
    snprintf(buf, len, "%s/%s%s", dir && *dir ? dir : dflt, name, ext);
    return buf;
}

const char *ats_cli_model_path(const char *name, char *buf, size_t len)
{
    return resolve(name, "ATS_MODELS_DIR", ATS_DEFAULT_MODELS_DIR, ".json", buf, len);
}

const char *ats_cli_hw_path(const char *name, char *buf, size_t len)
{
    return resolve(name, "ATS_HW_DIR", ATS_DEFAULT_HW_DIR, ".json", buf, len);
}

/* A bare name (no '/', not ending in .h5) is a file in the current directory when a regular file of
 * that name exists there (`--trace base.txt`), else <traces dir>/<name>.h5; the loader's message then
 * names the other place too (atsc_trace_lookup_note): "base.txt: not an HDF5 file (a local file, used
 * as the trace; a trace name would be traces/base.txt.h5)", or "traces/base.txt.h5: cannot open load
 * trace: ... (no local file base.txt either)". */
const char *ats_cli_trace_path(const char *name, char *buf, size_t len)
{
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 3 && strcmp(name + n - 3, ".h5") == 0))
        return resolve(name, "ATS_TRACES_DIR", ATS_DEFAULT_TRACES_DIR, ".h5", buf, len);
    char named[1200], also[1400];
    resolve(name, "ATS_TRACES_DIR", ATS_DEFAULT_TRACES_DIR, ".h5", named, sizeof named);
    struct stat sb;
    if (stat(name, &sb) == 0 && S_ISREG(sb.st_mode)) {
        snprintf(buf, len, "%s", name);
        snprintf(also, sizeof also, "a local file, used as the trace; a trace name would be %s", named);
    } else {
        snprintf(buf, len, "%s", named);
        if (!name[0])
            snprintf(also, sizeof also, "the trace name was empty");
        else if (stat(name, &sb) == 0 && S_ISDIR(sb.st_mode))
            snprintf(also, sizeof also, "%s here is a directory, not a trace", name);
        else
            snprintf(also, sizeof also, "no local file %s either", name);
    }
    atsc_trace_lookup_note(buf, also);
    return buf;
}

void ats_cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ats %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* The one line of ats_cli_once and ats_cli_once_opt; dashes "--" (a long name) or "-" (a letter). */
static void given_twice(const char *cmd, const char *dashes, const char *name, const char *first,
                        const char *second)
{
    ats_cli_error(cmd, "%s%s given twice ('%.200s', then '%.200s'): give it once", dashes, name, first,
                  second ? second : "");
}

int ats_cli_once(const char *cmd, const char *seen[256], int c, const char *name, const char *optarg_)
{
    if (c < 0 || c > 255) return 0;
    if (seen[c]) {
        given_twice(cmd, "--", name, seen[c], optarg_);
        return 1;
    }
    seen[c] = optarg_ ? optarg_ : "";
    return 0;
}

int ats_cli_once_opt(const char *cmd, ats_cli_seen *seen, const struct option *opts, int c, const char *optarg_)
{
    if (c == '?' || c == ':' || !optarg_) return 0;
    const struct option *lo = NULL;
    for (const struct option *o = opts; o && o->name; o++)
        if (!o->flag && o->val == c) {
            lo = o;
            break;
        }
    if (lo && lo->has_arg == no_argument) return 0; /* a flag without a value (a stale optarg) */
    char letter[2] = {(char)c, 0};
    for (int i = 0; i < seen->n; i++)
        if (seen->id[i] == c) {
            given_twice(cmd, lo ? "--" : "-", lo ? lo->name : letter, seen->val[i], optarg_);
            return 1;
        }
    if (seen->n < ATS_CLI_SEEN_MAX) {
        seen->id[seen->n] = c;
        seen->val[seen->n++] = optarg_;
    }
    return 0;
}

volatile sig_atomic_t ats_cli_stop = 0, ats_cli_stop_sig = 0;

static void on_stop_signal(int sig)
{
    ats_cli_stop_sig = sig;
    ats_cli_stop = 1;
}

void ats_cli_catch_stop_signals(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* also where the parent ignored it (a background job of a script) */
    sigaction(SIGTERM, &sa, NULL);
    if (sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL); /* nohup */
}

void ats_cli_take_stop_signals(void)
{
    atsc_out_cleanup_signal_take(SIGINT);
    atsc_out_cleanup_signal_take(SIGTERM);
}

int ats_cli_exit_after_signal(int rc)
{
    if (!ats_cli_stop_sig) return rc;
    int sig = (int)ats_cli_stop_sig;
    fflush(NULL);
    signal(sig, SIG_DFL);
    raise(sig);
    return 128 + sig; /* not reached */
}

void ats_cli_progress(const char *cmd, const char *fmt, ...)
{
    if (!isatty(STDERR_FILENO)) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\r\033[Kats %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

void ats_cli_progress_end(void)
{
    if (isatty(STDERR_FILENO)) fputs("\r\033[K", stderr);
}

void ats_cli_progress_bytes(void *ctx, uint64_t done, uint64_t total)
{
    ats_cli_progress((const char *)ctx, "%.2f of %.2f GiB", (double)done / 1073741824.0, (double)total / 1073741824.0);
    if (done >= total) ats_cli_progress_end();
}

const char *ats_cli_machine(char *buf, size_t len, const char *gpu_name)
{
    char cpu[256] = "?", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *p = strchr(line, ':');
            if (p) snprintf(cpu, sizeof cpu, "%s", p + 1 + strspn(p + 1, " \t"));
            cpu[strcspn(cpu, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
    snprintf(buf, len, "%s%s%s", cpu, gpu_name && *gpu_name ? ", " : "", gpu_name ? gpu_name : "");
    return buf;
}

int ats_cli_fit_context(int64_t n_prompt, int64_t ctx, int64_t *n_gen)
{
    if (n_prompt > ctx) {
        ats_cli_error("run", "prompt of %lld tokens is longer than the context (%lld tokens; --ctx)",
                      (long long)n_prompt, (long long)ctx);
        return ATS_EXIT_USAGE;
    }
    if (n_prompt + *n_gen - 1 > ctx) {
        fprintf(stderr, "ats run: note: -n %lld limited to %lld by the context of %lld tokens\n", (long long)*n_gen,
                (long long)(ctx - n_prompt + 1), (long long)ctx);
        *n_gen = ctx - n_prompt + 1;
    }
    return ATS_EXIT_OK;
}
