/* SPDX-License-Identifier: BSD-3-Clause */
/* mpi_phases: an MPI program whose waits are known in advance, for the node
 * agent's integration tests and benchmarks.  Each argument is one phase,
 * run in order by every rank:
 *
 *   short:N          N ping-pongs between ranks 0 and 1 (microsecond calls)
 *   long0:K:MS       K times: rank 1 sleeps MS ms outside MPI, then sends;
 *                    rank 0 waits for it in MPI_Recv
 *   long1:K:MS       the same with the roles swapped
 *   barrier:K:MS     K times: rank 1 sleeps MS ms, then every rank meets in
 *                    MPI_Barrier (rank 0 waits in it)
 *   both:K:MS        K times: rank 2 sleeps MS ms, then sends to ranks 0 and
 *                    1, which both wait in MPI_Recv (needs 3 ranks)
 *   hang             rank 0 prints "hang <pid>" and waits in MPI_Recv for a
 *                    message that never comes; the others sleep (the test
 *                    kills the job)
 *   bench:S:MS       S seconds: rank 0 computes MS ms (a busy loop), then
 *                    sends to rank 1, which waits in MPI_Recv
 *
 * --pin C0,C1,...: before MPI_Init, local rank i pins itself to CPU Ci (the
 * local rank comes from the launcher's variable).  --gap MS: every rank
 * sleeps MS ms outside MPI after each phase, so that the agent's last raise
 * of a phase is logged before the next phase starts.  Rank 0 prints
 * "phase SPEC start T0 end T1" with CLOCK_MONOTONIC seconds per phase (T1
 * before the gap). */
#define _GNU_SOURCE
#include <errno.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
}

static void compute_ms(unsigned ms)
{
        volatile double x = 1.0;
        double end = now_s() + ms / 1000.0;

        while (now_s() < end)
                for (int i = 0; i < 1000; i++)
                        x = x * 1.0000001 + 1e-9;
}

static int local_rank(void)
{
        static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                           "PMI_RANK", "SLURM_LOCALID"};

        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
                const char *v = getenv(vars[i]);

                if (v && *v)
                        return atoi(v);
        }
        return 0;
}

static void pin(const char *list)
{
        int want = local_rank(), i = 0;
        char *copy = strdup(list), *save = NULL;

        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save), i++) {
                if (i != want)
                        continue;
                cpu_set_t set;

                CPU_ZERO(&set);
                CPU_SET(atoi(t), &set);
                if (sched_setaffinity(0, sizeof(set), &set) != 0)
                        perror("mpi_phases: sched_setaffinity");
        }
        free(copy);
}

int main(int argc, char **argv)
{
        int rank, size, buf = 0, first = 1;
        unsigned gap = 0;

        while (first + 1 < argc && argv[first][0] == '-') {
                if (strcmp(argv[first], "--pin") == 0)
                        pin(argv[first + 1]);
                else if (strcmp(argv[first], "--gap") == 0)
                        gap = (unsigned)atoi(argv[first + 1]);
                else
                        break;
                first += 2;
        }
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int a = first; a < argc; a++) {
                unsigned k = 0, ms = 0, n = 0;
                char name[32] = "";
                double t0 = now_s();

                if (sscanf(argv[a], "%31[a-z0-9]:%u:%u", name, &k, &ms) < 1) {
                        fprintf(stderr, "mpi_phases: bad phase %s\n", argv[a]);
                        MPI_Abort(MPI_COMM_WORLD, 2);
                }
                n = k;
                if (strcmp(name, "short") == 0) {
                        for (unsigned i = 0; i < n; i++) {
                                if (rank == 0) {
                                        MPI_Send(&buf, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
                                        MPI_Recv(&buf, 1, MPI_INT, 1, 1, MPI_COMM_WORLD,
                                                 MPI_STATUS_IGNORE);
                                } else if (rank == 1) {
                                        MPI_Recv(&buf, 1, MPI_INT, 0, 1, MPI_COMM_WORLD,
                                                 MPI_STATUS_IGNORE);
                                        MPI_Send(&buf, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
                                }
                        }
                } else if (strcmp(name, "long0") == 0 || strcmp(name, "long1") == 0) {
                        int waiter = name[4] == '0' ? 0 : 1, sender = 1 - waiter;

                        for (unsigned i = 0; i < k; i++) {
                                if (rank == sender) {
                                        sleep_ms(ms);
                                        MPI_Send(&buf, 1, MPI_INT, waiter, 2, MPI_COMM_WORLD);
                                } else if (rank == waiter) {
                                        MPI_Recv(&buf, 1, MPI_INT, sender, 2, MPI_COMM_WORLD,
                                                 MPI_STATUS_IGNORE);
                                }
                        }
                } else if (strcmp(name, "barrier") == 0) {
                        for (unsigned i = 0; i < k; i++) {
                                if (rank == 1)
                                        sleep_ms(ms);
                                MPI_Barrier(MPI_COMM_WORLD);
                        }
                } else if (strcmp(name, "both") == 0) {
                        if (size < 3)
                                MPI_Abort(MPI_COMM_WORLD, 3);
                        for (unsigned i = 0; i < k; i++) {
                                if (rank == 2) {
                                        sleep_ms(ms);
                                        MPI_Send(&buf, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
                                        MPI_Send(&buf, 1, MPI_INT, 1, 3, MPI_COMM_WORLD);
                                } else if (rank < 2) {
                                        MPI_Recv(&buf, 1, MPI_INT, 2, 3, MPI_COMM_WORLD,
                                                 MPI_STATUS_IGNORE);
                                }
                        }
                } else if (strcmp(name, "hang") == 0) {
                        if (rank == 0) {
                                printf("hang %ld\n", (long)getpid());
                                fflush(stdout);
                                MPI_Recv(&buf, 1, MPI_INT, 1, 99, MPI_COMM_WORLD,
                                         MPI_STATUS_IGNORE);
                        } else {
                                for (;;)
                                        sleep_ms(1000);
                        }
                } else if (strcmp(name, "bench") == 0) {
                        double end = now_s() + k;
                        int go = 1;

                        while (go) {
                                if (rank == 0) {
                                        compute_ms(ms);
                                        go = now_s() < end;
                                        MPI_Send(&go, 1, MPI_INT, 1, 4, MPI_COMM_WORLD);
                                } else if (rank == 1) {
                                        MPI_Recv(&go, 1, MPI_INT, 0, 4, MPI_COMM_WORLD,
                                                 MPI_STATUS_IGNORE);
                                } else {
                                        go = 0;
                                }
                        }
                } else {
                        fprintf(stderr, "mpi_phases: unknown phase %s\n", name);
                        MPI_Abort(MPI_COMM_WORLD, 2);
                }
                /* Quiet separation between phases: everybody arrives within
                 * microseconds of each other here. */
                MPI_Barrier(MPI_COMM_WORLD);
                if (rank == 0) {
                        printf("phase %s start %.6f end %.6f\n", argv[a], t0, now_s());
                        fflush(stdout);
                }
                if (gap)
                        sleep_ms(gap);
        }
        MPI_Finalize();
        return 0;
}
