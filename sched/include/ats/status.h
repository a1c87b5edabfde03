/*
 * ats/status.h — status codes and the always-on invariant check of libats_sched.
 *
 * Every fallible function of libats_sched returns an `enum ats_status` (0 = OK) and hands its
 * results back through out-parameters. Functions that validate user-supplied data also accept an
 * optional `ats_err *` in which they write one human-readable line naming the offending field and
 * value; pass NULL when you do not need it. Broken invariants (bugs, not bad input) go through
 * ATS_ASSERT, which prints file:line and the expression, then calls the abort hook (abort() unless
 * a test installs its own).
 */
#ifndef ATS_STATUS_H
#define ATS_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum ats_status {
    ATS_OK = 0,
    ATS_EINVAL,      /**< bad argument or bad input data (message in ats_err) */
    ATS_ENOMEM,      /**< allocation failed */
    ATS_ENOTFOUND,   /**< a named thing (policy, model role, …) does not exist */
    ATS_EINFEASIBLE, /**< no solution satisfies the constraints (e.g. budget too small for a plan) */
    ATS_ERANGE,      /**< a value is outside the range the algorithm supports */
    ATS_EIO          /**< a failure while running, not of the input (a child process died, I/O failed) */
};

/** Length of the message buffer of ats_err [bytes]. */
#define ATS_ERR_LEN 512

/** One-line error message filled by validating functions; caller-owned storage. */
typedef struct ats_err {
    char msg[ATS_ERR_LEN];
} ats_err;

/** Static name of a status ("ok", "invalid argument", …). Never NULL. Thread-safe. */
const char *ats_status_str(enum ats_status st);

/** printf-style write into err (no-op when err is NULL). Returns `st` so callers can
 *  `return ats_err_set(err, ATS_EINVAL, "...")`. */
enum ats_status ats_err_set(ats_err *err, enum ats_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/** Hook called by ATS_ASSERT after printing; default calls abort(). Not thread-safe to change
 *  while other threads may assert (tests set it once at start). */
typedef void (*ats_abort_hook)(void);
void ats_set_abort_hook(ats_abort_hook hook);
void ats_assert_fail(const char *expr, const char *file, int line);

/** Always-on invariant check (kept in release builds). */
#define ATS_ASSERT(cond) \
    do { if (!(cond)) ats_assert_fail(#cond, __FILE__, __LINE__); } while (0)

#ifdef __cplusplus
}
#endif
#endif
