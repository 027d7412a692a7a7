/* SPDX-License-Identifier: BSD-3-Clause */
/* The option table and its parser, formatter and environment contract. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "check_main.h"

static const char *const env_names[] = {"MPI_PSTATE_MODE", "MPI_PSTATE_THRESHOLD", "MPI_PSTATE_LOW",
                                        "MPI_PSTATE_GOVERNOR", "MPI_PSTATE_BIND"};

static void clear_env(void)
{
        for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++)
                unsetenv(env_names[i]);
}

START_TEST(defaults_are_documented_values)
{
        struct mpi_pstate_options o;

        memset(&o, 0x5a, sizeof(o));
        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(o.mode, MPI_PSTATE_MODE_OFF);
        ck_assert_uint_eq(o.threshold_us, 500);
        ck_assert_uint_eq(o.low_khz, MPI_PSTATE_FREQ_MIN);
        ck_assert_int_eq(o.governor, MPI_PSTATE_GOVERNOR_KEEP);
        ck_assert_int_eq(o.bind, MPI_PSTATE_BIND_CORES);
}
END_TEST

/* Every default string of the table must parse strictly: defaults() ignores
 * errors, so a typo in options.def would otherwise go unnoticed. */
START_TEST(every_table_default_parses)
{
        struct mpi_pstate_options o;

        mpi_pstate_options_defaults(&o);
        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                const struct mpi_pstate_option_info *in = mpi_pstate_options_info(id);
                ck_assert_ptr_nonnull(in);
                ck_assert_msg(mpi_pstate_options_parse(&o, id, in->def) == 0, "default of %s",
                              in->name);
        }
        ck_assert_ptr_null(mpi_pstate_options_info(MPI_PSTATE_OPT_COUNT));
        ck_assert_ptr_null(mpi_pstate_options_info(-1));
}
END_TEST

START_TEST(table_names_and_env_contract)
{
        const char *names[] = {"mpi-pstate", "mpi-pstate-threshold", "mpi-pstate-low",
                               "mpi-pstate-governor", "mpi-pstate-bind"};

        ck_assert_int_eq(MPI_PSTATE_OPT_COUNT, 5);
        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                const struct mpi_pstate_option_info *in = mpi_pstate_options_info(id);
                ck_assert_str_eq(in->name, names[id]);
                ck_assert_str_eq(in->env, env_names[id]);
                ck_assert_int_eq(mpi_pstate_options_find(names[id]), id);
                ck_assert(strncmp(in->usage, "[mpi-pstate] ", 13) == 0);
                ck_assert(strlen(in->usage) > 20);
                ck_assert(strlen(in->name) < 75); /* SPANK_OPTION_MAXLEN */
        }
        ck_assert_str_eq(mpi_pstate_options_info(MPI_PSTATE_OPT_MODE)->bare, "on");
        ck_assert_ptr_null(mpi_pstate_options_info(MPI_PSTATE_OPT_THRESHOLD)->bare);
        ck_assert_int_eq(mpi_pstate_options_find("--mpi-pstate"), -1);
        ck_assert_int_eq(mpi_pstate_options_find("mpi-pstate-thresh"), -1);
        ck_assert_int_eq(mpi_pstate_options_find(NULL), -1);
}
END_TEST

START_TEST(bare_mode_is_on)
{
        /* The three spellings of "no argument", including the one a bare
         * sbatch option turns into on its way to srun steps. */
        const char *bare[] = {NULL, "", "(null)"};

        for (size_t i = 0; i < 3; i++) {
                struct mpi_pstate_options o;
                mpi_pstate_options_defaults(&o);
                ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate", bare[i], NULL, 0), 0);
                ck_assert_int_eq(o.mode, MPI_PSTATE_MODE_ON);
        }
        ck_assert(mpi_pstate_options_is_bare("(null)"));
        ck_assert(!mpi_pstate_options_is_bare("(null) "));
        ck_assert(!mpi_pstate_options_is_bare("on"));
}
END_TEST

START_TEST(mode_words)
{
        struct mpi_pstate_options o;

        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate", "profile", NULL, 0), 0);
        ck_assert_int_eq(o.mode, MPI_PSTATE_MODE_PROFILE);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate", "OFF", NULL, 0), 0);
        ck_assert_int_eq(o.mode, MPI_PSTATE_MODE_OFF);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate", "on", NULL, 0), 0);
        ck_assert_int_eq(o.mode, MPI_PSTATE_MODE_ON);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate", "auto", NULL, 0), -EINVAL);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate", "on ", NULL, 0), -EINVAL);
        ck_assert_int_eq(o.mode, MPI_PSTATE_MODE_ON);
}
END_TEST

START_TEST(threshold_values)
{
        struct mpi_pstate_options o;
        char err[256] = "";

        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(
            mpi_pstate_options_set(&o, "mpi-pstate-threshold", "2ms", err, sizeof(err)), 0);
        ck_assert_uint_eq(o.threshold_us, 2000);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-threshold", "0", err, sizeof(err)),
                         0);
        ck_assert_uint_eq(o.threshold_us, 0);
        ck_assert_int_eq(
            mpi_pstate_options_set(&o, "mpi-pstate-threshold", "750us", err, sizeof(err)), 0);
        ck_assert_uint_eq(o.threshold_us, 750);
        ck_assert_int_eq(
            mpi_pstate_options_set(&o, "mpi-pstate-threshold", "abc", err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "mpi-pstate: invalid value \"abc\" for --mpi-pstate-threshold: "
                              "expected a duration such as 500us or 2ms");
        ck_assert_uint_eq(o.threshold_us, 750);
        ck_assert_int_eq(
            mpi_pstate_options_set(&o, "mpi-pstate-threshold", "2days", err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(
            mpi_pstate_options_set(&o, "mpi-pstate-threshold", "100000s", err, sizeof(err)),
            -ERANGE);
        ck_assert_uint_eq(o.threshold_us, 750);
}
END_TEST

START_TEST(required_argument_missing)
{
        struct mpi_pstate_options o;
        char err[256] = "";

        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(
            mpi_pstate_options_set(&o, "mpi-pstate-threshold", "(null)", err, sizeof(err)),
            -EINVAL);
        ck_assert_str_eq(err, "mpi-pstate: --mpi-pstate-threshold needs a value: expected a "
                              "duration such as 500us or 2ms");
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-low", NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_uint_eq(o.threshold_us, 500);
}
END_TEST

START_TEST(low_values)
{
        struct mpi_pstate_options o;
        char err[256] = "";

        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-low", "1.2GHz", err, sizeof(err)),
                         0);
        ck_assert_uint_eq(o.low_khz, 1200000);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-low", "1800MHz", err, sizeof(err)),
                         0);
        ck_assert_uint_eq(o.low_khz, 1800000);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-low", "1000000", err, sizeof(err)),
                         0);
        ck_assert_uint_eq(o.low_khz, 1000000);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-low", "MIN", err, sizeof(err)), 0);
        ck_assert_uint_eq(o.low_khz, MPI_PSTATE_FREQ_MIN);
        ck_assert_int_eq(
            mpi_pstate_options_set(&o, "mpi-pstate-low", "efficient", err, sizeof(err)), 0);
        ck_assert_uint_eq(o.low_khz, MPI_PSTATE_FREQ_EFFICIENT);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-low", "1.2", err, sizeof(err)),
                         -EINVAL);
        ck_assert_str_eq(err,
                         "mpi-pstate: invalid value \"1.2\" for --mpi-pstate-low: expected "
                         "a frequency such as 1.2GHz, 1200MHz or 1200000 (kHz), min or efficient");
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-low", "0", err, sizeof(err)),
                         -ERANGE);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-low", "max", err, sizeof(err)),
                         -EINVAL);
        ck_assert_uint_eq(o.low_khz, MPI_PSTATE_FREQ_EFFICIENT); /* untouched by the failures */
}
END_TEST

START_TEST(governor_and_bind_words)
{
        const char *govs[] = {"keep",     "performance",  "powersave", "schedutil",
                              "ondemand", "conservative", "userspace"};
        const char *binds[] = {"none", "cores", "compact", "scatter"};
        struct mpi_pstate_options o;
        char err[256] = "";

        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(MPI_PSTATE_GOVERNOR_COUNT, 7);
        for (int g = 0; g < MPI_PSTATE_GOVERNOR_COUNT; g++) {
                ck_assert_int_eq(
                    mpi_pstate_options_set(&o, "mpi-pstate-governor", govs[g], err, sizeof(err)),
                    0);
                ck_assert_int_eq(o.governor, g);
                ck_assert_str_eq(mpi_pstate_options_governor_word(o.governor), govs[g]);
        }
        ck_assert_int_eq(MPI_PSTATE_BIND_COUNT, 4);
        for (int b = 0; b < MPI_PSTATE_BIND_COUNT; b++) {
                ck_assert_int_eq(
                    mpi_pstate_options_set(&o, "mpi-pstate-bind", binds[b], err, sizeof(err)), 0);
                ck_assert_int_eq(o.bind, b);
        }
        ck_assert_int_eq(
            mpi_pstate_options_set(&o, "mpi-pstate-governor", "turbo", err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "mpi-pstate: invalid value \"turbo\" for --mpi-pstate-governor: "
                              "expected one of keep, performance, powersave, schedutil, "
                              "ondemand, conservative, userspace");
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-bind", "spread", err, sizeof(err)),
                         -EINVAL);
        ck_assert_str_eq(err, "mpi-pstate: invalid value \"spread\" for --mpi-pstate-bind: "
                              "expected one of none, cores, compact, scatter");
        ck_assert_int_eq(o.bind, MPI_PSTATE_BIND_SCATTER);
        ck_assert_ptr_null(mpi_pstate_options_governor_word(MPI_PSTATE_GOVERNOR_COUNT));
        ck_assert_ptr_null(mpi_pstate_options_mode_word((enum mpi_pstate_mode) - 1));
}
END_TEST

START_TEST(unknown_option_and_repeat)
{
        struct mpi_pstate_options o;
        char err[256] = "";

        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-high", "2GHz", err, sizeof(err)),
                         -ENOENT);
        ck_assert_str_eq(err, "mpi-pstate: unknown option \"mpi-pstate-high\"");
        ck_assert_int_eq(mpi_pstate_options_set_id(&o, 99, "x", err, sizeof(err)), -ENOENT);
        /* A repeat (env first, then the command line) is accepted: last wins. */
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-threshold", "1ms", NULL, 0), 0);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-threshold", "1ms", NULL, 0), 0);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-threshold", "3ms", NULL, 0), 0);
        ck_assert_uint_eq(o.threshold_us, 3000);
}
END_TEST

/* Hostile input cannot forge log lines or overflow the message. */
START_TEST(garbage_is_escaped_and_cut)
{
        struct mpi_pstate_options o;
        char big[2048], err[256];

        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-bind", big, err, sizeof(err)),
                         -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "xxx...\" for --mpi-pstate-bind"));
        ck_assert_uint_lt(strlen(err), 200);
        ck_assert_int_eq(
            mpi_pstate_options_set(&o, "mpi-pstate-bind", "a\nerror: b\"\x01", err, sizeof(err)),
            -EINVAL);
        ck_assert_ptr_null(strchr(err, '\n'));
        ck_assert_ptr_nonnull(strstr(err, "\"a\\x0aerror: b\\\"\\x01\""));
        /* A tiny buffer is truncated, never overrun. */
        char tiny[8];
        memset(tiny, '#', sizeof(tiny));
        ck_assert_int_eq(mpi_pstate_options_set(&o, "mpi-pstate-bind", "bad", tiny, 5), -EINVAL);
        ck_assert_str_eq(tiny, "mpi-");
        ck_assert_int_eq(tiny[5], '#');
}
END_TEST

START_TEST(canonical_and_human_format)
{
        struct mpi_pstate_options o;
        char buf[32];

        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(mpi_pstate_options_format(&o, MPI_PSTATE_OPT_THRESHOLD, buf, sizeof(buf)),
                         3);
        ck_assert_str_eq(buf, "500");
        mpi_pstate_options_format(&o, MPI_PSTATE_OPT_LOW, buf, sizeof(buf));
        ck_assert_str_eq(buf, "min");
        o.low_khz = 1200000;
        mpi_pstate_options_format(&o, MPI_PSTATE_OPT_LOW, buf, sizeof(buf));
        ck_assert_str_eq(buf, "1200000");
        mpi_pstate_options_format_human(&o, MPI_PSTATE_OPT_LOW, buf, sizeof(buf));
        ck_assert_str_eq(buf, "1200MHz");
        o.low_khz = 1234567;
        mpi_pstate_options_format_human(&o, MPI_PSTATE_OPT_LOW, buf, sizeof(buf));
        ck_assert_str_eq(buf, "1234567kHz");
        o.threshold_us = 2000;
        mpi_pstate_options_format_human(&o, MPI_PSTATE_OPT_THRESHOLD, buf, sizeof(buf));
        ck_assert_str_eq(buf, "2ms");
        o.threshold_us = 3000000;
        mpi_pstate_options_format_human(&o, MPI_PSTATE_OPT_THRESHOLD, buf, sizeof(buf));
        ck_assert_str_eq(buf, "3s");
        o.threshold_us = 0;
        mpi_pstate_options_format_human(&o, MPI_PSTATE_OPT_THRESHOLD, buf, sizeof(buf));
        ck_assert_str_eq(buf, "0us");
        mpi_pstate_options_format(&o, MPI_PSTATE_OPT_MODE, buf, sizeof(buf));
        ck_assert_str_eq(buf, "off");
        ck_assert_int_eq(mpi_pstate_options_format(&o, MPI_PSTATE_OPT_GOVERNOR, buf, 4), -ENOSPC);
        ck_assert_int_eq(mpi_pstate_options_format(&o, 42, buf, sizeof(buf)), -EINVAL);
        o.bind = (enum mpi_pstate_bind)17;
        ck_assert_int_eq(mpi_pstate_options_format(&o, MPI_PSTATE_OPT_BIND, buf, sizeof(buf)),
                         -EINVAL);
}
END_TEST

struct envrec {
        int n;
        char names[8][32];
        char values[8][32];
        int fail_at;
};

static int record_env(void *ctx, const char *name, const char *value)
{
        struct envrec *r = ctx;

        if (r->n == r->fail_at)
                return -7;
        snprintf(r->names[r->n], sizeof(r->names[0]), "%s", name);
        snprintf(r->values[r->n], sizeof(r->values[0]), "%s", value);
        r->n++;
        return 0;
}

START_TEST(to_env_canonical)
{
        struct mpi_pstate_options o;
        struct envrec r = {.fail_at = -1};

        mpi_pstate_options_defaults(&o);
        mpi_pstate_options_set(&o, "mpi-pstate", NULL, NULL, 0);
        mpi_pstate_options_set(&o, "mpi-pstate-threshold", "2ms", NULL, 0);
        mpi_pstate_options_set(&o, "mpi-pstate-low", "1.2GHz", NULL, 0);
        mpi_pstate_options_set(&o, "mpi-pstate-governor", "userspace", NULL, 0);
        mpi_pstate_options_set(&o, "mpi-pstate-bind", "compact", NULL, 0);
        ck_assert_int_eq(mpi_pstate_options_to_env(&o, record_env, &r), 0);
        ck_assert_int_eq(r.n, 5);
        ck_assert_str_eq(r.names[0], "MPI_PSTATE_MODE");
        ck_assert_str_eq(r.values[0], "on");
        ck_assert_str_eq(r.names[1], "MPI_PSTATE_THRESHOLD");
        ck_assert_str_eq(r.values[1], "2000");
        ck_assert_str_eq(r.names[2], "MPI_PSTATE_LOW");
        ck_assert_str_eq(r.values[2], "1200000");
        ck_assert_str_eq(r.names[3], "MPI_PSTATE_GOVERNOR");
        ck_assert_str_eq(r.values[3], "userspace");
        ck_assert_str_eq(r.names[4], "MPI_PSTATE_BIND");
        ck_assert_str_eq(r.values[4], "compact");

        struct envrec r2 = {.fail_at = 2};
        ck_assert_int_eq(mpi_pstate_options_to_env(&o, record_env, &r2), -7);
        ck_assert_int_eq(r2.n, 2);
}
END_TEST

static int put_env(void *ctx, const char *name, const char *value)
{
        (void)ctx;
        return setenv(name, value, 1);
}

/* What the plugin exports, the library reads back identically. */
START_TEST(env_round_trip)
{
        struct mpi_pstate_options a, b;
        char err[256] = "";

        clear_env();
        mpi_pstate_options_defaults(&a);
        mpi_pstate_options_set(&a, "mpi-pstate", "profile", NULL, 0);
        mpi_pstate_options_set(&a, "mpi-pstate-threshold", "1.5ms", NULL, 0);
        mpi_pstate_options_set(&a, "mpi-pstate-low", "1800MHz", NULL, 0);
        mpi_pstate_options_set(&a, "mpi-pstate-governor", "powersave", NULL, 0);
        mpi_pstate_options_set(&a, "mpi-pstate-bind", "none", NULL, 0);
        ck_assert_int_eq(mpi_pstate_options_to_env(&a, put_env, NULL), 0);
        ck_assert_str_eq(getenv("MPI_PSTATE_THRESHOLD"), "1500");
        mpi_pstate_options_defaults(&b);
        ck_assert_int_eq(mpi_pstate_options_from_env(&b, err, sizeof(err)), 0);
        ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
        clear_env();
}
END_TEST

START_TEST(from_env_partial_and_bad)
{
        struct mpi_pstate_options o;
        char err[256] = "";

        clear_env();
        mpi_pstate_options_defaults(&o);
        ck_assert_int_eq(mpi_pstate_options_from_env(&o, err, sizeof(err)), 0);
        ck_assert_uint_eq(o.threshold_us, 500);
        setenv("MPI_PSTATE_MODE", "on", 1);
        setenv("MPI_PSTATE_THRESHOLD", "abc", 1);
        ck_assert_int_eq(mpi_pstate_options_from_env(&o, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "mpi-pstate: invalid value \"abc\" for MPI_PSTATE_THRESHOLD: "
                              "expected a duration such as 500us or 2ms");
        ck_assert_int_eq(o.mode, MPI_PSTATE_MODE_ON);
        ck_assert_uint_eq(o.threshold_us, 500);
        /* The environment is canonical: "empty means on" is a command-line rule only. */
        setenv("MPI_PSTATE_THRESHOLD", "100", 1);
        setenv("MPI_PSTATE_MODE", "", 1);
        ck_assert_int_eq(mpi_pstate_options_from_env(&o, err, sizeof(err)), -EINVAL);
        setenv("MPI_PSTATE_MODE", "(null)", 1);
        ck_assert_int_eq(mpi_pstate_options_from_env(&o, err, sizeof(err)), -EINVAL);
        setenv("MPI_PSTATE_MODE", "off", 1);
        ck_assert_int_eq(mpi_pstate_options_from_env(&o, NULL, 0), 0);
        ck_assert_uint_eq(o.threshold_us, 100);
        clear_env();
}
END_TEST

START_TEST(expect_texts)
{
        char buf[128];

        ck_assert_str_eq(mpi_pstate_options_expect(MPI_PSTATE_OPT_MODE, buf, sizeof(buf)),
                         "one of off, on, profile");
        ck_assert_str_eq(mpi_pstate_options_expect(MPI_PSTATE_OPT_THRESHOLD, buf, sizeof(buf)),
                         "a duration such as 500us or 2ms");
        ck_assert_str_eq(mpi_pstate_options_expect(-3, buf, sizeof(buf)), "");
        ck_assert_int_eq(mpi_pstate_options_parse(NULL, -1, "x"), -EINVAL);
}
END_TEST

static Suite *options_suite(void)
{
        Suite *s = suite_create("options");
        TCase *tc = tcase_create("table");

        tcase_add_test(tc, defaults_are_documented_values);
        tcase_add_test(tc, every_table_default_parses);
        tcase_add_test(tc, table_names_and_env_contract);
        tcase_add_test(tc, expect_texts);
        suite_add_tcase(s, tc);

        tc = tcase_create("parse");
        tcase_add_test(tc, bare_mode_is_on);
        tcase_add_test(tc, mode_words);
        tcase_add_test(tc, threshold_values);
        tcase_add_test(tc, required_argument_missing);
        tcase_add_test(tc, low_values);
        tcase_add_test(tc, governor_and_bind_words);
        tcase_add_test(tc, unknown_option_and_repeat);
        tcase_add_test(tc, garbage_is_escaped_and_cut);
        suite_add_tcase(s, tc);

        tc = tcase_create("env");
        tcase_add_test(tc, canonical_and_human_format);
        tcase_add_test(tc, to_env_canonical);
        tcase_add_test(tc, env_round_trip);
        tcase_add_test(tc, from_env_partial_and_bad);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(options_suite(), false);
}
