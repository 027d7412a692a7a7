/* SPDX-License-Identifier: BSD-3-Clause */
/* mpi-pstate-agent: command line, the --restore backstop, detaching and
 * signals.  man/mpi-pstate-agent.8 and docs/agent.md describe the options.
 *
 * Exit status: 0 once the agent runs (the parent returns when the daemon
 * is ready) or a --restore pass restored everything; 1 when the agent
 * could not start or a restore failed; 2 for a usage error.  A caller in a
 * job (the SPANK plugin) logs a non-zero status and carries on: the job
 * must never fail because of the agent. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"
#include "contract.h"
#include "options.h"
#include "parse.h"
#include "safeio.h"

#ifndef MPI_PSTATE_VERSION
#define MPI_PSTATE_VERSION "0"
#endif

static volatile sig_atomic_t stop_flag;

/* A test seam: the adversarial test links a program of the agent's own
 * objects with a probe that defines this, run once the agent is confined
 * and before its loop (tests/agent/probe.c).  The agent defines none. */
extern void mpi_pstate_agentd_test_probe(struct agentd *a) __attribute__((weak));
static struct agentd agent;

static const char usage_text[] =
    "usage: mpi-pstate-agent --shm PATH [--create N] --job J --step S [options]\n"
    "       mpi-pstate-agent --restore DIR [--job J [--step S]] [--cpus LIST] [--sysroot DIR]\n"
    "\n"
    "  --shm PATH             the step's shared-memory segment (created with --create)\n"
    "  --create N             create the segment with N slots, owned by --uid/--gid\n"
    "  --nslots N             the segment has N slots (the creator's figure; a header\n"
    "                         saying otherwise is refused)\n"
    "  --cpus LIST            the step's CPUs (default: the agent's own affinity)\n"
    "  --job J --step S       owner of the restore records\n"
    "  --uid U --gid G        owner of the segment (checked when attaching)\n"
    "  --run-uid U --run-gid G  started as root: whom the agent runs as once its\n"
    "                         files are open (an unnamed id, 65531, by default)\n"
    "  --mechanism auto|max_freq|setspeed|epp\n"
    "  --allow-governor BOOL  may switch a policy to userspace for setspeed (yes)\n"
    "  --freq-min FREQ        the site's floor (freq_min): \"min\" is never below it\n"
    "  --knee-file FILE       calibrate's knee, for --low efficient (" AGENTD_KNEE_FILE ")\n"
    "  --uncore BOOL          lower an uncore domain the step owns whole while every\n"
    "                         rank on it waits (no)\n"
    "  --uncore-threshold D   how long they must all wait first (10ms)\n"
    "  --scan-interval D      shortest scan interval (default: the threshold)\n"
    "  --cpu-budget PERCENT   stretch the scan interval to stay below this (0.5, 0 = off)\n"
    "  --cpu-cap PERCENT      never use more, whatever the ranks do (5, 0 = off)\n"
    "  --runtime-dir DIR      restore records (default /run/mpi-pstate/<job>)\n"
    "  --record FILE          write the agent record (JSON) there at exit\n"
    "  --sysroot DIR          sysfs root (/sys)\n"
    "  --node NAME            node name in the record (default: the short host name)\n"
    "  --log FILE|syslog|stderr --pidfile FILE --foreground --exit-when-done\n"
    "  --keep-shm --rt-prio N (1; 0 = normal scheduling) -v --version --help\n"
    "\n"
    "The job's options, as srun names them or by their short key (common/options.def;\n"
    "the mode defaults to on, the others to the MPI_PSTATE_* variables, then the\n"
    "built-in defaults; the plugin passes them with the site's limits applied):\n";

enum {
        OPT_SHM = 256,
        OPT_CREATE,
        OPT_NSLOTS,
        OPT_CPUS,
        OPT_JOB,
        OPT_STEP,
        OPT_UID,
        OPT_GID,
        OPT_RUN_UID,
        OPT_RUN_GID,
        OPT_MECH,
        OPT_ALLOW_GOV,
        OPT_FREQ_MIN,
        OPT_SCAN,
        OPT_RUNTIME,
        OPT_RECORD,
        OPT_SYSROOT,
        OPT_LOG,
        OPT_PIDFILE,
        OPT_FOREGROUND,
        OPT_EXIT_DONE,
        OPT_KEEP_SHM,
        OPT_RT,
        OPT_BUDGET,
        OPT_CAP,
        OPT_NODE,
        OPT_RESTORE,
        OPT_KNEE,
        OPT_UNCORE,
        OPT_UNCORE_THR,
        OPT_VERSION,
        OPT_TABLE, /* + MPI_PSTATE_OPT_<ID>: the entries of options.def */
};

static const struct option longopts[] = {
    {"shm", required_argument, NULL, OPT_SHM},
    {"create", required_argument, NULL, OPT_CREATE},
    {"nslots", required_argument, NULL, OPT_NSLOTS},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"job", required_argument, NULL, OPT_JOB},
    {"step", required_argument, NULL, OPT_STEP},
    {"uid", required_argument, NULL, OPT_UID},
    {"gid", required_argument, NULL, OPT_GID},
    {"run-uid", required_argument, NULL, OPT_RUN_UID},
    {"run-gid", required_argument, NULL, OPT_RUN_GID},
    {"mechanism", required_argument, NULL, OPT_MECH},
    {"allow-governor", required_argument, NULL, OPT_ALLOW_GOV},
    {"freq-min", required_argument, NULL, OPT_FREQ_MIN},
    {"scan-interval", required_argument, NULL, OPT_SCAN},
    {"runtime-dir", required_argument, NULL, OPT_RUNTIME},
    {"record", required_argument, NULL, OPT_RECORD},
    {"sysroot", required_argument, NULL, OPT_SYSROOT},
    {"log", required_argument, NULL, OPT_LOG},
    {"pidfile", required_argument, NULL, OPT_PIDFILE},
    {"foreground", no_argument, NULL, OPT_FOREGROUND},
    {"exit-when-done", no_argument, NULL, OPT_EXIT_DONE},
    {"keep-shm", no_argument, NULL, OPT_KEEP_SHM},
    {"rt-prio", required_argument, NULL, OPT_RT},
    {"cpu-budget", required_argument, NULL, OPT_BUDGET},
    {"cpu-cap", required_argument, NULL, OPT_CAP},
    {"node", required_argument, NULL, OPT_NODE},
    {"restore", required_argument, NULL, OPT_RESTORE},
    {"knee-file", required_argument, NULL, OPT_KNEE},
    {"uncore", required_argument, NULL, OPT_UNCORE},
    {"uncore-threshold", required_argument, NULL, OPT_UNCORE_THR},
    {"verbose", no_argument, NULL, 'v'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"help", no_argument, NULL, 'h'},
/* Every user option under its srun name and its short key; the plugin
 * writes the srun names (mpi_pstate_agentctl_argv). */
#define MPI_PSTATE_OPTION(ID, field, TYPE, name, bare, arginfo, key, env, def, usage, doc)         \
        {name, required_argument, NULL, OPT_TABLE + MPI_PSTATE_OPT_##ID},                          \
            {key, required_argument, NULL, OPT_TABLE + MPI_PSTATE_OPT_##ID},
#include "options.def"
    {NULL, 0, NULL, 0},
};

/* Everything the command line says, before it becomes agentd_opts. */
struct cmdline {
        struct mpi_pstate_options opt; /* the job's options (options.def) */
        bool have_cpus, have_job, have_step;
        const char *restore_dir;
        char runtime_buf[MPI_PSTATE_CONFIG_PATH_MAX + 16];
};

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
        va_list ap;

        fputs("mpi-pstate-agent: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs("\n(mpi-pstate-agent --help for the options)\n", stderr);
        return 2;
}

static int set_option(struct cmdline *cl, int id, const char *value)
{
        char err[256];

        if (mpi_pstate_options_set_id(&cl->opt, id, value, err, sizeof(err)) != 0) {
                fprintf(stderr, "%s\n", err);
                return 2;
        }
        return 0;
}

static void print_usage(void)
{
        const struct mpi_pstate_option_info *in;

        static const char tag[] = "[mpi-pstate] ";

        fputs(usage_text, stdout);
        for (int id = 0; (in = mpi_pstate_options_info(id)); id++) {
                const char *u = in->usage;

                if (strncmp(u, tag, sizeof(tag) - 1) == 0)
                        u += sizeof(tag) - 1;
                printf("  --%s, --%s %s\n      %s (default %s)\n", in->name, in->key, in->arginfo,
                       u, id == MPI_PSTATE_OPT_MODE ? "on" : in->def);
        }
}

/* One group of the agent's own options each: 0, a usage error (2), or
 * NOT_MINE when c belongs to another group. */
#define NOT_MINE (-1)

static int step_arg(int c, const char *arg, struct cmdline *cl, struct agentd_opts *o)
{
        uint64_t v;
        uint32_t id;

        switch (c) {
        case OPT_SHM:
                if (arg[0] != '/')
                        return usage_error("--shm needs an absolute path");
                o->shm = arg;
                break;
        case OPT_CREATE:
                if (mpi_pstate_parse_u64(arg, 1, MPI_PSTATE_SEG_MAX_SLOTS, &v))
                        return usage_error("--create needs 1..%u slots, not '%s'",
                                           MPI_PSTATE_SEG_MAX_SLOTS, arg);
                o->create = (uint32_t)v;
                break;
        case OPT_NSLOTS:
                if (mpi_pstate_parse_u64(arg, 1, MPI_PSTATE_SEG_MAX_SLOTS, &v))
                        return usage_error("--nslots needs 1..%u slots, not '%s'",
                                           MPI_PSTATE_SEG_MAX_SLOTS, arg);
                o->nslots = (uint32_t)v;
                break;
        case OPT_CPUS:
                if (mpi_pstate_cpufreq_parse_cpulist(arg, &o->cpus) || CPU_COUNT(&o->cpus) == 0)
                        return usage_error("invalid CPU list '%s'", arg);
                cl->have_cpus = true;
                break;
        case OPT_JOB:
        case OPT_STEP:
                if (mpi_pstate_parse_u64(arg, 0, UINT32_MAX, &v))
                        return usage_error("invalid %s '%s'", c == OPT_JOB ? "job" : "step", arg);
                if (c == OPT_JOB) {
                        o->job = (uint32_t)v;
                        cl->have_job = true;
                } else {
                        o->step = (uint32_t)v;
                        cl->have_step = true;
                }
                break;
        case OPT_UID:
        case OPT_GID:
                if (mpi_pstate_parse_id(arg, c == OPT_GID, &id, NULL) < 0)
                        return usage_error("unknown %s '%s'", c == OPT_GID ? "group" : "user", arg);
                if (c == OPT_UID)
                        o->uid = id;
                else
                        o->gid = id;
                break;
        case OPT_RUN_UID:
        case OPT_RUN_GID:
                if (mpi_pstate_parse_id(arg, c == OPT_RUN_GID, &id, NULL) < 0 || id == 0)
                        return usage_error("--%s needs a %s other than root's, not '%s'",
                                           c == OPT_RUN_GID ? "run-gid" : "run-uid",
                                           c == OPT_RUN_GID ? "group" : "user", arg);
                if (c == OPT_RUN_UID)
                        o->run_uid = id;
                else
                        o->run_gid = id;
                break;
        default:
                return NOT_MINE;
        }
        return 0;
}

/* The levers and how far they may go. */
static int lever_arg(int c, const char *arg, struct agentd_opts *o)
{
        uint64_t v;
        bool b;

        switch (c) {
        case OPT_MECH:
                if (mpi_pstate_cpufreq_mech_parse(arg, &o->mech))
                        return usage_error("--mechanism is auto, max_freq, setspeed or epp, not "
                                           "'%s'",
                                           arg);
                break;
        case OPT_KNEE:
                o->knee_file = arg;
                break;
        case OPT_UNCORE:
                if (mpi_pstate_parse_bool(arg, &b))
                        return usage_error("--uncore needs yes or no, not '%s'", arg);
                o->uncore = b;
                break;
        case OPT_UNCORE_THR:
                if (mpi_pstate_parse_duration_us(arg, &v))
                        return usage_error("invalid duration '%s'", arg);
                o->uncore_threshold_us = v;
                break;
        case OPT_ALLOW_GOV:
                if (mpi_pstate_parse_bool(arg, &b))
                        return usage_error("--allow-governor needs yes or no, not '%s'", arg);
                o->allow_governor = b;
                break;
        case OPT_FREQ_MIN:
                if (mpi_pstate_parse_freq_khz(arg, &v))
                        return usage_error("invalid frequency '%s'", arg);
                o->freq_min_khz = v;
                break;
        default:
                return NOT_MINE;
        }
        return 0;
}

/* How the agent itself runs: its scan, CPU budget and ceiling, node name,
 * real-time priority. */
static int budget_arg(int c, const char *arg, struct agentd_opts *o)
{
        uint64_t v;

        switch (c) {
        case OPT_SCAN:
                if (mpi_pstate_parse_duration_us(arg, &v))
                        return usage_error("invalid duration '%s'", arg);
                o->scan_us = v;
                break;
        case OPT_BUDGET:
                if (mpi_pstate_parse_percent_ppm(arg, &o->budget_ppm))
                        return usage_error("--cpu-budget needs a percentage such as 0.5, "
                                           "not '%s'",
                                           arg);
                break;
        case OPT_CAP:
                if (mpi_pstate_parse_percent_ppm(arg, &o->cap_ppm))
                        return usage_error("--cpu-cap needs a percentage such as 5, "
                                           "not '%s'",
                                           arg);
                break;
        case OPT_NODE:
                if (mpi_pstate_safeio_check_name(arg, 63))
                        return usage_error("invalid node name '%s'", arg);
                o->node = arg;
                break;
        case OPT_RT:
                if (mpi_pstate_parse_u64(arg, 0, 99, &v))
                        return usage_error("--rt-prio needs 0..99, not '%s'", arg);
                o->rt_prio = (int)v;
                break;
        default:
                return NOT_MINE;
        }
        return 0;
}

static int output_arg(int c, char *arg, struct cmdline *cl, struct agentd_opts *o)
{
        switch (c) {
        case OPT_RUNTIME:
        case OPT_RECORD:
        case OPT_PIDFILE:
        case OPT_RESTORE:
                if (arg[0] != '/')
                        return usage_error("paths must be absolute: '%s'", arg);
                if (c == OPT_RUNTIME)
                        o->runtime_dir = arg;
                else if (c == OPT_RECORD)
                        o->record = arg;
                else if (c == OPT_PIDFILE)
                        o->pidfile = arg;
                else
                        cl->restore_dir = arg;
                break;
        case OPT_SYSROOT:
                o->sysroot = arg;
                break;
        case OPT_LOG:
                o->log = arg;
                break;
        case OPT_FOREGROUND:
                o->foreground = true;
                break;
        case OPT_EXIT_DONE:
                o->exit_when_done = true;
                break;
        case OPT_KEEP_SHM:
                o->keep_shm = true;
                break;
        default:
                return NOT_MINE;
        }
        return 0;
}

static int parse_args(int argc, char **argv, struct cmdline *cl, struct agentd_opts *o)
{
        int c, rc;

        while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
                if ((rc = step_arg(c, optarg, cl, o)) != NOT_MINE ||
                    (rc = lever_arg(c, optarg, o)) != NOT_MINE ||
                    (rc = budget_arg(c, optarg, o)) != NOT_MINE ||
                    (rc = output_arg(c, optarg, cl, o)) != NOT_MINE) {
                        if (rc)
                                return rc;
                        continue;
                }
                switch (c) {
                case 'v':
                        o->verbose++;
                        break;
                case OPT_VERSION:
                        printf("mpi-pstate-agent %s (record version %d)\n", MPI_PSTATE_VERSION,
                               AGENTD_RECORD_VERSION);
                        exit(0);
                case 'h':
                        print_usage();
                        exit(0);
                default:
                        if (c >= OPT_TABLE && c < OPT_TABLE + MPI_PSTATE_OPT_COUNT) {
                                if ((rc = set_option(cl, c - OPT_TABLE, optarg)))
                                        return rc;
                                break;
                        }
                        return usage_error("unknown option");
                }
        }
        if (optind < argc)
                return usage_error("unexpected argument '%s'", argv[optind]);
        return 0;
}

/* Turns the command line into settings: the job's options and the step's
 * CPUs.  The site's limits were applied once, by the plugin (or the
 * launcher) that wrote the command line; the agent only keeps "min" above
 * --freq-min when it resolves it on the hardware. */
static int resolve(struct cmdline *cl, struct agentd_opts *o)
{
        if (cl->opt.mode == MPI_PSTATE_MODE_OFF)
                return usage_error("mode off: there is nothing for an agent to do");
        o->profile = cl->opt.mode == MPI_PSTATE_MODE_PROFILE;
        o->threshold_us = cl->opt.threshold_us;
        o->low_khz = cl->opt.low_khz;
        o->job_governor = cl->opt.governor == MPI_PSTATE_GOVERNOR_KEEP
                              ? NULL
                              : mpi_pstate_options_governor_word(cl->opt.governor);
        if (!o->shm)
                return usage_error("--shm is required");
        if (!cl->have_job || !cl->have_step)
                return usage_error("--job and --step are required (owner of the restore records)");
        if (!cl->have_cpus && sched_getaffinity(0, sizeof(o->cpus), &o->cpus) != 0)
                return usage_error("no --cpus, and the agent's own affinity is unknown");
        if (!o->runtime_dir) {
                snprintf(cl->runtime_buf, sizeof(cl->runtime_buf), "%s/%u",
                         MPI_PSTATE_CONFIG_RUNTIME_DIR, o->job);
                o->runtime_dir = cl->runtime_buf;
        }
        return 0;
}

static int restore_mode(const struct cmdline *cl, const struct agentd_opts *o)
{
        struct mpi_pstate_restore_owner who = {o->job, o->step};
        struct mpi_pstate_restore_summary sum;
        unsigned flags = 0;
        char err[256] = "";
        int rc;

        if (!cl->have_job)
                flags = MPI_PSTATE_RESTORE_ANY_OWNER;
        else if (!cl->have_step)
                flags = MPI_PSTATE_RESTORE_ANY_STEP;
        rc = mpi_pstate_restore_all_within(cl->restore_dir, o->sysroot, &who, flags,
                                           cl->have_cpus ? &o->cpus : NULL, &sum, err, sizeof(err));
        printf("mpi-pstate-agent: restore %s: %u restored, %u foreign, %u failed%s%s\n",
               cl->restore_dir, sum.restored, sum.foreign, sum.failed, rc ? ": " : "",
               rc ? (err[0] ? err : strerror(-rc)) : "");
        return rc ? 1 : 0;
}

static void on_stop(int sig)
{
        int saved = errno;

        (void)sig;
        stop_flag = 1;
        mpi_pstate_agentd_poke(&agent);
        errno = saved;
}

static void install_signals(void)
{
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_stop; /* no SA_RESTART: the futex wait must return */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        sa.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &sa, NULL);
        /* Past RLIMIT_FSIZE a write fails with EFBIG instead. */
        sigaction(SIGXFSZ, &sa, NULL);
}

/* Parent side of detaching: waits for the daemon's "ok" or its error, and
 * returns the exit status of the command. */
static int wait_ready(int fd, pid_t child, const struct agentd_opts *o)
{
        char buf[1024];
        size_t len = 0;
        ssize_t n;
        int st;

        while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        close(fd);
        waitpid(child, &st, 0); /* the intermediate child exits at once */
        if (strncmp(buf, "ok ", 3) == 0) {
                if (o->create)
                        printf("MPI_PSTATE_SHM=%s\nMPI_PSTATE_AGENT_PID=%ld\n", o->shm,
                               strtol(buf + 3, NULL, 10));
                return 0;
        }
        fprintf(stderr, "mpi-pstate-agent: %s\n",
                len > 6 && strncmp(buf, "error ", 6) == 0 ? buf + 6
                                                          : "the agent died while starting");
        return 1;
}

/* Returns -1 in the daemon (go on, *ready is the pipe to report to), or the
 * parent's exit status. */
static int detach(const struct agentd_opts *o, int *ready)
{
        int p[2], nul;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) != 0) {
                perror("mpi-pstate-agent: pipe");
                return 1;
        }
        fflush(NULL);
        pid = fork();
        if (pid < 0) {
                perror("mpi-pstate-agent: fork");
                return 1;
        }
        if (pid > 0) {
                close(p[1]);
                return wait_ready(p[0], pid, o);
        }
        close(p[0]);
        setsid();
        /* Not a session leader: can never acquire a controlling terminal. */
        pid = fork();
        if (pid != 0)
                _exit(pid < 0 ? 1 : 0);
        if (chdir("/") != 0)
                _exit(1);
        umask(022);
        nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nul >= 0) {
                dup2(nul, STDIN_FILENO);
                dup2(nul, STDOUT_FILENO);
                dup2(nul, STDERR_FILENO);
                if (nul > STDERR_FILENO)
                        close(nul);
        }
        /* Nothing of slurmstepd's (or the shell's) stays open in a root daemon. */
        if (p[1] > 3)
                close_range(3, (unsigned)p[1] - 1, 0);
        close_range((unsigned)p[1] + 1, ~0u, 0);
        *ready = p[1];
        return -1;
}

__attribute__((format(printf, 2, 3))) static void report(int fd, const char *fmt, ...)
{
        char buf[600];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (fd < 0 || n <= 0)
                return;
        if ((size_t)n >= sizeof(buf))
                n = sizeof(buf) - 1;
        ssize_t w = write(fd, buf, (size_t)n);
        (void)w;
}

static int write_pidfile(const char *path)
{
        char dir[4096], line[32];
        const char *slash = strrchr(path, '/');
        int dfd, rc, n;

        if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir))
                return -EINVAL;
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
        dfd = mpi_pstate_safeio_open_dir(dir, 1, 0755);
        if (dfd < 0)
                return dfd;
        n = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
        rc = mpi_pstate_safeio_write_atomic(dfd, slash + 1, line, (size_t)n, 0644,
                                            MPI_PSTATE_SAFEIO_NOSYNC);
        close(dfd);
        return rc;
}

static uint64_t clock_ns(clockid_t c)
{
        struct timespec ts;

        clock_gettime(c, &ts);
        return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* The TSC rate, over 10 ms from the agent's start (its setup counts).  A
 * stop request ends the wait early: no SA_RESTART on the stop signals, so
 * it interrupts the nap.  A step that short needs the rate only for its
 * record, and the baseline of at least 1 ms still gives it to about 1e-4;
 * slurmstepd, meanwhile, waits for the agent to be gone. */
static void calibrate(struct agentd *a)
{
        const uint64_t full_ns = 10000000, least_ns = 1000000;
        struct mpi_pstate_clock_sample now;

        mpi_pstate_slot_clock_sample(MPI_PSTATE_CLOCK_TSC, &now);
        if (!stop_flag && now.ns > a->cal.ns && now.ns - a->cal.ns < full_ns) {
                struct timespec nap = {.tv_sec = 0,
                                       .tv_nsec = (long)(full_ns - (now.ns - a->cal.ns))};

                (void)nanosleep(&nap, NULL);
        }
        a->tsc_rate = mpi_pstate_slot_clock_rate(MPI_PSTATE_CLOCK_TSC, &a->cal,
                                                 stop_flag ? least_ns : full_ns);
}

/* The daemon proper; ready < 0 in the foreground. */
/* Who and where the agent is, its clocks and intervals, and its CPUs. */
static void settle(struct agentd *a)
{
        mpi_pstate_agentd_log_tag(a->o.job, a->o.step);
        if (a->o.node) {
                snprintf(a->host, sizeof(a->host), "%s", a->o.node);
        } else {
                gethostname(a->host, sizeof(a->host) - 1);
                a->host[strcspn(a->host, ".")] = '\0';
        }
        a->start_mono_ns = clock_ns(CLOCK_MONOTONIC);
        a->start_real_ns = clock_ns(CLOCK_REALTIME);
        a->thr_ns = a->o.threshold_us * 1000u;
        a->scan_ns = a->o.scan_us ? a->o.scan_us * 1000u
                                  : mpi_pstate_agent_scan_ns(a->thr_ns, AGENTD_SCAN_MIN_NS,
                                                             AGENTD_SCAN_MAX_NS);
        a->budget.budget_ppm = a->o.budget_ppm;
        a->budget.cap_ppm = a->o.cap_ppm;
        a->budget.scan_ns = a->scan_ns;
        /* Deadlines are met to the nanosecond the kernel can, not within the
         * default 50 us of timer slack. */
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
        /* Confined to the step's CPUs (threads started later inherit it):
         * SCHED_FIFO then preempts only the step's own ranks, never another
         * job, and the CPU ceiling bounds what it takes from them. */
        if (CPU_COUNT(&a->o.cpus) && sched_setaffinity(0, sizeof(a->o.cpus), &a->o.cpus) != 0)
                mpi_pstate_agentd_log(LOG_WARNING, "affinity to the step's CPUs: %s",
                                      strerror(errno));
}

/* Where the hardened agent may still change files.  Started as root, it
 * writes only through the descriptors root opened for it, and may read
 * only /proc (its ranks' status).  Started as a user (mpi-pstate exec on
 * a node where the user may write cpufreq): its domains' sysfs
 * directories (lower, raise, restore from memory) and the segment's
 * directory when it removes the segment it made. */
static size_t fence(struct agentd *a, struct agentd_fence *f, size_t max, char *shm_dir,
                    size_t shm_len)
{
        size_t n = 0;

        if (a->records) {
                f[n++] = (struct agentd_fence){"/proc", AGENTD_FENCE_READ};
                return n;
        }
        for (unsigned i = 0; i < a->ndom && n + 2 < max; i++)
                if (a->dom[i].saved || a->dom[i].status == AGENTD_DOM_MANAGED)
                        f[n++] = (struct agentd_fence){a->node->policies[a->dom[i].policy].dir,
                                                       AGENTD_FENCE_WRITE};
        for (unsigned i = 0; i < a->nudom && n + 2 < max; i++)
                if (a->udom[i].saved)
                        f[n++] = (struct agentd_fence){a->udom[i].d->dir, AGENTD_FENCE_WRITE};
        if (a->created && !a->o.keep_shm &&
            mpi_pstate_agentd_parent_dir(a->o.shm, shm_dir, shm_len) == 0)
                f[n++] = (struct agentd_fence){shm_dir, AGENTD_FENCE_REMOVE};
        return n;
}

/* A segment the agent made (--create without --keep-shm) is removed when
 * the agent ends; once it runs as its own uid it may not remove the job
 * user's file from /dev/shm, so a root process that reads nothing does:
 * it holds only the read end of a pipe whose write end is the agent's,
 * and on EOF (the agent is gone, however it ended) removes the name if it
 * is still the segment's inode. */
static void spawn_remover(const struct agentd *a)
{
        struct stat made;
        int p[2];
        pid_t pid;
        char c;

        if (!a->records || !a->created || a->o.keep_shm || stat(a->o.shm, &made) != 0 ||
            pipe2(p, O_CLOEXEC) != 0)
                return;
        pid = fork();
        if (pid == 0) {
                struct stat now;

                close(p[1]);
                /* the pipe alone: not even the standard descriptors */
                close_range(0, (unsigned)p[0] - 1, 0);
                close_range((unsigned)p[0] + 1, ~0u, 0);
                while (read(p[0], &c, 1) < 0 && errno == EINTR)
                        ;
                if (lstat(a->o.shm, &now) == 0 && now.st_dev == made.st_dev &&
                    now.st_ino == made.st_ino)
                        unlink(a->o.shm);
                _exit(0);
        }
        close(p[0]);
        if (pid < 0) {
                close(p[1]);
                mpi_pstate_agentd_log(LOG_WARNING, "no remover for %s: %s", a->o.shm,
                                      strerror(errno));
        }
        /* p[1] stays open, unused, until the agent exits */
}

/* Scheduling and privileges for the loop, once setup is done; the liveness
 * watcher is started in between (mpi_pstate_agentd_harden()).  Fails only
 * when the watcher cannot start. */
static int confine(struct agentd *a)
{
        struct agentd_fence f[MPI_PSTATE_AGENT_MAX_DOMAINS + MPI_PSTATE_UNCORE_MAX + 2];
        const struct agentd_identity who = {a->o.run_uid, a->o.run_gid,
                                            AGENTD_FILE_MAX_BYTES +
                                                (uint64_t)a->seg.nslots * AGENTD_FILE_SLOT_BYTES};
        struct agentd_hardening *h = &a->hard;
        char shm_dir[4096];
        size_t n;
        int rc;

        if (a->o.rt_prio) {
                struct sched_param sp = {.sched_priority = a->o.rt_prio};

                /* A rank that computes on every core must not delay a
                 * restore by a scheduler time slice. */
                if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
                        mpi_pstate_agentd_log(LOG_WARNING, "SCHED_FIFO %d: %s", a->o.rt_prio,
                                              strerror(errno));
        }
        /* Everything that needs root is done (the user's segment mapped,
         * SCHED_FIFO and affinity set, every file opened): the loop, the
         * restore and the record need only the descriptors.  The time zone
         * is read now, while /etc may still be read. */
        tzset();
        spawn_remover(a);
        n = fence(a, f, sizeof(f) / sizeof(f[0]), shm_dir, sizeof(shm_dir));
        rc = mpi_pstate_agentd_harden(f, n, a->records ? &who : NULL,
                                      mpi_pstate_agentd_watcher_start, &a->watch, h);
        if (h->uid_rc) {
                mpi_pstate_agentd_log(LOG_ERR, "running as uid %u gid %u: %s: not started",
                                      (unsigned)who.uid, (unsigned)who.gid, strerror(-h->uid_rc));
                return h->uid_rc;
        }
        if (h->caps_rc)
                mpi_pstate_agentd_log(LOG_WARNING, "dropping capabilities: %s",
                                      strerror(-h->caps_rc));
        if (h->landlock_rc)
                mpi_pstate_agentd_log(
                    LOG_WARNING, "Landlock: %s: the agent's writes are not confined", h->landlock);
        if (h->seccomp_rc)
                mpi_pstate_agentd_log(LOG_WARNING, "seccomp allow-list: %s",
                                      strerror(-h->seccomp_rc));
        return rc;
}

/* Restore and record, whether or not the loop ever ran. */
static void finish(struct agentd *a, bool started)
{
        int rc;

        mpi_pstate_agentd_rapl_sample(a);
        mpi_pstate_agentd_hw_finish(a);
        mpi_pstate_agentd_uncore_finish(a);
        a->end_real_ns = clock_ns(CLOCK_REALTIME);
        if (started) {
                rc = mpi_pstate_agentd_record_write(a);
                if (rc)
                        mpi_pstate_agentd_log(LOG_ERR, "record %s: %s", a->o.record, strerror(-rc));
                rc = mpi_pstate_agentd_sums_write(a);
                if (rc)
                        mpi_pstate_agentd_log(LOG_ERR, "sums beside %s: %s", a->o.record,
                                              strerror(-rc));
                if (a->rec_fd >= 0)
                        close(a->rec_fd);
                if (a->sums_fd >= 0)
                        close(a->sums_fd);
                a->rec_fd = a->sums_fd = -1;
                mpi_pstate_agentd_log(LOG_INFO,
                                      "stopped (%s): %llu lowerings, %llu raises, %u domain(s) "
                                      "restored, %u failed",
                                      a->exit_reason, (unsigned long long)a->core.stats.lowers,
                                      (unsigned long long)a->core.stats.raises, a->restored,
                                      a->restore_failed);
        }
        mpi_pstate_agentd_rapl_close(a);
        mpi_pstate_agentd_teardown(a);
}

/* Everything between the segment and the loop: the hardware, the
 * decision core, the meters, the pidfile and the confinement.  On failure
 * err says which. */
static int setup(struct agentd *a, char *err, size_t errlen)
{
        int rc;

        a->records = geteuid() == 0;
        rc = mpi_pstate_agentd_hw_setup(a);

        if (!rc && a->node)
                mpi_pstate_agentd_uncore_setup(a);
        if (!rc)
                rc = mpi_pstate_agentd_core_setup(a);
        if (rc) {
                snprintf(err, errlen, "setup failed: %s", strerror(-rc));
                return rc;
        }
        mpi_pstate_agentd_rapl_open(a);
        calibrate(a);
        if (a->o.pidfile && (rc = write_pidfile(a->o.pidfile)) != 0) {
                snprintf(err, errlen, "pidfile %s: %s", a->o.pidfile, strerror(-rc));
                return rc;
        }
        rc = mpi_pstate_agentd_record_files_open(a);
        if (rc)
                mpi_pstate_agentd_log(LOG_ERR, "record %s: %s", a->o.record, strerror(-rc));
        rc = confine(a);
        if (rc)
                snprintf(err, errlen, "%s: %s",
                         a->hard.uid_rc ? "leaving root" : "starting the liveness watcher",
                         strerror(-rc));
        return rc;
}

static int run_agent(struct agentd *a, int ready)
{
        char err[512] = "";
        bool started = false;
        int rc;

        rc = mpi_pstate_agentd_log_open(a->o.log, a->o.foreground, a->o.verbose);
        if (rc) {
                report(ready, "error cannot open the log %s: %s\n", a->o.log, strerror(-rc));
                return 1;
        }
        settle(a);
        mpi_pstate_slot_clock_sample(MPI_PSTATE_CLOCK_TSC, &a->cal);
        rc = mpi_pstate_agentd_segment_open(a, err, sizeof(err));
        if (rc) {
                mpi_pstate_agentd_log(LOG_ERR, "%s", err);
                report(ready, "error %s\n", err);
                return 1;
        }
        install_signals();
        rc = setup(a, err, sizeof(err));
        if (rc)
                goto fail;
        mpi_pstate_agentd_log(
            LOG_INFO,
            "running: %u slots in %s, %u domain(s), threshold %lluus, scan %lluus, "
            "mode %s",
            a->seg.nslots, a->o.shm, a->ndom, (unsigned long long)a->o.threshold_us,
            (unsigned long long)(a->scan_ns / 1000u), a->o.profile ? "profile" : "on");
        report(ready, "ok %ld\n", (long)getpid());
        if (ready >= 0)
                close(ready);
        else if (a->o.create) {
                /* the launcher reads these before it starts the ranks */
                printf("MPI_PSTATE_SHM=%s\nMPI_PSTATE_AGENT_PID=%ld\n", a->o.shm, (long)getpid());
                fflush(stdout);
        }
        ready = -1;
        started = true;
        if (mpi_pstate_agentd_test_probe)
                mpi_pstate_agentd_test_probe(a);
        mpi_pstate_agentd_run(a, &stop_flag);
        goto finish;
fail:
        mpi_pstate_agentd_log(LOG_ERR, "%s", err);
        report(ready, "error %s\n", err);
        a->exit_reason = "setup_failed";
finish:
        finish(a, started);
        return started ? 0 : 1;
}

int main(int argc, char **argv)
{
        struct cmdline cl;
        struct agentd_opts *o = &agent.o;
        char err[512];
        int rc, ready = -1;

        memset(&cl, 0, sizeof(cl));
        agent.rec_fd = agent.sums_fd = -1;
        mpi_pstate_options_defaults(&cl.opt);
        cl.opt.mode = MPI_PSTATE_MODE_ON;
        /* The plugin's variables, if the agent inherited them, are defaults
         * for the options (the command line wins). */
        if (mpi_pstate_options_from_env(&cl.opt, err, sizeof(err)) != 0)
                return usage_error("%s", err);
        if (!getenv(MPI_PSTATE_ENV_MODE))
                cl.opt.mode = MPI_PSTATE_MODE_ON;
        o->uid = (uid_t)-1;
        o->gid = (gid_t)-1;
        o->run_uid = AGENTD_UNNAMED_ID;
        o->run_gid = AGENTD_UNNAMED_ID;
        o->mech = MPI_PSTATE_CPUFREQ_MECH_AUTO;
        o->allow_governor = true;
        o->sysroot = "/sys";
        o->rt_prio = 1;
        o->knee_file = AGENTD_KNEE_FILE;
        o->uncore_threshold_us = AGENTD_UNCORE_THRESHOLD_US;
        o->budget_ppm = 5000;
        o->cap_ppm = 50000;
        rc = parse_args(argc, argv, &cl, o);
        if (rc)
                return rc;
        if (cl.restore_dir)
                return restore_mode(&cl, o);
        rc = resolve(&cl, o);
        if (rc)
                return rc;
        if (!o->foreground) {
                rc = detach(o, &ready);
                if (rc >= 0)
                        return rc;
        }
        return run_agent(&agent, ready);
}
