/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent's command line (common/agent_args.def): the types of its
 * values, and one parser, formatter and writer for every entry, used by
 * the agent (which parses it) and the SPANK plugin (which writes it).
 *
 * A struct that holds the command line declares the table's fields with
 * MPI_PSTATE_AGENT_ARG_FIELDS-style expansion:
 *
 *   #define MPI_PSTATE_AGENT_ARG(ID, flag, TYPE, field, def, arginfo, PASS, help) \
 *           mpi_pstate_agent_arg_##TYPE field;
 *   #include "agent_args.def"
 *
 * and describes where they are with an offset table made the same way
 * (offsetof(struct, field)); every function below takes that pair.
 * Pure: no Slurm, no agent, no file system. */
#ifndef MPI_PSTATE_AGENT_ARGS_H
#define MPI_PSTATE_AGENT_ARGS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpufreq.h"

/* The C type of each TYPE of the table. */
typedef const char *mpi_pstate_agent_arg_PATH;
typedef const char *mpi_pstate_agent_arg_TEXT;
typedef const char *mpi_pstate_agent_arg_NODE;
typedef const char *mpi_pstate_agent_arg_CPUS;
typedef uint32_t mpi_pstate_agent_arg_SLOTS;
typedef uint32_t mpi_pstate_agent_arg_U32;
typedef uint32_t mpi_pstate_agent_arg_USER;
typedef uint32_t mpi_pstate_agent_arg_GROUP;
typedef uint32_t mpi_pstate_agent_arg_RUNUSER;
typedef uint32_t mpi_pstate_agent_arg_RUNGROUP;
typedef enum mpi_pstate_cpufreq_mech mpi_pstate_agent_arg_MECH;
typedef bool mpi_pstate_agent_arg_BOOL;
typedef uint64_t mpi_pstate_agent_arg_FREQ;
typedef uint64_t mpi_pstate_agent_arg_DURATION;
typedef uint64_t mpi_pstate_agent_arg_PERCENT;
typedef int mpi_pstate_agent_arg_PRIO;
typedef bool mpi_pstate_agent_arg_FLAG;
typedef int mpi_pstate_agent_arg_COUNT;
typedef bool mpi_pstate_agent_arg_ACTION;

enum mpi_pstate_agent_arg_type {
        MPI_PSTATE_AGENT_T_PATH,
        MPI_PSTATE_AGENT_T_TEXT,
        MPI_PSTATE_AGENT_T_NODE,
        MPI_PSTATE_AGENT_T_CPUS,
        MPI_PSTATE_AGENT_T_SLOTS,
        MPI_PSTATE_AGENT_T_U32,
        MPI_PSTATE_AGENT_T_USER,
        MPI_PSTATE_AGENT_T_GROUP,
        MPI_PSTATE_AGENT_T_RUNUSER,
        MPI_PSTATE_AGENT_T_RUNGROUP,
        MPI_PSTATE_AGENT_T_MECH,
        MPI_PSTATE_AGENT_T_BOOL,
        MPI_PSTATE_AGENT_T_FREQ,
        MPI_PSTATE_AGENT_T_DURATION,
        MPI_PSTATE_AGENT_T_PERCENT,
        MPI_PSTATE_AGENT_T_PRIO,
        MPI_PSTATE_AGENT_T_FLAG,
        MPI_PSTATE_AGENT_T_COUNT,
        MPI_PSTATE_AGENT_T_ACTION,
};

/* Who writes an entry (the table's PASS column). */
enum mpi_pstate_agent_arg_pass {
        MPI_PSTATE_AGENT_PASS_ALWAYS,
        MPI_PSTATE_AGENT_PASS_SET,
        MPI_PSTATE_AGENT_PASS_PLUGIN,
        MPI_PSTATE_AGENT_PASS_EXEC,
        MPI_PSTATE_AGENT_PASS_HAND,
};

enum mpi_pstate_agent_arg_id {
#define MPI_PSTATE_AGENT_ARG(ID, flag, TYPE, field, def, arginfo, PASS, help)                      \
        MPI_PSTATE_AGENT_ARG_##ID,
#include "agent_args.def"
        MPI_PSTATE_AGENT_ARG_COUNT
};

struct mpi_pstate_agent_arg_info {
        const char *flag;
        enum mpi_pstate_agent_arg_type type;
        const char *def; /* NULL: none */
        const char *arginfo;
        enum mpi_pstate_agent_arg_pass pass;
        const char *help;
};

/* The entry id, NULL past the last. */
const struct mpi_pstate_agent_arg_info *mpi_pstate_agent_args_info(int id);

/* Whether the entry takes an argument (not FLAG, COUNT or ACTION). */
bool mpi_pstate_agent_args_has_value(int id);

/* Every entry with a default set to it in base (the others are left as
 * they are: zero in a zeroed struct). */
void mpi_pstate_agent_args_defaults(void *base, const size_t *offsets);

/* Entry id's default (the table's text, parsed) into field, which has the
 * entry's C type: for a setting the plugin keeps itself (its config's
 * defaults are the agent's).  -ENOENT when the entry has none. */
int mpi_pstate_agent_args_default_of(int id, void *field);

/* Parses value for entry id into base (COUNT: adds one, FLAG and ACTION:
 * true), and marks it given (*given, bit id).  0, or -EINVAL with a
 * message that names the option in err. */
int mpi_pstate_agent_args_parse(void *base, const size_t *offsets, int id, const char *value,
                                uint64_t *given, char *err, size_t errlen);

/* Whether entry id in base holds its default. */
bool mpi_pstate_agent_args_is_default(const void *base, const size_t *offsets, int id);

/* Appends, for every entry the writer (PLUGIN or EXEC) passes, "--flag"
 * and its value to argv[*argc..max), the values formatted into buf.  0,
 * -ENOSPC, or -EINVAL when an ALWAYS entry has no value. */
int mpi_pstate_agent_args_write(const void *base, const size_t *offsets,
                                enum mpi_pstate_agent_arg_pass writer, char *buf, size_t buflen,
                                size_t *used, char **argv, size_t max, size_t *argc);

#endif
