/* SPDX-License-Identifier: BSD-3-Clause */
/* A step's per-task phase (spank/step.h): in each forked task before exec,
 * pinning as root, then as the user the environment that makes the task a
 * measured rank.  The task works on its own copy of s, inherited at fork. */
#include "step.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "contract.h"
#include "launch.h"
#include "log.h"
#include "options.h"
#include "step_state.h"

int mpi_pstate_step_pin_task(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        struct mpi_pstate_placement_info info;
        char err[256] = "";
        int rc;

        if (!s->pin_ok || !s->place || st->task_id < 0)
                return 0;
        rc = mpi_pstate_pinning_task(&s->pin, (unsigned)st->task_id, NULL, &s->task_set, &info, err,
                                     sizeof(err));
        if (rc) {
                mp_error("job %u step %u task %d: pinning: %s", st->job_id, st->step_id,
                         st->task_id, err);
                return rc;
        }
        if (info.flags & MPI_PSTATE_PLACEMENT_F_OVERSUBSCRIBED && st->task_id == 0)
                mp_info("job %u step %u: %u tasks share %u slot(s): cores are oversubscribed",
                        st->job_id, st->step_id, s->pin.ntasks, info.slots);
        if (sched_setaffinity(0, sizeof(s->task_set), &s->task_set) != 0)
                return -errno;
        s->task_pinned = true;
        return 0;
}

/* The task plugin binds after task_init_privileged: put ours back. */
static int pin_in_task(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        cpu_set_t now;

        if (!s->pin_ok || !s->place || !s->task_pinned || st->task_id < 0)
                return 0;
        if (sched_getaffinity(0, sizeof(now), &now) != 0)
                return -errno;
        if (CPU_EQUAL(&now, &s->task_set))
                return 0;
        /* Our own affinity, within what the step may use: no privilege needed. */
        return sched_setaffinity(0, sizeof(s->task_set), &s->task_set) == 0 ? 0 : -errno;
}

static int setenv_checked(spank_t sp, const char *name, const char *value)
{
        return spank_setenv(sp, name, value, 1) == ESPANK_SUCCESS ? 0 : -EIO;
}

int mpi_pstate_step_task_env(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        char cur[4096] = "", val[4096 + MPI_PSTATE_CONFIG_PATH_MAX + 2];
        int rc = pin_in_task(s, st), n;
        spank_err_t erc;

        if (rc)
                mp_error("job %u step %u task %d: pinning: %s", st->job_id, st->step_id,
                         st->task_id, strerror(-rc));
        if (s->shm_ok && setenv_checked(st->sp, "MPI_PSTATE_SHM", s->paths.shm) != 0)
                rc = -EIO;
        /* A daemon's ranks get their index from the launcher's variables. */
        if (!s->launcher && st->task_id >= 0) {
                char idx[16];

                snprintf(idx, sizeof(idx), "%d", st->task_id);
                if (setenv_checked(st->sp, "MPI_PSTATE_LOCAL_RANK", idx) != 0)
                        rc = -EIO;
        }
        /* An earlier plugin (pyxis) moved the task into its container:
         * the library must be there too, seen as the user. */
        if (s->preload && mpi_pstate_container_root_moved(&s->root) &&
            access(s->preload, R_OK) != 0) {
                mp_verbose("job %u step %u task %d: task root without %s: not measured "
                           "(container)",
                           st->job_id, st->step_id, st->task_id, s->preload);
                s->preload = NULL;
                s->unmeasured_container = true;
        }
        if (s->unmeasured_container &&
            setenv_checked(st->sp, MPI_PSTATE_ENV_UNMEASURED, "container"))
                rc = -EIO;
        if (!s->preload)
                return rc;
        erc = spank_getenv(st->sp, "LD_PRELOAD", cur, sizeof(cur));
        if (erc == ESPANK_ENV_NOEXIST)
                cur[0] = '\0';
        else if (erc != ESPANK_SUCCESS) {
                /* Too long to read back whole: adding ours would drop some of
                 * the user's entries, so leave theirs alone. */
                mp_error("job %u step %u: LD_PRELOAD too long: library not added", st->job_id,
                         st->step_id);
                return -ENOSPC;
        }
        n = mpi_pstate_launch_preload(s->preload, cur, val, sizeof(val));
        if (n < 0)
                return n;
        return setenv_checked(st->sp, "LD_PRELOAD", val) ? -EIO : rc;
}

int mpi_pstate_step_batch_env(const struct mpi_pstate_step *st)
{
        /* Open MPI 4 (ORTE) reads the first, Open MPI 5 (PRRTE) the second. */
        static const char *const vars[] = {"OMPI_MCA_ras_base_launch_orted_on_hn",
                                           "PRTE_MCA_ras_base_launch_orted_on_hn"};
        char v[16];

        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
                if (spank_getenv(st->sp, vars[i], v, sizeof(v)) != ESPANK_ENV_NOEXIST)
                        return 0; /* the user's own choice */
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
                if (setenv_checked(st->sp, vars[i], "1"))
                        return -EIO;
        return 0;
}
