/* SPDX-License-Identifier: BSD-3-Clause */
/* A test program that calls every MPI-4 large-count function the preload
 * library wraps (MPI_X_c, the blocking calls with counts) and prints, per
 * rank, how many times it called each MPI function:
 *   COUNTS <rank> {"MPI_Send_c": 2, ...}
 *   LARGE OK <rank>           (the results it checked were right)
 * Needs exactly 2 ranks; both ranks make the same calls (the roles of the
 * point-to-point pairs alternate), function k of the list moving k MPI_INTs,
 * so that tests/py/test_preload.py can check every call and every byte
 * count (preload_helpers.large_expected).  tests/programs/preload/f08_large_calls.F90
 * makes the same calls through use mpi_f08.  An MPI older than 4.0 has no
 * large-count functions: the program then prints "SKIP ..." and exits 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_lines.h"

#if MPI_VERSION >= 4

#define COUNTERS(X)                                                                                \
        X(MPI_Init)                                                                                \
        X(MPI_Finalize)                                                                            \
        X(MPI_Barrier)                                                                             \
        X(MPI_Irecv)                                                                               \
        X(MPI_Wait)                                                                                \
        X(MPI_Mprobe)                                                                              \
        X(MPI_Send_c)                                                                              \
        X(MPI_Bsend_c)                                                                             \
        X(MPI_Ssend_c)                                                                             \
        X(MPI_Rsend_c)                                                                             \
        X(MPI_Recv_c)                                                                              \
        X(MPI_Sendrecv_c)                                                                          \
        X(MPI_Sendrecv_replace_c)                                                                  \
        X(MPI_Mrecv_c)                                                                             \
        X(MPI_Bcast_c)                                                                             \
        X(MPI_Gather_c)                                                                            \
        X(MPI_Gatherv_c)                                                                           \
        X(MPI_Scatter_c)                                                                           \
        X(MPI_Scatterv_c)                                                                          \
        X(MPI_Allgather_c)                                                                         \
        X(MPI_Allgatherv_c)                                                                        \
        X(MPI_Alltoall_c)                                                                          \
        X(MPI_Alltoallv_c)                                                                         \
        X(MPI_Alltoallw_c)                                                                         \
        X(MPI_Reduce_c)                                                                            \
        X(MPI_Allreduce_c)                                                                         \
        X(MPI_Reduce_scatter_c)                                                                    \
        X(MPI_Reduce_scatter_block_c)                                                              \
        X(MPI_Scan_c)                                                                              \
        X(MPI_Exscan_c)                                                                            \
        X(MPI_Neighbor_allgather_c)                                                                \
        X(MPI_Neighbor_allgatherv_c)                                                               \
        X(MPI_Neighbor_alltoall_c)                                                                 \
        X(MPI_Neighbor_alltoallv_c)                                                                \
        X(MPI_Neighbor_alltoallw_c)

#define DECL(f) static long n_##f;
COUNTERS(DECL)
#define C(f, ...) (n_##f++, f(__VA_ARGS__))

static void print_counts(int rank)
{
        char buf[RANK_LINE_MAX - 64];
        size_t off = 0;
        int first = 1;

#define PRINT(f)                                                                                   \
        if (n_##f) {                                                                               \
                off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s\"%s\": %ld",             \
                                        first ? "" : ", ", #f, n_##f);                             \
                first = 0;                                                                         \
        }
        COUNTERS(PRINT)
        char line[RANK_LINE_MAX];
        snprintf(line, sizeof(line), "COUNTS %d {%s}\n", rank, buf);
        print_rank_lines(line, rank);
}

static int bad;

static void expect(int rank, const char *what, long got, long want)
{
        if (got != want) {
                fprintf(stderr, "c_large_calls: rank %d: %s: got %ld, want %ld\n", rank, what, got,
                        want);
                bad = 1;
        }
}

int main(int argc, char **argv)
{
        int rank, size;
        int ibuf[256], obuf[256];
        char bsend_buf[1024];
        void *detached;
        MPI_Count counts[2];
        MPI_Aint displs[2];
        MPI_Datatype types[2] = {MPI_INT, MPI_INT};
        MPI_Request req;
        MPI_Message msg;
        MPI_Status st;
        MPI_Comm ring;

        C(MPI_Init, &argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size != 2) {
                fprintf(stderr, "c_large_calls: needs 2 ranks\n");
                MPI_Abort(MPI_COMM_WORLD, 2);
        }
        int peer = 1 - rank;
        for (int i = 0; i < 256; i++)
                obuf[i] = 1000 * rank + i;
        memset(ibuf, 0, sizeof(ibuf));
        MPI_Buffer_attach(bsend_buf, (int)sizeof(bsend_buf));

        /* point-to-point: each rank sends once and receives once per pair */
        for (int sender = 0; sender < 2; sender++) {
                if (rank == sender) {
                        C(MPI_Send_c, obuf, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
                        C(MPI_Bsend_c, obuf, 2, MPI_INT, peer, 2, MPI_COMM_WORLD);
                        C(MPI_Ssend_c, obuf, 3, MPI_INT, peer, 3, MPI_COMM_WORLD);
                        C(MPI_Barrier, MPI_COMM_WORLD); /* the receive is posted */
                        C(MPI_Rsend_c, obuf, 4, MPI_INT, peer, 4, MPI_COMM_WORLD);
                        C(MPI_Send_c, obuf, 5, MPI_INT, peer, 5, MPI_COMM_WORLD);
                } else {
                        C(MPI_Recv_c, ibuf, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, &st);
                        expect(rank, "MPI_Send_c data", ibuf[0], 1000 * peer);
                        C(MPI_Recv_c, ibuf, 2, MPI_INT, peer, 2, MPI_COMM_WORLD, &st);
                        C(MPI_Recv_c, ibuf, 3, MPI_INT, peer, 3, MPI_COMM_WORLD, &st);
                        C(MPI_Irecv, ibuf, 4, MPI_INT, peer, 4, MPI_COMM_WORLD, &req);
                        C(MPI_Barrier, MPI_COMM_WORLD);
                        C(MPI_Wait, &req, MPI_STATUS_IGNORE);
                        C(MPI_Mprobe, peer, 5, MPI_COMM_WORLD, &msg, &st);
                        C(MPI_Mrecv_c, ibuf, 5, MPI_INT, &msg, &st);
                        MPI_Count got = 0;
                        MPI_Get_count_c(&st, MPI_INT, &got);
                        expect(rank, "MPI_Mrecv_c count", (long)got, 5);
                }
        }
        C(MPI_Sendrecv_c, obuf, 6, MPI_INT, peer, 6, ibuf, 6, MPI_INT, peer, 6, MPI_COMM_WORLD,
          MPI_STATUS_IGNORE);
        expect(rank, "MPI_Sendrecv_c data", ibuf[5], 1000 * peer + 5);
        C(MPI_Sendrecv_replace_c, ibuf, 7, MPI_INT, peer, 7, peer, 7, MPI_COMM_WORLD,
          MPI_STATUS_IGNORE);

        /* collectives on MPI_COMM_WORLD */
        C(MPI_Bcast_c, obuf, 8, MPI_INT, 0, MPI_COMM_WORLD);
        expect(rank, "MPI_Bcast_c data", obuf[7], 7);
        for (int i = 0; i < 256; i++)
                obuf[i] = 1000 * rank + i;
        if (rank == 0) /* in place at the root: sendcount/sendtype are ignored */
                C(MPI_Gather_c, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ibuf, 9, MPI_INT, 0,
                  MPI_COMM_WORLD);
        else
                C(MPI_Gather_c, obuf, 9, MPI_INT, NULL, 0, MPI_INT, 0, MPI_COMM_WORLD);
        counts[0] = counts[1] = 10;
        displs[0] = 0;
        displs[1] = 10;
        C(MPI_Gatherv_c, obuf, 10, MPI_INT, ibuf, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == 0)
                expect(rank, "MPI_Gatherv_c data", ibuf[10], 1000);
        C(MPI_Scatter_c, obuf, 11, MPI_INT, ibuf, 11, MPI_INT, 0, MPI_COMM_WORLD);
        counts[0] = counts[1] = 12;
        displs[1] = 12;
        C(MPI_Scatterv_c, obuf, counts, displs, MPI_INT, ibuf, 12, MPI_INT, 0, MPI_COMM_WORLD);
        expect(rank, "MPI_Scatterv_c data", ibuf[0], 12 * rank);
        C(MPI_Allgather_c, obuf, 13, MPI_INT, ibuf, 13, MPI_INT, MPI_COMM_WORLD);
        counts[0] = counts[1] = 14;
        displs[1] = 14;
        C(MPI_Allgatherv_c, obuf, 14, MPI_INT, ibuf, counts, displs, MPI_INT, MPI_COMM_WORLD);
        expect(rank, "MPI_Allgatherv_c data", ibuf[14], 1000);
        C(MPI_Alltoall_c, obuf, 15, MPI_INT, ibuf, 15, MPI_INT, MPI_COMM_WORLD);
        counts[0] = counts[1] = 16;
        displs[1] = 16;
        C(MPI_Alltoallv_c, obuf, counts, displs, MPI_INT, ibuf, counts, displs, MPI_INT,
          MPI_COMM_WORLD);
        counts[0] = counts[1] = 17;
        displs[1] = 17 * (MPI_Aint)sizeof(int); /* alltoallw: displacements in bytes */
        C(MPI_Alltoallw_c, obuf, counts, displs, types, ibuf, counts, displs, types,
          MPI_COMM_WORLD);
        C(MPI_Reduce_c, obuf, ibuf, 18, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        C(MPI_Allreduce_c, obuf, ibuf, 19, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        expect(rank, "MPI_Allreduce_c sum", ibuf[1], 1000 + 2);
        for (int i = 0; i < 19; i++)
                ibuf[i] = rank + 1;
        C(MPI_Allreduce_c, MPI_IN_PLACE, ibuf, 19, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        expect(rank, "MPI_Allreduce_c in place", ibuf[18], 3);
        counts[0] = counts[1] = 20;
        C(MPI_Reduce_scatter_c, obuf, ibuf, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        C(MPI_Reduce_scatter_block_c, obuf, ibuf, 21, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        C(MPI_Scan_c, obuf, ibuf, 22, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        C(MPI_Exscan_c, obuf, ibuf, 23, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

        /* neighbourhood collectives on a distributed graph, the peer the one
         * neighbour (MPICH 4.0's mpi_f08 large-count neighbour calls work on
         * no other topology; the C calls do the same as the Fortran ones) */
        MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &peer, MPI_UNWEIGHTED, 1, &peer,
                                       MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &ring);
        C(MPI_Neighbor_allgather_c, obuf, 24, MPI_INT, ibuf, 24, MPI_INT, ring);
        counts[0] = counts[1] = 25;
        displs[1] = 25;
        C(MPI_Neighbor_allgatherv_c, obuf, 25, MPI_INT, ibuf, counts, displs, MPI_INT, ring);
        C(MPI_Neighbor_alltoall_c, obuf, 26, MPI_INT, ibuf, 26, MPI_INT, ring);
        counts[0] = counts[1] = 27;
        displs[1] = 27;
        C(MPI_Neighbor_alltoallv_c, obuf, counts, displs, MPI_INT, ibuf, counts, displs, MPI_INT,
          ring);
        counts[0] = counts[1] = 28;
        displs[1] = 28 * (MPI_Aint)sizeof(int);
        C(MPI_Neighbor_alltoallw_c, obuf, counts, displs, types, ibuf, counts, displs, types, ring);
        MPI_Comm_free(&ring);

        int size_detached;
        MPI_Buffer_detach(&detached, &size_detached);
        C(MPI_Barrier, MPI_COMM_WORLD);
        n_MPI_Finalize++; /* counted before printing: the program ends right after */
        print_counts(rank);
        if (!bad)
                printf("LARGE OK %d\n", rank);
        fflush(stdout);
        MPI_Finalize();
        return bad;
}

#else

int main(int argc, char **argv)
{
        int rank;

        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        printf("SKIP %d: MPI %d.%d has no large-count functions\n", rank, MPI_VERSION,
               MPI_SUBVERSION);
        MPI_Finalize();
        return 0;
}

#endif
