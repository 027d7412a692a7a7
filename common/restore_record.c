/* SPDX-License-Identifier: BSD-3-Clause */
/* The text of a restore record (docs/cpufreq.md, "Restore records"):
 * one "key=value" line per setting, formatted and parsed strictly, for a
 * cpufreq policy and for an uncore domain.  Pure: no file system. */
#include "restore.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* "policy<N>" or "cpu<N>", N up to 7 digits: the only names that become paths. */
bool mpi_pstate_restore_valid_name(const char *s)
{
        const char *d;

        if (strncmp(s, "policy", 6) == 0)
                d = s + 6;
        else if (strncmp(s, "cpu", 3) == 0)
                d = s + 3;
        else
                return false;
        return *d && strlen(d) <= 7 && strspn(d, "0123456789") == strlen(d);
}

int mpi_pstate_restore_format(const struct mpi_pstate_restore_record *r, char *buf, size_t len)
{
        const struct mpi_pstate_cpufreq_settings *s = &r->saved;
        int n;

        if (!mpi_pstate_restore_valid_name(r->policy) ||
            !mpi_pstate_cpufreq_valid_name(r->driver) ||
            !mpi_pstate_cpufreq_valid_name(s->governor) ||
            (s->epp[0] && !mpi_pstate_cpufreq_valid_epp(s->epp)))
                return -EINVAL;
        /* Version 1 for a policy without EPP: what every release before the
         * EPP lever reads, so a downgrade still restores such records. */
        n = snprintf(buf, len,
                     "version=%u\njob=%u\nstep=%u\npolicy=%s\ndriver=%s\ngovernor=%s\n"
                     "min_khz=%u\nmax_khz=%u\nsetspeed_khz=%u\n%s%s%s",
                     s->epp[0] ? MPI_PSTATE_RESTORE_VERSION_EPP : MPI_PSTATE_RESTORE_VERSION,
                     r->owner.job_id, r->owner.step_id, r->policy, r->driver, s->governor,
                     s->min_khz, s->max_khz, s->setspeed_khz, s->epp[0] ? "epp=" : "", s->epp,
                     s->epp[0] ? "\n" : "");
        if (n < 0 || (size_t)n >= len)
                return -ENOSPC;
        return n;
}

/* Takes "key=value" at *pos up to the newline (or the end after the last key)
 * into val and advances *pos past it. */
static int take(const char **pos, const char *key, char *val, size_t vlen, bool last)
{
        const char *p = *pos;
        size_t klen = strlen(key), n;

        if (strncmp(p, key, klen) != 0 || p[klen] != '=')
                return -EINVAL;
        p += klen + 1;
        n = strcspn(p, "\n");
        if (n == 0 || n >= vlen)
                return -EINVAL;
        memcpy(val, p, n);
        val[n] = '\0';
        p += n;
        if (last) {
                /* The reader strips trailing newlines; nothing may follow. */
                if (*p)
                        return -EINVAL;
        } else {
                if (*p != '\n')
                        return -EINVAL;
                p++;
        }
        *pos = p;
        return 0;
}

/* Decimal as format() writes it: digits only, no leading zero, no blanks. */
static int strict_u32(const char *s, uint32_t min, uint32_t *out)
{
        uint64_t v;
        size_t n = strlen(s);

        if (n == 0 || n > 10 || strspn(s, "0123456789") != n || (s[0] == '0' && n > 1))
                return -EINVAL;
        if (mpi_pstate_parse_u64(s, min, UINT32_MAX, &v) != 0)
                return -EINVAL;
        *out = (uint32_t)v;
        return 0;
}

int mpi_pstate_restore_parse(const char *text, struct mpi_pstate_restore_record *out)
{
        struct mpi_pstate_restore_record r;
        const char *p = text;
        char v[32];
        uint32_t version;
        bool userspace;

        if (!text || !out)
                return -EINVAL;
        memset(&r, 0, sizeof(r));
        if (take(&p, "version", v, sizeof(v), false) || strict_u32(v, 1, &version) ||
            (version != MPI_PSTATE_RESTORE_VERSION && version != MPI_PSTATE_RESTORE_VERSION_EPP))
                return -EINVAL;
        r.version = version;
        if (take(&p, "job", v, sizeof(v), false) || strict_u32(v, 0, &r.owner.job_id))
                return -EINVAL;
        if (take(&p, "step", v, sizeof(v), false) || strict_u32(v, 0, &r.owner.step_id))
                return -EINVAL;
        if (take(&p, "policy", v, sizeof(v), false) || strlen(v) >= sizeof(r.policy) ||
            !mpi_pstate_restore_valid_name(v))
                return -EINVAL;
        memcpy(r.policy, v, strlen(v) + 1);
        if (take(&p, "driver", v, sizeof(v), false) || !mpi_pstate_cpufreq_valid_name(v))
                return -EINVAL;
        memcpy(r.driver, v, strlen(v) + 1);
        if (take(&p, "governor", v, sizeof(v), false) || !mpi_pstate_cpufreq_valid_name(v))
                return -EINVAL;
        memcpy(r.saved.governor, v, strlen(v) + 1);
        if (take(&p, "min_khz", v, sizeof(v), false) || strict_u32(v, 1, &r.saved.min_khz))
                return -EINVAL;
        if (take(&p, "max_khz", v, sizeof(v), false) || strict_u32(v, 1, &r.saved.max_khz))
                return -EINVAL;
        if (take(&p, "setspeed_khz", v, sizeof(v), version == MPI_PSTATE_RESTORE_VERSION) ||
            strict_u32(v, 0, &r.saved.setspeed_khz))
                return -EINVAL;
        if (version == MPI_PSTATE_RESTORE_VERSION_EPP &&
            (take(&p, "epp", v, sizeof(v), true) || strlen(v) >= sizeof(r.saved.epp) ||
             !mpi_pstate_cpufreq_valid_epp(v)))
                return -EINVAL;
        if (version == MPI_PSTATE_RESTORE_VERSION_EPP)
                memcpy(r.saved.epp, v, strlen(v) + 1);
        if (r.saved.min_khz > r.saved.max_khz)
                return -EINVAL;
        userspace = strcmp(r.saved.governor, "userspace") == 0;
        if (userspace != (r.saved.setspeed_khz != 0))
                return -EINVAL;
        *out = r;
        return 0;
}

int mpi_pstate_restore_uncore_format(const struct mpi_pstate_restore_uncore *r, char *buf,
                                     size_t len)
{
        int n;

        if (!mpi_pstate_uncore_valid_name(r->domain, NULL, NULL) || r->min_khz == 0 ||
            r->min_khz > r->max_khz)
                return -EINVAL;
        n = snprintf(buf, len, "version=1\njob=%u\nstep=%u\nuncore=%s\nmin_khz=%u\nmax_khz=%u\n",
                     r->owner.job_id, r->owner.step_id, r->domain, r->min_khz, r->max_khz);
        if (n < 0 || (size_t)n >= len)
                return -ENOSPC;
        return n;
}

int mpi_pstate_restore_uncore_parse(const char *text, struct mpi_pstate_restore_uncore *out)
{
        struct mpi_pstate_restore_uncore r;
        const char *p = text;
        char v[32];
        uint32_t version;

        if (!text || !out)
                return -EINVAL;
        memset(&r, 0, sizeof(r));
        if (take(&p, "version", v, sizeof(v), false) || strict_u32(v, 1, &version) ||
            version != 1 || take(&p, "job", v, sizeof(v), false) ||
            strict_u32(v, 0, &r.owner.job_id) || take(&p, "step", v, sizeof(v), false) ||
            strict_u32(v, 0, &r.owner.step_id) || take(&p, "uncore", v, sizeof(v), false) ||
            !mpi_pstate_uncore_valid_name(v, NULL, NULL))
                return -EINVAL;
        memcpy(r.domain, v, strlen(v) + 1);
        if (take(&p, "min_khz", v, sizeof(v), false) || strict_u32(v, 1, &r.min_khz) ||
            take(&p, "max_khz", v, sizeof(v), true) || strict_u32(v, 1, &r.max_khz) ||
            r.min_khz > r.max_khz)
                return -EINVAL;
        *out = r;
        return 0;
}
