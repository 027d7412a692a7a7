# SPDX-License-Identifier: BSD-3-Clause
# MPI smoke programs (tests/programs/mpi/), one binary per language binding per MPI
# family, built to $(B)/tests/mpi/ where the suites and the demo find them.
MPI_FAMILIES := openmpi mpich
HELLO_C := $(foreach m,$(MPI_FAMILIES),$(B)/tests/mpi/hello_c.$(m))
HELLO_F := $(foreach m,$(MPI_FAMILIES),$(foreach p,hello_mpifh hello_mod hello_f08,$(B)/tests/mpi/$(p).$(m)))

HELLO_C += $(foreach m,$(MPI_FAMILIES),$(B)/tests/mpi/imbalance.$(m))

$(B)/tests/mpi/hello_c.%: tests/programs/mpi/hello.c | $(B)/tests/mpi
	mpicc.$* -O2 -Wall -Werror -o $@ $<
$(B)/tests/mpi/imbalance.%: tests/programs/mpi/imbalance.c | $(B)/tests/mpi
	mpicc.$* -O2 -Wall -Werror -o $@ $< -lm
# gfortran writes .mod files into the cwd: keep each family's apart.
$(B)/tests/mpi/%.openmpi: tests/programs/mpi/%.f90 | $(B)/tests/mpi
	mkdir -p $(B)/tests/mpi/mod.openmpi.$* && mpif90.openmpi -O2 -J $(B)/tests/mpi/mod.openmpi.$* -o $@ $<
$(B)/tests/mpi/%.mpich: tests/programs/mpi/%.f90 | $(B)/tests/mpi
	mkdir -p $(B)/tests/mpi/mod.mpich.$* && mpif90.mpich -O2 -J $(B)/tests/mpi/mod.mpich.$* -o $@ $<
$(B)/tests/mpi:
	mkdir -p $@

CHECK_PREREQS += $(HELLO_C) $(HELLO_F)
