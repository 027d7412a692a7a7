/* SPDX-License-Identifier: BSD-3-Clause */
/* Waits of a known length at one call site, for the wait-mode tests
 * (tests/py/test_preload_wait.py):
 *
 *   wait_calls ROUNDS MS
 *
 * ROUNDS times, rank 1 computes for MS milliseconds (a spin on the clock:
 * its core stays busy, so nothing else wants rank 0's) while every other
 * rank waits for it in the same MPI_Barrier.  The first long wait at that
 * site teaches the library's prediction; the later ones are predicted long
 * and have their CPU time measured. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        int rank, rounds, ms;

        if (argc != 3 || (rounds = atoi(argv[1])) <= 0 || (ms = atoi(argv[2])) <= 0) {
                fprintf(stderr, "usage: wait_calls ROUNDS MS\n");
                return 2;
        }
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        for (int i = 0; i < rounds; i++) {
                if (rank == 1) {
                        double end = now_s() + ms / 1e3;

                        while (now_s() < end)
                                ;
                }
                MPI_Barrier(MPI_COMM_WORLD);
        }
        MPI_Finalize();
        return 0;
}
