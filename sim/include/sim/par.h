/*
 * sim/par.h — the processes of one sweep: the ranks of an MPI job (Open MPI, `mpirun -n N` or `srun`),
 * or this process alone. The sweep driver (sim/sweep.h) talks to the other ranks only through this
 * interface; libats_sim has one implementation with MPI (sim/mpi/par_mpi.c, built when CMake finds Open
 * MPI: -DATS_MPI=AUTO|ON) and one without (sim/mpi/par_none.c: always one rank).
 *
 * Lifecycle: sim_par_init (MPI_Init_thread with MPI_THREAD_FUNNELED, only when an MPI launcher started
 * the process: OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK in the environment) → every rank does the
 * same work → sim_par_finalize. Messages are bytes (MPI_BYTE): all ranks run the same binary on the
 * same kind of machine (one struct layout). Only the thread that called sim_par_init may call the
 * other functions (MPI_THREAD_FUNNELED). One handle per process (MPI_Init happens once).
 */
#ifndef SIM_PAR_H
#define SIM_PAR_H

#include <stddef.h>

#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sim_par sim_par;

/** 1 when this build has MPI (sim/mpi/par_mpi.c), 0 otherwise. */
int sim_par_have_mpi(void);

/**
 * Starts the ranks: MPI_Init_thread when an MPI launcher started this process, else one rank. `argc`,
 * `argv` are main()'s (MPI may look at them). On success *out is new (free with sim_par_finalize).
 * ATS_EINVAL when an MPI launcher started this process with more than one rank but the build has no
 * MPI (every rank would run the whole sweep and write the same file), or MPI has no FUNNELED threads;
 * the message says so. Not thread-safe; once per process.
 */
enum ats_status sim_par_init(int *argc, char ***argv, sim_par **out, ats_err *err);
/** This process's rank (0 .. size-1) and the number of ranks. */
int sim_par_rank(const sim_par *p);
int sim_par_size(const sim_par *p);
/** Ranks on this node (MPI_COMM_TYPE_SHARED; 1 without MPI): the default thread count divides the
 *  node's cores among them. */
int sim_par_local_size(const sim_par *p);
/** This rank's host name (borrowed, valid until finalize). */
const char *sim_par_host(const sim_par *p);

/**
 * Collective: every rank passes its status `rc` (0 ok) and a message `msg` (may be NULL or ""). Returns
 * the largest rc of all ranks; when it is not 0, *bad_rank (may be NULL) is the lowest rank with that
 * rc and `out` (len bytes, may be NULL, may be `msg`) receives its message (truncated). Blocks until all ranks call.
 */
int sim_par_agree(sim_par *p, int rc, const char *msg, int *bad_rank, char *out, size_t len);
/** Collective: rank 0's `text` (NUL-terminated, at most len bytes with the NUL) overwrites every other
 *  rank's buffer `text` (of len bytes). */
void sim_par_bcast_text(sim_par *p, char *text, size_t len);

/** Sends n bytes to rank dst with `tag` (0..30000). 0 ok, -1 on an MPI failure. Blocking (buffered by
 *  MPI for small messages). */
int sim_par_send(sim_par *p, int dst, int tag, const void *buf, size_t n);
/** Non-blocking receive of one message with `tag` from rank src (-1: any rank): when one has arrived,
 *  copies it into buf (cap bytes), sets *from and returns its length; returns 0 when none has; -1 when
 *  it is longer than cap or MPI failed. */
long sim_par_poll(sim_par *p, int src, int tag, int *from, void *buf, size_t cap);

/** Ends the job after an unrecoverable error: MPI_Abort(code) when several ranks run (the launcher
 *  ends the others), else nothing (the caller returns code). */
void sim_par_abort(sim_par *p, int code);
/** MPI_Finalize (when MPI was started) and frees p. NULL is a no-op. */
void sim_par_finalize(sim_par *p);

#ifdef __cplusplus
}
#endif
#endif
