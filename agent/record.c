/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent record: what the agent did and measured, one JSON document per
 * step per node, written atomically at exit (format: docs/agent.md).  The
 * node epilog reads it into the node record. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agentd.h"
#include "options.h"
#include "json.h"
#include "safeio.h"

/* 128 bits: a step's sums over 16384 slots of up to ten years each pass
 * 2^64 ns (5.2e21), and their seconds still fit 64 bits. */
static void put_secs(struct mpi_pstate_json *b, unsigned __int128 ns)
{
        mpi_pstate_json_put(b, "%" PRIu64 ".%06" PRIu64, (uint64_t)(ns / 1000000000u),
                            (uint64_t)(ns % 1000000000u) / 1000u);
}

static void put_joules(struct mpi_pstate_json *b, uint64_t uj)
{
        mpi_pstate_json_put(b, "%" PRIu64 ".%06" PRIu64, uj / 1000000u, uj % 1000000u);
}

static void key_secs(struct mpi_pstate_json *b, const char *key, unsigned __int128 ns)
{
        mpi_pstate_json_key(b, key);
        put_secs(b, ns);
}

/* Energy in joules, null when not measured. */
static void key_joules(struct mpi_pstate_json *b, const char *key, bool have, uint64_t uj)
{
        mpi_pstate_json_key(b, key);
        if (have)
                put_joules(b, uj);
        else
                mpi_pstate_json_put(b, "null");
}

static void key_cpus(struct mpi_pstate_json *b, const char *key, const cpu_set_t *set)
{
        mpi_pstate_json_key(b, key);
        mpi_pstate_json_put(b, "\"");
        mpi_pstate_json_cpulist(b, set);
        mpi_pstate_json_put(b, "\"");
}

static void key_hist(struct mpi_pstate_json *b, const char *key,
                     const struct mpi_pstate_agent_hist *h)
{
        mpi_pstate_json_key(b, key);
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_member_u64(b, "count", h->count);
        mpi_pstate_json_member_u64(b, "sum", h->sum);
        mpi_pstate_json_member_u64(b, "max", h->max);
        mpi_pstate_json_member_u64(b, "p50", mpi_pstate_agent_hist_quantile(h, 500));
        mpi_pstate_json_member_u64(b, "p99", mpi_pstate_agent_hist_quantile(h, 990));
        mpi_pstate_json_key(b, "log2");
        mpi_pstate_json_open(b, '[', NULL);
        for (unsigned i = 0; i < MPI_PSTATE_AGENT_HIST_BUCKETS; i++) {
                if (!h->bucket[i])
                        continue;
                mpi_pstate_json_elem(b);
                mpi_pstate_json_open(b, '[', NULL);
                mpi_pstate_json_elem(b);
                mpi_pstate_json_put(b, "%u", i);
                mpi_pstate_json_elem(b);
                mpi_pstate_json_put(b, "%" PRIu64, h->bucket[i]);
                mpi_pstate_json_close(b);
        }
        mpi_pstate_json_close(b);
        mpi_pstate_json_close(b);
}

/* The slot's rank ever belonged to domain d. */
static bool in_domain(const struct agentd_slot *si, unsigned d)
{
        return (si->ever_mask[d / 64] >> (d % 64)) & 1u;
}

static const char *state_name(const struct agentd_slot *si)
{
        static const char *const names[] = {"free",    "attached", "running", "finalized",
                                            "aborted", "exited",   "disabled"};

        if (!si->seen)
                return "free";
        if (!si->valid)
                return "invalid";
        return si->state < sizeof(names) / sizeof(names[0]) ? names[si->state] : "invalid";
}

static const char *overall_mech(const struct agentd *a)
{
        const char *m = NULL;

        for (unsigned d = 0; d < a->ndom; d++) {
                const char *x;

                if (a->dom[d].status != AGENTD_DOM_MANAGED)
                        continue;
                x = mpi_pstate_cpufreq_mech_name(a->dom[d].mech);
                if (m && strcmp(m, x) != 0)
                        return "mixed";
                m = x;
        }
        return m ? m : "none";
}

/* The slots that ever belonged to domain d. */
static void key_domain_ranks(struct mpi_pstate_json *b, const struct agentd *a, unsigned d)
{
        mpi_pstate_json_key(b, "ranks");
        mpi_pstate_json_open(b, '[', NULL);
        for (unsigned r = 0; r < a->seg.nslots; r++) {
                if (in_domain(&a->slots[r], d)) {
                        mpi_pstate_json_elem(b);
                        mpi_pstate_json_put(b, "%u", r);
                }
        }
        mpi_pstate_json_close(b);
}

/* A domain's restore at exit in the record (docs/agent.md): the result of
 * put_back() (hw.c) or of the uncore's restore. */
static const char *restore_word(int rc)
{
        return rc == -ESTALE ? "stale" : rc < 0 ? "failed" : rc == 1 ? "restored" : "none";
}

static void put_domain(struct mpi_pstate_json *b, const struct agentd *a, unsigned d)
{
        const struct agentd_domain *dm = &a->dom[d];
        const struct mpi_pstate_agent_domain *cd = &a->core.domains[d];

        mpi_pstate_json_elem(b);
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_member_str(b, "policy", dm->name);
        key_cpus(b, "cpus", &dm->related);
        mpi_pstate_json_member_bool(b, "shared", CPU_COUNT(&dm->related) > 1);
        mpi_pstate_json_member_str(b, "status", mpi_pstate_agentd_dom_status_name(dm->status));
        mpi_pstate_json_member_str(b, "reason", dm->why);
        if (dm->status == AGENTD_DOM_MANAGED) {
                mpi_pstate_json_member_str(b, "mechanism", mpi_pstate_cpufreq_mech_name(dm->mech));
                mpi_pstate_json_member_u64(b, "low_khz", dm->low_khz);
                mpi_pstate_json_member_str(b, "low_src", dm->low_src ? dm->low_src : "min");
                mpi_pstate_json_member_u64(b, "high_khz", dm->high_khz);
        }
        key_domain_ranks(b, a, d);
        mpi_pstate_json_member_u64(b, "transitions", cd->transitions);
        key_secs(b, "down_s", cd->down_ns);
        mpi_pstate_json_member_u64(b, "aborted", cd->aborted);
        mpi_pstate_json_member_u64(b, "write_errors", cd->write_errors);
        mpi_pstate_json_member_bool(b, "disabled", cd->disabled);
        mpi_pstate_json_member_bool(b, "gone", cd->gone);
        mpi_pstate_json_member_str(b, "restore", restore_word(dm->restore_rc));
        mpi_pstate_json_close(b);
}

static void put_uncore(struct mpi_pstate_json *b, const struct agentd *a, unsigned u)
{
        const struct agentd_uncore *du = &a->udom[u];
        const struct mpi_pstate_agent_domain *cd = a->ucore_on ? &a->ucore.domains[u] : NULL;

        mpi_pstate_json_elem(b);
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_member_str(b, "domain", du->d->name);
        key_cpus(b, "cpus", &du->d->cpus);
        mpi_pstate_json_member_str(b, "status", mpi_pstate_agentd_dom_status_name(du->status));
        mpi_pstate_json_member_str(b, "reason", du->why);
        if (du->status == AGENTD_DOM_MANAGED) {
                mpi_pstate_json_member_u64(b, "low_khz", du->h.low_khz);
                mpi_pstate_json_member_u64(b, "high_khz", du->h.high_khz);
        }
        mpi_pstate_json_member_u64(b, "transitions", cd ? cd->transitions : 0);
        key_secs(b, "down_s", cd ? cd->down_ns : 0);
        mpi_pstate_json_member_u64(b, "aborted", cd ? cd->aborted : 0);
        mpi_pstate_json_member_u64(b, "write_errors", cd ? cd->write_errors : 0);
        mpi_pstate_json_member_str(b, "restore", restore_word(du->restore_rc));
        mpi_pstate_json_close(b);
}

/* Present only when the lever was asked for, or a profile run found
 * uncore domains: a record without it reads as before. */
static void put_uncores(struct mpi_pstate_json *b, const struct agentd *a)
{
        if (!a->o.uncore && !a->nudom)
                return;
        mpi_pstate_json_key(b, "uncore");
        mpi_pstate_json_open(b, '[', "    ");
        for (unsigned u = 0; u < a->nudom; u++)
                put_uncore(b, a, u);
        mpi_pstate_json_close(b);
}

static void put_domains(struct mpi_pstate_json *b, const struct agentd *a)
{
        mpi_pstate_json_key(b, "domains");
        mpi_pstate_json_open(b, '[', "    ");
        for (unsigned d = 0; d < a->ndom; d++)
                put_domain(b, a, d);
        mpi_pstate_json_close(b);
}

/* What the rank itself reported in its slot (untrusted figures). */
static void key_reported(struct mpi_pstate_json *b, const struct agentd_slot *si)
{
        mpi_pstate_json_key(b, "reported");
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_member_u64(b, "long_calls", si->long_calls);
        key_secs(b, "long_s", si->long_ns);
        mpi_pstate_json_member_u64(b, "wakeups", si->wakeups);
        key_secs(b, "down_s", si->slot_down_ns);
        mpi_pstate_json_member_u64(b, "transitions", si->slot_transitions);
        mpi_pstate_json_member_u64(b, "announced", si->announced);
        mpi_pstate_json_member_u64(b, "announced_short", si->announced_short);
        mpi_pstate_json_close(b);
}

static void put_rank(struct mpi_pstate_json *b, const struct agentd *a, unsigned r)
{
        const struct agentd_slot *si = &a->slots[r];
        const struct mpi_pstate_agent_rank *cr = &a->core.ranks[r];

        mpi_pstate_json_elem(b);
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_member_u64(b, "slot", r);
        mpi_pstate_json_key(b, "rank");
        mpi_pstate_json_put(b, "%d", (int)si->rank);
        mpi_pstate_json_key(b, "pid");
        mpi_pstate_json_put(b, "%d", (int)si->pid);
        mpi_pstate_json_key(b, "cpu");
        mpi_pstate_json_put(b, "%d", si->cpu);
        mpi_pstate_json_member_str(b, "state", state_name(si));
        mpi_pstate_json_member_bool(b, "alive", !si->dead);
        mpi_pstate_json_key(b, "domains");
        mpi_pstate_json_open(b, '[', NULL);
        for (unsigned d = 0; d < a->ndom; d++) {
                if (in_domain(si, d)) {
                        mpi_pstate_json_elem(b);
                        mpi_pstate_json_str(b, a->dom[d].name);
                }
        }
        mpi_pstate_json_close(b);
        mpi_pstate_json_member_u64(b, "transitions", cr->transitions);
        key_secs(b, "down_s", cr->down_ns);
        mpi_pstate_json_member_u64(b, "drops", cr->drops);
        key_hist(b, "drop_late_ns", &cr->drop_late_ns);
        key_hist(b, "restore_ns", &cr->restore_ns);
        key_reported(b, si);
        mpi_pstate_json_close(b);
}

static void put_ranks(struct mpi_pstate_json *b, const struct agentd *a)
{
        mpi_pstate_json_key(b, "ranks");
        mpi_pstate_json_open(b, '[', "    ");
        for (unsigned r = 0; r < a->seg.nslots; r++)
                if (a->slots[r].seen)
                        put_rank(b, a, r);
        mpi_pstate_json_close(b);
}

/* hwmon: one node figure ("joules", what the epilog reads when there is no
 * package_j) and the channels it adds up. */
static void put_hwmon(struct mpi_pstate_json *b, const struct agentd *a)
{
        const struct mpi_pstate_hwmon *h = a->hwmon;
        bool ok = a->rapl_status == MPI_PSTATE_RAPL_OK && h && h->n > 0;

        mpi_pstate_json_member_str(
            b, "kind", h && h->kind == MPI_PSTATE_HWMON_POWER ? "power_meter" : "energy_counter");
        key_joules(b, "joules", ok, ok ? mpi_pstate_hwmon_total_uj(h) : 0);
        mpi_pstate_json_key(b, "channels");
        mpi_pstate_json_open(b, '[', NULL);
        for (unsigned i = 0; ok && i < h->n; i++) {
                mpi_pstate_json_elem(b);
                mpi_pstate_json_open(b, '{', NULL);
                mpi_pstate_json_member_str(b, "label", h->ch[i].label);
                key_joules(b, "j", true, h->ch[i].total_uj);
                mpi_pstate_json_member_u64(b, "resets", h->ch[i].resets);
                mpi_pstate_json_close(b);
        }
        mpi_pstate_json_close(b);
}

static const char *rapl_key(int k)
{
        return k == MPI_PSTATE_RAPL_PACKAGE ? "package_j" : "dram_j";
}

/* One entry per socket: its zones' energy by kind. */
static void put_sockets(struct mpi_pstate_json *b, const struct mpi_pstate_rapl_sampler *s, bool ok)
{
        int sockets[MPI_PSTATE_RAPL_MAX_ZONES];
        unsigned nsock = 0;

        for (unsigned i = 0; ok && i < s->n; i++) {
                bool known = false;

                for (unsigned j = 0; j < nsock; j++)
                        known = known || sockets[j] == s->c[i].socket;
                if (!known)
                        sockets[nsock++] = s->c[i].socket;
        }
        mpi_pstate_json_key(b, "sockets");
        mpi_pstate_json_open(b, '[', NULL);
        for (unsigned j = 0; j < nsock; j++) {
                mpi_pstate_json_elem(b);
                mpi_pstate_json_open(b, '{', NULL);
                mpi_pstate_json_key(b, "socket");
                mpi_pstate_json_put(b, "%d", sockets[j]);
                for (int k = MPI_PSTATE_RAPL_PACKAGE; k <= MPI_PSTATE_RAPL_DRAM; k++) {
                        uint64_t sum = 0;
                        bool have = false;

                        for (unsigned i = 0; i < s->n; i++)
                                if (s->c[i].socket == sockets[j] &&
                                    s->c[i].kind == (enum mpi_pstate_rapl_kind)k) {
                                        sum += s->c[i].total_uj;
                                        have = true;
                                }
                        key_joules(b, rapl_key(k), have, sum);
                }
                mpi_pstate_json_close(b);
        }
        mpi_pstate_json_close(b);
}

static void put_energy(struct mpi_pstate_json *b, const struct agentd *a)
{
        const struct mpi_pstate_rapl_sampler *s = &a->sampler;
        bool ok = a->rapl_status == MPI_PSTATE_RAPL_OK && s->n > 0;

        mpi_pstate_json_key(b, "energy");
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_member_str(b, "status", mpi_pstate_rapl_status_name(a->rapl_status));
        mpi_pstate_json_member_str(b, "source", mpi_pstate_energy_source_name(a->energy_src));
        mpi_pstate_json_member_u64(b, "samples", a->rapl_samples);
        key_secs(b, "interval_s", a->rapl_interval_ns);
        if (a->energy_src == MPI_PSTATE_ENERGY_HWMON) {
                put_hwmon(b, a);
        } else {
                for (int k = MPI_PSTATE_RAPL_PACKAGE; k <= MPI_PSTATE_RAPL_DRAM; k++) {
                        bool have = false;

                        for (unsigned i = 0; ok && i < s->n; i++)
                                have = have || s->c[i].kind == (enum mpi_pstate_rapl_kind)k;
                        key_joules(b, rapl_key(k), have,
                                   have ? mpi_pstate_rapl_sampler_total_uj(s, k) : 0);
                }
                put_sockets(b, s, ok);
        }
        mpi_pstate_json_close(b);
}

static void put_agent_counters(struct mpi_pstate_json *b, const struct agentd *a)
{
        const struct {
                const char *key;
                uint64_t v;
        } counts[] = {
            {"wakeups", a->wakeups},          {"futex_wakeups", a->woken},
            {"timeouts", a->timeouts},        {"rewaits", a->eagain},
            {"throttled", a->throttled},      {"lowers", a->core.stats.lowers},
            {"raises", a->core.stats.raises}, {"leaves_seen", a->core.stats.leaves_seen},
        };
        const struct {
                const char *key;
                uint64_t v;
        } budget[] = {
            {"budget_adjusts", a->budget.adjusts},
            {"full_scans", a->full_scans},
            {"capped", a->budget.capped},
            {"capped_ms", a->budget.capped_ns / 1000000u},
            {"capped_raises", a->budget.capped_raises},
            {"announced", a->announced},
            {"announce_offs", a->budget.announce_offs},
        };

        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
                mpi_pstate_json_member_u64(b, counts[i].key, counts[i].v);
        mpi_pstate_json_key(b, "rt_prio");
        mpi_pstate_json_put(b, "%d", a->o.rt_prio);
        mpi_pstate_json_member_u64(b, "timer_gap_final_us", a->budget.gap_ns / 1000u);
        mpi_pstate_json_member_u64(b, "timer_gap_max_us", a->budget.gap_max_ns / 1000u);
        mpi_pstate_json_key(b, "timer_cpu_us");
        mpi_pstate_json_put(b, "%.1f",
                            a->budget.timer_sum
                                ? (double)a->budget.cpu_sum / (double)a->budget.timer_sum / 1e3
                                : 0.0);
        for (size_t i = 0; i < sizeof(budget) / sizeof(budget[0]); i++)
                mpi_pstate_json_member_u64(b, budget[i].key, budget[i].v);
}

/* The agent's own cost: CPU time from getrusage, then its counters. */
static void put_agent(struct mpi_pstate_json *b, const struct agentd *a, uint64_t elapsed_ns)
{
        struct rusage ru;
        uint64_t user_ns, sys_ns;

        getrusage(RUSAGE_SELF, &ru);
        user_ns =
            (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u;
        sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u;
        mpi_pstate_json_key(b, "agent");
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_key(b, "pid");
        mpi_pstate_json_put(b, "%ld", (long)getpid());
        key_secs(b, "cpu_s", user_ns + sys_ns);
        key_secs(b, "user_s", user_ns);
        key_secs(b, "sys_s", sys_ns);
        mpi_pstate_json_key(b, "cpu_share");
        mpi_pstate_json_put(b, "%.6f",
                            elapsed_ns ? (double)(user_ns + sys_ns) / (double)elapsed_ns : 0.0);
        put_agent_counters(b, a);
        key_hist(b, "write_ns", &a->core.stats.write_ns);
        mpi_pstate_json_close(b);
}

int mpi_pstate_agentd_parent_dir(const char *path, char *dir, size_t len)
{
        const char *slash = strrchr(path, '/');

        if (!slash || slash == path || !slash[1] || strlen(slash + 1) >= 256 ||
            (size_t)(slash - path) >= len)
                return -EINVAL;
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
        return 0;
}

/* How far the agent's hardening went (harden.c): what a reader needs to
 * know that, on this node, an exploited agent could have written more. */
static void put_hardening(struct mpi_pstate_json *b, const struct agentd_hardening *h)
{
        mpi_pstate_json_key(b, "hardening");
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_member_str(b, "capabilities",
                                   h->caps_rc ? strerror(-h->caps_rc) : "dropped");
        mpi_pstate_json_member_str(b, "landlock", h->landlock[0] ? h->landlock : "not applied");
        mpi_pstate_json_key(b, "landlock_abi");
        mpi_pstate_json_put(b, "%d", h->landlock_abi);
        mpi_pstate_json_member_str(b, "seccomp", h->seccomp_rc ? strerror(-h->seccomp_rc) : "on");
        mpi_pstate_json_member_u64(b, "uid", h->uid);
        mpi_pstate_json_member_u64(b, "gid", h->gid);
        mpi_pstate_json_close(b);
}

/* b into the kept descriptor fd, from its start, the rest cut off; b
 * freed.  Not atomic (the agent cannot create files once it runs as its
 * own uid): nothing reads the file before the agent has exited, and a
 * reader takes an empty file for a missing one and refuses a cut one.  No
 * fsync: it is written as the step ends, while slurmstepd waits, and
 * nothing reads it after a crash of the node (the node epilog that would
 * never ran).  RLIMIT_FSIZE bounds what any write here can take of /run. */
static int write_json(int fd, struct mpi_pstate_json *b)
{
        size_t done = 0;
        int rc = -ENOMEM;

        if (b->failed)
                goto out;
        rc = fd < 0 ? -EBADF : ftruncate(fd, 0) != 0 ? -errno : 0;
        while (!rc && done < b->len) {
                ssize_t n = pwrite(fd, b->p + done, b->len - done, (off_t)done);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        rc = n < 0 ? -errno : -EIO;
                else
                        done += (size_t)n;
        }
out:
        free(b->p);
        return rc;
}

/* One of the record files, made empty (root's, mode 0644, in the record's
 * directory, created if missing) and kept open for the exit. */
static int open_one(int dfd, const char *name)
{
        int fd =
            openat(dfd, name, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);

        return fd < 0 ? -errno : fd;
}

int mpi_pstate_agentd_record_files_open(struct agentd *a)
{
        char dir[4096];
        int dfd, rc;

        a->rec_fd = a->sums_fd = -1;
        if (!a->o.record)
                return 0;
        if (mpi_pstate_agentd_parent_dir(a->o.record, dir, sizeof(dir)) != 0)
                return -EINVAL;
        dfd = mpi_pstate_safeio_open_dir(dir, 1, 0755);
        if (dfd < 0)
                return dfd;
        rc = a->rec_fd = open_one(dfd, strrchr(a->o.record, '/') + 1);
        if (rc >= 0)
                rc = a->sums_fd = open_one(dfd, "sums.json");
        close(dfd);
        return rc < 0 ? rc : 0;
}

/* What the agent was asked to do: its command line as it understood it. */
static void put_settings(struct mpi_pstate_json *b, const struct agentd *a)
{
        mpi_pstate_json_key(b, "settings");
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_member_u64(b, "threshold_us", a->thr_ns / 1000u);
        mpi_pstate_json_member_u64(b, "scan_interval_us", a->scan_ns / 1000u);
        mpi_pstate_json_member_u64(b, "cpu_budget_ppm", a->o.budget_ppm);
        mpi_pstate_json_member_u64(b, "cpu_cap_ppm", a->o.cap_ppm);
        if (a->o.low_khz == MPI_PSTATE_FREQ_EFFICIENT)
                mpi_pstate_json_member_str(b, "low", "efficient");
        else if (a->o.low_khz)
                mpi_pstate_json_member_u64(b, "low", a->o.low_khz);
        else
                mpi_pstate_json_member_str(b, "low", "min");
        mpi_pstate_json_member_u64(b, "knee_khz", a->knee_khz);
        mpi_pstate_json_member_bool(b, "uncore", a->o.uncore);
        mpi_pstate_json_member_u64(b, "uncore_threshold_us", a->o.uncore_threshold_us);
        mpi_pstate_json_member_str(b, "mechanism_requested",
                                   mpi_pstate_cpufreq_mech_name(a->o.mech));
        mpi_pstate_json_member_bool(b, "allow_governor", a->o.allow_governor);
        mpi_pstate_json_member_u64(b, "freq_min_khz", a->o.freq_min_khz);
        key_cpus(b, "cpus", &a->o.cpus);
        mpi_pstate_json_member_str(b, "segment", a->o.shm);
        mpi_pstate_json_member_u64(b, "slots", a->seg.nslots);
        mpi_pstate_json_member_bool(b, "created", a->created);
        mpi_pstate_json_close(b);
}

static void put_cpufreq(struct mpi_pstate_json *b, const struct agentd *a)
{
        mpi_pstate_json_key(b, "cpufreq");
        mpi_pstate_json_open(b, '{', NULL);
        mpi_pstate_json_member_str(b, "status", a->cpufreq_status);
        mpi_pstate_json_member_str(b, "error", a->cpufreq_err);
        mpi_pstate_json_member_str(b, "driver", a->node ? a->node->driver : "");
        mpi_pstate_json_member_str(b, "mechanism", overall_mech(a));
        mpi_pstate_json_close(b);
}

/* The record's first members: whose step, when, and why the agent ended. */
static void put_identity(struct mpi_pstate_json *b, const struct agentd *a, uint64_t elapsed)
{
        mpi_pstate_json_member_str(b, "format", AGENTD_RECORD_FORMAT);
        mpi_pstate_json_key(b, "version");
        mpi_pstate_json_put(b, "%d", AGENTD_RECORD_VERSION);
        mpi_pstate_json_member_str(b, "node", a->host);
        mpi_pstate_json_member_u64(b, "job", a->o.job);
        mpi_pstate_json_member_u64(b, "step", a->o.step);
        mpi_pstate_json_member_u64(b, "start_ns", a->start_real_ns);
        mpi_pstate_json_member_u64(b, "end_ns", a->end_real_ns);
        key_secs(b, "elapsed_s", elapsed);
        mpi_pstate_json_member_str(b, "exit_reason", a->exit_reason);
        mpi_pstate_json_member_str(b, "mode", a->o.profile ? "profile" : "on");
}

int mpi_pstate_agentd_record_write(struct agentd *a)
{
        struct mpi_pstate_json b = {0};
        uint64_t elapsed =
            a->end_real_ns > a->start_real_ns ? a->end_real_ns - a->start_real_ns : 0;

        if (!a->o.record)
                return 0;

        mpi_pstate_json_open(&b, '{', "  ");
        put_identity(&b, a, elapsed);
        put_settings(&b, a);
        put_cpufreq(&b, a);
        put_domains(&b, a);
        put_uncores(&b, a);
        put_ranks(&b, a);
        put_energy(&b, a);
        put_agent(&b, a, elapsed);
        put_hardening(&b, &a->hard);
        mpi_pstate_json_key(&b, "restore");
        mpi_pstate_json_open(&b, '{', NULL);
        mpi_pstate_json_member_u64(&b, "restored", a->restored);
        mpi_pstate_json_member_u64(&b, "failed", a->restore_failed);
        mpi_pstate_json_close(&b);
        mpi_pstate_json_close(&b);
        mpi_pstate_json_put(&b, "\n");
        return write_json(a->rec_fd, &b);
}

/* The step's totals over its slots, read once more now that the ranks
 * are gone; sums of seconds need 128 bits (put_secs()). */
struct step_sums {
        uint64_t ranks, invalid, transitions, step_wall;
        unsigned __int128 wall, mpi, wait, down, pwall, pmpi;
};

static void sum_slots(struct agentd *a, struct step_sums *s)
{
        for (unsigned r = 0; r < a->seg.nslots; r++) {
                struct mpi_pstate_slot_totals t;
                int rc = mpi_pstate_slot_snapshot(mpi_pstate_slot_at(&a->seg, r), a->copy);

                if (rc == -ENOENT)
                        continue;
                if (rc) {
                        s->invalid++;
                        continue;
                }
                mpi_pstate_slot_totals(a->copy, &t);
                s->ranks++;
                s->wall += t.wall_ns;
                s->mpi += t.mpi_ns;
                s->wait += t.wait_ns;
                s->down += a->core.ranks[r].down_ns;
                s->transitions += a->core.ranks[r].transitions;
                if (t.has_wall && t.wall_ns && t.has_mpi) {
                        s->pwall += t.wall_ns;
                        s->pmpi += t.mpi_ns;
                }
                if (t.wall_ns > s->step_wall)
                        s->step_wall = t.wall_ns;
        }
}

/* The step's totals (format "mpi-pstate-sums", docs/agent.md section 10):
 * every slot read once more now that the ranks are gone, reduced by
 * mpi_pstate_slot_totals(), with this agent's own clocked-down time and
 * transitions.  A node Epilog past its detail bound reads this small file
 * instead of the segment, so a job of 10,000 steps costs it one open per
 * step, not 10,000 segments.  Written only when the segment is still
 * mapped. */
int mpi_pstate_agentd_sums_write(struct agentd *a)
{
        struct mpi_pstate_json b = {0};
        struct step_sums s = {0};

        if (!a->o.record || !a->seg.hdr || a->seg_lost)
                return 0;
        sum_slots(a, &s);
        mpi_pstate_json_open(&b, '{', "  ");
        mpi_pstate_json_member_str(&b, "format", "mpi-pstate-sums");
        mpi_pstate_json_member_u64(&b, "version", 1);
        mpi_pstate_json_member_str(&b, "node", a->host);
        mpi_pstate_json_member_u64(&b, "job", a->o.job);
        mpi_pstate_json_member_u64(&b, "step", a->o.step);
        mpi_pstate_json_member_u64(&b, "ranks", s.ranks);
        mpi_pstate_json_member_u64(&b, "invalid", s.invalid);
        mpi_pstate_json_member_u64(&b, "transitions", s.transitions);
        mpi_pstate_json_member_u64(&b, "log_errors", mpi_pstate_agentd_log_errors());
        const struct {
                const char *key;
                unsigned __int128 ns;
        } figs[] = {{"wall_s", s.wall},          {"mpi_s", s.mpi},
                    {"wait_s", s.wait},          {"down_s", s.down},
                    {"paired_wall_s", s.pwall},  {"paired_mpi_s", s.pmpi},
                    {"step_wall_s", s.step_wall}};

        for (size_t k = 0; k < sizeof(figs) / sizeof(figs[0]); k++)
                key_secs(&b, figs[k].key, figs[k].ns);
        put_energy(&b, a);
        mpi_pstate_json_member_bool(&b, "end", true);
        mpi_pstate_json_close(&b);
        mpi_pstate_json_put(&b, "\n");
        return write_json(a->sums_fd, &b);
}
