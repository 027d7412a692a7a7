/* SPDX-License-Identifier: BSD-3-Clause */
/* hostile: a rank that attacks the node agent through its own segment, as
 * the job's user can (fake pids, invalid slots), for tests/integration/
 * test_adversarial_root.py and bench/agent/run.py's attack run.
 *
 * For --seconds it loops, as fast as it can: in every slot of --slots
 * (default: slot 0) it writes a new fake pid (one that does not exist: each
 * is a pidfd_open failure and an "is gone" line for the agent), toggles the
 * state between running and attached, sets wait_since to a fresh value (so
 * the slot stays in the agent's short scans), then bumps the header's futex
 * word and FUTEX_WAKEs the agent.  --nslots N first rewrites the header's
 * slot count (and grows the file to match): the agent must keep the
 * plugin's figure.
 *
 * --period-ms P pauses P ms between two rounds, and every even slot gets a
 * real child process that exits 20 ms later: each is "gone" for the agent.
 *
 * usage: hostile --shm PATH [--slots N] [--seconds S] [--period-ms P] [--nslots N]
 * Prints one JSON object: {"wakes": N, "seconds": S}. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <getopt.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "slot.h"

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
            {"shm", required_argument, NULL, 's'},       {"slots", required_argument, NULL, 'n'},
            {"seconds", required_argument, NULL, 't'},   {"nslots", required_argument, NULL, 'h'},
            {"period-ms", required_argument, NULL, 'p'}, {NULL, 0, NULL, 0}};
        const char *shm = NULL;
        unsigned slots = 1, forged = 0;
        double seconds = 5, period = 0, t0, end;
        uint64_t wakes = 0;
        int32_t fake = 4000000, me = (int32_t)getpid(); /* fake: near pid_max, unused */
        struct stat st;
        char *base;
        int c, fd;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        shm = optarg;
                        break;
                case 'n':
                        slots = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 't':
                        seconds = strtod(optarg, NULL);
                        break;
                case 'p':
                        period = strtod(optarg, NULL) / 1e3;
                        break;
                case 'h':
                        forged = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                default:
                        return 2;
                }
        }
        if (!shm || slots == 0)
                return 2;
        fd = open(shm, O_RDWR | O_NOFOLLOW);
        if (fd < 0 || fstat(fd, &st) != 0) {
                perror(shm);
                return 1;
        }
        if (forged) {
                /* What the user can do between the plugin's fchown and the
                 * agent's attach: a bigger file and a header that says so. */
                off_t len =
                    (off_t)MPI_PSTATE_SEG_HEADER_SIZE + (off_t)forged * MPI_PSTATE_SLOT_SIZE;
                uint32_t n = forged;

                if (ftruncate(fd, len) != 0 || pwrite(fd, &n, sizeof(n), 20) != sizeof(n)) {
                        perror("forging the header");
                        return 1;
                }
                printf("{\"forged\": %u}\n", forged);
                return 0;
        }
        if ((size_t)st.st_size < MPI_PSTATE_SEG_HEADER_SIZE + (size_t)slots * MPI_PSTATE_SLOT_SIZE)
                return 2;
        base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED) {
                perror("mmap");
                return 1;
        }
        struct mpi_pstate_seg_header *h = (struct mpi_pstate_seg_header *)base;
        /* Valid slots: every change costs the agent a full validated copy. */
        for (unsigned i = 0; i < slots; i++) {
                static const char *const names[] = {"MPI_Recv"};
                struct mpi_pstate_slot *s =
                    (struct mpi_pstate_slot *)(base + MPI_PSTATE_SEG_HEADER_SIZE +
                                               (size_t)i * MPI_PSTATE_SLOT_SIZE);

                mpi_pstate_slot_setup(s, i, names, 1);
                s->clock = MPI_PSTATE_CLOCK_MONOTONIC;
                s->mode = MPI_PSTATE_SLOT_MODE_ON;
        }
        signal(SIGCHLD, SIG_IGN); /* children reap themselves */
        t0 = now_s();
        end = t0 + seconds;
        while (now_s() < end) {
                for (unsigned i = 0; i < slots; i++) {
                        struct mpi_pstate_slot *s =
                            (struct mpi_pstate_slot *)(base + MPI_PSTATE_SEG_HEADER_SIZE +
                                                       (size_t)i * MPI_PSTATE_SLOT_SIZE);

                        /* Alternately a live process (a pidfd to open and
                         * watch) and one that does not exist ("is gone"). */
                        int32_t pid = (i & 1) ? me : fake++;

                        if (period > 0 && !(i & 1)) {
                                /* a real process that ends 20 ms later: the
                                 * agent's pidfd sees it go ("is gone") */
                                pid_t child = fork();

                                if (child == 0) {
                                        usleep(20000);
                                        _exit(0);
                                }
                                if (child > 0)
                                        pid = (int32_t)child;
                        }
                        atomic_store(&s->pid, pid);
                        if (fake > 4190000)
                                fake = 4000000;
                        atomic_store(&s->state, (wakes & 1) ? MPI_PSTATE_SLOT_RUNNING
                                                            : MPI_PSTATE_SLOT_ATTACHED);
                        atomic_store(&s->wait_since, wakes + 1);
                }
                atomic_fetch_add(&h->agent_futex, 1);
                syscall(SYS_futex, &h->agent_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
                wakes++;
                if (period > 0) {
                        struct timespec ts = {.tv_sec = (time_t)period,
                                              .tv_nsec =
                                                  (long)((period - (double)(time_t)period) * 1e9)};

                        nanosleep(&ts, NULL);
                }
        }
        printf("{\"wakes\": %llu, \"seconds\": %.3f}\n", (unsigned long long)wakes, now_s() - t0);
        return 0;
}
