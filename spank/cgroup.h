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
 * given (fake trees in the tests); no Slurm.
 *
 * Without a cpuset file (cgroup v2 without the cpuset controller in the
 * job's subtree, ConstrainCores=no) nothing says which CPUs are the step's
 * alone: mpi_pstate_cgroup_decide() then keeps them only where the job has
 * every core of the node or no other job's cgroup holds one of them, and
 * otherwise leaves every one alone (fails closed). */
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
 * cpuset.cpus.effective), or the errno of reading it.  Without the step's
 * cpuset the other jobs are still looked for, in the first hierarchy whose
 * path names the job (have_jobs, jobs, first): each may then run on every
 * CPU (others full), nothing confining it either. */
int mpi_pstate_cgroup_cpus(const char *procroot, const char *cgroot, pid_t pid,
                           struct mpi_pstate_cgroup_cpus *out, char *err, size_t errlen);

/* What becomes of the step's CPUs at its first task's fork. */
enum mpi_pstate_cgroup_decision {
        MPI_PSTATE_CGROUP_CONFINED,   /* cpuset read: its CPUs kept, less other jobs' */
        MPI_PSTATE_CGROUP_EXCLUSIVE,  /* no cpuset; the job has every core of the node */
        MPI_PSTATE_CGROUP_ALONE,      /* no cpuset; no other job's cgroup holds a step CPU */
        MPI_PSTATE_CGROUP_OTHER_JOBS, /* no cpuset; another job's does: every CPU left alone */
        MPI_PSTATE_CGROUP_UNSEEN,     /* no cpuset, other jobs not seen, not exclusive: likewise */
};

/* What is known of the step's CPUs when its first task is forked. */
struct mpi_pstate_cgroup_facts {
        const cpu_set_t *cpus;   /* the step's allocated cores, mapped through hwloc */
        const cpu_set_t *cpuset; /* what the step's cpuset allows; NULL: no cpuset file */
        const cpu_set_t *others; /* what other running jobs' cgroups allow; NULL: not known */
        bool exclusive;          /* the job was allocated every core of the node */
};

/* The answer: keep, outside and shared split cpus (each CPU in exactly
 * one).  keep is managed (frequency domains set, the agent confined
 * there); the domains of outside and shared CPUs are left alone.  With a
 * cpuset, outside is what it does not allow and shared what another job's
 * cgroup allows of the rest; without one, every CPU is kept or none is
 * (shared: those another job's cgroup allows, outside: the rest). */
struct mpi_pstate_cgroup_verdict {
        enum mpi_pstate_cgroup_decision decision;
        cpu_set_t keep, outside, shared;
};

/* Pure: decides from f alone (no file, no Slurm); returns v->decision.
 * Without a cpuset, evidence wins over the allocation: another job's
 * cgroup holding a step CPU leaves them all alone even for a job that was
 * allocated every core (an OverSubscribe=FORCE partition allocates the
 * same cores twice). */
enum mpi_pstate_cgroup_decision mpi_pstate_cgroup_decide(const struct mpi_pstate_cgroup_facts *f,
                                                         struct mpi_pstate_cgroup_verdict *v);

/* Whether decision leaves every CPU of the step alone. */
bool mpi_pstate_cgroup_left_alone(enum mpi_pstate_cgroup_decision d);

/* Why, in words, for the slurmd log and the step record ("no cpuset file
 * and other jobs run on the node"). */
const char *mpi_pstate_cgroup_decision_text(enum mpi_pstate_cgroup_decision d);

#endif
