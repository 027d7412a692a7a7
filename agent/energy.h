/* SPDX-License-Identifier: BSD-3-Clause */
/* Node energy where there is no RAPL (Arm servers): the hwmon class.
 *
 *   <sysroot>/class/hwmon/hwmonN/name            the driver's name
 *   <sysroot>/class/hwmon/hwmonN/energyM_input   energy counter, µJ (Ampere
 *                                                Altra's SMpro, amd_energy, ...)
 *   <sysroot>/class/hwmon/hwmonN/powerM_average  average power, µW (the ACPI
 *                                                power meter, as on NVIDIA Grace;
 *                                                powerM_average_interval in ms)
 *   <sysroot>/class/hwmon/hwmonN/powerM_input    instantaneous power, µW
 *
 * Energy counters are used when the node has any; power meters only when it
 * has none (one channel per M: powerM_average, else powerM_input).  The
 * node's figure is the sum of the channels used: the labels
 * (energyM_label, powerM_label) are kept so a reader can see what was
 * added.
 *
 * Counters: an hwmon counter has no stated range.  A reading below the
 * previous one is a 64-bit wrap when the previous one was in the upper half
 * of the range (2^63 or more), else a reset (driver reloaded, firmware
 * restarted the count): the energy since the reset is the new reading, and
 * `resets` counts them.  Power meters: the energy of an interval is its
 * length times the mean of the power read at its two ends (trapezoid), so
 * the figure is as good as the sampling interval is short against the
 * changes of power; the interval is stated in every record.
 *
 * Which source a node uses (mpi_pstate_energy_source): RAPL when
 * mpi_pstate_rapl_discover() finds zones (even unreadable ones: the status
 * then says no_access, no other source is substituted), else hwmon when it
 * finds channels, else none.  The label goes into every record
 * ("source": "rapl" | "hwmon" | "none").  See docs/cpufreq.md ("Energy"). */
#ifndef MPI_PSTATE_ENERGY_H
#define MPI_PSTATE_ENERGY_H
#include <stdint.h>

#include "rapl.h"

enum mpi_pstate_energy_source {
        MPI_PSTATE_ENERGY_NONE = 0,
        MPI_PSTATE_ENERGY_RAPL,
        MPI_PSTATE_ENERGY_HWMON,
};
const char *mpi_pstate_energy_source_name(enum mpi_pstate_energy_source s); /* none|rapl|hwmon */

#define MPI_PSTATE_HWMON_MAX_CHANNELS 32

enum mpi_pstate_hwmon_kind {
        MPI_PSTATE_HWMON_ENERGY = 0, /* energyM_input, µJ counter */
        MPI_PSTATE_HWMON_POWER,      /* powerM_average or powerM_input, µW */
};

struct mpi_pstate_hwmon_channel {
        char path[512]; /* the file read */
        char label[48]; /* "<name>/<label or file>", e.g. "smpro/CPU energy" */
        enum mpi_pstate_hwmon_kind kind;
        uint32_t avg_interval_ms; /* powerM_average_interval, 0 if none */
        int fd;
        uint64_t last;     /* last raw reading (µJ or µW) */
        uint64_t last_ns;  /* when it was taken (CLOCK_MONOTONIC) */
        uint64_t total_uj; /* energy since the sampler was opened */
        uint64_t resets;   /* counter resets seen (energy channels) */
        uint64_t wraps;    /* 64-bit wraps seen (energy channels) */
};

/* Discovery and sampler in one: channels found, files kept open. */
struct mpi_pstate_hwmon {
        enum mpi_pstate_rapl_status status; /* ok, absent (no channel), no_access, error */
        enum mpi_pstate_hwmon_kind kind;    /* of every channel used */
        unsigned n;
        struct mpi_pstate_hwmon_channel ch[MPI_PSTATE_HWMON_MAX_CHANNELS];
};

/* Pure: energy between two readings of an hwmon counter (rules above);
 * *reset (may be NULL) is set to 1 for a reset, 0 otherwise. */
uint64_t mpi_pstate_hwmon_counter_delta(uint64_t prev_uj, uint64_t cur_uj, int *reset);

/* Pure: energy of dt_ns at power p0 then p1 (µW), trapezoid, µJ. */
uint64_t mpi_pstate_hwmon_power_energy(uint64_t p0_uw, uint64_t p1_uw, uint64_t dt_ns);

/* Finds the channels under sysroot, opens them and takes the first reading
 * at now_ns.  Returns h->status.  h->n is 0 unless OK. */
enum mpi_pstate_rapl_status mpi_pstate_hwmon_open(const char *sysroot, struct mpi_pstate_hwmon *h,
                                                  uint64_t now_ns);

/* Reads every channel once (one pread each) at now_ns and accumulates.  A
 * failed read keeps the channel's state (the next good one covers the gap)
 * and is returned. */
enum mpi_pstate_rapl_status mpi_pstate_hwmon_sample(struct mpi_pstate_hwmon *h, uint64_t now_ns);

/* Energy of every channel since open, µJ. */
uint64_t mpi_pstate_hwmon_total_uj(const struct mpi_pstate_hwmon *h);

/* The interval a sampler of h should keep, ns: the meters' own averaging
 * interval when they state one (at least 100 ms), else 1 s for power
 * meters; for 64-bit counters max_ns (no wrap to outrun). */
uint64_t mpi_pstate_hwmon_interval_ns(const struct mpi_pstate_hwmon *h, uint64_t max_ns);

void mpi_pstate_hwmon_close(struct mpi_pstate_hwmon *h);

/* The node's source, chosen as above (probes only: opens nothing). */
enum mpi_pstate_energy_source mpi_pstate_energy_source(const char *sysroot);

#endif
