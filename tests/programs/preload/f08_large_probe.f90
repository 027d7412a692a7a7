! SPDX-License-Identifier: BSD-3-Clause
! Does this MPI's mpi_f08 have the MPI-4 large-count procedures?  rules.mk
! compiles this (syntax only) to decide how to build f08_large_calls.F90.
program f08_large_probe
  use mpi_f08
  implicit none
  double precision :: x(1)
  call MPI_Bcast(x, 1_MPI_COUNT_KIND, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD)
end program
