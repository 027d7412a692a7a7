/* SPDX-License-Identifier: BSD-3-Clause */
/* The uncore lever: while every rank on a package the step owns whole has
 * waited longer than --uncore-threshold, that package's uncore runs at its
 * lowest frequency; it goes back up when the first of them leaves.
 *
 * The decision is the pure core of agent.c a second time, over the same
 * ranks and observations, with the uncore domains as its domains and
 * deadlines moved to the longer threshold.  Its side of the slot protocol
 * marks nothing: a rank's clocked_down flag belongs to the core clock, so
 * a rank leaving a wait wakes the agent only when its core is down too (it
 * is, whenever the core threshold is the shorter, which the plugin
 * enforces); otherwise the next periodic scan raises the uncore.
 *
 * Only a domain all of whose CPUs are the step's is touched, and only
 * after its limits are recorded with the step as owner, so the plugin's
 * step exit and the node Epilog restore it if the agent dies
 * (common/restore.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentd.h"

static void set_status(struct agentd_uncore *u, enum agentd_dom_status st, const char *why)
{
        u->status = st;
        snprintf(u->why, sizeof(u->why), "%s", why);
}

static void record_name(const struct agentd_uncore *u, char *out, size_t len)
{
        snprintf(out, len, MPI_PSTATE_RESTORE_UNCORE_PREFIX "%s", u->d->name);
}

/* Puts a domain back: from its record while root; once the agent runs as
 * its own uid, its maximum up through the kept descriptor (the record
 * stays for root, which applies it at the step's end); never root, from
 * what discovery read.  1 restored, or a negative errno. */
static int put_back(struct agentd *a, struct agentd_uncore *u, char *err, size_t errlen)
{
        struct mpi_pstate_restore_owner who = {a->o.job, a->o.step};
        char name[64];
        int rc;

        if (a->records && geteuid() == 0) {
                record_name(u, name, sizeof(name));
                return mpi_pstate_restore_policy(a->o.runtime_dir, a->o.sysroot, name, &who, 0, err,
                                                 errlen);
        }
        if (a->records)
                return 1; /* raised with the rest (uncore_finish); the record is root's */
        rc = mpi_pstate_uncore_apply(u->d->dir, u->d->min_khz, u->d->max_khz, err, errlen);
        return rc ? rc : 1;
}

static bool owned_whole(const struct agentd *a, const cpu_set_t *cpus)
{
        cpu_set_t x;

        CPU_AND(&x, cpus, &a->o.cpus);
        return CPU_COUNT(cpus) > 0 && CPU_EQUAL(&x, cpus);
}

static void setup_one(struct agentd *a, struct agentd_uncore *u)
{
        struct mpi_pstate_restore_owner who = {a->o.job, a->o.step};
        const struct mpi_pstate_uncore_domain *d = u->d;
        uint32_t low = d->initial_min_khz ? d->initial_min_khz : d->min_khz;
        char err[256] = "";
        int rc;

        if (!owned_whole(a, &d->cpus)) {
                set_status(u, AGENTD_DOM_OUTSIDE,
                           CPU_COUNT(&d->cpus) ? "its package has CPUs outside the step"
                                               : "no CPU says it is in this package");
                return;
        }
        if (low < d->min_khz)
                low = d->min_khz; /* an admin's raised minimum stays */
        if (low >= d->max_khz) {
                set_status(u, AGENTD_DOM_NO_RANGE, "its maximum is already its minimum");
                return;
        }
        if (a->o.profile) {
                /* what the what-if needs from a profile run: could it have */
                set_status(u, AGENTD_DOM_PROFILE, "mode profile: the step owns it whole");
                return;
        }
        rc = a->records
                 ? mpi_pstate_restore_save_uncore(a->o.runtime_dir, d, &who, err, sizeof(err))
                 : 0;
        if (rc) {
                set_status(u, rc == -EBUSY ? AGENTD_DOM_BUSY : AGENTD_DOM_ERROR,
                           err[0] ? err : strerror(-rc));
                return;
        }
        u->saved = true;
        rc = mpi_pstate_uncore_prepare(&u->h, d, low, d->max_khz, err, sizeof(err));
        if (rc) {
                set_status(u, AGENTD_DOM_ERROR, err);
                if (put_back(a, u, err, sizeof(err)) >= 0)
                        u->saved = false;
                return;
        }
        set_status(u, AGENTD_DOM_MANAGED, "");
}

void mpi_pstate_agentd_uncore_setup(struct agentd *a)
{
        char err[256] = "";
        int rc;

        /* A profile run looks too, so that the what-if knows which
         * packages an on run could lower; it writes nothing. */
        if (!a->o.uncore && !a->o.profile)
                return;
        rc = mpi_pstate_uncore_discover(a->o.sysroot, &a->unode, err, sizeof(err));
        if (rc) {
                mpi_pstate_agentd_log(rc == -ENODEV ? LOG_INFO : LOG_ERR, "uncore lever off: %s",
                                      err[0] ? err : strerror(-rc));
                return;
        }
        a->udom = calloc(a->unode->n, sizeof(*a->udom));
        if (!a->udom)
                return;
        a->nudom = a->unode->n;
        for (unsigned i = 0; i < a->nudom; i++) {
                struct agentd_uncore *u = &a->udom[i];

                u->d = &a->unode->dom[i];
                u->h.fd = -1;
                setup_one(a, u);
                mpi_pstate_agentd_log(u->status == AGENTD_DOM_MANAGED ? LOG_DEBUG : LOG_INFO,
                                      "uncore %s: %s%s%s", u->d->name,
                                      mpi_pstate_agentd_dom_status_name(u->status),
                                      u->why[0] ? ": " : "", u->why);
        }
}

/* ---- the second core's side effects ---- */

/* Nothing is marked: the rank must merely still be in the same wait. */
static int uop_check(void *ctx, unsigned r, uint64_t since)
{
        struct agentd *a = ctx;
        struct mpi_pstate_slot *s = a->seg_lost ? NULL : mpi_pstate_slot_at(&a->seg, r);

        return s && atomic_load_explicit(&s->wait_since, memory_order_acquire) == since;
}

static void uop_unmark(void *ctx, unsigned r, uint64_t down_ns)
{
        (void)ctx;
        (void)r;
        (void)down_ns;
}

static void uop_clear(void *ctx, unsigned r)
{
        (void)ctx;
        (void)r;
}

static int uop_lower(void *ctx, unsigned d)
{
        struct agentd *a = ctx;

        return d < a->nudom ? mpi_pstate_uncore_lower(&a->udom[d].h) : -EINVAL;
}

static int uop_raise(void *ctx, unsigned d)
{
        struct agentd *a = ctx;

        return d < a->nudom ? mpi_pstate_uncore_raise(&a->udom[d].h) : -EINVAL;
}

/* The uncore domain of each cpufreq domain: the one whose CPUs hold it. */
static int map_domains(struct agentd *a)
{
        a->dom2u = malloc(sizeof(int) * (a->ndom ? a->ndom : 1));
        if (!a->dom2u)
                return -ENOMEM;
        for (unsigned d = 0; d < a->ndom; d++) {
                a->dom2u[d] = -1;
                for (unsigned u = 0; u < a->nudom; u++) {
                        cpu_set_t x;

                        CPU_AND(&x, &a->dom[d].related, &a->udom[u].d->cpus);
                        if (CPU_COUNT(&x) > 0 && a->udom[u].status == AGENTD_DOM_MANAGED)
                                a->dom2u[d] = (int)u;
                }
        }
        return 0;
}

int mpi_pstate_agentd_uncore_core_setup(struct agentd *a)
{
        /* the core clock's own time base, so both cores' deadlines compare */
        const struct mpi_pstate_agent_ops ops = {uop_check, uop_check, uop_unmark,      uop_clear,
                                                 uop_lower, uop_raise, a->core.ops.now, a};
        bool any = false;
        int rc;

        for (unsigned u = 0; u < a->nudom; u++)
                any = any || a->udom[u].status == AGENTD_DOM_MANAGED;
        if (!any)
                return 0;
        rc = map_domains(a);
        if (!rc)
                rc = mpi_pstate_agent_init(&a->ucore, a->seg.nslots, a->nudom, a->scan_ns, &ops);
        if (rc)
                return rc;
        a->uobs = calloc(a->seg.nslots ? a->seg.nslots : 1, sizeof(*a->uobs));
        if (!a->uobs)
                return -ENOMEM;
        for (unsigned u = 0; u < a->nudom; u++)
                a->ucore.domains[u].usable = a->udom[u].status == AGENTD_DOM_MANAGED;
        a->ucore_on = true;
        return 0;
}

void mpi_pstate_agentd_uncore_set_rank(struct agentd *a, unsigned r, const uint64_t *mask)
{
        uint64_t umask[MPI_PSTATE_AGENT_MASK_WORDS] = {0};

        if (!a->ucore_on)
                return;
        for (unsigned d = 0; d < a->ndom; d++)
                if (((mask[d / 64] >> (d % 64)) & 1u) && a->dom2u[d] >= 0)
                        umask[a->dom2u[d] / 64] |= UINT64_C(1) << (a->dom2u[d] % 64);
        mpi_pstate_agent_set_domains(&a->ucore, r, umask);
}

void mpi_pstate_agentd_uncore_obs(struct agentd *a, unsigned i, uint64_t since_ns)
{
        struct mpi_pstate_agent_obs *u;
        uint64_t dl;

        if (!a->ucore_on)
                return;
        u = &a->uobs[i];
        *u = a->obs[i];
        /* A hybrid rank's wait on one core leaves its other threads computing
         * on the package: not a whole-package wait. */
        if (u->one_domain)
                u->since = 0;
        u->one_domain = 0;
        if (!u->since)
                return;
        dl = since_ns + a->o.uncore_threshold_us * 1000u;
        if (dl < since_ns)
                dl = UINT64_MAX;
        if (dl > u->deadline_ns)
                u->deadline_ns = dl;
}

void mpi_pstate_agentd_uncore_finish(struct agentd *a)
{
        if (a->ucore_on)
                mpi_pstate_agent_raise_all(&a->ucore, 0);
        for (unsigned i = 0; i < a->nudom; i++) {
                struct agentd_uncore *u = &a->udom[i];
                char err[256] = "";

                if (!u->saved) {
                        mpi_pstate_uncore_close(&u->h);
                        continue;
                }
                u->restore_rc = put_back(a, u, err, sizeof(err));
                mpi_pstate_uncore_close(&u->h);
                if (u->restore_rc < 0) {
                        a->restore_failed++;
                        mpi_pstate_agentd_log(LOG_ERR,
                                              "uncore %s: restore failed: %s (the record stays "
                                              "for the backstop)",
                                              u->d->name, err[0] ? err : strerror(-u->restore_rc));
                } else {
                        a->restored += u->restore_rc == 1;
                        u->saved = false;
                }
        }
}

void mpi_pstate_agentd_uncore_free(struct agentd *a)
{
        if (a->ucore_on)
                mpi_pstate_agent_free(&a->ucore);
        a->ucore_on = false;
        free(a->uobs);
        free(a->udom);
        free(a->unode);
        free(a->dom2u);
        a->uobs = NULL;
        a->udom = NULL;
        a->unode = NULL;
        a->dom2u = NULL;
        a->nudom = 0;
}
