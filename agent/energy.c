/* SPDX-License-Identifier: BSD-3-Clause */
/* Energy without RAPL zones: hwmon energy counters or power meters
 * (energy.h), found, read and accumulated for the agent record. */
#include "energy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safeio.h"

#define NS_PER_S UINT64_C(1000000000)
/* Power meters read in µW: 10 MW is no node. */
#define MAX_POWER_UW UINT64_C(10000000000000)

const char *mpi_pstate_energy_source_name(enum mpi_pstate_energy_source s)
{
        switch (s) {
        case MPI_PSTATE_ENERGY_NONE:
                return "none";
        case MPI_PSTATE_ENERGY_RAPL:
                return "rapl";
        case MPI_PSTATE_ENERGY_HWMON:
                return "hwmon";
        }
        return "invalid";
}

uint64_t mpi_pstate_hwmon_counter_delta(uint64_t prev_uj, uint64_t cur_uj, int *reset)
{
        if (reset)
                *reset = 0;
        if (cur_uj >= prev_uj)
                return cur_uj - prev_uj;
        if (prev_uj >= UINT64_C(1) << 63)
                return cur_uj - prev_uj; /* unsigned: (2^64 - prev) + cur */
        if (reset)
                *reset = 1;
        return cur_uj;
}

uint64_t mpi_pstate_hwmon_power_energy(uint64_t p0_uw, uint64_t p1_uw, uint64_t dt_ns)
{
        /* µW * ns = 1e-15 J; both powers bounded, so the sum cannot overflow
         * and the product fits 128 bits */
        return (uint64_t)(((unsigned __int128)(p0_uw + p1_uw) * dt_ns) / (2u * NS_PER_S));
}

/* "energy12_input" -> kind ENERGY, idx 12; "power3_average" -> POWER, 3,
 * *avg true; "power3_input" -> POWER, 3, *avg false.  Anything else: false. */
static bool parse_channel(const char *name, enum mpi_pstate_hwmon_kind *kind, unsigned *idx,
                          bool *avg)
{
        const char *p;
        char *end;
        unsigned long v;

        if (strncmp(name, "energy", 6) == 0) {
                *kind = MPI_PSTATE_HWMON_ENERGY;
                p = name + 6;
        } else if (strncmp(name, "power", 5) == 0) {
                *kind = MPI_PSTATE_HWMON_POWER;
                p = name + 5;
        } else {
                return false;
        }
        if (*p < '1' || *p > '9')
                return false;
        v = strtoul(p, &end, 10);
        if (v > 255)
                return false;
        *idx = (unsigned)v;
        *avg = strcmp(end, "_average") == 0;
        if (*kind == MPI_PSTATE_HWMON_ENERGY)
                return strcmp(end, "_input") == 0;
        return *avg || strcmp(end, "_input") == 0;
}

/* Label of a channel: "<device name>/<label>" with the channel's label file
 * (energyM_label, powerM_label, or the ACPI meter's powerM_oem_info), else
 * the file's name. */
static void channel_label(struct mpi_pstate_hwmon_channel *c, const char *dir, const char *dev,
                          const char *file)
{
        char name[64], lbl[64], attr[64];
        const char *stem_end = strchr(file, '_');
        int len = stem_end ? (int)(stem_end - file) : (int)strlen(file);

        lbl[0] = '\0';
        snprintf(attr, sizeof(attr), "%.*s_label", len, file);
        if (mpi_pstate_rapl_read_attr(dir, attr, lbl, sizeof(lbl)) != 0) {
                snprintf(attr, sizeof(attr), "%.*s_oem_info", len, file);
                if (mpi_pstate_rapl_read_attr(dir, attr, lbl, sizeof(lbl)) != 0)
                        lbl[0] = '\0';
        }
        for (char *q = lbl; *q; q++)
                if (*q < ' ' || *q > '~' || *q == '"' || *q == '\\')
                        *q = '_'; /* goes into JSON records as is */
        snprintf(name, sizeof(name), "%s", dev);
        snprintf(c->label, sizeof(c->label), "%.20s/%.26s", name, lbl[0] ? lbl : file);
}

/* One channel file of device dev in dir into h. */
static int add_channel(struct mpi_pstate_hwmon *h, const char *dir, const char *dev,
                       const char *file, enum mpi_pstate_hwmon_kind k, unsigned idx, bool avg)
{
        struct mpi_pstate_hwmon_channel *c;
        int n;

        if (h->n == MPI_PSTATE_HWMON_MAX_CHANNELS)
                return -E2BIG;
        c = &h->ch[h->n];
        memset(c, 0, sizeof(*c));
        c->fd = -1;
        c->kind = k;
        n = snprintf(c->path, sizeof(c->path), "%s/%s", dir, file);
        if (n < 0 || (size_t)n >= sizeof(c->path))
                return -ENAMETOOLONG;
        channel_label(c, dir, dev, file);
        if (avg) {
                char attr[64], buf[32];
                unsigned long ms;

                snprintf(attr, sizeof(attr), "power%u_average_interval", idx);
                if (mpi_pstate_rapl_read_attr(dir, attr, buf, sizeof(buf)) == 0 &&
                    sscanf(buf, "%lu", &ms) == 1 && ms < 86400000ul)
                        c->avg_interval_ms = (uint32_t)ms;
        }
        h->n++;
        return 0;
}

/* Adds the channels of one hwmon device of the wanted kind. */
static int scan_device(struct mpi_pstate_hwmon *h, const char *dir, enum mpi_pstate_hwmon_kind want)
{
        char dev[32] = "hwmon";
        bool have_avg[256] = {false};
        struct dirent *de;
        DIR *d = opendir(dir);
        int rc = 0;

        if (!d)
                return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
        if (mpi_pstate_rapl_read_attr(dir, "name", dev, sizeof(dev)) != 0 ||
            mpi_pstate_safeio_check_name(dev, sizeof(dev) - 1) != 0)
                snprintf(dev, sizeof(dev), "hwmon");
        /* powerM_average wins over powerM_input of the same M */
        while ((de = readdir(d)) != NULL) {
                enum mpi_pstate_hwmon_kind k;
                unsigned idx;
                bool avg;

                if (parse_channel(de->d_name, &k, &idx, &avg) && k == MPI_PSTATE_HWMON_POWER && avg)
                        have_avg[idx] = true;
        }
        rewinddir(d);
        while (!rc && (de = readdir(d)) != NULL) {
                enum mpi_pstate_hwmon_kind k;
                unsigned idx;
                bool avg;

                if (!parse_channel(de->d_name, &k, &idx, &avg) || k != want)
                        continue;
                if (k == MPI_PSTATE_HWMON_POWER && !avg && have_avg[idx])
                        continue;
                rc = add_channel(h, dir, dev, de->d_name, k, idx, avg);
        }
        closedir(d);
        return rc;
}

static int cmp_channel(const void *a, const void *b)
{
        return strcmp(((const struct mpi_pstate_hwmon_channel *)a)->path,
                      ((const struct mpi_pstate_hwmon_channel *)b)->path);
}

/* Finds the channels of kind want under sysroot/class/hwmon. */
static int scan(const char *sysroot, struct mpi_pstate_hwmon *h, enum mpi_pstate_hwmon_kind want)
{
        char base[512], dir[600];
        struct dirent *de;
        DIR *d;
        int n, rc = 0;

        n = snprintf(base, sizeof(base), "%s/class/hwmon", sysroot);
        if (n < 0 || (size_t)n >= sizeof(base))
                return -ENAMETOOLONG;
        d = opendir(base);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while (!rc && (de = readdir(d)) != NULL) {
                if (strncmp(de->d_name, "hwmon", 5) != 0)
                        continue;
                n = snprintf(dir, sizeof(dir), "%s/%s", base, de->d_name);
                if (n < 0 || (size_t)n >= sizeof(dir))
                        continue;
                rc = scan_device(h, dir, want);
        }
        closedir(d);
        qsort(h->ch, h->n, sizeof(h->ch[0]), cmp_channel);
        return rc;
}

static enum mpi_pstate_rapl_status status_of(int neg_errno)
{
        return neg_errno == -EACCES || neg_errno == -EPERM ? MPI_PSTATE_RAPL_NO_ACCESS
                                                           : MPI_PSTATE_RAPL_ERROR;
}

static uint64_t range_of(const struct mpi_pstate_hwmon_channel *c)
{
        return c->kind == MPI_PSTATE_HWMON_ENERGY ? UINT64_MAX : MAX_POWER_UW;
}

enum mpi_pstate_rapl_status mpi_pstate_hwmon_open(const char *sysroot, struct mpi_pstate_hwmon *h,
                                                  uint64_t now_ns)
{
        int rc;

        memset(h, 0, sizeof(*h));
        for (unsigned i = 0; i < MPI_PSTATE_HWMON_MAX_CHANNELS; i++)
                h->ch[i].fd = -1;
        h->kind = MPI_PSTATE_HWMON_ENERGY;
        rc = scan(sysroot, h, MPI_PSTATE_HWMON_ENERGY);
        if (!rc && h->n == 0) {
                h->kind = MPI_PSTATE_HWMON_POWER;
                rc = scan(sysroot, h, MPI_PSTATE_HWMON_POWER);
        }
        if (rc) {
                h->status = status_of(rc);
                goto fail;
        }
        if (h->n == 0) {
                h->status = MPI_PSTATE_RAPL_ABSENT;
                return h->status;
        }
        for (unsigned i = 0; i < h->n; i++) {
                struct mpi_pstate_hwmon_channel *c = &h->ch[i];

                c->fd = open(c->path, O_RDONLY | O_CLOEXEC);
                if (c->fd < 0) {
                        h->status = status_of(-errno);
                        goto fail;
                }
                rc = mpi_pstate_rapl_read_counter(c->fd, range_of(c), &c->last);
                if (rc) {
                        h->status = status_of(rc);
                        goto fail;
                }
                c->last_ns = now_ns;
        }
        h->status = MPI_PSTATE_RAPL_OK;
        return h->status;
fail:
        mpi_pstate_hwmon_close(h);
        return h->status;
}

enum mpi_pstate_rapl_status mpi_pstate_hwmon_sample(struct mpi_pstate_hwmon *h, uint64_t now_ns)
{
        enum mpi_pstate_rapl_status st = MPI_PSTATE_RAPL_OK;

        if (h->n == 0)
                return h->status;
        for (unsigned i = 0; i < h->n; i++) {
                struct mpi_pstate_hwmon_channel *c = &h->ch[i];
                uint64_t cur;
                int rc = mpi_pstate_rapl_read_counter(c->fd, range_of(c), &cur), reset;

                if (rc) {
                        st = status_of(rc);
                        continue;
                }
                if (c->kind == MPI_PSTATE_HWMON_ENERGY) {
                        uint64_t d = mpi_pstate_hwmon_counter_delta(c->last, cur, &reset);

                        c->resets += (uint64_t)reset;
                        c->wraps += (uint64_t)(!reset && cur < c->last);
                        c->total_uj += d;
                } else if (now_ns > c->last_ns) {
                        c->total_uj +=
                            mpi_pstate_hwmon_power_energy(c->last, cur, now_ns - c->last_ns);
                }
                c->last = cur;
                c->last_ns = now_ns;
        }
        h->status = st;
        return st;
}

uint64_t mpi_pstate_hwmon_total_uj(const struct mpi_pstate_hwmon *h)
{
        uint64_t t = 0;

        for (unsigned i = 0; i < h->n; i++)
                t += h->ch[i].total_uj;
        return t;
}

uint64_t mpi_pstate_hwmon_interval_ns(const struct mpi_pstate_hwmon *h, uint64_t max_ns)
{
        uint64_t ns = 0;

        if (h->kind == MPI_PSTATE_HWMON_ENERGY)
                return max_ns;
        for (unsigned i = 0; i < h->n; i++) {
                uint64_t c = (uint64_t)h->ch[i].avg_interval_ms * 1000000u;

                if (c && (!ns || c < ns))
                        ns = c;
        }
        if (!ns)
                ns = NS_PER_S;
        if (ns < NS_PER_S / 10)
                ns = NS_PER_S / 10;
        return ns < max_ns ? ns : max_ns;
}

void mpi_pstate_hwmon_close(struct mpi_pstate_hwmon *h)
{
        for (unsigned i = 0; i < h->n; i++) {
                if (h->ch[i].fd >= 0)
                        close(h->ch[i].fd);
                h->ch[i].fd = -1;
        }
        h->n = 0;
}

enum mpi_pstate_energy_source mpi_pstate_energy_source(const char *sysroot)
{
        struct mpi_pstate_rapl *r = malloc(sizeof(*r));
        struct mpi_pstate_hwmon *h = NULL;
        enum mpi_pstate_energy_source src = MPI_PSTATE_ENERGY_NONE;

        if (!r)
                return src;
        if (mpi_pstate_rapl_discover(sysroot, r) != MPI_PSTATE_RAPL_ABSENT) {
                src = MPI_PSTATE_ENERGY_RAPL;
                goto out;
        }
        h = malloc(sizeof(*h));
        if (h && mpi_pstate_hwmon_open(sysroot, h, 0) != MPI_PSTATE_RAPL_ABSENT)
                src = MPI_PSTATE_ENERGY_HWMON;
        if (h)
                mpi_pstate_hwmon_close(h);
out:
        free(h);
        free(r);
        return src;
}
