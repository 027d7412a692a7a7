/* SPDX-License-Identifier: BSD-3-Clause */
/* The step's cgroup read (cgroup.h): its cpuset found from one of its
 * processes, the other running jobs' cgroups beside it, and the decision of
 * which of the step's CPUs the plugin may manage and which it leaves alone. */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cpufreq.h"
#include "safeio.h"

/* The cpuset files, most precise first: v1 (with and without the "cpuset."
 * prefix of a noprefix mount), then v2's (whose cpuset.cpus is only what
 * was asked for, often empty). */
static const char *const cpus_files[2][4] = {
    {"cpuset.effective_cpus", "effective_cpus", "cpuset.cpus", "cpus"},
    {"cpuset.cpus.effective"},
};

static int read_cpus(const char *dir, bool v2, cpu_set_t *set)
{
        char path[700], buf[4096];
        int rc = -ENOENT;

        for (size_t i = 0; i < 4 && cpus_files[v2][i] && rc == -ENOENT; i++) {
                if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, cpus_files[v2][i]) >=
                    sizeof(path))
                        return -ENAMETOOLONG;
                rc = mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0);
        }
        if (rc < 0)
                return rc;
        return mpi_pstate_cpufreq_parse_cpulist(buf, set) || CPU_COUNT(set) == 0 ? -EINVAL : 0;
}

/* One "N:controllers:path" line of /proc/<pid>/cgroup (controllers empty
 * for v2's "0::"). */
struct cg_line {
        const char *ctrls, *path;
        int ctrls_len, path_len;
};

static int proc_cgroup(const char *procroot, pid_t pid, char *buf, size_t len)
{
        char path[300];
        int n;

        snprintf(path, sizeof(path), "%s/%ld/cgroup", procroot, (long)pid);
        n = mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, len, 0, 0);
        return n < 0 ? n : 0;
}

/* The next line at *p (advanced past it), or false at the end. */
static bool next_line(const char **p, struct cg_line *l)
{
        while (**p) {
                const char *line = *p, *c1, *c2;
                size_t end = strcspn(line, "\n");

                *p = line + end + (line[end] == '\n');
                c1 = memchr(line, ':', end);
                c2 = c1 ? memchr(c1 + 1, ':', end - (size_t)(c1 + 1 - line)) : NULL;
                if (!c2)
                        continue;
                l->ctrls = c1 + 1;
                l->ctrls_len = (int)(c2 - c1 - 1);
                l->path = c2 + 1;
                l->path_len = (int)(line + end - c2 - 1);
                return true;
        }
        return false;
}

/* The cpuset cgroup of a process as a directory, from the text of its
 * /proc/<pid>/cgroup: the v1 cpuset hierarchy's line, else the v2 line ("0::"), under cgroot (or
 * its "unified" mount on a hybrid system). */
static int cgroup_dir(const char *text, const char *cgroot, char *dir, size_t len, bool *v2out)
{
        char v2[4096] = "";
        const char *p = text;
        struct cg_line l;
        int n;

        while (next_line(&p, &l)) {
                if (l.ctrls_len == 0) {
                        snprintf(v2, sizeof(v2), "%.*s", l.path_len, l.path);
                        continue;
                }
                for (const char *k = l.ctrls; k < l.ctrls + l.ctrls_len;
                     k += strcspn(k, ",:"), k += *k == ',') {
                        if (strncmp(k, "cpuset", 6) == 0 && (k[6] == ',' || k[6] == ':')) {
                                n = snprintf(dir, len, "%s/cpuset%.*s", cgroot, l.path_len, l.path);
                                *v2out = false;
                                return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
                        }
                }
        }
        if (!v2[0])
                return -ENOENT;
        for (int hybrid = 0; hybrid < 2; hybrid++) {
                cpu_set_t set;

                n = snprintf(dir, len, "%s%s%s", cgroot, hybrid ? "/unified" : "", v2);
                if (n <= 0 || (size_t)n >= len)
                        return -ENAMETOOLONG;
                *v2out = true;
                if (read_cpus(dir, true, &set) == 0)
                        return 0;
        }
        return -ENOENT;
}

/* The end of the last path component of dir[0..upto) starting with prefix
 * (its length within dir), or 0. */
static size_t component(const char *dir, size_t upto, const char *prefix)
{
        size_t found = 0, plen = strlen(prefix);

        for (size_t i = 0; i < upto; i++)
                if (dir[i] == '/' && strncmp(dir + i + 1, prefix, plen) == 0) {
                        size_t e = i + 1 + strcspn(dir + i + 1, "/");

                        if (e <= upto)
                                found = e;
                }
        return found;
}

/* Jobs found in a hierarchy without their cpusets (v1 freezer where
 * Slurm does not constrain cores): each may run on every CPU. */
#define UNCONFINED 2

static void fill(cpu_set_t *set)
{
        for (int c = 0; c < CPU_SETSIZE; c++)
                CPU_SET(c, set);
}

/* Where the process's job is when its cpuset cgroup does not say (cores
 * not constrained): the first hierarchy of its /proc/<pid>/cgroup whose path
 * has a "job_*" directory, as a directory under cgroot (v1: the mount of
 * its controller list, or of its first controller). */
static int job_hierarchy(const char *text, const char *cgroot, char *dir, size_t len)
{
        const char *p = text;
        struct cg_line l;
        int n;

        while (next_line(&p, &l)) {
                const char *job = strstr(l.path, "/job_");
                struct stat st;

                if (!job || job >= l.path + l.path_len)
                        continue;
                /* v2 ("0::"): the unified mount or a hybrid's "unified";
                 * v1: the controller list's mount, or its first one's */
                for (int k = 0; k < 2; k++) {
                        const char *name = l.ctrls_len ? l.ctrls : "unified";
                        int nl = !l.ctrls_len ? (k ? 7 : 0)
                                 : k          ? (int)strcspn(name, ",:")
                                              : l.ctrls_len;

                        if (strncmp(name, "name=", 5) == 0) {
                                name += 5;
                                nl -= 5;
                        }
                        n = snprintf(dir, len, "%s%s%.*s%.*s", cgroot, nl ? "/" : "", nl, name,
                                     l.path_len, l.path);
                        if (n > 0 && (size_t)n < len && stat(dir, &st) == 0)
                                return 0;
                }
        }
        return -ENOENT;
}

/* Whether a process is in dir or its descendants down to depth levels
 * (a job's step_*, then task_* or user/ and slurm/, then task_*). */
static bool has_procs(const char *dir, int depth)
{
        char path[700], buf[64];
        struct dirent *e;
        bool found = false;
        DIR *d;
        int n;

        if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.procs", dir) < sizeof(path)) {
                n = mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0);
                if (n > 0 || n == -EFBIG) /* pids, more than fit here */
                        return true;
        }
        if (depth == 0 || !(d = opendir(dir)))
                return false;
        while (!found && (e = readdir(d)))
                if (e->d_type == DT_DIR && e->d_name[0] != '.' &&
                    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < sizeof(path))
                        found = has_procs(path, depth - 1);
        closedir(d);
        return found;
}

/* Every "job_*" directory of parent except skip (a name) that holds a
 * process (a job that ended may leave its directory a moment longer),
 * OR-ed into out->others; counts them in out->jobs. */
static void scan_jobs(const char *parent, const char *skip, int v2,
                      struct mpi_pstate_cgroup_cpus *out)
{
        DIR *d = opendir(parent);
        struct dirent *e;

        if (!d)
                return;
        while ((e = readdir(d)) && out->jobs < MPI_PSTATE_CGROUP_MAX_JOBS) {
                char path[700];
                cpu_set_t set;

                if (strncmp(e->d_name, "job_", 4) != 0 || (skip && strcmp(e->d_name, skip) == 0))
                        continue;
                if ((size_t)snprintf(path, sizeof(path), "%s/%s", parent, e->d_name) >=
                        sizeof(path) ||
                    (v2 == UNCONFINED ? (fill(&set), false) : read_cpus(path, v2, &set) != 0) ||
                    !has_procs(path, 3))
                        continue;
                CPU_OR(&out->others, &out->others, &set);
                if (out->jobs++ == 0) /* named in the record: which job an admin looks for */
                        snprintf(out->first, sizeof(out->first), "%.63s", e->d_name);
        }
        closedir(d);
}

/* Other jobs beside the job directory dir[0..job_end): its siblings, and
 * with v1's uid_<U> level, every uid_* directory's jobs. */
static void other_jobs(const char *dir, size_t job_end, int v2, struct mpi_pstate_cgroup_cpus *out)
{
        char parent[512], job[256], grand[512];
        const char *slash;
        size_t plen;

        snprintf(parent, sizeof(parent), "%.*s", (int)job_end, dir);
        slash = strrchr(parent, '/');
        if (!slash)
                return;
        snprintf(job, sizeof(job), "%s", slash + 1);
        plen = (size_t)(slash - parent);
        parent[plen] = '\0';
        out->have_jobs = true;
        slash = strrchr(parent, '/');
        if (!slash || strncmp(slash + 1, "uid_", 4) != 0) {
                scan_jobs(parent, job, v2, out);
                return;
        }
        snprintf(grand, sizeof(grand), "%.*s", (int)(slash - parent), parent);
        {
                DIR *d = opendir(grand);
                struct dirent *e;

                if (!d)
                        return;
                while ((e = readdir(d))) {
                        char udir[700];

                        if (strncmp(e->d_name, "uid_", 4) != 0 ||
                            (size_t)snprintf(udir, sizeof(udir), "%s/%s", grand, e->d_name) >=
                                sizeof(udir))
                                continue;
                        scan_jobs(udir, strcmp(udir, parent) == 0 ? job : NULL, v2, out);
                }
                closedir(d);
        }
}

int mpi_pstate_cgroup_cpus(const char *procroot, const char *cgroot, pid_t pid,
                           struct mpi_pstate_cgroup_cpus *out, char *err, size_t errlen)
{
        static char text[16384]; /* /proc/<pid>/cgroup; slurmstepd's one thread */
        char dir[sizeof(out->dir)];
        size_t step_end, job_end;
        bool v2 = false;
        int rc;

        memset(out, 0, sizeof(*out));
        rc = proc_cgroup(procroot, pid, text, sizeof(text));
        if (rc) {
                snprintf(err, errlen, "no cpuset cgroup for pid %ld: %s", (long)pid, strerror(-rc));
                return rc;
        }
        rc = cgroup_dir(text, cgroot, dir, sizeof(dir), &v2);
        if (rc) {
                snprintf(err, errlen, "no cpuset cgroup for pid %ld: %s", (long)pid, strerror(-rc));
        } else {
                /* The step's level: its tasks' own cgroups (task_N, user/,
                 * slurm/) may be narrower or lack the file. */
                step_end = component(dir, strlen(dir), "step_");
                if (step_end)
                        dir[step_end] = '\0';
                snprintf(out->dir, sizeof(out->dir), "%s", dir);
                rc = read_cpus(dir, v2, &out->step);
                if (rc)
                        snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
        }
        job_end = rc == 0 ? component(dir, strlen(dir), "job_") : 0;
        if (job_end) {
                other_jobs(dir, job_end, v2, out);
        } else if (job_hierarchy(text, cgroot, dir, sizeof(dir)) == 0 &&
                   (job_end = component(dir, strlen(dir), "job_")) != 0) {
                /* Cores not constrained, or no cpuset to read: every other
                 * job may use them all (a job without a cpuset file would
                 * be skipped by the reading of one). */
                other_jobs(dir, job_end, UNCONFINED, out);
        }
        return rc;
}

bool mpi_pstate_cgroup_left_alone(enum mpi_pstate_cgroup_decision d)
{
        return d == MPI_PSTATE_CGROUP_OTHER_JOBS || d == MPI_PSTATE_CGROUP_UNSEEN;
}

const char *mpi_pstate_cgroup_decision_text(enum mpi_pstate_cgroup_decision d)
{
        switch (d) {
        case MPI_PSTATE_CGROUP_CONFINED:
                return "the step's cgroup cpuset";
        case MPI_PSTATE_CGROUP_EXCLUSIVE:
                return "no cpuset file and the job has every core of the node";
        case MPI_PSTATE_CGROUP_ALONE:
                return "no cpuset file and no other job runs on the node";
        case MPI_PSTATE_CGROUP_OTHER_JOBS:
                return "no cpuset file and other jobs run on the node";
        case MPI_PSTATE_CGROUP_UNSEEN:
                return "no cpuset file and the node's other jobs cannot be seen";
        }
        return "?";
}

enum mpi_pstate_cgroup_decision mpi_pstate_cgroup_decide(const struct mpi_pstate_cgroup_facts *f,
                                                         struct mpi_pstate_cgroup_verdict *v)
{
        cpu_set_t others;

        if (f->others)
                others = *f->others;
        else
                CPU_ZERO(&others);
        if (f->cpuset) {
                /* What the cpuset allows, less what another job's does. */
                CPU_AND(&v->keep, f->cpus, f->cpuset);
                CPU_XOR(&v->outside, f->cpus, &v->keep);
                CPU_AND(&v->shared, &v->keep, &others);
                CPU_XOR(&v->keep, &v->keep, &v->shared);
                return v->decision = MPI_PSTATE_CGROUP_CONFINED;
        }
        /* No cpuset: nothing confines this job's ranks nor any other job's
         * processes, so the step's CPUs are kept whole or not at all. */
        CPU_AND(&v->shared, f->cpus, &others);
        if (CPU_COUNT(&v->shared) > 0)
                v->decision = MPI_PSTATE_CGROUP_OTHER_JOBS;
        else if (f->others)
                v->decision = MPI_PSTATE_CGROUP_ALONE;
        else if (f->exclusive)
                v->decision = MPI_PSTATE_CGROUP_EXCLUSIVE;
        else
                v->decision = MPI_PSTATE_CGROUP_UNSEEN;
        if (mpi_pstate_cgroup_left_alone(v->decision)) {
                CPU_ZERO(&v->keep);
                CPU_XOR(&v->outside, f->cpus, &v->shared);
        } else {
                v->keep = *f->cpus;
                CPU_ZERO(&v->outside);
        }
        return v->decision;
}
