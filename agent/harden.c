/* What the agent keeps of root once its setup is done: its uid 0 (the sysfs
 * files, restore records and its record are root's: plain owner access, no
 * capability) and nothing else.
 *
 *   - every capability dropped from the effective, permitted, inheritable,
 *     ambient and bounding sets of each thread (capabilities are per thread:
 *     the pidfd watcher drops its own when it starts);
 *   - PR_SET_NO_NEW_PRIVS: no execve() can give any back;
 *   - a seccomp allow-list (raw BPF, no libseccomp) of the system calls the
 *     loop, the restore and the record need (strace of a run under load,
 *     a hostile rank and SIGTERM; docs/security.md).  Anything else fails
 *     with EPERM instead of killing the agent: a process killed there would
 *     leave a core clocked down, an error return only loses that one call.
 *
 * Setup (the segment owned by the user: CAP_DAC_OVERRIDE; SCHED_FIFO:
 * CAP_SYS_NICE; the restore records) happens before.  A failure here is
 * logged and the agent carries on: hardening never costs a measurement. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentd.h"

#if defined(__x86_64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_AARCH64
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define AUDIT_ARCH_SELF AUDIT_ARCH_PPC64LE
#endif

int mpi_pstate_agentd_drop_caps(void)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
        int rc = 0;

        /* The bounding set first: dropping it needs CAP_SETPCAP, which the
         * capset below removes.  EINVAL: past the kernel's last capability. */
        for (int c = 0; c < 64; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL && !rc)
                        rc = -errno;
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        memset(d, 0, sizeof(d));
        if (syscall(SYS_capset, &h, d) != 0 && !rc)
                rc = -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 && !rc)
                rc = -errno;
        return rc;
}

#ifdef AUDIT_ARCH_SELF
/* Every system call the agent makes once it is running; anything else fails
 * with EPERM.  One table for every architecture: the #ifdefs add the calls
 * that exist only on some of them. */
static const unsigned allowed[] = {
    /* the loop: the futex, clocks, slots' pidfds, frequency writes */
    __NR_futex,
    __NR_clock_gettime,
    __NR_clock_nanosleep,
    __NR_nanosleep,
    __NR_gettimeofday,
    __NR_pwrite64,
    __NR_pread64,
    __NR_write,
    __NR_read,
    __NR_lseek,
    __NR_pidfd_open,
    __NR_epoll_ctl,
    __NR_epoll_pwait,
    __NR_kill,
    __NR_tgkill,
    __NR_getpid,
    __NR_gettid,
    __NR_geteuid,
    __NR_getuid,
    __NR_getrusage,
    __NR_sched_yield,
    __NR_restart_syscall,
    __NR_rt_sigreturn,
    __NR_rt_sigprocmask,
    __NR_rt_sigaction,
    __NR_eventfd2,
    /* files: restore records, the record (atomic write), the log, RAPL */
    __NR_openat,
    __NR_close,
    __NR_newfstatat,
    __NR_fstat,
    __NR_statx,
    __NR_fcntl,
    __NR_fsync,
    __NR_fdatasync,
    __NR_fchmod,
    __NR_ftruncate,
    __NR_unlinkat,
    __NR_renameat,
    __NR_renameat2,
    __NR_readlinkat,
    __NR_getdents64,
    __NR_mkdirat,
    __NR_getrandom,
    /* memory, threads, exit */
    __NR_mmap,
    __NR_munmap,
    __NR_mprotect,
    __NR_madvise,
    __NR_brk,
    __NR_exit,
    __NR_exit_group,
    /* syslog(3), when the log is syslog */
    __NR_socket,
    __NR_connect,
    __NR_sendto,
    __NR_sendmsg,
#ifdef __NR_epoll_wait
    __NR_epoll_wait,
#endif
#ifdef __NR_unlink
    __NR_unlink,
    __NR_rename,
    __NR_readlink,
    __NR_open,
    __NR_stat,
    __NR_lstat,
#endif
#ifdef __NR_clock_gettime64
    __NR_clock_gettime64,
#endif
};

int mpi_pstate_agentd_seccomp(void)
{
        enum { HEAD = 4, NALLOWED = sizeof(allowed) / sizeof(allowed[0]) };
        struct sock_filter f[HEAD + 2 * NALLOWED + 1] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_SELF, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        };
        struct sock_fprog prog = {.len = (unsigned short)(sizeof(f) / sizeof(f[0])), .filter = f};
        unsigned k = HEAD;

        for (size_t i = 0; i < NALLOWED; i++) {
                f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, allowed[i], 0, 1);
                f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        }
        f[k] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
        /* TSYNC: the watcher thread gets the same filter. */
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
                return -errno;
        return 0;
}
#else
int mpi_pstate_agentd_seccomp(void)
{
        return -ENOSYS; /* no allow-list for this architecture yet */
}
#endif
