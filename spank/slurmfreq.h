/* SPDX-License-Identifier: BSD-3-Clause */
/* Slurm's own CPU frequency settings, as mpi-pstate needs them: whether
 * Slurm sets the frequencies of a step (CpuFreqDef in slurm.conf applies to
 * every step without --cpu-freq) and which governors it allows
 * (CpuFreqGovernors).  Read from slurm.conf text, no libslurm: slurmstepd's
 * configuration is not reachable through SPANK, and a request to slurmctld
 * from every step would load it.
 *
 * Governors are bits of enum mpi_pstate_governor (common/options.h),
 * 1u << MPI_PSTATE_GOVERNOR_<X>; KEEP is never set here. */
#ifndef MPI_PSTATE_SLURMFREQ_H
#define MPI_PSTATE_SLURMFREQ_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where slurm.conf is when SLURM_CONF is unset (Debian's and most builds'). */
#define MPI_PSTATE_SLURMFREQ_CONF "/etc/slurm/slurm.conf"

struct mpi_pstate_slurmfreq {
        bool def_set; /* CpuFreqDef is set: Slurm sets every step's governor */
        uint32_t def; /* its governor bit */
        uint32_t
            governors; /* CpuFreqGovernors, or Slurm's default OnDemand,Performance,UserSpace */
};

/* Slurm's defaults: no CpuFreqDef, CpuFreqGovernors=OnDemand,Performance,UserSpace. */
void mpi_pstate_slurmfreq_defaults(struct mpi_pstate_slurmfreq *sf);

/* Pure: applies one slurm.conf line.  Keys are case-insensitive, several
 * Key=Value words may share a line, '#' starts a comment; governor names
 * are matched as Slurm does (by prefix: "perf", "pow", "user", "onde", "co",
 * and "sch" for schedutil, which newer releases know).  Returns 0, or
 * -EINVAL for a CpuFreqDef/CpuFreqGovernors value Slurm would refuse (the
 * setting is then left as it was).  Other keys are ignored. */
int mpi_pstate_slurmfreq_line(struct mpi_pstate_slurmfreq *sf, const char *line);

/* Reads the file at path (NULL: $SLURM_CONF, else MPI_PSTATE_SLURMFREQ_CONF)
 * over the defaults.  Include lines are not followed.  Returns 0, -ENOENT
 * (no file: a configless node without its cache, a login node), another
 * negative errno, or -EINVAL for a bad value (the rest is still read). */
int mpi_pstate_slurmfreq_read(const char *path, struct mpi_pstate_slurmfreq *sf);

#endif
