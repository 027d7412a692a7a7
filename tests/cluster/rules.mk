# SPDX-License-Identifier: BSD-3-Clause
# ---- make check-24: Slurm 24.11 (Debian 13 "trixie": Open MPI 5.0, MPICH
# 4.2, hwloc 2.12, Python 3.13) inside tests/cluster/debroot's cached root.
# It builds into its own directory (B24, default build-24), so the host build
# in $(B) is never touched, and its cluster runs in the root's own network,
# UTS and cgroup namespaces, so it may run while the host's cluster runs.
# Two check-24 runs on one machine take turns (they share the root's cluster).
# The root's cluster and namespaces are stopped at the end.  24.11 is the
# middle release: the whole suite runs on the oldest (make check, 22.05) and
# the newest (make check-26, 26.05); here every unit suite and the
# integration tests CHECK24_TESTS names (tests/run -K): the admin's install
# and the package (daemons start and serve jobs), each launcher of both MPI
# families with its restore, the summary, Slurm's --cpu-freq, AdminComment
# writers, every never-drain fault and the adversarial tests of the root side
# (test_adversarial_root; in the py phase, CHECK24_PY_TESTS).
# CHECK24_TESTS= (empty) runs the whole suite, its sweep on
# CHECK24_SCALE_STEPS steps.
B24 ?= build-24
CHECK24_LOCK ?= /run/mpi-pstate-lab-24.lock
CHECK24_SCALE_STEPS ?= 300
CHECK24_TESTS ?= test_site_install test_never_drain test_cpufreq_slurm test_jobstats_coexist \
	StepsBothFamilies test_governor_visible_during_the_job_and_restored test_two_nodes_mpich \
	test_two_nodes_openmpi test_adversarial_root test_site_epilog test_privsep test_agent_privsep
# with CHECK24_TESTS, the py phase runs the adversarial suites only (tests/run -P)
CHECK24_PY_TESTS ?= test_root_trust test_epilog_adversarial
CHECK24_ARGS = --phase unit,py,integration $(if $(strip $(CHECK24_TESTS)),$(addprefix -P ,$(CHECK24_PY_TESTS)) \
	$(addprefix -K ,$(CHECK24_TESTS)))

.PHONY: check-24 debroot debroot-stop
check-24: debroot
	@t0=$$(date +%s); \
	flock $(CHECK24_LOCK) bash -c './tests/cluster/debroot enter env MPI_PSTATE_SCALE_STEPS=$(CHECK24_SCALE_STEPS) make -j2 --no-print-directory B=$(B24) \
	  check CHECK_ARGS="$(CHECK24_ARGS)"; \
	  rc=$$?; ./tests/cluster/debroot stop; exit $$rc'; rc=$$?; \
	echo "---- make check-24: exit $$rc after $$(( $$(date +%s) - t0 )) s"; exit $$rc

debroot:
	./tests/cluster/debroot create

debroot-stop:
	./tests/cluster/debroot stop

# ---- make check-26: the whole suite (unit, py, integration on a local
# cluster) against Slurm 26.05, the newest release (Debian forky: Open MPI 6,
# PMIx 7, MPICH 5.0, Python 3.14), in tests/cluster/debroot --suite forky's cached root,
# built into B26 (default build-26), its cluster in that root's own namespaces
# (host name mpst26), so it may run beside make check and make check-24.  The
# 1000-step sweep (test_scale) runs on CHECK26_SCALE_STEPS steps and the
# 100-job queue (test_accounting) on CHECK26_QUEUE_JOBS jobs, the same
# assertions, to keep CI within its budget.  Debian's 26.05 has no mpi/pmix:
# tests whose point is not Open MPI under srun take the family srun can start
# (labtools.srun_family), and the three that are skip, named.
# CHECK26_TESTS="NAME ..." runs only those integration tests (tests/run -K).
B26 ?= build-26
# gcc 15 reads Open MPI 6's MPI_UNWEIGHTED (a sentinel pointer) as an empty
# array and warns (-Wstringop-overread) on tests/programs/preload/c_large_calls.c's
# MPI_Dist_graph_create_adjacent, built with -Werror: not a fault of the
# program, silenced for that release's test programs only.
CHECK26_MPICC_ompi ?= mpicc.openmpi -Wno-stringop-overread
CHECK26_LOCK ?= /run/mpi-pstate-lab-26.lock
CHECK26_SCALE_STEPS ?= 300
CHECK26_QUEUE_JOBS ?= 50
CHECK26_TESTS ?=
# CHECK26_PHASES=unit,py then CHECK26_PHASES=integration is the same suite in
# two runs (the first needs no cluster).
CHECK26_PHASES ?= unit,$(if $(strip $(CHECK26_TESTS)),,py,)integration
CHECK26_ARGS = --phase $(CHECK26_PHASES) $(addprefix -K ,$(CHECK26_TESTS))

.PHONY: check-26 debroot-26 debroot-26-stop
check-26: debroot-26
	@t0=$$(date +%s); \
	flock $(CHECK26_LOCK) bash -c './tests/cluster/debroot --suite forky enter env MPI_PSTATE_SCALE_STEPS=$(CHECK26_SCALE_STEPS) \
	  MPI_PSTATE_QUEUE_JOBS=$(CHECK26_QUEUE_JOBS) \
	  make -j2 --no-print-directory \
	  B=$(B26) check CHECK_ARGS="$(CHECK26_ARGS)" PRELOAD_MPICC_ompi="$(CHECK26_MPICC_ompi)"; \
	  rc=$$?; ./tests/cluster/debroot --suite forky stop; exit $$rc'; rc=$$?; \
	echo "---- make check-26: exit $$rc after $$(( $$(date +%s) - t0 )) s"; exit $$rc

debroot-26:
	./tests/cluster/debroot --suite forky create

debroot-26-stop:
	./tests/cluster/debroot --suite forky stop

# ---- make check-arm64: the aarch64 build, every unit suite and the preload
# suites (exact call counts, both MPIs, every binding) in a Debian 12 arm64
# root run under qemu-user (tests/cluster/debroot --arch arm64, cached like
# the trixie root; created on first use, which installs qemu-user-static and
# registers it with binfmt_misc).  Builds into BARM (default build-arm64).
# No cluster runs in it; the root's namespaces are stopped at the end.
BARM ?= build-arm64
CHECKARM_LOCK ?= /run/mpi-pstate-arm64.lock

.PHONY: check-arm64 debroot-arm64
check-arm64: debroot-arm64
	@t0=$$(date +%s); \
	flock $(CHECKARM_LOCK) bash -c './tests/cluster/debroot --arch arm64 enter ./tests/cluster/check-arm64 $(BARM); \
	  rc=$$?; ./tests/cluster/debroot --arch arm64 stop; exit $$rc'; rc=$$?; \
	echo "---- make check-arm64: exit $$rc after $$(( $$(date +%s) - t0 )) s"; exit $$rc

debroot-arm64:
	./tests/cluster/debroot --arch arm64 create

# ---- make check-releases: Slurm releases Debian does not package (25.05 and
# 25.11, what sites on SchedMD's RPMs run), each built once from its source
# tarball into a cache (tests/cluster/slurm-src: libslurm and the headers
# only, under a minute a release on 2 CPUs), then everything of ours built
# against it with -Werror, its link and exports checked and every unit suite
# run (tests/cluster/check-releases), into BREL<release> (default
# build-25.05, build-25.11).  No cluster: the releases' daemons are not built.
# Two runs on one machine take turns (they share those build directories).
BREL ?= build-
CHECKREL_LOCK ?= /run/mpi-pstate-releases.lock
CHECK_RELEASES ?= 25.05 25.11

.PHONY: check-releases slurm-src
check-releases: deps-if-missing
	@t0=$$(date +%s); \
	flock $(CHECKREL_LOCK) ./tests/cluster/check-releases -b $(BREL) $(CHECK_RELEASES); rc=$$?; \
	echo "---- make check-releases: exit $$rc after $$(( $$(date +%s) - t0 )) s"; exit $$rc

# Only the Slurm builds (cached): for building against one by hand,
# make SLURM_PREFIX=$(tests/cluster/slurm-src path 25.05) in a shell.
slurm-src:
	@for r in $(CHECK_RELEASES); do ./tests/cluster/slurm-src create $$r >/dev/null || exit 1; done
