/* SPDX-License-Identifier: BSD-3-Clause */
/* Uncore frequency domains (intel-uncore-frequency, MSR or TPMI): which
 * exist, which CPUs each serves, and the kept-fd handle the node agent
 * lowers and raises a domain's max_freq_khz with, one pwrite each way.
 *
 * Only the package_XX_die_YY directories are domains here.  Under TPMI they
 * are the package roots, whose writes the kernel fans out to every fabric
 * cluster (uncoreNN); the clusters themselves are left alone, so a step
 * must own the whole package or die to act (docs/levers.md, "Uncore").
 * Frequencies are kHz as in sysfs; the kernel rounds a write down to
 * 100 MHz.  Errors are negative errno values.  No Slurm, no MPI. */
#ifndef MPI_PSTATE_UNCORE_H
#define MPI_PSTATE_UNCORE_H
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MPI_PSTATE_UNCORE_MAX 64      /* domains read; more are ignored */
#define MPI_PSTATE_UNCORE_NAME_LEN 24 /* "package_NN_die_NN" and NUL */

struct mpi_pstate_uncore_domain {
        char name[MPI_PSTATE_UNCORE_NAME_LEN];
        char dir[512];
        unsigned package, die;
        cpu_set_t cpus; /* every CPU of that package and die, online or not */
        uint32_t min_khz, max_khz;
        uint32_t initial_min_khz, initial_max_khz; /* 0 when the driver lacks them */
};

struct mpi_pstate_uncore_node {
        unsigned n;
        struct mpi_pstate_uncore_domain dom[MPI_PSTATE_UNCORE_MAX];
};

/* Reads sysroot/devices/system/cpu/intel_uncore_frequency and the CPUs'
 * topology (physical_package_id, die_id: 0 when absent).  -ENODEV when
 * there is no such directory or no domain in it.  *out is freed with
 * free(). */
int mpi_pstate_uncore_discover(const char *sysroot, struct mpi_pstate_uncore_node **out, char *err,
                               size_t errlen);

/* "package_NN_die_NN" with decimal NN: the only names that become paths. */
bool mpi_pstate_uncore_valid_name(const char *s, unsigned *package, unsigned *die);

/* Re-reads min_freq_khz and max_freq_khz of d. */
int mpi_pstate_uncore_read(const struct mpi_pstate_uncore_domain *d, uint32_t *min_khz,
                           uint32_t *max_khz);

/* Writes both limits in the order that keeps min <= max after each write
 * (the MSR driver does not check it). */
int mpi_pstate_uncore_apply(const char *dir, uint32_t min_khz, uint32_t max_khz, char *err,
                            size_t errlen);

struct mpi_pstate_uncore_handle {
        int fd; /* max_freq_khz, O_WRONLY */
        uint32_t low_khz, high_khz;
        char low[12], high[12];
        unsigned char low_len, high_len;
};

/* Opens d's max_freq_khz: down to low_khz, up to high_khz.  -ERANGE when
 * low is not below high. */
int mpi_pstate_uncore_prepare(struct mpi_pstate_uncore_handle *h,
                              const struct mpi_pstate_uncore_domain *d, uint32_t low_khz,
                              uint32_t high_khz, char *err, size_t errlen);
int mpi_pstate_uncore_lower(const struct mpi_pstate_uncore_handle *h);
int mpi_pstate_uncore_raise(const struct mpi_pstate_uncore_handle *h);
void mpi_pstate_uncore_close(struct mpi_pstate_uncore_handle *h);

#endif
