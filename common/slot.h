/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared-memory segment through which MPI ranks tell the node agent
 * that they wait, and where their MPI statistics live.
 *
 * A segment is one regular file (MPI_PSTATE_SHM, normally under /dev/shm)
 * made of a 4 KiB header and then one fixed-size slot per local rank:
 *
 *   offset 0                      struct mpi_pstate_seg_header
 *   offset 4096 + i * 16384       struct mpi_pstate_slot of local rank i
 *
 * Everything is native-endian (the segment never leaves the node), every
 * field has an explicit offset checked by _Static_assert below, and the
 * counters live in the mapping, not in process memory, so a slot is
 * readable while the job runs and still complete after its rank was killed
 * (SIGKILL included).  docs/preload.md documents the layout for readers in
 * other languages (preload/mpi_pstate_slot.py is the Python reader).
 *
 * Trust: ranks run as the user and can write anything into their slot (and
 * into the header, which must be writable for the futex).  Root code reads a
 * slot only through mpi_pstate_slot_snapshot(), which copies it out of the
 * mapping first and validates the copy, and never follows a pointer, length
 * or name found in it without bounds.
 *
 * Wait protocol (rank side in mpi_pstate_slot_wait_begin/_end below, agent
 * side in mpi_pstate_slot_agent_lower/_raise):
 *  - A rank entering a blocking MPI call stores the function id in wait_fn
 *    and the CPU its calling thread runs on in wait_cpu (-1: unknown), then
 *    the tick count of the entry in wait_since (release).  On leaving it
 *    stores 0 into wait_since (release).  Nothing else: no system call.
 *  - The agent sleeps on the header's agent_futex until the earliest
 *    wait_since + threshold of all slots.  To lower a rank's core it calls
 *    mpi_pstate_slot_agent_lower() (sets clocked_down, full fence, re-reads
 *    wait_since: the wait must still be the same one), writes the frequency,
 *    then calls mpi_pstate_slot_agent_still_waiting() and raises again at
 *    once if the rank left meanwhile.
 *  - A rank leaving a call that lasted at least the threshold issues a full
 *    fence and loads clocked_down; only if it is set does it bump
 *    agent_futex and FUTEX_WAKE the agent: one system call, only after a
 *    long wait.  Shorter calls never fence; the agent's re-check after its
 *    frequency write covers the window in which such a call ends.
 *  - The agent clears clocked_down after raising the frequency.
 *  - Reaction (docs/agent.md): a wait the rank predicts long
 *    (struct mpi_pstate_pred below) is announced right after its entry: the
 *    slot's bit in the header's announce map, then FUTEX_WAKE.  The agent
 *    then knows its deadline without a poll and sleeps until it; a wait not
 *    announced is found by the agent's backstop scan.  Announcing changes
 *    nothing of what may be lowered.
 */
#ifndef MPI_PSTATE_SLOT_H
#define MPI_PSTATE_SLOT_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif
/* MPI_PSTATE_HAVE_COUNTER: the CPU has a constant-rate counter readable
 * from user space that the "tsc" clock reads: the TSC on x86, the generic
 * timer's virtual count (cntvct_el0) on aarch64. */
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
#define MPI_PSTATE_HAVE_COUNTER 1
#endif

#define MPI_PSTATE_SEG_MAGIC UINT64_C(0x316765737473706d)  /* "mpstseg1" */
#define MPI_PSTATE_SLOT_MAGIC UINT64_C(0x746f6c737473706d) /* "mpstslot" */
/* Bump on any incompatible change of either structure; readers refuse
 * other versions.  2: wait_cpu (was padding at 140). */
#define MPI_PSTATE_SLOT_VERSION 2u
#define MPI_PSTATE_SEG_HEADER_SIZE 4096u
#define MPI_PSTATE_SLOT_SIZE 16384u
#define MPI_PSTATE_SLOT_MAX_FUNCS 128u
#define MPI_PSTATE_SLOT_NAME_LEN 32u
#define MPI_PSTATE_SLOT_HIST_BUCKETS 64u
#define MPI_PSTATE_SLOT_CPUSET_WORDS 16u /* 1024 CPUs */
/* Upper bound a reader accepts for nslots (a node with 16384 ranks is far). */
#define MPI_PSTATE_SEG_MAX_SLOTS 16384u

/* slot.clock: what the tick values (wait_since, *_ticks) count. */
enum mpi_pstate_clock {
        MPI_PSTATE_CLOCK_NONE = 0,
        /* the CPU's counter (mpi_pstate_slot_counter): rdtsc on x86, where
         * the kernel's clocksource is tsc; cntvct_el0 on aarch64, where it is
         * arch_sys_counter.  The word stays "tsc" in options and records. */
        MPI_PSTATE_CLOCK_TSC = 1,
        MPI_PSTATE_CLOCK_MONOTONIC = 2, /* clock_gettime(CLOCK_MONOTONIC), ns */
};

/* slot.state */
enum mpi_pstate_slot_state {
        MPI_PSTATE_SLOT_FREE = 0,      /* never used */
        MPI_PSTATE_SLOT_ATTACHED = 1,  /* claimed, inside MPI_Init */
        MPI_PSTATE_SLOT_RUNNING = 2,   /* MPI_Init returned; counting */
        MPI_PSTATE_SLOT_FINALIZED = 3, /* MPI_Finalize returned */
        MPI_PSTATE_SLOT_ABORTED = 4,   /* MPI_Abort was called */
        MPI_PSTATE_SLOT_EXITED = 5,    /* process exited without MPI_Finalize */
        MPI_PSTATE_SLOT_DISABLED = 6,  /* bad configuration: passing calls through */
};

/* slot.mode (same values as MPI_PSTATE_MODE's words) */
enum mpi_pstate_slot_mode {
        MPI_PSTATE_SLOT_MODE_OFF = 0,
        MPI_PSTATE_SLOT_MODE_ON = 1,
        MPI_PSTATE_SLOT_MODE_PROFILE = 2, /* the agent must not change frequencies */
};

/* slot.wait_mode: how the rank's MPI library was configured to wait
 * (mpi_pstate_slot_wait_mode).  Yield is still busy: sched_yield() leaves
 * the task runnable and the core at full load when nothing else runs. */
enum mpi_pstate_wait_mode {
        MPI_PSTATE_WAIT_UNKNOWN = 0, /* no known library, or a value it may not read as we do */
        MPI_PSTATE_WAIT_POLL = 1,    /* spins on its progress engine (every default) */
        MPI_PSTATE_WAIT_YIELD = 2,   /* spins, calling sched_yield() */
        MPI_PSTATE_WAIT_SLEEP = 3,   /* blocks or sleeps: the core idles */
};

/* One blocking call in this many (of the thread that initialised MPI) has
 * its CPU time measured even when its call site does not predict it long,
 * so that long waits a prediction misses are seen now and then.  Two
 * system calls per sample: at 1 in 64 they added 13-17 ns to every
 * blocking call of bench/preload (a short barrier), at 1 in 4096 they
 * are below the timing noise.  The waits predicted long are measured
 * every time; they are where the long wait time is. */
#define MPI_PSTATE_WAIT_SAMPLE 4096u

/* seg_header.flags */
#define MPI_PSTATE_SEG_PRIVATE 1u /* made by the library itself: no agent */

struct mpi_pstate_seg_header {
        uint64_t magic;       /* 0: MPI_PSTATE_SEG_MAGIC */
        uint32_t version;     /* 8: MPI_PSTATE_SLOT_VERSION */
        uint32_t header_size; /* 12: MPI_PSTATE_SEG_HEADER_SIZE */
        uint32_t slot_size;   /* 16: MPI_PSTATE_SLOT_SIZE */
        uint32_t nslots;      /* 20 */
        int32_t creator_pid;  /* 24 */
        uint32_t flags;       /* 28: MPI_PSTATE_SEG_* */
        uint64_t created_ns;  /* 32: CLOCK_REALTIME */
        uint8_t pad0[24];     /* 40 */
        /* 64, own cache line: bumped by a rank before FUTEX_WAKE; the agent
         * FUTEX_WAITs on it with the value it read before scanning. */
        _Atomic uint32_t agent_futex;
        uint32_t pad1;            /* 68 */
        _Atomic uint64_t wakeups; /* 72: number of FUTEX_WAKE calls by all ranks */
        /* 80: CLOCK_MONOTONIC ns by which the sleeping agent wakes anyway,
         * written before each sleep, 0 while it is awake: a rank
         * announcing a wait whose deadline is later makes no system call */
        _Atomic uint64_t agent_wake_ns;
        /* 88: set by the agent while reacting costs it more than 3/4 of its
         * CPU ceiling: ranks stop announcing, polls find the waits */
        _Atomic uint32_t announce_off;
        uint8_t reserved[2048 - 92];
        /* 2048: one bit per slot, set by a rank entering a wait it predicts
         * long, before its FUTEX_WAKE (mpi_pstate_slot_announce); the agent
         * takes each word with an exchange and reads those slots. */
        _Atomic uint64_t announce[MPI_PSTATE_SEG_MAX_SLOTS / 64];
};

/* One MPI function's totals; one cache line. */
struct mpi_pstate_fn_stats {
        char name[MPI_PSTATE_SLOT_NAME_LEN]; /* 0: "MPI_Send", NUL-terminated */
        _Atomic uint64_t calls;              /* 32 */
        _Atomic uint64_t time_ns;            /* 40 */
        _Atomic uint64_t bytes;              /* 48: message bytes, see docs/preload.md */
        _Atomic uint64_t long_calls;         /* 56: blocking calls >= threshold */
};

struct mpi_pstate_slot {
        /* line 0 (0): identity, written once while the rank attaches */
        uint64_t magic;           /* 0: MPI_PSTATE_SLOT_MAGIC */
        uint32_t version;         /* 8 */
        uint32_t slot_size;       /* 12 */
        _Atomic int32_t pid;      /* 16: owner, claimed with a compare-and-swap from 0 */
        int32_t rank;             /* 20: rank in MPI_COMM_WORLD, -1 until MPI_Init returns */
        int32_t size;             /* 24: size of MPI_COMM_WORLD, 0 until then */
        uint32_t local_index;     /* 28: index of this slot in the segment */
        uint32_t nfuncs;          /* 32: valid entries of fn[] */
        uint32_t clock;           /* 36: enum mpi_pstate_clock */
        uint64_t ticks_per_sec;   /* 40: calibrated at MPI_Init */
        uint64_t threshold_ticks; /* 48: MPI_PSTATE_THRESHOLD in ticks */
        uint32_t mode;            /* 56: enum mpi_pstate_slot_mode */
        uint32_t thread_level;    /* 60: MPI_THREAD_SINGLE 0 ... MULTIPLE 3 (as provided) */

        /* line 1 (64): lifecycle */
        _Atomic uint32_t state;   /* 64: enum mpi_pstate_slot_state */
        int32_t cpu;              /* 68: the only CPU the rank may run on, or -1 */
        uint64_t start_ns;        /* 72: CLOCK_REALTIME when the rank attached */
        uint64_t init_ticks;      /* 80: MPI_Init entered */
        uint64_t app_start_ticks; /* 88: MPI_Init returned */
        uint64_t app_end_ticks;   /* 96: MPI_Finalize entered (or abort/exit), 0 before */
        uint64_t threshold_ns;    /* 104 */
        uint32_t abi;             /* 112: 1 Open MPI, 2 MPICH family */
        /* 116: enum mpi_pstate_wait_mode, what the MPI library was configured
         * to do while it waits (from the rank's environment at MPI_Init) */
        uint32_t wait_mode;
        /* 120: long waits whose CPU time was measured (wait_cpu_ns below) */
        _Atomic uint64_t wait_samples;

        /* line 2 (128): the wait state, written by the rank on every blocking call
         * of the thread that initialised MPI */
        _Atomic uint64_t wait_since; /* 128: ticks at entry, 0 when not inside */
        _Atomic uint32_t wait_fn;    /* 136: function id (index into fn[]) */
        /* 140: CPU of the thread at the entry of that wait, -1 unknown.
         * Written by the user: the agent uses it only if it lies in the
         * rank's block and the step's CPUs (docs/agent.md, hybrid ranks). */
        _Atomic int32_t wait_cpu;
        uint8_t pad4[48]; /* 144 */

        /* line 3 (192): owned by the node agent */
        _Atomic uint32_t clocked_down; /* 192: 1 while the agent holds this rank's core low */
        uint32_t pad5;                 /* 196 */
        _Atomic uint64_t down_ns;      /* 200: total time clocked down */
        _Atomic uint64_t transitions;  /* 208: number of lower+raise pairs */
        uint8_t pad6[40];              /* 216 */

        /* line 4 (256): rank totals */
        _Atomic uint64_t long_calls;      /* 256: blocking calls lasting >= threshold */
        _Atomic uint64_t long_ns;         /* 264: time in those calls */
        _Atomic uint64_t over_ns;         /* 272: time beyond the threshold in those calls */
        _Atomic uint64_t wakeups;         /* 280: FUTEX_WAKE calls made by this rank */
        _Atomic uint64_t announced;       /* 288: waits announced as predicted long */
        _Atomic uint64_t announced_short; /* 296: of those, shorter than the threshold */
        /* 304, 312: over the long waits measured (those predicted long and
         * one blocking call in MPI_PSTATE_WAIT_SAMPLE, when they lasted at
         * least the threshold), the waiting thread's CPU time and their wall
         * time, both ns.  Their ratio says whether the library's waits keep
         * the core busy (poll, yield) or free it (sleep). */
        _Atomic uint64_t wait_cpu_ns;
        _Atomic uint64_t wait_sampled_ns;

        uint64_t cpuset[MPI_PSTATE_SLOT_CPUSET_WORDS]; /* 320: affinity at MPI_Init */
        uint8_t pad8[64];                              /* 448 */

        /* 512: log2 histograms; bucket 0 counts value 0, bucket b >= 1 counts
         * [2^(b-1), 2^b), the last bucket everything above */
        _Atomic uint64_t hist_bytes[MPI_PSTATE_SLOT_HIST_BUCKETS]; /* 512: message sizes */
        _Atomic uint64_t hist_ns[MPI_PSTATE_SLOT_HIST_BUCKETS];    /* 1024: call durations */
        uint8_t pad9[512];                                         /* 1536 */

        struct mpi_pstate_fn_stats fn[MPI_PSTATE_SLOT_MAX_FUNCS]; /* 2048 */
        uint8_t reserved[MPI_PSTATE_SLOT_SIZE - 2048 - 64 * MPI_PSTATE_SLOT_MAX_FUNCS];
};

_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "slot atomics must be lock-free to be shared between processes");
_Static_assert(sizeof(struct mpi_pstate_seg_header) == MPI_PSTATE_SEG_HEADER_SIZE, "header");
_Static_assert(offsetof(struct mpi_pstate_seg_header, agent_futex) == 64, "futex line");
_Static_assert(offsetof(struct mpi_pstate_seg_header, wakeups) == 72, "wakeups");
_Static_assert(offsetof(struct mpi_pstate_seg_header, announce) == 2048, "announce map");
_Static_assert(sizeof(struct mpi_pstate_fn_stats) == 64, "fn stats are one cache line");
_Static_assert(offsetof(struct mpi_pstate_fn_stats, calls) == 32, "fn calls");
_Static_assert(offsetof(struct mpi_pstate_fn_stats, long_calls) == 56, "fn long_calls");
_Static_assert(sizeof(struct mpi_pstate_slot) == MPI_PSTATE_SLOT_SIZE, "slot size");
_Static_assert(offsetof(struct mpi_pstate_slot, pid) == 16, "pid");
_Static_assert(offsetof(struct mpi_pstate_slot, ticks_per_sec) == 40, "ticks_per_sec");
_Static_assert(offsetof(struct mpi_pstate_slot, thread_level) == 60, "thread_level");
_Static_assert(offsetof(struct mpi_pstate_slot, state) == 64, "lifecycle line");
_Static_assert(offsetof(struct mpi_pstate_slot, abi) == 112, "abi");
_Static_assert(offsetof(struct mpi_pstate_slot, wait_mode) == 116, "wait_mode");
_Static_assert(offsetof(struct mpi_pstate_slot, wait_samples) == 120, "wait_samples");
_Static_assert(offsetof(struct mpi_pstate_slot, wait_since) == 128, "wait line");
_Static_assert(offsetof(struct mpi_pstate_slot, wait_fn) == 136, "wait_fn");
_Static_assert(offsetof(struct mpi_pstate_slot, wait_cpu) == 140, "wait_cpu");
_Static_assert(offsetof(struct mpi_pstate_slot, clocked_down) == 192, "agent line");
_Static_assert(offsetof(struct mpi_pstate_slot, transitions) == 208, "transitions");
_Static_assert(offsetof(struct mpi_pstate_slot, long_calls) == 256, "totals line");
_Static_assert(offsetof(struct mpi_pstate_slot, wakeups) == 280, "wakeups");
_Static_assert(offsetof(struct mpi_pstate_slot, wait_cpu_ns) == 304, "wait_cpu_ns");
_Static_assert(offsetof(struct mpi_pstate_slot, wait_sampled_ns) == 312, "wait_sampled_ns");
_Static_assert(offsetof(struct mpi_pstate_slot, cpuset) == 320, "cpuset");
_Static_assert(offsetof(struct mpi_pstate_slot, hist_bytes) == 512, "hist_bytes");
_Static_assert(offsetof(struct mpi_pstate_slot, hist_ns) == 1024, "hist_ns");
_Static_assert(offsetof(struct mpi_pstate_slot, fn) == 2048, "fn table");
_Static_assert(MPI_PSTATE_SEG_HEADER_SIZE % 4096 == 0 && MPI_PSTATE_SLOT_SIZE % 4096 == 0,
               "header and slots are page aligned so a rank maps only its own slot");

/* A whole segment mapped by the agent or a reader. */
struct mpi_pstate_segment {
        int fd;
        uint32_t nslots;
        size_t size;
        struct mpi_pstate_seg_header *hdr; /* base of the mapping */
};

/* What a rank maps: the header (for the futex) and its own slot. */
struct mpi_pstate_attach {
        struct mpi_pstate_seg_header *hdr;
        struct mpi_pstate_slot *slot;
        size_t hdr_len, slot_len; /* lengths of the two mappings */
        int anonymous;            /* one mapping of hdr_len + slot_len */
};

/* Creates the segment file for nslots slots: O_CREAT|O_EXCL|O_NOFOLLOW,
 * zero-filled and allocated (posix_fallocate: -ENOSPC on a full /dev/shm,
 * never a SIGBUS later in a rank), header written, mode 0600 and, when uid is not (uid_t)-1,
 * owned by uid:gid so that the job's ranks can write their slots.  The file
 * is removed again on failure.  Returns 0 or a negative errno. */
int mpi_pstate_slot_create_segment(const char *path, uint32_t nslots, uid_t uid, gid_t gid);

/* The same, and *made (when not NULL) is the fstat of the file just before it
 * is closed: the (st_dev, st_ino) the plugin records so that root code later
 * accepts only the file it made, whatever the user renames or links. */
int mpi_pstate_slot_create_segment_stat(const char *path, uint32_t nslots, uid_t uid, gid_t gid,
                                        struct stat *made);

/* Maps a whole segment (writable for the agent, read-only for readers).  The
 * file must be a regular file, not a symlink, owned by `owner` unless owner
 * is (uid_t)-1, exactly header + nslots * slot size long, with a valid
 * header.  Returns 0 or -errno (-EPROTO: not a segment of this version).
 * nslots: how many slots root code knows the segment was made with (the
 * plugin's figure, never the header's: the user can rewrite the header
 * between the plugin's fchown and this call), a header that says otherwise
 * being -EPROTO; 0: the header's count. */
int mpi_pstate_slot_map_segment_n(const char *path, int writable, uid_t owner, uint32_t nslots,
                                  struct mpi_pstate_segment *seg);
void mpi_pstate_slot_unmap_segment(struct mpi_pstate_segment *seg);

/* Slot i of a mapped segment, or NULL when out of range. */
struct mpi_pstate_slot *mpi_pstate_slot_at(const struct mpi_pstate_segment *seg, uint32_t i);

/* Rank side: maps the header and slot `index` of the segment at path and
 * claims the slot for the calling process.  A slot owned by a live other
 * process is refused (-EBUSY); one left by a dead process is taken over and
 * its counters kept (two programs run one after the other by the same task
 * add up).  Returns 0 or -errno. */
int mpi_pstate_slot_attach(const char *path, uint32_t index, struct mpi_pstate_attach *a);

/* Rank side without an agent: a one-slot segment in a new file at path
 * (O_EXCL, mode 0600), or in anonymous shared memory when path is NULL. */
int mpi_pstate_slot_attach_private(const char *path, struct mpi_pstate_attach *a);

/* Unmaps what mpi_pstate_slot_attach* mapped (the slot keeps its data).  The
 * library never calls it (a rank keeps its slot mapped until it exits); the
 * tests and tests/programs/agent/simranks.c, which attach many times, do. */
void mpi_pstate_slot_detach(struct mpi_pstate_attach *a);

/* Fills the identity of a claimed slot and the function names (nfuncs
 * entries of names, each shorter than MPI_PSTATE_SLOT_NAME_LEN; a longer or
 * missing name is stored empty).  Counters already in the slot are kept when
 * the names match (a take-over), zeroed otherwise.  Returns 0 or -EINVAL. */
int mpi_pstate_slot_setup(struct mpi_pstate_slot *s, uint32_t index, const char *const *names,
                          uint32_t nfuncs);

/* Reader side: copies the shared slot into *copy and validates the copy:
 * magic, version, size, nfuncs <= MPI_PSTATE_SLOT_MAX_FUNCS, NUL-terminated
 * names, state and clock in range.  Use only the copy afterwards.  Returns 0,
 * -ENOENT for a free slot (magic 0), or -EPROTO for anything else wrong. */
int mpi_pstate_slot_snapshot(const struct mpi_pstate_slot *shared, struct mpi_pstate_slot *copy);

/* What a validated snapshot says of its rank's whole run, the figures the
 * node Epilog sums for a step it does not detail (docs/records.md, "rest"),
 * reduced as epilog/mpi_pstate/slots.py rank_figures() reduces a slot:
 * wall from MPI_Init's return to the end, MPI time over the functions in
 * use with a valid name (the last entry of a name counts, as a reader
 * keyed by name keeps it), life-cycle calls left out, wait the long_ns
 * counter.  A figure above ten years, or a wall without both ends, is
 * absent (has_* false): the rank wrote garbage, which counts as nothing. */
#define MPI_PSTATE_SLOT_NS_MAX (UINT64_C(10) * 365 * 86400 * 1000000000)
struct mpi_pstate_slot_totals {
        bool has_wall, has_mpi, has_wait;
        uint64_t wall_ns, mpi_ns, wait_ns;
};
void mpi_pstate_slot_totals(const struct mpi_pstate_slot *snap, struct mpi_pstate_slot_totals *t);

/* How the rank's MPI library waits, from its environment: abi is the
 * slot's (1 Open MPI, 2 MPICH family), library what MPI_Get_library_version
 * said (it tells Intel MPI and MVAPICH2 from MPICH, NULL: unknown), envp a
 * NULL-terminated "NAME=value" array (environ; the first NAME counts, as
 * with getenv).  Per library, the variables of docs/preload.md ("Wait
 * mode"): a variable that is unset leaves the library's default, poll; a
 * value the parser does not know (booleans are 1/0, yes/no, on/off,
 * true/false, enable(d)/disable(d), any case) gives unknown rather than a
 * guess of what the library made of it.  Pure: reads only its arguments. */
enum mpi_pstate_wait_mode mpi_pstate_slot_wait_mode(uint32_t abi, const char *library,
                                                    char *const *envp);

/* Chooses the time source: want is "auto", "tsc", "monotonic" or NULL
 * (auto).  auto picks tsc when the kernel's clocksource is the CPU's
 * counter: "tsc" on x86 (the kernel then trusts it to be invariant and
 * synchronised across CPUs), "arch_sys_counter" on aarch64; else monotonic.
 * "tsc" is refused (-EINVAL) where there is no counter.  Returns 0 or
 * -EINVAL for an unknown word. */
int mpi_pstate_slot_clock_choose(const char *want, enum mpi_pstate_clock *clock);

/* Ticks per second of clock: 1e9 for monotonic; for tsc on x86, measured
 * against CLOCK_MONOTONIC_RAW between two samples taken at least min_ns
 * apart (the caller may do useful work in between: pass the first sample
 * in).  On aarch64 the architecture states the rate (cntfrq_el0, which the
 * kernel's own timer uses too): it is returned as is, without waiting; a
 * zero there (firmware that did not set it) falls back to measuring. */
struct mpi_pstate_clock_sample {
        uint64_t ticks, ns;
};
void mpi_pstate_slot_clock_sample(enum mpi_pstate_clock clock, struct mpi_pstate_clock_sample *s);
uint64_t mpi_pstate_slot_clock_rate(enum mpi_pstate_clock clock,
                                    const struct mpi_pstate_clock_sample *first, uint64_t min_ns);

/* Agent side of the wait protocol.  lower: marks the slot clocked down if
 * the rank is still in the wait that started at `since`; returns 1 when
 * the agent may lower the core, 0 when the rank has left (flag cleared).
 * still_waiting: after the frequency write, 1 if that same wait goes on.
 * raise: after the frequency is back up, clears the flag and adds the
 * clocked-down time to the slot. */
int mpi_pstate_slot_agent_lower(struct mpi_pstate_slot *s, uint64_t since);
int mpi_pstate_slot_agent_still_waiting(struct mpi_pstate_slot *s, uint64_t since);
void mpi_pstate_slot_agent_raise(struct mpi_pstate_slot *s, uint64_t down_ns);

/* Rank side: FUTEX_WAKE on the header's word after bumping it. */
void mpi_pstate_slot_wake_agent(struct mpi_pstate_seg_header *hdr, struct mpi_pstate_slot *s);
/* Rank side: slot s entered a wait it predicts long (after
 * mpi_pstate_slot_wait_begin*): its announce bit (s->local_index), agent_futex bumped, and
 * FUTEX_WAKE unless the agent wakes anyway before the wait's deadline
 * (agent_wake_ns, 0: it is awake and sees the bit; threshold_ns: the
 * rank's threshold).  False, nothing done: the agent asked for no
 * announcements (announce_off). */
bool mpi_pstate_slot_announce(struct mpi_pstate_seg_header *hdr, struct mpi_pstate_slot *s,
                              uint64_t threshold_ns);

/* ---- hot path, inline: no system call, no lock, no allocation ---- */

#if defined(MPI_PSTATE_HAVE_COUNTER)
/* Like rdtsc, the aarch64 read is not ordered against the instructions
 * around it (no isb): a few cycles of skew are nothing against the
 * microsecond thresholds, and an isb would cost more than the read. */
static inline uint64_t mpi_pstate_slot_counter(void)
{
#if defined(__aarch64__)
        uint64_t v;

        __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
        return v;
#else
        return __rdtsc();
#endif
}
#endif

static inline uint64_t mpi_pstate_slot_now(enum mpi_pstate_clock clock)
{
#if defined(MPI_PSTATE_HAVE_COUNTER)
        if (__builtin_expect(clock == MPI_PSTATE_CLOCK_TSC, 1))
                return mpi_pstate_slot_counter();
#endif
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
        return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* log2 bucket of a value, see hist_* above. */
static inline unsigned mpi_pstate_slot_bucket(uint64_t v)
{
        unsigned b = v ? 64u - (unsigned)__builtin_clzll(v) : 0u;
        return b < MPI_PSTATE_SLOT_HIST_BUCKETS ? b : MPI_PSTATE_SLOT_HIST_BUCKETS - 1;
}

/* cpu: where the waiting thread runs (preload/arch.h), -1 unknown.  Both
 * stores precede the release of wait_since: an agent that sees this wait
 * sees its function and CPU (or a later wait's). */
static inline void mpi_pstate_slot_wait_begin_cpu(struct mpi_pstate_slot *s, uint32_t fn,
                                                  uint64_t t0, int32_t cpu)
{
        atomic_store_explicit(&s->wait_fn, fn, memory_order_relaxed);
        atomic_store_explicit(&s->wait_cpu, cpu, memory_order_relaxed);
        atomic_store_explicit(&s->wait_since, t0, memory_order_release);
}

static inline void mpi_pstate_slot_wait_begin(struct mpi_pstate_slot *s, uint32_t fn, uint64_t t0)
{
        mpi_pstate_slot_wait_begin_cpu(s, fn, t0, -1);
}

/* Returns 1 when the agent had clocked the core down (the caller then
 * wakes it with mpi_pstate_slot_wake_agent). */
static inline int mpi_pstate_slot_wait_end(struct mpi_pstate_slot *s, uint64_t t0, uint64_t t1,
                                           uint64_t threshold_ticks)
{
        atomic_store_explicit(&s->wait_since, 0, memory_order_release);
        if (__builtin_expect(t1 - t0 < threshold_ticks, 1))
                return 0;
        /* Pairs with the agent's fence between setting clocked_down and
         * re-reading wait_since: one of the two sides sees the other. */
        atomic_thread_fence(memory_order_seq_cst);
        return atomic_load_explicit(&s->clocked_down, memory_order_relaxed) != 0;
}

/* Wait prediction, rank-private: per call site (the caller's
 * return address hashed into MPI_PSTATE_PRED_SITES entries) a counter of
 * how its waits ended.  A long wait sets it to 3, a short one takes 1 off:
 * long is predicted from the first long wait at a site until two short
 * ones in a row.  A prediction only decides whether the wait is announced
 * (one system call); what is lowered is decided by the threshold alone. */
#define MPI_PSTATE_PRED_SITES 256u
struct mpi_pstate_pred {
        uint8_t ctr[MPI_PSTATE_PRED_SITES];
        unsigned site;  /* of the wait in progress */
        bool announced; /* the wait in progress was announced */
};

static inline unsigned mpi_pstate_pred_site(uintptr_t pc)
{
        return (unsigned)(((uint64_t)pc * UINT64_C(0x9E3779B97F4A7C15)) >> 56) %
               MPI_PSTATE_PRED_SITES;
}

/* After mpi_pstate_slot_wait_begin*(); hdr NULL: nobody to announce to.
 * Returns whether the site predicts this wait long. */
static inline bool mpi_pstate_pred_begin(struct mpi_pstate_pred *p, unsigned site,
                                         struct mpi_pstate_seg_header *hdr,
                                         struct mpi_pstate_slot *s, uint64_t threshold_ns)
{
        bool is_long = p->ctr[site] >= 2;

        p->site = site;
        p->announced = false;
        if (__builtin_expect(hdr && is_long, 0))
                p->announced = mpi_pstate_slot_announce(hdr, s, threshold_ns);
        return is_long;
}

static inline void mpi_pstate_pred_end(struct mpi_pstate_pred *p, struct mpi_pstate_slot *s,
                                       bool was_long)
{
        uint8_t c = p->ctr[p->site];

        p->ctr[p->site] = was_long ? 3u : (uint8_t)(c ? c - 1u : 0u);
        if (__builtin_expect(p->announced && !was_long, 0))
                atomic_store_explicit(
                    &s->announced_short,
                    atomic_load_explicit(&s->announced_short, memory_order_relaxed) + 1,
                    memory_order_relaxed);
}

#endif
