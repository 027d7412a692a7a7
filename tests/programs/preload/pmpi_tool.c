/* SPDX-License-Identifier: BSD-3-Clause */
/* A minimal PMPI tool, the way mpiP, Score-P, TAU or a site's own tool are
 * written: it defines MPI_X, counts the call and calls PMPI_X.  Used by
 * tests/py/test_preload_pmpi.py as a shared library in LD_PRELOAD (after or
 * before libmpi-pstate.so) and linked into the test programs, to prove that
 * tools and mpi-pstate each see exactly the calls they should.
 *
 * It counts only the C entry points (it has no Fortran wrappers, like most
 * site tools), so a Fortran call reaches it only when the MPI's Fortran
 * binding calls the C MPI_X (MPICH does; Open MPI 4.1 calls PMPI_X).
 *
 * Built with -DTOOL_CHAIN it is a chaining tool instead: each wrapper calls
 * the next definition of its own MPI_X (dlsym(RTLD_NEXT)), the way tools
 * must be written to stack in any order.
 *
 * At exit each rank writes $PMPI_TOOL_DIR/tool-<rank>.json
 * ({"MPI_Barrier": 3, ...}, functions called at least once).  The rank is
 * asked with MPI_Comm_rank, not PMPI_Comm_rank, as real tools often do: a
 * library interposing MPI_X around us must pass that call on without
 * recording it as the application's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef TOOL_CHAIN
#include <dlfcn.h>
#endif

/* X(name, formals, arguments) */
#define TOOL_CALLS(X)                                                                              \
        X(Init, (int *argc, char ***argv), (argc, argv))                                           \
        X(Init_thread, (int *argc, char ***argv, int req, int *prov), (argc, argv, req, prov))     \
        X(Barrier, (MPI_Comm c), (c))                                                              \
        X(Send, (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c),                  \
          (b, n, t, d, g, c))                                                                      \
        X(Recv, (void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Status *st),        \
          (b, n, t, s, g, c, st))                                                                  \
        X(Sendrecv,                                                                                \
          (const void *sb, int sn, MPI_Datatype st, int d, int sg, void *rb, int rn,               \
           MPI_Datatype rt, int s, int rg, MPI_Comm c, MPI_Status *status),                        \
          (sb, sn, st, d, sg, rb, rn, rt, s, rg, c, status))                                       \
        X(Isend, (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r), \
          (b, n, t, d, g, c, r))                                                                   \
        X(Irecv, (void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Request *r),       \
          (b, n, t, s, g, c, r))                                                                   \
        X(Wait, (MPI_Request * r, MPI_Status * s), (r, s))                                         \
        X(Waitall, (int n, MPI_Request *r, MPI_Status *s), (n, r, s))                              \
        X(Test, (MPI_Request * r, int *f, MPI_Status *s), (r, f, s))                               \
        X(Bcast, (void *b, int n, MPI_Datatype t, int root, MPI_Comm c), (b, n, t, root, c))       \
        X(Reduce, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c), \
          (s, r, n, t, o, root, c))                                                                \
        X(Allreduce, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c),        \
          (s, r, n, t, o, c))                                                                      \
        X(Gather,                                                                                  \
          (const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, int root,   \
           MPI_Comm c),                                                                            \
          (sb, sn, st, rb, rn, rt, root, c))

/* MPI-4 large-count calls, where the MPI has them (MPICH 4). */
#if MPI_VERSION >= 4
#define TOOL_LARGE_CALLS(X)                                                                        \
        X(Send_c, (const void *b, MPI_Count n, MPI_Datatype t, int d, int g, MPI_Comm c),          \
          (b, n, t, d, g, c))                                                                      \
        X(Recv_c,                                                                                  \
          (void *b, MPI_Count n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Status *st),        \
          (b, n, t, s, g, c, st))                                                                  \
        X(Bcast_c, (void *b, MPI_Count n, MPI_Datatype t, int root, MPI_Comm c),                   \
          (b, n, t, root, c))                                                                      \
        X(Allreduce_c,                                                                             \
          (const void *s, void *r, MPI_Count n, MPI_Datatype t, MPI_Op o, MPI_Comm c),             \
          (s, r, n, t, o, c))
#else
#define TOOL_LARGE_CALLS(X)
#endif

#define ALL_CALLS(X) TOOL_CALLS(X) TOOL_LARGE_CALLS(X) X(Finalize, (void), ())

#define COUNTER(name, formals, args) static long n_##name;
ALL_CALLS(COUNTER)

#ifdef TOOL_CHAIN
/* resolved at each call: a test tool, not a fast one */
#define WRAP(name, formals, args)                                                                  \
        typedef int(*next_##name) formals;                                                         \
        int MPI_##name formals;                                                                    \
        int MPI_##name formals                                                                     \
        {                                                                                          \
                n_##name++;                                                                        \
                return ((next_##name)dlsym(RTLD_NEXT, "MPI_" #name))args;                          \
        }
#else
#define WRAP(name, formals, args)                                                                  \
        int MPI_##name formals;                                                                    \
        int MPI_##name formals                                                                     \
        {                                                                                          \
                n_##name++;                                                                        \
                return PMPI_##name args;                                                           \
        }
#endif
TOOL_CALLS(WRAP)
TOOL_LARGE_CALLS(WRAP)

static int tool_rank = -1;

int MPI_Finalize(void);
int MPI_Finalize(void)
{
        n_Finalize++;
        MPI_Comm_rank(MPI_COMM_WORLD, &tool_rank); /* MPI_, on purpose: see above */
#ifdef TOOL_CHAIN
        return ((int (*)(void))dlsym(RTLD_NEXT, "MPI_Finalize"))();
#else
        return PMPI_Finalize();
#endif
}

/* Written at exit, not in MPI_Finalize: a binding that calls PMPI_Finalize
 * (Open MPI's Fortran, MPICH's mpi_f08) never reaches the tool's. */
__attribute__((destructor)) static void write_counts(void)
{
        const char *dir = getenv("PMPI_TOOL_DIR");
        const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK"};
        char path[4096];
        const char *sep = "";
        FILE *f;

        for (size_t i = 0; tool_rank < 0 && i < sizeof(vars) / sizeof(vars[0]); i++)
                if (getenv(vars[i]))
                        tool_rank = atoi(getenv(vars[i]));
        if (!dir)
                return;
        snprintf(path, sizeof(path), "%s/tool-%d.json", dir, tool_rank);
        f = fopen(path, "w");
        if (!f)
                return;
        fputc('{', f);
#define PRINT(name, formals, args)                                                                 \
        if (n_##name) {                                                                            \
                fprintf(f, "%s\"MPI_%s\": %ld", sep, #name, n_##name);                             \
                sep = ", ";                                                                        \
        }
        ALL_CALLS(PRINT)
        fputs("}\n", f);
        fclose(f);
}
