! SPDX-License-Identifier: BSD-3-Clause
! Smoke test, Fortran with include 'mpif.h'.
program hello_mpifh
  implicit none
  include 'mpif.h'
  integer :: rank, nprocs, total, ierr, hlen
  character(len=MPI_MAX_PROCESSOR_NAME) :: host
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call MPI_Get_processor_name(host, hlen, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (total == nprocs * (nprocs - 1) / 2) then
    print '(a,i0,a,i0,a,a,a)', 'hello mpifh rank ', rank, ' of ', nprocs, ' on ', host(1:hlen), ' sum ok'
  else
    print '(a,i0,a,i0,a,a,a)', 'hello mpifh rank ', rank, ' of ', nprocs, ' on ', host(1:hlen), ' sum WRONG'
  end if
  call MPI_Finalize(ierr)
end program hello_mpifh
