/* SPDX-License-Identifier: BSD-3-Clause */
/* spank_mpi_pstate.so: the SPANK front door of mpi-pstate.
 *
 * This is the only file that defines slurm_spank_* symbols.  Each hook
 * switches on spank_context() and either validates and stores user options
 * (sbatch, salloc, srun) or calls the step's work in spank/step.h (slurmstepd
 * and the job prolog/epilog).  Options come from common/options.def, admin
 * keys and limits from spank/plugstack.h.
 *
 * Return values follow spank(8)'s error table: only the option callbacks in
 * local and allocator context may fail (that refuses a bad submission);
 * every other hook returns 0, because a non-zero return in remote or
 * job_script context fails the job or drains the node (from Slurm 25.05 on
 * every non-zero return counts as an error, and a failed remote
 * slurm_spank_init drains the node unless the plugin says otherwise:
 * slurm_spank_init_failure_mode below). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "plugstack.h"
#include "log.h"
#include "options.h"
#include "slurmfreq.h"
#include "step.h"
#include "step_state.h"

/* Built with -fvisibility=hidden: what Slurm must find is made visible
 * here, and spank/mpi_pstate.lds keeps everything else local. */
#define HOOK __attribute__((visibility("default")))
#pragma GCC visibility push(default)
SPANK_PLUGIN(mpi_pstate, 1);
#pragma GCC visibility pop

/* Slurm 25.05 and later read this symbol: with ESPANK_NODE_FAILURE, their
 * default, a remote slurm_spank_init error drains the node and requeues the
 * job.  Ours never fails, but a measuring tool must never take a node out
 * of service, whatever a later change does: the job fails instead. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
HOOK int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif

/* One plugin instance per process: slurmd, slurmstepd, srun, sbatch, salloc
 * or the prolog/epilog slurmstepd.  slurmstepd forks the tasks after
 * init_post_opt, so the per-task hooks inherit this state. */
static struct mpi_pstate_config cfg;
static struct mpi_pstate_options opt;
static bool ready;       /* cfg parsed and opt at the site defaults */
static bool step_active; /* remote: a step we act on (not batch/extern, mode not off) */
static bool batch_env;   /* remote: the batch step of a job whose mode is not off */
static struct spank_option spank_opts[MPI_PSTATE_OPT_COUNT];
/* The step's state from init_post_opt to exit, passed to each phase of
 * spank/step.h: a hook receives no pointer of the plugin's own, so the one
 * instance is here, with the rest of what a process keeps between hooks. */
static struct mpi_pstate_step_state step_state = MPI_PSTATE_STEP_STATE_INIT;

static int opt_cb(int val, const char *optarg, int remote);

static bool user_facing(void)
{
        spank_context_t c = spank_context();

        return c == S_CTX_LOCAL || c == S_CTX_ALLOCATOR;
}

/* Config problems go to the slurmd log on nodes; on login nodes users could
 * not fix them, so they are shown only with -v. */
static void report_config(void *ctx, const char *msg)
{
        (void)ctx;
        if (user_facing())
                mp_verbose_msg(msg);
        else
                mp_error_msg(msg);
}

/* The SPANK option table is the C view of options.def; spank_option wants
 * non-const strings it never writes.  An option with a bare meaning takes an
 * optional argument (has_arg 2), the others a required one. */
static void fill_spank_options(void)
{
        /* --help prints "--name=<arginfo>"; brackets show the value is optional. */
        static char optional_arg[MPI_PSTATE_OPT_COUNT][32];

        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                const struct mpi_pstate_option_info *in = mpi_pstate_options_info(id);
                char *arginfo = (char *)in->arginfo;

                if (in->bare) {
                        snprintf(optional_arg[id], sizeof(optional_arg[id]), "[%s]", in->arginfo);
                        arginfo = optional_arg[id];
                }
                spank_opts[id] = (struct spank_option){
                    .name = (char *)in->name,
                    .arginfo = arginfo,
                    .usage = (char *)in->usage,
                    .has_arg = in->bare ? 2 : 1,
                    .val = id,
                    .cb = opt_cb,
                };
        }
}

/* Slurm's CpuFreqGovernors and CpuFreqDef from the slurm.conf this process
 * uses ($SLURM_CONF; slurmd points its steps at its configless cache).
 * Without a readable file only allowed_governors limits the governor, and
 * the login node's check may pass what the node's refuses (logged there). */
static void slurm_settings(void)
{
        struct mpi_pstate_slurmfreq sf;
        char msg[512];
        int rc = mpi_pstate_slurmfreq_read(NULL, &sf);

        if (rc == -ENOENT)
                return;
        if (rc) {
                snprintf(msg, sizeof(msg),
                         "mpi-pstate: slurm.conf: CpuFreqDef/CpuFreqGovernors: %s; using what "
                         "could be read",
                         strerror(-rc));
                report_config(NULL, msg);
                if (rc != -EINVAL)
                        return;
        }
        mpi_pstate_plugstack_slurm(&cfg, sf.governors, sf.def_set, report_config, NULL);
}

/* Idempotent: slurm_spank_init (or a job_script hook) does it with the
 * plugstack arguments; the call in opt_cb is only a guard. */
static void setup(int ac, char **av)
{
        if (ready)
                return;
        mpi_pstate_plugstack_defaults(&cfg);
        mpi_pstate_plugstack_parse(&cfg, ac, av, report_config, NULL);
        slurm_settings();
        opt = cfg.defaults;
        fill_spank_options();
        ready = true;
}

static void register_options(spank_t sp)
{
        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                spank_err_t rc = spank_option_register(sp, &spank_opts[id]);

                if (rc != ESPANK_SUCCESS)
                        mp_debug("cannot register --%s: %s", spank_opts[id].name,
                                 spank_strerror(rc));
        }
}

/* Option callback: validate and store, nothing else.  Called with remote=0
 * in sbatch/salloc/srun as options are parsed (environment first, then the
 * command line, so a later value replaces an earlier one), and with
 * remote=1 in slurmstepd before init_post_opt.  A failure in local context
 * refuses the submission, with a message naming option and value; in
 * remote context the value was accepted at submit time by the login node's
 * configuration, so the step goes on with the site default. */
static int opt_cb(int val, const char *optarg, int remote)
{
        char msg[512];

        setup(0, NULL);
        if (mpi_pstate_options_set_id(&opt, val, optarg, msg, sizeof(msg)) < 0) {
                mp_error_msg(msg);
                return remote ? 0 : -1;
        }
        switch (mpi_pstate_plugstack_limit(&cfg, &opt, val, msg, sizeof(msg))) {
        case MPI_PSTATE_LIMIT_OK:
                return 0;
        case MPI_PSTATE_LIMIT_ADJUSTED:
                mp_info_msg(msg);
                return 0;
        case MPI_PSTATE_LIMIT_REFUSED:
        default:
                mp_error_msg(msg);
                return remote ? 0 : -1;
        }
}

/* In job_script context Slurm runs no option callback: the job's options
 * (those given to sbatch/salloc) are read back with spank_option_getopt. */
static void options_from_getopt(spank_t sp)
{
        char msg[512];

        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                char *arg = NULL;

                if (spank_option_getopt(sp, &spank_opts[id], &arg) != ESPANK_SUCCESS)
                        continue;
                if (mpi_pstate_options_set_id(&opt, id, arg, msg, sizeof(msg)) < 0) {
                        mp_verbose_msg(msg);
                        continue;
                }
                if (mpi_pstate_plugstack_limit(&cfg, &opt, id, msg, sizeof(msg)) !=
                    MPI_PSTATE_LIMIT_OK)
                        mp_verbose_msg(msg);
        }
}

static void gather(spank_t sp, struct mpi_pstate_step *st, bool per_task)
{
        memset(st, 0, sizeof(*st));
        st->sp = sp;
        st->task_id = -1;
        st->cfg = &cfg;
        st->opt = &opt;
        /* Items a context does not offer stay 0; nothing here is fatal. */
        (void)spank_get_item(sp, S_JOB_ID, &st->job_id);
        (void)spank_get_item(sp, S_JOB_STEPID, &st->step_id);
        (void)spank_get_item(sp, S_JOB_NODEID, &st->node_id);
        (void)spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &st->local_tasks);
        (void)spank_get_item(sp, S_JOB_UID, &st->uid);
        (void)spank_get_item(sp, S_JOB_GID, &st->gid);
        if (per_task && spank_get_item(sp, S_TASK_ID, &st->task_id) != ESPANK_SUCCESS)
                st->task_id = -1;
}

static void settings_text(char *buf, size_t len)
{
        size_t o = 0;

        buf[0] = '\0';
        for (int id = 0; id < MPI_PSTATE_OPT_COUNT && o < len; id++) {
                char v[32];
                int n;

                if (mpi_pstate_options_format_human(&opt, id, v, sizeof(v)) < 0)
                        snprintf(v, sizeof(v), "?");
                n = snprintf(buf + o, len - o, "%s%s=%s", id ? " " : "",
                             mpi_pstate_options_info(id)->key, v);
                if (n < 0)
                        break;
                o += (size_t)n;
        }
}

static void check(int rc, const char *what, const struct mpi_pstate_step *st)
{
        if (rc < 0)
                mp_error("job %u step %u: %s failed: %s; continuing without it", st->job_id,
                         st->step_id, what, strerror(-rc));
}

typedef int (*step_fn)(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st);
typedef int (*job_fn)(const struct mpi_pstate_step *st);

/* The remote hooks after init_post_opt all do one thing, and only in a step
 * that asked for mpi-pstate; a failure is logged and the step goes on. */
static int in_active_step(spank_t sp, bool per_task, step_fn fn, const char *what)
{
        struct mpi_pstate_step st;

        if (spank_context() != S_CTX_REMOTE || !step_active)
                return 0;
        gather(sp, &st, per_task);
        check(fn(&step_state, &st), what, &st);
        return 0;
}

/* The job prolog and epilog run whether or not the job asked for mpi-pstate:
 * their options come from the job's environment (getopt). */
static int in_job_script(spank_t sp, int ac, char **av, job_fn fn, const char *what)
{
        struct mpi_pstate_step st;

        setup(ac, av);
        options_from_getopt(sp);
        gather(sp, &st, false);
        check(fn(&st), what, &st);
        return 0;
}

/* slurm_spank_init: every context, first hook, once per process.
 *   slurmd      root, at daemon start: config problems reach the log early.
 *   local       srun, the user, before option parsing.
 *   allocator   sbatch/salloc, the user, before option parsing.
 *   remote      slurmstepd, root, once per step (batch and extern too).
 *   job_script  prolog/epilog slurmstepd, root, once per node per job.
 * Options are registered in every context: sbatch and salloc ignore a static
 * spank_options table, and slurmstepd needs them to receive the values.
 * Returns 0 always (remote: non-zero would fail the job). */
HOOK int slurm_spank_init(spank_t sp, int ac, char **av)
{
        setup(ac, av);
        register_options(sp);
        return 0;
}

/* slurm_spank_init_post_opt: after the option callbacks.
 *   remote      slurmstepd, root, once per step per node, before the tasks
 *               are forked and before Slurm applies --cpu-freq: decide
 *               whether this step is ours, save the cores' settings (the
 *               restore records), create the segment.
 *   others      nothing to do (the callbacks did the checking).
 * Returns 0 always. */
HOOK int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
        struct mpi_pstate_step st;
        char settings[256];

        (void)ac;
        (void)av;
        if (user_facing()) {
                /* sbatch/salloc/srun making the job: the EpilogSlurmctld
                 * gets SPANK_MPI_PSTATE_MODE, so a job whose node records
                 * all arrive late (a share down) is waited for rather than
                 * taken for one without mpi-pstate.  In a step of an
                 * existing job Slurm refuses it: nothing to do there. */
                if (opt.mode != MPI_PSTATE_MODE_OFF)
                        (void)spank_job_control_setenv(sp, "MPI_PSTATE_MODE",
                                                       mpi_pstate_options_mode_word(opt.mode), 1);
                return 0;
        }
        if (spank_context() != S_CTX_REMOTE)
                return 0;
        gather(sp, &st, false);
        /* The batch script, the extern step and an interactive salloc shell
         * are not MPI ranks: a preload there would land in every tool the
         * script runs.  The batch script only learns how to make mpirun
         * start its ranks through srun steps, where the plugin serves them. */
        if (st.step_id == SLURM_BATCH_SCRIPT || st.step_id == SLURM_EXTERN_CONT ||
            st.step_id == SLURM_INTERACTIVE_STEP) {
                batch_env = st.step_id == SLURM_BATCH_SCRIPT && opt.mode != MPI_PSTATE_MODE_OFF;
                mp_debug("job %u: step %u is not a task step: left alone", st.job_id, st.step_id);
                return 0;
        }
        if (opt.mode == MPI_PSTATE_MODE_OFF)
                return 0;
        step_active = true;
        settings_text(settings, sizeof(settings));
        mp_verbose("job %u step %u node %u: %s", st.job_id, st.step_id, st.node_id, settings);
        check(mpi_pstate_step_policy_save(&step_state, &st), "policy save", &st);
        check(mpi_pstate_step_segment_create(&step_state, &st), "segment", &st);
        return 0;
}

/* slurm_spank_task_post_fork: remote only; slurmstepd, root, once per local
 * task, after the task was forked and before it may exec.  Slurm's task
 * plugin has applied --cpu-freq/CpuFreqDef by now (task_p_pre_setuid, before
 * the first fork): the first call sets the step's policy over Slurm's setting
 * and starts the agent, which takes the result as the step's "high".
 * Returns 0 always (non-zero fails the step). */
HOOK int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
        static bool started;

        (void)ac;
        (void)av;
        if (started || !step_active)
                return 0;
        started = true; /* step_active is set in the remote context only */
        return in_active_step(sp, false, mpi_pstate_step_start, "policy set/agent start");
}

/* slurm_spank_task_init_privileged: remote only; the forked task before
 * exec, still root, once per local task.  Pinning happens here because the
 * task is already its own process and not yet the user's (task/affinity
 * binds after this hook; slurm_spank_task_init puts ours back).
 * Returns 0 always (non-zero fails the job). */
HOOK int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
        (void)ac;
        (void)av;
        return in_active_step(sp, true, mpi_pstate_step_pin_task, "pinning");
}

static int task_setenv(void *ctx, const char *name, const char *value)
{
        spank_err_t rc = spank_setenv((spank_t)ctx, name, value, 1);

        return rc == ESPANK_SUCCESS ? 0 : -EIO;
}

/* slurm_spank_task_init: remote only; the forked task before exec, as the
 * job's user, once per local task, after the task plugin bound it.
 * spank_setenv here reaches the task's environment (measured): export the
 * canonical MPI_PSTATE_* contract, the segment and slot index, then put the
 * library in LD_PRELOAD; the pinning is checked against the task plugin's.
 * In the batch step only Open MPI's launch setting (step.h).  Returns 0 always (non-zero fails the
 * job; a task without the variables runs unmeasured). */
HOOK int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
        struct mpi_pstate_step st;

        (void)ac;
        (void)av;
        if (spank_context() != S_CTX_REMOTE || !(step_active || batch_env))
                return 0;
        gather(sp, &st, true);
        if (batch_env) {
                check(mpi_pstate_step_batch_env(&st), "batch environment", &st);
                return 0;
        }
        check(mpi_pstate_options_to_env(&opt, task_setenv, sp), "exporting MPI_PSTATE_*", &st);
        check(mpi_pstate_step_task_env(&step_state, &st), "task environment", &st);
        return 0;
}

/* slurm_spank_task_exit: remote only; slurmstepd, root, once per local task
 * as it is reaped.  After the last one the agent is stopped, before
 * proctrack kills what is left of the step.  Returns 0 always. */
HOOK int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
        (void)ac;
        (void)av;
        return in_active_step(sp, true, mpi_pstate_step_task_exit, "agent stop");
}

/* slurm_spank_exit: last hook, once per process.
 *   remote      slurmstepd, root, once per step per node, after all tasks
 *               ended (the job is still running): stop the agent, restore.
 *   others      nothing.
 * Returns 0 always. */
HOOK int slurm_spank_exit(spank_t sp, int ac, char **av)
{
        (void)ac;
        (void)av;
        return in_active_step(sp, false, mpi_pstate_step_restore, "step-exit restore");
}

/* slurm_spank_job_prolog: job_script; the prolog slurmstepd, root, once per
 * node per job, before any step, whether or not the job asked for
 * mpi-pstate.  Backstop for cores an earlier job left lowered.
 * Returns 0 always (non-zero drains the node). */
HOOK int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
        return in_job_script(sp, ac, av, mpi_pstate_step_job_prolog_backstop,
                             "job_prolog backstop");
}

/* slurm_spank_job_epilog: job_script; the epilog slurmstepd, root, once per
 * node per job, after every step, whether or not the job asked for
 * mpi-pstate.  Backstop: every core this job changed is restored.
 * Returns 0 always (non-zero drains the node). */
HOOK int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
        return in_job_script(sp, ac, av, mpi_pstate_step_job_epilog_backstop,
                             "job_epilog backstop");
}
