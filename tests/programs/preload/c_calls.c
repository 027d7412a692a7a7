/* SPDX-License-Identifier: BSD-3-Clause */
/* A test program in C that calls every family the preload library wraps
 * and prints, per rank, how many times it called each function:
 *   COUNTS <rank> {"MPI_Send": 1, ...}
 * tests/py/test_preload.py compares that with the rank's profile: exactly
 * one event per call.  Needs exactly 2 ranks.  Options:
 *   --thread   MPI_Init_thread(MPI_THREAD_SERIALIZED) instead of MPI_Init
 *   --sleep S  rank 1 computes S seconds before the final barrier, so rank 0
 *              waits in it (a long wait)
 *   --hang     rank 0 spins in MPI_Iprobe forever after its counters are
 *              printed (for SIGKILL tests)
 *   --nofinalize  return from main without MPI_Finalize
 *   --abort    rank 1 calls MPI_Abort after printing its counters */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rank_lines.h"

#define COUNTERS(X)                                                                                \
        X(MPI_Init)                                                                                \
        X(MPI_Init_thread)                                                                         \
        X(MPI_Finalize)                                                                            \
        X(MPI_Send)                                                                                \
        X(MPI_Recv)                                                                                \
        X(MPI_Ssend)                                                                               \
        X(MPI_Sendrecv)                                                                            \
        X(MPI_Sendrecv_replace)                                                                    \
        X(MPI_Barrier)                                                                             \
        X(MPI_Bcast)                                                                               \
        X(MPI_Gather)                                                                              \
        X(MPI_Allgather)                                                                           \
        X(MPI_Alltoall)                                                                            \
        X(MPI_Alltoallv)                                                                           \
        X(MPI_Reduce)                                                                              \
        X(MPI_Allreduce)                                                                           \
        X(MPI_Scan)                                                                                \
        X(MPI_Neighbor_allgather)                                                                  \
        X(MPI_Wait)                                                                                \
        X(MPI_Waitall)                                                                             \
        X(MPI_Waitany)                                                                             \
        X(MPI_Waitsome)                                                                            \
        X(MPI_Test)                                                                                \
        X(MPI_Testall)                                                                             \
        X(MPI_Testany)                                                                             \
        X(MPI_Testsome)                                                                            \
        X(MPI_Probe)                                                                               \
        X(MPI_Iprobe)                                                                              \
        X(MPI_Mprobe)                                                                              \
        X(MPI_Mrecv)                                                                               \
        X(MPI_Isend)                                                                               \
        X(MPI_Irecv)                                                                               \
        X(MPI_Ibarrier)                                                                            \
        X(MPI_Iallreduce)                                                                          \
        X(MPI_Ineighbor_alltoall)

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

static void spin(double seconds)
{
        struct timespec a, b;

        clock_gettime(CLOCK_MONOTONIC, &a);
        do
                clock_gettime(CLOCK_MONOTONIC, &b);
        while ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9 < seconds);
}

int main(int argc, char **argv)
{
        int rank, size, thread = 0, hang = 0, nofinalize = 0, abort_ = 0, provided, flag, idx,
                        outcount;
        int ibuf[100], obuf[100], idx_arr[4];
        double d = 1.0, dsum = 0.0, big[1000];
        double sleep_s = 0;
        MPI_Request req[10];
        MPI_Status st[10];
        MPI_Message msg;
        MPI_Comm ring;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--thread"))
                        thread = 1;
                else if (!strcmp(argv[i], "--hang"))
                        hang = 1;
                else if (!strcmp(argv[i], "--nofinalize"))
                        nofinalize = 1;
                else if (!strcmp(argv[i], "--abort"))
                        abort_ = 1;
                else if (!strcmp(argv[i], "--sleep") && i + 1 < argc)
                        sleep_s = atof(argv[++i]);
        }
        if (thread)
                C(MPI_Init_thread, &argc, &argv, MPI_THREAD_SERIALIZED, &provided);
        else
                C(MPI_Init, &argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size != 2) {
                fprintf(stderr, "c_calls: needs 2 ranks\n");
                MPI_Abort(MPI_COMM_WORLD, 2);
        }
        int peer = 1 - rank;
        memset(ibuf, 0, sizeof(ibuf));
        memset(obuf, 0, sizeof(obuf));
        memset(big, 0, sizeof(big));

        for (int i = 0; i < 3; i++)
                C(MPI_Barrier, MPI_COMM_WORLD);
        /* blocking point-to-point: 8000 bytes each way */
        if (rank == 0) {
                C(MPI_Send, big, 1000, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD);
                C(MPI_Recv, big, 1000, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, &st[0]);
                C(MPI_Ssend, ibuf, 1, MPI_INT, peer, 2, MPI_COMM_WORLD);
        } else {
                C(MPI_Recv, big, 1000, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, &st[0]);
                C(MPI_Send, big, 1000, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD);
                C(MPI_Recv, ibuf, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        for (int i = 0; i < 4; i++)
                C(MPI_Sendrecv, obuf, 10, MPI_INT, peer, 3, ibuf, 10, MPI_INT, peer, 3,
                  MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        C(MPI_Sendrecv_replace, ibuf, 5, MPI_INT, peer, 4, peer, 4, MPI_COMM_WORLD,
          MPI_STATUS_IGNORE);
        /* collectives, one of them in place */
        C(MPI_Bcast, ibuf, 100, MPI_INT, 0, MPI_COMM_WORLD);
        C(MPI_Bcast, ibuf, 100, MPI_INT, 1, MPI_COMM_WORLD);
        C(MPI_Allreduce, &d, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        C(MPI_Allreduce, MPI_IN_PLACE, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        C(MPI_Allreduce, &d, &dsum, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        C(MPI_Reduce, &d, &dsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        C(MPI_Scan, &d, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) /* in place at the root: sendcount/sendtype are ignored */
                C(MPI_Gather, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ibuf, 2, MPI_INT, 0,
                  MPI_COMM_WORLD);
        else
                C(MPI_Gather, obuf, 2, MPI_INT, NULL, 0, MPI_INT, 0, MPI_COMM_WORLD);
        C(MPI_Allgather, obuf, 3, MPI_INT, ibuf, 3, MPI_INT, MPI_COMM_WORLD);
        C(MPI_Alltoall, obuf, 4, MPI_INT, ibuf, 4, MPI_INT, MPI_COMM_WORLD);
        {
                int counts[2] = {1, 1}, displs[2] = {0, 1};
                C(MPI_Alltoallv, obuf, counts, displs, MPI_INT, ibuf, counts, displs, MPI_INT,
                  MPI_COMM_WORLD);
        }
        /* neighbourhood collectives on a periodic ring */
        {
                int dims[1] = {2}, periods[1] = {1};
                MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
                C(MPI_Neighbor_allgather, obuf, 1, MPI_INT, ibuf, 1, MPI_INT, ring);
                C(MPI_Ineighbor_alltoall, obuf, 1, MPI_INT, ibuf, 1, MPI_INT, ring, &req[0]);
                C(MPI_Wait, &req[0], MPI_STATUS_IGNORE);
                MPI_Comm_free(&ring);
        }
        /* nonblocking point-to-point and the completion families */
        for (int i = 0; i < 5; i++) {
                C(MPI_Irecv, &ibuf[i], 1, MPI_INT, peer, 10 + i, MPI_COMM_WORLD, &req[2 * i]);
                C(MPI_Isend, &obuf[i], 1, MPI_INT, peer, 10 + i, MPI_COMM_WORLD, &req[2 * i + 1]);
        }
        C(MPI_Waitall, 10, req, st);
        C(MPI_Irecv, ibuf, 1, MPI_INT, peer, 20, MPI_COMM_WORLD, &req[0]);
        C(MPI_Isend, obuf, 1, MPI_INT, peer, 20, MPI_COMM_WORLD, &req[1]);
        C(MPI_Waitany, 2, req, &idx, MPI_STATUS_IGNORE);
        C(MPI_Waitsome, 2, req, &outcount, idx_arr, st);
        C(MPI_Irecv, ibuf, 1, MPI_INT, peer, 21, MPI_COMM_WORLD, &req[0]);
        C(MPI_Isend, obuf, 1, MPI_INT, peer, 21, MPI_COMM_WORLD, &req[1]);
        do
                C(MPI_Testall, 2, req, &flag, st);
        while (!flag);
        C(MPI_Irecv, ibuf, 1, MPI_INT, peer, 22, MPI_COMM_WORLD, &req[0]);
        C(MPI_Isend, obuf, 1, MPI_INT, peer, 22, MPI_COMM_WORLD, &req[1]);
        do
                C(MPI_Testany, 2, req, &idx, &flag, MPI_STATUS_IGNORE);
        while (!flag);
        do
                C(MPI_Testsome, 2, req, &outcount, idx_arr, st);
        while (outcount != MPI_UNDEFINED && outcount == 0);
        C(MPI_Waitall, 2, req, st);
        C(MPI_Ibarrier, MPI_COMM_WORLD, &req[0]);
        C(MPI_Wait, &req[0], MPI_STATUS_IGNORE);
        C(MPI_Iallreduce, &d, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req[0]);
        do
                C(MPI_Test, &req[0], &flag, MPI_STATUS_IGNORE);
        while (!flag);
        /* probes */
        if (rank == 0) {
                C(MPI_Send, ibuf, 2, MPI_INT, peer, 30, MPI_COMM_WORLD);
                C(MPI_Send, ibuf, 3, MPI_INT, peer, 31, MPI_COMM_WORLD);
                C(MPI_Send, ibuf, 4, MPI_INT, peer, 32, MPI_COMM_WORLD);
        } else {
                C(MPI_Probe, peer, 30, MPI_COMM_WORLD, &st[0]);
                C(MPI_Recv, ibuf, 2, MPI_INT, peer, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                do
                        C(MPI_Iprobe, peer, 31, MPI_COMM_WORLD, &flag, &st[0]);
                while (!flag);
                C(MPI_Recv, ibuf, 3, MPI_INT, peer, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                C(MPI_Mprobe, peer, 32, MPI_COMM_WORLD, &msg, &st[0]);
                C(MPI_Mrecv, ibuf, 4, MPI_INT, &msg, MPI_STATUS_IGNORE);
        }
        if (sleep_s > 0 && rank == 1)
                spin(sleep_s);
        C(MPI_Barrier, MPI_COMM_WORLD);
        if (!nofinalize && !(abort_ && rank == 1))
                n_MPI_Finalize++; /* counted before printing: the program ends right after */
        print_counts(rank);
        if (abort_ && rank == 1)
                MPI_Abort(MPI_COMM_WORLD, 3);
        if (hang && rank == 0)
                for (;;)
                        MPI_Iprobe(peer, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        if (!nofinalize)
                MPI_Finalize();
        return 0;
}
