/* SPDX-License-Identifier: BSD-3-Clause */
/* NUMA-aware placement of the local tasks of a job step, as a pure function of
 * (hwloc topology, allocated cores, ntasks, task index, options) -> cpuset.
 * Nothing here binds anything or knows Slurm or MPI: the plugin adapter calls
 * hwloc_set_cpubind()/sched_setaffinity() with the result.  docs/pinning.md
 * holds the exact placement rules and example tables.
 *
 * Index spaces, because mixing them up is the classic pinning bug:
 *  - "cores" are hwloc LOGICAL core indices (Core L#n).  Slurm's
 *    S_JOB_ALLOC_CORES / S_STEP_ALLOC_CORES ("0-3,8-11") are abstract core
 *    indices that slurmd derives from the same hwloc logical order, so they
 *    are passed here unchanged.  On a topology without Core objects every PU
 *    counts as a core.
 *  - "cpus" are PU OS indices (PU P#n), what the kernel, sched_setaffinity,
 *    taskset -c and /sys cpulists use.  Every output cpuset is in this space.
 *
 * Every function returns 0 on success or a negative errno and leaves its
 * output untouched on failure:
 *  -EINVAL  impossible or malformed request (NULL argument, ntasks 0, task
 *           index out of range, unknown mode, empty allocation, user mask that
 *           misses the allocation, malformed list);
 *  -ERANGE  an index the topology does not have (core 40 on a 32-core node,
 *           a list element above MPI_PSTATE_PLACEMENT_MAX_INDEX);
 *  -ENOSPC  output buffer too small;
 *  -ENOMEM  out of memory.
 * Functions taking err/errlen also write a one-line reason there (without a
 * prefix or trailing newline); err may be NULL. */
#ifndef MPI_PSTATE_PLACEMENT_H
#define MPI_PSTATE_PLACEMENT_H
#include <stddef.h>
#include <hwloc.h>

#include "options.h"

/* The words of --mpi-pstate-bind (options.def: none, every PU of the
 * allocation; cores, task i gets the i-th block of cores_per_task
 * allocated cores; compact, like cores but no task straddles a NUMA
 * domain or package; scatter, round-robin over packages, then NUMA
 * domains within one), with the same values, and USER, which no user
 * names: the user's own mask (--cpu-bind) intersected with the
 * allocation. */
enum mpi_pstate_placement_mode {
#define MPI_PSTATE_WORD_BIND(ID, word, doc) MPI_PSTATE_PLACEMENT_##ID = MPI_PSTATE_BIND_##ID,
#include "options.def"
        MPI_PSTATE_PLACEMENT_USER = MPI_PSTATE_BIND_COUNT,
};

enum mpi_pstate_placement_smt {
        MPI_PSTATE_PLACEMENT_SMT_ONE, /* the first PU (lowest logical index) of each core */
        MPI_PSTATE_PLACEMENT_SMT_ALL, /* every PU of each core */
};

/* The domain level at which compact/scatter cut the allocation into slots. */
enum mpi_pstate_placement_level {
        MPI_PSTATE_PLACEMENT_LEVEL_NUMA,    /* (package, NUMA node) pairs: no task crosses a NUMA
                                               domain */
        MPI_PSTATE_PLACEMENT_LEVEL_PACKAGE, /* tasks may cross NUMA domains, never packages */
        MPI_PSTATE_PLACEMENT_LEVEL_MACHINE, /* plain allocation order */
};

/* The allocation has fewer slots than tasks: some cores carry more than one
 * task.  Deliberately not an error: the job runs, the adapter warns once. */
#define MPI_PSTATE_PLACEMENT_F_OVERSUBSCRIBED 0x1u
/* USER mode: part of the user's mask lay outside the allocation and was dropped. */
#define MPI_PSTATE_PLACEMENT_F_MASK_TRIMMED 0x2u

/* Lists and bitmaps above this index are rejected (-ERANGE): bounds the memory
 * a hostile list can make us allocate, far above any real node. */
#define MPI_PSTATE_PLACEMENT_MAX_INDEX 65535u

struct mpi_pstate_placement_req {
        enum mpi_pstate_placement_mode mode;
        enum mpi_pstate_placement_smt smt; /* ignored by NONE and USER */
        /* Allocated cores, logical core indices; NULL means every core. */
        hwloc_const_bitmap_t alloc_cores;
        unsigned ntasks;         /* local tasks on this node, >= 1 */
        unsigned task;           /* local task index, < ntasks */
        unsigned cores_per_task; /* 0 is taken as 1; counted in CORES, not PUs */
        /* USER mode only (NULL otherwise): the task's mask, PU OS indices. */
        hwloc_const_bitmap_t user_cpus;
};

struct mpi_pstate_placement_info {
        unsigned flags;                        /* MPI_PSTATE_PLACEMENT_F_* */
        enum mpi_pstate_placement_level level; /* level used (MACHINE for none/cores/user) */
        /* Distinct task placements the allocation offers at that level (1 for
         * none and user); ntasks > slots means oversubscribed. */
        unsigned slots;
};

/* Computes the cpuset (PU OS indices) of req->task into out.  info may be
 * NULL.  Deterministic: every task of the step may call it independently and
 * the results agree. */
int mpi_pstate_placement_compute(hwloc_topology_t topo, const struct mpi_pstate_placement_req *req,
                                 hwloc_bitmap_t out, struct mpi_pstate_placement_info *info,
                                 char *err, size_t errlen);

/* Strict Linux/Slurm list syntax: "0-3,8,10-11", decimal, ascending ranges,
 * no blanks except one trailing newline (sysfs); "" or "\n" is the empty set.
 * Works for core lists and cpu lists alike: the caller knows which it holds. */
int mpi_pstate_placement_cpulist_parse(const char *s, hwloc_bitmap_t out);

/* Writes set as a list ("0-3,8"; "" when empty).  -ENOSPC if buf is too small
 * (buf then holds nothing useful), -EINVAL for an infinite set. */
int mpi_pstate_placement_cpulist_format(hwloc_const_bitmap_t set, char *buf, size_t len);

/* Logical core indices -> PU OS indices, one or all PUs per core.
 * -ERANGE if a core is not in the topology. */
int mpi_pstate_placement_cores_to_cpus(hwloc_topology_t topo, hwloc_const_bitmap_t cores,
                                       enum mpi_pstate_placement_smt smt, hwloc_bitmap_t cpus);

/* Loads a topology the way slurmd loads its own, so that Slurm's core ids
 * (S_STEP_ALLOC_CORES) and hwloc's logical core indices count the same
 * cores: the whole machine (HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED), not only
 * the CPUs the caller's cgroup cpuset allows.  Under ConstrainCores or
 * CpuSpecList slurmstepd runs in a restricted cpuset; without the flag hwloc
 * renumbers the allowed cores from 0 and Slurm's core 1 can become another
 * core's PU.  Only what placement walks is kept (packages, cores, PUs, NUMA
 * nodes).  xml: an hwloc XML file instead of this machine (tests).  0 or a
 * negative errno; *topo is NULL on failure. */
int mpi_pstate_placement_topology_load(hwloc_topology_t *topo, const char *xml);

/* PU OS indices -> logical indices of every core holding at least one of them.
 * -ERANGE if a PU is not in the topology.  The plugin does not need it (it
 * only goes from Slurm's cores to CPUs): tests/unit/spank/test_pin.c calls it to
 * check that a computed placement covers exactly cores_per_task cores and that
 * mpi_pstate_placement_cores_to_cpus() round-trips. */
int mpi_pstate_placement_cpus_to_cores(hwloc_topology_t topo, hwloc_const_bitmap_t cpus,
                                       hwloc_bitmap_t cores);

#endif
