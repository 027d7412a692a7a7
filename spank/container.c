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

/* The JSON string starting at p (after its opening quote) into out;
 * returns the position after the closing quote or NULL.  Escapes other
 * than \" and \\ make the string unusable (out empty). */
static const char *json_string(const char *p, char *out, size_t len)
{
        size_t o = 0;
        bool bad = false;

        for (; *p && *p != '"'; p++) {
                char c = *p;

                if (c == '\\') {
                        p++;
                        if (*p != '"' && *p != '\\')
                                bad = true;
                        if (!*p)
                                return NULL;
                        c = *p;
                }
                if (o + 1 < len)
                        out[o++] = c;
                else
                        bad = true;
        }
        if (*p != '"')
                return NULL;
        out[bad ? 0 : o] = '\0';
        return p + 1;
}

/* The string value of the first "key" at or after p, or NULL. */
static const char *json_value(const char *p, const char *key, char *out, size_t len)
{
        char pat[64];
        const char *k;

        snprintf(pat, sizeof(pat), "\"%s\"", key);
        k = strstr(p, pat);
        if (!k)
                return NULL;
        k += strlen(pat);
        while (*k == ' ' || *k == '\t' || *k == '\n' || *k == '\r' || *k == ':')
                k++;
        if (*k != '"')
                return json_value(k, key, out, len);
        return json_string(k + 1, out, len);
}

/* The mounts array of config.json, one object at a time: [*p, *end) of
 * the next object, or false.  Mount objects hold no nested object. */
static bool next_mount(const char **p, const char **obj, const char **end)
{
        const char *o = *p, *e;

        while (*o == ' ' || *o == '\t' || *o == '\n' || *o == '\r' || *o == ',')
                o++;
        if (*o != '{')
                return false;
        e = strchr(o, '}');
        if (!e)
                return false;
        *obj = o;
        *end = e;
        *p = e + 1;
        return true;
}

int mpi_pstate_container_oci_sees(const char *bundle, const char *path)
{
        static char text[OCI_CONFIG_MAX];
        char cfg[PATH_MAX], root[PATH_MAX], dest[PATH_MAX], src[PATH_MAX], type[64];
        char full[PATH_MAX * 2], last_src[PATH_MAX] = "";
        const char *p, *r, *obj, *end, *last_rest = NULL;
        bool covered = false, last_bind = false;
        struct stat st;
        int n;

        if (!bundle || bundle[0] != '/' || !path || path[0] != '/')
                return -EINVAL;
        if ((size_t)snprintf(cfg, sizeof(cfg), "%s/config.json", bundle) >= sizeof(cfg))
                return -ENAMETOOLONG;
        n = mpi_pstate_safeio_read_small(AT_FDCWD, cfg, text, sizeof(text), 0, 0);
        if (n < 0)
                return n;
        /* The last mount over path decides, as in the mount table: a bind
         * (the site's line for the library, or the host's /usr) shows its
         * source; anything else (a tmpfs) hides what was there. */
        p = strstr(text, "\"mounts\"");
        p = p ? strchr(p, '[') : NULL;
        if (p)
                p++;
        while (p && next_mount(&p, &obj, &end)) {
                char one[PATH_MAX * 2 + 256];
                size_t len = (size_t)(end - obj);

                if (len >= sizeof(one))
                        continue;
                memcpy(one, obj, len);
                one[len] = '\0';
                if (!json_value(one, "destination", dest, sizeof(dest)) ||
                    !holds(dest, strlen(dest), path))
                        continue;
                covered = true;
                if (!json_value(one, "type", type, sizeof(type)))
                        type[0] = '\0';
                last_bind = strcmp(type, "bind") == 0 || strstr(one, "\"bind\"") ||
                            strstr(one, "\"rbind\"");
                if (!json_value(one, "source", src, sizeof(src)))
                        src[0] = '\0';
                snprintf(last_src, sizeof(last_src), "%s", src);
                {
                        size_t dn = strlen(dest);

                        while (dn > 1 && dest[dn - 1] == '/')
                                dn--;
                        last_rest = path + (dn == 1 ? 0 : dn);
                }
        }
        if (covered) {
                if (!last_bind || last_src[0] != '/')
                        return 0;
                n = snprintf(full, sizeof(full), "%s%s", last_src, last_rest);
                if (n < 0 || (size_t)n >= sizeof(full))
                        return -ENAMETOOLONG;
                return stat(full, &st) == 0 ? 1 : 0;
        }
        r = strstr(text, "\"root\"");
        if (!r || !json_value(r, "path", root, sizeof(root)) || !root[0])
                snprintf(root, sizeof(root), "rootfs");
        if (root[0] == '/')
                n = snprintf(full, sizeof(full), "%s%s", root, path);
        else
                n = snprintf(full, sizeof(full), "%s/%s%s", bundle, root, path);
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
