#include "ats/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char *ats_status_str(enum ats_status st)
{
    switch (st) {
    case ATS_OK: return "ok";
    case ATS_EINVAL: return "invalid argument";
    case ATS_ENOMEM: return "out of memory";
    case ATS_ENOTFOUND: return "not found";
    case ATS_EINFEASIBLE: return "infeasible";
    case ATS_ERANGE: return "out of range";
    case ATS_EIO: return "failed while running";
    }
    return "unknown status";
}

enum ats_status ats_err_set(ats_err *err, enum ats_status st, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

static void default_abort(void) { abort(); }
static ats_abort_hook abort_hook = default_abort;

void ats_set_abort_hook(ats_abort_hook hook) { abort_hook = hook ? hook : default_abort; }

void ats_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, expr);
    fflush(stderr);
    abort_hook();
}
