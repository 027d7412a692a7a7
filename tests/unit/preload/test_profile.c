/* SPDX-License-Identifier: BSD-3-Clause */
/* preload/profile.c: the rank's profile files, rank-<R>.json and .csv, as
 * docs/preload.md ("Profile output") gives them and the Python readers
 * (epilog/mpi_pstate, the preload suites) parse them. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "profile.h"
#include "slot.h"

static const char *const names[] = {"MPI_Init", "MPI_Send", "MPI_Recv", "MPI_Barrier"};
static const unsigned char app_time[] = {0, 1, 1, 1};

/* A finalized rank: 3 s of wall time, three functions called, one not. */
static void fill(struct mpi_pstate_slot *s)
{
        memset(s, 0, sizeof(*s));
        ck_assert_int_eq(mpi_pstate_slot_setup(s, 3, names, 4), 0);
        s->pid = 4242;
        s->rank = 5;
        s->size = 8;
        s->clock = MPI_PSTATE_CLOCK_TSC;
        s->ticks_per_sec = 2000000000;
        s->mode = MPI_PSTATE_SLOT_MODE_PROFILE;
        s->thread_level = 2;
        s->state = MPI_PSTATE_SLOT_FINALIZED;
        s->cpu = 7;
        s->start_ns = UINT64_C(1700000000123456789);
        s->app_start_ticks = 1000;
        s->app_end_ticks = 1000 + UINT64_C(6000000000);
        s->threshold_ns = 500000;
        s->wait_mode = MPI_PSTATE_WAIT_POLL;
        s->wait_samples = 4;
        s->wait_cpu_ns = 3;
        s->wait_sampled_ns = 4;
        s->down_ns = 1234567890;
        s->transitions = 5;
        s->long_calls = 3;
        s->long_ns = 2000000000;
        s->over_ns = 500000;
        s->wakeups = 7;
        s->fn[0].calls = 1;
        s->fn[0].time_ns = 250000000;
        s->fn[1].calls = 10;
        s->fn[1].time_ns = 1500000000;
        s->fn[1].bytes = 4096;
        s->fn[1].long_calls = 2;
        s->fn[3].calls = 3;
        s->fn[3].time_ns = 750000001;
        s->fn[3].long_calls = 1;
        s->hist_bytes[0] = 1;
        s->hist_bytes[13] = 10;
        s->hist_bytes[MPI_PSTATE_SLOT_HIST_BUCKETS - 1] = 2;
}

static const struct mpi_pstate_profile_meta meta = {
    .abi = "mpich",
    .mpi_library = "MPICH Version:\t4.0.2\"x",
    .state = "finalized",
    .app_time = app_time,
};

static char *slurp(const char *dir, const char *name)
{
        char path[4096];
        FILE *f;
        char *text;
        long n;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        rewind(f);
        text = calloc(1, (size_t)n + 1);
        ck_assert_ptr_nonnull(text);
        ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
        fclose(f);
        return text;
}

/* Writes the profile of s into a new directory; returns rank-<R>.json's
 * text.  The directory and its files are removed. */
static char *profile_json(const struct mpi_pstate_slot *s, const struct mpi_pstate_profile_meta *m)
{
        char dir[] = "/tmp/mpi-pstate-test-profile.XXXXXX", path[4096], name[64];
        char *text;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(mpi_pstate_profile_write(dir, s, m), 0);
        snprintf(name, sizeof(name), "rank-%d.json", s->rank);
        text = slurp(dir, name);
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        unlink(path);
        snprintf(path, sizeof(path), "%s/rank-%d.csv", dir, s->rank);
        unlink(path);
        rmdir(dir);
        return text;
}

static void hostname(char *host, size_t cap)
{
        memset(host, 0, cap);
        if (gethostname(host, cap - 1) != 0)
                strcpy(host, "?");
}

START_TEST(json_is_the_documented_text)
{
        static struct mpi_pstate_slot s;
        char host[256], want[8192];
        char *got;

        fill(&s);
        hostname(host, sizeof(host));
        snprintf(
            want, sizeof(want),
            "{\n"
            "  \"format\": \"mpi-pstate-profile\",\n"
            "  \"version\": 1,\n"
            "  \"rank\": 5,\n"
            "  \"size\": 8,\n"
            "  \"local_rank\": 3,\n"
            "  \"pid\": 4242,\n"
            "  \"host\": \"%s\",\n"
            "  \"abi\": \"mpich\",\n"
            "  \"mpi_library\": \"MPICH Version:\\u00094.0.2\\\"x\",\n"
            "  \"state\": \"finalized\",\n"
            "  \"thread_level\": \"serialized\",\n"
            "  \"clock\": \"tsc\",\n"
            "  \"ticks_per_sec\": 2000000000,\n"
            "  \"threshold_us\": 500,\n"
            "  \"cpu\": 7,\n"
            "  \"start_time\": 1700000000.123457,\n"
            "  \"wall_s\": 3.000000000,\n"
            "  \"mpi_s\": 2.250000001,\n"
            "  \"mpi_share\": 0.750000,\n"
            "  \"calls\": 14,\n"
            "  \"bytes\": 4096,\n"
            "  \"long_calls\": 3,\n"
            "  \"long_s\": 2.000000000,\n"
            "  \"over_threshold_s\": 0.000500000,\n"
            "  \"wakeups\": 7,\n"
            "  \"clocked_down_s\": 1.234567890,\n"
            "  \"transitions\": 5,\n"
            "  \"wait_mode\": \"poll\",\n"
            "  \"wait_samples\": 4,\n"
            "  \"wait_cpu_share\": 0.7500,\n"
            "  \"functions\": [\n"
            "    {\"name\": \"MPI_Init\", \"id\": 0, \"calls\": 1, \"time_s\": 0.250000000, "
            "\"bytes\": 0, \"long_calls\": 0},\n"
            "    {\"name\": \"MPI_Send\", \"id\": 1, \"calls\": 10, \"time_s\": 1.500000000, "
            "\"bytes\": 4096, \"long_calls\": 2},\n"
            "    {\"name\": \"MPI_Barrier\", \"id\": 3, \"calls\": 3, \"time_s\": 0.750000001, "
            "\"bytes\": 0, \"long_calls\": 1}\n"
            "  ],\n"
            "  \"message_sizes\": [\n"
            "    {\"lo\": 0, \"hi\": 0, \"count\": 1},\n"
            "    {\"lo\": 4096, \"hi\": 8191, \"count\": 10},\n"
            "    {\"lo\": 4611686018427387904, \"hi\": 18446744073709551615, \"count\": 2}\n"
            "  ],\n"
            "  \"durations_ns\": []\n"
            "}\n",
            host);
        got = profile_json(&s, &meta);
        ck_assert_str_eq(got, want);
        free(got);
}
END_TEST

/* Nothing called, no wait measured: empty lists and a null share. */
START_TEST(json_of_an_idle_rank)
{
        static struct mpi_pstate_slot s;
        char *got;

        fill(&s);
        for (unsigned i = 0; i < 4; i++)
                s.fn[i].calls = 0;
        memset((void *)s.hist_bytes, 0, sizeof(s.hist_bytes));
        s.wait_sampled_ns = 0;
        got = profile_json(&s, &meta);
        ck_assert_ptr_nonnull(strstr(got, "  \"wait_cpu_share\": null,\n"
                                          "  \"functions\": [],\n"
                                          "  \"message_sizes\": [],\n"
                                          "  \"durations_ns\": []\n"
                                          "}\n"));
        ck_assert_ptr_nonnull(strstr(got, "  \"calls\": 0,\n"));
        free(got);
}
END_TEST

/* The slot is shared memory its rank writes: whatever bytes a function's
 * name holds, the file stays valid JSON, escaped as every other string. */
START_TEST(a_function_name_is_escaped)
{
        static struct mpi_pstate_slot s;
        char *got;

        fill(&s);
        strcpy(s.fn[1].name, "MPI_\"x\\\n");
        got = profile_json(&s, &meta);
        ck_assert_ptr_nonnull(strstr(got, "    {\"name\": \"MPI_\\\"x\\\\\\u000a\", \"id\": 1, "));
        free(got);
}
END_TEST

static Suite *profile_suite(void)
{
        Suite *s = suite_create("profile");
        TCase *tc = tcase_create("json");

        tcase_add_test(tc, json_is_the_documented_text);
        tcase_add_test(tc, json_of_an_idle_rank);
        tcase_add_test(tc, a_function_name_is_escaped);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(profile_suite(), false);
}
