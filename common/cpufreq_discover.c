/* SPDX-License-Identifier: BSD-3-Clause */
/* cpufreq discovery (cpufreq.h): the sysfs tree of a node, or of some of
 * its CPUs, read into a struct mpi_pstate_cpufreq_node, and the settings of
 * its policies read again; with the small parsers the restore record shares. */
#include "cpufreq.h"
#include "cpufreq_sysfs.h"
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

int mpi_pstate_cpufreq_join(char *out, size_t outlen, const char *dir, const char *file)
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
        int rc = mpi_pstate_cpufreq_join(path, sizeof(path), dir, file);

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

bool mpi_pstate_cpufreq_valid_epp(const char *s)
{
        static const char *const words[] = {"default", "performance", "balance_performance",
                                            "balance_power", "power"};
        uint64_t v;
        size_t n = strlen(s);

        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (strcmp(s, words[i]) == 0)
                        return true;
        return n > 0 && n <= 3 && strspn(s, "0123456789") == n && (s[0] != '0' || n == 1) &&
               mpi_pstate_parse_u64(s, 0, 255, &v) == 0;
}

/* The preference, or "" when the policy has none or shows one that cannot
 * be written back as read (amd-pstate answers EINVAL for a value outside
 * its words): such a policy has no EPP lever, and nothing to restore. */
static void read_epp(const char *dir, char out[MPI_PSTATE_CPUFREQ_EPP_LEN])
{
        char buf[64];

        out[0] = '\0';
        if (read_attr(dir, "energy_performance_preference", buf, sizeof(buf)) == 0 &&
            strlen(buf) < MPI_PSTATE_CPUFREQ_EPP_LEN && mpi_pstate_cpufreq_valid_epp(buf))
                memcpy(out, buf, strlen(buf) + 1);
}

int mpi_pstate_cpufreq_read_driver(const char *policy_dir, char out[MPI_PSTATE_CPUFREQ_NAME_LEN])
{
        return read_name(policy_dir, "scaling_driver", out);
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
        read_epp(p->dir, s.epp);
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

/* What the driver tells about levers beside the cap.  A lowest nonlinear
 * frequency outside (cpuinfo_min, cpuinfo_max) marks no knee: the kernel
 * itself accepts one equal to the minimum on newer parts. */
static void load_levers(struct mpi_pstate_cpufreq_policy *p)
{
        uint32_t k;

        if (read_khz(p->dir, "amd_pstate_lowest_nonlinear_freq", &k) == 0 &&
            k > p->cpuinfo_min_khz && k < p->cpuinfo_max_khz)
                p->nonlinear_khz = k;
        p->epp_busy_under_performance =
            strcmp(p->driver, "intel_pstate") == 0 || strcmp(p->driver, "amd-pstate-epp") == 0;
}

/* related_cpus (never empty) and affected_cpus (related when absent). */
static int load_cpus(struct mpi_pstate_cpufreq_policy *p, char *buf, const char **what)
{
        int rc;

        *what = "related_cpus";
        rc = read_attr(p->dir, *what, buf, ATTR_BUF);
        if (!rc)
                rc = mpi_pstate_cpufreq_parse_cpulist(buf, &p->related);
        if (!rc && CPU_COUNT(&p->related) == 0)
                rc = -EINVAL;
        if (rc)
                return rc;
        *what = "affected_cpus";
        rc = read_attr(p->dir, *what, buf, ATTR_BUF);
        if (rc == -ENOENT) {
                p->affected = p->related;
                return 0;
        }
        return rc ? rc : mpi_pstate_cpufreq_parse_cpulist(buf, &p->affected);
}

/* The governors and frequencies the driver offers, where it lists them. */
static int load_choices(struct mpi_pstate_cpufreq_policy *p, char *buf, const char **what)
{
        int rc;

        *what = "scaling_available_governors";
        rc = read_attr(p->dir, *what, buf, ATTR_BUF);
        if (rc == -ENOENT) {
                /* Without the list the active governor is the only one we know of. */
                memcpy(p->governors[0], p->cur.governor, sizeof(p->governors[0]));
                p->ngovernors = 1;
                rc = 0;
        } else if (!rc) {
                rc = parse_governors(buf, p);
        }
        if (rc)
                return rc;
        *what = "scaling_available_frequencies";
        rc = read_attr(p->dir, *what, buf, ATTR_BUF);
        if (rc == -ENOENT)
                return 0; /* intel_pstate, amd-pstate: no table */
        return rc ? rc : parse_freqs(buf, p);
}

/* The driver, the hardware limits and the settings in force. */
static int load_state(struct mpi_pstate_cpufreq_policy *p, const char **what)
{
        int rc;

        *what = "scaling_driver";
        rc = read_name(p->dir, *what, p->driver);
        if (rc)
                return rc;
        *what = "cpuinfo_min_freq";
        rc = read_khz(p->dir, *what, &p->cpuinfo_min_khz);
        if (rc)
                return rc;
        *what = "cpuinfo_max_freq";
        rc = read_khz(p->dir, *what, &p->cpuinfo_max_khz);
        if (rc)
                return rc;
        *what = "scaling_governor/min/max/setspeed";
        return mpi_pstate_cpufreq_read_settings(p, &p->cur);
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
        rc = load_state(p, &what);
        if (!rc)
                rc = load_cpus(p, buf, &what);
        if (!rc)
                rc = load_choices(p, buf, &what);
        if (rc)
                goto out;
        p->has_userspace = mpi_pstate_cpufreq_has_governor(p, "userspace");
        load_levers(p);
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
        int rc = mpi_pstate_cpufreq_join(path, sizeof(path), cpudir, "cpufreq");

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
        if (with_boost && mpi_pstate_cpufreq_join(dir, sizeof(dir), cpudir, "cpufreq") == 0 &&
            read_attr(dir, "boost", buf, sizeof(buf)) == 0 &&
            mpi_pstate_parse_u64(buf, 0, 1, &v) == 0) {
                node->boost_kind = MPI_PSTATE_CPUFREQ_BOOST_CPUFREQ;
                node->boost_on = (int)v;
        }
        if (mpi_pstate_cpufreq_join(dir, sizeof(dir), cpudir, "intel_pstate") == 0) {
                if (read_name(dir, "status", node->pstate_status) != 0)
                        node->pstate_status[0] = '\0';
                if (with_boost && node->boost_kind == MPI_PSTATE_CPUFREQ_BOOST_NONE &&
                    read_attr(dir, "no_turbo", buf, sizeof(buf)) == 0 &&
                    mpi_pstate_parse_u64(buf, 0, 1, &v) == 0) {
                        node->boost_kind = MPI_PSTATE_CPUFREQ_BOOST_NO_TURBO;
                        node->boost_on = v == 0;
                }
        }
        if (!node->pstate_status[0] &&
            mpi_pstate_cpufreq_join(dir, sizeof(dir), cpudir, "amd_pstate") == 0 &&
            read_name(dir, "status", node->pstate_status) != 0)
                node->pstate_status[0] = '\0';
}

/* Where the hardware treats the userspace target as a lower bound only:
 * intel_cpufreq (passive intel_pstate) programs it as the HWP minimum when
 * HWP is on, amd-pstate in guided mode as the CPPC minimum.  The active
 * drivers have no userspace governor at all.  HWP shows in passive mode as
 * the policy's HWP attributes (the kernel gives intel_cpufreq
 * base_frequency and energy_performance_preference only with HWP);
 * intel_pstate/hwp_dynamic_boost exists in active mode alone, so it cannot
 * tell. */
static bool setspeed_floor(const struct mpi_pstate_cpufreq_node *node,
                           const struct mpi_pstate_cpufreq_policy *p)
{
        char buf[64];

        if (strcmp(p->driver, "intel_pstate") == 0 || strcmp(p->driver, "amd-pstate-epp") == 0)
                return true;
        if (strcmp(p->driver, "intel_cpufreq") == 0)
                return read_attr(p->dir, "base_frequency", buf, sizeof(buf)) == 0 ||
                       read_attr(p->dir, "energy_performance_preference", buf, sizeof(buf)) == 0;
        if (strcmp(p->driver, "amd-pstate") == 0)
                return strcmp(node->pstate_status, "guided") == 0;
        return false;
}

/* Sorts the policies and maps every CPU to its one policy. */
static int map_cpus(struct mpi_pstate_cpufreq_node *node, char *err, size_t errlen)
{
        int rc;

        qsort(node->policies, node->npolicies, sizeof(*node->policies), cmp_policy);
        for (unsigned i = 0; i < node->npolicies; i++) {
                struct mpi_pstate_cpufreq_policy *p = &node->policies[i];

                p->setspeed_is_floor = setspeed_floor(node, p);
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

/* Each named policy that has a driver; -ENODEV when none has. */
static int load_policies(struct mpi_pstate_cpufreq_node *node, const char *cpudir,
                         const struct dirlist *names, char *err, size_t errlen)
{
        char pdir[MPI_PSTATE_CPUFREQ_PATH_LEN];
        int rc;

        node->policies = calloc(names->n ? names->n : 1, sizeof(*node->policies));
        if (!node->policies)
                return -ENOMEM;
        for (size_t i = 0; i < names->n; i++) {
                const char *name = names->names[i];
                struct mpi_pstate_cpufreq_policy *p = &node->policies[node->npolicies];
                int n = strncmp(name, "cpu", 3) == 0
                            ? snprintf(pdir, sizeof(pdir), "%s/%s/cpufreq", cpudir, name)
                            : snprintf(pdir, sizeof(pdir), "%s/cpufreq/%s", cpudir, name);

                if (n < 0 || (size_t)n >= sizeof(pdir))
                        return -ENAMETOOLONG;
                rc = load_policy(p, name, pdir, err, errlen);
                if (rc == -ENOENT)
                        continue;
                if (rc)
                        return rc;
                node->npolicies++;
        }
        if (node->npolicies == 0) {
                mpi_pstate_errmsg_set(
                    err, errlen, "%s: no cpufreq driver (no policy with a scaling_driver)", cpudir);
                return -ENODEV;
        }
        return 0;
}

int mpi_pstate_cpufreq_discover_cpus(const char *sysroot, const cpu_set_t *cpus,
                                     struct mpi_pstate_cpufreq_node **out, char *err, size_t errlen)
{
        char cpudir[MPI_PSTATE_CPUFREQ_PATH_LEN];
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
        rc = load_policies(node, cpudir, &names, err, errlen);
        if (rc)
                goto fail;
        rc = map_cpus(node, err, errlen);
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
