/* SPDX-License-Identifier: BSD-3-Clause */
/* The preload library's environment, read (env.h): each MPI_PSTATE_*
 * variable it takes parsed strictly into struct mpi_pstate_pconf, the first
 * problem kept as one line for the caller to print. */
#include "env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "parse.h"

static int bad(struct mpi_pstate_pconf *c, const char *var, const char *value, const char *expect)
{
        snprintf(c->err, sizeof(c->err), "mpi-pstate: invalid value \"%.64s\" for %s: expected %s",
                 value, var, expect);
        return -EINVAL;
}

static int copy_path(struct mpi_pstate_pconf *c, const char *var, char *dst, size_t len,
                     int absolute)
{
        const char *v = getenv(var);

        dst[0] = '\0';
        if (!v)
                return 0;
        /* room for "/rank-<n>.json.tmp.<pid>" under a profile directory */
        if (!*v || strlen(v) >= len - 64 || (absolute && v[0] != '/'))
                return bad(c, var, v, absolute ? "an absolute path" : "a path");
        memcpy(dst, v, strlen(v) + 1);
        return 0;
}

int mpi_pstate_env_load(struct mpi_pstate_pconf *c)
{
        static const char *const local_vars[] = {MPI_PSTATE_LOCAL_RANK_VARS};
        const char *v;
        uint64_t u;
        int rc;

        memset(c, 0, sizeof(*c));
        c->local_rank = -1;
        mpi_pstate_options_defaults(&c->opt);
        /* The user options share the plugin's parser: same words, same messages. */
        rc = mpi_pstate_options_from_env(&c->opt, c->err, sizeof(c->err));
        if (rc)
                return rc;
        rc = copy_path(c, MPI_PSTATE_ENV_SHM, c->shm, sizeof(c->shm), 1);
        if (rc)
                return rc;
        rc = copy_path(c, MPI_PSTATE_ENV_PROFILE_DIR, c->profile_dir, sizeof(c->profile_dir), 0);
        if (rc)
                return rc;
        v = getenv(MPI_PSTATE_ENV_VERBOSE);
        if (v && *v) {
                if (mpi_pstate_parse_u64(v, 0, 2, &u) != 0)
                        return bad(c, MPI_PSTATE_ENV_VERBOSE, v, "0, 1 or 2");
                c->verbose = (unsigned)u;
        }
        for (size_t i = 0; i < sizeof(local_vars) / sizeof(local_vars[0]); i++) {
                v = getenv(local_vars[i]);
                if (!v)
                        continue;
                if (mpi_pstate_parse_u64(v, 0, MPI_PSTATE_SEG_MAX_SLOTS - 1, &u) != 0)
                        return bad(c, local_vars[i], v, "a local rank number");
                c->local_rank = (int)u;
                c->local_rank_var = local_vars[i];
                break;
        }
        v = getenv(MPI_PSTATE_ENV_CLOCK);
        if (mpi_pstate_slot_clock_choose(v, &c->clock) != 0)
                return bad(c, MPI_PSTATE_ENV_CLOCK, v, "auto, tsc or monotonic");
        return 0;
}
