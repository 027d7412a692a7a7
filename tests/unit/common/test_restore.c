/* SPDX-License-Identifier: BSD-3-Clause */
/* Save/restore records and the hostile-safe IO under them: round trips,
 * ownership, restore order, idempotence, the backstop, and records a user
 * could have planted (symlink, oversize, garbage, wrong owner). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpufreq.h"
#include "fakesys.h"
#include "restore.h"
#include "safeio.h"
#include "check_main.h"
#include "shortcuts.h"

#define NOBODY 65534
#define POL0 FAKESYS_CPU "/cpufreq/policy0"

static struct fakesys fs;
static struct mpi_pstate_cpufreq_node *node;
static char dir[400], err[256];
static const struct mpi_pstate_restore_owner job42 = {42, 0};

static void setup(void)
{
        fakesys_init(&fs);
        fakesys_acpi_cpufreq(&fs, 3);
        snprintf(dir, sizeof(dir), "%s/run/mpi-pstate/42", fs.root);
        err[0] = '\0';
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), 0);
}

static void teardown(void)
{
        mpi_pstate_cpufreq_free(node);
        node = NULL;
        fakesys_cleanup(&fs);
}

static const struct mpi_pstate_cpufreq_policy *pol(unsigned i)
{
        return &node->policies[i];
}

static void record_path(const char *name, char *out, size_t len)
{
        snprintf(out, len, "%s/%s", dir, name);
}

static void put_record(const char *name, const char *text)
{
        char rel[256];

        snprintf(rel, sizeof(rel), "run/mpi-pstate/42/%s", name);
        fakesys_put(&fs, rel, 0600, "%s", text);
}

static void make_dir(void)
{
        int fd = mpi_pstate_safeio_open_dir(dir, 1, 0700);

        ck_assert_int_ge(fd, 0);
        close(fd);
}

static struct mpi_pstate_cpufreq_settings S(const char *gov, uint32_t min, uint32_t max,
                                            uint32_t sp) {
        struct mpi_pstate_cpufreq_settings s = {.min_khz = min, .max_khz = max, .setspeed_khz = sp};

        snprintf(s.governor, sizeof(s.governor), "%s", gov);
        return s;
}

static void
change(unsigned i, const char *gov, uint32_t min, uint32_t max, uint32_t sp)
{
        struct mpi_pstate_cpufreq_settings t = S(gov, min, max, sp);

        ck_assert_int_eq(mpi_pstate_cpufreq_apply(pol(i), &t, err, sizeof(err)), 0);
}

static void expect(unsigned i, const char *gov, uint32_t min, uint32_t max)
{
        struct mpi_pstate_cpufreq_settings now;

        ck_assert_int_eq(mpi_pstate_cpufreq_read_settings(pol(i), &now), 0);
        ck_assert_str_eq(now.governor, gov);
        ck_assert_uint_eq(now.min_khz, min);
        ck_assert_uint_eq(now.max_khz, max);
}

static const char good[] = "version=1\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\n"
                           "governor=performance\nmin_khz=1200000\nmax_khz=3000000\n"
                           "setspeed_khz=0\n";

START_TEST(format_parse_round_trip)
{
        struct mpi_pstate_restore_record r = {0}, back;
        char text[MPI_PSTATE_RESTORE_MAX_BYTES];
        int n;

        r.owner.job_id = 4294967295u;
        r.owner.step_id = 0xfffffffbu; /* Slurm's batch step */
        snprintf(r.policy, sizeof(r.policy), "policy12");
        snprintf(r.driver, sizeof(r.driver), "intel_cpufreq");
        r.saved = S("userspace", 800000, 4200000, 2100000);
        n = mpi_pstate_restore_format(&r, text, sizeof(text));
        ck_assert_int_gt(n, 0);
        ck_assert_uint_eq(strlen(text), (size_t)n);
        ck_assert_int_lt(n, MPI_PSTATE_RESTORE_MAX_BYTES);
        /* The reader strips the final newline before parsing. */
        text[n - 1] = '\0';
        ck_assert_int_eq(mpi_pstate_restore_parse(text, &back), 0);
        ck_assert_uint_eq(back.version, 1);
        ck_assert_uint_eq(back.owner.job_id, 4294967295u);
        ck_assert_uint_eq(back.owner.step_id, 0xfffffffbu);
        ck_assert_str_eq(back.policy, "policy12");
        ck_assert_str_eq(back.driver, "intel_cpufreq");
        ck_assert_str_eq(back.saved.governor, "userspace");
        ck_assert_uint_eq(back.saved.min_khz, 800000);
        ck_assert_uint_eq(back.saved.max_khz, 4200000);
        ck_assert_uint_eq(back.saved.setspeed_khz, 2100000);
        ck_assert_int_eq(mpi_pstate_restore_format(&r, text, 20), -ENOSPC);
        snprintf(r.policy, sizeof(r.policy), "../etc");
        ck_assert_int_eq(mpi_pstate_restore_format(&r, text, sizeof(text)), -EINVAL);
}
END_TEST

/* Each entry breaks one rule of the format. */
static const char *const bad_records[] = {
    "",
    "version=2\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\njob=042\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\njob= 42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\njob=4294967296\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\n"
    "governor=performance\nmin_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\njob=42\npolicy=policy0\nstep=0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\njob=42\nstep=0\npolicy=../../etc\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\njob=42\nstep=0\npolicy=policy0\ndriver=acpi cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=3000000\nmax_khz=1200000\nsetspeed_khz=0",
    "version=1\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=0\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=1200000",
    "version=1\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=userspace\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0\nextra=1",
    "version=1\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000",
    "version=1\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1.2GHz\nmax_khz=3000000\nsetspeed_khz=0",
    "version=1\r\njob=42\nstep=0\npolicy=policy0\ndriver=acpi-cpufreq\ngovernor=performance\n"
    "min_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0",
};

START_TEST(parse_rejects)
{
        struct mpi_pstate_restore_record r;

        memset(&r, 0x5a, sizeof(r));
        ck_assert_msg(mpi_pstate_restore_parse(bad_records[_i], &r) == -EINVAL, "accepted #%d", _i);
        ck_assert_uint_eq(r.owner.job_id, 0x5a5a5a5au); /* untouched */
}
END_TEST

START_TEST(parse_accepts_good)
{
        struct mpi_pstate_restore_record r;
        char text[sizeof(good)];

        memcpy(text, good, sizeof(good));
        text[strlen(text) - 1] = '\0';
        ck_assert_int_eq(mpi_pstate_restore_parse(text, &r), 0);
        ck_assert_str_eq(r.policy, "policy0");
}
END_TEST

START_TEST(save_then_restore)
{
        struct mpi_pstate_restore_record r;
        char path[600];
        struct stat st;

        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        record_path("policy0", path, sizeof(path));
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_uint_eq(st.st_mode & 07777, 0600);
        ck_assert_uint_eq(st.st_uid, 0);
        ck_assert_int_eq(stat(dir, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert_int_eq(mpi_pstate_restore_load(dir, "policy0", &r), 0);
        ck_assert_str_eq(r.saved.governor, "performance");
        ck_assert_uint_eq(r.saved.max_khz, 3000000);
        ck_assert_str_eq(r.driver, "acpi-cpufreq");

        change(0, "userspace", 1200000, 1800000, 1200000);
        expect(0, "userspace", 1200000, 1800000);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", &job42, 0, err, sizeof(err)), 1);
        expect(0, "performance", 1200000, 3000000);
        ck_assert_int_eq(lstat(path, &st), -1);
        ck_assert_int_eq(errno, ENOENT);
        /* Idempotent: a second pass finds nothing to do and changes nothing. */
        change(0, "powersave", 1200000, 3000000, 0);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", &job42, 0, err, sizeof(err)), 0);
        expect(0, "powersave", 1200000, 3000000);
}
END_TEST

START_TEST(save_userspace_keeps_setspeed)
{
        struct mpi_pstate_restore_record r;

        change(1, "userspace", 1200000, 3000000, 1800000);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(1), &job42, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_restore_load(dir, "policy1", &r), 0);
        ck_assert_uint_eq(r.saved.setspeed_khz, 1800000);
        change(1, "userspace", 1200000, 3000000, 1200000);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy1", &job42, 0, err, sizeof(err)), 1);
        ck_assert_uint_eq(fakesys_get_ul(&fs, FAKESYS_CPU "/cpufreq/policy1/scaling_setspeed"),
                          1800000);
}
END_TEST

START_TEST(second_save_keeps_the_original)
{
        struct mpi_pstate_restore_record r;
        const struct mpi_pstate_restore_owner step1 = {42, 1}, other = {7, 0};

        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        change(0, "powersave", 1200000, 1800000, 0);
        /* Same owner again (agent restarted): the record of the true original stays. */
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_restore_load(dir, "policy0", &r), 0);
        ck_assert_str_eq(r.saved.governor, "performance");
        ck_assert_uint_eq(r.saved.max_khz, 3000000);
        /* Another step or job may not take over a domain that is still changed. */
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &step1, err, sizeof(err)), -EBUSY);
        ck_assert_msg(strstr(err, "job 42 step 0"), "err: %s", err);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &other, err, sizeof(err)), -EBUSY);
        ck_assert_int_eq(mpi_pstate_restore_load(dir, "policy0", &r), 0);
        ck_assert_uint_eq(r.owner.step_id, 0);
}
END_TEST

/* An existing record settles a save before sysfs is read: the agent saves
 * what the plugin saved a moment before, and a busy domain needs no read. */
START_TEST(existing_record_settles_save_without_reading)
{
        struct mpi_pstate_restore_record r;
        const struct mpi_pstate_restore_owner other = {7, 0};
        char path[600];

        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        fakesys_path(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_governor", path, sizeof(path));
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &other, err, sizeof(err)), -EBUSY);
        ck_assert_int_eq(mpi_pstate_restore_load(dir, "policy0", &r), 0);
        ck_assert_str_eq(r.saved.governor, "performance");
        /* Without a record the settings are read, and the missing file says so. */
        record_path("policy0", path, sizeof(path));
        ck_assert_int_eq(unlink(path), 0);
        err[0] = '\0';
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), -ENOENT);
        ck_assert_msg(strstr(err, "reading settings"), "err: %s", err);
        ck_assert_int_eq(mpi_pstate_restore_load(dir, "policy0", &r), -ENOENT);
}
END_TEST

START_TEST(restore_only_by_owner)
{
        const struct mpi_pstate_restore_owner step1 = {42, 1}, other = {7, 0};
        struct mpi_pstate_restore_record r;

        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        change(0, "powersave", 1200000, 1800000, 0);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", &other, 0, err, sizeof(err)),
            -EPERM);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", &step1, 0, err, sizeof(err)),
            -EPERM);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", NULL, 0, err, sizeof(err)), -EPERM);
        expect(0, "powersave", 1200000, 1800000);
        ck_assert_int_eq(mpi_pstate_restore_load(dir, "policy0", &r), 0);
        /* The node epilog of job 42 matches any of its steps. */
        ck_assert_int_eq(mpi_pstate_restore_policy(dir, fs.root, "policy0", &step1,
                                                   MPI_PSTATE_RESTORE_ANY_STEP, err, sizeof(err)),
                         1);
        expect(0, "performance", 1200000, 3000000);
        /* An admin pass takes whatever is there. */
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(1), &other, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_restore_policy(dir, fs.root, "policy1", NULL,
                                                   MPI_PSTATE_RESTORE_ANY_OWNER, err, sizeof(err)),
                         1);
}
END_TEST

/* Checks that the modification events of the policy directory contain the
 * given files in this order. */
static void expect_order(const char *log, const char *const *files, unsigned n)
{
        const char *at = log;

        for (unsigned i = 0; i < n; i++) {
                char want[64];
                const char *hit;

                snprintf(want, sizeof(want), "modify %s\n", files[i]);
                hit = strstr(at, want);
                ck_assert_msg(hit, "'%s' missing or out of order in:\n%s", files[i], log);
                at = hit + strlen(want);
        }
}

START_TEST(restore_order_raising)
{
        static const char *const order[] = {"scaling_max_freq", "scaling_min_freq",
                                            "scaling_governor"};
        char log[2048];
        int ifd;

        /* Saved [2.4, 3.0] performance; the job ran [1.2, 1.8] userspace: going back
         * up must raise the maximum before the minimum, then switch the governor. */
        change(0, "performance", 2400000, 3000000, 0);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        change(0, "userspace", 1200000, 1800000, 1200000);
        ifd = fakesys_watch(&fs, POL0);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", &job42, 0, err, sizeof(err)), 1);
        fakesys_events(ifd, log, sizeof(log));
        expect_order(log, order, 3);
        ck_assert_ptr_null(strstr(log, "modify scaling_setspeed"));
        expect(0, "performance", 2400000, 3000000);
        close(ifd);
}
END_TEST

START_TEST(restore_order_lowering)
{
        static const char *const order[] = {"scaling_min_freq", "scaling_max_freq",
                                            "scaling_governor", "scaling_setspeed"};
        char log[2048];
        int ifd;

        /* Saved [1.2, 1.8] userspace at 1.2; the job ran [2.4, 3.0] performance. */
        change(0, "userspace", 1200000, 1800000, 1200000);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        change(0, "performance", 2400000, 3000000, 0);
        ifd = fakesys_watch(&fs, POL0);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", &job42, 0, err, sizeof(err)), 1);
        fakesys_events(ifd, log, sizeof(log));
        expect_order(log, order, 4);
        expect(0, "userspace", 1200000, 1800000);
        ck_assert_uint_eq(fakesys_get_ul(&fs, POL0 "/scaling_setspeed"), 1200000);
        close(ifd);
}
END_TEST

START_TEST(restore_after_domain_clamp)
{
        struct mpi_pstate_cpufreq_domain d;

        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(2), &job42, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&d, pol(2),
                                                           MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, 1200000,
                                                           3000000, err, sizeof(err)),
                         0);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_lower(&d), 0);
        /* The rank died while clocked down: the step's restore brings the core back. */
        mpi_pstate_cpufreq_domain_close(&d);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy2", &job42, 0, err, sizeof(err)), 1);
        expect(2, "performance", 1200000, 3000000);
}
END_TEST

START_TEST(restore_keeps_record_when_write_fails)
{
        char path[600];

        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        change(0, "powersave", 1200000, 1800000, 0);
        /* The policy vanished (CPU offline): nothing restored, the record stays for later. */
        snprintf(path, sizeof(path), "%s/" POL0 "/scaling_max_freq", fs.root);
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_lt(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", &job42, 0, err, sizeof(err)), 0);
        record_path("policy0", path, sizeof(path));
        ck_assert_int_eq(access(path, F_OK), 0);
}
END_TEST

/* intel_pstate's status written between save and restore: the driver came
 * back as intel_cpufreq with its defaults, so the saved acpi-cpufreq values
 * are not written into it, and the record does not block the domain. */
START_TEST(restore_drops_a_record_of_another_driver)
{
        struct mpi_pstate_restore_summary sum;
        char path[600];

        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(1), &job42, err, sizeof(err)), 0);
        change(0, "powersave", 1200000, 1800000, 0);
        change(1, "powersave", 1200000, 1800000, 0);
        fakesys_put(&fs, POL0 "/scaling_driver", 0444, "intel_cpufreq\n");
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", &job42, 0, err, sizeof(err)),
            -ESTALE);
        ck_assert_msg(strstr(err, "made under driver acpi-cpufreq") && strstr(err, "intel_cpufreq"),
                      "err: %s", err);
        expect(0, "powersave", 1200000, 1800000);
        record_path("policy0", path, sizeof(path));
        ck_assert_int_eq(access(path, F_OK), -1);
        /* Saved again, the backstop counts it failed, puts the other domain back, and
         * a second pass finds nothing left. */
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job42, 0, &sum, err, sizeof(err)),
                         -ESTALE);
        ck_assert_uint_eq(sum.restored, 1);
        ck_assert_uint_eq(sum.failed, 1);
        ck_assert_str_eq(sum.first_name, "policy0");
        expect(1, "performance", 1200000, 3000000);
        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job42, 0, &sum, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(sum.failed + sum.restored + sum.foreign, 0);
}
END_TEST

/* The hostile cases: each leaves the sysfs state and the planted file alone. */
static void expect_refused(const char *name, int want)
{
        int rc;

        change(0, "powersave", 1200000, 1800000, 0);
        rc = mpi_pstate_restore_policy(dir, fs.root, name, &job42, MPI_PSTATE_RESTORE_ANY_STEP, err,
                                       sizeof(err));
        ck_assert_msg(rc == want, "%s: got %d want %d (%s)", name, rc, want, err);
        expect(0, "powersave", 1200000, 1800000);
}

START_TEST(hostile_symlink)
{
        char path[600], target[600];

        make_dir();
        snprintf(target, sizeof(target), "%s/elsewhere", fs.root);
        fakesys_put(&fs, "elsewhere", 0600, "%s", good);
        record_path("policy0", path, sizeof(path));
        ck_assert_int_eq(symlink(target, path), 0);
        expect_refused("policy0", -ELOOP);
        ck_assert_int_eq(access(path, F_OK), 0);
}
END_TEST

START_TEST(hostile_oversize)
{
        char big[2048];

        make_dir();
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        memcpy(big, good, strlen(good));
        put_record("policy0", big);
        expect_refused("policy0", -EFBIG);
}
END_TEST

START_TEST(hostile_garbage)
{
        make_dir();
        put_record("policy0", "version=1\njob=42\nrm -rf /\n");
        expect_refused("policy0", -EINVAL);
        fakesys_put(&fs, "run/mpi-pstate/42/policy0", 0600, "version=1%cjob=42\n", 0);
        expect_refused("policy0", -EILSEQ);
}
END_TEST

START_TEST(hostile_wrong_owner)
{
        char path[600];
        int fd;

        make_dir();
        put_record("policy0", good);
        record_path("policy0", path, sizeof(path));
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fchown(fd, NOBODY, NOBODY), 0);
        close(fd);
        expect_refused("policy0", -EPERM);
        /* Root-owned but writable by others is no better. */
        ck_assert_int_eq(chown(path, 0, 0), 0);
        ck_assert_int_eq(chmod(path, 0666), 0);
        expect_refused("policy0", -EPERM);
}
END_TEST

START_TEST(hostile_renamed_record)
{
        make_dir();
        /* A valid record of policy0 under the name of policy1. */
        put_record("policy1", good);
        expect_refused("policy1", -EINVAL);
}
END_TEST

START_TEST(hostile_fifo_and_dir)
{
        char path[600];

        make_dir();
        record_path("policy0", path, sizeof(path));
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        expect_refused("policy0", -EINVAL); /* and no hang in open() */
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        expect_refused("policy0", -EINVAL);
        expect_refused("../42/policy0", -EINVAL);
}
END_TEST

START_TEST(hostile_directory)
{
        char link[sizeof(dir)], real[sizeof(dir)];

        make_dir();
        put_record("policy0", good);
        /* Directory owned by a user: nothing in it is trusted. */
        ck_assert_int_eq(chown(dir, NOBODY, NOBODY), 0);
        expect_refused("policy0", -EPERM);
        ck_assert_int_eq(chown(dir, 0, 0), 0);
        ck_assert_int_eq(chmod(dir, 0770), 0);
        expect_refused("policy0", -EPERM);
        ck_assert_int_eq(chmod(dir, 0700), 0);
        /* Directory reached through a symlink. */
        snprintf(real, sizeof(real), "%s", dir);
        snprintf(link, sizeof(link), "%s/run/mpi-pstate/43", fs.root);
        ck_assert_int_eq(symlink(real, link), 0);
        snprintf(dir, sizeof(dir), "%s", link);
        expect_refused("policy0", -ELOOP);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), -ELOOP);
        snprintf(dir, sizeof(dir), "%s", real);
        /* Save refuses to build on a record it cannot trust. */
        put_record("policy0", "garbage");
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "cannot be trusted"), "err: %s", err);
}
END_TEST

/* A record names its owner in its own text; who may write the directory
 * is root alone, but the step's end still applies a record only to the
 * domains of the CPUs root gave the step: one naming this step for a CPU
 * of another job (forged, or left by a bug) is left, and that job's
 * settings stay. */
START_TEST(step_end_applies_records_only_within_its_cpus)
{
        struct mpi_pstate_restore_summary sum;
        cpu_set_t step;
        char path[600];

        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        /* policy1 is another job's, running at performance/3.0 GHz; a record
         * with this step's name says powersave/1.2 GHz */
        change(1, "powersave", 1200000, 1200000, 0);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(1), &job42, err, sizeof(err)), 0);
        change(1, "performance", 1200000, 3000000, 0);
        change(0, "powersave", 1200000, 1800000, 0);
        CPU_ZERO(&step);
        CPU_SET(0, &step);
        ck_assert_int_eq(
            mpi_pstate_restore_all_within(dir, fs.root, &job42, 0, &step, &sum, err, sizeof(err)),
            0);
        ck_assert_uint_eq(sum.restored, 1);
        ck_assert_uint_eq(sum.foreign, 1);
        expect(0, "performance", 1200000, 3000000);
        expect(1, "performance", 1200000, 3000000); /* untouched */
        record_path("policy1", path, sizeof(path));
        ck_assert_int_eq(access(path, F_OK), 0);
        /* An empty set applies nothing; NULL is restore_all(). */
        CPU_ZERO(&step);
        ck_assert_int_eq(
            mpi_pstate_restore_all_within(dir, fs.root, &job42, 0, &step, &sum, err, sizeof(err)),
            0);
        ck_assert_uint_eq(sum.restored, 0);
        expect(1, "performance", 1200000, 3000000);
}
END_TEST

START_TEST(backstop_restores_all_of_the_job)
{
        const struct mpi_pstate_restore_owner step1 = {42, 1}, other = {7, 0};
        struct mpi_pstate_restore_summary sum;
        char path[600];

        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(0), &job42, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(1), &step1, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, pol(2), &other, err, sizeof(err)), 0);
        change(0, "powersave", 1200000, 1800000, 0);
        change(1, "userspace", 1200000, 2400000, 1200000);
        change(2, "ondemand", 1800000, 3000000, 0);
        put_record(".tmp.policy0.999.0", "half written");
        put_record("policy9", "garbage");

        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job42, MPI_PSTATE_RESTORE_ANY_STEP,
                                                &sum, err, sizeof(err)),
                         -EINVAL);
        ck_assert_uint_eq(sum.restored, 2);
        ck_assert_uint_eq(sum.foreign, 1);
        ck_assert_uint_eq(sum.failed, 1);
        ck_assert_int_eq(sum.first_error, -EINVAL);
        ck_assert_str_eq(sum.first_name, "policy9");
        ck_assert_msg(strstr(err, "policy9"), "err: %s", err);
        expect(0, "performance", 1200000, 3000000);
        expect(1, "performance", 1200000, 3000000);
        expect(2, "ondemand", 1800000, 3000000);
        record_path(".tmp.policy0.999.0", path, sizeof(path));
        ck_assert_int_eq(access(path, F_OK), -1);
        record_path("policy2", path, sizeof(path));
        ck_assert_int_eq(access(path, F_OK), 0);

        /* Second pass: nothing left of job 42, so only the garbage fails again. */
        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job42, MPI_PSTATE_RESTORE_ANY_STEP,
                                                &sum, err, sizeof(err)),
                         -EINVAL);
        ck_assert_uint_eq(sum.restored, 0);
        ck_assert_int_eq(unlink(path), 0);
        record_path("policy9", path, sizeof(path));
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job42, 0, &sum, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(sum.failed + sum.restored + sum.foreign, 0);
        /* No directory at all: nothing was ever saved. */
        snprintf(dir, sizeof(dir), "%s/run/mpi-pstate/none", fs.root);
        ck_assert_int_eq(mpi_pstate_restore_all(dir, fs.root, &job42, 0, &sum, err, sizeof(err)),
                         0);
        ck_assert_int_eq(
            mpi_pstate_restore_policy(dir, fs.root, "policy0", &job42, 0, err, sizeof(err)), 0);
}
END_TEST

START_TEST(shared_domain_one_record)
{
        struct mpi_pstate_cpufreq_node *shared = NULL;
        struct mpi_pstate_restore_record r;

        fakesys_cleanup(&fs);
        fakesys_init(&fs);
        snprintf(dir, sizeof(dir), "%s/run/mpi-pstate/42", fs.root);
        fakesys_shared_policy(&fs);
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &shared, err, sizeof(err)), 0);
        /* Ranks on CPUs 1 and 3 share policy0: one record, saved once. */
        ck_assert_int_eq(mpi_pstate_restore_save(dir, mpi_pstate_cpufreq_policy_of(shared, 1),
                                                 &job42, err, sizeof(err)),
                         0);
        ck_assert_int_eq(mpi_pstate_restore_save(dir, mpi_pstate_cpufreq_policy_of(shared, 3),
                                                 &job42, err, sizeof(err)),
                         0);
        ck_assert_int_eq(mpi_pstate_restore_load(dir, "policy0", &r), 0);
        ck_assert_int_eq(mpi_pstate_restore_load(dir, "policy1", &r), -ENOENT);
        mpi_pstate_cpufreq_free(shared);
}
END_TEST

/* ---- safeio ---- */

START_TEST(safeio_read_bounds)
{
        char buf[8];
        char path[600];

        fakesys_put(&fs, "f", 0644, "1234567");
        snprintf(path, sizeof(path), "%s/f", fs.root);
        ck_assert_int_eq(mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0), 7);
        ck_assert_str_eq(buf, "1234567");
        fakesys_put(&fs, "f", 0644, "12345678");
        ck_assert_int_eq(mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0),
                         -EFBIG);
        ck_assert_str_eq(buf, "");
        fakesys_put(&fs, "f", 0644, "12\n\n");
        ck_assert_int_eq(mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0), 2);
        ck_assert_str_eq(buf, "12");
        fakesys_put(&fs, "f", 0644, "1%c2\n", 0);
        ck_assert_int_eq(mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0),
                         -EILSEQ);
        fakesys_put(&fs, "f", 0644, "12");
        ck_assert_int_eq(mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf),
                                                      MPI_PSTATE_SAFEIO_OWNED, NOBODY),
                         -EPERM);
        ck_assert_int_eq(mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf),
                                                      MPI_PSTATE_SAFEIO_OWNED, 0),
                         2);
        ck_assert_int_eq(chmod(path, 0664), 0);
        ck_assert_int_eq(mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf),
                                                      MPI_PSTATE_SAFEIO_OWNED, 0),
                         -EPERM);
        /* Owned files are also judged by st_size, before any read. */
        fakesys_put(&fs, "f", 0600, "12345678");
        ck_assert_int_eq(mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf),
                                                      MPI_PSTATE_SAFEIO_OWNED, 0),
                         -EFBIG);
}
END_TEST

START_TEST(safeio_atomic_write)
{
        char buf[64], path[600];
        int dfd;

        make_dir();
        dfd = mpi_pstate_safeio_open_dir(dir, 0, 0);
        ck_assert_int_ge(dfd, 0);
        ck_assert_int_eq(mpi_pstate_safeio_write_atomic(dfd, "rec", "one\n", 4, 0600, 1), 0);
        ck_assert_int_eq(mpi_pstate_safeio_write_atomic(dfd, "rec", "two\n", 4, 0600, 1), -EEXIST);
        ck_assert_int_eq(
            mpi_pstate_safeio_read_small(dfd, "rec", buf, sizeof(buf), MPI_PSTATE_SAFEIO_OWNED, 0),
            3);
        ck_assert_str_eq(buf, "one");
        ck_assert_int_eq(mpi_pstate_safeio_write_atomic(dfd, "rec", "two\n", 4, 0600, 0), 0);
        ck_assert_int_eq(
            mpi_pstate_safeio_read_small(dfd, "rec", buf, sizeof(buf), MPI_PSTATE_SAFEIO_OWNED, 0),
            3);
        ck_assert_str_eq(buf, "two");
        ck_assert_int_eq(mpi_pstate_safeio_write_atomic(dfd, "../rec", "x", 1, 0600, 0), -EINVAL);
        /* Without fsync: the same atomic replacement and the same refusal. */
        ck_assert_int_eq(mpi_pstate_safeio_write_atomic(dfd, "rec", "three\n", 6, 0600,
                                                        MPI_PSTATE_SAFEIO_NOSYNC),
                         0);
        ck_assert_int_eq(
            mpi_pstate_safeio_write_atomic(dfd, "rec", "four\n", 5, 0600,
                                           MPI_PSTATE_SAFEIO_NOSYNC | MPI_PSTATE_SAFEIO_NOREPLACE),
            -EEXIST);
        ck_assert_int_eq(
            mpi_pstate_safeio_read_small(dfd, "rec", buf, sizeof(buf), MPI_PSTATE_SAFEIO_OWNED, 0),
            5);
        ck_assert_str_eq(buf, "three");
        close(dfd);
        /* No temporary file left behind. */
        snprintf(path, sizeof(path), "%s", dir);
        {
                DIR *d = opendir(path);
                struct dirent *de;
                int n = 0;

                ck_assert_ptr_nonnull(d);
                while ((de = readdir(d)))
                        n += de->d_name[0] != '.';
                closedir(d);
                ck_assert_int_eq(n, 1);
        }
}
END_TEST

START_TEST(safeio_open_dir_rules)
{
        char path[600];
        int fd;

        snprintf(path, sizeof(path), "%s/a/b/c", fs.root);
        ck_assert_int_eq(mpi_pstate_safeio_open_dir(path, 0, 0), -ENOENT);
        fd = mpi_pstate_safeio_open_dir(path, 1, 0700);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(mpi_pstate_safeio_open_dir("relative/path", 1, 0700), -EINVAL);
        snprintf(path, sizeof(path), "%s/a/../a/b", fs.root);
        ck_assert_int_eq(mpi_pstate_safeio_open_dir(path, 0, 0), -EINVAL);
        /* A user-owned parent could swap what lies below it. */
        snprintf(path, sizeof(path), "%s/a", fs.root);
        ck_assert_int_eq(chown(path, NOBODY, NOBODY), 0);
        snprintf(path, sizeof(path), "%s/a/b/c", fs.root);
        ck_assert_int_eq(mpi_pstate_safeio_open_dir(path, 0, 0), -EPERM);
        snprintf(path, sizeof(path), "%s/a", fs.root);
        ck_assert_int_eq(chown(path, 0, 0), 0);
        /* World-writable parent: only with the sticky bit. */
        ck_assert_int_eq(chmod(path, 0777), 0);
        snprintf(path, sizeof(path), "%s/a/b/c", fs.root);
        ck_assert_int_eq(mpi_pstate_safeio_open_dir(path, 0, 0), -EPERM);
        snprintf(path, sizeof(path), "%s/a", fs.root);
        ck_assert_int_eq(chmod(path, 01777), 0);
        snprintf(path, sizeof(path), "%s/a/b/c", fs.root);
        fd = mpi_pstate_safeio_open_dir(path, 0, 0);
        ck_assert_int_ge(fd, 0);
        close(fd);
}
END_TEST

static Suite *restore_suite(void)
{
        Suite *s = suite_create("restore");
        TCase *tc = tcase_create("record");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, format_parse_round_trip);
        tcase_add_loop_test(tc, parse_rejects, 0, sizeof(bad_records) / sizeof(bad_records[0]));
        tcase_add_test(tc, parse_accepts_good);
        suite_add_tcase(s, tc);

        tc = tcase_create("save_restore");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, save_then_restore);
        tcase_add_test(tc, save_userspace_keeps_setspeed);
        tcase_add_test(tc, second_save_keeps_the_original);
        tcase_add_test(tc, existing_record_settles_save_without_reading);
        tcase_add_test(tc, restore_only_by_owner);
        tcase_add_test(tc, restore_order_raising);
        tcase_add_test(tc, restore_order_lowering);
        tcase_add_test(tc, restore_after_domain_clamp);
        tcase_add_test(tc, restore_keeps_record_when_write_fails);
        tcase_add_test(tc, restore_drops_a_record_of_another_driver);
        tcase_add_test(tc, backstop_restores_all_of_the_job);
        tcase_add_test(tc, step_end_applies_records_only_within_its_cpus);
        tcase_add_test(tc, shared_domain_one_record);
        suite_add_tcase(s, tc);

        tc = tcase_create("hostile");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, hostile_symlink);
        tcase_add_test(tc, hostile_oversize);
        tcase_add_test(tc, hostile_garbage);
        tcase_add_test(tc, hostile_wrong_owner);
        tcase_add_test(tc, hostile_renamed_record);
        tcase_add_test(tc, hostile_fifo_and_dir);
        tcase_add_test(tc, hostile_directory);
        suite_add_tcase(s, tc);

        tc = tcase_create("safeio");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, safeio_read_bounds);
        tcase_add_test(tc, safeio_atomic_write);
        tcase_add_test(tc, safeio_open_dir_rules);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        /* Records must be root-owned and the hostile cases chown(): as a user
         * only the pure record cases can run. */
        if (geteuid() != 0) {
                printf("test_restore: not root, running the record cases only\n");
                setenv("CK_RUN_CASE", "record", 1);
        }
        return mpi_pstate_check_main(restore_suite(), false);
}
