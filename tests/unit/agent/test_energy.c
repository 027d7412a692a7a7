/* SPDX-License-Identifier: BSD-3-Clause */
/* Energy without RAPL: the hwmon source on fake sysfs trees.  Which source
 * a node uses, energy counters with wrap and reset, power meters integrated
 * over the sampling interval, and failed reads. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "energy.h"
#include "fakesys.h"
#include "check_main.h"

#define S_NS UINT64_C(1000000000)

static struct fakesys fs;
static struct mpi_pstate_hwmon h;

static void setup(void)
{
        fakesys_init(&fs);
        memset(&h, 0, sizeof(h));
}

static void teardown(void)
{
        mpi_pstate_hwmon_close(&h);
        fakesys_cleanup(&fs);
}

START_TEST(source_choice)
{
        ck_assert_int_eq(mpi_pstate_energy_source(fs.root), MPI_PSTATE_ENERGY_NONE);
        fakesys_hwmon_energy(&fs, 0, "smpro", 2, 1000);
        ck_assert_int_eq(mpi_pstate_energy_source(fs.root), MPI_PSTATE_ENERGY_HWMON);
        /* RAPL wins wherever it exists */
        fakesys_rapl(&fs, 1, 262143328850ul, 5);
        ck_assert_int_eq(mpi_pstate_energy_source(fs.root), MPI_PSTATE_ENERGY_RAPL);
        ck_assert_str_eq(mpi_pstate_energy_source_name(MPI_PSTATE_ENERGY_NONE), "none");
        ck_assert_str_eq(mpi_pstate_energy_source_name(MPI_PSTATE_ENERGY_RAPL), "rapl");
        ck_assert_str_eq(mpi_pstate_energy_source_name(MPI_PSTATE_ENERGY_HWMON), "hwmon");
        ck_assert_str_eq(mpi_pstate_energy_source_name((enum mpi_pstate_energy_source)7),
                         "invalid");
}
END_TEST

START_TEST(pure_rules)
{
        int reset = -1;

        ck_assert_uint_eq(mpi_pstate_hwmon_counter_delta(100, 250, &reset), 150);
        ck_assert_int_eq(reset, 0);
        /* 64-bit wrap: the previous reading was in the upper half */
        ck_assert_uint_eq(mpi_pstate_hwmon_counter_delta(UINT64_MAX - 9, 5, &reset), 15);
        ck_assert_int_eq(reset, 0);
        /* reset: the count starts again from zero */
        ck_assert_uint_eq(mpi_pstate_hwmon_counter_delta(1000000, 300, &reset), 300);
        ck_assert_int_eq(reset, 1);
        ck_assert_uint_eq(mpi_pstate_hwmon_counter_delta(7, 7, NULL), 0);
        /* 100 W then 150 W over 2 s: 250 J */
        ck_assert_uint_eq(mpi_pstate_hwmon_power_energy(100000000, 150000000, 2 * S_NS), 250000000);
        ck_assert_uint_eq(mpi_pstate_hwmon_power_energy(1000000, 1000000, 1000), 1);
        ck_assert_uint_eq(mpi_pstate_hwmon_power_energy(0, 0, S_NS), 0);
}
END_TEST

START_TEST(counters_wrap_and_reset)
{
        ck_assert_int_eq(mpi_pstate_hwmon_open(fs.root, &h, 0), MPI_PSTATE_RAPL_ABSENT);
        ck_assert_uint_eq(h.n, 0);
        fakesys_hwmon_energy(&fs, 0, "smpro", 2, 1000);
        fakesys_hwmon_energy(&fs, 1, "smpro", 1, 18446744073709551000ull);
        ck_assert_int_eq(mpi_pstate_hwmon_open(fs.root, &h, 0), MPI_PSTATE_RAPL_OK);
        ck_assert_int_eq(h.kind, MPI_PSTATE_HWMON_ENERGY);
        ck_assert_uint_eq(h.n, 3);
        ck_assert_str_eq(h.ch[0].label, "smpro/CPU energy");
        ck_assert_str_eq(h.ch[1].label, "smpro/IO energy");
        ck_assert_uint_eq(mpi_pstate_hwmon_interval_ns(&h, 5 * S_NS), 5 * S_NS);
        /* +2 J on CPU, +1 J on IO, hwmon1 wraps: 615 + 400 µJ */
        fakesys_put(&fs, "class/hwmon/hwmon0/energy1_input", 0444, "2001000\n");
        fakesys_put(&fs, "class/hwmon/hwmon0/energy2_input", 0444, "1001000\n");
        fakesys_put(&fs, "class/hwmon/hwmon1/energy1_input", 0444, "400\n");
        ck_assert_int_eq(mpi_pstate_hwmon_sample(&h, S_NS), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(h.ch[2].wraps, 1);
        ck_assert_uint_eq(h.ch[2].total_uj, 1016);
        ck_assert_uint_eq(mpi_pstate_hwmon_total_uj(&h), 3000000 + 1016);
        /* the CPU counter restarts from 0 (driver reloaded): 5000 µJ since */
        fakesys_put(&fs, "class/hwmon/hwmon0/energy1_input", 0444, "5000\n");
        ck_assert_int_eq(mpi_pstate_hwmon_sample(&h, 2 * S_NS), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(h.ch[0].resets, 1);
        ck_assert_uint_eq(h.ch[0].total_uj, 2000000 + 5000);
        ck_assert_uint_eq(mpi_pstate_hwmon_total_uj(&h), 3000000 + 1016 + 5000);
}
END_TEST

/* Counters are preferred; meters only on a node without any. */
START_TEST(counters_before_meters)
{
        fakesys_hwmon_power_meter(&fs, 0, 200000000, 500);
        fakesys_hwmon_energy(&fs, 3, "amd_energy", 1, 0);
        ck_assert_int_eq(mpi_pstate_hwmon_open(fs.root, &h, 0), MPI_PSTATE_RAPL_OK);
        ck_assert_int_eq(h.kind, MPI_PSTATE_HWMON_ENERGY);
        ck_assert_uint_eq(h.n, 1);
        ck_assert_str_eq(h.ch[0].label, "amd_energy/CPU energy");
}
END_TEST

/* The ACPI power meter: power1_average only (not power1_input too),
 * trapezoid over each interval, the meter's averaging interval as the
 * sampling interval (at least 100 ms). */
START_TEST(power_meter_integrated)
{
        fakesys_hwmon_power_meter(&fs, 0, 100000000, 500); /* 100 W */
        fakesys_hwmon_power_meter(&fs, 1, 50000000, 50);   /* 50 W */
        ck_assert_int_eq(mpi_pstate_hwmon_open(fs.root, &h, 10 * S_NS), MPI_PSTATE_RAPL_OK);
        ck_assert_int_eq(h.kind, MPI_PSTATE_HWMON_POWER);
        ck_assert_uint_eq(h.n, 2);
        ck_assert_str_eq(h.ch[0].label, "power_meter/Module Power Socket 0");
        ck_assert(strstr(h.ch[0].path, "power1_average") != NULL);
        ck_assert_uint_eq(h.ch[0].avg_interval_ms, 500);
        ck_assert_uint_eq(mpi_pstate_hwmon_interval_ns(&h, 5 * S_NS), S_NS / 10);
        /* socket 0 goes to 150 W over 2 s: 250 J; socket 1 stays at 50 W: 100 J */
        fakesys_put(&fs, "class/hwmon/hwmon0/power1_average", 0444, "150000000\n");
        ck_assert_int_eq(mpi_pstate_hwmon_sample(&h, 12 * S_NS), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(h.ch[0].total_uj, 250000000);
        ck_assert_uint_eq(h.ch[1].total_uj, 100000000);
        /* a malformed reading: the channel keeps its state, the next good
         * reading covers the whole gap (150 W, then 150 W: 3 s = 450 J) */
        fakesys_put(&fs, "class/hwmon/hwmon0/power1_average", 0444, "lots\n");
        ck_assert_int_eq(mpi_pstate_hwmon_sample(&h, 13 * S_NS), MPI_PSTATE_RAPL_ERROR);
        ck_assert_int_eq(h.status, MPI_PSTATE_RAPL_ERROR);
        ck_assert_uint_eq(h.ch[0].total_uj, 250000000);
        fakesys_put(&fs, "class/hwmon/hwmon0/power1_average", 0444, "150000000\n");
        ck_assert_int_eq(mpi_pstate_hwmon_sample(&h, 15 * S_NS), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(h.ch[0].total_uj, 250000000 + 450000000);
        ck_assert_uint_eq(h.ch[1].total_uj, 100000000 + 150000000);
        ck_assert_uint_eq(mpi_pstate_hwmon_total_uj(&h), 700000000 + 250000000);
}
END_TEST

/* A meter without an averaging interval is sampled every second. */
START_TEST(power_input_only)
{
        fakesys_put(&fs, "class/hwmon/hwmon2/name", 0444, "xgene_hwmon\n");
        fakesys_put(&fs, "class/hwmon/hwmon2/power1_input", 0444, "30000000\n");
        fakesys_put(&fs, "class/hwmon/hwmon2/power1_label", 0444, "CPU power\n");
        fakesys_put(&fs, "class/hwmon/hwmon2/temp1_input", 0444, "45000\n");
        ck_assert_int_eq(mpi_pstate_hwmon_open(fs.root, &h, 0), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(h.n, 1);
        ck_assert_str_eq(h.ch[0].label, "xgene_hwmon/CPU power");
        ck_assert_uint_eq(mpi_pstate_hwmon_interval_ns(&h, 5 * S_NS), S_NS);
        ck_assert_int_eq(mpi_pstate_hwmon_sample(&h, S_NS / 2), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(mpi_pstate_hwmon_total_uj(&h), 15000000);
}
END_TEST

/* Unreadable counters (root-only, as energy_uj is for RAPL) say so. */
START_TEST(no_access)
{
        fakesys_hwmon_energy(&fs, 0, "smpro", 1, 0);
        fakesys_put(&fs, "class/hwmon/hwmon0/energy1_input", 0000, "0\n");
        if (geteuid() == 0)
                return; /* root reads a 0000 file */
        ck_assert_int_eq(mpi_pstate_hwmon_open(fs.root, &h, 0), MPI_PSTATE_RAPL_NO_ACCESS);
        ck_assert_uint_eq(h.n, 0);
}
END_TEST

static Suite *energy_suite(void)
{
        Suite *s = suite_create("energy");
        TCase *tc = tcase_create("hwmon");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, source_choice);
        tcase_add_test(tc, pure_rules);
        tcase_add_test(tc, counters_wrap_and_reset);
        tcase_add_test(tc, counters_before_meters);
        tcase_add_test(tc, power_meter_integrated);
        tcase_add_test(tc, power_input_only);
        tcase_add_test(tc, no_access);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(energy_suite(), false);
}
