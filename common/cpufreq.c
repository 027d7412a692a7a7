#include "cpufreq.h"
#include "errmsg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parse.h"
#include "safeio.h"

/* related_cpus of a 1024-CPU package-wide policy is about 4 KiB of text. */
#define ATTR_BUF 8192

static const char *const attr_files[] = {
    [MPI_PSTATE_CPUFREQ_ATTR_MIN] = "scaling_min_freq",
    [MPI_PSTATE_CPUFREQ_ATTR_MAX] = "scaling_max_freq",
    [MPI_PSTATE_CPUFREQ_ATTR_GOVERNOR] = "scaling_governor",
    [MPI_PSTATE_CPUFREQ_ATTR_SETSPEED] = "scaling_setspeed",
};

static const char *const mech_names[] = {
    [MPI_PSTATE_CPUFREQ_MECH_AUTO] = "auto",
    [MPI_PSTATE_CPUFREQ_MECH_MAXFREQ] = "max_freq",
    [MPI_PSTATE_CPUFREQ_MECH_SETSPEED] = "setspeed",
};

static int join(char *out, size_t outlen, const char *dir, const char *file)
{
        int n = snprintf(out, outlen, "%s/%s", dir, file);

        return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

/* One sysfs value.  Only the first line counts: the kernel never returns more
 * than one for these attributes, and a plain-file test fake written through a
 * kept fd (pwrite at 0, no truncation) may carry a stale tail after it. */
static int read_attr(const char *dir, const char *file, char *buf, size_t len)
{
        char path[MPI_PSTATE_CPUFREQ_PATH_LEN + 64];
        int rc = join(path, sizeof(path), dir, file);

        if (rc)
                return rc;
        rc = mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, len, 0, 0);
        if (rc < 0)
                return rc;
        buf[strcspn(buf, "\n")] = '\0';
        return 0;
}

static int read_khz(const char *dir, const char *file, uint32_t *out)
{
        char buf[64];
        uint64_t v;
        int rc = read_attr(dir, file, buf, sizeof(buf));

        if (rc)
                return rc;
        rc = mpi_pstate_parse_u64(buf, 1, UINT32_MAX, &v);
        if (rc)
                return rc;
        *out = (uint32_t)v;
        return 0;
}

bool mpi_pstate_cpufreq_valid_name(const char *s)
{
        size_t len;

        if (!s)
                return false;
        len = strlen(s);
        return len > 0 && len < MPI_PSTATE_CPUFREQ_NAME_LEN &&
               strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == len;
}

static int read_name(const char *dir, const char *file, char out[MPI_PSTATE_CPUFREQ_NAME_LEN])
{
        char buf[64];
        int rc = read_attr(dir, file, buf, sizeof(buf));

        if (rc)
                return rc;
        if (!mpi_pstate_cpufreq_valid_name(buf))
                return -EINVAL;
        memcpy(out, buf, strlen(buf) + 1);
        return 0;
}

int mpi_pstate_cpufreq_parse_cpulist(const char *s, cpu_set_t *out)
{
        char buf[ATTR_BUF];
        char *save = NULL, *tok;
        cpu_set_t set;
        size_t len;

        if (!s)
                return -EINVAL;
        len = strlen(s);
        if (len >= sizeof(buf))
                return -E2BIG;
        memcpy(buf, s, len + 1);
        CPU_ZERO(&set);
        for (tok = strtok_r(buf, " ,\t\n", &save); tok; tok = strtok_r(NULL, " ,\t\n", &save)) {
                char *dash = strchr(tok, '-');
                uint64_t lo, hi;
                int rc;

                if (dash)
                        *dash = '\0';
                rc = mpi_pstate_parse_u64(tok, 0, CPU_SETSIZE - 1, &lo);
                if (rc)
                        return rc;
                hi = lo;
                if (dash) {
                        rc = mpi_pstate_parse_u64(dash + 1, lo, CPU_SETSIZE - 1, &hi);
                        if (rc)
                                return rc;
                }
                for (uint64_t c = lo; c <= hi; c++)
                        CPU_SET((size_t)c, &set);
        }
        *out = set;
        return 0;
}

static int parse_governors(char *buf, struct mpi_pstate_cpufreq_policy *p)
{
        char *save = NULL, *tok;

        p->ngovernors = 0;
        for (tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
                if (!mpi_pstate_cpufreq_valid_name(tok))
                        return -EINVAL;
                /* The kernel lists at most a handful; more would be a fake gone wrong. */
                if (p->ngovernors == MPI_PSTATE_CPUFREQ_MAX_GOVS)
                        return -E2BIG;
                memcpy(p->governors[p->ngovernors++], tok, strlen(tok) + 1);
        }
        return 0;
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

        return x < y ? -1 : x > y;
}

static int parse_freqs(char *buf, struct mpi_pstate_cpufreq_policy *p)
{
        char *save = NULL, *tok;
        unsigned n = 0;

        for (tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
                uint64_t v;
                int rc = mpi_pstate_parse_u64(tok, 1, UINT32_MAX, &v);

                if (rc)
                        return rc;
                if (n == MPI_PSTATE_CPUFREQ_MAX_FREQS) {
                        /* Only informational: a table too long to keep is reported as absent. */
                        p->nfreqs = 0;
                        return 0;
                }
                p->freqs[n++] = (uint32_t)v;
        }
        qsort(p->freqs, n, sizeof(p->freqs[0]), cmp_u32);
        p->nfreqs = n;
        return 0;
}

bool mpi_pstate_cpufreq_has_governor(const struct mpi_pstate_cpufreq_policy *p, const char *gov)
{
        if (!p || !gov)
                return false;
        for (unsigned i = 0; i < p->ngovernors; i++)
                if (strcmp(p->governors[i], gov) == 0)
                        return true;
        return false;
}

int mpi_pstate_cpufreq_read_settings(const struct mpi_pstate_cpufreq_policy *p,
                                     struct mpi_pstate_cpufreq_settings *out)
{
        struct mpi_pstate_cpufreq_settings s;
        int rc;

        memset(&s, 0, sizeof(s));
        rc = read_name(p->dir, "scaling_governor", s.governor);
        if (!rc)
                rc = read_khz(p->dir, "scaling_min_freq", &s.min_khz);
        if (!rc)
                rc = read_khz(p->dir, "scaling_max_freq", &s.max_khz);
        /* Outside userspace the file says "<unsupported>": there is no value to keep. */
        if (!rc && strcmp(s.governor, "userspace") == 0)
                rc = read_khz(p->dir, "scaling_setspeed", &s.setspeed_khz);
        if (rc)
                return rc;
        *out = s;
        return 0;
}

int mpi_pstate_cpufreq_refresh_settings(struct mpi_pstate_cpufreq_node *node, char *err,
                                        size_t errlen)
{
        for (unsigned i = 0; i < node->npolicies; i++) {
                struct mpi_pstate_cpufreq_policy *p = &node->policies[i];
                int rc = mpi_pstate_cpufreq_read_settings(p, &p->cur);

                if (rc) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s/scaling_governor/min/max/setspeed: %s", p->dir,
                                              strerror(-rc));
                        return rc;
                }
        }
        return 0;
}

/* Number in "policy12" / "cpu12" for ordering; legacy per-CPU dirs sort last. */
static long policy_rank(const char *name)
{
        if (strncmp(name, "policy", 6) == 0)
                return strtol(name + 6, NULL, 10);
        return CPU_SETSIZE + strtol(name + 3, NULL, 10);
}

static int cmp_policy(const void *a, const void *b)
{
        long x = policy_rank(((const struct mpi_pstate_cpufreq_policy *)a)->name);
        long y = policy_rank(((const struct mpi_pstate_cpufreq_policy *)b)->name);

        return x < y ? -1 : x > y;
}

static bool numbered(const char *s, const char *prefix)
{
        size_t n = strlen(prefix);

        return strncmp(s, prefix, n) == 0 && s[n] && strspn(s + n, "0123456789") == strlen(s + n) &&
               strlen(s + n) < 8;
}

/* Fills one policy from its directory.  -ENOENT when it has no driver (a
 * policy directory left behind without cpufreq is no frequency domain). */
static int load_policy(struct mpi_pstate_cpufreq_policy *p, const char *name, const char *dir,
                       char *err, size_t errlen)
{
        char *buf = malloc(ATTR_BUF);
        const char *what = "scaling_driver";
        int rc;

        if (!buf)
                return -ENOMEM;
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "%s", name);
        if (strlen(dir) >= sizeof(p->dir)) {
                rc = -ENAMETOOLONG;
                goto out;
        }
        memcpy(p->dir, dir, strlen(dir) + 1);
        rc = read_name(dir, "scaling_driver", p->driver);
        if (rc)
                goto out;
        what = "cpuinfo_min_freq";
        rc = read_khz(dir, what, &p->cpuinfo_min_khz);
        if (rc)
                goto out;
        what = "cpuinfo_max_freq";
        rc = read_khz(dir, what, &p->cpuinfo_max_khz);
        if (rc)
                goto out;
        what = "scaling_governor/min/max/setspeed";
        rc = mpi_pstate_cpufreq_read_settings(p, &p->cur);
        if (rc)
                goto out;
        what = "related_cpus";
        rc = read_attr(dir, what, buf, ATTR_BUF);
        if (!rc)
                rc = mpi_pstate_cpufreq_parse_cpulist(buf, &p->related);
        if (!rc && CPU_COUNT(&p->related) == 0)
                rc = -EINVAL;
        if (rc)
                goto out;
        what = "affected_cpus";
        rc = read_attr(dir, what, buf, ATTR_BUF);
        if (rc == -ENOENT) {
                p->affected = p->related;
                rc = 0;
        } else if (!rc) {
                rc = mpi_pstate_cpufreq_parse_cpulist(buf, &p->affected);
        }
        if (rc)
                goto out;
        what = "scaling_available_governors";
        rc = read_attr(dir, what, buf, ATTR_BUF);
        if (rc == -ENOENT) {
                /* Without the list the active governor is the only one we know of. */
                memcpy(p->governors[0], p->cur.governor, sizeof(p->governors[0]));
                p->ngovernors = 1;
                rc = 0;
        } else if (!rc) {
                rc = parse_governors(buf, p);
        }
        if (rc)
                goto out;
        what = "scaling_available_frequencies";
        rc = read_attr(dir, what, buf, ATTR_BUF);
        if (rc == -ENOENT)
                rc = 0; /* intel_pstate, amd-pstate: no table */
        else if (!rc)
                rc = parse_freqs(buf, p);
        if (rc)
                goto out;
        p->has_userspace = mpi_pstate_cpufreq_has_governor(p, "userspace");
        if (p->cpuinfo_min_khz > p->cpuinfo_max_khz) {
                what = "cpuinfo_min_freq > cpuinfo_max_freq";
                rc = -EINVAL;
        }
out:
        if (rc && rc != -ENOENT)
                mpi_pstate_errmsg_set(err, errlen, "%s/%s: %s", dir, what, strerror(-rc));
        free(buf);
        return rc;
}

struct dirlist {
        char (*names)[24];
        size_t n, cap;
};

static int dirlist_add(struct dirlist *l, const char *name)
{
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->names[i], name) == 0)
                        return 0;
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 16;
                void *p = realloc(l->names, cap * sizeof(*l->names));

                if (!p)
                        return -ENOMEM;
                l->names = p;
                l->cap = cap;
        }
        snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
        return 0;
}

/* cpuN/cpufreq: a symlink to the policy (its name), or a legacy per-CPU
 * directory (named "cpuN"); nothing when CPU N has no cpufreq. */
static int add_cpu_policy(const char *cpudir, const char *cpu, struct dirlist *out)
{
        char link[MPI_PSTATE_CPUFREQ_PATH_LEN], target[256];
        const char *base;
        struct stat st;
        ssize_t n;

        if (snprintf(link, sizeof(link), "%s/%s/cpufreq", cpudir, cpu) >= (int)sizeof(link))
                return 0;
        if (lstat(link, &st) != 0)
                return 0;
        if (S_ISDIR(st.st_mode))
                return dirlist_add(out, cpu);
        if (!S_ISLNK(st.st_mode))
                return 0;
        n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0)
                return 0;
        target[n] = '\0';
        base = strrchr(target, '/');
        base = base ? base + 1 : target;
        return numbered(base, "policy") ? dirlist_add(out, base) : 0;
}

/* The policies of the CPUs in `cpus` only, through their cpuN/cpufreq links:
 * no directory scan, and the rest of a large node is never read. */
static int find_policies_of(const char *cpudir, const cpu_set_t *cpus, struct dirlist *out)
{
        for (unsigned c = 0; c < CPU_SETSIZE; c++) {
                char cpu[24];
                int rc;

                if (!CPU_ISSET(c, cpus))
                        continue;
                snprintf(cpu, sizeof(cpu), "cpu%u", c);
                rc = add_cpu_policy(cpudir, cpu, out);
                if (rc)
                        return rc;
        }
        return 0;
}

/* Candidate policy directories: cpufreq/policyN, the targets of cpuN/cpufreq
 * symlinks, and legacy per-CPU cpuN/cpufreq directories (named "cpuN"). */
static int find_policies(const char *cpudir, struct dirlist *out)
{
        char path[MPI_PSTATE_CPUFREQ_PATH_LEN];
        struct dirent *de;
        DIR *d = NULL;
        int rc = join(path, sizeof(path), cpudir, "cpufreq");

        if (rc)
                return rc;
        d = opendir(path);
        while (d && (de = readdir(d)))
                if (numbered(de->d_name, "policy") && (rc = dirlist_add(out, de->d_name)))
                        goto out;
        if (d)
                closedir(d);
        d = opendir(cpudir);
        if (!d) {
                rc = -errno;
                goto out;
        }
        while ((de = readdir(d))) {
                if (!numbered(de->d_name, "cpu"))
                        continue;
                rc = add_cpu_policy(cpudir, de->d_name, out);
                if (rc)
                        goto out;
        }
out:
        if (d)
                closedir(d);
        return rc;
}

/* Node-wide attributes; the boost switch only with_boost (a job step's
 * discovery has no use for it). */
static void read_node_extras(const char *cpudir, struct mpi_pstate_cpufreq_node *node,
                             bool with_boost)
{
        char dir[MPI_PSTATE_CPUFREQ_PATH_LEN], buf[64];
        uint64_t v;

        node->boost_on = -1;
        if (with_boost && join(dir, sizeof(dir), cpudir, "cpufreq") == 0 &&
            read_attr(dir, "boost", buf, sizeof(buf)) == 0 &&
            mpi_pstate_parse_u64(buf, 0, 1, &v) == 0) {
                node->boost_kind = MPI_PSTATE_CPUFREQ_BOOST_CPUFREQ;
                node->boost_on = (int)v;
        }
        if (join(dir, sizeof(dir), cpudir, "intel_pstate") == 0) {
                if (read_name(dir, "status", node->pstate_status) != 0)
                        node->pstate_status[0] = '\0';
                if (with_boost && node->boost_kind == MPI_PSTATE_CPUFREQ_BOOST_NONE &&
                    read_attr(dir, "no_turbo", buf, sizeof(buf)) == 0 &&
                    mpi_pstate_parse_u64(buf, 0, 1, &v) == 0) {
                        node->boost_kind = MPI_PSTATE_CPUFREQ_BOOST_NO_TURBO;
                        node->boost_on = v == 0;
                }
        }
        if (!node->pstate_status[0] && join(dir, sizeof(dir), cpudir, "amd_pstate") == 0 &&
            read_name(dir, "status", node->pstate_status) != 0)
                node->pstate_status[0] = '\0';
}

/* Where the hardware treats the userspace target as a lower bound only:
 * intel_cpufreq (passive intel_pstate) programs it as the HWP minimum when
 * HWP is on, amd-pstate in guided mode as the CPPC minimum.  The active
 * drivers have no userspace governor at all. */
static bool setspeed_floor(const char *cpudir, const struct mpi_pstate_cpufreq_node *node,
                           const struct mpi_pstate_cpufreq_policy *p)
{
        char dir[MPI_PSTATE_CPUFREQ_PATH_LEN], buf[16];

        if (strcmp(p->driver, "intel_pstate") == 0 || strcmp(p->driver, "amd-pstate-epp") == 0)
                return true;
        if (strcmp(p->driver, "intel_cpufreq") == 0)
                return join(dir, sizeof(dir), cpudir, "intel_pstate") == 0 &&
                       read_attr(dir, "hwp_dynamic_boost", buf, sizeof(buf)) == 0;
        if (strcmp(p->driver, "amd-pstate") == 0)
                return strcmp(node->pstate_status, "guided") == 0;
        return false;
}

int mpi_pstate_cpufreq_discover(const char *sysroot, struct mpi_pstate_cpufreq_node **out,
                                char *err, size_t errlen)
{
        return mpi_pstate_cpufreq_discover_cpus(sysroot, NULL, out, err, errlen);
}

/* Sorts the policies and maps every CPU to its one policy. */
static int map_cpus(const char *cpudir, struct mpi_pstate_cpufreq_node *node, char *err,
                    size_t errlen)
{
        int rc;

        qsort(node->policies, node->npolicies, sizeof(*node->policies), cmp_policy);
        for (unsigned i = 0; i < node->npolicies; i++) {
                struct mpi_pstate_cpufreq_policy *p = &node->policies[i];

                p->setspeed_is_floor = setspeed_floor(cpudir, node, p);
                for (size_t c = 0; c < CPU_SETSIZE; c++) {
                        if (!CPU_ISSET(c, &p->related))
                                continue;
                        if (node->cpu_policy[c] >= 0) {
                                rc = -EINVAL;
                                mpi_pstate_errmsg_set(err, errlen, "cpu%zu is in both %s and %s", c,
                                                      node->policies[node->cpu_policy[c]].name,
                                                      p->name);
                                return rc;
                        }
                        node->cpu_policy[c] = (int)i;
                }
        }
        return 0;
}

int mpi_pstate_cpufreq_discover_cpus(const char *sysroot, const cpu_set_t *cpus,
                                     struct mpi_pstate_cpufreq_node **out, char *err, size_t errlen)
{
        char cpudir[MPI_PSTATE_CPUFREQ_PATH_LEN], pdir[MPI_PSTATE_CPUFREQ_PATH_LEN];
        struct mpi_pstate_cpufreq_node *node = NULL;
        struct dirlist names = {0};
        int rc;

        if (!sysroot || !out)
                return -EINVAL;
        *out = NULL;
        if (snprintf(cpudir, sizeof(cpudir), "%s/devices/system/cpu", sysroot) >=
            (int)sizeof(cpudir)) {
                rc = -ENAMETOOLONG;
                goto fail;
        }
        node = calloc(1, sizeof(*node));
        if (!node) {
                rc = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < CPU_SETSIZE; i++)
                node->cpu_policy[i] = -1;
        read_node_extras(cpudir, node, cpus == NULL);
        rc = cpus ? find_policies_of(cpudir, cpus, &names) : find_policies(cpudir, &names);
        if (rc) {
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", cpudir, strerror(-rc));
                goto fail;
        }
        node->policies = calloc(names.n ? names.n : 1, sizeof(*node->policies));
        if (!node->policies) {
                rc = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < names.n; i++) {
                const char *name = names.names[i];
                struct mpi_pstate_cpufreq_policy *p = &node->policies[node->npolicies];
                int n = strncmp(name, "cpu", 3) == 0
                            ? snprintf(pdir, sizeof(pdir), "%s/%s/cpufreq", cpudir, name)
                            : snprintf(pdir, sizeof(pdir), "%s/cpufreq/%s", cpudir, name);

                if (n < 0 || (size_t)n >= sizeof(pdir)) {
                        rc = -ENAMETOOLONG;
                        goto fail;
                }
                rc = load_policy(p, name, pdir, err, errlen);
                if (rc == -ENOENT)
                        continue;
                if (rc)
                        goto fail;
                node->npolicies++;
        }
        if (node->npolicies == 0) {
                rc = -ENODEV;
                mpi_pstate_errmsg_set(
                    err, errlen, "%s: no cpufreq driver (no policy with a scaling_driver)", cpudir);
                goto fail;
        }
        rc = map_cpus(cpudir, node, err, errlen);
        if (rc)
                goto fail;
        memcpy(node->driver, node->policies[0].driver, sizeof(node->driver));
        free(names.names);
        *out = node;
        return 0;
fail:
        free(names.names);
        mpi_pstate_cpufreq_free(node);
        return rc;
}

void mpi_pstate_cpufreq_free(struct mpi_pstate_cpufreq_node *node)
{
        if (!node)
                return;
        free(node->policies);
        free(node);
}

const struct mpi_pstate_cpufreq_policy *
mpi_pstate_cpufreq_policy_of(const struct mpi_pstate_cpufreq_node *node, unsigned cpu)
{
        if (!node || cpu >= CPU_SETSIZE || node->cpu_policy[cpu] < 0)
                return NULL;
        return &node->policies[node->cpu_policy[cpu]];
}

unsigned mpi_pstate_cpufreq_domains_of(const struct mpi_pstate_cpufreq_node *node,
                                       const cpu_set_t *cpus, unsigned *idx, unsigned max,
                                       bool *spills)
{
        unsigned n = 0;
        bool spill = false;

        for (unsigned i = 0; i < node->npolicies; i++) {
                cpu_set_t in, out;

                CPU_AND(&in, &node->policies[i].related, cpus);
                if (CPU_COUNT(&in) == 0)
                        continue;
                CPU_XOR(&out, &node->policies[i].related, &in);
                if (CPU_COUNT(&out) > 0)
                        spill = true;
                if (n < max)
                        idx[n++] = i;
        }
        if (spills)
                *spills = spill;
        return n;
}

const char *mpi_pstate_cpufreq_mech_name(enum mpi_pstate_cpufreq_mech m)
{
        if ((unsigned)m >= sizeof(mech_names) / sizeof(mech_names[0]))
                return "invalid";
        return mech_names[m];
}

int mpi_pstate_cpufreq_mech_parse(const char *s, enum mpi_pstate_cpufreq_mech *out)
{
        if (!s)
                return -EINVAL;
        for (unsigned i = 0; i < sizeof(mech_names) / sizeof(mech_names[0]); i++) {
                if (strcmp(s, mech_names[i]) == 0) {
                        *out = (enum mpi_pstate_cpufreq_mech)i;
                        return 0;
                }
        }
        return -EINVAL;
}

int mpi_pstate_cpufreq_mech_choose(const struct mpi_pstate_cpufreq_policy *p,
                                   enum mpi_pstate_cpufreq_mech requested, bool allow_governor,
                                   const char *job_governor, enum mpi_pstate_cpufreq_mech *out,
                                   char *err, size_t errlen)
{
        bool in_userspace = strcmp(p->cur.governor, "userspace") == 0;
        bool may_switch = allow_governor || in_userspace;

        switch (requested) {
        case MPI_PSTATE_CPUFREQ_MECH_MAXFREQ:
                *out = requested;
                return 0;
        case MPI_PSTATE_CPUFREQ_MECH_SETSPEED:
                if (!p->has_userspace) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: driver %s has no userspace governor", p->name,
                                              p->driver);
                        return -EOPNOTSUPP;
                }
                if (!may_switch) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: setspeed needs the userspace governor, and "
                                              "governor changes are not allowed",
                                              p->name);
                        return -EPERM;
                }
                if (job_governor && strcmp(job_governor, "userspace") != 0) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: setspeed needs the userspace governor, the "
                                              "job asked for %s",
                                              p->name, job_governor);
                        return -EINVAL;
                }
                *out = requested;
                return 0;
        case MPI_PSTATE_CPUFREQ_MECH_AUTO:
                if (p->has_userspace && !p->setspeed_is_floor && may_switch &&
                    (!job_governor || strcmp(job_governor, "userspace") == 0))
                        *out = MPI_PSTATE_CPUFREQ_MECH_SETSPEED;
                else
                        *out = MPI_PSTATE_CPUFREQ_MECH_MAXFREQ;
                return 0;
        }
        mpi_pstate_errmsg_set(err, errlen, "invalid mechanism %d", (int)requested);
        return -EINVAL;
}

int mpi_pstate_cpufreq_step_range(const struct mpi_pstate_cpufreq_policy *p,
                                  const struct mpi_pstate_cpufreq_settings *start,
                                  enum mpi_pstate_cpufreq_mech mech, uint64_t want_low,
                                  uint64_t admin_floor, uint32_t *low, uint32_t *high)
{
        uint32_t hi = start->max_khz;

        /* Under userspace the step runs at setspeed, which may sit below the
         * maximum (srun --cpu-freq=<freq>): raising a core to the maximum
         * would run it faster than the step was set to. */
        if (mech == MPI_PSTATE_CPUFREQ_MECH_SETSPEED && strcmp(start->governor, "userspace") == 0 &&
            start->setspeed_khz && start->setspeed_khz < hi)
                hi = start->setspeed_khz;
        /* scaling_min_freq is the step's floor (srun --cpu-freq=<min>-<max>
         * sets it; the kernel would not go below it anyway). */
        *high = hi;
        *low = mpi_pstate_cpufreq_low_khz(want_low, p->cpuinfo_min_khz, admin_floor, start->min_khz,
                                          hi, p->freqs, p->nfreqs);
        return *low ? 0 : -ERANGE;
}

static bool in_list(const char *list, const char *name)
{
        size_t n = strlen(name);

        for (const char *p = list; *p;) {
                size_t len;

                p += strspn(p, " ,\t");
                len = strcspn(p, " ,\t");
                if (len == n && strncmp(p, name, n) == 0)
                        return true;
                p += len;
        }
        return false;
}

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi)
{
        return v < lo ? lo : v > hi ? hi : v;
}

int mpi_pstate_cpufreq_plan(const struct mpi_pstate_cpufreq_policy *p,
                            const struct mpi_pstate_cpufreq_limits *lim,
                            const struct mpi_pstate_cpufreq_request *req,
                            enum mpi_pstate_cpufreq_mech mech,
                            struct mpi_pstate_cpufreq_settings *out, unsigned *clamped, char *err,
                            size_t errlen)
{
        static const struct mpi_pstate_cpufreq_request none;
        struct mpi_pstate_cpufreq_settings s;
        uint32_t lo = p->cpuinfo_min_khz, hi = p->cpuinfo_max_khz;
        const char *gov;
        unsigned c = 0;

        if (!req)
                req = &none;
        if (lim && lim->floor_khz > lo)
                lo = lim->floor_khz;
        if (lim && lim->ceiling_khz && lim->ceiling_khz < hi)
                hi = lim->ceiling_khz;
        if (lo > hi) {
                mpi_pstate_errmsg_set(err, errlen,
                                      "%s: admin limits leave no frequency (%u..%u kHz allowed, "
                                      "hardware %u..%u kHz)",
                                      p->name, lim ? lim->floor_khz : 0, lim ? lim->ceiling_khz : 0,
                                      p->cpuinfo_min_khz, p->cpuinfo_max_khz);
                return -EINVAL;
        }
        if (req->min_khz && req->max_khz && req->min_khz > req->max_khz) {
                mpi_pstate_errmsg_set(err, errlen, "minimum frequency %u kHz above maximum %u kHz",
                                      req->min_khz, req->max_khz);
                return -EINVAL;
        }
        memset(&s, 0, sizeof(s));
        s.min_khz = req->min_khz ? clamp_u32(req->min_khz, lo, hi) : lo;
        s.max_khz = req->max_khz ? clamp_u32(req->max_khz, lo, hi) : hi;
        if (req->min_khz && s.min_khz != req->min_khz)
                c |= req->min_khz < lo ? MPI_PSTATE_CPUFREQ_CLAMPED_MIN
                                       : MPI_PSTATE_CPUFREQ_CLAMPED_MAX;
        if (req->max_khz && s.max_khz != req->max_khz)
                c |= req->max_khz > hi ? MPI_PSTATE_CPUFREQ_CLAMPED_MAX
                                       : MPI_PSTATE_CPUFREQ_CLAMPED_MIN;

        gov = req->governor ? req->governor : p->cur.governor;
        if (mech == MPI_PSTATE_CPUFREQ_MECH_SETSPEED) {
                if (req->governor && strcmp(req->governor, "userspace") != 0) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "governor %s conflicts with the setspeed mechanism, "
                                              "which needs userspace",
                                              req->governor);
                        return -EINVAL;
                }
                gov = "userspace";
        }
        if (strcmp(gov, p->cur.governor) != 0) {
                if (!mpi_pstate_cpufreq_valid_name(gov) ||
                    !mpi_pstate_cpufreq_has_governor(p, gov)) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: governor '%.32s' is not available (driver %s)",
                                              p->name, gov, p->driver);
                        return -EINVAL;
                }
                if (!lim || !lim->allow_governor) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: changing the governor (%s -> %s) is not allowed",
                                              p->name, p->cur.governor, gov);
                        return -EPERM;
                }
                if (lim->governors && !in_list(lim->governors, gov)) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "%s: governor %s is not among those allowed (%.64s)",
                                              p->name, gov, lim->governors);
                        return -EPERM;
                }
        }
        memcpy(s.governor, gov, strlen(gov) + 1);
        if (strcmp(gov, "userspace") == 0)
                s.setspeed_khz = s.max_khz;
        *out = s;
        if (clamped)
                *clamped = c;
        return 0;
}

const char *mpi_pstate_cpufreq_attr_file(enum mpi_pstate_cpufreq_attr a)
{
        if ((unsigned)a >= sizeof(attr_files) / sizeof(attr_files[0]))
                return NULL;
        return attr_files[a];
}

static void add_write(struct mpi_pstate_cpufreq_write *w, unsigned *n,
                      enum mpi_pstate_cpufreq_attr a, const char *gov, uint32_t khz)
{
        w[*n].attr = a;
        if (gov)
                snprintf(w[*n].value, sizeof(w[*n].value), "%s", gov);
        else
                snprintf(w[*n].value, sizeof(w[*n].value), "%u", khz);
        (*n)++;
}

unsigned mpi_pstate_cpufreq_plan_writes(const struct mpi_pstate_cpufreq_settings *cur,
                                        const struct mpi_pstate_cpufreq_settings *target,
                                        struct mpi_pstate_cpufreq_write w[4])
{
        bool min_changes = target->min_khz != cur->min_khz;
        bool max_changes = target->max_khz != cur->max_khz;
        bool gov_changes = strcmp(target->governor, cur->governor) != 0;
        unsigned n = 0;

        /* Raising the maximum first keeps min <= max when the whole range moves
         * up; lowering the minimum first does the same when it moves down. */
        if (target->max_khz > cur->max_khz) {
                add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_MAX, NULL, target->max_khz);
                if (min_changes)
                        add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_MIN, NULL, target->min_khz);
        } else {
                if (min_changes)
                        add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_MIN, NULL, target->min_khz);
                if (max_changes)
                        add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_MAX, NULL, target->max_khz);
        }
        /* The governor after the limits: performance/powersave jump to a limit
         * at once, and must find the final one there. */
        if (gov_changes)
                add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_GOVERNOR, target->governor, 0);
        if (strcmp(target->governor, "userspace") == 0 && target->setspeed_khz &&
            (gov_changes || target->setspeed_khz != cur->setspeed_khz))
                add_write(w, &n, MPI_PSTATE_CPUFREQ_ATTR_SETSPEED, NULL, target->setspeed_khz);
        return n;
}

int mpi_pstate_cpufreq_apply(const struct mpi_pstate_cpufreq_policy *p,
                             const struct mpi_pstate_cpufreq_settings *target, char *err,
                             size_t errlen)
{
        return mpi_pstate_cpufreq_apply_from(p, NULL, target, err, errlen);
}

/* The policy's settings as they are now: known when the caller has just
 * read them, else read. */
static int current_settings(const struct mpi_pstate_cpufreq_policy *p,
                            const struct mpi_pstate_cpufreq_settings *known,
                            struct mpi_pstate_cpufreq_settings *cur, char *err, size_t errlen)
{
        int rc;

        if (known) {
                *cur = *known;
                return 0;
        }
        rc = mpi_pstate_cpufreq_read_settings(p, cur);
        if (rc)
                mpi_pstate_errmsg_set(err, errlen, "%s: reading current settings: %s", p->name,
                                      strerror(-rc));
        return rc;
}

int mpi_pstate_cpufreq_apply_from(const struct mpi_pstate_cpufreq_policy *p,
                                  const struct mpi_pstate_cpufreq_settings *known,
                                  const struct mpi_pstate_cpufreq_settings *target, char *err,
                                  size_t errlen)
{
        struct mpi_pstate_cpufreq_settings cur;
        struct mpi_pstate_cpufreq_write w[4];
        unsigned n;
        int rc = current_settings(p, known, &cur, err, errlen);

        if (rc)
                return rc;
        n = mpi_pstate_cpufreq_plan_writes(&cur, target, w);
        for (unsigned i = 0; i < n; i++) {
                char path[MPI_PSTATE_CPUFREQ_PATH_LEN + 32], value[MPI_PSTATE_CPUFREQ_NAME_LEN + 1];
                const char *file = mpi_pstate_cpufreq_attr_file(w[i].attr);

                rc = join(path, sizeof(path), p->dir, file);
                if (!rc) {
                        snprintf(value, sizeof(value), "%s\n", w[i].value);
                        rc = mpi_pstate_safeio_write_attr(AT_FDCWD, path, value);
                }
                if (rc) {
                        mpi_pstate_errmsg_set(err, errlen, "%s: writing %s=%s: %s", p->name, file,
                                              w[i].value, strerror(-rc));
                        return rc;
                }
        }
        return 0;
}

int mpi_pstate_cpufreq_domain_prepare(struct mpi_pstate_cpufreq_domain *d,
                                      const struct mpi_pstate_cpufreq_policy *p,
                                      enum mpi_pstate_cpufreq_mech mech, uint32_t low_khz,
                                      uint32_t high_khz, char *err, size_t errlen)
{
        return mpi_pstate_cpufreq_domain_prepare_from(d, p, NULL, mech, low_khz, high_khz, err,
                                                      errlen);
}

int mpi_pstate_cpufreq_domain_prepare_from(struct mpi_pstate_cpufreq_domain *d,
                                           const struct mpi_pstate_cpufreq_policy *p,
                                           const struct mpi_pstate_cpufreq_settings *known,
                                           enum mpi_pstate_cpufreq_mech mech, uint32_t low_khz,
                                           uint32_t high_khz, char *err, size_t errlen)
{
        char path[MPI_PSTATE_CPUFREQ_PATH_LEN + 32];
        struct mpi_pstate_cpufreq_settings cur;
        const char *file;
        int rc, n;

        memset(d, 0, sizeof(*d));
        d->fd = -1;
        if (mech == MPI_PSTATE_CPUFREQ_MECH_MAXFREQ) {
                file = "scaling_max_freq";
        } else if (mech == MPI_PSTATE_CPUFREQ_MECH_SETSPEED) {
                file = "scaling_setspeed";
        } else {
                mpi_pstate_errmsg_set(err, errlen, "%s: mechanism must be resolved before prepare",
                                      p->name);
                return -EINVAL;
        }
        if (low_khz > high_khz || low_khz < p->cpuinfo_min_khz || high_khz > p->cpuinfo_max_khz) {
                mpi_pstate_errmsg_set(err, errlen, "%s: need %u <= low %u <= high %u <= %u kHz",
                                      p->name, p->cpuinfo_min_khz, low_khz, high_khz,
                                      p->cpuinfo_max_khz);
                return -ERANGE;
        }
        rc = current_settings(p, known, &cur, err, errlen);
        if (rc)
                return rc;
        if (mech == MPI_PSTATE_CPUFREQ_MECH_MAXFREQ && low_khz < cur.min_khz) {
                mpi_pstate_errmsg_set(err, errlen,
                                      "%s: low %u kHz is below scaling_min_freq %u kHz", p->name,
                                      low_khz, cur.min_khz);
                return -ERANGE;
        }
        if (mech == MPI_PSTATE_CPUFREQ_MECH_SETSPEED && strcmp(cur.governor, "userspace") != 0) {
                mpi_pstate_errmsg_set(err, errlen,
                                      "%s: setspeed needs the userspace governor, %s is active",
                                      p->name, cur.governor);
                return -EINVAL;
        }
        d->mech = mech;
        d->low_khz = low_khz;
        d->high_khz = high_khz;
        /* The exact text the kernel prints, newline included, no padding: how the
         * kernel parses it (sscanf, or kstrtoul as proposed) must not matter. */
        n = snprintf(d->low, sizeof(d->low), "%u\n", low_khz);
        d->low_len = (unsigned char)n;
        n = snprintf(d->high, sizeof(d->high), "%u\n", high_khz);
        d->high_len = (unsigned char)n;
        rc = join(path, sizeof(path), p->dir, file);
        if (rc)
                return rc;
        d->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (d->fd < 0) {
                rc = -errno;
                mpi_pstate_errmsg_set(err, errlen, "%s: %s", path, strerror(-rc));
                return rc;
        }
        return 0;
}

int mpi_pstate_cpufreq_domain_lower(const struct mpi_pstate_cpufreq_domain *d)
{
        ssize_t n = pwrite(d->fd, d->low, d->low_len, 0);

        return n == (ssize_t)d->low_len ? 0 : n < 0 ? -errno : -EIO;
}

int mpi_pstate_cpufreq_domain_raise(const struct mpi_pstate_cpufreq_domain *d)
{
        ssize_t n = pwrite(d->fd, d->high, d->high_len, 0);

        return n == (ssize_t)d->high_len ? 0 : n < 0 ? -errno : -EIO;
}

void mpi_pstate_cpufreq_domain_close(struct mpi_pstate_cpufreq_domain *d)
{
        if (d && d->fd >= 0) {
                close(d->fd);
                d->fd = -1;
        }
}

uint32_t mpi_pstate_cpufreq_low_khz(uint64_t want, uint32_t cpuinfo_min, uint64_t admin_floor,
                                    uint32_t min_khz, uint32_t high, const uint32_t *table,
                                    unsigned ntable)
{
        uint64_t floor = cpuinfo_min, low;

        if (admin_floor > floor)
                floor = admin_floor;
        if (min_khz > floor)
                floor = min_khz;
        low = want > floor ? want : floor;
        for (unsigned i = 0; table && i < ntable; i++) {
                if (table[i] >= low) {
                        if (table[i] <= high)
                                low = table[i];
                        break;
                }
        }
        return low < high ? (uint32_t)low : 0;
}
