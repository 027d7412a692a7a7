/* SPDX-License-Identifier: BSD-3-Clause */
/* Shortcuts the unit suites use and the product does not: each calls the
 * product's function with its optional argument left out (NULL or 0), as
 * the tests mostly want.  Kept here, not in the common archive, so that
 * every function the archive exports has a caller in the product. */
#ifndef MPI_PSTATE_TEST_SHORTCUTS_H
#define MPI_PSTATE_TEST_SHORTCUTS_H

#include "cpufreq.h"
#include "restore.h"
#include "slot.h"

/* The whole cpufreq tree under sysroot. */
static inline int mpi_pstate_cpufreq_discover(const char *sysroot,
                                              struct mpi_pstate_cpufreq_node **out, char *err,
                                              size_t errlen)
{
        return mpi_pstate_cpufreq_discover_cpus(sysroot, NULL, out, err, errlen);
}

/* Checked against the settings as they are now. */
static inline int mpi_pstate_cpufreq_domain_prepare(struct mpi_pstate_cpufreq_domain *d,
                                                    const struct mpi_pstate_cpufreq_policy *p,
                                                    enum mpi_pstate_cpufreq_mech mech,
                                                    uint32_t low_khz, uint32_t high_khz, char *err,
                                                    size_t errlen)
{
        return mpi_pstate_cpufreq_domain_prepare_from(d, p, NULL, mech, low_khz, high_khz, err,
                                                      errlen);
}

/* Records p's settings as they are now. */
static inline int mpi_pstate_restore_save(const char *dir,
                                          const struct mpi_pstate_cpufreq_policy *p,
                                          const struct mpi_pstate_restore_owner *who, char *err,
                                          size_t errlen)
{
        return mpi_pstate_restore_save_from(dir, p, NULL, who, err, errlen);
}

/* Maps a segment of whatever slot count its header says. */
static inline int mpi_pstate_slot_map_segment(const char *path, int writable, uid_t owner,
                                              struct mpi_pstate_segment *seg)
{
        return mpi_pstate_slot_map_segment_n(path, writable, owner, 0, seg);
}

#endif
