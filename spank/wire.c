/* Placeholders for the work the plugin hands to other modules: each logs at
 * debug level that it ran and succeeds, so the front door can be deployed
 * and tested before the modules behind it are wired (see wire.h). */
#include "wire.h"

#include "log.h"

static void not_wired(const char *what, const struct mpi_pstate_step *st)
{
        mp_debug("%s: not wired yet (job %u step %u node %u task %d)", what, st->job_id,
                 st->step_id, st->node_id, st->task_id);
}

int mpi_pstate_wire_policy_apply(const struct mpi_pstate_step *st)
{
        not_wired("policy save/set", st);
        return 0;
}

int mpi_pstate_wire_agent_start(const struct mpi_pstate_step *st)
{
        not_wired("agent start", st);
        return 0;
}

int mpi_pstate_wire_pin_task(const struct mpi_pstate_step *st)
{
        not_wired("pinning", st);
        return 0;
}

int mpi_pstate_wire_preload_prepend(const struct mpi_pstate_step *st)
{
        not_wired("LD_PRELOAD prepend", st);
        return 0;
}

int mpi_pstate_wire_step_restore(const struct mpi_pstate_step *st)
{
        not_wired("step-exit restore", st);
        return 0;
}

int mpi_pstate_wire_job_prolog_backstop(const struct mpi_pstate_step *st)
{
        not_wired("job_prolog backstop", st);
        return 0;
}

int mpi_pstate_wire_job_epilog_backstop(const struct mpi_pstate_step *st)
{
        not_wired("job_epilog backstop", st);
        return 0;
}
