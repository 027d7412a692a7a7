/* SPDX-License-Identifier: BSD-3-Clause */
/* Printing one line per rank of a 2-rank test program so that a test can
 * parse it: MPICH 4.2's mpiexec forwards the output of two ranks in chunks
 * and interleaves long lines written at the same moment, so rank 0 prints
 * both.  PMPI_ calls: the preload library neither sees nor counts them. */
#ifndef MPI_PSTATE_TEST_RANK_LINES_H
#define MPI_PSTATE_TEST_RANK_LINES_H
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define RANK_LINE_MAX 4096

/* Collective over MPI_COMM_WORLD (2 ranks): both lines are on rank 0's
 * stdout, flushed, before either rank returns. */
static inline void print_rank_lines(const char *line, int rank)
{
        static char mine[RANK_LINE_MAX], all[2][RANK_LINE_MAX];

        snprintf(mine, sizeof(mine), "%s", line);
        PMPI_Gather(mine, RANK_LINE_MAX, MPI_CHAR, all, RANK_LINE_MAX, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (rank == 0) {
                for (int r = 0; r < 2; r++)
                        fputs(all[r], stdout);
                fflush(stdout);
        }
        PMPI_Barrier(MPI_COMM_WORLD);
}

#endif
