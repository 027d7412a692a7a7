/* SPDX-License-Identifier: BSD-3-Clause */
/* The plugstack.conf options of the plugin: the admin configuration of
 * mpi-pstate, the key=value words after the plugin path in plugstack.conf,
 * and the limits they put on user options.
 *
 *   optional /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_mpi_pstate.so default_mode=profile \
 *            allowed_governors=performance,schedutil freq_min=1.2GHz threshold_min=100us
 *
 * Pure: no Slurm, no MPI, no I/O.  Problems are reported through a callback
 * and never make parsing fail, because a non-zero return from the plugin's
 * remote init would fail jobs or drain nodes over a typo: a bad or unknown key
 * is reported and ignored, and the setting keeps its default.  The keys and
 * their defaults are documented in man/mpi_pstate.8.in and docs/admin.md
 * (tests/unit/spank/test_config.c checks that both name every key). */
#ifndef MPI_PSTATE_SPANK_PLUGSTACK_H
#define MPI_PSTATE_SPANK_PLUGSTACK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract.h"
#include "options.h"

#define MPI_PSTATE_CONFIG_COLLECT_DIR "/var/spool/mpi-pstate/records"
#define MPI_PSTATE_CONFIG_SYSROOT "/sys"

/* No limit on the threshold: the largest duration parse.h accepts (a day). */
#define MPI_PSTATE_CONFIG_THRESHOLD_MAX UINT64_C(86400000000)
/* agent_user: the system user the packages declare, else the agent's own
 * unnamed id (--run-uid's default, common/agent_args.def).  The defaults of
 * agent_cpu_budget= and uncore_threshold= are the agent's too, from there. */
#define MPI_PSTATE_CONFIG_AGENT_USER "mpi-pstate"

struct mpi_pstate_config {
        /* default_<key>: what a job gets for an option it does not give. */
        struct mpi_pstate_options defaults;
        bool allow_off;     /* allow_off: may users choose --mpi-pstate=off */
        uint32_t governors; /* allowed_governors: bit (1u << governor); keep always */
        /* From slurm.conf (mpi_pstate_plugstack_slurm): CpuFreqGovernors, which
         * allowed_governors narrows (all when no slurm.conf was read), and
         * whether CpuFreqDef makes Slurm set every step's governor. */
        uint32_t slurm_governors;
        bool slurm_freq_def;
        uint64_t freq_min_khz;     /* freq_min: floor for --mpi-pstate-low; 0 = none */
        uint64_t freq_max_khz;     /* freq_max: ceiling for every frequency set; 0 = none */
        uint64_t threshold_min_us; /* threshold_min */
        uint64_t threshold_max_us; /* threshold_max */
        char collect_dir[MPI_PSTATE_CONFIG_PATH_MAX]; /* collect_dir: node records */
        char runtime_dir[MPI_PSTATE_CONFIG_PATH_MAX]; /* runtime_dir: restore records; %h */
        /* preload, agent: absolute file paths; "" = the plugin's built-in
         * default (where `make install` put them, see spank/rules.mk). */
        char preload[MPI_PSTATE_CONFIG_PATH_MAX];
        char agent[MPI_PSTATE_CONFIG_PATH_MAX];
        /* mechanism: how a waiting core is clocked down, a word of
         * common/cpufreq.h's mpi_pstate_cpufreq_mech_parse(): auto, max_freq,
         * setspeed or epp. */
        char mechanism[16];
        /* agent_cpu_budget: the node agent's CPU budget in millionths of a
         * core (--cpu-budget; 0: none). */
        uint64_t agent_budget_ppm;
        /* agent_user: whom the agent runs as once root opened its files
         * (a name, uid or uid:gid; never root).  0: not given, resolved per
         * step (mpi_pstate_plugstack_agent_ids). */
        uint32_t agent_uid, agent_gid;
        /* uncore, uncore_threshold: may the agent lower the uncore of a
         * package a step owns whole, after every rank on it waited this long
         * (off until measured on the site's hardware: docs/levers.md). */
        bool uncore;
        uint64_t uncore_threshold_us;
        /* sysroot: where sysfs is mounted ("/sys"); a fake tree in tests. */
        char sysroot[MPI_PSTATE_CONFIG_PATH_MAX];
};

/* The agent's uid and gid: agent_user's, else the user "mpi-pstate" if
 * the node knows it, else the unnamed id. */
void mpi_pstate_plugstack_agent_ids(const struct mpi_pstate_config *c, uint32_t *uid,
                                    uint32_t *gid);

/* Receives one complete message ("mpi-pstate: plugstack.conf: ..."). */
typedef void (*mpi_pstate_plugstack_report_f)(void *ctx, const char *msg);

/* Built-in values: the option defaults of options.def, allow_off=yes, every
 * governor, no frequency or threshold limit, the two directories above, the
 * built-in preload and agent paths (""), mechanism auto, sysroot /sys. */
void mpi_pstate_plugstack_defaults(struct mpi_pstate_config *c);

/* Applies argv[0..argc-1] (the plugstack arguments) to c, which must hold
 * defaults.  Each problem is reported once through report (may be NULL) and
 * leaves the setting concerned at its previous value; the defaults of the
 * options are brought within the limits (reported too).  Later keys override
 * earlier ones.  Returns the number of problems reported. */
int mpi_pstate_plugstack_parse(struct mpi_pstate_config *c, int argc, char *const argv[],
                               mpi_pstate_plugstack_report_f report, void *ctx);

/* Takes Slurm's own settings (slurm.conf CpuFreqGovernors as a governor
 * mask, CpuFreqDef set or not): a job may choose a governor only if both
 * CpuFreqGovernors and allowed_governors allow it.  A default_governor
 * outside is reported and becomes keep.  Returns the number of problems. */
int mpi_pstate_plugstack_slurm(struct mpi_pstate_config *c, uint32_t slurm_governors,
                               bool slurm_freq_def, mpi_pstate_plugstack_report_f report,
                               void *ctx);

/* Result of mpi_pstate_plugstack_limit(). */
enum mpi_pstate_limit {
        MPI_PSTATE_LIMIT_OK = 0,       /* within limits, unchanged */
        MPI_PSTATE_LIMIT_ADJUSTED = 1, /* clamped or replaced; note says how */
        MPI_PSTATE_LIMIT_REFUSED = -1, /* not allowed; note says why.  The option
                                        * was reset to the site default, so a
                                        * caller that cannot refuse may go on. */
};

/* Brings option id of o within the limits of c:
 *   mode      off with allow_off=no becomes profile (adjusted)
 *   threshold clamped into [threshold_min, threshold_max] (adjusted)
 *   low       a frequency clamped into [freq_min, freq_max]; min stays min
 *   governor  not in allowed_governors or Slurm's CpuFreqGovernors: refused
 *   bind      no limit
 * note (may be NULL) receives a message starting with "mpi-pstate: ". */
enum mpi_pstate_limit mpi_pstate_plugstack_limit(const struct mpi_pstate_config *c,
                                                 struct mpi_pstate_options *o, int id, char *note,
                                                 size_t notelen);

/* The accepted keys, in documentation order; NULL past the end.  The plugin
 * does not need it: tests/unit/spank/test_config.c and tests/py/test_options_gen.py
 * list the keys through it to check that each one is documented. */
const char *mpi_pstate_plugstack_key(size_t i);

#endif
