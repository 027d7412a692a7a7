# SPDX-License-Identifier: BSD-3-Clause
# ---- preload/: the PMPI preload library (front + one backend per MPI ABI),
# the mpi-pstate-exec launcher, and the MPI test programs of tests/programs/preload/.
#
# Generated sources go to $(B)/gen/preload; an MPI family whose pkg-config
# module is missing is skipped (its backend is simply not built).

PRELOAD_GEN := $(B)/gen/preload
PRELOAD_GEN_FILES := $(addprefix $(PRELOAD_GEN)/,mpi_pstate_fn.h front_syms.h front.S wrappers.c)
PRELOAD_PKG_ompi := ompi-c
PRELOAD_PKG_mpich := mpich
PRELOAD_ABIS := $(foreach a,ompi mpich,$(if $(shell pkg-config --exists $(PRELOAD_PKG_$(a)) && echo y),$(a)))
# MPI headers as system headers: their own warnings are not ours to fix.
PRELOAD_MPI_CFLAGS = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags $(PRELOAD_PKG_$(1))))
PRELOAD_CFLAGS := $(CFLAGS_COMMON) -Ipreload -I$(PRELOAD_GEN)

PRELOAD_FRONT := $(B)/preload/libmpi-pstate.so
PRELOAD_BACKENDS := $(foreach a,$(PRELOAD_ABIS),$(B)/preload/libmpi-pstate-$(a).so)
PRELOAD_EXEC := $(B)/preload/mpi-pstate-exec
PRELOAD_TARGETS := $(PRELOAD_FRONT) $(PRELOAD_BACKENDS) $(PRELOAD_EXEC)

# The generator rewrites only the files whose text changed (so that an edit
# rebuilds only what it reaches); the stamp records that it ran.
$(PRELOAD_GEN)/.stamp: preload/mpi_functions.def preload/gen_wrappers.py preload/wrapper_table.py
	$(PYTHON) preload/gen_wrappers.py --def preload/mpi_functions.def --out $(PRELOAD_GEN)
	touch $@
$(PRELOAD_GEN_FILES): $(PRELOAD_GEN)/.stamp ;

$(B)/preload $(B)/tests/preload $(B)/bench/preload:
	mkdir -p $@

# The front knows no MPI: plain compiler, no MPI headers.
# Two sources in one compile: -MMD keeps the last one's (front.S), so front.c's
# headers are named.
$(PRELOAD_FRONT): preload/front.c $(PRELOAD_GEN)/front.S $(PRELOAD_GEN)/front_syms.h $(wildcard preload/*.h common/*.h) | $(B)/preload
	$(CC) $(PRELOAD_CFLAGS) -shared -o $@ preload/front.c $(PRELOAD_GEN)/front.S $(LDFLAGS_COMMON) -ldl -lpthread

# MPI-free backend parts, compiled once.
$(B)/preload/env.o $(B)/preload/profile.o: $(B)/preload/%.o: preload/%.c | $(B)/preload
	$(CC) $(PRELOAD_CFLAGS) -c -o $@ $<

# The profile writer's Check suites (tests/unit/preload/): MPI-free, linked with
# the writer's own object and the common archive, built beside the others.
PRELOAD_UNIT_BINS := $(patsubst tests/unit/preload/%.c,$(B)/tests/unit/%,$(wildcard tests/unit/preload/test_*.c))
$(PRELOAD_UNIT_BINS): $(B)/tests/unit/%: tests/unit/preload/%.c $(B)/preload/profile.o $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Icommon -Ipreload -Itests/unit $(CHECK_CFLAGS) -o $@ $< \
	  $(B)/preload/profile.o $(COMMON_LIB) $(CHECK_LIBS) $(COMMON_LIBS) $(TEST_LDFLAGS)
UNIT_BINS += $(PRELOAD_UNIT_BINS)

# Per ABI: hooks and wrappers against that MPI's mpi.h.  No -lmpi: the PMPI
# references resolve against whatever library of the family the process
# loaded (libmpich.so.12, Intel MPI's libmpi.so.12, ...).
define PRELOAD_BACKEND_RULES
$(B)/preload/$(1):
	mkdir -p $$@
$(B)/preload/$(1)/hooks.o: preload/hooks.c $(PRELOAD_GEN)/mpi_pstate_fn.h | $(B)/preload/$(1)
	$(CC) $(PRELOAD_CFLAGS) $(call PRELOAD_MPI_CFLAGS,$(1)) -c -o $$@ $$<
$(B)/preload/$(1)/wrappers.o: $(PRELOAD_GEN)/wrappers.c $(PRELOAD_GEN_FILES) | $(B)/preload/$(1)
	$(CC) $(PRELOAD_CFLAGS) $(call PRELOAD_MPI_CFLAGS,$(1)) -c -o $$@ $$<
$(B)/preload/libmpi-pstate-$(1).so: $(B)/preload/$(1)/hooks.o $(B)/preload/$(1)/wrappers.o $(B)/preload/env.o $(B)/preload/profile.o $(COMMON_LIB) preload/backend.map
	$(CC) -shared -o $$@ $(B)/preload/$(1)/hooks.o $(B)/preload/$(1)/wrappers.o $(B)/preload/env.o $(B)/preload/profile.o $(COMMON_LIB) $(LDFLAGS_COMMON) -Wl,--version-script=preload/backend.map
endef
$(foreach a,$(PRELOAD_ABIS),$(eval $(call PRELOAD_BACKEND_RULES,$(a))))

# The launcher is the Python package's entry script (epilog/mpi-pstate,
# `mpi-pstate exec`) under its own name; in the build tree it finds the
# libraries beside itself and the package in the source tree.
$(PRELOAD_EXEC): epilog/mpi-pstate | $(B)/preload
	sed -e 's|@PYDIR@|$(CURDIR)/epilog|' $< > $@.tmp && chmod 0755 $@.tmp && mv -f $@.tmp $@

# ---- tests/preload: one program per binding, built per MPI family
PRELOAD_TEST_PROGS := c_calls f77_calls f90_calls f08_calls mt_calls c_large_calls f08_large_calls \
	wait_calls
PRELOAD_MPICC_ompi := mpicc.openmpi
PRELOAD_MPICC_mpich := mpicc.mpich
PRELOAD_MPIF90_ompi := mpif90.openmpi
PRELOAD_MPIF90_mpich := mpif90.mpich
PRELOAD_TOOL_PROGS := c_calls_tool f77_calls_tool f90_calls_tool f08_calls_tool
PRELOAD_TEST_BINS := $(foreach a,$(PRELOAD_ABIS),$(foreach p,$(PRELOAD_TEST_PROGS) $(PRELOAD_TOOL_PROGS),$(B)/tests/preload/$(p).$(a)) \
	$(B)/tests/preload/libpmpi_tool.$(a).so $(B)/tests/preload/libpmpi_tool_chain.$(a).so)

define PRELOAD_TEST_RULES
$(B)/tests/preload/c_calls.$(1): tests/programs/preload/c_calls.c tests/programs/preload/rank_lines.h | $(B)/tests/preload
	$(PRELOAD_MPICC_$(1)) -O1 -g -Wall -o $$@ $$<
$(B)/tests/preload/mt_calls.$(1): tests/programs/preload/mt_calls.c | $(B)/tests/preload
	$(PRELOAD_MPICC_$(1)) -O1 -g -Wall -pthread -o $$@ $$<
$(B)/tests/preload/wait_calls.$(1): tests/programs/preload/wait_calls.c | $(B)/tests/preload
	$(PRELOAD_MPICC_$(1)) -O1 -g -Wall -Werror -o $$@ $$<
$(B)/tests/preload/c_large_calls.$(1): tests/programs/preload/c_large_calls.c tests/programs/preload/rank_lines.h | $(B)/tests/preload
	$(PRELOAD_MPICC_$(1)) -O1 -g -Wall -Werror -o $$@ $$<
# mpif.h has no interfaces: gfortran >= 10 needs to be told that choice
# buffers of different types are fine.
$(B)/tests/preload/f77_calls.$(1): tests/programs/preload/f77_calls.f90 | $(B)/tests/preload
	$(PRELOAD_MPIF90_$(1)) -O1 -g -w -fallow-argument-mismatch -J $(B)/tests/preload -o $$@ $$<
$(B)/tests/preload/f90_calls.$(1): tests/programs/preload/f90_calls.f90 | $(B)/tests/preload
	$(PRELOAD_MPIF90_$(1)) -O1 -g -J $(B)/tests/preload -o $$@ $$<
$(B)/tests/preload/f08_calls.$(1): tests/programs/preload/f08_calls.f90 | $(B)/tests/preload
	$(PRELOAD_MPIF90_$(1)) -O1 -g -J $(B)/tests/preload -o $$@ $$<
# The large-count calls only where this mpi_f08 has the large-count procedures
# (the probe compiles); elsewhere the program prints SKIP.
$(B)/tests/preload/f08_large_calls.$(1): tests/programs/preload/f08_large_calls.F90 tests/programs/preload/f08_large_probe.f90 | $(B)/tests/preload
	if $(PRELOAD_MPIF90_$(1)) -fsyntax-only -J $(B)/tests/preload tests/programs/preload/f08_large_probe.f90 2>/dev/null; \
	then large=-DMPI_PSTATE_F08_LARGE; else large=; fi; \
	$(PRELOAD_MPIF90_$(1)) -O1 -g $$$$large -J $(B)/tests/preload -o $$@ $$<
# A PMPI tool (MPI_X counting, then PMPI_X), as a preloadable library and
# linked into the programs: the tool-stacking tests (test_preload_pmpi.py).
$(B)/tests/preload/libpmpi_tool.$(1).so: tests/programs/preload/pmpi_tool.c | $(B)/tests/preload
	$(PRELOAD_MPICC_$(1)) -O1 -g -Wall -Wextra -Werror -fPIC -shared -o $$@ $$<
$(B)/tests/preload/libpmpi_tool_chain.$(1).so: tests/programs/preload/pmpi_tool.c | $(B)/tests/preload
	$(PRELOAD_MPICC_$(1)) -O1 -g -Wall -Wextra -Werror -DTOOL_CHAIN -fPIC -shared -o $$@ $$< -ldl
$(B)/tests/preload/pmpi_tool.$(1).o: tests/programs/preload/pmpi_tool.c | $(B)/tests/preload
	$(PRELOAD_MPICC_$(1)) -O1 -g -Wall -Wextra -Werror -c -o $$@ $$<
$(B)/tests/preload/c_calls_tool.$(1): tests/programs/preload/c_calls.c tests/programs/preload/rank_lines.h $(B)/tests/preload/pmpi_tool.$(1).o
	$(PRELOAD_MPICC_$(1)) -O1 -g -Wall -o $$@ $$< $(B)/tests/preload/pmpi_tool.$(1).o
$(B)/tests/preload/f77_calls_tool.$(1): tests/programs/preload/f77_calls.f90 $(B)/tests/preload/pmpi_tool.$(1).o
	mkdir -p $(B)/tests/preload/tool.$(1)
	$(PRELOAD_MPIF90_$(1)) -O1 -g -w -fallow-argument-mismatch -J $(B)/tests/preload/tool.$(1) -o $$@ $$< $(B)/tests/preload/pmpi_tool.$(1).o
$(B)/tests/preload/f90_calls_tool.$(1): tests/programs/preload/f90_calls.f90 $(B)/tests/preload/pmpi_tool.$(1).o
	mkdir -p $(B)/tests/preload/tool.$(1)
	$(PRELOAD_MPIF90_$(1)) -O1 -g -J $(B)/tests/preload/tool.$(1) -o $$@ $$< $(B)/tests/preload/pmpi_tool.$(1).o
$(B)/tests/preload/f08_calls_tool.$(1): tests/programs/preload/f08_calls.f90 $(B)/tests/preload/pmpi_tool.$(1).o
	mkdir -p $(B)/tests/preload/tool.$(1)
	$(PRELOAD_MPIF90_$(1)) -O1 -g -J $(B)/tests/preload/tool.$(1) -o $$@ $$< $(B)/tests/preload/pmpi_tool.$(1).o
$(B)/bench/preload/hotpath.$(1): bench/preload/hotpath.c | $(B)/bench/preload
	$(PRELOAD_MPICC_$(1)) -O2 -g -Wall -o $$@ $$<
endef
$(foreach a,$(PRELOAD_ABIS),$(eval $(call PRELOAD_TEST_RULES,$(a))))

PRELOAD_BENCH_BINS := $(foreach a,$(PRELOAD_ABIS),$(B)/bench/preload/hotpath.$(a))

.PHONY: preload preload-tests preload-bench install-preload
preload: $(PRELOAD_TARGETS)
preload-tests: $(PRELOAD_TARGETS) $(PRELOAD_TEST_BINS)
# bench/preload/run.py --build $(B) prints the hot-path figures
preload-bench: $(PRELOAD_TARGETS) $(PRELOAD_BENCH_BINS)

install-preload: $(PRELOAD_TARGETS)
	install -d $(DESTDIR)$(libdir)/mpi-pstate $(DESTDIR)$(bindir) $(DESTDIR)$(mandir)/man7
	install -m 0644 $(PRELOAD_FRONT) $(PRELOAD_BACKENDS) $(DESTDIR)$(libdir)/mpi-pstate/
	install -m 0644 man/mpi-pstate-preload.7 $(DESTDIR)$(mandir)/man7/

ALL_TARGETS += $(PRELOAD_TARGETS)
CHECK_PREREQS += $(PRELOAD_TEST_BINS)
INSTALL_TARGETS += install-preload
UNINSTALL_FILES += $(libdir)/mpi-pstate/libmpi-pstate.so \
	$(foreach a,ompi mpich,$(libdir)/mpi-pstate/libmpi-pstate-$(a).so) \
	$(mandir)/man7/mpi-pstate-preload.7
