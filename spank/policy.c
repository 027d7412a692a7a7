/* SPDX-License-Identifier: BSD-3-Clause */
/* The per-step cpufreq policy (policy.h): each frequency domain of the
 * step's CPUs classified, saved into a restore record and set to the step's
 * governor and range, or left alone when shared or busy. */
#include "policy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {
    [MPI_PSTATE_POLICY_SET] = "set",       [MPI_PSTATE_POLICY_UNTOUCHED] = "untouched",
    [MPI_PSTATE_POLICY_SHARED] = "shared", [MPI_PSTATE_POLICY_BUSY] = "busy",
    [MPI_PSTATE_POLICY_FAILED] = "failed",
};

const char *mpi_pstate_policy_status_name(enum mpi_pstate_policy_status s)
{
        return (unsigned)s < sizeof(status_names) / sizeof(status_names[0]) ? status_names[s] : "?";
}

__attribute__((format(printf, 3, 4))) static void seterr(char *err, size_t errlen, const char *fmt,
                                                         ...)
{
        va_list ap;

        if (!err || errlen == 0 || err[0])
                return; /* the first problem is the one worth reading */
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
}

/* Online CPUs of p that the step does not own. */
static bool spills(const struct mpi_pstate_cpufreq_policy *p, const cpu_set_t *cpus)
{
        cpu_set_t ours;

        CPU_AND(&ours, &p->affected, cpus);
        return !CPU_EQUAL(&ours, &p->affected);
}

static void set_one(const struct mpi_pstate_policy_req *req,
                    const struct mpi_pstate_cpufreq_policy *p, struct mpi_pstate_policy_domain *d,
                    char *err, size_t errlen)
{
        const struct mpi_pstate_cpufreq_limits lim = {
            .floor_khz = req->floor_khz,
            .ceiling_khz = req->ceiling_khz,
            .governors = NULL, /* the user's choice was checked at submit time */
            .allow_governor = true,
        };
        const struct mpi_pstate_cpufreq_request ask = {.governor = req->governor};
        char msg[256] = "";
        int rc;

        /* p->cur was read by the discovery a moment ago, and the step owns
         * the domain: no file is read twice. */
        rc = mpi_pstate_restore_save_from(req->restore_dir, p, &p->cur, &req->owner, msg,
                                          sizeof(msg));
        if (rc == -EBUSY) {
                d->status = MPI_PSTATE_POLICY_BUSY;
                d->error = rc;
                return;
        }
        if (rc == 0 && req->save_only) {
                d->status = MPI_PSTATE_POLICY_SET;
                return;
        }
        if (rc == 0)
                rc = mpi_pstate_cpufreq_mech_choose(p, req->mechanism, !req->keep,
                                                    req->keep ? NULL : req->governor, &d->mech, msg,
                                                    sizeof(msg));
        if (rc == 0 && req->keep) {
                d->status = MPI_PSTATE_POLICY_SET; /* target: the step's settings as found */
                return;
        }
        if (rc == 0)
                rc = mpi_pstate_cpufreq_plan(p, &lim, &ask, d->mech, &d->target, &d->clamped, msg,
                                             sizeof(msg));
        if (rc == 0)
                rc = mpi_pstate_cpufreq_apply_from(p, &p->cur, &d->target, msg, sizeof(msg));
        if (rc) {
                /* A saved record stays: the step-exit restore puts back what a
                 * partial write changed. */
                d->status = MPI_PSTATE_POLICY_FAILED;
                d->error = rc;
                seterr(err, errlen, "%s: %s", p->name, msg[0] ? msg : strerror(-rc));
                return;
        }
        d->status = MPI_PSTATE_POLICY_SET;
}

/* The step's node map: the one the caller keeps, refreshed, else a fresh
 * discovery of the step's CPUs (kept for the caller when it asks). */
static int node_of(const struct mpi_pstate_policy_req *req, struct mpi_pstate_cpufreq_node **node,
                   char *err, size_t errlen)
{
        int rc;

        if (req->node && *req->node) {
                *node = *req->node;
                return mpi_pstate_cpufreq_refresh_settings(*node, err, errlen);
        }
        rc = mpi_pstate_cpufreq_discover_cpus(req->sysroot, req->cpus, node, err, errlen);
        if (rc == 0 && req->node)
                *req->node = *node;
        return rc;
}

/* One domain's outcome into the totals; the step's mechanism is the one
 * every set domain shares, else AUTO. */
static void count_domain(struct mpi_pstate_policy_result *res,
                         const struct mpi_pstate_policy_domain *d)
{
        switch (d->status) {
        case MPI_PSTATE_POLICY_SET:
                res->mech =
                    res->set == 0 || res->mech == d->mech ? d->mech : MPI_PSTATE_CPUFREQ_MECH_AUTO;
                res->set++;
                break;
        case MPI_PSTATE_POLICY_SHARED:
                res->shared++;
                break;
        case MPI_PSTATE_POLICY_BUSY:
                res->busy++;
                break;
        case MPI_PSTATE_POLICY_FAILED:
                res->failed++;
                break;
        case MPI_PSTATE_POLICY_UNTOUCHED:
                break;
        }
}

int mpi_pstate_policy_apply(const struct mpi_pstate_policy_req *req,
                            struct mpi_pstate_policy_result *res, char *err, size_t errlen)
{
        struct mpi_pstate_cpufreq_node *node = NULL;
        unsigned *idx = NULL, n;
        int rc;

        memset(res, 0, sizeof(*res));
        if (err && errlen)
                err[0] = '\0';
        if (!req || !req->sysroot || !req->restore_dir || !req->cpus)
                return -EINVAL;
        rc = node_of(req, &node, err, errlen);
        if (rc)
                return rc;
        snprintf(res->driver, sizeof(res->driver), "%s", node->driver);
        idx = calloc(node->npolicies ? node->npolicies : 1, sizeof(*idx));
        if (!idx) {
                rc = -ENOMEM;
                goto out;
        }
        n = mpi_pstate_cpufreq_domains_of(node, req->cpus, idx, node->npolicies, NULL);
        res->domains = calloc(n ? n : 1, sizeof(*res->domains));
        if (!res->domains) {
                rc = -ENOMEM;
                goto out;
        }
        res->ndomains = n;
        res->mech = MPI_PSTATE_CPUFREQ_MECH_AUTO;
        for (unsigned i = 0; i < n; i++) {
                const struct mpi_pstate_cpufreq_policy *p = &node->policies[idx[i]];
                struct mpi_pstate_policy_domain *d = &res->domains[i];

                snprintf(d->name, sizeof(d->name), "%s", p->name);
                d->cpus = p->affected;
                d->target = p->cur;
                if (spills(p, req->cpus))
                        d->status = MPI_PSTATE_POLICY_SHARED;
                else if (!req->change)
                        d->status = MPI_PSTATE_POLICY_UNTOUCHED;
                else
                        set_one(req, p, d, err, errlen);
                count_domain(res, d);
        }
out:
        free(idx);
        if (!req->node)
                mpi_pstate_cpufreq_free(node);
        if (rc)
                mpi_pstate_policy_result_free(res);
        return rc;
}

void mpi_pstate_policy_result_free(struct mpi_pstate_policy_result *res)
{
        free(res->domains);
        memset(res, 0, sizeof(*res));
}
