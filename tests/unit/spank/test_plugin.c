/* SPDX-License-Identifier: BSD-3-Clause */
/* The hooks of spank/mpi_pstate.c driven through a stub libslurm: option
 * registration in every context, submit-time refusal, the remote side's
 * environment export and batch-step skip, and "never fail a job".
 * Check forks per test, so every test starts with fresh plugin state. */
#include <check.h>
#include <errno.h>
#include <glob.h>
#include <ftw.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "fakesys.h"
#include "placement.h"
#include "spank_stub.h"
#include "check_main.h"

/* The hooks, as slurmstepd and the commands call them. */
int slurm_spank_init(spank_t sp, int ac, char **av);
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av);
int slurm_spank_task_post_fork(spank_t sp, int ac, char **av);
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av);
int slurm_spank_task_init(spank_t sp, int ac, char **av);
int slurm_spank_task_exit(spank_t sp, int ac, char **av);
int slurm_spank_exit(spank_t sp, int ac, char **av);
int slurm_spank_job_prolog(spank_t sp, int ac, char **av);
int slurm_spank_job_epilog(spank_t sp, int ac, char **av);
extern const char plugin_name[];

/* slurmstepd up to the tasks' exec: init_post_opt, Slurm's task plugin
 * (here: nothing of --cpu-freq), then task_post_fork for the first task. */
static int post_opt_and_fork(spank_t sp, int ac, char **av)
{
        int rc = slurm_spank_init_post_opt(sp, ac, av);
        int rc2 = slurm_spank_task_post_fork(sp, ac, av);

        return rc ? rc : rc2;
}
extern const char plugin_type[];

static struct spank_option *opt_named(const char *name)
{
        for (int i = 0; i < stub.nopts; i++)
                if (strcmp(stub.opts[i].name, name) == 0)
                        return &stub.opts[i];
        ck_abort_msg("option %s not registered", name);
        return NULL;
}

/* What Slurm does with an option the user gave: call its callback. */
static int give(const char *name, const char *value, int remote)
{
        struct spank_option *o = opt_named(name);
        return o->cb(o->val, value, remote);
}

static void all_messages_prefixed(void)
{
        for (int i = 0; i < stub.nlogs; i++)
                ck_assert_msg(strncmp(stub.logs[i].msg, "mpi-pstate: ", 12) == 0, "unprefixed: %s",
                              stub.logs[i].msg);
}

static const spank_context_t all_ctxs[] = {S_CTX_LOCAL, S_CTX_ALLOCATOR, S_CTX_REMOTE, S_CTX_SLURMD,
                                           S_CTX_JOB_SCRIPT};

START_TEST(registers_every_option_in_every_context)
{
        ck_assert_str_eq(plugin_name, "mpi_pstate");
        ck_assert_str_eq(plugin_type, "spank");
        stub_reset(all_ctxs[_i]);
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(stub.nopts, 5);
        ck_assert_int_eq(opt_named("mpi-pstate")->has_arg, 2);
        ck_assert_int_eq(opt_named("mpi-pstate-threshold")->has_arg, 1);
        ck_assert_int_eq(opt_named("mpi-pstate-bind")->has_arg, 1);
        for (int i = 0; i < stub.nopts; i++)
                ck_assert(strncmp(stub.opts[i].usage, "[mpi-pstate] ", 13) == 0);
        ck_assert_str_eq(opt_named("mpi-pstate")->arginfo, "[mode]");
        ck_assert_str_eq(opt_named("mpi-pstate-low")->arginfo, "freq|min|efficient");
}
END_TEST

START_TEST(bad_value_refused_at_submit)
{
        stub_reset(S_CTX_ALLOCATOR);
        slurm_spank_init(STUB_SP, 0, NULL);
        ck_assert_int_ne(give("mpi-pstate-threshold", "abc", 0), 0);
        ck_assert_int_eq(stub_count("error", "mpi-pstate: invalid value \"abc\" for "
                                             "--mpi-pstate-threshold: expected a duration "
                                             "such as 500us or 2ms"),
                         1);
        ck_assert_int_ne(give("mpi-pstate", "maybe", 0), 0);
        ck_assert_int_ne(give("mpi-pstate-low", "(null)", 0), 0);
        ck_assert_int_eq(stub_count("error", "--mpi-pstate-low needs a value"), 1);
        all_messages_prefixed();
}
END_TEST

START_TEST(good_values_and_repeats_accepted)
{
        stub_reset(S_CTX_LOCAL);
        slurm_spank_init(STUB_SP, 0, NULL);
        ck_assert_int_eq(give("mpi-pstate", NULL, 0), 0);
        ck_assert_int_eq(give("mpi-pstate", "(null)", 0), 0);
        ck_assert_int_eq(give("mpi-pstate", "", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "2ms", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "2ms", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "5ms", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-low", "1.2GHz", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "performance", 0), 0);
        ck_assert_int_eq(give("mpi-pstate-bind", "scatter", 0), 0);
        ck_assert_int_eq(stub_count("error", ""), 0);
}
END_TEST

/* The EpilogSlurmctld tells a job that used mpi-pstate (and whose node
 * records may all come late) from one that did not by this variable. */
START_TEST(submission_marks_the_job_for_the_controller)
{
        stub_reset(S_CTX_ALLOCATOR);
        slurm_spank_init(STUB_SP, 0, NULL);
        ck_assert_int_eq(give("mpi-pstate", "profile", 0), 0);
        ck_assert_int_eq(slurm_spank_init_post_opt(STUB_SP, 0, NULL), 0);
        ck_assert_str_eq(stub_env_get("SPANK_MPI_PSTATE_MODE"), "profile");
        stub_reset(S_CTX_LOCAL);
        slurm_spank_init(STUB_SP, 0, NULL);
        ck_assert_int_eq(give("mpi-pstate", "off", 0), 0);
        ck_assert_int_eq(slurm_spank_init_post_opt(STUB_SP, 0, NULL), 0);
        ck_assert_ptr_null(stub_env_get("SPANK_MPI_PSTATE_MODE"));
        ck_assert_int_eq(stub_count("error", ""), 0);
}
END_TEST

START_TEST(site_limits_at_submit)
{
        char *args[] = {"allowed_governors=performance", "threshold_min=1ms", "allow_off=no"};

        stub_reset(S_CTX_ALLOCATOR);
        slurm_spank_init(STUB_SP, 3, args);
        ck_assert_int_ne(give("mpi-pstate-governor", "powersave", 0), 0);
        ck_assert_int_eq(stub_count("error", "governor powersave is not allowed"), 1);
        ck_assert_int_eq(give("mpi-pstate-threshold", "10us", 0), 0);
        ck_assert_int_eq(stub_count("info", "threshold 10us is below the site's minimum "
                                            "(threshold_min): using 1ms"),
                         1);
        ck_assert_int_eq(give("mpi-pstate", "off", 0), 0);
        ck_assert_int_eq(stub_count("info", "allow_off=no"), 1);
        all_messages_prefixed();
}
END_TEST

/* A typo in plugstack.conf must not fail jobs: remote init returns 0 and
 * the problem reaches the slurmd log. */
static const spank_context_t node_ctxs[] = {S_CTX_REMOTE, S_CTX_SLURMD, S_CTX_JOB_SCRIPT};

START_TEST(bad_plugstack_key_never_fails)
{
        char *args[] = {"bogus=1", "threshold_min=fast", "default_mode=profile"};

        stub_reset(node_ctxs[_i]);
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 3, args), 0);
        ck_assert_int_eq(stub_count("error", "unknown key \"bogus\""), 1);
        ck_assert_int_eq(stub_count("error", "for threshold_min"), 1);
        all_messages_prefixed();
}
END_TEST

/* On login nodes the user cannot fix it: verbose only. */
START_TEST(bad_plugstack_key_quiet_for_users)
{
        char *args[] = {"bogus=1"};

        stub_reset(S_CTX_LOCAL);
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 1, args), 0);
        ck_assert_int_eq(stub_count("error", ""), 0);
        ck_assert_int_eq(stub_count("verbose", "unknown key \"bogus\""), 1);
}
END_TEST

/* ---- remote context: a whole step against a fake node ----
 *
 * Every remote test gets its own node: a temporary directory with a fake
 * sysfs of two acpi-cpufreq CPUs (tests/unit/fakesys.h), the runtime
 * directory, an empty preload library and a fake agent (a shell script that
 * records its arguments and stops on SIGTERM), passed with the plugstack keys
 * sysroot=, runtime_dir=, preload= and agent=.  The segment goes where it
 * goes in production, /dev/shm, under a job id no real job has. */
static struct fakesys fs;
static char tmp[256], runtime[320], lib[320], agent[320], a_sysroot[320], a_runtime[340],
    a_preload[340], a_agent[340];
static char *node_args[4];
static uint32_t job;

static const char fake_agent[] =
    "#!/bin/sh\n"
    "# fake mpi-pstate-agent: keeps its arguments, stops on SIGTERM\n"
    "rec=''; for a in \"$@\"; do [ \"$prev\" = --record ] && rec=$a; prev=$a; done\n"
    "# the trap before the arguments the tests wait for: a stop may follow at once\n"
    "trap 'echo term > \"$rec.term\"; exit 0' TERM\n"
    "printf '%s\\n' \"$@\" > \"$rec.args.tmp\" && mv \"$rec.args.tmp\" \"$rec.args\"\n"
    "echo $$ > \"$rec.started\"\n"
    "while :; do sleep 0.02; done\n";

static void put_file(const char *path, const char *text, mode_t mode)
{
        FILE *f = fopen(path, "w");

        ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
        fputs(text, f);
        fclose(f);
        ck_assert_int_eq(chmod(path, mode), 0);
}

static void node_teardown(void);

static void node_setup(void)
{
        const char *t = getenv("TMPDIR");

        snprintf(tmp, sizeof(tmp), "%s/mpi-pstate-spank.XXXXXX", t && *t ? t : "/tmp");
        ck_assert(mkdtemp(tmp) != NULL);
        /* A failed assertion ends the test process without the teardown. */
        atexit(node_teardown);
        setenv("TMPDIR", tmp, 1); /* the fake sysfs goes inside */
        fakesys_init(&fs);
        fakesys_acpi_cpufreq(&fs, 2);
        snprintf(runtime, sizeof(runtime), "%s/run", tmp);
        snprintf(lib, sizeof(lib), "%s/libmpi-pstate.so", tmp);
        snprintf(agent, sizeof(agent), "%s/agent", tmp);
        put_file(lib, "", 0644);
        put_file(agent, fake_agent, 0755);
        snprintf(a_sysroot, sizeof(a_sysroot), "sysroot=%s", fs.root);
        snprintf(a_runtime, sizeof(a_runtime), "runtime_dir=%s", runtime);
        snprintf(a_preload, sizeof(a_preload), "preload=%s", lib);
        snprintf(a_agent, sizeof(a_agent), "agent=%s", agent);
        node_args[0] = a_sysroot;
        node_args[1] = a_runtime;
        node_args[2] = a_preload;
        node_args[3] = a_agent;
        /* Above every real job id of the test cluster, unique per process. */
        job = 3000000000u + (uint32_t)getpid();
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
        (void)st;
        (void)f;
        return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* The step's segment: its name ends in a random suffix, found by pattern. */
static bool find_shm(uint32_t step, char *out, size_t len)
{
        char pat[128];
        glob_t g;
        bool ok;

        snprintf(pat, sizeof(pat), "/dev/shm/mpi-pstate.%u.%u.????????????????", job, step);
        ok = glob(pat, 0, NULL, &g) == 0 && g.gl_pathc == 1 &&
             (size_t)snprintf(out, len, "%s", g.gl_pathv[0]) < len;
        globfree(&g);
        return ok;
}

static void node_teardown(void)
{
        char pat[128];
        glob_t g;

        if (!tmp[0])
                return;
        for (uint32_t step = 0; step < 4; step++) {
                snprintf(pat, sizeof(pat), "/dev/shm/mpi-pstate.%u.%u*", job, step);
                if (glob(pat, 0, NULL, &g) == 0)
                        for (size_t i = 0; i < g.gl_pathc; i++)
                                unlink(g.gl_pathv[i]);
                globfree(&g);
        }
        fakesys_cleanup(&fs);
        nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        tmp[0] = '\0';
}

/* Every cpufreq value of the fake node, for before/after comparisons.  A
 * plain file keeps the last setspeed written where the kernel would show
 * <unsupported>: setspeed counts only under userspace. */
static void snapshot(char *buf, size_t len)
{
        static const char *const attrs[] = {"scaling_governor", "scaling_min_freq",
                                            "scaling_max_freq", "scaling_setspeed"};
        size_t o = 0;

        for (unsigned p = 0; p < 2; p++) {
                char gov[64];
                bool userspace = false;

                for (size_t a = 0; a < sizeof(attrs) / sizeof(attrs[0]); a++) {
                        char rel[128], v[64];

                        snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpufreq/policy%u/%s", p, attrs[a]);
                        fakesys_get(&fs, rel, v, sizeof(v));
                        if (a == 0) {
                                snprintf(gov, sizeof(gov), "%s", v);
                                userspace = strcmp(gov, "userspace") == 0;
                        }
                        if (a == 3 && !userspace)
                                continue;
                        o += (size_t)snprintf(buf + o, len - o, "%s=%s\n", rel, v);
                }
        }
}

static void step_path(char *buf, size_t len, uint32_t step, const char *file)
{
        snprintf(buf, len, "%s/steps/%u.%u/%s", runtime, job, step, file);
}

static bool exists(const char *path)
{
        struct stat st;

        return lstat(path, &st) == 0;
}

static bool wait_for(const char *path)
{
        /* Up to 60 s: a busy machine can take seconds to start a shell. */
        for (int i = 0; i < 6000 && !exists(path); i++)
                usleep(10000);
        return exists(path);
}

/* 1 once process pid has exited (gone, or a zombie nobody reaped yet),
 * 0 after timeout_ms. */
static int wait_exited(pid_t pid, unsigned timeout_ms)
{
        char path[64], buf[256], *p;
        unsigned waited;

        for (waited = 0; waited <= timeout_ms; waited += 10) {
                FILE *f;

                snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
                f = fopen(path, "r");
                if (!f)
                        return 1;
                p = fgets(buf, sizeof(buf), f);
                fclose(f);
                p = p ? strrchr(buf, ')') : NULL;
                if (!p || (p[1] == ' ' && p[2] == 'Z'))
                        return 1;
                usleep(10000);
        }
        return 0;
}

static char *slurp_file(const char *path, char *buf, size_t len)
{
        FILE *f = fopen(path, "r");
        size_t n;

        ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
        n = fread(buf, 1, len - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

/* The cgroup of this process (the step's first task here) as the fake
 * node shows it: a cpuset allowing every CPU in each directory from the
 * mount down to it, as ConstrainCores makes one (v1: the line of the cpuset
 * hierarchy in /proc/self/cgroup, else v2's "0::" line). */
static void fake_cpuset(void)
{
        char text[4096], rel[1024], *line, *save = NULL;
        const char *path = NULL, *file = NULL, *mount = NULL;
        FILE *f = fopen("/proc/self/cgroup", "r");
        size_t n, len;

        ck_assert_msg(f != NULL, "/proc/self/cgroup: %s", strerror(errno));
        n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = '\0';
        fclose(f);
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, ctrls[256];

                if (!c2)
                        continue;
                snprintf(ctrls, sizeof(ctrls), ",%.*s,", (int)(c2 - c1 - 1), c1 + 1);
                if (strstr(ctrls, ",cpuset,")) {
                        path = c2 + 1;
                        file = "cpuset.effective_cpus";
                        mount = "fs/cgroup/cpuset";
                        break;
                }
                if (c2 == c1 + 1 && !path) {
                        path = c2 + 1;
                        file = "cpuset.cpus.effective";
                        mount = "fs/cgroup";
                }
        }
        ck_assert_msg(path != NULL, "no cgroup line in /proc/self/cgroup");
        len = strlen(path);
        for (size_t i = 0; i <= len; i++) {
                if ((i < len && path[i] != '/') || (i == len && len && path[len - 1] == '/'))
                        continue;
                snprintf(rel, sizeof(rel), "%s%.*s/%s", mount, (int)i, path, file);
                fakesys_put(&fs, rel, 0644, "0-%d\n", CPU_SETSIZE - 1);
        }
}

/* A node without a cpuset controller whose other jobs cannot be seen: no
 * cgroup tree at all under the fake root. */
static void no_cgroups(void)
{
        char path[1024];

        fakesys_path(&fs, "fs/cgroup", path, sizeof(path));
        nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        ck_assert(!exists(path));
}

/* The number of cores Slurm counts on this node (spank/placement.h). */
static int node_cores(void)
{
        hwloc_topology_t topo;
        int n;

        ck_assert_int_eq(mpi_pstate_placement_topology_load(&topo, NULL), 0);
        n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        if (n <= 0)
                n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
        hwloc_topology_destroy(topo);
        return n;
}

/* A remote step of job `job` on the fake node, two local tasks on CPUs 0-1,
 * in a cgroup whose cpuset allows them. */
static void remote_step(uint32_t step_id, char **extra, int nextra)
{
        char *args[16];
        int n = 0;

        for (int i = 0; i < 4; i++)
                args[n++] = node_args[i];
        for (int i = 0; i < nextra && n < 16; i++)
                args[n++] = extra[i];
        stub_reset(S_CTX_REMOTE);
        stub.job_id = job;
        stub.step_id = step_id;
        stub.local_tasks = 2;
        stub.uid = getuid();
        stub.gid = getgid();
        stub.step_cores = "0-1";
        stub.job_cores = "0-1";
        stub.cpus_per_task = 1;
        fake_cpuset();
        ck_assert_int_eq(slurm_spank_init(STUB_SP, n, args), 0);
}

static int two_cpus(void)
{
        return sysconf(_SC_NPROCESSORS_ONLN) >= 2;
}

static void run_tasks_and_exit(void)
{
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_exit(STUB_SP, 0, NULL), 0);
        stub.task_id = 1;
        ck_assert_int_eq(slurm_spank_task_exit(STUB_SP, 0, NULL), 0);
        stub.task_id = -1;
        ck_assert_int_eq(slurm_spank_exit(STUB_SP, 0, NULL), 0);
}

/* The whole life of an "on" step: policy saved and set, segment, agent,
 * pinning, task environment, agent stopped after the last task, every
 * domain restored. */
START_TEST(remote_step_full_cycle)
{
        char before[2048], during[2048], after[2048], path[512], buf[4096], shm[128];
        struct stat st;
        cpu_set_t set;

        snapshot(before, sizeof(before));
        remote_step(0, NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "(null)", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "2ms", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-low", "1.2GHz", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "powersave", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);

        /* The step's policy, with the originals saved first. */
        snapshot(during, sizeof(during));
        ck_assert_ptr_nonnull(strstr(during, "policy0/scaling_governor=powersave"));
        ck_assert_ptr_nonnull(strstr(during, "policy1/scaling_governor=powersave"));
        snprintf(path, sizeof(path), "%s/restore/policy0", runtime);
        ck_assert_ptr_nonnull(strstr(slurp_file(path, buf, sizeof(buf)), "governor=performance"));
        ck_assert(find_shm(0, shm, sizeof(shm)));
        ck_assert_int_eq(lstat(shm, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_uint_eq(st.st_uid, getuid());
        ck_assert_uint_eq((unsigned)(st.st_mode & 0777), 0600);

        /* The agent, detached, with the step's settings. */
        step_path(path, sizeof(path), 0, "agent.json.args");
        ck_assert(wait_for(path)); /* the fake renames it into place: complete */
        slurp_file(path, buf, sizeof(buf));
        ck_assert_ptr_nonnull(strstr(buf, "--mpi-pstate\non\n"));
        ck_assert_ptr_nonnull(strstr(buf, "--mpi-pstate-threshold\n2000\n"));
        ck_assert_ptr_nonnull(strstr(buf, "--mpi-pstate-low\n1200000\n"));
        ck_assert_ptr_nonnull(strstr(buf, "--cpus\n0-1\n"));
        ck_assert_msg(strstr(buf, "--mpi-pstate-governor\npowersave\n") != NULL, "%s", buf);
        ck_assert_ptr_nonnull(strstr(buf, "--mechanism\nmax_freq\n"));
        ck_assert_ptr_nonnull(strstr(buf, "--keep-shm\n"));
        ck_assert_ptr_nonnull(strstr(buf, shm));
        step_path(path, sizeof(path), 0, "agent.pid");
        ck_assert(exists(path));

        /* Task 1: pinned to the second core, its environment. */
        stub.task_id = 1;
        stub_env_put("LD_PRELOAD", "/opt/user/a.so /opt/user/b.so");
        ck_assert_int_eq(slurm_spank_task_init_privileged(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        if (two_cpus()) {
                ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
                ck_assert_int_eq(CPU_COUNT(&set), 1);
                ck_assert(CPU_ISSET(1, &set));
        }
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_MODE"), "on");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_THRESHOLD"), "2000");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_LOW"), "1200000");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_GOVERNOR"), "powersave");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_BIND"), "cores");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_SHM"), shm);
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_LOCAL_RANK"), "1");
        snprintf(buf, sizeof(buf), "%s:/opt/user/a.so:/opt/user/b.so", lib);
        ck_assert_str_eq(stub_env_get("LD_PRELOAD"), buf);

        /* The last task stops the agent; the exit hook restores. */
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_exit(STUB_SP, 0, NULL), 0);
        step_path(path, sizeof(path), 0, "agent.json.term");
        ck_assert(!exists(path));
        stub.task_id = 1;
        ck_assert_int_eq(slurm_spank_task_exit(STUB_SP, 0, NULL), 0);
        ck_assert(exists(path));
        step_path(path, sizeof(path), 0, "agent.pid");
        ck_assert(!exists(path));
        stub.task_id = -1;
        ck_assert_int_eq(slurm_spank_exit(STUB_SP, 0, NULL), 0);
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
        snprintf(path, sizeof(path), "%s/restore/policy0", runtime);
        ck_assert(!exists(path));
        /* The segment stays for the node epilog; the step record says what
         * happened. */
        ck_assert(exists(shm));
        step_path(path, sizeof(path), 0, "plugin.json");
        slurp_file(path, buf, sizeof(buf));
        ck_assert_ptr_nonnull(strstr(buf, "\"mode\":\"on\""));
        ck_assert_ptr_nonnull(strstr(buf, "\"status\":\"set\",\"governor\":\"powersave\""));
        ck_assert_ptr_nonnull(strstr(buf, "\"agent\":{\"status\":\"stopped\""));
        ck_assert_ptr_nonnull(strstr(buf, "\"restore\":{\"state\":\"done\",\"restored\":2"));
        /* The segment as the plugin made it: name, (dev, ino), the slot count. */
        snprintf(path, sizeof(path),
                 "\"segments\":[{\"name\":\"%s\",\"dir\":\"/dev/shm\",\"dev\":%llu,\"ino\":%llu,"
                 "\"nslots\":2,\"bytes\":36864,\"uid\":%u}]",
                 strrchr(shm, '/') + 1, (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino, (unsigned)getuid());
        ck_assert_msg(strstr(buf, path) != NULL, "%s", buf);
        ck_assert_int_eq(stub_count("verbose", "2 domain(s): 2 set"), 1);
        ck_assert_int_eq(stub_count("error", ""), 0);
        all_messages_prefixed();
}
END_TEST

/* Governor keep, mechanism auto, acpi-cpufreq: the agent will use setspeed,
 * so the step runs under userspace at full speed. */
START_TEST(remote_keep_governor_prepares_setspeed)
{
        char during[2048], path[512], buf[4096];

        remote_step(0, NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        snapshot(during, sizeof(during));
        ck_assert_ptr_nonnull(strstr(during, "policy1/scaling_governor=userspace"));
        ck_assert_ptr_nonnull(strstr(during, "policy1/scaling_setspeed=3000000"));
        step_path(path, sizeof(path), 0, "agent.json.args");
        ck_assert(wait_for(path));
        ck_assert_ptr_nonnull(
            strstr(slurp_file(path, buf, sizeof(buf)), "--mechanism\nsetspeed\n"));
        run_tasks_and_exit();
}
END_TEST

/* Slurm set the step's frequencies (srun --cpu-freq reaches the step as
 * SLURM_CPU_FREQ_REQ; slurm.conf's CpuFreqDef applies to every step): the
 * plugin saves, writes nothing, does not apply its governor, and hands the
 * agent a mechanism that needs no governor change. */
START_TEST(remote_slurm_frequency_setting_wins)
{
        char during[2048], before[2048], after[2048], path[512], buf[4096], conf[600];
        FILE *f;

        if (_i == 1) {
                snprintf(conf, sizeof(conf), "%s/slurm.conf", tmp);
                f = fopen(conf, "w");
                ck_assert_ptr_nonnull(f);
                fputs("CpuFreqDef=Performance\nCpuFreqGovernors=Performance,PowerSave\n", f);
                fclose(f);
                setenv("SLURM_CONF", conf, 1);
        }
        snapshot(before, sizeof(before));
        remote_step(0, NULL, 0);
        if (_i == 0)
                stub_env_put("SLURM_CPU_FREQ_REQ", "2000000");
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "powersave", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        snapshot(during, sizeof(during));
        ck_assert_str_eq(during, before);
        ck_assert_int_eq(stub_count("info", "--mpi-pstate-governor=powersave not applied"), 1);
        step_path(path, sizeof(path), 0, "agent.json.args");
        ck_assert(wait_for(path));
        ck_assert_ptr_nonnull(
            strstr(slurp_file(path, buf, sizeof(buf)), "--mechanism\nmax_freq\n"));
        ck_assert_ptr_nonnull(strstr(buf, "--mpi-pstate-governor\nkeep\n"));
        ck_assert_ptr_nonnull(strstr(buf, "--allow-governor\nno\n"));
        run_tasks_and_exit();
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
}
END_TEST

/* CpuFreqGovernors, narrowed by allowed_governors, at submit time. */
START_TEST(local_governors_are_slurms_narrowed)
{
        char conf[600], *args[] = {"allowed_governors=performance,ondemand"};
        FILE *f;

        snprintf(conf, sizeof(conf), "%s/slurm.conf", tmp);
        f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fputs("CpuFreqGovernors=OnDemand,PowerSave\n", f);
        fclose(f);
        setenv("SLURM_CONF", conf, 1);
        stub_reset(S_CTX_LOCAL);
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 1, args), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "ondemand", 0), 0);
        ck_assert_int_ne(give("mpi-pstate-governor", "powersave", 0), 0);   /* admin's narrowing */
        ck_assert_int_ne(give("mpi-pstate-governor", "performance", 0), 0); /* not Slurm's */
        ck_assert_int_eq(give("mpi-pstate-governor", "keep", 0), 0);
        ck_assert_int_eq(stub_count("error", "CpuFreqGovernors narrowed by allowed_governors: "
                                             "keep,ondemand"),
                         2);
}
END_TEST

/* The site's floor and ceiling bound the step's range. */
START_TEST(remote_site_limits_bound_the_policy)
{
        char *extra[] = {"freq_min=1.8GHz", "freq_max=2.4GHz", "mechanism=max_freq"};
        char during[2048], before[2048], after[2048];

        snapshot(before, sizeof(before));
        remote_step(0, extra, 3);
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        snapshot(during, sizeof(during));
        ck_assert_ptr_nonnull(strstr(during, "policy0/scaling_min_freq=1800000"));
        ck_assert_ptr_nonnull(strstr(during, "policy0/scaling_max_freq=2400000"));
        ck_assert_ptr_nonnull(strstr(during, "policy0/scaling_governor=performance"));
        run_tasks_and_exit();
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
}
END_TEST

/* profile: measured (segment, library, agent), but not one sysfs write. */
START_TEST(remote_profile_writes_nothing)
{
        char before[2048], during[2048], path[512], buf[4096];

        snapshot(before, sizeof(before));
        remote_step(0, NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "profile", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "powersave", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        snapshot(during, sizeof(during));
        ck_assert_str_eq(during, before);
        snprintf(path, sizeof(path), "%s/restore/policy0", runtime);
        ck_assert(!exists(path));
        step_path(path, sizeof(path), 0, "agent.json.args");
        ck_assert(wait_for(path));
        ck_assert_ptr_nonnull(
            strstr(slurp_file(path, buf, sizeof(buf)), "--mpi-pstate\nprofile\n"));
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_MODE"), "profile");
        ck_assert_str_eq(stub_env_get("LD_PRELOAD"), lib);
        run_tasks_and_exit();
        step_path(path, sizeof(path), 0, "plugin.json");
        ck_assert_ptr_nonnull(
            strstr(slurp_file(path, buf, sizeof(buf)), "\"status\":\"untouched\""));
}
END_TEST

START_TEST(site_defaults_reach_tasks)
{
        char *args[] = {"default_mode=profile", "default_threshold=1ms", "default_bind=compact"};

        remote_step(3, args, 3);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 3, args), 0);
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 3, args), 0);
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_MODE"), "profile");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_THRESHOLD"), "1000");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_BIND"), "compact");
        run_tasks_and_exit();
}
END_TEST

static const uint32_t not_task_steps[] = {SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT,
                                          SLURM_INTERACTIVE_STEP};

/* Not a rank: nothing of mpi-pstate, no directory, no segment, no write.
 * The batch script gets only Open MPI's switch that makes mpirun launch the
 * ranks of its own node through an srun step. */
START_TEST(batch_extern_steps_untouched)
{
        char before[2048], after[2048];

        snapshot(before, sizeof(before));
        remote_step(not_task_steps[_i], NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_init_privileged(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        run_tasks_and_exit();
        ck_assert(!exists(runtime));
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
        ck_assert_ptr_null(stub_env_get("LD_PRELOAD"));
        ck_assert_ptr_null(stub_env_get("MPI_PSTATE_MODE"));
        ck_assert_ptr_null(stub_env_get("MPI_PSTATE_SHM"));
        if (not_task_steps[_i] == SLURM_BATCH_SCRIPT) {
                ck_assert_int_eq(stub.nenv, 2);
                ck_assert_str_eq(stub_env_get("OMPI_MCA_ras_base_launch_orted_on_hn"), "1");
                ck_assert_str_eq(stub_env_get("PRTE_MCA_ras_base_launch_orted_on_hn"), "1");
        } else {
                ck_assert_int_eq(stub.nenv, 0);
        }
        ck_assert_int_eq(stub_count("debug", "is not a task step: left alone"), 1);
}
END_TEST

/* A user's own Open MPI setting wins in the batch script. */
START_TEST(batch_keeps_users_ompi_setting)
{
        remote_step(SLURM_BATCH_SCRIPT, NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        stub_env_put("OMPI_MCA_ras_base_launch_orted_on_hn", "0");
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        ck_assert_str_eq(stub_env_get("OMPI_MCA_ras_base_launch_orted_on_hn"), "0");
        ck_assert_int_eq(stub.nenv, 1);
}
END_TEST

START_TEST(off_step_untouched)
{
        char before[2048], after[2048];

        /* A job step without the option, at the built-in default: off. */
        snapshot(before, sizeof(before));
        remote_step(0, NULL, 0);
        post_opt_and_fork(STUB_SP, 0, NULL);
        stub.task_id = 0;
        slurm_spank_task_init_privileged(STUB_SP, 0, NULL);
        slurm_spank_task_init(STUB_SP, 0, NULL);
        run_tasks_and_exit();
        ck_assert_int_eq(stub.nenv, 0);
        ck_assert(!exists(runtime));
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
}
END_TEST

/* An MPI launcher's daemon (orted, hydra_pmi_proxy): the job's cores, no
 * slot index of its own (the launcher gives each rank one), and no pinning
 * below the job's cores. */
START_TEST(launcher_daemon_gets_the_jobs_cores)
{
        char *argv[] = {"/usr/bin/hydra_pmi_proxy", "--control-port", "n1:1234", NULL};
        char path[512], buf[4096];
        cpu_set_t set;

        remote_step(1, NULL, 0);
        stub.local_tasks = 1;
        stub.step_cores = "0";
        stub.argc = 3;
        stub.argv = argv;
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        step_path(path, sizeof(path), 1, "agent.json.args");
        ck_assert(wait_for(path));
        ck_assert_ptr_nonnull(strstr(slurp_file(path, buf, sizeof(buf)), "--cpus\n0-1\n"));
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_init_privileged(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        ck_assert_ptr_null(stub_env_get("MPI_PSTATE_LOCAL_RANK"));
        ck_assert_ptr_nonnull(stub_env_get("MPI_PSTATE_SHM"));
        if (two_cpus()) {
                ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
                ck_assert(CPU_ISSET(0, &set) && CPU_ISSET(1, &set));
        }
        step_path(path, sizeof(path), 1, "plugin.json");
        ck_assert_ptr_nonnull(strstr(slurp_file(path, buf, sizeof(buf)), "\"launcher\":true"));
        stub.task_id = 0;
        slurm_spank_task_exit(STUB_SP, 0, NULL);
        slurm_spank_exit(STUB_SP, 0, NULL);
}
END_TEST

/* An explicit --cpu-bind wins, "none" included: the task keeps exactly what
 * task/affinity gave it, in mode on too; "verbose" alone is no binding. */
static const char *const bind_types[] = {"map_cpu:", "none", "cores", "verbose,", ""};

START_TEST(user_cpu_bind_respected)
{
        const char *const *types = bind_types;
        cpu_set_t set;

        if (!two_cpus())
                return;
        {
                int i = _i;
                bool ours = i >= 3;

                remote_step(0, NULL, 0);
                stub_env_put("SLURM_CPU_BIND_TYPE", types[i]);
                ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
                ck_assert_int_eq(give("mpi-pstate-bind", "none", 1), 0);
                ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
                stub.task_id = 0;
                ck_assert_int_eq(slurm_spank_task_init_privileged(STUB_SP, 0, NULL), 0);
                /* What task/affinity did for --cpu-bind=map_cpu:1 */
                CPU_ZERO(&set);
                CPU_SET(1, &set);
                ck_assert_int_eq(sched_setaffinity(0, sizeof(set), &set), 0);
                ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
                ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
                /* ours: bind none puts every CPU of the step back */
                ck_assert_msg(CPU_COUNT(&set) == (ours ? 2 : 1), "type \"%s\": %d CPUs", types[i],
                              CPU_COUNT(&set));
                ck_assert(CPU_ISSET(1, &set));
                run_tasks_and_exit();
        }
}
END_TEST

/* profile, also as the site's default_mode, never changes a task's
 * placement: not in task_init_privileged, not in task_init. */
START_TEST(profile_never_pins)
{
        char *site[] = {"default_mode=profile", "default_bind=compact"};
        cpu_set_t set, mine;

        if (!two_cpus())
                return;
        {
                int by_site = _i;

                remote_step(0, by_site ? site : NULL, by_site ? 2 : 0);
                if (!by_site)
                        ck_assert_int_eq(give("mpi-pstate", "profile", 1), 0);
                ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
                CPU_ZERO(&mine);
                CPU_SET(1, &mine);
                ck_assert_int_eq(sched_setaffinity(0, sizeof(mine), &mine), 0);
                stub.task_id = 0;
                ck_assert_int_eq(slurm_spank_task_init_privileged(STUB_SP, 0, NULL), 0);
                ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
                ck_assert(CPU_EQUAL(&set, &mine));
                ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
                ck_assert_str_eq(stub_env_get("MPI_PSTATE_MODE"), "profile");
                ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
                ck_assert(CPU_EQUAL(&set, &mine));
                run_tasks_and_exit();
        }
}
END_TEST

/* srun --container=BUNDLE whose root lacks the library: not preloaded (no
 * ld.so message in the container), the step record says why; with the
 * site's bind mount of the library's directory in config.json it is. */
START_TEST(oci_container_without_library)
{
        char bundle[400], path[512], buf[8192];
        bool bound = _i == 1;

        remote_step(0, NULL, 0);
        snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
        ck_assert_int_eq(mkdir(bundle, 0755), 0);
        snprintf(path, sizeof(path), "%s/rootfs", bundle);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/config.json", bundle);
        snprintf(buf, sizeof(buf),
                 "{\"root\":{\"path\":\"rootfs\"},\"mounts\":[{\"destination\":\"%s\","
                 "\"type\":\"bind\",\"source\":\"%s\"}]}",
                 bound ? tmp : "/proc", bound ? tmp : "proc");
        put_file(path, buf, 0644);
        stub_env_put("SLURM_CONTAINER", bundle);
        ck_assert_int_eq(give("mpi-pstate", "profile", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_init_privileged(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        step_path(path, sizeof(path), 0, "plugin.json");
        slurp_file(path, buf, sizeof(buf));
        ck_assert_ptr_nonnull(strstr(buf, "\"container\":\"oci\""));
        if (bound) {
                ck_assert_str_eq(stub_env_get("LD_PRELOAD"), lib);
                ck_assert_ptr_null(stub_env_get("MPI_PSTATE_UNMEASURED"));
                ck_assert_ptr_nonnull(strstr(buf, "\"unmeasured\":null"));
        } else {
                ck_assert_ptr_null(stub_env_get("LD_PRELOAD"));
                ck_assert_str_eq(stub_env_get("MPI_PSTATE_UNMEASURED"), "container");
                ck_assert_ptr_nonnull(strstr(buf, "\"preload\":null"));
                ck_assert_ptr_nonnull(strstr(buf, "\"unmeasured\":\"container\""));
        }
        /* the segment and agent are there all the same */
        ck_assert_ptr_nonnull(stub_env_get("MPI_PSTATE_SHM"));
        run_tasks_and_exit();
}
END_TEST

/* A plugin ahead of mpi-pstate (pyxis) moved the task into another root
 * that lacks the library: task_init sees it from the task itself. */
START_TEST(task_moved_to_root_without_library)
{
        char newroot[400];
        pid_t pid;
        int status;

        if (geteuid() != 0)
                return; /* chroot needs root */
        remote_step(0, NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "profile", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        snprintf(newroot, sizeof(newroot), "%s/newroot", tmp);
        ck_assert_int_eq(mkdir(newroot, 0755), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (chroot(newroot) != 0 || chdir("/") != 0)
                        _exit(10);
                stub.task_id = 0;
                slurm_spank_task_init_privileged(STUB_SP, 0, NULL);
                slurm_spank_task_init(STUB_SP, 0, NULL);
                if (stub_env_get("LD_PRELOAD"))
                        _exit(1);
                if (!stub_env_get("MPI_PSTATE_UNMEASURED"))
                        _exit(2);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
        /* the same task without the move is preloaded */
        stub.task_id = 1;
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        ck_assert_str_eq(stub_env_get("LD_PRELOAD"), lib);
        run_tasks_and_exit();
}
END_TEST

/* The task plugin binds after task_init_privileged: task_init puts the
 * mpi-pstate placement back (bind none: every CPU of the step). */
START_TEST(pinning_survives_the_task_plugin)
{
        cpu_set_t set;

        if (!two_cpus())
                return;
        remote_step(0, NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-bind", "none", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        stub.task_id = 1;
        ck_assert_int_eq(slurm_spank_task_init_privileged(STUB_SP, 0, NULL), 0);
        CPU_ZERO(&set);
        CPU_SET(0, &set); /* task/affinity's own choice */
        ck_assert_int_eq(sched_setaffinity(0, sizeof(set), &set), 0);
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
        ck_assert(CPU_ISSET(0, &set) && CPU_ISSET(1, &set));
        run_tasks_and_exit();
}
END_TEST

/* No agent installed: the step is measured, its policy set and restored,
 * and the record says the agent is absent. */
START_TEST(absent_agent_is_not_fatal)
{
        char missing[400], before[2048], after[2048], path[512], buf[4096];
        char *extra[1] = {missing};

        snprintf(missing, sizeof(missing), "agent=%s/no-such-agent", tmp);
        snapshot(before, sizeof(before));
        remote_step(0, extra, 1);
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(stub_count("verbose", "no agent at"), 1);
        run_tasks_and_exit();
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
        step_path(path, sizeof(path), 0, "plugin.json");
        ck_assert_ptr_nonnull(
            strstr(slurp_file(path, buf, sizeof(buf)), "\"agent\":{\"status\":\"absent\""));
}
END_TEST

/* A file planted under the name of earlier releases (a symlink to a file of
 * someone else) neither blocks the step nor is followed: the
 * segment's name has a suffix nobody can guess. */
START_TEST(planted_segment_name_replaced)
{
        char planted[128], shm[128], victim[400], buf[16];
        struct stat st;

        snprintf(planted, sizeof(planted), "/dev/shm/mpi-pstate.%u.0", job);
        snprintf(victim, sizeof(victim), "%s/victim", tmp);
        put_file(victim, "keep", 0644);
        ck_assert_int_eq(symlink(victim, planted), 0);
        remote_step(0, NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "profile", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        ck_assert(find_shm(0, shm, sizeof(shm)));
        ck_assert_int_eq(lstat(shm, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_int_eq(lstat(planted, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        ck_assert_str_eq(slurp_file(victim, buf, sizeof(buf)), "keep");
        run_tasks_and_exit();
}
END_TEST

/* slurmstepd killed before its exit hook: the job epilog stops the agent
 * that outlived it and restores every domain of the job. */
START_TEST(job_epilog_backstop_restores_a_killed_step)
{
        char before[2048], after[2048], path[512];
        pid_t pid;
        int status;

        snapshot(before, sizeof(before));
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                remote_step(0, NULL, 0);
                give("mpi-pstate", "on", 1);
                give("mpi-pstate-governor", "powersave", 1);
                post_opt_and_fork(STUB_SP, 0, NULL);
                _exit(0); /* no task_exit, no exit hook */
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        step_path(path, sizeof(path), 0, "agent.json.started");
        ck_assert(wait_for(path));
        snapshot(after, sizeof(after));
        ck_assert_str_ne(after, before);

        stub_reset(S_CTX_JOB_SCRIPT);
        stub.job_id = job;
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 4, node_args), 0);
        ck_assert_int_eq(slurm_spank_job_epilog(STUB_SP, 4, node_args), 0);
        step_path(path, sizeof(path), 0, "agent.json.term");
        ck_assert(exists(path));
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
        ck_assert_int_eq(stub_count("error", "outlived its step: stopped"), 1);
        ck_assert_int_eq(stub_count("error", "job epilog restored 2 domain(s)"), 1);
}
END_TEST

/* Cores Slurm names that this node does not have (slurm.conf and the
 * hardware disagree): nothing is written, no agent; tasks are measured. */
START_TEST(unknown_cores_touch_nothing)
{
        char before[2048], after[2048], path[512];

        snapshot(before, sizeof(before));
        remote_step(0, NULL, 0);
        stub.step_cores = "0-511";
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(stub_count("error", "allocated cores"), 1);
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
        step_path(path, sizeof(path), 0, "agent.json.args");
        usleep(200000);
        ck_assert(!exists(path));
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        ck_assert_str_eq(stub_env_get("LD_PRELOAD"), lib);
        run_tasks_and_exit();
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
}
END_TEST

/* No cpuset file (cgroup v2 without the cpuset controller for the job) and
 * nothing to tell whether another job runs on the step's cores: a job
 * given every core of the node but one leaves them alone, says so once at
 * info level and in its record, starts no agent; its tasks are still
 * measured. */
START_TEST(no_cpuset_leaves_shared_cores_alone)
{
        char before[2048], after[2048], path[512], buf[4096], cores[32], forged[32];
        int n = node_cores();

        ck_assert_int_ge(n, 2);
        /* every core of the node but core 0 */
        if (n == 2)
                snprintf(cores, sizeof(cores), "1");
        else
                snprintf(cores, sizeof(cores), "1-%d", n - 1);
        snapshot(before, sizeof(before));
        remote_step(0, NULL, 0);
        no_cgroups();
        stub.job_cores = cores;
        stub.step_cores = "1";
        stub.local_tasks = 1;
        /* the environment is the user's to set: it counts for nothing */
        snprintf(forged, sizeof(forged), "%ld", sysconf(_SC_NPROCESSORS_CONF));
        stub_env_put("SLURM_JOB_CPUS_PER_NODE", forged);
        stub_env_put("SLURM_CPUS_ON_NODE", forged);
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "powersave", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
        ck_assert_int_eq(stub_count("info", "no cpuset file and the node's other jobs cannot be "
                                            "seen"),
                         1);
        ck_assert_int_eq(stub_count("info", "are left alone"), 1);
        ck_assert_int_eq(stub_count("verbose", "the step's CPUs are its allocated cores"), 0);
        step_path(path, sizeof(path), 0, "plugin.json");
        slurp_file(path, buf, sizeof(buf));
        ck_assert_msg(strstr(buf, "\"left_alone\":\"no cpuset file and the node's other jobs "
                                  "cannot be seen\"") != NULL,
                      "%s", buf);
        ck_assert_msg(strstr(buf, "\"cpus\":\"\"") != NULL, "%s", buf);
        ck_assert_msg(strstr(buf, "\"agent\":{\"status\":\"none\"") != NULL, "%s", buf);
        ck_assert_ptr_null(strstr(buf, "\"status\":\"set\""));
        for (int p = 0; p < 2; p++) { /* released for whoever runs there */
                snprintf(path, sizeof(path), "%s/restore/policy%d", runtime, p);
                ck_assert_msg(!exists(path), "%s", path);
        }
        stub.task_id = 0;
        ck_assert_int_eq(slurm_spank_task_init(STUB_SP, 0, NULL), 0);
        ck_assert_ptr_nonnull(stub_env_get("MPI_PSTATE_SHM"));
        ck_assert_str_eq(stub_env_get("LD_PRELOAD"), lib);
        ck_assert_int_eq(slurm_spank_task_exit(STUB_SP, 0, NULL), 0);
        stub.task_id = -1;
        ck_assert_int_eq(slurm_spank_exit(STUB_SP, 0, NULL), 0);
        snapshot(after, sizeof(after));
        ck_assert_str_eq(after, before);
        ck_assert_int_eq(stub_count("error", ""), 0);
        all_messages_prefixed();
}
END_TEST

/* No cpuset file, but the job was allocated every core of the node (its
 * credential's cores, not the environment the user sets): nobody else is
 * there, the step is managed as usual. */
START_TEST(no_cpuset_whole_node_is_managed)
{
        char cores[32], path[512], buf[4096], during[2048];
        int n = node_cores();

        ck_assert_int_ge(n, 2);
        snprintf(cores, sizeof(cores), "0-%d", n - 1);
        remote_step(0, NULL, 0);
        no_cgroups();
        stub.job_cores = cores;
        ck_assert_int_eq(give("mpi-pstate", "on", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "powersave", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        snapshot(during, sizeof(during));
        ck_assert_ptr_nonnull(strstr(during, "policy0/scaling_governor=powersave"));
        ck_assert_ptr_nonnull(strstr(during, "policy1/scaling_governor=powersave"));
        ck_assert_int_eq(stub_count("verbose", "no cpuset file and the job has every core of the "
                                               "node: the step's CPUs are its allocated cores"),
                         1);
        ck_assert_int_eq(stub_count("info", "left alone"), 0);
        step_path(path, sizeof(path), 0, "plugin.json");
        slurp_file(path, buf, sizeof(buf));
        ck_assert_ptr_null(strstr(buf, "\"left_alone\""));
        ck_assert_ptr_nonnull(strstr(buf, "\"agent\":{\"status\":\"started\""));
        run_tasks_and_exit();
}
END_TEST

/* An agent that dies at once (bad argument, crash) is reported, not waited for. */
START_TEST(agent_dying_early_is_reported)
{
        char path[512], buf[4096];

        put_file(agent, "#!/bin/sh\nexit 2\n", 0755);
        remote_step(0, NULL, 0);
        ck_assert_int_eq(give("mpi-pstate", "profile", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        step_path(path, sizeof(path), 0, "agent.pid");
        /* Until it has exited, however slow a busy machine makes its start
         * (a fixed 200 ms sleep was not always enough). */
        ck_assert_msg(wait_exited(atoi(slurp_file(path, buf, sizeof(buf))), 60000),
                      "the agent never exited");
        run_tasks_and_exit();
        ck_assert_int_eq(stub_count("error", "had exited before the step ended"), 1);
        step_path(path, sizeof(path), 0, "plugin.json");
        ck_assert_ptr_nonnull(
            strstr(slurp_file(path, buf, sizeof(buf)), "\"agent\":{\"status\":\"exited\""));
}
END_TEST

/* runtime_dir=...%h... keeps the records of several slurmd on one machine
 * apart (test cluster): the host name goes into the path. */
START_TEST(runtime_dir_host_escape)
{
        char tmpl[400], host[128], path[512];
        char *extra[1] = {tmpl};

        snprintf(tmpl, sizeof(tmpl), "runtime_dir=%s/%%h/run", tmp);
        ck_assert_int_eq(gethostname(host, sizeof(host)), 0);
        host[strcspn(host, ".")] = '\0';
        remote_step(0, extra, 1);
        ck_assert_int_eq(give("mpi-pstate", "profile", 1), 0);
        ck_assert_int_eq(post_opt_and_fork(STUB_SP, 0, NULL), 0);
        snprintf(path, sizeof(path), "%s/%s/run/steps/%u.0/plugin.json", tmp, host, job);
        ck_assert(exists(path));
        run_tasks_and_exit();
}
END_TEST

/* Values reach slurmstepd only after the login node accepted them; if the
 * node's configuration disagrees, the step goes on with the site default. */
START_TEST(remote_never_fails_on_values)
{
        char *args[] = {"allowed_governors=performance", "default_governor=performance"};

        remote_step(0, args, 2);
        ck_assert_int_eq(give("mpi-pstate", "profile", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-governor", "powersave", 1), 0);
        ck_assert_int_eq(give("mpi-pstate-threshold", "abc", 1), 0);
        ck_assert_int_eq(stub_count("error", "governor powersave is not allowed"), 1);
        ck_assert_int_eq(stub_count("error", "invalid value \"abc\""), 1);
        post_opt_and_fork(STUB_SP, 2, args);
        stub.task_id = 0;
        slurm_spank_task_init(STUB_SP, 2, args);
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_GOVERNOR"), "performance");
        ck_assert_str_eq(stub_env_get("MPI_PSTATE_THRESHOLD"), "500");
        run_tasks_and_exit();
}
END_TEST

START_TEST(job_script_hooks_read_options_and_return_0)
{
        stub_reset(S_CTX_JOB_SCRIPT);
        stub.job_id = 7;
        ck_assert_int_eq(slurm_spank_init(STUB_SP, 0, NULL), 0);
        stub.getopt_given[1] = 1; /* --mpi-pstate-threshold=garbage reached the prolog */
        stub.getopt_value[1] = "garbage";
        ck_assert_int_eq(slurm_spank_job_prolog(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(slurm_spank_job_epilog(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(stub_count("verbose", "invalid value \"garbage\""), 2);
        ck_assert_int_eq(stub_count("error", ""), 0);
}
END_TEST

START_TEST(job_script_without_init)
{
        /* Even if Slurm skipped init in this context, the table is usable. */
        stub_reset(S_CTX_JOB_SCRIPT);
        stub.getopt_given[0] = 1;
        stub.getopt_value[0] = "";
        ck_assert_int_eq(slurm_spank_job_epilog(STUB_SP, 0, NULL), 0);
        ck_assert_int_eq(stub_count("error", ""), 0);
}
END_TEST

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
extern int slurm_spank_init_failure_mode;

/* Slurm 25.05+ drains the node on a failed remote slurm_spank_init unless
 * the plugin asks for the job to fail instead. */
START_TEST(init_failure_fails_the_job_not_the_node)
{
        ck_assert_int_eq(slurm_spank_init_failure_mode, ESPANK_JOB_FAILURE);
        ck_assert_int_ne(slurm_spank_init_failure_mode, ESPANK_NODE_FAILURE);
}
END_TEST
#endif

static Suite *plugin_suite(void)
{
        Suite *s = suite_create("spank_plugin");
        TCase *tc = tcase_create("submit");

        tcase_add_loop_test(tc, registers_every_option_in_every_context, 0, 5);
        tcase_add_test(tc, bad_value_refused_at_submit);
        tcase_add_test(tc, good_values_and_repeats_accepted);
        tcase_add_test(tc, site_limits_at_submit);
        tcase_add_test(tc, submission_marks_the_job_for_the_controller);
        tcase_add_loop_test(tc, bad_plugstack_key_never_fails, 0, 3);
        tcase_add_test(tc, bad_plugstack_key_quiet_for_users);
        suite_add_tcase(s, tc);

        tc = tcase_create("remote");
        tcase_add_checked_fixture(tc, node_setup, node_teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, remote_step_full_cycle);
        tcase_add_test(tc, remote_keep_governor_prepares_setspeed);
        tcase_add_loop_test(tc, remote_slurm_frequency_setting_wins, 0, 2);
        tcase_add_test(tc, local_governors_are_slurms_narrowed);
        tcase_add_test(tc, remote_site_limits_bound_the_policy);
        tcase_add_test(tc, remote_profile_writes_nothing);
        tcase_add_test(tc, site_defaults_reach_tasks);
        tcase_add_loop_test(tc, batch_extern_steps_untouched, 0, 3);
        tcase_add_test(tc, batch_keeps_users_ompi_setting);
        tcase_add_test(tc, off_step_untouched);
        tcase_add_test(tc, launcher_daemon_gets_the_jobs_cores);
        tcase_add_loop_test(tc, user_cpu_bind_respected, 0,
                            (int)(sizeof(bind_types) / sizeof(bind_types[0])));
        tcase_add_loop_test(tc, profile_never_pins, 0, 2);
        tcase_add_loop_test(tc, oci_container_without_library, 0, 2);
        tcase_add_test(tc, task_moved_to_root_without_library);
        tcase_add_test(tc, pinning_survives_the_task_plugin);
        tcase_add_test(tc, absent_agent_is_not_fatal);
        tcase_add_test(tc, planted_segment_name_replaced);
        tcase_add_test(tc, job_epilog_backstop_restores_a_killed_step);
        tcase_add_test(tc, runtime_dir_host_escape);
        tcase_add_test(tc, unknown_cores_touch_nothing);
        tcase_add_test(tc, no_cpuset_leaves_shared_cores_alone);
        tcase_add_test(tc, no_cpuset_whole_node_is_managed);
        tcase_add_test(tc, agent_dying_early_is_reported);
        tcase_add_test(tc, remote_never_fails_on_values);
        suite_add_tcase(s, tc);

        tc = tcase_create("job_script");
        tcase_add_test(tc, job_script_hooks_read_options_and_return_0);
        tcase_add_test(tc, job_script_without_init);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
        tcase_add_test(tc, init_failure_fails_the_job_not_the_node);
#endif
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        /* The host's own slurm.conf must not narrow the governors here. */
        setenv("SLURM_CONF", "/nonexistent/slurm.conf", 1);
        /* The plugin keeps per-process state. */
        return mpi_pstate_check_main(plugin_suite(), true);
}
