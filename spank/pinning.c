/* SPDX-License-Identifier: BSD-3-Clause */
/* Task pinning, the plugin's glue (pinning.h): from what Slurm says of a
 * step (its cores, tasks, CPUs per task, the user's --cpu-bind) to one
 * placement request per task (placement.h), answered as the cpu_set_t the
 * task is bound to (spank/step_task.c binds it). */
#include "pinning.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <hwloc/glibc-sched.h>

/* The bind words are the pin modes, value for value (spank/placement.h). */
static enum mpi_pstate_placement_mode mode_of(enum mpi_pstate_bind bind)
{
        return (unsigned)bind < MPI_PSTATE_BIND_COUNT ? (enum mpi_pstate_placement_mode)bind
                                                      : MPI_PSTATE_PLACEMENT_CORES;
}

/* Slurm counts --cpus-per-task in CPUs, which are hardware threads when the
 * node has SMT; placement.h counts cores (docs/pinning.md). */
static unsigned threads_per_core(hwloc_topology_t topo)
{
        hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, 0);
        int n;

        if (!core)
                return 1;
        n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, core->cpuset, HWLOC_OBJ_PU);
        return n > 0 ? (unsigned)n : 1;
}

/* Slurm writes the type as comma-separated words ("verbose,map_cpu:",
 * "none", "quiet,cores"); a word other than the two reporting ones is a
 * binding choice.  Anything unreadable counts as a choice: leaving the
 * tasks alone is the safe side. */
static bool explicit_binding(const char *type)
{
        const char *p = type;

        if (!type)
                return false;
        while (*p) {
                size_t n = strcspn(p, ",");

                if (n && !(n == 7 && strncmp(p, "verbose", 7) == 0) &&
                    !(n == 5 && strncmp(p, "quiet", 5) == 0))
                        return true;
                p += n;
                if (*p == ',')
                        p++;
        }
        return false;
}

bool mpi_pstate_pinning_ours(enum mpi_pstate_mode mode, const char *cpu_bind_type, bool daemon)
{
        if (mode != MPI_PSTATE_MODE_ON)
                return false;
        return daemon || !explicit_binding(cpu_bind_type);
}

/* Once per step, in slurmstepd, before any task starts: the whole machine,
 * as slurmd numbers it (spank/placement.h). */
int mpi_pstate_pinning_load(hwloc_topology_t *topo)
{
        return mpi_pstate_placement_topology_load(topo, NULL);
}

int mpi_pstate_pinning_init(struct mpi_pstate_pinning *p, hwloc_topology_t topo, const char *cores,
                            unsigned ntasks, unsigned cpus_per_task, enum mpi_pstate_bind bind,
                            bool user_bound, bool daemon, char *err, size_t errlen)
{
        unsigned tpc;
        int rc;

        memset(p, 0, sizeof(*p));
        p->topo = topo;
        p->cores = hwloc_bitmap_alloc();
        p->cpus = hwloc_bitmap_alloc();
        if (!topo || !p->cores || !p->cpus) {
                rc = topo ? -ENOMEM : -EINVAL;
                snprintf(err, errlen, "no topology");
                goto fail;
        }
        rc = mpi_pstate_placement_cpulist_parse(cores ? cores : "", p->cores);
        if (rc == 0 && hwloc_bitmap_iszero(p->cores))
                rc = -EINVAL;
        if (rc) {
                snprintf(err, errlen, "allocated cores \"%.64s\": not a core list",
                         cores ? cores : "");
                goto fail;
        }
        rc = mpi_pstate_placement_cores_to_cpus(topo, p->cores, MPI_PSTATE_PLACEMENT_SMT_ALL,
                                                p->cpus);
        if (rc) {
                snprintf(err, errlen, "allocated cores \"%.64s\" are not all on this node", cores);
                goto fail;
        }
        tpc = threads_per_core(topo);
        p->ntasks = ntasks ? ntasks : 1;
        p->cores_per_task = cpus_per_task ? (cpus_per_task + tpc - 1) / tpc : 1;
        if (daemon)
                p->mode = MPI_PSTATE_PLACEMENT_NONE;
        else if (user_bound)
                p->mode = MPI_PSTATE_PLACEMENT_USER;
        else
                p->mode = mode_of(bind);
        return 0;
fail:
        mpi_pstate_pinning_fini(p);
        return rc;
}

void mpi_pstate_pinning_fini(struct mpi_pstate_pinning *p)
{
        if (p->cores)
                hwloc_bitmap_free(p->cores);
        if (p->cpus)
                hwloc_bitmap_free(p->cpus);
        if (p->topo)
                hwloc_topology_destroy(p->topo);
        memset(p, 0, sizeof(*p));
}

int mpi_pstate_pinning_task(const struct mpi_pstate_pinning *p, unsigned task,
                            const cpu_set_t *current, cpu_set_t *out,
                            struct mpi_pstate_placement_info *info, char *err, size_t errlen)
{
        hwloc_bitmap_t set = hwloc_bitmap_alloc(), user = NULL;
        struct mpi_pstate_placement_req req = {
            .mode = p->mode,
            .smt = MPI_PSTATE_PLACEMENT_SMT_ALL,
            .alloc_cores = p->cores,
            .ntasks = p->ntasks,
            .task = task,
            .cores_per_task = p->cores_per_task,
        };
        int rc;

        if (!set) {
                rc = -ENOMEM;
                goto out;
        }
        if (p->mode == MPI_PSTATE_PLACEMENT_USER) {
                user = hwloc_bitmap_alloc();
                if (!user || !current) {
                        rc = user ? -EINVAL : -ENOMEM;
                        goto out;
                }
                hwloc_cpuset_from_glibc_sched_affinity(p->topo, user, current, sizeof(*current));
                req.user_cpus = user;
        }
        rc = mpi_pstate_placement_compute(p->topo, &req, set, info, err, errlen);
        if (rc)
                goto out;
        CPU_ZERO(out);
        if (hwloc_cpuset_to_glibc_sched_affinity(p->topo, set, out, sizeof(*out)) != 0)
                rc = -ERANGE;
out:
        if (user)
                hwloc_bitmap_free(user);
        if (set)
                hwloc_bitmap_free(set);
        return rc;
}

int mpi_pstate_pinning_cpus(const struct mpi_pstate_pinning *p, cpu_set_t *out)
{
        CPU_ZERO(out);
        return hwloc_cpuset_to_glibc_sched_affinity(p->topo, p->cpus, out, sizeof(*out)) == 0
                   ? 0
                   : -ERANGE;
}
