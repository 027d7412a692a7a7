/* SPDX-License-Identifier: BSD-3-Clause */
/* The probe of the adversarial test (tests/integration/test_agent_privsep.py):
 * linked with the agent's own objects into mpi-pstate-agent-probe, it runs
 * inside the real agent once its start-up is done (confined, running as its
 * own uid: the weak mpi_pstate_agentd_test_probe() of agent/main.c) and tries
 * what an exploited slot reader would:
 *
 *   read /etc/shadow; open a root file with O_TRUNC; create a file in a
 *   stand-in of /etc/cron.d (a root directory) and in /etc/cron.d itself;
 *   write, truncate, rename over, remove another job's restore record, or
 *   plant a forged one; write 64 MiB to its own record; kill(pid, 0) and
 *   SIGTERM of a foreign process; setuid(0).
 *
 * Each outcome is one log line "probe: <what>: refused (<errno>)" or
 * "probe: <what>: WORKED", then "probe: N worked".  The targets come from
 * the environment (PROBE_*); MPI_PSTATE_PROBE_LANDLOCK_ABI lowers the
 * Landlock ABI the hardening uses, to play older kernels.  After the probe
 * the agent runs its loop as usual, so the test then checks that a lower,
 * a raise and the restore still work. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentd.h"

__attribute__((constructor)) static void lower_landlock(void)
{
        const char *abi = getenv("MPI_PSTATE_PROBE_LANDLOCK_ABI");

        if (abi && *abi)
                mpi_pstate_agentd_landlock_abi_max = atoi(abi);
}

static unsigned worked;

static void outcome(bool ok, int err, const char *what, const char *target)
{
        if (ok) {
                worked++;
                mpi_pstate_agentd_log(LOG_ERR, "probe: %s %s: WORKED", what, target);
        } else {
                mpi_pstate_agentd_log(LOG_WARNING, "probe: %s %s: refused (%s)", what, target,
                                      strerror(err));
        }
}

static void try_open(const char *what, const char *path, int flags)
{
        int fd;

        if (!path || !*path)
                return;
        fd = open(path, flags | O_CLOEXEC | O_NOCTTY, 0644);
        outcome(fd >= 0, errno, what, path);
        if (fd >= 0) {
                /* never leave what a broken fence let through */
                close(fd);
                if (flags & O_CREAT)
                        unlink(path);
        }
}

static void try_records(const char *record, const char *restore_dir)
{
        char path[4096];
        int rc;

        if (record && *record) {
                try_open("write another job's restore record", record, O_WRONLY);
                try_open("truncate another job's restore record", record, O_RDONLY | O_TRUNC);
                rc = unlink(record);
                outcome(rc == 0, errno, "remove another job's restore record", record);
                snprintf(path, sizeof(path), "%s.forged", record);
                rc = rename(record, path);
                outcome(rc == 0, errno, "rename another job's restore record", record);
        }
        if (restore_dir && *restore_dir) {
                snprintf(path, sizeof(path), "%s/policy-forged", restore_dir);
                try_open("plant a forged restore record in", path, O_WRONLY | O_CREAT | O_EXCL);
        }
}

/* 64 MiB into the agent's own record: RLIMIT_FSIZE stops it at the
 * Epilog's bound, and the file is made empty again for the real record. */
static void try_fill(struct agentd *a)
{
        static char chunk[1 << 16];
        uint64_t done = 0;
        ssize_t n = 0;

        if (a->rec_fd < 0)
                return;
        memset(chunk, 'x', sizeof(chunk));
        while (done < (UINT64_C(64) << 20) &&
               (n = pwrite(a->rec_fd, chunk, sizeof(chunk), (off_t)done)) > 0)
                done += (uint64_t)n;
        if (!a->hard.file_max || done > a->hard.file_max)
                outcome(true, 0, "write past RLIMIT_FSIZE into", "its record");
        else
                mpi_pstate_agentd_log(LOG_WARNING,
                                      "probe: write 64 MiB into its record: refused (%s) after "
                                      "%llu bytes",
                                      strerror(n < 0 ? errno : EFBIG), (unsigned long long)done);
        if (ftruncate(a->rec_fd, 0) != 0)
                mpi_pstate_agentd_log(LOG_ERR, "probe: truncating its record: %s", strerror(errno));
}

void mpi_pstate_agentd_test_probe(struct agentd *a);
void mpi_pstate_agentd_test_probe(struct agentd *a)
{
        const char *foreign = getenv("PROBE_FOREIGN_PID");
        char path[4096];
        pid_t pid = foreign ? (pid_t)atoi(foreign) : 0;
        int rc;

        /* getegid() is not on the seccomp allow-list: the drop's own check */
        mpi_pstate_agentd_log(LOG_WARNING, "probe: uid %u gid %u, landlock %s (ABI %d)",
                              (unsigned)geteuid(), (unsigned)a->hard.gid, a->hard.landlock,
                              a->hard.landlock_abi);
        try_open("read", getenv("PROBE_SHADOW"), O_RDONLY);
        try_open("open with O_TRUNC", getenv("PROBE_ROOT_FILE"), O_RDONLY | O_TRUNC);
        try_open("open for writing", getenv("PROBE_ROOT_FILE"), O_WRONLY | O_APPEND);
        snprintf(path, sizeof(path), "%s/mpi-pstate-probe-%ld", getenv("PROBE_CRON_DIR") ?: "",
                 (long)getpid());
        if (getenv("PROBE_CRON_DIR"))
                try_open("create", path, O_WRONLY | O_CREAT | O_EXCL);
        snprintf(path, sizeof(path), "/etc/cron.d/mpi-pstate-probe-%ld", (long)getpid());
        try_open("create", path, O_WRONLY | O_CREAT | O_EXCL);
        try_records(getenv("PROBE_FOREIGN_RECORD"), a->o.runtime_dir);
        try_fill(a);
        if (pid > 0) {
                rc = kill(pid, 0);
                outcome(rc == 0, errno, "kill(pid, 0) of a foreign process", foreign);
                rc = kill(pid, SIGTERM);
                outcome(rc == 0, errno, "SIGTERM to a foreign process", foreign);
        }
        rc = setuid(0);
        outcome(rc == 0, errno, "setuid(0)", "");
        mpi_pstate_agentd_log(LOG_WARNING, "probe: %u worked", worked);
}
