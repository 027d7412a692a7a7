/* SPDX-License-Identifier: BSD-3-Clause */
/* The stub libslurm of the plugin's unit tests (spank_stub.h): the spank_*
 * calls a SPANK plugin makes, answered from the test's state and recorded. */
#include "spank_stub.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct stub_state stub;

void stub_reset(spank_context_t ctx)
{
        memset(&stub, 0, sizeof(stub));
        stub.ctx = ctx;
        stub.task_id = -1;
}

static void add_log(const char *level, const char *fmt, va_list ap)
{
        struct stub_log *l;

        if (stub.nlogs >= STUB_MAX)
                return;
        l = &stub.logs[stub.nlogs++];
        snprintf(l->level, sizeof(l->level), "%s", level);
        vsnprintf(l->msg, sizeof(l->msg), fmt, ap);
}

#define LOGGER(fn, level)                                                                          \
        void fn(const char *fmt, ...)                                                              \
        {                                                                                          \
                va_list ap;                                                                        \
                va_start(ap, fmt);                                                                 \
                add_log(level, fmt, ap);                                                           \
                va_end(ap);                                                                        \
        }
LOGGER(slurm_error, "error")
LOGGER(slurm_info, "info")
LOGGER(slurm_verbose, "verbose")
LOGGER(slurm_debug, "debug")
LOGGER(slurm_debug2, "debug")
LOGGER(slurm_debug3, "debug")
LOGGER(slurm_spank_log, "spank")

int stub_count(const char *level, const char *needle)
{
        int n = 0;

        for (int i = 0; i < stub.nlogs; i++)
                if ((!level || strcmp(stub.logs[i].level, level) == 0) &&
                    strstr(stub.logs[i].msg, needle))
                        n++;
        return n;
}

/* An unset variable is an entry with value[0] == 1 (never a real value). */
#define UNSET "\001"

const char *stub_env_get(const char *name)
{
        for (int i = stub.nenv - 1; i >= 0; i--)
                if (strcmp(stub.env[i].name, name) == 0)
                        return strcmp(stub.env[i].value, UNSET) == 0 ? NULL : stub.env[i].value;
        return NULL;
}

void stub_env_put(const char *name, const char *value)
{
        if (stub.nenv >= STUB_MAX)
                return;
        snprintf(stub.env[stub.nenv].name, sizeof(stub.env[0].name), "%s", name);
        snprintf(stub.env[stub.nenv].value, sizeof(stub.env[0].value), "%s", value);
        stub.nenv++;
}

spank_context_t spank_context(void)
{
        return stub.ctx;
}

int spank_remote(spank_t sp)
{
        (void)sp;
        return stub.ctx == S_CTX_REMOTE;
}

const char *spank_strerror(spank_err_t err)
{
        return err == ESPANK_SUCCESS ? "Success" : "stub error";
}

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
        if (sp != STUB_SP || !opt || !opt->name || stub.nopts >= STUB_MAX)
                return ESPANK_BAD_ARG;
        stub.opts[stub.nopts++] = *opt;
        return ESPANK_SUCCESS;
}

spank_err_t spank_option_getopt(spank_t sp, struct spank_option *opt, char **optarg)
{
        (void)sp;
        if (!opt || !opt->name)
                return ESPANK_BAD_ARG;
        if (stub.ctx != S_CTX_JOB_SCRIPT)
                return ESPANK_NOT_AVAIL;
        if (opt->val < 0 || opt->val >= STUB_MAX || !stub.getopt_given[opt->val])
                return ESPANK_ERROR;
        *optarg = (char *)stub.getopt_value[opt->val];
        return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
        va_list ap;
        spank_err_t rc = ESPANK_SUCCESS;

        if (sp != STUB_SP)
                return ESPANK_BAD_ARG;
        va_start(ap, item);
        switch (item) {
        case S_JOB_ID:
                *va_arg(ap, uint32_t *) = stub.job_id;
                break;
        case S_JOB_STEPID:
                *va_arg(ap, uint32_t *) = stub.step_id;
                break;
        case S_JOB_NODEID:
                *va_arg(ap, uint32_t *) = stub.node_id;
                break;
        case S_JOB_LOCAL_TASK_COUNT:
                *va_arg(ap, uint32_t *) = stub.local_tasks;
                break;
        case S_JOB_UID:
                *va_arg(ap, uid_t *) = stub.uid;
                break;
        case S_JOB_GID:
                *va_arg(ap, gid_t *) = stub.gid;
                break;
        case S_STEP_ALLOC_CORES:
        case S_JOB_ALLOC_CORES: {
                const char *v = item == S_STEP_ALLOC_CORES ? stub.step_cores : stub.job_cores;

                if (!v)
                        rc = ESPANK_NOT_AVAIL;
                else
                        *va_arg(ap, const char **) = v;
                break;
        }
        case S_STEP_CPUS_PER_TASK:
                *va_arg(ap, uint32_t *) = stub.cpus_per_task;
                break;
        case S_JOB_ARGV:
                if (!stub.argv) {
                        rc = ESPANK_NOT_AVAIL;
                        break;
                }
                *va_arg(ap, int *) = stub.argc;
                *va_arg(ap, char ***) = stub.argv;
                break;
        case S_TASK_ID:
                if (stub.task_id < 0)
                        rc = ESPANK_NOT_TASK;
                else
                        *va_arg(ap, int *) = stub.task_id;
                break;
        default:
                rc = ESPANK_BAD_ARG;
        }
        va_end(ap);
        return rc;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite)
{
        (void)overwrite;
        if (sp != STUB_SP || stub.nenv >= STUB_MAX)
                return ESPANK_BAD_ARG;
        if (stub.ctx != S_CTX_REMOTE)
                return ESPANK_NOT_REMOTE;
        snprintf(stub.env[stub.nenv].name, sizeof(stub.env[0].name), "%s", var);
        snprintf(stub.env[stub.nenv].value, sizeof(stub.env[0].value), "%s", val);
        stub.nenv++;
        return ESPANK_SUCCESS;
}

/* The job control environment (the Prolog's and Epilogs'), kept with the
 * SPANK_ prefix Slurm gives it; Slurm refuses it outside sbatch/salloc/srun. */
spank_err_t spank_job_control_setenv(spank_t sp, const char *name, const char *value, int overwrite)
{
        char full[64];

        (void)overwrite;
        if (sp != STUB_SP)
                return ESPANK_BAD_ARG;
        if (stub.ctx != S_CTX_LOCAL && stub.ctx != S_CTX_ALLOCATOR)
                return ESPANK_NOT_LOCAL;
        snprintf(full, sizeof(full), "SPANK_%s", name);
        stub_env_put(full, value);
        return ESPANK_SUCCESS;
}

spank_err_t spank_unsetenv(spank_t sp, const char *var)
{
        if (sp != STUB_SP)
                return ESPANK_BAD_ARG;
        if (stub.ctx != S_CTX_REMOTE)
                return ESPANK_NOT_REMOTE;
        stub_env_put(var, UNSET);
        return ESPANK_SUCCESS;
}

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
        const char *v = stub_env_get(var);

        if (sp != STUB_SP || len <= 0)
                return ESPANK_BAD_ARG;
        if (!v)
                return ESPANK_ENV_NOEXIST;
        if (snprintf(buf, (size_t)len, "%s", v) >= len)
                return ESPANK_NOSPACE;
        return ESPANK_SUCCESS;
}
