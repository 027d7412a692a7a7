/* SPDX-License-Identifier: BSD-3-Clause */
/* Save/restore record: what a frequency domain looked like before a job
 * step changed it, kept in a root-owned runtime directory (one small text
 * file per policy, named after the policy) until the step, or the backstop,
 * puts it back.  Format: docs/cpufreq.md ("Restore record").
 *
 * Directories are absolute paths walked with mpi_pstate_safeio_open_dir()
 * (no symlinks, root-owned, mode 0700 when created).  Records are read
 * hostile-safe: no symlink, regular file, owner uid 0, not group/other
 * writable, at most MPI_PSTATE_RESTORE_MAX_BYTES, strict parse.  Errors are
 * negative errno values. */
#ifndef MPI_PSTATE_RESTORE_H
#define MPI_PSTATE_RESTORE_H
#include <stdint.h>

#include "cpufreq.h"
#include "uncore.h"

#define MPI_PSTATE_RESTORE_VERSION 1
/* Version 1 plus a last line epp=<preference>: a policy that has one */
#define MPI_PSTATE_RESTORE_VERSION_EPP 2
#define MPI_PSTATE_RESTORE_MAX_BYTES 512

/* Who changed the domain: a Slurm job and step (step ids as Slurm numbers
 * them, including its special values for batch/extern steps). */
struct mpi_pstate_restore_owner {
        uint32_t job_id;
        uint32_t step_id;
};

struct mpi_pstate_restore_record {
        unsigned version;
        struct mpi_pstate_restore_owner owner;
        char policy[24]; /* "policy3" or legacy "cpu3"; also the file name */
        char driver[MPI_PSTATE_CPUFREQ_NAME_LEN];
        struct mpi_pstate_cpufreq_settings saved; /* setspeed_khz only with userspace */
};

/* Pure: record <-> text.  format returns the length written (without the
 * NUL) or -ENOSPC/-EINVAL; parse is strict (fixed keys in fixed order, no
 * blanks, no leading zeros, min <= max, setspeed iff userspace) and returns
 * 0 or -EINVAL, leaving *out untouched on failure. */
int mpi_pstate_restore_format(const struct mpi_pstate_restore_record *r, char *buf, size_t len);
int mpi_pstate_restore_parse(const char *text, struct mpi_pstate_restore_record *out);
/* "policy<N>" or "cpu<N>", N up to 7 digits: the only record names that
 * become paths. */
bool mpi_pstate_restore_valid_name(const char *s);

/* Records the current settings of p in dir (created if missing) before the
 * caller changes anything.  Atomic (temporary file, fsync, rename without
 * replacing).  If a record for p already exists and belongs to the same
 * owner, it is kept as it is (it holds the true original) and 0 is returned;
 * if it belongs to another owner, -EBUSY; if it cannot be trusted, its error
 * (the caller must then leave the domain alone).  known: the settings the
 * caller read a moment ago (NULL: read them here), so that a job step's
 * setup reads each sysfs file once. */
int mpi_pstate_restore_save_from(const char *dir, const struct mpi_pstate_cpufreq_policy *p,
                                 const struct mpi_pstate_cpufreq_settings *known,
                                 const struct mpi_pstate_restore_owner *who, char *err,
                                 size_t errlen);

/* An uncore domain's record, in the same directory under the name
 * "uncore-<domain>": the limits it had before the step lowered it. */
#define MPI_PSTATE_RESTORE_UNCORE_PREFIX "uncore-"
struct mpi_pstate_restore_uncore {
        struct mpi_pstate_restore_owner owner;
        char domain[MPI_PSTATE_UNCORE_NAME_LEN];
        uint32_t min_khz, max_khz;
};
int mpi_pstate_restore_uncore_format(const struct mpi_pstate_restore_uncore *r, char *buf,
                                     size_t len);
int mpi_pstate_restore_uncore_parse(const char *text, struct mpi_pstate_restore_uncore *out);

/* save_from() for an uncore domain, with the limits d was discovered with. */
int mpi_pstate_restore_save_uncore(const char *dir, const struct mpi_pstate_uncore_domain *d,
                                   const struct mpi_pstate_restore_owner *who, char *err,
                                   size_t errlen);

/* Reads and checks one record (name = policy name) without acting on it.
 * The product acts on records (_policy(), _all()); the tests read one back. */
int mpi_pstate_restore_load(const char *dir, const char *name,
                            struct mpi_pstate_restore_record *out);

enum {
        MPI_PSTATE_RESTORE_ANY_STEP = 1 << 0,  /* match the job only (node epilog) */
        MPI_PSTATE_RESTORE_ANY_OWNER = 1 << 1, /* restore whoever owns it (admin) */
};

/* Puts one policy (or "uncore-<domain>") back from its record under sysroot and deletes the record.
 * Returns 1 when restored, 0 when there was no record (idempotent), -EPERM
 * when the record belongs to another owner (left in place), -ESTALE when it
 * was made under another cpufreq driver than the policy's now (dropped
 * unwritten: docs/cpufreq.md section 4), or the error of
 * reading/checking the record or of the sysfs writes (record left in place
 * so that a later pass can retry). */
int mpi_pstate_restore_policy(const char *dir, const char *sysroot, const char *name,
                              const struct mpi_pstate_restore_owner *who, unsigned flags, char *err,
                              size_t errlen);

struct mpi_pstate_restore_summary {
        unsigned restored; /* records put back and deleted */
        unsigned foreign;  /* records of another owner, left alone */
        unsigned failed;   /* records that could not be trusted or written back */
        int first_error;   /* 0 or the first failure's errno (negative) */
        char first_name[64];
};

/* The backstop: restores every record in dir that matches who/flags (see
 * restore_policy), removes stale temporary files, and returns 0 if nothing
 * failed, else summary->first_error.  A missing dir is success with nothing
 * done.  Does not remove dir itself. */
int mpi_pstate_restore_all(const char *dir, const char *sysroot,
                           const struct mpi_pstate_restore_owner *who, unsigned flags,
                           struct mpi_pstate_restore_summary *summary, char *err, size_t errlen);

/* restore_all(), applied only to records whose domain (its CPUs as the
 * kernel gives them: related_cpus, an uncore domain's package) lies wholly
 * within cpus: the CPUs root gave the step, not what a record says.  A
 * record outside is left and counted foreign.  cpus NULL: no such check. */
int mpi_pstate_restore_all_within(const char *dir, const char *sysroot,
                                  const struct mpi_pstate_restore_owner *who, unsigned flags,
                                  const cpu_set_t *cpus, struct mpi_pstate_restore_summary *summary,
                                  char *err, size_t errlen);

#endif
