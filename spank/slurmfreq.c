/* SPDX-License-Identifier: BSD-3-Clause */
/* Slurm's own CPU frequency settings (slurmfreq.h): CpuFreqDef and
 * CpuFreqGovernors read from slurm.conf text, without libslurm. */
#include "slurmfreq.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "options.h"

#define GOV_BIT(g) (UINT32_C(1) << (g))

void mpi_pstate_slurmfreq_defaults(struct mpi_pstate_slurmfreq *sf)
{
        memset(sf, 0, sizeof(*sf));
        sf->governors = GOV_BIT(MPI_PSTATE_GOVERNOR_ONDEMAND) |
                        GOV_BIT(MPI_PSTATE_GOVERNOR_PERFORMANCE) |
                        GOV_BIT(MPI_PSTATE_GOVERNOR_USERSPACE);
}

/* Slurm's _cpu_freq_check_gov(): a governor is known by its first letters. */
static uint32_t governor_bit(const char *w, size_t n)
{
        static const struct {
                const char *prefix;
                enum mpi_pstate_governor g;
        } names[] = {
            {"co", MPI_PSTATE_GOVERNOR_CONSERVATIVE}, {"perf", MPI_PSTATE_GOVERNOR_PERFORMANCE},
            {"pow", MPI_PSTATE_GOVERNOR_POWERSAVE},   {"user", MPI_PSTATE_GOVERNOR_USERSPACE},
            {"onde", MPI_PSTATE_GOVERNOR_ONDEMAND},   {"sch", MPI_PSTATE_GOVERNOR_SCHEDUTIL},
        };

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                size_t k = strlen(names[i].prefix);

                if (n >= k && strncasecmp(w, names[i].prefix, k) == 0)
                        return GOV_BIT(names[i].g);
        }
        return 0;
}

static int governor_list(const char *v, size_t n, uint32_t *out)
{
        uint32_t m = 0;
        size_t i = 0;

        while (i < n) {
                size_t j = i;
                uint32_t b;

                while (j < n && v[j] != ',')
                        j++;
                b = governor_bit(v + i, j - i);
                if (!b)
                        return -EINVAL;
                m |= b;
                i = j + 1;
        }
        if (!m)
                return -EINVAL;
        *out = m;
        return 0;
}

int mpi_pstate_slurmfreq_line(struct mpi_pstate_slurmfreq *sf, const char *line)
{
        const char *p = line;
        int rc = 0;

        for (;;) {
                const char *k, *eq, *v;
                size_t kn, vn;
                uint32_t m;

                while (*p && isspace((unsigned char)*p))
                        p++;
                if (!*p || *p == '#')
                        return rc;
                k = p;
                while (*p && !isspace((unsigned char)*p) && *p != '#')
                        p++;
                eq = memchr(k, '=', (size_t)(p - k));
                if (!eq)
                        continue;
                kn = (size_t)(eq - k);
                v = eq + 1;
                vn = (size_t)(p - v);
                if (kn == 10 && strncasecmp(k, "CpuFreqDef", kn) == 0) {
                        /* Slurm refuses userspace here (cpu_freq_verify_def). */
                        if (governor_list(v, vn, &m) || (m & (m - 1)) ||
                            m == GOV_BIT(MPI_PSTATE_GOVERNOR_USERSPACE))
                                rc = -EINVAL;
                        else {
                                sf->def_set = true;
                                sf->def = m;
                        }
                } else if (kn == 16 && strncasecmp(k, "CpuFreqGovernors", kn) == 0) {
                        if (governor_list(v, vn, &m))
                                rc = -EINVAL;
                        else
                                sf->governors = m;
                }
        }
}

int mpi_pstate_slurmfreq_read(const char *path, struct mpi_pstate_slurmfreq *sf)
{
        char line[1024];
        FILE *f;
        int rc = 0;

        mpi_pstate_slurmfreq_defaults(sf);
        if (!path)
                path = getenv("SLURM_CONF");
        if (!path || !path[0])
                path = MPI_PSTATE_SLURMFREQ_CONF;
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                /* A longer line is a NodeName/PartitionName list: the tail is
                 * read as a line of its own, where a key cannot start mid-word
                 * because only whole words with '=' count. */
                if (mpi_pstate_slurmfreq_line(sf, line))
                        rc = -EINVAL;
        }
        if (ferror(f))
                rc = -EIO;
        fclose(f);
        return rc;
}
