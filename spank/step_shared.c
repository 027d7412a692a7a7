/* SPDX-License-Identifier: BSD-3-Clause */
/* The step phases' shared part (spank/step.h): what more than one phase of
 * a step writes or reads, the node's paths of the step, its record
 * plugin.json (formatted by spank/steprec.c, written here) and its timing
 * line. */
#include "step.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "safeio.h"
#include "steprec.h"
#include "step_state.h"

#define STEP_RECORD "plugin.json"

int mpi_pstate_step_node_paths(const struct mpi_pstate_step *st, struct mpi_pstate_paths *p,
                               char *host, size_t hostlen)
{
        int rc = mpi_pstate_paths_host(host, hostlen);

        if (rc == 0)
                rc = mpi_pstate_paths_step(st->cfg->runtime_dir, host, st->job_id, st->step_id, p);
        if (rc)
                mp_error("job %u: runtime_dir %s: cannot expand for host: %s", st->job_id,
                         st->cfg->runtime_dir, strerror(-rc));
        return rc;
}

void mpi_pstate_step_write_record(const struct mpi_pstate_step_state *s,
                                  const struct mpi_pstate_step *st, bool ended,
                                  const struct mpi_pstate_restore_summary *sum)
{
        const char *mech =
            s->policy_ok && s->policy.set ? mpi_pstate_cpufreq_mech_name(s->policy.mech) : NULL;
        const struct mpi_pstate_steprec_cgroup cg = {s->cg_cpus, s->cg_outside, s->cg_shared,
                                                     s->cg_jobs, s->cg_first};
        struct mpi_pstate_steprec r = {
            .job = st->job_id,
            .step = st->step_id,
            .node = s->host,
            .mode = mpi_pstate_options_mode_word(st->opt->mode),
            .cpus = s->cpulist,
            .governor = mpi_pstate_options_governor_word(st->opt->governor),
            .mechanism = mech,
            .launcher = s->launcher,
            .preload = s->preload,
            .container = mpi_pstate_container_name(s->container),
            .cgroup = s->cg_ok ? &cg : NULL,
            .left_alone = s->left_alone,
            .unmeasured = s->unmeasured_container ? "container"
                          : s->unmeasured[0]      ? s->unmeasured
                                                  : NULL,
            .shm = s->shm_ok ? s->paths.shm : NULL,
            .shm_dev = (uint64_t)s->shm_made.st_dev,
            .shm_ino = (uint64_t)s->shm_made.st_ino,
            .shm_nslots = s->shm_nslots,
            .shm_uid = (uint32_t)s->shm_made.st_uid,
            .agent = s->agent_state,
            .agent_pid = s->agent > 0 ? (int)s->agent : 0,
            .policy = s->policy_ok ? &s->policy : NULL,
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
        fd = n < 0 ? n : mpi_pstate_safeio_open_dir(s->paths.step, 0, 0);
        rc = fd < 0 ? fd
                    : mpi_pstate_safeio_write_atomic(fd, STEP_RECORD, buf, (size_t)n, 0600,
                                                     MPI_PSTATE_SAFEIO_NOSYNC);
        if (fd >= 0)
                close(fd);
        if (rc)
                mp_error("job %u step %u: %s/%s: %s", st->job_id, st->step_id, s->paths.step,
                         STEP_RECORD, strerror(-rc));
}

/* One debug line per half of the step (steptime.h): where its time went. */
void mpi_pstate_step_log_time(const struct mpi_pstate_step_state *s,
                              const struct mpi_pstate_step *st, bool end)
{
        char buf[256];

        if (mpi_pstate_steptime_format(
                &s->time, end ? MPI_PSTATE_STEPTIME_END_FIRST : MPI_PSTATE_STEPTIME_START_FIRST,
                end ? MPI_PSTATE_STEPTIME_COUNT : MPI_PSTATE_STEPTIME_END_FIRST, buf,
                sizeof(buf)) > 0)
                mp_debug("job %u step %u: step %s (ms): %s", st->job_id, st->step_id,
                         end ? "end" : "start", buf);
}
