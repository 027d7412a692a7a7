/* SPDX-License-Identifier: BSD-3-Clause */
/* The strict parsers of common/parse.c: integers, frequencies, durations,
 * words, percentages, carbon intensity and booleans, the durations and
 * carbon cases read from tests/data/ as the Python suites read them. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <stdlib.h>

#include "parse.h"
#include "check_main.h"

START_TEST(u64_strict)
{
        uint64_t v = 7;
        ck_assert_int_eq(mpi_pstate_parse_u64("42", 0, 100, &v), 0);
        ck_assert_uint_eq(v, 42);
        ck_assert_int_eq(mpi_pstate_parse_u64("1200000\n", 0, UINT64_MAX, &v), 0);
        ck_assert_uint_eq(v, 1200000);
        v = 7;
        ck_assert_int_eq(mpi_pstate_parse_u64("", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_u64("-1", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_u64("0x10", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_u64("12abc", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_u64("101", 0, 100, &v), -ERANGE);
        ck_assert_int_eq(mpi_pstate_parse_u64("99999999999999999999999", 0, UINT64_MAX, &v),
                         -ERANGE);
        ck_assert_int_eq(mpi_pstate_parse_u64(NULL, 0, 100, &v), -EINVAL);
        ck_assert_uint_eq(v, 7);
}
END_TEST

START_TEST(freq_units)
{
        uint64_t v = 0;
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("1200000", &v), 0);
        ck_assert_uint_eq(v, 1200000);
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("1.2GHz", &v), 0);
        ck_assert_uint_eq(v, 1200000);
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("2400MHz", &v), 0);
        ck_assert_uint_eq(v, 2400000);
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("1.25ghz", &v), 0);
        ck_assert_uint_eq(v, 1250000);
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("800000kHz", &v), 0);
        ck_assert_uint_eq(v, 800000);
        v = 1;
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("1.2", &v), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("1.2THz", &v), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("GHz", &v), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("1.2.3GHz", &v), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("0", &v), -ERANGE);
        ck_assert_int_eq(mpi_pstate_parse_freq_khz("1.2GHz x", &v), -EINVAL);
        ck_assert_uint_eq(v, 1);
}
END_TEST

/* TEXT of a `... "TEXT"` case line, with \n and \t undone; NULL if none. */
static char *quoted_case(char *line)
{
        char *open = strchr(line, '"'), *close = strrchr(line, '"'), *out;

        if (!open || close == open)
                return NULL;
        *close = '\0';
        out = open + 1;
        for (char *r = out, *w = out;; r++, w++) {
                if (r[0] == '\\' && (r[1] == 'n' || r[1] == 't'))
                        *w = *++r == 'n' ? '\n' : '\t';
                else
                        *w = *r;
                if (!*r)
                        break;
        }
        return out;
}

/* tests/data/durations.txt: the cases epilog/mpi_pstate/parse.py must agree on. */
START_TEST(duration_units)
{
        char path[4096], line[256];
        unsigned n = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%s/durations.txt", TEST_DATA_DIR);
        f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f)) {
                uint64_t want = 0, v = 7;
                char *text;

                if (line[0] == '#' || line[0] == '\n')
                        continue;
                text = quoted_case(line);
                ck_assert_msg(text != NULL, "bad case line '%s'", line);
                if (strncmp(line, "bad ", 4) == 0) {
                        ck_assert_msg(mpi_pstate_parse_duration_us(text, &v) < 0 && v == 7,
                                      "accepted '%s'", text);
                } else {
                        char *want_text = strtok(line, " ");

                        ck_assert_int_eq(mpi_pstate_parse_u64(want_text, 0, UINT64_MAX, &want), 0);
                        ck_assert_msg(mpi_pstate_parse_duration_us(text, &v) == 0 && v == want,
                                      "'%s': %llu, not %llu", text, (unsigned long long)v,
                                      (unsigned long long)want);
                }
                n++;
        }
        fclose(f);
        ck_assert_uint_ge(n, 40);
}
END_TEST

START_TEST(words)
{
        static const char *const w[] = {"none", NULL, "Scatter"};
        int i = -1;
        ck_assert_int_eq(mpi_pstate_parse_word("scatter", w, 3, &i), 0);
        ck_assert_int_eq(i, 2);
        ck_assert_int_eq(mpi_pstate_parse_word("NONE", w, 3, &i), 0);
        ck_assert_int_eq(i, 0);
        i = -1;
        ck_assert_int_eq(mpi_pstate_parse_word("scat", w, 3, &i), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_word("", w, 3, &i), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_word(NULL, w, 3, &i), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_word("scatter", w, 2, &i), -EINVAL);
        ck_assert_int_eq(i, -1);
}
END_TEST

START_TEST(percent_ppm)
{
        uint64_t v = 7;
        const char *bad[] = {"",        "-1",    ".5",  "5.",   "101", "100.01",
                             "0.00001", "0.5ms", "1e2", "0x10", " 1",  NULL};

        ck_assert_int_eq(mpi_pstate_parse_percent_ppm("0.5", &v), 0);
        ck_assert_uint_eq(v, 5000);
        ck_assert_int_eq(mpi_pstate_parse_percent_ppm("5%", &v), 0);
        ck_assert_uint_eq(v, 50000);
        ck_assert_int_eq(mpi_pstate_parse_percent_ppm("1.2345", &v), 0);
        ck_assert_uint_eq(v, 12345);
        ck_assert_int_eq(mpi_pstate_parse_percent_ppm("0.50000", &v), 0); /* trailing zeros */
        ck_assert_uint_eq(v, 5000);
        ck_assert_int_eq(mpi_pstate_parse_percent_ppm("100", &v), 0);
        ck_assert_uint_eq(v, 1000000);
        v = 7;
        for (size_t i = 0; bad[i]; i++)
                ck_assert_msg(mpi_pstate_parse_percent_ppm(bad[i], &v) == -EINVAL && v == 7,
                              "accepted '%s'", bad[i]);
        ck_assert_int_eq(mpi_pstate_parse_percent_ppm(NULL, &v), -EINVAL);
}
END_TEST

START_TEST(carbon)
{
        char path[4096], line[256];
        FILE *f;
        unsigned n = 0;

        snprintf(path, sizeof(path), "%s/carbon_g_per_kwh.txt", TEST_DATA_DIR);
        f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f)) {
                char *v = line + 3;

                line[strcspn(line, "\n")] = '\0';
                if (line[0] == '#' || !line[0])
                        continue;
                if (strncmp(line, "ok ", 3) == 0)
                        ck_assert_msg(mpi_pstate_parse_carbon(v) == 0, "refused '%s'", v);
                else if (strncmp(line, "bad ", 4) == 0)
                        ck_assert_msg(mpi_pstate_parse_carbon(v + 1) == -EINVAL, "accepted '%s'",
                                      v + 1);
                else
                        ck_abort_msg("bad case line '%s'", line);
                n++;
        }
        fclose(f);
        ck_assert_uint_ge(n, 20);
        for (int total = 64; total <= 65; total++) {
                char many[65 * 8 + 1] = "";

                for (int i = 0; i < total; i++)
                        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%sp%d:1",
                                 i ? "," : "", i);
                ck_assert_int_eq(mpi_pstate_parse_carbon(many), total <= 64 ? 0 : -EINVAL);
        }
        ck_assert_int_eq(mpi_pstate_parse_carbon(NULL), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_carbon(""), -EINVAL);
}
END_TEST

START_TEST(bools)
{
        bool b = false;
        ck_assert_int_eq(mpi_pstate_parse_bool("YES", &b), 0);
        ck_assert(b);
        ck_assert_int_eq(mpi_pstate_parse_bool("off", &b), 0);
        ck_assert(!b);
        ck_assert_int_eq(mpi_pstate_parse_bool("maybe", &b), -EINVAL);
        ck_assert_int_eq(mpi_pstate_parse_bool("", &b), -EINVAL);
}
END_TEST

static Suite *parse_suite(void)
{
        Suite *s = suite_create("parse");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, u64_strict);
        tcase_add_test(tc, freq_units);
        tcase_add_test(tc, duration_units);
        tcase_add_test(tc, words);
        tcase_add_test(tc, percent_ppm);
        tcase_add_test(tc, carbon);
        tcase_add_test(tc, bools);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(parse_suite(), false);
}
