/* SPDX-License-Identifier: BSD-3-Clause */
/* The decision core's side effects (agent/agent.h's ops table): marking a
 * rank's slot before its domain goes down and clearing it after, lowering
 * and raising a cpufreq domain through its kept handle, the clock; and
 * setting the core up over the domains the agent manages.  agent.c decides,
 * this file only carries its decisions out. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#include "agentd.h"
#include "safeio.h"

static struct mpi_pstate_slot *slot_of(struct agentd *a, unsigned r)
{
        return a->seg_lost ? NULL : mpi_pstate_slot_at(&a->seg, r);
}

static int op_mark(void *ctx, unsigned r, uint64_t since)
{
        struct mpi_pstate_slot *s = slot_of(ctx, r);

        return s ? mpi_pstate_slot_agent_lower(s, since) : 0;
}

static int op_still(void *ctx, unsigned r, uint64_t since)
{
        struct mpi_pstate_slot *s = slot_of(ctx, r);

        return s ? mpi_pstate_slot_agent_still_waiting(s, since) : 0;
}

static void op_unmark(void *ctx, unsigned r, uint64_t down_ns)
{
        struct mpi_pstate_slot *s = slot_of(ctx, r);

        if (s)
                mpi_pstate_slot_agent_raise(s, down_ns);
}

static void op_clear(void *ctx, unsigned r)
{
        struct mpi_pstate_slot *s = slot_of(ctx, r);

        if (s)
                atomic_store_explicit(&s->clocked_down, 0, memory_order_release);
}

/* Said once: the core leaves a gone domain alone from then on. */
static int said_gone(struct agentd *a, unsigned d, int rc)
{
        if (rc == -ENODEV && !a->dom[d].gone_logged) {
                a->dom[d].gone_logged = true;
                mpi_pstate_agentd_log(LOG_WARNING,
                                      "%s: its files were removed under the step (the cpufreq "
                                      "driver was re-registered): left alone from now on",
                                      a->dom[d].name);
        }
        return rc;
}

static int op_lower(void *ctx, unsigned d)
{
        struct agentd *a = ctx;

        return d < a->ndom ? said_gone(a, d, mpi_pstate_cpufreq_domain_lower(&a->dom[d].h))
                           : -EINVAL;
}

static int op_raise(void *ctx, unsigned d)
{
        struct agentd *a = ctx;

        return d < a->ndom ? said_gone(a, d, mpi_pstate_cpufreq_domain_raise(&a->dom[d].h))
                           : -EINVAL;
}

static uint64_t op_now(void *ctx)
{
        (void)ctx;
        return mpi_pstate_agentd_mono_ns();
}

void mpi_pstate_agentd_set_rank_domains(struct agentd *a, unsigned i, const uint64_t *mask)
{
        mpi_pstate_agent_set_domains(&a->core, i, mask);
        mpi_pstate_agentd_uncore_set_rank(a, i, mask);
}

/* A domain whose CPUs are all hardware threads of one core (sysfs
 * thread_siblings_list of its first CPU); a one-CPU domain is one core's
 * when the file cannot be read. */
static bool domain_per_core(const struct agentd *a, const struct agentd_domain *d)
{
        char path[512], buf[256];
        cpu_set_t sib, both;
        int first = -1;

        for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
                if (CPU_ISSET(c, &d->related))
                        first = c;
        if (first < 0)
                return false;
        snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%d/topology/thread_siblings_list",
                 a->o.sysroot ? a->o.sysroot : "/sys", first);
        if (mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0) < 0 ||
            mpi_pstate_cpufreq_parse_cpulist(buf, &sib) != 0)
                return CPU_COUNT(&d->related) == 1;
        CPU_AND(&both, &d->related, &sib);
        return CPU_EQUAL(&both, &d->related);
}

int mpi_pstate_agentd_core_setup(struct agentd *a)
{
        const struct mpi_pstate_agent_ops ops = {op_mark,  op_still, op_unmark, op_clear,
                                                 op_lower, op_raise, op_now,    a};
        int rc =
            mpi_pstate_agent_init(&a->core, a->seg.nslots, a->ndom ? a->ndom : 1, a->scan_ns, &ops);

        if (rc)
                return rc;
        for (unsigned d = 0; d < a->core.ndomains; d++)
                a->core.domains[d].usable = d < a->ndom && a->dom[d].status == AGENTD_DOM_MANAGED;
        for (unsigned d = 0; d < a->ndom; d++)
                a->dom[d].per_core = domain_per_core(a, &a->dom[d]);
        return mpi_pstate_agentd_uncore_core_setup(a);
}
