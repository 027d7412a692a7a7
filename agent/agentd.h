/* SPDX-License-Identifier: BSD-3-Clause */
/* mpi-pstate-agent: the node agent, one per job step per node, started
 * as root, run as its own user once its files are open.
 *
 *   main.c      start, --restore, detaching, signals, set-up and finish
 *   cmdline.c   the command line, from common/agent_args.def
 *   confine.c   scheduling, the fence and the drop to the agent's own uid
 *   harden.c    capabilities, no_new_privs, Landlock, seccomp
 *   hw.c        cpufreq domains (save, mechanism, handle, restore) and RAPL
 *   uncore.c    the uncore domains and their decision core
 *   slots.c     the segment, slot copies, the observations of a scan
 *   liveness.c  whether each slot's rank still lives (pidfds, /proc)
 *   watcher.c   the thread that waits on the ranks' pidfds
 *   coreops.c   the decision core's side effects (its ops table)
 *   budget.c    the CPU budget, the announcement switch, the ceiling
 *   loop.c      the loop: look, decide, sleep; the final pass
 *   record.c    the agent record (JSON, docs/agent.md)
 *   log.c       log file, syslog or stderr
 *
 * The decisions themselves live in agent/agent.c (pure, unit tested). */
#ifndef MPI_PSTATE_AGENTD_H
#define MPI_PSTATE_AGENTD_H
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agent_args.h"
#include "contract.h"
#include "cpufreq.h"
#include "energy.h"
#include "options.h"
#include "rapl.h"
#include "restore.h"
#include "slot.h"
#include "uncore.h"

#define AGENTD_RECORD_FORMAT "mpi-pstate-agent"
#define AGENTD_RECORD_VERSION 1
/* Bounds of the scan interval (docs/agent.md, "Timing"). */
#define AGENTD_SCAN_MIN_NS UINT64_C(50000)
#define AGENTD_SCAN_MAX_NS UINT64_C(100000000)
/* Ranks announce waits while the agent's CPU share stays under this share
 * of its ceiling, and again once it is back under half that
 * (epilog/mpi_pstate/whatif.py predicts with the same figure). */
#define AGENTD_ANNOUNCE_OFF_PCT 75u
/* Liveness without a pidfd: a rank's /proc start time this often. */
#define AGENTD_PROC_CHECK_NS UINT64_C(100000000)

/* The largest file the agent may write (RLIMIT_FSIZE): its log's cap and
 * the reserve kept for errors past it (log.c); the node Epilog refuses an
 * agent.json over 1 MiB (node.py AGENT_MAX_BYTES) whatever this allows. */
#define AGENTD_FILE_MAX_BYTES ((UINT64_C(1) << 20) + (UINT64_C(64) << 10))
/* ... and per slot, for the ranks of a large step in agent.json */
#define AGENTD_FILE_SLOT_BYTES (UINT64_C(1) << 10)

/* harden.c.  The fence: where the agent may still change files once
 * hardened, each a directory (rights beneath it) or a file. */
enum {
        AGENTD_FENCE_WRITE = 1,  /* write and truncate existing files (sysfs) */
        AGENTD_FENCE_REMOVE = 2, /* remove files (the segment it created) */
        AGENTD_FENCE_FILES = 4,  /* write, create, replace and remove files */
        AGENTD_FENCE_READ = 8,   /* read files and list directories (with a uid drop,
                                    reads are fenced too: /proc only) */
};
struct agentd_fence {
        const char *path;
        unsigned what;
};
/* Whom a root-started agent becomes before it reads anything the job
 * writes: a uid and gid that are not 0 and own no file, no supplementary
 * group, and a kernel-enforced bound on the size of any file it writes
 * through the descriptors it keeps.  NULL: the agent never was root. */
struct agentd_identity {
        uid_t uid;
        gid_t gid;
        uint64_t file_max_bytes;
};

/* What hardening achieved, for the log and the record: 0 or a negative
 * errno each; landlock_abi 0 when the kernel has none. */
struct agentd_hardening {
        int caps_rc, landlock_rc, seccomp_rc;
        int uid_rc;        /* the drop to the agent's own uid and gid: 0 or -errno */
        uid_t uid;         /* what it runs as afterwards */
        uint64_t file_max; /* RLIMIT_FSIZE set with the drop (0: none) */
        gid_t gid;
        int landlock_abi;
        char landlock[160]; /* "on", "absent", "disabled", or what failed */
};
/* Drops every capability of the calling thread (which must be the only
 * one) and sets no_new_privs, confines it with Landlock to the fence, calls
 * spawn(arg) (which may start threads: they inherit both), then installs
 * the seccomp allow-list on every thread.  Returns spawn's non-zero result
 * (seccomp is then not installed), else 0: a failed hardening step is in
 * *out, never fatal. */
int mpi_pstate_agentd_harden(const struct agentd_fence *fence, size_t n,
                             const struct agentd_identity *who, int (*spawn)(void *), void *arg,
                             struct agentd_hardening *out);
/* The highest Landlock ABI the hardening uses (the kernel's when lower).
 * Only the adversarial tests lower it, to play the kernels sites run. */
extern int mpi_pstate_agentd_landlock_abi_max;

/* The command line: every entry of common/agent_args.def under its field
 * name and type (offsets in cmdline.c), then what the agent derives from
 * it and from the job's options. */
struct agentd_opts {
#define MPI_PSTATE_AGENT_ARG(ID, flag, TYPE, field, def, arginfo, PASS, help)                      \
        mpi_pstate_agent_arg_##TYPE field;
#include "agent_args.def"
        uint64_t given; /* bit MPI_PSTATE_AGENT_ARG_<ID>: on the command line */
        cpu_set_t cpus; /* the step's CPUs (--cpus or its affinity): never act outside them */
        uint64_t threshold_us;
        uint64_t low_khz;                 /* 0 = min, MPI_PSTATE_FREQ_EFFICIENT */
        const char *job_governor;         /* NULL: keep */
        bool profile;                     /* never change a frequency */
        struct mpi_pstate_options jobopt; /* the job's options (common/options.def) */
        char runtime_buf[MPI_PSTATE_CONFIG_PATH_MAX + 16];
};

enum agentd_dom_status {
        AGENTD_DOM_MANAGED = 0,
        AGENTD_DOM_OUTSIDE,     /* shares CPUs with something outside the step */
        AGENTD_DOM_BUSY,        /* another job or step owns its restore record */
        AGENTD_DOM_NO_RANGE,    /* low would not be below high */
        AGENTD_DOM_UNSUPPORTED, /* the requested mechanism cannot work here */
        AGENTD_DOM_ERROR,       /* save, governor switch or open failed */
        AGENTD_DOM_PROFILE,     /* mode profile: measured, never changed */
};

/* The status's word in logs and in the record (docs/agent.md). */
static inline const char *mpi_pstate_agentd_dom_status_name(enum agentd_dom_status s)
{
        static const char *const names[] = {
            [AGENTD_DOM_MANAGED] = "managed",
            [AGENTD_DOM_OUTSIDE] = "outside",
            [AGENTD_DOM_BUSY] = "busy",
            [AGENTD_DOM_NO_RANGE] = "no_range",
            [AGENTD_DOM_UNSUPPORTED] = "unsupported",
            [AGENTD_DOM_ERROR] = "error",
            [AGENTD_DOM_PROFILE] = "profile",
        };

        return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

struct agentd_domain {
        unsigned policy; /* index in node->policies */
        char name[24];
        cpu_set_t related;
        enum agentd_dom_status status;
        char why[200];
        enum mpi_pstate_cpufreq_mech mech;
        uint32_t low_khz, high_khz;
        const char *low_src; /* what set low_khz (docs/agent.md, "Low frequency") */
        struct mpi_pstate_cpufreq_domain h;
        bool saved; /* a restore record of ours exists (or, not root: orig) */
        struct mpi_pstate_cpufreq_settings orig; /* as discovered, before any change */
        bool governor_changed;                   /* switched to userspace by the agent */
        int restore_rc; /* result of the restore at exit (1 restored, 0 none) */
        int gov_fd;     /* scaling_governor, kept to switch back from userspace */
        bool per_core;  /* its CPUs are one core's threads (loop.c, hybrid ranks) */
        bool gone_logged;
};

/* An uncore domain (common/uncore.h) the agent looked at. */
struct agentd_uncore {
        const struct mpi_pstate_uncore_domain *d;
        enum agentd_dom_status status;
        char why[200];
        struct mpi_pstate_uncore_handle h;
        bool saved;
        int restore_rc;
};

struct agentd_slot {
        /* as last validated */
        bool valid, seen, bad_logged;
        int32_t pid, rank;
        uint32_t state, clock, mode;
        int cpu;
        uint64_t thr_ns;
        uint64_t cpuset[MPI_PSTATE_SLOT_CPUSET_WORDS];
        unsigned ndoms; /* domains of its block (hybrid ranks: > 1 lets one go down) */
        uint64_t ever_mask[MPI_PSTATE_AGENT_MASK_WORDS]; /* domains it ever belonged to */
        uint64_t refreshed_ns;
        /* reported by the rank, for the record (untrusted figures) */
        uint64_t long_calls, long_ns, wakeups, slot_down_ns, slot_transitions;
        uint64_t announced, announced_short; /* waits predicted long; of those, short */
        /* liveness */
        int pidfd;
        uint32_t gen;
        _Atomic uint32_t dead_gen; /* set by the watcher thread */
        _Atomic bool dead_pending; /* the watcher saw an exit: read this slot now */
        bool dead;
        uint64_t checked_ns;  /* last look at /proc/<pid> without a pidfd */
        uint64_t start_ticks; /* its /proc/<pid>/stat start time, without a pidfd */
};

/* The CPU budget and the hard ceiling (budget.c): what they are set to,
 * and what they measured. */
struct agentd_budget {
        uint64_t budget_ppm, cap_ppm; /* millionths of a core, 0 = none */
        uint64_t scan_ns;             /* the scan interval the gap never goes below */
        uint64_t gap_ns, gap_max_ns;  /* least time between two timer wake-ups */
        uint64_t t0, cpu0, timers0, next_ns, adjusts;
        uint64_t cpu_sum, timer_sum; /* over whole periods: CPU per timer wake-up */
        uint64_t announce_offs;      /* times announcements were turned off (CPU) */
        uint32_t announce_hold;      /* budget periods they stay off, doubled at each turn */
        uint64_t announce_hold_until_ns;
        uint64_t cap_t0, cap_cpu0, capped, capped_ns, capped_raises;
        int64_t cap_credit; /* CPU ns left in the ceiling's bucket */
};

/* The liveness watcher (watcher.c): a thread blocked on the ranks'
 * pidfds, which marks a slot dead and wakes the loop through hdr. */
struct agentd_watch {
        int epfd, stopfd;
        pthread_t thread;
        bool on, pidfd_ok;
        struct agentd_slot *slots;
        unsigned nslots;
        struct mpi_pstate_seg_header *hdr;
};

struct agentd {
        struct agentd_opts o;
        char host[64];
        uint64_t start_mono_ns, start_real_ns, end_real_ns;
        uint64_t thr_ns, scan_ns; /* scan_ns: the shortest scan interval */
        struct agentd_budget budget;
        uint64_t tsc_rate;
        struct mpi_pstate_clock_sample cal;

        /* segment */
        struct mpi_pstate_segment seg;
        bool created, seg_lost;
        uid_t rank_uid; /* the ranks' real uid: the segment's owner */
        struct agentd_slot *slots;
        struct mpi_pstate_agent_obs *obs;
        struct mpi_pstate_slot *copy; /* snapshot buffer */
        uint64_t *ann;                /* announce bits taken this pass, one per slot */

        /* cpufreq */
        struct mpi_pstate_cpufreq_node *node;
        const char *cpufreq_status; /* ok|absent|error */
        char cpufreq_err[256];
        struct agentd_domain *dom;
        unsigned ndom;
        int *pol2dom; /* per policy of node: domain index or -1 */
        struct mpi_pstate_agent_core core;
        unsigned restored, restore_failed;
        uint32_t knee_khz; /* calibrate's, 0 none */

        /* uncore (agent/uncore.c): a second decision core over the same
         * ranks, its domains the packages the step owns whole */
        struct mpi_pstate_uncore_node *unode;
        struct agentd_uncore *udom;
        unsigned nudom;
        bool ucore_on; /* the core below runs */
        struct mpi_pstate_agent_core ucore;
        struct mpi_pstate_agent_obs *uobs;
        int *dom2u; /* per cpufreq domain: its uncore domain or -1 */

        /* energy */
        struct mpi_pstate_rapl rapl;
        struct mpi_pstate_rapl_sampler sampler;
        enum mpi_pstate_rapl_status rapl_status; /* of the source in use */
        uint64_t rapl_interval_ns, rapl_next_ns, rapl_samples;
        /* Without RAPL zones: hwmon (energy.h), or none.  hwmon is NULL
         * unless energy_src is HWMON. */
        enum mpi_pstate_energy_source energy_src;
        struct mpi_pstate_hwmon *hwmon;

        struct agentd_hardening hard;
        /* Root at setup: restore records were written (root's, never the
         * agent's once it runs as run_uid), and its record files were made
         * and kept open, to be filled in place at exit. */
        bool records;
        int rec_fd, sums_fd;

        struct agentd_watch watch;

        /* the agent's own figures */
        uint64_t wakeups, woken, timeouts, eagain, throttled, full_scans;
        uint64_t announced;                     /* slots read because their rank announced a wait */
        uint64_t gone_t0, gone_n, gone_dropped; /* "is gone" lines per second */
        const char *exit_reason;
};

/* CLOCK_MONOTONIC in ns: the agent's one clock (agent.h's "now"). */
static inline uint64_t mpi_pstate_agentd_mono_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* Bumps the segment's futex word inside the kernel (a truncated segment
 * gives EFAULT there, not SIGBUS here) and wakes the loop.
 * Async-signal-safe; the watcher thread calls it too. */
static inline void mpi_pstate_agentd_wake(struct mpi_pstate_seg_header *hdr)
{
        if (hdr)
                syscall(SYS_futex, &hdr->agent_futex, FUTEX_WAKE_OP, 1, (void *)0,
                        &hdr->agent_futex, FUTEX_OP(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_EQ, 0));
}

/* cmdline.c */
/* Defaults, then the MPI_PSTATE_* variables, then argv into o; --help and
 * --version print and exit.  0, or 2 after a message on stderr. */
int mpi_pstate_agentd_cmdline_parse(int argc, char **argv, struct agentd_opts *o);
/* What the agent derives from the command line: the step's CPUs, the
 * job's settings, the default runtime directory.  0, or 2 after a message. */
int mpi_pstate_agentd_cmdline_resolve(struct agentd_opts *o);
/* Whether entry id (MPI_PSTATE_AGENT_ARG_<ID>) was on the command line. */
bool mpi_pstate_agentd_given(const struct agentd_opts *o, int id);
__attribute__((format(printf, 1, 2))) int mpi_pstate_agentd_usage_error(const char *fmt, ...);

/* log.c */
int mpi_pstate_agentd_log_open(const char *spec, bool foreground, int verbose);
__attribute__((format(printf, 2, 3))) void mpi_pstate_agentd_log(int prio, const char *fmt, ...);
unsigned mpi_pstate_agentd_log_errors(void);
void mpi_pstate_agentd_log_tag(uint32_t job, uint32_t step);

/* hw.c (the uncore domains are set up and finished after it: uncore.c) */
int mpi_pstate_agentd_hw_setup(struct agentd *a);
void mpi_pstate_agentd_hw_finish(struct agentd *a);
void mpi_pstate_agentd_rapl_open(struct agentd *a);
void mpi_pstate_agentd_rapl_sample(struct agentd *a);
void mpi_pstate_agentd_rapl_close(struct agentd *a);

/* slots.c */
int mpi_pstate_agentd_segment_open(struct agentd *a, char *err, size_t errlen);
/* Re-reads slot i's identity from a validated copy of s. */
void mpi_pstate_agentd_slot_refresh(struct agentd *a, unsigned i, const struct mpi_pstate_slot *s,
                                    uint32_t state, int32_t pid, uint64_t now);
/* The waits announced since the last pass, into a->ann. */
void mpi_pstate_agentd_take_announced(struct agentd *a);
/* Whether a rank announced a wait since mpi_pstate_agentd_take_announced(). */
bool mpi_pstate_agentd_announce_pending(const struct agentd *a);
/* Observes the waiting and announced slots, or every slot when full. */
void mpi_pstate_agentd_scan(struct agentd *a, uint64_t now, bool full);
/* Every slot was claimed and its rank is gone or has ended MPI. */
bool mpi_pstate_agentd_all_done(const struct agentd *a);

/* liveness.c */
/* Starts following the process that now owns slot i. */
void mpi_pstate_agentd_slot_watch(struct agentd *a, unsigned i, int32_t pid);
/* Whether slot i's rank is gone now; its domains go up when it just went. */
void mpi_pstate_agentd_liveness(struct agentd *a, unsigned i, uint64_t now);
/* Some rank is followed without a pidfd: the loop must look every 100 ms. */
bool mpi_pstate_agentd_need_pid_checks(const struct agentd *a);

/* watcher.c.  _start is a harden() spawn: its argument is the struct agentd_watch. */
int mpi_pstate_agentd_watcher_start(void *watch);
bool mpi_pstate_agentd_watcher_add(struct agentd_watch *w, int pidfd, unsigned slot, uint32_t gen);
void mpi_pstate_agentd_watcher_stop(struct agentd_watch *w);

/* coreops.c */
int mpi_pstate_agentd_core_setup(struct agentd *a);
/* A rank's domains, for the cpufreq core and for the uncore. */
void mpi_pstate_agentd_set_rank_domains(struct agentd *a, unsigned i, const uint64_t *mask);

/* budget.c */
void mpi_pstate_agentd_budget_adjust(struct agentd_budget *b, struct mpi_pstate_seg_header *hdr,
                                     uint64_t now, uint64_t timeouts);
/* 0, or the wall time to sleep that pays the CPU ceiling's debt back. */
uint64_t mpi_pstate_agentd_cap_debt_ns(struct agentd_budget *b, uint64_t now);

/* confine.c: scheduling, the fence and the drop, once set up; the
 * liveness watcher is started in between.  Fails when the drop or the
 * watcher does. */
int mpi_pstate_agentd_confine(struct agentd *a);

/* harden.c */
/* Empties the capability sets (and, with who, becomes who first: *uid_rc
 * says how that went), then no_new_privs and not dumpable. */
int mpi_pstate_agentd_drop_caps(const struct agentd_identity *who, int *uid_rc);
int mpi_pstate_agentd_seccomp(void);

/* loop.c */
int mpi_pstate_agentd_run(struct agentd *a, volatile sig_atomic_t *stop);
void mpi_pstate_agentd_teardown(struct agentd *a);
void mpi_pstate_agentd_poke(struct agentd *a); /* async-signal-safe wake-up */

/* uncore.c */
void mpi_pstate_agentd_uncore_setup(struct agentd *a);
int mpi_pstate_agentd_uncore_core_setup(struct agentd *a);
/* The uncore domains of a rank whose cpufreq domains are mask. */
void mpi_pstate_agentd_uncore_set_rank(struct agentd *a, unsigned r, const uint64_t *mask);
/* The uncore observation of rank i from its core one and its wait's start. */
void mpi_pstate_agentd_uncore_obs(struct agentd *a, unsigned i, uint64_t since_ns);
void mpi_pstate_agentd_uncore_finish(struct agentd *a);
void mpi_pstate_agentd_uncore_free(struct agentd *a);

/* record.c */
/* Makes agent.json and sums.json empty beside --record and keeps them
 * open (a->rec_fd, a->sums_fd), before the agent leaves root. */
int mpi_pstate_agentd_record_files_open(struct agentd *a);
int mpi_pstate_agentd_record_write(struct agentd *a);
/* sums.json beside the record: the step's totals for a node Epilog that
 * does not detail it (docs/agent.md, section 10). */
int mpi_pstate_agentd_sums_write(struct agentd *a);
/* The directory part of an absolute file path (the record's, the
 * segment's) into dir; -EINVAL for a path with no file name. */
int mpi_pstate_agentd_parent_dir(const char *path, char *dir, size_t len);

#endif
