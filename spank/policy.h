/* SPDX-License-Identifier: BSD-3-Clause */
/* The per-step cpufreq policy: for the frequency domains of a step's CPUs,
 * save each one's settings (restore record with the step as owner), set the
 * step's governor and frequency range within the admin's floor and ceiling,
 * and put everything back at the end.  No Slurm: common/cpufreq.h and
 * common/restore.h on a sysfs root given by the caller.
 *
 * A domain is changed only when all of its online CPUs belong to the step
 * (else it is "shared" and left alone: it holds another job's or nobody's
 * CPUs) and when no other step holds its restore record ("busy").  Mode
 * profile changes nothing: the domains are only classified.
 *
 * In slurmstepd the policy is applied in two calls around Slurm's own
 * --cpu-freq handling (docs/cpufreq.md "Slurm's frequency controls"): first
 * save_only, then, once Slurm has set the step's cores, the set (the save
 * is then a no-op: the record of the first call stays), which reuses the
 * first call's discovery and reads only the settings again (req.node). */
#ifndef MPI_PSTATE_SPANK_POLICY_H
#define MPI_PSTATE_SPANK_POLICY_H
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpufreq.h"
#include "restore.h"

enum mpi_pstate_policy_status {
        MPI_PSTATE_POLICY_SET,       /* saved, then set to the step's policy */
        MPI_PSTATE_POLICY_UNTOUCHED, /* profile: read only */
        MPI_PSTATE_POLICY_SHARED,    /* spills outside the step's CPUs: left alone */
        MPI_PSTATE_POLICY_BUSY,      /* another owner holds its restore record */
        MPI_PSTATE_POLICY_FAILED,    /* save, plan or write failed (record kept if saved) */
};

struct mpi_pstate_policy_domain {
        char name[24];
        cpu_set_t cpus; /* affected_cpus */
        enum mpi_pstate_policy_status status;
        enum mpi_pstate_cpufreq_mech mech; /* SET only */
        struct mpi_pstate_cpufreq_settings target;
        unsigned clamped; /* MPI_PSTATE_CPUFREQ_CLAMPED_* */
        int error;        /* FAILED/BUSY: negative errno */
};

struct mpi_pstate_policy_req {
        const char *sysroot;     /* "/sys" */
        const char *restore_dir; /* <runtime_dir>/restore */
        struct mpi_pstate_restore_owner owner;
        const cpu_set_t *cpus;                  /* the step's CPUs */
        bool change;                            /* false: profile, write nothing */
        const char *governor;                   /* NULL: keep the node's */
        uint32_t floor_khz, ceiling_khz;        /* admin freq_min/freq_max, 0 = none */
        enum mpi_pstate_cpufreq_mech mechanism; /* how the agent will clock down */
        /* Save the restore records only, write nothing: before the resource
         * manager sets the step's frequencies, so that the records (and the
         * resource manager's own saved state) hold the settings from before
         * the step, whichever restores last. */
        bool save_only;
        /* The resource manager set the step's governor and frequencies
         * (Slurm's --cpu-freq or CpuFreqDef): they win.  Nothing is written;
         * the mechanism is chosen without a governor change. */
        bool keep;
        /* NULL: discover the step's policies and free them.  Else in/out:
         * *node NULL: the discovery is left there for a later call (freed by
         * the caller with mpi_pstate_cpufreq_free); *node set: an earlier
         * call's discovery for the same CPUs, of which only the settings are
         * read again (what the resource manager may have written since). */
        struct mpi_pstate_cpufreq_node **node;
};

struct mpi_pstate_policy_result {
        char driver[MPI_PSTATE_CPUFREQ_NAME_LEN];
        unsigned ndomains;
        struct mpi_pstate_policy_domain *domains; /* freed by _result_free */
        unsigned set, shared, busy, failed;
        /* The mechanism of every SET domain, AUTO when they differ or none. */
        enum mpi_pstate_cpufreq_mech mech;
};

/* Classifies the step's domains and, when req->change, saves and sets them.
 * A domain's failure is recorded in its entry and does not stop the others.
 * Returns 0 (see the counts), -ENODEV (no cpufreq driver) or another
 * negative errno when discovery itself failed, with a reason in err. */
int mpi_pstate_policy_apply(const struct mpi_pstate_policy_req *req,
                            struct mpi_pstate_policy_result *res, char *err, size_t errlen);

void mpi_pstate_policy_result_free(struct mpi_pstate_policy_result *res);

const char *mpi_pstate_policy_status_name(enum mpi_pstate_policy_status s);

#endif
