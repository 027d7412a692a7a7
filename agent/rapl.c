/* SPDX-License-Identifier: BSD-3-Clause */
/* RAPL energy counters (rapl.h): the package and DRAM zones of the
 * step's sockets, one kept descriptor each, sampled often enough that no
 * wrap is missed, accumulated in 64 bits. */
#include "rapl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parse.h"
#include "safeio.h"

static const char *const status_names[] = {
    [MPI_PSTATE_RAPL_OK] = "ok",
    [MPI_PSTATE_RAPL_ABSENT] = "absent",
    [MPI_PSTATE_RAPL_NO_ACCESS] = "no_access",
    [MPI_PSTATE_RAPL_ERROR] = "error",
};

static const char *const kind_names[] = {
    [MPI_PSTATE_RAPL_PACKAGE] = "package", [MPI_PSTATE_RAPL_DRAM] = "dram",
    [MPI_PSTATE_RAPL_CORE] = "core",       [MPI_PSTATE_RAPL_UNCORE] = "uncore",
    [MPI_PSTATE_RAPL_PSYS] = "psys",       [MPI_PSTATE_RAPL_OTHER] = "other",
};

const char *mpi_pstate_rapl_status_name(enum mpi_pstate_rapl_status s)
{
        if ((unsigned)s >= sizeof(status_names) / sizeof(status_names[0]))
                return "invalid";
        return status_names[s];
}

const char *mpi_pstate_rapl_kind_name(enum mpi_pstate_rapl_kind k)
{
        if ((unsigned)k >= sizeof(kind_names) / sizeof(kind_names[0]))
                return "invalid";
        return kind_names[k];
}

static enum mpi_pstate_rapl_status status_of(int neg_errno)
{
        return neg_errno == -EACCES || neg_errno == -EPERM ? MPI_PSTATE_RAPL_NO_ACCESS
                                                           : MPI_PSTATE_RAPL_ERROR;
}

/* "intel-rapl:N" or "intel-rapl:N:M" with plain decimal parts; *sub = -1 for
 * a top-level zone.  The control-type directory "intel-rapl" and the MMIO
 * duplicate "intel-rapl-mmio:N" do not match. */
static bool parse_zone_id(const char *s, int *pkg, int *sub)
{
        const char *p = s + strlen("intel-rapl:");
        char *end;
        long a, b = -1;

        if (strncmp(s, "intel-rapl:", strlen("intel-rapl:")) != 0 || *p < '0' || *p > '9')
                return false;
        a = strtol(p, &end, 10);
        if (*end == ':') {
                p = end + 1;
                if (*p < '0' || *p > '9')
                        return false;
                b = strtol(p, &end, 10);
        }
        if (*end || a > 4095 || b > 4095)
                return false;
        *pkg = (int)a;
        *sub = (int)b;
        return true;
}

static enum mpi_pstate_rapl_kind kind_of(const char *name)
{
        if (strncmp(name, "package-", 8) == 0)
                return MPI_PSTATE_RAPL_PACKAGE;
        if (strcmp(name, "dram") == 0)
                return MPI_PSTATE_RAPL_DRAM;
        if (strcmp(name, "core") == 0)
                return MPI_PSTATE_RAPL_CORE;
        if (strcmp(name, "uncore") == 0)
                return MPI_PSTATE_RAPL_UNCORE;
        if (strcmp(name, "psys") == 0)
                return MPI_PSTATE_RAPL_PSYS;
        return MPI_PSTATE_RAPL_OTHER;
}

int mpi_pstate_rapl_read_attr(const char *dir, const char *file, char *buf, size_t len)
{
        char path[600];
        int n = snprintf(path, sizeof(path), "%s/%s", dir, file);

        if (n < 0 || (size_t)n >= sizeof(path))
                return -ENAMETOOLONG;
        n = mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, len, 0, 0);
        if (n < 0)
                return n;
        buf[strcspn(buf, "\n")] = '\0';
        return 0;
}

static int zone_key(const struct mpi_pstate_rapl_zone *z)
{
        int pkg, sub;

        parse_zone_id(z->id, &pkg, &sub);
        return pkg * 4097 + sub + 1;
}

static int cmp_zone(const void *a, const void *b)
{
        int x = zone_key(a), y = zone_key(b);

        return x < y ? -1 : x > y;
}

/* Fills one zone; -ENOENT for a directory that is not a usable zone. */
static int load_zone(struct mpi_pstate_rapl_zone *z, const char *base, const char *id)
{
        char buf[64];
        uint64_t v;
        int pkg, sub, rc, n;

        if (strlen(id) >= sizeof(z->id) || !parse_zone_id(id, &pkg, &sub))
                return -ENOENT;
        memset(z, 0, sizeof(*z));
        memcpy(z->id, id, strlen(id) + 1);
        n = snprintf(z->dir, sizeof(z->dir), "%s/%s", base, id);
        if (n < 0 || (size_t)n >= sizeof(z->dir))
                return -ENAMETOOLONG;
        rc = mpi_pstate_rapl_read_attr(z->dir, "name", buf, sizeof(buf));
        if (rc)
                return rc;
        if (strlen(buf) >= sizeof(z->name) ||
            mpi_pstate_safeio_check_name(buf, sizeof(z->name) - 1) != 0)
                return -EINVAL;
        memcpy(z->name, buf, strlen(buf) + 1);
        z->kind = kind_of(z->name);
        z->socket = z->kind == MPI_PSTATE_RAPL_PSYS ? -1 : pkg;
        rc = mpi_pstate_rapl_read_attr(z->dir, "max_energy_range_uj", buf, sizeof(buf));
        if (rc)
                return rc;
        rc = mpi_pstate_parse_u64(buf, 1, UINT64_MAX, &v);
        if (rc)
                return rc;
        z->max_range_uj = v;
        return 0;
}

enum mpi_pstate_rapl_status mpi_pstate_rapl_discover(const char *sysroot,
                                                     struct mpi_pstate_rapl *out)
{
        char base[512], path[600];
        struct dirent *de;
        DIR *d;
        int fd, n;

        memset(out, 0, sizeof(*out));
        out->status = MPI_PSTATE_RAPL_ERROR;
        n = snprintf(base, sizeof(base), "%s/class/powercap", sysroot);
        if (n < 0 || (size_t)n >= sizeof(base))
                return out->status;
        d = opendir(base);
        if (!d) {
                out->status = errno == ENOENT ? MPI_PSTATE_RAPL_ABSENT : status_of(-errno);
                return out->status;
        }
        while ((de = readdir(d)) && out->nzones < MPI_PSTATE_RAPL_MAX_ZONES) {
                int rc = load_zone(&out->zones[out->nzones], base, de->d_name);

                if (rc == 0) {
                        out->nzones++;
                } else if (rc != -ENOENT) {
                        closedir(d);
                        out->nzones = 0;
                        out->status = status_of(rc);
                        return out->status;
                }
        }
        closedir(d);
        if (out->nzones == 0) {
                out->status = MPI_PSTATE_RAPL_ABSENT;
                return out->status;
        }
        qsort(out->zones, out->nzones, sizeof(out->zones[0]), cmp_zone);
        /* name and range are world-readable; the counter may not be. */
        n = snprintf(path, sizeof(path), "%s/energy_uj", out->zones[0].dir);
        if (n < 0 || (size_t)n >= sizeof(path))
                return out->status;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                out->status = status_of(-errno);
                return out->status;
        }
        close(fd);
        out->status = MPI_PSTATE_RAPL_OK;
        return out->status;
}

uint64_t mpi_pstate_rapl_delta(uint64_t prev_uj, uint64_t cur_uj, uint64_t range_uj)
{
        if (cur_uj >= prev_uj)
                return cur_uj - prev_uj;
        /* One wrap: what was left up to the range, plus what came after it. */
        return range_uj - prev_uj + cur_uj;
}

uint64_t mpi_pstate_rapl_wrap_period_us(uint64_t range_uj, uint64_t max_power_mw)
{
        /* T[s] = range[µJ] / P[µW]; T[µs] = range * 1e6 / (P_mW * 1e3) = range * 1000 / P_mW. */
        unsigned __int128 t;

        if (max_power_mw == 0)
                return UINT64_MAX;
        t = (unsigned __int128)range_uj * 1000u / max_power_mw;
        return t > UINT64_MAX ? UINT64_MAX : (uint64_t)t;
}

uint64_t mpi_pstate_rapl_sample_interval_us(uint64_t range_uj, uint64_t max_power_mw)
{
        uint64_t t = mpi_pstate_rapl_wrap_period_us(range_uj, max_power_mw);

        return t == UINT64_MAX ? t : t / 2;
}

int mpi_pstate_rapl_read_counter(int fd, uint64_t range, uint64_t *out)
{
        char buf[32];
        ssize_t n;
        uint64_t v;

        do {
                n = pread(fd, buf, sizeof(buf) - 1, 0);
        } while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if (n == 0 || n == (ssize_t)sizeof(buf) - 1)
                return -EINVAL;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        if (mpi_pstate_parse_u64(buf, 0, range, &v) != 0)
                return -EINVAL;
        *out = v;
        return 0;
}

enum mpi_pstate_rapl_status mpi_pstate_rapl_sampler_open(struct mpi_pstate_rapl_sampler *s,
                                                         const struct mpi_pstate_rapl *r,
                                                         unsigned kinds)
{
        memset(s, 0, sizeof(*s));
        for (unsigned i = 0; i < MPI_PSTATE_RAPL_MAX_ZONES; i++)
                s->c[i].fd = -1;
        s->status = r->status;
        if (r->status != MPI_PSTATE_RAPL_OK)
                return s->status;
        for (unsigned i = 0; i < r->nzones; i++) {
                const struct mpi_pstate_rapl_zone *z = &r->zones[i];
                struct mpi_pstate_rapl_counter *c = &s->c[s->n];
                char path[600];
                int rc, n;

                if (!(kinds & MPI_PSTATE_RAPL_KIND_BIT(z->kind)))
                        continue;
                n = snprintf(path, sizeof(path), "%s/energy_uj", z->dir);
                if (n < 0 || (size_t)n >= sizeof(path)) {
                        s->status = MPI_PSTATE_RAPL_ERROR;
                        goto fail;
                }
                c->fd = open(path, O_RDONLY | O_CLOEXEC);
                if (c->fd < 0) {
                        s->status = status_of(-errno);
                        goto fail;
                }
                s->n++;
                c->kind = z->kind;
                c->socket = z->socket;
                c->range_uj = z->max_range_uj;
                rc = mpi_pstate_rapl_read_counter(c->fd, c->range_uj, &c->last_uj);
                if (rc) {
                        s->status = status_of(rc);
                        goto fail;
                }
        }
        s->status = s->n ? MPI_PSTATE_RAPL_OK : MPI_PSTATE_RAPL_ABSENT;
        return s->status;
fail:
        mpi_pstate_rapl_sampler_close(s);
        return s->status;
}

enum mpi_pstate_rapl_status mpi_pstate_rapl_sampler_sample(struct mpi_pstate_rapl_sampler *s)
{
        enum mpi_pstate_rapl_status st = MPI_PSTATE_RAPL_OK;

        if (s->n == 0)
                return s->status;
        for (unsigned i = 0; i < s->n; i++) {
                struct mpi_pstate_rapl_counter *c = &s->c[i];
                uint64_t cur;
                int rc = mpi_pstate_rapl_read_counter(c->fd, c->range_uj, &cur);

                if (rc) {
                        st = status_of(rc);
                        continue;
                }
                if (cur < c->last_uj)
                        c->wraps++;
                c->total_uj += mpi_pstate_rapl_delta(c->last_uj, cur, c->range_uj);
                c->last_uj = cur;
        }
        s->status = st;
        return st;
}

uint64_t mpi_pstate_rapl_sampler_total_uj(const struct mpi_pstate_rapl_sampler *s,
                                          enum mpi_pstate_rapl_kind kind)
{
        uint64_t sum = 0;

        for (unsigned i = 0; i < s->n; i++)
                if (s->c[i].kind == kind)
                        sum += s->c[i].total_uj;
        return sum;
}

void mpi_pstate_rapl_sampler_close(struct mpi_pstate_rapl_sampler *s)
{
        for (unsigned i = 0; i < s->n; i++) {
                if (s->c[i].fd >= 0)
                        close(s->c[i].fd);
                s->c[i].fd = -1;
        }
        s->n = 0;
}
