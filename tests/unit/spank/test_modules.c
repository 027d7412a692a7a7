/* SPDX-License-Identifier: BSD-3-Clause */
/* The Slurm-free modules behind the plugin's hooks: paths (%h, step names),
 * the LD_PRELOAD value, launcher detection, the agent's command line and
 * its start/stop, the step record, the per-step cpufreq policy on fake sysfs
 * trees and the pinning adapter on hwloc XML topologies. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentctl.h"
#include "container.h"
#include "fakesys.h"
#include "launch.h"
#include "paths.h"
#include "pinning.h"
#include "policy.h"
#include "steprec.h"
#include "steptime.h"
#include "check_main.h"

/* ---- paths */

START_TEST(expand_host_escape)
{
        char out[64];

        ck_assert_int_eq(mpi_pstate_paths_expand("/r/%h/run", "n1", out, sizeof(out)), 0);
        ck_assert_str_eq(out, "/r/n1/run");
        ck_assert_int_eq(mpi_pstate_paths_expand("/r/100%%/%h%h", "a_b-9", out, sizeof(out)), 0);
        ck_assert_str_eq(out, "/r/100%/a_b-9a_b-9");
        ck_assert_int_eq(mpi_pstate_paths_expand("/run/mpi-pstate", NULL, out, sizeof(out)), 0);
        ck_assert_str_eq(out, "/run/mpi-pstate");
        /* Anything that is not a plain name never becomes a path component. */
        ck_assert_int_eq(mpi_pstate_paths_expand("/r/%h", "../etc", out, sizeof(out)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_paths_expand("/r/%h", "a/b", out, sizeof(out)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_paths_expand("/r/%h", "", out, sizeof(out)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_paths_expand("/r/%h", NULL, out, sizeof(out)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_paths_expand("/r/%n", "n1", out, sizeof(out)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_paths_expand("/r/%", "n1", out, sizeof(out)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_paths_expand("/a-rather-long/%h", "n1", out, 12),
                         -ENAMETOOLONG);
}
END_TEST

START_TEST(step_paths_and_names)
{
        struct mpi_pstate_paths p;
        char host[64], num[16];

        ck_assert_int_eq(mpi_pstate_paths_step("/r/%h", "n2", 42, 3, &p), 0);
        ck_assert_str_eq(p.runtime, "/r/n2");
        ck_assert_str_eq(p.restore, "/r/n2/restore");
        ck_assert_str_eq(p.steps, "/r/n2/steps");
        ck_assert_str_eq(p.step, "/r/n2/steps/42.3");
        ck_assert_str_eq(p.shm, "/dev/shm/mpi-pstate.42.3");
        ck_assert_str_eq(p.pidfile, "/r/n2/steps/42.3/agent.pid");
        ck_assert_str_eq(p.record, "/r/n2/steps/42.3/agent.json");
        ck_assert_str_eq(p.log, "/r/n2/steps/42.3/agent.log");
        ck_assert_int_eq(mpi_pstate_paths_step("/r", "n2", 7, 0xfffffffbu, &p), 0);
        ck_assert_str_eq(p.shm, "/dev/shm/mpi-pstate.7.batch");
        /* The random suffix: appended once, replaced (not stacked) on a retry. */
        ck_assert_int_eq(mpi_pstate_paths_shm_unique(&p, UINT64_C(0x9f1c2b3a4d5e6f70)), 0);
        ck_assert_str_eq(p.shm, "/dev/shm/mpi-pstate.7.batch.9f1c2b3a4d5e6f70");
        ck_assert_int_eq(mpi_pstate_paths_shm_unique(&p, 1), 0);
        ck_assert_str_eq(p.shm, "/dev/shm/mpi-pstate.7.batch.0000000000000001");
        ck_assert_str_eq(mpi_pstate_paths_step_name(0xfffffffcu, num, sizeof(num)), "extern");
        ck_assert_str_eq(mpi_pstate_paths_step_name(0xfffffffau, num, sizeof(num)), "interactive");
        ck_assert_str_eq(mpi_pstate_paths_step_name(4294967, num, sizeof(num)), "4294967");
        ck_assert_int_eq(mpi_pstate_paths_host(host, sizeof(host)), 0);
        ck_assert(strlen(host) > 0 && !strchr(host, '.') && !strchr(host, '/'));
}
END_TEST

/* ---- LD_PRELOAD and launchers */

START_TEST(preload_prepended_user_entries_kept)
{
        char out[256];

        ck_assert_int_eq(mpi_pstate_launch_preload("/l/f.so", NULL, out, sizeof(out)), 7);
        ck_assert_str_eq(out, "/l/f.so");
        ck_assert_int_eq(mpi_pstate_launch_preload("/l/f.so", "", out, sizeof(out)), 7);
        mpi_pstate_launch_preload("/l/f.so", "/u/a.so", out, sizeof(out));
        ck_assert_str_eq(out, "/l/f.so:/u/a.so");
        /* ld.so takes blanks and colons; order kept, our copy not doubled. */
        mpi_pstate_launch_preload("/l/f.so", " /u/a.so:/l/f.so  b.so:\t:c.so ", out, sizeof(out));
        ck_assert_str_eq(out, "/l/f.so:/u/a.so:b.so:c.so");
        mpi_pstate_launch_preload("/l/f.so", "/l/f.so", out, sizeof(out));
        ck_assert_str_eq(out, "/l/f.so");
        /* A name that only starts like ours is someone else's. */
        mpi_pstate_launch_preload("/l/f.so", "/l/f.so.1", out, sizeof(out));
        ck_assert_str_eq(out, "/l/f.so:/l/f.so.1");
        ck_assert_int_eq(mpi_pstate_launch_preload("/l/f.so", "/u/a.so", out, 12), -ENOSPC);
        ck_assert_int_eq(mpi_pstate_launch_preload("/l/a b.so", NULL, out, sizeof(out)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_launch_preload("/l:x.so", NULL, out, sizeof(out)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_launch_preload("", NULL, out, sizeof(out)), -EINVAL);
}
END_TEST

START_TEST(launcher_daemons)
{
        ck_assert(mpi_pstate_launch_is_daemon("orted"));
        ck_assert(mpi_pstate_launch_is_daemon("/usr/bin/orted"));
        ck_assert(mpi_pstate_launch_is_daemon("prted"));
        ck_assert(mpi_pstate_launch_is_daemon("/usr/bin/hydra_pmi_proxy"));
        ck_assert(mpi_pstate_launch_is_daemon("pmi_proxy"));
        ck_assert(!mpi_pstate_launch_is_daemon("./solver"));
        ck_assert(!mpi_pstate_launch_is_daemon("/usr/bin/orted2"));
        ck_assert(!mpi_pstate_launch_is_daemon("/opt/orted/bin/solver"));
        ck_assert(!mpi_pstate_launch_is_daemon(""));
        ck_assert(!mpi_pstate_launch_is_daemon(NULL));
}
END_TEST

/* ---- the agent's command line, start and stop */

static struct mpi_pstate_agent_args base_args(void)
{
        struct mpi_pstate_agent_args a;

        mpi_pstate_agentctl_args_init(&a);
        a.path = "/sbin/mpi-pstate-agent";
        a.foreground = a.keep_shm = true;
        a.shm = "/dev/shm/mpi-pstate.9.1";
        a.cpulist = "0-3";
        a.mech = MPI_PSTATE_CPUFREQ_MECH_SETSPEED;
        a.runtime_dir = "/run/mp/restore";
        a.record = "/run/mp/steps/9.1/agent.json";
        a.log = "/run/mp/steps/9.1/agent.log";
        a.job = 9;
        a.step = 1;
        a.uid = 1001;
        a.gid = 1002;
        a.opt = (struct mpi_pstate_options){.mode = MPI_PSTATE_MODE_ON,
                                            .threshold_us = 2000,
                                            .low_khz = MPI_PSTATE_FREQ_MIN,
                                            .governor = MPI_PSTATE_GOVERNOR_KEEP,
                                            .bind = MPI_PSTATE_BIND_CORES};
        return a;
}

static void joined(char **argv, char *out, size_t len)
{
        size_t o = 0;

        out[0] = '\0';
        for (int i = 0; argv[i]; i++)
                o += (size_t)snprintf(out + o, len - o, "%s%s", i ? " " : "", argv[i]);
}

/* The plugin writes the agent's command line from its table
 * (common/agent_args.def): the entries it always passes, the others only
 * when they are not the agent's own default, then the job's options. */
START_TEST(agent_argv)
{
        struct mpi_pstate_agent_args a = base_args();
        char *argv[MPI_PSTATE_AGENT_MAX_ARGS], buf[1024], line[2048];
        int n = mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);

        ck_assert_int_eq(n, 33);
        ck_assert_ptr_null(argv[n]);
        joined(argv, line, sizeof(line));
        ck_assert_str_eq(line, "/sbin/mpi-pstate-agent --shm /dev/shm/mpi-pstate.9.1 --cpus 0-3 "
                               "--job 9 --step 1 --uid 1001 --gid 1002 --mechanism setspeed "
                               "--runtime-dir /run/mp/restore --record "
                               "/run/mp/steps/9.1/agent.json --log /run/mp/steps/9.1/agent.log "
                               "--foreground --keep-shm --mpi-pstate on --mpi-pstate-threshold "
                               "2000 --mpi-pstate-low min --mpi-pstate-governor keep "
                               "--mpi-pstate-bind cores");
        a.nslots = 4;
        ck_assert_int_eq(
            mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS), 35);
        joined(argv, line, sizeof(line));
        ck_assert_ptr_nonnull(strstr(line, "--shm /dev/shm/mpi-pstate.9.1 --nslots 4 --cpus"));
        a.nslots = 0;
        /* the agent reads the percentage back to the millionth; its own
         * default (0.5) is not written, off (0) is */
        a.budget_ppm = 12345;
        n = mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);
        joined(argv, line, sizeof(line));
        ck_assert_ptr_nonnull(strstr(line, " --cpu-budget 1.2345 "));
        a.budget_ppm = 0;
        n = mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);
        joined(argv, line, sizeof(line));
        ck_assert_ptr_nonnull(strstr(line, " --cpu-budget 0.0000 "));
        a.opt.low_khz = 1500000;
        a.freq_min_khz = 1200000;
        a.log = NULL;
        a.step = 0xfffffffbu;
        a.sysroot = "/tmp/fakesys";
        n = mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);
        joined(argv, line, sizeof(line));
        ck_assert_ptr_nonnull(strstr(line, " --mpi-pstate-low 1500000 "));
        ck_assert_ptr_nonnull(strstr(line, " --freq-min 1200000 "));
        ck_assert_ptr_nonnull(strstr(line, " --step 4294967291 "));
        ck_assert_ptr_nonnull(strstr(line, " --sysroot /tmp/fakesys "));
        ck_assert_ptr_null(strstr(line, "--log"));
        ck_assert_ptr_null(strstr(line, "--uncore"));
        ck_assert_ptr_null(strstr(line, "--run-uid"));
        /* never the entries the plugin does not pass (mpi-pstate exec's --create) */
        a.create = 8;
        a.rt_prio = 0;
        n = mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);
        joined(argv, line, sizeof(line));
        ck_assert_ptr_null(strstr(line, "--create"));
        ck_assert_ptr_null(strstr(line, "--rt-prio"));
        /* uncore=yes reaches the agent; a threshold other than its default too */
        a.uncore = true;
        a.uncore_threshold_us = 20000;
        a.opt.low_khz = MPI_PSTATE_FREQ_EFFICIENT;
        a.run_uid = a.run_gid = 990;
        n = mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);
        joined(argv, line, sizeof(line));
        ck_assert_ptr_nonnull(strstr(line, " --uncore yes --uncore-threshold 20000us"));
        ck_assert_ptr_nonnull(strstr(line, " --mpi-pstate-low efficient"));
        ck_assert_ptr_nonnull(strstr(line, " --run-uid 990 --run-gid 990 "));
        /* every entry the plugin may pass at once still fits (a full command
         * line once overflowed argv, and the step ran without its agent) */
        a.log = "/run/mp/steps/9.1/agent.log";
        a.allow_governor = false;
        a.nslots = 4096;
        n = mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);
        ck_assert_int_gt(n, 0);
        joined(argv, line, sizeof(line));
        ck_assert_ptr_nonnull(strstr(line, " --allow-governor no "));
        ck_assert_int_eq(mpi_pstate_agentctl_argv(&a, buf, 8, argv, MPI_PSTATE_AGENT_MAX_ARGS),
                         -ENOSPC);
        ck_assert_int_eq(mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, 10), -ENOSPC);
        /* an entry it always passes, missing: refused, never a partial line */
        a.record = NULL;
        ck_assert_int_eq(
            mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS),
            -EINVAL);
}
END_TEST

static char adir[256];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
        (void)st;
        (void)f;
        return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void adir_teardown(void)
{
        if (adir[0])
                nftw(adir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
        adir[0] = '\0';
}

static void adir_setup(void)
{
        snprintf(adir, sizeof(adir), "/tmp/mpi-pstate-agentctl.XXXXXX");
        ck_assert(mkdtemp(adir) != NULL);
        ck_assert_int_eq(chmod(adir, 0700), 0);
        atexit(adir_teardown);
}

/* A stand-in agent: a shell loop, or one that ignores SIGTERM. */
static void fake_agent(const char *path, int ignore_term)
{
        FILE *f = fopen(path, "w");

        ck_assert_ptr_nonnull(f);
        /* $0.ready once the trap is set: a TERM sent before would kill it. */
        fprintf(f, "#!/bin/sh\n%s\n: >\"$0.ready\"\nwhile :; do sleep 0.02; done\n",
                ignore_term ? "trap '' TERM" : "trap 'exit 0' TERM");
        fclose(f);
        ck_assert_int_eq(chmod(path, 0755), 0);
}

static bool alive(pid_t pid)
{
        char path[64], buf[256];
        FILE *f;
        char *rp;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "r");
        if (!f)
                return false;
        buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
        fclose(f);
        rp = strrchr(buf, ')');
        return rp && rp[2] != 'Z';
}

START_TEST(agent_start_detached_and_stopped)
{
        struct mpi_pstate_agent_args a = base_args();
        char path[512], record[512], ready[520], err[256] = "";
        pid_t pid = 0;

        snprintf(path, sizeof(path), "%s/agent", adir);
        snprintf(record, sizeof(record), "%s/agent.json", adir);
        fake_agent(path, _i);
        a.path = path;
        a.record = record;
        ck_assert_int_eq(mpi_pstate_agentctl_start(&a, &pid, err, sizeof(err)), 0);
        ck_assert_int_gt(pid, 1);
        /* Not our child: slurmstepd's waitpid(-1) must never see it. */
        ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), -1);
        ck_assert_int_eq(errno, ECHILD);
        for (int i = 0; i < 100 && !mpi_pstate_agentctl_is_ours(pid, record); i++)
                usleep(10000);
        ck_assert(mpi_pstate_agentctl_is_ours(pid, record));
        ck_assert(!mpi_pstate_agentctl_is_ours(pid, "/other/agent.json"));
        ck_assert(!mpi_pstate_agentctl_is_ours(getpid(), record));
        ck_assert(!mpi_pstate_agentctl_is_ours(1, record));
        snprintf(ready, sizeof(ready), "%s.ready", path);
        for (int i = 0; i < 1000 && access(ready, F_OK) != 0; i++)
                usleep(10000);
        /* Signals blocked or ignored in the caller do not reach the agent. */
        ck_assert_int_eq(mpi_pstate_agentctl_stop(pid, record, 300), _i ? 2 : 1);
        for (int i = 0; i < 100 && alive(pid); i++)
                usleep(10000);
        ck_assert(!alive(pid));
        ck_assert_int_eq(mpi_pstate_agentctl_stop(pid, record, 300), 0);
}
END_TEST

/* The plugin's path: a pidfd taken at start.  Stopping at once, before the
 * agent may even have exec'd (its command line still the caller's), still
 * stops that very process; a second stop finds it gone. */
START_TEST(agent_stop_by_pidfd)
{
        struct mpi_pstate_agent_args a = base_args();
        char path[512], record[512], err[256] = "";
        pid_t pid = 0;
        int fd;

        snprintf(path, sizeof(path), "%s/agent", adir);
        snprintf(record, sizeof(record), "%s/agent.json", adir);
        fake_agent(path, _i);
        a.path = path;
        a.record = record;
        ck_assert_int_eq(mpi_pstate_agentctl_start(&a, &pid, err, sizeof(err)), 0);
        fd = mpi_pstate_agentctl_pidfd(pid);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(mpi_pstate_agentctl_pidfd(1), -EINVAL); /* never init */
        ck_assert(mpi_pstate_agentctl_pidfd_is(fd, pid));
        ck_assert(!mpi_pstate_agentctl_pidfd_is(fd, pid + 1));
        ck_assert(!mpi_pstate_agentctl_pidfd_is(fd, pid * 10)); /* "Pid:\t123" is not 1230's */
        if (_i) /* ignores SIGTERM: only once its trap is set, or SIGTERM kills it */
                for (int i = 0; i < 100 && !mpi_pstate_agentctl_is_ours(pid, record); i++)
                        usleep(10000);
        if (_i)
                usleep(100000);
        ck_assert_int_eq(mpi_pstate_agentctl_stop_pidfd(fd, 300), _i ? 2 : 1);
        ck_assert(!alive(pid));
        ck_assert_int_eq(mpi_pstate_agentctl_stop_pidfd(fd, 300), 0);
        close(fd);
}
END_TEST

/* The pidfd's number closed by someone else and reused for a file (a
 * regular file polls "readable": it read as "the agent had exited"). */
START_TEST(pidfd_number_reused)
{
        char path[512];
        pid_t pid = getpid();
        int fd = mpi_pstate_agentctl_pidfd(pid), file;

        ck_assert_int_ge(fd, 0);
        ck_assert(mpi_pstate_agentctl_pidfd_is(fd, pid));
        close(fd);
        snprintf(path, sizeof(path), "%s/plain", adir);
        file = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_eq(file, fd); /* the lowest free number: the same */
        ck_assert(!mpi_pstate_agentctl_pidfd_is(file, pid));
        close(file);
        ck_assert(!mpi_pstate_agentctl_pidfd_is(fd, pid)); /* closed */
        ck_assert(!mpi_pstate_agentctl_pidfd_is(-1, pid));
}
END_TEST

START_TEST(agent_start_blocked_signals)
{
        struct mpi_pstate_agent_args a = base_args();
        char path[512], record[512], err[256] = "";
        struct sigaction ign = {.sa_handler = SIG_IGN};
        sigset_t all;
        pid_t pid = 0;

        /* slurmstepd's state when it calls the hook. */
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, NULL);
        sigaction(SIGTERM, &ign, NULL);
        snprintf(path, sizeof(path), "%s/agent", adir);
        snprintf(record, sizeof(record), "%s/agent.json", adir);
        fake_agent(path, 0);
        a.path = path;
        a.record = record;
        ck_assert_int_eq(mpi_pstate_agentctl_start(&a, &pid, err, sizeof(err)), 0);
        for (int i = 0; i < 100 && !mpi_pstate_agentctl_is_ours(pid, record); i++)
                usleep(10000);
        ck_assert_int_eq(mpi_pstate_agentctl_stop(pid, record, 2000), 1);
}
END_TEST

START_TEST(agent_missing_or_not_executable)
{
        struct mpi_pstate_agent_args a = base_args();
        char path[512], err[256] = "";
        pid_t pid = 0;

        snprintf(path, sizeof(path), "%s/none", adir);
        a.path = path;
        ck_assert_int_eq(mpi_pstate_agentctl_start(&a, &pid, err, sizeof(err)), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err, "none"));
        fake_agent(path, 0);
        ck_assert_int_eq(chmod(path, 0644), 0);
        ck_assert_int_eq(mpi_pstate_agentctl_start(&a, &pid, err, sizeof(err)), -EACCES);
        ck_assert_int_eq(pid, 0);
}
END_TEST

/* agent= and preload= are run as root / loaded into every rank: only a file
 * and directories nobody but root can change are used. */
START_TEST(trusted_paths)
{
        char dir[] = "/tmp/test_trusted.XXXXXX", sub[64], file[96], link[96], err[256];
        int fd;

        if (geteuid() != 0)
                return; /* ownership by root is the point */
        ck_assert(mkdtemp(dir) != NULL);
        snprintf(sub, sizeof(sub), "%s/d", dir);
        snprintf(file, sizeof(file), "%s/agent", sub);
        snprintf(link, sizeof(link), "%s/link", dir);
        ck_assert_int_eq(mkdir(sub, 0755), 0);
        fd = open(file, O_CREAT | O_WRONLY, 0755);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(mpi_pstate_agentctl_trusted(file, err, sizeof(err)), 0);
        ck_assert_int_eq(chmod(file, 0757), 0);
        ck_assert_int_eq(mpi_pstate_agentctl_trusted(file, err, sizeof(err)), -EPERM);
        ck_assert_ptr_nonnull(strstr(err, "writable by everybody"));
        ck_assert_int_eq(chmod(file, 0755), 0);
        ck_assert_int_eq(chown(file, 1000, 0), 0);
        ck_assert_int_eq(mpi_pstate_agentctl_trusted(file, err, sizeof(err)), -EPERM);
        ck_assert_ptr_nonnull(strstr(err, "not root"));
        ck_assert_int_eq(chown(file, 0, 0), 0);
        /* a directory others may write (no sticky bit), reached through a link */
        ck_assert_int_eq(chmod(sub, 0777), 0);
        ck_assert_int_eq(symlink(file, link), 0);
        ck_assert_int_eq(mpi_pstate_agentctl_trusted(link, err, sizeof(err)), -EPERM);
        ck_assert_int_eq(chmod(sub, 01777), 0); /* sticky: root's entries stay root's */
        ck_assert_int_eq(mpi_pstate_agentctl_trusted(link, err, sizeof(err)), 0);
        ck_assert_int_eq(mpi_pstate_agentctl_trusted("relative", err, sizeof(err)), -EINVAL);
        unlink(link);
        unlink(file);
        rmdir(sub);
        rmdir(dir);
}
END_TEST

START_TEST(pidfile_round_trip_and_hostile)
{
        char path[512];
        pid_t pid = 0;
        FILE *f;

        ck_assert_int_eq(mpi_pstate_agentctl_write_pidfile(adir, "agent.pid", 4242), 0);
        ck_assert_int_eq(mpi_pstate_agentctl_read_pidfile(adir, "agent.pid", &pid), 0);
        ck_assert_int_eq(pid, 4242);
        snprintf(path, sizeof(path), "%s/bad.pid", adir);
        f = fopen(path, "w");
        fputs("12 13\n", f);
        fclose(f);
        chmod(path, 0600);
        ck_assert_int_eq(mpi_pstate_agentctl_read_pidfile(adir, "bad.pid", &pid), -EINVAL);
        ck_assert_int_eq(pid, 4242);
        /* A pid file someone else could have written is not believed. */
        ck_assert_int_eq(chmod(path, 0666), 0);
        ck_assert_int_eq(mpi_pstate_agentctl_read_pidfile(adir, "bad.pid", &pid), -EPERM);
        snprintf(path, sizeof(path), "%s/link.pid", adir);
        ck_assert_int_eq(symlink("agent.pid", path), 0);
        ck_assert_int_eq(mpi_pstate_agentctl_read_pidfile(adir, "link.pid", &pid), -ELOOP);
        ck_assert_int_eq(mpi_pstate_agentctl_read_pidfile(adir, "none.pid", &pid), -ENOENT);
}
END_TEST

/* ---- step record */

START_TEST(cpulist_format)
{
        cpu_set_t s;
        char buf[64];

        CPU_ZERO(&s);
        ck_assert_int_eq(mpi_pstate_steprec_cpulist(&s, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "");
        for (int c = 0; c < 4; c++)
                CPU_SET(c, &s);
        CPU_SET(8, &s);
        CPU_SET(10, &s);
        CPU_SET(11, &s);
        CPU_SET(1023, &s);
        ck_assert_int_eq(mpi_pstate_steprec_cpulist(&s, buf, sizeof(buf)), 16);
        ck_assert_str_eq(buf, "0-3,8,10-11,1023");
        ck_assert_int_eq(mpi_pstate_steprec_cpulist(&s, buf, 6), -ENOSPC);
}
END_TEST

START_TEST(step_record_format)
{
        struct mpi_pstate_policy_domain d[2] = {
            {.name = "policy0",
             .status = MPI_PSTATE_POLICY_SET,
             .target = {.governor = "userspace", .min_khz = 1200000, .max_khz = 3000000}},
            {.name = "policy2",
             .status = MPI_PSTATE_POLICY_SHARED,
             .target = {.governor = "performance"}},
        };
        struct mpi_pstate_policy_result pol = {
            .driver = "acpi-cpufreq", .ndomains = 2, .domains = d};
        struct mpi_pstate_steprec r = {
            .job = 5,
            .step = 0,
            .node = "n\"1",
            .mode = "on",
            .cpus = "0-1",
            .governor = "keep",
            .mechanism = "setspeed",
            .agent = "started",
            .agent_pid = 77,
            .policy = &pol,
        };
        char buf[2048];

        CPU_SET(0, &d[0].cpus);
        CPU_SET(2, &d[1].cpus);
        CPU_SET(3, &d[1].cpus);
        ck_assert_int_gt(mpi_pstate_steprec_format(&r, buf, sizeof(buf)), 0);
        ck_assert_str_eq(
            buf, "{\"version\":2,\"job\":5,\"step\":0,\"node\":\"n\\\"1\",\"mode\":\"on\","
                 "\"launcher\":false,\"cpus\":\"0-1\",\"governor\":\"keep\",\"mechanism\":"
                 "\"setspeed\",\"driver\":\"acpi-cpufreq\",\"preload\":null,\"container\":null,"
                 "\"unmeasured\":null,\"shm\":null,"
                 "\"segments\":[],\"agent\":{\"status\":\"started\",\"pid\":77},\"domains\":[{"
                 "\"policy\":"
                 "\"policy0\",\"cpus\":\"0\",\"status\":\"set\",\"governor\":\"userspace\","
                 "\"min_khz\":1200000,\"max_khz\":3000000},{\"policy\":\"policy2\",\"cpus\":"
                 "\"2-3\",\"status\":\"shared\",\"governor\":\"performance\",\"min_khz\":0,"
                 "\"max_khz\":0}],\"restore\":{\"state\":\"pending\",\"restored\":0,"
                 "\"foreign\":0,\"failed\":0}}\n");
        r.policy = NULL;
        r.ended = true;
        r.restored = 2;
        ck_assert_int_gt(mpi_pstate_steprec_format(&r, buf, sizeof(buf)), 0);
        ck_assert_ptr_nonnull(strstr(buf, "\"driver\":null"));
        ck_assert_ptr_nonnull(strstr(buf, "\"domains\":[]"));
        ck_assert_ptr_nonnull(strstr(buf, "{\"state\":\"done\",\"restored\":2"));
        ck_assert_int_eq(mpi_pstate_steprec_format(&r, buf, 100), -ENOSPC);
        /* Every CPU left alone for want of a cpuset: the record says why. */
        r.left_alone = "no cpuset file and other jobs run on the node";
        ck_assert_int_gt(mpi_pstate_steprec_format(&r, buf, sizeof(buf)), 0);
        ck_assert_ptr_nonnull(strstr(buf, "\"unmeasured\":null,\"left_alone\":\"no cpuset file "
                                          "and other jobs run on the node\",\"shm\":null"));
        r.left_alone = NULL;
        /* The segment as the plugin made it: what the epilog trusts. */
        r.shm = "/dev/shm/mpi-pstate.5.0.00000000000000ff";
        r.shm_dev = 45;
        r.shm_ino = 123456;
        r.shm_nslots = 4;
        r.shm_uid = 1000;
        ck_assert_int_gt(mpi_pstate_steprec_format(&r, buf, sizeof(buf)), 0);
        ck_assert_ptr_nonnull(
            strstr(buf, "\"shm\":\"/dev/shm/mpi-pstate.5.0.00000000000000ff\",\"segments\":[{"
                        "\"name\":\"mpi-pstate.5.0.00000000000000ff\",\"dir\":\"/dev/shm\","
                        "\"dev\":45,\"ino\":123456,\"nslots\":4,\"bytes\":69632,\"uid\":1000}]"));
}
END_TEST

/* ---- per-step policy on fake sysfs trees */

static struct fakesys fs;
static char rdir[600];

static void pol_setup(void)
{
        fakesys_init(&fs);
        snprintf(rdir, sizeof(rdir), "%s/restore", fs.root);
}

static void pol_teardown(void)
{
        fakesys_cleanup(&fs);
}

static cpu_set_t cpus_of(unsigned from, unsigned to)
{
        cpu_set_t s;

        CPU_ZERO(&s);
        for (unsigned c = from; c <= to; c++)
                CPU_SET(c, &s);
        return s;
}

static const char *val(unsigned pol, const char *attr)
{
        static char buf[8][64];
        static int k;
        char rel[128];

        snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpufreq/policy%u/%s", pol, attr);
        k = (k + 1) % 8;
        return fakesys_get(&fs, rel, buf[k], sizeof(buf[k]));
}

static bool record_exists(const char *name)
{
        char path[700];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", rdir, name);
        return lstat(path, &st) == 0;
}

static struct mpi_pstate_policy_req req_for(const cpu_set_t *cpus, bool change, const char *gov)
{
        return (struct mpi_pstate_policy_req){.sysroot = fs.root,
                                              .restore_dir = rdir,
                                              .owner = {77, 1},
                                              .cpus = cpus,
                                              .change = change,
                                              .governor = gov,
                                              .mechanism = MPI_PSTATE_CPUFREQ_MECH_AUTO};
}

START_TEST(policy_sets_only_the_steps_domains)
{
        cpu_set_t cpus = cpus_of(0, 1);
        struct mpi_pstate_policy_req q = req_for(&cpus, true, "powersave");
        struct mpi_pstate_policy_result r;
        struct mpi_pstate_restore_summary sum;
        char err[256];

        fakesys_acpi_cpufreq(&fs, 4);
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.ndomains, 2);
        ck_assert_uint_eq(r.set, 2);
        ck_assert_str_eq(r.driver, "acpi-cpufreq");
        ck_assert_int_eq(r.mech, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        ck_assert_str_eq(r.domains[0].name, "policy0");
        ck_assert_str_eq(r.domains[1].target.governor, "powersave");
        ck_assert_str_eq(val(0, "scaling_governor"), "powersave");
        ck_assert_str_eq(val(1, "scaling_governor"), "powersave");
        ck_assert_str_eq(val(2, "scaling_governor"), "performance");
        ck_assert(record_exists("policy0") && record_exists("policy1"));
        ck_assert(!record_exists("policy2"));
        mpi_pstate_policy_result_free(&r);
        ck_assert_int_eq(mpi_pstate_restore_all(rdir, fs.root, &q.owner, 0, &sum, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(sum.restored, 2);
        ck_assert_str_eq(val(0, "scaling_governor"), "performance");
        ck_assert_str_eq(val(1, "scaling_governor"), "performance");
}
END_TEST

/* Governor keep and mechanism auto on acpi-cpufreq: setspeed, so userspace
 * at the top frequency; intel_pstate: max_freq, governor untouched. */
START_TEST(policy_mechanism_follows_the_driver)
{
        cpu_set_t cpus = cpus_of(0, 0);
        struct mpi_pstate_policy_req q = req_for(&cpus, true, NULL);
        struct mpi_pstate_policy_result r;
        char err[256];

        if (_i == 0)
                fakesys_acpi_cpufreq(&fs, 2);
        else
                fakesys_intel_pstate_hwp(&fs, 2);
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.set, 1);
        if (_i == 0) {
                ck_assert_int_eq(r.mech, MPI_PSTATE_CPUFREQ_MECH_SETSPEED);
                ck_assert_str_eq(val(0, "scaling_governor"), "userspace");
                ck_assert_str_eq(val(0, "scaling_setspeed"), "3000000");
        } else {
                ck_assert_int_eq(r.mech, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
                ck_assert_str_eq(val(0, "scaling_governor"), "powersave");
                ck_assert_str_eq(val(0, "scaling_max_freq"), "4200000");
        }
        ck_assert_str_eq(val(1, "scaling_governor"), _i == 0 ? "performance" : "powersave");
        mpi_pstate_policy_result_free(&r);
}
END_TEST

/* In slurmstepd: save before Slurm applies --cpu-freq (nothing written),
 * then set over Slurm's setting, which wins: no governor change, nothing
 * written, a mechanism that needs no governor change; the record still
 * holds the settings from before either.  Loop 1 keeps the save's
 * discovery for the set, as slurmstepd does: the set reads only the
 * settings again (a file only discovery reads is gone by then) and sees
 * every one Slurm wrote. */
START_TEST(policy_save_then_keep_slurms_setting)
{
        cpu_set_t cpus = cpus_of(0, 1);
        struct mpi_pstate_policy_req q = req_for(&cpus, true, "powersave");
        struct mpi_pstate_policy_result r;
        struct mpi_pstate_restore_summary sum;
        struct mpi_pstate_cpufreq_node *node = NULL;
        char err[256], rel[128], path[700];

        fakesys_acpi_cpufreq(&fs, 2);
        q.save_only = true;
        if (_i == 1)
                q.node = &node;
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.set, 2);
        ck_assert(record_exists("policy0") && record_exists("policy1"));
        ck_assert_str_eq(val(0, "scaling_governor"), "performance");
        mpi_pstate_policy_result_free(&r);
        if (_i == 1) {
                ck_assert_ptr_nonnull(node);
                for (unsigned pol = 0; pol < 2; pol++) {
                        snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpufreq/policy%u/related_cpus",
                                 pol);
                        fakesys_path(&fs, rel, path, sizeof(path));
                        ck_assert_int_eq(unlink(path), 0);
                }
        }
        /* Slurm: --cpu-freq=2400000 on policy0 (userspace), =1800000-2400000 on policy1. */
        snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpufreq/policy0/scaling_governor");
        fakesys_put(&fs, rel, 0644, "userspace\n");
        snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpufreq/policy0/scaling_setspeed");
        fakesys_put(&fs, rel, 0644, "2400000\n");
        snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpufreq/policy1/scaling_min_freq");
        fakesys_put(&fs, rel, 0644, "1800000\n");
        snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpufreq/policy1/scaling_max_freq");
        fakesys_put(&fs, rel, 0644, "2400000\n");
        q.save_only = false;
        q.keep = true;
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.set, 2);
        ck_assert_int_eq(r.domains[0].mech, MPI_PSTATE_CPUFREQ_MECH_SETSPEED);
        ck_assert_int_eq(r.domains[1].mech, MPI_PSTATE_CPUFREQ_MECH_MAXFREQ);
        ck_assert_str_eq(val(0, "scaling_governor"), "userspace");
        ck_assert_str_eq(val(0, "scaling_setspeed"), "2400000");
        ck_assert_str_eq(val(1, "scaling_governor"), "performance");
        ck_assert_str_eq(val(1, "scaling_max_freq"), "2400000");
        ck_assert_str_eq(val(1, "scaling_min_freq"), "1800000");
        mpi_pstate_policy_result_free(&r);
        ck_assert_int_eq(mpi_pstate_restore_all(rdir, fs.root, &q.owner, 0, &sum, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(sum.restored, 2);
        ck_assert_str_eq(val(0, "scaling_governor"), "performance");
        ck_assert_str_eq(val(1, "scaling_max_freq"), "3000000");
        ck_assert_str_eq(val(1, "scaling_min_freq"), "1200000");
        mpi_pstate_cpufreq_free(node);
}
END_TEST

/* A kept discovery whose settings cannot be read again: the call fails
 * naming the file, and writes nothing. */
START_TEST(policy_kept_discovery_unreadable)
{
        cpu_set_t cpus = cpus_of(0, 0);
        struct mpi_pstate_policy_req q = req_for(&cpus, true, "powersave");
        struct mpi_pstate_policy_result r;
        struct mpi_pstate_cpufreq_node *node = NULL;
        char err[256] = "", path[700];

        fakesys_acpi_cpufreq(&fs, 1);
        q.save_only = true;
        q.node = &node;
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        mpi_pstate_policy_result_free(&r);
        fakesys_path(&fs, FAKESYS_CPU "/cpufreq/policy0/scaling_min_freq", path, sizeof(path));
        ck_assert_int_eq(unlink(path), 0);
        q.save_only = false;
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err, "policy0/scaling_governor/min/max/setspeed"));
        ck_assert_str_eq(val(0, "scaling_governor"), "performance");
        mpi_pstate_cpufreq_free(node);
}
END_TEST

START_TEST(policy_floor_and_ceiling)
{
        cpu_set_t cpus = cpus_of(0, 0);
        struct mpi_pstate_policy_req q = req_for(&cpus, true, "performance");
        struct mpi_pstate_policy_result r;
        char err[256];

        fakesys_acpi_cpufreq(&fs, 1);
        q.floor_khz = 1800000;
        q.ceiling_khz = 2400000;
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_str_eq(val(0, "scaling_min_freq"), "1800000");
        ck_assert_str_eq(val(0, "scaling_max_freq"), "2400000");
        ck_assert_uint_eq(r.domains[0].target.max_khz, 2400000);
        mpi_pstate_policy_result_free(&r);
}
END_TEST

/* profile: the domains are classified, not one file written, no record. */
START_TEST(policy_profile_reads_only)
{
        cpu_set_t cpus = cpus_of(0, 1);
        struct mpi_pstate_policy_req q = req_for(&cpus, false, "powersave");
        struct mpi_pstate_policy_result r;
        char err[256];
        int ifd;

        fakesys_acpi_cpufreq(&fs, 2);
        ifd = fakesys_watch(&fs, FAKESYS_CPU "/cpufreq/policy0");
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.set, 0);
        ck_assert_int_eq(r.domains[0].status, MPI_PSTATE_POLICY_UNTOUCHED);
        ck_assert_str_eq(val(0, "scaling_governor"), "performance");
        ck_assert(!record_exists("policy0"));
        {
                char log[8192] = "";

                ck_assert_int_gt(fakesys_events(ifd, log, sizeof(log)), 0); /* read, yes */
                ck_assert_msg(strstr(log, "modify") == NULL, "written: %s", log);
        }
        close(ifd);
        mpi_pstate_policy_result_free(&r);
}
END_TEST

/* A domain holding CPUs outside the step (a package-wide policy, or the
 * SMT sibling another job runs on) is left alone and reported shared. */
START_TEST(policy_shared_domain_left_alone)
{
        cpu_set_t cpus = cpus_of(0, 1);
        struct mpi_pstate_policy_req q = req_for(&cpus, true, "powersave");
        struct mpi_pstate_policy_result r;
        char err[256];

        fakesys_shared_policy(&fs); /* one policy over CPUs 0-3 */
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.ndomains, 1);
        ck_assert_uint_eq(r.shared, 1);
        ck_assert_uint_eq(r.set, 0);
        ck_assert_int_eq(r.domains[0].status, MPI_PSTATE_POLICY_SHARED);
        ck_assert_str_eq(val(0, "scaling_governor"), "performance");
        ck_assert(!record_exists("policy0"));
        mpi_pstate_policy_result_free(&r);
        /* The whole domain in the step: it is the step's. */
        cpus = cpus_of(0, 3);
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.set, 1);
        mpi_pstate_policy_result_free(&r);
}
END_TEST

/* Another step's record: that domain is busy, never changed twice. */
START_TEST(policy_busy_domain_left_alone)
{
        cpu_set_t cpus = cpus_of(0, 1);
        struct mpi_pstate_policy_req other = req_for(&cpus, true, "ondemand");
        struct mpi_pstate_policy_req q = req_for(&cpus, true, "powersave");
        struct mpi_pstate_policy_result r;
        char err[256];

        fakesys_acpi_cpufreq(&fs, 2);
        other.owner.step_id = 0;
        cpus = cpus_of(1, 1);
        ck_assert_int_eq(mpi_pstate_policy_apply(&other, &r, err, sizeof(err)), 0);
        mpi_pstate_policy_result_free(&r);
        cpus = cpus_of(0, 1);
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.set, 1);
        ck_assert_uint_eq(r.busy, 1);
        ck_assert_int_eq(r.domains[1].status, MPI_PSTATE_POLICY_BUSY);
        ck_assert_str_eq(val(0, "scaling_governor"), "powersave");
        ck_assert_str_eq(val(1, "scaling_governor"), "ondemand");
        mpi_pstate_policy_result_free(&r);
}
END_TEST

START_TEST(policy_without_cpufreq)
{
        cpu_set_t cpus = cpus_of(0, 1);
        struct mpi_pstate_policy_req q = req_for(&cpus, true, NULL);
        struct mpi_pstate_policy_result r;
        char err[256];

        fakesys_no_cpufreq(&fs, 2);
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), -ENODEV);
        ck_assert_uint_eq(r.ndomains, 0);
        ck_assert_ptr_null(r.domains);
}
END_TEST

/* A governor the kernel lacks fails that domain only, never the step. */
START_TEST(policy_failure_is_per_domain)
{
        cpu_set_t cpus = cpus_of(0, 1);
        struct mpi_pstate_policy_req q = req_for(&cpus, true, "conservative");
        struct mpi_pstate_policy_result r;
        char err[256];

        fakesys_intel_pstate_hwp(&fs, 2);
        ck_assert_int_eq(mpi_pstate_policy_apply(&q, &r, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.failed, 2);
        ck_assert_int_eq(r.domains[0].status, MPI_PSTATE_POLICY_FAILED);
        ck_assert_ptr_nonnull(strstr(err, "policy0"));
        ck_assert_str_eq(val(0, "scaling_governor"), "powersave");
        mpi_pstate_policy_result_free(&r);
}
END_TEST

/* ---- pinning adapter on XML topologies */

static hwloc_topology_t xml(const char *name)
{
        char path[512];
        hwloc_topology_t t;

        snprintf(path, sizeof(path), TEST_DATA_DIR "/topo/%s", name);
        ck_assert_int_eq(hwloc_topology_init(&t), 0);
        ck_assert_int_eq(hwloc_topology_set_xml(t, path), 0);
        ck_assert_int_eq(hwloc_topology_load(t), 0);
        return t;
}

static void expect_cpus(const cpu_set_t *s, const char *want)
{
        char got[256];

        mpi_pstate_steprec_cpulist(s, got, sizeof(got));
        ck_assert_str_eq(got, want);
}

/* Slurm's cpus-per-task counts hardware threads: 2 on an SMT node is one
 * core per task, and the task gets both of its threads. */
START_TEST(pinning_cores_with_smt)
{
        struct mpi_pstate_pinning p;
        cpu_set_t s;
        char err[256];

        ck_assert_int_eq(mpi_pstate_pinning_init(&p, xml("2s-snc2-smt.xml"), "0-3", 4, 2,
                                                 MPI_PSTATE_BIND_CORES, false, false, err,
                                                 sizeof(err)),
                         0);
        ck_assert_uint_eq(p.cores_per_task, 1);
        ck_assert_int_eq(mpi_pstate_pinning_cpus(&p, &s), 0);
        expect_cpus(&s, "0-3,32-35");
        ck_assert_int_eq(mpi_pstate_pinning_task(&p, 2, NULL, &s, NULL, err, sizeof(err)), 0);
        expect_cpus(&s, "2,34");
        mpi_pstate_pinning_fini(&p);
}
END_TEST

START_TEST(pinning_scatter_and_none)
{
        struct mpi_pstate_pinning p;
        cpu_set_t s;
        char err[256];

        ck_assert_int_eq(mpi_pstate_pinning_init(&p, xml("2s-snc2-nosmt.xml"), "16-31", 4, 1,
                                                 MPI_PSTATE_BIND_SCATTER, false, false, err,
                                                 sizeof(err)),
                         0);
        ck_assert_int_eq(mpi_pstate_pinning_task(&p, 1, NULL, &s, NULL, err, sizeof(err)), 0);
        expect_cpus(&s, "24");
        mpi_pstate_pinning_fini(&p);
        /* none, and a launcher's daemon whatever the mode: every CPU. */
        for (int daemon = 0; daemon < 2; daemon++) {
                ck_assert_int_eq(
                    mpi_pstate_pinning_init(&p, xml("2s-snc2-nosmt.xml"), "4-5", 2, 1,
                                            daemon ? MPI_PSTATE_BIND_COMPACT : MPI_PSTATE_BIND_NONE,
                                            false, daemon, err, sizeof(err)),
                    0);
                ck_assert_int_eq(mpi_pstate_pinning_task(&p, 1, NULL, &s, NULL, err, sizeof(err)),
                                 0);
                expect_cpus(&s, "4-5");
                mpi_pstate_pinning_fini(&p);
        }
}
END_TEST

/* --cpu-bind: the task plugin's mask, cut to the allocation. */
START_TEST(pinning_user_mask)
{
        struct mpi_pstate_pinning p;
        struct mpi_pstate_placement_info info;
        cpu_set_t cur, s;
        char err[256];

        ck_assert_int_eq(mpi_pstate_pinning_init(&p, xml("2s-snc2-nosmt.xml"), "0-3", 2, 1,
                                                 MPI_PSTATE_BIND_SCATTER, true, false, err,
                                                 sizeof(err)),
                         0);
        ck_assert_int_eq(p.mode, MPI_PSTATE_PLACEMENT_USER);
        CPU_ZERO(&cur);
        CPU_SET(3, &cur);
        CPU_SET(9, &cur);
        ck_assert_int_eq(mpi_pstate_pinning_task(&p, 0, &cur, &s, &info, err, sizeof(err)), 0);
        expect_cpus(&s, "3");
        ck_assert(info.flags & MPI_PSTATE_PLACEMENT_F_MASK_TRIMMED);
        CPU_ZERO(&cur);
        CPU_SET(9, &cur);
        ck_assert_int_eq(mpi_pstate_pinning_task(&p, 0, &cur, &s, &info, err, sizeof(err)),
                         -EINVAL);
        ck_assert_int_eq(mpi_pstate_pinning_task(&p, 0, NULL, &s, &info, err, sizeof(err)),
                         -EINVAL);
        mpi_pstate_pinning_fini(&p);
}
END_TEST

START_TEST(pinning_bad_core_lists)
{
        static const char *const bad[] = {"", "abc", "0-", "3-1", "0,,1", "0-40"};
        struct mpi_pstate_pinning p;
        char err[256] = "";

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                err[0] = '\0';
                ck_assert_int_lt(mpi_pstate_pinning_init(&p, xml("2s-snc2-nosmt.xml"), bad[i], 2, 1,
                                                         MPI_PSTATE_BIND_CORES, false, false, err,
                                                         sizeof(err)),
                                 0);
                ck_assert_msg(err[0] != '\0', "no reason for \"%s\"", bad[i]);
                ck_assert_ptr_null(p.topo);
        }
        ck_assert_int_eq(mpi_pstate_pinning_init(&p, NULL, "0", 1, 1, MPI_PSTATE_BIND_CORES, false,
                                                 false, err, sizeof(err)),
                         -EINVAL);
}
END_TEST

/* ---- containers: does the task's root have the library? */

static void write_text(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");

        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

START_TEST(container_kinds)
{
        ck_assert_int_eq(mpi_pstate_container_of_step(NULL, "/usr/bin/solver"),
                         MPI_PSTATE_CONTAINER_NONE);
        ck_assert_int_eq(mpi_pstate_container_of_step("", NULL), MPI_PSTATE_CONTAINER_NONE);
        ck_assert_int_eq(mpi_pstate_container_of_step("/b", "./solver"), MPI_PSTATE_CONTAINER_OCI);
        ck_assert_int_eq(mpi_pstate_container_of_step(NULL, "/usr/bin/apptainer"),
                         MPI_PSTATE_CONTAINER_APPTAINER);
        ck_assert_int_eq(mpi_pstate_container_of_step(NULL, "singularity"),
                         MPI_PSTATE_CONTAINER_APPTAINER);
        ck_assert_str_eq(mpi_pstate_container_name(MPI_PSTATE_CONTAINER_OCI), "oci");
        ck_assert_ptr_null(mpi_pstate_container_name(MPI_PSTATE_CONTAINER_NONE));
}
END_TEST

/* A bundle whose rootfs lacks the library; then the same with the site's
 * bind mount of its directory in config.json; then a rootfs that has it. */
START_TEST(container_oci_bundle)
{
        static const char lib[] = "/usr/local/lib/mpi-pstate/libmpi-pstate.so";
        char dir[] = "/tmp/mpi-pstate-bundle.XXXXXX", path[512], cfg[512], json[2048], cmd[1200];

        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, lib), -ENOENT);
        snprintf(path, sizeof(path), "%s/rootfs", dir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        /* the "host" side of a site's bind mount: DIR/host/libmpi-pstate.so */
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s/host' && touch '%s/host/libmpi-pstate.so'", dir,
                 dir);
        ck_assert_int_eq(system(cmd), 0);
        snprintf(cfg, sizeof(cfg), "%s/config.json", dir);
        /* no mount over the library, and none in the root */
        write_text(cfg,
                   "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\",\"readonly\":true},"
                   "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\"},"
                   "{\"destination\":\"/usr/local/lib/mpi\",\"type\":\"bind\","
                   "\"source\":\"/x\"}]}");
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, lib), 0);
        /* the site's bind mount of the library's directory */
        snprintf(json, sizeof(json),
                 "{\"root\": {\"path\": \"rootfs\"}, \"mounts\": [ {\"destination\": "
                 "\"/usr/local/lib/mpi-pstate\", \"type\": \"bind\", \"source\": \"%s/host\", "
                 "\"options\": [\"rbind\",\"ro\"]} ]}",
                 dir);
        write_text(cfg, json);
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, lib), 1);
        /* the same bind, then a tmpfs over /usr/local: hidden */
        snprintf(json, sizeof(json),
                 "{\"root\":{\"path\":\"rootfs\"},\"mounts\":[{\"destination\":"
                 "\"/usr/local/lib/mpi-pstate\",\"options\":[\"rbind\"],\"source\":\"%s/host\"},"
                 "{\"destination\":\"/usr/local\",\"type\":\"tmpfs\",\"source\":\"tmpfs\"}]}",
                 dir);
        write_text(cfg, json);
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, lib), 0);
        /* a bind whose source lacks the file */
        write_text(cfg, "{\"mounts\":[{\"destination\":\"/usr\",\"type\":\"bind\","
                        "\"source\":\"/nonexistent-usr\"}]}");
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, lib), 0);
        /* no mount: the root decides */
        write_text(cfg, "{\"root\":{\"path\":\"rootfs\"}}");
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, lib), 0);
        snprintf(cmd, sizeof(cmd),
                 "mkdir -p '%s/rootfs/usr/local/lib/mpi-pstate' && "
                 "touch '%s/rootfs/usr/local/lib/mpi-pstate/libmpi-pstate.so'",
                 dir, dir);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_int_eq(mpi_pstate_container_oci_sees(dir, lib), 1);
        ck_assert_int_eq(mpi_pstate_container_oci_sees("relative", lib), -EINVAL);
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

START_TEST(container_apptainer_binds)
{
        static const char lib[] = "/usr/local/lib/mpi-pstate/libmpi-pstate.so";
        char conf[] = "/tmp/mpi-pstate-apptainer.XXXXXX";
        int fd = mkstemp(conf);

        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(mpi_pstate_container_apptainer_sees("/scratch,/opt:/opt", NULL, lib), 0);
        ck_assert_int_eq(mpi_pstate_container_apptainer_sees("/scratch,/usr/local/lib", NULL, lib),
                         1);
        ck_assert_int_eq(
            mpi_pstate_container_apptainer_sees("/host/mp:/usr/local/lib/mpi-pstate:ro", NULL, lib),
            1);
        ck_assert_int_eq(mpi_pstate_container_apptainer_sees("/usr/local/lib/mpi:/x", NULL, lib),
                         0);
        write_text(conf, "# bind path = /usr/local/lib\nbind path = /etc/localtime\n");
        ck_assert_int_eq(mpi_pstate_container_apptainer_sees(NULL, conf, lib), 0);
        write_text(conf, "bind path = /etc/localtime\nbind path = /usr/local/lib/mpi-pstate\n");
        ck_assert_int_eq(mpi_pstate_container_apptainer_sees(NULL, conf, lib), 1);
        unlink(conf);
}
END_TEST

/* ---- steptime: the phase split the debug log and bench/step/ read */

START_TEST(steptime_format_and_accumulate)
{
        struct mpi_pstate_steptime t = {0};
        char buf[256];

        t.ns[MPI_PSTATE_STEPTIME_TOPOLOGY] = 1234567;
        t.ns[MPI_PSTATE_STEPTIME_POLICY] = 2000;
        t.ns[MPI_PSTATE_STEPTIME_RESTORE] = 5000000;
        ck_assert_int_gt(mpi_pstate_steptime_format(&t, MPI_PSTATE_STEPTIME_START_FIRST,
                                                    MPI_PSTATE_STEPTIME_END_FIRST, buf,
                                                    sizeof(buf)),
                         0);
        ck_assert_str_eq(buf, "topology=1.234 cores=0.000 dirs=0.000 policy=0.002 segment=0.000 "
                              "agent=0.000 record=0.000 total=1.236");
        ck_assert_int_gt(mpi_pstate_steptime_format(&t, MPI_PSTATE_STEPTIME_END_FIRST,
                                                    MPI_PSTATE_STEPTIME_COUNT, buf, sizeof(buf)),
                         0);
        ck_assert_str_eq(buf, "agent_stop=0.000 restore=5.000 record=0.000 total=5.000");
        ck_assert_int_eq(mpi_pstate_steptime_format(&t, 0, MPI_PSTATE_STEPTIME_COUNT, buf, 20),
                         -ENOSPC);
        ck_assert_int_eq(mpi_pstate_steptime_format(&t, 3, 2, buf, sizeof(buf)), -EINVAL);
        ck_assert_int_eq(
            mpi_pstate_steptime_format(&t, 0, MPI_PSTATE_STEPTIME_COUNT + 1, buf, sizeof(buf)),
            -EINVAL);
        /* end without begin adds nothing; begin then end adds to that phase only */
        memset(&t, 0, sizeof(t));
        mpi_pstate_steptime_end(&t, MPI_PSTATE_STEPTIME_AGENT);
        ck_assert_uint_eq(t.ns[MPI_PSTATE_STEPTIME_AGENT], 0);
        mpi_pstate_steptime_begin(&t);
        usleep(2000);
        mpi_pstate_steptime_end(&t, MPI_PSTATE_STEPTIME_AGENT);
        ck_assert_uint_gt(t.ns[MPI_PSTATE_STEPTIME_AGENT], 0);
        for (unsigned p = 0; p < MPI_PSTATE_STEPTIME_COUNT; p++)
                if (p != MPI_PSTATE_STEPTIME_AGENT)
                        ck_assert_uint_eq(t.ns[p], 0);
}
END_TEST

static Suite *modules_suite(void)
{
        Suite *s = suite_create("spank_modules");
        TCase *tc = tcase_create("paths_launch");

        tcase_add_test(tc, expand_host_escape);
        tcase_add_test(tc, step_paths_and_names);
        tcase_add_test(tc, preload_prepended_user_entries_kept);
        tcase_add_test(tc, launcher_daemons);
        tcase_add_test(tc, cpulist_format);
        tcase_add_test(tc, step_record_format);
        tcase_add_test(tc, steptime_format_and_accumulate);
        suite_add_tcase(s, tc);

        tc = tcase_create("agentctl");
        tcase_add_checked_fixture(tc, adir_setup, adir_teardown);
        tcase_set_timeout(tc, 20);
        tcase_add_test(tc, agent_argv);
        tcase_add_loop_test(tc, agent_start_detached_and_stopped, 0, 2);
        tcase_add_loop_test(tc, agent_stop_by_pidfd, 0, 2);
        tcase_add_test(tc, pidfd_number_reused);
        tcase_add_test(tc, agent_start_blocked_signals);
        tcase_add_test(tc, agent_missing_or_not_executable);
        tcase_add_test(tc, pidfile_round_trip_and_hostile);
        tcase_add_test(tc, trusted_paths);
        suite_add_tcase(s, tc);

        tc = tcase_create("policy");
        tcase_add_checked_fixture(tc, pol_setup, pol_teardown);
        tcase_add_test(tc, policy_sets_only_the_steps_domains);
        tcase_add_loop_test(tc, policy_mechanism_follows_the_driver, 0, 2);
        tcase_add_test(tc, policy_floor_and_ceiling);
        tcase_add_loop_test(tc, policy_save_then_keep_slurms_setting, 0, 2);
        tcase_add_test(tc, policy_kept_discovery_unreadable);
        tcase_add_test(tc, policy_profile_reads_only);
        tcase_add_test(tc, policy_shared_domain_left_alone);
        tcase_add_test(tc, policy_busy_domain_left_alone);
        tcase_add_test(tc, policy_without_cpufreq);
        tcase_add_test(tc, policy_failure_is_per_domain);
        suite_add_tcase(s, tc);

        tc = tcase_create("container");
        tcase_add_test(tc, container_kinds);
        tcase_add_test(tc, container_oci_bundle);
        tcase_add_test(tc, container_apptainer_binds);
        suite_add_tcase(s, tc);
        tc = tcase_create("pinning");
        tcase_add_test(tc, pinning_cores_with_smt);
        tcase_add_test(tc, pinning_scatter_and_none);
        tcase_add_test(tc, pinning_user_mask);
        tcase_add_test(tc, pinning_bad_core_lists);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(modules_suite(), true);
}
