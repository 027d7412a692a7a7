/* SPDX-License-Identifier: BSD-3-Clause */
/* A deliberately imbalanced MPI program, the case mpi-pstate exists for:
 * in each iteration rank 0 computes for WORK ms while every other rank waits
 * in MPI_Barrier, then all exchange a small message with MPI_Allreduce.
 * With SPREAD > 1 rank 0's work varies from iteration to iteration,
 * log-uniform in [WORK / SPREAD, WORK * SPREAD] from a fixed seed: waits of
 * every length around a threshold, and the same ones in every run.
 * usage: imbalance [ITERATIONS=20] [WORK_MS=50] [SPREAD=1] */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile double sink;

static void compute(double seconds)
{
        double t_end = now() + seconds, x = 1.0;
        while (now() < t_end)
                for (int i = 0; i < 1000; i++)
                        x = x * 1.0000001 + 1e-9;
        sink = x;
}

int main(int argc, char **argv)
{
        int rank, size, iters = argc > 1 ? atoi(argv[1]) : 20;
        double work_ms = argc > 2 ? atof(argv[2]) : 50.0, t0, wait = 0.0;
        double spread = argc > 3 ? atof(argv[3]) : 1.0;
        unsigned short seed[3] = {1, 2, 3};

        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        t0 = now();
        for (int i = 0; i < iters; i++) {
                double in = rank, out = 0.0, w;
                if (rank == 0)
                        compute(work_ms / 1000.0 *
                                (spread > 1.0 ? pow(spread, 2.0 * erand48(seed) - 1.0) : 1.0));
                w = now();
                MPI_Barrier(MPI_COMM_WORLD);
                wait += now() - w;
                MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                if (out != size * (size - 1) / 2.0)
                        MPI_Abort(MPI_COMM_WORLD, 2);
        }
        printf("imbalance rank %d of %d: %d iterations, %.3f s, waited %.3f s in MPI_Barrier\n",
               rank, size, iters, now() - t0, wait);
        MPI_Finalize();
        return 0;
}
