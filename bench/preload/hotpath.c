/* SPDX-License-Identifier: BSD-3-Clause */
/* Hot-path benchmark: N back-to-back calls of one intercepted MPI function
 * that never changes a frequency, timed in-process.
 *
 *   hotpath KIND N [REPS]
 *     KIND test       MPI_Test on MPI_REQUEST_NULL (polling kind, nearly free in MPI)
 *          barrier    MPI_Barrier on MPI_COMM_SELF (blocking kind: wait state published)
 *          iprobe     MPI_Iprobe with nothing to find (probe kind)
 *          allreduce  MPI_Allreduce of one int on MPI_COMM_SELF (blocking, with a
 *                     message size: the wrapper asks PMPI_Type_size)
 *          allreduce_c  the same through MPI-4's large-count MPI_Allreduce_c;
 *                     an MPI without it: exit status 3, nothing printed
 *
 * Prints "KIND N best_ns_per_call" using the best of REPS (default 5)
 * repetitions; bench/preload/run.py runs it with and without the library.
 * getppid() brackets the timed loops: a marker for strace, so the system
 * calls made inside the loops can be counted apart from MPI_Init's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void loop(const char *kind, long n)
{
        MPI_Request req = MPI_REQUEST_NULL;
        int flag, in = 1, out;

        if (!strcmp(kind, "test"))
                for (long i = 0; i < n; i++)
                        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        else if (!strcmp(kind, "barrier"))
                for (long i = 0; i < n; i++)
                        MPI_Barrier(MPI_COMM_SELF);
        else if (!strcmp(kind, "allreduce"))
                for (long i = 0; i < n; i++)
                        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
#if MPI_VERSION >= 4
        else if (!strcmp(kind, "allreduce_c"))
                for (long i = 0; i < n; i++)
                        MPI_Allreduce_c(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
#endif
        else
                for (long i = 0; i < n; i++)
                        MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr,
                        "usage: hotpath test|barrier|iprobe|allreduce|allreduce_c N [REPS]\n");
                return 2;
        }
#if MPI_VERSION < 4
        if (!strcmp(argv[1], "allreduce_c"))
                return 3; /* no large-count functions in this MPI */
#endif
        const char *kind = argv[1];
        long n = atol(argv[2]);
        int reps = argc > 3 ? atoi(argv[3]) : 5;
        double best = 1e30;

        MPI_Init(&argc, &argv);
        loop(kind, n / 10 + 1); /* warm up caches and the lazy resolution */
        (void)getppid();
        for (int r = 0; r < reps; r++) {
                double t0 = now_ns();
                loop(kind, n);
                double dt = (now_ns() - t0) / (double)n;
                if (dt < best)
                        best = dt;
        }
        (void)getppid();
        printf("%s %ld %.3f\n", kind, n, best);
        MPI_Finalize();
        return 0;
}
