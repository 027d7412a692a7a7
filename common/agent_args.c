/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent's command line from its table (common/agent_args.def):
 * one strict parser, formatter and writer per value type, so that the
 * agent that reads it and the plugin that writes it cannot disagree. */
#include "agent_args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errmsg.h"
#include "parse.h"
#include "safeio.h"
#include "slot.h"

static const struct mpi_pstate_agent_arg_info table[] = {
#define MPI_PSTATE_AGENT_ARG(ID, flag, TYPE, field, def, arginfo, PASS, help)                      \
        {flag, MPI_PSTATE_AGENT_T_##TYPE, def, arginfo, MPI_PSTATE_AGENT_PASS_##PASS, help},
#include "agent_args.def"
};

/* What a value of each type must be, for the error message. */
static const char *const expected[] = {
    [MPI_PSTATE_AGENT_T_PATH] = "an absolute path",
    [MPI_PSTATE_AGENT_T_TEXT] = "a value",
    [MPI_PSTATE_AGENT_T_NODE] = "a node name",
    [MPI_PSTATE_AGENT_T_CPUS] = "a CPU list such as 0-3,8",
    [MPI_PSTATE_AGENT_T_SLOTS] = "a slot count of at least 1",
    [MPI_PSTATE_AGENT_T_U32] = "a number below 2^32",
    [MPI_PSTATE_AGENT_T_USER] = "a user name or uid",
    [MPI_PSTATE_AGENT_T_GROUP] = "a group name or gid",
    [MPI_PSTATE_AGENT_T_RUNUSER] = "a user other than root",
    [MPI_PSTATE_AGENT_T_RUNGROUP] = "a group other than root's",
    [MPI_PSTATE_AGENT_T_MECH] = "auto, max_freq, setspeed or epp",
    [MPI_PSTATE_AGENT_T_BOOL] = "yes or no",
    [MPI_PSTATE_AGENT_T_FREQ] = "a frequency such as 1.2GHz",
    [MPI_PSTATE_AGENT_T_DURATION] = "a duration such as 10ms",
    [MPI_PSTATE_AGENT_T_PERCENT] = "a percentage such as 0.5",
    [MPI_PSTATE_AGENT_T_PRIO] = "a priority 0..99",
    [MPI_PSTATE_AGENT_T_FLAG] = "no value",
    [MPI_PSTATE_AGENT_T_COUNT] = "no value",
    [MPI_PSTATE_AGENT_T_ACTION] = "no value",
};

const struct mpi_pstate_agent_arg_info *mpi_pstate_agent_args_info(int id)
{
        return id >= 0 && id < MPI_PSTATE_AGENT_ARG_COUNT ? &table[id] : NULL;
}

bool mpi_pstate_agent_args_has_value(int id)
{
        const struct mpi_pstate_agent_arg_info *in = mpi_pstate_agent_args_info(id);

        return in && in->type != MPI_PSTATE_AGENT_T_FLAG && in->type != MPI_PSTATE_AGENT_T_COUNT &&
               in->type != MPI_PSTATE_AGENT_T_ACTION;
}

static bool is_string(enum mpi_pstate_agent_arg_type t)
{
        return t == MPI_PSTATE_AGENT_T_PATH || t == MPI_PSTATE_AGENT_T_TEXT ||
               t == MPI_PSTATE_AGENT_T_NODE || t == MPI_PSTATE_AGENT_T_CPUS;
}

/* An id of a user or group; the agent's own never root's. */
static int parse_ident(enum mpi_pstate_agent_arg_type t, const char *v, uint32_t *out)
{
        bool group = t == MPI_PSTATE_AGENT_T_GROUP || t == MPI_PSTATE_AGENT_T_RUNGROUP;
        uint32_t id;

        if (mpi_pstate_parse_id(v, group, &id, NULL) < 0)
                return -EINVAL;
        if ((t == MPI_PSTATE_AGENT_T_RUNUSER || t == MPI_PSTATE_AGENT_T_RUNGROUP) && id == 0)
                return -EINVAL;
        *out = id;
        return 0;
}

/* The value v of type t into field; nothing is written unless it is valid. */
static int parse_value(enum mpi_pstate_agent_arg_type t, const char *v, void *field)
{
        uint64_t u;
        bool b;

        switch (t) {
        case MPI_PSTATE_AGENT_T_PATH:
                if (v[0] != '/')
                        return -EINVAL;
                break;
        case MPI_PSTATE_AGENT_T_TEXT:
                if (!v[0])
                        return -EINVAL;
                break;
        case MPI_PSTATE_AGENT_T_NODE:
                if (mpi_pstate_safeio_check_name(v, 63))
                        return -EINVAL;
                break;
        case MPI_PSTATE_AGENT_T_CPUS: {
                cpu_set_t set;

                if (mpi_pstate_cpufreq_parse_cpulist(v, &set) || CPU_COUNT(&set) == 0)
                        return -EINVAL;
                break;
        }
        case MPI_PSTATE_AGENT_T_SLOTS:
        case MPI_PSTATE_AGENT_T_U32:
                if (mpi_pstate_parse_u64(
                        v, t == MPI_PSTATE_AGENT_T_SLOTS,
                        t == MPI_PSTATE_AGENT_T_SLOTS ? MPI_PSTATE_SEG_MAX_SLOTS : UINT32_MAX, &u))
                        return -EINVAL;
                *(uint32_t *)field = (uint32_t)u;
                return 0;
        case MPI_PSTATE_AGENT_T_USER:
        case MPI_PSTATE_AGENT_T_GROUP:
        case MPI_PSTATE_AGENT_T_RUNUSER:
        case MPI_PSTATE_AGENT_T_RUNGROUP:
                return parse_ident(t, v, field);
        case MPI_PSTATE_AGENT_T_MECH:
                return mpi_pstate_cpufreq_mech_parse(v, field) ? -EINVAL : 0;
        case MPI_PSTATE_AGENT_T_BOOL:
                if (mpi_pstate_parse_bool(v, &b))
                        return -EINVAL;
                *(bool *)field = b;
                return 0;
        case MPI_PSTATE_AGENT_T_FREQ:
                return mpi_pstate_parse_freq_khz(v, field) ? -EINVAL : 0;
        case MPI_PSTATE_AGENT_T_DURATION:
                return mpi_pstate_parse_duration_us(v, field) ? -EINVAL : 0;
        case MPI_PSTATE_AGENT_T_PERCENT:
                return mpi_pstate_parse_percent_ppm(v, field) ? -EINVAL : 0;
        case MPI_PSTATE_AGENT_T_PRIO:
                if (mpi_pstate_parse_u64(v, 0, 99, &u))
                        return -EINVAL;
                *(int *)field = (int)u;
                return 0;
        default:
                return -EINVAL;
        }
        *(const char **)field = v;
        return 0;
}

void mpi_pstate_agent_args_defaults(void *base, const size_t *offsets)
{
        for (int id = 0; id < MPI_PSTATE_AGENT_ARG_COUNT; id++)
                if (table[id].def)
                        (void)parse_value(table[id].type, table[id].def,
                                          (char *)base + offsets[id]);
}

int mpi_pstate_agent_args_default_of(int id, void *field)
{
        const struct mpi_pstate_agent_arg_info *in = mpi_pstate_agent_args_info(id);

        if (!in || !in->def)
                return -ENOENT;
        return parse_value(in->type, in->def, field);
}

int mpi_pstate_agent_args_parse(void *base, const size_t *offsets, int id, const char *value,
                                uint64_t *given, char *err, size_t errlen)
{
        const struct mpi_pstate_agent_arg_info *in = mpi_pstate_agent_args_info(id);
        void *field;

        if (!in)
                return -EINVAL;
        field = (char *)base + offsets[id];
        if (!mpi_pstate_agent_args_has_value(id)) {
                if (in->type == MPI_PSTATE_AGENT_T_COUNT)
                        ++*(int *)field;
                else
                        *(bool *)field = true;
        } else if (!value || parse_value(in->type, value, field) != 0) {
                mpi_pstate_errmsg_set(err, errlen, "--%s needs %s, not '%s'", in->flag,
                                      expected[in->type], value ? value : "");
                return -EINVAL;
        }
        if (given && id < 64)
                *given |= UINT64_C(1) << id;
        return 0;
}

bool mpi_pstate_agent_args_is_default(const void *base, const size_t *offsets, int id)
{
        const struct mpi_pstate_agent_arg_info *in = mpi_pstate_agent_args_info(id);
        union {
                const char *s;
                uint32_t u32;
                uint64_t u64;
                int i;
                bool b;
                enum mpi_pstate_cpufreq_mech m;
        } d;
        const void *f;

        if (!in)
                return true;
        f = (const char *)base + offsets[id];
        memset(&d, 0, sizeof(d));
        if (in->def)
                (void)parse_value(in->type, in->def, &d);
        switch (in->type) {
        case MPI_PSTATE_AGENT_T_SLOTS:
        case MPI_PSTATE_AGENT_T_U32:
        case MPI_PSTATE_AGENT_T_USER:
        case MPI_PSTATE_AGENT_T_GROUP:
        case MPI_PSTATE_AGENT_T_RUNUSER:
        case MPI_PSTATE_AGENT_T_RUNGROUP:
                return *(const uint32_t *)f == d.u32;
        case MPI_PSTATE_AGENT_T_FREQ:
        case MPI_PSTATE_AGENT_T_DURATION:
        case MPI_PSTATE_AGENT_T_PERCENT:
                return *(const uint64_t *)f == d.u64;
        case MPI_PSTATE_AGENT_T_PRIO:
        case MPI_PSTATE_AGENT_T_COUNT:
                return *(const int *)f == d.i;
        case MPI_PSTATE_AGENT_T_BOOL:
        case MPI_PSTATE_AGENT_T_FLAG:
        case MPI_PSTATE_AGENT_T_ACTION:
                return *(const bool *)f == d.b;
        case MPI_PSTATE_AGENT_T_MECH:
                return *(const enum mpi_pstate_cpufreq_mech *)f == d.m;
        default: {
                const char *s = *(const char *const *)f;

                return d.s ? s && strcmp(s, d.s) == 0 : !s;
        }
        }
}

/* Appends one formatted string into buf; NULL when it does not fit. */
__attribute__((format(printf, 4, 5))) static char *put(char *buf, size_t buflen, size_t *used,
                                                       const char *fmt, ...)
{
        char *s = buf + *used;
        va_list ap;
        int n;

        if (*used >= buflen)
                return NULL;
        va_start(ap, fmt);
        n = vsnprintf(s, buflen - *used, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= buflen - *used)
                return NULL;
        *used += (size_t)n + 1;
        return s;
}

/* The value of field as the agent parses it back, in buf when it is a
 * number; NULL when it does not fit or a string is missing. */
static const char *format_value(enum mpi_pstate_agent_arg_type t, const void *field, char *buf,
                                size_t buflen, size_t *used)
{
        switch (t) {
        case MPI_PSTATE_AGENT_T_SLOTS:
        case MPI_PSTATE_AGENT_T_U32:
        case MPI_PSTATE_AGENT_T_USER:
        case MPI_PSTATE_AGENT_T_GROUP:
        case MPI_PSTATE_AGENT_T_RUNUSER:
        case MPI_PSTATE_AGENT_T_RUNGROUP:
                return put(buf, buflen, used, "%" PRIu32, *(const uint32_t *)field);
        case MPI_PSTATE_AGENT_T_FREQ:
                return put(buf, buflen, used, "%" PRIu64, *(const uint64_t *)field);
        case MPI_PSTATE_AGENT_T_DURATION:
                return put(buf, buflen, used, "%" PRIu64 "us", *(const uint64_t *)field);
        case MPI_PSTATE_AGENT_T_PERCENT: {
                /* every digit a millionth needs: 5000 ppm is 0.5000 */
                uint64_t ppm = *(const uint64_t *)field;

                return put(buf, buflen, used, "%" PRIu64 ".%04" PRIu64, ppm / 10000u, ppm % 10000u);
        }
        case MPI_PSTATE_AGENT_T_PRIO:
                return put(buf, buflen, used, "%d", *(const int *)field);
        case MPI_PSTATE_AGENT_T_BOOL:
                return *(const bool *)field ? "yes" : "no";
        case MPI_PSTATE_AGENT_T_MECH:
                return mpi_pstate_cpufreq_mech_name(*(const enum mpi_pstate_cpufreq_mech *)field);
        default:
                return is_string(t) ? *(const char *const *)field : NULL;
        }
}

static bool writes(enum mpi_pstate_agent_arg_pass pass, enum mpi_pstate_agent_arg_pass writer)
{
        return pass == MPI_PSTATE_AGENT_PASS_ALWAYS || pass == MPI_PSTATE_AGENT_PASS_SET ||
               pass == writer;
}

int mpi_pstate_agent_args_write(const void *base, const size_t *offsets,
                                enum mpi_pstate_agent_arg_pass writer, char *buf, size_t buflen,
                                size_t *used, char **argv, size_t max, size_t *argc)
{
        for (int id = 0; id < MPI_PSTATE_AGENT_ARG_COUNT; id++) {
                const struct mpi_pstate_agent_arg_info *in = &table[id];
                const char *flag, *value = NULL;
                bool has = mpi_pstate_agent_args_has_value(id);

                if (!writes(in->pass, writer) ||
                    (in->pass != MPI_PSTATE_AGENT_PASS_ALWAYS &&
                     mpi_pstate_agent_args_is_default(base, offsets, id)))
                        continue;
                if (has) {
                        value = format_value(in->type, (const char *)base + offsets[id], buf,
                                             buflen, used);
                        if (!value) /* a string missing, or a number that does not fit */
                                return is_string(in->type) ? -EINVAL : -ENOSPC;
                }
                flag = put(buf, buflen, used, "--%s", in->flag);
                if (!flag || *argc + 1 + has >= max)
                        return -ENOSPC;
                argv[(*argc)++] = (char *)flag;
                if (has)
                        argv[(*argc)++] = (char *)value;
        }
        return 0;
}
