! SPDX-License-Identifier: BSD-3-Clause
! Fortran binding through use mpi_f08: the same calls as f77_calls and
! f90_calls, fixed counts per rank (2 ranks), see tests/py/test_preload.py.
program f08_calls
  use mpi_f08
  implicit none
  integer :: rank, nranks, peer, i
  logical :: flag
  type(MPI_Request) :: req(4)
  type(MPI_Status) :: stat, stats(4)
  integer :: ibuf(10), obuf(10), g(2)
  double precision :: big(100), d, dsum

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  if (nranks /= 2) call MPI_Abort(MPI_COMM_WORLD, 2)
  peer = 1 - rank
  big = 0d0
  obuf = rank
  do i = 1, 3
    call MPI_Barrier(MPI_COMM_WORLD)
  end do
  if (rank == 0) then
    call MPI_Send(big, 100, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD)
    call MPI_Recv(big, 100, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD, stat)
  else
    call MPI_Recv(big, 100, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD, stat)
    call MPI_Send(big, 100, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD)
  end if
  do i = 1, 2
    call MPI_Sendrecv(obuf, 10, MPI_INTEGER, peer, 2, ibuf, 10, MPI_INTEGER, peer, 2, &
                      MPI_COMM_WORLD, stat)
  end do
  call MPI_Irecv(ibuf(1), 1, MPI_INTEGER, peer, 3, MPI_COMM_WORLD, req(1))
  call MPI_Irecv(ibuf(2), 1, MPI_INTEGER, peer, 4, MPI_COMM_WORLD, req(2))
  call MPI_Isend(obuf(1), 1, MPI_INTEGER, peer, 3, MPI_COMM_WORLD, req(3))
  call MPI_Isend(obuf(2), 1, MPI_INTEGER, peer, 4, MPI_COMM_WORLD, req(4))
  call MPI_Waitall(4, req, stats)
  call MPI_Test(req(1), flag, stat)
  call MPI_Bcast(ibuf, 5, MPI_INTEGER, 0, MPI_COMM_WORLD)
  d = rank
  call MPI_Allreduce(d, dsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  dsum = rank + 1
  call MPI_Allreduce(MPI_IN_PLACE, dsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  if (dsum /= 3d0) call MPI_Abort(MPI_COMM_WORLD, 3)
  call MPI_Reduce(d, dsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD)
  g = -1
  g(rank + 1) = 10 + rank
  if (rank == 0) then
    call MPI_Gather(MPI_IN_PLACE, 1, MPI_INTEGER, g, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
    if (g(1) /= 10 .or. g(2) /= 11) call MPI_Abort(MPI_COMM_WORLD, 4)
  else
    call MPI_Gather(g(2), 1, MPI_INTEGER, g, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
  end if
  print '(a,i0)', 'F08 OK ', rank
  call MPI_Finalize()
end program
