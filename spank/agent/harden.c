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
#define ALLOW(nr)                                                                                  \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1),                                           \
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

int mpi_pstate_agentd_seccomp(void)
{
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_SELF, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            /* the loop: the futex, clocks, slots' pidfds, frequency writes */
            ALLOW(__NR_futex),
            ALLOW(__NR_clock_gettime),
            ALLOW(__NR_clock_nanosleep),
            ALLOW(__NR_nanosleep),
            ALLOW(__NR_gettimeofday),
            ALLOW(__NR_pwrite64),
            ALLOW(__NR_pread64),
            ALLOW(__NR_write),
            ALLOW(__NR_read),
            ALLOW(__NR_lseek),
            ALLOW(__NR_pidfd_open),
            ALLOW(__NR_epoll_ctl),
            ALLOW(__NR_epoll_pwait),
            ALLOW(__NR_kill),
            ALLOW(__NR_tgkill),
            ALLOW(__NR_getpid),
            ALLOW(__NR_gettid),
            ALLOW(__NR_geteuid),
            ALLOW(__NR_getuid),
            ALLOW(__NR_getrusage),
            ALLOW(__NR_sched_yield),
            ALLOW(__NR_restart_syscall),
            ALLOW(__NR_rt_sigreturn),
            ALLOW(__NR_rt_sigprocmask),
            ALLOW(__NR_rt_sigaction),
            ALLOW(__NR_eventfd2),
            /* files: restore records, the record (atomic write), the log, RAPL */
            ALLOW(__NR_openat),
            ALLOW(__NR_close),
            ALLOW(__NR_newfstatat),
            ALLOW(__NR_fstat),
            ALLOW(__NR_statx),
            ALLOW(__NR_fcntl),
            ALLOW(__NR_fsync),
            ALLOW(__NR_fdatasync),
            ALLOW(__NR_fchmod),
            ALLOW(__NR_ftruncate),
            ALLOW(__NR_unlinkat),
            ALLOW(__NR_renameat),
            ALLOW(__NR_renameat2),
            ALLOW(__NR_readlinkat),
            ALLOW(__NR_getdents64),
            ALLOW(__NR_mkdirat),
            ALLOW(__NR_getrandom),
            /* memory, threads, exit */
            ALLOW(__NR_mmap),
            ALLOW(__NR_munmap),
            ALLOW(__NR_mprotect),
            ALLOW(__NR_madvise),
            ALLOW(__NR_brk),
            ALLOW(__NR_exit),
            ALLOW(__NR_exit_group),
            /* syslog(3), when the log is syslog */
            ALLOW(__NR_socket),
            ALLOW(__NR_connect),
            ALLOW(__NR_sendto),
            ALLOW(__NR_sendmsg),
#ifdef __NR_epoll_wait
            ALLOW(__NR_epoll_wait),
#endif
#ifdef __NR_unlink
            ALLOW(__NR_unlink),
            ALLOW(__NR_rename),
            ALLOW(__NR_readlink),
            ALLOW(__NR_open),
            ALLOW(__NR_stat),
            ALLOW(__NR_lstat),
#endif
#ifdef __NR_clock_gettime64
            ALLOW(__NR_clock_gettime64),
#endif
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        };
        struct sock_fprog prog = {.len = (unsigned short)(sizeof(f) / sizeof(f[0])), .filter = f};

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
