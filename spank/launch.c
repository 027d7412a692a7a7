/* SPDX-License-Identifier: BSD-3-Clause */
/* How a step's ranks are reached (launch.h): the LD_PRELOAD value a task
 * gets, the user's entries kept, and whether the task is an MPI launcher's
 * daemon rather than a rank. */
#include "launch.h"

#include <errno.h>
#include <string.h>

#define SEPARATORS ": \t\n"

static int append(char *out, size_t len, size_t *o, const char *s, size_t n)
{
        size_t sep = *o ? 1 : 0;

        if (*o + sep + n >= len)
                return -ENOSPC;
        if (sep)
                out[(*o)++] = ':';
        memcpy(out + *o, s, n);
        *o += n;
        out[*o] = '\0';
        return 0;
}

int mpi_pstate_launch_preload(const char *lib, const char *current, char *out, size_t len)
{
        size_t o = 0, liblen;
        int rc;

        if (!lib || !out || len == 0)
                return -EINVAL;
        liblen = strlen(lib);
        if (liblen == 0 || strcspn(lib, SEPARATORS) != liblen)
                return -EINVAL;
        out[0] = '\0';
        rc = append(out, len, &o, lib, liblen);
        if (rc)
                return rc;
        for (const char *p = current ? current : ""; *p;) {
                size_t n;

                p += strspn(p, SEPARATORS);
                n = strcspn(p, SEPARATORS);
                if (n == 0)
                        break;
                /* A second copy would make ld.so load the front twice under
                 * one name: harmless, but the user asked for nothing twice. */
                if (!(n == liblen && memcmp(p, lib, n) == 0)) {
                        rc = append(out, len, &o, p, n);
                        if (rc)
                                return rc;
                }
                p += n;
        }
        return (int)o;
}

bool mpi_pstate_launch_is_daemon(const char *argv0)
{
        static const char *const daemons[] = {"orted", "prted", "hydra_pmi_proxy", "pmi_proxy",
                                              "hydra_bstrap_proxy"};
        const char *base;

        if (!argv0)
                return false;
        base = strrchr(argv0, '/');
        base = base ? base + 1 : argv0;
        for (size_t i = 0; i < sizeof(daemons) / sizeof(daemons[0]); i++)
                if (strcmp(base, daemons[i]) == 0)
                        return true;
        return false;
}
