/* SPDX-License-Identifier: BSD-3-Clause */
/* A step's second phase (spank/step.h: slurm_spank_task_post_fork, first
 * task): Slurm's task plugin has set the step's cores by now, so here the
 * step's CPUs are narrowed to its cgroup, the saved domains are set, the
 * agent is started and the step record is first written. */
#include "step.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentctl.h"
#include "cgroup.h"
#include "log.h"
#include "placement.h"
#include "spank_paths.h" /* generated: MPI_PSTATE_DEFAULT_AGENT */
#include "steprec.h"
#include "step_state.h"

static const char *agent_path(const struct mpi_pstate_config *cfg)
{
        return cfg->agent[0] ? cfg->agent : MPI_PSTATE_DEFAULT_AGENT;
}

static void start_agent(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        struct mpi_pstate_agent_args a;
        char err[256] = "";
        int rc;

        mpi_pstate_agentctl_args_init(&a);
        a.path = agent_path(st->cfg);
        a.opt = *st->opt;
        /* --foreground: detached by us already, so the pid we record is the
         * agent's.  --keep-shm: the segment is the plugin's and stays for
         * the node epilog. */
        a.foreground = a.keep_shm = true;
        a.shm = s->paths.shm;
        a.nslots = s->shm_nslots;
        a.cpulist = s->cpulist;
        if (s->policy_ok && s->policy.set)
                a.mech = s->policy.mech;
        else if (mpi_pstate_cpufreq_mech_parse(st->cfg->mechanism, &a.mech) != 0)
                a.mech = MPI_PSTATE_CPUFREQ_MECH_AUTO;
        a.runtime_dir = s->paths.restore;
        a.record = s->paths.record;
        a.log = s->paths.log;
        a.sysroot = st->cfg->sysroot;
        a.job = st->job_id;
        a.step = st->step_id;
        a.uid = st->uid;
        a.gid = st->gid;
        a.freq_min_khz = st->cfg->freq_min_khz;
        a.budget_ppm = st->cfg->agent_budget_ppm;
        a.allow_governor = !s->slurm_set;
        a.uncore = st->cfg->uncore;
        a.uncore_threshold_us = st->cfg->uncore_threshold_us;
        mpi_pstate_plugstack_agent_ids(st->cfg, &a.run_uid, &a.run_gid);
        /* Slurm set the step's frequencies: its governor stands, ours is kept. */
        if (s->slurm_set)
                a.opt.governor = MPI_PSTATE_GOVERNOR_KEEP;
        rc = mpi_pstate_agentctl_start(&a, &s->agent, err, sizeof(err));
        if (rc == -ENOENT) {
                s->agent_state = "absent";
                mp_verbose("job %u step %u: no agent at %s: ranks are measured, no core is "
                           "clocked down",
                           st->job_id, st->step_id, a.path);
                return;
        }
        if (rc) {
                s->agent_state = "failed";
                mp_error("job %u step %u: agent: %s", st->job_id, st->step_id, err);
                return;
        }
        s->agent_state = "started";
        s->agent_fd = mpi_pstate_agentctl_pidfd(s->agent);
        rc = mpi_pstate_agentctl_write_pidfile(s->paths.step, "agent.pid", s->agent);
        if (rc)
                mp_error("job %u step %u: %s: %s", st->job_id, st->step_id, s->paths.pidfile,
                         strerror(-rc));
        mp_verbose("job %u step %u: agent %d started (%s)", st->job_id, st->step_id, (int)s->agent,
                   mpi_pstate_options_mode_word(a.opt.mode));
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
static void policy_set(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        struct mpi_pstate_policy_req req = s->policy_req;
        char err[256] = "";
        int rc;

        if (!s->policy_ok || !req.change)
                return;
        req.save_only = false;
        req.keep = s->slurm_set = slurm_sets_frequencies(st);
        mpi_pstate_policy_result_free(&s->policy);
        s->policy_ok = false;
        rc = mpi_pstate_policy_apply(&req, &s->policy, err, sizeof(err));
        if (rc) {
                mp_error("job %u step %u: cpufreq: %s", st->job_id, st->step_id,
                         err[0] ? err : strerror(-rc));
                return;
        }
        s->policy_ok = true;
        if (req.keep && req.governor)
                mp_info("job %u step %u: Slurm set the step's CPU frequencies (--cpu-freq or "
                        "CpuFreqDef): --mpi-pstate-governor=%s not applied",
                        st->job_id, st->step_id, req.governor);
        mp_verbose("job %u step %u: %u domain(s): %u set%s, %u failed%s%s", st->job_id, st->step_id,
                   s->policy.ndomains, s->policy.set, req.keep ? " (Slurm's setting kept)" : "",
                   s->policy.failed, err[0] ? ": " : "", err);
}

/* Whether the job was allocated every core of this node: its cores here
 * as the credential slurmctld signed names them (S_JOB_ALLOC_CORES),
 * against the cores of the topology slurmd numbers them by (spank/placement.h).
 * Outside an OverSubscribe partition no other job then holds one of them.
 * The step's environment (SLURM_JOB_CPUS_PER_NODE, SLURM_CPUS_ON_NODE) is
 * never asked: the user sets it. */
static bool job_has_every_core(const struct mpi_pstate_step_state *s,
                               const struct mpi_pstate_step *st)
{
        hwloc_bitmap_t job, all;
        char *cores = NULL;
        bool every = false;
        int n;

        if (!s->pin_ok || spank_get_item(st->sp, S_JOB_ALLOC_CORES, &cores) != ESPANK_SUCCESS ||
            !cores)
                return false;
        n = hwloc_get_nbobjs_by_type(s->pin.topo, HWLOC_OBJ_CORE);
        if (n <= 0) /* no core objects: Slurm counts the PUs (spank/placement.c) */
                n = hwloc_get_nbobjs_by_type(s->pin.topo, HWLOC_OBJ_PU);
        job = hwloc_bitmap_alloc();
        all = hwloc_bitmap_alloc();
        if (job && all && n > 0 && mpi_pstate_placement_cpulist_parse(cores, job) == 0 &&
            hwloc_bitmap_set_range(all, 0, n - 1) == 0)
                every = hwloc_bitmap_isincluded(all, job);
        hwloc_bitmap_free(job);
        hwloc_bitmap_free(all);
        return every;
}

/* The step's CPUs so far are its cores as Slurm allocated them, mapped
 * through hwloc.  Once the first task is in the step's cgroup, only those
 * its cpuset allows and no other job's cgroup does are kept: with
 * OverSubscribe=YES/FORCE, or hardware threads declared as cores, another
 * job runs on the rest, and neither a frequency write nor the agent's
 * SCHED_FIFO may reach it.  Without a cpuset file (cgroup v2 without the
 * cpuset controller for the job) nothing confines any job: the CPUs are
 * kept only when the job has every core of the node or no other job's
 * cgroup holds one of them, else all are left alone and the step record
 * says why (mpi_pstate_cgroup_decide()).  A domain the save already
 * recorded that holds a CPU taken out is put back now (nothing was changed
 * yet; its record is released for whoever runs there): policy_set() then
 * leaves it alone as shared, and the agent as outside. */
static void cgroup_confine(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        struct mpi_pstate_restore_owner owner = {st->job_id, st->step_id};
        struct mpi_pstate_cgroup_cpus cg;
        struct mpi_pstate_cgroup_facts f = {.cpus = &s->cpus};
        struct mpi_pstate_cgroup_verdict v;
        char cgroot[600], err[256] = "";
        cpu_set_t out;
        pid_t pid = 0;
        int rc;

        if (spank_get_item(st->sp, S_TASK_PID, &pid) != ESPANK_SUCCESS || pid <= 0)
                pid = getpid();
        snprintf(cgroot, sizeof(cgroot), "%s/fs/cgroup", st->cfg->sysroot);
        rc = mpi_pstate_cgroup_cpus("/proc", cgroot, pid, &cg, err, sizeof(err));
        if (rc != 0 && CPU_COUNT(&s->cpus) == 0)
                return; /* no CPU to decide on: prepare_pinning() said why */
        f.cpuset = rc == 0 ? &cg.step : NULL;
        f.others = cg.have_jobs ? &cg.others : NULL;
        f.exclusive = rc != 0 && job_has_every_core(s, st);
        mpi_pstate_cgroup_decide(&f, &v);
        CPU_OR(&out, &v.outside, &v.shared);
        if (rc == 0) {
                s->cg_ok = true;
                s->cg_jobs = cg.jobs;
                snprintf(s->cg_first, sizeof(s->cg_first), "%s", cg.first);
                if (mpi_pstate_steprec_cpulist(&cg.step, s->cg_cpus, sizeof(s->cg_cpus)) < 0 ||
                    mpi_pstate_steprec_cpulist(&v.outside, s->cg_outside, sizeof(s->cg_outside)) <
                        0 ||
                    mpi_pstate_steprec_cpulist(&v.shared, s->cg_shared, sizeof(s->cg_shared)) < 0)
                        s->cg_ok = false;
                if (CPU_COUNT(&out) == 0)
                        return;
                mp_info("job %u step %u: CPUs %s outside the step's cgroup %s, CPUs %s shared "
                        "with %u other job(s)%s%s%s: their frequency domains are left alone",
                        st->job_id, st->step_id, s->cg_outside[0] ? s->cg_outside : "none", cg.dir,
                        s->cg_shared[0] ? s->cg_shared : "none", cg.jobs, cg.first[0] ? " (" : "",
                        cg.first, cg.first[0] ? ", ...)" : "");
        } else if (!mpi_pstate_cgroup_left_alone(v.decision)) {
                mp_verbose("job %u step %u: %s; %s: the step's CPUs are its allocated cores",
                           st->job_id, st->step_id, err,
                           mpi_pstate_cgroup_decision_text(v.decision));
                return;
        } else {
                /* Once per step, where an admin looks: enabling the cpuset
                 * controller (or ConstrainCores) gives these steps back. */
                s->left_alone = mpi_pstate_cgroup_decision_text(v.decision);
                mp_info("job %u step %u: %s (%s; %u other job(s)%s%s%s): the frequency domains "
                        "of CPUs %s are left alone",
                        st->job_id, st->step_id, s->left_alone, err, cg.jobs,
                        cg.first[0] ? ", " : "", cg.first, cg.jobs > 1 ? ", ..." : "",
                        s->cpulist[0] ? s->cpulist : "none");
        }
        for (unsigned i = 0; s->policy_ok && i < s->policy.ndomains; i++) {
                struct mpi_pstate_policy_domain *d = &s->policy.domains[i];
                cpu_set_t both;

                CPU_AND(&both, &d->cpus, &out);
                if (d->status != MPI_PSTATE_POLICY_SET || CPU_COUNT(&both) == 0)
                        continue;
                rc = mpi_pstate_restore_policy(s->paths.restore, st->cfg->sysroot, d->name, &owner,
                                               0, err, sizeof(err));
                if (rc < 0)
                        mp_error("job %u step %u: %s: releasing a shared domain: %s", st->job_id,
                                 st->step_id, d->name, err[0] ? err : strerror(-rc));
        }
        s->cpus = v.keep;
        if (mpi_pstate_steprec_cpulist(&s->cpus, s->cpulist, sizeof(s->cpulist)) < 0)
                s->cpulist[0] = '\0';
}

int mpi_pstate_step_start(struct mpi_pstate_step_state *s, const struct mpi_pstate_step *st)
{
        if (!s->paths_ok)
                return 0; /* logged by mpi_pstate_step_policy_save(): nothing saved */
        mpi_pstate_steptime_begin(&s->time);
        cgroup_confine(s, st);
        policy_set(s, st);
        mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_POLICY);
        if (s->shm_ok && CPU_COUNT(&s->cpus) > 0) {
                start_agent(s, st);
                mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_AGENT);
        }
        mpi_pstate_step_write_record(s, st, false, NULL);
        mpi_pstate_steptime_end(&s->time, MPI_PSTATE_STEPTIME_RECORD);
        mpi_pstate_step_log_time(s, st, false);
        return 0;
}
