/* SPDX-License-Identifier: BSD-3-Clause */
/* The front library, libmpi-pstate.so: what goes into LD_PRELOAD.
 *
 * It knows no MPI ABI.  Every wrapped symbol (C, every Fortran mangling,
 * mpi_f08) is a generated trampoline `jmp *slot(%rip)` (gen/front.S).  Its
 * constructor does nothing, so a process that never calls MPI (bash, srun,
 * mpirun, an interpreter before it loads MPI) is not disturbed beyond the
 * dynamic linker mapping this small file.  The first call of any of these
 * symbols lands here, in mpi_pstate_front_resolve(), which:
 *   1. finds the MPI library among the loaded objects (the one defining
 *      PMPI_Init; Open MPI if it defines ompi_mpi_comm_world, else the MPICH
 *      family) and promotes it to the global scope (an interpreter may have
 *      loaded it RTLD_LOCAL);
 *   2. dlopen()s the matching backend libmpi-pstate-<abi>.so from this
 *      library's directory, RTLD_LOCAL;
 *   3. fills every slot with the backend's wrapper, or with the next
 *      definition where the backend has none or none is loaded, and jumps
 *      on.
 * "Next definition" (next_def()) is what makes PMPI tools stack: the
 * definition of the same symbol after this library in the search order
 * (dlsym RTLD_NEXT), so a tool later in LD_PRELOAD (its MPI_X calling
 * PMPI_X) still sees every call.  Two exceptions: another mpi-pstate front
 * is skipped (asking it for its own next definition), so two copies never
 * record one call twice nor call each other; and when the next MPI_X is the
 * MPI library's own, the wrapper calls the library's PMPI_X, exactly what it
 * did before tools could stack.
 * A symbol whose real definition is not loaded yet keeps its stub and is
 * resolved on its own first call.  With MPI_PSTATE_MODE unset or off no
 * backend is loaded: the slots point straight at the MPI (one extra jump).
 *
 * Why a front and not the plugin choosing the backend: the plugin cannot
 * know what a task will exec (a script, mpirun, python), and a wrong-ABI
 * backend would crash the rank.  Deciding at the first MPI call, inside the
 * process that makes it, is always right. */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "contract.h"
#include "front_syms.h"
#include "say.h"

#define HIDDEN __attribute__((visibility("hidden")))

/* defined in gen/front.S */
extern HIDDEN void *mpi_pstate_front_slots[MPI_PSTATE_NSYMS];
extern HIDDEN void *const mpi_pstate_front_stubs[MPI_PSTATE_NSYMS];

HIDDEN void *mpi_pstate_front_resolve(unsigned idx);

static const char *const sym_names[MPI_PSTATE_NSYMS] = {MPI_PSTATE_SYM_NAMES};
static const char *const sym_pmpi[MPI_PSTATE_NSYMS] = {MPI_PSTATE_SYM_PMPI};
static void *next_defs[MPI_PSTATE_NSYMS];
static const struct mpi_pstate_backend *backend;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int resolved;   /* the whole table was filled with an MPI loaded */
static void *mpi_base; /* load address of the MPI library (the object defining PMPI_Init) */

/* Rank 0 or unknown: the front runs before MPI knows ranks. */
static int first_rank(void)
{
        static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                           "SLURM_PROCID"};

        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
                const char *v = getenv(vars[i]);

                if (v)
                        return strcmp(v, "0") == 0;
        }
        return 1;
}

__attribute__((format(printf, 2, 3))) static void say(int level, const char *fmt, ...)
{
        const char *v = getenv(MPI_PSTATE_ENV_VERBOSE);
        int verbose = v ? atoi(v) : 0;
        va_list ap;

        if (level > verbose || (level == 0 && !first_rank()))
                return;
        va_start(ap, fmt);
        mp_vsay(fmt, ap);
        va_end(ap);
}

struct found {
        const char *names[1024]; /* the loader's own strings, stable while loaded */
        int n;
};

static int collect(struct dl_phdr_info *info, size_t size, void *data)
{
        struct found *f = data;

        (void)size;
        if (info->dlpi_name && info->dlpi_name[0] && f->n < 1024)
                f->names[f->n++] = info->dlpi_name;
        return 0;
}

/* Which MPI is loaded.  The object list is copied first: dlopen() must not
 * run inside dl_iterate_phdr's callback. */
static enum mpi_pstate_abi detect(char *lib, size_t liblen)
{
        static struct found f; /* 8 KiB: not on the caller's stack */
        const char *force = getenv(MPI_PSTATE_ENV_ABI);
        enum mpi_pstate_abi abi = MPI_PSTATE_ABI_NONE;

        f.n = 0;
        dl_iterate_phdr(collect, &f);
        for (int i = 0; i < f.n && abi == MPI_PSTATE_ABI_NONE; i++) {
                void *h = dlopen(f.names[i], RTLD_LAZY | RTLD_NOLOAD);
                void *init = h ? dlsym(h, "PMPI_Init") : NULL;
                Dl_info di;

                if (!init) {
                        if (h)
                                dlclose(h);
                        continue;
                }
                if (dladdr(init, &di) && di.dli_fname) {
                        snprintf(lib, liblen, "%s", di.dli_fname);
                        mpi_base = di.dli_fbase;
                } else {
                        snprintf(lib, liblen, "%s", f.names[i]);
                }
                abi = dlsym(h, "ompi_mpi_comm_world") ? MPI_PSTATE_ABI_OMPI : MPI_PSTATE_ABI_MPICH;
                /* Promote (with its dependencies) to the global scope, so that the
                 * backend's PMPI references and RTLD_NEXT lookups find it even when
                 * an interpreter loaded it RTLD_LOCAL.  Never closed. */
                if (!dlopen(lib, RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL))
                        dlopen(f.names[i], RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
                dlclose(h);
        }
        if (abi != MPI_PSTATE_ABI_NONE && force && *force && strcmp(force, "auto") != 0) {
                if (strcmp(force, "ompi") == 0)
                        abi = MPI_PSTATE_ABI_OMPI;
                else if (strcmp(force, "mpich") == 0)
                        abi = MPI_PSTATE_ABI_MPICH;
                else
                        say(0,
                            "mpi-pstate: invalid value \"%.32s\" for %s: expected auto, ompi or "
                            "mpich; detecting the MPI instead",
                            force, MPI_PSTATE_ENV_ABI);
        }
        return abi;
}

static const struct mpi_pstate_backend *load_backend(enum mpi_pstate_abi abi, const char *lib)
{
        const char *name = abi == MPI_PSTATE_ABI_OMPI ? "ompi" : "mpich";
        const struct mpi_pstate_backend *b;
        char path[PATH_MAX];
        Dl_info self;
        void *h;

        if (!dladdr((void *)&mpi_pstate_front_resolve, &self) || !self.dli_fname)
                return NULL;
        const char *slash = strrchr(self.dli_fname, '/');
        int dirlen = slash ? (int)(slash - self.dli_fname) : 1;
        if (snprintf(path, sizeof(path), "%.*s/libmpi-pstate-%s.so", dirlen,
                     slash ? self.dli_fname : ".", name) >= (int)sizeof(path))
                return NULL;
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                say(0, "mpi-pstate: cannot load %s: %s; passing MPI calls through", path,
                    dlerror());
                return NULL;
        }
        b = dlsym(h, "mpi_pstate_backend_table");
        if (!b || b->version != MPI_PSTATE_BACKEND_VERSION || b->nsyms != MPI_PSTATE_NSYMS ||
            b->syms_hash != MPI_PSTATE_SYMS_HASH || b->abi != (uint32_t)abi) {
                say(0,
                    "mpi-pstate: %s does not match this libmpi-pstate.so (another build?); "
                    "passing MPI calls through",
                    path);
                return NULL; /* left loaded: its constructors ran, nothing else */
        }
        if (b->attach(next_defs, lib) != 0)
                return NULL;
        say(2, "mpi-pstate: %s MPI in %s, backend %s", b->abi_name, lib, path);
        return b;
}

/* Base address of the object defining addr, NULL if none. */
static void *object_of(const void *addr)
{
        Dl_info di;

        return addr && dladdr(addr, &di) ? di.dli_fbase : NULL;
}

/* Exported so that an earlier copy of this library (another build or
 * installation in the same LD_PRELOAD) can skip this one: its wrappers must
 * neither call ours (the call would be recorded twice) nor loop.  Returns
 * the definition of `name` after this library, itself skipping further
 * copies. */
__attribute__((visibility("default"))) void *mpi_pstate_front_next(const char *name);

void *mpi_pstate_front_next(const char *name)
{
        void *next = dlsym(RTLD_NEXT, name);
        void *base = object_of(next);
        Dl_info di;

        if (!next || !dladdr(next, &di) || !di.dli_fname)
                return next;
        if (base != object_of((void *)&mpi_pstate_front_next)) {
                /* Another front?  Found by its handle, and only if the function
                 * is in that very object (dlsym also searches its dependencies). */
                void *h = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
                void *(*other)(const char *) =
                    h ? (void *(*)(const char *))dlsym(h, "mpi_pstate_front_next") : NULL;

                if (h)
                        dlclose(h);
                if (other && object_of((void *)other) == base) {
                        say(2, "mpi-pstate: %s is another libmpi-pstate.so: skipped for %s",
                            di.dli_fname, name);
                        return other(name);
                }
        }
        return next;
}

/* The definition slot i calls on: a PMPI tool's or the MPI's.  For a C
 * MPI_X defined by the MPI library itself, the library's PMPI_X (its
 * MPI_X is normally a weak alias of it; PMPI_X is the one entry point the
 * standard promises does no more than the call).  Only the MPI library's:
 * a tool may define PMPI_X too (Darshan does), and its MPI_X is the one
 * that must be called. */
static void *next_def(unsigned i)
{
        void *next = mpi_pstate_front_next(sym_names[i]);

        if (next && sym_pmpi[i] && mpi_base && object_of(next) == mpi_base) {
                void *pmpi = dlsym(RTLD_NEXT, sym_pmpi[i]);

                if (pmpi && object_of(pmpi) == mpi_base)
                        next = pmpi;
        }
        if (next)
                say(3, "mpi-pstate: %s -> %p", sym_names[i], next);
        return next;
}

/* Points slot i at the backend wrapper or the next definition; returns 0
 * while the next definition is not loaded. */
static int fill(unsigned i)
{
        void *next = next_defs[i];

        if (!next) {
                next = next_def(i);
                if (!next)
                        return 0;
                /* published before the slot, so a wrapper never sees NULL */
                __atomic_store_n(&next_defs[i], next, __ATOMIC_RELEASE);
        }
        void *target = backend && backend->wrappers[i] ? backend->wrappers[i] : next;
        __atomic_store_n(&mpi_pstate_front_slots[i], target, __ATOMIC_RELEASE);
        return 1;
}

static void resolve_all(void)
{
        const char *mode = getenv(MPI_PSTATE_ENV_MODE);
        char lib[PATH_MAX] = "";
        enum mpi_pstate_abi abi = detect(lib, sizeof(lib));

        if (abi == MPI_PSTATE_ABI_NONE)
                return; /* no MPI yet: only the called symbol gets resolved */
        if (mode && *mode && strcmp(mode, "off") != 0) {
                backend = load_backend(abi, lib);
        } else
                say(2, "mpi-pstate: %s unset or off: passing MPI calls through",
                    MPI_PSTATE_ENV_MODE);
        for (unsigned i = 0; i < MPI_PSTATE_NSYMS; i++)
                fill(i);
        resolved = 1;
}

void *mpi_pstate_front_resolve(unsigned idx)
{
        void *target;

        if (idx >= MPI_PSTATE_NSYMS)
                abort();
        pthread_mutex_lock(&lock);
        if (!resolved)
                resolve_all();
        if (mpi_pstate_front_slots[idx] == mpi_pstate_front_stubs[idx])
                fill(idx);
        target = mpi_pstate_front_slots[idx];
        pthread_mutex_unlock(&lock);
        if (target == mpi_pstate_front_stubs[idx]) {
                /* Nothing defines the symbol the program just called: only
                 * possible if the program called it through a pointer from us. */
                say(0, "mpi-pstate: no definition of %s to call", sym_names[idx]);
                abort();
        }
        return target;
}
