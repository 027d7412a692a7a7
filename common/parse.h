/* SPDX-License-Identifier: BSD-3-Clause */
/* Strict parsers shared by the plugin, the agent and the preload library.
 * Every function returns 0 on success and a negative errno (-EINVAL for
 * malformed input, -ERANGE for out-of-range values) without touching *out on
 * failure, so callers can keep their defaults. */
#ifndef MPI_PSTATE_PARSE_H
#define MPI_PSTATE_PARSE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decimal unsigned integer, whole string, optional surrounding blanks and a
 * trailing newline (sysfs style); no sign, no hex, no octal surprises. */
int mpi_pstate_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Frequency to kHz: "1200000" (kHz, cpufreq's unit), "1200000kHz",
 * "1200MHz", "1.2GHz", "1.2GHz"; case-insensitive units. */
int mpi_pstate_parse_freq_khz(const char *s, uint64_t *khz);

/* Duration to microseconds: "500" (µs), "500us", "2ms", "1.5ms", "1s". */
int mpi_pstate_parse_duration_us(const char *s, uint64_t *us);

/* s is one of words[0..n-1] (case-insensitive; NULL entries never match):
 * *out = its index.  The parser of every enumerated setting. */
int mpi_pstate_parse_word(const char *s, const char *const *words, size_t n, int *out);

/* Percentage of one core to millionths: "0.5", "5", "0.25%", at most 100
 * and at most 4 decimals (finer than a millionth is refused). */
int mpi_pstate_parse_percent_ppm(const char *s, uint64_t *ppm);

/* The site's carbon intensity, carbon_g_per_kwh=: "G" and/or "PARTITION:G"
 * entries separated by commas (G grams of CO2 per kWh, 0 to
 * MPI_PSTATE_CARBON_MAX, up to 3 decimals; one site-wide G at most; a
 * partition name of 1-64 letters, digits, '_', '-', '.'; at most
 * MPI_PSTATE_CARBON_ENTRIES entries).  Only checked here: the reports
 * (epilog/mpi_pstate/parse.py carbon) use it.  0 or -EINVAL. */
#define MPI_PSTATE_CARBON_MAX 5000ul
#define MPI_PSTATE_CARBON_ENTRIES 64u
int mpi_pstate_parse_carbon(const char *s);

/* yes/no/true/false/on/off/1/0, case-insensitive; anything else is -EINVAL. */
int mpi_pstate_parse_bool(const char *s, bool *out);

/* A user (group: a group) as digits or as a name the node's database
 * knows.  Returns 1 for digits, 0 for a name (a user's primary group then
 * in *primary when not NULL), -EINVAL when unknown; *id untouched then. */
int mpi_pstate_parse_id(const char *s, bool group, uint32_t *id, uint32_t *primary);

#endif
