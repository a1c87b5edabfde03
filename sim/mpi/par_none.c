/* sim/mpi/par_none.c — sim/par.h without MPI: this process is the only rank. Built when CMake finds no
 * MPI (or -DATS_MPI=OFF); a process that an MPI launcher started as one of several ranks is refused, so
 * that N copies do not each run the whole sweep and write the same file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/par.h"

struct sim_par {
    char host[256];
};

int sim_par_have_mpi(void) { return 0; }

enum ats_status sim_par_init(int *argc, char ***argv, sim_par **out, ats_err *err)
{
    (void)argc;
    (void)argv;
    *out = NULL;
    /* mpirun, a PMI launcher, or srun's task count of this step */
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        if (v && atoi(v) > 1)
            return ats_err_set(err, ATS_EINVAL, "started as one of %s ranks (%s=%s), but this ats was built "
                               "without MPI: install libopenmpi-dev (./tools/deps.sh) and build with -DATS_MPI=ON",
                               v, names[i], v);
    }
    sim_par *p = calloc(1, sizeof *p);
    if (!p) return ats_err_set(err, ATS_ENOMEM, "sim_par_init: out of memory");
    if (gethostname(p->host, sizeof p->host - 1) != 0) snprintf(p->host, sizeof p->host, "?");
    *out = p;
    return ATS_OK;
}

int sim_par_rank(const sim_par *p) { (void)p; return 0; }
int sim_par_size(const sim_par *p) { (void)p; return 1; }
int sim_par_local_size(const sim_par *p) { (void)p; return 1; }
const char *sim_par_host(const sim_par *p) { return p->host; }

int sim_par_agree(sim_par *p, int rc, const char *msg, int *bad_rank, char *out, size_t len)
{
    (void)p;
    if (bad_rank) *bad_rank = 0;
    if (out && len && out != msg) snprintf(out, len, "%s", msg ? msg : "");
    return rc;
}

void sim_par_bcast_text(sim_par *p, char *text, size_t len) { (void)p; (void)text; (void)len; }

int sim_par_send(sim_par *p, int dst, int tag, const void *buf, size_t n)
{
    (void)p; (void)dst; (void)tag; (void)buf; (void)n;
    return -1;
}

long sim_par_poll(sim_par *p, int src, int tag, int *from, void *buf, size_t cap)
{
    (void)p; (void)src; (void)tag; (void)from; (void)buf; (void)cap;
    return 0;
}

void sim_par_abort(sim_par *p, int code) { (void)p; (void)code; }

void sim_par_finalize(sim_par *p) { free(p); }
