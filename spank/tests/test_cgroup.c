/* SPDX-License-Identifier: BSD-3-Clause */
/* spank/cgroup.c on fake /proc and cgroup trees: the step's cpuset found
 * from a process's /proc/<pid>/cgroup (v1, v2, hybrid, SLUID-named job
 * directories), read at the step's level, and the CPUs of every other job's
 * cgroup (an oversubscribed partition). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cgroup.h"
#include "cpufreq.h"
#include "fakesys.h"
#include "check_main.h"

static struct fakesys fs;
static char proc[300], cg[300], err[256];
static struct mpi_pstate_cgroup_cpus out;

static void setup(void)
{
        fakesys_init(&fs);
        fakesys_path(&fs, "proc", proc, sizeof(proc));
        fakesys_path(&fs, "cg", cg, sizeof(cg));
        err[0] = '\0';
}

static void teardown(void)
{
        fakesys_cleanup(&fs);
}

static cpu_set_t set_of(const char *list)
{
        cpu_set_t s;

        ck_assert_int_eq(mpi_pstate_cpufreq_parse_cpulist(list, &s), 0);
        return s;
}

static void expect(const cpu_set_t *got, const char *list)
{
        cpu_set_t want = set_of(list);

        ck_assert_msg(CPU_EQUAL(got, &want), "CPUs differ from %s", list);
}

START_TEST(v1_step_and_other_jobs)
{
        fakesys_put(&fs, "proc/42/cgroup", 0644,
                    "9:name=systemd:/\n4:memory:/slurm_n1/uid_1000/job_7/step_0/task_0\n"
                    "3:cpuacct,cpuset:/slurm_n1/uid_1000/job_7/step_0/task_0\n0::/\n");
        fakesys_put(&fs, "cg/cpuset/slurm_n1/uid_1000/job_7/step_0/cpuset.effective_cpus", 0644,
                    "2-3\n");
        fakesys_put(&fs, "cg/cpuset/slurm_n1/uid_1000/job_7/step_0/task_0/cpuset.effective_cpus",
                    0644, "2\n");
        fakesys_put(&fs, "cg/cpuset/slurm_n1/uid_1000/job_7/cpuset.effective_cpus", 0644, "0-7\n");
        /* OverSubscribe=FORCE: job 8 of the same user on CPU 3; job 9 of
         * another user elsewhere; a directory that is not a job */
        fakesys_put(&fs, "cg/cpuset/slurm_n1/uid_1000/job_8/cpuset.effective_cpus", 0644, "3\n");
        fakesys_put(&fs, "cg/cpuset/slurm_n1/uid_1000/job_8/step_0/task_0/cgroup.procs", 0644,
                    "4242\n4243\n");
        fakesys_put(&fs, "cg/cpuset/slurm_n1/uid_1001/job_9/cpuset.effective_cpus", 0644, "4-5\n");
        fakesys_put(&fs, "cg/cpuset/slurm_n1/uid_1001/job_9/step_extern/cgroup.procs", 0644,
                    "77\n");
        /* a job that ended: its directory lingers, without a process */
        fakesys_put(&fs, "cg/cpuset/slurm_n1/uid_1000/job_6/cpuset.effective_cpus", 0644, "6\n");
        fakesys_put(&fs, "cg/cpuset/slurm_n1/uid_1000/job_6/step_0/cgroup.procs", 0644, "%s", "");
        fakesys_put(&fs, "cg/cpuset/slurm_n1/system/cpuset.effective_cpus", 0644, "0-7\n");
        /* another node's slurmd (the test cluster's n2) is not this node */
        fakesys_put(&fs, "cg/cpuset/slurm_n2/uid_1000/job_10/cpuset.effective_cpus", 0644, "2\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), 0);
        expect(&out.step, "2-3");
        expect(&out.others, "3-5");
        ck_assert(out.have_jobs);
        ck_assert_uint_eq(out.jobs, 2);
        /* named for the record: one of the two, whichever readdir gave first */
        ck_assert_msg(strcmp(out.first, "job_8") == 0 || strcmp(out.first, "job_9") == 0, "%s",
                      out.first);
        ck_assert_msg(strstr(out.dir, "/job_7/step_0") &&
                          strcmp(out.dir + strlen(out.dir) - 7, "/step_0") == 0,
                      "%s", out.dir);
}
END_TEST

START_TEST(v1_noprefix_and_cpus_only)
{
        fakesys_put(&fs, "proc/42/cgroup", 0644, "3:cpuset:/slurm/uid_0/job_7/step_batch\n");
        fakesys_put(&fs, "cg/cpuset/slurm/uid_0/job_7/step_batch/cpus", 0644, "0,4\n");
        fakesys_put(&fs, "cg/cpuset/slurm/uid_0/job_8/cpus", 0644, "0\n");
        fakesys_put(&fs, "cg/cpuset/slurm/uid_0/job_8/cgroup.procs", 0644, "1\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), 0);
        expect(&out.step, "0,4");
        expect(&out.others, "0");
}
END_TEST

START_TEST(v2_sluid_named_jobs)
{
        /* 26.05 names job directories by SLUID: never built, only found */
        fakesys_put(&fs, "proc/42/cgroup", 0644,
                    "0::/system.slice/slurmstepd.scope/job_s01JD8K2/step_0/user/task_1\n");
        fakesys_put(&fs, "cg/cgroup.controllers", 0644, "cpuset cpu memory\n");
        fakesys_put(&fs, "cg/system.slice/slurmstepd.scope/job_s01JD8K2/step_0/cpuset.cpus", 0644,
                    "\n");
        fakesys_put(&fs,
                    "cg/system.slice/slurmstepd.scope/job_s01JD8K2/step_0/cpuset.cpus.effective",
                    0644, "0-1\n");
        fakesys_put(&fs,
                    "cg/system.slice/slurmstepd.scope/job_s01JD8K2/step_0/user/task_1/"
                    "cpuset.cpus.effective",
                    0644, "1\n");
        fakesys_put(&fs, "cg/system.slice/slurmstepd.scope/job_s01JD9XX/cpuset.cpus.effective",
                    0644, "1\n");
        fakesys_put(&fs,
                    "cg/system.slice/slurmstepd.scope/job_s01JD9XX/step_0/user/task_0/cgroup.procs",
                    0644, "99\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), 0);
        expect(&out.step, "0-1");
        expect(&out.others, "1");
        ck_assert_uint_eq(out.jobs, 1);
}
END_TEST

START_TEST(hybrid_unified_mount)
{
        fakesys_put(&fs, "proc/42/cgroup", 0644, "4:memory:/\n0::/slurm/job_3/step_0\n");
        fakesys_put(&fs, "cg/unified/slurm/job_3/step_0/cpuset.cpus.effective", 0644, "5\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), 0);
        expect(&out.step, "5");
        ck_assert(out.have_jobs);
        ck_assert_uint_eq(out.jobs, 0);
        ck_assert_int_eq(CPU_COUNT(&out.others), 0);
}
END_TEST

START_TEST(cores_not_constrained)
{
        /* ConstrainCores=no (the test cluster): no cpuset directory of the
         * job; its other hierarchies (freezer, v1) name it.  Another running
         * job may use every CPU; one that ended counts for nothing. */
        fakesys_put(&fs, "proc/42/cgroup", 0644,
                    "9:name=systemd:/\n6:freezer:/slurm_n1/uid_1001/job_253/step_0\n"
                    "3:cpuset:/\n0::/\n");
        fakesys_put(&fs, "cg/cpuset/cpuset.effective_cpus", 0644, "0-1\n");
        fakesys_put(&fs, "cg/freezer/slurm_n1/uid_1001/job_253/step_0/cgroup.procs", 0644, "42\n");
        fakesys_put(&fs, "cg/freezer/slurm_n1/uid_1001/job_250/step_0/cgroup.procs", 0644, "%s",
                    "");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), 0);
        expect(&out.step, "0-1");
        ck_assert(out.have_jobs);
        ck_assert_uint_eq(out.jobs, 0);
        fakesys_put(&fs, "cg/freezer/slurm_n1/uid_1000/job_252/step_batch/cgroup.procs", 0644,
                    "77\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), 0);
        ck_assert_uint_eq(out.jobs, 1);
        ck_assert(CPU_ISSET(0, &out.others) && CPU_ISSET(1, &out.others) &&
                  CPU_ISSET(CPU_SETSIZE - 1, &out.others));
}
END_TEST

START_TEST(no_cpuset_cgroup)
{
        /* cgroup v2 without the cpuset controller: no file anywhere */
        fakesys_put(&fs, "proc/42/cgroup", 0644,
                    "0::/system.slice/slurmstepd.scope/job_3/step_0\n");
        fakesys_mkdirs(&fs, "cg/system.slice/slurmstepd.scope/job_3/step_0");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), -ENOENT);
        ck_assert_msg(strstr(err, "no cpuset cgroup"), "%s", err);
        /* an empty v1 cpuset (never configured) is no answer either */
        fakesys_put(&fs, "proc/43/cgroup", 0644, "3:cpuset:/a/job_1/step_0\n");
        fakesys_put(&fs, "cg/cpuset/a/job_1/step_0/cpuset.cpus", 0644, "\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 43, &out, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 44, &out, err, sizeof(err)), -ENOENT);
}
END_TEST

START_TEST(outside_slurm)
{
        /* a process in no step (the root cgroup): its cgroup, no jobs */
        fakesys_put(&fs, "proc/42/cgroup", 0644, "3:cpuset:/\n");
        fakesys_put(&fs, "cg/cpuset/cpuset.effective_cpus", 0644, "0-3\n");
        fakesys_put(&fs, "cg/cpuset/slurm/uid_0/job_8/cpuset.effective_cpus", 0644, "0\n");
        fakesys_put(&fs, "cg/cpuset/slurm/uid_0/job_8/cgroup.procs", 0644, "1\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), 0);
        expect(&out.step, "0-3");
        ck_assert(!out.have_jobs);
        ck_assert_int_eq(CPU_COUNT(&out.others), 0);
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("cgroup");
        TCase *tc = tcase_create("cpus");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, v1_step_and_other_jobs);
        tcase_add_test(tc, v1_noprefix_and_cpus_only);
        tcase_add_test(tc, v2_sluid_named_jobs);
        tcase_add_test(tc, hybrid_unified_mount);
        tcase_add_test(tc, cores_not_constrained);
        tcase_add_test(tc, no_cpuset_cgroup);
        tcase_add_test(tc, outside_slurm);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(suite(), false);
}
