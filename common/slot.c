/* SPDX-License-Identifier: BSD-3-Clause */
/* What a slot says and the wait around it (slot.h): a slot read (the
 * validated snapshot, a rank's whole-run totals), how the rank's MPI library
 * waits, the rank's clock, and both sides of the wait protocol (the agent
 * lowering and raising, a rank announcing a long wait and waking the agent).
 * The segment's file and mappings are slot_segment.c's. */
#include "slot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "parse.h"

int mpi_pstate_slot_snapshot(const struct mpi_pstate_slot *shared, struct mpi_pstate_slot *copy)
{
        if (!shared || !copy)
                return -EINVAL;
        memcpy(copy, (const void *)shared, sizeof(*copy));
        if (copy->magic == 0)
                return -ENOENT;
        if (copy->magic != MPI_PSTATE_SLOT_MAGIC || copy->version != MPI_PSTATE_SLOT_VERSION ||
            copy->slot_size != MPI_PSTATE_SLOT_SIZE || copy->nfuncs > MPI_PSTATE_SLOT_MAX_FUNCS)
                return -EPROTO;
        if (atomic_load_explicit(&copy->state, memory_order_relaxed) > MPI_PSTATE_SLOT_DISABLED ||
            copy->clock > MPI_PSTATE_CLOCK_MONOTONIC || copy->mode > MPI_PSTATE_SLOT_MODE_PROFILE)
                return -EPROTO;
        for (uint32_t i = 0; i < MPI_PSTATE_SLOT_MAX_FUNCS; i++) {
                if (memchr(copy->fn[i].name, '\0', MPI_PSTATE_SLOT_NAME_LEN) == NULL)
                        return -EPROTO;
        }
        return 0;
}

/* The life-cycle calls of preload/mpi_functions.def (kinds init, finalize,
 * abort): they frame the application, they are no time in MPI.
 * tests/py/test_epilog_sums.py holds this list, the .def's and slots.py's
 * FRAME_FUNCS equal. */
static const char *const frame_funcs[] = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize",
                                          "MPI_Abort"};

/* [A-Za-z][A-Za-z0-9_]{0,31}, NUL-terminated within the entry. */
static bool fn_name_ok(const char *n)
{
        if (!((n[0] >= 'A' && n[0] <= 'Z') || (n[0] >= 'a' && n[0] <= 'z')))
                return false;
        for (unsigned i = 1; i < MPI_PSTATE_SLOT_NAME_LEN && n[i]; i++)
                if (!((n[i] >= 'A' && n[i] <= 'Z') || (n[i] >= 'a' && n[i] <= 'z') ||
                      (n[i] >= '0' && n[i] <= '9') || n[i] == '_'))
                        return false;
        return true;
}

static bool fn_is_frame(const char *n)
{
        for (size_t i = 0; i < sizeof(frame_funcs) / sizeof(frame_funcs[0]); i++)
                if (strcmp(n, frame_funcs[i]) == 0)
                        return true;
        return false;
}

void mpi_pstate_slot_totals(const struct mpi_pstate_slot *snap, struct mpi_pstate_slot_totals *t)
{
        uint64_t tps = snap->ticks_per_sec, a = snap->app_start_ticks, e = snap->app_end_ticks;
        uint32_t nf =
            snap->nfuncs < MPI_PSTATE_SLOT_MAX_FUNCS ? snap->nfuncs : MPI_PSTATE_SLOT_MAX_FUNCS;
        unsigned __int128 mpi = 0;

        memset(t, 0, sizeof(*t));
        if (tps && e > a && a > 0) {
                unsigned __int128 w = (unsigned __int128)(e - a) * 1000000000u / tps;

                t->has_wall = w <= MPI_PSTATE_SLOT_NS_MAX;
                t->wall_ns = t->has_wall ? (uint64_t)w : 0;
        }
        for (uint32_t i = 0; i < nf; i++) {
                const char *n = snap->fn[i].name;
                bool later = false;

                if (!fn_name_ok(n) || fn_is_frame(n))
                        continue;
                for (uint32_t j = i + 1; j < nf && !later; j++)
                        later = strncmp(n, snap->fn[j].name, MPI_PSTATE_SLOT_NAME_LEN) == 0;
                if (!later)
                        mpi += atomic_load_explicit(&snap->fn[i].time_ns, memory_order_relaxed);
        }
        t->has_mpi = mpi <= MPI_PSTATE_SLOT_NS_MAX;
        t->mpi_ns = t->has_mpi ? (uint64_t)mpi : 0;
        t->wait_ns = atomic_load_explicit(&snap->long_ns, memory_order_relaxed);
        t->has_wait = t->wait_ns <= MPI_PSTATE_SLOT_NS_MAX;
        if (!t->has_wait)
                t->wait_ns = 0;
}

/* ---- wait mode: the library's own variables, read as it reads them ---- */

/* The value of name in envp, or NULL: the first entry, as getenv finds. */
static const char *env_get(char *const *envp, const char *name)
{
        size_t len = strlen(name);

        for (; envp && *envp; envp++) {
                if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
                        return *envp + len + 1;
        }
        return NULL;
}

/* 0 false, 1 true, -1 not a boolean.  Intel MPI documents enable/disable,
 * Open MPI's MCA booleans take enabled/disabled: an atoi() would read both
 * as 0, the very mistake that calls a configured wait mode "off". */
static int env_bool(const char *v)
{
        static const char *const words[] = {"0", "no",  "off", "false", "disable", "disabled",
                                            "1", "yes", "on",  "true",  "enable",  "enabled"};
        int i;

        if (mpi_pstate_parse_word(v, words, sizeof(words) / sizeof(words[0]), &i) != 0)
                return -1;
        return i >= 6;
}

/* Open MPI: yield_when_idle makes opal_progress() call sched_yield(); the
 * runtime sets mpi_oversubscribe for an oversubscribed node, and MPI_Init
 * then yields whatever yield_when_idle says. */
static enum mpi_pstate_wait_mode wait_mode_ompi(char *const *envp)
{
        const char *over = env_get(envp, "OMPI_MCA_mpi_oversubscribe");
        const char *yield = env_get(envp, "OMPI_MCA_mpi_yield_when_idle");
        int b;

        if (over && env_bool(over) == 1)
                return MPI_PSTATE_WAIT_YIELD;
        if (!yield)
                return MPI_PSTATE_WAIT_POLL;
        b = env_bool(yield);
        return b < 0 ? MPI_PSTATE_WAIT_UNKNOWN : b ? MPI_PSTATE_WAIT_YIELD : MPI_PSTATE_WAIT_POLL;
}

/* The major version in MPICH's version string ("MPICH Version:\t5.0.2"),
 * 0 when it names none. */
static unsigned long mpich_major(const char *library)
{
        static const char key[] = "MPICH Version:";
        const char *p = library ? strstr(library, key) : NULL;
        unsigned long v;
        char *end;

        if (!p)
                return 0;
        p += sizeof(key) - 1;
        p += strspn(p, " \t");
        if (*p < '0' || *p > '9')
                return 0;
        errno = 0;
        v = strtoul(p, &end, 10);
        if (errno || (*end != '.' && *end != '\0' && *end != '\n' && *end != ' '))
                return 0;
        return v;
}

/* MPICH: ch3:nemesis yields every POLLS_BEFORE_YIELD polls (0: never).
 * MPICH reads MPICH_, then MPIR_PARAM_, then MPIR_CVAR_, each overriding:
 * the first found in the opposite order is the one it keeps.  The ch4
 * device (the default since 3.4, named in the library's version string)
 * has no such variable: up to 4.x it polls, while 5.0's calls sched_yield
 * all through a wait whatever the variable says (strace of a 0.6 s
 * MPI_Barrier: 24,837 calls under 5.0.2, none under 4.0.2), and a yielding
 * rank keeps its core only while nothing else is runnable. */
static enum mpi_pstate_wait_mode wait_mode_mpich(const char *library, char *const *envp)
{
        static const char *const vars[] = {"MPIR_CVAR_POLLS_BEFORE_YIELD",
                                           "MPIR_PARAM_POLLS_BEFORE_YIELD",
                                           "MPICH_POLLS_BEFORE_YIELD"};
        const char *v = NULL;
        uint64_t n;

        if (library && strstr(library, "ch4"))
                return mpich_major(library) >= 5 ? MPI_PSTATE_WAIT_YIELD : MPI_PSTATE_WAIT_POLL;
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]) && !v; i++)
                v = env_get(envp, vars[i]);
        if (!v)
                return MPI_PSTATE_WAIT_POLL;
        if (mpi_pstate_parse_u64(v, 0, INT32_MAX, &n) != 0)
                return MPI_PSTATE_WAIT_UNKNOWN;
        return n ? MPI_PSTATE_WAIT_YIELD : MPI_PSTATE_WAIT_POLL;
}

/* MVAPICH2: MV2_USE_BLOCKING sleeps on the InfiniBand completion channel
 * after MV2_SPIN_COUNT polls. */
static enum mpi_pstate_wait_mode wait_mode_mv2(char *const *envp)
{
        const char *v = env_get(envp, "MV2_USE_BLOCKING");
        int b;

        if (!v)
                return MPI_PSTATE_WAIT_POLL;
        b = env_bool(v);
        return b < 0 ? MPI_PSTATE_WAIT_UNKNOWN : b ? MPI_PSTATE_WAIT_SLEEP : MPI_PSTATE_WAIT_POLL;
}

/* Intel MPI: I_MPI_THREAD_YIELD 0 none and 1 pause (both spin), 2
 * sched_yield, 3 usleep; I_MPI_WAIT_MODE on makes 2 the default. */
static enum mpi_pstate_wait_mode wait_mode_impi(char *const *envp)
{
        static const enum mpi_pstate_wait_mode how[] = {MPI_PSTATE_WAIT_POLL, MPI_PSTATE_WAIT_POLL,
                                                        MPI_PSTATE_WAIT_YIELD,
                                                        MPI_PSTATE_WAIT_SLEEP};
        const char *yield = env_get(envp, "I_MPI_THREAD_YIELD");
        const char *mode = env_get(envp, "I_MPI_WAIT_MODE");
        uint64_t n;
        int b;

        if (yield)
                return mpi_pstate_parse_u64(yield, 0, 3, &n) == 0 ? how[n]
                                                                  : MPI_PSTATE_WAIT_UNKNOWN;
        if (!mode)
                return MPI_PSTATE_WAIT_POLL;
        b = env_bool(mode);
        return b < 0 ? MPI_PSTATE_WAIT_UNKNOWN : b ? MPI_PSTATE_WAIT_YIELD : MPI_PSTATE_WAIT_POLL;
}

enum mpi_pstate_wait_mode mpi_pstate_slot_wait_mode(uint32_t abi, const char *library,
                                                    char *const *envp)
{
        if (abi == 1)
                return wait_mode_ompi(envp);
        if (abi != 2)
                return MPI_PSTATE_WAIT_UNKNOWN;
        if (library && strstr(library, "Intel(R) MPI"))
                return wait_mode_impi(envp);
        if (library && strstr(library, "MVAPICH"))
                return wait_mode_mv2(envp);
        return wait_mode_mpich(library, envp);
}

int mpi_pstate_slot_clock_choose(const char *want, enum mpi_pstate_clock *clock)
{
        char buf[64];
        ssize_t n;
        int fd;

        if (want && strcmp(want, "monotonic") == 0) {
                *clock = MPI_PSTATE_CLOCK_MONOTONIC;
                return 0;
        }
#if defined(MPI_PSTATE_HAVE_COUNTER)
        if (want && strcmp(want, "tsc") == 0) {
                *clock = MPI_PSTATE_CLOCK_TSC;
                return 0;
        }
#endif
        if (want && *want && strcmp(want, "auto") != 0)
                return -EINVAL;
        *clock = MPI_PSTATE_CLOCK_MONOTONIC;
#if defined(MPI_PSTATE_HAVE_COUNTER)
        fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n > 0) {
                buf[n] = '\0';
                buf[strcspn(buf, "\n")] = '\0';
#if defined(__aarch64__)
                if (strcmp(buf, "arch_sys_counter") == 0)
#else
                if (strcmp(buf, "tsc") == 0)
#endif
                        *clock = MPI_PSTATE_CLOCK_TSC;
        }
#else
        (void)buf;
        (void)n;
        (void)fd;
#endif
        return 0;
}

void mpi_pstate_slot_clock_sample(enum mpi_pstate_clock clock, struct mpi_pstate_clock_sample *s)
{
        struct timespec ts;

        /* ticks between two reads of the reference so that the pair is as
         * close in time as the clocks allow */
        clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
        s->ticks = mpi_pstate_slot_now(clock);
        s->ns = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

uint64_t mpi_pstate_slot_clock_rate(enum mpi_pstate_clock clock,
                                    const struct mpi_pstate_clock_sample *first, uint64_t min_ns)
{
        struct mpi_pstate_clock_sample second;

        if (clock != MPI_PSTATE_CLOCK_TSC || !first)
                return UINT64_C(1000000000);
#if defined(__aarch64__)
        uint64_t frq;

        __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(frq));
        if (frq & UINT64_C(0xffffffff)) /* the register's upper half is RES0 */
                return frq & UINT64_C(0xffffffff);
#endif
        mpi_pstate_slot_clock_sample(clock, &second);
        if (second.ns - first->ns < min_ns) {
                uint64_t left = min_ns - (second.ns - first->ns);
                struct timespec req = {.tv_sec = (time_t)(left / 1000000000u),
                                       .tv_nsec = (long)(left % 1000000000u)};

                while (nanosleep(&req, &req) != 0 && errno == EINTR)
                        ;
                mpi_pstate_slot_clock_sample(clock, &second);
        }
        if (second.ns <= first->ns || second.ticks <= first->ticks)
                return UINT64_C(1000000000); /* clock went backwards: let it count as ns */
        return (uint64_t)((unsigned __int128)(second.ticks - first->ticks) * 1000000000u /
                          (second.ns - first->ns));
}

int mpi_pstate_slot_agent_lower(struct mpi_pstate_slot *s, uint64_t since)
{
        if (!s || since == 0)
                return 0;
        atomic_store(&s->clocked_down, 1);
        if (atomic_load(&s->wait_since) == since)
                return 1;
        atomic_store(&s->clocked_down, 0);
        return 0;
}

int mpi_pstate_slot_agent_still_waiting(struct mpi_pstate_slot *s, uint64_t since)
{
        if (!s || since == 0)
                return 0;
        atomic_thread_fence(memory_order_seq_cst);
        return atomic_load(&s->wait_since) == since;
}

void mpi_pstate_slot_agent_raise(struct mpi_pstate_slot *s, uint64_t down_ns)
{
        if (!s)
                return;
        atomic_store_explicit(&s->clocked_down, 0, memory_order_release);
        atomic_fetch_add_explicit(&s->down_ns, down_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->transitions, 1, memory_order_relaxed);
}

bool mpi_pstate_slot_announce(struct mpi_pstate_seg_header *hdr, struct mpi_pstate_slot *s,
                              uint64_t threshold_ns)
{
        uint32_t index = s->local_index;
        uint64_t wake;

        if (!hdr || index >= MPI_PSTATE_SEG_MAX_SLOTS ||
            atomic_load_explicit(&hdr->announce_off, memory_order_relaxed))
                return false;
        atomic_fetch_add_explicit(&s->announced, 1, memory_order_relaxed);
        /* seq_cst, against the agent's store of agent_wake_ns and load of
         * the map before it sleeps: if this load misses that store (0:
         * awake), the agent's load sees the bit and it passes again. */
        atomic_fetch_or(&hdr->announce[index / 64], UINT64_C(1) << (index % 64));
        wake = atomic_load(&hdr->agent_wake_ns);
        if (!wake || wake <= mpi_pstate_slot_now(MPI_PSTATE_CLOCK_MONOTONIC) + threshold_ns)
                return true; /* it takes the bit before the deadline anyway */
        /* the bump: an agent between its re-check and its FUTEX_WAIT
         * returns from the wait at once */
        atomic_fetch_add(&hdr->agent_futex, 1);
        syscall(SYS_futex, &hdr->agent_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
        return true;
}

void mpi_pstate_slot_wake_agent(struct mpi_pstate_seg_header *hdr, struct mpi_pstate_slot *s)
{
        if (!hdr)
                return;
        atomic_fetch_add(&hdr->agent_futex, 1);
        atomic_fetch_add_explicit(&hdr->wakeups, 1, memory_order_relaxed);
        if (s)
                atomic_fetch_add_explicit(&s->wakeups, 1, memory_order_relaxed);
        /* Not FUTEX_PRIVATE: the agent waits from another process. */
        syscall(SYS_futex, &hdr->agent_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
}
