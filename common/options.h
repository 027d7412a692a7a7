/* SPDX-License-Identifier: BSD-3-Clause */
/* The user options of mpi-pstate: the struct every component reads, the
 * table-driven parser and the environment contract, all expanded from
 * common/options.def so that a new option is one entry there.
 *
 * Pure: knows nothing of Slurm or MPI.  Shared by the SPANK plugin (option
 * callbacks, task environment), the preload library (from_env) and the node
 * agent.
 *
 * Every function that can fail writes a complete, one-line message into err
 * (when err is not NULL), starting with "mpi-pstate: " and naming the option
 * or variable and the offending value, e.g.
 *   mpi-pstate: invalid value "abc" for --mpi-pstate-threshold: expected a
 *   duration such as 500us or 2ms
 * and returns a negative errno without touching the option it failed on. */
#ifndef MPI_PSTATE_OPTIONS_H
#define MPI_PSTATE_OPTIONS_H
#include <stddef.h>
#include <stdint.h>

enum mpi_pstate_mode {
#define MPI_PSTATE_WORD_MODE(ID, word, doc) MPI_PSTATE_MODE_##ID,
#include "options.def"
        MPI_PSTATE_MODE_COUNT
};

enum mpi_pstate_governor {
#define MPI_PSTATE_WORD_GOVERNOR(ID, word, doc) MPI_PSTATE_GOVERNOR_##ID,
#include "options.def"
        MPI_PSTATE_GOVERNOR_COUNT
};

enum mpi_pstate_bind {
#define MPI_PSTATE_WORD_BIND(ID, word, doc) MPI_PSTATE_BIND_##ID,
#include "options.def"
        MPI_PSTATE_BIND_COUNT
};

enum mpi_pstate_option_id {
#define MPI_PSTATE_OPTION(ID, field, TYPE, name, bare, arginfo, key, env, def, usage, doc)         \
        MPI_PSTATE_OPT_##ID,
#include "options.def"
        MPI_PSTATE_OPT_COUNT
};

/* C type of each value type of the table. */
#define MPI_PSTATE_CTYPE_MODE enum mpi_pstate_mode
#define MPI_PSTATE_CTYPE_DURATION uint64_t /* microseconds */
#define MPI_PSTATE_CTYPE_FREQ uint64_t     /* kHz, or MPI_PSTATE_FREQ_MIN/_EFFICIENT */
#define MPI_PSTATE_CTYPE_GOVERNOR enum mpi_pstate_governor
#define MPI_PSTATE_CTYPE_BIND enum mpi_pstate_bind

/* "min": the lowest frequency the core and the site allow, resolved on the
 * node (0 kHz is never a valid frequency, so it cannot collide). */
#define MPI_PSTATE_FREQ_MIN UINT64_C(0)
/* "efficient": the lowest frequency that still saves power per cycle (the
 * driver's lowest nonlinear frequency, else the knee calibrate measured,
 * else min), resolved on the node.  No frequency parses to it: cpufreq
 * figures are 32-bit. */
#define MPI_PSTATE_FREQ_EFFICIENT UINT64_MAX

/* Fields, one per entry of options.def: mode, threshold_us, low_khz,
 * governor, bind. */
struct mpi_pstate_options {
#define MPI_PSTATE_OPTION(ID, field, TYPE, name, bare, arginfo, key, env, def, usage, doc)         \
        MPI_PSTATE_CTYPE_##TYPE field;
#include "options.def"
};

/* Static description of one option, for registration and documentation. */
struct mpi_pstate_option_info {
        const char *name;    /* "mpi-pstate-threshold" (no leading dashes) */
        const char *bare;    /* value meant when given without argument, or NULL */
        const char *arginfo; /* "duration" */
        const char *key;     /* "threshold": admin key default_<key> */
        const char *env;     /* "MPI_PSTATE_THRESHOLD" */
        const char *def;     /* built-in default, as the user would write it */
        const char *usage;   /* one line for --help, "[mpi-pstate] "-prefixed */
};

/* NULL when id is out of range. */
const struct mpi_pstate_option_info *mpi_pstate_options_info(int id);

/* Option id for a long option name ("mpi-pstate-low", without "--"), or -1. */
int mpi_pstate_options_find(const char *name);

/* The word of an enumerated value ("profile"), or NULL when out of range. */
const char *mpi_pstate_options_mode_word(enum mpi_pstate_mode m);
const char *mpi_pstate_options_governor_word(enum mpi_pstate_governor g);
const char *mpi_pstate_options_bind_word(enum mpi_pstate_bind b);

/* Built-in defaults of options.def; the admin's default_<key> keys are
 * applied on top by the plugin (spank/plugstack.h). */
void mpi_pstate_options_defaults(struct mpi_pstate_options *o);

/* True when an option argument means "given without a value": NULL, "" and
 * the literal "(null)" (a bare option given to sbatch reaches srun steps that
 * way, through SLURM_SPANK__SLURM_SPANK_OPTION_*). */
int mpi_pstate_options_is_bare(const char *value);

/* Parses value for the option called name (long name without "--") into o.
 * A bare value selects the option's bare meaning, or fails when the option
 * requires an argument.  Returns 0, -ENOENT for an unknown name, -EINVAL or
 * -ERANGE for a bad value (o unchanged).  The plugin and the agent know the
 * option's id and call _set_id(); this by-name form is for the tests. */
int mpi_pstate_options_set(struct mpi_pstate_options *o, const char *name, const char *value,
                           char *err, size_t errlen);

/* Same, by option id. */
int mpi_pstate_options_set_id(struct mpi_pstate_options *o, int id, const char *value, char *err,
                              size_t errlen);

/* Strict parse of value into option id of o: no bare meaning, no message.
 * For callers with their own wording (plugstack keys).  0 or -errno. */
int mpi_pstate_options_parse(struct mpi_pstate_options *o, int id, const char *value);

/* What a value of option id looks like, for messages: "a duration such as
 * 500us or 2ms", "one of off, on, profile".  Returns buf. */
const char *mpi_pstate_options_expect(int id, char *buf, size_t len);

/* Canonical form of one option's value, as exported in the environment:
 * mode/governor/bind words, threshold in µs as a plain number, low in kHz
 * or "min".  Returns the length written, or -ENOSPC / -EINVAL. */
int mpi_pstate_options_format(const struct mpi_pstate_options *o, int id, char *buf, size_t len);

/* Human form for messages: "500us", "2ms", "1200MHz", "min", words. */
int mpi_pstate_options_format_human(const struct mpi_pstate_options *o, int id, char *buf,
                                    size_t len);

/* Reads every MPI_PSTATE_* variable that is set (unset ones keep the value
 * already in o, so call mpi_pstate_options_defaults first).  Stops at the
 * first bad variable and returns its error; the variables read before it are
 * applied. */
int mpi_pstate_options_from_env(struct mpi_pstate_options *o, char *err, size_t errlen);

/* Calls setenv_cb(ctx, name, canonical value) for every option, in table
 * order.  Returns 0, or the first non-zero value setenv_cb returned (the
 * remaining variables are not set), or -ENOSPC if a value does not fit. */
int mpi_pstate_options_to_env(const struct mpi_pstate_options *o,
                              int (*setenv_cb)(void *ctx, const char *name, const char *value),
                              void *ctx);

#endif
