/* SPDX-License-Identifier: BSD-3-Clause */
/* Fake sysfs trees for the unit tests: plain files in a temporary directory,
 * laid out as the kernel lays out /sys/devices/system/cpu and
 * /sys/class/powercap.  Plain files do not have sysfs write semantics (a
 * shorter value written through a kept fd leaves a tail after its newline);
 * readers here, like the backend, take the first line.  Setup failures abort
 * the test through Check. */
#ifndef MPI_PSTATE_TEST_FAKESYS_H
#define MPI_PSTATE_TEST_FAKESYS_H
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

struct fakesys {
        char root[256];
};

#define FAKESYS_CPU "devices/system/cpu"
#define FAKESYS_FREQS_ACPI "3000000 2400000 1800000 1200000 "

static inline void fakesys_path(const struct fakesys *fs, const char *rel, char *out, size_t len)
{
        int n = snprintf(out, len, "%s/%s", fs->root, rel);

        ck_assert_msg(n > 0 && (size_t)n < len, "path too long: %s", rel);
}

static inline void fakesys_init(struct fakesys *fs)
{
        const char *tmp = getenv("TMPDIR");

        snprintf(fs->root, sizeof(fs->root), "%s/mpi-pstate-fakesys.XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        ck_assert_msg(mkdtemp(fs->root) != NULL, "mkdtemp: %s", strerror(errno));
}

static inline int fakesys_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
        (void)st;
        (void)f;
        return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static inline void fakesys_cleanup(struct fakesys *fs)
{
        if (fs->root[0])
                nftw(fs->root, fakesys_rm_one, 16, FTW_DEPTH | FTW_PHYS);
        fs->root[0] = '\0';
}

/* mkdir -p of fs->root/rel. */
static inline void fakesys_mkdirs(const struct fakesys *fs, const char *rel)
{
        char path[1024];

        fakesys_path(fs, rel, path, sizeof(path));
        for (char *p = path + strlen(fs->root) + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path,
                              strerror(errno));
                *p = '/';
        }
        ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path,
                      strerror(errno));
}

/* Writes fs->root/rel (parents created) with the exact content and mode. */
__attribute__((format(printf, 4, 5))) static inline void
fakesys_put(const struct fakesys *fs, const char *rel, mode_t mode, const char *fmt, ...)
{
        char path[1024], dir[1024], text[8192];
        va_list ap;
        int fd, n;

        va_start(ap, fmt);
        n = vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        ck_assert(n >= 0 && (size_t)n < sizeof(text));
        snprintf(dir, sizeof(dir), "%s", rel);
        if (strrchr(dir, '/')) {
                *strrchr(dir, '/') = '\0';
                fakesys_mkdirs(fs, dir);
        }
        fakesys_path(fs, rel, path, sizeof(path));
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ck_assert(write(fd, text, (size_t)n) == n);
        ck_assert(fchmod(fd, mode) == 0);
        close(fd);
}

static inline void fakesys_symlink(const struct fakesys *fs, const char *target, const char *rel)
{
        char path[1024];

        fakesys_path(fs, rel, path, sizeof(path));
        ck_assert_msg(symlink(target, path) == 0, "symlink %s: %s", path, strerror(errno));
}

/* First line of fs->root/rel, as the kernel would show the value. */
static inline const char *fakesys_get(const struct fakesys *fs, const char *rel, char *buf,
                                      size_t len)
{
        char path[1024];
        ssize_t n;
        int fd;

        fakesys_path(fs, rel, path, sizeof(path));
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        n = read(fd, buf, len - 1);
        close(fd);
        ck_assert(n >= 0);
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        return buf;
}

static inline unsigned long fakesys_get_ul(const struct fakesys *fs, const char *rel)
{
        char buf[64];

        return strtoul(fakesys_get(fs, rel, buf, sizeof(buf)), NULL, 10);
}

/* One policy directory cpufreq/policy<idx> and the cpuN/cpufreq symlinks of
 * its CPUs.  freqs NULL: no scaling_available_frequencies (intel_pstate). */
static inline void fakesys_policy(const struct fakesys *fs, unsigned idx, const unsigned *cpus,
                                  unsigned ncpus, const char *driver, const char *govs,
                                  const char *gov, const char *freqs, unsigned long hwmin,
                                  unsigned long hwmax)
{
        char d[128], f[192], list[512] = "";

        for (unsigned i = 0; i < ncpus; i++) {
                size_t l = strlen(list);

                snprintf(list + l, sizeof(list) - l, "%s%u", i ? " " : "", cpus[i]);
        }
        snprintf(d, sizeof(d), FAKESYS_CPU "/cpufreq/policy%u", idx);
#define FSP(name, ...)                                                                             \
        do {                                                                                       \
                snprintf(f, sizeof(f), "%s/" name, d);                                             \
                fakesys_put(fs, f, 0644, __VA_ARGS__);                                             \
        } while (0)
        FSP("scaling_driver", "%s\n", driver);
        FSP("cpuinfo_min_freq", "%lu\n", hwmin);
        FSP("cpuinfo_max_freq", "%lu\n", hwmax);
        FSP("cpuinfo_transition_latency", "10000\n");
        FSP("scaling_min_freq", "%lu\n", hwmin);
        FSP("scaling_max_freq", "%lu\n", hwmax);
        FSP("scaling_cur_freq", "%lu\n", hwmax);
        FSP("scaling_available_governors", "%s\n", govs);
        FSP("scaling_governor", "%s\n", gov);
        FSP("scaling_setspeed", "<unsupported>\n");
        FSP("related_cpus", "%s\n", list);
        FSP("affected_cpus", "%s\n", list);
        if (freqs)
                FSP("scaling_available_frequencies", "%s\n", freqs);
#undef FSP
        for (unsigned i = 0; i < ncpus; i++) {
                char target[64], link[128];

                snprintf(f, sizeof(f), FAKESYS_CPU "/cpu%u/topology", cpus[i]);
                fakesys_mkdirs(fs, f);
                snprintf(target, sizeof(target), "../cpufreq/policy%u", idx);
                snprintf(link, sizeof(link), FAKESYS_CPU "/cpu%u/cpufreq", cpus[i]);
                fakesys_symlink(fs, target, link);
        }
}

/* acpi-cpufreq: one policy per CPU, userspace available, 1.2/1.8/2.4/3.0 GHz. */
static inline void fakesys_acpi_cpufreq(const struct fakesys *fs, unsigned ncpu)
{
        for (unsigned c = 0; c < ncpu; c++)
                fakesys_policy(fs, c, &c, 1, "acpi-cpufreq",
                               "conservative ondemand userspace powersave performance schedutil",
                               "performance", FAKESYS_FREQS_ACPI, 1200000, 3000000);
        fakesys_put(fs, FAKESYS_CPU "/cpufreq/boost", 0644, "1\n");
}

/* intel_pstate active with HWP: performance/powersave only, no frequency
 * table, setspeed "<unsupported>", turbo switch in intel_pstate/no_turbo. */
static inline void fakesys_intel_pstate_hwp(const struct fakesys *fs, unsigned ncpu)
{
        for (unsigned c = 0; c < ncpu; c++)
                fakesys_policy(fs, c, &c, 1, "intel_pstate", "performance powersave", "powersave",
                               NULL, 800000, 4200000);
        fakesys_put(fs, FAKESYS_CPU "/intel_pstate/status", 0644, "active\n");
        fakesys_put(fs, FAKESYS_CPU "/intel_pstate/no_turbo", 0644, "0\n");
        fakesys_put(fs, FAKESYS_CPU "/intel_pstate/hwp_dynamic_boost", 0644, "0\n");
}

/* cppc_cpufreq (Arm servers: Ampere Altra, NVIDIA Grace, Graviton under
 * ACPI): one policy per core, the acpi-cpufreq governors, no
 * scaling_available_frequencies (CPPC takes any performance level between
 * lowest and highest), 1.0-3.0 GHz as on an Altra Q80-30, schedutil by
 * default, and the per-CPU acpi_cppc directory the kernel adds. */
static inline void fakesys_cppc_cpufreq(const struct fakesys *fs, unsigned ncpu)
{
        char rel[128];

        for (unsigned c = 0; c < ncpu; c++) {
                fakesys_policy(fs, c, &c, 1, "cppc_cpufreq",
                               "conservative ondemand userspace powersave performance schedutil",
                               "schedutil", NULL, 1000000, 3000000);
                snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpu%u/acpi_cppc/lowest_freq", c);
                fakesys_put(fs, rel, 0444, "1000\n"); /* MHz, as ACPI gives it */
                snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpu%u/acpi_cppc/nominal_freq", c);
                fakesys_put(fs, rel, 0444, "3000\n");
        }
}

/* scmi (Arm SCMI firmware, e.g. Neoverse reference platforms) and
 * cpufreq-dt (device-tree SoCs): a frequency table and one domain per
 * cluster of `span` CPUs. */
#define FAKESYS_FREQS_SCMI "2600000 2200000 1700000 1300000 "
static inline void fakesys_cluster_driver(const struct fakesys *fs, const char *driver,
                                          unsigned ncpu, unsigned span)
{
        unsigned cpus[64];

        ck_assert(span > 0 && span <= 64);
        for (unsigned first = 0; first < ncpu; first += span) {
                unsigned n = 0;

                for (unsigned c = first; c < ncpu && c < first + span; c++)
                        cpus[n++] = c;
                fakesys_policy(fs, first, cpus, n, driver,
                               "conservative ondemand userspace powersave performance schedutil",
                               "schedutil", FAKESYS_FREQS_SCMI, 1300000, 2600000);
        }
}

/* One acpi-cpufreq policy spanning CPUs 0-3 (a package-wide domain). */
static inline void fakesys_shared_policy(const struct fakesys *fs)
{
        static const unsigned cpus[] = {0, 1, 2, 3};

        fakesys_policy(fs, 0, cpus, 4, "acpi-cpufreq", "userspace performance powersave",
                       "performance", FAKESYS_FREQS_ACPI, 1200000, 3000000);
}

/* CPUs without any cpufreq driver: the cpufreq directory exists but is empty
 * (as on this VM). */
static inline void fakesys_no_cpufreq(const struct fakesys *fs, unsigned ncpu)
{
        char rel[128];

        for (unsigned c = 0; c < ncpu; c++) {
                snprintf(rel, sizeof(rel), FAKESYS_CPU "/cpu%u/topology", c);
                fakesys_mkdirs(fs, rel);
        }
        fakesys_mkdirs(fs, FAKESYS_CPU "/cpufreq");
}

/* RAPL: per socket intel-rapl:S (package-S) with subzones :0 dram and :1 core.
 * energy_uj is 0400 as since Linux 5.10. */
static inline void fakesys_rapl(const struct fakesys *fs, unsigned nsock, unsigned long range,
                                unsigned long start)
{
        char rel[128];

        for (unsigned s = 0; s < nsock; s++) {
                static const char *const sub[] = {"dram", "core"};

                snprintf(rel, sizeof(rel), "class/powercap/intel-rapl:%u/name", s);
                fakesys_put(fs, rel, 0444, "package-%u\n", s);
                snprintf(rel, sizeof(rel), "class/powercap/intel-rapl:%u/max_energy_range_uj", s);
                fakesys_put(fs, rel, 0444, "%lu\n", range);
                snprintf(rel, sizeof(rel), "class/powercap/intel-rapl:%u/energy_uj", s);
                fakesys_put(fs, rel, 0400, "%lu\n", start);
                for (unsigned m = 0; m < 2; m++) {
                        snprintf(rel, sizeof(rel), "class/powercap/intel-rapl:%u:%u/name", s, m);
                        fakesys_put(fs, rel, 0444, "%s\n", sub[m]);
                        snprintf(rel, sizeof(rel),
                                 "class/powercap/intel-rapl:%u:%u/max_energy_range_uj", s, m);
                        fakesys_put(fs, rel, 0444, "%lu\n", range);
                        snprintf(rel, sizeof(rel), "class/powercap/intel-rapl:%u:%u/energy_uj", s,
                                 m);
                        fakesys_put(fs, rel, 0400, "%lu\n", start);
                }
        }
        /* The control-type directory and the MMIO duplicate are not zones to count. */
        fakesys_mkdirs(fs, "class/powercap/intel-rapl");
        fakesys_put(fs, "class/powercap/intel-rapl-mmio:0/name", 0444, "package-0\n");
}

/* hwmon energy counters (Ampere Altra's SMpro and the like): class/hwmon/
 * hwmon<idx> named name with energyM_input (µJ) and energyM_label for M in
 * 1..n, each starting at start. */
static inline void fakesys_hwmon_energy(const struct fakesys *fs, unsigned idx, const char *name,
                                        unsigned n, unsigned long long start)
{
        char rel[128];

        snprintf(rel, sizeof(rel), "class/hwmon/hwmon%u/name", idx);
        fakesys_put(fs, rel, 0444, "%s\n", name);
        for (unsigned m = 1; m <= n; m++) {
                snprintf(rel, sizeof(rel), "class/hwmon/hwmon%u/energy%u_input", idx, m);
                fakesys_put(fs, rel, 0444, "%llu\n", start);
                snprintf(rel, sizeof(rel), "class/hwmon/hwmon%u/energy%u_label", idx, m);
                fakesys_put(fs, rel, 0444, "%s energy\n", m == 1 ? "CPU" : "IO");
        }
}

/* The ACPI power meter (NVIDIA Grace): power1_average in µW averaged over
 * power1_average_interval ms, power1_oem_info naming what it measures, and a
 * power1_input beside it that must not be counted twice. */
static inline void fakesys_hwmon_power_meter(const struct fakesys *fs, unsigned idx,
                                             unsigned long long uw, unsigned interval_ms)
{
        char rel[128];

        snprintf(rel, sizeof(rel), "class/hwmon/hwmon%u/name", idx);
        fakesys_put(fs, rel, 0444, "power_meter\n");
        snprintf(rel, sizeof(rel), "class/hwmon/hwmon%u/power1_average", idx);
        fakesys_put(fs, rel, 0444, "%llu\n", uw);
        snprintf(rel, sizeof(rel), "class/hwmon/hwmon%u/power1_input", idx);
        fakesys_put(fs, rel, 0444, "%llu\n", uw);
        snprintf(rel, sizeof(rel), "class/hwmon/hwmon%u/power1_average_interval", idx);
        fakesys_put(fs, rel, 0444, "%u\n", interval_ms);
        snprintf(rel, sizeof(rel), "class/hwmon/hwmon%u/power1_oem_info", idx);
        fakesys_put(fs, rel, 0444, "Module Power Socket %u\n", idx);
}

/* inotify on one directory: modifications, opens and closes of its files. */
static inline int fakesys_watch(const struct fakesys *fs, const char *reldir)
{
        char path[1024];
        int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

        ck_assert(fd >= 0);
        fakesys_path(fs, reldir, path, sizeof(path));
        ck_assert_msg(inotify_add_watch(fd, path, IN_MODIFY | IN_OPEN | IN_CLOSE) >= 0,
                      "inotify_add_watch %s: %s", path, strerror(errno));
        return fd;
}

/* Drains the pending events into a text log, one "<event> <name>\n" per event
 * (event: modify/open/close), and returns the number of events.  The kernel
 * merges an event identical to the one queued just before it, so callers
 * drain after each step they want to see. */
static inline int fakesys_events(int ifd, char *log, size_t len)
{
        char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
        size_t used = 0;
        int count = 0;
        ssize_t n;

        log[0] = '\0';
        while ((n = read(ifd, buf, sizeof(buf))) > 0) {
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;
                        const char *what = ev->mask & IN_MODIFY ? "modify"
                                           : ev->mask & IN_OPEN ? "open"
                                                                : "close";

                        if (used < len)
                                used += (size_t)snprintf(log + used, len - used, "%s %s\n", what,
                                                         ev->len ? ev->name : "");
                        count++;
                        p += sizeof(*ev) + ev->len;
                }
        }
        return count;
}

#endif
