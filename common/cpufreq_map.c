/* SPDX-License-Identifier: BSD-3-Clause */
/* The domain map and what a domain may be set to (cpufreq.h), pure
 * functions over a discovery: which policies hold a set of CPUs, the
 * mechanism a domain is clocked with, the settings a request gives within
 * the admin's limits, and the low and high a step alternates between. */
#include "cpufreq.h"
#include "errmsg.h"

#include <errno.h>
#include <string.h>

static const char *const mech_names[] = {
    [MPI_PSTATE_CPUFREQ_MECH_AUTO] = "auto",
    [MPI_PSTATE_CPUFREQ_MECH_MAXFREQ] = "max_freq",
    [MPI_PSTATE_CPUFREQ_MECH_SETSPEED] = "setspeed",
    [MPI_PSTATE_CPUFREQ_MECH_EPP] = "epp",
};

const struct mpi_pstate_cpufreq_policy *
mpi_pstate_cpufreq_policy_of(const struct mpi_pstate_cpufreq_node *node, unsigned cpu)
{
        if (!node || cpu >= CPU_SETSIZE || node->cpu_policy[cpu] < 0)
                return NULL;
        return &node->policies[node->cpu_policy[cpu]];
}

unsigned mpi_pstate_cpufreq_domains_of(const struct mpi_pstate_cpufreq_node *node,
                                       const cpu_set_t *cpus, unsigned *idx, unsigned max,
                                       bool *spills)
{
        unsigned n = 0;
        bool spill = false;

        for (unsigned i = 0; i < node->npolicies; i++) {
                cpu_set_t in, out;

                CPU_AND(&in, &node->policies[i].related, cpus);
                if (CPU_COUNT(&in) == 0)
                        continue;
                CPU_XOR(&out, &node->policies[i].related, &in);
                if (CPU_COUNT(&out) > 0)
                        spill = true;
                if (n < max)
                        idx[n++] = i;
        }
        if (spills)
                *spills = spill;
        return n;
}

const char *mpi_pstate_cpufreq_mech_name(enum mpi_pstate_cpufreq_mech m)
{
        if ((unsigned)m >= sizeof(mech_names) / sizeof(mech_names[0]))
                return "invalid";
        return mech_names[m];
}

int mpi_pstate_cpufreq_mech_parse(const char *s, enum mpi_pstate_cpufreq_mech *out)
{
        if (!s)
                return -EINVAL;
        for (unsigned i = 0; i < sizeof(mech_names) / sizeof(mech_names[0]); i++) {
                if (strcmp(s, mech_names[i]) == 0) {
                        *out = (enum mpi_pstate_cpufreq_mech)i;
                        return 0;
                }
        }
        return -EINVAL;
}

/* EPP works with the driver's own governor: under performance the active
 * drivers pin it at performance and refuse anything else with EBUSY. */
static int epp_usable(const struct mpi_pstate_cpufreq_policy *p, const char *job_governor,
                      enum mpi_pstate_cpufreq_mech *out, char *err, size_t errlen)
{
        const char *gov = job_governor ? job_governor : p->cur.governor;

        if (!p->cur.epp[0]) {
                mpi_pstate_errmsg_set(err, errlen,
                                      "%s: driver %s has no readable energy_performance_preference",
                                      p->name, p->driver);
                return -EOPNOTSUPP;
        }
        if (p->epp_busy_under_performance && strcmp(gov, "performance") == 0) {
                mpi_pstate_errmsg_set(err, errlen,
                                      "%s: driver %s keeps EPP at performance under the "
                                      "performance governor",
                                      p->name, p->driver);
                return -EBUSY;
        }
        *out = MPI_PSTATE_CPUFREQ_MECH_EPP;
        return 0;
}

int mpi_pstate_cpufreq_mech_choose(const struct mpi_pstate_cpufreq_policy *p,
                                   enum mpi_pstate_cpufreq_mech requested, bool allow_governor,
                                   const char *job_governor, enum mpi_pstate_cpufreq_mech *out,
                                   char *err, size_t errlen)
{
        bool in_userspace = strcmp(p->cur.governor, "userspace") == 0;
        bool may_switch = allow_governor || in_userspace;

        switch (requested) {
        case MPI_PSTATE_CPUFREQ_MECH_MAXFREQ:
                *out = requested;
                return 0;
        case MPI_PSTATE_CPUFREQ_MECH_EPP:
                return epp_usable(p, job_governor, out, err, errlen);
        case MPI_PSTATE_CPUFREQ_MECH_SETSPEED:
                if (!p->has_userspace) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: driver %s has no userspace governor", p->name,
                                              p->driver);
                        return -EOPNOTSUPP;
                }
                if (!may_switch) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: setspeed needs the userspace governor, and "
                                              "governor changes are not allowed",
                                              p->name);
                        return -EPERM;
                }
                if (job_governor && strcmp(job_governor, "userspace") != 0) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: setspeed needs the userspace governor, the "
                                              "job asked for %s",
                                              p->name, job_governor);
                        return -EINVAL;
                }
                *out = requested;
                return 0;
        case MPI_PSTATE_CPUFREQ_MECH_AUTO:
                if (p->has_userspace && !p->setspeed_is_floor && may_switch &&
                    (!job_governor || strcmp(job_governor, "userspace") == 0))
                        *out = MPI_PSTATE_CPUFREQ_MECH_SETSPEED;
                else
                        *out = MPI_PSTATE_CPUFREQ_MECH_MAXFREQ;
                return 0;
        }
        mpi_pstate_errmsg_set(err, errlen, "invalid mechanism %d", (int)requested);
        return -EINVAL;
}

int mpi_pstate_cpufreq_step_range(const struct mpi_pstate_cpufreq_policy *p,
                                  const struct mpi_pstate_cpufreq_settings *start,
                                  enum mpi_pstate_cpufreq_mech mech, uint64_t want_low,
                                  uint64_t admin_floor, uint32_t *low, uint32_t *high)
{
        uint32_t hi = start->max_khz;

        /* Under userspace the step runs at setspeed, which may sit below the
         * maximum (srun --cpu-freq=<freq>): raising a core to the maximum
         * would run it faster than the step was set to. */
        if (mech == MPI_PSTATE_CPUFREQ_MECH_SETSPEED && strcmp(start->governor, "userspace") == 0 &&
            start->setspeed_khz && start->setspeed_khz < hi)
                hi = start->setspeed_khz;
        /* scaling_min_freq is the step's floor (srun --cpu-freq=<min>-<max>
         * sets it; the kernel would not go below it anyway). */
        *high = hi;
        *low = mpi_pstate_cpufreq_low_khz(want_low, p->cpuinfo_min_khz, admin_floor, start->min_khz,
                                          hi, p->freqs, p->nfreqs);
        return *low ? 0 : -ERANGE;
}

static bool in_list(const char *list, const char *name)
{
        size_t n = strlen(name);

        for (const char *p = list; *p;) {
                size_t len;

                p += strspn(p, " ,\t");
                len = strcspn(p, " ,\t");
                if (len == n && strncmp(p, name, n) == 0)
                        return true;
                p += len;
        }
        return false;
}

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi)
{
        return v < lo ? lo : v > hi ? hi : v;
}

/* The range the admin's limits leave on p: [max(floor, cpuinfo_min),
 * min(ceiling, cpuinfo_max)]; -EINVAL when it is empty. */
static int plan_range(const struct mpi_pstate_cpufreq_policy *p,
                      const struct mpi_pstate_cpufreq_limits *lim, uint32_t *lo, uint32_t *hi,
                      char *err, size_t errlen)
{
        *lo = p->cpuinfo_min_khz;
        *hi = p->cpuinfo_max_khz;
        if (lim && lim->floor_khz > *lo)
                *lo = lim->floor_khz;
        if (lim && lim->ceiling_khz && lim->ceiling_khz < *hi)
                *hi = lim->ceiling_khz;
        if (*lo <= *hi)
                return 0;
        mpi_pstate_errmsg_set(err, errlen,
                              "%s: admin limits leave no frequency (%u..%u kHz allowed, "
                              "hardware %u..%u kHz)",
                              p->name, lim ? lim->floor_khz : 0, lim ? lim->ceiling_khz : 0,
                              p->cpuinfo_min_khz, p->cpuinfo_max_khz);
        return -EINVAL;
}

/* The governor a request gives on p under mech, into *out; -EINVAL or
 * -EPERM (with err) when the kernel or the admin does not allow it. */
static int plan_governor(const struct mpi_pstate_cpufreq_policy *p,
                         const struct mpi_pstate_cpufreq_limits *lim,
                         const struct mpi_pstate_cpufreq_request *req,
                         enum mpi_pstate_cpufreq_mech mech, const char **out, char *err,
                         size_t errlen)
{
        const char *gov = req->governor ? req->governor : p->cur.governor;

        if (mech == MPI_PSTATE_CPUFREQ_MECH_SETSPEED) {
                if (req->governor && strcmp(req->governor, "userspace") != 0) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "governor %s conflicts with the setspeed mechanism, "
                                              "which needs userspace",
                                              req->governor);
                        return -EINVAL;
                }
                gov = "userspace";
        }
        *out = gov;
        if (strcmp(gov, p->cur.governor) == 0)
                return 0;
        if (!mpi_pstate_cpufreq_valid_name(gov) || !mpi_pstate_cpufreq_has_governor(p, gov)) {
                mpi_pstate_errmsg_set(err, errlen,
                                      "%s: governor '%.32s' is not available (driver %s)", p->name,
                                      gov, p->driver);
                return -EINVAL;
        }
        if (!lim || !lim->allow_governor) {
                mpi_pstate_errmsg_set(err, errlen,
                                      "%s: changing the governor (%s -> %s) is not allowed",
                                      p->name, p->cur.governor, gov);
                return -EPERM;
        }
        if (lim->governors && !in_list(lim->governors, gov)) {
                mpi_pstate_errmsg_set(err, errlen,
                                      "%s: governor %s is not among those allowed (%.64s)", p->name,
                                      gov, lim->governors);
                return -EPERM;
        }
        return 0;
}

int mpi_pstate_cpufreq_plan(const struct mpi_pstate_cpufreq_policy *p,
                            const struct mpi_pstate_cpufreq_limits *lim,
                            const struct mpi_pstate_cpufreq_request *req,
                            enum mpi_pstate_cpufreq_mech mech,
                            struct mpi_pstate_cpufreq_settings *out, unsigned *clamped, char *err,
                            size_t errlen)
{
        static const struct mpi_pstate_cpufreq_request none;
        struct mpi_pstate_cpufreq_settings s;
        uint32_t lo, hi;
        const char *gov;
        unsigned c = 0;
        int rc;

        if (!req)
                req = &none;
        rc = plan_range(p, lim, &lo, &hi, err, errlen);
        if (rc)
                return rc;
        if (req->min_khz && req->max_khz && req->min_khz > req->max_khz) {
                mpi_pstate_errmsg_set(err, errlen, "minimum frequency %u kHz above maximum %u kHz",
                                      req->min_khz, req->max_khz);
                return -EINVAL;
        }
        memset(&s, 0, sizeof(s));
        s.min_khz = req->min_khz ? clamp_u32(req->min_khz, lo, hi) : lo;
        s.max_khz = req->max_khz ? clamp_u32(req->max_khz, lo, hi) : hi;
        if (req->min_khz && s.min_khz != req->min_khz)
                c |= req->min_khz < lo ? MPI_PSTATE_CPUFREQ_CLAMPED_MIN
                                       : MPI_PSTATE_CPUFREQ_CLAMPED_MAX;
        if (req->max_khz && s.max_khz != req->max_khz)
                c |= req->max_khz > hi ? MPI_PSTATE_CPUFREQ_CLAMPED_MAX
                                       : MPI_PSTATE_CPUFREQ_CLAMPED_MIN;
        rc = plan_governor(p, lim, req, mech, &gov, err, errlen);
        if (rc)
                return rc;
        memcpy(s.governor, gov, strlen(gov) + 1);
        if (strcmp(gov, "userspace") == 0)
                s.setspeed_khz = s.max_khz;
        *out = s;
        if (clamped)
                *clamped = c;
        return 0;
}

uint32_t mpi_pstate_cpufreq_low_khz(uint64_t want, uint32_t cpuinfo_min, uint64_t admin_floor,
                                    uint32_t min_khz, uint32_t high, const uint32_t *table,
                                    unsigned ntable)
{
        uint64_t floor = cpuinfo_min, low;

        if (admin_floor > floor)
                floor = admin_floor;
        if (min_khz > floor)
                floor = min_khz;
        low = want > floor ? want : floor;
        for (unsigned i = 0; table && i < ntable; i++) {
                if (table[i] >= low) {
                        if (table[i] <= high)
                                low = table[i];
                        break;
                }
        }
        return low < high ? (uint32_t)low : 0;
}
