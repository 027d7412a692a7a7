/* SPDX-License-Identifier: BSD-3-Clause */
/* Golden placements for spank/placement.c.  Topologies (tests/data/topo/):
 *   2s-snc2-smt.xml    pack:2 numa:2 core:8 pu:2, Intel-style PU numbering:
 *                      core c holds PUs c and c+32; NUMA n holds cores 8n..8n+7
 *   2s-snc2-nosmt.xml  pack:2 numa:2 core:8 pu:1, core c = PU c
 *   8s.xml             pack:8 numa:1 core:4 pu:1, package p = cores 4p..4p+3
 *   1s2c-vm.xml        the 2-core development VM (lstopo --no-io export)
 * Every expected answer below was worked out by hand from docs/pinning.md,
 * not copied from the program's output. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "placement.h"
#include "check_main.h"

#define SNC_SMT "2s-snc2-smt.xml"
#define SNC_NOSMT "2s-snc2-nosmt.xml"
#define EIGHT "8s.xml"
#define VM "1s2c-vm.xml"

#define NUMA MPI_PSTATE_PLACEMENT_LEVEL_NUMA
#define PKG MPI_PSTATE_PLACEMENT_LEVEL_PACKAGE
#define NODE MPI_PSTATE_PLACEMENT_LEVEL_MACHINE
#define OVER MPI_PSTATE_PLACEMENT_F_OVERSUBSCRIBED
#define TRIM MPI_PSTATE_PLACEMENT_F_MASK_TRIMMED

/* spec: an XML file under tests/data/topo, "syn:<hwloc synthetic>", or
 * "this" for the machine the test runs on. */
static hwloc_topology_t load_topo(const char *spec)
{
        hwloc_topology_t t;
        char path[1024];

        ck_assert_int_eq(hwloc_topology_init(&t), 0);
        if (strncmp(spec, "syn:", 4) == 0) {
                ck_assert_int_eq(hwloc_topology_set_synthetic(t, spec + 4), 0);
        } else if (strcmp(spec, "this") != 0) {
                snprintf(path, sizeof(path), "%s/topo/%s", TEST_DATA_DIR, spec);
                ck_assert_msg(hwloc_topology_set_xml(t, path) == 0, "cannot load %s", path);
        }
        ck_assert_int_eq(hwloc_topology_load(t), 0);
        return t;
}

static hwloc_bitmap_t list(const char *s)
{
        hwloc_bitmap_t b = hwloc_bitmap_alloc();
        ck_assert_ptr_nonnull(b);
        ck_assert_msg(mpi_pstate_placement_cpulist_parse(s, b) == 0, "bad list in test: %s", s);
        return b;
}

static const char *fmt(hwloc_const_bitmap_t b, char *buf, size_t len)
{
        ck_assert_int_eq(mpi_pstate_placement_cpulist_format(b, buf, len), 0);
        return buf;
}

/* ---- golden table ------------------------------------------------------- */

struct golden {
        const char *topo;
        enum mpi_pstate_placement_mode mode;
        enum mpi_pstate_placement_smt smt;
        const char *alloc; /* core list, NULL = whole node */
        unsigned ntasks, cpt;
        const char *expect; /* cpu list of task 0 | task 1 | ... */
        unsigned flags;
        int level;
        unsigned slots;
};

#define ONE MPI_PSTATE_PLACEMENT_SMT_ONE
#define ALL MPI_PSTATE_PLACEMENT_SMT_ALL
/* The mode's word in test messages: options.def's, or "user". */
static const char *mode_word(enum mpi_pstate_placement_mode m)
{
        return m == MPI_PSTATE_PLACEMENT_USER
                   ? "user"
                   : mpi_pstate_options_bind_word((enum mpi_pstate_bind)m);
}

#define M_NONE MPI_PSTATE_PLACEMENT_NONE
#define M_CORES MPI_PSTATE_PLACEMENT_CORES
#define M_COMPACT MPI_PSTATE_PLACEMENT_COMPACT
#define M_SCATTER MPI_PSTATE_PLACEMENT_SCATTER

static const struct golden golden[] = {
    /* 0: cores, one PU per core: task i = core i = PU i */
    {SNC_SMT, M_CORES, ONE, NULL, 4, 1, "0|1|2|3", 0, NODE, 32},
    /* 1: cores, 2 per task, both hyperthreads: core c -> PUs c, c+32 */
    {SNC_SMT, M_CORES, ALL, NULL, 4, 2, "0-1,32-33|2-3,34-35|4-5,36-37|6-7,38-39", 0, NODE, 16},
    /* 2: scatter: packages alternate first, then the NUMA domains of each
     * package (N0, N2, N1, N3), then the next core of every domain */
    {SNC_SMT, M_SCATTER, ONE, NULL, 8, 1, "0|16|8|24|1|17|9|25", 0, NUMA, 32},
    /* 3: scatter, 4 cores and all PUs per task: one task per NUMA domain */
    {SNC_SMT, M_SCATTER, ALL, NULL, 4, 4, "0-3,32-35|16-19,48-51|8-11,40-43|24-27,56-59", 0, NUMA,
     8},
    /* 4: compact, 3 cores per task: 8 NUMA slots < 10 tasks, so packages
     * (5 slots each); no task crosses the socket boundary at core 16 */
    {SNC_SMT, M_COMPACT, ONE, NULL, 10, 3, "0-2|3-5|6-8|9-11|12-14|16-18|19-21|22-24|25-27|28-30",
     0, PKG, 10},
    /* 5: the same with cores: plain order, tasks 5 and 8 straddle domains */
    {SNC_SMT, M_CORES, ONE, NULL, 10, 3, "0-2|3-5|6-8|9-11|12-14|15-17|18-20|21-23|24-26|27-29", 0,
     NODE, 10},
    /* 6: compact, 8 tasks of 3 fit NUMA domains: 2 per domain, 2 cores idle each */
    {SNC_SMT, M_COMPACT, ONE, NULL, 8, 3, "0-2|3-5|8-10|11-13|16-18|19-21|24-26|27-29", 0, NUMA, 8},
    /* 7: only socket 1 allocated: scatter alternates its two NUMA domains */
    {SNC_SMT, M_SCATTER, ONE, "16-31", 4, 1, "16|24|17|25", 0, NUMA, 16},
    /* 8: holes: N0 {0,1,2}, N1 {8}, N2 {16,17}, N3 {30}; full domains skipped */
    {SNC_SMT, M_SCATTER, ONE, "0-2,8,16-17,30", 7, 1, "0|16|8|30|1|17|2", 0, NUMA, 7},
    /* 9: same holes with SMT: the hyperthread of each core comes along */
    {SNC_SMT, M_SCATTER, ALL, "0-2,8,16-17,30", 4, 1, "0,32|16,48|8,40|30,62", 0, NUMA, 7},
    /* 10: more tasks than cores: wrap around, flagged */
    {SNC_SMT, M_CORES, ONE, "0-3", 6, 1, "0|1|2|3|0|1", OVER, NODE, 4},
    /* 11: none: every PU of the allocation, SMT policy ignored */
    {SNC_SMT, M_NONE, ONE, "0-1,16", 2, 1, "0-1,16,32-33,48|0-1,16,32-33,48", 0, NODE, 1},
    /* 12: compact holes on a partial socket */
    {SNC_SMT, M_COMPACT, ONE, "0-4,8-12", 4, 2, "0-1|2-3|8-9|10-11", 0, NUMA, 4},

    /* 13: SMT off: one and all give the same answer */
    {SNC_NOSMT, M_SCATTER, ALL, NULL, 4, 2, "0-1|16-17|8-9|24-25", 0, NUMA, 16},
    {SNC_NOSMT, M_SCATTER, ONE, NULL, 4, 2, "0-1|16-17|8-9|24-25", 0, NUMA, 16},
    /* 15: compact keeps tasks inside N0 {0-4} and N1 {8-12}, leaving 4 and 12 */
    {SNC_NOSMT, M_COMPACT, ONE, "0-4,8-12", 4, 2, "0-1|2-3|8-9|10-11", 0, NUMA, 4},
    /* 16: cores on the same allocation crosses the hole: {4,8} */
    {SNC_NOSMT, M_CORES, ONE, "0-4,8-12", 4, 2, "0-1|2-3|4,8|9-10", 0, NODE, 5},
    /* 17: a fifth task no longer fits the NUMA domains: package level */
    {SNC_NOSMT, M_COMPACT, ONE, "0-4,8-12", 5, 2, "0-1|2-3|4,8|9-10|11-12", 0, PKG, 5},
    /* 18: socket 1 only, compact: fill N2 then N3 */
    {SNC_NOSMT, M_COMPACT, ONE, "16-31", 3, 6, "16-21|24-29|16-21", OVER, NUMA, 2},

    /* 19: 8 sockets: scatter puts consecutive ranks on consecutive sockets */
    {EIGHT, M_SCATTER, ONE, NULL, 8, 1, "0|4|8|12|16|20|24|28", 0, NUMA, 32},
    {EIGHT, M_SCATTER, ONE, NULL, 10, 1, "0|4|8|12|16|20|24|28|1|5", 0, NUMA, 32},
    {EIGHT, M_SCATTER, ONE, NULL, 8, 2, "0-1|4-5|8-9|12-13|16-17|20-21|24-25|28-29", 0, NUMA, 16},
    /* 22: 3 cores per task, one task per socket */
    {EIGHT, M_COMPACT, ONE, NULL, 8, 3, "0-2|4-6|8-10|12-14|16-18|20-22|24-26|28-30", 0, NUMA, 8},
    /* 23: 5 cores per task exceed a socket: the node level is the only way */
    {EIGHT, M_COMPACT, ONE, NULL, 2, 5, "0-4|5-9", 0, NODE, 6},
    {EIGHT, M_SCATTER, ONE, NULL, 2, 5, "0-4|5-9", 0, NODE, 6},
    /* 25: a task wider than the allocation gets all of it, flagged */
    {EIGHT, M_CORES, ONE, "0-3", 1, 5, "0-3", OVER, NODE, 0},
    /* 26: scatter over sockets 2 and 5 only */
    {EIGHT, M_SCATTER, ONE, "8-11,20-23", 4, 1, "8|20|9|21", 0, NUMA, 8},

    /* 27: the 2-core VM */
    {VM, M_CORES, ONE, NULL, 2, 1, "0|1", 0, NODE, 2},
    {VM, M_CORES, ALL, NULL, 3, 1, "0|1|0", OVER, NODE, 2},
    {VM, M_SCATTER, ONE, NULL, 2, 1, "0|1", 0, NUMA, 2},
    {VM, M_COMPACT, ONE, NULL, 1, 2, "0-1", 0, NUMA, 1},
    {VM, M_NONE, ONE, "1", 1, 1, "1", 0, NODE, 1},

    /* 32: no NUMA level under the packages: one NUMA node covers both, the
     * packages still alternate; PUs are numbered 2c, 2c+1 */
    {"syn:pack:2 core:4 pu:2", M_SCATTER, ONE, NULL, 4, 1, "0|8|2|10", 0, NUMA, 8},
    /* 33: one socket in NPS4 style: its four NUMA domains alternate */
    {"syn:pack:1 numa:4 core:4 pu:1", M_SCATTER, ONE, NULL, 5, 1, "0|4|8|12|1", 0, NUMA, 16},
    /* 34: no Core objects: PUs count as cores */
    {"syn:pack:2 pu:4", M_CORES, ONE, NULL, 2, 1, "0|1", 0, NODE, 8},
    {"syn:pack:2 pu:4", M_SCATTER, ALL, "1-2,5", 3, 1, "1|5|2", 0, NUMA, 3},
};

START_TEST(golden_placements)
{
        const struct golden *g = &golden[_i];
        hwloc_topology_t topo = load_topo(g->topo);
        hwloc_bitmap_t alloc = g->alloc ? list(g->alloc) : NULL;
        hwloc_bitmap_t out = hwloc_bitmap_alloc();
        char got[4096] = "", one[512], err[256];
        size_t len = 0;

        for (unsigned t = 0; t < g->ntasks; t++) {
                struct mpi_pstate_placement_req req = {g->mode, g->smt, alloc, g->ntasks,
                                                       t,       g->cpt, NULL};
                struct mpi_pstate_placement_info info = {99, 99, 99};
                err[0] = '\0';
                int rc = mpi_pstate_placement_compute(topo, &req, out, &info, err, sizeof(err));
                ck_assert_msg(rc == 0, "case %d task %u: rc %d (%s)", _i, t, rc, err);
                ck_assert_msg(info.flags == g->flags, "case %d task %u: flags %u, want %u", _i, t,
                              info.flags, g->flags);
                ck_assert_msg((int)info.level == g->level, "case %d: level %d, want %d", _i,
                              (int)info.level, g->level);
                ck_assert_msg(info.slots == g->slots, "case %d: slots %u, want %u", _i, info.slots,
                              g->slots);
                len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s", t ? "|" : "",
                                        fmt(out, one, sizeof(one)));
                ck_assert_uint_lt(len, sizeof(got));
        }
        ck_assert_msg(strcmp(got, g->expect) == 0, "case %d (%s %s): got %s, want %s", _i, g->topo,
                      mode_word(g->mode), got, g->expect);
        hwloc_bitmap_free(out);
        hwloc_bitmap_free(alloc);
        hwloc_topology_destroy(topo);
}
END_TEST

/* ---- closed forms and invariants ---------------------------------------- */

/* On the full SNC node scatter has a closed form: slot r = task mod 32 goes to
 * domain order[r % 4] = {N0, N2, N1, N3}, core r / 4 of that domain. */
START_TEST(scatter_closed_form)
{
        static const unsigned base[4] = {0, 16, 8, 24};
        hwloc_topology_t topo = load_topo(SNC_SMT);
        hwloc_bitmap_t out = hwloc_bitmap_alloc();

        for (unsigned ntasks = 1; ntasks <= 70; ntasks++)
                for (unsigned t = 0; t < ntasks; t++) {
                        struct mpi_pstate_placement_req req = {M_SCATTER, ALL, NULL, ntasks,
                                                               t,         1,   NULL};
                        struct mpi_pstate_placement_info info;
                        unsigned r = t % 32, core = base[r % 4] + r / 4;
                        ck_assert_int_eq(
                            mpi_pstate_placement_compute(topo, &req, out, &info, NULL, 0), 0);
                        ck_assert_int_eq(hwloc_bitmap_weight(out), 2);
                        ck_assert_msg(hwloc_bitmap_isset(out, core) &&
                                          hwloc_bitmap_isset(out, core + 32),
                                      "ntasks %u task %u: want core %u", ntasks, t, core);
                        ck_assert_uint_eq(info.flags, ntasks > 32 ? OVER : 0);
                }
        hwloc_bitmap_free(out);
        hwloc_topology_destroy(topo);
}
END_TEST

/* Whatever the mode and shape: without oversubscription the tasks are
 * disjoint, inside the allocation, cores_per_task cores each, and a NUMA
 * (package) level result lies inside one NUMA node (package). */
static void check_invariants(const char *spec, const char *alloc_s)
{
        hwloc_topology_t topo = load_topo(spec);
        hwloc_bitmap_t alloc = list(alloc_s), allowed = hwloc_bitmap_alloc();
        hwloc_bitmap_t seen = hwloc_bitmap_alloc(), out = hwloc_bitmap_alloc();
        hwloc_bitmap_t cores = hwloc_bitmap_alloc();
        const enum mpi_pstate_placement_mode modes[] = {M_CORES, M_COMPACT, M_SCATTER};
        unsigned n = (unsigned)hwloc_bitmap_weight(alloc);

        ck_assert_int_eq(mpi_pstate_placement_cores_to_cpus(topo, alloc, ALL, allowed), 0);
        for (unsigned m = 0; m < 3; m++)
                for (unsigned cpt = 1; cpt <= 5; cpt++)
                        for (unsigned ntasks = 1; ntasks * cpt <= n; ntasks++) {
                                hwloc_bitmap_zero(seen);
                                for (unsigned t = 0; t < ntasks; t++) {
                                        struct mpi_pstate_placement_req req = {
                                            modes[m], ALL, alloc, ntasks, t, cpt, NULL};
                                        struct mpi_pstate_placement_info info;
                                        int rc = mpi_pstate_placement_compute(topo, &req, out,
                                                                              &info, NULL, 0);
                                        ck_assert_int_eq(rc, 0);
                                        if (info.flags & OVER)
                                                continue;
                                        ck_assert(hwloc_bitmap_isincluded(out, allowed));
                                        ck_assert_msg(!hwloc_bitmap_intersects(out, seen),
                                                      "%s mode %u cpt %u ntasks %u: overlap", spec,
                                                      m, cpt, ntasks);
                                        hwloc_bitmap_or(seen, seen, out);
                                        ck_assert_int_eq(
                                            mpi_pstate_placement_cpus_to_cores(topo, out, cores),
                                            0);
                                        ck_assert_int_eq(hwloc_bitmap_weight(cores), (int)cpt);
                                        if (info.level == NODE)
                                                continue;
                                        hwloc_obj_type_t ty = info.level == NUMA
                                                                  ? HWLOC_OBJ_NUMANODE
                                                                  : HWLOC_OBJ_PACKAGE;
                                        hwloc_obj_t o = NULL;
                                        while ((o = hwloc_get_next_obj_by_type(topo, ty, o)))
                                                if (hwloc_bitmap_isincluded(out, o->cpuset))
                                                        break;
                                        ck_assert_msg(
                                            o != NULL, "%s: task %u crosses a %s", spec, t,
                                            info.level == NUMA ? "NUMA domain" : "package");
                                }
                        }
        hwloc_bitmap_free(cores);
        hwloc_bitmap_free(out);
        hwloc_bitmap_free(seen);
        hwloc_bitmap_free(allowed);
        hwloc_bitmap_free(alloc);
        hwloc_topology_destroy(topo);
}

START_TEST(invariants)
{
        check_invariants(SNC_SMT, "0-31");
        check_invariants(SNC_SMT, "1-6,9,12-13,17-23,31");
        check_invariants(SNC_NOSMT, "3-20");
        check_invariants(EIGHT, "0-2,5-7,9-10,13-14,30-31");
        check_invariants("syn:pack:2 numa:3 l3:2 core:3 pu:2", "0-35");
}
END_TEST

/* Scatter gives every NUMA domain an equal share (within one task). */
START_TEST(scatter_equal_share)
{
        hwloc_topology_t topo = load_topo(SNC_NOSMT);
        hwloc_bitmap_t out = hwloc_bitmap_alloc();

        for (unsigned ntasks = 1; ntasks <= 16; ntasks++) {
                unsigned per[4] = {0};
                for (unsigned t = 0; t < ntasks; t++) {
                        struct mpi_pstate_placement_req req = {M_SCATTER, ONE, NULL, ntasks,
                                                               t,         2,   NULL};
                        ck_assert_int_eq(
                            mpi_pstate_placement_compute(topo, &req, out, NULL, NULL, 0), 0);
                        per[hwloc_bitmap_first(out) / 8]++;
                }
                for (unsigned d = 0; d < 4; d++)
                        ck_assert_msg(per[d] == ntasks / 4 || per[d] == ntasks / 4 + 1,
                                      "ntasks %u: domain %u has %u", ntasks, d, per[d]);
        }
        hwloc_bitmap_free(out);
        hwloc_topology_destroy(topo);
}
END_TEST

/* The machine the suite runs on: one distinct PU per core, all inside it. */
START_TEST(this_machine)
{
        hwloc_topology_t topo = load_topo("this");
        hwloc_bitmap_t out = hwloc_bitmap_alloc(), seen = hwloc_bitmap_alloc();
        int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);

        if (ncores <= 0)
                ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
        ck_assert_int_gt(ncores, 0);
        for (unsigned t = 0; t < (unsigned)ncores; t++) {
                struct mpi_pstate_placement_req req = {M_COMPACT, ONE, NULL, (unsigned)ncores,
                                                       t,         1,   NULL};
                ck_assert_int_eq(mpi_pstate_placement_compute(topo, &req, out, NULL, NULL, 0), 0);
                ck_assert_int_eq(hwloc_bitmap_weight(out), 1);
                ck_assert(hwloc_bitmap_isincluded(out, hwloc_topology_get_complete_cpuset(topo)));
                ck_assert(!hwloc_bitmap_intersects(out, seen));
                hwloc_bitmap_or(seen, seen, out);
        }
        hwloc_bitmap_free(seen);
        hwloc_bitmap_free(out);
        hwloc_topology_destroy(topo);
}
END_TEST

/* ---- topology as Slurm loads it ------------------------------------------- */

/* Slurm core list -> PU list through topo, or "ERANGE". */
static const char *map_cores(hwloc_topology_t topo, const char *cores, char *buf, size_t len)
{
        hwloc_bitmap_t c = list(cores), out = hwloc_bitmap_alloc();
        int rc = mpi_pstate_placement_cores_to_cpus(topo, c, ALL, out);

        if (rc == 0)
                fmt(out, buf, len);
        else
                snprintf(buf, len, "%s", rc == -ERANGE ? "ERANGE" : "error");
        hwloc_bitmap_free(c);
        hwloc_bitmap_free(out);
        return buf;
}

/* slurmd keeps core 0 for itself (CpuSpecList=0) and slurmstepd runs in a
 * cpuset without it: the XML's allowed cpuset says so.  Slurm's cores 1-2
 * are PUs 1-2; a topology of the allowed CPUs only numbers PU 1 as core 0
 * and would give PUs 2-3 (the old mapping, checked too, so that this test
 * can fail). */
START_TEST(restricted_cpuset_xml)
{
        char src[1024], path[] = "/tmp/mpi-pstate-topo.XXXXXX", buf[128], *text, *at;
        hwloc_topology_t topo, plain;
        FILE *f;
        long n;
        int fd;

        snprintf(src, sizeof(src), "%s/topo/%s", TEST_DATA_DIR, SNC_NOSMT);
        f = fopen(src, "r");
        ck_assert_ptr_nonnull(f);
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        rewind(f);
        text = calloc(1, (size_t)n + 1);
        ck_assert_int_eq(fread(text, 1, (size_t)n, f), (size_t)n);
        fclose(f);
        at = strstr(text, "allowed_cpuset=\"0xffffffff\"");
        ck_assert_ptr_nonnull(at);
        memcpy(at, "allowed_cpuset=\"0xfffffffe\"", strlen("allowed_cpuset=\"0xfffffffe\""));
        fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, (size_t)n), n);
        close(fd);
        free(text);

        ck_assert_int_eq(mpi_pstate_placement_topology_load(&topo, path), 0);
        ck_assert_int_eq(hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE), 32);
        ck_assert_str_eq(map_cores(topo, "1-2", buf, sizeof(buf)), "1-2");
        ck_assert_str_eq(map_cores(topo, "31", buf, sizeof(buf)), "31");
        {
                struct mpi_pstate_placement_req req = {M_CORES, ONE, list("1-4"), 2, 1, 2, NULL};
                hwloc_bitmap_t out = hwloc_bitmap_alloc();

                ck_assert_int_eq(mpi_pstate_placement_compute(topo, &req, out, NULL, NULL, 0), 0);
                ck_assert_str_eq(fmt(out, buf, sizeof(buf)), "3-4");
                hwloc_bitmap_free(out);
                hwloc_bitmap_free((hwloc_bitmap_t)req.alloc_cores);
        }
        hwloc_topology_destroy(topo);

        ck_assert_int_eq(hwloc_topology_init(&plain), 0);
        ck_assert_int_eq(hwloc_topology_set_xml(plain, path), 0);
        ck_assert_int_eq(hwloc_topology_load(plain), 0);
        ck_assert_str_eq(map_cores(plain, "1-2", buf, sizeof(buf)), "2-3");
        ck_assert_str_eq(map_cores(plain, "31", buf, sizeof(buf)), "ERANGE");
        hwloc_topology_destroy(plain);
        unlink(path);
}
END_TEST

/* The same on this machine, for real: a child in a cgroup v1 cpuset that
 * holds only the last CPU (what ConstrainCores does to slurmstepd) loads
 * the topology and maps Slurm's core ids.  Root and a cpuset hierarchy
 * with two CPUs or more only; otherwise it says why and passes. */
#define CPUSET_ROOT "/sys/fs/cgroup/cpuset"

static int put(const char *dir, const char *file, const char *value)
{
        char path[512];
        FILE *f;
        int ok;

        snprintf(path, sizeof(path), "%s/%s", dir, file);
        f = fopen(path, "w");
        if (!f)
                return -1;
        ok = fputs(value, f) >= 0;
        return fclose(f) == 0 && ok ? 0 : -1;
}

static int child_in_cpuset(const char *dir, int last_core, int last_pu)
{
        char pid[32], buf[128], want[32], core[32];
        hwloc_topology_t topo, plain;

        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        if (put(dir, "tasks", pid))
                return 10;
        if (mpi_pstate_placement_topology_load(&topo, NULL))
                return 11;
        snprintf(core, sizeof(core), "%d", last_core);
        snprintf(want, sizeof(want), "%d", last_pu);
        if (strcmp(map_cores(topo, core, buf, sizeof(buf)), want) != 0) {
                fprintf(stderr, "restricted cpuset: Slurm core %s -> PU %s, want %s\n", core, buf,
                        want);
                return 1;
        }
        hwloc_topology_destroy(topo);
        /* the old load sees only the allowed core, as its core 0 */
        if (hwloc_topology_init(&plain) || hwloc_topology_load(plain))
                return 12;
        if (strcmp(map_cores(plain, "0", buf, sizeof(buf)), want) != 0)
                return 13;
        hwloc_topology_destroy(plain);
        return 0;
}

START_TEST(restricted_cpuset_cgroup)
{
        hwloc_topology_t whole = load_topo("this");
        int ncores = hwloc_get_nbobjs_by_type(whole, HWLOC_OBJ_CORE);
        char dir[256], mems[64] = "", cpu[32], path[300];
        hwloc_obj_t core, pu;
        struct stat st;
        FILE *f;
        pid_t pid;
        int status;

        if (geteuid() != 0 || stat(CPUSET_ROOT "/cpuset.cpus", &st) != 0 || ncores < 2) {
                fprintf(stderr,
                        "restricted_cpuset_cgroup: needs root, %s and two cores: "
                        "not run\n",
                        CPUSET_ROOT);
                hwloc_topology_destroy(whole);
                return;
        }
        core = hwloc_get_obj_by_type(whole, HWLOC_OBJ_CORE, (unsigned)ncores - 1);
        pu = hwloc_get_obj_inside_cpuset_by_type(whole, core->cpuset, HWLOC_OBJ_PU, 0);
        snprintf(cpu, sizeof(cpu), "%u", pu->os_index);
        snprintf(path, sizeof(path), "%s/cpuset.mems", CPUSET_ROOT);
        f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(mems, sizeof(mems), f));
        fclose(f);
        snprintf(dir, sizeof(dir), "%s/mpi-pstate-test-pin.%d", CPUSET_ROOT, (int)getpid());
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        ck_assert_int_eq(put(dir, "cpuset.cpus", cpu), 0);
        ck_assert_int_eq(put(dir, "cpuset.mems", mems), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(child_in_cpuset(dir, ncores - 1, (int)pu->os_index));
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        for (int i = 0; i < 100 && rmdir(dir) != 0; i++)
                usleep(10000); /* the child leaves the cgroup as it is reaped */
        hwloc_topology_destroy(whole);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}
END_TEST

/* ---- user masks ----------------------------------------------------------- */

START_TEST(user_mask)
{
        hwloc_topology_t topo = load_topo(SNC_SMT);
        hwloc_bitmap_t alloc = list("0-3"), out = hwloc_bitmap_alloc(), keep = list("7");
        struct mpi_pstate_placement_info info;
        char buf[128], err[256] = "";
        struct {
                const char *mask, *want;
                unsigned flags;
        } ok[] = {
            {"0-1,32-33", "0-1,32-33", 0},
            {"2-5,34", "2-3,34", TRIM},
            {"35", "35", 0},
            {"0-63", "0-3,32-35", TRIM},
        };

        for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                hwloc_bitmap_t mask = list(ok[i].mask);
                struct mpi_pstate_placement_req req = {
                    MPI_PSTATE_PLACEMENT_USER, ONE, alloc, 4, 3, 1, mask};
                ck_assert_int_eq(
                    mpi_pstate_placement_compute(topo, &req, out, &info, err, sizeof(err)), 0);
                ck_assert_str_eq(fmt(out, buf, sizeof(buf)), ok[i].want);
                ck_assert_uint_eq(info.flags, ok[i].flags);
                hwloc_bitmap_free(mask);
        }

        /* Disjoint from the allocation: an error naming both sets, out untouched. */
        hwloc_bitmap_t far = list("4-7,36");
        struct mpi_pstate_placement_req req = {MPI_PSTATE_PLACEMENT_USER, ONE, alloc, 1, 0, 1, far};
        hwloc_bitmap_copy(out, keep);
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &req, out, &info, err, sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, "4-7,36") && strstr(err, "0-3,32-35"), "message: %s", err);
        ck_assert(hwloc_bitmap_isequal(out, keep));

        /* A mask belongs to user mode and user mode needs one. */
        req.mode = M_CORES;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &req, out, NULL, NULL, 0), -EINVAL);
        req.mode = MPI_PSTATE_PLACEMENT_USER;
        req.user_cpus = NULL;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &req, out, NULL, NULL, 0), -EINVAL);

        hwloc_bitmap_free(far);
        hwloc_bitmap_free(keep);
        hwloc_bitmap_free(out);
        hwloc_bitmap_free(alloc);
        hwloc_topology_destroy(topo);
}
END_TEST

/* ---- bad requests --------------------------------------------------------- */

START_TEST(bad_requests)
{
        hwloc_topology_t topo = load_topo(SNC_SMT);
        hwloc_bitmap_t out = list("5"), alloc = list("0-3"), big = list("32"),
                       empty = hwloc_bitmap_alloc(), inf = hwloc_bitmap_alloc(),
                       huge = hwloc_bitmap_alloc();
        struct mpi_pstate_placement_req ok = {M_CORES, ONE, alloc, 4, 0, 1, NULL}, r;
        char err[256];

        hwloc_bitmap_fill(inf);
        hwloc_bitmap_set(huge, MPI_PSTATE_PLACEMENT_MAX_INDEX + 1);
        ck_assert_int_eq(mpi_pstate_placement_compute(NULL, &ok, out, NULL, NULL, 0), -EINVAL);
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, NULL, out, NULL, NULL, 0), -EINVAL);
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &ok, NULL, NULL, NULL, 0), -EINVAL);

        r = ok, r.ntasks = 0;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, sizeof(err)),
                         -EINVAL);
        r = ok, r.task = 4;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_str_eq(err, "task 4 out of range: 4 local tasks");
        r = ok, r.mode = (enum mpi_pstate_placement_mode)99;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, sizeof(err)),
                         -EINVAL);
        r = ok, r.smt = (enum mpi_pstate_placement_smt)7;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, sizeof(err)),
                         -EINVAL);
        r = ok, r.cores_per_task = MPI_PSTATE_PLACEMENT_MAX_INDEX + 2;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, sizeof(err)),
                         -ERANGE);
        /* Core 32 on a 32-core node: Slurm and the topology disagree. */
        r = ok, r.alloc_cores = big;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, sizeof(err)),
                         -ERANGE);
        ck_assert_str_eq(err, "allocated core 32 is not on this node (32 cores)");
        r = ok, r.alloc_cores = empty;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, sizeof(err)),
                         -EINVAL);
        ck_assert_str_eq(err, "empty core allocation");
        r = ok, r.alloc_cores = inf;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, sizeof(err)),
                         -EINVAL);
        r = ok, r.alloc_cores = huge;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, sizeof(err)),
                         -ERANGE);
        /* A one-byte error buffer is still terminated, NULL is allowed. */
        r = ok, r.task = 9;
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, err, 1), -EINVAL);
        ck_assert_str_eq(err, "");
        ck_assert_int_eq(mpi_pstate_placement_compute(topo, &r, out, NULL, NULL, 99), -EINVAL);

        /* No failure above touched the output. */
        ck_assert_int_eq(hwloc_bitmap_weight(out), 1);
        ck_assert(hwloc_bitmap_isset(out, 5));

        hwloc_bitmap_free(huge);
        hwloc_bitmap_free(inf);
        hwloc_bitmap_free(empty);
        hwloc_bitmap_free(big);
        hwloc_bitmap_free(alloc);
        hwloc_bitmap_free(out);
        hwloc_topology_destroy(topo);
}
END_TEST

/* ---- converters, lists, names --------------------------------------------- */

START_TEST(converters)
{
        hwloc_topology_t topo = load_topo(SNC_SMT);
        hwloc_bitmap_t cores = list("0,16,31"), out = hwloc_bitmap_alloc(), back = list("9");
        char buf[128];

        ck_assert_int_eq(mpi_pstate_placement_cores_to_cpus(topo, cores, ONE, out), 0);
        ck_assert_str_eq(fmt(out, buf, sizeof(buf)), "0,16,31");
        ck_assert_int_eq(mpi_pstate_placement_cores_to_cpus(topo, cores, ALL, out), 0);
        ck_assert_str_eq(fmt(out, buf, sizeof(buf)), "0,16,31-32,48,63");
        /* Either hyperthread names the same core; the round trip is exact. */
        ck_assert_int_eq(mpi_pstate_placement_cpus_to_cores(topo, out, back), 0);
        ck_assert(hwloc_bitmap_isequal(back, cores));
        hwloc_bitmap_t ht = list("33,1,40");
        ck_assert_int_eq(mpi_pstate_placement_cpus_to_cores(topo, ht, back), 0);
        ck_assert_str_eq(fmt(back, buf, sizeof(buf)), "1,8");

        /* Out of the machine: -ERANGE and outputs kept. */
        hwloc_bitmap_t c32 = list("3,32"), p64 = list("64");
        ck_assert_int_eq(mpi_pstate_placement_cores_to_cpus(topo, c32, ONE, out), -ERANGE);
        ck_assert_str_eq(fmt(out, buf, sizeof(buf)), "0,16,31-32,48,63");
        ck_assert_int_eq(mpi_pstate_placement_cpus_to_cores(topo, p64, back), -ERANGE);
        ck_assert_str_eq(fmt(back, buf, sizeof(buf)), "1,8");
        ck_assert_int_eq(
            mpi_pstate_placement_cores_to_cpus(topo, c32, (enum mpi_pstate_placement_smt)5, out),
            -EINVAL);
        ck_assert_int_eq(mpi_pstate_placement_cpus_to_cores(NULL, p64, back), -EINVAL);

        hwloc_bitmap_free(p64);
        hwloc_bitmap_free(c32);
        hwloc_bitmap_free(ht);
        hwloc_bitmap_free(back);
        hwloc_bitmap_free(out);
        hwloc_bitmap_free(cores);
        hwloc_topology_destroy(topo);
}
END_TEST

static const struct {
        const char *in;
        int rc;
        const char *norm; /* formatted back, when rc == 0 */
} lists[] = {
    {"0-3,8-11", 0, "0-3,8-11"},
    {"5", 0, "5"},
    {"0,2", 0, "0,2"},
    {"3,1,2", 0, "1-3"},
    {"0-3\n", 0, "0-3"},
    {"7-7", 0, "7"},
    {"65535", 0, "65535"},
    {"", 0, ""},
    {"\n", 0, ""},
    {"3-1", -EINVAL, NULL},
    {"1,", -EINVAL, NULL},
    {",1", -EINVAL, NULL},
    {"1,,2", -EINVAL, NULL},
    {"a", -EINVAL, NULL},
    {"1-", -EINVAL, NULL},
    {"-1", -EINVAL, NULL},
    {" 1", -EINVAL, NULL},
    {"1 ", -EINVAL, NULL},
    {"1-2-3", -EINVAL, NULL},
    {"0x3", -EINVAL, NULL},
    {"+1", -EINVAL, NULL},
    {"1\n\n", -EINVAL, NULL},
    {"1:2", -EINVAL, NULL},
    {"65536", -ERANGE, NULL},
    {"0-65536", -ERANGE, NULL},
    {"99999999999999999999999", -ERANGE, NULL},
};

START_TEST(cpulist_parse_table)
{
        hwloc_bitmap_t b = list("42");
        char buf[64];
        int rc = mpi_pstate_placement_cpulist_parse(lists[_i].in, b);

        ck_assert_msg(rc == lists[_i].rc, "\"%s\": rc %d, want %d", lists[_i].in, rc, lists[_i].rc);
        if (rc == 0)
                ck_assert_str_eq(fmt(b, buf, sizeof(buf)), lists[_i].norm);
        else
                ck_assert_str_eq(fmt(b, buf, sizeof(buf)), "42");
        hwloc_bitmap_free(b);
}
END_TEST

START_TEST(cpulist_format_edges)
{
        hwloc_bitmap_t b = list("0-3,8,100-200"), inf = hwloc_bitmap_alloc();
        char buf[16];

        ck_assert_int_eq(mpi_pstate_placement_cpulist_format(b, buf, 14), 0);
        ck_assert_str_eq(buf, "0-3,8,100-200");
        ck_assert_int_eq(mpi_pstate_placement_cpulist_format(b, buf, 13), -ENOSPC);
        ck_assert_str_eq(buf, "");
        hwloc_bitmap_fill(inf);
        ck_assert_int_eq(mpi_pstate_placement_cpulist_format(inf, buf, sizeof(buf)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_placement_cpulist_format(b, buf, 0), -EINVAL);
        ck_assert_int_eq(mpi_pstate_placement_cpulist_format(NULL, buf, sizeof(buf)), -EINVAL);
        ck_assert_int_eq(mpi_pstate_placement_cpulist_parse(NULL, b), -EINVAL);
        hwloc_bitmap_free(inf);
        hwloc_bitmap_free(b);
}
END_TEST

START_TEST(modes_are_the_bind_words)
{
        ck_assert_int_eq(M_NONE, MPI_PSTATE_BIND_NONE);
        ck_assert_int_eq(M_CORES, MPI_PSTATE_BIND_CORES);
        ck_assert_int_eq(M_COMPACT, MPI_PSTATE_BIND_COMPACT);
        ck_assert_int_eq(M_SCATTER, MPI_PSTATE_BIND_SCATTER);
        ck_assert_int_eq(MPI_PSTATE_PLACEMENT_USER, MPI_PSTATE_BIND_COUNT);
        ck_assert_str_eq(mode_word(M_COMPACT), "compact");
        ck_assert_str_eq(mode_word(MPI_PSTATE_PLACEMENT_USER), "user");
}
END_TEST

static Suite *pin_suite(void)
{
        Suite *s = suite_create("pin");
        TCase *tg = tcase_create("golden");
        TCase *tp = tcase_create("properties");
        TCase *tc = tcase_create("api");

        tcase_add_loop_test(tg, golden_placements, 0, sizeof(golden) / sizeof(golden[0]));
        tcase_add_test(tp, scatter_closed_form);
        tcase_add_test(tp, invariants);
        tcase_add_test(tp, scatter_equal_share);
        tcase_add_test(tp, this_machine);
        tcase_add_test(tp, restricted_cpuset_xml);
        tcase_add_test(tp, restricted_cpuset_cgroup);
        tcase_set_timeout(tp, 60);
        tcase_add_test(tc, user_mask);
        tcase_add_test(tc, bad_requests);
        tcase_add_test(tc, converters);
        tcase_add_loop_test(tc, cpulist_parse_table, 0, sizeof(lists) / sizeof(lists[0]));
        tcase_add_test(tc, cpulist_format_edges);
        tcase_add_test(tc, modes_are_the_bind_words);
        suite_add_tcase(s, tg);
        suite_add_tcase(s, tp);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(pin_suite(), false);
}
