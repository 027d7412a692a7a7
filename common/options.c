/* SPDX-License-Identifier: BSD-3-Clause */
/* The user options of mpi-pstate (options.h): the table of
 * common/options.def expanded into the parser, the formatters and the
 * environment contract every component reads. */
#include "options.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

enum value_type { TYPE_MODE, TYPE_DURATION, TYPE_FREQ, TYPE_GOVERNOR, TYPE_BIND };

/* Word lists built at compile time as ", a, b, c": the "+ 2" where they are
 * used drops the leading separator, so no list is ever assembled at run time
 * and the messages cannot drift from the table. */
#define MPI_PSTATE_WORD_MODE(ID, word, doc) ", " word
static const char mode_list[] = ""
#include "options.def"
    ;
#define MPI_PSTATE_WORD_GOVERNOR(ID, word, doc) ", " word
static const char governor_list[] = ""
#include "options.def"
    ;
#define MPI_PSTATE_WORD_BIND(ID, word, doc) ", " word
static const char bind_list[] = ""
#include "options.def"
    ;

static const char *const mode_words[] = {
#define MPI_PSTATE_WORD_MODE(ID, word, doc) [MPI_PSTATE_MODE_##ID] = word,
#include "options.def"
};
static const char *const governor_words[] = {
#define MPI_PSTATE_WORD_GOVERNOR(ID, word, doc) [MPI_PSTATE_GOVERNOR_##ID] = word,
#include "options.def"
};
static const char *const bind_words[] = {
#define MPI_PSTATE_WORD_BIND(ID, word, doc) [MPI_PSTATE_BIND_##ID] = word,
#include "options.def"
};

/* Enumerated types say "one of <their words>" instead. */
#define EXPECT_MODE NULL
#define EXPECT_DURATION "a duration such as 500us or 2ms"
#define EXPECT_FREQ "a frequency such as 1.2GHz, 1200MHz or 1200000 (kHz), min or efficient"
#define EXPECT_GOVERNOR NULL
#define EXPECT_BIND NULL

struct option_desc {
        struct mpi_pstate_option_info info;
        enum value_type type;
        size_t offset;
        const char *expect; /* "a duration such as ...", NULL for enumerated types */
};

static const struct option_desc options[] = {
#define MPI_PSTATE_OPTION(ID, field, TYPE, name, bare, arginfo, key, env, def, usage, doc)         \
        [MPI_PSTATE_OPT_##ID] = {{name, bare, arginfo, key, env, def, "[mpi-pstate] " usage},      \
                                 TYPE_##TYPE,                                                      \
                                 offsetof(struct mpi_pstate_options, field),                       \
                                 EXPECT_##TYPE},
#include "options.def"
};

#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static const char *type_words_list(enum value_type t)
{
        switch (t) {
        case TYPE_MODE:
                return mode_list + 2;
        case TYPE_GOVERNOR:
                return governor_list + 2;
        case TYPE_BIND:
                return bind_list + 2;
        default:
                return NULL;
        }
}

/* The "expected ..." part of an error message, e.g. "one of on, off". */
static const char *expect_text(size_t id, char *buf, size_t len)
{
        const char *list = type_words_list(options[id].type);

        if (!list)
                return options[id].expect;
        snprintf(buf, len, "one of %s", list);
        return buf;
}

const struct mpi_pstate_option_info *mpi_pstate_options_info(int id)
{
        if (id < 0 || (size_t)id >= NOPTIONS)
                return NULL;
        return &options[id].info;
}

int mpi_pstate_options_find(const char *name)
{
        if (!name)
                return -1;
        for (size_t i = 0; i < NOPTIONS; i++)
                if (strcmp(name, options[i].info.name) == 0)
                        return (int)i;
        return -1;
}

static const char *word_of(const char *const *words, size_t n, int v)
{
        if (v < 0 || (size_t)v >= n)
                return NULL;
        return words[v];
}

const char *mpi_pstate_options_mode_word(enum mpi_pstate_mode m)
{
        return word_of(mode_words, MPI_PSTATE_MODE_COUNT, (int)m);
}

const char *mpi_pstate_options_governor_word(enum mpi_pstate_governor g)
{
        return word_of(governor_words, MPI_PSTATE_GOVERNOR_COUNT, (int)g);
}

const char *mpi_pstate_options_bind_word(enum mpi_pstate_bind b)
{
        return word_of(bind_words, MPI_PSTATE_BIND_COUNT, (int)b);
}

int mpi_pstate_options_is_bare(const char *value)
{
        return !value || value[0] == '\0' || strcmp(value, "(null)") == 0;
}

/* Parses s into the field of type t at p; p untouched on failure. */
static int parse_value(enum value_type t, const char *s, void *p)
{
        uint64_t u;
        int w, rc;

        switch (t) {
        case TYPE_MODE:
                rc = mpi_pstate_parse_word(s, mode_words, MPI_PSTATE_MODE_COUNT, &w);
                if (rc == 0)
                        *(enum mpi_pstate_mode *)p = (enum mpi_pstate_mode)w;
                return rc;
        case TYPE_GOVERNOR:
                rc = mpi_pstate_parse_word(s, governor_words, MPI_PSTATE_GOVERNOR_COUNT, &w);
                if (rc == 0)
                        *(enum mpi_pstate_governor *)p = (enum mpi_pstate_governor)w;
                return rc;
        case TYPE_BIND:
                rc = mpi_pstate_parse_word(s, bind_words, MPI_PSTATE_BIND_COUNT, &w);
                if (rc == 0)
                        *(enum mpi_pstate_bind *)p = (enum mpi_pstate_bind)w;
                return rc;
        case TYPE_DURATION:
                rc = mpi_pstate_parse_duration_us(s, &u);
                if (rc == 0)
                        *(uint64_t *)p = u;
                return rc;
        case TYPE_FREQ:
                if (strcasecmp(s, "min") == 0 || strcasecmp(s, "efficient") == 0) {
                        *(uint64_t *)p = strcasecmp(s, "min") == 0 ? MPI_PSTATE_FREQ_MIN
                                                                   : MPI_PSTATE_FREQ_EFFICIENT;
                        return 0;
                }
                rc = mpi_pstate_parse_freq_khz(s, &u);
                if (rc == 0)
                        *(uint64_t *)p = u;
                return rc;
        }
        return -EINVAL;
}

/* Copies a user-supplied value into a message safely: printable ASCII kept,
 * quotes and backslashes escaped, everything else as \xNN, and long input
 * cut, so that garbage cannot forge log lines or flood them. */
static void quote_value(const char *s, char *out, size_t outlen)
{
        static const size_t max_in = 48;
        size_t o = 0, i;

        if (outlen == 0)
                return;
        for (i = 0; s[i] && i < max_in; i++) {
                unsigned char c = (unsigned char)s[i];
                char tmp[5];
                size_t n;

                if (c == '"' || c == '\\')
                        n = (size_t)snprintf(tmp, sizeof(tmp), "\\%c", c);
                else if (c < 0x20 || c > 0x7e)
                        n = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", c);
                else
                        n = (size_t)snprintf(tmp, sizeof(tmp), "%c", c);
                if (o + n >= outlen)
                        break;
                memcpy(out + o, tmp, n);
                o += n;
        }
        if (s[i] && o + 3 < outlen) {
                memcpy(out + o, "...", 3);
                o += 3;
        }
        out[o] = '\0';
}

static int set_value(struct mpi_pstate_options *o, size_t id, const char *value, bool from_env,
                     char *err, size_t errlen)
{
        const struct option_desc *d = &options[id];
        const char *label_pre = from_env ? "" : "--";
        const char *label = from_env ? d->info.env : d->info.name;
        char quoted[48 * 4 + 4], expect[160];
        int rc;

        if (!from_env && mpi_pstate_options_is_bare(value)) {
                if (!d->info.bare) {
                        if (err)
                                snprintf(err, errlen, "mpi-pstate: --%s needs a value: expected %s",
                                         label, expect_text(id, expect, sizeof(expect)));
                        return -EINVAL;
                }
                value = d->info.bare;
        }
        if (!value)
                value = "";
        rc = parse_value(d->type, value, (char *)o + d->offset);
        if (rc == 0)
                return 0;
        if (err) {
                quote_value(value, quoted, sizeof(quoted));
                snprintf(err, errlen, "mpi-pstate: invalid value \"%s\" for %s%s: expected %s",
                         quoted, label_pre, label, expect_text(id, expect, sizeof(expect)));
        }
        return rc;
}

void mpi_pstate_options_defaults(struct mpi_pstate_options *o)
{
        memset(o, 0, sizeof(*o));
        /* The built-in defaults are table strings parsed like user input, so
         * the documented default and the effective one are the same text;
         * tests/unit/common/test_options.c proves every one of them parses. */
        for (size_t i = 0; i < NOPTIONS; i++)
                (void)set_value(o, i, options[i].info.def, true, NULL, 0);
}

int mpi_pstate_options_parse(struct mpi_pstate_options *o, int id, const char *value)
{
        if (id < 0 || (size_t)id >= NOPTIONS || !value)
                return -EINVAL;
        return parse_value(options[id].type, value, (char *)o + options[id].offset);
}

const char *mpi_pstate_options_expect(int id, char *buf, size_t len)
{
        if (len == 0)
                return buf;
        buf[0] = '\0';
        if (id < 0 || (size_t)id >= NOPTIONS)
                return buf;
        const char *text = expect_text((size_t)id, buf, len);

        if (text != buf)
                snprintf(buf, len, "%s", text);
        return buf;
}

int mpi_pstate_options_set_id(struct mpi_pstate_options *o, int id, const char *value, char *err,
                              size_t errlen)
{
        if (id < 0 || (size_t)id >= NOPTIONS) {
                if (err)
                        snprintf(err, errlen, "mpi-pstate: unknown option id %d", id);
                return -ENOENT;
        }
        return set_value(o, (size_t)id, value, false, err, errlen);
}

int mpi_pstate_options_set(struct mpi_pstate_options *o, const char *name, const char *value,
                           char *err, size_t errlen)
{
        int id = mpi_pstate_options_find(name);

        if (id < 0) {
                char quoted[48 * 4 + 4];

                if (err) {
                        quote_value(name ? name : "", quoted, sizeof(quoted));
                        snprintf(err, errlen, "mpi-pstate: unknown option \"%s\"", quoted);
                }
                return -ENOENT;
        }
        return set_value(o, (size_t)id, value, false, err, errlen);
}

static int format_value(const struct mpi_pstate_options *o, int id, bool human, char *buf,
                        size_t len)
{
        const struct option_desc *d;
        const void *p;
        const char *word = NULL;
        uint64_t v = 0;
        int n;

        if (id < 0 || (size_t)id >= NOPTIONS)
                return -EINVAL;
        d = &options[id];
        p = (const char *)o + d->offset;
        switch (d->type) {
        case TYPE_MODE:
                word = mpi_pstate_options_mode_word(*(const enum mpi_pstate_mode *)p);
                break;
        case TYPE_GOVERNOR:
                word = mpi_pstate_options_governor_word(*(const enum mpi_pstate_governor *)p);
                break;
        case TYPE_BIND:
                word = mpi_pstate_options_bind_word(*(const enum mpi_pstate_bind *)p);
                break;
        case TYPE_DURATION:
        case TYPE_FREQ:
                v = *(const uint64_t *)p;
                break;
        }
        if (d->type == TYPE_MODE || d->type == TYPE_GOVERNOR || d->type == TYPE_BIND) {
                if (!word)
                        return -EINVAL;
                n = snprintf(buf, len, "%s", word);
        } else if (d->type == TYPE_FREQ &&
                   (v == MPI_PSTATE_FREQ_MIN || v == MPI_PSTATE_FREQ_EFFICIENT)) {
                n = snprintf(buf, len, "%s", v == MPI_PSTATE_FREQ_MIN ? "min" : "efficient");
        } else if (!human) {
                n = snprintf(buf, len, "%" PRIu64, v);
        } else if (d->type == TYPE_DURATION) {
                if (v != 0 && v % 1000000 == 0)
                        n = snprintf(buf, len, "%" PRIu64 "s", v / 1000000);
                else if (v != 0 && v % 1000 == 0)
                        n = snprintf(buf, len, "%" PRIu64 "ms", v / 1000);
                else
                        n = snprintf(buf, len, "%" PRIu64 "us", v);
        } else {
                if (v % 1000 == 0)
                        n = snprintf(buf, len, "%" PRIu64 "MHz", v / 1000);
                else
                        n = snprintf(buf, len, "%" PRIu64 "kHz", v);
        }
        if (n < 0 || (size_t)n >= len)
                return -ENOSPC;
        return n;
}

int mpi_pstate_options_format(const struct mpi_pstate_options *o, int id, char *buf, size_t len)
{
        return format_value(o, id, false, buf, len);
}

int mpi_pstate_options_format_human(const struct mpi_pstate_options *o, int id, char *buf,
                                    size_t len)
{
        return format_value(o, id, true, buf, len);
}

int mpi_pstate_options_from_env(struct mpi_pstate_options *o, char *err, size_t errlen)
{
        for (size_t i = 0; i < NOPTIONS; i++) {
                const char *v = getenv(options[i].info.env);
                int rc;

                if (!v)
                        continue;
                rc = set_value(o, i, v, true, err, errlen);
                if (rc)
                        return rc;
        }
        return 0;
}

int mpi_pstate_options_to_env(const struct mpi_pstate_options *o,
                              int (*setenv_cb)(void *ctx, const char *name, const char *value),
                              void *ctx)
{
        char buf[64];

        for (size_t i = 0; i < NOPTIONS; i++) {
                int rc = format_value(o, (int)i, false, buf, sizeof(buf));

                if (rc < 0)
                        return rc;
                rc = setenv_cb(ctx, options[i].info.env, buf);
                if (rc)
                        return rc;
        }
        return 0;
}
