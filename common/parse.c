/* SPDX-License-Identifier: BSD-3-Clause */
/* The strict parsers (parse.h): frequencies, durations, words, percentages,
 * carbon intensity, booleans and user or group ids, shared by the plugin,
 * the agent and the preload library. */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *skip_blank(const char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        return s;
}

static bool only_trailing_blank(const char *s)
{
        while (*s == ' ' || *s == '\t' || *s == '\n')
                s++;
        return *s == '\0';
}

/* Parses "<digits>[.<digits>]" and returns the value scaled by 10^frac_digits
 * so that "1.25" with frac_digits=6 gives 1250000 without floating point. */
static int parse_fixed(const char *s, unsigned frac_digits, uint64_t *val, const char **end)
{
        uint64_t v = 0;
        unsigned nd = 0, nf = 0;
        const char *p = s;

        for (; isdigit((unsigned char)*p); p++, nd++) {
                if (v > (UINT64_MAX - 9) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t)(*p - '0');
        }
        if (*p == '.') {
                p++;
                for (; isdigit((unsigned char)*p); p++) {
                        if (nf < frac_digits) {
                                if (v > (UINT64_MAX - 9) / 10)
                                        return -ERANGE;
                                v = v * 10 + (uint64_t)(*p - '0');
                                nf++;
                        } else if (*p != '0') {
                                return -EINVAL; /* more precision than the unit can hold */
                        }
                }
                if (nf == 0 && nd == 0)
                        return -EINVAL;
        }
        if (nd == 0 && nf == 0)
                return -EINVAL;
        for (; nf < frac_digits; nf++) {
                if (v > UINT64_MAX / 10)
                        return -ERANGE;
                v *= 10;
        }
        *val = v;
        *end = p;
        return 0;
}

int mpi_pstate_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
        char *end = NULL;
        unsigned long long v;

        if (!s)
                return -EINVAL;
        s = skip_blank(s);
        if (!isdigit((unsigned char)*s))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (end == s || !only_trailing_blank(end))
                return -EINVAL;
        if (v < min || v > max)
                return -ERANGE;
        *out = v;
        return 0;
}

struct unit {
        const char *name;
        unsigned frac_digits; /* power of ten between the unit and the base */
};

static int parse_with_units(const char *s, const struct unit *units, size_t nunits,
                            unsigned bare_digits, uint64_t *out)
{
        const char *p, *end, *numend;
        char ubuf[8];
        size_t ulen = 0;
        uint64_t v;
        int rc;

        if (!s)
                return -EINVAL;
        p = skip_blank(s);
        /* Find the unit suffix first: the scale decides how many fraction digits are legal. */
        end = p;
        while (isdigit((unsigned char)*end) || *end == '.')
                end++;
        numend = end;
        while (isalpha((unsigned char)end[ulen]) && ulen < sizeof(ubuf) - 1) {
                ubuf[ulen] = end[ulen];
                ulen++;
        }
        ubuf[ulen] = '\0';
        if (!only_trailing_blank(end + ulen))
                return -EINVAL;
        unsigned digits = bare_digits;
        if (ulen) {
                size_t i;
                for (i = 0; i < nunits; i++)
                        if (strcasecmp(ubuf, units[i].name) == 0)
                                break;
                if (i == nunits)
                        return -EINVAL;
                digits = units[i].frac_digits;
        }
        rc = parse_fixed(p, digits, &v, &end);
        if (rc)
                return rc;
        if (end != numend)
                return -EINVAL;
        *out = v;
        return 0;
}

int mpi_pstate_parse_freq_khz(const char *s, uint64_t *khz)
{
        static const struct unit units[] = {{"khz", 0}, {"mhz", 3}, {"ghz", 6}};
        uint64_t v;
        int rc = parse_with_units(s, units, sizeof(units) / sizeof(units[0]), 0, &v);

        if (rc)
                return rc;
        if (v == 0 || v > UINT32_MAX) /* cpufreq holds kHz in an unsigned int */
                return -ERANGE;
        *khz = v;
        return 0;
}

int mpi_pstate_parse_duration_us(const char *s, uint64_t *us)
{
        static const struct unit units[] = {{"us", 0}, {"ms", 3}, {"s", 6}};
        uint64_t v;
        int rc = parse_with_units(s, units, sizeof(units) / sizeof(units[0]), 0, &v);

        if (rc)
                return rc;
        if (v > UINT64_C(86400000000)) /* a day: anything longer is a typo */
                return -ERANGE;
        *us = v;
        return 0;
}

int mpi_pstate_parse_word(const char *s, const char *const *words, size_t n, int *out)
{
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (words[i] && strcasecmp(s, words[i]) == 0) {
                        *out = (int)i;
                        return 0;
                }
        }
        return -EINVAL;
}

int mpi_pstate_parse_percent_ppm(const char *s, uint64_t *ppm)
{
        uint64_t whole = 0, frac = 0, unit = 10000;
        const char *p = s;

        if (!p || *p < '0' || *p > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                whole = whole * 10 + (uint64_t)(*p - '0');
                if (whole > 100)
                        return -EINVAL;
        }
        if (*p == '.') {
                if (p[1] < '0' || p[1] > '9')
                        return -EINVAL;
                for (p++; *p >= '0' && *p <= '9'; p++) {
                        if (unit == 1) {
                                if (*p != '0')
                                        return -EINVAL; /* finer than a millionth */
                                continue;
                        }
                        unit /= 10;
                        frac += (uint64_t)(*p - '0') * unit;
                }
        }
        if (*p == '%')
                p++;
        if (*p || whole * 10000 + frac > 1000000)
                return -EINVAL;
        *ppm = whole * 10000 + frac;
        return 0;
}

/* One intensity: digits, optionally a point and up to 3 decimals, at most
 * MPI_PSTATE_CARBON_MAX; returns the end or NULL. */
static const char *carbon_number(const char *p)
{
        unsigned long whole = 0;
        int decimals = 0;

        if (*p < '0' || *p > '9')
                return NULL;
        for (; *p >= '0' && *p <= '9'; p++) {
                whole = whole * 10 + (unsigned long)(*p - '0');
                if (whole > MPI_PSTATE_CARBON_MAX)
                        return NULL;
        }
        if (*p == '.') {
                if (p[1] < '0' || p[1] > '9')
                        return NULL;
                for (p++; *p >= '0' && *p <= '9'; p++)
                        if (++decimals > 3 || (whole == MPI_PSTATE_CARBON_MAX && *p != '0'))
                                return NULL; /* finer than 1/1000, or past the maximum */
        }
        return p;
}

int mpi_pstate_parse_carbon(const char *s)
{
        const char *p = s;
        unsigned entries = 0, bare = 0;

        if (!p || !*p)
                return -EINVAL;
        for (;;) {
                const char *q = p;

                while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                       (*q >= '0' && *q <= '9') || *q == '_' || *q == '-' || *q == '.')
                        q++;
                if (*q == ':') {
                        if (q == p || q - p > 64)
                                return -EINVAL;
                        p = q + 1;
                } else if (bare++) {
                        return -EINVAL; /* one site-wide figure */
                }
                p = carbon_number(p);
                if (!p || ++entries > MPI_PSTATE_CARBON_ENTRIES)
                        return -EINVAL;
                if (!*p)
                        return 0;
                if (*p++ != ',')
                        return -EINVAL;
        }
}

int mpi_pstate_parse_bool(const char *s, bool *out)
{
        static const char *const yes[] = {"yes", "true", "on", "1"};
        static const char *const no[] = {"no", "false", "off", "0"};

        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < 4; i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *out = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *out = false;
                        return 0;
                }
        }
        return -EINVAL;
}

int mpi_pstate_parse_id(const char *s, bool group, uint32_t *id, uint32_t *primary)
{
        uint64_t v;

        if (mpi_pstate_parse_u64(s, 0, UINT32_MAX - 1, &v) == 0) {
                *id = (uint32_t)v;
                return 1;
        }
        if (group) {
                const struct group *g = getgrnam(s);

                if (!g)
                        return -EINVAL;
                *id = g->gr_gid;
                return 0;
        }
        const struct passwd *p = getpwnam(s);

        if (!p)
                return -EINVAL;
        *id = p->pw_uid;
        if (primary)
                *primary = p->pw_gid;
        return 0;
}
