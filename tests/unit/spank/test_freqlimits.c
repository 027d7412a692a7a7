/* SPDX-License-Identifier: BSD-3-Clause */
/* The frequency limits of a step, pure logic on fake sysfs trees: the
 * agent's high and low from the settings the step's cores were set to
 * (mpi_pstate_cpufreq_step_range), Slurm's CpuFreqDef/CpuFreqGovernors read
 * from slurm.conf text (common/slurmfreq.h), and allowed_governors as a
 * narrowing of CpuFreqGovernors (mpi_pstate_plugstack_slurm). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugstack.h"
#include "cpufreq.h"
#include "fakesys.h"
#include "slurmfreq.h"
#include "check_main.h"
#include "shortcuts.h"

#define GOV(g) (UINT32_C(1) << MPI_PSTATE_GOVERNOR_##g)

static struct fakesys fs;
static struct mpi_pstate_cpufreq_node *node;
static char err[256];

static void setup(void)
{
        fakesys_init(&fs);
        fakesys_acpi_cpufreq(&fs, 1); /* 1.2, 1.8, 2.4, 3.0 GHz */
        node = NULL;
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), 0);
}

static void teardown(void)
{
        mpi_pstate_cpufreq_free(node);
        fakesys_cleanup(&fs);
}

static struct mpi_pstate_cpufreq_settings at(const char *gov, uint32_t min, uint32_t max,
                                             uint32_t setspeed)
{
        struct mpi_pstate_cpufreq_settings s = {.min_khz = min, .max_khz = max};

        snprintf(s.governor, sizeof(s.governor), "%s", gov);
        s.setspeed_khz = setspeed;
        return s;
}

static void range(const struct mpi_pstate_cpufreq_settings *s, enum mpi_pstate_cpufreq_mech m,
                  uint64_t want, uint64_t floor, int rc, uint32_t low, uint32_t high)
{
        uint32_t l = 1, h = 1;

        ck_assert_int_eq(
            mpi_pstate_cpufreq_step_range(&node->policies[0], s, m, want, floor, &l, &h), rc);
        ck_assert_uint_eq(l, low);
        ck_assert_uint_eq(h, high);
}

/* No --cpu-freq: the whole range, as the per-job policy left it. */
START_TEST(range_without_slurm)
{
        struct mpi_pstate_cpufreq_settings s = at("performance", 1200000, 3000000, 0);
        struct mpi_pstate_cpufreq_settings u = at("userspace", 1200000, 3000000, 3000000);

        range(&s, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, 0, 0, 0, 1200000, 3000000);
        range(&u, MPI_PSTATE_CPUFREQ_MECH_SETSPEED, 0, 0, 0, 1200000, 3000000);
}
END_TEST

/* srun --cpu-freq=2000000: userspace at 2.4 GHz (Slurm rounds up to the
 * table).  The agent never raises above it; through max_freq it would
 * clamp the maximum, and the maximum is what comes back. */
START_TEST(range_single_frequency_is_the_high)
{
        struct mpi_pstate_cpufreq_settings s = at("userspace", 1200000, 3000000, 2400000);

        range(&s, MPI_PSTATE_CPUFREQ_MECH_SETSPEED, 0, 0, 0, 1200000, 2400000);
        range(&s, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, 0, 0, 0, 1200000, 3000000);
        /* A setspeed above the maximum is not a speed the core can run at. */
        s = at("userspace", 1200000, 2400000, 3000000);
        range(&s, MPI_PSTATE_CPUFREQ_MECH_SETSPEED, 0, 0, 0, 1200000, 2400000);
}
END_TEST

/* srun --cpu-freq=1800000-2400000: Slurm's minimum is the lowest "low",
 * whatever the user's --mpi-pstate-low; its maximum is the high. */
START_TEST(range_min_max_bounds_both)
{
        struct mpi_pstate_cpufreq_settings s = at("performance", 1800000, 2400000, 0);

        range(&s, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, 0, 0, 0, 1800000, 2400000);
        range(&s, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, 1200000, 0, 0, 1800000, 2400000);
        /* Nothing is left below a minimum equal to the maximum. */
        s = at("performance", 2400000, 2400000, 0);
        range(&s, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, 0, 0, -ERANGE, 0, 2400000);
}
END_TEST

/* The admin's floor (freq_min) and the table: the low is rounded up to a
 * frequency the core has, and never reaches the high. */
START_TEST(range_admin_floor_and_table)
{
        struct mpi_pstate_cpufreq_settings s = at("userspace", 1200000, 3000000, 2400000);

        range(&s, MPI_PSTATE_CPUFREQ_MECH_SETSPEED, 0, 1500000, 0, 1800000, 2400000);
        range(&s, MPI_PSTATE_CPUFREQ_MECH_SETSPEED, 1300000, 0, 0, 1800000, 2400000);
        range(&s, MPI_PSTATE_CPUFREQ_MECH_SETSPEED, 0, 2000000, -ERANGE, 0, 2400000);
}
END_TEST

START_TEST(slurm_conf_lines)
{
        struct mpi_pstate_slurmfreq sf;

        mpi_pstate_slurmfreq_defaults(&sf);
        ck_assert(!sf.def_set);
        ck_assert_uint_eq(sf.governors, GOV(ONDEMAND) | GOV(PERFORMANCE) | GOV(USERSPACE));

        ck_assert_int_eq(mpi_pstate_slurmfreq_line(&sf, "CpuFreqDef=Performance"), 0);
        ck_assert(sf.def_set);
        ck_assert_uint_eq(sf.def, GOV(PERFORMANCE));
        /* Several words a line, keys in any case, comments. */
        ck_assert_int_eq(
            mpi_pstate_slurmfreq_line(&sf, "  cpufreqgovernors=PowerSave,UserSpace,conservative "
                                           "TaskPlugin=task/affinity # CpuFreqDef=OnDemand"),
            0);
        ck_assert_uint_eq(sf.governors, GOV(POWERSAVE) | GOV(USERSPACE) | GOV(CONSERVATIVE));
        ck_assert_uint_eq(sf.def, GOV(PERFORMANCE));
        ck_assert_int_eq(mpi_pstate_slurmfreq_line(&sf, "#CpuFreqDef=OnDemand"), 0);
        ck_assert_uint_eq(sf.def, GOV(PERFORMANCE));
        /* What Slurm refuses leaves the setting alone. */
        ck_assert_int_eq(mpi_pstate_slurmfreq_line(&sf, "CpuFreqGovernors=Performance,Turbo"),
                         -EINVAL);
        ck_assert_int_eq(mpi_pstate_slurmfreq_line(&sf, "CpuFreqGovernors="), -EINVAL);
        ck_assert_uint_eq(sf.governors, GOV(POWERSAVE) | GOV(USERSPACE) | GOV(CONSERVATIVE));
        ck_assert_int_eq(mpi_pstate_slurmfreq_line(&sf, "CpuFreqDef=UserSpace"), -EINVAL);
        ck_assert_int_eq(mpi_pstate_slurmfreq_line(&sf, "CpuFreqDef=Performance,OnDemand"),
                         -EINVAL);
        ck_assert_uint_eq(sf.def, GOV(PERFORMANCE));
        /* Other keys that merely contain the names are not them. */
        mpi_pstate_slurmfreq_defaults(&sf);
        ck_assert_int_eq(mpi_pstate_slurmfreq_line(&sf, "XCpuFreqDef=Performance CpuFreqDefault=x"),
                         0);
        ck_assert(!sf.def_set);
}
END_TEST

START_TEST(slurm_conf_file)
{
        struct mpi_pstate_slurmfreq sf;
        char path[600];
        FILE *f;

        snprintf(path, sizeof(path), "%s/slurm.conf", fs.root);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs("ClusterName=x\nCpuFreqDef=OnDemand\n"
              "NodeName=n1 CPUs=2\nCpuFreqGovernors=OnDemand,Performance\n",
              f);
        fclose(f);
        ck_assert_int_eq(mpi_pstate_slurmfreq_read(path, &sf), 0);
        ck_assert(sf.def_set);
        ck_assert_uint_eq(sf.def, GOV(ONDEMAND));
        ck_assert_uint_eq(sf.governors, GOV(ONDEMAND) | GOV(PERFORMANCE));
        /* $SLURM_CONF when no path is given; a missing file is -ENOENT with
         * Slurm's defaults. */
        setenv("SLURM_CONF", path, 1);
        ck_assert_int_eq(mpi_pstate_slurmfreq_read(NULL, &sf), 0);
        ck_assert(sf.def_set);
        snprintf(path, sizeof(path), "%s/absent.conf", fs.root);
        ck_assert_int_eq(mpi_pstate_slurmfreq_read(path, &sf), -ENOENT);
        ck_assert(!sf.def_set);
        unsetenv("SLURM_CONF");
}
END_TEST

static int reports;
static void count_report(void *ctx, const char *msg)
{
        (void)ctx;
        (void)msg;
        reports++;
}

/* allowed_governors narrows CpuFreqGovernors; keep is always allowed. */
START_TEST(allowed_governors_narrow_slurms)
{
        struct mpi_pstate_config c;
        struct mpi_pstate_options o;
        char *args[] = {"allowed_governors=performance,powersave", "default_governor=powersave"};
        char note[512];

        mpi_pstate_plugstack_defaults(&c);
        ck_assert_int_eq(mpi_pstate_plugstack_parse(&c, 2, args, NULL, NULL), 0);
        ck_assert_int_eq(c.defaults.governor, MPI_PSTATE_GOVERNOR_POWERSAVE);
        reports = 0;
        /* Slurm's default list has no powersave: the site default falls back to keep. */
        ck_assert_int_eq(
            mpi_pstate_plugstack_slurm(&c, GOV(ONDEMAND) | GOV(PERFORMANCE) | GOV(USERSPACE), true,
                                       count_report, NULL),
            1);
        ck_assert_int_eq(reports, 1);
        ck_assert(c.slurm_freq_def);
        ck_assert_int_eq(c.defaults.governor, MPI_PSTATE_GOVERNOR_KEEP);
        o = c.defaults;
        o.governor = MPI_PSTATE_GOVERNOR_PERFORMANCE;
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_GOVERNOR, note, sizeof(note)),
            MPI_PSTATE_LIMIT_OK);
        o.governor = MPI_PSTATE_GOVERNOR_ONDEMAND; /* Slurm's, not the admin's */
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_GOVERNOR, note, sizeof(note)),
            MPI_PSTATE_LIMIT_REFUSED);
        ck_assert_msg(
            strstr(note, "CpuFreqGovernors narrowed by allowed_governors: keep,performance"), "%s",
            note);
        o.governor = MPI_PSTATE_GOVERNOR_POWERSAVE; /* the admin's, not Slurm's */
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_GOVERNOR, note, sizeof(note)),
            MPI_PSTATE_LIMIT_REFUSED);
        o.governor = MPI_PSTATE_GOVERNOR_KEEP;
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_GOVERNOR, note, sizeof(note)),
            MPI_PSTATE_LIMIT_OK);
        /* Without allowed_governors, CpuFreqGovernors alone decides. */
        mpi_pstate_plugstack_defaults(&c);
        ck_assert_int_eq(mpi_pstate_plugstack_slurm(&c, GOV(ONDEMAND), false, NULL, NULL), 0);
        o = c.defaults;
        o.governor = MPI_PSTATE_GOVERNOR_ONDEMAND;
        ck_assert_int_eq(mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_GOVERNOR, NULL, 0),
                         MPI_PSTATE_LIMIT_OK);
        o.governor = MPI_PSTATE_GOVERNOR_SCHEDUTIL;
        ck_assert_int_eq(mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_GOVERNOR, NULL, 0),
                         MPI_PSTATE_LIMIT_REFUSED);
}
END_TEST

static Suite *freqlimits_suite(void)
{
        Suite *s = suite_create("freqlimits");
        TCase *tc = tcase_create("range");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, range_without_slurm);
        tcase_add_test(tc, range_single_frequency_is_the_high);
        tcase_add_test(tc, range_min_max_bounds_both);
        tcase_add_test(tc, range_admin_floor_and_table);
        tcase_add_test(tc, slurm_conf_file);
        suite_add_tcase(s, tc);
        tc = tcase_create("slurm");
        tcase_add_test(tc, slurm_conf_lines);
        tcase_add_test(tc, allowed_governors_narrow_slurms);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(freqlimits_suite(), false);
}
