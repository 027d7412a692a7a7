/* SPDX-License-Identifier: BSD-3-Clause */
/* cpufreq writes (cpufreq.h): the ordered one-shot writes that take a
 * policy to new settings, and the kept-fd domain handle the agent lowers and
 * raises with one pwrite each. */
#include "cpufreq.h"
#include "cpufreq_sysfs.h"
#include "errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "safeio.h"

static const char *const attr_files[] = {
    [MPI_PSTATE_CPUFREQ_ATTR_MIN] = "scaling_min_freq",
    [MPI_PSTATE_CPUFREQ_ATTR_MAX] = "scaling_max_freq",
    [MPI_PSTATE_CPUFREQ_ATTR_GOVERNOR] = "scaling_governor",
    [MPI_PSTATE_CPUFREQ_ATTR_SETSPEED] = "scaling_setspeed",
    [MPI_PSTATE_CPUFREQ_ATTR_EPP] = "energy_performance_preference",
};

const char *mpi_pstate_cpufreq_attr_file(enum mpi_pstate_cpufreq_attr a)
{
        if ((unsigned)a >= sizeof(attr_files) / sizeof(attr_files[0]))
                return NULL;
        return attr_files[a];
}

static void add_write(struct mpi_pstate_cpufreq_write *w, unsigned *n,
                      enum mpi_pstate_cpufreq_attr a, const char *gov, uint32_t khz)
{
        w[*n].attr = a;
        if (gov)
                snprintf(w[*n].value, sizeof(w[*n].value), "%s", gov);
        else
                snprintf(w[*n].value, sizeof(w[*n].value), "%u", khz);
        (*n)++;
}

unsigned
mpi_pstate_cpufreq_plan_writes(const struct mpi_pstate_cpufreq_settings *cur,
                               const struct mpi_pstate_cpufreq_settings *target,
                               struct mpi_pstate_cpufreq_write w[MPI_PSTATE_CPUFREQ_MAX_WRITES])
{
        bool min_changes = target->min_khz != cur->min_khz;
        bool max_changes = target->max_khz != cur->max_khz;
        bool gov_changes = strcmp(target->governor, cur->governor) != 0;
        unsigned n = 0;

        /* Raising the maximum first keeps min <= max when the whole range moves
         * up; lowering the minimum first does the same when it moves down. */
        if (target->max_khz > cur->max_khz) {
                add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_MAX, NULL, target->max_khz);
                if (min_changes)
                        add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_MIN, NULL, target->min_khz);
        } else {
                if (min_changes)
                        add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_MIN, NULL, target->min_khz);
                if (max_changes)
                        add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_MAX, NULL, target->max_khz);
        }
        /* The governor after the limits: performance/powersave jump to a limit
         * at once, and must find the final one there. */
        if (gov_changes)
                add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_GOVERNOR, target->governor, 0);
        if (strcmp(target->governor, "userspace") == 0 && target->setspeed_khz &&
            (gov_changes || target->setspeed_khz != cur->setspeed_khz))
                add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_SETSPEED, NULL, target->setspeed_khz);
        if (target->epp[0] && strcmp(target->epp, cur->epp) != 0)
                add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_EPP, target->epp, 0);
        return n;
}

int mpi_pstate_cpufreq_apply(const struct mpi_pstate_cpufreq_policy *p,
                             const struct mpi_pstate_cpufreq_settings *target, char *err,
                             size_t errlen)
{
        return mpi_pstate_cpufreq_apply_from(p, NULL, target, err, errlen);
}

/* The policy's settings as they are now: known when the caller has just
 * read them, else read. */
static int current_settings(const struct mpi_pstate_cpufreq_policy *p,
                            const struct mpi_pstate_cpufreq_settings *known,
                            struct mpi_pstate_cpufreq_settings *cur, char *err, size_t errlen)
{
        int rc;

        if (known) {
                *cur = *known;
                return 0;
        }
        rc = mpi_pstate_cpufreq_read_settings(p, cur);
        if (rc)
                mpi_pstate_errmsg_set(err, errlen, "%s: reading current settings: %s", p->name,
                                      strerror(-rc));
        return rc;
}

int mpi_pstate_cpufreq_apply_from(const struct mpi_pstate_cpufreq_policy *p,
                                  const struct mpi_pstate_cpufreq_settings *known,
                                  const struct mpi_pstate_cpufreq_settings *target, char *err,
                                  size_t errlen)
{
        struct mpi_pstate_cpufreq_settings cur;
        struct mpi_pstate_cpufreq_write w[MPI_PSTATE_CPUFREQ_MAX_WRITES];
        unsigned n;
        int rc = current_settings(p, known, &cur, err, errlen);

        if (rc)
                return rc;
        n = mpi_pstate_cpufreq_plan_writes(&cur, target, w);
        for (unsigned i = 0; i < n; i++) {
                char path[MPI_PSTATE_CPUFREQ_PATH_LEN + 32], value[MPI_PSTATE_CPUFREQ_EPP_LEN + 1];
                const char *file = mpi_pstate_cpufreq_attr_file(w[i].attr);

                rc = mpi_pstate_cpufreq_join(path, sizeof(path), p->dir, file);
                if (!rc) {
                        snprintf(value, sizeof(value), "%s\n", w[i].value);
                        rc = mpi_pstate_safeio_write_attr(AT_FDCWD, path, value);
                }
                if (rc) {
                        mpi_pstate_errmsg_set(err, errlen, "%s: writing %s=%s: %s", p->name, file,
                                              w[i].value, strerror(-rc));
                        return rc;
                }
        }
        return 0;
}

/* The file of mech and its two strings, after the checks against the
 * policy's current settings that make the kernel honour them. */
static int domain_plan(struct mpi_pstate_cpufreq_domain *d,
                       const struct mpi_pstate_cpufreq_policy *p,
                       const struct mpi_pstate_cpufreq_settings *cur, const char **file, char *err,
                       size_t errlen)
{
        switch (d->mech) {
        case MPI_PSTATE_CPUFREQ_MECH_MAXFREQ:
                if (d->low_khz < cur->min_khz) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: low %u kHz is below scaling_min_freq %u kHz",
                                              p->name, d->low_khz, cur->min_khz);
                        return -ERANGE;
                }
                *file = "scaling_max_freq";
                break;
        case MPI_PSTATE_CPUFREQ_MECH_SETSPEED:
                if (strcmp(cur->governor, "userspace") != 0) {
                        mpi_pstate_errmsg_set(
                            err, errlen, "%s: setspeed needs the userspace governor, %s is active",
                            p->name, cur->governor);
                        return -EINVAL;
                }
                *file = "scaling_setspeed";
                break;
        case MPI_PSTATE_CPUFREQ_MECH_EPP:
                if (!cur->epp[0] || strcmp(cur->epp, "power") == 0) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: energy_performance_preference is %s", p->name,
                                              cur->epp[0] ? "already power" : "not readable");
                        return -EINVAL;
                }
                *file = "energy_performance_preference";
                snprintf(d->low, sizeof(d->low), "power\n");
                snprintf(d->high, sizeof(d->high), "%s\n", cur->epp);
                return 0;
        default:
                mpi_pstate_errmsg_set(err, errlen, "%s: mechanism must be resolved before prepare",
                                      p->name);
                return -EINVAL;
        }
        /* The exact text the kernel prints, newline included, no padding: how the
         * kernel parses it (sscanf, or kstrtoul as proposed) must not matter. */
        snprintf(d->low, sizeof(d->low), "%u\n", d->low_khz);
        snprintf(d->high, sizeof(d->high), "%u\n", d->high_khz);
        return 0;
}

int mpi_pstate_cpufreq_domain_prepare_from(struct mpi_pstate_cpufreq_domain *d,
                                           const struct mpi_pstate_cpufreq_policy *p,
                                           const struct mpi_pstate_cpufreq_settings *known,
                                           enum mpi_pstate_cpufreq_mech mech, uint32_t low_khz,
                                           uint32_t high_khz, char *err, size_t errlen)
{
        char path[MPI_PSTATE_CPUFREQ_PATH_LEN + 32];
        struct mpi_pstate_cpufreq_settings cur;
        const char *file = NULL;
        int rc;

        memset(d, 0, sizeof(*d));
        d->fd = -1;
        if (low_khz > high_khz || low_khz < p->cpuinfo_min_khz || high_khz > p->cpuinfo_max_khz) {
                mpi_pstate_errmsg_set(err, errlen, "%s: need %u <= low %u <= high %u <= %u kHz",
                                      p->name, p->cpuinfo_min_khz, low_khz, high_khz,
                                      p->cpuinfo_max_khz);
                return -ERANGE;
        }
        rc = current_settings(p, known, &cur, err, errlen);
        if (rc)
                return rc;
        d->mech = mech;
        d->low_khz = low_khz;
        d->high_khz = high_khz;
        rc = domain_plan(d, p, &cur, &file, err, errlen);
        if (rc)
                return rc;
        d->low_len = (unsigned char)strlen(d->low);
        d->high_len = (unsigned char)strlen(d->high);
        rc = mpi_pstate_cpufreq_join(path, sizeof(path), p->dir, file);
        if (rc)
                return rc;
        /* read too: an agent that is not root can tell a domain whose
         * driver went away (ENODEV) without opening anything */
        d->fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (d->fd < 0) {
                rc = -errno;
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", path, strerror(-rc));
                return rc;
        }
        return 0;
}

int mpi_pstate_cpufreq_domain_lower(const struct mpi_pstate_cpufreq_domain *d)
{
        ssize_t n = pwrite(d->fd, d->low, d->low_len, 0);

        return n == (ssize_t)d->low_len ? 0 : n < 0 ? -errno : -EIO;
}

int mpi_pstate_cpufreq_domain_raise(const struct mpi_pstate_cpufreq_domain *d)
{
        ssize_t n = pwrite(d->fd, d->high, d->high_len, 0);

        return n == (ssize_t)d->high_len ? 0 : n < 0 ? -errno : -EIO;
}

void mpi_pstate_cpufreq_domain_close(struct mpi_pstate_cpufreq_domain *d)
{
        if (d && d->fd >= 0) {
                close(d->fd);
                d->fd = -1;
        }
}
