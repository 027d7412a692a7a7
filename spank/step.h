/* SPDX-License-Identifier: BSD-3-Clause */
/* One step on one node, from the hooks of the SPANK front door (spank/mpi_pstate.c):
 * pinning (spank/pinning.h over spank/placement.h), the per-step cpufreq policy
 * and its restore (spank/policy.h over common/cpufreq.h and
 * common/restore.h), the slot segment (common/slot.h), the preload library
 * (LD_PRELOAD, spank/launch.h) and the node agent (spank/agentctl.h).  Each
 * function is called from exactly one hook, documented at its declaration;
 * those of a step's phases share its state, s (spank/step_state.h), which
 * the hooks pass; the job backstops need none.
 *
 * Every function returns 0 or a negative errno.  The caller logs a failure
 * and carries on: no hook of the plugin fails a job or drains a node
 * (man/mpi_pstate.8.in, ERRORS), so a failure here must leave the node in a
 * state the step-exit restore and the job-epilog backstop can repair. */
#ifndef MPI_PSTATE_SPANK_STEP_H
#define MPI_PSTATE_SPANK_STEP_H
#include <stdint.h>
#include <sys/types.h>

#include <slurm/spank.h>

#include "plugstack.h"
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

struct mpi_pstate_step_state;

/* slurm_spank_init_post_opt, remote: slurmstepd, root, once per step per
 * node, before any task is forked and before Slurm's task plugin applies
 * --cpu-freq/CpuFreqDef.  Finds the step's cores (the job's for an MPI
 * launcher's daemon), prepares pinning, and for mode on saves each frequency
 * domain the step owns alone into the restore records, writing nothing (the
 * records, and Slurm's own saved state, must be the settings from before the
 * step).  Mode profile only classifies the domains. */
int mpi_pstate_step_policy_save(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st);

/* slurm_spank_init_post_opt, remote, after mpi_pstate_step_policy_save():
 * checks the preload library and creates the step's slot segment for the
 * job's user (the forked tasks inherit both). */
int mpi_pstate_step_segment_create(struct mpi_pstate_step_state *s,
                                   const struct mpi_pstate_step *st);

/* slurm_spank_task_post_fork, remote, first task only: slurmstepd, root,
 * after Slurm's task plugin set the step's cores and before any task execs.
 * Sets the step's policy (opt->governor within cfg->freq_min_khz/
 * freq_max_khz), or, when Slurm set the step's frequencies (SLURM_CPU_FREQ_REQ
 * or CpuFreqDef), keeps Slurm's setting and writes nothing; starts the node
 * agent (on or profile; absent binary: logged, skipped), which takes the
 * cores' settings as the step's "high"; writes the step record. */
int mpi_pstate_step_start(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st);

/* slurm_spank_task_init_privileged, remote: the forked task before exec,
 * root, once per local task.  Pins the task (opt->bind) inside the step's
 * cores; st->task_id is the local task index.  The task plugin binds after
 * this hook (task/affinity), so mpi_pstate_step_task_env re-applies it. */
int mpi_pstate_step_pin_task(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st);

/* slurm_spank_task_init, remote: the forked task before exec, as the job's
 * user, once per local task, after the task plugin and after the
 * MPI_PSTATE_* options were exported.  Pins a task the user bound
 * (--cpu-bind: USER mode on the binding the task plugin made) or re-applies
 * the pinning the task plugin overrode; exports MPI_PSTATE_SHM and
 * MPI_PSTATE_LOCAL_RANK; prepends the preload library to LD_PRELOAD, keeping
 * the user's entries. */
int mpi_pstate_step_task_env(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st);

/* slurm_spank_task_exit, remote: slurmstepd, root, once per local task as it
 * is reaped.  When the last local task is gone, stops the agent (before the
 * step's processes are killed by proctrack). */
int mpi_pstate_step_task_exit(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st);

/* slurm_spank_task_init, remote, batch step of a job whose mode is not off:
 * the batch script, as the job's user.  Nothing of mpi-pstate goes there
 * (not a rank).  Only Open MPI's OMPI_MCA_ras_base_launch_orted_on_hn=1 and
 * PRTE_MCA_ras_base_launch_orted_on_hn=1 (Open MPI 5), unless the user set
 * either: Open MPI's mpirun otherwise forks the ranks of
 * its own node itself, inside the batch script; with it, it starts an orted
 * there too through srun, and every rank is a child of a served step. */
int mpi_pstate_step_batch_env(const struct mpi_pstate_step *st);

/* slurm_spank_exit, remote: slurmstepd, root, once per step per node, after
 * every task ended.  Stops the agent if it still runs, restores every domain
 * this step saved, rewrites the step record.  The segment stays for the node
 * epilog. */
int mpi_pstate_step_restore(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st);

/* slurm_spank_job_prolog, job_script: the prolog's slurmstepd, root, once
 * per node per job, before any step (also without a Prolog= script).
 * Backstop for a requeued job: restores what an earlier run of the same job
 * id left (slurmstepd killed before its exit hook). */
int mpi_pstate_step_job_prolog_backstop(const struct mpi_pstate_step *st);

/* slurm_spank_job_epilog, job_script: the epilog's slurmstepd, root, once
 * per node per job, after every step and before the Epilog script.
 * Backstop: stops any agent of the job still running and restores every
 * domain the job still holds a restore record for. */
int mpi_pstate_step_job_epilog_backstop(const struct mpi_pstate_step *st);

#endif
