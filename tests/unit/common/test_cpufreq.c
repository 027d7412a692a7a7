/* SPDX-License-Identifier: BSD-3-Clause */
/* cpufreq backend on fake sysfs trees: discovery of the driver shapes,
 * mechanism choice, per-job policy clamping, write ordering, and the
 * one-pwrite transition of the domain handle. */
#include <check.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpufreq.h"
#include "fakesys.h"
#include "check_main.h"
#include "shortcuts.h"

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

/* A step's discovery: its CPUs' policies only, each whole; a broken policy
 * elsewhere on the node is never read. */
START_TEST(discover_only_the_cpus_policies)
{
        static const unsigned pair[] = {2, 3};
        struct mpi_pstate_cpufreq_node *node = NULL;
        cpu_set_t cpus;

        fakesys_acpi_cpufreq(&fs, 2);
        fakesys_policy(&fs, 2, pair, 2, "acpi-cpufreq", "userspace performance", "performance",
                       FAKESYS_FREQS_ACPI, 1200000, 3000000);
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/cpuinfo_max_freq", 0644, "garbage\n");
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), -EINVAL);
        CPU_ZERO(&cpus);
        CPU_SET(1, &cpus);
        CPU_SET(2, &cpus);
        ck_assert_int_eq(mpi_pstate_cpufreq_discover_cpus(fs.root, &cpus, &node, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(node->npolicies, 2);
        ck_assert_str_eq(node->policies[0].name, "policy1");
        ck_assert_str_eq(node->policies[1].name, "policy2");
        ck_assert_ptr_null(mpi_pstate_cpufreq_policy_of(node, 0));
        /* policy2 spans CPUs 2-3: loaded whole, so CPU 3 maps to it too. */
        ck_assert_ptr_eq(mpi_pstate_cpufreq_policy_of(node, 3), &node->policies[1]);
        ck_assert_int_eq(CPU_COUNT(&node->policies[1].related), 2);
        mpi_pstate_cpufreq_free(node);
        /* CPUs without cpufreq: nothing to act on, as for a node without it. */
        CPU_ZERO(&cpus);
        CPU_SET(7, &cpus);
        ck_assert_int_eq(mpi_pstate_cpufreq_discover_cpus(fs.root, &cpus, &node, err, sizeof(err)),
                         -ENODEV);
}
END_TEST

START_TEST(discover_acpi)
{
        struct mpi_pstate_cpufreq_node *node;
        const struct mpi_pstate_cpufreq_policy *p;

        fakesys_acpi_cpufreq(&fs, 2);
        node = discover_ok();
        ck_assert_uint_eq(node->npolicies, 2);
        ck_assert_str_eq(node->driver, "acpi-cpufreq");
        ck_assert_int_eq(node->boost_kind, MPI_PSTATE_CPUFREQ_BOOST_CPUFREQ);
        ck_assert_int_eq(node->boost_on, 1);
        ck_assert_str_eq(node->pstate_status, "");
        p = mpi_pstate_cpufreq_policy_of(node, 1);
        ck_assert_ptr_nonnull(p);
        ck_assert_str_eq(p->name, "policy1");
        ck_assert_uint_eq(p->nfreqs, 4);
        ck_assert_uint_eq(p->freqs[0], 1200000);
        ck_assert_uint_eq(p->freqs[1], 1800000);
        ck_assert_uint_eq(p->freqs[3], 3000000);
        ck_assert_uint_eq(p->cpuinfo_min_khz, 1200000);
        ck_assert_uint_eq(p->cpuinfo_max_khz, 3000000);
        ck_assert_uint_eq(p->cur.min_khz, 1200000);
        ck_assert_uint_eq(p->cur.max_khz, 3000000);
        ck_assert_uint_eq(p->cur.setspeed_khz, 0);
        ck_assert_str_eq(p->cur.governor, "performance");
        ck_assert_uint_eq(p->ngovernors, 6);
        ck_assert(p->has_userspace);
        ck_assert(!p->setspeed_is_floor);
        ck_assert(mpi_pstate_cpufreq_has_governor(p, "schedutil"));
        ck_assert(!mpi_pstate_cpufreq_has_governor(p, "sched"));
        ck_assert_int_eq(CPU_COUNT(&p->related), 1);
        ck_assert(CPU_ISSET(1, &p->related));
        ck_assert(mpi_pstate_cpufreq_policy_of(node, 0) == &node->policies[0]);
        ck_assert_ptr_null(mpi_pstate_cpufreq_policy_of(node, 2));
        ck_assert_ptr_null(mpi_pstate_cpufreq_policy_of(node, 100000));
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(discover_intel_pstate_hwp)
{
        struct mpi_pstate_cpufreq_node *node;
        const struct mpi_pstate_cpufreq_policy *p;

        fakesys_intel_pstate_hwp(&fs, 2);
        node = discover_ok();
        ck_assert_str_eq(node->driver, "intel_pstate");
        ck_assert_str_eq(node->pstate_status, "active");
        ck_assert_int_eq(node->boost_kind, MPI_PSTATE_CPUFREQ_BOOST_NO_TURBO);
        ck_assert_int_eq(node->boost_on, 1);
        p = mpi_pstate_cpufreq_policy_of(node, 0);
        ck_assert_uint_eq(p->nfreqs, 0);
        ck_assert_uint_eq(p->ngovernors, 2);
        ck_assert(!p->has_userspace);
        ck_assert(p->setspeed_is_floor);
        ck_assert_str_eq(p->cur.governor, "powersave");
        ck_assert_uint_eq(p->cpuinfo_max_khz, 4200000);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(discover_shared_domain)
{
        struct mpi_pstate_cpufreq_node *node;

        fakesys_shared_policy(&fs);
        node = discover_ok();
        ck_assert_uint_eq(node->npolicies, 1);
        ck_assert_int_eq(CPU_COUNT(&node->policies[0].related), 4);
        for (unsigned c = 0; c < 4; c++)
                ck_assert(mpi_pstate_cpufreq_policy_of(node, c) == &node->policies[0]);
        ck_assert_ptr_null(mpi_pstate_cpufreq_policy_of(node, 4));
        ck_assert_int_eq(node->boost_kind, MPI_PSTATE_CPUFREQ_BOOST_NONE);
        ck_assert_int_eq(node->boost_on, -1);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(domains_of_cpu_sets)
{
        struct mpi_pstate_cpufreq_node *node;
        unsigned idx[8];
        bool spills = true;
        cpu_set_t set;

        fakesys_acpi_cpufreq(&fs, 3);
        node = discover_ok();
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        CPU_SET(2, &set);
        CPU_SET(7, &set); /* no policy: ignored */
        ck_assert_uint_eq(mpi_pstate_cpufreq_domains_of(node, &set, idx, 8, &spills), 2);
        ck_assert_uint_eq(idx[0], 0);
        ck_assert_uint_eq(idx[1], 2);
        ck_assert(!spills);
        ck_assert_uint_eq(mpi_pstate_cpufreq_domains_of(node, &set, idx, 1, NULL), 1);
        mpi_pstate_cpufreq_free(node);

        fakesys_cleanup(&fs);
        fakesys_init(&fs);
        fakesys_shared_policy(&fs);
        node = discover_ok();
        CPU_ZERO(&set);
        CPU_SET(1, &set);
        CPU_SET(3, &set);
        /* Two ranks, one domain, and CPUs 0 and 2 belong to someone else. */
        ck_assert_uint_eq(mpi_pstate_cpufreq_domains_of(node, &set, idx, 8, &spills), 1);
        ck_assert_uint_eq(idx[0], 0);
        ck_assert(spills);
        for (unsigned c = 0; c < 4; c++)
                CPU_SET(c, &set);
        ck_assert_uint_eq(mpi_pstate_cpufreq_domains_of(node, &set, idx, 8, &spills), 1);
        ck_assert(!spills);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(discover_legacy_per_cpu_dir)
{
        struct mpi_pstate_cpufreq_node *node;

        /* Kernels before policyN: cpuN/cpufreq is a directory of its own. */
        fakesys_put(&fs, FAKESYS_CPU "/cpu0/cpufreq/scaling_driver", 0644, "acpi-cpufreq\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpu0/cpufreq/cpuinfo_min_freq", 0644, "1200000\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpu0/cpufreq/cpuinfo_max_freq", 0644, "3000000\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpu0/cpufreq/scaling_min_freq", 0644, "1200000\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpu0/cpufreq/scaling_max_freq", 0644, "3000000\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpu0/cpufreq/scaling_governor", 0644, "userspace\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpu0/cpufreq/scaling_setspeed", 0644, "1800000\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpu0/cpufreq/related_cpus", 0644, "0\n");
        node = discover_ok();
        ck_assert_uint_eq(node->npolicies, 1);
        ck_assert_str_eq(node->policies[0].name, "cpu0");
        ck_assert_uint_eq(node->policies[0].cur.setspeed_khz, 1800000);
        /* No available list, no affected_cpus: the active governor and related_cpus stand in. */
        ck_assert_uint_eq(node->policies[0].ngovernors, 1);
        ck_assert(node->policies[0].has_userspace);
        ck_assert_int_eq(CPU_COUNT(&node->policies[0].affected), 1);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(discover_missing_cpufreq)
{
        struct mpi_pstate_cpufreq_node *node = (void *)1;

        fakesys_no_cpufreq(&fs, 2);
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), -ENODEV);
        ck_assert_ptr_null(node);
        ck_assert_msg(strstr(err, "no cpufreq driver"), "err: %s", err);
        /* A policy directory without a driver is no domain either. */
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/related_cpus", 0644, "0\n");
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), -ENODEV);
}
END_TEST

START_TEST(discover_rejects_malformed)
{
        struct mpi_pstate_cpufreq_node *node = NULL;

        fakesys_acpi_cpufreq(&fs, 1);
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/related_cpus", 0644, "0 x\n");
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "related_cpus"), "err: %s", err);
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/related_cpus", 0644, "0\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq", 0644, "3GHz\n");
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), -EINVAL);
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq", 0644, "3000000\n");
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_governor", 0644, "perf/../x\n");
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_null(node);
}
END_TEST

START_TEST(discover_rejects_overlapping_domains)
{
        static const unsigned both[] = {0, 1};
        static const unsigned one[] = {1};
        struct mpi_pstate_cpufreq_node *node = NULL;

        fakesys_policy(&fs, 0, both, 2, "acpi-cpufreq", "performance", "performance", NULL, 1200000,
                       3000000);
        fakesys_policy(&fs, 2, one, 0, "acpi-cpufreq", "performance", "performance", NULL, 1200000,
                       3000000);
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy2/related_cpus", 0644, "1\n");
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "cpu1"), "err: %s", err);
}
END_TEST

struct cpulist_case {
        const char *in;
        int rc;
        int count;
        int last;
};

static const struct cpulist_case cpulists[] = {
    {"0 1 2 3", 0, 4, 3},     {"0-3", 0, 4, 3},        {"0,2-4", 0, 4, 4},
    {"7\n", 0, 1, 7},         {"", 0, 0, -1},          {"3-1", -ERANGE, 0, -1},
    {"1024", -ERANGE, 0, -1}, {"a", -EINVAL, 0, -1},   {"1-", -EINVAL, 0, -1},
    {"-1", -EINVAL, 0, -1},   {"0x1", -EINVAL, 0, -1},
};

START_TEST(cpulist_parse)
{
        const struct cpulist_case *c = &cpulists[_i];
        cpu_set_t set;

        CPU_ZERO(&set);
        ck_assert_msg(mpi_pstate_cpufreq_parse_cpulist(c->in, &set) == c->rc, "'%s'", c->in);
        if (c->rc == 0) {
                ck_assert_int_eq(CPU_COUNT(&set), c->count);
                if (c->last >= 0)
                        ck_assert(CPU_ISSET(c->last, &set));
        }
}
END_TEST

START_TEST(mech_names)
{
        enum mpi_pstate_cpufreq_mech m = MPI_PSTATE_CPUFREQ_MECH_AUTO;

        ck_assert_str_eq(mpi_pstate_cpufreq_mech_name(MPI_PSTATE_CPUFREQ_MECH_MAXFREQ), "max_freq");
        ck_assert_str_eq(mpi_pstate_cpufreq_mech_name(MPI_PSTATE_CPUFREQ_MECH_SETSPEED),
                         "setspeed");
        ck_assert_str_eq(mpi_pstate_cpufreq_mech_name((enum mpi_pstate_cpufreq_mech)9), "invalid");
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_parse("setspeed", &m), 0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_SETSPEED);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_parse("max_freq", &m), 0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_parse("auto", &m), 0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_AUTO);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_parse("SETSPEED", &m), -EINVAL);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_parse("", &m), -EINVAL);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_AUTO);
}
END_TEST

START_TEST(mech_choice)
{
        struct mpi_pstate_cpufreq_node *acpi, *intel;
        struct mpi_pstate_cpufreq_policy p;
        enum mpi_pstate_cpufreq_mech m;

        fakesys_acpi_cpufreq(&fs, 1);
        acpi = discover_ok();
        p = acpi->policies[0];
        /* auto: setspeed only with userspace, an exact driver, and permission */
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&p, MPI_PSTATE_CPUFREQ_MECH_AUTO, true,
                                                        NULL, &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_SETSPEED);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&p, MPI_PSTATE_CPUFREQ_MECH_AUTO, false,
                                                        NULL, &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&p, MPI_PSTATE_CPUFREQ_MECH_AUTO, true,
                                                        "ondemand", &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&p, MPI_PSTATE_CPUFREQ_MECH_SETSPEED, false,
                                                        NULL, &m, err, sizeof(err)),
                         -EPERM);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&p, MPI_PSTATE_CPUFREQ_MECH_SETSPEED, true,
                                                        "performance", &m, err, sizeof(err)),
                         -EINVAL);
        /* Already under userspace: no governor change needed, so no permission either. */
        snprintf(p.cur.governor, sizeof(p.cur.governor), "userspace");
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&p, MPI_PSTATE_CPUFREQ_MECH_AUTO, false,
                                                        NULL, &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_SETSPEED);
        /* Forcing max_freq always works. */
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&p, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, true,
                                                        NULL, &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        /* A userspace target that is only a floor (HWP) is no way to slow down. */
        p.setspeed_is_floor = true;
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&p, MPI_PSTATE_CPUFREQ_MECH_AUTO, true,
                                                        NULL, &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        mpi_pstate_cpufreq_free(acpi);

        fakesys_cleanup(&fs);
        fakesys_init(&fs);
        fakesys_intel_pstate_hwp(&fs, 1);
        intel = discover_ok();
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&intel->policies[0],
                                                        MPI_PSTATE_CPUFREQ_MECH_AUTO, true, NULL,
                                                        &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        err[0] = '\0';
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&intel->policies[0],
                                                        MPI_PSTATE_CPUFREQ_MECH_SETSPEED, true,
                                                        NULL, &m, err, sizeof(err)),
                         -EOPNOTSUPP);
        ck_assert_msg(strstr(err, "no userspace governor"), "err: %s", err);
        mpi_pstate_cpufreq_free(intel);
}
END_TEST

START_TEST(mech_choice_intel_cpufreq_passive)
{
        struct mpi_pstate_cpufreq_node *node;
        enum mpi_pstate_cpufreq_mech m;

        /* intel_pstate in passive mode: userspace exists, but with HWP the target is a floor. */
        fakesys_policy(&fs, 0, (const unsigned[]){0}, 1, "intel_cpufreq",
                       "userspace performance powersave schedutil", "schedutil", NULL, 800000,
                       4200000);
        fakesys_put(&fs, FAKESYS_CPU "/intel_pstate/status", 0644, "passive\n");
        node = discover_ok();
        ck_assert(!node->policies[0].setspeed_is_floor);
        mpi_pstate_cpufreq_free(node);
        /* the kernel shows hwp_dynamic_boost in active mode only: not a sign of HWP here */
        fakesys_put(&fs, FAKESYS_CPU "/intel_pstate/hwp_dynamic_boost", 0644, "0\n");
        node = discover_ok();
        ck_assert(!node->policies[0].setspeed_is_floor);
        mpi_pstate_cpufreq_free(node);
        /* with HWP, intel_cpufreq's policies carry the HWP attributes */
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/energy_performance_preference", 0644,
                    "balance_performance\n");
        node = discover_ok();
        ck_assert(node->policies[0].setspeed_is_floor);
        mpi_pstate_cpufreq_free(node);
        {
                char path[1024];

                fakesys_path(&fs, FAKESYS_CPU "/cpufreq/policy0/energy_performance_preference",
                             path, sizeof(path));
                ck_assert_int_eq(unlink(path), 0);
        }
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/base_frequency", 0444, "2100000\n");
        node = discover_ok();
        ck_assert(node->policies[0].setspeed_is_floor);
        ck_assert_int_eq(mpi_pstate_cpufreq_mech_choose(&node->policies[0],
                                                        MPI_PSTATE_CPUFREQ_MECH_AUTO, true, NULL,
                                                        &m, err, sizeof(err)),
                         0);
        ck_assert_int_eq(m, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(plan_clamps_to_admin_limits)
{
        struct mpi_pstate_cpufreq_node *node;
        const struct mpi_pstate_cpufreq_policy *p;
        struct mpi_pstate_cpufreq_limits lim = {.floor_khz = 1800000,
                                                .ceiling_khz = 2400000,
                                                .governors = "performance, powersave",
                                                .allow_governor = true};
        struct mpi_pstate_cpufreq_request req = {0};
        struct mpi_pstate_cpufreq_settings s;
        unsigned clamped = 99;

        fakesys_acpi_cpufreq(&fs, 1);
        node = discover_ok();
        p = &node->policies[0];

        req.min_khz = 1200000;
        req.max_khz = 3000000;
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 &clamped, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(s.min_khz, 1800000);
        ck_assert_uint_eq(s.max_khz, 2400000);
        ck_assert_uint_eq(clamped, MPI_PSTATE_CPUFREQ_CLAMPED_MIN | MPI_PSTATE_CPUFREQ_CLAMPED_MAX);
        ck_assert_str_eq(s.governor, "performance");
        ck_assert_uint_eq(s.setspeed_khz, 0);

        /* Nothing asked: the whole allowed range, nothing reported as clamped. */
        memset(&req, 0, sizeof(req));
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 &clamped, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(s.min_khz, 1800000);
        ck_assert_uint_eq(s.max_khz, 2400000);
        ck_assert_uint_eq(clamped, 0);

        /* A minimum above the ceiling comes down to it. */
        req.min_khz = 3000000;
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 &clamped, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(s.min_khz, 2400000);
        ck_assert_uint_eq(s.max_khz, 2400000);
        ck_assert_uint_eq(clamped, MPI_PSTATE_CPUFREQ_CLAMPED_MAX);

        /* No admin limits: hardware limits apply. */
        req.min_khz = 1000000;
        req.max_khz = 0;
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, NULL, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 &clamped, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(s.min_khz, 1200000);
        ck_assert_uint_eq(s.max_khz, 3000000);
        ck_assert_uint_eq(clamped, MPI_PSTATE_CPUFREQ_CLAMPED_MIN);

        req.min_khz = 2400000;
        req.max_khz = 1800000;
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "above maximum"), "err: %s", err);

        struct mpi_pstate_cpufreq_limits bad = {.floor_khz = 2500000, .ceiling_khz = 2000000};
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &bad, NULL, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 NULL, err, sizeof(err)),
                         -EINVAL);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(plan_validates_governor)
{
        struct mpi_pstate_cpufreq_node *node;
        const struct mpi_pstate_cpufreq_policy *p;
        struct mpi_pstate_cpufreq_limits lim = {.governors = "performance powersave userspace",
                                                .allow_governor = true};
        struct mpi_pstate_cpufreq_request req = {0};
        struct mpi_pstate_cpufreq_settings s;

        fakesys_acpi_cpufreq(&fs, 1);
        node = discover_ok();
        p = &node->policies[0];

        req.governor = "turbo";
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "not available"), "err: %s", err);
        req.governor = "../../x";
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 NULL, err, sizeof(err)),
                         -EINVAL);
        /* Available to the kernel but not allowed by the admin. */
        req.governor = "ondemand";
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 NULL, err, sizeof(err)),
                         -EPERM);
        ck_assert_msg(strstr(err, "not among those allowed"), "err: %s", err);
        req.governor = "powersave";
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 NULL, err, sizeof(err)),
                         0);
        ck_assert_str_eq(s.governor, "powersave");
        /* Governor changes forbidden: a change fails, keeping the current one does not. */
        lim.allow_governor = false;
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 NULL, err, sizeof(err)),
                         -EPERM);
        req.governor = "performance";
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, &s,
                                                 NULL, err, sizeof(err)),
                         0);
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, NULL, MPI_PSTATE_CPUFREQ_MECH_SETSPEED,
                                                 &s, NULL, err, sizeof(err)),
                         -EPERM);
        /* setspeed: userspace governor, starting at the top of the range */
        lim.allow_governor = true;
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, NULL, MPI_PSTATE_CPUFREQ_MECH_SETSPEED,
                                                 &s, NULL, err, sizeof(err)),
                         0);
        ck_assert_str_eq(s.governor, "userspace");
        ck_assert_uint_eq(s.setspeed_khz, 3000000);
        ck_assert_int_eq(mpi_pstate_cpufreq_plan(p, &lim, &req, MPI_PSTATE_CPUFREQ_MECH_SETSPEED,
                                                 &s, NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "conflicts"), "err: %s", err);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

static struct mpi_pstate_cpufreq_settings S(const char *gov, uint32_t min, uint32_t max,
                                            uint32_t sp) {
        struct mpi_pstate_cpufreq_settings s = {.min_khz = min, .max_khz = max, .setspeed_khz = sp};

        snprintf(s.governor, sizeof(s.governor), "%s", gov);
        return s;
}

START_TEST(plan_writes_order)
{
        struct mpi_pstate_cpufreq_write w[MPI_PSTATE_CPUFREQ_MAX_WRITES];
        struct mpi_pstate_cpufreq_settings a, b;

        /* Range moves up: max first. */
        a = S("performance", 1200000, 1800000, 0);
        b = S("performance", 2400000, 3000000, 0);
        ck_assert_uint_eq(mpi_pstate_cpufreq_plan_writes(&a, &b, w), 2);
        ck_assert_int_eq(w[0].attr, MPI_PSTATE_CPUFREQ_ATTR_MAX);
        ck_assert_str_eq(w[0].value, "3000000");
        ck_assert_int_eq(w[1].attr, MPI_PSTATE_CPUFREQ_ATTR_MIN);
        ck_assert_str_eq(w[1].value, "2400000");
        /* Range moves down: min first. */
        ck_assert_uint_eq(mpi_pstate_cpufreq_plan_writes(&b, &a, w), 2);
        ck_assert_int_eq(w[0].attr, MPI_PSTATE_CPUFREQ_ATTR_MIN);
        ck_assert_int_eq(w[1].attr, MPI_PSTATE_CPUFREQ_ATTR_MAX);
        /* Governor after the limits, setspeed last. */
        b = S("userspace", 1200000, 1800000, 1200000);
        a = S("performance", 1200000, 3000000, 0);
        ck_assert_uint_eq(mpi_pstate_cpufreq_plan_writes(&a, &b, w), 3);
        ck_assert_int_eq(w[0].attr, MPI_PSTATE_CPUFREQ_ATTR_MAX);
        ck_assert_int_eq(w[1].attr, MPI_PSTATE_CPUFREQ_ATTR_GOVERNOR);
        ck_assert_str_eq(w[1].value, "userspace");
        ck_assert_int_eq(w[2].attr, MPI_PSTATE_CPUFREQ_ATTR_SETSPEED);
        ck_assert_str_eq(w[2].value, "1200000");
        /* Same governor, only the userspace speed differs. */
        a = S("userspace", 1200000, 1800000, 1800000);
        ck_assert_uint_eq(mpi_pstate_cpufreq_plan_writes(&a, &b, w), 1);
        ck_assert_int_eq(w[0].attr, MPI_PSTATE_CPUFREQ_ATTR_SETSPEED);
        /* Nothing to do. */
        ck_assert_uint_eq(mpi_pstate_cpufreq_plan_writes(&b, &b, w), 0);
        ck_assert_str_eq(mpi_pstate_cpufreq_attr_file(MPI_PSTATE_CPUFREQ_ATTR_SETSPEED),
                         "scaling_setspeed");
}
END_TEST

START_TEST(apply_writes_in_order)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_cpufreq_settings t, now;
        char log[1024], buf[64];
        int ifd;

        fakesys_acpi_cpufreq(&fs, 1);
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq", 0644, "1800000\n");
        node = discover_ok();
        ifd = fakesys_watch(&fs, FAKESYS_CPU "/cpufreq/policy0");
        t = S("userspace", 2400000, 3000000, 2400000);
        ck_assert_int_eq(mpi_pstate_cpufreq_apply(&node->policies[0], &t, err, sizeof(err)), 0);
        fakesys_events(ifd, log, sizeof(log));
        /* Reading the current state opens files too; the modifications must come in order. */
        {
                const char *order[] = {"modify scaling_max_freq", "modify scaling_min_freq",
                                       "modify scaling_governor", "modify scaling_setspeed"};
                const char *at = log;

                for (unsigned i = 0; i < 4; i++) {
                        const char *hit = strstr(at, order[i]);

                        ck_assert_msg(hit, "missing or out of order '%s' in:\n%s", order[i], log);
                        at = hit + strlen(order[i]);
                }
        }
        ck_assert_int_eq(mpi_pstate_cpufreq_read_settings(&node->policies[0], &now), 0);
        ck_assert_str_eq(now.governor, "userspace");
        ck_assert_uint_eq(now.min_khz, 2400000);
        ck_assert_uint_eq(now.max_khz, 3000000);
        ck_assert_uint_eq(now.setspeed_khz, 2400000);
        /* One-shot writes truncate: the plain file holds exactly the new value. */
        fakesys_get(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_governor", buf, sizeof(buf));
        ck_assert_str_eq(buf, "userspace");
        close(ifd);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* The _from variants take the settings the caller just read: the same
 * writes in the same order, and no policy file opened for reading. */
START_TEST(apply_and_prepare_from_known_settings)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_cpufreq_settings t, now;
        struct mpi_pstate_cpufreq_domain d;
        char log[2048];
        int ifd;

        fakesys_acpi_cpufreq(&fs, 1);
        node = discover_ok();
        ifd = fakesys_watch(&fs, FAKESYS_CPU "/cpufreq/policy0");
        t = S("userspace", 1200000, 3000000, 3000000);
        ck_assert_int_eq(mpi_pstate_cpufreq_apply_from(&node->policies[0], &node->policies[0].cur,
                                                       &t, err, sizeof(err)),
                         0);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare_from(&d, &node->policies[0], &t,
                                                                MPI_PSTATE_CPUFREQ_MECH_SETSPEED,
                                                                1200000, 3000000, err, sizeof(err)),
                         0);
        mpi_pstate_cpufreq_domain_close(&d);
        fakesys_events(ifd, log, sizeof(log));
        ck_assert_msg(strstr(log, "modify scaling_governor") &&
                          strstr(log, "modify scaling_setspeed"),
                      "%s", log);
        {
                /* governor and setspeed written, setspeed kept open: three opens, no read. */
                unsigned opens = 0;

                for (const char *at = log; (at = strstr(at, "open ")); at++)
                        opens++;
                ck_assert_msg(opens == 3, "%u opens:\n%s", opens, log);
        }
        ck_assert_int_eq(mpi_pstate_cpufreq_read_settings(&node->policies[0], &now), 0);
        ck_assert_str_eq(now.governor, "userspace");
        ck_assert_uint_eq(now.setspeed_khz, 3000000);
        /* What prepare_from is told is what it checks: not userspace, no setspeed. */
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare_from(
                             &d, &node->policies[0], &node->policies[0].cur,
                             MPI_PSTATE_CPUFREQ_MECH_SETSPEED, 1200000, 3000000, err, sizeof(err)),
                         -EINVAL);
        close(ifd);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(apply_reports_failed_write)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_cpufreq_settings t;
        char path[512];

        fakesys_acpi_cpufreq(&fs, 1);
        node = discover_ok();
        snprintf(path, sizeof(path), "%s/" FAKESYS_CPU "/cpufreq/policy0/scaling_governor",
                 fs.root);
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(symlink("/etc/passwd", path), 0);
        t = S("powersave", 1200000, 3000000, 0);
        /* read_settings refuses the symlink before anything is written */
        ck_assert_int_eq(mpi_pstate_cpufreq_apply(&node->policies[0], &t, err, sizeof(err)),
                         -ELOOP);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* Write system calls made so far by this process.  No Check assertion in
 * here: in fork mode every assertion reports its location with a write(). */
static unsigned long syscw(void)
{
        char buf[512], *p;
        int fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        p = strstr(buf, "syscw: ");
        return p ? strtoul(p + 7, NULL, 10) : 0;
}

START_TEST(domain_maxfreq_one_write)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_cpufreq_domain d;
        char log[512], buf[64];
        unsigned long w0, w1;
        int ifd, rc;

        fakesys_acpi_cpufreq(&fs, 1);
        node = discover_ok();
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, &node->policies[0],
                                                           MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, 1200000,
                                                           3000000, err, sizeof(err)),
                         0);
        ck_assert_int_ge(d.fd, 0);
        ck_assert_str_eq(d.low, "1200000\n");
        ck_assert_str_eq(d.high, "3000000\n");
        ck_assert_uint_eq(d.low_len, 8);
        ifd = fakesys_watch(&fs, FAKESYS_CPU "/cpufreq/policy0");

        w0 = syscw();
        rc = mpi_pstate_cpufreq_domain_lower(&d);
        w1 = syscw();
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_gt(w0, 0);
        ck_assert_uint_eq(w1 - w0, 1);
        /* Exactly one modification, no open or close: the kept fd did it all. */
        ck_assert_int_eq(fakesys_events(ifd, log, sizeof(log)), 1);
        ck_assert_str_eq(log, "modify scaling_max_freq\n");
        ck_assert_str_eq(
            fakesys_get(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq", buf, sizeof(buf)),
            "1200000");
        fakesys_events(ifd, log, sizeof(log));

        w0 = syscw();
        rc = mpi_pstate_cpufreq_domain_raise(&d);
        w1 = syscw();
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_eq(w1 - w0, 1);
        ck_assert_int_eq(fakesys_events(ifd, log, sizeof(log)), 1);
        ck_assert_str_eq(log, "modify scaling_max_freq\n");
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq"),
                          3000000);
        /* Nothing else moved. */
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_min_freq"),
                          1200000);
        mpi_pstate_cpufreq_domain_close(&d);
        ck_assert_int_eq(d.fd, -1);
        close(ifd);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* In a child: a seccomp filter that lets through pwrite64 and exit only, then
 * one transition.  Any other system call kills the child with SIGSYS. */
static void transition_under_seccomp(const struct mpi_pstate_cpufreq_domain *d, bool lower)
{
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pwrite64, 2, 0),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit_group, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
        int status;
        pid_t pid = fork();

        ck_assert(pid >= 0);
        if (pid == 0) {
                int rc;

                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
                        _exit(3);
                /* qemu-user (make check-arm64) refuses seccomp filters: the
                 * transition then runs unfiltered, and only its result is
                 * checked there. */
                if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0 &&
                    (errno != EINVAL || !getenv("MPI_PSTATE_TEST_EMULATED")))
                        _exit(3);
                rc =
                    lower ? mpi_pstate_cpufreq_domain_lower(d) : mpi_pstate_cpufreq_domain_raise(d);
                _exit(rc == 0 ? 0 : 1);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "transition used another system call or failed (status %#x)", status);
}

START_TEST(domain_setspeed_only_pwrite)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_cpufreq_domain d;
        struct mpi_pstate_cpufreq_settings t = S("userspace", 1200000, 3000000, 3000000);

        fakesys_acpi_cpufreq(&fs, 1);
        node = discover_ok();
        /* setspeed needs userspace active */
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, &node->policies[0],
                                                           MPI_PSTATE_CPUFREQ_MECH_SETSPEED,
                                                           1200000, 3000000, err, sizeof(err)),
                         -EINVAL);
        ck_assert_int_eq(d.fd, -1);
        ck_assert_int_eq(mpi_pstate_cpufreq_apply(&node->policies[0], &t, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, &node->policies[0],
                                                           MPI_PSTATE_CPUFREQ_MECH_SETSPEED,
                                                           1800000, 3000000, err, sizeof(err)),
                         0);
        transition_under_seccomp(&d, true);
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_setspeed"),
                          1800000);
        transition_under_seccomp(&d, false);
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_setspeed"),
                          3000000);
        /* The max clamp was not touched by the setspeed mechanism. */
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq"),
                          3000000);
        mpi_pstate_cpufreq_domain_close(&d);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(domain_shorter_value_on_plain_file)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_cpufreq_domain d;
        struct mpi_pstate_cpufreq_settings now;
        static const unsigned cpu0[] = {0};

        /* 90 MHz has two digits less than 3 GHz: on a plain file "90000\n" over
         * "3000000\n" leaves "90000\n0\n"; the first-line rule of the reader (as
         * the kernel shows only the value) must see 90000. */
        fakesys_policy(&fs, 0, cpu0, 1, "acpi-cpufreq", "userspace performance", "performance",
                       NULL, 90000, 3000000);
        node = discover_ok();
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, &node->policies[0],
                                                           MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, 90000,
                                                           3000000, err, sizeof(err)),
                         0);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_lower(&d), 0);
        ck_assert_int_eq(mpi_pstate_cpufreq_read_settings(&node->policies[0], &now), 0);
        ck_assert_uint_eq(now.max_khz, 90000);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_raise(&d), 0);
        ck_assert_int_eq(mpi_pstate_cpufreq_read_settings(&node->policies[0], &now), 0);
        ck_assert_uint_eq(now.max_khz, 3000000);
        mpi_pstate_cpufreq_domain_close(&d);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(low_frequency)
{
        static const uint32_t table[] = {1200000, 1800000, 2400000, 3000000};

        /* min: the highest of cpuinfo_min, the admin floor and scaling_min */
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(0, 1200000, 0, 0, 3000000, NULL, 0), 1200000);
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(0, 1200000, 1500000, 0, 3000000, NULL, 0),
                          1500000);
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(0, 1200000, 0, 1600000, 3000000, NULL, 0),
                          1600000);
        /* a request below the floor is raised to it */
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(800000, 1200000, 0, 0, 3000000, NULL, 0),
                          1200000);
        /* rounded up to the table */
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(1300000, 1200000, 0, 0, 3000000, table, 4),
                          1800000);
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(0, 1200000, 1500000, 0, 3000000, table, 4),
                          1800000);
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(1800000, 1200000, 0, 0, 3000000, table, 4),
                          1800000);
        /* nothing to gain: at or above the high end */
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(2500000, 1200000, 0, 0, 2400000, table, 4), 0);
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(0, 1200000, 0, 1200000, 1200000, table, 4), 0);
        /* a table entry above high is not used: the value stays between */
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(2500000, 1200000, 0, 0, 2800000, table, 4),
                          2500000);
        /* intel_pstate: no table */
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(1000000, 400000, 0, 400000, 3000000, NULL, 0),
                          1000000);
}
END_TEST

START_TEST(domain_prepare_checks)
{
        struct mpi_pstate_cpufreq_node *node;
        struct mpi_pstate_cpufreq_domain d;
        const struct mpi_pstate_cpufreq_policy *p;

        fakesys_acpi_cpufreq(&fs, 1);
        node = discover_ok();
        p = &node->policies[0];
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, p, MPI_PSTATE_CPUFREQ_MECH_AUTO,
                                                           1200000, 3000000, err, sizeof(err)),
                         -EINVAL);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, p, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ,
                                                           1000000, 3000000, err, sizeof(err)),
                         -ERANGE);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, p, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ,
                                                           1200000, 3100000, err, sizeof(err)),
                         -ERANGE);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, p, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ,
                                                           2400000, 1800000, err, sizeof(err)),
                         -ERANGE);
        /* A clamp below the job's minimum would not be honoured by the kernel. */
        fakesys_put(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_min_freq", 0644, "1800000\n");
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, p, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ,
                                                           1200000, 3000000, err, sizeof(err)),
                         -ERANGE);
        ck_assert_msg(strstr(err, "below scaling_min_freq"), "err: %s", err);
        ck_assert_int_eq(d.fd, -1);
        /* Failed prepares leave nothing written. */
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_max_freq"),
                          3000000);
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* ---- Arm drivers: cppc_cpufreq (per-core domains, no frequency table,
 * scaling_setspeed under userspace) and the table drivers with per-cluster
 * domains (scmi, cpufreq-dt), on the same fake trees and write logs. */
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
        low = mpi_pstate_cpufreq_low_khz(1500000, p->cpuinfo_min_khz, 0, 0, now.max_khz, p->freqs,
                                         p->nfreqs);
        ck_assert_uint_eq(low, 1500000);
        /* nothing asked: the bottom of the range */
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(0, p->cpuinfo_min_khz, 0, 0, now.max_khz,
                                                     p->freqs, p->nfreqs),
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
        ck_assert_uint_eq(mpi_pstate_cpufreq_low_khz(1500000, p->cpuinfo_min_khz, 0, 0,
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

static Suite *cpufreq_suite(void)
{
        Suite *s = suite_create("cpufreq");
        TCase *tc = tcase_create("discover");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, discover_acpi);
        tcase_add_test(tc, discover_only_the_cpus_policies);
        tcase_add_test(tc, apply_and_prepare_from_known_settings);
        tcase_add_test(tc, discover_intel_pstate_hwp);
        tcase_add_test(tc, discover_shared_domain);
        tcase_add_test(tc, domains_of_cpu_sets);
        tcase_add_test(tc, discover_legacy_per_cpu_dir);
        tcase_add_test(tc, discover_missing_cpufreq);
        tcase_add_test(tc, discover_rejects_malformed);
        tcase_add_test(tc, discover_rejects_overlapping_domains);
        tcase_add_loop_test(tc, cpulist_parse, 0, sizeof(cpulists) / sizeof(cpulists[0]));
        suite_add_tcase(s, tc);

        tc = tcase_create("policy");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, mech_names);
        tcase_add_test(tc, mech_choice);
        tcase_add_test(tc, mech_choice_intel_cpufreq_passive);
        tcase_add_test(tc, plan_clamps_to_admin_limits);
        tcase_add_test(tc, plan_validates_governor);
        tcase_add_test(tc, plan_writes_order);
        tcase_add_test(tc, apply_writes_in_order);
        tcase_add_test(tc, apply_reports_failed_write);
        suite_add_tcase(s, tc);

        tc = tcase_create("domain");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, domain_maxfreq_one_write);
        tcase_add_test(tc, domain_setspeed_only_pwrite);
        tcase_add_test(tc, domain_shorter_value_on_plain_file);
        tcase_add_test(tc, domain_prepare_checks);
        tcase_add_test(tc, low_frequency);
        suite_add_tcase(s, tc);
        tc = tcase_create("arm");
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
        return mpi_pstate_check_main(cpufreq_suite(), false);
}
