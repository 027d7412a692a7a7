/* SPDX-License-Identifier: BSD-3-Clause */
/* Restore records on disk: saved before a domain is first changed, found
 * and applied by whoever ends the step (the agent, the plugin, the node
 * Epilog's backstop), each only by the owner it names and within the CPUs
 * it is given.  Their text is restore_record.c's. */
#include "restore.h"
#include "errmsg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parse.h"
#include "safeio.h"

#define RECORD_UID 0 /* only root writes records; anything else is not ours */

/* "uncore-<domain>": the name of an uncore record, and the domain in it. */
static const char *uncore_record_domain(const char *name)
{
        size_t n = strlen(MPI_PSTATE_RESTORE_UNCORE_PREFIX);

        if (strncmp(name, MPI_PSTATE_RESTORE_UNCORE_PREFIX, n) != 0 ||
            !mpi_pstate_uncore_valid_name(name + n, NULL, NULL))
                return NULL;
        return name + n;
}

/* Reads an uncore record the way load_at() reads a policy's. */
static int load_uncore_at(int dirfd, const char *name, struct mpi_pstate_restore_uncore *out)
{
        char buf[MPI_PSTATE_RESTORE_MAX_BYTES + 1];
        const char *domain = uncore_record_domain(name);
        int rc;

        if (!domain)
                return -EINVAL;
        rc = mpi_pstate_safeio_read_small(dirfd, name, buf, sizeof(buf), MPI_PSTATE_SAFEIO_OWNED,
                                          RECORD_UID);
        if (rc < 0)
                return rc;
        rc = mpi_pstate_restore_uncore_parse(buf, out);
        if (!rc && strcmp(out->domain, domain) != 0)
                rc = -EINVAL; /* renamed onto another domain's name */
        return rc;
}

static int load_at(int dirfd, const char *name, struct mpi_pstate_restore_record *out)
{
        char buf[MPI_PSTATE_RESTORE_MAX_BYTES + 1];
        struct mpi_pstate_restore_record r;
        int rc;

        if (!mpi_pstate_restore_valid_name(name))
                return -EINVAL;
        rc = mpi_pstate_safeio_read_small(dirfd, name, buf, sizeof(buf), MPI_PSTATE_SAFEIO_OWNED,
                                          RECORD_UID);
        if (rc < 0)
                return rc;
        rc = mpi_pstate_restore_parse(buf, &r);
        if (rc)
                return rc;
        /* A record renamed onto another policy's name must not restore that one. */
        if (strcmp(r.policy, name) != 0)
                return -EINVAL;
        *out = r;
        return 0;
}

int mpi_pstate_restore_load(const char *dir, const char *name,
                            struct mpi_pstate_restore_record *out)
{
        int dirfd, rc;

        if (!dir || !name || !out)
                return -EINVAL;
        dirfd = mpi_pstate_safeio_open_dir(dir, 0, 0);
        if (dirfd < 0)
                return dirfd;
        rc = load_at(dirfd, name, out);
        close(dirfd);
        return rc;
}

/* The owner of the record name, either kind. */
static int load_owner(int dirfd, const char *name, struct mpi_pstate_restore_owner *owner)
{
        struct mpi_pstate_restore_record r;
        struct mpi_pstate_restore_uncore u;
        int rc;

        if (uncore_record_domain(name)) {
                rc = load_uncore_at(dirfd, name, &u);
                *owner = u.owner;
        } else {
                rc = load_at(dirfd, name, &r);
                *owner = r.owner;
        }
        return rc;
}

static bool same_owner(const struct mpi_pstate_restore_owner *a,
                       const struct mpi_pstate_restore_owner *b)
{
        return a->job_id == b->job_id && a->step_id == b->step_id;
}

/* What an existing record for name means to a save by who: 0 it is who's
 * already (kept as it is: it holds the true original), -EBUSY another
 * owner's, -ENOENT there is none, else the reason it cannot be trusted. */
static int check_existing(int dirfd, const char *dir, const char *name,
                          const struct mpi_pstate_restore_owner *who, char *err, size_t errlen)
{
        struct mpi_pstate_restore_owner old;
        int rc = load_owner(dirfd, name, &old);

        if (rc == -ENOENT)
                return rc;
        if (rc) {
                mpi_pstate_errmsg_set(err, errlen, "%s/%s exists and cannot be trusted: %s", dir,
                                      name, strerror(-rc));
                return rc;
        }
        if (!same_owner(&old, who)) {
                mpi_pstate_errmsg_set(err, errlen, "%s is held by job %u step %u", name, old.job_id,
                                      old.step_id);
                return -EBUSY;
        }
        return 0;
}

int mpi_pstate_restore_save_from(const char *dir, const struct mpi_pstate_cpufreq_policy *p,
                                 const struct mpi_pstate_cpufreq_settings *known,
                                 const struct mpi_pstate_restore_owner *who, char *err,
                                 size_t errlen)
{
        struct mpi_pstate_restore_record r;
        char text[MPI_PSTATE_RESTORE_MAX_BYTES];
        int dirfd = -1, rc, n;

        if (!dir || !p || !who)
                return -EINVAL;
        memset(&r, 0, sizeof(r));
        r.version = MPI_PSTATE_RESTORE_VERSION;
        r.owner = *who;
        snprintf(r.policy, sizeof(r.policy), "%s", p->name);
        memcpy(r.driver, p->driver, sizeof(r.driver));
        dirfd = mpi_pstate_restore_valid_name(r.policy) ? mpi_pstate_safeio_open_dir(dir, 1, 0700)
                                                        : -EINVAL;
        if (dirfd < 0) {
                rc = dirfd;
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", dirfd == -EINVAL ? p->name : dir,
                                      strerror(-rc));
                goto out;
        }
        /* An existing record settles it before any sysfs read or fsync: the
         * agent saves every domain the plugin saved a moment before. */
        rc = check_existing(dirfd, dir, r.policy, who, err, errlen);
        if (rc != -ENOENT)
                goto out;
        r.saved = known ? *known : r.saved;
        rc = known ? 0 : mpi_pstate_cpufreq_read_settings(p, &r.saved);
        if (rc) {
                mpi_pstate_errmsg_set(err, errlen, "%s: reading settings to save: %s", p->name,
                                      strerror(-rc));
                goto out;
        }
        n = mpi_pstate_restore_format(&r, text, sizeof(text));
        rc = n < 0 ? n
                   : mpi_pstate_safeio_write_atomic(dirfd, r.policy, text, (size_t)n, 0600,
                                                    MPI_PSTATE_SAFEIO_NOREPLACE);
        if (rc == -EEXIST) /* a concurrent save won: settle as above */
                rc = check_existing(dirfd, dir, r.policy, who, err, errlen);
        else if (rc)
                mpi_pstate_errmsg_set(err, errlen, "%s/%s: %s", dir, r.policy, strerror(-rc));
out:
        if (dirfd >= 0)
                close(dirfd);
        return rc;
}

int mpi_pstate_restore_save_uncore(const char *dir, const struct mpi_pstate_uncore_domain *d,
                                   const struct mpi_pstate_restore_owner *who, char *err,
                                   size_t errlen)
{
        struct mpi_pstate_restore_uncore r;
        char name[64], text[MPI_PSTATE_RESTORE_MAX_BYTES];
        int dirfd, rc, n;

        if (!dir || !d || !who)
                return -EINVAL;
        memset(&r, 0, sizeof(r));
        r.owner = *who;
        snprintf(r.domain, sizeof(r.domain), "%s", d->name);
        r.min_khz = d->min_khz;
        r.max_khz = d->max_khz;
        snprintf(name, sizeof(name), MPI_PSTATE_RESTORE_UNCORE_PREFIX "%s", d->name);
        n = mpi_pstate_restore_uncore_format(&r, text, sizeof(text));
        if (n < 0) {
                mpi_pstate_errmsg_set(err, errlen, "%s: cannot record it", d->name);
                return n;
        }
        dirfd = mpi_pstate_safeio_open_dir(dir, 1, 0700);
        if (dirfd < 0) {
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", dir, strerror(-dirfd));
                return dirfd;
        }
        rc = check_existing(dirfd, dir, name, who, err, errlen);
        if (rc == -ENOENT) {
                rc = mpi_pstate_safeio_write_atomic(dirfd, name, text, (size_t)n, 0600,
                                                    MPI_PSTATE_SAFEIO_NOREPLACE);
                if (rc == -EEXIST)
                        rc = check_existing(dirfd, dir, name, who, err, errlen);
                else if (rc)
                        mpi_pstate_errmsg_set(err, errlen, "%s/%s: %s", dir, name, strerror(-rc));
        }
        close(dirfd);
        return rc;
}

static bool owner_matches(const struct mpi_pstate_restore_owner *rec,
                          const struct mpi_pstate_restore_owner *who, unsigned flags)
{
        if (flags & MPI_PSTATE_RESTORE_ANY_OWNER)
                return true;
        if (!who || rec->job_id != who->job_id)
                return false;
        return (flags & MPI_PSTATE_RESTORE_ANY_STEP) || rec->step_id == who->step_id;
}

/* Deletes a record once its settings are back. */
static int drop_record(int dirfd, const char *dir, const char *name, char *err, size_t errlen)
{
        if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT) {
                int rc = -errno;

                mpi_pstate_errmsg_set(err, errlen, "%s/%s: restored but not removed: %s", dir, name,
                                      strerror(-rc));
                return rc;
        }
        return 1;
}

/* What a record loaded with result rc lets a restore by who do: 1 go on,
 * else what to return (0 there is none, the load's error, -EPERM another
 * owner's: *foreign).  owner is read only when rc is 0. */
static int may_restore(int rc, const struct mpi_pstate_restore_owner *owner, const char *dir,
                       const char *name, const struct mpi_pstate_restore_owner *who, unsigned flags,
                       bool *foreign, char *err, size_t errlen)
{
        if (rc == -ENOENT)
                return 0;
        if (rc) {
                mpi_pstate_errmsg_set(err, errlen, "%s/%s: untrusted record: %s", dir, name,
                                      strerror(-rc));
                return rc;
        }
        if (!owner_matches(owner, who, flags)) {
                *foreign = true;
                mpi_pstate_errmsg_set(err, errlen, "%s/%s belongs to job %u step %u", dir, name,
                                      owner->job_id, owner->step_id);
                return -EPERM;
        }
        return 1;
}

static int restore_uncore_at(int dirfd, const char *dir, const char *sysroot, const char *name,
                             const struct mpi_pstate_restore_owner *who, unsigned flags,
                             bool *foreign, char *err, size_t errlen)
{
        struct mpi_pstate_restore_uncore r;
        char path[600];
        int rc = may_restore(load_uncore_at(dirfd, name, &r), &r.owner, dir, name, who, flags,
                             foreign, err, errlen);

        if (rc != 1)
                return rc;
        if (snprintf(path, sizeof(path), "%s/devices/system/cpu/intel_uncore_frequency/%s", sysroot,
                     r.domain) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        rc = mpi_pstate_uncore_apply(path, r.min_khz, r.max_khz, err, errlen);
        return rc ? rc : drop_record(dirfd, dir, name, err, errlen);
}

/* A record made under another driver than the policy's now is stale.
 * Writing intel_pstate's or amd-pstate's status re-registers the driver,
 * and the kernel recreates every policy with that driver's defaults: nothing
 * the step wrote is left on the domain, and the saved values belong to
 * another driver (a governor it lacks, an EPP it reads otherwise).  Such a
 * record is dropped without a write; returns -ESTALE then, 0 when the driver
 * is unchanged or unreadable (an offline CPU, no driver loaded: the record
 * is kept and the writes report their own error). */
static int same_driver(int dirfd, const char *dir, const char *name, const char *policy_dir,
                       const struct mpi_pstate_restore_record *r, char *err, size_t errlen)
{
        char now[MPI_PSTATE_CPUFREQ_NAME_LEN];
        int rc;

        if (mpi_pstate_cpufreq_read_driver(policy_dir, now) != 0 || strcmp(now, r->driver) == 0)
                return 0;
        rc = drop_record(dirfd, dir, name, err, errlen);
        if (rc < 0)
                return rc;
        mpi_pstate_errmsg_set(err, errlen,
                              "%s/%s: made under driver %s, the domain is now %s's (its status "
                              "was changed, which resets the domain): nothing written back, "
                              "record dropped",
                              dir, name, r->driver, now);
        return -ESTALE;
}

static int restore_at(int dirfd, const char *dir, const char *sysroot, const char *name,
                      const struct mpi_pstate_restore_owner *who, unsigned flags, bool *foreign,
                      char *err, size_t errlen)
{
        struct mpi_pstate_cpufreq_policy *p = NULL;
        struct mpi_pstate_restore_record r;
        int rc, n;

        if (uncore_record_domain(name))
                return restore_uncore_at(dirfd, dir, sysroot, name, who, flags, foreign, err,
                                         errlen);
        rc = may_restore(load_at(dirfd, name, &r), &r.owner, dir, name, who, flags, foreign, err,
                         errlen);
        if (rc != 1)
                return rc;
        /* apply() needs only the directory and name of the policy. */
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        memcpy(p->name, r.policy, sizeof(p->name));
        n = strncmp(name, "cpu", 3) == 0
                ? snprintf(p->dir, sizeof(p->dir), "%s/devices/system/cpu/%s/cpufreq", sysroot,
                           name)
                : snprintf(p->dir, sizeof(p->dir), "%s/devices/system/cpu/cpufreq/%s", sysroot,
                           name);
        if (n < 0 || (size_t)n >= sizeof(p->dir)) {
                rc = -ENAMETOOLONG;
                goto out;
        }
        rc = same_driver(dirfd, dir, name, p->dir, &r, err, errlen);
        if (!rc)
                rc = mpi_pstate_cpufreq_apply(p, &r.saved, err, errlen);
        if (!rc)
                rc = drop_record(dirfd, dir, name, err, errlen);
out:
        free(p);
        return rc;
}

int mpi_pstate_restore_policy(const char *dir, const char *sysroot, const char *name,
                              const struct mpi_pstate_restore_owner *who, unsigned flags, char *err,
                              size_t errlen)
{
        bool foreign = false;
        int dirfd, rc;

        if (!dir || !sysroot || !name)
                return -EINVAL;
        dirfd = mpi_pstate_safeio_open_dir(dir, 0, 0);
        if (dirfd == -ENOENT)
                return 0; /* nothing was ever saved */
        if (dirfd < 0) {
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", dir, strerror(-dirfd));
                return dirfd;
        }
        rc = restore_at(dirfd, dir, sysroot, name, who, flags, &foreign, err, errlen);
        close(dirfd);
        return rc;
}

static void note_failure(struct mpi_pstate_restore_summary *s, const char *name, int rc)
{
        s->failed++;
        if (!s->first_error) {
                s->first_error = rc;
                snprintf(s->first_name, sizeof(s->first_name), "%s", name);
        }
}

/* The names in dirfd, read before anything is unlinked (unlinking while
 * readdir() runs may skip entries).  0, or -errno; *names is the caller's
 * to free either way. */
static int list_names(int dirfd, char (**names)[NAME_MAX + 1], size_t *count)
{
        struct dirent *de;
        size_t n = 0, cap = 0;
        int fd2 = dup(dirfd), rc = 0;
        DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;

        *names = NULL;
        if (!d) {
                rc = -errno;
                if (fd2 >= 0)
                        close(fd2);
                goto out;
        }
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (n == cap) {
                        size_t ncap = cap ? 2 * cap : 32;
                        void *q = realloc(*names, ncap * sizeof(**names));

                        if (!q) {
                                rc = -ENOMEM;
                                goto out;
                        }
                        *names = q;
                        cap = ncap;
                }
                snprintf((*names)[n++], sizeof((*names)[0]), "%s", de->d_name);
        }
out:
        if (d)
                closedir(d);
        *count = n;
        return rc;
}

/* The CPUs a record's domain covers, as the kernel says (never the
 * record): a policy's related_cpus, an uncore domain's package.  0, or a
 * negative errno when the domain is not there or cannot be read. */
static int domain_cpus(const char *sysroot, const char *name, struct mpi_pstate_uncore_node **un,
                       cpu_set_t *out)
{
        char path[PATH_MAX], buf[4096];
        size_t pre = strlen(MPI_PSTATE_RESTORE_UNCORE_PREFIX);
        int rc;

        if (strncmp(name, MPI_PSTATE_RESTORE_UNCORE_PREFIX, pre) == 0) {
                if (!*un && (rc = mpi_pstate_uncore_discover(sysroot, un, NULL, 0)) != 0)
                        return rc;
                for (unsigned i = 0; i < (*un)->n; i++)
                        if (strcmp((*un)->dom[i].name, name + pre) == 0) {
                                *out = (*un)->dom[i].cpus;
                                return 0;
                        }
                return -ENOENT;
        }
        if (strncmp(name, "policy", 6) == 0)
                snprintf(path, sizeof(path), "%s/devices/system/cpu/cpufreq/%s/related_cpus",
                         sysroot, name);
        else
                snprintf(path, sizeof(path), "%s/devices/system/cpu/%s/cpufreq/related_cpus",
                         sysroot, name);
        rc = mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0);
        if (rc < 0)
                return rc;
        return mpi_pstate_cpufreq_parse_cpulist(buf, out) ? -EINVAL : 0;
}

/* A record applies only where every CPU of its domain is one of cpus. */
static bool within(const char *sysroot, const char *name, const cpu_set_t *cpus,
                   struct mpi_pstate_uncore_node **un)
{
        cpu_set_t d, both;

        if (mpi_pstate_safeio_check_name(name, NAME_MAX) != 0 ||
            domain_cpus(sysroot, name, un, &d) != 0 || CPU_COUNT(&d) == 0)
                return false;
        CPU_AND(&both, &d, cpus);
        return CPU_EQUAL(&both, &d);
}

int mpi_pstate_restore_all(const char *dir, const char *sysroot,
                           const struct mpi_pstate_restore_owner *who, unsigned flags,
                           struct mpi_pstate_restore_summary *summary, char *err, size_t errlen)
{
        return mpi_pstate_restore_all_within(dir, sysroot, who, flags, NULL, summary, err, errlen);
}

int mpi_pstate_restore_all_within(const char *dir, const char *sysroot,
                                  const struct mpi_pstate_restore_owner *who, unsigned flags,
                                  const cpu_set_t *cpus, struct mpi_pstate_restore_summary *summary,
                                  char *err, size_t errlen)
{
        struct mpi_pstate_restore_summary s;
        struct mpi_pstate_uncore_node *un = NULL;
        char(*names)[NAME_MAX + 1] = NULL;
        size_t n = 0;
        int dirfd = -1, rc = 0;

        memset(&s, 0, sizeof(s));
        if (!dir || !sysroot) {
                rc = -EINVAL;
                goto out;
        }
        dirfd = mpi_pstate_safeio_open_dir(dir, 0, 0);
        if (dirfd == -ENOENT)
                goto out;
        if (dirfd < 0) {
                rc = dirfd;
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", dir, strerror(-rc));
                note_failure(&s, dir, rc);
                goto out;
        }
        rc = list_names(dirfd, &names, &n);
        if (rc) {
                if (rc != -ENOMEM)
                        note_failure(&s, dir, rc);
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                const char *name = names[i];
                char msg[256] = "";
                bool foreign = false;
                int r;

                if (strncmp(name, ".tmp.", 5) == 0) {
                        /* Left by a save that died before its rename: never a record. */
                        unlinkat(dirfd, name, 0);
                        continue;
                }
                if (cpus && !within(sysroot, name, cpus, &un)) {
                        /* not a domain of the CPUs root gave the step */
                        s.foreign++;
                        continue;
                }
                r = restore_at(dirfd, dir, sysroot, name, who, flags, &foreign, msg, sizeof(msg));
                if (r == 1) {
                        s.restored++;
                } else if (foreign) {
                        s.foreign++;
                } else if (r < 0) {
                        if (!s.first_error)
                                mpi_pstate_errmsg_set(err, errlen, "%s", msg);
                        note_failure(&s, name, r);
                }
        }
        rc = s.first_error;
out:
        if (dirfd >= 0)
                close(dirfd);
        free(names);
        free(un);
        if (summary)
                *summary = s;
        return rc;
}
