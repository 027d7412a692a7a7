/* SPDX-License-Identifier: BSD-3-Clause */
/* The levers beside the core's cap on fake sysfs trees: EPP (discovery,
 * mechanism choice, the one-pwrite handle, write order, the restore
 * record's epp line), the lowest nonlinear frequency, and uncore domains
 * (discovery with their CPUs, the handle, records and the backstop). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpufreq.h"
#include "fakesys.h"
#include "restore.h"
#include "safeio.h"
#include "uncore.h"
#include "check_main.h"
#include "shortcuts.h"

#define UNC FAKESYS_CPU "/intel_uncore_frequency"

static struct fakesys fs;
static char err[256], dir[400];
static const struct mpi_pstate_restore_owner job42 = {42, 0}, job7 = {7, 0};

static void setup(void)
{
        fakesys_init(&fs);
        snprintf(dir, sizeof(dir), "%s/run/restore", fs.root);
        err[0] = '\0';
}

static void teardown(void)
{
        fakesys_cleanup(&fs);
}

/* amd-pstate-epp: no table, performance/powersave, EPP and the nonlinear
 * frequency per policy. */
static void amd_epp(unsigned ncpu, const char *gov, const char *epp)
{
        char rel[128];

        for (unsigned c = 0; c < ncpu; c++) {
                fakesys_policy(&fs, c, &c, 1, "amd-pstate-epp", "performance powersave", gov, NULL,
                               400000, 3700000);
                snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpufreq/policy%u/%s", c,
                         "energy_performance_preference");
                fakesys_put(&fs, rel, 0644, "%s\n", epp);
                snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpufreq/policy%u/%s", c,
                         "amd_pstate_lowest_nonlinear_freq");
                fakesys_put(&fs, rel, 0444, "1800000\n");
        }
}

static struct mpi_pstate_cpufreq_node *discover_ok(void)
{
        struct mpi_pstate_cpufreq_node *node = NULL;
        int rc = mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err));

        ck_assert_msg(rc == 0, "discover: %d %s", rc, err);
        return node;
}

START_TEST(epp_and_nonlinear_discovered)
{
        struct mpi_pstate_cpufreq_node *node;

        amd_epp(2, "powersave", "balance_performance");
        node = discover_ok();
        ck_assert_str_eq(node->policies[0].cur.epp, "balance_performance");
        ck_assert_uint_eq(node->policies[0].nonlinear_khz, 1800000);
        ck_assert(node->policies[0].epp_busy_under_performance);
        mpi_pstate_cpufreq_free(node);

        /* acpi-cpufreq: neither */
        fakesys_cleanup(&fs);
        fakesys_init(&fs);
        fakesys_acpi_cpufreq(&fs, 1);
        node = discover_ok();
        ck_assert_str_eq(node->policies[0].cur.epp, "");
        ck_assert_uint_eq(node->policies[0].nonlinear_khz, 0);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* A knee at the minimum is no knee; a garbage EPP is no EPP lever. */
START_TEST(no_knee_at_the_minimum_no_lever_on_garbage)
{
        struct mpi_pstate_cpufreq_node *node;

        amd_epp(1, "powersave", "0x80");
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/amd_pstate_lowest_nonlinear_freq", 0444,
                    "400000\n");
        node = discover_ok();
        ck_assert_uint_eq(node->policies[0].nonlinear_khz, 0);
        ck_assert_str_eq(node->policies[0].cur.epp, "");
        mpi_pstate_cpufreq_free(node);
}
END_TEST

static const struct {
        const char *s;
        bool ok;
} epps[] = {
    {"default", true},       {"performance", true}, {"balance_performance", true},
    {"balance_power", true}, {"power", true},       {"0", true},
    {"255", true},           {"128", true},         {"256", false},
    {"007", false},          {"", false},           {"Power", false},
    {"power ", false},       {"-1", false},         {"0x80", false},
};

START_TEST(epp_values)
{
        ck_assert_msg(mpi_pstate_cpufreq_valid_epp(epps[_i].s) == epps[_i].ok, "%s", epps[_i].s);
}
END_TEST

START_TEST(epp_mechanism_rules)
{
        struct mpi_pstate_cpufreq_node *node;
        enum mpi_pstate_cpufreq_mech m = MPI_PSTATE_CPUFREQ_MECH_AUTO;

        amd_epp(1, "performance", "performance");
        node = discover_ok();
        /* EBUSY under performance, and a job asking for performance is the same */
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&node->policies[0],
                                                        MPI_PSTATE_CPUFREQ_MECH_EPP, true, NULL, &m,
                                                        err, sizeof(err)),
                         -EBUSY);
        ck_assert_ptr_nonnull(strstr(err, "performance"));
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&node->policies[0],
                                                        MPI_PSTATE_CPUFREQ_MECH_EPP, true,
                                                        "powersave", &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_EPP);
        /* AUTO never picks it */
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&node->policies[0],
                                                        MPI_PSTATE_CPUFREQ_MECH_AUTO, true, NULL,
                                                        &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_parse("epp", &m), 0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_EPP);
        mpi_pstate_cpufreq_free(node);

        fakesys_cleanup(&fs);
        fakesys_init(&fs);
        fakesys_acpi_cpufreq(&fs, 1);
        node = discover_ok();
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&node->policies[0],
                                                        MPI_PSTATE_CPUFREQ_MECH_EPP, true, NULL, &m,
                                                        err, sizeof(err)),
                         -EOPNOTSUPP);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(epp_handle_writes_words)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_cpufreq_domain d;
        char buf[64];

        amd_epp(1, "powersave", "balance_performance");
        node = discover_ok();
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, &node->policies[0],
                                                           MPI_PSTATE_CPUFREQ_MECH_EPP, 400000,
                                                           3700000, err, sizeof(err)),
                         0);
        ck_assert_str_eq(d.low, "power\n");
        ck_assert_str_eq(d.high, "balance_performance\n");
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_lower(&d), 0);
        ck_assert_str_eq(fakesys_get(&fs,
                                     FAKESYS_CPU "/cpufreq/policy0/energy_performance_preference",
                                     buf, sizeof(buf)),
                         "power");
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_raise(&d), 0);
        ck_assert_str_eq(fakesys_get(&fs,
                                     FAKESYS_CPU "/cpufreq/policy0/energy_performance_preference",
                                     buf, sizeof(buf)),
                         "balance_performance");
        /* the cap is untouched */
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq"),
                          3700000);
        mpi_pstate_cpufreq_domain_close(&d);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(epp_written_last)
{
        struct mpi_pstate_cpufreq_settings cur = {"performance", 400000, 3700000, 0, "performance"};
        struct mpi_pstate_cpufreq_settings to = {"powersave", 400000, 3000000, 0,
                                                 "balance_performance"};
        struct mpi_pstate_cpufreq_write w[MPI_PSTATE_CPUFREQ_MAX_WRITES];
        unsigned n = mpi_pstate_cpufreq_plan_writes(&cur, &to, w);

        ck_assert_uint_eq(n, 3);
        ck_assert_int_eq(w[0].attr, MPI_PSTATE_CPUFREQ_ATTR_MAX);
        ck_assert_int_eq(w[1].attr, MPI_PSTATE_CPUFREQ_ATTR_GOVERNOR);
        ck_assert_int_eq(w[2].attr, MPI_PSTATE_CPUFREQ_ATTR_EPP);
        ck_assert_str_eq(w[2].value, "balance_performance");
        /* "" in a target leaves it alone; an equal value is not rewritten */
        to.epp[0] = '\0';
        ck_assert_uint_eq(mpi_pstate_cpufreq_plan_writes(&cur, &to, w), 2);
        memcpy(to.epp, "performance", 12);
        ck_assert_uint_eq(mpi_pstate_cpufreq_plan_writes(&cur, &to, w), 2);
}
END_TEST

START_TEST(restore_record_with_epp)
{
        struct mpi_pstate_restore_record r = {0}, back;
        char text[MPI_PSTATE_RESTORE_MAX_BYTES];
        int n;

        r.owner = job42;
        snprintf(r.policy, sizeof(r.policy), "policy3");
        snprintf(r.driver, sizeof(r.driver), "amd-pstate-epp");
        r.saved =
            (struct mpi_pstate_cpufreq_settings){"powersave", 400000, 3700000, 0, "balance_power"};
        n = mpi_pstate_restore_format(&r, text, sizeof(text));
        ck_assert_int_gt(n, 0);
        ck_assert_ptr_nonnull(strstr(text, "version=2\n"));
        ck_assert_ptr_nonnull(strstr(text, "setspeed_khz=0\nepp=balance_power\n"));
        text[n - 1] = '\0';
        ck_assert_int_eq(mpi_pstate_restore_parse(text, &back), 0);
        ck_assert_str_eq(back.saved.epp, "balance_power");
        /* no EPP: the version 1 record, byte for byte */
        r.saved.epp[0] = '\0';
        n = mpi_pstate_restore_format(&r, text, sizeof(text));
        ck_assert_ptr_nonnull(strstr(text, "version=1\n"));
        ck_assert_ptr_null(strstr(text, "epp="));
        /* strict: a version 2 record needs its epp line, and a valid one */
        ck_assert_int_eq(mpi_pstate_restore_parse("version=2\njob=1\nstep=0\npolicy=policy0\n"
                                                  "driver=x\ngovernor=powersave\nmin_khz=1\n"
                                                  "max_khz=2\nsetspeed_khz=0",
                                                  &back),
                         -EINVAL);
        ck_assert_int_eq(mpi_pstate_restore_parse("version=2\njob=1\nstep=0\npolicy=policy0\n"
                                                  "driver=x\ngovernor=powersave\nmin_khz=1\n"
                                                  "max_khz=2\nsetspeed_khz=0\nepp=../x",
                                                  &back),
                         -EINVAL);
        ck_assert_int_eq(mpi_pstate_restore_parse("version=1\njob=1\nstep=0\npolicy=policy0\n"
                                                  "driver=x\ngovernor=powersave\nmin_khz=1\n"
                                                  "max_khz=2\nsetspeed_khz=0\nepp=power",
                                                  &back),
                         -EINVAL);
}
END_TEST

/* The backstop puts EPP back after the governor: a job that left the
 * policy under performance with EPP power gets both back. */
START_TEST(backstop_restores_epp)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_restore_summary sum;
        char buf[64];

        amd_epp(1, "powersave", "balance_performance");
        node = discover_ok();
        ck_assert_int_eq(mpi_pstate_restore_save(dir, &node->policies[0], &job42, err, sizeof(err)),
                         0);
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/energy_performance_preference", 0644,
                    "power\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_governor", 0644, "performance\n");
        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job42, 0, &sum, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(sum.restored, 1);
        ck_assert_str_eq(
            fakesys_get(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_governor", buf, sizeof(buf)),
            "powersave");
        ck_assert_str_eq(fakesys_get(&fs,
                                     FAKESYS_CPU "/cpufreq/policy0/energy_performance_preference",
                                     buf, sizeof(buf)),
                         "balance_performance");
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* Two packages of two CPUs each, one uncore domain per package. */
static void uncore_tree(void)
{
        char rel[160];

        for (unsigned c = 0; c < 4; c++) {
                snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpu%u/topology/physical_package_id", c);
                fakesys_put(&fs, rel, 0444, "%u\n", c / 2);
                snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpu%u/topology/die_id", c);
                fakesys_put(&fs, rel, 0444, "0\n");
        }
        for (unsigned p = 0; p < 2; p++) {
                snprintf(rel, sizeof(rel), UNC "/package_%02u_die_00/min_freq_khz", p);
                fakesys_put(&fs, rel, 0644, "800000\n");
                snprintf(rel, sizeof(rel), UNC "/package_%02u_die_00/max_freq_khz", p);
                fakesys_put(&fs, rel, 0644, "2500000\n");
                snprintf(rel, sizeof(rel), UNC "/package_%02u_die_00/initial_min_freq_khz", p);
                fakesys_put(&fs, rel, 0444, "800000\n");
                snprintf(rel, sizeof(rel), UNC "/package_%02u_die_00/initial_max_freq_khz", p);
                fakesys_put(&fs, rel, 0444, "2500000\n");
        }
        /* a TPMI cluster directory: never a domain of its own */
        fakesys_put(&fs, UNC "/uncore00/max_freq_khz", 0644, "2500000\n");
}

static const struct mpi_pstate_uncore_domain *by_name(const struct mpi_pstate_uncore_node *u,
                                                      const char *name)
{
        for (unsigned i = 0; i < u->n; i++)
                if (strcmp(u->dom[i].name, name) == 0)
                        return &u->dom[i];
        ck_abort_msg("no %s", name);
        return NULL;
}

START_TEST(uncore_discovery)
{
        struct mpi_pstate_uncore_node *u = NULL;
        const struct mpi_pstate_uncore_domain *d;

        ck_assert_int_eq(mpi_pstate_uncore_discover(fs.root, &u, err, sizeof(err)), -ENODEV);
        uncore_tree();
        ck_assert_int_eq(mpi_pstate_uncore_discover(fs.root, &u, err, sizeof(err)), 0);
        ck_assert_uint_eq(u->n, 2);
        d = by_name(u, "package_01_die_00");
        ck_assert_uint_eq(d->package, 1);
        ck_assert_uint_eq(CPU_COUNT(&d->cpus), 2);
        ck_assert(CPU_ISSET(2, &d->cpus) && CPU_ISSET(3, &d->cpus));
        ck_assert_uint_eq(d->max_khz, 2500000);
        ck_assert_uint_eq(d->initial_min_khz, 800000);
        free(u);
}
END_TEST

START_TEST(uncore_names)
{
        unsigned p = 9, d = 9;

        ck_assert(mpi_pstate_uncore_valid_name("package_00_die_00", &p, &d));
        ck_assert_uint_eq(p + d, 0);
        ck_assert(mpi_pstate_uncore_valid_name("package_12_die_03", &p, &d));
        ck_assert_uint_eq(p, 12);
        ck_assert_uint_eq(d, 3);
        ck_assert(!mpi_pstate_uncore_valid_name("package_0_die_00", NULL, NULL));
        ck_assert(!mpi_pstate_uncore_valid_name("package_00_die_", NULL, NULL));
        ck_assert(!mpi_pstate_uncore_valid_name("package_00_die_00/..", NULL, NULL));
        ck_assert(!mpi_pstate_uncore_valid_name("uncore00", NULL, NULL));
        ck_assert(!mpi_pstate_uncore_valid_name("package_-1_die_00", NULL, NULL));
}
END_TEST

START_TEST(uncore_handle_and_backstop)
{
        struct mpi_pstate_uncore_node *u = NULL;
        struct mpi_pstate_uncore_handle h;
        struct mpi_pstate_restore_summary sum;
        const struct mpi_pstate_uncore_domain *d;

        uncore_tree();
        ck_assert_int_eq(mpi_pstate_uncore_discover(fs.root, &u, err, sizeof(err)), 0);
        d = by_name(u, "package_00_die_00");
        ck_assert_int_eq(mpi_pstate_uncore_prepare(&h, d, 2500000, 2500000, err, sizeof(err)),
                         -ERANGE);
        ck_assert_int_eq(mpi_pstate_restore_save_uncore(dir, d, &job42, err, sizeof(err)), 0);
        /* another step of another job cannot take it over */
        ck_assert_int_eq(mpi_pstate_restore_save_uncore(dir, d, &job7, err, sizeof(err)), -EBUSY);
        ck_assert_int_eq(mpi_pstate_uncore_prepare(&h, d, 800000, 2500000, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_uncore_lower(&h), 0);
        ck_assert_uint_eq(fakesys_get_ul(&fs, UNC "/package_00_die_00/max_freq_khz"), 800000);
        mpi_pstate_uncore_close(&h);
        /* the agent died here: job 7's backstop leaves it, job 42's puts it back */
        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job7, 0, &sum, err, sizeof(err)), 0);
        ck_assert_uint_eq(sum.foreign, 1);
        ck_assert_uint_eq(fakesys_get_ul(&fs, UNC "/package_00_die_00/max_freq_khz"), 800000);
        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job42, 0, &sum, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(sum.restored, 1);
        ck_assert_uint_eq(fakesys_get_ul(&fs, UNC "/package_00_die_00/max_freq_khz"), 2500000);
        ck_assert_uint_eq(fakesys_get_ul(&fs, UNC "/package_00_die_00/min_freq_khz"), 800000);
        /* the other package was never touched */
        ck_assert_uint_eq(fakesys_get_ul(&fs, UNC "/package_01_die_00/max_freq_khz"), 2500000);
        free(u);
}
END_TEST

static const char *const bad_uncore[] = {
    "version=1\njob=1\nstep=0\nuncore=package_00_die_00\nmin_khz=2\nmax_khz=1",
    "version=1\njob=1\nstep=0\nuncore=uncore00\nmin_khz=1\nmax_khz=2",
    "version=1\njob=1\nstep=0\nuncore=package_00_die_00\nmin_khz=0\nmax_khz=2",
    "version=2\njob=1\nstep=0\nuncore=package_00_die_00\nmin_khz=1\nmax_khz=2",
    "version=1\njob=1\nstep=0\nuncore=package_00_die_00\nmax_khz=2\nmin_khz=1",
    "version=1\njob=1\nstep=0\nuncore=package_00_die_00\nmin_khz=1\nmax_khz=2\nx=1",
};

START_TEST(uncore_record_strict)
{
        struct mpi_pstate_restore_uncore r;

        ck_assert_msg(mpi_pstate_restore_uncore_parse(bad_uncore[_i], &r) == -EINVAL, "#%d", _i);
}
END_TEST

/* A record renamed onto another domain's name restores nothing. */
START_TEST(uncore_record_renamed)
{
        struct mpi_pstate_restore_summary sum;
        int fd;

        uncore_tree();
        fd = mpi_pstate_safeio_open_dir(dir, 1, 0700);
        ck_assert_int_ge(fd, 0);
        close(fd);
        fakesys_put(&fs, "run/restore/uncore-package_01_die_00", 0600,
                    "version=1\njob=42\nstep=0\nuncore=package_00_die_00\nmin_khz=800000\n"
                    "max_khz=900000\n");
        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job42, 0, &sum, err, sizeof(err)),
                         -EINVAL);
        ck_assert_uint_eq(sum.failed, 1);
        ck_assert_uint_eq(fakesys_get_ul(&fs, UNC "/package_00_die_00/max_freq_khz"), 2500000);
}
END_TEST

static Suite *levers_suite(void)
{
        Suite *s = suite_create("levers");
        TCase *tc = tcase_create("epp");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, epp_and_nonlinear_discovered);
        tcase_add_test(tc, no_knee_at_the_minimum_no_lever_on_garbage);
        tcase_add_loop_test(tc, epp_values, 0, sizeof(epps) / sizeof(epps[0]));
        tcase_add_test(tc, epp_mechanism_rules);
        tcase_add_test(tc, epp_handle_writes_words);
        tcase_add_test(tc, epp_written_last);
        tcase_add_test(tc, restore_record_with_epp);
        tcase_add_test(tc, backstop_restores_epp);
        suite_add_tcase(s, tc);
        tc = tcase_create("uncore");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, uncore_discovery);
        tcase_add_test(tc, uncore_names);
        tcase_add_test(tc, uncore_handle_and_backstop);
        tcase_add_loop_test(tc, uncore_record_strict, 0,
                            sizeof(bad_uncore) / sizeof(bad_uncore[0]));
        tcase_add_test(tc, uncore_record_renamed);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(levers_suite(), false);
}
