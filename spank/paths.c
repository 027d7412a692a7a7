/* SPDX-License-Identifier: BSD-3-Clause */
/* The node paths of a step (paths.h): the host name, the %h expansion of
 * runtime_dir, the step's directory and name, and the segment's unguessable
 * name under /dev/shm. */
#include "paths.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int plain_name(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > 63)
                return 0;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
                        return 0;
        return 1;
}

int mpi_pstate_paths_host(char *buf, size_t len)
{
        char h[256];

        if (gethostname(h, sizeof(h)) != 0)
                return -errno;
        h[sizeof(h) - 1] = '\0';
        h[strcspn(h, ".")] = '\0';
        if (!plain_name(h))
                return -EINVAL;
        if ((size_t)snprintf(buf, len, "%s", h) >= len)
                return -ENAMETOOLONG;
        return 0;
}

int mpi_pstate_paths_expand(const char *tmpl, const char *host, char *out, size_t len)
{
        size_t o = 0;

        if (!tmpl || !out || len == 0)
                return -EINVAL;
        for (const char *p = tmpl; *p; p++) {
                const char *piece = p;
                size_t n = 1;

                if (*p == '%') {
                        p++;
                        if (*p == '%') {
                                piece = "%";
                        } else if (*p == 'h') {
                                /* The host becomes a path component: never a "/" or "..". */
                                if (!host || !plain_name(host))
                                        return -EINVAL;
                                piece = host;
                                n = strlen(host);
                        } else {
                                return -EINVAL;
                        }
                }
                if (o + n >= len)
                        return -ENAMETOOLONG;
                memcpy(out + o, piece, n);
                o += n;
        }
        out[o] = '\0';
        return 0;
}

#define FMT(field, ...)                                                                            \
        do {                                                                                       \
                int n_ = snprintf(out->field, sizeof(out->field), __VA_ARGS__);                    \
                if (n_ < 0 || (size_t)n_ >= sizeof(out->field))                                    \
                        return -ENAMETOOLONG;                                                      \
        } while (0)

const char *mpi_pstate_paths_step_name(uint32_t step, char *buf, size_t len)
{
        /* Slurm's values (slurm.h), spelled out so that this file needs no
         * Slurm header. */
        switch (step) {
        case 0xfffffffbu:
                return "batch";
        case 0xfffffffcu:
                return "extern";
        case 0xfffffffau:
                return "interactive";
        default:
                snprintf(buf, len, "%u", step);
                return buf;
        }
}

int mpi_pstate_paths_step(const char *runtime_dir, const char *host, uint32_t job, uint32_t step,
                          struct mpi_pstate_paths *out)
{
        int rc = mpi_pstate_paths_expand(runtime_dir, host, out->runtime, sizeof(out->runtime));
        char num[16];
        const char *name = mpi_pstate_paths_step_name(step, num, sizeof(num));

        if (rc)
                return rc;
        FMT(restore, "%s/restore", out->runtime);
        FMT(steps, "%s/steps", out->runtime);
        FMT(step, "%s/%u.%s", out->steps, job, name);
        FMT(shm, "%s/mpi-pstate.%u.%s", MPI_PSTATE_PATHS_SHM_DIR, job, name);
        out->shm_base = strlen(out->shm);
        FMT(pidfile, "%s/agent.pid", out->step);
        FMT(record, "%s/agent.json", out->step);
        FMT(log, "%s/agent.log", out->step);
        return 0;
}

int mpi_pstate_paths_shm_unique(struct mpi_pstate_paths *p, uint64_t rnd)
{
        size_t n = p->shm_base; /* again after a collision: replaces the suffix */

        if (n + 2 + MPI_PSTATE_PATHS_SHM_RAND > sizeof(p->shm))
                return -ENAMETOOLONG;
        snprintf(p->shm + n, sizeof(p->shm) - n, ".%016llx", (unsigned long long)rnd);
        return 0;
}
