/* SPDX-License-Identifier: BSD-3-Clause */
/* Container detection (container.h): whether the preload library is in the
 * root a task will run in, from an OCI bundle's config.json (read in one
 * bounded pass), Apptainer's environment or the task's own root. */
#include "container.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safeio.h"

/* config.json of a real bundle is a few KiB; a bigger one is not read. */
#define OCI_CONFIG_MAX (256 * 1024)

static const char *const names[] = {
    [MPI_PSTATE_CONTAINER_NONE] = NULL,
    [MPI_PSTATE_CONTAINER_OCI] = "oci",
    [MPI_PSTATE_CONTAINER_APPTAINER] = "apptainer",
    [MPI_PSTATE_CONTAINER_ROOT] = "root",
};

const char *mpi_pstate_container_name(enum mpi_pstate_container c)
{
        return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : NULL;
}

enum mpi_pstate_container mpi_pstate_container_of_step(const char *oci_bundle, const char *argv0)
{
        const char *base;

        if (oci_bundle && *oci_bundle)
                return MPI_PSTATE_CONTAINER_OCI;
        if (!argv0)
                return MPI_PSTATE_CONTAINER_NONE;
        base = strrchr(argv0, '/');
        base = base ? base + 1 : argv0;
        if (strcmp(base, "apptainer") == 0 || strcmp(base, "singularity") == 0)
                return MPI_PSTATE_CONTAINER_APPTAINER;
        return MPI_PSTATE_CONTAINER_NONE;
}

/* dir holds path: equal, or a prefix ending at a '/' of path.  Both
 * absolute; trailing slashes of dir ignored. */
static bool holds(const char *dir, size_t n, const char *path)
{
        while (n > 1 && dir[n - 1] == '/')
                n--;
        if (n == 0 || dir[0] != '/')
                return false;
        if (n == 1)
                return true; /* "/" itself */
        return strncmp(dir, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* config.json is the user's, read as root (fsuid the user's): one pass, no
 * recursion, a bounded nesting, strict JSON.  Only what decides whether the
 * container sees the library is kept: root.path, and each mount's
 * destination, source, type and options. */
#define OCI_MAX_DEPTH 64

enum oci_at {
        AT_OTHER,
        AT_TOP,
        AT_ROOT,
        AT_ROOT_PATH,
        AT_MOUNTS,
        AT_MOUNT,
        AT_DEST,
        AT_SRC,
        AT_TYPE,
        AT_OPTIONS,
        AT_OPTION,
};

struct oci_walk {
        const char *path; /* the library */
        char dest[PATH_MAX], src[PATH_MAX], type[64], root[PATH_MAX], str[PATH_MAX];
        bool bind; /* the mount being read binds (type or options) */
        /* The last mount over path decides, as in the mount table. */
        bool covered, last_bind;
        char last_src[PATH_MAX];
        size_t last_dn; /* its destination's length without trailing slashes */
};

static const char *ws(const char *p)
{
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
                p++;
        return p;
}

/* The JSON string starting at p (after its opening quote) into out; returns
 * the position after the closing quote, or NULL for invalid JSON.  A string
 * that does not fit, or holds an escape other than \" \\ \/, is kept as ""
 * (unusable, as no path holds it). */
static const char *json_string(const char *p, char *out, size_t len)
{
        size_t o = 0;
        bool bad = false;

        for (; *p != '"'; p++) {
                char c = *p;

                if ((unsigned char)c < 0x20)
                        return NULL; /* the end, or a raw control character */
                if (c == '\\') {
                        c = *++p;
                        if (c == 'u') {
                                for (int i = 0; i < 4; i++) {
                                        c = *++p;
                                        if (!c || !strchr("0123456789abcdefABCDEF", c))
                                                return NULL;
                                }
                                bad = true;
                                continue;
                        }
                        if (!c || !strchr("\"\\/bfnrt", c))
                                return NULL;
                        bad = bad || !strchr("\"\\/", c);
                }
                if (o + 1 < len)
                        out[o++] = c;
                else
                        bad = true;
        }
        out[bad ? 0 : o] = '\0';
        return p + 1;
}

static enum oci_at key_at(enum oci_at in, const char *key)
{
        static const struct {
                enum oci_at in;
                const char *key;
                enum oci_at at;
        } keys[] = {
            {AT_TOP, "root", AT_ROOT},         {AT_TOP, "mounts", AT_MOUNTS},
            {AT_ROOT, "path", AT_ROOT_PATH},   {AT_MOUNT, "destination", AT_DEST},
            {AT_MOUNT, "source", AT_SRC},      {AT_MOUNT, "type", AT_TYPE},
            {AT_MOUNT, "options", AT_OPTIONS},
        };

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (keys[i].in == in && strcmp(keys[i].key, key) == 0)
                        return keys[i].at;
        return AT_OTHER;
}

static enum oci_at element_at(enum oci_at array)
{
        return array == AT_MOUNTS ? AT_MOUNT : array == AT_OPTIONS ? AT_OPTION : AT_OTHER;
}

static void string_at(struct oci_walk *w, enum oci_at at)
{
        switch (at) {
        case AT_ROOT_PATH:
                snprintf(w->root, sizeof(w->root), "%s", w->str);
                break;
        case AT_DEST:
                snprintf(w->dest, sizeof(w->dest), "%s", w->str);
                break;
        case AT_SRC:
                snprintf(w->src, sizeof(w->src), "%s", w->str);
                break;
        case AT_TYPE:
        case AT_OPTION:
                w->bind = w->bind || strcmp(w->str, "bind") == 0 || strcmp(w->str, "rbind") == 0;
                break;
        default:
                break;
        }
}

static void mount_begin(struct oci_walk *w)
{
        w->dest[0] = w->src[0] = '\0';
        w->bind = false;
}

static void mount_end(struct oci_walk *w)
{
        size_t dn = strlen(w->dest);

        if (!holds(w->dest, dn, w->path))
                return;
        while (dn > 1 && w->dest[dn - 1] == '/')
                dn--;
        w->covered = true;
        w->last_bind = w->bind;
        w->last_dn = dn == 1 ? 0 : dn;
        snprintf(w->last_src, sizeof(w->last_src), "%s", w->src);
}

/* A JSON number, true, false or null at p: the position after it, or NULL.
 * What follows is the caller's to check ("truex", "01" end there and are
 * refused by the next token). */
static const char *json_scalar(const char *p)
{
        static const char *const words[] = {"true", "false", "null"};
        static const char digits[] = "0123456789";

        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (strncmp(p, words[i], strlen(words[i])) == 0)
                        return p + strlen(words[i]);
        if (*p == '-')
                p++;
        if (*p == '0')
                p++;
        else if (*p >= '1' && *p <= '9')
                p += strspn(p, digits);
        else
                return NULL;
        if (*p == '.') {
                if (!strspn(++p, digits))
                        return NULL;
                p += strspn(p, digits);
        }
        if (*p == 'e' || *p == 'E') {
                p++;
                if (*p == '+' || *p == '-')
                        p++;
                if (!strspn(p, digits))
                        return NULL;
                p += strspn(p, digits);
        }
        return p;
}

/* Where the one pass over config.json is: an explicit stack instead of a
 * recursion, so that a deep nesting costs no C stack. */
struct oci_parse {
        struct {
                char close;
                enum oci_at at;
        } stack[OCI_MAX_DEPTH];
        int depth;
        enum { VALUE, VALUE_OR_END, KEY, KEY_OR_END, AFTER } state;
        enum oci_at at; /* where the value expected lands */
        int rc;         /* why the pass stopped: -EINVAL, -E2BIG */
};

/* A value, or the end of an array that may be empty here. */
static const char *oci_value(struct oci_parse *ps, struct oci_walk *w, const char *p)
{
        if (ps->state == VALUE_OR_END && *p == ']') {
                ps->depth--;
                ps->state = AFTER;
                return p + 1;
        }
        ps->state = AFTER;
        if (*p == '{' || *p == '[') {
                if (ps->depth == OCI_MAX_DEPTH) {
                        ps->rc = -E2BIG;
                        return NULL;
                }
                ps->stack[ps->depth].close = *p == '{' ? '}' : ']';
                ps->stack[ps->depth++].at = ps->at;
                if (*p == '{' && ps->at == AT_MOUNT)
                        mount_begin(w);
                ps->state = *p == '{' ? KEY_OR_END : VALUE_OR_END;
                ps->at = element_at(ps->at);
                return p + 1;
        }
        if (*p == '"') {
                p = json_string(p + 1, w->str, sizeof(w->str));
                if (p)
                        string_at(w, ps->at);
                return p;
        }
        return json_scalar(p);
}

/* A key and its colon, or the end of an object that may be empty here. */
static const char *oci_key(struct oci_parse *ps, struct oci_walk *w, const char *p)
{
        char key[16];

        if (ps->state == KEY_OR_END && *p == '}') {
                if (ps->stack[--ps->depth].at == AT_MOUNT)
                        mount_end(w);
                ps->state = AFTER;
                return p + 1;
        }
        if (*p != '"' || !(p = json_string(p + 1, key, sizeof(key))))
                return NULL;
        p = ws(p);
        if (*p++ != ':')
                return NULL;
        ps->at = key_at(ps->stack[ps->depth - 1].at, key);
        ps->state = VALUE;
        return p;
}

/* After a value: a comma, or the close of the enclosing object or array. */
static const char *oci_after(struct oci_parse *ps, struct oci_walk *w, const char *p)
{
        if (*p == ',') {
                ps->state = ps->stack[ps->depth - 1].close == '}' ? KEY : VALUE;
                ps->at = element_at(ps->stack[ps->depth - 1].at);
                return p + 1;
        }
        if (*p != ps->stack[ps->depth - 1].close)
                return NULL;
        if (ps->stack[--ps->depth].at == AT_MOUNT && *p == '}')
                mount_end(w);
        return p + 1;
}

/* One pass over the text: 0, -EINVAL (not JSON), -E2BIG (nested deeper
 * than OCI_MAX_DEPTH). */
static int oci_walk(const char *p, struct oci_walk *w)
{
        struct oci_parse ps = {.state = VALUE, .at = AT_TOP, .rc = -EINVAL};

        for (;;) {
                p = ws(p);
                if (ps.state == AFTER && ps.depth == 0)
                        return *p ? -EINVAL : 0;
                if (ps.state == VALUE || ps.state == VALUE_OR_END)
                        p = oci_value(&ps, w, p);
                else if (ps.state == KEY || ps.state == KEY_OR_END)
                        p = oci_key(&ps, w, p);
                else
                        p = oci_after(&ps, w, p);
                if (!p)
                        return ps.rc;
        }
}

bool mpi_pstate_container_printable(const char *s)
{
        for (; s && *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return s != NULL;
}

int mpi_pstate_container_oci_sees(const char *bundle, const char *path)
{
        static char text[OCI_CONFIG_MAX];
        static struct oci_walk w; /* slurmstepd's one thread: off its stack */
        char cfg[PATH_MAX], full[PATH_MAX * 2];
        struct stat st;
        int n;

        if (!bundle || bundle[0] != '/' || !path || path[0] != '/')
                return -EINVAL;
        /* The caller logs the bundle: no line of a user's making. */
        if (!mpi_pstate_container_printable(bundle))
                return -EINVAL;
        if ((size_t)snprintf(cfg, sizeof(cfg), "%s/config.json", bundle) >= sizeof(cfg))
                return -ENAMETOOLONG;
        n = mpi_pstate_safeio_read_small(AT_FDCWD, cfg, text, sizeof(text), 0, 0);
        if (n < 0)
                return n;
        memset(&w, 0, sizeof(w));
        w.path = path;
        n = oci_walk(text, &w);
        if (n)
                return n;
        /* A bind (the site's line for the library, or the host's /usr) shows
         * its source; anything else (a tmpfs) hides what was there. */
        if (w.covered) {
                if (!w.last_bind || w.last_src[0] != '/')
                        return 0;
                n = snprintf(full, sizeof(full), "%s%s", w.last_src, path + w.last_dn);
                if (n < 0 || (size_t)n >= sizeof(full))
                        return -ENAMETOOLONG;
                return stat(full, &st) == 0 ? 1 : 0;
        }
        if (!w.root[0])
                snprintf(w.root, sizeof(w.root), "rootfs");
        if (w.root[0] == '/')
                n = snprintf(full, sizeof(full), "%s%s", w.root, path);
        else
                n = snprintf(full, sizeof(full), "%s/%s%s", bundle, w.root, path);
        if (n < 0 || (size_t)n >= sizeof(full))
                return -ENAMETOOLONG;
        /* Symlinks inside the root would resolve against the host's: a
         * link there counts as seen (ld.so's message if wrong is no worse
         * than before). */
        return lstat(full, &st) == 0 ? 1 : 0;
}

/* One src[:dst[:opts]] entry of a bind list (len bytes at e). */
static bool bind_holds(const char *e, size_t len, const char *path)
{
        const char *c1 = memchr(e, ':', len), *d = e;
        size_t dn = len;

        while (dn && (*d == ' ' || *d == '\t')) {
                d++;
                dn--;
        }
        if (c1) {
                const char *c2;

                d = c1 + 1;
                dn = len - (size_t)(d - e);
                c2 = memchr(d, ':', dn);
                if (c2)
                        dn = (size_t)(c2 - d);
                if (dn == 0) { /* "src:" */
                        d = e;
                        dn = (size_t)(c1 - e);
                }
        }
        while (dn && (d[dn - 1] == ' ' || d[dn - 1] == '\t' || d[dn - 1] == '\n'))
                dn--;
        return holds(d, dn, path);
}

static bool list_holds(const char *list, const char *path)
{
        const char *p = list;

        while (p && *p) {
                size_t n = strcspn(p, ",");

                if (n && bind_holds(p, n, path))
                        return true;
                p += n;
                if (*p == ',')
                        p++;
        }
        return false;
}

int mpi_pstate_container_apptainer_sees(const char *binds, const char *conf, const char *path)
{
        char line[1024];
        FILE *f;
        int seen = 0;

        if (!path || path[0] != '/')
                return 0;
        if (binds && list_holds(binds, path))
                return 1;
        if (!conf || !(f = fopen(conf, "re")))
                return 0;
        while (!seen && fgets(line, sizeof(line), f)) {
                const char *v = line;

                while (*v == ' ' || *v == '\t')
                        v++;
                if (strncmp(v, "bind path", 9) != 0)
                        continue;
                v = strchr(v, '=');
                if (v)
                        seen = list_holds(v + 1, path);
        }
        fclose(f);
        return seen;
}

void mpi_pstate_container_root_id(struct mpi_pstate_root_id *id)
{
        struct stat st;

        id->ok = stat("/", &st) == 0;
        id->dev = id->ok ? st.st_dev : 0;
        id->ino = id->ok ? st.st_ino : 0;
}

bool mpi_pstate_container_root_moved(const struct mpi_pstate_root_id *step)
{
        struct mpi_pstate_root_id now;

        mpi_pstate_container_root_id(&now);
        return step->ok && now.ok && (now.dev != step->dev || now.ino != step->ino);
}
