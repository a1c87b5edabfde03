/*
 * h5write.h — private to libats_common's HDF5 writers (results.c, trace_io.c): a write that fails
 * (disk full, file size limit) must not leave HDF5 with a half-closed file.
 *
 * Why: HDF5 1.10 keeps the id of a file whose H5Fclose failed (it flushes, a write fails) pointing
 * at freed memory; a second H5Fclose, or H5_term_library at process exit, touches it and the process
 * dies of SIGSEGV (exit 139) after the error was reported (`ats sim --out r.h5` on a full disk).
 * H5F_CLOSE_STRONG and closing the file's other ids first do not help: the file id itself is broken,
 * and so is a file whose H5Fflush failed once (its metadata cache stays "prepared for a flush" and
 * every later flush, the close's too, fails). So at the first failed write (an H5Dwrite, or the
 * H5Dclose that writes a dataset's cached chunks) a writer discards the file (atsc_h5_discard)
 * before it closes anything else: what HDF5 still writes goes to memory, every close succeeds, and
 * atsc_out_abort removes the temporary. Where the first failure is in the file's own close, or the
 * memory file refuses too (RLIMIT_FSIZE applies to it), only atsc_h5_no_atexit (atsc/results.h,
 * called by the CLI's main) keeps the exit from crashing.
 */
#ifndef ATSC_H5WRITE_H
#define ATSC_H5WRITE_H

#include <hdf5.h>

/** The errno that HDF5's error stack records for the last failed file write of this thread (the
 *  POSIX driver's "errno = N"), or 0. Call right after the failed HDF5 call. */
int atsc_h5_errno(void);

/** Points the POSIX file descriptor under `file` (the default sec2 driver) at an anonymous memory
 *  file (memfd; /dev/null where there is none), so that the writes HDF5 makes while closing the file
 *  and its objects do not fail on a full disk. The file's content is lost: only
 *  for a file that will be removed. Does nothing for another driver or an invalid id. */
void atsc_h5_discard(hid_t file);

#endif
