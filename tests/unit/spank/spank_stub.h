/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for the part of libslurm a SPANK plugin calls, so the hooks of
 * spank/mpi_pstate.c run in a unit test: the test sets the context and the
 * items, the stub records log lines, registered options and setenv calls. */
#ifndef MPI_PSTATE_SPANK_STUB_H
#define MPI_PSTATE_SPANK_STUB_H
#include <stdint.h>
#include <sys/types.h>

#include <slurm/spank.h>

#define STUB_MAX 64

struct stub_log {
        char level[8]; /* "error", "info", "verbose", "debug", "spank" */
        char msg[512];
};

struct stub_env {
        char name[64];
        char value[256];
};

struct stub_state {
        spank_context_t ctx;
        uint32_t job_id, step_id, node_id, local_tasks;
        uid_t uid;
        gid_t gid;
        int task_id; /* -1: S_TASK_ID not available */
        int nlogs;
        struct stub_log logs[STUB_MAX];
        int nopts;
        struct spank_option opts[STUB_MAX];
        int nenv;
        struct stub_env env[STUB_MAX];
        /* spank_option_getopt answers for job_script context: NULL = not given. */
        const char *getopt_value[STUB_MAX];
        int getopt_given[STUB_MAX];
        /* Step items of slurmstepd: NULL = not available. */
        const char *step_cores, *job_cores;
        uint32_t cpus_per_task;
        int argc;
        char **argv;
};

extern struct stub_state stub;

/* Resets everything and sets the context. */
void stub_reset(spank_context_t ctx);

/* Number of log lines at level (NULL: any) whose text contains needle. */
int stub_count(const char *level, const char *needle);

/* The value set with spank_setenv for name, or NULL (also after
 * spank_unsetenv). */
const char *stub_env_get(const char *name);

/* Puts name=value into the task environment, as srun would have. */
void stub_env_put(const char *name, const char *value);

/* The handle passed to hooks (only compared, never dereferenced). */
#define STUB_SP ((spank_t)&stub)

#endif
