/* SPDX-License-Identifier: BSD-3-Clause */
/* Uncore frequency domains (uncore.h). */
#include "uncore.h"
#include "errmsg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parse.h"
#include "safeio.h"

#define UNCORE_DIR "devices/system/cpu/intel_uncore_frequency"
#define CPU_DIR "devices/system/cpu"

/* One decimal sysfs value (first line only), within [min, max]. */
static int read_u32(const char *dir, const char *file, uint32_t min, uint32_t max, uint32_t *out)
{
        char path[600], buf[32];
        uint64_t v;
        int n = snprintf(path, sizeof(path), "%s/%s", dir, file), rc;

        if (n < 0 || (size_t)n >= sizeof(path))
                return -ENAMETOOLONG;
        rc = mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0);
        if (rc < 0)
                return rc;
        buf[strcspn(buf, "\n")] = '\0';
        rc = mpi_pstate_parse_u64(buf, min, max, &v);
        if (rc)
                return rc;
        *out = (uint32_t)v;
        return 0;
}

static bool two_digits_or_more(const char *s, size_t n, unsigned *out)
{
        uint64_t v;
        char buf[8];

        if (n < 2 || n > 4 || strspn(s, "0123456789") < n)
                return false;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (mpi_pstate_parse_u64(buf, 0, 9999, &v))
                return false;
        *out = (unsigned)v;
        return true;
}

bool mpi_pstate_uncore_valid_name(const char *s, unsigned *package, unsigned *die)
{
        const char *d;
        unsigned p, q;

        if (strncmp(s, "package_", 8) != 0 || strlen(s) >= MPI_PSTATE_UNCORE_NAME_LEN)
                return false;
        d = strstr(s + 8, "_die_");
        if (!d || !two_digits_or_more(s + 8, (size_t)(d - s - 8), &p) ||
            !two_digits_or_more(d + 5, strlen(d + 5), &q))
                return false;
        if (package)
                *package = p;
        if (die)
                *die = q;
        return true;
}

/* Which package and die each CPU directory of sysroot says it is in. */
static void map_cpus(const char *sysroot, struct mpi_pstate_uncore_node *u)
{
        char cpudir[512], top[600];
        struct dirent *de;
        DIR *d;

        snprintf(cpudir, sizeof(cpudir), "%s/" CPU_DIR, sysroot);
        d = opendir(cpudir);
        if (!d)
                return;
        while ((de = readdir(d))) {
                uint64_t cpu;
                uint32_t pkg, die = 0;

                if (strncmp(de->d_name, "cpu", 3) != 0 ||
                    strspn(de->d_name + 3, "0123456789") != strlen(de->d_name + 3) ||
                    mpi_pstate_parse_u64(de->d_name + 3, 0, CPU_SETSIZE - 1, &cpu) != 0)
                        continue;
                if (snprintf(top, sizeof(top), "%s/cpu%u/topology", cpudir, (unsigned)cpu) >=
                    (int)sizeof(top))
                        continue;
                if (read_u32(top, "physical_package_id", 0, 9999, &pkg) != 0)
                        continue;
                (void)read_u32(top, "die_id", 0, 9999, &die);
                for (unsigned i = 0; i < u->n; i++)
                        if (u->dom[i].package == pkg && u->dom[i].die == die)
                                CPU_SET((int)cpu, &u->dom[i].cpus);
        }
        closedir(d);
}

static int load_domain(struct mpi_pstate_uncore_domain *dom, const char *base, const char *name)
{
        int rc;

        memset(dom, 0, sizeof(*dom));
        if (!mpi_pstate_uncore_valid_name(name, &dom->package, &dom->die))
                return -EINVAL;
        memcpy(dom->name, name, strlen(name) + 1);
        if (snprintf(dom->dir, sizeof(dom->dir), "%s/%s", base, name) >= (int)sizeof(dom->dir))
                return -ENAMETOOLONG;
        rc = mpi_pstate_uncore_read(dom, &dom->min_khz, &dom->max_khz);
        if (rc)
                return rc;
        if (read_u32(dom->dir, "initial_min_freq_khz", 1, UINT32_MAX, &dom->initial_min_khz) ||
            read_u32(dom->dir, "initial_max_freq_khz", 1, UINT32_MAX, &dom->initial_max_khz))
                dom->initial_min_khz = dom->initial_max_khz = 0;
        return 0;
}

int mpi_pstate_uncore_discover(const char *sysroot, struct mpi_pstate_uncore_node **out, char *err,
                               size_t errlen)
{
        struct mpi_pstate_uncore_node *u = NULL;
        char base[512];
        struct dirent *de;
        DIR *d = NULL;
        int rc = 0;

        *out = NULL;
        snprintf(base, sizeof(base), "%s/" UNCORE_DIR, sysroot ? sysroot : "/sys");
        d = opendir(base);
        if (!d) {
                rc = errno == ENOENT ? -ENODEV : -errno;
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", base, strerror(-rc));
                goto out;
        }
        u = calloc(1, sizeof(*u));
        if (!u) {
                rc = -ENOMEM;
                goto out;
        }
        while ((de = readdir(d)) && u->n < MPI_PSTATE_UNCORE_MAX) {
                if (!mpi_pstate_uncore_valid_name(de->d_name, NULL, NULL))
                        continue; /* uncoreNN clusters: the package root covers them */
                rc = load_domain(&u->dom[u->n], base, de->d_name);
                if (rc) {
                        mpi_pstate_errmsg_set(err, errlen, "%s/%s: %s", base, de->d_name,
                                              strerror(-rc));
                        goto out;
                }
                u->n++;
        }
        if (u->n == 0) {
                rc = -ENODEV;
                mpi_pstate_errmsg_set(err, errlen, "%s: no package_NN_die_NN domain", base);
                goto out;
        }
        map_cpus(sysroot ? sysroot : "/sys", u);
        *out = u;
        u = NULL;
out:
        if (d)
                closedir(d);
        free(u);
        return rc;
}

int mpi_pstate_uncore_read(const struct mpi_pstate_uncore_domain *d, uint32_t *min_khz,
                           uint32_t *max_khz)
{
        int rc = read_u32(d->dir, "min_freq_khz", 1, UINT32_MAX, min_khz);

        return rc ? rc : read_u32(d->dir, "max_freq_khz", 1, UINT32_MAX, max_khz);
}

static int write_khz(const char *dir, const char *file, uint32_t khz, char *err, size_t errlen)
{
        char path[600], value[16];
        int rc;

        if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        snprintf(value, sizeof(value), "%u\n", khz);
        rc = mpi_pstate_safeio_write_attr(AT_FDCWD, path, value);
        if (rc)
                mpi_pstate_errmsg_set(err, errlen, "%s=%u: %s", path, khz, strerror(-rc));
        return rc;
}

int mpi_pstate_uncore_apply(const char *dir, uint32_t min_khz, uint32_t max_khz, char *err,
                            size_t errlen)
{
        struct mpi_pstate_uncore_domain d;
        uint32_t cur_min, cur_max;
        int rc;

        if (min_khz > max_khz || snprintf(d.dir, sizeof(d.dir), "%s", dir) >= (int)sizeof(d.dir))
                return -EINVAL;
        rc = mpi_pstate_uncore_read(&d, &cur_min, &cur_max);
        if (rc) {
                mpi_pstate_errmsg_set(err, errlen, "%s: reading limits: %s", dir, strerror(-rc));
                return rc;
        }
        (void)cur_min;
        /* The maximum first when it rises, so min <= max holds after each write. */
        if (max_khz > cur_max) {
                rc = write_khz(dir, "max_freq_khz", max_khz, err, errlen);
                return rc ? rc : write_khz(dir, "min_freq_khz", min_khz, err, errlen);
        }
        rc = write_khz(dir, "min_freq_khz", min_khz, err, errlen);
        return rc ? rc : write_khz(dir, "max_freq_khz", max_khz, err, errlen);
}

int mpi_pstate_uncore_prepare(struct mpi_pstate_uncore_handle *h,
                              const struct mpi_pstate_uncore_domain *d, uint32_t low_khz,
                              uint32_t high_khz, char *err, size_t errlen)
{
        char path[600];
        int rc;

        memset(h, 0, sizeof(*h));
        h->fd = -1;
        if (low_khz == 0 || low_khz >= high_khz) {
                mpi_pstate_errmsg_set(err, errlen, "%s: no uncore frequency below %u kHz", d->name,
                                      high_khz);
                return -ERANGE;
        }
        h->low_khz = low_khz;
        h->high_khz = high_khz;
        h->low_len = (unsigned char)snprintf(h->low, sizeof(h->low), "%u\n", low_khz);
        h->high_len = (unsigned char)snprintf(h->high, sizeof(h->high), "%u\n", high_khz);
        if (snprintf(path, sizeof(path), "%s/max_freq_khz", d->dir) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        h->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (h->fd < 0) {
                rc = -errno;
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", path, strerror(-rc));
                return rc;
        }
        return 0;
}

static int put(int fd, const char *s, unsigned char len)
{
        ssize_t n = pwrite(fd, s, len, 0);

        return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

int mpi_pstate_uncore_lower(const struct mpi_pstate_uncore_handle *h)
{
        return put(h->fd, h->low, h->low_len);
}

int mpi_pstate_uncore_raise(const struct mpi_pstate_uncore_handle *h)
{
        return put(h->fd, h->high, h->high_len);
}

void mpi_pstate_uncore_close(struct mpi_pstate_uncore_handle *h)
{
        if (h && h->fd >= 0) {
                close(h->fd);
                h->fd = -1;
        }
}
