/* SPDX-License-Identifier: BSD-3-Clause */
/* Where the agent's messages go: a file given by the plugin, syslog, or
 * stderr in the foreground.  One write() per message, so that lines of
 * several agents appending to one file do not interleave. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"

/* The log file's size cap: whatever the ranks make the agent say (a flood
 * of fake pids, invalid slots), its log stays below this.  Errors keep a
 * reserve beyond it, so that a failed restore at the end is still written. */
#define LOG_MAX_BYTES (1u << 20)
#define LOG_ERR_RESERVE (64u << 10)

static struct {
        uint64_t size, dropped; /* bytes in the file; messages not written */
        unsigned errors;        /* error messages, written or not (sums.json) */
        int fd;                 /* -1: syslog */
        bool is_syslog;
        int verbose;
        char tag[48];
} lg = {.fd = STDERR_FILENO};

static const char *level_word(int prio)
{
        switch (prio) {
        case LOG_ERR:
                return "error";
        case LOG_WARNING:
                return "warning";
        case LOG_DEBUG:
                return "debug";
        default:
                return "info";
        }
}

int mpi_pstate_agentd_log_open(const char *spec, bool foreground, int verbose)
{
        struct stat st;
        int fd;

        lg.verbose = verbose;
        if (!spec || !*spec)
                spec = foreground ? "stderr" : "syslog";
        if (strcmp(spec, "stderr") == 0) {
                lg.fd = STDERR_FILENO;
                lg.is_syslog = false;
                return 0;
        }
        if (strcmp(spec, "syslog") == 0) {
                openlog("mpi-pstate-agent", LOG_PID | LOG_NDELAY, LOG_DAEMON);
                lg.fd = -1;
                lg.is_syslog = true;
                return 0;
        }
        /* Root appends here: never through a planted link, never to a
         * device or a FIFO. */
        fd = open(spec,
                  O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
                  0600);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return -EINVAL;
        }
        lg.fd = fd;
        lg.size = (uint64_t)st.st_size;
        lg.is_syslog = false;
        return 0;
}

void mpi_pstate_agentd_log_tag(uint32_t job, uint32_t step)
{
        snprintf(lg.tag, sizeof(lg.tag), "job %u.%u: ", job, step);
}

unsigned mpi_pstate_agentd_log_errors(void)
{
        return lg.errors;
}

void mpi_pstate_agentd_log(int prio, const char *fmt, ...)
{
        char msg[1024], line[1200];
        struct timespec ts;
        struct tm tm;
        va_list ap;
        int n;

        if (prio == LOG_DEBUG && lg.verbose < 1)
                return;
        if (prio == LOG_ERR)
                lg.errors++;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (lg.is_syslog) {
                syslog(prio, "%s%s", lg.tag, msg);
                return;
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        n = snprintf(line, sizeof(line),
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03ld mpi-pstate-agent[%ld]: %s%s: %s\n",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, (long)getpid(), lg.tag, level_word(prio), msg);
        if (n < 0)
                return;
        if ((size_t)n >= sizeof(line)) {
                n = sizeof(line) - 1;
                line[n - 1] = '\n';
        }
        if (lg.fd >= 0 && lg.fd != STDERR_FILENO) {
                uint64_t room = LOG_MAX_BYTES + (prio == LOG_ERR ? LOG_ERR_RESERVE : 0);

                if (lg.size + (uint64_t)n > room) {
                        static const char full[] =
                            "mpi-pstate-agent: log size cap reached: further messages dropped\n";

                        if (lg.dropped++ == 0 &&
                            lg.size + sizeof(full) <= LOG_MAX_BYTES + LOG_ERR_RESERVE &&
                            write(lg.fd, full, sizeof(full) - 1) > 0)
                                lg.size += sizeof(full) - 1;
                        return;
                }
                lg.size += (uint64_t)n;
        }
        if (lg.fd >= 0) {
                ssize_t w = write(lg.fd, line, (size_t)n);
                (void)w;
        }
}
