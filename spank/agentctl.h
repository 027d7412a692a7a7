/* SPDX-License-Identifier: BSD-3-Clause */
/* Starting and stopping the node agent (mpi-pstate-agent, docs/agent.md)
 * from slurmstepd, and the backstop's "stop whatever agent this job left".
 *
 * The agent is started detached: double fork, new session, no inherited
 * descriptor, a clean environment, stdin/stdout/stderr on /dev/null (it logs
 * to its own file).  slurmstepd reaps its tasks with waitpid(-1), so the
 * agent must not stay a child of it; the intermediate child hands the
 * agent's pid back through a pipe and the plugin writes the pidfile itself,
 * in the root-owned step directory.  Stopping is SIGTERM (the agent restores
 * every domain and writes its record), a wait that ends when the agent does,
 * then SIGKILL after the bound.  The agent this slurmstepd started is held
 * by a pidfd; any other pid (a pidfile's, in the backstop) is signalled only
 * if its command line names this step's agent record.  Either way a recycled
 * pid is never hit. */
#ifndef MPI_PSTATE_SPANK_AGENTCTL_H
#define MPI_PSTATE_SPANK_AGENTCTL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent_args.h"
#include "options.h"

/* The agent's command line as the plugin holds it: the binary, the job's
 * options (the site's limits applied; every entry of options.def reaches
 * the agent as --<srun name> <canonical value>), and every entry of
 * common/agent_args.def under its field name.  The plugin writes the
 * entries whose PASS is ALWAYS, SET or PLUGIN (the latter two when not
 * their default): a new entry reaches the agent with no code here. */
struct mpi_pstate_agent_args {
        const char *path; /* the agent binary (plugstack key agent=) */
        struct mpi_pstate_options opt;
#define MPI_PSTATE_AGENT_ARG(ID, flag, TYPE, field, def, arginfo, PASS, help)                      \
        mpi_pstate_agent_arg_##TYPE field;
#include "agent_args.def"
};

/* argv[0], a pair per entry of each table, the NULL. */
#define MPI_PSTATE_AGENT_MAX_ARGS (2 + 2 * MPI_PSTATE_AGENT_ARG_COUNT + 2 * MPI_PSTATE_OPT_COUNT)

/* Zero, then every entry's default from the table. */
void mpi_pstate_agentctl_args_init(struct mpi_pstate_agent_args *a);

/* Pure: the agent's argv (NULL-terminated) into argv[max], the strings of
 * numbers formatted into buf.  Returns argc or -ENOSPC / -EINVAL (an
 * ALWAYS entry, or path, missing). */
int mpi_pstate_agentctl_argv(const struct mpi_pstate_agent_args *a, char *buf, size_t buflen,
                             char **argv, size_t max);

/* Starts the agent detached and returns its pid.  0 or a negative errno,
 * with a reason in err (missing or non-executable binary: -ENOENT/-EACCES,
 * checked before forking). */
int mpi_pstate_agentctl_start(const struct mpi_pstate_agent_args *a, pid_t *pid, char *err,
                              size_t errlen);

/* 0 when path (as given and as resolved) and every directory above it are
 * root's and writable by nobody else (group root and sticky directories
 * excepted), or a negative errno with the reason in err.  The plugin runs
 * the agent as root and preloads the library into every rank: an entry a
 * user could change would be a way in. */
int mpi_pstate_agentctl_trusted(const char *path, char *err, size_t errlen);

/* True while pid is alive (not a zombie) and its command line holds the
 * argument `record`. */
int mpi_pstate_agentctl_is_ours(pid_t pid, const char *record);

/* Stops pid if it is ours (see _is_ours): SIGTERM, wait up to timeout_ms,
 * then SIGKILL.  Returns 1 when it ended on SIGTERM, 2 when it had to be
 * killed, 0 when it was not running (or not ours), a negative errno on
 * failure.  The wait ends the moment the process does (a pidfd; polling
 * every 10 ms on kernels without one). */
int mpi_pstate_agentctl_stop(pid_t pid, const char *record, unsigned timeout_ms);

/* A pidfd (close-on-exec) for the agent just started, or a negative errno
 * (-ENOSYS before Linux 5.3).  Taken right after _start, it names that
 * process for good: no command-line check is needed to signal it later,
 * and none could work in the instant between fork and exec, when the
 * process still shows slurmstepd's command line. */
int mpi_pstate_agentctl_pidfd(pid_t pid);

/* Whether fd is still a pidfd of pid (/proc/self/fdinfo's "Pid:" line).
 * slurmstepd is not ours: between the hook that took the pidfd and the one
 * that stops the agent, a descriptor may be closed and its number reused;
 * poll() on a regular file is always "readable", which read as "the agent
 * had exited" and left it running (seen under Slurm 26.05). */
bool mpi_pstate_agentctl_pidfd_is(int fd, pid_t pid);

/* _stop through a pidfd from _pidfd: same steps and return values, with no
 * command-line check (the pidfd is the identity).  0 when the process had
 * already exited.  The caller closes pidfd. */
int mpi_pstate_agentctl_stop_pidfd(int pidfd, unsigned timeout_ms);

/* Pidfile helpers: a decimal pid and a newline, written atomically into the
 * step directory; read back hostile-safe (root-owned, small, strict). */
int mpi_pstate_agentctl_write_pidfile(const char *dir, const char *name, pid_t pid);
int mpi_pstate_agentctl_read_pidfile(const char *dir, const char *name, pid_t *pid);

#endif
