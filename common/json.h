/* SPDX-License-Identifier: BSD-3-Clause */
/* The one JSON text writer of the C components (the plugin's step record,
 * the agent's record, the preload library's profile files).
 *
 * A writer appends to its buffer; it either grows it (zero-initialised: the
 * caller frees .p) or fills a fixed buffer the caller owns.  A write that
 * does not fit, or an allocation that fails, sets .failed and makes every
 * later write a no-op, so callers check once at the end. */
#ifndef MPI_PSTATE_JSON_H
#define MPI_PSTATE_JSON_H
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Objects and arrays opened with _open() nest this deep at most. */
#define MPI_PSTATE_JSON_DEPTH 8

struct mpi_pstate_json {
        char *p;     /* the text so far, NUL-terminated once anything was written */
        size_t len;  /* bytes in p, not counting the NUL */
        size_t cap;  /* bytes p can hold */
        bool fixed;  /* p is the caller's buffer: never grown */
        bool failed; /* a write did not fit or an allocation failed */
        /* No space after ':' nor after the ',' of one-line members: the
         * plugin's step record has always been written so, and stays the
         * same byte for byte. */
        bool compact;
        unsigned depth;
        struct {
                const char *indent; /* NULL: members on one line */
                bool some;          /* a member was written: the next needs a comma */
                char close;
        } level[MPI_PSTATE_JSON_DEPTH];
};

/* A writer into the caller's buffer of cap bytes (cap >= 1; the text stays
 * NUL-terminated, truncation sets .failed). */
void mpi_pstate_json_fixed(struct mpi_pstate_json *j, char *buf, size_t cap);

__attribute__((format(printf, 2, 3))) void mpi_pstate_json_put(struct mpi_pstate_json *j,
                                                               const char *fmt, ...);

/* A JSON string, or null for NULL.  The text may come from a user (a host
 * name, a library's version string): quotes and backslashes are escaped, and
 * control characters, DEL and every byte >= 0x80 become \u00XX, so that the
 * output is ASCII and valid JSON whatever bytes came in. */
void mpi_pstate_json_str(struct mpi_pstate_json *j, const char *s);

/* A CPU set as a Linux cpulist without quotes ("0-3,8"; "" when empty). */
void mpi_pstate_json_cpulist(struct mpi_pstate_json *j, const cpu_set_t *set);

/* Objects and arrays whose commas the writer places.  _open() starts one
 * ('{' or '['): with an indent, each member goes on a line of its own
 * ("\n" indent) and the close on a line at the enclosing indent; without
 * (NULL), members follow on one line, ", " apart.  Before each member of an
 * object comes _key(), before each element of an array _elem(); the value
 * is then written with _put(), _str(), _bool() or another _open().  Deeper
 * than MPI_PSTATE_JSON_DEPTH sets .failed. */
void mpi_pstate_json_open(struct mpi_pstate_json *j, char open, const char *indent);
void mpi_pstate_json_close(struct mpi_pstate_json *j);
void mpi_pstate_json_key(struct mpi_pstate_json *j, const char *key);
void mpi_pstate_json_elem(struct mpi_pstate_json *j);
void mpi_pstate_json_bool(struct mpi_pstate_json *j, bool v);

/* A member of an object: _key() and its value in one call. */
void mpi_pstate_json_member_u64(struct mpi_pstate_json *j, const char *key, uint64_t v);
void mpi_pstate_json_member_str(struct mpi_pstate_json *j, const char *key, const char *s);
void mpi_pstate_json_member_bool(struct mpi_pstate_json *j, const char *key, bool v);

#endif
