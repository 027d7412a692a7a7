/* SPDX-License-Identifier: BSD-3-Clause */
/* What a root-started agent keeps once its setup is done: the descriptors
 * root opened for it (its domains' sysfs files, the energy counters, the
 * segment, its record files and log), and nothing else.  In this order, on
 * the one thread there is (mpi_pstate_agentd_harden):
 *
 *   - the bounding and ambient capability sets emptied (CAP_SETPCAP is
 *     still there), then, for an agent started as root, RLIMIT_FSIZE (soft
 *     and hard) set to the largest file it may write, no supplementary
 *     group, and real, effective, saved and file-system uid and gid set to
 *     an id that is not 0 and owns no file (agentd_identity); the kernel
 *     checks sysfs permissions at open, so the kept descriptors work on.
 *     Then every remaining capability dropped, not dumpable (another
 *     agent of the same uid cannot ptrace it or read its memory), and
 *     PR_SET_NO_NEW_PRIVS.  Capabilities are per thread: dropped before
 *     the pidfd watcher exists, it inherits the empty sets;
 *   - Landlock: no write, creation, removal, rename, truncation, execution,
 *     device ioctl or TCP anywhere but beneath the fence the caller names;
 *     with a uid drop the fence names no write at all and reads are fenced
 *     too, to /proc (its ranks' status).  Where the kernel has no Landlock
 *     (or an older ABI: no truncation right before ABI 3) the uid is the
 *     fence: nothing of root's can be read, truncated or created;
 *   - the caller's threads are created here, so that they inherit both;
 *   - a seccomp allow-list (raw BPF, no libseccomp) of the system calls the
 *     loop, the restore and the record need (strace of a run under load,
 *     a hostile rank and SIGTERM; docs/security.md), with kill() and
 *     tgkill() bound to the agent itself (liveness is pidfds, or /proc:
 *     never a signal to a process it does not own), no socket() or
 *     connect() (syslog connects at open), no fchmod() or directory
 *     removal.  Anything else fails with EPERM instead of killing the
 *     agent: a process killed there would leave a core clocked down, an
 *     error return only loses that one call.
 *
 * Setup (the segment, SCHED_FIFO, affinity, the restore records, opening
 * every file) happens before, as root.  A failed uid drop stops the agent
 * (it never reads the job's memory as root); any other failure here is
 * logged and recorded and the agent carries on: hardening never costs a
 * measurement. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
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

int mpi_pstate_agentd_landlock_abi_max = INT_MAX;

/* Becomes who, for good: a failure of any step, or a way back to uid 0
 * afterwards, is an error. */
static int become(const struct agentd_identity *who)
{
        const struct rlimit fsize = {(rlim_t)who->file_max_bytes, (rlim_t)who->file_max_bytes};
        uid_t r, e, s;
        gid_t rg, eg, sg;

        if (who->uid == 0 || who->gid == 0 || who->uid == (uid_t)-1 || who->gid == (gid_t)-1)
                return -EINVAL;
        if (setrlimit(RLIMIT_FSIZE, &fsize) != 0 || setgroups(0, NULL) != 0 ||
            setresgid(who->gid, who->gid, who->gid) != 0 ||
            setresuid(who->uid, who->uid, who->uid) != 0)
                return -errno;
        if (getresuid(&r, &e, &s) != 0 || getresgid(&rg, &eg, &sg) != 0)
                return -errno;
        if (r != who->uid || e != who->uid || s != who->uid || rg != who->gid || eg != who->gid ||
            sg != who->gid || (uid_t)setfsuid((uid_t)-1) != who->uid ||
            (gid_t)setfsgid((gid_t)-1) != who->gid || getgroups(0, NULL) != 0)
                return -EPERM;
        if (setuid(0) == 0 || setgid(0) == 0)
                return -EPERM;
        return 0;
}

int mpi_pstate_agentd_drop_caps(const struct agentd_identity *who, int *uid_rc)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
        int rc = 0;

        /* The bounding set first: dropping it needs CAP_SETPCAP, which the
         * uid change and the capset below remove.  EINVAL: past the
         * kernel's last capability. */
        for (int c = 0; c < 64; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL && !rc)
                        rc = -errno;
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        *uid_rc = who ? become(who) : 0;
        memset(d, 0, sizeof(d));
        if (syscall(SYS_capset, &h, d) != 0 && !rc)
                rc = -errno;
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 && !rc)
                rc = -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 && !rc)
                rc = -errno;
        return rc;
}

/* ---- Landlock: the ABI's numbers (stable), not <linux/landlock.h>, whose
 * version on the build host may predate the rights used here. ---- */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444 /* one number on every architecture */
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif
#define LL_VERSION_FLAG (1u << 0) /* LANDLOCK_CREATE_RULESET_VERSION */
#define LL_RULE_PATH_BENEATH 1
enum {
        LL_EXECUTE = 1 << 0,
        LL_WRITE_FILE = 1 << 1,
        LL_READ_FILE = 1 << 2,
        LL_READ_DIR = 1 << 3,
        LL_REMOVE_DIR = 1 << 4,
        LL_REMOVE_FILE = 1 << 5,
        LL_MAKE_CHAR = 1 << 6,
        LL_MAKE_DIR = 1 << 7,
        LL_MAKE_REG = 1 << 8,
        LL_MAKE_SOCK = 1 << 9,
        LL_MAKE_FIFO = 1 << 10,
        LL_MAKE_BLOCK = 1 << 11,
        LL_MAKE_SYM = 1 << 12,
        LL_REFER = 1 << 13,         /* ABI 2 */
        LL_TRUNCATE = 1 << 14,      /* ABI 3 */
        LL_IOCTL_DEV = 1 << 15,     /* ABI 5 */
        LL_NET_TCP = 3,             /* ABI 4: bind and connect */
        LL_SCOPE_ABSTRACT_UNIX = 1, /* ABI 6 */
};
struct ll_ruleset_attr {
        uint64_t handled_access_fs, handled_access_net, scoped;
};
struct ll_path_beneath {
        uint64_t allowed_access;
        int32_t parent_fd;
} __attribute__((packed));

/* Everything that changes the file system, by ABI version: what is not
 * handled cannot be denied. */
static uint64_t ll_fs_handled(long abi, bool reads)
{
        uint64_t h = LL_EXECUTE | LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_CHAR |
                     LL_MAKE_DIR | LL_MAKE_REG | LL_MAKE_SOCK | LL_MAKE_FIFO | LL_MAKE_BLOCK |
                     LL_MAKE_SYM;

        if (abi >= 2)
                h |= LL_REFER;
        if (abi >= 3)
                h |= LL_TRUNCATE;
        if (abi >= 5)
                h |= LL_IOCTL_DEV;
        if (reads)
                h |= LL_READ_FILE | LL_READ_DIR;
        return h;
}

static uint64_t ll_rights(unsigned what)
{
        uint64_t r = 0;

        if (what & AGENTD_FENCE_WRITE)
                r |= LL_WRITE_FILE | LL_TRUNCATE;
        if (what & AGENTD_FENCE_REMOVE)
                r |= LL_REMOVE_FILE;
        if (what & AGENTD_FENCE_FILES)
                r |= LL_WRITE_FILE | LL_TRUNCATE | LL_MAKE_REG | LL_REMOVE_FILE;
        if (what & AGENTD_FENCE_READ)
                r |= LL_READ_FILE | LL_READ_DIR;
        return r;
}

/* One fence entry as a rule of ruleset rs; on failure out->landlock says
 * which path. */
static int ll_add_path(int rs, const struct agentd_fence *f, uint64_t handled,
                       struct agentd_hardening *out)
{
        struct ll_path_beneath pb = {.allowed_access = ll_rights(f->what) & handled,
                                     .parent_fd = open(f->path, O_PATH | O_CLOEXEC)};
        struct stat st;
        int rc = 0;

        /* Nothing there yet: nothing to write there, and nothing can be
         * created there either. */
        if (pb.parent_fd < 0 && errno == ENOENT)
                return 0;
        if (pb.parent_fd < 0 || fstat(pb.parent_fd, &st) != 0) {
                rc = -errno;
        } else {
                /* A file takes only the rights on its content. */
                if (!S_ISDIR(st.st_mode))
                        pb.allowed_access &= LL_WRITE_FILE | LL_TRUNCATE | LL_READ_FILE;
                if (syscall(__NR_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &pb, 0) != 0)
                        rc = -errno;
        }
        if (pb.parent_fd >= 0)
                close(pb.parent_fd);
        if (rc)
                snprintf(out->landlock, sizeof(out->landlock), "%s: %s", f->path, strerror(-rc));
        return rc;
}

static int landlock(const struct agentd_fence *fence, size_t n, struct agentd_hardening *out)
{
        struct ll_ruleset_attr attr = {0};
        long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_VERSION_FLAG);
        bool reads = false;
        int rs = -1, rc = 0;

        if (abi > mpi_pstate_agentd_landlock_abi_max) {
                abi = mpi_pstate_agentd_landlock_abi_max;
                if (abi <= 0) {
                        errno = ENOSYS;
                        abi = -1;
                }
        }
        if (abi < 0) {
                /* ENOSYS: not built in; EOPNOTSUPP: not enabled at boot (lsm=) */
                snprintf(out->landlock, sizeof(out->landlock), "%s",
                         errno == EOPNOTSUPP ? "disabled" : "absent");
                return -errno;
        }
        out->landlock_abi = (int)abi;
        for (size_t i = 0; i < n; i++)
                reads |= (fence[i].what & AGENTD_FENCE_READ) != 0;
        attr.handled_access_fs = ll_fs_handled(abi, reads);
        if (abi >= 4)
                attr.handled_access_net = LL_NET_TCP;
        if (abi >= 6)
                attr.scoped = LL_SCOPE_ABSTRACT_UNIX;
        rs = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);
        if (rs < 0) {
                rc = -errno;
                snprintf(out->landlock, sizeof(out->landlock), "ruleset: %s", strerror(-rc));
                goto out;
        }
        for (size_t i = 0; i < n && !rc; i++)
                rc = ll_add_path(rs, &fence[i], attr.handled_access_fs, out);
        if (rc)
                goto out;
        /* no_new_privs is set: restrict_self needs no capability. */
        if (syscall(__NR_landlock_restrict_self, rs, 0) != 0) {
                rc = -errno;
                snprintf(out->landlock, sizeof(out->landlock), "restrict: %s", strerror(-rc));
                goto out;
        }
        snprintf(out->landlock, sizeof(out->landlock), "on");
out:
        if (rs >= 0)
                close(rs);
        return rc;
}

#ifdef AUDIT_ARCH_SELF
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the argument checks below read the low word of an argument at its offset"
#endif
/* Every system call the agent makes once it is running; anything else fails
 * with EPERM.  One table for every architecture: the #ifdefs add the calls
 * that exist only on some of them.  kill and tgkill are not here: they are
 * checked against the agent's pid (seccomp() below). */
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
    /* files: restore records, the record (atomic write), the log, RAPL;
     * where each may be written is Landlock's to say */
    __NR_openat,
    __NR_close,
    __NR_newfstatat,
    __NR_fstat,
    __NR_statx,
    __NR_fcntl,
    __NR_fsync,
    __NR_fdatasync,
    __NR_ftruncate,
    __NR_renameat,
    __NR_renameat2,
    __NR_readlinkat,
    __NR_getdents64,
    __NR_getrandom,
    /* memory, threads, exit; a thread started just before the filter
     * (the watcher) may register its robust list and rseq area under it */
    __NR_set_robust_list,
#ifdef __NR_rseq
    __NR_rseq,
#endif
    __NR_mmap,
    __NR_munmap,
    __NR_mprotect,
    __NR_madvise,
    __NR_brk,
    __NR_exit,
    __NR_exit_group,
    /* syslog(3), when the log is syslog: on the socket openlog() connected */
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

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define JEQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))

int mpi_pstate_agentd_seccomp(void)
{
        enum { NALLOWED = sizeof(allowed) / sizeof(allowed[0]) };
        const unsigned self = (unsigned)getpid();
        /* After the allow-list, with nr loaded: kill(self, any),
         * tgkill(self, ...), unlinkat(..., 0) (files, never a directory).
         * The pid is the low word: the kernel's pid_t. */
        const struct sock_filter args[] = {
            /* 0 */ JEQ(__NR_kill, 1, 0),
            /* 1 */ JEQ(__NR_tgkill, 0, 2),
            /* 2 */ LD(ARG_LO(0)),
            /* 3 */ JEQ(self, 3, 4),
            /* 4 */ JEQ(__NR_unlinkat, 0, 3),
            /* 5 */ LD(ARG_LO(2)),
            /* 6 */ JEQ(0, 0, 1),
            /* 7 */ RET(SECCOMP_RET_ALLOW),
            /* 8 */ RET(SECCOMP_RET_ERRNO | EPERM),
        };
        enum { HEAD = 4, NARGS = sizeof(args) / sizeof(args[0]) };
        struct sock_filter f[HEAD + 2 * NALLOWED + NARGS] = {
            LD(offsetof(struct seccomp_data, arch)),
            JEQ(AUDIT_ARCH_SELF, 1, 0),
            RET(SECCOMP_RET_ERRNO | EPERM),
            LD(offsetof(struct seccomp_data, nr)),
        };
        struct sock_fprog prog = {.len = (unsigned short)(sizeof(f) / sizeof(f[0])), .filter = f};
        unsigned k = HEAD;

        for (size_t i = 0; i < NALLOWED; i++) {
                f[k++] = (struct sock_filter)JEQ(allowed[i], 0, 1);
                f[k++] = (struct sock_filter)RET(SECCOMP_RET_ALLOW);
        }
        memcpy(f + k, args, sizeof(args));
        /* TSYNC: every thread gets the same filter. */
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

int mpi_pstate_agentd_harden(const struct agentd_fence *fence, size_t n,
                             const struct agentd_identity *who, int (*spawn)(void *), void *arg,
                             struct agentd_hardening *out)
{
        int rc;

        memset(out, 0, sizeof(*out));
        out->caps_rc = mpi_pstate_agentd_drop_caps(who, &out->uid_rc);
        out->uid = geteuid();
        out->gid = getegid();
        out->file_max = who && !out->uid_rc ? who->file_max_bytes : 0;
        if (out->uid_rc)
                return out->uid_rc;
        /* landlock() names its state in out->landlock; its errno is there too */
        out->landlock_rc = landlock(fence, n, out);
        rc = spawn ? spawn(arg) : 0;
        if (rc)
                return rc;
        out->seccomp_rc = mpi_pstate_agentd_seccomp();
        return 0;
}
