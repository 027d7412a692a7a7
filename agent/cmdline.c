/* SPDX-License-Identifier: BSD-3-Clause */
/* mpi-pstate-agent's command line: its own options from
 * common/agent_args.def and the job's from common/options.def, parsed,
 * shown by --help and turned into the settings the agent runs with.
 * Nothing here is written per option: a new entry of either table is
 * parsed, shown and defaulted with no code. */
#include <getopt.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentd.h"
#include "contract.h"
#include "options.h"

#ifndef MPI_PSTATE_VERSION
#define MPI_PSTATE_VERSION "0"
#endif

/* getopt values: the agent's own entries, then the job's options. */
#define OPT_OWN 256
#define OPT_JOB (OPT_OWN + MPI_PSTATE_AGENT_ARG_COUNT)

static const size_t offsets[] = {
#define MPI_PSTATE_AGENT_ARG(ID, flag, TYPE, field, def, arginfo, PASS, help)                      \
        offsetof(struct agentd_opts, field),
#include "agent_args.def"
};

static const char usage_head[] =
    "usage: mpi-pstate-agent --shm PATH [--create N] --job J --step S [options]\n"
    "       mpi-pstate-agent --restore DIR [--job J [--step S]] [--cpus LIST] [--sysroot DIR]\n"
    "\n";
static const char usage_job[] =
    "\n"
    "The job's options, as srun names them or by their short key (common/options.def;\n"
    "the mode defaults to on, the others to the MPI_PSTATE_* variables, then the\n"
    "built-in defaults; the plugin passes them with the site's limits applied):\n";

__attribute__((format(printf, 1, 2))) int mpi_pstate_agentd_usage_error(const char *fmt, ...)
{
        va_list ap;

        fputs("mpi-pstate-agent: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs("\n(mpi-pstate-agent --help for the options)\n", stderr);
        return 2;
}

static void print_usage(void)
{
        static const char tag[] = "[mpi-pstate] ";
        const struct mpi_pstate_agent_arg_info *ai;
        const struct mpi_pstate_option_info *in;

        fputs(usage_head, stdout);
        for (int id = 0; (ai = mpi_pstate_agent_args_info(id)); id++)
                printf("  --%s%s%s\n      %s%s%s%s\n", ai->flag, ai->arginfo[0] ? " " : "",
                       ai->arginfo, ai->help, ai->def ? " (default " : "", ai->def ? ai->def : "",
                       ai->def ? ")" : "");
        fputs(usage_job, stdout);
        for (int id = 0; (in = mpi_pstate_options_info(id)); id++) {
                const char *u = in->usage;

                if (strncmp(u, tag, sizeof(tag) - 1) == 0)
                        u += sizeof(tag) - 1;
                printf("  --%s, --%s %s\n      %s (default %s)\n", in->name, in->key, in->arginfo,
                       u, id == MPI_PSTATE_OPT_MODE ? "on" : in->def);
        }
}

/* Every entry of both tables; the job's options under their srun name and
 * their short key (the plugin writes the srun names). */
static void make_longopts(struct option *lo)
{
        const struct mpi_pstate_agent_arg_info *ai;
        const struct mpi_pstate_option_info *in;
        size_t n = 0;

        for (int id = 0; (ai = mpi_pstate_agent_args_info(id)); id++)
                lo[n++] = (struct option){
                    ai->flag, mpi_pstate_agent_args_has_value(id) ? required_argument : no_argument,
                    NULL, OPT_OWN + id};
        for (int id = 0; (in = mpi_pstate_options_info(id)); id++) {
                lo[n++] = (struct option){in->name, required_argument, NULL, OPT_JOB + id};
                lo[n++] = (struct option){in->key, required_argument, NULL, OPT_JOB + id};
        }
        lo[n] = (struct option){NULL, 0, NULL, 0};
}

static int take(struct agentd_opts *o, int c, const char *arg)
{
        char err[256];
        int own = c == 'v'   ? MPI_PSTATE_AGENT_ARG_VERBOSE
                  : c == 'h' ? MPI_PSTATE_AGENT_ARG_HELP
                             : c - OPT_OWN;

        if (c >= OPT_JOB && c < OPT_JOB + MPI_PSTATE_OPT_COUNT) {
                if (mpi_pstate_options_set_id(&o->jobopt, c - OPT_JOB, arg, err, sizeof(err)) !=
                    0) {
                        fprintf(stderr, "%s\n", err);
                        return 2;
                }
                return 0;
        }
        if (own < 0 || own >= MPI_PSTATE_AGENT_ARG_COUNT)
                return mpi_pstate_agentd_usage_error("unknown option");
        if (mpi_pstate_agent_args_parse(o, offsets, own, arg, &o->given, err, sizeof(err)))
                return mpi_pstate_agentd_usage_error("%s", err);
        return 0;
}

int mpi_pstate_agentd_cmdline_parse(int argc, char **argv, struct agentd_opts *o)
{
        struct option lo[MPI_PSTATE_AGENT_ARG_COUNT + 2 * MPI_PSTATE_OPT_COUNT + 1];
        char err[512];
        int c, rc;

        memset(o, 0, sizeof(*o));
        mpi_pstate_agent_args_defaults(o, offsets);
        mpi_pstate_options_defaults(&o->jobopt);
        /* The plugin's variables, if the agent inherited them, are defaults
         * for the job's options (the command line wins); the mode is on
         * unless they say otherwise. */
        if (mpi_pstate_options_from_env(&o->jobopt, err, sizeof(err)) != 0)
                return mpi_pstate_agentd_usage_error("%s", err);
        if (!getenv(MPI_PSTATE_ENV_MODE))
                o->jobopt.mode = MPI_PSTATE_MODE_ON;
        make_longopts(lo);
        while ((c = getopt_long(argc, argv, "vh", lo, NULL)) != -1)
                if ((rc = take(o, c, optarg)))
                        return rc;
        if (optind < argc)
                return mpi_pstate_agentd_usage_error("unexpected argument '%s'", argv[optind]);
        if (o->version) {
                printf("mpi-pstate-agent %s (record version %d)\n", MPI_PSTATE_VERSION,
                       AGENTD_RECORD_VERSION);
                exit(0);
        }
        if (o->help) {
                print_usage();
                exit(0);
        }
        return 0;
}

bool mpi_pstate_agentd_given(const struct agentd_opts *o, int id)
{
        return (o->given >> id) & 1u;
}

/* The step's CPUs, a restore pass's too. */
static int resolve_cpus(struct agentd_opts *o)
{
        if (o->cpulist)
                return mpi_pstate_cpufreq_parse_cpulist(o->cpulist, &o->cpus);
        return sched_getaffinity(0, sizeof(o->cpus), &o->cpus);
}

int mpi_pstate_agentd_cmdline_resolve(struct agentd_opts *o)
{
        if (!mpi_pstate_agentd_given(o, MPI_PSTATE_AGENT_ARG_UID))
                o->uid = (uid_t)-1;
        if (!mpi_pstate_agentd_given(o, MPI_PSTATE_AGENT_ARG_GID))
                o->gid = (gid_t)-1;
        if (o->restore)
                return o->cpulist && resolve_cpus(o) ? 2 : 0;
        if (o->jobopt.mode == MPI_PSTATE_MODE_OFF)
                return mpi_pstate_agentd_usage_error(
                    "mode off: there is nothing for an agent to do");
        /* The site's limits were applied once, by the plugin (or the
         * launcher) that wrote the command line; the agent only keeps "min"
         * above --freq-min when it resolves it on the hardware. */
        o->profile = o->jobopt.mode == MPI_PSTATE_MODE_PROFILE;
        o->threshold_us = o->jobopt.threshold_us;
        o->low_khz = o->jobopt.low_khz;
        o->job_governor = o->jobopt.governor == MPI_PSTATE_GOVERNOR_KEEP
                              ? NULL
                              : mpi_pstate_options_governor_word(o->jobopt.governor);
        if (!o->shm)
                return mpi_pstate_agentd_usage_error("--shm is required");
        if (!mpi_pstate_agentd_given(o, MPI_PSTATE_AGENT_ARG_JOB) ||
            !mpi_pstate_agentd_given(o, MPI_PSTATE_AGENT_ARG_STEP))
                return mpi_pstate_agentd_usage_error(
                    "--job and --step are required (owner of the restore records)");
        if (resolve_cpus(o) != 0)
                return mpi_pstate_agentd_usage_error(
                    "no --cpus, and the agent's own affinity is unknown");
        if (!o->runtime_dir) {
                snprintf(o->runtime_buf, sizeof(o->runtime_buf), "%s/%u",
                         MPI_PSTATE_CONFIG_RUNTIME_DIR, o->job);
                o->runtime_dir = o->runtime_buf;
        }
        return 0;
}
