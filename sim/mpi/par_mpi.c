/* sim/mpi/par_mpi.c — sim/par.h over MPI (Open MPI): the ranks of `mpirun -n N` / `srun`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/par.h"

struct sim_par {
    int mpi;          /* 1: MPI_Init_thread was called here */
    int rank, size, local_size;
    char host[256];
};

int sim_par_have_mpi(void) { return 1; }

/* started by an MPI launcher: Open MPI's mpirun, or a PMIx / PMI launcher (srun --mpi=pmix) */
static int launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

enum ats_status sim_par_init(int *argc, char ***argv, sim_par **out, ats_err *err)
{
    *out = NULL;
    sim_par *p = calloc(1, sizeof *p);
    if (!p) return ats_err_set(err, ATS_ENOMEM, "sim_par_init: out of memory");
    p->size = p->local_size = 1;
    if (gethostname(p->host, sizeof p->host - 1) != 0) snprintf(p->host, sizeof p->host, "?");
    const char *srun_tasks = getenv("SLURM_STEP_NUM_TASKS");
    if (!launched() && srun_tasks && atoi(srun_tasks) > 1) { /* N copies would each run the whole sweep */
        free(p);
        return ats_err_set(err, ATS_EINVAL, "srun started %s tasks without an MPI process manager "
                           "(SLURM_STEP_NUM_TASKS=%s, no PMIX_RANK/PMI_RANK): use srun --mpi=pmix, or mpirun",
                           srun_tasks, srun_tasks);
    }
    if (launched()) {
        int provided = 0;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(p);
            return ats_err_set(err, ATS_EINVAL, "MPI_Init_thread failed");
        }
        p->mpi = 1;
        if (provided < MPI_THREAD_FUNNELED) {
            MPI_Finalize();
            free(p);
            return ats_err_set(err, ATS_EINVAL, "MPI provides no MPI_THREAD_FUNNELED (got level %d): the "
                               "sweep's OpenMP threads need it", provided);
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &p->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &p->size);
        MPI_Comm node;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_size(node, &p->local_size);
            MPI_Comm_free(&node);
        }
    }
    *out = p;
    return ATS_OK;
}

int sim_par_rank(const sim_par *p) { return p->rank; }
int sim_par_size(const sim_par *p) { return p->size; }
int sim_par_local_size(const sim_par *p) { return p->local_size; }
const char *sim_par_host(const sim_par *p) { return p->host; }

int sim_par_agree(sim_par *p, int rc, const char *msg, int *bad_rank, char *out, size_t len)
{
    char mine_msg[ATS_ERR_LEN]; /* msg and out may be the same buffer */
    snprintf(mine_msg, sizeof mine_msg, "%s", msg ? msg : "");
    if (bad_rank) *bad_rank = p->rank;
    if (out && len) snprintf(out, len, "%s", mine_msg);
    if (!p->mpi || p->size == 1) return rc;
    int mine[2] = {rc, p->rank}, worst = 0;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (worst == 0) return 0;
    /* the lowest rank with the worst rc: MINLOC over (rc == worst ? rank : size) */
    mine[0] = rc == worst ? p->rank : p->size;
    int who = 0;
    MPI_Allreduce(&mine[0], &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    char buf[ATS_ERR_LEN] = "";
    if (p->rank == who) snprintf(buf, sizeof buf, "%s", mine_msg);
    MPI_Bcast(buf, sizeof buf, MPI_CHAR, who, MPI_COMM_WORLD);
    buf[sizeof buf - 1] = 0;
    if (bad_rank) *bad_rank = who;
    if (out && len) snprintf(out, len, "%s", buf);
    return worst;
}

void sim_par_bcast_text(sim_par *p, char *text, size_t len)
{
    if (!p->mpi || p->size == 1 || len == 0) return;
    MPI_Bcast(text, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD);
    text[len - 1] = 0;
}

int sim_par_send(sim_par *p, int dst, int tag, const void *buf, size_t n)
{
    if (!p->mpi) return -1;
    return MPI_Send(buf, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

long sim_par_poll(sim_par *p, int src, int tag, int *from, void *buf, size_t cap)
{
    if (!p->mpi) return 0;
    int flag = 0, n = 0;
    MPI_Status st;
    if (MPI_Iprobe(src < 0 ? MPI_ANY_SOURCE : src, tag, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS) return -1;
    if (!flag) return 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    if ((size_t)n > cap) return -1;
    if (MPI_Recv(buf, n, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
    if (from) *from = st.MPI_SOURCE;
    return n;
}

void sim_par_abort(sim_par *p, int code)
{
    if (p && p->mpi && p->size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
}

void sim_par_finalize(sim_par *p)
{
    if (!p) return;
    if (p->mpi) MPI_Finalize();
    free(p);
}
