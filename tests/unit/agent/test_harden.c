/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's hardening (agent/harden.c) against what an exploited agent
 * would try, with the agent's own code: once hardened, writing or creating
 * a file outside its fence (/etc/passwd, a root file, another policy's
 * sysfs), chmod, removing, renaming or linking files, signalling a foreign
 * process, opening a socket and exec all fail, in the main thread and in a
 * thread started by the hardening; and the job still works: lower, raise
 * and restore on a fake sysfs, and the agent's record written.
 *
 * Hardening cannot be undone, so each case hardens a child of its own and
 * the child's exit status is the number of hostile actions that worked (each
 * named on stderr).  Under qemu-user (MPI_PSTATE_TEST_EMULATED) neither
 * seccomp nor Landlock exists: only the job's cycle is checked there. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentd.h"
#include "cpufreq.h"
#include "fakesys.h"
#include "restore.h"
#include "safeio.h"
#include "check_main.h"
#include "shortcuts.h"

#define POL0 FAKESYS_CPU "/cpufreq/policy0"
#define POL1 FAKESYS_CPU "/cpufreq/policy1"

static struct fakesys fs;
static struct mpi_pstate_cpufreq_node *node;
static char restore_dir[400], step_dir[400], outside[400], victim[400];
static const struct mpi_pstate_restore_owner job42 = {42, 0};
static struct agentd_hardening hard;
static pthread_t thread;
static int thread_failures = -1;
static int go[2];

static void setup(void)
{
        char err[256] = "";

        fakesys_init(&fs);
        fakesys_acpi_cpufreq(&fs, 2);
        fakesys_mkdirs(&fs, "run/restore");
        fakesys_mkdirs(&fs, "run/steps/42.0/sub");
        fakesys_put(&fs, "outside/victim", 0644, "root's\n");
        fakesys_mkdirs(&fs, "outside/empty");
        fakesys_path(&fs, "run/restore", restore_dir, sizeof(restore_dir));
        fakesys_path(&fs, "run/steps/42.0", step_dir, sizeof(step_dir));
        fakesys_path(&fs, "outside", outside, sizeof(outside));
        fakesys_path(&fs, "outside/victim", victim, sizeof(victim));
        ck_assert_int_eq(mpi_pstate_cpufreq_discover(fs.root, &node, err, sizeof(err)), 0);
}

static void teardown(void)
{
        mpi_pstate_cpufreq_free(node);
        node = NULL;
        fakesys_cleanup(&fs);
}

static bool emulated(void)
{
        return getenv("MPI_PSTATE_TEST_EMULATED") != NULL;
}

/* 1 when an action that must fail worked. */
static int worked(bool ok, const char *what)
{
        if (ok)
                fprintf(stderr, "hardened, and still: %s\n", what);
        return ok;
}

static int open_works(const char *path, int flags)
{
        int fd = open(path, flags | O_CLOEXEC | O_NOCTTY, 0644);

        if (fd < 0)
                return 0;
        close(fd); /* never a byte written */
        return 1;
}

static int status_field(const char *path, const char *field, char *out, size_t len)
{
        char buf[4096];
        const char *p;

        if (mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0) < 0 ||
            !(p = strstr(buf, field)))
                return -1;
        p += strlen(field);
        while (*p == '\t' || *p == ' ')
                p++;
        snprintf(out, len, "%.*s", (int)strcspn(p, "\n"), p);
        return 0;
}

/* The file system actions, in whichever thread calls it. */
static int hostile_files(void)
{
        char path[600];
        int n = 0, fd;

        if (hard.landlock_rc == 0) {
                n += worked(open_works(victim, O_WRONLY | O_APPEND), "opened a foreign file for "
                                                                     "writing");
                n += worked(open_works("/etc/passwd", O_WRONLY | O_APPEND),
                            "opened /etc/passwd for writing");
                n += worked(open_works(victim, O_RDONLY | O_TRUNC), "truncated a foreign file");
                snprintf(path, sizeof(path), "%s/new", outside);
                n += worked(open_works(path, O_WRONLY | O_CREAT | O_EXCL), "created a file");
                n += worked(mkdir(path, 0700) == 0, "made a directory");
                n += worked(symlink("/etc/passwd", path) == 0, "made a symlink");
                n += worked(link(victim, path) == 0, "hard-linked a foreign file");
                n += worked(rename(victim, path) == 0, "renamed a foreign file");
                n += worked(unlink(victim) == 0, "removed a foreign file");
                snprintf(path, sizeof(path), "%s/%s/scaling_max_freq", fs.root, POL1);
                n += worked(mpi_pstate_safeio_write_attr(AT_FDCWD, path, "1200000") == 0,
                            "wrote the sysfs of a domain not its own");
        } else {
                fprintf(stderr, "no Landlock (%s): file checks skipped\n", hard.landlock);
        }
        fd = open(victim, O_RDONLY | O_CLOEXEC);
        n += worked(fd >= 0 && fchmod(fd, 0666) == 0, "fchmod of a foreign file");
        if (fd >= 0)
                close(fd);
        n += worked(chmod(victim, 0666) == 0, "chmod of a foreign file");
        n += worked(fchmodat(AT_FDCWD, victim, 0666, 0) == 0, "fchmodat of a foreign file");
        n += worked(chown(victim, 65534, 65534) == 0, "chown of a foreign file");
        snprintf(path, sizeof(path), "%s/empty", outside);
        n += worked(rmdir(path) == 0, "removed a directory");
        snprintf(path, sizeof(path), "%s/sub", step_dir);
        n += worked(unlinkat(AT_FDCWD, path, AT_REMOVEDIR) == 0, "removed a directory it may "
                                                                 "write in");
        return n;
}

static void *thread_main(void *arg)
{
        char path[128], v[64];
        char c;
        int n = 0;

        (void)arg;
        /* Wait for the seccomp filter (TSYNC) before probing. */
        if (read(go[0], &c, 1) != 1)
                return NULL;
        /* Under qemu-user nothing is confined: the actions would work, and
         * change the files the parent checks afterwards. */
        if (emulated()) {
                thread_failures = 0;
                return NULL;
        }
        snprintf(path, sizeof(path), "/proc/self/task/%ld/status", (long)syscall(SYS_gettid));
        n += worked(status_field(path, "CapEff:", v, sizeof(v)) != 0 ||
                        strcmp(v, "0000000000000000") != 0,
                    "the thread kept a capability");
        n += worked(status_field(path, "Seccomp:", v, sizeof(v)) != 0 || strcmp(v, "2") != 0,
                    "the thread has no seccomp filter");
        n += hostile_files();
        thread_failures = n;
        return NULL;
}

static int spawn(void *arg)
{
        (void)arg;
        return pthread_create(&thread, NULL, thread_main, NULL);
}

static void harden(void)
{
        const struct agentd_fence fence[] = {
            {node->policies[0].dir, AGENTD_FENCE_WRITE},
            {restore_dir, AGENTD_FENCE_FILES},
            {step_dir, AGENTD_FENCE_FILES},
            {"/nonexistent/mpi-pstate", AGENTD_FENCE_FILES},
        };

        ck_assert_int_eq(pipe(go), 0);
        ck_assert_int_eq(mpi_pstate_agentd_harden(fence, sizeof(fence) / sizeof(fence[0]), NULL,
                                                  spawn, NULL, &hard),
                         0);
}

static int hostile(pid_t foreign)
{
        char v[64];
        int n = 0;

        if (emulated())
                return 0;
        n += worked(hard.caps_rc != 0, "capabilities kept");
        n += worked(hard.seccomp_rc != 0, "no seccomp filter");
        n += worked(status_field("/proc/self/status", "CapEff:", v, sizeof(v)) != 0 ||
                        strcmp(v, "0000000000000000") != 0,
                    "the main thread kept a capability");
        n += worked(status_field("/proc/self/status", "NoNewPrivs:", v, sizeof(v)) != 0 ||
                        strcmp(v, "1") != 0,
                    "no no_new_privs");
        n += hostile_files();
        n += worked(kill(foreign, SIGTERM) == 0, "signalled a foreign process");
        n += worked(syscall(SYS_tgkill, foreign, foreign, SIGTERM) == 0,
                    "tgkill to a foreign process");
        n += worked(kill(foreign, 0) == 0, "kill(pid, 0) of a foreign process: a pid oracle");
        n += worked(socket(AF_INET, SOCK_STREAM, 0) >= 0, "opened a TCP socket");
        n += worked(socket(AF_UNIX, SOCK_STREAM, 0) >= 0, "opened a Unix socket");
        /* A working exec would end this child: with 1, counted as a failure. */
        execl("/bin/false", "false", (char *)NULL);
        n += worked(setuid(65534) == 0 && setuid(0) == 0, "changed uid and back");
        return n;
}

static int run_child(int (*body)(pid_t), pid_t foreign)
{
        int n = body(foreign);
        char c = 'g';

        if (write(go[1], &c, 1) != 1 || pthread_join(thread, NULL) != 0)
                return 100;
        if (!emulated())
                n += thread_failures < 0 ? 50 : thread_failures;
        return n;
}

static void in_hardened_child(int (*body)(pid_t))
{
        pid_t foreign, child;
        int st;

        /* A foreign process: not the hardened one, not its thread. */
        foreign = fork();
        ck_assert_int_ge(foreign, 0);
        if (foreign == 0) {
                pause();
                _exit(0);
        }
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                harden();
                _exit(run_child(body, foreign));
        }
        ck_assert_int_eq(waitpid(child, &st, 0), child);
        ck_assert_int_eq(waitpid(foreign, NULL, WNOHANG), 0); /* still there */
        kill(foreign, SIGKILL);
        waitpid(foreign, NULL, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "%d hostile action(s) worked after hardening (named above)",
                      WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
}

START_TEST(hostile_actions_fail)
{
        struct stat st;
        char buf[64];

        in_hardened_child(hostile);
        /* Nothing outside the fence changed. */
        ck_assert_int_eq(stat(victim, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0644);
        ck_assert_str_eq(fakesys_get(&fs, "outside/victim", buf, sizeof(buf)), "root's");
        ck_assert_uint_eq(fakesys_get_ul(&fs, POL1 "/scaling_max_freq"), 3000000);
}
END_TEST

static struct mpi_pstate_cpufreq_domain dom;

/* Lower, raise, restore, record: what the agent does after hardening. */
static int job_cycle(pid_t foreign)
{
        char err[256] = "", buf[64];
        int n = 0, dfd;

        (void)foreign;
        n += worked(mpi_pstate_cpufreq_domain_lower(&dom) != 0, "lowering failed");
        n += worked(fakesys_get_ul(&fs, POL0 "/scaling_max_freq") != 1200000, "not lowered");
        n += worked(mpi_pstate_cpufreq_domain_raise(&dom) != 0, "raising failed");
        n += worked(fakesys_get_ul(&fs, POL0 "/scaling_max_freq") != 3000000, "not raised");
        mpi_pstate_cpufreq_domain_lower(&dom);
        mpi_pstate_cpufreq_domain_close(&dom);
        n += worked(mpi_pstate_restore_policy(restore_dir, fs.root, "policy0", &job42, 0, err,
                                              sizeof(err)) != 1,
                    "restore failed");
        if (err[0])
                fprintf(stderr, "restore: %s\n", err);
        n += worked(fakesys_get_ul(&fs, POL0 "/scaling_max_freq") != 3000000, "not restored");
        dfd = mpi_pstate_safeio_open_dir(step_dir, 1, 0755);
        n += worked(dfd < 0 || mpi_pstate_safeio_write_atomic(dfd, "agent.json", "{}\n", 3, 0644,
                                                              MPI_PSTATE_SAFEIO_NOSYNC) != 0,
                    "writing the record failed");
        if (dfd >= 0)
                close(dfd);
        (void)buf;
        return n;
}

START_TEST(job_still_works)
{
        char err[256] = "", path[600];
        struct stat st;

        ck_assert_int_eq(
            mpi_pstate_restore_save(restore_dir, &node->policies[0], &job42, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_cpufreq_domain_prepare(&dom, &node->policies[0],
                                                           MPI_PSTATE_CPUFREQ_MECH_MAXFREQ, 1200000,
                                                           3000000, err, sizeof(err)),
                         0);
        in_hardened_child(job_cycle);
        mpi_pstate_cpufreq_domain_close(&dom);
        ck_assert_uint_eq(fakesys_get_ul(&fs, POL0 "/scaling_max_freq"), 3000000);
        snprintf(path, sizeof(path), "%s/policy0", restore_dir);
        ck_assert_int_eq(stat(path, &st), -1); /* the record went with the restore */
        snprintf(path, sizeof(path), "%s/agent.json", step_dir);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0644);
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("harden");
        TCase *tc = tcase_create("adversarial");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, hostile_actions_fail);
        tcase_add_test(tc, job_still_works);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(suite(), true);
}
