/* The hooks of spank/mpi_pstate.c driven through a stub libslurm: option
 * registration in every context, submit-time refusal, the remote side's
 * environment export and batch-step skip, and "never fail a job".
 * Check forks per test, so every test starts with fresh plugin state. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>

#include "spank_stub.h"

/* The hooks, as slurmstepd and the commands call them. */
int slurm_spank_init(spank_t sp, int ac, char **av);
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av);
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av);
int slurm_spank_task_init(spank_t sp, int ac, char **av);
int slurm_spank_exit(spank_t sp, int ac, char **av);
int slurm_spank_job_prolog(spank_t sp, int ac, char **av);
int slurm_spank_job_epilog(spank_t sp, int ac, char **av);
extern const char plugin_name[];
extern const char plugin_type[];

static struct spank_option *opt_named(const char *name)
{
        for (int i = 0; i < stub.nopts; i++)
                if (strcmp(stub.opts[i].name, name) == 0)
                        return &stub.opts[i];
        ck_abort_msg("option %s not registered", name);
        return NULL;
}

/* What Slurm does with an option the user gave: call its callback. */
static int give(const char *name, const char *value, int remote)
{
        struct spank_option *o = opt_named(name);
        return o->cb(o->val, value, remote);
}

static void all_messages_prefixed(void)
{
        for (int i = 0; i < stub.nlogs; i++)
                ck_assert_msg(strncmp(stub.logs[i].msg, "mpi-pstate: ", 12) == 0, "unprefixed: %s",
                              stub.logs[i].msg);
}

static const spank_context_t all_ctxs[] = {S_CTX_LOCAL, S_CTX_ALLOCATOR, S_CTX_REMOTE, S_CTX_SLURMD,
                                           S_CTX_JOB_SCRIPT};

START_TEST(registers_every_option_in_every_context)
{
        ck_assert_str_eq(plugin_name, "mpi_pstate");
        ck_assert_str_eq(plugin_type, "spank");
        stub_reset(all_ctxs[_i]);
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(stub.nopts, 5);
        ck_assert_int_eq(opt_named("mpi-pstate")->has_arg, 2);
        ck_assert_int_eq(opt_named("mpi-pstate-threshold")->has_arg, 1);
        ck_assert_int_eq(opt_named("mpi-pstate-bind")->has_arg, 1);
        for (int i = 0; i < stub.nopts; i++)
                ck_assert(strncmp(stub.opts[i].usage, "[mpi-pstate] ", 13) == 0);
        ck_assert_str_eq(opt_named("mpi-pstate")->arginfo, "[mode]");
        ck_assert_str_eq(opt_named("mpi-pstate-low")->arginfo, "freq|min");
}
END_TEST

START_TEST(bad_value_refused_at_submit)
{
        stub_reset(S_CTX_ALLOCATOR);
        slurm_spank_init(STUB_SP, 0, NULL);
        ck_assert_int_ne(give("mpi-pstate-threshold", "abc", 0), 0);
        ck_assert_int_eq(stub_count("error", "mpi-pstate: invalid value \"abc\" for "
                                             "--mpi-pstate-threshold: expected a duration "
                                             "such as 500us or 2ms"),
                         1);
        ck_assert_int_ne(give("mpi-pstate", "maybe", 0), 0);
        ck_assert_int_ne(give("mpi-pstate-low", "(null)", 0), 0);
        ck_assert_int_eq(stub_count("error", "--mpi-pstate-low needs a value"), 1);
        all_messages_prefixed();
}
END_TEST

START_TEST(good_values_and_repeats_accepted)
{
        stub_reset(S_CTX_LOCAL);
        slurm_spank_init(STUB_SP, 0, NULL);
        ck_assert_int_eq(give("mpi-pstate", NULL, 0), 0);
        ck_assert_int_eq(give("mpi-pstate", "(null)", 0), 0);
        ck_assert_int_eq(give("mpi-pstate", "", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "2ms", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "2ms", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "5ms", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-low", "1.2GHz", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "performance", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-bind", "scatter", 0), 0);
        ck_assert_int_eq(stub_count("error", ""), 0);
}
END_TEST

START_TEST(site_limits_at_submit)
{
        char *args[] = {"allowed_governors=performance", "threshold_min=1ms", "allow_off=no"};

        stub_reset(S_CTX_ALLOCATOR);
        slurm_spank_init(STUB_SP, 3, args);
        ck_assert_int_ne(give("mpi-pstate-governor", "powersave", 0), 0);
        ck_assert_int_eq(stub_count("error", "governor powersave is not allowed"), 1);
        ck_assert_int_eq(give("mpi-pstate-threshold", "10us", 0), 0);
        ck_assert_int_eq(stub_count("info", "threshold 10us is below the site's minimum "
                                            "(threshold_min): using 1ms"),
                         1);
        ck_assert_int_eq(give("mpi-pstate", "off", 0), 0);
        ck_assert_int_eq(stub_count("info", "allow_off=no"), 1);
        all_messages_prefixed();
}
END_TEST

/* A typo in plugstack.conf must not fail jobs: remote init returns 0 and
 * the problem reaches the slurmd log. */
static const spank_context_t node_ctxs[] = {S_CTX_REMOTE, S_CTX_SLURMD, S_CTX_JOB_SCRIPT};

START_TEST(bad_plugstack_key_never_fails)
{
        char *args[] = {"bogus=1", "threshold_min=fast", "default_mode=profile"};

        stub_reset(node_ctxs[_i]);
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 3, args), 0);
        ck_assert_int_eq(stub_count("error", "unknown key \"bogus\""), 1);
        ck_assert_int_eq(stub_count("error", "for threshold_min"), 1);
        all_messages_prefixed();
}
END_TEST

/* On login nodes the user cannot fix it: verbose only. */
START_TEST(bad_plugstack_key_quiet_for_users)
{
        char *args[] = {"bogus=1"};

        stub_reset(S_CTX_LOCAL);
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 1, args), 0);
        ck_assert_int_eq(stub_count("error", ""), 0);
        ck_assert_int_eq(stub_count("verbose", "unknown key \"bogus\""), 1);
}
END_TEST

static void remote_step(uint32_t step_id, char **args, int nargs)
{
        stub_reset(S_CTX_REMOTE);
        stub.job_id = 42;
        stub.step_id = step_id;
        stub.local_tasks = 2;
        stub.uid = 1001;
        ck_assert_int_eq(slurm_spank_init(STUB_SP, nargs, args), 0);
}

START_TEST(remote_exports_canonical_env)
{
        remote_step(0, NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "(null)", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "2ms", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-low", "1.2GHz", 1), 0);
        ck_assert_int_eq(slurm_spank_init_post_opt(STUB_SP, 0, NULL), 0);
        stub.task_id = 1;
        ck_assert_int_eq(slurm_spank_task_init_privileged(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_MODE"), "on");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_THRESHOLD"), "2000");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_LOW"), "1200000");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_GOVERNOR"), "keep");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_BIND"), "cores");
        ck_assert_int_eq(slurm_spank_exit(STUB_SP, 0, NULL), 0);
        /* Every placeholder was reached once, for this step. */
        ck_assert_int_eq(stub_count("debug", "policy save/set: not wired yet (job 42 step 0"), 1);
        ck_assert_int_eq(stub_count("debug", "agent start: not wired"), 1);
        ck_assert_int_eq(stub_count("debug", "pinning: not wired yet (job 42 step 0 node 0 "
                                             "task 1)"),
                         1);
        ck_assert_int_eq(stub_count("debug", "LD_PRELOAD prepend: not wired"), 1);
        ck_assert_int_eq(stub_count("debug", "step-exit restore: not wired"), 1);
        ck_assert_int_eq(stub_count("verbose", "job 42 step 0 node 0: mode=on threshold=2ms "
                                               "low=1200MHz governor=keep bind=cores"),
                         1);
        all_messages_prefixed();
}
END_TEST

START_TEST(site_defaults_reach_tasks)
{
        char *args[] = {"default_mode=profile", "default_threshold=1ms", "default_bind=compact"};

        remote_step(3, args, 3);
        ck_assert_int_eq(slurm_spank_init_post_opt(STUB_SP, 3, args), 0);
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 3, args), 0);
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_MODE"), "profile");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_THRESHOLD"), "1000");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_BIND"), "compact");
}
END_TEST

static const uint32_t not_task_steps[] = {SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT,
                                          SLURM_INTERACTIVE_STEP};

START_TEST(batch_extern_steps_untouched)
{
        remote_step(not_task_steps[_i], NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(slurm_spank_init_post_opt(STUB_SP, 0, NULL), 0);
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_init_privileged(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(slurm_spank_exit(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(stub.nenv, 0);
        ck_assert_int_eq(stub_count(NULL, "not wired"), 0);
        ck_assert_int_eq(stub_count("debug", "is not a task step: left alone"), 1);
}
END_TEST

START_TEST(off_step_untouched)
{
        /* A job step without the option, at the built-in default: off. */
        remote_step(0, NULL, 0);
        slurm_spank_init_post_opt(STUB_SP, 0, NULL);
        slurm_spank_task_init(STUB_SP, 0, NULL);
        ck_assert_int_eq(stub.nenv, 0);
        ck_assert_int_eq(stub_count(NULL, "not wired"), 0);
}
END_TEST

/* Values reach slurmstepd only after the login node accepted them; if the
 * node's configuration disagrees, the step goes on with the site default. */
START_TEST(remote_never_fails_on_values)
{
        char *args[] = {"allowed_governors=performance", "default_governor=performance"};

        remote_step(0, args, 2);
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "powersave", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "abc", 1), 0);
        ck_assert_int_eq(stub_count("error", "governor powersave is not allowed"), 1);
        ck_assert_int_eq(stub_count("error", "invalid value \"abc\""), 1);
        slurm_spank_init_post_opt(STUB_SP, 2, args);
        slurm_spank_task_init(STUB_SP, 2, args);
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_GOVERNOR"), "performance");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_THRESHOLD"), "500");
}
END_TEST

START_TEST(job_script_hooks_read_options_and_return_0)
{
        stub_reset(S_CTX_JOB_SCRIPT);
        stub.job_id = 7;
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 0, NULL), 0);
        stub.getopt_given[1] = 1; /* --mpi-pstate-threshold=garbage reached the prolog */
        stub.getopt_value[1] = "garbage";
        ck_assert_int_eq(slurm_spank_job_prolog(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(slurm_spank_job_epilog(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(stub_count("debug", "job_prolog backstop: not wired yet (job 7"), 1);
        ck_assert_int_eq(stub_count("debug", "job_epilog backstop: not wired yet (job 7"), 1);
        ck_assert_int_eq(stub_count("verbose", "invalid value \"garbage\""), 2);
        ck_assert_int_eq(stub_count("error", ""), 0);
}
END_TEST

START_TEST(job_script_without_init)
{
        /* Even if Slurm skipped init in this context, the table is usable. */
        stub_reset(S_CTX_JOB_SCRIPT);
        stub.getopt_given[0] = 1;
        stub.getopt_value[0] = "";
        ck_assert_int_eq(slurm_spank_job_epilog(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(stub_count("debug", "job_epilog backstop"), 1);
}
END_TEST

static Suite *plugin_suite(void)
{
        Suite *s = suite_create("spank_plugin");
        TCase *tc = tcase_create("submit");

        tcase_add_loop_test(tc, registers_every_option_in_every_context, 0, 5);
        tcase_add_test(tc, bad_value_refused_at_submit);
        tcase_add_test(tc, good_values_and_repeats_accepted);
        tcase_add_test(tc, site_limits_at_submit);
        tcase_add_loop_test(tc, bad_plugstack_key_never_fails, 0, 3);
        tcase_add_test(tc, bad_plugstack_key_quiet_for_users);
        suite_add_tcase(s, tc);

        tc = tcase_create("remote");
        tcase_add_test(tc, remote_exports_canonical_env);
        tcase_add_test(tc, site_defaults_reach_tasks);
        tcase_add_loop_test(tc, batch_extern_steps_untouched, 0, 3);
        tcase_add_test(tc, off_step_untouched);
        tcase_add_test(tc, remote_never_fails_on_values);
        tcase_add_test(tc, job_script_hooks_read_options_and_return_0);
        tcase_add_test(tc, job_script_without_init);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(plugin_suite());
        int failed;

        /* The plugin keeps per-process state: every test needs its own process,
         * whatever CK_FORK says. */
        srunner_set_fork_status(sr, CK_FORK);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
