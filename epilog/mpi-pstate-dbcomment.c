/* SPDX-License-Identifier: BSD-3-Clause */
/* mpi-pstate-dbcomment: the one writer of mpi-pstate's summary into a job's
 * accounting record, and the reader of the job as slurmctld sees it.
 *
 *   mpi-pstate-dbcomment [--cluster NAME] --set JOBID[_TASK] < TEXT
 *       AdminComment of JOBID in slurmdbd := TEXT (stdin, at most 65535
 *       bytes, no NUL).  Works after the job ended, with quotes intact.
 *   mpi-pstate-dbcomment --show JOBID
 *       slurmctld's view: one line "<BASE_STATE> <exit>:<signal>", then the
 *       current AdminComment verbatim (to EOF).  The base state is the one
 *       behind COMPLETING (CANCELLED, TIMEOUT, FAILED, ...).
 *
 * Why a C tool: sacctmgr turns quotes into backticks, and scontrol cannot
 * update a job that has finished (the EpilogSlurmctld runs while it is
 * COMPLETING).  libslurm's slurmdb_job_modify() is what sacctmgr calls,
 * minus the quote mangling (tried on the test cluster: quotes come back
 * intact).
 *
 * --system: the same on the job's SystemComment instead (admin-only, no
 * other tool decodes it; docs/records.md "Where the summary lives").
 *
 * Exit: 0 done, 1 error, 2 usage, 3 (--set) the job is not (yet) in the
 * database, 4 (--show) slurmctld does not know the job (any more).  Runs as
 * SlurmUser or root (an admin of slurmdbd). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurmdb.h>

#include "parse.h"

/* Only libslurm's public API is used, so that one source builds against
 * Slurm 22.05 (Debian 12), 24.11 (Debian 13) and 26.05 (Debian forky).  The
 * differences that matter here: 24.11 removed the `List` pointer typedef for
 * `list_t`; 26.05's slurm_load_job() names the job by a step id (load_job)
 * and slurm_free_ctl_conf() became slurm_free_conf(). */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 11, 0)
typedef list_t *db_list;
#else
typedef List db_list;
#endif
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
#define free_ctl_conf slurm_free_conf
#else
#define free_ctl_conf slurm_free_ctl_conf
#endif

#define TEXT_MAX 65535u /* slurmdbd's admin_comment is a TEXT column */

/* Base job states by enum job_states value, spelled as Slurm prints them
 * (sacct, squeue): libslurm's own table is not in its public headers. */
static const char *const STATE_NAMES[] = {
    [JOB_PENDING] = "PENDING",     [JOB_RUNNING] = "RUNNING",     [JOB_SUSPENDED] = "SUSPENDED",
    [JOB_COMPLETE] = "COMPLETED",  [JOB_CANCELLED] = "CANCELLED", [JOB_FAILED] = "FAILED",
    [JOB_TIMEOUT] = "TIMEOUT",     [JOB_NODE_FAIL] = "NODE_FAIL", [JOB_PREEMPTED] = "PREEMPTED",
    [JOB_BOOT_FAIL] = "BOOT_FAIL", [JOB_DEADLINE] = "DEADLINE",   [JOB_OOM] = "OUT_OF_MEMORY",
};
_Static_assert(sizeof(STATE_NAMES) / sizeof(STATE_NAMES[0]) == JOB_END, "a job state has no name");

static bool use_system; /* --system: system_comment, not admin_comment */

static void usage(FILE *f)
{
        fprintf(f, "usage: mpi-pstate-dbcomment [--system] [--cluster NAME] --set JOBID[_TASK] "
                   "< TEXT\n"
                   "       mpi-pstate-dbcomment [--system] --show JOBID\n");
}

/* stdin into a NUL-terminated buffer; NULL when too long or holding a NUL
 * byte (the column is text, and a NUL would silently cut it). */
static char *read_text(void)
{
        char *buf = malloc(TEXT_MAX + 2);
        size_t n = 0, got;

        if (!buf)
                return NULL;
        while ((got = fread(buf + n, 1, TEXT_MAX + 1 - n, stdin)) > 0) {
                n += got;
                if (n > TEXT_MAX)
                        break;
        }
        if (n > TEXT_MAX || ferror(stdin) || memchr(buf, '\0', n)) {
                fprintf(stderr, "mpi-pstate-dbcomment: text longer than %u bytes or not text\n",
                        TEXT_MAX);
                free(buf);
                return NULL;
        }
        buf[n] = '\0';
        return buf;
}

/* The job as slurmctld has it.  26.05 takes a slurm_step_id_t, the whole
 * job being its step NO_VAL; earlier releases the bare job id. */
static int load_job(job_info_msg_t **msg, uint32_t job_id)
{
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
        slurm_step_id_t id = {.job_id = job_id, .step_id = NO_VAL, .step_het_comp = NO_VAL};

        return slurm_load_job(msg, id, SHOW_DETAIL);
#else
        return slurm_load_job(msg, job_id, SHOW_DETAIL);
#endif
}

static int show(uint32_t job_id)
{
        job_info_msg_t *msg = NULL;
        slurm_job_info_t *j;
        uint32_t base;
        int code = 0, sig = 0;

        /* libslurm reports its errors in errno (slurm_get_errno() is gone
         * from 24.11). */
        errno = 0;
        if (load_job(&msg, job_id) != SLURM_SUCCESS) {
                int e = errno;

                fprintf(stderr, "mpi-pstate-dbcomment: job %u: %s\n", job_id, slurm_strerror(e));
                return e == ESLURM_INVALID_JOB_ID ? 4 : 1;
        }
        if (!msg || msg->record_count < 1) {
                slurm_free_job_info_msg(msg);
                return 4;
        }
        j = &msg->job_array[0];
        if (j->exit_code != NO_VAL) {
                if (WIFSIGNALED(j->exit_code))
                        sig = WTERMSIG(j->exit_code);
                else
                        code = WEXITSTATUS(j->exit_code);
        }
        base = j->job_state & JOB_STATE_BASE;
        printf("%s %d:%d\n", base < JOB_END ? STATE_NAMES[base] : "UNKNOWN", code, sig);
        if (use_system)
                fputs(j->system_comment ? j->system_comment : "", stdout);
        else
                fputs(j->admin_comment ? j->admin_comment : "", stdout);
        slurm_free_job_info_msg(msg);
        return fflush(stdout) == 0 ? 0 : 1;
}

/* The condition that selects the job: its step list (one step that owns
 * nothing but the ids) and its cluster list.  0, or -1 out of memory. */
static int make_cond(slurmdb_job_cond_t *cond, uint32_t job_id, uint32_t task, const char *cluster)
{
        slurm_selected_step_t *step = calloc(1, sizeof(*step));

        cond->step_list = slurm_list_create(free);
        cond->cluster_list = slurm_list_create(NULL);
        if (!step || !cond->step_list || !cond->cluster_list) {
                free(step);
                return -1;
        }
        /* As sacctmgr's "jobid=J" or "jobid=J_T" selects it: the whole job,
         * no particular step or het component. */
        step->array_task_id = task;
        step->het_job_offset = NO_VAL;
        step->step_id.job_id = job_id;
        step->step_id.step_id = NO_VAL;
        step->step_id.step_het_comp = NO_VAL;
        slurm_list_append(cond->step_list, step); /* the list's now */
        slurm_list_append(cond->cluster_list, (void *)cluster);
        /* Without these the modify matches nothing ("Request didn't affect
         * anything"), measured on 22.05. */
        cond->db_flags = SLURMDB_JOB_FLAG_NOTSET;
        cond->flags = JOBCOND_FLAG_NO_DEFAULT_USAGE;
        return 0;
}

/* One modify through slurmdbd, committed only when it changed the job:
 * 0, 3 (slurmdbd does not have the job) or 1. */
static int modify(slurmdb_job_cond_t *cond, slurmdb_job_rec_t *job, uint32_t job_id)
{
        void *db;
        db_list ret;
        int rc, e;

        errno = 0;
        db = slurmdb_connection_get(NULL);
        if (!db) {
                fprintf(stderr, "mpi-pstate-dbcomment: no connection to slurmdbd: %s\n",
                        slurm_strerror(errno));
                return 1;
        }
        errno = 0;
        ret = slurmdb_job_modify(db, cond, job);
        e = errno;
        if (ret && slurm_list_count(ret) > 0) {
                rc = 0;
        } else {
                /* slurmdbd answers a job it does not have with an empty
                 * list or, through libslurm, NULL and SLURM_NO_CHANGE_IN_DATA
                 * ("Request didn't affect anything"). */
                fprintf(stderr, "mpi-pstate-dbcomment: job %u not modified: %s\n", job_id,
                        e ? slurm_strerror(e) : "not in the database");
                rc = ret || e == SLURM_NO_CHANGE_IN_DATA ? 3 : 1;
        }
        slurmdb_connection_commit(db, rc == 0);
        if (ret)
                slurm_list_destroy(ret);
        slurmdb_connection_close(&db);
        return rc;
}

/* task == NO_VAL: a plain job id.  slurmdbd reads a plain id as "this job
 * or the array it heads", so for the array task that keeps the array's own
 * id, only JOBID_TASK selects that one task and spares its siblings.
 *
 * The condition's step and the job record are built here rather than with
 * libslurm's slurm_addto_step_list() / slurmdb_create_job_rec(), which are
 * not public API: both stay ours (malloc'd, freed by us), libslurm only
 * packs them for slurmdbd. */
static int set(uint32_t job_id, uint32_t task, const char *cluster_arg, char *text)
{
        slurmdb_job_cond_t cond;
        slurmdb_job_rec_t *job = NULL;
        slurm_conf_t *conf = NULL;
        const char *cluster = cluster_arg;
        int rc = 1;

        memset(&cond, 0, sizeof(cond));
        if (!cluster) {
                errno = 0;
                if (slurm_load_ctl_conf((time_t)0, &conf) != SLURM_SUCCESS || !conf->cluster_name) {
                        fprintf(stderr, "mpi-pstate-dbcomment: cluster name unknown: %s\n",
                                errno ? slurm_strerror(errno) : "no ClusterName");
                        goto out;
                }
                cluster = conf->cluster_name;
        }
        job = calloc(1, sizeof(*job));
        if (!job || make_cond(&cond, job_id, task, cluster) != 0) {
                fprintf(stderr, "mpi-pstate-dbcomment: out of memory\n");
                goto out;
        }
        job->derived_ec = NO_VAL; /* leave the exit code alone */
        if (use_system)
                job->system_comment = text;
        else
                job->admin_comment = text;
        rc = modify(&cond, job, job_id);
out:
        if (cond.step_list)
                slurm_list_destroy(cond.step_list);
        if (cond.cluster_list)
                slurm_list_destroy(cond.cluster_list);
        if (conf)
                free_ctl_conf(conf);
        free(job); /* admin_comment / system_comment are the caller's */
        return rc;
}

int main(int argc, char **argv)
{
        const char *cluster = NULL, *mode = NULL;
        char *idtext = NULL;
        char *text = NULL;
        uint64_t id, task = NO_VAL;
        char *under;
        int rc;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--system")) {
                        use_system = true;
                } else if (!strcmp(argv[i], "--cluster") && i + 1 < argc && !cluster) {
                        cluster = argv[++i];
                } else if ((!strcmp(argv[i], "--set") || !strcmp(argv[i], "--show")) &&
                           i + 1 < argc && !mode) {
                        mode = argv[i];
                        idtext = argv[++i];
                } else if (!strcmp(argv[i], "--help")) {
                        usage(stdout);
                        return 0;
                } else {
                        usage(stderr);
                        return 2;
                }
        }
        /* JOBID_TASK (array task) is accepted for --set only. */
        under = idtext ? strchr(idtext, '_') : NULL;
        if (under && mode && !strcmp(mode, "--set")) {
                *under = '\0';
                if (mpi_pstate_parse_u64(under + 1, 0, UINT32_MAX - 2, &task) != 0) {
                        usage(stderr);
                        return 2;
                }
        }
        if (!mode || mpi_pstate_parse_u64(idtext, 1, UINT32_MAX - 1, &id) != 0 ||
            (cluster && (!*cluster || strlen(cluster) > 64))) {
                usage(stderr);
                return 2;
        }
        /* Refuse bad text before touching any Slurm configuration. */
        if (!strcmp(mode, "--set") && !(text = read_text()))
                return 1;
        slurm_init(NULL);
        rc = text ? set((uint32_t)id, (uint32_t)task, cluster, text) : show((uint32_t)id);
        slurm_fini();
        free(text);
        return rc;
}
