/* SPDX-License-Identifier: BSD-3-Clause */
/* cpufreq backend on sysfs: discovery, per-job policy, and the kept-fd
 * "domain handle" the node agent (or a direct-mode rank) uses to clock a
 * frequency domain down and back up with one pwrite each way.
 *
 * Every function takes the sysfs root ("/sys" in production, a temporary
 * tree in the unit tests).  No Slurm, no MPI.  Frequencies are kHz as in
 * sysfs.  Errors are negative errno values; functions that take an
 * (err, errlen) pair also leave a one-line explanation there (err may be
 * NULL).  See docs/cpufreq.md.
 *
 * Discovery is in cpufreq_discover.c, the domain map and the pure planning
 * in cpufreq_map.c, the writes and the domain handle in cpufreq_write.c. */
#ifndef MPI_PSTATE_CPUFREQ_H
#define MPI_PSTATE_CPUFREQ_H
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MPI_PSTATE_CPUFREQ_NAME_LEN 16 /* the kernel's CPUFREQ_NAME_LEN, NUL included */
#define MPI_PSTATE_CPUFREQ_MAX_GOVS 16
#define MPI_PSTATE_CPUFREQ_MAX_FREQS 64
#define MPI_PSTATE_CPUFREQ_PATH_LEN 512
/* An energy_performance_preference value: one of the kernel's words
 * ("balance_performance" is the longest) or a number 0..255, NUL included. */
#define MPI_PSTATE_CPUFREQ_EPP_LEN 24

/* How a domain is clocked down and back up. */
enum mpi_pstate_cpufreq_mech {
        MPI_PSTATE_CPUFREQ_MECH_AUTO = 0, /* only as a request: choose() resolves it */
        MPI_PSTATE_CPUFREQ_MECH_MAXFREQ,  /* clamp scaling_max_freq: every driver */
        MPI_PSTATE_CPUFREQ_MECH_SETSPEED, /* scaling_setspeed under the userspace governor */
        MPI_PSTATE_CPUFREQ_MECH_EPP,      /* energy_performance_preference "power" (HWP, CPPC
                                             autonomous): where the cap cannot be written */
};

/* Node-wide turbo/boost switch, if any. */
enum mpi_pstate_cpufreq_boost {
        MPI_PSTATE_CPUFREQ_BOOST_NONE = 0, /* no switch found */
        MPI_PSTATE_CPUFREQ_BOOST_CPUFREQ,  /* devices/system/cpu/cpufreq/boost (1 = on) */
        MPI_PSTATE_CPUFREQ_BOOST_NO_TURBO, /* devices/system/cpu/intel_pstate/no_turbo (1 = off) */
};

/* The writable part of a policy: what the per-job policy sets and what the
 * restore record saves.  setspeed_khz is 0 unless governor is "userspace".
 * epp is "" where the policy has no readable energy_performance_preference,
 * and in a target it means "leave it": only a restore writes it back. */
struct mpi_pstate_cpufreq_settings {
        char governor[MPI_PSTATE_CPUFREQ_NAME_LEN];
        uint32_t min_khz;
        uint32_t max_khz;
        uint32_t setspeed_khz;
        char epp[MPI_PSTATE_CPUFREQ_EPP_LEN];
};

/* One frequency domain (kernel policy) as found at discovery. */
struct mpi_pstate_cpufreq_policy {
        char name[24];                         /* "policy3"; "cpu3" for a per-CPU legacy dir */
        char dir[MPI_PSTATE_CPUFREQ_PATH_LEN]; /* absolute path of the policy directory */
        char driver[MPI_PSTATE_CPUFREQ_NAME_LEN];
        char governors[MPI_PSTATE_CPUFREQ_MAX_GOVS][MPI_PSTATE_CPUFREQ_NAME_LEN];
        unsigned ngovernors;
        uint32_t freqs[MPI_PSTATE_CPUFREQ_MAX_FREQS]; /* ascending; empty for intel_pstate */
        unsigned nfreqs;
        uint32_t cpuinfo_min_khz, cpuinfo_max_khz;
        struct mpi_pstate_cpufreq_settings cur; /* governor, scaling_min/max, setspeed */
        bool has_userspace;                     /* "userspace" is an available governor */
        bool setspeed_is_floor;                 /* HWP: setspeed cannot cap the frequency */
        /* amd_pstate_lowest_nonlinear_freq: below it a lower clock saves
         * little power per cycle (0: the driver does not say) */
        uint32_t nonlinear_khz;
        /* The driver refuses any EPP but performance under the performance
         * governor (intel_pstate active, amd-pstate-epp) */
        bool epp_busy_under_performance;
        cpu_set_t related;  /* related_cpus: the whole domain */
        cpu_set_t affected; /* affected_cpus: its online CPUs */
};

struct mpi_pstate_cpufreq_node {
        char driver[MPI_PSTATE_CPUFREQ_NAME_LEN];        /* driver of the first policy */
        char pstate_status[MPI_PSTATE_CPUFREQ_NAME_LEN]; /* intel_pstate/status or
                                                            amd_pstate/status, "" if absent */
        enum mpi_pstate_cpufreq_boost boost_kind;
        int boost_on; /* 1 on, 0 off, -1 unknown */
        unsigned npolicies;
        struct mpi_pstate_cpufreq_policy *policies; /* sorted by name */
        int cpu_policy[CPU_SETSIZE];                /* CPU -> index in policies, -1 */
};

/* Reads the cpufreq tree under sysroot: the policies of the CPUs in cpus
 * only (found through their cpuN/cpufreq links), or the whole tree when
 * cpus is NULL.  -ENODEV when no CPU has a policy with a driver (no cpufreq
 * at all).  *out is freed with _free().  A job step passes its own CPUs,
 * paying for them instead of the node's (a 1-core step on a 256-CPU node
 * reads one policy, not 256).  Every policy holding one of cpus is
 * loaded whole (related_cpus included), so domains_of() and the "shared
 * with CPUs outside" test give the answers a full discovery gives.  The
 * boost switch is not read (boost_kind NONE, boost_on -1). */
int mpi_pstate_cpufreq_discover_cpus(const char *sysroot, const cpu_set_t *cpus,
                                     struct mpi_pstate_cpufreq_node **out, char *err,
                                     size_t errlen);
void mpi_pstate_cpufreq_free(struct mpi_pstate_cpufreq_node *node);

/* The policy of a CPU, or NULL.  For the tests, which look one CPU up: the
 * product goes through domains_of(). */
const struct mpi_pstate_cpufreq_policy *
mpi_pstate_cpufreq_policy_of(const struct mpi_pstate_cpufreq_node *node, unsigned cpu);

/* The distinct policies holding any CPU of cpus, as indexes into
 * node->policies in ascending order (at most max of them).  Returns their
 * number.  *spills (may be NULL) tells whether one of them also holds a CPU
 * outside cpus: a domain shared with CPUs the caller does not own.  CPUs
 * without a policy are ignored. */
unsigned mpi_pstate_cpufreq_domains_of(const struct mpi_pstate_cpufreq_node *node,
                                       const cpu_set_t *cpus, unsigned *idx, unsigned max,
                                       bool *spills);

/* The scaling_driver of the policy directory policy_dir: what a restore
 * compares with the driver its record was made under. */
int mpi_pstate_cpufreq_read_driver(const char *policy_dir, char out[MPI_PSTATE_CPUFREQ_NAME_LEN]);

/* Re-reads governor, scaling_min/max and setspeed of one policy. */
int mpi_pstate_cpufreq_read_settings(const struct mpi_pstate_cpufreq_policy *p,
                                     struct mpi_pstate_cpufreq_settings *out);

/* Re-reads the settings (governor, scaling_min/max, setspeed) of every
 * policy of node, keeping the rest of its discovery: the only files a
 * resource manager writes between two looks at a step's policies (Slurm's
 * --cpu-freq between init_post_opt and task_post_fork).  On failure node is
 * left partly refreshed; err names the file. */
int mpi_pstate_cpufreq_refresh_settings(struct mpi_pstate_cpufreq_node *node, char *err,
                                        size_t errlen);

bool mpi_pstate_cpufreq_has_governor(const struct mpi_pstate_cpufreq_policy *p, const char *gov);

/* ---- mechanism ---- */
const char *
mpi_pstate_cpufreq_mech_name(enum mpi_pstate_cpufreq_mech m); /* auto|max_freq|setspeed|epp */
int mpi_pstate_cpufreq_mech_parse(const char *s, enum mpi_pstate_cpufreq_mech *out);

/* Resolves a requested mechanism for one policy.  EPP needs a readable
 * energy_performance_preference and, on the drivers that refuse it there, a
 * governor other than performance (-EOPNOTSUPP, -EBUSY).  AUTO never picks
 * EPP: the agent falls back to it when the cap's file cannot be opened for
 * writing.  AUTO gives SETSPEED when the
 * userspace governor exists, setspeed is not a mere floor (HWP), the admin
 * allows governor changes (or userspace is already active) and the job did not
 * ask for another governor (job_governor NULL or "userspace"); else MAXFREQ.
 * A forced SETSPEED that cannot work is -EOPNOTSUPP (no userspace governor) or
 * -EPERM (governor changes not allowed). */
int mpi_pstate_cpufreq_mech_choose(const struct mpi_pstate_cpufreq_policy *p,
                                   enum mpi_pstate_cpufreq_mech requested, bool allow_governor,
                                   const char *job_governor, enum mpi_pstate_cpufreq_mech *out,
                                   char *err, size_t errlen);

/* Pure: the two frequencies the agent alternates a domain between, from
 * the settings it had once the step's frequencies were set (by the resource
 * manager, e.g. srun --cpu-freq or CpuFreqDef, and by the per-job policy).
 *   high  what the step was set to run at, never above it: setspeed under
 *         the userspace governor with mech SETSPEED, else scaling_max_freq;
 *   low   want_low (0 = the lowest allowed) raised to the floor
 *         max(cpuinfo_min, admin_floor, scaling_min_freq) and rounded up to
 *         the frequency table, never above high.
 * Returns 0, or -ERANGE (*low = 0) when no frequency below high is allowed. */
int mpi_pstate_cpufreq_step_range(const struct mpi_pstate_cpufreq_policy *p,
                                  const struct mpi_pstate_cpufreq_settings *start,
                                  enum mpi_pstate_cpufreq_mech mech, uint64_t want_low,
                                  uint64_t admin_floor, uint32_t *low, uint32_t *high);

/* ---- per-job policy ---- */
struct mpi_pstate_cpufreq_limits { /* admin, from plugstack.conf */
        uint32_t floor_khz;        /* lowest min/low allowed; 0 = cpuinfo_min */
        uint32_t ceiling_khz;      /* highest max allowed; 0 = cpuinfo_max */
        const char *governors;     /* allowed governors, blank/comma list; NULL = all */
        bool allow_governor;       /* may a job change the governor at all */
};

struct mpi_pstate_cpufreq_request { /* user */
        const char *governor;       /* NULL = keep the current one */
        uint32_t min_khz;           /* 0 = the lowest allowed */
        uint32_t max_khz;           /* 0 = the highest allowed */
};

enum {
        MPI_PSTATE_CPUFREQ_CLAMPED_MIN = 1 << 0, /* request below the floor or cpuinfo_min */
        MPI_PSTATE_CPUFREQ_CLAMPED_MAX = 1 << 1, /* request above the ceiling or cpuinfo_max */
};

/* Pure: the settings a request gives on policy p within the admin limits.
 * Frequencies are clamped into [max(floor, cpuinfo_min), min(ceiling,
 * cpuinfo_max)] and *clamped (may be NULL) tells which ends moved.  mech
 * SETSPEED forces the userspace governor and starts at the high end.  Errors:
 * -EINVAL (min > max requested, governor unknown to the kernel, bad limits),
 * -EPERM (governor not allowed by the admin, or mech SETSPEED without
 * allow_governor while another governor is active). */
int mpi_pstate_cpufreq_plan(const struct mpi_pstate_cpufreq_policy *p,
                            const struct mpi_pstate_cpufreq_limits *lim,
                            const struct mpi_pstate_cpufreq_request *req,
                            enum mpi_pstate_cpufreq_mech mech,
                            struct mpi_pstate_cpufreq_settings *out, unsigned *clamped, char *err,
                            size_t errlen);

/* One write of a settings change, in the order it must happen. */
enum mpi_pstate_cpufreq_attr {
        MPI_PSTATE_CPUFREQ_ATTR_MIN = 0, /* scaling_min_freq */
        MPI_PSTATE_CPUFREQ_ATTR_MAX,     /* scaling_max_freq */
        MPI_PSTATE_CPUFREQ_ATTR_GOVERNOR,
        MPI_PSTATE_CPUFREQ_ATTR_SETSPEED,
        MPI_PSTATE_CPUFREQ_ATTR_EPP, /* energy_performance_preference */
};
struct mpi_pstate_cpufreq_write {
        enum mpi_pstate_cpufreq_attr attr;
        char value[MPI_PSTATE_CPUFREQ_EPP_LEN];
};
const char *mpi_pstate_cpufreq_attr_file(enum mpi_pstate_cpufreq_attr a);

/* Pure: the ordered writes that take a policy from cur to target.  Limits
 * first, so that the range is valid after every write: scaling_max_freq
 * before scaling_min_freq when the maximum rises, min before max otherwise;
 * then the governor; then setspeed if the target governor is userspace; EPP
 * last, when the target names one that differs (the drivers reset EPP when
 * the governor changes, and refuse most values under performance).
 * Returns the number of writes (<= MPI_PSTATE_CPUFREQ_MAX_WRITES) into w. */
#define MPI_PSTATE_CPUFREQ_MAX_WRITES 5
unsigned
mpi_pstate_cpufreq_plan_writes(const struct mpi_pstate_cpufreq_settings *cur,
                               const struct mpi_pstate_cpufreq_settings *target,
                               struct mpi_pstate_cpufreq_write w[MPI_PSTATE_CPUFREQ_MAX_WRITES]);

/* Reads the current settings of p and performs plan_writes() towards target
 * with one-shot writes.  Stops at the first failing write. */
/* apply() from settings the caller read a moment ago (known, NULL: read
 * them), so a step's setup reads each sysfs file once. */
int mpi_pstate_cpufreq_apply_from(const struct mpi_pstate_cpufreq_policy *p,
                                  const struct mpi_pstate_cpufreq_settings *known,
                                  const struct mpi_pstate_cpufreq_settings *target, char *err,
                                  size_t errlen);
int mpi_pstate_cpufreq_apply(const struct mpi_pstate_cpufreq_policy *p,
                             const struct mpi_pstate_cpufreq_settings *target, char *err,
                             size_t errlen);

/* ---- domain handle: the transition fast path ---- */
struct mpi_pstate_cpufreq_domain {
        int fd; /* scaling_max_freq, scaling_setspeed or energy_performance_preference */
        enum mpi_pstate_cpufreq_mech mech;
        uint32_t low_khz, high_khz; /* EPP: what the frequencies would be (for the record) */
        /* "<digits>\n", or the EPP words ("power\n", the saved one), formatted once */
        char low[MPI_PSTATE_CPUFREQ_EPP_LEN + 1], high[MPI_PSTATE_CPUFREQ_EPP_LEN + 1];
        unsigned char low_len, high_len;
};

/* Opens the file of mech (MAXFREQ, SETSPEED or EPP, not AUTO) in policy p
 * and formats both strings (EPP: "power" down, the current preference up;
 * -EINVAL when there is none).  Checks against the current state:
 * cpuinfo_min <= low <= high <= cpuinfo_max (-ERANGE); MAXFREQ also needs
 * low >= scaling_min_freq (-ERANGE, the kernel would not honour it); SETSPEED
 * needs the userspace governor active (-EINVAL).  d->fd is -1 on failure.
 * known: the settings the caller just read (NULL: read them here). */
int mpi_pstate_cpufreq_domain_prepare_from(struct mpi_pstate_cpufreq_domain *d,
                                           const struct mpi_pstate_cpufreq_policy *p,
                                           const struct mpi_pstate_cpufreq_settings *known,
                                           enum mpi_pstate_cpufreq_mech mech, uint32_t low_khz,
                                           uint32_t high_khz, char *err, size_t errlen);

/* One pwrite() each, nothing else: no allocation, no lock, no other call. */
int mpi_pstate_cpufreq_domain_lower(const struct mpi_pstate_cpufreq_domain *d);
int mpi_pstate_cpufreq_domain_raise(const struct mpi_pstate_cpufreq_domain *d);

void mpi_pstate_cpufreq_domain_close(struct mpi_pstate_cpufreq_domain *d);

/* ---- small parsers shared with the restore record ---- */
/* An EPP value as the kernel shows it: one of its five words or a decimal
 * 0..255 without leading zeros. */
bool mpi_pstate_cpufreq_valid_epp(const char *s);
/* Governor/driver name: 1..15 bytes of [A-Za-z0-9_-]. */
bool mpi_pstate_cpufreq_valid_name(const char *s);
/* Kernel CPU list: "0 1 2 3", "0-3", "0,2-5" (blank or comma separated). */
int mpi_pstate_cpufreq_parse_cpulist(const char *s, cpu_set_t *out);

/* The low frequency of one domain: want (kHz, 0 = "min") brought into
 * [floor, high], where floor is the largest of cpuinfo_min, the admin's
 * freq_min (0 = none) and min_khz (scaling_min_freq for max_freq, else 0);
 * then raised to the nearest frequency of the table (ascending, may be
 * empty) at or above it, if one is <= high.  Returns the frequency, or 0
 * when it would not be below high (nothing to gain). */
uint32_t mpi_pstate_cpufreq_low_khz(uint64_t want, uint32_t cpuinfo_min, uint64_t admin_floor,
                                    uint32_t min_khz, uint32_t high, const uint32_t *table,
                                    unsigned ntable);

#endif
