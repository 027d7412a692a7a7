/* SPDX-License-Identifier: BSD-3-Clause */
/* What the cpufreq_*.c files share and no caller of cpufreq.h needs. */
#ifndef MPI_PSTATE_CPUFREQ_SYSFS_H
#define MPI_PSTATE_CPUFREQ_SYSFS_H
#include <stddef.h>

/* dir/file into out; -ENAMETOOLONG when it does not fit. */
int mpi_pstate_cpufreq_join(char *out, size_t outlen, const char *dir, const char *file);

#endif
