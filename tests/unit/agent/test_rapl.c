/* SPDX-License-Identifier: BSD-3-Clause */
/* RAPL on fake powercap trees: discovery, explicit status when absent or
 * unreadable, 64-bit accumulation across wraps, and the wrap-period helper. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fakesys.h"
#include "rapl.h"
#include "check_main.h"

#define NOBODY 65534
#define PKG_DRAM                                                                                   \
        (MPI_PSTATE_RAPL_KIND_BIT(MPI_PSTATE_RAPL_PACKAGE) |                                       \
         MPI_PSTATE_RAPL_KIND_BIT(MPI_PSTATE_RAPL_DRAM))

static struct fakesys fs;

static void setup(void)
{
        fakesys_init(&fs);
}

static void teardown(void)
{
        if (geteuid() != 0 && getuid() == 0)
                ck_assert_int_eq(seteuid(0), 0);
        fakesys_cleanup(&fs);
}

static void set_energy(const char *zone, unsigned long uj)
{
        char rel[128];

        snprintf(rel, sizeof(rel), "class/powercap/%s/energy_uj", zone);
        fakesys_put(&fs, rel, 0400, "%lu\n", uj);
}

struct delta_case {
        uint64_t prev, cur, range, want;
};

static const struct delta_case deltas[] = {
    {100, 250, 1000, 150},
    {900, 100, 1000, 200}, /* one wrap */
    {500, 500, 1000, 0},
    {1000, 0, 1000, 0}, /* at the wrap point exactly */
    {999, 0, 1000, 1},
    {0, 262143328850ull, 262143328850ull, 262143328850ull},
    {262143328000ull, 850, 262143328850ull, 1700},
};

START_TEST(delta_table)
{
        const struct delta_case *c = &deltas[_i];

        ck_assert_uint_eq(mpi_pstate_rapl_delta(c->prev, c->cur, c->range), c->want);
}
END_TEST

START_TEST(wrap_period)
{
        /* 262143328850 µJ (a 32-bit counter at 61 µJ) at 200 W: 1310.7 s. */
        ck_assert_uint_eq(mpi_pstate_rapl_wrap_period_us(262143328850ull, 200000), 1310716644ull);
        ck_assert_uint_eq(mpi_pstate_rapl_sample_interval_us(262143328850ull, 200000),
                          655358322ull);
        /* DRAM units of 15.3 µJ: 65.5 kJ wraps in 655 s at 100 W. */
        ck_assert_uint_eq(mpi_pstate_rapl_wrap_period_us(65535000000ull, 100000), 655350000ull);
        ck_assert_uint_eq(mpi_pstate_rapl_wrap_period_us(1000000, 1000), 1000000);
        ck_assert_uint_eq(mpi_pstate_rapl_wrap_period_us(1000, 0), UINT64_MAX);
        ck_assert_uint_eq(mpi_pstate_rapl_sample_interval_us(1000, 0), UINT64_MAX);
        ck_assert_uint_eq(mpi_pstate_rapl_wrap_period_us(UINT64_MAX, 1), UINT64_MAX);
}
END_TEST

START_TEST(names)
{
        ck_assert_str_eq(mpi_pstate_rapl_status_name(MPI_PSTATE_RAPL_NO_ACCESS), "no_access");
        ck_assert_str_eq(mpi_pstate_rapl_status_name(MPI_PSTATE_RAPL_ABSENT), "absent");
        ck_assert_str_eq(mpi_pstate_rapl_status_name((enum mpi_pstate_rapl_status)42), "invalid");
        ck_assert_str_eq(mpi_pstate_rapl_kind_name(MPI_PSTATE_RAPL_DRAM), "dram");
}
END_TEST

START_TEST(discover_two_sockets)
{
        struct mpi_pstate_rapl r;

        fakesys_rapl(&fs, 2, 262143328850ul, 1000);
        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_OK);
        ck_assert_int_eq(r.status, MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(r.nzones, 6);
        ck_assert_str_eq(r.zones[0].id, "intel-rapl:0");
        ck_assert_str_eq(r.zones[0].name, "package-0");
        ck_assert_int_eq(r.zones[0].kind, MPI_PSTATE_RAPL_PACKAGE);
        ck_assert_int_eq(r.zones[0].socket, 0);
        ck_assert_uint_eq(r.zones[0].max_range_uj, 262143328850ull);
        ck_assert_str_eq(r.zones[1].id, "intel-rapl:0:0");
        ck_assert_int_eq(r.zones[1].kind, MPI_PSTATE_RAPL_DRAM);
        ck_assert_int_eq(r.zones[1].socket, 0);
        ck_assert_int_eq(r.zones[2].kind, MPI_PSTATE_RAPL_CORE);
        ck_assert_str_eq(r.zones[3].name, "package-1");
        ck_assert_int_eq(r.zones[3].socket, 1);
        ck_assert_int_eq(r.zones[4].kind, MPI_PSTATE_RAPL_DRAM);
        ck_assert_int_eq(r.zones[4].socket, 1);
}
END_TEST

START_TEST(discover_absent)
{
        struct mpi_pstate_rapl r;

        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_ABSENT);
        ck_assert_uint_eq(r.nzones, 0);
        /* powercap without intel-rapl zones (the control type dir and MMIO alone) */
        fakesys_mkdirs(&fs, "class/powercap/intel-rapl");
        fakesys_put(&fs, "class/powercap/intel-rapl-mmio:0/name", 0444, "package-0\n");
        fakesys_put(&fs, "class/powercap/dtpm:0/name", 0444, "soc\n");
        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_ABSENT);
}
END_TEST

START_TEST(discover_malformed)
{
        struct mpi_pstate_rapl r;

        fakesys_rapl(&fs, 1, 1000000, 0);
        fakesys_put(&fs, "class/powercap/intel-rapl:0/max_energy_range_uj", 0444, "0\n");
        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_ERROR);
        ck_assert_uint_eq(r.nzones, 0);
        fakesys_put(&fs, "class/powercap/intel-rapl:0/max_energy_range_uj", 0444, "-5\n");
        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_ERROR);
}
END_TEST

/* energy_uj is 0400 root: a process without root sees the zones but no energy. */
START_TEST(no_access_is_reported)
{
        struct mpi_pstate_rapl r;
        struct mpi_pstate_rapl_sampler s;

        if (geteuid() != 0)
                return; /* as a user the tree below is not ours to chmod for nobody */
        fakesys_rapl(&fs, 1, 1000000, 0);
        ck_assert_int_eq(chmod(fs.root, 0755), 0);
        ck_assert_int_eq(seteuid(NOBODY), 0);
        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_NO_ACCESS);
        ck_assert_uint_eq(r.nzones, 3); /* the zones are listed, the energy is not invented */
        ck_assert_int_eq(mpi_pstate_rapl_sampler_open(&s, &r, PKG_DRAM), MPI_PSTATE_RAPL_NO_ACCESS);
        ck_assert_uint_eq(s.n, 0);
        ck_assert_uint_eq(mpi_pstate_rapl_sampler_total_uj(&s, MPI_PSTATE_RAPL_PACKAGE), 0);
        ck_assert_int_eq(seteuid(0), 0);
        /* Root reads the same tree. */
        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_OK);
}
END_TEST

START_TEST(sampler_accumulates_across_wraps)
{
        struct mpi_pstate_rapl r;
        struct mpi_pstate_rapl_sampler s;

        /* A 1 J range wraps quickly: the 64-bit totals must keep counting. */
        fakesys_rapl(&fs, 2, 1000000, 900000);
        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_OK);
        ck_assert_int_eq(mpi_pstate_rapl_sampler_open(&s, &r, PKG_DRAM), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(s.n, 4); /* package and dram of two sockets, no core */

        set_energy("intel-rapl:0", 950000);
        set_energy("intel-rapl:1", 900100);
        set_energy("intel-rapl:0:0", 910000);
        ck_assert_int_eq(mpi_pstate_rapl_sampler_sample(&s), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(mpi_pstate_rapl_sampler_total_uj(&s, MPI_PSTATE_RAPL_PACKAGE), 50100);
        ck_assert_uint_eq(mpi_pstate_rapl_sampler_total_uj(&s, MPI_PSTATE_RAPL_DRAM), 10000);

        set_energy("intel-rapl:0", 100000); /* wrapped: 50000 + 100000 */
        set_energy("intel-rapl:1", 900100);
        ck_assert_int_eq(mpi_pstate_rapl_sampler_sample(&s), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(mpi_pstate_rapl_sampler_total_uj(&s, MPI_PSTATE_RAPL_PACKAGE), 200100);
        ck_assert_uint_eq(s.c[0].wraps, 1);

        /* Many wraps, each seen: the total grows past the range many times over. */
        for (int i = 0; i < 10; i++) {
                set_energy("intel-rapl:0", 600000);
                ck_assert_int_eq(mpi_pstate_rapl_sampler_sample(&s), MPI_PSTATE_RAPL_OK);
                set_energy("intel-rapl:0", 100000);
                ck_assert_int_eq(mpi_pstate_rapl_sampler_sample(&s), MPI_PSTATE_RAPL_OK);
        }
        ck_assert_uint_eq(mpi_pstate_rapl_sampler_total_uj(&s, MPI_PSTATE_RAPL_PACKAGE),
                          200100 + 10 * 1000000ull);
        ck_assert_uint_eq(s.c[0].wraps, 11);
        ck_assert_uint_eq(mpi_pstate_rapl_sampler_total_uj(&s, MPI_PSTATE_RAPL_CORE), 0);
        mpi_pstate_rapl_sampler_close(&s);
        ck_assert_uint_eq(s.n, 0);
}
END_TEST

START_TEST(sampler_bad_reading_keeps_state)
{
        struct mpi_pstate_rapl r;
        struct mpi_pstate_rapl_sampler s;

        fakesys_rapl(&fs, 1, 1000000, 100);
        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_OK);
        ck_assert_int_eq(
            mpi_pstate_rapl_sampler_open(&s, &r, MPI_PSTATE_RAPL_KIND_BIT(MPI_PSTATE_RAPL_PACKAGE)),
            MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(s.n, 1);
        set_energy("intel-rapl:0", 2000000); /* above the range: not a reading */
        ck_assert_int_eq(mpi_pstate_rapl_sampler_sample(&s), MPI_PSTATE_RAPL_ERROR);
        ck_assert_int_eq(s.status, MPI_PSTATE_RAPL_ERROR);
        ck_assert_uint_eq(mpi_pstate_rapl_sampler_total_uj(&s, MPI_PSTATE_RAPL_PACKAGE), 0);
        set_energy("intel-rapl:0", 700);
        ck_assert_int_eq(mpi_pstate_rapl_sampler_sample(&s), MPI_PSTATE_RAPL_OK);
        ck_assert_uint_eq(mpi_pstate_rapl_sampler_total_uj(&s, MPI_PSTATE_RAPL_PACKAGE), 600);
        mpi_pstate_rapl_sampler_close(&s);
}
END_TEST

START_TEST(sampler_without_rapl)
{
        struct mpi_pstate_rapl r;
        struct mpi_pstate_rapl_sampler s;

        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_ABSENT);
        ck_assert_int_eq(mpi_pstate_rapl_sampler_open(&s, &r, PKG_DRAM), MPI_PSTATE_RAPL_ABSENT);
        ck_assert_int_eq(mpi_pstate_rapl_sampler_sample(&s), MPI_PSTATE_RAPL_ABSENT);
        /* A kind the node does not have is ABSENT too, not zero joules. */
        fakesys_rapl(&fs, 1, 1000000, 0);
        ck_assert_int_eq(mpi_pstate_rapl_discover(fs.root, &r), MPI_PSTATE_RAPL_OK);
        ck_assert_int_eq(
            mpi_pstate_rapl_sampler_open(&s, &r, MPI_PSTATE_RAPL_KIND_BIT(MPI_PSTATE_RAPL_PSYS)),
            MPI_PSTATE_RAPL_ABSENT);
        mpi_pstate_rapl_sampler_close(&s);
}
END_TEST

static Suite *rapl_suite(void)
{
        Suite *s = suite_create("rapl");
        TCase *tc = tcase_create("pure");

        tcase_add_loop_test(tc, delta_table, 0, sizeof(deltas) / sizeof(deltas[0]));
        tcase_add_test(tc, wrap_period);
        tcase_add_test(tc, names);
        suite_add_tcase(s, tc);

        tc = tcase_create("powercap");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, discover_two_sockets);
        tcase_add_test(tc, discover_absent);
        tcase_add_test(tc, discover_malformed);
        tcase_add_test(tc, no_access_is_reported);
        tcase_add_test(tc, sampler_accumulates_across_wraps);
        tcase_add_test(tc, sampler_bad_reading_keeps_state);
        tcase_add_test(tc, sampler_without_rapl);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(rapl_suite(), false);
}
