/* The plugin's step work (see step.h): Slurm items in, the Slurm-free
 * modules of spank/ and common/ do the rest.  One slurmstepd serves one step
 * on one node; its forked tasks inherit `w` (the topology and the step's
 * paths), so the per-task hooks need no I/O beyond what they change. */
#include "step.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "agentctl.h"
#include "cgroup.h"
#include "container.h"
#include "contract.h"
#include "cpufreq.h"
#include "launch.h"
#include "log.h"
#include "paths.h"
#include "pinning.h"
#include "policy.h"
#include "restore.h"
#include "safeio.h"
#include "slot.h"
#include "spank_paths.h" /* generated: MPI_PSTATE_DEFAULT_PRELOAD, _AGENT */
#include "steprec.h"
#include "steptime.h"

/* The agent restores every domain and writes its record on SIGTERM. */
#define AGENT_STOP_MS 5000
#define STEP_RECORD "plugin.json"

static struct {
        bool paths_ok;
        struct mpi_pstate_paths paths;
        char host[64];
        bool launcher; /* the step's task is an MPI launcher's daemon */
        bool place;    /* mpi-pstate pins the tasks (pinning.h: _ours) */
        bool pin_ok;
        struct mpi_pstate_pinning pin;
        cpu_set_t cpus;
        char cpulist[512];
        /* What the step's cgroup allowed (cgroup_confine()): the record's "cgroup". */
        bool cg_ok;
        char cg_cpus[512], cg_outside[512], cg_shared[512];
        unsigned cg_jobs;
        char cg_first[64];
        bool policy_ok; /* cpufreq found; policy holds the domains */
        struct mpi_pstate_policy_result policy;
        struct mpi_pstate_policy_req policy_req; /* of the save, for the set */
        /* The save's discovery of the step's policies: the set reads only
         * their settings again (each sysfs read counts on a busy node). */
        struct mpi_pstate_cpufreq_node *cpufreq;
        bool slurm_set; /* Slurm set the step's frequencies: its setting wins */
        bool shm_ok;
        struct stat shm_made; /* the segment as the plugin made it (its fd's fstat) */
        uint32_t shm_nslots;
        const char *preload; /* NULL: not injected */
        enum mpi_pstate_container container;
        bool unmeasured_container;      /* library absent in the task's root */
        char unmeasured[96];            /* else why the ranks are not measured, "" */
        struct mpi_pstate_root_id root; /* slurmstepd's "/", to see a task moved */
        const char *agent_state;
        pid_t agent;
        int agent_fd; /* pidfd of the agent, or < 0 (kernel without pidfds) */
        unsigned tasks_exited;
        /* In a forked task: the set privileged pinning applied. */
        bool task_pinned;
        cpu_set_t task_set;
        struct mpi_pstate_steptime time; /* logged at debug level, read by bench/step/ */
} w = {.agent_state = "none", .agent_fd = -1};

static const char *preload_path(const struct mpi_pstate_config *cfg)
{
        return cfg->preload[0] ? cfg->preload : MPI_PSTATE_DEFAULT_PRELOAD;
}

static const char *agent_path(const struct mpi_pstate_config *cfg)
{
        return cfg->agent[0] ? cfg->agent : MPI_PSTATE_DEFAULT_AGENT;
}

static int node_paths(const struct mpi_pstate_step *st, struct mpi_pstate_paths *p, char *host,
                      size_t hostlen)
{
        int rc = mpi_pstate_paths_host(host, hostlen);

        if (rc == 0)
                rc = mpi_pstate_paths_step(st->cfg->runtime_dir, host, st->job_id, st->step_id, p);
        if (rc)
                mp_error("job %u: runtime_dir %s: cannot expand for host: %s", st->job_id,
                         st->cfg->runtime_dir, strerror(-rc));
        return rc;
}

/* Root-owned 0700 directories, created component by component without
 * following symlinks (common/safeio.h). */
static int make_dir(const char *path)
{
        int fd = mpi_pstate_safeio_open_dir(path, 1, 0700);

        if (fd < 0)
                return fd;
        close(fd);
        return 0;
}

static int make_dirs(void)
{
        int rc = make_dir(w.paths.restore);

        if (rc == 0)
                rc = make_dir(w.paths.steps);
        if (rc == 0)
                rc = make_dir(w.paths.step);
        return rc;
}

static const char *item_str(spank_t sp, spank_item_t item)
{
        char *s = NULL;

        return spank_get_item(sp, item, &s) == ESPANK_SUCCESS ? s : NULL;
}

static bool launcher_step(spank_t sp)
{
        char **argv = NULL;
        int argc = 0;

        return spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS && argc > 0 && argv &&
               mpi_pstate_launch_is_daemon(argv[0]);
}

/* srun exports SLURM_CPU_BIND_TYPE into the step only when the user asked
 * for a binding (--cpu-bind, none included, or SLURM_CPU_BIND); the task
 * plugin sets it per task later, after this hook has looked. */
static bool place_tasks(const struct mpi_pstate_step *st)
{
        char v[64];
        spank_err_t rc = spank_getenv(st->sp, "SLURM_CPU_BIND_TYPE", v, sizeof(v));

        /* Too long to read is still somebody's explicit choice. */
        return mpi_pstate_pinning_ours(st->opt->mode,
                                       rc == ESPANK_SUCCESS   ? v
                                       : rc == ESPANK_NOSPACE ? "?"
                                                              : NULL,
                                       w.launcher);
}

static void prepare_pinning(const struct mpi_pstate_step *st)
{
        const char *cores = item_str(st->sp, w.launcher ? S_JOB_ALLOC_CORES : S_STEP_ALLOC_CORES);
        uint32_t cpt = 1;
        hwloc_topology_t topo;
        char err[256] = "";
        int rc;

        (void)spank_get_item(st->sp, S_STEP_CPUS_PER_TASK, &cpt);
        rc = mpi_pstate_pinning_load(&topo);
        mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_TOPOLOGY);
        if (rc == 0)
                rc = mpi_pstate_pinning_init(&w.pin, topo, cores, st->local_tasks, cpt,
                                             st->opt->bind, false, w.launcher, err, sizeof(err));
        if (rc == 0)
                rc = mpi_pstate_pinning_cpus(&w.pin, &w.cpus);
        if (rc) {
                mp_error("job %u step %u: allocated cores: %s; no pinning, no frequency change",
                         st->job_id, st->step_id, err[0] ? err : strerror(-rc));
                if (w.pin.topo)
                        mpi_pstate_pinning_fini(&w.pin);
                /* Without the step's CPUs no core may be touched: slurmstepd's
                 * own affinity can be the whole node. */
                CPU_ZERO(&w.cpus);
                mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_CORES);
                return;
        }
        w.pin_ok = true;
        mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_CORES);
}

int mpi_pstate_step_policy_save(const struct mpi_pstate_step *st)
{
        struct mpi_pstate_policy_req req = {0};
        enum mpi_pstate_cpufreq_mech mech = MPI_PSTATE_CPUFREQ_MECH_AUTO;
        char err[256] = "";
        int rc;

        mpi_pstate_steptime_begin(&w.time);
        w.launcher = launcher_step(st->sp);
        w.place = place_tasks(st);
        if (!w.place)
                mp_verbose("job %u step %u: tasks keep their placement (%s)", st->job_id,
                           st->step_id,
                           st->opt->mode != MPI_PSTATE_MODE_ON ? "mode profile" : "--cpu-bind");
        prepare_pinning(st);
        if (mpi_pstate_steprec_cpulist(&w.cpus, w.cpulist, sizeof(w.cpulist)) < 0)
                w.cpulist[0] = '\0';
        rc = node_paths(st, &w.paths, w.host, sizeof(w.host));
        if (rc == 0)
                rc = make_dirs();
        mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_DIRS);
        if (rc) {
                mp_error("job %u step %u: %s: %s; no frequency change, no agent", st->job_id,
                         st->step_id, w.paths.runtime[0] ? w.paths.runtime : st->cfg->runtime_dir,
                         strerror(-rc));
                return rc;
        }
        w.paths_ok = true;
        if (CPU_COUNT(&w.cpus) == 0)
                return 0; /* logged by prepare_pinning(): measured only */
        (void)mpi_pstate_cpufreq_mech_parse(st->cfg->mechanism, &mech);
        req.sysroot = st->cfg->sysroot;
        req.restore_dir = w.paths.restore;
        req.owner = (struct mpi_pstate_restore_owner){st->job_id, st->step_id};
        req.cpus = &w.cpus;
        req.change = st->opt->mode == MPI_PSTATE_MODE_ON;
        req.governor = st->opt->governor == MPI_PSTATE_GOVERNOR_KEEP
                           ? NULL
                           : mpi_pstate_options_governor_word(st->opt->governor);
        req.floor_khz = (uint32_t)st->cfg->freq_min_khz;
        req.ceiling_khz = (uint32_t)st->cfg->freq_max_khz;
        req.mechanism = mech;
        /* Only saved here: Slurm reads the cores' settings for its own reset
         * after this hook (--cpu-freq, CpuFreqDef), and must find them as
         * they were before the step.  mpi_pstate_step_start() sets. */
        req.save_only = true;
        req.node = &w.cpufreq;
        rc = mpi_pstate_policy_apply(&req, &w.policy, err, sizeof(err));
        mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_POLICY);
        if (rc == -ENODEV) {
                mp_verbose("job %u step %u: no cpufreq driver on this node: nothing to set",
                           st->job_id, st->step_id);
                return 0;
        }
        if (rc) {
                mp_error("job %u step %u: cpufreq: %s", st->job_id, st->step_id,
                         err[0] ? err : strerror(-rc));
                return rc;
        }
        w.policy_ok = true;
        w.policy_req = req;
        mp_verbose("job %u step %u: cpus %s%s: %u domain(s): %u saved, %u shared with other "
                   "CPUs (left alone), %u held by another step, %u failed%s%s",
                   st->job_id, st->step_id, w.cpulist, w.launcher ? " (launcher daemon)" : "",
                   w.policy.ndomains, w.policy.set, w.policy.shared, w.policy.busy, w.policy.failed,
                   err[0] ? ": " : "", err);
        return w.policy.failed ? -EIO : 0;
}

static void write_step_record(const struct mpi_pstate_step *st, bool ended,
                              const struct mpi_pstate_restore_summary *sum)
{
        const char *mech =
            w.policy_ok && w.policy.set ? mpi_pstate_cpufreq_mech_name(w.policy.mech) : NULL;
        const struct mpi_pstate_steprec_cgroup cg = {w.cg_cpus, w.cg_outside, w.cg_shared,
                                                     w.cg_jobs, w.cg_first};
        struct mpi_pstate_steprec r = {
            .job = st->job_id,
            .step = st->step_id,
            .node = w.host,
            .mode = mpi_pstate_options_mode_word(st->opt->mode),
            .cpus = w.cpulist,
            .governor = mpi_pstate_options_governor_word(st->opt->governor),
            .mechanism = mech,
            .launcher = w.launcher,
            .preload = w.preload,
            .container = mpi_pstate_container_name(w.container),
            .cgroup = w.cg_ok ? &cg : NULL,
            .unmeasured = w.unmeasured_container ? "container"
                          : w.unmeasured[0]      ? w.unmeasured
                                                 : NULL,
            .shm = w.shm_ok ? w.paths.shm : NULL,
            .shm_dev = (uint64_t)w.shm_made.st_dev,
            .shm_ino = (uint64_t)w.shm_made.st_ino,
            .shm_nslots = w.shm_nslots,
            .shm_uid = (uint32_t)w.shm_made.st_uid,
            .agent = w.agent_state,
            .agent_pid = w.agent > 0 ? (int)w.agent : 0,
            .policy = w.policy_ok ? &w.policy : NULL,
            .ended = ended,
            .restored = sum ? sum->restored : 0,
            .foreign = sum ? sum->foreign : 0,
            .failed = sum ? sum->failed : 0,
        };
        char buf[8192];
        int n = mpi_pstate_steprec_format(&r, buf, sizeof(buf)), fd, rc;

        if (n < 0) {
                r.policy = NULL; /* thousands of domains: keep the rest */
                n = mpi_pstate_steprec_format(&r, buf, sizeof(buf));
        }
        fd = n < 0 ? n : mpi_pstate_safeio_open_dir(w.paths.step, 0, 0);
        rc = fd < 0 ? fd
                    : mpi_pstate_safeio_write_atomic(fd, STEP_RECORD, buf, (size_t)n, 0600,
                                                     MPI_PSTATE_SAFEIO_NOSYNC);
        if (fd >= 0)
                close(fd);
        if (rc)
                mp_error("job %u step %u: %s/%s: %s", st->job_id, st->step_id, w.paths.step,
                         STEP_RECORD, strerror(-rc));
}

/* Tries before giving up on a segment name: an EEXIST means a 2^-64
 * collision, not a squatter (who cannot guess the suffix). */
#define SEGMENT_TRIES 4

/* One slot per local task, and at least one per CPU of the step: a
 * launcher's daemon is one task that forks as many ranks as it likes.  The
 * name ends in 64 random bits (paths.h), so another user can neither squat
 * it nor pre-block it; root code finds it through the step record, never by
 * listing /dev/shm. */
static int make_segment(const struct mpi_pstate_step *st)
{
        uint32_t n = st->local_tasks;
        int rc = -EEXIST;

        if ((uint32_t)CPU_COUNT(&w.cpus) > n)
                n = (uint32_t)CPU_COUNT(&w.cpus);
        if (n > MPI_PSTATE_SEG_MAX_SLOTS)
                n = MPI_PSTATE_SEG_MAX_SLOTS;
        if (n == 0)
                n = 1;
        for (int i = 0; i < SEGMENT_TRIES && rc == -EEXIST; i++) {
                uint64_t rnd;

                if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                        rc = -errno;
                        break;
                }
                rc = mpi_pstate_paths_shm_unique(&w.paths, rnd);
                if (rc == 0)
                        rc = mpi_pstate_slot_create_segment_stat(w.paths.shm, n, st->uid, st->gid,
                                                                 &w.shm_made);
        }
        if (rc) {
                /* ENOSPC: /dev/shm is full (the segment is allocated whole) */
                snprintf(w.unmeasured, sizeof(w.unmeasured), "segment: %s", strerror(-rc));
                mp_error("job %u step %u: segment %s: %s; ranks run unmeasured", st->job_id,
                         st->step_id, w.paths.shm, strerror(-rc));
                return rc;
        }
        w.shm_nslots = n;
        w.shm_ok = true;
        return 0;
}

static void start_agent(const struct mpi_pstate_step *st)
{
        struct mpi_pstate_agent_args a = {
            .path = agent_path(st->cfg),
            .shm = w.paths.shm,
            .nslots = w.shm_nslots,
            .cpus = w.cpulist,
            .mechanism = w.policy_ok && w.policy.set ? mpi_pstate_cpufreq_mech_name(w.policy.mech)
                                                     : st->cfg->mechanism,
            .restore_dir = w.paths.restore,
            .record = w.paths.record,
            .log = w.paths.log,
            .sysroot = st->cfg->sysroot,
            .job = st->job_id,
            .step = st->step_id,
            .uid = st->uid,
            .gid = st->gid,
            .opt = *st->opt,
            .freq_min_khz = st->cfg->freq_min_khz,
            .budget_ppm = st->cfg->agent_budget_ppm,
            .no_governor_change = w.slurm_set,
        };
        char err[256] = "";
        int rc;

        /* Slurm set the step's frequencies: its governor stands, ours is kept. */
        if (w.slurm_set)
                a.opt.governor = MPI_PSTATE_GOVERNOR_KEEP;
        rc = mpi_pstate_agentctl_start(&a, &w.agent, err, sizeof(err));
        if (rc == -ENOENT) {
                w.agent_state = "absent";
                mp_verbose("job %u step %u: no agent at %s: ranks are measured, no core is "
                           "clocked down",
                           st->job_id, st->step_id, a.path);
                return;
        }
        if (rc) {
                w.agent_state = "failed";
                mp_error("job %u step %u: agent: %s", st->job_id, st->step_id, err);
                return;
        }
        w.agent_state = "started";
        w.agent_fd = mpi_pstate_agentctl_pidfd(w.agent);
        rc = mpi_pstate_agentctl_write_pidfile(w.paths.step, "agent.pid", w.agent);
        if (rc)
                mp_error("job %u step %u: %s: %s", st->job_id, st->step_id, w.paths.pidfile,
                         strerror(-rc));
        mp_verbose("job %u step %u: agent %d started (%s)", st->job_id, st->step_id, (int)w.agent,
                   mpi_pstate_options_mode_word(a.opt.mode));
}

static bool preload_usable(const struct mpi_pstate_step *st, const char *path)
{
        char err[256] = "";
        struct stat sb;

        /* Ranks run as the user: a library they cannot read would make ld.so
         * complain in every process of the step. */
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || !(sb.st_mode & S_IROTH)) {
                mp_error("job %u step %u: preload library %s is missing or not world-readable: "
                         "ranks run unmeasured",
                         st->job_id, st->step_id, path);
                return false;
        }
        /* Loaded into every rank of every job: only root may change it. */
        if (mpi_pstate_agentctl_trusted(path, err, sizeof(err)) != 0) {
                mp_error("job %u step %u: preload library not used: %s; ranks run unmeasured",
                         st->job_id, st->step_id, err);
                return false;
        }
        return true;
}

/* One debug line per half of the step (steptime.h): where its time went. */
static void log_time(const struct mpi_pstate_step *st, bool end)
{
        char buf[256];

        if (mpi_pstate_steptime_format(
                &w.time, end ? MPI_PSTATE_STEPTIME_END_FIRST : MPI_PSTATE_STEPTIME_START_FIRST,
                end ? MPI_PSTATE_STEPTIME_COUNT : MPI_PSTATE_STEPTIME_END_FIRST, buf,
                sizeof(buf)) > 0)
                mp_debug("job %u step %u: step %s (ms): %s", st->job_id, st->step_id,
                         end ? "end" : "start", buf);
}

/* What an OCI bundle or apptainer's binds show of path, checked with the
 * job user's file access rights (setfsuid: this thread only), so that root
 * learns nothing the user could not see.  1 seen, 0 not, < 0 unknown. */
static int container_sees(const struct mpi_pstate_step *st, const char *bundle, const char *path)
{
        static const char *const bind_vars[] = {"APPTAINER_BIND", "APPTAINER_BINDPATH",
                                                "SINGULARITY_BIND", "SINGULARITY_BINDPATH"};
        char binds[4096] = "", v[1024];
        int rc;

        if (w.container == MPI_PSTATE_CONTAINER_APPTAINER) {
                for (size_t i = 0; i < sizeof(bind_vars) / sizeof(bind_vars[0]); i++)
                        if (spank_getenv(st->sp, bind_vars[i], v, sizeof(v)) == ESPANK_SUCCESS)
                                snprintf(binds + strlen(binds), sizeof(binds) - strlen(binds),
                                         "%s%s", binds[0] ? "," : "", v);
                return mpi_pstate_container_apptainer_sees(binds, "/etc/apptainer/apptainer.conf",
                                                           path) ||
                       mpi_pstate_container_apptainer_sees(
                           NULL, "/etc/singularity/singularity.conf", path);
        }
        setfsgid(st->gid);
        setfsuid(st->uid);
        rc = mpi_pstate_container_oci_sees(bundle, path);
        setfsuid(0);
        setfsgid(0);
        return rc;
}

/* --container, or a task that is apptainer: does its root have the library? */
static void check_container(const struct mpi_pstate_step *st, const char *lib)
{
        char bundle[1024] = "", **argv = NULL;
        int argc = 0, rc;

        if (spank_getenv(st->sp, "SLURM_CONTAINER", bundle, sizeof(bundle)) != ESPANK_SUCCESS)
                bundle[0] = '\0';
        if (spank_get_item(st->sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1)
                argv = NULL;
        w.container = mpi_pstate_container_of_step(bundle, argv ? argv[0] : NULL);
        if (w.container == MPI_PSTATE_CONTAINER_NONE)
                return;
        rc = container_sees(st, bundle, lib);
        if (rc == 0) {
                w.unmeasured_container = true;
                mp_verbose("job %u step %u: %s container without %s: ranks run unmeasured",
                           st->job_id, st->step_id, mpi_pstate_container_name(w.container), lib);
        } else if (rc < 0) {
                /* A user's path with a newline would forge slurmd log lines. */
                mp_verbose("job %u step %u: %s container %s: %s; library kept", st->job_id,
                           st->step_id, mpi_pstate_container_name(w.container),
                           mpi_pstate_container_printable(bundle)
                               ? bundle
                               : "(a path with control characters, not read)",
                           strerror(-rc));
        }
}

/* Slurm set the step's frequencies (srun/sbatch --cpu-freq reach the step
 * as SLURM_CPU_FREQ_REQ; CpuFreqDef applies to every step without it). */
static bool slurm_sets_frequencies(const struct mpi_pstate_step *st)
{
        char v[64];

        if (st->cfg->slurm_freq_def)
                return true;
        return spank_getenv(st->sp, "SLURM_CPU_FREQ_REQ", v, sizeof(v)) != ESPANK_ENV_NOEXIST &&
               v[0] != '\0';
}

/* The policy's writes, now that Slurm has set the step's cores: over
 * Slurm's setting, if any, nothing is written (its controls win). */
static void policy_set(const struct mpi_pstate_step *st)
{
        struct mpi_pstate_policy_req req = w.policy_req;
        char err[256] = "";
        int rc;

        if (!w.policy_ok || !req.change)
                return;
        req.save_only = false;
        req.keep = w.slurm_set = slurm_sets_frequencies(st);
        mpi_pstate_policy_result_free(&w.policy);
        w.policy_ok = false;
        rc = mpi_pstate_policy_apply(&req, &w.policy, err, sizeof(err));
        if (rc) {
                mp_error("job %u step %u: cpufreq: %s", st->job_id, st->step_id,
                         err[0] ? err : strerror(-rc));
                return;
        }
        w.policy_ok = true;
        if (req.keep && req.governor)
                mp_info("job %u step %u: Slurm set the step's CPU frequencies (--cpu-freq or "
                        "CpuFreqDef): --mpi-pstate-governor=%s not applied",
                        st->job_id, st->step_id, req.governor);
        mp_verbose("job %u step %u: %u domain(s): %u set%s, %u failed%s%s", st->job_id, st->step_id,
                   w.policy.ndomains, w.policy.set, req.keep ? " (Slurm's setting kept)" : "",
                   w.policy.failed, err[0] ? ": " : "", err);
}

/* The step's CPUs so far are its cores as Slurm allocated them, mapped
 * through hwloc.  Once the first task is in the step's cgroup, only those
 * its cpuset allows and no other job's cgroup does are kept: with
 * OverSubscribe=YES/FORCE, or hardware threads declared as cores, another
 * job runs on the rest, and neither a frequency write nor the agent's
 * SCHED_FIFO may reach it.  A domain the save already recorded that holds
 * a CPU taken out is put back now (nothing was changed yet; its record is
 * released for whoever runs there): policy_set() then leaves it alone as
 * shared, and the agent as outside. */
static void cgroup_confine(const struct mpi_pstate_step *st)
{
        struct mpi_pstate_restore_owner owner = {st->job_id, st->step_id};
        struct mpi_pstate_cgroup_cpus cg;
        cpu_set_t keep, outside, shared, out;
        char cgroot[600], err[256] = "";
        pid_t pid = 0;

        if (spank_get_item(st->sp, S_TASK_PID, &pid) != ESPANK_SUCCESS || pid <= 0)
                pid = getpid();
        snprintf(cgroot, sizeof(cgroot), "%s/fs/cgroup", st->cfg->sysroot);
        if (mpi_pstate_cgroup_cpus("/proc", cgroot, pid, &cg, err, sizeof(err)) != 0) {
                mp_verbose("job %u step %u: %s: the step's CPUs are its allocated cores",
                           st->job_id, st->step_id, err);
                return;
        }
        CPU_AND(&keep, &w.cpus, &cg.step);
        CPU_XOR(&outside, &w.cpus, &keep);
        CPU_AND(&shared, &keep, &cg.others);
        CPU_XOR(&keep, &keep, &shared);
        CPU_OR(&out, &outside, &shared);
        w.cg_ok = true;
        w.cg_jobs = cg.jobs;
        snprintf(w.cg_first, sizeof(w.cg_first), "%s", cg.first);
        if (mpi_pstate_steprec_cpulist(&cg.step, w.cg_cpus, sizeof(w.cg_cpus)) < 0 ||
            mpi_pstate_steprec_cpulist(&outside, w.cg_outside, sizeof(w.cg_outside)) < 0 ||
            mpi_pstate_steprec_cpulist(&shared, w.cg_shared, sizeof(w.cg_shared)) < 0)
                w.cg_ok = false;
        if (CPU_COUNT(&out) == 0)
                return;
        mp_info("job %u step %u: CPUs %s outside the step's cgroup %s, CPUs %s shared with %u "
                "other job(s)%s%s%s: their frequency domains are left alone",
                st->job_id, st->step_id, w.cg_outside[0] ? w.cg_outside : "none", cg.dir,
                w.cg_shared[0] ? w.cg_shared : "none", cg.jobs, cg.first[0] ? " (" : "", cg.first,
                cg.first[0] ? ", ...)" : "");
        for (unsigned i = 0; w.policy_ok && i < w.policy.ndomains; i++) {
                struct mpi_pstate_policy_domain *d = &w.policy.domains[i];
                cpu_set_t both;
                int rc;

                CPU_AND(&both, &d->cpus, &out);
                if (d->status != MPI_PSTATE_POLICY_SET || CPU_COUNT(&both) == 0)
                        continue;
                rc = mpi_pstate_restore_policy(w.paths.restore, st->cfg->sysroot, d->name, &owner,
                                               0, err, sizeof(err));
                if (rc < 0)
                        mp_error("job %u step %u: %s: releasing a shared domain: %s", st->job_id,
                                 st->step_id, d->name, err[0] ? err : strerror(-rc));
        }
        w.cpus = keep;
        if (mpi_pstate_steprec_cpulist(&w.cpus, w.cpulist, sizeof(w.cpulist)) < 0)
                w.cpulist[0] = '\0';
}

int mpi_pstate_step_start(const struct mpi_pstate_step *st)
{
        if (!w.paths_ok)
                return 0; /* logged by mpi_pstate_step_policy_save(): nothing saved */
        mpi_pstate_steptime_begin(&w.time);
        cgroup_confine(st);
        policy_set(st);
        mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_POLICY);
        if (w.shm_ok && CPU_COUNT(&w.cpus) > 0) {
                start_agent(st);
                mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_AGENT);
        }
        write_step_record(st, false, NULL);
        mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_RECORD);
        log_time(st, false);
        return 0;
}

int mpi_pstate_step_segment_create(const struct mpi_pstate_step *st)
{
        const char *lib = preload_path(st->cfg);

        mpi_pstate_container_root_id(&w.root);
        if (preload_usable(st, lib)) {
                check_container(st, lib);
                /* Not injected into a container that lacks it: ld.so would
                 * complain in every process. */
                if (!w.unmeasured_container)
                        w.preload = lib;
        }
        if (!w.paths_ok)
                return -ENOENT;
        (void)make_segment(st);
        mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_SEGMENT);
        return 0;
}

int mpi_pstate_step_pin_task(const struct mpi_pstate_step *st)
{
        struct mpi_pstate_pin_info info;
        char err[256] = "";
        int rc;

        if (!w.pin_ok || !w.place || st->task_id < 0)
                return 0;
        rc = mpi_pstate_pinning_task(&w.pin, (unsigned)st->task_id, NULL, &w.task_set, &info, err,
                                     sizeof(err));
        if (rc) {
                mp_error("job %u step %u task %d: pinning: %s", st->job_id, st->step_id,
                         st->task_id, err);
                return rc;
        }
        if (info.flags & MPI_PSTATE_PIN_F_OVERSUBSCRIBED && st->task_id == 0)
                mp_info("job %u step %u: %u tasks share %u slot(s): cores are oversubscribed",
                        st->job_id, st->step_id, w.pin.ntasks, info.slots);
        if (sched_setaffinity(0, sizeof(w.task_set), &w.task_set) != 0)
                return -errno;
        w.task_pinned = true;
        return 0;
}

/* The task plugin binds after task_init_privileged: put ours back. */
static int pin_in_task(const struct mpi_pstate_step *st)
{
        cpu_set_t now;

        if (!w.pin_ok || !w.place || !w.task_pinned || st->task_id < 0)
                return 0;
        if (sched_getaffinity(0, sizeof(now), &now) != 0)
                return -errno;
        if (CPU_EQUAL(&now, &w.task_set))
                return 0;
        /* Our own affinity, within what the step may use: no privilege needed. */
        return sched_setaffinity(0, sizeof(w.task_set), &w.task_set) == 0 ? 0 : -errno;
}

static int setenv_checked(spank_t sp, const char *name, const char *value)
{
        return spank_setenv(sp, name, value, 1) == ESPANK_SUCCESS ? 0 : -EIO;
}

int mpi_pstate_step_task_env(const struct mpi_pstate_step *st)
{
        char cur[4096] = "", val[4096 + MPI_PSTATE_CONFIG_PATH_MAX + 2];
        int rc = pin_in_task(st), n;
        spank_err_t erc;

        if (rc)
                mp_error("job %u step %u task %d: pinning: %s", st->job_id, st->step_id,
                         st->task_id, strerror(-rc));
        if (w.shm_ok && setenv_checked(st->sp, "MPI_PSTATE_SHM", w.paths.shm) != 0)
                rc = -EIO;
        /* A daemon's ranks get their index from the launcher's variables. */
        if (!w.launcher && st->task_id >= 0) {
                char idx[16];

                snprintf(idx, sizeof(idx), "%d", st->task_id);
                if (setenv_checked(st->sp, "MPI_PSTATE_LOCAL_RANK", idx) != 0)
                        rc = -EIO;
        }
        /* An earlier plugin (pyxis) moved the task into its container:
         * the library must be there too, seen as the user. */
        if (w.preload && mpi_pstate_container_root_moved(&w.root) && access(w.preload, R_OK) != 0) {
                mp_verbose("job %u step %u task %d: task root without %s: not measured "
                           "(container)",
                           st->job_id, st->step_id, st->task_id, w.preload);
                w.preload = NULL;
                w.unmeasured_container = true;
        }
        if (w.unmeasured_container &&
            setenv_checked(st->sp, MPI_PSTATE_ENV_UNMEASURED, "container"))
                rc = -EIO;
        if (!w.preload)
                return rc;
        erc = spank_getenv(st->sp, "LD_PRELOAD", cur, sizeof(cur));
        if (erc == ESPANK_ENV_NOEXIST)
                cur[0] = '\0';
        else if (erc != ESPANK_SUCCESS) {
                /* Too long to read back whole: adding ours would drop some of
                 * the user's entries, so leave theirs alone. */
                mp_error("job %u step %u: LD_PRELOAD too long: library not added", st->job_id,
                         st->step_id);
                return -ENOSPC;
        }
        n = mpi_pstate_launch_preload(w.preload, cur, val, sizeof(val));
        if (n < 0)
                return n;
        return setenv_checked(st->sp, "LD_PRELOAD", val) ? -EIO : rc;
}

int mpi_pstate_step_batch_env(const struct mpi_pstate_step *st)
{
        /* Open MPI 4 (ORTE) reads the first, Open MPI 5 (PRRTE) the second. */
        static const char *const vars[] = {"OMPI_MCA_ras_base_launch_orted_on_hn",
                                           "PRTE_MCA_ras_base_launch_orted_on_hn"};
        char v[16];

        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
                if (spank_getenv(st->sp, vars[i], v, sizeof(v)) != ESPANK_ENV_NOEXIST)
                        return 0; /* the user's own choice */
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
                if (setenv_checked(st->sp, vars[i], "1"))
                        return -EIO;
        return 0;
}

static void stop_agent(const struct mpi_pstate_step *st)
{
        int rc;

        if (w.agent <= 0)
                return;
        mpi_pstate_steptime_begin(&w.time);
        if (w.agent_fd >= 0 && !mpi_pstate_agentctl_pidfd_is(w.agent_fd, w.agent)) {
                /* not ours any more: never closed here, the pid way below */
                mp_info("job %u step %u: descriptor %d is no longer agent %d's pidfd: stopped "
                        "by its pid and command line",
                        st->job_id, st->step_id, w.agent_fd, (int)w.agent);
                w.agent_fd = -1;
        }
        if (w.agent_fd >= 0) {
                rc = mpi_pstate_agentctl_stop_pidfd(w.agent_fd, AGENT_STOP_MS);
                close(w.agent_fd);
                w.agent_fd = -1;
        } else {
                rc = mpi_pstate_agentctl_stop(w.agent, w.paths.record, AGENT_STOP_MS);
        }
        if (rc == 2) {
                w.agent_state = "killed";
                mp_error("job %u step %u: agent %d ignored SIGTERM for %u ms: killed", st->job_id,
                         st->step_id, (int)w.agent, AGENT_STOP_MS);
        } else if (rc < 0) {
                mp_error("job %u step %u: stopping agent %d: %s", st->job_id, st->step_id,
                         (int)w.agent, strerror(-rc));
                return;
        } else if (rc == 0) {
                /* Gone before its step ended: a bad argument, a crash. */
                w.agent_state = "exited";
                mp_error("job %u step %u: agent %d had exited before the step ended; see %s",
                         st->job_id, st->step_id, (int)w.agent, w.paths.log);
        } else {
                w.agent_state = "stopped";
        }
        w.agent = -w.agent; /* remembered for the record, never signalled again */
        if (w.paths_ok) {
                int fd = mpi_pstate_safeio_open_dir(w.paths.step, 0, 0);

                if (fd >= 0) {
                        unlinkat(fd, "agent.pid", 0);
                        close(fd);
                }
        }
        mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_AGENT_STOP);
}

int mpi_pstate_step_task_exit(const struct mpi_pstate_step *st)
{
        if (++w.tasks_exited >= st->local_tasks)
                stop_agent(st);
        return 0;
}

static int restore_domains(const struct mpi_pstate_step *st, struct mpi_pstate_restore_summary *sum)
{
        const struct mpi_pstate_restore_owner who = {st->job_id, st->step_id};
        char err[256] = "";
        int rc;

        rc = mpi_pstate_restore_all(w.paths.restore, st->cfg->sysroot, &who, 0, sum, err,
                                    sizeof(err));
        if (rc)
                mp_error("job %u step %u: restore: %u restored, %u failed: %s; the job epilog "
                         "retries",
                         st->job_id, st->step_id, sum->restored, sum->failed, err);
        else if (sum->restored)
                mp_verbose("job %u step %u: %u domain(s) restored", st->job_id, st->step_id,
                           sum->restored);
        return rc;
}

int mpi_pstate_step_restore(const struct mpi_pstate_step *st)
{
        struct mpi_pstate_restore_summary sum = {0};
        int rc = 0;

        stop_agent(st);
        mpi_pstate_steptime_begin(&w.time);
        if (w.paths_ok) {
                rc = restore_domains(st, &sum);
                mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_RESTORE);
                if (w.agent < 0)
                        w.agent = -w.agent;
                write_step_record(st, true, &sum);
                mpi_pstate_steptime_end(&w.time, MPI_PSTATE_STEPTIME_END_RECORD);
                log_time(st, true);
        }
        if (w.pin_ok)
                mpi_pstate_pinning_fini(&w.pin);
        w.pin_ok = false;
        mpi_pstate_policy_result_free(&w.policy);
        w.policy_ok = false;
        mpi_pstate_cpufreq_free(w.cpufreq);
        w.cpufreq = NULL;
        return rc;
}

/* The agents of job J on this node that outlived their step (slurmstepd
 * killed): each step directory's pidfile, checked against the agent's
 * command line before any signal. */
static void stop_job_agents(const struct mpi_pstate_step *st, const struct mpi_pstate_paths *p)
{
        char prefix[32];
        struct dirent *de;
        DIR *d;
        int fd;

        snprintf(prefix, sizeof(prefix), "%u.", st->job_id);
        fd = mpi_pstate_safeio_open_dir(p->steps, 0, 0);
        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        while ((de = readdir(d))) {
                char dir[MPI_PSTATE_PATHS_LEN + 40], record[MPI_PSTATE_PATHS_LEN + 64];
                pid_t pid;
                int n;

                if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
                    mpi_pstate_safeio_check_name(de->d_name, 32) != 0)
                        continue;
                n = snprintf(dir, sizeof(dir), "%s/%s", p->steps, de->d_name);
                if (n < 0 || (size_t)n >= sizeof(dir) ||
                    (size_t)snprintf(record, sizeof(record), "%s/agent.json", dir) >=
                        sizeof(record))
                        continue;
                if (mpi_pstate_agentctl_read_pidfile(dir, "agent.pid", &pid) != 0)
                        continue;
                if (mpi_pstate_agentctl_stop(pid, record, AGENT_STOP_MS) > 0)
                        mp_error("job %u: agent %d of %s outlived its step: stopped", st->job_id,
                                 (int)pid, de->d_name);
        }
        closedir(d);
}

static int job_backstop(const struct mpi_pstate_step *st, const char *when)
{
        const struct mpi_pstate_restore_owner who = {st->job_id, 0};
        struct mpi_pstate_restore_summary sum = {0};
        struct mpi_pstate_paths p;
        char host[64], err[256] = "";
        int rc;

        if (st->job_id == 0)
                return 0;
        rc = node_paths(st, &p, host, sizeof(host));
        if (rc)
                return rc;
        stop_job_agents(st, &p);
        rc = mpi_pstate_restore_all(p.restore, st->cfg->sysroot, &who, MPI_PSTATE_RESTORE_ANY_STEP,
                                    &sum, err, sizeof(err));
        if (sum.restored)
                mp_error("job %u: %s restored %u domain(s) the job's steps left changed",
                         st->job_id, when, sum.restored);
        if (rc)
                mp_error("job %u: %s: %u domain(s) could not be restored: %s", st->job_id, when,
                         sum.failed, err);
        return rc;
}

int mpi_pstate_step_job_prolog_backstop(const struct mpi_pstate_step *st)
{
        return job_backstop(st, "job prolog");
}

int mpi_pstate_step_job_epilog_backstop(const struct mpi_pstate_step *st)
{
        return job_backstop(st, "job epilog");
}
