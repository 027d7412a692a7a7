/* Call sites between the SPANK front door (spank/mpi_pstate.c) and the
 * modules that do the work: pinning (common/pin.h), the cpufreq policy and
 * restore (common/cpufreq.h, common/restore.h), the preload library
 * (preload/) and the node agent.  Each function is called from exactly one
 * hook, documented at its declaration; today each only logs at debug level.
 *
 * Every function returns 0 or a negative errno.  The caller logs a failure
 * and carries on: no hook of the plugin fails a job or drains a node
 * (man/mpi_pstate.8.in, ERRORS), so a failure here must leave the node in a
 * state the step-exit restore and the job-epilog backstop can repair. */
#ifndef MPI_PSTATE_SPANK_WIRE_H
#define MPI_PSTATE_SPANK_WIRE_H
#include <stdint.h>
#include <sys/types.h>

#include <slurm/spank.h>

#include "config.h"
#include "options.h"

/* What the hooks know about the step they run for, gathered once per hook
 * from spank_get_item(); sp stays valid for the duration of the hook only,
 * for items not copied here (S_STEP_ALLOC_CORES, S_JOB_ALLOC_CORES, ...). */
struct mpi_pstate_step {
        spank_t sp;
        uint32_t job_id;
        uint32_t step_id;
        uint32_t node_id;
        uint32_t local_tasks;
        uid_t uid;
        gid_t gid;
        int task_id; /* local task index, -1 outside per-task hooks */
        const struct mpi_pstate_config *cfg;
        const struct mpi_pstate_options *opt; /* limits already applied */
};

/* slurm_spank_init_post_opt, remote: slurmstepd, root, once per step per
 * node, before any task is forked.  Save each allocated core's cpufreq
 * policy into cfg->runtime_dir (restore record) and set the step's policy
 * (opt->governor, cfg->freq_min_khz/freq_max_khz). */
int mpi_pstate_wire_policy_apply(const struct mpi_pstate_step *st);

/* slurm_spank_init_post_opt, remote: slurmstepd, root, once per step per
 * node, after mpi_pstate_wire_policy_apply().  Start the node agent that
 * owns every frequency change of this step (skipped for mode profile only
 * if the agent has nothing to measure). */
int mpi_pstate_wire_agent_start(const struct mpi_pstate_step *st);

/* slurm_spank_task_init_privileged, remote: the forked task before exec,
 * root, once per local task.  Pin the task (opt->bind) inside
 * S_STEP_ALLOC_CORES; st->task_id is the local task index. */
int mpi_pstate_wire_pin_task(const struct mpi_pstate_step *st);

/* slurm_spank_task_init, remote: the forked task before exec, as the job's
 * user, once per local task, after the MPI_PSTATE_* variables were
 * exported.  Prepend the preload library of the task's MPI ABI to
 * LD_PRELOAD with spank_getenv/spank_setenv, keeping the user's entries. */
int mpi_pstate_wire_preload_prepend(const struct mpi_pstate_step *st);

/* slurm_spank_exit, remote: slurmstepd, root, once per step per node, after
 * every task ended.  Stop the agent, restore every core from the restore
 * record, and remove the record once restored. */
int mpi_pstate_wire_step_restore(const struct mpi_pstate_step *st);

/* slurm_spank_job_prolog, job_script: the prolog's slurmstepd, root, once
 * per node per job, before any step (also without a Prolog= script).
 * Backstop: restore cores left behind by an earlier job whose step-exit
 * restore never ran (slurmstepd killed), found through cfg->runtime_dir. */
int mpi_pstate_wire_job_prolog_backstop(const struct mpi_pstate_step *st);

/* slurm_spank_job_epilog, job_script: the epilog's slurmstepd, root, once
 * per node per job, after every step.  Backstop: restore every core this
 * job still holds a restore record for. */
int mpi_pstate_wire_job_epilog_backstop(const struct mpi_pstate_step *st);

#endif
