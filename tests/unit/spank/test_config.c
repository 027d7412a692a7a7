/* SPDX-License-Identifier: BSD-3-Clause */
/* The plugstack.conf argument parser and the limits it puts on options. */
#include <check.h>
#include <pwd.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugstack.h"
#include "check_main.h"

struct reports {
        int n;
        char msg[16][512];
};

static void collect(void *ctx, const char *msg)
{
        struct reports *r = ctx;

        if (r->n < 16)
                snprintf(r->msg[r->n], sizeof(r->msg[0]), "%s", msg);
        r->n++;
}

/* Parses a NULL-terminated argument list into c, starting from defaults. */
static int parse(struct mpi_pstate_config *c, struct reports *r, char **argv)
{
        int argc = 0;

        while (argv[argc])
                argc++;
        memset(r, 0, sizeof(*r));
        mpi_pstate_plugstack_defaults(c);
        return mpi_pstate_plugstack_parse(c, argc, argv, collect, r);
}

START_TEST(builtin_defaults)
{
        struct mpi_pstate_config c;
        struct reports r;
        char *argv[] = {NULL};

        ck_assert_int_eq(parse(&c, &r, argv), 0);
        ck_assert_int_eq(r.n, 0);
        ck_assert_int_eq(c.defaults.mode, MPI_PSTATE_MODE_OFF);
        ck_assert_uint_eq(c.defaults.threshold_us, 500);
        ck_assert(c.allow_off);
        ck_assert_uint_eq(c.governors, (1u << MPI_PSTATE_GOVERNOR_COUNT) - 1);
        ck_assert_uint_eq(c.freq_min_khz, 0);
        ck_assert_uint_eq(c.freq_max_khz, 0);
        ck_assert_uint_eq(c.threshold_min_us, 0);
        ck_assert_uint_eq(c.threshold_max_us, MPI_PSTATE_CONFIG_THRESHOLD_MAX);
        ck_assert_str_eq(c.collect_dir, "/var/spool/mpi-pstate/records");
        ck_assert_str_eq(c.runtime_dir, "/run/mpi-pstate");
        ck_assert_str_eq(c.preload, "");
        ck_assert_str_eq(c.agent, "");
        ck_assert_str_eq(c.mechanism, "auto");
        ck_assert_str_eq(c.sysroot, "/sys");
        ck_assert_uint_eq(c.agent_budget_ppm, 5000);
        ck_assert_int_eq(mpi_pstate_plugstack_parse(&c, 0, NULL, NULL, NULL), 0);
}
END_TEST

START_TEST(every_key_applies)
{
        struct mpi_pstate_config c;
        struct reports r;
        char *argv[] = {"default_mode=profile",
                        "default_threshold=2ms",
                        "default_low=1.5GHz",
                        "default_governor=performance",
                        "default_bind=scatter",
                        "allow_off=no",
                        "allowed_governors=performance,SchedUtil",
                        "freq_min=1.2GHz",
                        "freq_max=2800MHz",
                        "threshold_min=100us",
                        "threshold_max=1s",
                        "collect_dir=/srv/mpi-pstate/records/",
                        "runtime_dir=/var/run/mp",
                        "preload=/opt/mp/lib/libmpi-pstate.so",
                        "agent=/opt/mp/sbin/mpi-pstate-agent",
                        "mechanism=max_freq",
                        "sysroot=/srv/fake/sys",
                        "agent_cpu_budget=1.25",
                        "carbon_g_per_kwh=350,gpu:120",
                        "metrics_dir=/var/lib/prometheus/node-exporter",
                        "uncore=yes",
                        "uncore_threshold=20ms",
                        NULL};

        ck_assert_int_eq(parse(&c, &r, argv), 0);
        ck_assert_msg(r.n == 0, "unexpected report: %s", r.msg[0]);
        ck_assert_int_eq(c.defaults.mode, MPI_PSTATE_MODE_PROFILE);
        ck_assert_uint_eq(c.defaults.threshold_us, 2000);
        ck_assert_uint_eq(c.defaults.low_khz, 1500000);
        ck_assert_int_eq(c.defaults.governor, MPI_PSTATE_GOVERNOR_PERFORMANCE);
        ck_assert_int_eq(c.defaults.bind, MPI_PSTATE_BIND_SCATTER);
        ck_assert(!c.allow_off);
        ck_assert_uint_eq(c.governors, (1u << MPI_PSTATE_GOVERNOR_KEEP) |
                                           (1u << MPI_PSTATE_GOVERNOR_PERFORMANCE) |
                                           (1u << MPI_PSTATE_GOVERNOR_SCHEDUTIL));
        ck_assert_uint_eq(c.freq_min_khz, 1200000);
        ck_assert_uint_eq(c.freq_max_khz, 2800000);
        ck_assert_uint_eq(c.threshold_min_us, 100);
        ck_assert_uint_eq(c.threshold_max_us, 1000000);
        ck_assert_str_eq(c.collect_dir, "/srv/mpi-pstate/records");
        ck_assert_str_eq(c.runtime_dir, "/var/run/mp");
        ck_assert_str_eq(c.preload, "/opt/mp/lib/libmpi-pstate.so");
        ck_assert_str_eq(c.agent, "/opt/mp/sbin/mpi-pstate-agent");
        ck_assert_str_eq(c.mechanism, "max_freq");
        ck_assert_str_eq(c.sysroot, "/srv/fake/sys");
        ck_assert_uint_eq(c.agent_budget_ppm, 12500);
        ck_assert(c.uncore);
        ck_assert_uint_eq(c.uncore_threshold_us, 20000);
}
END_TEST

/* runtime_dir may name the host (%h) for several slurmd on one machine;
 * file keys name files; the mechanism is one of three words. */
START_TEST(new_keys_refuse_what_they_cannot_use)
{
        struct mpi_pstate_config c;
        struct reports r;
        char *argv[] = {"runtime_dir=/srv/%h/run",
                        "runtime_dir=/srv/%n/run",
                        "runtime_dir=/srv/50%",
                        "preload=lib/libmpi-pstate.so",
                        "preload=/opt/lib/",
                        "agent=/opt/../sbin/agent",
                        "mechanism=fast",
                        "mechanism=AUTO",
                        "sysroot=sys",
                        "agent_cpu_budget=101",
                        "agent_cpu_budget=0.5ms",
                        "agent_cpu_budget=0.00001",
                        "carbon_g_per_kwh=350,400",
                        "metrics_dir=prom",
                        "uncore=maybe",
                        "uncore_threshold=500us",
                        NULL};

        ck_assert_int_eq(parse(&c, &r, argv), 15);
        ck_assert_str_eq(c.runtime_dir, "/srv/%h/run");
        ck_assert_ptr_nonnull(strstr(r.msg[0], "\"/srv/%n/run\" for runtime_dir"));
        ck_assert_ptr_nonnull(strstr(r.msg[0], "escapes: %h, %%"));
        ck_assert_ptr_nonnull(strstr(r.msg[3], "for preload: expected an absolute file path"));
        ck_assert_ptr_nonnull(strstr(r.msg[5], "for mechanism: expected one of auto, max_freq, "
                                               "setspeed"));
        ck_assert_str_eq(c.preload, "");
        ck_assert_str_eq(c.agent, "");
        ck_assert_str_eq(c.mechanism, "auto");
        ck_assert_str_eq(c.sysroot, "/sys");
        ck_assert_ptr_nonnull(strstr(r.msg[8], "for agent_cpu_budget: expected a percentage of "
                                               "one core such as 0.5"));
        ck_assert_uint_eq(c.agent_budget_ppm, 5000);
        ck_assert_ptr_nonnull(strstr(r.msg[11], "for carbon_g_per_kwh: expected grams of CO2"));
        ck_assert_ptr_nonnull(strstr(r.msg[12], "\"prom\" for metrics_dir"));
}
END_TEST

/* agent_user: names, uids and uid:gid; root, unknown names and junk are
 * refused and the per-step default (the packages' user, else the unnamed
 * id) stands. */
START_TEST(agent_user_never_root)
{
        struct mpi_pstate_config c;
        struct reports r;
        char *bad[] = {"agent_user=0",
                       "agent_user=root",
                       "agent_user=1000:0",
                       "agent_user=no-such-us",
                       "agent_user=:100",
                       "agent_user=12x",
                       "agent_user=",
                       "agent_user=100:nogroup-xyz",
                       NULL};
        char *good_num[] = {"agent_user=64000", NULL};
        char *good_pair[] = {"agent_user=64000:64001", NULL};
        char *good_name[] = {"agent_user=nobody", NULL};
        uint32_t uid, gid;

        ck_assert_int_eq(parse(&c, &r, bad), 8);
        ck_assert_uint_eq(c.agent_uid, 0);
        ck_assert_ptr_nonnull(strstr(r.msg[0], "for agent_user: expected a user name, uid or "
                                               "uid:gid known on the node, not root"));
        mpi_pstate_plugstack_agent_ids(&c, &uid, &gid);
        ck_assert_uint_ne(uid, 0);
        ck_assert_uint_ne(gid, 0);
        if (!getpwnam(MPI_PSTATE_CONFIG_AGENT_USER))
                ck_assert_uint_eq(uid, 65531u); /* --run-uid's default */
        ck_assert_int_eq(parse(&c, &r, good_num), 0);
        mpi_pstate_plugstack_agent_ids(&c, &uid, &gid);
        ck_assert_uint_eq(uid, 64000);
        ck_assert_uint_eq(gid, 64000);
        ck_assert_int_eq(parse(&c, &r, good_pair), 0);
        mpi_pstate_plugstack_agent_ids(&c, &uid, &gid);
        ck_assert_uint_eq(gid, 64001);
        if (getpwnam("nobody")) {
                ck_assert_int_eq(parse(&c, &r, good_name), 0);
                mpi_pstate_plugstack_agent_ids(&c, &uid, &gid);
                ck_assert_uint_eq(uid, getpwnam("nobody")->pw_uid);
        }
}
END_TEST

/* Nothing an admin can type makes parsing fail: every problem is reported
 * once and that key keeps its previous value. */
START_TEST(bad_keys_reported_and_ignored)
{
        struct mpi_pstate_config c;
        struct reports r;
        char *argv[] = {"default_mode=maybe",
                        "bogus=1",
                        "allow_off",
                        "threshold_min=",
                        "freq_max=fast",
                        "allowed_governors=performance,,powersave",
                        "allowed_governors=turbo",
                        "default_threshold=3ms",
                        "collect_dir=relative/path",
                        "runtime_dir=/run/../etc",
                        "runtime_dir=/run//x",
                        "runtime_dir=/run/./x",
                        "collect_dir=/a b",
                        NULL};

        ck_assert_int_eq(parse(&c, &r, argv), 12);
        ck_assert_int_eq(r.n, 12);
        ck_assert_str_eq(r.msg[0], "mpi-pstate: plugstack.conf: invalid value \"maybe\" for "
                                   "default_mode: expected one of off, on, profile; key ignored");
        ck_assert_str_eq(r.msg[1], "mpi-pstate: plugstack.conf: unknown key \"bogus\": ignored");
        ck_assert_str_eq(r.msg[2],
                         "mpi-pstate: plugstack.conf: argument \"allow_off\" is not key=value: "
                         "ignored");
        ck_assert_str_eq(r.msg[3], "mpi-pstate: plugstack.conf: invalid value \"\" for "
                                   "threshold_min: expected a duration such as 100us; key "
                                   "ignored");
        ck_assert_ptr_nonnull(strstr(r.msg[4], "\"fast\" for freq_max"));
        ck_assert_ptr_nonnull(strstr(r.msg[5], "for allowed_governors"));
        ck_assert_ptr_nonnull(strstr(r.msg[7], "for collect_dir"));
        for (int i = 0; i < r.n && i < 16; i++)
                ck_assert(strncmp(r.msg[i], "mpi-pstate: ", 12) == 0);
        /* Everything else kept its default, the one good key applied. */
        ck_assert_int_eq(c.defaults.mode, MPI_PSTATE_MODE_OFF);
        ck_assert(c.allow_off);
        ck_assert_uint_eq(c.threshold_min_us, 0);
        ck_assert_uint_eq(c.freq_max_khz, 0);
        ck_assert_uint_eq(c.governors, (1u << MPI_PSTATE_GOVERNOR_COUNT) - 1);
        ck_assert_uint_eq(c.defaults.threshold_us, 3000);
        ck_assert_str_eq(c.collect_dir, "/var/spool/mpi-pstate/records");
        ck_assert_str_eq(c.runtime_dir, "/run/mpi-pstate");
}
END_TEST

START_TEST(hostile_values_do_not_leak_into_messages)
{
        struct mpi_pstate_config c;
        struct reports r;
        char big[600];
        char ctl[] = "bogus\nerror: forged=1";
        char *argv[] = {big, ctl, NULL};

        memset(big, 'k', sizeof(big));
        memcpy(big + 590, "=v", 3);
        ck_assert_int_eq(parse(&c, &r, argv), 2);
        ck_assert_uint_lt(strlen(r.msg[0]), 200);
        ck_assert_ptr_null(strchr(r.msg[1], '\n'));
}
END_TEST

START_TEST(long_path_refused)
{
        struct mpi_pstate_config c;
        struct reports r;
        char path[400] = "collect_dir=/";
        char *argv[] = {path, NULL};

        memset(path + 13, 'd', 300);
        path[313] = '\0';
        ck_assert_int_eq(parse(&c, &r, argv), 1);
        ck_assert_str_eq(c.collect_dir, MPI_PSTATE_CONFIG_COLLECT_DIR);
        path[12 + 200] = '\0'; /* 200 bytes: fits */
        ck_assert_int_eq(parse(&c, &r, argv), 0);
        ck_assert_uint_eq(strlen(c.collect_dir), 200);
}
END_TEST

START_TEST(last_key_wins_and_none)
{
        struct mpi_pstate_config c;
        struct reports r;
        char *argv[] = {"freq_min=1GHz",
                        "freq_min=none",
                        "threshold_max=5ms",
                        "threshold_max=none",
                        "allow_off=0",
                        "allow_off=TRUE",
                        NULL};

        ck_assert_int_eq(parse(&c, &r, argv), 0);
        ck_assert_uint_eq(c.freq_min_khz, 0);
        ck_assert_uint_eq(c.threshold_max_us, MPI_PSTATE_CONFIG_THRESHOLD_MAX);
        ck_assert(c.allow_off);
}
END_TEST

START_TEST(contradicting_pairs_dropped)
{
        struct mpi_pstate_config c;
        struct reports r;
        char *argv[] = {"freq_min=3GHz", "freq_max=2GHz", "threshold_min=5ms", "threshold_max=1ms",
                        NULL};

        ck_assert_int_eq(parse(&c, &r, argv), 2);
        ck_assert_ptr_nonnull(strstr(r.msg[0], "freq_min (3000000 kHz) is above freq_max"));
        ck_assert_ptr_nonnull(strstr(r.msg[1], "threshold_min (5000 us) is above threshold_max"));
        ck_assert_uint_eq(c.freq_min_khz, 0);
        ck_assert_uint_eq(c.freq_max_khz, 0);
        ck_assert_uint_eq(c.threshold_min_us, 0);
        ck_assert_uint_eq(c.threshold_max_us, MPI_PSTATE_CONFIG_THRESHOLD_MAX);
}
END_TEST

/* The site's defaults must obey the site's limits. */
START_TEST(defaults_brought_within_limits)
{
        struct mpi_pstate_config c;
        struct reports r;
        char *argv[] = {"threshold_min=1ms",
                        "default_governor=powersave",
                        "allowed_governors=performance",
                        "freq_max=2GHz",
                        "default_low=2.5GHz",
                        "allow_off=no",
                        NULL};

        ck_assert_int_eq(parse(&c, &r, argv), 3);
        ck_assert_str_eq(r.msg[0], "mpi-pstate: plugstack.conf: default_threshold: threshold "
                                   "500us is below the site's minimum (threshold_min): using 1ms");
        ck_assert_str_eq(r.msg[1], "mpi-pstate: plugstack.conf: default_low: low frequency "
                                   "2500MHz is above the site's maximum (freq_max): using 2000MHz");
        ck_assert_str_eq(r.msg[2], "mpi-pstate: plugstack.conf: default_governor: governor "
                                   "powersave is not allowed on this cluster (allowed_governors: "
                                   "keep,performance)");
        ck_assert_uint_eq(c.defaults.threshold_us, 1000);
        ck_assert_uint_eq(c.defaults.low_khz, 2000000);
        ck_assert_int_eq(c.defaults.governor, MPI_PSTATE_GOVERNOR_KEEP);
        /* allow_off limits users, not the site default. */
        ck_assert_int_eq(c.defaults.mode, MPI_PSTATE_MODE_OFF);
}
END_TEST

START_TEST(limit_user_values)
{
        struct mpi_pstate_config c;
        struct reports r;
        struct mpi_pstate_options o;
        char note[256];
        char *argv[] = {"allow_off=no",
                        "allowed_governors=performance,schedutil",
                        "freq_min=1.2GHz",
                        "freq_max=2.4GHz",
                        "threshold_min=100us",
                        "threshold_max=10ms",
                        "default_governor=schedutil",
                        NULL};

        ck_assert_int_eq(parse(&c, &r, argv), 0);
        o = c.defaults;

        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_THRESHOLD, note, sizeof(note)),
            MPI_PSTATE_LIMIT_OK);
        o.threshold_us = 20;
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_THRESHOLD, note, sizeof(note)),
            MPI_PSTATE_LIMIT_ADJUSTED);
        ck_assert_uint_eq(o.threshold_us, 100);
        ck_assert_str_eq(note, "mpi-pstate: threshold 20us is below the site's minimum "
                               "(threshold_min): using 100us");
        o.threshold_us = 50000;
        ck_assert_int_eq(mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_THRESHOLD, NULL, 0),
                         MPI_PSTATE_LIMIT_ADJUSTED);
        ck_assert_uint_eq(o.threshold_us, 10000);

        o.low_khz = 800000;
        ck_assert_int_eq(mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_LOW, note, sizeof(note)),
                         MPI_PSTATE_LIMIT_ADJUSTED);
        ck_assert_uint_eq(o.low_khz, 1200000);
        o.low_khz = 3000000;
        ck_assert_int_eq(mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_LOW, note, sizeof(note)),
                         MPI_PSTATE_LIMIT_ADJUSTED);
        ck_assert_uint_eq(o.low_khz, 2400000);
        o.low_khz = MPI_PSTATE_FREQ_MIN;
        ck_assert_int_eq(mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_LOW, note, sizeof(note)),
                         MPI_PSTATE_LIMIT_OK);
        ck_assert_uint_eq(o.low_khz, MPI_PSTATE_FREQ_MIN);

        o.governor = MPI_PSTATE_GOVERNOR_POWERSAVE;
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_GOVERNOR, note, sizeof(note)),
            MPI_PSTATE_LIMIT_REFUSED);
        ck_assert_str_eq(note, "mpi-pstate: governor powersave is not allowed on this cluster "
                               "(allowed_governors: keep,performance,schedutil)");
        ck_assert_int_eq(o.governor, MPI_PSTATE_GOVERNOR_SCHEDUTIL); /* the site default */
        o.governor = MPI_PSTATE_GOVERNOR_KEEP;
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_GOVERNOR, note, sizeof(note)),
            MPI_PSTATE_LIMIT_OK);
        o.governor = (enum mpi_pstate_governor)40;
        ck_assert_int_eq(mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_GOVERNOR, NULL, 0),
                         MPI_PSTATE_LIMIT_REFUSED);

        o.mode = MPI_PSTATE_MODE_OFF;
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_MODE, note, sizeof(note)),
            MPI_PSTATE_LIMIT_ADJUSTED);
        ck_assert_int_eq(o.mode, MPI_PSTATE_MODE_PROFILE);
        ck_assert_ptr_nonnull(strstr(note, "allow_off=no"));
        o.mode = MPI_PSTATE_MODE_ON;
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_MODE, note, sizeof(note)),
            MPI_PSTATE_LIMIT_OK);
        o.bind = MPI_PSTATE_BIND_NONE;
        ck_assert_int_eq(
            mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_BIND, note, sizeof(note)),
            MPI_PSTATE_LIMIT_OK);
}
END_TEST

START_TEST(allow_off_default_yes)
{
        struct mpi_pstate_config c;
        struct mpi_pstate_options o;

        mpi_pstate_plugstack_defaults(&c);
        o = c.defaults;
        o.mode = MPI_PSTATE_MODE_OFF;
        ck_assert_int_eq(mpi_pstate_plugstack_limit(&c, &o, MPI_PSTATE_OPT_MODE, NULL, 0),
                         MPI_PSTATE_LIMIT_OK);
        ck_assert_int_eq(o.mode, MPI_PSTATE_MODE_OFF);
}
END_TEST

static char *slurp(const char *path)
{
        FILE *f = fopen(path, "r");
        char *buf;
        size_t n;

        if (!f)
                return NULL;
        buf = calloc(1, 1 << 20);
        n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
        (void)n;
        fclose(f);
        return buf;
}

/* Every key the parser accepts is documented for admins, in both places. */
START_TEST(every_key_documented)
{
        const char *docs[] = {TEST_DATA_DIR "/../../man/mpi_pstate.8.in",
                              TEST_DATA_DIR "/../../docs/admin.md"};
        size_t nkeys = 0;

        for (size_t d = 0; d < 2; d++) {
                char *text = slurp(docs[d]);
                ck_assert_msg(text != NULL, "cannot read %s", docs[d]);
                for (size_t i = 0; mpi_pstate_plugstack_key(i); i++) {
                        char man_key[96], md_key[96];
                        const char *k = mpi_pstate_plugstack_key(i);
                        /* The entry heading of the key: ".BI key= value" in roff, "`key=" in md. */
                        snprintf(man_key, sizeof(man_key), ".BI %s= ", k);
                        snprintf(md_key, sizeof(md_key), "`%s=", k);
                        ck_assert_msg(strstr(text, d == 0 ? man_key : md_key) != NULL,
                                      "key %s not documented in %s", k, docs[d]);
                        nkeys = i + 1;
                }
                free(text);
        }
        ck_assert_uint_eq(nkeys, 24);
        ck_assert_ptr_null(mpi_pstate_plugstack_key(nkeys));
}
END_TEST

static Suite *config_suite(void)
{
        Suite *s = suite_create("config");
        TCase *tc = tcase_create("parse");

        tcase_add_test(tc, builtin_defaults);
        tcase_add_test(tc, every_key_applies);
        tcase_add_test(tc, bad_keys_reported_and_ignored);
        tcase_add_test(tc, new_keys_refuse_what_they_cannot_use);
        tcase_add_test(tc, agent_user_never_root);
        tcase_add_test(tc, hostile_values_do_not_leak_into_messages);
        tcase_add_test(tc, long_path_refused);
        tcase_add_test(tc, last_key_wins_and_none);
        tcase_add_test(tc, contradicting_pairs_dropped);
        tcase_add_test(tc, defaults_brought_within_limits);
        suite_add_tcase(s, tc);

        tc = tcase_create("limits");
        tcase_add_test(tc, limit_user_values);
        tcase_add_test(tc, allow_off_default_yes);
        suite_add_tcase(s, tc);

        tc = tcase_create("docs");
        tcase_add_test(tc, every_key_documented);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(config_suite(), false);
}
