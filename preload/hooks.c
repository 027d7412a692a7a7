/* SPDX-License-Identifier: BSD-3-Clause */
/* Life cycle of the ABI backend: configuration and slot at MPI_Init,
 * profile and slot state at MPI_Finalize / MPI_Abort / exit.  Compiled once
 * per MPI family (it asks MPI for rank, size and thread level).  Nothing
 * here runs per call; the per-call path is hooks.h.
 *
 * The library never harms the job over its own problem: a bad variable, a
 * missing or broken segment, an unwritable profile directory each give one
 * message (rank 0 for configuration errors, every affected rank otherwise)
 * and leave the MPI calls working, passed through or recorded in a private
 * slot. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "hooks.h"
#include "mpi_pstate_fn.h"
#include "profile.h"
#include "say.h"

MP_HIDDEN struct mpi_pstate_rt mpi_pstate_rt;
MP_HIDDEN __thread struct mpi_pstate_tls mpi_pstate_tls __attribute__((tls_model("initial-exec")));

#define MP_NAME(id, name, kind, blocking, app) name,
static const char *const fn_names[] = {MPI_PSTATE_FUNCTIONS(MP_NAME)};
/* Init, Finalize and Abort frame the application: not "time in MPI". */
#define MP_APP(id, name, kind, blocking, app) app,
static const unsigned char app_time[] = {MPI_PSTATE_FUNCTIONS(MP_APP)};

static struct {
        int configured; /* init_begin ran */
        int disabled;   /* configuration error: pass through after one message */
        int finished;   /* profile written (finalize, abort or exit) */
        struct mpi_pstate_pconf conf;
        struct mpi_pstate_attach att;
        char slot_file[PATH_MAX + 128]; /* private slot file in the profile directory, or "" */
        char note[640];                 /* a problem met before the rank was known */
        char mpi_lib[256];
        char library[256];
        struct mpi_pstate_clock_sample cal;
        unsigned index; /* slot index in the segment (0 in a private one) */
        int rank;
} st = {.rank = -1};

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        mp_vsay(fmt, ap);
        va_end(ap);
}

int mpi_pstate_hook_attach(void *const *next, const char *mpi_lib)
{
        mpi_pstate_rt.next = next;
        snprintf(st.mpi_lib, sizeof(st.mpi_lib), "%s", mpi_lib ? mpi_lib : "?");
        return 0;
}

static void record_affinity(struct mpi_pstate_slot *s)
{
        cpu_set_t set;
        int count = 0, last = -1;

        if (sched_getaffinity(0, sizeof(set), &set) != 0)
                return;
        for (int c = 0; c < CPU_SETSIZE && c < 64 * (int)MPI_PSTATE_SLOT_CPUSET_WORDS; c++) {
                if (!CPU_ISSET(c, &set))
                        continue;
                s->cpuset[c / 64] |= UINT64_C(1) << (c % 64);
                count++;
                last = c;
        }
        s->cpu = count == 1 ? last : -1;
}

/* The rank's slot: the agent's segment when there is one, else a private
 * one (a file under the profile directory so that it survives a SIGKILL,
 * or anonymous memory). */
static int attach_slot(void)
{
        struct mpi_pstate_pconf *c = &st.conf;
        char host[64] = "";
        int rc;

        if (c->shm[0]) {
                unsigned idx = c->local_rank >= 0 ? (unsigned)c->local_rank : 0;

                rc = mpi_pstate_slot_attach(c->shm, idx, &st.att);
                if (rc == 0) {
                        st.index = idx;
                        return 0;
                }
                snprintf(
                    st.note, sizeof(st.note),
                    "mpi-pstate: cannot use slot %u of %.256s (%s%s): this rank is not seen by "
                    "the node agent and runs at full speed",
                    idx, c->shm, strerror(-rc),
                    c->local_rank_var ? "" : ", no local rank variable set");
        }
        if (c->profile_dir[0] && mpi_pstate_profile_mkdirs(c->profile_dir) == 0) {
                gethostname(host, sizeof(host) - 1);
                for (char *p = host; *p; p++)
                        if (*p == '/')
                                *p = '_';
                snprintf(st.slot_file, sizeof(st.slot_file), "%s/.slot.%s.%d", c->profile_dir, host,
                         (int)getpid());
                if (mpi_pstate_slot_attach_private(st.slot_file, &st.att) == 0)
                        return 0;
                st.slot_file[0] = '\0';
        }
        return mpi_pstate_slot_attach_private(NULL, &st.att);
}

uint64_t mpi_pstate_hook_init_begin(void)
{
        struct mpi_pstate_slot *s;
        int rc;

        if (st.configured)
                return mpi_pstate_rt.slot ? mp_now() : 0;
        st.configured = 1;
        mpi_pstate_rt.saw_init = 1;
        if (mpi_pstate_env_load(&st.conf) != 0) {
                st.disabled = 1;
                return 0;
        }
        if (st.conf.opt.mode == MPI_PSTATE_MODE_OFF)
                return 0;
        mpi_pstate_rt.clock = st.conf.clock;
        mpi_pstate_rt.cpu_src = mp_arch_cpu_choose();
        /* calibration runs across MPI_Init, which takes milliseconds anyway */
        mpi_pstate_slot_clock_sample(st.conf.clock, &st.cal);
        rc = attach_slot();
        if (rc) {
                snprintf(st.note, sizeof(st.note), "mpi-pstate: no shared memory for the slot (%s)",
                         strerror(-rc));
                return 0;
        }
        s = st.att.slot;
        mpi_pstate_slot_setup(s, st.index, fn_names, MPI_PSTATE_NFUNCS);
        s->mode = st.conf.opt.mode == MPI_PSTATE_MODE_PROFILE ? MPI_PSTATE_SLOT_MODE_PROFILE
                                                              : MPI_PSTATE_SLOT_MODE_ON;
        s->abi = MPI_PSTATE_BACKEND_ABI;
        s->clock = st.conf.clock;
        record_affinity(s);
        mpi_pstate_rt.hdr = st.att.hdr;
        mpi_pstate_rt.slot = s;
        mpi_pstate_rt.announce_to = st.att.hdr && s->mode == MPI_PSTATE_SLOT_MODE_ON &&
                                            !(st.att.hdr->flags & MPI_PSTATE_SEG_PRIVATE)
                                        ? st.att.hdr
                                        : NULL;
        s->init_ticks = mp_now();
        return s->init_ticks;
}

static void rename_slot_file(int rank)
{
        char dst[sizeof(st.slot_file)];

        if (!st.slot_file[0])
                return;
        if (snprintf(dst, sizeof(dst), "%s/rank-%d.slot", st.conf.profile_dir, rank) >=
            (int)sizeof(dst))
                return;
        if (rename(st.slot_file, dst) == 0)
                memcpy(st.slot_file, dst, strlen(dst) + 1);
}

/* The rank's place and the clock's rate, into the run-time state the
 * wrappers read and into the slot the agent and the Epilog read. */
static void fill_slot(struct mpi_pstate_slot *s, int rank, int size, int provided, uint64_t tps)
{
        mpi_pstate_rt.mult = (uint64_t)(((unsigned __int128)1000000000u << 32) / tps);
        mpi_pstate_rt.threshold_ns = st.conf.opt.threshold_us * 1000u;
        mpi_pstate_rt.threshold_ticks =
            (uint64_t)((unsigned __int128)st.conf.opt.threshold_us * tps / 1000000u);
        mpi_pstate_rt.mt = provided == MPI_THREAD_MULTIPLE;
        s->rank = rank;
        s->size = size;
        s->thread_level = provided >= 0 && provided <= 3 ? (uint32_t)provided : 0;
        s->ticks_per_sec = tps;
        s->threshold_ticks = mpi_pstate_rt.threshold_ticks;
        s->threshold_ns = mpi_pstate_rt.threshold_ns;
}

void mpi_pstate_hook_init_end(unsigned fid, uint64_t t0)
{
        struct mpi_pstate_slot *s = mpi_pstate_rt.slot;
        int flag = 0, rank = -1, size = 0, provided = MPI_THREAD_SINGLE, len = 0;
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        uint64_t t1 = s ? mp_now() : 0, tps;
        enum mpi_pstate_wait_mode wait_mode;

        if (PMPI_Initialized(&flag) != MPI_SUCCESS || !flag)
                return; /* MPI_Init failed: the MPI reports it */
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        PMPI_Comm_size(MPI_COMM_WORLD, &size);
        PMPI_Query_thread(&provided);
        st.rank = rank;
        if (PMPI_Get_library_version(ver, &len) != MPI_SUCCESS)
                ver[0] = '\0';
        ver[sizeof(ver) - 1] = '\0';
        /* whole: MPICH names its device on a later line */
        wait_mode = mpi_pstate_slot_wait_mode(MPI_PSTATE_BACKEND_ABI, ver[0] ? ver : NULL, environ);
        if (ver[0]) {
                ver[strcspn(ver, "\r\n")] = '\0';
                snprintf(st.library, sizeof(st.library), "%.255s", ver);
        }
        if (st.disabled) {
                if (rank == 0)
                        say("%s; passing every MPI call through", st.conf.err);
                return;
        }
        if (st.note[0])
                say("%s", st.note);
        if (!s)
                return;
        tps = mpi_pstate_slot_clock_rate(mpi_pstate_rt.clock, &st.cal, 2000000);
        fill_slot(s, rank, size, provided, tps);
        s->app_start_ticks = t1;
        s->wait_mode = wait_mode;
        mpi_pstate_rt.sample_left = MPI_PSTATE_WAIT_SAMPLE;
        rename_slot_file(rank);
        mpi_pstate_tls.main = 1;
        atomic_store(&s->state, MPI_PSTATE_SLOT_RUNNING);
        mp_record(fid, t1 - t0, 0, 0, 0);
        __atomic_store_n(&mpi_pstate_rt.active, 1, __ATOMIC_RELEASE);
        if (st.conf.verbose)
                say("mpi-pstate: rank %d/%d: %s backend, %s slot %u, clock %s %.3f GHz, threshold "
                    "%lluus, mode %s, MPI waits %s",
                    rank, size, MPI_PSTATE_BACKEND_ABI_NAME,
                    st.conf.shm[0] && !st.note[0] ? st.conf.shm : "private", s->local_index,
                    s->clock == MPI_PSTATE_CLOCK_TSC ? "tsc" : "monotonic", (double)tps / 1e9,
                    (unsigned long long)st.conf.opt.threshold_us,
                    mpi_pstate_options_mode_word(st.conf.opt.mode),
                    mpi_pstate_profile_wait_word(s->wait_mode));
}

/* Ends the recording: state, wait flag, profile.  Called once. */
static void finish(enum mpi_pstate_slot_state state, const char *word, uint64_t end)
{
        struct mpi_pstate_slot *s = mpi_pstate_rt.slot;
        struct mpi_pstate_profile_meta m = {.abi = MPI_PSTATE_BACKEND_ABI_NAME,
                                            .mpi_library = st.library,
                                            .state = word,
                                            .app_time = app_time};
        int rc;

        if (st.finished || !s)
                return;
        st.finished = 1;
        if (!s->app_end_ticks)
                s->app_end_ticks = end;
        atomic_store(&s->wait_since, 0);
        atomic_store(&s->state, state);
        if (!st.conf.profile_dir[0])
                return;
        rc = mpi_pstate_profile_write(st.conf.profile_dir, s, &m);
        if (rc) {
                say("mpi-pstate: rank %d: cannot write the profile into %s: %s", st.rank,
                    st.conf.profile_dir, strerror(-rc));
                return;
        }
        /* the JSON now holds everything the slot file had */
        if (st.slot_file[0] && state == MPI_PSTATE_SLOT_FINALIZED && unlink(st.slot_file) == 0)
                st.slot_file[0] = '\0';
        if (st.conf.verbose)
                say("mpi-pstate: rank %d: profile written to %s", st.rank, st.conf.profile_dir);
}

uint64_t mpi_pstate_hook_finalize_begin(void)
{
        uint64_t t0;

        if (!mpi_pstate_rt.active)
                return 0;
        t0 = mp_now();
        /* Nothing MPI does inside MPI_Finalize is the application's. */
        __atomic_store_n(&mpi_pstate_rt.active, 0, __ATOMIC_RELEASE);
        mpi_pstate_rt.slot->app_end_ticks = t0;
        return t0;
}

void mpi_pstate_hook_finalize_end(unsigned fid, uint64_t t0)
{
        uint64_t t1;

        if (!t0 || !mpi_pstate_rt.slot)
                return;
        t1 = mp_now();
        mp_record(fid, t1 - t0, 0, 0, 0);
        finish(MPI_PSTATE_SLOT_FINALIZED, "finalized", t1);
}

void mpi_pstate_hook_abort(unsigned fid)
{
        uint64_t t;

        if (!mpi_pstate_rt.active)
                return;
        __atomic_store_n(&mpi_pstate_rt.active, 0, __ATOMIC_RELEASE);
        t = mp_now();
        mp_record(fid, 0, 0, 0, 0);
        finish(MPI_PSTATE_SLOT_ABORTED, "aborted", t);
}

/* A wrapper passed a call through and MPI_Init has not reached us.  If MPI
 * is initialised all the same, something ahead of this library in the
 * search order (a PMPI tool earlier in LD_PRELOAD or linked into the
 * program) defines MPI_Init and called PMPI_Init: nothing of this run is
 * measured, and nothing else would tell the user why no profile appears.
 * Checked once, at the first such call: a program using MPI-4 sessions
 * never calls MPI_Init, and must not pay a PMPI_Initialized per call. */
void mpi_pstate_hook_no_init(void)
{
        void *init = dlsym(RTLD_DEFAULT, "MPI_Init");
        int flag = 0;
        Dl_info di;

        mpi_pstate_rt.saw_init = 1;
        if (st.configured || PMPI_Initialized(&flag) != MPI_SUCCESS || !flag)
                return;
        PMPI_Comm_rank(MPI_COMM_WORLD, &st.rank);
        if (st.rank == 0)
                say("mpi-pstate: MPI_Init did not reach libmpi-pstate.so (%s defines it ahead of "
                    "it and calls PMPI_Init): this run is not measured; put libmpi-pstate.so "
                    "first in LD_PRELOAD",
                    init && dladdr(init, &di) && di.dli_fname ? di.dli_fname : "a PMPI tool");
}

/* The waiting thread's CPU time, ns; false when the clock fails (it does
 * not on Linux: the sample is then dropped). */
static bool thread_cpu_ns(uint64_t *ns)
{
        struct timespec ts;

        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
                return false;
        *ns = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
        return true;
}

void mpi_pstate_hook_sample_begin(void)
{
        mpi_pstate_rt.sample_left = MPI_PSTATE_WAIT_SAMPLE;
        mpi_pstate_rt.sampling = thread_cpu_ns(&mpi_pstate_rt.sample_cpu_ns);
}

/* Only a wait that lasted the threshold counts: those are the waits the
 * agent clocks down, and a short call's CPU share (the library's own work,
 * or a spin that an idle wait would turn into a sleep later) says nothing
 * of them.  Only the thread that initialised MPI writes these counters. */
void mpi_pstate_hook_sample_end(uint64_t ticks)
{
        struct mpi_pstate_slot *s = mpi_pstate_rt.slot;
        uint64_t cpu;

        mpi_pstate_rt.sampling = 0;
        if (ticks < mpi_pstate_rt.threshold_ticks || !thread_cpu_ns(&cpu))
                return;
        cpu = cpu > mpi_pstate_rt.sample_cpu_ns ? cpu - mpi_pstate_rt.sample_cpu_ns : 0;
        mp_inc(&s->wait_cpu_ns, cpu);
        mp_inc(&s->wait_sampled_ns, mp_ticks_to_ns(ticks));
        mp_inc(&s->wait_samples, 1);
}

/* A program that returns from main (or calls exit) without MPI_Finalize. */
__attribute__((destructor)) static void at_exit(void)
{
        if (!mpi_pstate_rt.active)
                return;
        __atomic_store_n(&mpi_pstate_rt.active, 0, __ATOMIC_RELEASE);
        finish(MPI_PSTATE_SLOT_EXITED, "exited", mp_now());
}
