/* SPDX-License-Identifier: BSD-3-Clause */
/* RAPL energy through the powercap sysfs tree:
 *   <sysroot>/class/powercap/intel-rapl:N     package zone, name "package-N" (or "psys")
 *   <sysroot>/class/powercap/intel-rapl:N:M   subzones, names "dram", "core", "uncore"
 * energy_uj is a counter in µJ that wraps at max_energy_range_uj and is
 * readable by root only since Linux 5.10.  Where there is no RAPL, or it
 * cannot be read, the status says so: no number is ever made up.
 * See docs/cpufreq.md ("RAPL"). */
#ifndef MPI_PSTATE_RAPL_H
#define MPI_PSTATE_RAPL_H
#include <stddef.h>
#include <stdint.h>

enum mpi_pstate_rapl_status {
        MPI_PSTATE_RAPL_OK = 0,
        MPI_PSTATE_RAPL_ABSENT,    /* no intel-rapl zone under class/powercap */
        MPI_PSTATE_RAPL_NO_ACCESS, /* zones exist, energy_uj refused (EACCES/EPERM) */
        MPI_PSTATE_RAPL_ERROR,     /* unreadable or malformed for another reason */
};

enum mpi_pstate_rapl_kind {
        MPI_PSTATE_RAPL_PACKAGE = 0,
        MPI_PSTATE_RAPL_DRAM,
        MPI_PSTATE_RAPL_CORE,
        MPI_PSTATE_RAPL_UNCORE,
        MPI_PSTATE_RAPL_PSYS,
        MPI_PSTATE_RAPL_OTHER,
        MPI_PSTATE_RAPL_NKINDS
};
#define MPI_PSTATE_RAPL_KIND_BIT(k) (1u << (k))

#define MPI_PSTATE_RAPL_MAX_ZONES 64

struct mpi_pstate_rapl_zone {
        char id[32];   /* "intel-rapl:0:1" */
        char dir[512]; /* <sysroot>/class/powercap/<id> */
        char name[32]; /* as the kernel names it: "package-0", "dram", ... */
        enum mpi_pstate_rapl_kind kind;
        int socket;            /* N of intel-rapl:N (package number), -1 for psys */
        uint64_t max_range_uj; /* wrap point of energy_uj */
};

struct mpi_pstate_rapl {
        enum mpi_pstate_rapl_status status;
        unsigned nzones;
        struct mpi_pstate_rapl_zone zones[MPI_PSTATE_RAPL_MAX_ZONES]; /* sorted by id */
};

const char *
mpi_pstate_rapl_status_name(enum mpi_pstate_rapl_status s); /* ok|absent|no_access|error */
/* package|dram|...: the record keeps only package and dram energy, under
 * keys of its own (record.c), so only the unit suite, which checks the
 * kinds it found, calls it. */
const char *mpi_pstate_rapl_kind_name(enum mpi_pstate_rapl_kind k);

/* Finds the zones and checks that the first energy_uj can be opened.
 * Returns out->status (zones are listed even with NO_ACCESS). */
enum mpi_pstate_rapl_status mpi_pstate_rapl_discover(const char *sysroot,
                                                     struct mpi_pstate_rapl *out);

/* Pure: energy between two readings of a counter that wraps at range_uj,
 * (cur - prev) mod range_uj.  Exact as long as at most one wrap happened. */
uint64_t mpi_pstate_rapl_delta(uint64_t prev_uj, uint64_t cur_uj, uint64_t range_uj);

/* Pure: the shortest time in which the counter can wrap at max_power_mw,
 * T = range_uj / P (µJ / µW = s), in µs; UINT64_MAX if max_power_mw is 0. */
uint64_t mpi_pstate_rapl_wrap_period_us(uint64_t range_uj, uint64_t max_power_mw);

/* Pure: the sampling interval to use so that no wrap is ever missed: half
 * the wrap period, which leaves room for a late sample (a sample delayed by
 * up to T/2 still sees at most one wrap). */
uint64_t mpi_pstate_rapl_sample_interval_us(uint64_t range_uj, uint64_t max_power_mw);

/* ---- sampler: kept fds, 64-bit accumulation across wraps ---- */
struct mpi_pstate_rapl_counter {
        int fd;
        enum mpi_pstate_rapl_kind kind;
        int socket;
        uint64_t range_uj;
        uint64_t last_uj;  /* last raw reading */
        uint64_t total_uj; /* energy since the sampler was opened */
        uint64_t wraps;    /* wraps seen */
};

struct mpi_pstate_rapl_sampler {
        enum mpi_pstate_rapl_status status;
        unsigned n;
        struct mpi_pstate_rapl_counter c[MPI_PSTATE_RAPL_MAX_ZONES];
};

/* Opens energy_uj of every zone whose kind is in kinds (a mask of
 * MPI_PSTATE_RAPL_KIND_BIT) and takes the first reading.  Not OK if r is not
 * OK, if no zone matches (ABSENT), or if a counter cannot be read. */
enum mpi_pstate_rapl_status mpi_pstate_rapl_sampler_open(struct mpi_pstate_rapl_sampler *s,
                                                         const struct mpi_pstate_rapl *r,
                                                         unsigned kinds);

/* Reads every counter once (one pread each) and accumulates.  On a failed
 * read the counter keeps its state and the status is returned (and kept in
 * s->status); the next good sample then covers the gap as long as at most one
 * wrap happened in it. */
enum mpi_pstate_rapl_status mpi_pstate_rapl_sampler_sample(struct mpi_pstate_rapl_sampler *s);

/* Energy accumulated by all counters of one kind (all sockets), µJ. */
uint64_t mpi_pstate_rapl_sampler_total_uj(const struct mpi_pstate_rapl_sampler *s,
                                          enum mpi_pstate_rapl_kind kind);

void mpi_pstate_rapl_sampler_close(struct mpi_pstate_rapl_sampler *s);

/* Shared with the hwmon source (energy.c): the first line of dir/file into
 * buf (0 or -errno), and one pread of a decimal counter at offset 0 that
 * must be <= range (0, -errno, or -EINVAL for a malformed value). */
int mpi_pstate_rapl_read_attr(const char *dir, const char *file, char *buf, size_t len);
int mpi_pstate_rapl_read_counter(int fd, uint64_t range, uint64_t *out);

#endif
