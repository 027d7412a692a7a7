! SPDX-License-Identifier: BSD-3-Clause
! Fortran binding through include 'mpif.h': the same calls as f90_calls and
! f08_calls, fixed counts per rank (2 ranks), see tests/py/test_preload.py.
! MPI_IN_PLACE must reach the MPI unchanged: the in-place results are checked.
program f77_calls
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nranks, peer, i, req(4)
  logical :: flag
  integer :: stat(MPI_STATUS_SIZE), stats(MPI_STATUS_SIZE, 4)
  integer :: ibuf(10), obuf(10), g(2)
  double precision :: big(100), d, dsum

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  if (nranks /= 2) call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
  peer = 1 - rank
  big = 0d0
  obuf = rank
  do i = 1, 3
    call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  end do
  if (rank == 0) then
    call MPI_SEND(big, 100, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD, ierr)
    call MPI_RECV(big, 100, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD, stat, ierr)
  else
    call MPI_RECV(big, 100, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD, stat, ierr)
    call MPI_SEND(big, 100, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD, ierr)
  end if
  do i = 1, 2
    call MPI_SENDRECV(obuf, 10, MPI_INTEGER, peer, 2, ibuf, 10, MPI_INTEGER, peer, 2, &
                      MPI_COMM_WORLD, stat, ierr)
  end do
  call MPI_IRECV(ibuf(1), 1, MPI_INTEGER, peer, 3, MPI_COMM_WORLD, req(1), ierr)
  call MPI_IRECV(ibuf(2), 1, MPI_INTEGER, peer, 4, MPI_COMM_WORLD, req(2), ierr)
  call MPI_ISEND(obuf(1), 1, MPI_INTEGER, peer, 3, MPI_COMM_WORLD, req(3), ierr)
  call MPI_ISEND(obuf(2), 1, MPI_INTEGER, peer, 4, MPI_COMM_WORLD, req(4), ierr)
  call MPI_WAITALL(4, req, stats, ierr)
  call MPI_TEST(req(1), flag, stat, ierr)
  call MPI_BCAST(ibuf, 5, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  d = rank
  call MPI_ALLREDUCE(d, dsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  dsum = rank + 1
  call MPI_ALLREDUCE(MPI_IN_PLACE, dsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (dsum /= 3d0) call MPI_ABORT(MPI_COMM_WORLD, 3, ierr)
  call MPI_REDUCE(d, dsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  g = -1
  g(rank + 1) = 10 + rank
  if (rank == 0) then
    call MPI_GATHER(MPI_IN_PLACE, 1, MPI_INTEGER, g, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    if (g(1) /= 10 .or. g(2) /= 11) call MPI_ABORT(MPI_COMM_WORLD, 4, ierr)
  else
    call MPI_GATHER(g(2), 1, MPI_INTEGER, g, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  end if
  print '(a,i0)', 'F77 OK ', rank
  call MPI_FINALIZE(ierr)
end program
