#include "steprec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "slot.h"

struct out {
        char *buf;
        size_t len, o;
        int full;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *w, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (w->full)
                return;
        va_start(ap, fmt);
        n = vsnprintf(w->buf + w->o, w->len - w->o, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= w->len - w->o) {
                w->full = 1;
                return;
        }
        w->o += (size_t)n;
}

/* A JSON string, or null.  Paths and names come from admin config and the
 * kernel, but escaping costs nothing and keeps the record parseable. */
static void str(struct out *w, const char *s)
{
        if (!s) {
                put(w, "null");
                return;
        }
        put(w, "\"");
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;

                if (c == '"' || c == '\\')
                        put(w, "\\%c", c);
                else if (c < 0x20 || c == 0x7f)
                        put(w, "\\u%04x", c);
                else
                        put(w, "%c", c);
        }
        put(w, "\"");
}

int mpi_pstate_steprec_cpulist(const cpu_set_t *set, char *buf, size_t len)
{
        struct out w = {.buf = buf, .len = len};

        if (len == 0)
                return -ENOSPC;
        buf[0] = '\0';
        for (int c = 0; c < CPU_SETSIZE; c++) {
                int e = c;

                if (!CPU_ISSET(c, set))
                        continue;
                while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
                        e++;
                put(&w, w.o ? "," : "");
                if (e == c)
                        put(&w, "%d", c);
                else
                        put(&w, "%d-%d", c, e);
                c = e;
        }
        return w.full ? -ENOSPC : (int)w.o;
}

static void domains(struct out *w, const struct mpi_pstate_policy_result *p)
{
        put(w, "[");
        for (unsigned i = 0; p && i < p->ndomains; i++) {
                const struct mpi_pstate_policy_domain *d = &p->domains[i];
                char cpus[256];

                if (mpi_pstate_steprec_cpulist(&d->cpus, cpus, sizeof(cpus)) < 0)
                        snprintf(cpus, sizeof(cpus), "?");
                put(w, "%s{\"policy\":", i ? "," : "");
                str(w, d->name);
                put(w, ",\"cpus\":");
                str(w, cpus);
                put(w, ",\"status\":");
                str(w, mpi_pstate_policy_status_name(d->status));
                put(w, ",\"governor\":");
                str(w, d->target.governor);
                put(w, ",\"min_khz\":%u,\"max_khz\":%u}", d->target.min_khz, d->target.max_khz);
        }
        put(w, "]");
}

int mpi_pstate_steprec_format(const struct mpi_pstate_steprec *r, char *buf, size_t len)
{
        struct out w = {.buf = buf, .len = len};

        if (len == 0)
                return -ENOSPC;
        put(&w, "{\"version\":%d,\"job\":%u,\"step\":%u,\"node\":", MPI_PSTATE_STEPREC_VERSION,
            r->job, r->step);
        str(&w, r->node);
        put(&w, ",\"mode\":");
        str(&w, r->mode);
        put(&w, ",\"launcher\":%s,\"cpus\":", r->launcher ? "true" : "false");
        str(&w, r->cpus);
        put(&w, ",\"governor\":");
        str(&w, r->governor);
        put(&w, ",\"mechanism\":");
        str(&w, r->mechanism);
        put(&w, ",\"driver\":");
        str(&w, r->policy && r->policy->driver[0] ? r->policy->driver : NULL);
        put(&w, ",\"preload\":");
        str(&w, r->preload);
        put(&w, ",\"shm\":");
        str(&w, r->shm);
        put(&w, ",\"segments\":[");
        if (r->shm && strrchr(r->shm, '/')) {
                const char *slash = strrchr(r->shm, '/');

                put(&w, "{\"name\":");
                str(&w, slash + 1);
                put(&w, ",\"dir\":\"%.*s\"", (int)(slash - r->shm), r->shm);
                put(&w, ",\"dev\":%llu,\"ino\":%llu,\"nslots\":%u,\"bytes\":%llu,\"uid\":%u}",
                    (unsigned long long)r->shm_dev, (unsigned long long)r->shm_ino, r->shm_nslots,
                    (unsigned long long)MPI_PSTATE_SEG_HEADER_SIZE +
                        (unsigned long long)r->shm_nslots * MPI_PSTATE_SLOT_SIZE,
                    r->shm_uid);
        }
        put(&w, "]");
        put(&w, ",\"agent\":{\"status\":");
        str(&w, r->agent);
        if (r->agent_pid > 0)
                put(&w, ",\"pid\":%d}", r->agent_pid);
        else
                put(&w, ",\"pid\":null}");
        put(&w, ",\"domains\":");
        domains(&w, r->policy);
        put(&w, ",\"restore\":{\"state\":\"%s\",\"restored\":%u,\"foreign\":%u,\"failed\":%u}}\n",
            r->ended ? "done" : "pending", r->restored, r->foreign, r->failed);
        return w.full ? -ENOSPC : (int)w.o;
}
