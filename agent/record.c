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

static void put_hist(struct mpi_pstate_json *b, const struct mpi_pstate_agent_hist *h)
{
        bool first = true;

        mpi_pstate_json_put(b,
                            "{\"count\": %" PRIu64 ", \"sum\": %" PRIu64 ", \"max\": %" PRIu64
                            ", \"p50\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"log2\": [",
                            h->count, h->sum, h->max, mpi_pstate_agent_hist_quantile(h, 500),
                            mpi_pstate_agent_hist_quantile(h, 990));
        for (unsigned i = 0; i < MPI_PSTATE_AGENT_HIST_BUCKETS; i++) {
                if (!h->bucket[i])
                        continue;
                mpi_pstate_json_put(b, "%s[%u, %" PRIu64 "]", first ? "" : ", ", i, h->bucket[i]);
                first = false;
        }
        mpi_pstate_json_put(b, "]}");
}

static void put_cpus(struct mpi_pstate_json *b, const cpu_set_t *set)
{
        mpi_pstate_json_put(b, "\"");
        mpi_pstate_json_cpulist(b, set);
        mpi_pstate_json_put(b, "\"");
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

static void put_domains(struct mpi_pstate_json *b, const struct agentd *a)
{
        mpi_pstate_json_put(b, "  \"domains\": [");
        for (unsigned d = 0; d < a->ndom; d++) {
                const struct agentd_domain *dm = &a->dom[d];
                const struct mpi_pstate_agent_domain *cd = &a->core.domains[d];
                bool managed = dm->status == AGENTD_DOM_MANAGED, first = true;

                mpi_pstate_json_put(b, "%s\n    {\"policy\": ", d ? "," : "");
                mpi_pstate_json_str(b, dm->name);
                mpi_pstate_json_put(b, ", \"cpus\": ");
                put_cpus(b, &dm->related);
                mpi_pstate_json_put(b, ", \"shared\": %s, \"status\": \"%s\", \"reason\": ",
                                    CPU_COUNT(&dm->related) > 1 ? "true" : "false",
                                    mpi_pstate_agentd_dom_status_name(dm->status));
                mpi_pstate_json_str(b, dm->why);
                if (managed)
                        mpi_pstate_json_put(
                            b, ", \"mechanism\": \"%s\", \"low_khz\": %u, \"high_khz\": %u",
                            mpi_pstate_cpufreq_mech_name(dm->mech), dm->low_khz, dm->high_khz);
                mpi_pstate_json_put(b, ", \"ranks\": [");
                for (unsigned r = 0; r < a->seg.nslots; r++) {
                        if (!((a->slots[r].ever_mask[d / 64] >> (d % 64)) & 1u))
                                continue;
                        mpi_pstate_json_put(b, "%s%u", first ? "" : ", ", r);
                        first = false;
                }
                mpi_pstate_json_put(
                    b, "], \"transitions\": %" PRIu64 ", \"down_s\": ", cd->transitions);
                put_secs(b, cd->down_ns);
                mpi_pstate_json_put(b,
                                    ", \"aborted\": %" PRIu64 ", \"write_errors\": %" PRIu64
                                    ", \"disabled\": %s, \"restore\": \"%s\"}",
                                    cd->aborted, cd->write_errors, cd->disabled ? "true" : "false",
                                    dm->restore_rc < 0    ? "failed"
                                    : dm->restore_rc == 1 ? "restored"
                                                          : "none");
        }
        mpi_pstate_json_put(b, "\n  ],\n");
}

static void put_ranks(struct mpi_pstate_json *b, const struct agentd *a)
{
        bool any = false;

        mpi_pstate_json_put(b, "  \"ranks\": [");
        for (unsigned r = 0; r < a->seg.nslots; r++) {
                const struct agentd_slot *si = &a->slots[r];
                const struct mpi_pstate_agent_rank *cr = &a->core.ranks[r];
                bool first = true;

                if (!si->seen)
                        continue;
                mpi_pstate_json_put(
                    b,
                    "%s\n    {\"slot\": %u, \"rank\": %d, \"pid\": %d, \"cpu\": %d, \"state\": "
                    "\"%s\", "
                    "\"alive\": %s, \"domains\": [",
                    any ? "," : "", r, (int)si->rank, (int)si->pid, si->cpu, state_name(si),
                    si->dead ? "false" : "true");
                any = true;
                for (unsigned d = 0; d < a->ndom; d++) {
                        if (!((si->ever_mask[d / 64] >> (d % 64)) & 1u))
                                continue;
                        mpi_pstate_json_put(b, "%s", first ? "" : ", ");
                        mpi_pstate_json_str(b, a->dom[d].name);
                        first = false;
                }
                mpi_pstate_json_put(
                    b, "], \"transitions\": %" PRIu64 ", \"down_s\": ", cr->transitions);
                put_secs(b, cr->down_ns);
                mpi_pstate_json_put(b, ", \"drops\": %" PRIu64 ", \"drop_late_ns\": ", cr->drops);
                put_hist(b, &cr->drop_late_ns);
                mpi_pstate_json_put(b, ", \"restore_ns\": ");
                put_hist(b, &cr->restore_ns);
                mpi_pstate_json_put(b, ", \"reported\": {\"long_calls\": %" PRIu64 ", \"long_s\": ",
                                    si->long_calls);
                put_secs(b, si->long_ns);
                mpi_pstate_json_put(b, ", \"wakeups\": %" PRIu64 ", \"down_s\": ", si->wakeups);
                put_secs(b, si->slot_down_ns);
                mpi_pstate_json_put(b,
                                    ", \"transitions\": %" PRIu64 ", \"announced\": %" PRIu64
                                    ", \"announced_short\": %" PRIu64 "}}",
                                    si->slot_transitions, si->announced, si->announced_short);
        }
        mpi_pstate_json_put(b, "\n  ],\n");
}

/* hwmon: one node figure ("joules", what the epilog reads when there is no
 * package_j) and the channels it adds up. */
static void put_hwmon(struct mpi_pstate_json *b, const struct agentd *a)
{
        const struct mpi_pstate_hwmon *h = a->hwmon;
        bool ok = a->rapl_status == MPI_PSTATE_RAPL_OK && h && h->n > 0;

        mpi_pstate_json_put(b, ", \"kind\": \"%s\", \"joules\": ",
                            h && h->kind == MPI_PSTATE_HWMON_POWER ? "power_meter"
                                                                   : "energy_counter");
        if (ok)
                put_joules(b, mpi_pstate_hwmon_total_uj(h));
        else
                mpi_pstate_json_put(b, "null");
        mpi_pstate_json_put(b, ", \"channels\": [");
        for (unsigned i = 0; ok && i < h->n; i++) {
                mpi_pstate_json_put(b, "%s{\"label\": \"%s\", \"j\": ", i ? ", " : "",
                                    h->ch[i].label);
                put_joules(b, h->ch[i].total_uj);
                mpi_pstate_json_put(b, ", \"resets\": %" PRIu64 "}", h->ch[i].resets);
        }
        mpi_pstate_json_put(b, "]},\n");
}

static void put_energy(struct mpi_pstate_json *b, const struct agentd *a)
{
        const struct mpi_pstate_rapl_sampler *s = &a->sampler;
        bool ok = a->rapl_status == MPI_PSTATE_RAPL_OK && s->n > 0;
        int sockets[MPI_PSTATE_RAPL_MAX_ZONES];
        unsigned nsock = 0;

        mpi_pstate_json_put(
            b,
            "  \"energy\": {\"status\": \"%s\", \"source\": \"%s\", \"samples\": %" PRIu64
            ", \"interval_s\": ",
            mpi_pstate_rapl_status_name(a->rapl_status),
            mpi_pstate_energy_source_name(a->energy_src), a->rapl_samples);
        put_secs(b, a->rapl_interval_ns);
        if (a->energy_src == MPI_PSTATE_ENERGY_HWMON) {
                put_hwmon(b, a);
                return;
        }
        for (int k = MPI_PSTATE_RAPL_PACKAGE; k <= MPI_PSTATE_RAPL_DRAM; k++) {
                bool have = false;

                for (unsigned i = 0; ok && i < s->n; i++)
                        have = have || s->c[i].kind == (enum mpi_pstate_rapl_kind)k;
                mpi_pstate_json_put(
                    b, ", \"%s_j\": ", k == MPI_PSTATE_RAPL_PACKAGE ? "package" : "dram");
                if (have)
                        put_joules(b, mpi_pstate_rapl_sampler_total_uj(s, k));
                else
                        mpi_pstate_json_put(b, "null");
        }
        mpi_pstate_json_put(b, ", \"sockets\": [");
        for (unsigned i = 0; ok && i < s->n; i++) {
                bool known = false;

                for (unsigned j = 0; j < nsock; j++)
                        known = known || sockets[j] == s->c[i].socket;
                if (!known)
                        sockets[nsock++] = s->c[i].socket;
        }
        for (unsigned j = 0; j < nsock; j++) {
                mpi_pstate_json_put(b, "%s{\"socket\": %d", j ? ", " : "", sockets[j]);
                for (int k = MPI_PSTATE_RAPL_PACKAGE; k <= MPI_PSTATE_RAPL_DRAM; k++) {
                        uint64_t sum = 0;
                        bool have = false;

                        for (unsigned i = 0; i < s->n; i++)
                                if (s->c[i].socket == sockets[j] &&
                                    s->c[i].kind == (enum mpi_pstate_rapl_kind)k) {
                                        sum += s->c[i].total_uj;
                                        have = true;
                                }
                        mpi_pstate_json_put(
                            b, ", \"%s_j\": ", k == MPI_PSTATE_RAPL_PACKAGE ? "package" : "dram");
                        if (have)
                                put_joules(b, sum);
                        else
                                mpi_pstate_json_put(b, "null");
                }
                mpi_pstate_json_put(b, "}");
        }
        mpi_pstate_json_put(b, "]},\n");
}

static void put_agent(struct mpi_pstate_json *b, const struct agentd *a, uint64_t elapsed_ns)
{
        struct rusage ru;
        uint64_t user_ns, sys_ns;

        getrusage(RUSAGE_SELF, &ru);
        user_ns =
            (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u;
        sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u;
        mpi_pstate_json_put(b, "  \"agent\": {\"pid\": %ld, \"cpu_s\": ", (long)getpid());
        put_secs(b, user_ns + sys_ns);
        mpi_pstate_json_put(b, ", \"user_s\": ");
        put_secs(b, user_ns);
        mpi_pstate_json_put(b, ", \"sys_s\": ");
        put_secs(b, sys_ns);
        mpi_pstate_json_put(b, ", \"cpu_share\": %.6f",
                            elapsed_ns ? (double)(user_ns + sys_ns) / (double)elapsed_ns : 0.0);
        mpi_pstate_json_put(
            b,
            ", \"wakeups\": %" PRIu64 ", \"futex_wakeups\": %" PRIu64 ", \"timeouts\": %" PRIu64
            ", \"rewaits\": %" PRIu64 ", \"throttled\": %" PRIu64 ", \"lowers\": %" PRIu64
            ", \"raises\": %" PRIu64 ", \"leaves_seen\": %" PRIu64 ", \"rt_prio\": %d"
            ", \"timer_gap_final_us\": %" PRIu64 ", \"timer_gap_max_us\": %" PRIu64
            ", \"timer_cpu_us\": %.1f, \"budget_adjusts\": %" PRIu64 ", \"full_scans\": %" PRIu64
            ", \"capped\": %" PRIu64 ", \"capped_ms\": %" PRIu64 ", \"capped_raises\": %" PRIu64
            ", \"announced\": %" PRIu64 ", \"announce_offs\": %" PRIu64 ", \"write_ns\": ",
            a->wakeups, a->woken, a->timeouts, a->eagain, a->throttled, a->core.stats.lowers,
            a->core.stats.raises, a->core.stats.leaves_seen, a->o.rt_prio, a->gap_ns / 1000u,
            a->gap_max_ns / 1000u,
            a->budget_timer_sum ? (double)a->budget_cpu_sum / (double)a->budget_timer_sum / 1e3
                                : 0.0,
            a->budget_adjusts, a->full_scans, a->capped, a->capped_ns / 1000000u, a->capped_raises,
            a->announced, a->announce_offs);
        put_hist(b, &a->core.stats.write_ns);
        mpi_pstate_json_put(b, "},\n");
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
        mpi_pstate_json_put(b, "  \"hardening\": {\"capabilities\": ");
        mpi_pstate_json_str(b, h->caps_rc ? strerror(-h->caps_rc) : "dropped");
        mpi_pstate_json_put(b, ", \"landlock\": ");
        mpi_pstate_json_str(b, h->landlock[0] ? h->landlock : "not applied");
        mpi_pstate_json_put(b, ", \"landlock_abi\": %d, \"seccomp\": ", h->landlock_abi);
        mpi_pstate_json_str(b, h->seccomp_rc ? strerror(-h->seccomp_rc) : "on");
        mpi_pstate_json_put(b, "},\n");
}

/* b into dir/name atomically, mode 0644; b freed.  No fsync: it is
 * written as the step ends, while slurmstepd waits, and nothing reads it
 * after a crash of the node (the node epilog that would never ran). */
static int write_json(const char *dir, const char *name, struct mpi_pstate_json *b)
{
        int dfd, rc = -ENOMEM;

        if (b->failed)
                goto out;
        dfd = mpi_pstate_safeio_open_dir(dir, 1, 0755);
        if (dfd < 0) {
                rc = dfd;
                goto out;
        }
        rc =
            mpi_pstate_safeio_write_atomic(dfd, name, b->p, b->len, 0644, MPI_PSTATE_SAFEIO_NOSYNC);
        close(dfd);
out:
        free(b->p);
        return rc;
}

int mpi_pstate_agentd_record_write(struct agentd *a)
{
        struct mpi_pstate_json b = {0};
        char dir[4096];
        const char *name;
        uint64_t elapsed =
            a->end_real_ns > a->start_real_ns ? a->end_real_ns - a->start_real_ns : 0;

        if (!a->o.record)
                return 0;
        if (mpi_pstate_agentd_parent_dir(a->o.record, dir, sizeof(dir)) != 0)
                return -EINVAL;
        name = strrchr(a->o.record, '/') + 1;

        mpi_pstate_json_put(&b, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"node\": ",
                            AGENTD_RECORD_FORMAT, AGENTD_RECORD_VERSION);
        mpi_pstate_json_str(&b, a->host);
        mpi_pstate_json_put(&b,
                            ",\n  \"job\": %u,\n  \"step\": %u,\n  \"start_ns\": %" PRIu64
                            ",\n  \"end_ns\": %" PRIu64 ",\n  \"elapsed_s\": ",
                            a->o.job, a->o.step, a->start_real_ns, a->end_real_ns);
        put_secs(&b, elapsed);
        mpi_pstate_json_put(&b, ",\n  \"exit_reason\": \"%s\",\n  \"mode\": \"%s\",\n",
                            a->exit_reason, a->o.profile ? "profile" : "on");
        mpi_pstate_json_put(&b,
                            "  \"settings\": {\"threshold_us\": %" PRIu64
                            ", \"scan_interval_us\": %" PRIu64 ", \"cpu_budget_ppm\": %" PRIu64
                            ", \"cpu_cap_ppm\": %" PRIu64 ", \"low\": ",
                            a->thr_ns / 1000u, a->scan_ns / 1000u, a->o.budget_ppm, a->o.cap_ppm);
        if (a->o.low_khz)
                mpi_pstate_json_put(&b, "%" PRIu64, a->o.low_khz);
        else
                mpi_pstate_json_put(&b, "\"min\"");
        mpi_pstate_json_put(
            &b,
            ", \"mechanism_requested\": \"%s\", \"allow_governor\": %s, \"freq_min_khz\": %" PRIu64
            ", \"cpus\": ",
            mpi_pstate_cpufreq_mech_name(a->o.mech), a->o.allow_governor ? "true" : "false",
            a->o.freq_min_khz);
        put_cpus(&b, &a->o.cpus);
        mpi_pstate_json_put(&b, ", \"segment\": ");
        mpi_pstate_json_str(&b, a->o.shm);
        mpi_pstate_json_put(&b, ", \"slots\": %u, \"created\": %s},\n", a->seg.nslots,
                            a->created ? "true" : "false");
        mpi_pstate_json_put(&b,
                            "  \"cpufreq\": {\"status\": \"%s\", \"error\": ", a->cpufreq_status);
        mpi_pstate_json_str(&b, a->cpufreq_err);
        mpi_pstate_json_put(&b, ", \"driver\": ");
        mpi_pstate_json_str(&b, a->node ? a->node->driver : "");
        mpi_pstate_json_put(&b, ", \"mechanism\": \"%s\"},\n", overall_mech(a));
        put_domains(&b, a);
        put_ranks(&b, a);
        put_energy(&b, a);
        put_agent(&b, a, elapsed);
        put_hardening(&b, &a->hard);
        mpi_pstate_json_put(&b, "  \"restore\": {\"restored\": %u, \"failed\": %u}\n}\n",
                            a->restored, a->restore_failed);
        return write_json(dir, name, &b);
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
        char dir[4096];
        uint64_t n = 0, invalid = 0, transitions = 0, step_wall = 0;
        unsigned __int128 wall = 0, mpi = 0, wait = 0, down = 0, pwall = 0, pmpi = 0;
        int rc;

        if (!a->o.record || !a->seg.hdr || a->seg_lost)
                return 0;
        if (mpi_pstate_agentd_parent_dir(a->o.record, dir, sizeof(dir)) != 0)
                return -EINVAL;
        for (unsigned r = 0; r < a->seg.nslots; r++) {
                struct mpi_pstate_slot_totals t;

                rc = mpi_pstate_slot_snapshot(mpi_pstate_slot_at(&a->seg, r), a->copy);
                if (rc == -ENOENT)
                        continue;
                if (rc) {
                        invalid++;
                        continue;
                }
                mpi_pstate_slot_totals(a->copy, &t);
                n++;
                wall += t.wall_ns;
                mpi += t.mpi_ns;
                wait += t.wait_ns;
                down += a->core.ranks[r].down_ns;
                transitions += a->core.ranks[r].transitions;
                if (t.has_wall && t.wall_ns && t.has_mpi) {
                        pwall += t.wall_ns;
                        pmpi += t.mpi_ns;
                }
                if (t.wall_ns > step_wall)
                        step_wall = t.wall_ns;
        }
        mpi_pstate_json_put(&b, "{\"format\": \"mpi-pstate-sums\", \"version\": 1, \"node\": ");
        mpi_pstate_json_str(&b, a->host);
        mpi_pstate_json_put(
            &b,
            ", \"job\": %u, \"step\": %u, \"ranks\": %" PRIu64 ", \"invalid\": %" PRIu64
            ", \"transitions\": %" PRIu64 ", \"log_errors\": %u",
            a->o.job, a->o.step, n, invalid, transitions, mpi_pstate_agentd_log_errors());
        const struct {
                const char *key;
                unsigned __int128 ns;
        } figs[] = {{"wall_s", wall},          {"mpi_s", mpi},           {"wait_s", wait},
                    {"down_s", down},          {"paired_wall_s", pwall}, {"paired_mpi_s", pmpi},
                    {"step_wall_s", step_wall}};

        for (size_t k = 0; k < sizeof(figs) / sizeof(figs[0]); k++) {
                mpi_pstate_json_put(&b, ", \"%s\": ", figs[k].key);
                put_secs(&b, figs[k].ns);
        }
        mpi_pstate_json_put(&b, ",\n");
        put_energy(&b, a);
        mpi_pstate_json_put(&b, "  \"end\": true}\n");
        return write_json(dir, "sums.json", &b);
}
