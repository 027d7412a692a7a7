/* SPDX-License-Identifier: BSD-3-Clause */
/* The per-architecture pieces of the preload hot path, each behind one
 * small inline function with a portable fallback, so that a port touches
 * this file only.
 *
 * mp_arch_cpu(src): the CPU the calling thread runs on, read without a
 * system call, or -1.  Recorded on entry to a blocking call (wait_cpu in
 * common/slot.h) so that the agent can lower only the waiting thread's core
 * of a hybrid rank (docs/agent.md).  The source is chosen once, at MPI_Init,
 * by mp_arch_cpu_choose():
 *   - MP_CPU_RSEQ   every architecture: the cpu_id the kernel keeps in the
 *                   thread's rseq area, registered by glibc >= 2.35 (a plain
 *                   load, about 1 ns; sched_getcpu() reads the same field);
 *   - MP_CPU_RDPID  x86 without glibc rseq (RHEL 8's glibc 2.28, or the
 *                   glibc.pthread.rseq=0 tunable): RDPID reads IA32_TSC_AUX,
 *                   where Linux keeps (node << 12) | cpu; 2 ns here.  RDTSCP
 *                   reads it too but costs 20 ns on the project VM against
 *                   10 for RDTSC, a third of the budget;
 *   - MP_CPU_NONE   anything else (arm64 with an older glibc: there is no
 *                   user-readable CPU number register, and sched_getcpu()
 *                   would be a system call): -1, the agent then lowers the
 *                   rank's whole block, as before.
 * The value is a hint written into user memory: the agent bounds-checks it
 * against the rank's allowed CPUs and the step's. */
#ifndef MPI_PSTATE_PRELOAD_ARCH_H
#define MPI_PSTATE_PRELOAD_ARCH_H
#include <sched.h>
#include <stdint.h>

#if defined(__has_include)
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#if defined(RSEQ_SIG)
#define MP_HAVE_RSEQ 1
#endif
#endif
#endif
#if (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define MP_HAVE_RDPID 1
#endif

enum mp_cpu_source {
        MP_CPU_NONE = 0,
        MP_CPU_RSEQ = 1,
        MP_CPU_RDPID = 2,
};

#ifdef MP_HAVE_RSEQ
static inline int32_t mp_arch_cpu_rseq(void)
{
        const struct rseq *r =
            (const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);

        return (int32_t)__atomic_load_n(&r->cpu_id, __ATOMIC_RELAXED);
}
#endif

#ifdef MP_HAVE_RDPID
static inline int32_t mp_arch_cpu_rdpid(void)
{
        unsigned long v;

        __asm__ volatile("rdpid %0" : "=r"(v));
        return (int32_t)(v & 0xfffu);
}
#endif

static inline int32_t mp_arch_cpu(int src)
{
#ifdef MP_HAVE_RSEQ
        if (__builtin_expect(src == MP_CPU_RSEQ, 1))
                return mp_arch_cpu_rseq();
#endif
#ifdef MP_HAVE_RDPID
        if (src == MP_CPU_RDPID)
                return mp_arch_cpu_rdpid();
#endif
        (void)src;
        return -1;
}

/* Once, outside the hot path: a source is taken only if it agrees with
 * sched_getcpu() (which may make a system call here) on this thread. */
static inline int mp_arch_cpu_choose(void)
{
        int tries;

#ifdef MP_HAVE_RSEQ
        if (__rseq_size >= 8) {
                for (tries = 0; tries < 3; tries++)
                        if (mp_arch_cpu_rseq() == sched_getcpu())
                                return MP_CPU_RSEQ;
        }
#endif
#ifdef MP_HAVE_RDPID
        {
                unsigned a, b, c, d;

                if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 22))) {
                        for (tries = 0; tries < 3; tries++)
                                if (mp_arch_cpu_rdpid() == sched_getcpu())
                                        return MP_CPU_RDPID;
                }
        }
#endif
        (void)tries;
        return MP_CPU_NONE;
}

#endif
