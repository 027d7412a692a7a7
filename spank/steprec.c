/* SPDX-License-Identifier: BSD-3-Clause */
/* The step record's format (steprec.h): plugin.json, what the plugin did
 * for one step on one node, formatted as JSON; writing it is
 * spank/step_shared.c's. */
#include "steprec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "slot.h"

int mpi_pstate_steprec_cpulist(const cpu_set_t *set, char *buf, size_t len)
{
        struct mpi_pstate_json w;

        mpi_pstate_json_fixed(&w, buf, len);
        mpi_pstate_json_cpulist(&w, set);
        return w.failed ? -ENOSPC : (int)w.len;
}

static void domains(struct mpi_pstate_json *w, const struct mpi_pstate_policy_result *p)
{
        mpi_pstate_json_key(w, "domains");
        mpi_pstate_json_open(w, '[', NULL);
        for (unsigned i = 0; p && i < p->ndomains; i++) {
                const struct mpi_pstate_policy_domain *d = &p->domains[i];
                char cpus[256];

                if (mpi_pstate_steprec_cpulist(&d->cpus, cpus, sizeof(cpus)) < 0)
                        snprintf(cpus, sizeof(cpus), "?");
                mpi_pstate_json_elem(w);
                mpi_pstate_json_open(w, '{', NULL);
                mpi_pstate_json_member_str(w, "policy", d->name);
                mpi_pstate_json_member_str(w, "cpus", cpus);
                mpi_pstate_json_member_str(w, "status", mpi_pstate_policy_status_name(d->status));
                mpi_pstate_json_member_str(w, "governor", d->target.governor);
                mpi_pstate_json_member_u64(w, "min_khz", d->target.min_khz);
                mpi_pstate_json_member_u64(w, "max_khz", d->target.max_khz);
                mpi_pstate_json_close(w);
        }
        mpi_pstate_json_close(w);
}

static void cgroup(struct mpi_pstate_json *w, const struct mpi_pstate_steprec_cgroup *c)
{
        if (!c)
                return;
        mpi_pstate_json_key(w, "cgroup");
        mpi_pstate_json_open(w, '{', NULL);
        mpi_pstate_json_member_str(w, "cpus", c->cpus);
        mpi_pstate_json_member_str(w, "outside", c->outside);
        mpi_pstate_json_member_str(w, "shared", c->shared);
        mpi_pstate_json_member_u64(w, "other_jobs", c->other_jobs);
        mpi_pstate_json_member_str(
            w, "first_other",
            c->other_jobs && c->first_other && c->first_other[0] ? c->first_other : NULL);
        mpi_pstate_json_close(w);
}

/* The segment as the plugin saw it through its own fd: what root code
 * later trusts (steprec.h). */
static void segments(struct mpi_pstate_json *w, const struct mpi_pstate_steprec *r)
{
        const char *slash = r->shm ? strrchr(r->shm, '/') : NULL;

        mpi_pstate_json_key(w, "segments");
        mpi_pstate_json_open(w, '[', NULL);
        if (slash) {
                char dir[256];

                snprintf(dir, sizeof(dir), "%.*s", (int)(slash - r->shm), r->shm);
                mpi_pstate_json_elem(w);
                mpi_pstate_json_open(w, '{', NULL);
                mpi_pstate_json_member_str(w, "name", slash + 1);
                mpi_pstate_json_member_str(w, "dir", dir);
                mpi_pstate_json_member_u64(w, "dev", r->shm_dev);
                mpi_pstate_json_member_u64(w, "ino", r->shm_ino);
                mpi_pstate_json_member_u64(w, "nslots", r->shm_nslots);
                mpi_pstate_json_member_u64(w, "bytes",
                                           (unsigned long long)MPI_PSTATE_SEG_HEADER_SIZE +
                                               (unsigned long long)r->shm_nslots *
                                                   MPI_PSTATE_SLOT_SIZE);
                mpi_pstate_json_member_u64(w, "uid", r->shm_uid);
                mpi_pstate_json_close(w);
        }
        mpi_pstate_json_close(w);
}

static void agent(struct mpi_pstate_json *w, const struct mpi_pstate_steprec *r)
{
        mpi_pstate_json_key(w, "agent");
        mpi_pstate_json_open(w, '{', NULL);
        mpi_pstate_json_member_str(w, "status", r->agent);
        mpi_pstate_json_key(w, "pid");
        if (r->agent_pid > 0)
                mpi_pstate_json_put(w, "%d", r->agent_pid);
        else
                mpi_pstate_json_put(w, "null");
        mpi_pstate_json_close(w);
}

static void restore(struct mpi_pstate_json *w, const struct mpi_pstate_steprec *r)
{
        mpi_pstate_json_key(w, "restore");
        mpi_pstate_json_open(w, '{', NULL);
        mpi_pstate_json_member_str(w, "state", r->ended ? "done" : "pending");
        mpi_pstate_json_member_u64(w, "restored", r->restored);
        mpi_pstate_json_member_u64(w, "foreign", r->foreign);
        mpi_pstate_json_member_u64(w, "failed", r->failed);
        mpi_pstate_json_close(w);
}

int mpi_pstate_steprec_format(const struct mpi_pstate_steprec *r, char *buf, size_t len)
{
        struct mpi_pstate_json w;

        mpi_pstate_json_fixed(&w, buf, len);
        w.compact = true;
        mpi_pstate_json_open(&w, '{', NULL);
        mpi_pstate_json_member_u64(&w, "version", MPI_PSTATE_STEPREC_VERSION);
        mpi_pstate_json_member_u64(&w, "job", r->job);
        mpi_pstate_json_member_u64(&w, "step", r->step);
        mpi_pstate_json_member_str(&w, "node", r->node);
        mpi_pstate_json_member_str(&w, "mode", r->mode);
        mpi_pstate_json_key(&w, "launcher");
        mpi_pstate_json_bool(&w, r->launcher);
        mpi_pstate_json_member_str(&w, "cpus", r->cpus);
        mpi_pstate_json_member_str(&w, "governor", r->governor);
        mpi_pstate_json_member_str(&w, "mechanism", r->mechanism);
        mpi_pstate_json_member_str(&w, "driver",
                                   r->policy && r->policy->driver[0] ? r->policy->driver : NULL);
        mpi_pstate_json_member_str(&w, "preload", r->preload);
        mpi_pstate_json_member_str(&w, "container", r->container);
        mpi_pstate_json_member_str(&w, "unmeasured", r->unmeasured);
        cgroup(&w, r->cgroup);
        if (r->left_alone)
                mpi_pstate_json_member_str(&w, "left_alone", r->left_alone);
        mpi_pstate_json_member_str(&w, "shm", r->shm);
        segments(&w, r);
        agent(&w, r);
        domains(&w, r->policy);
        restore(&w, r);
        mpi_pstate_json_close(&w);
        mpi_pstate_json_put(&w, "\n");
        return w.failed ? -ENOSPC : (int)w.len;
}
