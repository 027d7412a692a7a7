/* SPDX-License-Identifier: BSD-3-Clause */
/* Smoke test: every rank reports where it runs and the ranks check a reduction,
 * so a launch that starts singletons instead of one job fails visibly. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
        int rank, size, sum = 0, len;
        char host[MPI_MAX_PROCESSOR_NAME];

        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Get_processor_name(host, &len);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        printf("hello c rank %d of %d on %s sum %s\n", rank, size, host,
               sum == size * (size - 1) / 2 ? "ok" : "WRONG");
        MPI_Finalize();
        return 0;
}
