/* SPDX-License-Identifier: BSD-3-Clause */
/* A step's last phase (spank/step.h): the agent stopped once the last local
 * task is reaped, then every domain the step saved put back and the step
 * record rewritten with the counts. */
#include "step.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "agentctl.h"
#include "log.h"
#include "safeio.h"
#include "step_state.h"

static void stop_agent(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        int rc;

        if (s->agent <= 0)
                return;
        mpi_pstate_steptime_begin(&s->time);
        if (s->agent_fd >= 0 && !mpi_pstate_agentctl_pidfd_is(s->agent_fd, s->agent)) {
                /* not ours any more: never closed here, the pid way below */
                mp_info("job %u step %u: descriptor %d is no longer agent %d's pidfd: stopped "
                        "by its pid and command line",
                        st->job_id, st->step_id, s->agent_fd, (int)s->agent);
                s->agent_fd = -1;
        }
        if (s->agent_fd >= 0) {
                rc = mpi_pstate_agentctl_stop_pidfd(s->agent_fd, MPI_PSTATE_STEP_AGENT_STOP_MS);
                close(s->agent_fd);
                s->agent_fd = -1;
        } else {
                rc = mpi_pstate_agentctl_stop(s->agent, s->paths.record,
                                              MPI_PSTATE_STEP_AGENT_STOP_MS);
        }
        if (rc == 2) {
                s->agent_state = "killed";
                mp_error("job %u step %u: agent %d ignored SIGTERM for %u ms: killed", st->job_id,
                         st->step_id, (int)s->agent, MPI_PSTATE_STEP_AGENT_STOP_MS);
        } else if (rc < 0) {
                mp_error("job %u step %u: stopping agent %d: %s", st->job_id, st->step_id,
                         (int)s->agent, strerror(-rc));
                return;
        } else if (rc == 0) {
                /* Gone before its step ended: a bad argument, a crash. */
                s->agent_state = "exited";
                mp_error("job %u step %u: agent %d had exited before the step ended; see %s",
                         st->job_id, st->step_id, (int)s->agent, s->paths.log);
        } else {
                s->agent_state = "stopped";
        }
        s->agent = -s->agent; /* remembered for the record, never signalled again */
        if (s->paths_ok) {
                int fd = mpi_pstate_safeio_open_dir(s->paths.step, 0, 0);

                if (fd >= 0) {
                        unlinkat(fd, "agent.pid", 0);
                        close(fd);
                }
        }
        mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_AGENT_STOP);
}

static int restore_domains(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st,
                           struct mpi_pstate_restore_summary *sum)
{
        const struct mpi_pstate_restore_owner who = {st->job_id, st->step_id};
        char err[256] = "";
        int rc;

        /* Only the domains of the CPUs root gave the step, whatever a
         * record names: the records are root's, and this keeps them so. */
        rc = mpi_pstate_restore_all_within(s->paths.restore, st->cfg->sysroot, &who, 0,
                                           CPU_COUNT(&s->cpus) ? &s->cpus : NULL, sum, err,
                                           sizeof(err));
        if (rc)
                mp_error("job %u step %u: restore: %u restored, %u failed: %s; the job epilog "
                         "retries",
                         st->job_id, st->step_id, sum->restored, sum->failed, err);
        else if (sum->restored)
                mp_verbose("job %u step %u: %u domain(s) restored", st->job_id, st->step_id,
                           sum->restored);
        return rc;
}

/* The last task gone: the agent stopped and, at once, root puts back
 * every domain of the step from its records (the agent, not root, cannot),
 * before slurmstepd resets its own --cpu-freq settings. */
int mpi_pstate_step_task_exit(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        if (++s->tasks_exited < st->local_tasks)
                return 0;
        stop_agent(s, st);
        if (s->paths_ok && !s->restored_early) {
                restore_domains(s, st, &s->early);
                s->restored_early = true;
        }
        return 0;
}

int mpi_pstate_step_restore(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        struct mpi_pstate_restore_summary sum = {0};
        int rc = 0;

        stop_agent(s, st);
        mpi_pstate_steptime_begin(&s->time);
        if (s->paths_ok) {
                rc = restore_domains(s, st, &sum);
                sum.restored += s->restored_early ? s->early.restored : 0;
                mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_RESTORE);
                if (s->agent < 0)
                        s->agent = -s->agent;
                mpi_pstate_step_write_record(s, st, true, &sum);
                mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_END_RECORD);
                mpi_pstate_step_log_time(s, st, true);
        }
        if (s->pin_ok)
                mpi_pstate_pinning_fini(&s->pin);
        s->pin_ok = false;
        mpi_pstate_policy_result_free(&s->policy);
        s->policy_ok = false;
        mpi_pstate_cpufreq_free(s->cpufreq);
        s->cpufreq = NULL;
        return rc;
}
