/* SPDX-License-Identifier: BSD-3-Clause */
/* A test program of MPI_THREAD_MULTIPLE: THREADS threads call MPI at the
 * same time, each on its own communicator, ITERS times each.  No count may be lost:
 *   COUNTS <rank> {"MPI_Init_thread": 1, "MPI_Sendrecv": THREADS*ITERS, ...}
 * Prints "SKIP" when the MPI does not provide MPI_THREAD_MULTIPLE. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define ITERS 2000

static MPI_Comm comms[THREADS];
static int peer;

static void *worker(void *arg)
{
        MPI_Comm c = comms[(long)arg];
        int x = 0, y = 0, flag;

        for (int i = 0; i < ITERS; i++) {
                MPI_Sendrecv(&x, 1, MPI_INT, peer, 0, &y, 1, MPI_INT, peer, 0, c,
                             MPI_STATUS_IGNORE);
                MPI_Iprobe(peer, 99, c, &flag, MPI_STATUS_IGNORE);
        }
        return NULL;
}

int main(int argc, char **argv)
{
        int provided, rank, size;
        pthread_t th[THREADS];

        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (provided < MPI_THREAD_MULTIPLE || size != 2) {
                if (rank == 0)
                        printf("SKIP provided=%d size=%d\n", provided, size);
                MPI_Finalize();
                return 0;
        }
        peer = 1 - rank;
        for (int t = 0; t < THREADS; t++)
                MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
        MPI_Barrier(MPI_COMM_WORLD);
        for (long t = 0; t < THREADS; t++)
                pthread_create(&th[t], NULL, worker, (void *)t);
        for (int t = 0; t < THREADS; t++)
                pthread_join(th[t], NULL);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int t = 0; t < THREADS; t++)
                MPI_Comm_free(&comms[t]);
        printf("COUNTS %d {\"MPI_Init_thread\": 1, \"MPI_Barrier\": 2, \"MPI_Sendrecv\": %d, "
               "\"MPI_Iprobe\": %d, \"MPI_Finalize\": 1}\n",
               rank, THREADS * ITERS, THREADS * ITERS);
        fflush(stdout);
        MPI_Finalize();
        return 0;
}
