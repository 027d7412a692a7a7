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
        mpi_pstate_json_put(w, "[");
        for (unsigned i = 0; p && i < p->ndomains; i++) {
                const struct mpi_pstate_policy_domain *d = &p->domains[i];
                char cpus[256];

                if (mpi_pstate_steprec_cpulist(&d->cpus, cpus, sizeof(cpus)) < 0)
                        snprintf(cpus, sizeof(cpus), "?");
                mpi_pstate_json_put(w, "%s{\"policy\":", i ? "," : "");
                mpi_pstate_json_str(w, d->name);
                mpi_pstate_json_put(w, ",\"cpus\":");
                mpi_pstate_json_str(w, cpus);
                mpi_pstate_json_put(w, ",\"status\":");
                mpi_pstate_json_str(w, mpi_pstate_policy_status_name(d->status));
                mpi_pstate_json_put(w, ",\"governor\":");
                mpi_pstate_json_str(w, d->target.governor);
                mpi_pstate_json_put(w, ",\"min_khz\":%u,\"max_khz\":%u}", d->target.min_khz,
                                    d->target.max_khz);
        }
        mpi_pstate_json_put(w, "]");
}

int mpi_pstate_steprec_format(const struct mpi_pstate_steprec *r, char *buf, size_t len)
{
        struct mpi_pstate_json w;

        mpi_pstate_json_fixed(&w, buf, len);
        mpi_pstate_json_put(&w, "{\"version\":%d,\"job\":%u,\"step\":%u,\"node\":",
                            MPI_PSTATE_STEPREC_VERSION, r->job, r->step);
        mpi_pstate_json_str(&w, r->node);
        mpi_pstate_json_put(&w, ",\"mode\":");
        mpi_pstate_json_str(&w, r->mode);
        mpi_pstate_json_put(&w, ",\"launcher\":%s,\"cpus\":", r->launcher ? "true" : "false");
        mpi_pstate_json_str(&w, r->cpus);
        mpi_pstate_json_put(&w, ",\"governor\":");
        mpi_pstate_json_str(&w, r->governor);
        mpi_pstate_json_put(&w, ",\"mechanism\":");
        mpi_pstate_json_str(&w, r->mechanism);
        mpi_pstate_json_put(&w, ",\"driver\":");
        mpi_pstate_json_str(&w, r->policy && r->policy->driver[0] ? r->policy->driver : NULL);
        mpi_pstate_json_put(&w, ",\"preload\":");
        mpi_pstate_json_str(&w, r->preload);
        mpi_pstate_json_put(&w, ",\"container\":");
        mpi_pstate_json_str(&w, r->container);
        mpi_pstate_json_put(&w, ",\"unmeasured\":");
        mpi_pstate_json_str(&w, r->unmeasured);
        if (r->cgroup) {
                mpi_pstate_json_put(&w, ",\"cgroup\":{\"cpus\":");
                mpi_pstate_json_str(&w, r->cgroup->cpus);
                mpi_pstate_json_put(&w, ",\"outside\":");
                mpi_pstate_json_str(&w, r->cgroup->outside);
                mpi_pstate_json_put(&w, ",\"shared\":");
                mpi_pstate_json_str(&w, r->cgroup->shared);
                mpi_pstate_json_put(&w,
                                    ",\"other_jobs\":%u,\"first_other\":", r->cgroup->other_jobs);
                mpi_pstate_json_str(&w, r->cgroup->other_jobs && r->cgroup->first_other &&
                                                r->cgroup->first_other[0]
                                            ? r->cgroup->first_other
                                            : NULL);
                mpi_pstate_json_put(&w, "}");
        }
        mpi_pstate_json_put(&w, ",\"shm\":");
        mpi_pstate_json_str(&w, r->shm);
        mpi_pstate_json_put(&w, ",\"segments\":[");
        if (r->shm && strrchr(r->shm, '/')) {
                const char *slash = strrchr(r->shm, '/');
                char dir[256];

                snprintf(dir, sizeof(dir), "%.*s", (int)(slash - r->shm), r->shm);
                mpi_pstate_json_put(&w, "{\"name\":");
                mpi_pstate_json_str(&w, slash + 1);
                mpi_pstate_json_put(&w, ",\"dir\":");
                mpi_pstate_json_str(&w, dir);
                mpi_pstate_json_put(
                    &w, ",\"dev\":%llu,\"ino\":%llu,\"nslots\":%u,\"bytes\":%llu,\"uid\":%u}",
                    (unsigned long long)r->shm_dev, (unsigned long long)r->shm_ino, r->shm_nslots,
                    (unsigned long long)MPI_PSTATE_SEG_HEADER_SIZE +
                        (unsigned long long)r->shm_nslots * MPI_PSTATE_SLOT_SIZE,
                    r->shm_uid);
        }
        mpi_pstate_json_put(&w, "]");
        mpi_pstate_json_put(&w, ",\"agent\":{\"status\":");
        mpi_pstate_json_str(&w, r->agent);
        if (r->agent_pid > 0)
                mpi_pstate_json_put(&w, ",\"pid\":%d}", r->agent_pid);
        else
                mpi_pstate_json_put(&w, ",\"pid\":null}");
        mpi_pstate_json_put(&w, ",\"domains\":");
        domains(&w, r->policy);
        mpi_pstate_json_put(
            &w, ",\"restore\":{\"state\":\"%s\",\"restored\":%u,\"foreign\":%u,\"failed\":%u}}\n",
            r->ended ? "done" : "pending", r->restored, r->foreign, r->failed);
        return w.failed ? -ENOSPC : (int)w.len;
}
