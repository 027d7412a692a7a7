# SPDX-License-Identifier: BSD-3-Clause
# ---- bench/baselines/: the per-call designs mpi-pstate is measured against,
# as preload libraries, one per design and MPI ABI:
#   $(B)/bench/baselines/libmpst-baseline-timer.<abi>.so   setitimer per call (COUNTDOWN)
#   $(B)/bench/baselines/libmpst-baseline-switch.<abi>.so  pwrite per call (the 2013 talk)
# `make B=... baselines-bench` builds them with the hot-path program of
# bench/preload; bench/baselines/run.py --build $(B) prints the comparison.
#
# This file is read before preload/rules.mk (alphabetical include), so it
# decides the ABIs itself, the same way: an MPI whose pkg-config module is
# missing is skipped.
BASELINE_DESIGNS := timer switch
BASELINE_ABIS := $(foreach a,ompi mpich,$(if $(shell pkg-config --exists $(if $(filter ompi,$(a)),ompi-c,mpich) && echo y),$(a)))
BASELINE_MPICC_ompi := mpicc.openmpi
BASELINE_MPICC_mpich := mpicc.mpich
BASELINE_LIBS := $(foreach d,$(BASELINE_DESIGNS),$(foreach a,$(BASELINE_ABIS),$(B)/bench/baselines/libmpst-baseline-$(d).$(a).so))
BASELINE_DEFINE_timer := -DBASELINE_TIMER
BASELINE_DEFINE_switch := -DBASELINE_SWITCH

$(B)/bench/baselines:
	mkdir -p $@

# The MPI wrapper compiler links libmpi, so PMPI_* resolve at load; parse.o
# is the only member of the common archive pulled in.
define BASELINE_RULES
$(B)/bench/baselines/libmpst-baseline-$(1).$(2).so: bench/baselines/percall.c bench/baselines/percall.map $(COMMON_LIB) | $(B)/bench/baselines
	$(BASELINE_MPICC_$(2)) $(CSTD) $(OPT) $(WARN) $(HARDEN) $(DEPFLAGS) -fPIC -fvisibility=hidden -Icommon $(USER_CFLAGS) $(BASELINE_DEFINE_$(1)) \
	  -shared -o $$@ $$< $(COMMON_LIB) $(LDFLAGS_COMMON) -Wl,--version-script=bench/baselines/percall.map
endef
$(foreach d,$(BASELINE_DESIGNS),$(foreach a,$(BASELINE_ABIS),$(eval $(call BASELINE_RULES,$(d),$(a)))))

.PHONY: baselines baselines-bench
baselines: $(BASELINE_LIBS)
# the hot-path program and the library itself come from preload/rules.mk
baselines-bench: $(BASELINE_LIBS) preload-bench

# tests/py/test_bench_baselines.py runs the libraries under MPI
CHECK_PREREQS += $(BASELINE_LIBS)
