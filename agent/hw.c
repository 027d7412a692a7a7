/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's hardware: the frequency domains of the step's CPUs and the
 * RAPL energy counters.
 *
 * A domain is managed only when every CPU of it (related_cpus, offline
 * ones included) belongs to the step: lowering a domain shared with CPUs
 * outside the allocation would slow someone else's work.  Before the first
 * change, the domain's settings are saved in the runtime directory with
 * the step as owner (common/restore.h); at the end they are restored from
 * there, and the same record lets the plugin's step exit or the node
 * epilog restore a domain whose agent was killed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"
#include "cpufreq_sysfs.h"
#include "options.h"
#include "parse.h"
#include "safeio.h"

/* RAPL: no power figure is read from the hardware, so the wrap period is
 * computed for a bound no socket reaches (docs/agent.md, "Energy"). */
#define RAPL_MAX_POWER_MW UINT64_C(1000000)
#define RAPL_MAX_INTERVAL_NS UINT64_C(60000000000)

static bool subset(const cpu_set_t *a, const cpu_set_t *b)
{
        cpu_set_t x;

        CPU_AND(&x, a, b);
        return CPU_EQUAL(&x, a);
}

static void set_status(struct agentd_domain *d, enum agentd_dom_status st, const char *why)
{
        d->status = st;
        snprintf(d->why, sizeof(d->why), "%s", why ? why : "");
}

/* Restore records are trusted only when root owns them, so an agent that
 * is not root (outside Slurm, on a node where the user may write cpufreq)
 * keeps the original settings in memory instead, and nothing can restore
 * them if it is killed. */
static bool memory_restore(const struct agentd *a)
{
        return !a->records;
}

static int write_fd(int fd, const char *value)
{
        size_t len = strlen(value);
        ssize_t n = pwrite(fd, value, len, 0);

        return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

/* What the agent changed, put back through its descriptors once it runs
 * as its own uid: the loop has raised every domain before it returned,
 * so what is left is the governor it switched to userspace.  The restore
 * record (the original from before the step) stays for root, which
 * applies it at the step's end. */
static int put_back_fds(struct agentd_domain *d, char *err, size_t errlen)
{
        char gov[MPI_PSTATE_CPUFREQ_NAME_LEN + 2], buf[64];
        int rc;

        /* The policy's files gone under the kept descriptor: its driver was
         * reset or replaced, and root drops the record unwritten. */
        if (d->h.fd >= 0 && pread(d->h.fd, buf, sizeof(buf), 0) < 0 && errno == ENODEV) {
                snprintf(err, errlen, "the policy's driver went away: %s", strerror(ENODEV));
                return -ESTALE;
        }
        if (d->governor_changed && d->gov_fd >= 0) {
                snprintf(gov, sizeof(gov), "%s\n", d->orig.governor);
                rc = write_fd(d->gov_fd, gov);
                if (rc) {
                        snprintf(err, errlen, "scaling_governor=%s: %s", d->orig.governor,
                                 strerror(-rc));
                        return rc;
                }
        }
        return 1;
}

/* Puts a domain back: from its record while root, through its
 * descriptors once not, or from memory when never root.  Returns 1
 * restored, 0 nothing to do, or a negative errno. */
static int put_back(struct agentd *a, struct agentd_domain *d, char *err, size_t errlen)
{
        struct mpi_pstate_restore_owner who = {a->o.job, a->o.step};
        int rc;

        if (!memory_restore(a) && geteuid() == 0)
                return mpi_pstate_restore_policy(a->o.runtime_dir, a->o.sysroot, d->name, &who, 0,
                                                 err, errlen);
        if (!memory_restore(a))
                return put_back_fds(d, err, errlen);
        rc = mpi_pstate_cpufreq_apply(&a->node->policies[d->policy], &d->orig, err, errlen);
        return rc ? rc : 1;
}

/* Gives a domain back its saved settings now (a setup that went wrong
 * after the save). */
static void unsave(struct agentd *a, struct agentd_domain *d)
{
        char err[256] = "";
        int rc;

        if (!d->saved)
                return;
        rc = put_back(a, d, err, sizeof(err));
        if (rc < 0)
                mpi_pstate_agentd_log(LOG_ERR, "%s: restoring after a failed setup: %s", d->name,
                                      err[0] ? err : strerror(-rc));
        else
                d->saved = false;
}

/* The low frequency the job asked for, as a figure for step_range(), and
 * where it came from.  efficient: the driver's lowest nonlinear frequency,
 * else calibrate's knee, else min (docs/agent.md, "Low frequency"). */
static uint64_t wanted_low(const struct agentd *a, const struct mpi_pstate_cpufreq_policy *p,
                           const char **src)
{
        if (a->o.low_khz != MPI_PSTATE_FREQ_EFFICIENT) {
                *src = a->o.low_khz ? "request" : "min";
                return a->o.low_khz;
        }
        if (p->nonlinear_khz) {
                *src = "nonlinear";
                return p->nonlinear_khz;
        }
        if (a->knee_khz > p->cpuinfo_min_khz && a->knee_khz < p->cpuinfo_max_khz) {
                *src = "knee";
                return a->knee_khz;
        }
        *src = "min";
        return 0;
}

/* The range of d and the source of its low end: a floor that raised the
 * wanted figure names itself (the step's scaling_min_freq, the admin's
 * freq_min). */
static int domain_range(struct agentd *a, struct agentd_domain *d,
                        const struct mpi_pstate_cpufreq_policy *p,
                        const struct mpi_pstate_cpufreq_settings *cur)
{
        uint64_t want = wanted_low(a, p, &d->low_src);
        uint64_t base = want > p->cpuinfo_min_khz ? want : p->cpuinfo_min_khz;
        int rc = mpi_pstate_cpufreq_step_range(p, cur, d->mech, want, a->o.freq_min_khz,
                                               &d->low_khz, &d->high_khz);

        if (rc)
                return rc;
        if (d->low_khz <= base)
                return 0;
        if (d->mech == MPI_PSTATE_CPUFREQ_MECH_MAXFREQ && cur->min_khz > base &&
            cur->min_khz >= a->o.freq_min_khz)
                d->low_src = "scaling_min";
        else if (a->o.freq_min_khz > base)
                d->low_src = "freq_min";
        return 0;
}

/* The handle, falling back to EPP where the cap's file cannot be opened
 * for writing (a read-only attribute, a confined sysfs) and the policy has
 * a preference to lower: max_freq, asked for or chosen (the plugin passes
 * the mechanism it resolved), cannot work there, and EPP changes no
 * governor either. */
static int prepare(struct agentd *a, struct agentd_domain *d,
                   const struct mpi_pstate_cpufreq_policy *p,
                   const struct mpi_pstate_cpufreq_settings *cur, char *err, size_t errlen)
{
        char why[256] = "";
        int rc = mpi_pstate_cpufreq_domain_prepare_from(&d->h, p, cur, d->mech, d->low_khz,
                                                        d->high_khz, err, errlen);

        if (!rc || d->mech != MPI_PSTATE_CPUFREQ_MECH_MAXFREQ ||
            (rc != -EACCES && rc != -EPERM && rc != -EROFS))
                return rc;
        snprintf(why, sizeof(why), "%s", err);
        if (mpi_pstate_cpufreq_mech_choose(p, MPI_PSTATE_CPUFREQ_MECH_EPP, a->o.allow_governor,
                                           a->o.job_governor, &d->mech, err, errlen) != 0) {
                d->mech = MPI_PSTATE_CPUFREQ_MECH_MAXFREQ;
                snprintf(err, errlen, "%s", why);
                return rc;
        }
        mpi_pstate_agentd_log(LOG_INFO, "%s: %s: using energy_performance_preference", d->name,
                              why);
        return mpi_pstate_cpufreq_domain_prepare_from(&d->h, p, cur, d->mech, d->low_khz,
                                                      d->high_khz, err, errlen);
}

/* The governor file, kept to switch back once the agent is not root. */
static int open_governor(const struct mpi_pstate_cpufreq_policy *p, struct agentd_domain *d,
                         char *err, size_t errlen)
{
        char path[MPI_PSTATE_CPUFREQ_PATH_LEN + 32];
        int rc = mpi_pstate_cpufreq_join(path, sizeof(path), p->dir, "scaling_governor");

        if (!rc && (d->gov_fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY)) < 0)
                rc = -errno;
        if (rc)
                snprintf(err, errlen, "%s/scaling_governor: %s", d->name, strerror(-rc));
        return rc;
}

/* Switches d to userspace for setspeed when the step runs another governor. */
static int to_userspace(struct agentd *a, struct agentd_domain *d,
                        const struct mpi_pstate_cpufreq_policy *p, char *err, size_t errlen)
{
        struct mpi_pstate_cpufreq_limits lim = {0, 0, NULL, a->o.allow_governor};
        struct mpi_pstate_cpufreq_request req = {NULL, p->cur.min_khz, p->cur.max_khz};
        struct mpi_pstate_cpufreq_settings target;
        int rc;

        if (d->mech != MPI_PSTATE_CPUFREQ_MECH_SETSPEED || !strcmp(p->cur.governor, "userspace"))
                return 0;
        rc = mpi_pstate_cpufreq_plan(p, &lim, &req, d->mech, &target, NULL, err, errlen);
        if (!rc)
                rc = mpi_pstate_cpufreq_apply(p, &target, err, errlen);
        if (!rc)
                d->governor_changed = true;
        return rc;
}

static void setup_one(struct agentd *a, struct agentd_domain *d)
{
        const struct mpi_pstate_cpufreq_policy *p = &a->node->policies[d->policy];
        struct mpi_pstate_restore_owner who = {a->o.job, a->o.step};
        struct mpi_pstate_cpufreq_settings cur;
        char err[256] = "";
        int rc;

        rc = mpi_pstate_cpufreq_mech_choose(p, a->o.mech, a->o.allow_governor, a->o.job_governor,
                                            &d->mech, err, sizeof(err));
        if (rc) {
                set_status(d, AGENTD_DOM_UNSUPPORTED, err);
                return;
        }
        d->orig = p->cur;
        rc = memory_restore(a) ? 0
                               : mpi_pstate_restore_save_from(a->o.runtime_dir, p, &p->cur, &who,
                                                              err, sizeof(err));
        if (rc) {
                set_status(d, rc == -EBUSY ? AGENTD_DOM_BUSY : AGENTD_DOM_ERROR,
                           err[0] ? err : strerror(-rc));
                return;
        }
        d->saved = true;
        rc = to_userspace(a, d, p, err, sizeof(err));
        if (!rc && d->governor_changed && !memory_restore(a))
                rc = open_governor(p, d, err, sizeof(err));
        /* Read again only if the switch above changed them: otherwise the
         * discovery a moment ago is current, and a short step waits for
         * every sysfs read of this setup. */
        if (!rc && d->governor_changed && (rc = mpi_pstate_cpufreq_read_settings(p, &cur)) != 0)
                snprintf(err, sizeof(err), "reading settings: %s", strerror(-rc));
        else if (!rc)
                cur = d->governor_changed ? cur : p->cur;
        if (rc) {
                set_status(d, AGENTD_DOM_ERROR, err);
                unsave(a, d);
                return;
        }
        /* cur is the step's setting: the agent starts after Slurm applied
         * --cpu-freq/CpuFreqDef and the plugin its policy (docs/cpufreq.md). */
        if (domain_range(a, d, p, &cur)) {
                snprintf(err, sizeof(err), "no frequency below the maximum %u kHz is allowed",
                         d->high_khz);
                set_status(d, AGENTD_DOM_NO_RANGE, err);
                unsave(a, d);
                return;
        }
        rc = prepare(a, d, p, &cur, err, sizeof(err));
        if (rc) {
                set_status(d, AGENTD_DOM_ERROR, err);
                unsave(a, d);
                return;
        }
        /* The step's speed to start with, whatever setspeed was left at. */
        if (d->mech == MPI_PSTATE_CPUFREQ_MECH_SETSPEED && cur.setspeed_khz != d->high_khz)
                mpi_pstate_cpufreq_domain_raise(&d->h);
        set_status(d, AGENTD_DOM_MANAGED, "");
}

/* calibrate's knee, when --low efficient may need it: root's file only. */
static void read_knee(struct agentd *a)
{
        char buf[32];
        uint64_t v;

        if (a->o.low_khz != MPI_PSTATE_FREQ_EFFICIENT || !a->o.knee_file)
                return;
        if (mpi_pstate_safeio_read_small(AT_FDCWD, a->o.knee_file, buf, sizeof(buf),
                                         MPI_PSTATE_SAFEIO_OWNED, 0) >= 0 &&
            mpi_pstate_parse_u64(buf, 1, UINT32_MAX, &v) == 0)
                a->knee_khz = (uint32_t)v;
}

/* The step's domains: each policy holding one of its CPUs, once. */
static int find_domains(struct agentd *a)
{
        unsigned np = a->node->npolicies ? a->node->npolicies : 1;
        cpu_set_t seen;

        a->pol2dom = malloc(sizeof(int) * np);
        a->dom = calloc(np, sizeof(*a->dom));
        if (!a->pol2dom || !a->dom)
                return -ENOMEM;
        for (unsigned i = 0; i < a->node->npolicies; i++)
                a->pol2dom[i] = -1;
        CPU_ZERO(&seen);
        for (unsigned cpu = 0; cpu < CPU_SETSIZE && a->ndom < MPI_PSTATE_AGENT_MAX_DOMAINS; cpu++) {
                int pi = CPU_ISSET(cpu, &a->o.cpus) && !CPU_ISSET(cpu, &seen)
                             ? a->node->cpu_policy[cpu]
                             : -1;
                struct agentd_domain *d;

                if (pi < 0 || a->pol2dom[pi] >= 0)
                        continue;
                d = &a->dom[a->ndom];
                d->policy = (unsigned)pi;
                d->h.fd = -1;
                d->gov_fd = -1;
                snprintf(d->name, sizeof(d->name), "%s", a->node->policies[pi].name);
                d->related = a->node->policies[pi].related;
                CPU_OR(&seen, &seen, &d->related);
                a->pol2dom[pi] = (int)a->ndom++;
        }
        return 0;
}

int mpi_pstate_agentd_hw_setup(struct agentd *a)
{
        int rc;

        a->cpufreq_status = "ok";
        read_knee(a);
        /* The step's policies only: a short step waits for this setup. */
        rc = mpi_pstate_cpufreq_discover_cpus(a->o.sysroot, &a->o.cpus, &a->node, a->cpufreq_err,
                                              sizeof(a->cpufreq_err));
        if (rc) {
                a->node = NULL;
                a->cpufreq_status = rc == -ENODEV ? "absent" : "error";
                mpi_pstate_agentd_log(rc == -ENODEV ? LOG_INFO : LOG_ERR,
                                      "cpufreq %s (%s): measuring only", a->cpufreq_status,
                                      a->cpufreq_err[0] ? a->cpufreq_err : strerror(-rc));
                return 0;
        }
        rc = find_domains(a);
        if (rc)
                return rc;
        for (unsigned i = 0; i < a->ndom; i++) {
                struct agentd_domain *d = &a->dom[i];

                if (!subset(&d->related, &a->o.cpus))
                        set_status(d, AGENTD_DOM_OUTSIDE,
                                   "shares CPUs with something outside the step");
                else if (a->o.profile)
                        set_status(d, AGENTD_DOM_PROFILE, "mode profile");
                else
                        setup_one(a, d);
                mpi_pstate_agentd_log(
                    d->status == AGENTD_DOM_MANAGED ? LOG_DEBUG : LOG_INFO, "%s: %s%s%s", d->name,
                    mpi_pstate_agentd_dom_status_name(d->status), d->why[0] ? ": " : "", d->why);
        }
        return 0;
}

void mpi_pstate_agentd_hw_finish(struct agentd *a)
{
        for (unsigned i = 0; i < a->ndom; i++) {
                struct agentd_domain *d = &a->dom[i];
                char err[256] = "";

                if (!d->saved) {
                        mpi_pstate_cpufreq_domain_close(&d->h);
                        continue;
                }
                d->restore_rc = put_back(a, d, err, sizeof(err));
                /* A late raise through the kept fd must not undo the restore. */
                mpi_pstate_cpufreq_domain_close(&d->h);
                if (d->gov_fd >= 0)
                        close(d->gov_fd);
                d->gov_fd = -1;
                if (d->restore_rc < 0) {
                        a->restore_failed++;
                        mpi_pstate_agentd_log(
                            LOG_ERR, "%s: restore failed: %s%s", d->name,
                            err[0] ? err : strerror(-d->restore_rc),
                            d->restore_rc == -ESTALE ? "" : " (the record stays for the backstop)");
                } else {
                        a->restored += d->restore_rc == 1;
                        d->saved = false;
                }
        }
}

/* No RAPL zone at all: hwmon energy counters or power meters, if any. */
static void hwmon_open(struct agentd *a)
{
        struct mpi_pstate_hwmon *h = calloc(1, sizeof(*h));
        enum mpi_pstate_rapl_status st;

        st = h ? mpi_pstate_hwmon_open(a->o.sysroot, h, mpi_pstate_agentd_mono_ns())
               : MPI_PSTATE_RAPL_ERROR;
        if (st == MPI_PSTATE_RAPL_ABSENT) {
                free(h);
                mpi_pstate_agentd_log(LOG_INFO, "energy: no RAPL, no hwmon energy or power");
                return;
        }
        a->energy_src = MPI_PSTATE_ENERGY_HWMON;
        a->hwmon = h;
        a->rapl_status = st;
        if (st != MPI_PSTATE_RAPL_OK) {
                mpi_pstate_agentd_log(LOG_INFO, "energy: hwmon %s",
                                      mpi_pstate_rapl_status_name(st));
                return;
        }
        a->rapl_interval_ns = mpi_pstate_hwmon_interval_ns(h, RAPL_MAX_INTERVAL_NS);
        a->rapl_next_ns = mpi_pstate_agentd_mono_ns() + a->rapl_interval_ns;
        a->rapl_samples = 1;
        mpi_pstate_agentd_log(LOG_INFO, "energy: hwmon, %u %s, sampled every %.3f s", h->n,
                              h->kind == MPI_PSTATE_HWMON_ENERGY ? "energy counters"
                                                                 : "power meters",
                              (double)a->rapl_interval_ns / 1e9);
}

void mpi_pstate_agentd_rapl_open(struct agentd *a)
{
        uint64_t range = 0, us;

        a->energy_src = MPI_PSTATE_ENERGY_NONE;
        a->rapl_status = mpi_pstate_rapl_discover(a->o.sysroot, &a->rapl);
        a->sampler.n = 0;
        if (a->rapl_status == MPI_PSTATE_RAPL_ABSENT) {
                hwmon_open(a);
                return;
        }
        a->energy_src = MPI_PSTATE_ENERGY_RAPL;
        if (a->rapl_status == MPI_PSTATE_RAPL_OK)
                a->rapl_status = mpi_pstate_rapl_sampler_open(
                    &a->sampler, &a->rapl,
                    MPI_PSTATE_RAPL_KIND_BIT(MPI_PSTATE_RAPL_PACKAGE) |
                        MPI_PSTATE_RAPL_KIND_BIT(MPI_PSTATE_RAPL_DRAM));
        else
                a->sampler.n = 0;
        if (a->rapl_status != MPI_PSTATE_RAPL_OK) {
                mpi_pstate_agentd_log(LOG_INFO, "energy: RAPL %s",
                                      mpi_pstate_rapl_status_name(a->rapl_status));
                return;
        }
        for (unsigned i = 0; i < a->sampler.n; i++)
                if (!range || a->sampler.c[i].range_uj < range)
                        range = a->sampler.c[i].range_uj;
        us = mpi_pstate_rapl_sample_interval_us(range, RAPL_MAX_POWER_MW);
        a->rapl_interval_ns = us > RAPL_MAX_INTERVAL_NS / 1000 ? RAPL_MAX_INTERVAL_NS : us * 1000;
        if (a->rapl_interval_ns == 0)
                a->rapl_interval_ns = 1000000;
        a->rapl_next_ns = mpi_pstate_agentd_mono_ns() + a->rapl_interval_ns;
        a->rapl_samples = 1;
}

void mpi_pstate_agentd_rapl_sample(struct agentd *a)
{
        enum mpi_pstate_rapl_status st;

        if (a->hwmon && a->hwmon->n)
                st = mpi_pstate_hwmon_sample(a->hwmon, mpi_pstate_agentd_mono_ns());
        else if (!a->sampler.n)
                return;
        else
                st = mpi_pstate_rapl_sampler_sample(&a->sampler);
        a->rapl_samples++;
        if (st != MPI_PSTATE_RAPL_OK && a->rapl_status == MPI_PSTATE_RAPL_OK)
                mpi_pstate_agentd_log(LOG_WARNING, "energy: a %s sample failed (%s)",
                                      mpi_pstate_energy_source_name(a->energy_src),
                                      mpi_pstate_rapl_status_name(st));
        a->rapl_status = st;
        a->rapl_next_ns = mpi_pstate_agentd_mono_ns() + a->rapl_interval_ns;
}

void mpi_pstate_agentd_rapl_close(struct agentd *a)
{
        if (a->sampler.n)
                mpi_pstate_rapl_sampler_close(&a->sampler);
        if (a->hwmon) {
                mpi_pstate_hwmon_close(a->hwmon);
                free(a->hwmon);
                a->hwmon = NULL;
        }
}
