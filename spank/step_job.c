/* SPDX-License-Identifier: BSD-3-Clause */
/* The job prolog's and epilog's backstops (spank/step.h): no step state,
 * only what earlier steps of the job left on this node (their pidfiles and
 * restore records), for a slurmstepd that was killed before its exit hook. */
#include "step.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentctl.h"
#include "log.h"
#include "safeio.h"
#include "step_state.h"

/* The agents of job J on this node that outlived their step (slurmstepd
 * killed): each step directory's pidfile, checked against the agent's
 * command line before any signal. */
static void stop_job_agents(const struct mpi_pstate_step *st, const struct mpi_pstate_paths *p)
{
        char prefix[32];
        struct dirent *de;
        DIR *d;
        int fd;

        snprintf(prefix, sizeof(prefix), "%u.", st->job_id);
        fd = mpi_pstate_safeio_open_dir(p->steps, 0, 0);
        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        while ((de = readdir(d))) {
                char dir[MPI_PSTATE_PATHS_LEN + 40], record[MPI_PSTATE_PATHS_LEN + 64];
                pid_t pid;
                int n;

                if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
                    mpi_pstate_safeio_check_name(de->d_name, 32) != 0)
                        continue;
                n = snprintf(dir, sizeof(dir), "%s/%s", p->steps, de->d_name);
                if (n < 0 || (size_t)n >= sizeof(dir) ||
                    (size_t)snprintf(record, sizeof(record), "%s/agent.json", dir) >=
                        sizeof(record))
                        continue;
                if (mpi_pstate_agentctl_read_pidfile(dir, "agent.pid", &pid) != 0)
                        continue;
                if (mpi_pstate_agentctl_stop(pid, record, MPI_PSTATE_STEP_AGENT_STOP_MS) > 0)
                        mp_error("job %u: agent %d of %s outlived its step: stopped", st->job_id,
                                 (int)pid, de->d_name);
        }
        closedir(d);
}

static int job_backstop(const struct mpi_pstate_step *st, const char *when)
{
        const struct mpi_pstate_restore_owner who = {st->job_id, 0};
        struct mpi_pstate_restore_summary sum = {0};
        struct mpi_pstate_paths p;
        char host[64], err[256] = "";
        int rc;

        if (st->job_id == 0)
                return 0;
        rc = mpi_pstate_step_node_paths(st, &p, host, sizeof(host));
        if (rc)
                return rc;
        stop_job_agents(st, &p);
        rc = mpi_pstate_restore_all(p.restore, st->cfg->sysroot, &who, MPI_PSTATE_RESTORE_ANY_STEP,
                                    &sum, err, sizeof(err));
        if (sum.restored)
                mp_error("job %u: %s restored %u domain(s) the job's steps left changed",
                         st->job_id, when, sum.restored);
        if (rc)
                mp_error("job %u: %s: %u domain(s) could not be restored: %s", st->job_id, when,
                         sum.failed, err);
        return rc;
}

int mpi_pstate_step_job_prolog_backstop(const struct mpi_pstate_step *st)
{
        return job_backstop(st, "job prolog");
}

int mpi_pstate_step_job_epilog_backstop(const struct mpi_pstate_step *st)
{
        return job_backstop(st, "job epilog");
}
