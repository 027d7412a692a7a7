/* SPDX-License-Identifier: BSD-3-Clause */
/* What one step on one node carries from phase to phase (spank/step.h): made
 * in init_post_opt (step_prepare.c), completed at the first task's fork
 * (step_start.c), read by the forked tasks (step_task.c), which inherit it,
 * and closed at task_exit and exit (step_exit.c).  Every phase takes it as an
 * argument; the one instance lives beside the plugin's other state in
 * spank/mpi_pstate.c, because a SPANK hook receives no pointer of the
 * plugin's own.  The helpers below serve more than one phase. */
#ifndef MPI_PSTATE_SPANK_STEP_STATE_H
#define MPI_PSTATE_SPANK_STEP_STATE_H
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "container.h"
#include "cpufreq.h"
#include "paths.h"
#include "pinning.h"
#include "restore.h"
#include "policy.h"
#include "restore.h"
#include "step.h"
#include "steptime.h"

/* The agent restores every domain and writes its record on SIGTERM. */
#define MPI_PSTATE_STEP_AGENT_STOP_MS 5000

struct mpi_pstate_step_state {
        /* The restore as the last task ends (before Slurm resets its own
         * --cpu-freq): what it put back, for the step's end record. */
        bool restored_early;
        struct mpi_pstate_restore_summary early;
        bool paths_ok;
        struct mpi_pstate_paths paths;
        char host[64];
        bool launcher; /* the step's task is an MPI launcher's daemon */
        bool place;    /* mpi-pstate pins the tasks (pinning.h: _ours) */
        bool pin_ok;
        struct mpi_pstate_pinning pin;
        cpu_set_t cpus;
        char cpulist[512];
        /* What the step's cgroup allowed (cgroup_confine()): the record's "cgroup". */
        bool cg_ok;
        char cg_cpus[512], cg_outside[512], cg_shared[512];
        unsigned cg_jobs;
        char cg_first[64];
        /* Without a cpuset file, why every CPU was left alone (static text,
         * spank/cgroup.h), else NULL: the record's "left_alone". */
        const char *left_alone;
        bool policy_ok; /* cpufreq found; policy holds the domains */
        struct mpi_pstate_policy_result policy;
        struct mpi_pstate_policy_req policy_req; /* of the save, for the set */
        /* The save's discovery of the step's policies: the set reads only
         * their settings again (each sysfs read counts on a busy node). */
        struct mpi_pstate_cpufreq_node *cpufreq;
        bool slurm_set; /* Slurm set the step's frequencies: its setting wins */
        bool shm_ok;
        struct stat shm_made; /* the segment as the plugin made it (its fd's fstat) */
        uint32_t shm_nslots;
        const char *preload; /* NULL: not injected */
        enum mpi_pstate_container container;
        bool unmeasured_container;      /* library absent in the task's root */
        char unmeasured[96];            /* else why the ranks are not measured, "" */
        struct mpi_pstate_root_id root; /* slurmstepd's "/", to see a task moved */
        const char *agent_state;
        pid_t agent;
        int agent_fd; /* pidfd of the agent, or < 0 (kernel without pidfds) */
        unsigned tasks_exited;
        /* In a forked task: the set privileged pinning applied. */
        bool task_pinned;
        cpu_set_t task_set;
        struct mpi_pstate_steptime time; /* logged at debug level, read by bench/step/ */
};

/* A step before its first hook: no agent, no descriptor. */
#define MPI_PSTATE_STEP_STATE_INIT                                                                 \
        {                                                                                          \
                .agent_state = "none", .agent_fd = -1                                              \
        }

/* The step's paths on this node (host name in runtime_dir expanded); a
 * failure is logged.  0 or a negative errno. */
int mpi_pstate_step_node_paths(const struct mpi_pstate_step *st, struct mpi_pstate_paths *p,
                               char *host, size_t hostlen);

/* plugin.json in the step's directory, at its start and again at its end
 * (ended, with the restore's counts in sum); a failure is logged. */
void mpi_pstate_step_write_record(const struct mpi_pstate_step_state *s,
                                  const struct mpi_pstate_step *st, bool ended,
                                  const struct mpi_pstate_restore_summary *sum);

/* One debug line per half of the step (steptime.h): where its time went. */
void mpi_pstate_step_log_time(const struct mpi_pstate_step_state *s,
                              const struct mpi_pstate_step *st, bool end);

#endif
