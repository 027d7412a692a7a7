/* SPDX-License-Identifier: BSD-3-Clause */
/* The plugstack.conf options of the plugin, parsed (plugstack.h): the key
 * table, each key's strict parse and default, the admin's limits applied to
 * a user's options, and Slurm's own governor settings taken in.  A bad key is
 * reported through the caller's callback, never an error. */
#include "plugstack.h"
#include "agent_args.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
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

/* What a key's value is, and so how it is parsed into its field. */
enum value_kind {
        VAL_OPTION,           /* default_<option key>: parsed by options.c */
        VAL_BOOL,             /* yes or no */
        VAL_GOVERNORS,        /* comma-separated governor words */
        VAL_FREQ_OR_NONE,     /* frequency; none = 0 */
        VAL_DURATION,         /* duration, at least the key's min */
        VAL_DURATION_OR_NONE, /* duration; none = MPI_PSTATE_CONFIG_THRESHOLD_MAX */
        VAL_DIR,              /* absolute path */
        VAL_RUNTIME_DIR,      /* absolute path, %h allowed */
        VAL_FILE,             /* absolute path of a file */
        VAL_MECHANISM,        /* a word of mechanisms[] */
        VAL_PERCENT_PPM,      /* percent of a core */
        VAL_CARBON,           /* g CO2/kWh, site-wide and per partition: for the reports */
        VAL_CHECKED_DIR,      /* a runtime_dir-like path the Epilogs use: only checked */
        VAL_CHECKED_DURATION, /* a duration the Epilogs use, at least min: only checked */
        VAL_AGENT_USER,       /* a user name, uid or uid:gid other than root's */
};

#define FIELD(f) offsetof(struct mpi_pstate_config, f), sizeof(((struct mpi_pstate_config *)0)->f)
#define NO_FIELD 0, 0

static const struct key {
        const char *name;
        enum value_kind kind;
        size_t off, size; /* the value's field in struct mpi_pstate_config */
        int opt;          /* option id for VAL_OPTION */
        uint64_t min;     /* VAL_DURATION's lowest value */
        const char *expect;
} keys[] = {
#define MPI_PSTATE_OPTION(ID, field, TYPE, name, bare, arginfo, key, env, def, usage, doc)         \
        {"default_" key, VAL_OPTION, NO_FIELD, MPI_PSTATE_OPT_##ID, 0, NULL},
#include "options.def"
    {"allow_off", VAL_BOOL, FIELD(allow_off), -1, 0, "yes or no"},
    {"allowed_governors", VAL_GOVERNORS, FIELD(governors), -1, 0,
     "a comma-separated list of governors"},
    {"freq_min", VAL_FREQ_OR_NONE, FIELD(freq_min_khz), -1, 0,
     "a frequency such as 1.2GHz, or none"},
    {"freq_max", VAL_FREQ_OR_NONE, FIELD(freq_max_khz), -1, 0, "a frequency such as 3GHz, or none"},
    {"threshold_min", VAL_DURATION, FIELD(threshold_min_us), -1, 0, "a duration such as 100us"},
    {"threshold_max", VAL_DURATION_OR_NONE, FIELD(threshold_max_us), -1, 0,
     "a duration such as 1s, or none"},
    {"collect_dir", VAL_DIR, FIELD(collect_dir), -1, 0,
     "an absolute directory path without . or .. components"},
    {"runtime_dir", VAL_RUNTIME_DIR, FIELD(runtime_dir), -1, 0,
     "an absolute directory path without . or .. components (escapes: %h, %%)"},
    {"preload", VAL_FILE, FIELD(preload), -1, 0,
     "an absolute file path without . or .. components"},
    {"agent", VAL_FILE, FIELD(agent), -1, 0, "an absolute file path without . or .. components"},
    {"mechanism", VAL_MECHANISM, FIELD(mechanism), -1, 0, "one of auto, max_freq, setspeed, epp"},
    {"sysroot", VAL_DIR, FIELD(sysroot), -1, 0,
     "an absolute directory path without . or .. components"},
    {"agent_cpu_budget", VAL_PERCENT_PPM, FIELD(agent_budget_ppm), -1, 0,
     "a percentage of one core such as 0.5 (0: no budget), at most 100"},
    {"carbon_g_per_kwh", VAL_CARBON, NO_FIELD, -1, 0,
     "grams of CO2 per kWh (0-5000), site-wide and/or per partition: 350 or 350,gpu:120"},
    {"metrics_dir", VAL_CHECKED_DIR, NO_FIELD, -1, 0,
     "an absolute directory path without . or .. components (escapes: %h, %%)"},
    /* the node Epilog's time for collect_dir per pass (epilog/mpi_pstate/delivery.py) */
    {"publish_timeout", VAL_CHECKED_DURATION, NO_FIELD, -1, 1000000,
     "a duration such as 10s, at least 1s"},
    {"agent_user", VAL_AGENT_USER, NO_FIELD, -1, 0,
     "a user name, uid or uid:gid known on the node, not root"},
    {"uncore", VAL_BOOL, FIELD(uncore), -1, 0, "yes or no"},
    /* below a millisecond the uncore's own latency is the wait */
    {"uncore_threshold", VAL_DURATION, FIELD(uncore_threshold_us), -1, 1000,
     "a duration such as 10ms, at least 1ms"},
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const char *const mechanisms[] = {"auto", "max_freq", "setspeed", "epp"};

const char *mpi_pstate_plugstack_key(size_t i)
{
        return i < NKEYS ? keys[i].name : NULL;
}

void mpi_pstate_plugstack_defaults(struct mpi_pstate_config *c)
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
        (void)mpi_pstate_agent_args_default_of(MPI_PSTATE_AGENT_ARG_BUDGET, &c->agent_budget_ppm);
        (void)mpi_pstate_agent_args_default_of(MPI_PSTATE_AGENT_ARG_UNCORE_THR,
                                               &c->uncore_threshold_us);
}

__attribute__((format(printf, 3, 4))) static void report_f(mpi_pstate_plugstack_report_f report,
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

static int parse_mechanism(const char *v, char *out, size_t outlen)
{
        /* The words of common/cpufreq.h's mpi_pstate_cpufreq_mech_parse();
         * spelled out so that this file stays free of the backend. */
        for (size_t i = 0; i < sizeof(mechanisms) / sizeof(mechanisms[0]); i++)
                if (strcmp(v, mechanisms[i]) == 0) {
                        snprintf(out, outlen, "%s", v);
                        return 0;
                }
        return -EINVAL;
}

static int parse_duration_at_least(const char *v, uint64_t min, uint64_t *us)
{
        int rc = mpi_pstate_parse_duration_us(v, us);

        return rc == 0 && *us < min ? -ERANGE : rc;
}

static int parse_duration_or_none(const char *v, uint64_t *us)
{
        if (strcasecmp(v, "none") == 0) {
                *us = MPI_PSTATE_CONFIG_THRESHOLD_MAX;
                return 0;
        }
        return mpi_pstate_parse_duration_us(v, us);
}

/* USER[:GROUP]: a name's group is its primary one, a bare uid's the same
 * number. */
static int parse_agent_user(struct mpi_pstate_config *c, const char *v)
{
        char user[128];
        const char *colon = strchr(v, ':');
        size_t ulen = colon ? (size_t)(colon - v) : strlen(v);
        uint32_t uid = 0, gid = 0;
        int rc;

        if (ulen == 0 || ulen >= sizeof(user))
                return -EINVAL;
        memcpy(user, v, ulen);
        user[ulen] = '\0';
        rc = mpi_pstate_parse_id(user, false, &uid, &gid);
        if (rc < 0)
                return rc;
        if (rc == 1)
                gid = uid;
        if (colon && mpi_pstate_parse_id(colon + 1, true, &gid, NULL) < 0)
                return -EINVAL;
        if (uid == 0 || gid == 0)
                return -EINVAL;
        c->agent_uid = uid;
        c->agent_gid = gid;
        return 0;
}

void mpi_pstate_plugstack_agent_ids(const struct mpi_pstate_config *c, uint32_t *uid, uint32_t *gid)
{
        const struct passwd *p;

        if (c->agent_uid) {
                *uid = c->agent_uid;
                *gid = c->agent_gid;
                return;
        }
        p = getpwnam(MPI_PSTATE_CONFIG_AGENT_USER);
        if (p && p->pw_uid != 0 && p->pw_gid != 0) {
                *uid = p->pw_uid;
                *gid = p->pw_gid;
                return;
        }
        (void)mpi_pstate_agent_args_default_of(MPI_PSTATE_AGENT_ARG_RUN_UID, uid);
        (void)mpi_pstate_agent_args_default_of(MPI_PSTATE_AGENT_ARG_RUN_GID, gid);
}

/* Every typed parser above fills its output only on success, so a bad
 * value leaves the field as it was. */
static int apply_key(struct mpi_pstate_config *c, const struct key *k, const char *v)
{
        void *f = (char *)c + k->off;
        char dir[sizeof(c->runtime_dir)];
        uint64_t u;
        int rc;

        switch (k->kind) {
        case VAL_OPTION:
                return mpi_pstate_options_parse(&c->defaults, k->opt, v);
        case VAL_BOOL:
                return mpi_pstate_parse_bool(v, f);
        case VAL_GOVERNORS:
                return parse_governors(v, f);
        case VAL_FREQ_OR_NONE:
                return parse_freq_or_none(v, f);
        case VAL_DURATION:
                rc = parse_duration_at_least(v, k->min, &u);
                break;
        case VAL_DURATION_OR_NONE:
                return parse_duration_or_none(v, f);
        case VAL_DIR:
                return parse_dir(v, f, k->size);
        case VAL_RUNTIME_DIR:
                return parse_runtime_dir(v, f, k->size);
        case VAL_FILE:
                return parse_file(v, f, k->size);
        case VAL_MECHANISM:
                return parse_mechanism(v, f, k->size);
        case VAL_PERCENT_PPM:
                return mpi_pstate_parse_percent_ppm(v, f);
        case VAL_CARBON:
                return mpi_pstate_parse_carbon(v);
        case VAL_CHECKED_DIR:
                return parse_runtime_dir(v, dir, sizeof(dir));
        case VAL_CHECKED_DURATION:
                return parse_duration_at_least(v, k->min, &u);
        case VAL_AGENT_USER:
                return parse_agent_user(c, v);
        default:
                return -EINVAL;
        }
        if (rc == 0)
                *(uint64_t *)f = u;
        return rc;
}

static int parse_word(struct mpi_pstate_config *c, const char *word,
                      mpi_pstate_plugstack_report_f report, void *ctx)
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
                 keys[i].kind == VAL_OPTION
                     ? mpi_pstate_options_expect(keys[i].opt, expect, sizeof(expect))
                     : keys[i].expect);
        return 1;
}

/* Keys that only make sense together: undo both when they contradict. */
static int check_pairs(struct mpi_pstate_config *c, mpi_pstate_plugstack_report_f report, void *ctx)
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
static int limit_defaults(struct mpi_pstate_config *c, mpi_pstate_plugstack_report_f report,
                          void *ctx)
{
        int problems = 0;

        for (int id = 0; id < MPI_PSTATE_OPT_COUNT; id++) {
                const struct mpi_pstate_option_info *info = mpi_pstate_options_info(id);
                enum mpi_pstate_limit r;
                char note[256];

                if (id == MPI_PSTATE_OPT_MODE)
                        continue;
                note[0] = '\0';
                r = mpi_pstate_plugstack_limit(c, &c->defaults, id, note, sizeof(note));
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

int mpi_pstate_plugstack_parse(struct mpi_pstate_config *c, int argc, char *const argv[],
                               mpi_pstate_plugstack_report_f report, void *ctx)
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

int mpi_pstate_plugstack_slurm(struct mpi_pstate_config *c, uint32_t slurm_governors,
                               bool slurm_freq_def, mpi_pstate_plugstack_report_f report, void *ctx)
{
        char note[512];

        c->slurm_governors = slurm_governors & ALL_GOVERNORS;
        c->slurm_freq_def = slurm_freq_def;
        if (mpi_pstate_plugstack_limit(c, &c->defaults, MPI_PSTATE_OPT_GOVERNOR, note,
                                       sizeof(note)) == MPI_PSTATE_LIMIT_OK)
                return 0;
        c->defaults.governor = MPI_PSTATE_GOVERNOR_KEEP;
        report_f(report, ctx, "%s (default_governor: using keep)", note);
        return 1;
}

enum mpi_pstate_limit mpi_pstate_plugstack_limit(const struct mpi_pstate_config *c,
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
