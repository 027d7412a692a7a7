/* SPDX-License-Identifier: BSD-3-Clause */
/* The plugin's step record, <runtime_dir>/steps/<job>.<step>/plugin.json:
 * what the plugin did for one step on one node (settings, the fate of each
 * frequency domain, the agent, the restore), for the node epilog's record
 * and for an admin reading the node.  Written when the step starts and
 * rewritten when it ends.  Pure formatting here; the format is documented in
 * docs/admin.md ("Step record").
 *
 * Version 1, one JSON object:
 *   {"version":1,"job":J,"step":S,"node":"n1","mode":"on","launcher":false,
 *    "cpus":"0-3","governor":"keep","mechanism":"setspeed","driver":"acpi-cpufreq",
 *    "preload":"/usr/local/lib/mpi-pstate/libmpi-pstate.so","container":null,
 *    "unmeasured":null,"shm":"/dev/shm/...",
 *    "agent":{"status":"started","pid":1234},
 *    "domains":[{"policy":"policy0","cpus":"0","status":"set","governor":"userspace",
 *                "min_khz":1200000,"max_khz":3000000}],
 *    "restore":{"state":"pending","restored":0,"foreign":0,"failed":0}}
 * Absent things are null; "driver" is null without cpufreq.
 *
 * Version 2 adds "segments", always present: the segments the plugin made
 * for the step, each as the plugin saw it through its own fd (root code
 * trusts a file under /dev/shm only when its (dev, ino) and size match, its
 * link count is 1, and reads at most nslots slots; docs/security.md):
 *   "segments":[{"name":"mpi-pstate.J.S.<16 hex>","dir":"/dev/shm","dev":45,
 *                "ino":123,"nslots":4,"bytes":69632,"uid":1000}]
 * [] when none was made.
 *
 * An optional "cgroup" after "unmeasured", when the step's cgroup was read:
 *   "cgroup":{"cpus":"0-3","outside":"","shared":"3","other_jobs":1,
 *             "first_other":"job_123"} ("first_other" null with no other job)
 *
 * An optional "left_alone" after it, when no cpuset file was found and
 * every CPU of the step was left alone for want of one (spank/cgroup.h):
 *   "left_alone":"no cpuset file and other jobs run on the node"
 * "cpus" is then "" and the domains are not set (no agent runs). */
#ifndef MPI_PSTATE_SPANK_STEPREC_H
#define MPI_PSTATE_SPANK_STEPREC_H
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define MPI_PSTATE_STEPREC_VERSION 2

/* What the step's cgroup said of its CPUs (spank/cgroup.h): its cpuset,
 * the allocated CPUs it does not allow ("outside"), and those another job's
 * cgroup allows ("shared"); both were taken out of "cpus", and the domains
 * holding them left alone.  Lists in cpulist syntax, "" for none. */
struct mpi_pstate_steprec_cgroup {
        const char *cpus, *outside, *shared;
        unsigned other_jobs;
        const char *first_other; /* the first other job's cgroup directory name, "" */
};

struct mpi_pstate_steprec {
        uint32_t job, step;
        const char *node, *mode, *cpus, *governor, *mechanism;
        bool launcher;
        const char *preload;    /* NULL: not injected */
        const char *container;  /* "oci", "apptainer", "root" (container.h), NULL: none seen */
        const char *unmeasured; /* why the ranks are not measured ("container"), NULL */
        const struct mpi_pstate_steprec_cgroup *cgroup; /* NULL: not read, key absent */
        const char *left_alone; /* why every CPU was left alone, NULL: key absent */
        const char *shm;        /* NULL: no segment */
        /* The segment the plugin made (with shm): its fstat and slot count. */
        uint64_t shm_dev, shm_ino;
        uint32_t shm_nslots, shm_uid;
        const char *agent; /* started, stopped, killed, exited, absent, failed, none */
        int agent_pid;     /* 0: none */
        const struct mpi_pstate_policy_result *policy; /* NULL: no cpufreq */
        bool ended;
        unsigned restored, foreign, failed;
};

/* Formats r into buf; returns the length (without NUL) or -ENOSPC. */
int mpi_pstate_steprec_format(const struct mpi_pstate_steprec *r, char *buf, size_t len);

/* A CPU set in list syntax ("0-3,8"); returns the length or -ENOSPC. */
int mpi_pstate_steprec_cpulist(const cpu_set_t *set, char *buf, size_t len);

#endif
