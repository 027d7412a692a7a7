#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

#define ALL_GOVERNORS ((UINT32_C(1) << MPI_PSTATE_GOVERNOR_COUNT) - 1)
#define GOV_BIT(g) (UINT32_C(1) << (g))

#define PREFIX "mpi-pstate: "
#define PREFIX_LEN (sizeof(PREFIX) - 1)

/* A value sized for messages; what the admin typed is cut, not trusted. */
#define VALUE_SHOWN 64

enum key_kind {
        KEY_DEFAULT,       /* default_<option key>: parsed by options.c */
        KEY_ALLOW_OFF,     /* bool */
        KEY_GOVERNORS,     /* comma-separated governor words */
        KEY_FREQ_MIN,      /* frequency or none */
        KEY_FREQ_MAX,      /* frequency or none */
        KEY_THRESHOLD_MIN, /* duration */
        KEY_THRESHOLD_MAX, /* duration or none */
        KEY_COLLECT_DIR,   /* absolute path */
        KEY_RUNTIME_DIR,   /* absolute path, %h allowed */
        KEY_PRELOAD,       /* absolute path */
        KEY_AGENT,         /* absolute path */
        KEY_MECHANISM,     /* auto|max_freq|setspeed */
        KEY_SYSROOT,       /* absolute path */
        KEY_AGENT_BUDGET,  /* percent of a core */
        KEY_CARBON,        /* g CO2/kWh, site-wide and per partition: for the reports */
        KEY_METRICS_DIR,   /* absolute path, %h allowed: the Epilogs' Prometheus files */
        KEY_UNCORE,        /* bool */
        KEY_UNCORE_THR,    /* duration */
};

static const struct key {
        const char *name;
        enum key_kind kind;
        int opt; /* option id for KEY_DEFAULT */
        const char *expect;
} keys[] = {
#define MPI_PSTATE_OPTION(ID, field, TYPE, name, bare, arginfo, key, env, def, usage, doc)         \
        {"default_" key, KEY_DEFAULT, MPI_PSTATE_OPT_##ID, NULL},
#include "options.def"
    {"allow_off", KEY_ALLOW_OFF, -1, "yes or no"},
    {"allowed_governors", KEY_GOVERNORS, -1, "a comma-separated list of governors"},
    {"freq_min", KEY_FREQ_MIN, -1, "a frequency such as 1.2GHz, or none"},
    {"freq_max", KEY_FREQ_MAX, -1, "a frequency such as 3GHz, or none"},
    {"threshold_min", KEY_THRESHOLD_MIN, -1, "a duration such as 100us"},
    {"threshold_max", KEY_THRESHOLD_MAX, -1, "a duration such as 1s, or none"},
    {"collect_dir", KEY_COLLECT_DIR, -1, "an absolute directory path without . or .. components"},
    {"runtime_dir", KEY_RUNTIME_DIR, -1,
     "an absolute directory path without . or .. components (escapes: %h, %%)"},
    {"preload", KEY_PRELOAD, -1, "an absolute file path without . or .. components"},
    {"agent", KEY_AGENT, -1, "an absolute file path without . or .. components"},
    {"mechanism", KEY_MECHANISM, -1, "one of auto, max_freq, setspeed, epp"},
    {"sysroot", KEY_SYSROOT, -1, "an absolute directory path without . or .. components"},
    {"agent_cpu_budget", KEY_AGENT_BUDGET, -1,
     "a percentage of one core such as 0.5 (0: no budget), at most 100"},
    {"carbon_g_per_kwh", KEY_CARBON, -1,
     "grams of CO2 per kWh (0-5000), site-wide and/or per partition: 350 or 350,gpu:120"},
    {"metrics_dir", KEY_METRICS_DIR, -1,
     "an absolute directory path without . or .. components (escapes: %h, %%)"},
    {"uncore", KEY_UNCORE, -1, "yes or no"},
    {"uncore_threshold", KEY_UNCORE_THR, -1, "a duration such as 10ms, at least 1ms"},
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const char *const mechanisms[] = {"auto", "max_freq", "setspeed", "epp"};

const char *mpi_pstate_config_key(size_t i)
{
        return i < NKEYS ? keys[i].name : NULL;
}

void mpi_pstate_config_defaults(struct mpi_pstate_config *c)
{
        memset(c, 0, sizeof(*c));
        mpi_pstate_options_defaults(&c->defaults);
        c->allow_off = true;
        c->governors = ALL_GOVERNORS;
        c->slurm_governors = ALL_GOVERNORS;
        c->freq_min_khz = 0;
        c->freq_max_khz = 0;
        c->threshold_min_us = 0;
        c->threshold_max_us = MPI_PSTATE_CONFIG_THRESHOLD_MAX;
        snprintf(c->collect_dir, sizeof(c->collect_dir), "%s", MPI_PSTATE_CONFIG_COLLECT_DIR);
        snprintf(c->runtime_dir, sizeof(c->runtime_dir), "%s", MPI_PSTATE_CONFIG_RUNTIME_DIR);
        snprintf(c->mechanism, sizeof(c->mechanism), "auto");
        snprintf(c->sysroot, sizeof(c->sysroot), "%s", MPI_PSTATE_CONFIG_SYSROOT);
        c->agent_budget_ppm = MPI_PSTATE_CONFIG_AGENT_BUDGET_PPM;
        c->uncore_threshold_us = MPI_PSTATE_CONFIG_UNCORE_THRESHOLD_US;
}

__attribute__((format(printf, 3, 4))) static void report_f(mpi_pstate_config_report_f report,
                                                           void *ctx, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        if (!report)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        report(ctx, msg);
}

/* Printable copy of admin input for a message (see options.c's quote). */
static void shown(const char *s, size_t n, char *out, size_t outlen)
{
        size_t o = 0, i;

        for (i = 0; i < n && s[i] && o + 2 < outlen && i < VALUE_SHOWN; i++) {
                unsigned char ch = (unsigned char)s[i];
                out[o++] = (ch < 0x20 || ch > 0x7e || ch == '"') ? '?' : (char)ch;
        }
        out[o] = '\0';
}

static int parse_freq_or_none(const char *v, uint64_t *khz)
{
        if (strcasecmp(v, "none") == 0) {
                *khz = 0;
                return 0;
        }
        return mpi_pstate_parse_freq_khz(v, khz);
}

static int parse_governors(const char *v, uint32_t *mask)
{
        uint32_t m = GOV_BIT(MPI_PSTATE_GOVERNOR_KEEP);
        const char *p = v;

        for (;;) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);
                char word[32];
                int g;

                if (n == 0 || n >= sizeof(word))
                        return -EINVAL;
                memcpy(word, p, n);
                word[n] = '\0';
                for (g = 0; g < MPI_PSTATE_GOVERNOR_COUNT; g++)
                        if (strcasecmp(word, mpi_pstate_options_governor_word(
                                                 (enum mpi_pstate_governor)g)) == 0)
                                break;
                if (g == MPI_PSTATE_GOVERNOR_COUNT)
                        return -EINVAL;
                m |= GOV_BIT(g);
                if (!comma)
                        break;
                p = comma + 1;
        }
        *mask = m;
        return 0;
}

/* Absolute, printable, no blank, no "." / ".." / empty component: these
 * directories are created and written by root, so a path that could be read
 * two ways is refused rather than normalised. */
static int parse_dir(const char *v, char *out, size_t outlen)
{
        size_t n = strlen(v);
        const char *p;

        if (n == 0 || n >= outlen || v[0] != '/' || n == 1)
                return -EINVAL;
        for (p = v; *p; p++)
                if ((unsigned char)*p <= 0x20 || (unsigned char)*p > 0x7e)
                        return -EINVAL;
        for (p = v; *p;) {
                const char *slash = strchr(p + 1, '/');
                size_t len = slash ? (size_t)(slash - p - 1) : strlen(p + 1);

                if (len == 0 && slash) /* "//" */
                        return -EINVAL;
                if ((len == 1 && p[1] == '.') || (len == 2 && p[1] == '.' && p[2] == '.'))
                        return -EINVAL;
                if (!slash)
                        break;
                p = slash;
        }
        /* A trailing slash is the only harmless ambiguity: drop it. */
        while (n > 1 && v[n - 1] == '/')
                n--;
        memcpy(out, v, n);
        out[n] = '\0';
        return 0;
}

/* The directory rules; "%h" (the host name) and "%%" are the only escapes. */
static int parse_runtime_dir(const char *v, char *out, size_t outlen)
{
        for (const char *p = strchr(v, '%'); p; p = strchr(p + 2, '%'))
                if (p[1] != 'h' && p[1] != '%')
                        return -EINVAL;
        return parse_dir(v, out, outlen);
}

/* A file: the directory rules, and no trailing slash (that names a directory). */
static int parse_file(const char *v, char *out, size_t outlen)
{
        size_t n = strlen(v);

        if (n == 0 || v[n - 1] == '/')
                return -EINVAL;
        return parse_dir(v, out, outlen);
}

static int apply_key(struct mpi_pstate_config *c, const struct key *k, const char *v)
{
        uint64_t u;
        uint32_t mask;
        bool b;
        int rc;

        switch (k->kind) {
        case KEY_DEFAULT:
                return mpi_pstate_options_parse(&c->defaults, k->opt, v);
        case KEY_ALLOW_OFF:
                rc = mpi_pstate_parse_bool(v, &b);
                if (rc == 0)
                        c->allow_off = b;
                return rc;
        case KEY_GOVERNORS:
                rc = parse_governors(v, &mask);
                if (rc == 0)
                        c->governors = mask;
                return rc;
        case KEY_FREQ_MIN:
                rc = parse_freq_or_none(v, &u);
                if (rc == 0)
                        c->freq_min_khz = u;
                return rc;
        case KEY_FREQ_MAX:
                rc = parse_freq_or_none(v, &u);
                if (rc == 0)
                        c->freq_max_khz = u;
                return rc;
        case KEY_THRESHOLD_MIN:
                rc = mpi_pstate_parse_duration_us(v, &u);
                if (rc == 0)
                        c->threshold_min_us = u;
                return rc;
        case KEY_THRESHOLD_MAX:
                if (strcasecmp(v, "none") == 0) {
                        c->threshold_max_us = MPI_PSTATE_CONFIG_THRESHOLD_MAX;
                        return 0;
                }
                rc = mpi_pstate_parse_duration_us(v, &u);
                if (rc == 0)
                        c->threshold_max_us = u;
                return rc;
        case KEY_COLLECT_DIR:
                return parse_dir(v, c->collect_dir, sizeof(c->collect_dir));
        case KEY_RUNTIME_DIR:
                return parse_runtime_dir(v, c->runtime_dir, sizeof(c->runtime_dir));
        case KEY_PRELOAD:
                return parse_file(v, c->preload, sizeof(c->preload));
        case KEY_AGENT:
                return parse_file(v, c->agent, sizeof(c->agent));
        case KEY_MECHANISM:
                /* The words of common/cpufreq.h's mpi_pstate_cpufreq_mech_parse();
                 * spelled out so that this file stays free of the backend. */
                for (size_t i = 0; i < sizeof(mechanisms) / sizeof(mechanisms[0]); i++)
                        if (strcmp(v, mechanisms[i]) == 0) {
                                snprintf(c->mechanism, sizeof(c->mechanism), "%s", v);
                                return 0;
                        }
                return -EINVAL;
        case KEY_SYSROOT:
                return parse_dir(v, c->sysroot, sizeof(c->sysroot));
        case KEY_AGENT_BUDGET:
                return mpi_pstate_parse_percent_ppm(v, &c->agent_budget_ppm);
        case KEY_CARBON:
                return mpi_pstate_parse_carbon(v);
        case KEY_UNCORE:
                rc = mpi_pstate_parse_bool(v, &b);
                if (rc == 0)
                        c->uncore = b;
                return rc;
        case KEY_UNCORE_THR:
                /* Below a millisecond the uncore's own latency is the wait. */
                rc = mpi_pstate_parse_duration_us(v, &u);
                if (rc == 0 && u < 1000)
                        rc = -ERANGE;
                if (rc == 0)
                        c->uncore_threshold_us = u;
                return rc;
        case KEY_METRICS_DIR: {
                /* the Epilogs write there; the plugin only checks the value */
                char dir[sizeof(c->runtime_dir)];

                return parse_runtime_dir(v, dir, sizeof(dir));
        }
        }
        return -EINVAL;
}

static int parse_word(struct mpi_pstate_config *c, const char *word,
                      mpi_pstate_config_report_f report, void *ctx)
{
        const char *eq = strchr(word, '=');
        char name[VALUE_SHOWN + 1], value[VALUE_SHOWN + 1], expect[160];
        size_t i, klen;

        if (!eq) {
                shown(word, strlen(word), name, sizeof(name));
                report_f(report, ctx,
                         PREFIX "plugstack.conf: argument \"%s\" is not key=value: ignored", name);
                return 1;
        }
        klen = (size_t)(eq - word);
        for (i = 0; i < NKEYS; i++)
                if (strlen(keys[i].name) == klen && strncmp(word, keys[i].name, klen) == 0)
                        break;
        shown(word, klen, name, sizeof(name));
        if (i == NKEYS) {
                report_f(report, ctx, PREFIX "plugstack.conf: unknown key \"%s\": ignored", name);
                return 1;
        }
        if (eq[1] != '\0' && apply_key(c, &keys[i], eq + 1) == 0)
                return 0;
        shown(eq + 1, strlen(eq + 1), value, sizeof(value));
        report_f(report, ctx,
                 PREFIX "plugstack.conf: invalid value \"%s\" for %s: expected %s; "
                        "key ignored",
                 value, keys[i].name,
                 keys[i].kind == KEY_DEFAULT
                     ? mpi_pstate_options_expect(keys[i].opt, expect, sizeof(expect))
                     : keys[i].expect);
        return 1;
}

/* Keys that only make sense together: undo both when they contradict. */
static int check_pairs(struct mpi_pstate_config *c, mpi_pstate_config_report_f report, void *ctx)
{
        int problems = 0;

        if (c->freq_min_khz && c->freq_max_khz && c->freq_min_khz > c->freq_max_khz) {
                report_f(report, ctx,
                         PREFIX "plugstack.conf: freq_min (%llu kHz) is above freq_max "
                                "(%llu kHz): both ignored",
                         (unsigned long long)c->freq_min_khz, (unsigned long long)c->freq_max_khz);
                c->freq_min_khz = 0;
                c->freq_max_khz = 0;
                problems++;
        }
        if (c->threshold_min_us > c->threshold_max_us) {
                report_f(report, ctx,
                         PREFIX "plugstack.conf: threshold_min (%llu us) is above "
                                "threshold_max (%llu us): both ignored",
                         (unsigned long long)c->threshold_min_us,
                         (unsigned long long)c->threshold_max_us);
                c->threshold_min_us = 0;
                c->threshold_max_us = MPI_PSTATE_CONFIG_THRESHOLD_MAX;
                problems++;
        }
        return problems;
}

/* The site's own defaults must obey the site's limits; mode is exempt
 * because allow_off limits what users ask for, not the default. */
static int limit_defaults(struct mpi_pstate_config *c, mpi_pstate_config_report_f report, void *ctx)
{
        int problems = 0;

        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                const struct mpi_pstate_option_info *info = mpi_pstate_options_info(id);
                enum mpi_pstate_limit r;
                char note[256];

                if (id == MPI_PSTATE_OPT_MODE)
                        continue;
                note[0] = '\0';
                r = mpi_pstate_config_limit(c, &c->defaults, id, note, sizeof(note));
                if (r == MPI_PSTATE_LIMIT_OK)
                        continue;
                if (r == MPI_PSTATE_LIMIT_REFUSED)
                        mpi_pstate_options_parse(&c->defaults, id, info->def);
                report_f(report, ctx, PREFIX "plugstack.conf: default_%s: %s", info->key,
                         strncmp(note, PREFIX, PREFIX_LEN) == 0 ? note + PREFIX_LEN : note);
                problems++;
        }
        return problems;
}

int mpi_pstate_config_parse(struct mpi_pstate_config *c, int argc, char *const argv[],
                            mpi_pstate_config_report_f report, void *ctx)
{
        int problems = 0;

        for (int i = 0; i < argc; i++)
                if (argv && argv[i])
                        problems += parse_word(c, argv[i], report, ctx);
        problems += check_pairs(c, report, ctx);
        problems += limit_defaults(c, report, ctx);
        return problems;
}

static void human(const struct mpi_pstate_options *o, int id, char *buf, size_t len)
{
        if (mpi_pstate_options_format_human(o, id, buf, len) < 0)
                snprintf(buf, len, "?");
}

/* Renders a limit in the unit of option id, for notes. */
static void human_limit(int id, uint64_t v, char *buf, size_t len)
{
        struct mpi_pstate_options tmp;

        mpi_pstate_options_defaults(&tmp);
        if (id == MPI_PSTATE_OPT_THRESHOLD)
                tmp.threshold_us = v;
        else
                tmp.low_khz = v;
        human(&tmp, id, buf, len);
}

static void governor_list(uint32_t mask, char *buf, size_t len)
{
        size_t o = 0;

        buf[0] = '\0';
        for (int g = 0; g < MPI_PSTATE_GOVERNOR_COUNT; g++) {
                const char *w = mpi_pstate_options_governor_word((enum mpi_pstate_governor)g);
                int n;

                if (!(mask & GOV_BIT(g)))
                        continue;
                n = snprintf(buf + o, len - o, "%s%s", o ? "," : "", w);
                if (n < 0 || (size_t)n >= len - o)
                        return;
                o += (size_t)n;
        }
}

static enum mpi_pstate_limit clamp_u64(uint64_t *v, uint64_t lo, uint64_t hi, int id,
                                       const char *what, const char *lokey, const char *hikey,
                                       char *note, size_t notelen)
{
        char was[32], now[32];
        bool below = *v < lo;

        if (*v >= lo && *v <= hi)
                return MPI_PSTATE_LIMIT_OK;
        human_limit(id, *v, was, sizeof(was));
        *v = below ? lo : hi;
        human_limit(id, *v, now, sizeof(now));
        if (note)
                snprintf(note, notelen, PREFIX "%s %s is %s the site's %s (%s): using %s", what,
                         was, below ? "below" : "above", below ? "minimum" : "maximum",
                         below ? lokey : hikey, now);
        return MPI_PSTATE_LIMIT_ADJUSTED;
}

/* Slurm's CpuFreqGovernors narrowed by allowed_governors; keep always. */
static uint32_t allowed_governors(const struct mpi_pstate_config *c)
{
        return (c->governors & c->slurm_governors) | GOV_BIT(MPI_PSTATE_GOVERNOR_KEEP);
}

int mpi_pstate_config_slurm(struct mpi_pstate_config *c, uint32_t slurm_governors,
                            bool slurm_freq_def, mpi_pstate_config_report_f report, void *ctx)
{
        char note[512];

        c->slurm_governors = slurm_governors & ALL_GOVERNORS;
        c->slurm_freq_def = slurm_freq_def;
        if (mpi_pstate_config_limit(c, &c->defaults, MPI_PSTATE_OPT_GOVERNOR, note, sizeof(note)) ==
            MPI_PSTATE_LIMIT_OK)
                return 0;
        c->defaults.governor = MPI_PSTATE_GOVERNOR_KEEP;
        report_f(report, ctx, "%s (default_governor: using keep)", note);
        return 1;
}

enum mpi_pstate_limit mpi_pstate_config_limit(const struct mpi_pstate_config *c,
                                              struct mpi_pstate_options *o, int id, char *note,
                                              size_t notelen)
{
        char list[160], word[32];

        switch (id) {
        case MPI_PSTATE_OPT_MODE:
                if (o->mode != MPI_PSTATE_MODE_OFF || c->allow_off)
                        return MPI_PSTATE_LIMIT_OK;
                o->mode = MPI_PSTATE_MODE_PROFILE;
                if (note)
                        snprintf(note, notelen,
                                 PREFIX "this site does not allow --mpi-pstate=off "
                                        "(allow_off=no): using profile, which measures but "
                                        "never changes a frequency");
                return MPI_PSTATE_LIMIT_ADJUSTED;
        case MPI_PSTATE_OPT_THRESHOLD:
                return clamp_u64(&o->threshold_us, c->threshold_min_us, c->threshold_max_us, id,
                                 "threshold", "threshold_min", "threshold_max", note, notelen);
        case MPI_PSTATE_OPT_LOW:
                if (o->low_khz == MPI_PSTATE_FREQ_MIN || o->low_khz == MPI_PSTATE_FREQ_EFFICIENT)
                        return MPI_PSTATE_LIMIT_OK; /* resolved against freq_min on the node */
                return clamp_u64(&o->low_khz, c->freq_min_khz,
                                 c->freq_max_khz ? c->freq_max_khz : UINT64_MAX, id,
                                 "low frequency", "freq_min", "freq_max", note, notelen);
        case MPI_PSTATE_OPT_GOVERNOR:
                if ((unsigned)o->governor < MPI_PSTATE_GOVERNOR_COUNT &&
                    (allowed_governors(c) & GOV_BIT(o->governor)))
                        return MPI_PSTATE_LIMIT_OK;
                human(o, id, word, sizeof(word));
                governor_list(allowed_governors(c), list, sizeof(list));
                if (note)
                        snprintf(note, notelen,
                                 PREFIX "governor %s is not allowed on this cluster "
                                        "(%sallowed_governors: %s)",
                                 word,
                                 c->slurm_governors == ALL_GOVERNORS
                                     ? ""
                                     : "slurm.conf CpuFreqGovernors narrowed by ",
                                 list);
                o->governor = c->defaults.governor;
                return MPI_PSTATE_LIMIT_REFUSED;
        default:
                return MPI_PSTATE_LIMIT_OK;
        }
}
