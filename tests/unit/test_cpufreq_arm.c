/* cpufreq on Arm drivers, on fake sysfs trees: cppc_cpufreq (per-core
 * domains, no frequency table, scaling_setspeed under userspace) and the
 * table drivers with per-cluster domains (scmi, cpufreq-dt).  The write
 * logs (inotify on the policy directory) show which files a setup and a
 * transition touch, in order, as for the x86 drivers in test_cpufreq.c. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "cpufreq.h"
#include "fakesys.h"

static struct fakesys fs;
static char err[256];

static void setup(void)
{
        fakesys_init(&fs);
        err[0] = '\0';
}

static void teardown(void)
{
        fakesys_cleanup(&fs);
}

static struct mpi_pstate_cpufreq_node *discover_ok(void)
{
        struct mpi_pstate_cpufreq_node *node = NULL;
        int rc = mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err));

        ck_assert_msg(rc == 0, "discover: %d %s", rc, err);
        ck_assert_ptr_nonnull(node);
        return node;
}

/* Every entry of want appears in log, in this order. */
static void assert_in_order(const char *log, const char *const *want, unsigned n)
{
        const char *at = log;

        for (unsigned i = 0; i < n; i++) {
                const char *hit = strstr(at, want[i]);

                ck_assert_msg(hit, "missing or out of order '%s' in:\n%s", want[i], log);
                at = hit + strlen(want[i]);
        }
}

START_TEST(cppc_discovery)
{
        struct mpi_pstate_cpufreq_node *node;
        const struct mpi_pstate_cpufreq_policy *p;
        unsigned idx[8];
        bool spills = true;
        cpu_set_t set;

        fakesys_cppc_cpufreq(&fs, 4);
        node = discover_ok();
        ck_assert_str_eq(node->driver, "cppc_cpufreq");
        ck_assert_uint_eq(node->npolicies, 4);
        ck_assert_int_eq(node->boost_kind, MPI_PSTATE_CPUFREQ_BOOST_NONE);
        p = mpi_pstate_cpufreq_policy_of(node, 2);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(p->nfreqs, 0); /* no table: any level in [cpuinfo_min, cpuinfo_max] */
        ck_assert_uint_eq(p->cpuinfo_min_khz, 1000000);
        ck_assert_uint_eq(p->cpuinfo_max_khz, 3000000);
        ck_assert_str_eq(p->cur.governor, "schedutil");
        ck_assert(p->has_userspace);
        ck_assert(!p->setspeed_is_floor);
        ck_assert_int_eq(CPU_COUNT(&p->related), 1);
        ck_assert(CPU_ISSET(2, &p->related));
        /* per-core domains: a two-core step owns two domains, shared with no one */
        CPU_ZERO(&set);
        CPU_SET(1, &set);
        CPU_SET(2, &set);
        ck_assert_uint_eq(mpi_pstate_cpufreq_domains_of(node, &set, idx, 8, &spills), 2);
        ck_assert(!spills);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* The whole path of one cppc core: auto picks setspeed, the step's setup
 * switches to userspace with the range of cpuinfo_min/max, the low
 * frequency is the one asked for (no table to round it to), and each
 * transition is one write of scaling_setspeed and nothing else. */
START_TEST(cppc_setspeed_write_log)
{
        struct mpi_pstate_cpufreq_node *node;
        const struct mpi_pstate_cpufreq_policy *p;
        struct mpi_pstate_cpufreq_limits lim = {.allow_governor = true};
        struct mpi_pstate_cpufreq_request req = {0};
        struct mpi_pstate_cpufreq_settings target, now;
        struct mpi_pstate_cpufreq_domain d;
        enum mpi_pstate_cpufreq_mech m;
        char log[2048];
        uint32_t low;
        int ifd;

        fakesys_cppc_cpufreq(&fs, 2);
        node = discover_ok();
        p = &node->policies[1];
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(p, MPI_PSTATE_CPUFREQ_MECH_AUTO, true, NULL,
                                                        &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_SETSPEED);
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, m, &target, NULL, err, sizeof(err)),
                         0);
        ck_assert_str_eq(target.governor, "userspace");
        ck_assert_uint_eq(target.min_khz, 1000000);
        ck_assert_uint_eq(target.max_khz, 3000000);
        ck_assert_uint_eq(target.setspeed_khz, 3000000);

        ifd = fakesys_watch(&fs, FAKESYS_CPU "/cpufreq/policy1");
        ck_assert_int_eq(mpi_pstate_cpufreq_apply(p, &target, err, sizeof(err)), 0);
        fakesys_events(ifd, log, sizeof(log));
        {
                static const char *const order[] = {"modify scaling_governor",
                                                    "modify scaling_setspeed"};

                assert_in_order(log, order, 2);
        }
        ck_assert_msg(!strstr(log, "modify scaling_max_freq") &&
                          !strstr(log, "modify scaling_min_freq"),
                      "limits rewritten though unchanged:\n%s", log);
        ck_assert_int_eq(mpi_pstate_cpufreq_read_settings(p, &now), 0);
        ck_assert_str_eq(now.governor, "userspace");
        ck_assert_uint_eq(now.setspeed_khz, 3000000);
        /* policy0 was not touched */
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_min_freq"),
                          1000000);

        /* 1.5 GHz asked: taken as is (a table driver would round it up) */
        low = mpi_pstate_agent_low_khz(1500000, p->cpuinfo_min_khz, 0, 0, now.max_khz, p->freqs,
                                       p->nfreqs);
        ck_assert_uint_eq(low, 1500000);
        /* nothing asked: the bottom of the range */
        ck_assert_uint_eq(
            mpi_pstate_agent_low_khz(0, p->cpuinfo_min_khz, 0, 0, now.max_khz, p->freqs, p->nfreqs),
            1000000);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, p, MPI_PSTATE_CPUFREQ_MECH_SETSPEED,
                                                           low, now.max_khz, err, sizeof(err)),
                         0);
        /* outside cpuinfo's range: refused */
        {
                struct mpi_pstate_cpufreq_domain bad;

                ck_assert_int_eq(
                    mpi_pstate_cpufreq_domain_prepare(&bad, p, MPI_PSTATE_CPUFREQ_MECH_SETSPEED,
                                                      900000, 3000000, err, sizeof(err)),
                    -ERANGE);
                ck_assert_int_eq(bad.fd, -1);
        }
        fakesys_events(ifd, log, sizeof(log));
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_lower(&d), 0);
        ck_assert_msg(fakesys_events(ifd, log, sizeof(log)) == 1, "events:\n%s", log);
        ck_assert_str_eq(log, "modify scaling_setspeed\n");
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy1/scaling_setspeed"),
                          1500000);
        fakesys_events(ifd, log, sizeof(log)); /* the read just above */
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_raise(&d), 0);
        ck_assert_int_eq(fakesys_events(ifd, log, sizeof(log)), 1);
        ck_assert_str_eq(log, "modify scaling_setspeed\n");
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy1/scaling_setspeed"),
                          3000000);
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy1/scaling_max_freq"),
                          3000000);
        mpi_pstate_cpufreq_domain_close(&d);
        close(ifd);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* Without permission to change the governor, cppc is clamped through
 * scaling_max_freq, again to any level of the range. */
START_TEST(cppc_maxfreq_without_governor_change)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_cpufreq_domain d;
        enum mpi_pstate_cpufreq_mech m;
        char log[1024];
        int ifd;

        fakesys_cppc_cpufreq(&fs, 1);
        node = discover_ok();
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&node->policies[0],
                                                        MPI_PSTATE_CPUFREQ_MECH_AUTO, false, NULL,
                                                        &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, &node->policies[0], m, 1234000,
                                                           3000000, err, sizeof(err)),
                         0);
        ifd = fakesys_watch(&fs, FAKESYS_CPU "/cpufreq/policy0");
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_lower(&d), 0);
        ck_assert_int_eq(fakesys_events(ifd, log, sizeof(log)), 1);
        ck_assert_str_eq(log, "modify scaling_max_freq\n");
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq"),
                          1234000);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_raise(&d), 0);
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq"),
                          3000000);
        mpi_pstate_cpufreq_domain_close(&d);
        close(ifd);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* scmi and cpufreq-dt: a table and per-cluster domains.  A one-core step
 * shares its domain with the rest of the cluster, and a low frequency
 * between two table entries goes up to the next one. */
static const char *const cluster_drivers[] = {"scmi", "cpufreq-dt"};

START_TEST(cluster_driver_table_and_shared_domain)
{
        struct mpi_pstate_cpufreq_node *node;
        const struct mpi_pstate_cpufreq_policy *p;
        struct mpi_pstate_cpufreq_domain d;
        unsigned idx[4];
        bool spills = false;
        cpu_set_t set;
        char log[1024];
        int ifd;

        fakesys_cluster_driver(&fs, cluster_drivers[_i], 8, 4);
        node = discover_ok();
        ck_assert_str_eq(node->driver, cluster_drivers[_i]);
        ck_assert_uint_eq(node->npolicies, 2);
        p = mpi_pstate_cpufreq_policy_of(node, 5);
        ck_assert_ptr_nonnull(p);
        ck_assert_str_eq(p->name, "policy4");
        ck_assert_int_eq(CPU_COUNT(&p->related), 4);
        ck_assert_uint_eq(p->nfreqs, 4);
        ck_assert_uint_eq(p->freqs[0], 1300000);
        ck_assert_uint_eq(p->freqs[3], 2600000);
        CPU_ZERO(&set);
        CPU_SET(5, &set);
        ck_assert_uint_eq(mpi_pstate_cpufreq_domains_of(node, &set, idx, 4, &spills), 1);
        ck_assert(spills);
        ck_assert_uint_eq(mpi_pstate_agent_low_khz(1500000, p->cpuinfo_min_khz, 0, 0,
                                                   p->cur.max_khz, p->freqs, p->nfreqs),
                          1700000);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, p, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ,
                                                           1700000, 2600000, err, sizeof(err)),
                         0);
        ifd = fakesys_watch(&fs, FAKESYS_CPU "/cpufreq/policy4");
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_lower(&d), 0);
        ck_assert_int_eq(fakesys_events(ifd, log, sizeof(log)), 1);
        ck_assert_str_eq(log, "modify scaling_max_freq\n");
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy4/scaling_max_freq"),
                          1700000);
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq"),
                          2600000);
        mpi_pstate_cpufreq_domain_close(&d);
        close(ifd);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

static Suite *cpufreq_arm_suite(void)
{
        Suite *s = suite_create("cpufreq_arm");
        TCase *tc = tcase_create("arm");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, cppc_discovery);
        tcase_add_test(tc, cppc_setspeed_write_log);
        tcase_add_test(tc, cppc_maxfreq_without_governor_change);
        tcase_add_loop_test(tc, cluster_driver_table_and_shared_domain, 0,
                            sizeof(cluster_drivers) / sizeof(cluster_drivers[0]));
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(cpufreq_arm_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
