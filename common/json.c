/* SPDX-License-Identifier: BSD-3-Clause */
/* The one JSON text writer of the C components (json.h): escaping, CPU
 * lists, objects and arrays, into a growing or a fixed buffer. */
#include "json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void mpi_pstate_json_fixed(struct mpi_pstate_json *j, char *buf, size_t cap)
{
        *j = (struct mpi_pstate_json){.p = buf, .cap = cap, .fixed = true, .failed = cap == 0};
        if (cap)
                buf[0] = '\0';
}

void mpi_pstate_json_put(struct mpi_pstate_json *j, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (j->failed)
                return;
        for (;;) {
                size_t room = j->cap - j->len;

                va_start(ap, fmt);
                n = vsnprintf(room ? j->p + j->len : NULL, room, fmt, ap);
                va_end(ap);
                if (n < 0)
                        break;
                if ((size_t)n < room) {
                        j->len += (size_t)n;
                        return;
                }
                if (j->fixed)
                        break;
                /* Grown geometrically: a record of N writes costs O(N) copies. */
                size_t cap = j->cap * 2 + (size_t)n + 1;
                char *p = realloc(j->p, cap);

                if (!p)
                        break;
                j->p = p;
                j->cap = cap;
        }
        j->failed = true;
}

void mpi_pstate_json_str(struct mpi_pstate_json *j, const char *s)
{
        if (!s) {
                mpi_pstate_json_put(j, "null");
                return;
        }
        mpi_pstate_json_put(j, "\"");
        for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
                if (*c == '"' || *c == '\\')
                        mpi_pstate_json_put(j, "\\%c", *c);
                else if (*c < 0x20 || *c >= 0x7f)
                        mpi_pstate_json_put(j, "\\u%04x", *c);
                else
                        mpi_pstate_json_put(j, "%c", *c);
        }
        mpi_pstate_json_put(j, "\"");
}

void mpi_pstate_json_cpulist(struct mpi_pstate_json *j, const cpu_set_t *set)
{
        bool first = true;

        mpi_pstate_json_put(j, "%s", "");
        for (int c = 0; c < CPU_SETSIZE; c++) {
                int e = c;

                if (!CPU_ISSET(c, set))
                        continue;
                while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
                        e++;
                mpi_pstate_json_put(j, e > c ? "%s%d-%d" : "%s%d", first ? "" : ",", c, e);
                first = false;
                c = e;
        }
}

void mpi_pstate_json_open(struct mpi_pstate_json *j, char open, const char *indent)
{
        if (j->depth == MPI_PSTATE_JSON_DEPTH) {
                j->failed = true;
                return;
        }
        j->level[j->depth].indent = indent;
        j->level[j->depth].some = false;
        j->level[j->depth].close = open == '{' ? '}' : ']';
        j->depth++;
        mpi_pstate_json_put(j, "%c", open);
}

void mpi_pstate_json_close(struct mpi_pstate_json *j)
{
        const char *outer;

        if (j->depth == 0) {
                j->failed = true;
                return;
        }
        j->depth--;
        outer = j->depth ? j->level[j->depth - 1].indent : NULL;
        if (j->level[j->depth].indent)
                mpi_pstate_json_put(j, "\n%s", outer ? outer : "");
        mpi_pstate_json_put(j, "%c", j->level[j->depth].close);
}

void mpi_pstate_json_elem(struct mpi_pstate_json *j)
{
        const char *indent;

        if (j->depth == 0)
                return; /* the document's one value */
        indent = j->level[j->depth - 1].indent;
        if (indent)
                mpi_pstate_json_put(j, "%s\n%s", j->level[j->depth - 1].some ? "," : "", indent);
        else if (j->level[j->depth - 1].some)
                mpi_pstate_json_put(j, j->compact ? "," : ", ");
        j->level[j->depth - 1].some = true;
}

void mpi_pstate_json_key(struct mpi_pstate_json *j, const char *key)
{
        mpi_pstate_json_elem(j);
        mpi_pstate_json_str(j, key);
        mpi_pstate_json_put(j, j->compact ? ":" : ": ");
}

void mpi_pstate_json_bool(struct mpi_pstate_json *j, bool v)
{
        mpi_pstate_json_put(j, "%s", v ? "true" : "false");
}

void mpi_pstate_json_member_u64(struct mpi_pstate_json *j, const char *key, uint64_t v)
{
        mpi_pstate_json_key(j, key);
        mpi_pstate_json_put(j, "%" PRIu64, v);
}

void mpi_pstate_json_member_str(struct mpi_pstate_json *j, const char *key, const char *s)
{
        mpi_pstate_json_key(j, key);
        mpi_pstate_json_str(j, s);
}

void mpi_pstate_json_member_bool(struct mpi_pstate_json *j, const char *key, bool v)
{
        mpi_pstate_json_key(j, key);
        mpi_pstate_json_bool(j, v);
}
