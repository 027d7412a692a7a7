/* SPDX-License-Identifier: BSD-3-Clause */
/* bench/step/hooks: one job step of spank_mpi_pstate.so on this machine,
 * without Slurm, timed hook by hook.
 *
 *   hooks --plugin SO|none --sysroot DIR --runtime DIR --agent PATH --preload PATH
 *         [--tasks N] [--cores LIST] [--task-ms MS] [--mode on|profile] [--job J]
 *
 * The plugin is dlopen()ed as slurmstepd does, so one binary drives any
 * build of it (bench/step/phases.py runs a baseline and a candidate build
 * interleaved); the libslurm it calls is the unit tests' stub
 * (tests/unit/spank/spank_stub.c), exported from this executable (-rdynamic).
 * The sequence is slurmstepd's for one step on one node: init and the
 * option callback, init_post_opt, then per task a forked child, held until
 * the parent has run task_post_fork for it (slurmstepd's order: the first
 * one sets the step's policy and starts the agent), that runs
 * task_init_privileged and task_init and execs /bin/true with the plugin's
 * LD_PRELOAD (task_run: fork to reaped), the rest of the task's life
 * (--task-ms, slept), task_exit per task, and exit.  With --plugin none only
 * the tasks run: the baseline of task_run.  Prints one JSON object: wall
 * milliseconds per hook, the plugin's own phase split (its debug lines
 * "step start (ms): ..." and "step end (ms): ...", empty for builds without
 * them) and its error lines.  Run as root, once per sample: a slurmstepd is
 * a fresh process per step, and the plugin keeps per-process state. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spank_stub.h"

#define MAX_TASKS 64

typedef int hook_fn(spank_t, int, char **);

struct args {
        const char *plugin, *sysroot, *runtime, *agent, *preload, *cores, *mode;
        unsigned tasks, task_ms;
        uint32_t job;
};

struct hooks {
        hook_fn *init, *post_opt, *post_fork, *task_priv, *task_init, *task_exit, *exit;
};

struct times {
        double dlopen, init, post_opt, post_fork, task_priv, task_init, task_run, task_exit, exit;
};

static double now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int usage(void)
{
        fputs("usage: hooks --plugin SO --sysroot DIR --runtime DIR --agent PATH --preload PATH\n"
              "             [--tasks N] [--cores LIST] [--task-ms MS] [--mode on|profile] "
              "[--job J]\n",
              stderr);
        return 2;
}

static int parse_args(int argc, char **argv, struct args *a)
{
        static const struct option lo[] = {
            {"plugin", 1, NULL, 'p'}, {"sysroot", 1, NULL, 's'}, {"runtime", 1, NULL, 'r'},
            {"agent", 1, NULL, 'a'},  {"preload", 1, NULL, 'l'}, {"tasks", 1, NULL, 'n'},
            {"cores", 1, NULL, 'c'},  {"task-ms", 1, NULL, 't'}, {"mode", 1, NULL, 'm'},
            {"job", 1, NULL, 'j'},    {NULL, 0, NULL, 0},
        };
        int c;

        *a = (struct args){.cores = "0",
                           .mode = "on",
                           .tasks = 1,
                           .task_ms = 2,
                           .job = 3500000000u + (uint32_t)getpid() % 100000000u};
        while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
                switch (c) {
                case 'p':
                        a->plugin = optarg;
                        break;
                case 's':
                        a->sysroot = optarg;
                        break;
                case 'r':
                        a->runtime = optarg;
                        break;
                case 'a':
                        a->agent = optarg;
                        break;
                case 'l':
                        a->preload = optarg;
                        break;
                case 'c':
                        a->cores = optarg;
                        break;
                case 'm':
                        a->mode = optarg;
                        break;
                case 'n':
                        a->tasks = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 't':
                        a->task_ms = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 'j':
                        a->job = (uint32_t)strtoul(optarg, NULL, 10);
                        break;
                default:
                        return usage();
                }
        }
        if (!a->plugin || !a->sysroot || !a->runtime || !a->agent || !a->preload || a->tasks < 1 ||
            a->tasks > MAX_TASKS || optind != argc)
                return usage();
        return 0;
}

static int load(const char *path, struct hooks *h, double *ms)
{
        double t0 = now_ms();
        void *so = dlopen(path, RTLD_NOW | RTLD_GLOBAL);

        *ms = now_ms() - t0;
        if (!so) {
                fprintf(stderr, "hooks: %s\n", dlerror());
                return 1;
        }
        h->init = (hook_fn *)dlsym(so, "slurm_spank_init");
        h->post_opt = (hook_fn *)dlsym(so, "slurm_spank_init_post_opt");
        /* optional: older builds of the plugin had none */
        h->post_fork = (hook_fn *)dlsym(so, "slurm_spank_task_post_fork");
        h->task_priv = (hook_fn *)dlsym(so, "slurm_spank_task_init_privileged");
        h->task_init = (hook_fn *)dlsym(so, "slurm_spank_task_init");
        h->task_exit = (hook_fn *)dlsym(so, "slurm_spank_task_exit");
        h->exit = (hook_fn *)dlsym(so, "slurm_spank_exit");
        if (!h->init || !h->post_opt || !h->task_priv || !h->task_init || !h->task_exit ||
            !h->exit) {
                fprintf(stderr, "hooks: %s lacks a slurm_spank_* hook\n", path);
                return 1;
        }
        return 0;
}

/* A hook's wall time in ms; the plugin never fails one (it returns 0).
 * No hook (--plugin none): nothing runs, 0 ms. */
static double timed(hook_fn *fn, int ac, char **av)
{
        double t0 = now_ms();

        if (!fn)
                return 0;
        if (fn(STUB_SP, ac, av) != 0)
                fprintf(stderr, "hooks: a hook returned non-zero\n");
        return now_ms() - t0;
}

/* What srun's --mpi-pstate=MODE does in slurmstepd: the option callback. */
static int give_mode(const char *mode)
{
        for (int i = 0; i < stub.nopts; i++)
                if (strcmp(stub.opts[i].name, "mpi-pstate") == 0)
                        return stub.opts[i].cb(stub.opts[i].val, mode, 1);
        fprintf(stderr, "hooks: option --mpi-pstate not registered\n");
        return -1;
}

/* The forked task: both per-task hooks, their times back through the pipe,
 * then the task's program, /bin/true, with the LD_PRELOAD the plugin set. */
static void run_task(const struct hooks *h, unsigned task, int fd, int go)
{
        char pre[300];
        const char *lib;
        char *envp[2] = {NULL, NULL};
        char *argv[2] = {"/bin/true", NULL};
        double t[2];
        ssize_t n;

        stub.task_id = (int)task;
        if (read(go, pre, 1) != 1) /* until the parent's task_post_fork */
                _exit(1);
        close(go);
        t[0] = timed(h->task_priv, 0, NULL);
        t[1] = timed(h->task_init, 0, NULL);
        n = write(fd, t, sizeof(t));
        close(fd);
        lib = stub_env_get("LD_PRELOAD");
        if (lib && snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib) < (int)sizeof(pre))
                envp[0] = pre;
        if (n == (ssize_t)sizeof(t))
                execve(argv[0], argv, envp);
        _exit(1);
}

/* Forks every task, as slurmstepd does; keeps the slowest child's times
 * (the tasks start in parallel). */
static int fork_tasks(const struct hooks *h, const struct args *a, pid_t *pids, double *forked,
                      struct times *t)
{
        for (unsigned i = 0; i < a->tasks; i++) {
                double ct[2] = {0, 0};
                int p[2], go[2];

                if (pipe(p) != 0 || pipe(go) != 0)
                        return 1;
                forked[i] = now_ms();
                pids[i] = fork();
                if (pids[i] < 0)
                        return 1;
                if (pids[i] == 0) {
                        close(p[0]);
                        close(go[1]);
                        run_task(h, i, p[1], go[0]);
                }
                close(p[1]);
                close(go[0]);
                stub.task_id = (int)i;
                t->post_fork += timed(h->post_fork, 0, NULL);
                stub.task_id = -1;
                if (write(go[1], "g", 1) != 1)
                        return 1;
                close(go[1]);
                if (read(p[0], ct, sizeof(ct)) != (ssize_t)sizeof(ct))
                        fprintf(stderr, "hooks: task %u reported nothing\n", i);
                close(p[0]);
                t->task_priv = ct[0] > t->task_priv ? ct[0] : t->task_priv;
                t->task_init = ct[1] > t->task_init ? ct[1] : t->task_init;
        }
        return 0;
}

static int run_step(const struct hooks *h, const struct args *a, char **pargs, int npargs,
                    struct times *t)
{
        pid_t pids[MAX_TASKS];
        double forked[MAX_TASKS];
        struct timespec nap = {.tv_sec = a->task_ms / 1000,
                               .tv_nsec = (long)(a->task_ms % 1000) * 1000000L};

        stub_reset(S_CTX_REMOTE);
        stub.job_id = a->job;
        stub.local_tasks = a->tasks;
        stub.uid = getuid();
        stub.gid = getgid();
        stub.step_cores = a->cores;
        stub.job_cores = a->cores;
        stub.cpus_per_task = 1;
        t->init = timed(h->init, npargs, pargs);
        if (h->init && give_mode(a->mode) != 0)
                return 1;
        t->post_opt = timed(h->post_opt, 0, NULL);
        if (fork_tasks(h, a, pids, forked, t) != 0)
                return 1;
        /* fork to reaped: hooks in the child, exec, the program, exit */
        for (unsigned i = 0; i < a->tasks; i++) {
                while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
                        ;
                if (now_ms() - forked[i] > t->task_run)
                        t->task_run = now_ms() - forked[i];
        }
        /* the rest of the task's life: what the agent has to start up in */
        nanosleep(&nap, NULL);
        for (unsigned i = 0; i < a->tasks; i++) {
                stub.task_id = (int)i;
                t->task_exit += timed(h->task_exit, 0, NULL);
        }
        stub.task_id = -1;
        t->exit = timed(h->exit, 0, NULL);
        return 0;
}

/* The message of the first log line at level containing needle, after it. */
static const char *log_after(const char *level, const char *needle)
{
        for (int i = 0; i < stub.nlogs; i++) {
                const char *m = strstr(stub.logs[i].msg, needle);

                if (m && (!level || strcmp(stub.logs[i].level, level) == 0))
                        return m + strlen(needle);
        }
        return "";
}

static void json_str(const char *s)
{
        putchar('"');
        for (; *s; s++)
                if (*s == '"' || *s == '\\')
                        printf("\\%c", *s);
                else if ((unsigned char)*s < 0x20)
                        printf("\\u%04x", (unsigned char)*s);
                else
                        putchar(*s);
        putchar('"');
}

static void report(const struct times *t)
{
        printf(
            "{\"dlopen\":%.3f,\"init\":%.3f,\"init_post_opt\":%.3f,\"task_post_fork\":%.3f,"
            "\"task_init_privileged\":%.3f,\"task_init\":%.3f,\"task_run\":%.3f,\"task_exit\":%.3f,"
            "\"exit\":%.3f,\"start_phases\":",
            t->dlopen, t->init, t->post_opt, t->post_fork, t->task_priv, t->task_init, t->task_run,
            t->task_exit, t->exit);
        json_str(log_after("debug", "step start (ms): "));
        printf(",\"end_phases\":");
        json_str(log_after("debug", "step end (ms): "));
        printf(",\"errors\":[");
        for (int i = 0, n = 0; i < stub.nlogs; i++)
                if (strcmp(stub.logs[i].level, "error") == 0) {
                        printf("%s", n++ ? "," : "");
                        json_str(stub.logs[i].msg);
                }
        printf("]}\n");
}

int main(int argc, char **argv)
{
        char kv[5][4200], *pargs[5], shm[96];
        glob_t g;
        struct hooks h;
        struct times t = {0};
        struct args a;
        int rc = parse_args(argc, argv, &a);

        if (rc)
                return rc;
        snprintf(kv[0], sizeof(kv[0]), "sysroot=%s", a.sysroot);
        snprintf(kv[1], sizeof(kv[1]), "runtime_dir=%s", a.runtime);
        snprintf(kv[2], sizeof(kv[2]), "preload=%s", a.preload);
        snprintf(kv[3], sizeof(kv[3]), "agent=%s", a.agent);
        for (int i = 0; i < 4; i++)
                pargs[i] = kv[i];
        memset(&h, 0, sizeof(h));
        if (strcmp(a.plugin, "none") != 0 && load(a.plugin, &h, &t.dlopen) != 0)
                return 1;
        rc = run_step(&h, &a, pargs, 4, &t);
        /* The segment stays for the node epilog in production; here nobody
         * else removes it. */
        snprintf(shm, sizeof(shm), "/dev/shm/mpi-pstate.%u.0*",
                 a.job); /* .<random>: predictable names could be squatted */
        if (glob(shm, 0, NULL, &g) == 0) {
                for (size_t i = 0; i < g.gl_pathc; i++)
                        unlink(g.gl_pathv[i]);
                globfree(&g);
        }
        if (rc == 0)
                report(&t);
        return rc;
}
