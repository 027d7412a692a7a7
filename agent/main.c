/* SPDX-License-Identifier: BSD-3-Clause */
/* mpi-pstate-agent: its start (detaching, signals, set-up, the loop, the
 * finish) and the --restore backstop.  The command line is cmdline.c's;
 * man/mpi-pstate-agent.8 and docs/agent.md describe the options.
 *
 * Exit status: 0 once the agent runs (the parent returns when the daemon
 * is ready) or a --restore pass restored everything; 1 when the agent
 * could not start or a restore failed; 2 for a usage error.  A caller in a
 * job (the SPANK plugin) logs a non-zero status and carries on: the job
 * must never fail because of the agent. */
#include <errno.h>
#include <fcntl.h>
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
#include "safeio.h"

static volatile sig_atomic_t stop_flag;

/* A test seam: the adversarial test links a program of the agent's own
 * objects with a probe that defines this, run once the agent is confined
 * and before its loop (tests/programs/agent/probe.c).  The agent defines none. */
extern void mpi_pstate_agentd_test_probe(struct agentd *a) __attribute__((weak));
static struct agentd agent;

static int restore_mode(const struct agentd_opts *o)
{
        struct mpi_pstate_restore_owner who = {o->job, o->step};
        struct mpi_pstate_restore_summary sum;
        unsigned flags = 0;
        char err[256] = "";
        int rc;

        if (!mpi_pstate_agentd_given(o, MPI_PSTATE_AGENT_ARG_JOB))
                flags = MPI_PSTATE_RESTORE_ANY_OWNER;
        else if (!mpi_pstate_agentd_given(o, MPI_PSTATE_AGENT_ARG_STEP))
                flags = MPI_PSTATE_RESTORE_ANY_STEP;
        rc = mpi_pstate_restore_all_within(o->restore, o->sysroot, &who, flags,
                                           o->cpulist ? &o->cpus : NULL, &sum, err, sizeof(err));
        printf("mpi-pstate-agent: restore %s: %u restored, %u foreign, %u failed%s%s\n", o->restore,
               sum.restored, sum.foreign, sum.failed, rc ? ": " : "",
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
        rc = mpi_pstate_agentd_confine(a);
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
        struct agentd_opts *o = &agent.o;
        int rc, ready = -1;

        agent.rec_fd = agent.sums_fd = -1;
        rc = mpi_pstate_agentd_cmdline_parse(argc, argv, o);
        if (!rc)
                rc = mpi_pstate_agentd_cmdline_resolve(o);
        if (rc)
                return rc;
        if (o->restore)
                return restore_mode(o);
        if (!o->foreground) {
                rc = detach(o, &ready);
                if (rc >= 0)
                        return rc;
        }
        return run_agent(&agent, ready);
}
