/* SPDX-License-Identifier: BSD-3-Clause */
/* The segment the ranks write, as the agent reads it: mapping it with the
 * creator's slot count, each slot's identity from a validated copy
 * (mpi_pstate_slot_snapshot, taken when the slot's state or pid changes
 * and once a second), the few words read per scan (state, pid,
 * wait_since), the announced waits, and the observations the decision
 * cores act on.  Everything here is written by the job's user. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentd.h"
#include "safeio.h"

#define NS_PER_S UINT64_C(1000000000)
#define REFRESH_NS NS_PER_S /* re-validate every slot's identity */

static uint64_t tsc_now(void)
{
#if defined(MPI_PSTATE_HAVE_COUNTER)
        return mpi_pstate_slot_counter();
#else
        return 0;
#endif
}

int mpi_pstate_agentd_segment_open(struct agentd *a, char *err, size_t errlen)
{
        uid_t owner = a->o.uid;
        int rc;

        a->watch.epfd = a->watch.stopfd = -1;
        if (a->o.create) {
                rc = mpi_pstate_slot_create_segment(a->o.shm, a->o.create, a->o.uid, a->o.gid);
                if (rc) {
                        snprintf(err, errlen, "creating the segment %s: %s", a->o.shm,
                                 strerror(-rc));
                        return rc;
                }
                a->created = true;
                if (owner == (uid_t)-1)
                        owner = geteuid();
        }
        /* Whose processes the ranks are: fixed now, before the agent
         * leaves root. */
        a->rank_uid = owner == (uid_t)-1 ? getuid() : owner;
        /* The creator's slot count when known: the user may rewrite the
         * header between the plugin's fchown and this mapping, and what we
         * allocate and record must not follow. */
        rc = mpi_pstate_slot_map_segment_n(a->o.shm, 1, owner,
                                           a->o.nslots ? a->o.nslots : a->o.create, &a->seg);
        if (rc) {
                snprintf(err, errlen, "mapping the segment %s: %s", a->o.shm,
                         rc == -EPROTO ? "not a segment of this version, or not the slot count "
                                         "it was made with"
                                       : strerror(-rc));
                goto fail;
        }
        a->slots = calloc(a->seg.nslots, sizeof(*a->slots));
        a->obs = calloc(a->seg.nslots, sizeof(*a->obs));
        a->copy = malloc(sizeof(*a->copy));
        a->ann = calloc((a->seg.nslots + 63) / 64, sizeof(*a->ann));
        if (!a->slots || !a->obs || !a->copy || !a->ann) {
                snprintf(err, errlen, "out of memory for %u slots", a->seg.nslots);
                rc = -ENOMEM;
                goto fail;
        }
        for (unsigned i = 0; i < a->seg.nslots; i++)
                a->slots[i].pidfd = -1;
        a->watch.pidfd_ok = true;
        a->watch.slots = a->slots;
        a->watch.nslots = a->seg.nslots;
        a->watch.hdr = a->seg.hdr;
        return 0;
fail:
        if (a->created)
                unlink(a->o.shm);
        a->created = false;
        return rc;
}

static void slot_mask(const struct agentd *a, const struct agentd_slot *si, uint64_t *mask)
{
        bool any = false;

        memset(mask, 0, MPI_PSTATE_AGENT_MASK_WORDS * sizeof(uint64_t));
        if (!a->node || si->dead)
                return;
        for (unsigned w = 0; w < MPI_PSTATE_SLOT_CPUSET_WORDS; w++) {
                uint64_t m = si->cpuset[w];

                while (m) {
                        unsigned cpu = w * 64u + (unsigned)__builtin_ctzll(m);
                        int pi, d;

                        m &= m - 1;
                        if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &a->o.cpus))
                                continue;
                        pi = a->node->cpu_policy[cpu];
                        d = pi >= 0 ? a->pol2dom[pi] : -1;
                        if (d < 0)
                                continue;
                        mask[d / 64] |= UINT64_C(1) << (d % 64);
                        any = true;
                }
        }
        if (!any && si->cpu >= 0 && si->cpu < CPU_SETSIZE && CPU_ISSET(si->cpu, &a->o.cpus)) {
                int pi = a->node->cpu_policy[si->cpu], d = pi >= 0 ? a->pol2dom[pi] : -1;

                if (d >= 0)
                        mask[d / 64] |= UINT64_C(1) << (d % 64);
        }
}

void mpi_pstate_agentd_slot_refresh(struct agentd *a, unsigned i, const struct mpi_pstate_slot *s,
                                    uint32_t state, int32_t pid, uint64_t now)
{
        struct agentd_slot *si = &a->slots[i];
        const struct mpi_pstate_slot *c = a->copy;
        uint64_t mask[MPI_PSTATE_AGENT_MASK_WORDS];
        int rc;

        si->refreshed_ns = now;
        si->state = state; /* even when invalid: refresh again on a change only */
        if (pid != si->pid)
                mpi_pstate_agentd_slot_watch(a, i, pid);
        /* A slot nobody claimed is not worth a 16 KiB copy every second. */
        if (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) == 0 && !si->valid)
                rc = -ENOENT;
        else
                rc = mpi_pstate_slot_snapshot(s, a->copy);
        if (rc) {
                if (rc == -EPROTO && !si->bad_logged) {
                        mpi_pstate_agentd_log(LOG_WARNING, "slot %u: invalid content, ignored", i);
                        si->bad_logged = true;
                }
                si->valid = false;
                memset(mask, 0, sizeof(mask));
                mpi_pstate_agentd_set_rank_domains(a, i, mask);
                return;
        }
        si->valid = true;
        si->seen = si->seen || si->pid > 0;
        si->state = atomic_load_explicit(&c->state, memory_order_relaxed);
        si->rank = c->rank;
        si->cpu = c->cpu;
        si->clock = c->clock;
        si->mode = c->mode;
        if (c->clock == MPI_PSTATE_CLOCK_TSC)
                si->thr_ns = mpi_pstate_agent_ticks_len_ns(c->threshold_ticks, a->tsc_rate);
        else
                si->thr_ns = c->clock == MPI_PSTATE_CLOCK_MONOTONIC ? c->threshold_ticks : 0;
        memcpy(si->cpuset, c->cpuset, sizeof(si->cpuset));
        si->long_calls = atomic_load_explicit(&c->long_calls, memory_order_relaxed);
        si->long_ns = atomic_load_explicit(&c->long_ns, memory_order_relaxed);
        si->wakeups = atomic_load_explicit(&c->wakeups, memory_order_relaxed);
        si->slot_down_ns = atomic_load_explicit(&c->down_ns, memory_order_relaxed);
        si->slot_transitions = atomic_load_explicit(&c->transitions, memory_order_relaxed);
        si->announced = atomic_load_explicit(&c->announced, memory_order_relaxed);
        si->announced_short = atomic_load_explicit(&c->announced_short, memory_order_relaxed);
        slot_mask(a, si, mask);
        si->ndoms = 0;
        for (unsigned w = 0; w < MPI_PSTATE_AGENT_MASK_WORDS; w++) {
                si->ever_mask[w] |= mask[w];
                si->ndoms += (unsigned)__builtin_popcountll(mask[w]);
        }
        mpi_pstate_agentd_set_rank_domains(a, i, mask);
}

/* Hybrid ranks (docs/agent.md): the one domain a wait concerns, or -1 for
 * the rank's whole block.  Only the waiting thread's core goes down when
 * the rank's block spans several domains and that CPU's domain is one
 * core's.  cpu comes from the user's slot: it counts only inside the
 * rank's validated CPU set and the step's CPUs. */
static int wait_domain(const struct agentd *a, const struct agentd_slot *si, int32_t cpu)
{
        int pi, d;

        if (si->ndoms < 2 || !a->node || cpu < 0 || cpu >= CPU_SETSIZE ||
            cpu >= (int32_t)(64 * MPI_PSTATE_SLOT_CPUSET_WORDS) ||
            !((si->cpuset[cpu / 64] >> (cpu % 64)) & 1u) || !CPU_ISSET(cpu, &a->o.cpus))
                return -1;
        pi = a->node->cpu_policy[cpu];
        d = pi >= 0 ? a->pol2dom[pi] : -1;
        return d >= 0 && (unsigned)d < a->ndom && a->dom[d].per_core ? d : -1;
}

/* Reads slot i into its observation; returns when its wait began (agent
 * clock), 0 when it does not wait. */
static uint64_t observe(struct agentd *a, unsigned i, uint64_t now, uint64_t ref_tsc,
                        uint64_t ref_ns)
{
        struct mpi_pstate_slot *s = mpi_pstate_slot_at(&a->seg, i);
        struct agentd_slot *si = &a->slots[i];
        struct mpi_pstate_agent_obs *o = &a->obs[i];
        uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
        int32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        uint64_t since, since_ns, thr;

        if (state != si->state || pid != si->pid || now - si->refreshed_ns >= REFRESH_NS)
                mpi_pstate_agentd_slot_refresh(a, i, s, state, pid, now);
        mpi_pstate_agentd_liveness(a, i, now);
        memset(o, 0, sizeof(*o));
        if (!si->valid || si->dead || si->pid <= 0 || si->state != MPI_PSTATE_SLOT_RUNNING)
                return 0;
        o->live = 1;
        o->lowerable = !a->o.profile && si->mode == MPI_PSTATE_SLOT_MODE_ON &&
                       si->clock != MPI_PSTATE_CLOCK_NONE;
        since = atomic_load_explicit(&s->wait_since, memory_order_acquire);
        if (!since)
                return 0;
        o->since = since;
        {
                int d =
                    wait_domain(a, si, atomic_load_explicit(&s->wait_cpu, memory_order_relaxed));

                if (d >= 0) {
                        o->one_domain = 1;
                        o->domain = (unsigned)d;
                }
        }
        since_ns = si->clock == MPI_PSTATE_CLOCK_TSC
                       ? mpi_pstate_agent_ticks_to_ns(since, ref_tsc, ref_ns, a->tsc_rate)
                       : since;
        /* Never before the rank's own threshold: a rank leaving a shorter
         * call does not look at its flag, so it would not wake us. */
        thr = si->thr_ns > a->thr_ns ? si->thr_ns : a->thr_ns;
        o->deadline_ns = since_ns + thr < since_ns ? UINT64_MAX : since_ns + thr;
        return since_ns;
}

static void scan_one(struct agentd *a, unsigned i, uint64_t now, uint64_t ref_tsc, uint64_t ref_ns)
{
        uint64_t since_ns = observe(a, i, now, ref_tsc, ref_ns);

        if (a->ucore_on)
                mpi_pstate_agentd_uncore_obs(a, i, since_ns);
}

/* A full scan reads every slot; the wake-ups in between (a deadline, a
 * rank leaving a clocked-down call, a death) re-read only the ranks known
 * to wait, which hold every deadline and every mark.  The others keep their
 * last observation: a stale "waiting" is harmless, because a lowering marks
 * each rank first and the mark re-checks the wait (common/slot.h).  Every
 * slot is in its own page: on a virtual machine the TLB misses, not the
 * loads, are the cost, so the next slots are prefetched. */
void mpi_pstate_agentd_scan(struct agentd *a, uint64_t now, bool full)
{
        uint64_t ref_tsc = tsc_now(), ref_ns = mpi_pstate_agentd_mono_ns();
        unsigned n = a->seg.nslots;

        for (unsigned i = 0; i < n; i++) {
                if (!full && !a->obs[i].since && !a->slots[i].dead_pending &&
                    !((a->ann[i / 64] >> (i % 64)) & 1u))
                        continue;
                if (full && i + 4 < n) {
                        const struct mpi_pstate_slot *ahead = mpi_pstate_slot_at(&a->seg, i + 4);

                        __builtin_prefetch(&ahead->state);
                        __builtin_prefetch(&ahead->wait_since);
                }
                scan_one(a, i, now, ref_tsc, ref_ns);
        }
}

/* The waits announced since the last pass (common/slot.h, "Reaction"):
 * each word of the header's map taken with an exchange, only the words of
 * this segment's slots.  The map is the user's: a bit set for a slot that
 * is not waiting costs one read of that slot, and the wake-ups that carry
 * them are throttled like any other. */
void mpi_pstate_agentd_take_announced(struct agentd *a)
{
        struct mpi_pstate_seg_header *hdr = a->seg.hdr;
        unsigned words = (a->seg.nslots + 63) / 64;

        for (unsigned w = 0; w < words; w++) {
                a->ann[w] = 0;
                if (!atomic_load_explicit(&hdr->announce[w], memory_order_relaxed))
                        continue;
                a->ann[w] = atomic_exchange_explicit(&hdr->announce[w], 0, memory_order_acquire);
                a->announced += (uint64_t)__builtin_popcountll(a->ann[w]);
        }
}

bool mpi_pstate_agentd_announce_pending(const struct agentd *a)
{
        const struct mpi_pstate_seg_header *hdr = a->seg.hdr;
        unsigned words = (a->seg.nslots + 63) / 64;

        for (unsigned w = 0; w < words; w++)
                if (atomic_load(&hdr->announce[w]))
                        return true;
        return false;
}

bool mpi_pstate_agentd_all_done(const struct agentd *a)
{
        for (unsigned i = 0; i < a->seg.nslots; i++) {
                const struct agentd_slot *si = &a->slots[i];

                if (!si->seen)
                        return false;
                if (si->dead)
                        continue;
                if (si->state != MPI_PSTATE_SLOT_FINALIZED &&
                    si->state != MPI_PSTATE_SLOT_ABORTED && si->state != MPI_PSTATE_SLOT_EXITED)
                        return false;
        }
        return a->seg.nslots > 0;
}
