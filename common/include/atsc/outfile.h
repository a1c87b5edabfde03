/*
 * atsc/outfile.h — output files that never hurt the user: every file ATS writes (results, timelines,
 * load traces, benchmark JSON, GGUF from `ats quantize`) goes through this module.
 *
 * Rules it enforces:
 *  - The target is checked up front (atsc_out_check), before any work: its directory exists and is
 *    writable, and the target is absent or a regular file (never a directory, device, FIFO or
 *    socket: `--out /dev/null` or `--out /dev/full` is refused, never replaced by a regular file).
 *  - Data goes to "<path>.tmp.<pid>" (atsc_out_open creates it), is fsync'ed and renamed over the
 *    target by atsc_out_commit, so an interrupted run never leaves a half file where a good one was;
 *    atsc_out_abort removes it. When the target is a symbolic link to a regular file, the file it
 *    points to is replaced and the link stays.
 *  - Every message names the path the caller gave, not the temporary name.
 *  - Open temporaries are kept in a small process-wide registry; atsc_out_cleanup_signal_install()
 *    (called once by the CLI's main) installs a SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGPIPE/SIGXFSZ handler
 *    that unlinks them and then dies of the same signal. This registry is the one mutable global of libats_common, on
 *    purpose: a signal handler has no other way to find the files. A subcommand that installs its own
 *    handler (record, stress) replaces it and finishes or aborts its outputs itself.
 *
 * Usage: atsc_out_check(path) when parsing flags → atsc_out_open(path, &o) → write to
 * atsc_out_tmp(o) (fopen, H5Fcreate, ...) and close it → atsc_out_commit(o) or atsc_out_abort(o).
 * Handles are not thread-safe; distinct handles may be used from different threads.
 */
#ifndef ATSC_OUTFILE_H
#define ATSC_OUTFILE_H

#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct atsc_out atsc_out;

/**
 * Checks that `path` (borrowed) can be written: not empty; if it exists, a regular file (or a link
 * to one); its directory exists, is a directory and is writable. Touches nothing. ATS_OK, or
 * ATS_EINVAL with one line naming `path` and what is wrong. Thread-safe.
 */
enum ats_status atsc_out_check(const char *path, ats_err *err);

/**
 * atsc_out_check(path), then creates the empty temporary "<target>.tmp.<pid>[.<n>]" (target: path,
 * or the file a symbolic link at path points to) and registers it for signal cleanup. On success
 * *out is new; finish it with atsc_out_commit or atsc_out_abort. ATS_EINVAL (message names path),
 * ATS_ENOMEM. Thread-safe.
 */
enum ats_status atsc_out_open(const char *path, atsc_out **out, ats_err *err);

/** The temporary file name to write to (owned by o, valid until commit/abort). */
const char *atsc_out_tmp(const atsc_out *o);

/** The path the caller gave (owned by o, valid until commit/abort). */
const char *atsc_out_path(const atsc_out *o);

/**
 * The caller has closed its handle on the temporary. Flushes it to disk (fsync), checks again that
 * the target is not a directory or special file, and renames the temporary over it. Frees o in all
 * cases; on failure the temporary is removed and the target is untouched. ATS_EINVAL (message names
 * the path the caller gave).
 */
enum ats_status atsc_out_commit(atsc_out *o, ats_err *err);

/** Removes the temporary, unregisters and frees o (NULL is fine). The target is untouched. */
void atsc_out_abort(atsc_out *o);

/**
 * Notes `path` (borrowed) as an input of this run: from then on atsc_out_check / atsc_out_open refuse
 * it as an output (same device and inode, also through links or ../). Loaders of models, hardware
 * descriptions, traces, CSV series, routing files and GGUF files call it. Up to 64 inputs; a missing
 * file is ignored. Does nothing until atsc_in_guard_enable() (the `ats` program calls it in main();
 * a library user may well rewrite a file it read earlier). Thread-safe.
 */
void atsc_in_note(const char *path);
/**
 * Checks that input `path` can be opened for reading and is not a directory, before a format check
 * (H5Fis_hdf5 says "not HDF5" for a file it cannot read). `what` names the input ("load trace").
 * ATS_ENOTFOUND "PATH: cannot open WHAT: No such file or directory"; ATS_EINVAL for any other open
 * error (errno's text: permission denied, ...) and "PATH: is a directory, not a WHAT"; ATS_OK otherwise.
 */
enum ats_status atsc_in_readable(const char *path, const char *what, ats_err *err);
/** Turns the input guard on for this process (once, in main()). */
void atsc_in_guard_enable(void);

/** 1 when paths a and b name the same file (same inode if both exist, else the same canonical
 *  directory and base name). For commands with two outputs (--out and --timeline). */
int atsc_out_same_target(const char *a, const char *b);

struct json_t;

/**
 * Writes the JSON value `root` (borrowed; jansson) to `path` through a temporary, as
 * json_dump_file(root, tmp, flags) followed by atsc_out_commit. ATS_EINVAL (message names path).
 */
enum ats_status atsc_out_write_json(const char *path, const struct json_t *root, size_t flags, ats_err *err);

/**
 * Unlinks every temporary registered by this process (not those a forked child inherited from its
 * parent). Async-signal-safe (getpid, unlink); for signal handlers of subcommands that install their
 * own. The handles stay valid (their commit then fails).
 */
void atsc_out_cleanup_all(void);

/**
 * Installs the handler for SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ, SIGUSR1, SIGUSR2 and
 * SIGALRM: atsc_out_cleanup_all(), then the default action of the signal (the process dies of it, exit
 * status 128+sig). A signal the parent ignored stays ignored (nohup's SIGHUP; SIGPIPE and SIGXFSZ:
 * writes then fail with EPIPE / EFBIG and are reported). Returns 0, or -1 when sigaction fails. Call
 * once from main().
 */
int atsc_out_cleanup_signal_install(void);

/**
 * The handler of atsc_out_cleanup_signal_install for `sig` even where the parent ignored it. For commands
 * that a user stops with a signal: a non-interactive shell starts a background job (`ats sweep ... &`)
 * with SIGINT ignored, and `kill -INT PID` then did nothing. Returns 0, or -1 when sigaction fails.
 */
int atsc_out_cleanup_signal_take(int sig);

/** Number of registered temporaries now (for tests). */
int atsc_out_registered(void);

#ifdef __cplusplus
}
#endif

#endif
