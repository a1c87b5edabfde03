/*
 * atsc/text.h — text from files and the environment made safe for a one-line message.
 *
 * A value that came from outside (an environment variable, a field of a file given on the command
 * line, a path) may hold control characters or bytes that are not UTF-8; printed raw, they break the
 * one line a message must be, or garble the terminal. atsc_esc writes such a value escaped (\n, \t,
 * \r, \xNN) and cut to a bounded length, into a buffer the caller owns:
 *
 *     char pe[ATSC_ESC_PATH], e[ATSC_ESC_OUT];
 *     fprintf(stderr, "%s: field 4 = '%s'\n", atsc_esc(path, strlen(path), pe, sizeof pe),
 *             atsc_esc(w, strlen(w), e, sizeof e));
 *
 * No state; thread-safe.
 */
#ifndef ATSC_TEXT_H
#define ATSC_TEXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Size of an output buffer [bytes] for at most `max` bytes of input: each as \xNN, "..." and the NUL. */
#define ATSC_ESC_SIZE(max) (4 * (max) + 8)
/** The usual buffer: 64 bytes of a value (a knob, a field), then "...". */
#define ATSC_ESC_OUT ATSC_ESC_SIZE(64)
/** A buffer for a path: 1024 bytes of it. */
#define ATSC_ESC_PATH ATSC_ESC_SIZE(1024)

/** s[0..n) (borrowed; may hold NUL bytes) as one printable line into out (caller-owned, len bytes, at
 *  least ATSC_ESC_SIZE(1)): \n, \t, \r as such; other control bytes (< 0x20, 0x7f) and bytes that do not
 *  start or continue a valid UTF-8 sequence as \xNN; valid UTF-8 characters as they are. At most
 *  (len - 8) / 4 bytes of s (64 for ATSC_ESC_OUT), cut at a character boundary, then "...". Returns out. */
const char *atsc_esc(const char *s, size_t n, char *out, size_t len);

#ifdef __cplusplus
}
#endif
#endif
