/* SPDX-License-Identifier: BSD-3-Clause */
/* spank/cgroup.c on fake /proc and cgroup trees: the step's cpuset found
 * from a process's /proc/<pid>/cgroup (v1, v2, hybrid, SLUID-named job
 * directories), read at the step's level, and the CPUs of every other job's
 * cgroup (an oversubscribed partition), also where there is no cpuset file;
 * then the decision on the step's CPUs as a table (pure, no file). */
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
        /* the job's directory was found: no other job beside it */
        ck_assert(out.have_jobs);
        ck_assert_uint_eq(out.jobs, 0);
        ck_assert_int_eq(CPU_COUNT(&out.others), 0);
        /* an empty v1 cpuset (never configured) is no answer either */
        fakesys_put(&fs, "proc/43/cgroup", 0644, "3:cpuset:/a/job_1/step_0\n");
        fakesys_put(&fs, "cg/cpuset/a/job_1/step_0/cpuset.cpus", 0644, "\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 43, &out, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 44, &out, err, sizeof(err)), -ENOENT);
}
END_TEST

START_TEST(no_cpuset_other_jobs_seen)
{
        /* cgroup v2 without the cpuset controller: no job has a cpuset
         * file; job 4 runs (it may be on any CPU), job 5 ended */
        fakesys_put(&fs, "proc/42/cgroup", 0644,
                    "0::/system.slice/slurmstepd.scope/job_3/step_0/user/task_0\n");
        fakesys_put(&fs, "cg/cgroup.controllers", 0644, "cpu memory pids\n");
        fakesys_put(&fs, "cg/system.slice/slurmstepd.scope/job_3/step_0/user/task_0/cgroup.procs",
                    0644, "42\n");
        fakesys_put(&fs, "cg/system.slice/slurmstepd.scope/job_4/step_0/user/task_0/cgroup.procs",
                    0644, "99\n");
        fakesys_put(&fs, "cg/system.slice/slurmstepd.scope/job_5/step_0/cgroup.procs", 0644, "%s",
                    "");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), -ENOENT);
        ck_assert(out.have_jobs);
        ck_assert_uint_eq(out.jobs, 1);
        ck_assert_str_eq(out.first, "job_4");
        ck_assert(CPU_ISSET(0, &out.others) && CPU_ISSET(CPU_SETSIZE - 1, &out.others));

        /* v1 without a cpuset hierarchy: the freezer's jobs, of every user */
        fakesys_put(&fs, "proc/43/cgroup", 0644,
                    "6:freezer:/slurm_n1/uid_1000/job_7/step_0\n0::/\n");
        fakesys_put(&fs, "cg/freezer/slurm_n1/uid_1000/job_7/step_0/cgroup.procs", 0644, "43\n");
        fakesys_put(&fs, "cg/freezer/slurm_n1/uid_1001/job_8/step_batch/cgroup.procs", 0644,
                    "77\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 43, &out, err, sizeof(err)), -ENOENT);
        ck_assert(out.have_jobs);
        ck_assert_uint_eq(out.jobs, 1);
        ck_assert_str_eq(out.first, "job_8");
        ck_assert(CPU_ISSET(0, &out.others));

        /* an empty v1 cpuset: the other jobs are not taken from their
         * cpusets (as empty, they would count for nothing) */
        fakesys_put(&fs, "proc/44/cgroup", 0644, "3:cpuset:/s/uid_0/job_1/step_0\n");
        fakesys_put(&fs, "cg/cpuset/s/uid_0/job_1/step_0/cpuset.cpus", 0644, "\n");
        fakesys_put(&fs, "cg/cpuset/s/uid_0/job_2/cpuset.cpus", 0644, "\n");
        fakesys_put(&fs, "cg/cpuset/s/uid_0/job_2/step_0/cgroup.procs", 0644, "5\n");
        ck_assert_int_eq(mpi_pstate_cgroup_cpus(proc, cg, 44, &out, err, sizeof(err)), -EINVAL);
        ck_assert(out.have_jobs);
        ck_assert_uint_eq(out.jobs, 1);
        ck_assert(CPU_ISSET(3, &out.others));
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

/* ---- the decision (mpi_pstate_cgroup_decide): facts in, CPUs out */

static const struct decide_case {
        const char *name;
        const char *cpuset; /* NULL: no cpuset file */
        const char *others; /* NULL: other jobs not known; "" none */
        bool exclusive;
        enum mpi_pstate_cgroup_decision want;
        const char *keep, *outside, *shared;
} decide_cases[] = {
    /* the step's CPUs are 0-3 in every case */
    {"cpuset", "0-2,8", "2,9", false, MPI_PSTATE_CGROUP_CONFINED, "0-1", "3", "2"},
    {"cpuset, other jobs unknown", "0-3", NULL, false, MPI_PSTATE_CGROUP_CONFINED, "0-3", "", ""},
    {"no cpuset, exclusive", NULL, NULL, true, MPI_PSTATE_CGROUP_EXCLUSIVE, "0-3", "", ""},
    {"no cpuset, no other job", NULL, "", false, MPI_PSTATE_CGROUP_ALONE, "0-3", "", ""},
    {"no cpuset, other jobs elsewhere", NULL, "4-7", false, MPI_PSTATE_CGROUP_ALONE, "0-3", "", ""},
    {"no cpuset, other job", NULL, "0-1023", false, MPI_PSTATE_CGROUP_OTHER_JOBS, "", "", "0-3"},
    {"no cpuset, other job on one CPU", NULL, "3", false, MPI_PSTATE_CGROUP_OTHER_JOBS, "", "0-2",
     "3"},
    /* evidence wins: the same cores allocated twice (OverSubscribe=FORCE) */
    {"no cpuset, exclusive, other job", NULL, "0-1023", true, MPI_PSTATE_CGROUP_OTHER_JOBS, "", "",
     "0-3"},
    {"no cpuset, nothing known", NULL, NULL, false, MPI_PSTATE_CGROUP_UNSEEN, "", "0-3", ""},
};

START_TEST(decision_table)
{
        const struct decide_case *c = &decide_cases[_i];
        cpu_set_t cpus = set_of("0-3"), cpuset, others;
        struct mpi_pstate_cgroup_facts f = {.cpus = &cpus, .exclusive = c->exclusive};
        struct mpi_pstate_cgroup_verdict v;
        bool alone = c->want == MPI_PSTATE_CGROUP_OTHER_JOBS || c->want == MPI_PSTATE_CGROUP_UNSEEN;

        if (c->cpuset) {
                cpuset = set_of(c->cpuset);
                f.cpuset = &cpuset;
        }
        if (c->others) {
                others = set_of(c->others);
                f.others = &others;
        }
        memset(&v, 0xa5, sizeof(v)); /* every field is the answer's */
        ck_assert_int_eq(mpi_pstate_cgroup_decide(&f, &v), c->want);
        ck_assert_msg(v.decision == c->want, "%s", c->name);
        ck_assert_msg(mpi_pstate_cgroup_left_alone(v.decision) == alone, "%s", c->name);
        expect(&v.keep, c->keep);
        expect(&v.outside, c->outside);
        expect(&v.shared, c->shared);
}
END_TEST

START_TEST(decision_words)
{
        /* what the step record's "left_alone" and the slurmd log say */
        ck_assert_str_eq(mpi_pstate_cgroup_decision_text(MPI_PSTATE_CGROUP_OTHER_JOBS),
                         "no cpuset file and other jobs run on the node");
        ck_assert_str_eq(mpi_pstate_cgroup_decision_text(MPI_PSTATE_CGROUP_UNSEEN),
                         "no cpuset file and the node's other jobs cannot be seen");
        ck_assert_str_eq(mpi_pstate_cgroup_decision_text(MPI_PSTATE_CGROUP_EXCLUSIVE),
                         "no cpuset file and the job has every core of the node");
        ck_assert_str_eq(mpi_pstate_cgroup_decision_text(MPI_PSTATE_CGROUP_ALONE),
                         "no cpuset file and no other job runs on the node");
        ck_assert(!mpi_pstate_cgroup_left_alone(MPI_PSTATE_CGROUP_CONFINED));
}
END_TEST

/* The reading feeds the decision: a fake v2 node without the cpuset
 * controller where another job runs, then the same node alone. */
START_TEST(no_cpuset_tree_decided)
{
        cpu_set_t cpus = set_of("0-1");
        struct mpi_pstate_cgroup_facts f = {.cpus = &cpus};
        struct mpi_pstate_cgroup_verdict v;

        fakesys_put(&fs, "proc/42/cgroup", 0644,
                    "0::/system.slice/slurmstepd.scope/job_3/step_0/user/task_0\n");
        fakesys_put(&fs, "cg/system.slice/slurmstepd.scope/job_3/step_0/user/task_0/cgroup.procs",
                    0644, "42\n");
        fakesys_put(&fs, "cg/system.slice/slurmstepd.scope/job_4/step_extern/cgroup.procs", 0644,
                    "99\n");
        ck_assert_int_ne(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), 0);
        f.others = out.have_jobs ? &out.others : NULL;
        ck_assert_int_eq(mpi_pstate_cgroup_decide(&f, &v), MPI_PSTATE_CGROUP_OTHER_JOBS);
        ck_assert_int_eq(CPU_COUNT(&v.keep), 0);
        fakesys_put(&fs, "cg/system.slice/slurmstepd.scope/job_4/step_extern/cgroup.procs", 0644,
                    "%s", "");
        ck_assert_int_ne(mpi_pstate_cgroup_cpus(proc, cg, 42, &out, err, sizeof(err)), 0);
        f.others = out.have_jobs ? &out.others : NULL;
        ck_assert_int_eq(mpi_pstate_cgroup_decide(&f, &v), MPI_PSTATE_CGROUP_ALONE);
        expect(&v.keep, "0-1");
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
        tcase_add_test(tc, no_cpuset_other_jobs_seen);
        tcase_add_test(tc, outside_slurm);
        tcase_add_test(tc, no_cpuset_tree_decided);
        suite_add_tcase(s, tc);
        tc = tcase_create("decide");
        tcase_add_loop_test(tc, decision_table, 0,
                            (int)(sizeof(decide_cases) / sizeof(decide_cases[0])));
        tcase_add_test(tc, decision_words);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(suite(), false);
}
