/* SPDX-License-Identifier: BSD-3-Clause */
/* common/json.c: the one JSON writer of the C components. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "json.h"

START_TEST(escapes_every_byte_a_user_controls)
{
        struct mpi_pstate_json j = {0};

        mpi_pstate_json_str(&j, "a\"b\\c\n\x01\x7f\xc3\xa9");
        mpi_pstate_json_put(&j, ",");
        mpi_pstate_json_str(&j, NULL);
        ck_assert(!j.failed);
        ck_assert_str_eq(j.p, "\"a\\\"b\\\\c\\u000a\\u0001\\u007f\\u00c3\\u00a9\",null");
        ck_assert_uint_eq(j.len, strlen(j.p));
        free(j.p);
}
END_TEST

START_TEST(grows_past_any_first_size)
{
        struct mpi_pstate_json j = {0};

        for (int i = 0; i < 10000; i++)
                mpi_pstate_json_put(&j, "%d,", i % 10);
        ck_assert(!j.failed);
        ck_assert_uint_eq(j.len, 20000);
        ck_assert_uint_eq(strlen(j.p), 20000);
        ck_assert(j.cap > j.len);
        free(j.p);
}
END_TEST

START_TEST(fixed_buffer_fails_instead_of_truncating_silently)
{
        char buf[8];
        struct mpi_pstate_json j;

        mpi_pstate_json_fixed(&j, buf, sizeof(buf));
        mpi_pstate_json_put(&j, "1234567");
        ck_assert(!j.failed);
        ck_assert_str_eq(buf, "1234567");
        mpi_pstate_json_put(&j, "8");
        ck_assert(j.failed);
        ck_assert_uint_eq(j.len, 7);
        /* Every later write is a no-op, even one that would fit. */
        mpi_pstate_json_put(&j, "%s", "");
        ck_assert(j.failed);
        ck_assert(buf == j.p);

        mpi_pstate_json_fixed(&j, buf, 0);
        ck_assert(j.failed);
}
END_TEST

START_TEST(cpulist_ranges)
{
        static const int cpus[] = {0, 1, 2, 3, 5, 8, 9, CPU_SETSIZE - 1};
        char buf[64];
        struct mpi_pstate_json j;
        cpu_set_t s;

        CPU_ZERO(&s);
        mpi_pstate_json_fixed(&j, buf, sizeof(buf));
        mpi_pstate_json_cpulist(&j, &s);
        ck_assert(!j.failed);
        ck_assert_str_eq(buf, "");
        for (size_t i = 0; i < sizeof(cpus) / sizeof(cpus[0]); i++)
                CPU_SET(cpus[i], &s);
        mpi_pstate_json_fixed(&j, buf, sizeof(buf));
        mpi_pstate_json_cpulist(&j, &s);
        ck_assert(!j.failed);
        ck_assert_str_eq(buf, "0-3,5,8-9,1023");
}
END_TEST

START_TEST(members_get_their_commas_and_lines)
{
        struct mpi_pstate_json j = {0};

        mpi_pstate_json_open(&j, '{', "  ");
        mpi_pstate_json_key(&j, "a");
        mpi_pstate_json_put(&j, "%d", 1);
        mpi_pstate_json_key(&j, "list");
        mpi_pstate_json_open(&j, '[', "    ");
        for (int i = 0; i < 2; i++) {
                mpi_pstate_json_elem(&j);
                mpi_pstate_json_open(&j, '{', NULL);
                mpi_pstate_json_key(&j, "x");
                mpi_pstate_json_bool(&j, i);
                mpi_pstate_json_key(&j, "e");
                mpi_pstate_json_open(&j, '[', NULL);
                mpi_pstate_json_close(&j);
                mpi_pstate_json_close(&j);
        }
        mpi_pstate_json_close(&j);
        mpi_pstate_json_key(&j, "empty");
        mpi_pstate_json_open(&j, '[', "    ");
        mpi_pstate_json_close(&j);
        mpi_pstate_json_close(&j);
        ck_assert(!j.failed);
        ck_assert_str_eq(j.p, "{\n  \"a\": 1,\n  \"list\": [\n    {\"x\": false, \"e\": []},"
                              "\n    {\"x\": true, \"e\": []}\n  ],\n  \"empty\": [\n  ]\n}");
        free(j.p);
}
END_TEST

START_TEST(compact_members_have_no_spaces)
{
        char buf[64];
        struct mpi_pstate_json j;

        mpi_pstate_json_fixed(&j, buf, sizeof(buf));
        j.compact = true;
        mpi_pstate_json_open(&j, '{', NULL);
        mpi_pstate_json_key(&j, "a");
        mpi_pstate_json_put(&j, "%d", 1);
        mpi_pstate_json_key(&j, "b");
        mpi_pstate_json_open(&j, '[', NULL);
        mpi_pstate_json_elem(&j);
        mpi_pstate_json_str(&j, NULL);
        mpi_pstate_json_elem(&j);
        mpi_pstate_json_bool(&j, true);
        mpi_pstate_json_close(&j);
        mpi_pstate_json_close(&j);
        ck_assert(!j.failed);
        ck_assert_str_eq(buf, "{\"a\":1,\"b\":[null,true]}");
}
END_TEST

START_TEST(nesting_past_the_bound_fails)
{
        struct mpi_pstate_json j = {0};

        for (int i = 0; i <= MPI_PSTATE_JSON_DEPTH; i++)
                mpi_pstate_json_open(&j, '[', NULL);
        ck_assert(j.failed);
        free(j.p);
        j = (struct mpi_pstate_json){0};
        mpi_pstate_json_close(&j);
        ck_assert(j.failed);
        free(j.p);
}
END_TEST

static Suite *json_suite(void)
{
        Suite *s = suite_create("json");
        TCase *tc = tcase_create("writer");

        tcase_add_test(tc, escapes_every_byte_a_user_controls);
        tcase_add_test(tc, grows_past_any_first_size);
        tcase_add_test(tc, fixed_buffer_fails_instead_of_truncating_silently);
        tcase_add_test(tc, cpulist_ranges);
        tcase_add_test(tc, members_get_their_commas_and_lines);
        tcase_add_test(tc, compact_members_have_no_spaces);
        tcase_add_test(tc, nesting_past_the_bound_fails);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(json_suite(), false);
}
