/* SPDX-License-Identifier: BSD-3-Clause */
/* Baseline preload libraries: the two per-call designs mpi-pstate is measured
 * against (bench/baselines/run.py), built from this one file, once per MPI ABI.
 *
 *   -DBASELINE_TIMER   COUNTDOWN's design: every MPI call arms a one-shot
 *                      interval timer (setitimer) on entry and disarms it on
 *                      exit; the SIGALRM handler lowers the frequency when a
 *                      call outlives the timeout and the exit raises it again.
 *   -DBASELINE_SWITCH  the 2013 talk's design: every MPI call writes the low
 *                      frequency at entry and the high one at exit.
 *
 * The "sysfs" file is a plain file (MPI_PSTATE_BASELINE_FILE, a tmpfs path;
 * default /dev/shm/mpi-pstate-baseline.<pid>, removed at finalize), opened
 * once and written with pwrite on the kept fd, as a careful per-call design
 * would do.  A real cpufreq write costs far more than a tmpfs one, so the
 * measured cost of both baselines is a lower bound.
 *
 * Only the calls bench/preload/hotpath.c and tests/mpi/imbalance.c make are
 * wrapped (C bindings): this is a yardstick, not a tool.  Environment:
 *   MPI_PSTATE_BASELINE_FILE        the file written (created if missing)
 *   MPI_PSTATE_BASELINE_TIMEOUT     timer design: timeout, a duration as the
 *                                   plugin's (500us, COUNTDOWN's default)
 *   MPI_PSTATE_BASELINE_STATS       yes: one line of counters on stderr at
 *                                   MPI_Finalize (tests read it)
 * A bad value or a file that cannot be opened gives one message and a
 * pass-through library: a baseline must never kill the program. */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "parse.h"

#if defined(BASELINE_TIMER) == defined(BASELINE_SWITCH)
#error "define exactly one of BASELINE_TIMER and BASELINE_SWITCH"
#endif

#ifdef BASELINE_TIMER
#define DESIGN "timer"
#else
#define DESIGN "switch"
#endif

#define EXPORT __attribute__((visibility("default")))

static const char LOW[] = "1200000\n";
static const char HIGH[] = "3000000\n";

static int fd = -1;
static bool unlink_at_end;
static char path[4096];
static uint64_t calls, writes;
static volatile sig_atomic_t lowered;
static volatile sig_atomic_t lowerings;

#ifdef BASELINE_TIMER
static struct itimerval arm_value;
static const struct itimerval disarm_value;
static struct sigaction old_alarm;
static bool handler_set;

/* Runs when a call outlived the timeout: only async-signal-safe work. */
static void on_alarm(int sig)
{
        int saved = errno;

        (void)sig;
        if (fd >= 0 && pwrite(fd, LOW, sizeof(LOW) - 1, 0) > 0) {
                lowered = 1;
                lowerings++;
        }
        errno = saved;
}
#endif

static void say(const char *what)
{
        fprintf(stderr, "mpi-pstate-baseline(" DESIGN "): %s; running without it\n", what);
}

static void setup(void)
{
        const char *env = getenv("MPI_PSTATE_BASELINE_FILE");
        int n;

        if (env && *env)
                n = snprintf(path, sizeof(path), "%s", env);
        else
                n = snprintf(path, sizeof(path), "/dev/shm/mpi-pstate-baseline.%ld",
                             (long)getpid());
        if (n < 0 || (size_t)n >= sizeof(path)) {
                say("MPI_PSTATE_BASELINE_FILE is too long");
                return;
        }
        unlink_at_end = !(env && *env);
#ifdef BASELINE_TIMER
        uint64_t us = 500;
        const char *t = getenv("MPI_PSTATE_BASELINE_TIMEOUT");
        if (t && mpi_pstate_parse_duration_us(t, &us) != 0) {
                say("invalid MPI_PSTATE_BASELINE_TIMEOUT (expected a duration such as 500us)");
                return;
        }
        /* it_value 0 would disarm instead of arming: one microsecond is the floor */
        if (us == 0)
                us = 1;
        arm_value.it_value.tv_sec = (time_t)(us / 1000000);
        arm_value.it_value.tv_usec = (suseconds_t)(us % 1000000);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART; /* MPI's own system calls must not see EINTR */
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGALRM, &sa, &old_alarm) != 0) {
                say("cannot install the SIGALRM handler");
                return;
        }
        handler_set = true;
#endif
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                say("cannot open MPI_PSTATE_BASELINE_FILE");
                return;
        }
        if (pwrite(fd, HIGH, sizeof(HIGH) - 1, 0) < 0 || ftruncate(fd, sizeof(HIGH) - 1) != 0) {
                say("cannot write MPI_PSTATE_BASELINE_FILE");
                close(fd);
                fd = -1;
        }
}

static void teardown(void)
{
#ifdef BASELINE_TIMER
        setitimer(ITIMER_REAL, &disarm_value, NULL);
        if (handler_set)
                sigaction(SIGALRM, &old_alarm, NULL);
        handler_set = false;
#endif
        const char *st = getenv("MPI_PSTATE_BASELINE_STATS");
        bool stats = false;
        if (st && mpi_pstate_parse_bool(st, &stats) != 0)
                stats = false;
        if (stats)
                fprintf(stderr,
                        "mpi-pstate-baseline " DESIGN ": pid %ld calls %llu lowered %d writes "
                        "%llu active %d\n",
                        (long)getpid(), (unsigned long long)calls, (int)lowerings,
                        (unsigned long long)(writes + (uint64_t)lowerings), fd >= 0);
        if (fd >= 0) {
                close(fd);
                fd = -1;
                if (unlink_at_end)
                        unlink(path);
        }
}

static inline void enter(void)
{
        if (fd < 0)
                return;
        calls++;
#ifdef BASELINE_TIMER
        setitimer(ITIMER_REAL, &arm_value, NULL);
#else
        if (pwrite(fd, LOW, sizeof(LOW) - 1, 0) > 0)
                writes++;
#endif
}

static inline void leave(void)
{
        if (fd < 0)
                return;
#ifdef BASELINE_TIMER
        setitimer(ITIMER_REAL, &disarm_value, NULL);
        if (lowered) {
                lowered = 0;
                if (pwrite(fd, HIGH, sizeof(HIGH) - 1, 0) > 0)
                        writes++;
        }
#else
        if (pwrite(fd, HIGH, sizeof(HIGH) - 1, 0) > 0)
                writes++;
#endif
}

EXPORT int MPI_Init(int *argc, char ***argv)
{
        int rc = PMPI_Init(argc, argv);

        if (rc == MPI_SUCCESS)
                setup();
        return rc;
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
        int rc = PMPI_Init_thread(argc, argv, required, provided);

        if (rc == MPI_SUCCESS)
                setup();
        return rc;
}

EXPORT int MPI_Finalize(void)
{
        teardown();
        return PMPI_Finalize();
}

/* One shell per wrapped call: enter, the real call, leave. */
#define WRAP(name, params, args)                                                                   \
        EXPORT int MPI_##name params                                                               \
        {                                                                                          \
                int rc;                                                                            \
                enter();                                                                           \
                rc = PMPI_##name args;                                                             \
                leave();                                                                           \
                return rc;                                                                         \
        }

WRAP(Barrier, (MPI_Comm comm), (comm))
WRAP(Test, (MPI_Request * req, int *flag, MPI_Status *st), (req, flag, st))
WRAP(Iprobe, (int src, int tag, MPI_Comm comm, int *flag, MPI_Status *st),
     (src, tag, comm, flag, st))
WRAP(Wait, (MPI_Request * req, MPI_Status *st), (req, st))
WRAP(Recv, (void *buf, int n, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status *st),
     (buf, n, t, src, tag, comm, st))
WRAP(Send, (const void *buf, int n, MPI_Datatype t, int dst, int tag, MPI_Comm comm),
     (buf, n, t, dst, tag, comm))
WRAP(Bcast, (void *buf, int n, MPI_Datatype t, int root, MPI_Comm comm), (buf, n, t, root, comm))
WRAP(Allreduce, (const void *sbuf, void *rbuf, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sbuf, rbuf, n, t, op, comm))
