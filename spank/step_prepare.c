/* SPDX-License-Identifier: BSD-3-Clause */
/* A step's first phase (spank/step.h: slurm_spank_init_post_opt), before
 * any task is forked and before Slurm applies --cpu-freq: the step's cores
 * and pinning plan, its runtime directories, the save of its frequency
 * domains, the preload library's checks and the slot segment.  What it
 * finds goes into s, which the later phases read. */
#include "step.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentctl.h"
#include "container.h"
#include "launch.h"
#include "log.h"
#include "safeio.h"
#include "slot.h"
#include "spank_paths.h" /* generated: MPI_PSTATE_DEFAULT_PRELOAD */
#include "steprec.h"
#include "step_state.h"

static const char *preload_path(const struct mpi_pstate_config *cfg)
{
        return cfg->preload[0] ? cfg->preload : MPI_PSTATE_DEFAULT_PRELOAD;
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

static int make_dirs(struct mpi_pstate_step_state *s)
{
        int rc = make_dir(s->paths.restore);

        if (rc == 0)
                rc = make_dir(s->paths.steps);
        if (rc == 0)
                rc = make_dir(s->paths.step);
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
static bool place_tasks(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        char v[64];
        spank_err_t rc = spank_getenv(st->sp, "SLURM_CPU_BIND_TYPE", v, sizeof(v));

        /* Too long to read is still somebody's explicit choice. */
        return mpi_pstate_pinning_ours(st->opt->mode,
                                       rc == ESPANK_SUCCESS   ? v
                                       : rc == ESPANK_NOSPACE ? "?"
                                                              : NULL,
                                       s->launcher);
}

static void prepare_pinning(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        const char *cores = item_str(st->sp, s->launcher ? S_JOB_ALLOC_CORES : S_STEP_ALLOC_CORES);
        uint32_t cpt = 1;
        hwloc_topology_t topo;
        char err[256] = "";
        int rc;

        (void)spank_get_item(st->sp, S_STEP_CPUS_PER_TASK, &cpt);
        rc = mpi_pstate_pinning_load(&topo);
        mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_TOPOLOGY);
        if (rc == 0)
                rc = mpi_pstate_pinning_init(&s->pin, topo, cores, st->local_tasks, cpt,
                                             st->opt->bind, false, s->launcher, err, sizeof(err));
        if (rc == 0)
                rc = mpi_pstate_pinning_cpus(&s->pin, &s->cpus);
        if (rc) {
                mp_error("job %u step %u: allocated cores: %s; no pinning, no frequency change",
                         st->job_id, st->step_id, err[0] ? err : strerror(-rc));
                if (s->pin.topo)
                        mpi_pstate_pinning_fini(&s->pin);
                /* Without the step's CPUs no core may be touched: slurmstepd's
                 * own affinity can be the whole node. */
                CPU_ZERO(&s->cpus);
                mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_CORES);
                return;
        }
        s->pin_ok = true;
        mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_CORES);
}

/* The step's cores, its pinning plan and its runtime directories: what
 * every later phase needs, frequency change or not. */
static int prepare_step(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        int rc;

        s->launcher = launcher_step(st->sp);
        s->place = place_tasks(s, st);
        if (!s->place)
                mp_verbose("job %u step %u: tasks keep their placement (%s)", st->job_id,
                           st->step_id,
                           st->opt->mode != MPI_PSTATE_MODE_ON ? "mode profile" : "--cpu-bind");
        prepare_pinning(s, st);
        if (mpi_pstate_steprec_cpulist(&s->cpus, s->cpulist, sizeof(s->cpulist)) < 0)
                s->cpulist[0] = '\0';
        rc = mpi_pstate_step_node_paths(st, &s->paths, s->host, sizeof(s->host));
        if (rc == 0)
                rc = make_dirs(s);
        mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_DIRS);
        if (rc)
                mp_error("job %u step %u: %s: %s; no frequency change, no agent", st->job_id,
                         st->step_id, s->paths.runtime[0] ? s->paths.runtime : st->cfg->runtime_dir,
                         strerror(-rc));
        return rc;
}

static void save_request(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st,
                         struct mpi_pstate_policy_req *req)
{
        enum mpi_pstate_cpufreq_mech mech = MPI_PSTATE_CPUFREQ_MECH_AUTO;

        (void)mpi_pstate_cpufreq_mech_parse(st->cfg->mechanism, &mech);
        req->sysroot = st->cfg->sysroot;
        req->restore_dir = s->paths.restore;
        req->owner = (struct mpi_pstate_restore_owner){st->job_id, st->step_id};
        req->cpus = &s->cpus;
        req->change = st->opt->mode == MPI_PSTATE_MODE_ON;
        req->governor = st->opt->governor == MPI_PSTATE_GOVERNOR_KEEP
                            ? NULL
                            : mpi_pstate_options_governor_word(st->opt->governor);
        req->floor_khz = (uint32_t)st->cfg->freq_min_khz;
        req->ceiling_khz = (uint32_t)st->cfg->freq_max_khz;
        req->mechanism = mech;
        /* Only saved here: Slurm reads the cores' settings for its own reset
         * after this hook (--cpu-freq, CpuFreqDef), and must find them as
         * they were before the step.  mpi_pstate_step_start() sets. */
        req->save_only = true;
        req->node = &s->cpufreq;
}

int mpi_pstate_step_policy_save(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        struct mpi_pstate_policy_req req = {0};
        char err[256] = "";
        int rc;

        mpi_pstate_steptime_begin(&s->time);
        rc = prepare_step(s, st);
        if (rc)
                return rc;
        s->paths_ok = true;
        if (CPU_COUNT(&s->cpus) == 0)
                return 0; /* logged by prepare_pinning(): measured only */
        save_request(s, st, &req);
        rc = mpi_pstate_policy_apply(&req, &s->policy, err, sizeof(err));
        mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_POLICY);
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
        s->policy_ok = true;
        s->policy_req = req;
        mp_verbose("job %u step %u: cpus %s%s: %u domain(s): %u saved, %u shared with other "
                   "CPUs (left alone), %u held by another step, %u failed%s%s",
                   st->job_id, st->step_id, s->cpulist, s->launcher ? " (launcher daemon)" : "",
                   s->policy.ndomains, s->policy.set, s->policy.shared, s->policy.busy,
                   s->policy.failed, err[0] ? ": " : "", err);
        return s->policy.failed ? -EIO : 0;
}

/* Tries before giving up on a segment name: an EEXIST means a 2^-64
 * collision, not a squatter (who cannot guess the suffix). */
#define SEGMENT_TRIES 4

/* One slot per local task, and at least one per CPU of the step: a
 * launcher's daemon is one task that forks as many ranks as it likes.  The
 * name ends in 64 random bits (paths.h), so another user can neither squat
 * it nor pre-block it; root code finds it through the step record, never by
 * listing /dev/shm. */
static int make_segment(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        uint32_t n = st->local_tasks;
        int rc = -EEXIST;

        if ((uint32_t)CPU_COUNT(&s->cpus) > n)
                n = (uint32_t)CPU_COUNT(&s->cpus);
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
                rc = mpi_pstate_paths_shm_unique(&s->paths, rnd);
                if (rc == 0)
                        rc = mpi_pstate_slot_create_segment_stat(s->paths.shm, n, st->uid, st->gid,
                                                                 &s->shm_made);
        }
        if (rc) {
                /* ENOSPC: /dev/shm is full (the segment is allocated whole) */
                snprintf(s->unmeasured, sizeof(s->unmeasured), "segment: %s", strerror(-rc));
                mp_error("job %u step %u: segment %s: %s; ranks run unmeasured", st->job_id,
                         st->step_id, s->paths.shm, strerror(-rc));
                return rc;
        }
        s->shm_nslots = n;
        s->shm_ok = true;
        return 0;
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

/* What an OCI bundle or apptainer's binds show of path, checked with the
 * job user's file access rights (setfsuid: this thread only), so that root
 * learns nothing the user could not see.  1 seen, 0 not, < 0 unknown. */
static int container_sees(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st,
                          const char *bundle, const char *path)
{
        static const char *const bind_vars[] = {"APPTAINER_BIND", "APPTAINER_BINDPATH",
                                                "SINGULARITY_BIND", "SINGULARITY_BINDPATH"};
        char binds[4096] = "", v[1024];
        int rc;

        if (s->container == MPI_PSTATE_CONTAINER_APPTAINER) {
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
static void check_container(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st,
                            const char *lib)
{
        char bundle[1024] = "", **argv = NULL;
        int argc = 0, rc;

        if (spank_getenv(st->sp, "SLURM_CONTAINER", bundle, sizeof(bundle)) != ESPANK_SUCCESS)
                bundle[0] = '\0';
        if (spank_get_item(st->sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1)
                argv = NULL;
        s->container = mpi_pstate_container_of_step(bundle, argv ? argv[0] : NULL);
        if (s->container == MPI_PSTATE_CONTAINER_NONE)
                return;
        rc = container_sees(s, st, bundle, lib);
        if (rc == 0) {
                s->unmeasured_container = true;
                mp_verbose("job %u step %u: %s container without %s: ranks run unmeasured",
                           st->job_id, st->step_id, mpi_pstate_container_name(s->container), lib);
        } else if (rc < 0) {
                /* A user's path with a newline would forge slurmd log lines. */
                mp_verbose("job %u step %u: %s container %s: %s; library kept", st->job_id,
                           st->step_id, mpi_pstate_container_name(s->container),
                           mpi_pstate_container_printable(bundle)
                               ? bundle
                               : "(a path with control characters, not read)",
                           strerror(-rc));
        }
}

int mpi_pstate_step_segment_create(struct mpi_pstate_step_state *s,
                                   const struct mpi_pstate_step *st)
{
        const char *lib = preload_path(st->cfg);

        mpi_pstate_container_root_id(&s->root);
        if (preload_usable(st, lib)) {
                check_container(s, st, lib);
                /* Not injected into a container that lacks it: ld.so would
                 * complain in every process. */
                if (!s->unmeasured_container)
                        s->preload = lib;
        }
        if (!s->paths_ok)
                return -ENOENT;
        (void)make_segment(s, st);
        mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_SEGMENT);
        return 0;
}
