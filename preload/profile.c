/* SPDX-License-Identifier: BSD-3-Clause */
/* The preload library's profile writer (profile.h): a rank's profile files,
 * rank-<R>.json and rank-<R>.csv, written from its slot at the end of its
 * run; no MPI. */
#include "profile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

static const char *const thread_levels[] = {"single", "funneled", "serialized", "multiple"};
static const char *const clocks[] = {"none", "tsc", "monotonic"};

int mpi_pstate_profile_mkdirs(const char *dir)
{
        char p[PATH_MAX];
        size_t len = strlen(dir);

        if (len == 0 || len >= sizeof(p))
                return -EINVAL;
        memcpy(p, dir, len + 1);
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, 0777) != 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static double ns_to_s(uint64_t ns)
{
        return (double)ns / 1e9;
}

static uint64_t ticks_to_ns(const struct mpi_pstate_slot *s, uint64_t ticks)
{
        if (!s->ticks_per_sec)
                return 0;
        return (uint64_t)((unsigned __int128)ticks * 1000000000u / s->ticks_per_sec);
}

static void bucket_range(unsigned b, uint64_t *lo, uint64_t *hi)
{
        *lo = b ? UINT64_C(1) << (b - 1) : 0;
        *hi = b == 0 ? 0 : b >= 64 ? UINT64_MAX : (UINT64_C(1) << b) - 1;
        if (b == MPI_PSTATE_SLOT_HIST_BUCKETS - 1)
                *hi = UINT64_MAX;
}

struct totals {
        uint64_t wall_ns, mpi_ns, calls, bytes;
};

static struct totals totals_of(const struct mpi_pstate_slot *s,
                               const struct mpi_pstate_profile_meta *m)
{
        struct totals t = {0};

        if (s->app_end_ticks > s->app_start_ticks)
                t.wall_ns = ticks_to_ns(s, s->app_end_ticks - s->app_start_ticks);
        for (uint32_t i = 0; i < s->nfuncs; i++) {
                t.calls += s->fn[i].calls;
                t.bytes += s->fn[i].bytes;
                if (!m->app_time || m->app_time[i])
                        t.mpi_ns += s->fn[i].time_ns;
        }
        return t;
}

/* Members whose value is a signed integer, or a fixed-point number of so
 * many decimals (the writer's own members cover unsigned and strings). */
static void member_int(struct mpi_pstate_json *j, const char *key, int v)
{
        mpi_pstate_json_key(j, key);
        mpi_pstate_json_put(j, "%d", v);
}

static void member_fixed(struct mpi_pstate_json *j, const char *key, int decimals, double v)
{
        mpi_pstate_json_key(j, key);
        mpi_pstate_json_put(j, "%.*f", decimals, v);
}

/* The non-empty buckets of a histogram, one object a line; [] when none. */
static void write_hist_json(struct mpi_pstate_json *j, const char *key, const _Atomic uint64_t *h)
{
        bool some = false;

        for (unsigned b = 0; b < MPI_PSTATE_SLOT_HIST_BUCKETS; b++)
                some = some || h[b];
        mpi_pstate_json_key(j, key);
        mpi_pstate_json_open(j, '[', some ? "    " : NULL);
        for (unsigned b = 0; b < MPI_PSTATE_SLOT_HIST_BUCKETS; b++) {
                uint64_t lo, hi, n = h[b];

                if (!n)
                        continue;
                bucket_range(b, &lo, &hi);
                mpi_pstate_json_elem(j);
                mpi_pstate_json_open(j, '{', NULL);
                mpi_pstate_json_member_u64(j, "lo", lo);
                mpi_pstate_json_member_u64(j, "hi", hi);
                mpi_pstate_json_member_u64(j, "count", n);
                mpi_pstate_json_close(j);
        }
        mpi_pstate_json_close(j);
}

const char *mpi_pstate_profile_wait_word(uint32_t mode)
{
        static const char *const words[] = {"unknown", "poll", "yield", "sleep"};

        return words[mode <= MPI_PSTATE_WAIT_SLEEP ? mode : MPI_PSTATE_WAIT_UNKNOWN];
}

/* Who the rank is and how it was measured. */
static void write_json_identity(struct mpi_pstate_json *j, const struct mpi_pstate_slot *s,
                                const struct mpi_pstate_profile_meta *m, const char *host)
{
        member_int(j, "rank", s->rank);
        member_int(j, "size", s->size);
        mpi_pstate_json_member_u64(j, "local_rank", s->local_index);
        member_int(j, "pid", (int)s->pid);
        mpi_pstate_json_member_str(j, "host", host ? host : "");
        mpi_pstate_json_member_str(j, "abi", m->abi ? m->abi : "");
        mpi_pstate_json_member_str(j, "mpi_library", m->mpi_library ? m->mpi_library : "");
        mpi_pstate_json_member_str(j, "state", m->state ? m->state : "");
        mpi_pstate_json_member_str(j, "thread_level", thread_levels[s->thread_level & 3]);
        mpi_pstate_json_member_str(j, "clock", clocks[s->clock <= 2 ? s->clock : 0]);
        mpi_pstate_json_member_u64(j, "ticks_per_sec", s->ticks_per_sec);
        mpi_pstate_json_member_u64(j, "threshold_us", s->threshold_ns / 1000);
        member_int(j, "cpu", s->cpu);
        member_fixed(j, "start_time", 6, ns_to_s(s->start_ns));
}

/* The rank's totals, its long waits and how its library waits. */
static void write_json_totals(struct mpi_pstate_json *j, const struct mpi_pstate_slot *s,
                              const struct totals *t)
{
        member_fixed(j, "wall_s", 9, ns_to_s(t->wall_ns));
        member_fixed(j, "mpi_s", 9, ns_to_s(t->mpi_ns));
        member_fixed(j, "mpi_share", 6, t->wall_ns ? (double)t->mpi_ns / (double)t->wall_ns : 0.0);
        mpi_pstate_json_member_u64(j, "calls", t->calls);
        mpi_pstate_json_member_u64(j, "bytes", t->bytes);
        mpi_pstate_json_member_u64(j, "long_calls", s->long_calls);
        member_fixed(j, "long_s", 9, ns_to_s(s->long_ns));
        member_fixed(j, "over_threshold_s", 9, ns_to_s(s->over_ns));
        mpi_pstate_json_member_u64(j, "wakeups", s->wakeups);
        member_fixed(j, "clocked_down_s", 9, ns_to_s(s->down_ns));
        mpi_pstate_json_member_u64(j, "transitions", s->transitions);
        mpi_pstate_json_member_str(j, "wait_mode", mpi_pstate_profile_wait_word(s->wait_mode));
        mpi_pstate_json_member_u64(j, "wait_samples", s->wait_samples);
        if (s->wait_sampled_ns)
                member_fixed(j, "wait_cpu_share", 4,
                             s->wait_cpu_ns >= s->wait_sampled_ns
                                 ? 1.0
                                 : (double)s->wait_cpu_ns / (double)s->wait_sampled_ns);
        else
                mpi_pstate_json_member_str(j, "wait_cpu_share", NULL); /* null: none measured */
}

/* The functions called, one object a line; [] when none. */
static void write_json_functions(struct mpi_pstate_json *j, const struct mpi_pstate_slot *s)
{
        bool some = false;

        for (uint32_t i = 0; i < s->nfuncs; i++)
                some = some || s->fn[i].calls;
        mpi_pstate_json_key(j, "functions");
        mpi_pstate_json_open(j, '[', some ? "    " : NULL);
        for (uint32_t i = 0; i < s->nfuncs; i++) {
                const struct mpi_pstate_fn_stats *fn = &s->fn[i];

                if (!fn->calls)
                        continue;
                mpi_pstate_json_elem(j);
                mpi_pstate_json_open(j, '{', NULL);
                mpi_pstate_json_member_str(j, "name", fn->name);
                mpi_pstate_json_member_u64(j, "id", i);
                mpi_pstate_json_member_u64(j, "calls", fn->calls);
                member_fixed(j, "time_s", 9, ns_to_s(fn->time_ns));
                mpi_pstate_json_member_u64(j, "bytes", fn->bytes);
                mpi_pstate_json_member_u64(j, "long_calls", fn->long_calls);
                mpi_pstate_json_close(j);
        }
        mpi_pstate_json_close(j);
}

/* One object, a member a line (docs/preload.md, "Profile output"). */
static void write_json(struct mpi_pstate_json *j, const struct mpi_pstate_slot *s,
                       const struct mpi_pstate_profile_meta *m, const char *host)
{
        struct totals t = totals_of(s, m);

        mpi_pstate_json_open(j, '{', "  ");
        mpi_pstate_json_member_str(j, "format", "mpi-pstate-profile");
        mpi_pstate_json_member_u64(j, "version", 1);
        write_json_identity(j, s, m, host);
        write_json_totals(j, s, &t);
        write_json_functions(j, s);
        write_hist_json(j, "message_sizes", s->hist_bytes);
        write_hist_json(j, "durations_ns", s->hist_ns);
        mpi_pstate_json_close(j);
        mpi_pstate_json_put(j, "\n");
}

static void write_hist_csv(FILE *f, const char *section, const _Atomic uint64_t *h)
{
        for (unsigned b = 0; b < MPI_PSTATE_SLOT_HIST_BUCKETS; b++) {
                uint64_t lo, hi;

                bucket_range(b, &lo, &hi);
                if (h[b])
                        fprintf(f, "%s,%" PRIu64 "-%" PRIu64 ",%" PRIu64 ",,,,\n", section, lo, hi,
                                (uint64_t)h[b]);
        }
}

static void write_csv(FILE *f, const struct mpi_pstate_slot *s,
                      const struct mpi_pstate_profile_meta *m)
{
        struct totals t = totals_of(s, m);

        fprintf(f, "section,name,calls,time_s,bytes,long_calls,value\n");
        for (uint32_t i = 0; i < s->nfuncs; i++) {
                const struct mpi_pstate_fn_stats *fn = &s->fn[i];

                if (fn->calls)
                        fprintf(f, "function,%s,%" PRIu64 ",%.9f,%" PRIu64 ",%" PRIu64 ",\n",
                                fn->name, (uint64_t)fn->calls, ns_to_s(fn->time_ns),
                                (uint64_t)fn->bytes, (uint64_t)fn->long_calls);
        }
        fprintf(f, "summary,rank,,,,,%d\n", s->rank);
        fprintf(f, "summary,wall_s,,,,,%.9f\n", ns_to_s(t.wall_ns));
        fprintf(f, "summary,mpi_s,,,,,%.9f\n", ns_to_s(t.mpi_ns));
        fprintf(f, "summary,mpi_share,,,,,%.6f\n",
                t.wall_ns ? (double)t.mpi_ns / (double)t.wall_ns : 0.0);
        fprintf(f, "summary,long_s,,,,,%.9f\n", ns_to_s(s->long_ns));
        write_hist_csv(f, "message_size", s->hist_bytes);
        write_hist_csv(f, "duration_ns", s->hist_ns);
}

/* Writes dir/name through a temporary file; 0 or -errno. */
static int write_file(const char *dir, const char *name, const struct mpi_pstate_slot *s,
                      const struct mpi_pstate_profile_meta *m, const char *host, int json)
{
        char tmp[PATH_MAX], dst[PATH_MAX];
        FILE *f = NULL;
        int fd = -1, rc = 0;

        if (snprintf(dst, sizeof(dst), "%s/%s", dir, name) >= (int)sizeof(dst) ||
            snprintf(tmp, sizeof(tmp), "%s/.%s.%d", dir, name, (int)getpid()) >= (int)sizeof(tmp))
                return -ENAMETOOLONG;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0)
                return -errno;
        f = fdopen(fd, "w");
        if (!f) {
                rc = -errno;
                close(fd);
                goto out;
        }
        if (json) {
                struct mpi_pstate_json j = {0};

                write_json(&j, s, m, host);
                if (j.failed)
                        rc = -ENOMEM;
                else
                        fwrite(j.p, 1, j.len, f);
                free(j.p);
        } else {
                write_csv(f, s, m);
        }
        if (ferror(f) && !rc)
                rc = -EIO;
        if (fclose(f) != 0 && !rc)
                rc = -errno;
        if (!rc && rename(tmp, dst) != 0)
                rc = -errno;
out:
        if (rc)
                unlink(tmp);
        return rc;
}

int mpi_pstate_profile_write(const char *dir, const struct mpi_pstate_slot *slot,
                             const struct mpi_pstate_profile_meta *m)
{
        struct mpi_pstate_slot *copy = NULL;
        char host[256] = "", name[64];
        int rc;

        rc = mpi_pstate_profile_mkdirs(dir);
        if (rc)
                return rc;
        copy = malloc(sizeof(*copy));
        if (!copy)
                return -ENOMEM;
        /* a consistent copy: other threads may still be counting */
        rc = mpi_pstate_slot_snapshot(slot, copy);
        if (rc)
                goto out;
        if (gethostname(host, sizeof(host) - 1) != 0)
                strcpy(host, "?");
        snprintf(name, sizeof(name), "rank-%d.json", copy->rank);
        rc = write_file(dir, name, copy, m, host, 1);
        if (rc)
                goto out;
        snprintf(name, sizeof(name), "rank-%d.csv", copy->rank);
        rc = write_file(dir, name, copy, m, host, 0);
out:
        free(copy);
        return rc;
}
