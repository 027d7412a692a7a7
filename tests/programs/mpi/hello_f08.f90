! SPDX-License-Identifier: BSD-3-Clause
! Smoke test, Fortran 2008 with use mpi_f08.
program hello_f08
  use mpi_f08
  implicit none
  integer :: rank, nprocs, total, hlen
  character(len=MPI_MAX_PROCESSOR_NAME) :: host
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  call MPI_Get_processor_name(host, hlen)
  call MPI_Barrier(MPI_COMM_WORLD)
  call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (total == nprocs * (nprocs - 1) / 2) then
    print '(a,i0,a,i0,a,a,a)', 'hello f08 rank ', rank, ' of ', nprocs, ' on ', host(1:hlen), ' sum ok'
  else
    print '(a,i0,a,i0,a,a,a)', 'hello f08 rank ', rank, ' of ', nprocs, ' on ', host(1:hlen), ' sum WRONG'
  end if
  call MPI_Finalize()
end program hello_f08
