/* SPDX-License-Identifier: BSD-3-Clause */
/* The step's cgroup cpuset, and the CPUs other jobs' cgroups let them run
 * on.  Slurm's cores mapped through hwloc are what the step was allocated;
 * the cgroup is what it is confined to (ConstrainCores), and on a partition
 * with OverSubscribe=YES/FORCE, or with hardware threads declared as cores,
 * another job may be confined to the same CPUs.
 *
 * The step's cgroup is found from /proc/<pid>/cgroup of one of its
 * processes, never built from the job id (Slurm 26.05 names cgroup v2
 * directories by SLUID): its nearest "step_*" ancestor (or the cgroup
 * itself), whose effective CPUs are read (v1 cpuset.effective_cpus, else
 * cpuset.cpus; v2 cpuset.cpus.effective).  Other jobs are the other
 * "job_*" directories beside the step's "job_*" ancestor (v1: under every
 * "uid_*" directory of the same parent).  Pure file reading under the roots
 * given (fake trees in the tests); no Slurm. */
#ifndef MPI_PSTATE_SPANK_CGROUP_H
#define MPI_PSTATE_SPANK_CGROUP_H
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define MPI_PSTATE_CGROUP_MAX_JOBS 4096 /* other job directories read at most */

struct mpi_pstate_cgroup_cpus {
        cpu_set_t step;   /* the step's cgroup's effective CPUs */
        cpu_set_t others; /* CPUs any other job's cgroup allows */
        unsigned jobs;    /* other jobs' cgroups read */
        bool have_jobs;   /* a "job_*" ancestor was found: others is known */
        char dir[512];    /* the step's cgroup directory */
        char first[64];   /* the first other job's directory name ("job_123"), "" */
};

/* Fills *out for the process pid, with /proc at procroot and the cgroup
 * file systems at cgroot ("/sys/fs/cgroup").  0, or a negative errno with a
 * reason in err: -ENOENT no cpuset cgroup (no v1 cpuset line, no v2
 * cpuset.cpus.effective), or the errno of reading it. */
int mpi_pstate_cgroup_cpus(const char *procroot, const char *cgroot, pid_t pid,
                           struct mpi_pstate_cgroup_cpus *out, char *err, size_t errlen);

#endif
