/* SPDX-License-Identifier: BSD-3-Clause */
/* Task placement, computed (placement.h): the cpuset of each local task of a
 * step from the hwloc topology, the allocated cores and the bind mode, as a
 * pure function; nothing here binds a process.  Also the strict cpulist
 * parser and formatter and the topology load that numbers cores as slurmd
 * does. */
#include "placement.h"
#include "errmsg.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

#define NMODES (MPI_PSTATE_PLACEMENT_USER + 1u)
#define NSMT (MPI_PSTATE_PLACEMENT_SMT_ALL + 1u)

/* Slurm counts a PU as a core when the machine reports no cores; do the same
 * so that core indices keep meaning what slurmd meant. */
static hwloc_obj_type_t core_type(hwloc_topology_t topo)
{
        return hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
}

/* Infinite bitmaps would make the foreach loops below endless, and huge ones
 * would let a list in the environment size our allocations. */
static int check_bounded(hwloc_const_bitmap_t set)
{
        if (hwloc_bitmap_weight(set) < 0)
                return -EINVAL;
        if (hwloc_bitmap_last(set) > (int)MPI_PSTATE_PLACEMENT_MAX_INDEX)
                return -ERANGE;
        return 0;
}

static int add_core_cpus(hwloc_topology_t topo, hwloc_obj_t core, enum mpi_pstate_placement_smt smt,
                         hwloc_bitmap_t out)
{
        hwloc_obj_t pu;

        if (smt == MPI_PSTATE_PLACEMENT_SMT_ALL || core->type == HWLOC_OBJ_PU)
                return hwloc_bitmap_or(out, out, core->cpuset) < 0 ? -ENOMEM : 0;
        /* Logical order, not the lowest OS index: the first hardware thread is
         * the one Slurm and the kernel's sibling lists name first. */
        pu = hwloc_get_obj_inside_cpuset_by_type(topo, core->cpuset, HWLOC_OBJ_PU, 0);
        if (!pu)
                return -ERANGE;
        return hwloc_bitmap_set(out, pu->os_index) < 0 ? -ENOMEM : 0;
}

/* One index of a bounded set mapped into the output set (-ERANGE when the
 * topology has no such object). */
typedef int (*map_one_fn)(hwloc_topology_t topo, hwloc_obj_type_t core, unsigned i,
                          enum mpi_pstate_placement_smt smt, hwloc_bitmap_t out);

/* The output is written only when every index mapped. */
static int map_set(hwloc_topology_t topo, hwloc_const_bitmap_t in,
                   enum mpi_pstate_placement_smt smt, map_one_fn one, hwloc_bitmap_t out)
{
        hwloc_bitmap_t tmp;
        hwloc_obj_type_t type;
        unsigned i;
        int rc = check_bounded(in);

        if (rc)
                return rc;
        tmp = hwloc_bitmap_alloc();
        if (!tmp)
                return -ENOMEM;
        type = core_type(topo);
        hwloc_bitmap_foreach_begin(i, in)
        {
                rc = one(topo, type, i, smt, tmp);
                if (rc)
                        goto out;
        }
        hwloc_bitmap_foreach_end();
        rc = hwloc_bitmap_copy(out, tmp) < 0 ? -ENOMEM : 0;
out:
        hwloc_bitmap_free(tmp);
        return rc;
}

static int core_cpus(hwloc_topology_t topo, hwloc_obj_type_t type, unsigned i,
                     enum mpi_pstate_placement_smt smt, hwloc_bitmap_t out)
{
        hwloc_obj_t core = hwloc_get_obj_by_type(topo, type, i);

        return core ? add_core_cpus(topo, core, smt, out) : -ERANGE;
}

static int cpu_core(hwloc_topology_t topo, hwloc_obj_type_t type, unsigned i,
                    enum mpi_pstate_placement_smt smt, hwloc_bitmap_t out)
{
        hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, i);
        hwloc_obj_t core = NULL;

        (void)smt;
        if (pu)
                core = type == HWLOC_OBJ_PU ? pu : hwloc_get_ancestor_obj_by_type(topo, type, pu);
        if (!core)
                return -ERANGE;
        return hwloc_bitmap_set(out, core->logical_index) < 0 ? -ENOMEM : 0;
}

int mpi_pstate_placement_cores_to_cpus(hwloc_topology_t topo, hwloc_const_bitmap_t cores,
                                       enum mpi_pstate_placement_smt smt, hwloc_bitmap_t cpus)
{
        if (!topo || !cores || !cpus || (unsigned)smt >= NSMT)
                return -EINVAL;
        return map_set(topo, cores, smt, core_cpus, cpus);
}

int mpi_pstate_placement_cpus_to_cores(hwloc_topology_t topo, hwloc_const_bitmap_t cpus,
                                       hwloc_bitmap_t cores)
{
        if (!topo || !cpus || !cores)
                return -EINVAL;
        return map_set(topo, cpus, MPI_PSTATE_PLACEMENT_SMT_ALL, cpu_core, cores);
}

/* ---- topology ----------------------------------------------------------- */

/* Discovery components whose work pinning never uses: x86 reads CPUID on
 * every PU, binding the caller's thread to each in turn (a trap to the
 * hypervisor per CPUID in a VM); the I/O ones would scan devices the type
 * filters drop anyway.  The Linux component alone gives packages, cores and
 * NUMA nodes from sysfs.  A name this hwloc does not know is skipped. */
static void skip_components(hwloc_topology_t topo)
{
#if HWLOC_API_VERSION >= 0x00020100
        static const char *const skip[] = {"x86", "pci", "opencl", "gl"};

        for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
                (void)hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                                    skip[i]);
#else
        (void)topo;
#endif
}

int mpi_pstate_placement_topology_load(hwloc_topology_t *topo, const char *xml)
{
        static const hwloc_obj_type_t keep[] = {HWLOC_OBJ_PACKAGE, HWLOC_OBJ_CORE};
        int rc = -ENOMEM;

        if (!topo)
                return -EINVAL;
        if (hwloc_topology_init(topo) != 0) {
                *topo = NULL;
                return -ENOMEM;
        }
        if (hwloc_topology_set_all_types_filter(*topo, HWLOC_TYPE_FILTER_KEEP_NONE) != 0 ||
            hwloc_topology_set_flags(*topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0)
                goto fail;
        for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
                if (hwloc_topology_set_type_filter(*topo, keep[i], HWLOC_TYPE_FILTER_KEEP_ALL))
                        goto fail;
        if (xml) {
                if (hwloc_topology_set_xml(*topo, xml) != 0) {
                        rc = errno ? -errno : -EINVAL;
                        goto fail;
                }
        } else {
                skip_components(*topo);
        }
        if (hwloc_topology_load(*topo) == 0)
                return 0;
        rc = errno ? -errno : -EIO;
fail:
        hwloc_topology_destroy(*topo);
        *topo = NULL;
        return rc;
}

/* ---- placement ---------------------------------------------------------- */

struct core_ent {
        hwloc_obj_t obj;
        unsigned pkg;  /* package logical index, 0 without packages */
        unsigned numa; /* NUMA node logical index, UINT_MAX if none covers the core */
};

/* The allocated cores of one level cut into groups (NUMA domains, packages or
 * the whole node), each group cut into slots of cores_per_task cores.  Groups
 * are numbered in order of their first core, so in hwloc logical order. */
struct layout {
        unsigned *buf;
        unsigned ngroups, nparents, slots;
        unsigned *start;   /* [ngroups + 1]: group g's cores are members[start[g]..start[g+1]) */
        unsigned *members; /* [n]: indices into the core array */
        unsigned *parent;  /* [ngroups]: package-level parent, dense, for scatter */
        unsigned *cap;     /* [ngroups]: slots in the group */
        unsigned *used;    /* [ngroups]: scratch for scatter */
        unsigned *prem;    /* [ngroups]: scratch, slots left per parent */
        unsigned *pcur;    /* [ngroups]: scratch, next group to try per parent */
};

static void layout_free(struct layout *l)
{
        free(l->buf);
        memset(l, 0, sizeof(*l));
}

static void level_keys(const struct core_ent *c, enum mpi_pstate_placement_level level, unsigned *a,
                       unsigned *b, unsigned *pk)
{
        *a = level == MPI_PSTATE_PLACEMENT_LEVEL_MACHINE ? 0 : c->pkg;
        *b = level == MPI_PSTATE_PLACEMENT_LEVEL_NUMA ? c->numa : 0;
        *pk = *a;
}

static int layout_build(struct layout *l, const struct core_ent *cores, unsigned n,
                        enum mpi_pstate_placement_level level, unsigned cpt)
{
        unsigned *group_of, *ka, *kb, *kp, *size;
        unsigned k, g;

        memset(l, 0, sizeof(*l));
        /* 12 arrays of at most n entries plus one: n <= MAX_INDEX + 1, no overflow. */
        l->buf = calloc(12 * (size_t)n + 1, sizeof(unsigned));
        if (!l->buf)
                return -ENOMEM;
        l->start = l->buf;
        l->members = l->start + n + 1;
        l->parent = l->members + n;
        l->cap = l->parent + n;
        l->used = l->cap + n;
        l->prem = l->used + n;
        l->pcur = l->prem + n;
        group_of = l->pcur + n;
        ka = group_of + n;
        kb = ka + n;
        kp = kb + n;
        size = kp + n;

        for (k = 0; k < n; k++) {
                unsigned a, b, pk;
                level_keys(&cores[k], level, &a, &b, &pk);
                for (g = 0; g < l->ngroups; g++)
                        if (ka[g] == a && kb[g] == b)
                                break;
                if (g == l->ngroups) {
                        ka[g] = a;
                        kb[g] = b;
                        kp[g] = pk;
                        l->ngroups++;
                }
                group_of[k] = g;
                size[g]++;
        }
        for (g = 0; g < l->ngroups; g++) {
                unsigned h;
                for (h = 0; h < g; h++)
                        if (kp[h] == kp[g])
                                break;
                l->parent[g] = h < g ? l->parent[h] : l->nparents++;
                l->start[g + 1] = l->start[g] + size[g];
                l->cap[g] = size[g] / cpt;
                l->slots += l->cap[g];
                size[g] = 0; /* reused as the fill cursor below */
        }
        for (k = 0; k < n; k++) {
                g = group_of[k];
                l->members[l->start[g] + size[g]++] = k;
        }
        return 0;
}

/* Slot number t (t < slots) in fill order: group after group. */
static void slot_sequential(const struct layout *l, unsigned t, unsigned *gout, unsigned *jout)
{
        unsigned g;

        for (g = 0; g < l->ngroups; g++) {
                if (t < l->cap[g])
                        break;
                t -= l->cap[g];
        }
        *gout = g;
        *jout = t;
}

/* Slot number t (t < slots) in scatter order: the next package with room, then
 * the next of its groups with room, round-robin at both levels.  Skipping full
 * ones keeps an uneven allocation fully used instead of oversubscribing its
 * small domains. */
static void slot_scatter(struct layout *l, unsigned t, unsigned *gout, unsigned *jout)
{
        unsigned g, p, pp = 0, step;

        for (g = 0; g < l->ngroups; g++) {
                l->used[g] = 0;
                l->prem[g] = 0;
                l->pcur[g] = 0;
        }
        for (g = 0; g < l->ngroups; g++)
                l->prem[l->parent[g]] += l->cap[g];
        for (step = 0;; step++) {
                p = pp;
                while (l->prem[p] == 0)
                        p = (p + 1) % l->nparents;
                pp = (p + 1) % l->nparents;
                g = l->pcur[p];
                while (l->parent[g] != p || l->used[g] >= l->cap[g])
                        g = (g + 1) % l->ngroups;
                l->pcur[p] = (g + 1) % l->ngroups;
                if (step == t)
                        break;
                l->used[g]++;
                l->prem[p]--;
        }
        *gout = g;
        *jout = l->used[g];
}

static int collect_cores(hwloc_topology_t topo, hwloc_const_bitmap_t alloc, struct core_ent *cores,
                         unsigned n, char *err, size_t errlen)
{
        hwloc_obj_type_t type = core_type(topo);
        int ncores = hwloc_get_nbobjs_by_type(topo, type);
        unsigned i, k = 0;

        hwloc_bitmap_foreach_begin(i, alloc)
        {
                hwloc_obj_t obj = hwloc_get_obj_by_type(topo, type, i);
                hwloc_obj_t pkg, nn = NULL;
                if (!obj || k >= n) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "allocated core %u is not on this node (%d cores)", i,
                                              ncores);
                        return -ERANGE;
                }
                pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
                /* NUMA nodes hang off the CPU tree as memory children, so find
                 * the covering one by cpuset; with several (DDR + HBM) the
                 * first in logical order wins, consistently for every core. */
                while ((nn = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nn)))
                        if (nn->cpuset && hwloc_bitmap_isincluded(obj->cpuset, nn->cpuset))
                                break;
                cores[k].obj = obj;
                cores[k].pkg = pkg ? pkg->logical_index : 0;
                cores[k].numa = nn ? nn->logical_index : UINT_MAX;
                k++;
        }
        hwloc_bitmap_foreach_end();
        return 0;
}

static int check_req(const struct mpi_pstate_placement_req *req, char *err, size_t errlen)
{
        if ((unsigned)req->mode >= NMODES) {
                mpi_pstate_errmsg_set(err, errlen, "unknown pinning mode %d", (int)req->mode);
                return -EINVAL;
        }
        if ((unsigned)req->smt >= NSMT) {
                mpi_pstate_errmsg_set(err, errlen, "unknown SMT policy %d", (int)req->smt);
                return -EINVAL;
        }
        if (req->ntasks == 0 || req->task >= req->ntasks) {
                mpi_pstate_errmsg_set(err, errlen, "task %u out of range: %u local tasks",
                                      req->task, req->ntasks);
                return -EINVAL;
        }
        if (req->cores_per_task > MPI_PSTATE_PLACEMENT_MAX_INDEX + 1) {
                mpi_pstate_errmsg_set(err, errlen, "%u cores per task is beyond any node",
                                      req->cores_per_task);
                return -ERANGE;
        }
        if ((req->mode == MPI_PSTATE_PLACEMENT_USER) != (req->user_cpus != NULL)) {
                mpi_pstate_errmsg_set(err, errlen,
                                      "a user CPU mask goes with mode user and only with it");
                return -EINVAL;
        }
        return 0;
}

/* The allocated cores as a bitmap of core indexes: the request's, or every
 * core of the node. */
static int alloc_cores(hwloc_topology_t topo, const struct mpi_pstate_placement_req *req,
                       hwloc_bitmap_t all, char *err, size_t errlen)
{
        int w;

        if (req->alloc_cores) {
                int rc = check_bounded(req->alloc_cores);

                if (rc) {
                        mpi_pstate_errmsg_set(err, errlen,
                                              "allocated core list is unbounded or too large");
                        return rc;
                }
                return hwloc_bitmap_copy(all, req->alloc_cores) < 0 ? -ENOMEM : 0;
        }
        w = hwloc_get_nbobjs_by_type(topo, core_type(topo));
        return w > 0 && hwloc_bitmap_set_range(all, 0, w - 1) < 0 ? -ENOMEM : 0;
}

/* Modes none and user: every CPU of the allocation, narrowed to the user's
 * mask for user. */
static int pin_unplaced(hwloc_topology_t topo, const struct mpi_pstate_placement_req *req,
                        hwloc_const_bitmap_t all, const struct core_ent *cores, unsigned n,
                        hwloc_bitmap_t res, struct mpi_pstate_placement_info *inf, char *err,
                        size_t errlen)
{
        char ubuf[96], abuf[96];
        hwloc_bitmap_t tmp;
        int rc = 0;

        for (unsigned k = 0; k < n && !rc; k++)
                rc = add_core_cpus(topo, cores[k].obj, MPI_PSTATE_PLACEMENT_SMT_ALL, res);
        if (rc || req->mode == MPI_PSTATE_PLACEMENT_NONE)
                return rc;
        if (!hwloc_bitmap_isincluded(req->user_cpus, res))
                inf->flags |= MPI_PSTATE_PLACEMENT_F_MASK_TRIMMED;
        if (hwloc_bitmap_and(res, res, req->user_cpus) < 0)
                return -ENOMEM;
        if (!hwloc_bitmap_iszero(res))
                return 0;
        tmp = hwloc_bitmap_alloc();
        if (!tmp ||
            mpi_pstate_placement_cores_to_cpus(topo, all, MPI_PSTATE_PLACEMENT_SMT_ALL, tmp) != 0 ||
            mpi_pstate_placement_cpulist_format(tmp, abuf, sizeof(abuf)) != 0)
                snprintf(abuf, sizeof(abuf), "(long list)");
        hwloc_bitmap_free(tmp);
        if (mpi_pstate_placement_cpulist_format(req->user_cpus, ubuf, sizeof(ubuf)))
                snprintf(ubuf, sizeof(ubuf), "(long list)");
        mpi_pstate_errmsg_set(err, errlen,
                              "task %u: user CPU mask %s has no CPU in the allocation %s",
                              req->task, ubuf, abuf);
        return -EINVAL;
}

/* Modes cores, compact, scatter.  cores: plain allocation order.
 * compact/scatter: the finest level whose slots hold every task; failing
 * that, the level with the most slots (finest on a tie) so that
 * oversubscription is as light as it can be. */
static int pin_placed(hwloc_topology_t topo, const struct mpi_pstate_placement_req *req,
                      const struct core_ent *cores, unsigned n, unsigned cpt, hwloc_bitmap_t res,
                      struct mpi_pstate_placement_info *inf)
{
        struct layout best = {0}, cur = {0};
        unsigned k, g, j, t;
        int rc = 0;

        for (int lv = req->mode == MPI_PSTATE_PLACEMENT_CORES ? MPI_PSTATE_PLACEMENT_LEVEL_MACHINE
                                                              : MPI_PSTATE_PLACEMENT_LEVEL_NUMA;
             lv <= MPI_PSTATE_PLACEMENT_LEVEL_MACHINE; lv++) {
                rc = layout_build(&cur, cores, n, (enum mpi_pstate_placement_level)lv, cpt);
                if (rc)
                        goto out;
                if (!best.buf || cur.slots > best.slots) {
                        layout_free(&best);
                        best = cur;
                        memset(&cur, 0, sizeof(cur));
                        inf->level = (enum mpi_pstate_placement_level)lv;
                } else {
                        layout_free(&cur);
                }
                if (best.slots >= req->ntasks)
                        break;
        }
        inf->slots = best.slots;
        if (best.slots < req->ntasks)
                inf->flags |= MPI_PSTATE_PLACEMENT_F_OVERSUBSCRIBED;
        if (best.slots == 0) {
                /* A task wider than the whole allocation: give it everything. */
                for (k = 0; k < n && !rc; k++)
                        rc = add_core_cpus(topo, cores[k].obj, req->smt, res);
                goto out;
        }
        t = req->task % best.slots;
        if (req->mode == MPI_PSTATE_PLACEMENT_SCATTER)
                slot_scatter(&best, t, &g, &j);
        else
                slot_sequential(&best, t, &g, &j);
        for (k = 0; k < cpt && !rc; k++)
                rc = add_core_cpus(topo, cores[best.members[best.start[g] + j * cpt + k]].obj,
                                   req->smt, res);
out:
        layout_free(&best);
        layout_free(&cur);
        return rc;
}

int mpi_pstate_placement_compute(hwloc_topology_t topo, const struct mpi_pstate_placement_req *req,
                                 hwloc_bitmap_t out, struct mpi_pstate_placement_info *info,
                                 char *err, size_t errlen)
{
        struct mpi_pstate_placement_info inf = {0, MPI_PSTATE_PLACEMENT_LEVEL_MACHINE, 1};
        hwloc_bitmap_t all = NULL, res = NULL;
        struct core_ent *cores = NULL;
        unsigned n;
        int rc, w;

        if (!topo || !req || !out) {
                mpi_pstate_errmsg_set(err, errlen, "missing topology, request or output set");
                return -EINVAL;
        }
        rc = check_req(req, err, errlen);
        if (rc)
                return rc;
        all = hwloc_bitmap_alloc();
        res = hwloc_bitmap_alloc();
        rc = all && res ? alloc_cores(topo, req, all, err, errlen) : -ENOMEM;
        if (rc)
                goto out;
        w = hwloc_bitmap_weight(all);
        if (w <= 0) {
                mpi_pstate_errmsg_set(err, errlen, "empty core allocation");
                rc = -EINVAL;
                goto out;
        }
        n = (unsigned)w;
        cores = calloc(n, sizeof(*cores));
        rc = cores ? collect_cores(topo, all, cores, n, err, errlen) : -ENOMEM;
        if (rc)
                goto out;
        if (req->mode == MPI_PSTATE_PLACEMENT_NONE || req->mode == MPI_PSTATE_PLACEMENT_USER)
                rc = pin_unplaced(topo, req, all, cores, n, res, &inf, err, errlen);
        else
                rc = pin_placed(topo, req, cores, n, req->cores_per_task ? req->cores_per_task : 1,
                                res, &inf);
        if (rc == 0 && hwloc_bitmap_copy(out, res) < 0)
                rc = -ENOMEM;
        if (rc == 0 && info)
                *info = inf;
out:
        if (rc == -ENOMEM)
                mpi_pstate_errmsg_set(err, errlen, "out of memory");
        free(cores);
        hwloc_bitmap_free(res);
        hwloc_bitmap_free(all);
        return rc;
}

/* ---- names and lists ---------------------------------------------------- */

/* Copies the run of digits at *pp into a terminated buffer so the shared
 * strict parser sees exactly one number and nothing it might forgive. */
static int parse_index(const char **pp, uint64_t *v)
{
        const char *p = *pp;
        char num[24];
        size_t len = 0;
        int rc;

        while (p[len] >= '0' && p[len] <= '9') {
                if (len + 1 >= sizeof(num))
                        return -ERANGE;
                num[len] = p[len];
                len++;
        }
        if (len == 0)
                return -EINVAL;
        num[len] = '\0';
        rc = mpi_pstate_parse_u64(num, 0, MPI_PSTATE_PLACEMENT_MAX_INDEX, v);
        if (rc)
                return rc;
        *pp = p + len;
        return 0;
}

int mpi_pstate_placement_cpulist_parse(const char *s, hwloc_bitmap_t out)
{
        hwloc_bitmap_t tmp = NULL;
        const char *p = s;
        int rc = 0;

        if (!s || !out)
                return -EINVAL;
        tmp = hwloc_bitmap_alloc();
        if (!tmp)
                return -ENOMEM;
        if (*p != '\0' && *p != '\n') {
                for (;;) {
                        uint64_t lo, hi;
                        rc = parse_index(&p, &lo);
                        if (rc)
                                goto out;
                        hi = lo;
                        if (*p == '-') {
                                p++;
                                rc = parse_index(&p, &hi);
                                if (rc)
                                        goto out;
                                if (hi < lo) {
                                        rc = -EINVAL;
                                        goto out;
                                }
                        }
                        if (hwloc_bitmap_set_range(tmp, (unsigned)lo, (int)hi) < 0) {
                                rc = -ENOMEM;
                                goto out;
                        }
                        if (*p != ',')
                                break;
                        p++;
                }
        }
        if (*p == '\n')
                p++;
        if (*p != '\0') {
                rc = -EINVAL;
                goto out;
        }
        rc = hwloc_bitmap_copy(out, tmp) < 0 ? -ENOMEM : 0;
out:
        hwloc_bitmap_free(tmp);
        return rc;
}

int mpi_pstate_placement_cpulist_format(hwloc_const_bitmap_t set, char *buf, size_t len)
{
        int n;

        if (!set || !buf || len == 0 || len > INT_MAX)
                return -EINVAL;
        if (hwloc_bitmap_weight(set) < 0)
                return -EINVAL;
        n = hwloc_bitmap_list_snprintf(buf, len, set);
        if (n < 0)
                return -ENOMEM;
        if ((size_t)n >= len) {
                buf[0] = '\0';
                return -ENOSPC;
        }
        return 0;
}
