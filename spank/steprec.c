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

static void str_member(struct mpi_pstate_json *w, const char *key, const char *s)
{
        mpi_pstate_json_key(w, key);
        mpi_pstate_json_str(w, s);
}

static void uint_member(struct mpi_pstate_json *w, const char *key, unsigned long long v)
{
        mpi_pstate_json_key(w, key);
        mpi_pstate_json_put(w, "%llu", v);
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
                str_member(w, "policy", d->name);
                str_member(w, "cpus", cpus);
                str_member(w, "status", mpi_pstate_policy_status_name(d->status));
                str_member(w, "governor", d->target.governor);
                uint_member(w, "min_khz", d->target.min_khz);
                uint_member(w, "max_khz", d->target.max_khz);
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
        str_member(w, "cpus", c->cpus);
        str_member(w, "outside", c->outside);
        str_member(w, "shared", c->shared);
        uint_member(w, "other_jobs", c->other_jobs);
        str_member(w, "first_other",
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
                str_member(w, "name", slash + 1);
                str_member(w, "dir", dir);
                uint_member(w, "dev", r->shm_dev);
                uint_member(w, "ino", r->shm_ino);
                uint_member(w, "nslots", r->shm_nslots);
                uint_member(w, "bytes",
                            (unsigned long long)MPI_PSTATE_SEG_HEADER_SIZE +
                                (unsigned long long)r->shm_nslots * MPI_PSTATE_SLOT_SIZE);
                uint_member(w, "uid", r->shm_uid);
                mpi_pstate_json_close(w);
        }
        mpi_pstate_json_close(w);
}

static void agent(struct mpi_pstate_json *w, const struct mpi_pstate_steprec *r)
{
        mpi_pstate_json_key(w, "agent");
        mpi_pstate_json_open(w, '{', NULL);
        str_member(w, "status", r->agent);
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
        str_member(w, "state", r->ended ? "done" : "pending");
        uint_member(w, "restored", r->restored);
        uint_member(w, "foreign", r->foreign);
        uint_member(w, "failed", r->failed);
        mpi_pstate_json_close(w);
}

int mpi_pstate_steprec_format(const struct mpi_pstate_steprec *r, char *buf, size_t len)
{
        struct mpi_pstate_json w;

        mpi_pstate_json_fixed(&w, buf, len);
        w.compact = true;
        mpi_pstate_json_open(&w, '{', NULL);
        uint_member(&w, "version", MPI_PSTATE_STEPREC_VERSION);
        uint_member(&w, "job", r->job);
        uint_member(&w, "step", r->step);
        str_member(&w, "node", r->node);
        str_member(&w, "mode", r->mode);
        mpi_pstate_json_key(&w, "launcher");
        mpi_pstate_json_bool(&w, r->launcher);
        str_member(&w, "cpus", r->cpus);
        str_member(&w, "governor", r->governor);
        str_member(&w, "mechanism", r->mechanism);
        str_member(&w, "driver", r->policy && r->policy->driver[0] ? r->policy->driver : NULL);
        str_member(&w, "preload", r->preload);
        str_member(&w, "container", r->container);
        str_member(&w, "unmeasured", r->unmeasured);
        cgroup(&w, r->cgroup);
        str_member(&w, "shm", r->shm);
        segments(&w, r);
        agent(&w, r);
        domains(&w, r->policy);
        restore(&w, r);
        mpi_pstate_json_close(&w);
        mpi_pstate_json_put(&w, "\n");
        return w.failed ? -ENOSPC : (int)w.len;
}
