/*
 * tests/testutil.h — the tiny harness every CTest executable uses.
 *
 * CHECK* macros count failures and print file:line with the values; a test's main() returns
 * tu_finish(). Seeds: tu_seed() returns $ATS_TEST_SEED if set, else a fresh one from the clock, and
 * prints it so a failure can be replayed. GPU tests return TU_SKIP (77) when there is no device.
 */
#ifndef ATS_TESTUTIL_H
#define ATS_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define TU_SKIP 77

extern int tu_failures;
extern int tu_checks;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        tu_checks++;                                                                     \
        if (!(cond)) {                                                                   \
            tu_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
        }                                                                                \
    } while (0)

#define CHECK_MSG(cond, ...)                                                             \
    do {                                                                                 \
        tu_checks++;                                                                     \
        if (!(cond)) {                                                                   \
            tu_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

/* |a - b| <= tol (absolute); NaN never passes. */
#define CHECK_NEAR(a, b, tol)                                                            \
    do {                                                                                 \
        double tu_a_ = (double)(a), tu_b_ = (double)(b), tu_t_ = (double)(tol);          \
        tu_checks++;                                                                     \
        if (!(fabs(tu_a_ - tu_b_) <= tu_t_)) {                                           \
            tu_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.17g, %s = %.17g, tol %.3g\n", \
                    __FILE__, __LINE__, #a, tu_a_, #b, tu_b_, tu_t_);                    \
        }                                                                                \
    } while (0)

/* Relative: |a - b| <= rel * max(|a|, |b|) + abs; NaN never passes. */
#define CHECK_REL(a, b, rel, abs_)                                                       \
    do {                                                                                 \
        double tu_a_ = (double)(a), tu_b_ = (double)(b);                                 \
        double tu_m_ = fabs(tu_a_) > fabs(tu_b_) ? fabs(tu_a_) : fabs(tu_b_);            \
        tu_checks++;                                                                     \
        if (!(fabs(tu_a_ - tu_b_) <= (double)(rel) * tu_m_ + (double)(abs_))) {          \
            tu_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK_REL failed: %s = %.17g, %s = %.17g (rel %.3g)\n", \
                    __FILE__, __LINE__, #a, tu_a_, #b, tu_b_, (double)(rel));            \
        }                                                                                \
    } while (0)

/** Seed from $ATS_TEST_SEED or the clock; printed to stderr once with the test name. */
uint64_t tu_seed(const char *test_name);
/** splitmix64 step: a small deterministic generator for test inputs (not for the simulator). */
uint64_t tu_rand(uint64_t *state);
/** Uniform double in [lo, hi). */
double tu_uniform(uint64_t *state, double lo, double hi);
/** Prints a summary and returns 0 when no check failed, 1 otherwise. A scratch folder of tu_tmpdir is
 *  removed with everything in it when no check failed ("removed its scratch folder DIR" on stderr), and
 *  kept when one did ("kept its scratch folder DIR (a check failed)"); 1 also when it cannot be removed. */
int tu_finish(const char *test_name);
/** Creates this process's scratch folder $TMPDIR/ats_<test_name>_XXXXXX (/tmp when TMPDIR is unset or
 *  empty) and writes its path into buf; tu_finish removes it. NULL (with a message) when it cannot. */
const char *tu_tmpdir(char *buf, size_t len, const char *test_name);
/** Path under ../shared ($ATS_SHARED_DIR); returns buf. */
const char *tu_shared_path(char *buf, size_t len, const char *rel);
/** The executor tests' made-up small architecture (tests/tu_arch.c; link ats_testutil_arch): qwen3, or
 *  qwen3_moe when moe (8 experts, 2 used, expert FFN 256), 4 layers, n_embd 256, FFN 512 (dense), 4 heads,
 *  2 KV heads of 64, vocabulary 1000, qk-norm, NEOX RoPE (theta 1e6), RMS eps 1e-6; context n_ctx_max
 *  tokens; source "<test_name>: made-up small shapes". */
struct ats_arch;
void tu_tiny_arch(struct ats_arch *a, int moe, int64_t n_ctx_max, const char *test_name);
/** Path under the source tree ($ATS_SOURCE_DIR or "."); returns buf. */
const char *tu_source_path(char *buf, size_t len, const char *rel);

/** Whole file as a NUL-terminated malloc'd string (caller frees); NULL if unreadable. *len (may be
 *  NULL) gets the byte count. */
char *tu_slurp(const char *path, size_t *len);
/** Lines in s ('\n' count; NULL = 0). */
int tu_count_lines(const char *s);
/** Runs `$ATS_BIN <args>` (default ./build/cli/ats) under `timeout timeout_s`, from `dir` when non-NULL,
 *  with stdout and stderr captured separately (through files in scratch_dir) into out / err (either may
 *  be NULL; truncated to their lengths); returns the exit code, -1 on a signal. */
int tu_run_ats_split(const char *dir, const char *args, int timeout_s, const char *scratch_dir, char *out, size_t olen,
                     char *err, size_t elen);
/** Writes text to path (replacing it); a failed open is a failed CHECK. */
void tu_write_text(const char *path, const char *text);
/** Runs `$ATS_BIN <args>` (default ./build/cli/ats) under `timeout 120`, returns its stdout (and
 *  stderr when with_stderr) as a malloc'd string (caller frees); *rc = exit code, -1 on a signal. */
char *tu_run_ats(const char *args, int *rc, int with_stderr);
/** Runs `bin <args>` (no time limit) with stdout into *out (malloc'd, caller frees; NULL: dropped) and
 *  stderr into err (truncated to elen, through scratch_dir/err.txt); returns the exit code, -1 on a
 *  signal. */
int tu_run_capture(const char *bin, const char *args, const char *scratch_dir, char **out, char *err, size_t elen);
/** `bin <args> --out 'scratch_dir/bad.json'` must be refused as bad input: exit 2, one line on stderr
 *  holding `part`, and no result file (CHECKs; the file is removed if one was written). */
void tu_expect_usage_out(const char *bin, const char *scratch_dir, const char *args, const char *part);
/** Writes a tiny dense qwen3 description (2 layers, n_embd 256, FFN 512, 4 heads, 2 KV heads of 64,
 *  vocabulary 320, context 128, q4_k_m) to path, its source "<test_name>: a tiny qwen3". */
void tu_write_tiny_qwen3(const char *path, const char *test_name);

#endif
