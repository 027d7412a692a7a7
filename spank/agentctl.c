/* SPDX-License-Identifier: BSD-3-Clause */
/* Starting and stopping the node agent from slurmstepd (agentctl.h): its
 * command line from common/agent_args.def, a detached start, a stop
 * through a pidfd, the pidfile, and the trust check of its binary. */
#include "agentctl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "parse.h"
#include "errmsg.h"
#include "safeio.h"

static const size_t offsets[] = {
#define MPI_PSTATE_AGENT_ARG(ID, flag, TYPE, field, def, arginfo, PASS, help)                      \
        offsetof(struct mpi_pstate_agent_args, field),
#include "agent_args.def"
};

void mpi_pstate_agentctl_args_init(struct mpi_pstate_agent_args *a)
{
        memset(a, 0, sizeof(*a));
        mpi_pstate_agent_args_defaults(a, offsets);
}

/* The job's options, one generic pair each: a new entry of options.def
 * reaches the agent with no code here. */
static int push_options(const struct mpi_pstate_options *opt, char *buf, size_t buflen,
                        size_t *used, char **argv, size_t max, size_t *argc)
{
        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                char *flag = buf + *used, *value;
                int n = snprintf(flag, buflen - *used, "--%s", mpi_pstate_options_info(id)->name);

                if (n < 0 || (size_t)n + 1 >= buflen - *used)
                        return -ENOSPC;
                *used += (size_t)n + 1;
                value = buf + *used;
                n = mpi_pstate_options_format(opt, id, value, buflen - *used);
                if (n < 0)
                        return -ENOSPC;
                *used += (size_t)n + 1;
                if (*argc + 2 >= max)
                        return -ENOSPC;
                argv[(*argc)++] = flag;
                argv[(*argc)++] = value;
        }
        return 0;
}

int mpi_pstate_agentctl_argv(const struct mpi_pstate_agent_args *a, char *buf, size_t buflen,
                             char **argv, size_t max)
{
        size_t used = 0, argc = 0;
        int rc;

        if (!a || !a->path || !buf || !argv || max < 2)
                return -EINVAL;
        argv[argc++] = (char *)a->path;
        rc = mpi_pstate_agent_args_write(a, offsets, MPI_PSTATE_AGENT_PASS_PLUGIN, buf, buflen,
                                         &used, argv, max, &argc);
        if (!rc)
                rc = push_options(&a->opt, buf, buflen, &used, argv, max, &argc);
        if (rc)
                return rc;
        argv[argc] = NULL;
        return (int)argc;
}

/* One directory or file of a root-run path: root's, and nobody else may
 * change it.  A group-writable entry is fine when the group is root's; a
 * world-writable directory only with the sticky bit (/tmp), where nobody
 * but root can rename or remove root's entries. */
static int trusted_entry(const char *p, bool dir, char *err, size_t errlen)
{
        struct stat st;

        if (stat(p, &st) != 0) {
                int rc = -errno;

                mpi_pstate_errmsg_set(err, errlen, "%s: %s", p, strerror(-rc));
                return rc;
        }
        if (st.st_uid != 0) {
                mpi_pstate_errmsg_set(err, errlen, "%s is owned by uid %u, not root", p,
                                      (unsigned)st.st_uid);
                return -EPERM;
        }
        if (((st.st_mode & S_IWGRP) && st.st_gid != 0) ||
            ((st.st_mode & S_IWOTH) && !(dir && (st.st_mode & S_ISVTX)))) {
                mpi_pstate_errmsg_set(err, errlen, "%s is writable by %s (mode %04o)", p,
                                      (st.st_mode & S_IWOTH) ? "everybody" : "its group",
                                      (unsigned)(st.st_mode & 07777));
                return -EPERM;
        }
        return 0;
}

int mpi_pstate_agentctl_trusted(const char *path, char *err, size_t errlen)
{
        char buf[PATH_MAX], real[PATH_MAX];
        const char *const forms[2] = {buf, real};
        int rc;

        if (!path || path[0] != '/' || strlen(path) >= sizeof(buf)) {
                mpi_pstate_errmsg_set(err, errlen, "%s: not an absolute path", path ? path : "");
                return -EINVAL;
        }
        if (!realpath(path, real)) {
                rc = -errno;
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", path, strerror(-rc));
                return rc;
        }
        snprintf(buf, sizeof(buf), "%s", path);
        /* Both the path as given (its directories: where a link could be
         * swapped) and what it resolves to, every component up to "/". */
        for (int f = 0; f < 2; f++) {
                char p[PATH_MAX];
                size_t n = strlen(forms[f]);

                memcpy(p, forms[f], n + 1);
                rc = f == 1 ? trusted_entry(p, false, err, errlen) : 0;
                while (rc == 0 && n > 1) {
                        while (n > 1 && p[n - 1] != '/')
                                n--;
                        p[n > 1 ? n - 1 : 1] = '\0';
                        n = n > 1 ? n - 1 : 1;
                        rc = trusted_entry(p, true, err, errlen);
                }
                if (rc)
                        return rc;
        }
        return 0;
}

/* In the forked children only async-signal-safe calls: slurmstepd has threads. */
static void child(int pipefd, char **argv, char **envp)
{
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigset_t none;
        pid_t pid;
        int fd;

        /* slurmstepd blocks and ignores signals the agent must receive:
         * exec keeps both. */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        sigaction(sig, &dfl, NULL);
        if (setsid() < 0)
                _exit(127);
        pid = fork();
        if (pid < 0)
                _exit(127);
        if (pid > 0) {
                /* The intermediate child: report the agent's pid, then go, so
                 * the agent is reparented away from slurmstepd. */
                ssize_t w = write(pipefd, &pid, sizeof(pid));
                _exit(w == (ssize_t)sizeof(pid) ? 0 : 127);
        }
        fd = open("/dev/null", O_RDWR);
        if (fd < 0)
                _exit(127);
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        syscall(SYS_close_range, 3u, ~0u, 0u);
        if (chdir("/") != 0)
                _exit(127);
        umask(022);
        execve(argv[0], argv, envp);
        _exit(127);
}

/* The agent file root is about to run: there, trusted, executable.
 * Checked here so that a missing agent is one clear log line, not an exit
 * status of a grandchild nobody waits for. */
static int check_agent_file(const char *path, char *err, size_t errlen)
{
        struct stat st;
        int rc;

        if (stat(path, &st) != 0) {
                rc = -errno;
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", path, strerror(-rc));
                return rc;
        }
        /* Run as root: only a file and directories nobody but root can change. */
        rc = mpi_pstate_agentctl_trusted(path, err, errlen);
        if (rc)
                return rc == -ENOENT ? -EACCES : rc;
        if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IXUSR)) {
                mpi_pstate_errmsg_set(err, errlen, "%s: not an executable file", path);
                return -EACCES;
        }
        return 0;
}

int mpi_pstate_agentctl_start(const struct mpi_pstate_agent_args *a, pid_t *out, char *err,
                              size_t errlen)
{
        static char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", NULL};
        char *argv[MPI_PSTATE_AGENT_MAX_ARGS], buf[2048];
        int p[2] = {-1, -1}, status, rc;
        pid_t pid, agent = -1;
        ssize_t n;

        rc = mpi_pstate_agentctl_argv(a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);
        if (rc < 0) {
                mpi_pstate_errmsg_set(err, errlen, "cannot build the agent's command line");
                return rc;
        }
        rc = check_agent_file(a->path, err, errlen);
        if (rc)
                return rc;
        if (pipe2(p, O_CLOEXEC) != 0) {
                rc = -errno;
                mpi_pstate_errmsg_set(err, errlen, "pipe: %s", strerror(-rc));
                return rc;
        }
        pid = fork();
        if (pid < 0) {
                rc = -errno;
                mpi_pstate_errmsg_set(err, errlen, "fork: %s", strerror(-rc));
                goto out;
        }
        if (pid == 0) {
                close(p[0]);
                child(p[1], argv, envp);
        }
        close(p[1]);
        p[1] = -1;
        do
                n = read(p[0], &agent, sizeof(agent));
        while (n < 0 && errno == EINTR);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (n != (ssize_t)sizeof(agent) || agent <= 0) {
                rc = -ECHILD;
                mpi_pstate_errmsg_set(err, errlen, "the agent could not be started");
                goto out;
        }
        *out = agent;
        rc = 0;
out:
        if (p[0] >= 0)
                close(p[0]);
        if (p[1] >= 0)
                close(p[1]);
        return rc;
}

/* /proc/<pid>/stat's state field: 'Z' is a dead process nobody reaped yet. */
static int zombie(pid_t pid)
{
        char path[64], buf[512], *rp;
        int n;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        n = mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0);
        if (n < 0)
                return n == -ENOENT;
        rp = strrchr(buf, ')');
        return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

int mpi_pstate_agentctl_is_ours(pid_t pid, const char *record)
{
        char path[64], buf[4096];
        const char *prev = NULL;
        ssize_t n, off = 0;
        int fd, found = 0;

        if (pid <= 1 || !record)
                return 0;
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        while (off < (ssize_t)sizeof(buf) - 1 &&
               (n = read(fd, buf + off, sizeof(buf) - 1 - (size_t)off)) > 0)
                off += n;
        close(fd);
        buf[off] = '\0';
        for (ssize_t i = 0; i < off; i += (ssize_t)strlen(buf + i) + 1) {
                if (prev && strcmp(prev, "--record") == 0 && strcmp(buf + i, record) == 0)
                        found = 1;
                prev = buf + i;
        }
        return found && !zombie(pid);
}

static void nap_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
}

static uint64_t mono_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int mpi_pstate_agentctl_pidfd(pid_t pid)
{
        long fd;

        if (pid <= 1)
                return -EINVAL;
        fd = syscall(SYS_pidfd_open, pid, 0);
        return fd < 0 ? -errno : (int)fd;
}

bool mpi_pstate_agentctl_pidfd_is(int fd, pid_t pid)
{
        char path[64], text[1024], want[32];
        const char *p;
        int n;

        if (fd < 0 || pid <= 0)
                return false;
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        n = mpi_pstate_safeio_read_small(AT_FDCWD, path, text, sizeof(text), 0, 0);
        if (n <= 0)
                return false;
        /* the read strips the last newline: "Pid:\t<pid>" ends a line or the text */
        n = snprintf(want, sizeof(want), "Pid:\t%d", (int)pid);
        for (p = strstr(text, want); p; p = strstr(p + 1, want))
                if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
                        return true;
        return false;
}

/* 1 once the process behind pidfd has exited (a zombie counts), 0 when it
 * still runs after timeout_ms, a negative errno when poll fails. */
static int pidfd_wait(int pidfd, unsigned timeout_ms)
{
        struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
        uint64_t end = mono_ms() + timeout_ms;

        for (;;) {
                uint64_t now = mono_ms();
                int n = poll(&pfd, 1, now >= end ? 0 : (int)(end - now));

                if (n > 0)
                        return 1;
                if (n == 0)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

static int pidfd_signal(int pidfd, int sig)
{
        if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0)
                return 0;
        return errno == ESRCH ? 1 : -errno;
}

int mpi_pstate_agentctl_stop_pidfd(int pidfd, unsigned timeout_ms)
{
        int rc = pidfd_wait(pidfd, 0);

        if (rc != 0)
                return rc > 0 ? 0 : rc;
        rc = pidfd_signal(pidfd, SIGTERM);
        if (rc != 0)
                return rc > 0 ? 0 : rc;
        rc = pidfd_wait(pidfd, timeout_ms);
        if (rc != 0)
                return rc;
        rc = pidfd_signal(pidfd, SIGKILL);
        if (rc < 0)
                return rc;
        /* SIGKILL cannot be caught: the exit follows at once. */
        (void)pidfd_wait(pidfd, 1000);
        return 2;
}

/* Without pidfds (Linux < 5.3): signal 0 and /proc, every 10 ms. */
static int stop_polling(pid_t pid, const char *record, unsigned timeout_ms)
{
        for (unsigned waited = 0; waited < timeout_ms; waited += 10) {
                if (kill(pid, 0) != 0 || zombie(pid))
                        return 1;
                nap_ms(10);
        }
        if (!mpi_pstate_agentctl_is_ours(pid, record))
                return 1;
        if (kill(pid, SIGKILL) != 0 && errno != ESRCH)
                return -errno;
        return 2;
}

int mpi_pstate_agentctl_stop(pid_t pid, const char *record, unsigned timeout_ms)
{
        int pidfd, rc;

        /* The pidfd first, then the command line, then "still running":
         * a pid cannot be reused before its process is reaped, so when the
         * pidfd's process outlives the check, the command line read was its
         * own, and every signal below goes to that very process. */
        pidfd = mpi_pstate_agentctl_pidfd(pid);
        if (pidfd >= 0) {
                rc = mpi_pstate_agentctl_is_ours(pid, record) && pidfd_wait(pidfd, 0) == 0
                         ? mpi_pstate_agentctl_stop_pidfd(pidfd, timeout_ms)
                         : 0;
                close(pidfd);
                return rc;
        }
        if (pidfd != -ENOSYS && pidfd != -EPERM)
                return 0; /* ESRCH: gone */
        if (!mpi_pstate_agentctl_is_ours(pid, record))
                return 0;
        /* Linux < 5.3 (or a seccomp'd slurmstepd): kill() after the check. */
        if (kill(pid, SIGTERM) != 0)
                return errno == ESRCH ? 0 : -errno;
        return stop_polling(pid, record, timeout_ms);
}

int mpi_pstate_agentctl_write_pidfile(const char *dir, const char *name, pid_t pid)
{
        char buf[32];
        int fd, n, rc;

        n = snprintf(buf, sizeof(buf), "%d\n", (int)pid);
        fd = mpi_pstate_safeio_open_dir(dir, 0, 0);
        if (fd < 0)
                return fd;
        /* A pid means nothing after a crash of the node: no fsync. */
        rc = mpi_pstate_safeio_write_atomic(fd, name, buf, (size_t)n, 0600,
                                            MPI_PSTATE_SAFEIO_NOSYNC);
        close(fd);
        return rc;
}

int mpi_pstate_agentctl_read_pidfile(const char *dir, const char *name, pid_t *pid)
{
        char buf[32];
        uint64_t v;
        int fd, rc;

        fd = mpi_pstate_safeio_open_dir(dir, 0, 0);
        if (fd < 0)
                return fd;
        rc = mpi_pstate_safeio_read_small(fd, name, buf, sizeof(buf), MPI_PSTATE_SAFEIO_OWNED, 0);
        close(fd);
        if (rc < 0)
                return rc;
        rc = mpi_pstate_parse_u64(buf, 2, INT32_MAX, &v);
        if (rc == 0)
                *pid = (pid_t)v;
        return rc;
}
