/* SPDX-License-Identifier: BSD-3-Clause */
/* The backend's run-time state and the hot path every generated wrapper
 * inlines.  The hot path (mp_now, mp_wait_begin/_end, mp_record) makes no
 * system call, takes no lock, allocates nothing and touches no file: two
 * clock reads, a thread-local depth counter and a few stores into the rank's
 * slot, which is shared memory mapped at MPI_Init; a blocking call of the
 * main thread also reads its CPU (arch.h) into the slot and predicts, per
 * call site, whether the wait will be long.  A wrapper makes a system call
 * only around a wait: a FUTEX_WAKE announcing one predicted long (when the
 * agent would not wake before its deadline anyway), one after a long wait
 * the agent clocked down (see common/slot.h), and two reads of the thread's
 * CPU time around a wait predicted long or sampled (one blocking call in
 * MPI_PSTATE_WAIT_SAMPLE): how busy the library keeps the core while it
 * waits.
 *
 * Counters: a rank whose MPI gave MPI_THREAD_MULTIPLE updates them with
 * atomic adds (no count is lost when threads call MPI at once); otherwise
 * only one thread is inside MPI at a time, so a relaxed load and store is
 * enough and the lock prefix is saved.  The wait state (wait_since/wait_fn)
 * is published by the thread that initialised MPI only: another thread
 * blocking in MPI says nothing about whether the rank's core is idle. */
#ifndef MPI_PSTATE_PRELOAD_HOOKS_H
#define MPI_PSTATE_PRELOAD_HOOKS_H
#include <stdatomic.h>
#include <stdint.h>

#include "arch.h"
#include "backend.h"
#include "slot.h"

#define MP_HIDDEN __attribute__((visibility("hidden")))

struct mpi_pstate_rt {
        int active;   /* wrappers record: after a good MPI_Init, before MPI_Finalize */
        int mt;       /* MPI_THREAD_MULTIPLE was provided: atomic counters */
        int saw_init; /* MPI_Init reached us (or the one check of a call without it ran) */
        enum mpi_pstate_clock clock;
        uint64_t mult;            /* ns = ticks * mult >> 32 */
        uint64_t threshold_ticks; /* long-wait threshold */
        uint64_t threshold_ns;
        int cpu_src; /* enum mp_cpu_source (arch.h), chosen at MPI_Init */
        struct mpi_pstate_slot *slot;
        struct mpi_pstate_seg_header *hdr;
        /* the agent's segment in mode on, NULL otherwise: where a wait
         * predicted long is announced (common/slot.h, "Reaction") */
        struct mpi_pstate_seg_header *announce_to;
        struct mpi_pstate_pred pred;
        void *const *next; /* the front's table of next definitions */
        /* CPU time of waits (slot.wait_cpu_ns), main thread only: blocking
         * calls left before the next sampled one, whether the call in
         * progress is measured, and its thread CPU time at entry */
        uint32_t sample_left;
        uint32_t sampling;
        uint64_t sample_cpu_ns;
};

struct mpi_pstate_tls {
        uint32_t depth; /* wrappers active on this thread: only the outermost records */
        uint32_t main;  /* this thread initialised MPI */
};

extern MP_HIDDEN struct mpi_pstate_rt mpi_pstate_rt;
/* initial-exec: one %fs-relative access instead of a __tls_get_addr call;
 * the 8 bytes come from glibc's surplus static TLS at dlopen time. */
extern MP_HIDDEN __thread struct mpi_pstate_tls mpi_pstate_tls
    __attribute__((tls_model("initial-exec")));

MP_HIDDEN uint64_t mpi_pstate_hook_init_begin(void);
MP_HIDDEN void mpi_pstate_hook_init_end(unsigned fid, uint64_t t0);
MP_HIDDEN uint64_t mpi_pstate_hook_finalize_begin(void);
MP_HIDDEN void mpi_pstate_hook_finalize_end(unsigned fid, uint64_t t0);
MP_HIDDEN void mpi_pstate_hook_abort(unsigned fid);
MP_HIDDEN void mpi_pstate_hook_no_init(void);
MP_HIDDEN void mpi_pstate_hook_sample_begin(void);
MP_HIDDEN void mpi_pstate_hook_sample_end(uint64_t ticks);

/* On the pass-through path only: a call reached us but MPI_Init never did. */
static inline void mp_check_init(void)
{
        if (__builtin_expect(!mpi_pstate_rt.saw_init, 0))
                mpi_pstate_hook_no_init();
}
MP_HIDDEN int mpi_pstate_hook_attach(void *const *next, const char *mpi_lib);

#ifdef OPEN_MPI
#define MPI_PSTATE_BACKEND_ABI MPI_PSTATE_ABI_OMPI
#define MPI_PSTATE_BACKEND_ABI_NAME "ompi"
#else
#define MPI_PSTATE_BACKEND_ABI MPI_PSTATE_ABI_MPICH
#define MPI_PSTATE_BACKEND_ABI_NAME "mpich"
#endif

/* The next definition of front symbol `sym` (a PMPI tool's MPI_X or the
 * MPI's PMPI_X), read at the call: loaded once at the top of a wrapper it
 * would occupy a callee-saved register across the clock reads (a push and
 * a pop more per call).  Written by the front before it routes the symbol
 * here, never changed after. */
static inline void *mp_next(unsigned sym)
{
        return __atomic_load_n(&mpi_pstate_rt.next[sym], __ATOMIC_RELAXED);
}

static inline uint64_t mp_now(void)
{
        return mpi_pstate_slot_now(mpi_pstate_rt.clock);
}

static inline uint64_t mp_ticks_to_ns(uint64_t ticks)
{
        return (uint64_t)(((unsigned __int128)ticks * mpi_pstate_rt.mult) >> 32);
}

/* Relaxed load and store: compiles to a plain add on memory, no lock prefix. */
static inline void mp_inc(_Atomic uint64_t *p, uint64_t v)
{
        atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + v,
                              memory_order_relaxed);
}

static inline void mp_inc_mt(_Atomic uint64_t *p, uint64_t v)
{
        atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

/* Inlined into the wrapper, always: the return address is then the
 * application's call site, the unit of wait prediction.  Left to its
 * heuristics, GCC 12 made this an out-of-line function called from 67
 * wrappers, where the return address is a place in the wrapper: every
 * call of one function was one site.  A wait predicted long, and one
 * blocking call in MPI_PSTATE_WAIT_SAMPLE, also reads the thread's CPU time
 * (a system call, out of line): a call at a short site pays a decrement. */
__attribute__((always_inline)) static inline void mp_wait_begin(unsigned fid, uint64_t t0)
{
        unsigned site = mpi_pstate_pred_site((uintptr_t)__builtin_return_address(0));

        mpi_pstate_slot_wait_begin_cpu(mpi_pstate_rt.slot, fid, t0,
                                       mp_arch_cpu(mpi_pstate_rt.cpu_src));
        bool is_long = mpi_pstate_pred_begin(&mpi_pstate_rt.pred, site, mpi_pstate_rt.announce_to,
                                             mpi_pstate_rt.slot, mpi_pstate_rt.threshold_ns);

        if (__builtin_expect(is_long || --mpi_pstate_rt.sample_left == 0, 0))
                mpi_pstate_hook_sample_begin();
}

static inline void mp_wait_end(uint64_t t0, uint64_t t1)
{
        mpi_pstate_pred_end(&mpi_pstate_rt.pred, mpi_pstate_rt.slot,
                            t1 - t0 >= mpi_pstate_rt.threshold_ticks);
        if (__builtin_expect(mpi_pstate_rt.sampling, 0))
                mpi_pstate_hook_sample_end(t1 - t0);
        if (__builtin_expect(
                mpi_pstate_slot_wait_end(mpi_pstate_rt.slot, t0, t1, mpi_pstate_rt.threshold_ticks),
                0))
                mpi_pstate_slot_wake_agent(mpi_pstate_rt.hdr, mpi_pstate_rt.slot);
}

/* One finished call of function fid that took `ticks`.  The body is
 * expanded twice so that the multi-threaded choice is one branch per call. */
#define MP_RECORD_BODY(ADD)                                                                        \
        do {                                                                                       \
                ADD(&f->calls, 1);                                                                 \
                ADD(&f->time_ns, ns);                                                              \
                ADD(&s->hist_ns[mpi_pstate_slot_bucket(ns)], 1);                                   \
                if (has_bytes) {                                                                   \
                        ADD(&f->bytes, bytes);                                                     \
                        ADD(&s->hist_bytes[mpi_pstate_slot_bucket(bytes)], 1);                     \
                }                                                                                  \
                if (blocking && __builtin_expect(ticks >= mpi_pstate_rt.threshold_ticks, 0)) {     \
                        uint64_t thr = mpi_pstate_rt.threshold_ns;                                 \
                        ADD(&f->long_calls, 1);                                                    \
                        ADD(&s->long_calls, 1);                                                    \
                        ADD(&s->long_ns, ns);                                                      \
                        ADD(&s->over_ns, ns > thr ? ns - thr : 0);                                 \
                }                                                                                  \
        } while (0)

static inline void mp_record(unsigned fid, uint64_t ticks, int has_bytes, uint64_t bytes,
                             int blocking)
{
        struct mpi_pstate_slot *s = mpi_pstate_rt.slot;
        struct mpi_pstate_fn_stats *f = &s->fn[fid];
        uint64_t ns = mp_ticks_to_ns(ticks);

        if (__builtin_expect(mpi_pstate_rt.mt, 0))
                MP_RECORD_BODY(mp_inc_mt);
        else
                MP_RECORD_BODY(mp_inc);
}

/* The wrappers are leaves around one PMPI call with no local arrays: the
 * stack canary hardening adds cost there and protects nothing. */
#if defined(__has_attribute)
#if __has_attribute(no_stack_protector)
#define MP_WRAPPER __attribute__((no_stack_protector))
#endif
#endif
#ifndef MP_WRAPPER
#define MP_WRAPPER
#endif

#endif
