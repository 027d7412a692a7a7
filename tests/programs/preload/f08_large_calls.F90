! SPDX-License-Identifier: BSD-3-Clause
! The large-count calls of c_large_calls.c through use mpi_f08: counts of
! kind MPI_COUNT_KIND select the MPI-4 large-count procedures (MPICH:
! mpi_x_f08ts_large_ in 4.0, mpi_x_c_f08ts_ from 4.1).  Same calls, same
! counts, 2 ranks; tests/py/test_preload.py checks every call and byte count
! (preload_helpers.large_expected).  Built with -DMPI_PSTATE_F08_LARGE only
! when f08_large_probe.f90 compiles (rules.mk); otherwise it prints "SKIP".
program f08_large_calls
  use mpi_f08
  implicit none
  integer :: rank, nranks, peer, sender, i
  integer, parameter :: ck = MPI_COUNT_KIND, ak = MPI_ADDRESS_KIND
#ifdef MPI_PSTATE_F08_LARGE
  integer :: ibuf(256), obuf(256), idummy(1)
  character :: bsend_buf(1024)
  integer(ck) :: counts(2), got
  integer(ak) :: displs(2)
  type(MPI_Datatype) :: types(2)
  type(MPI_Request) :: req
  type(MPI_Message) :: msg
  type(MPI_Status) :: st
  type(MPI_Comm) :: ring
  logical :: bad
#endif

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  if (nranks /= 2) call MPI_Abort(MPI_COMM_WORLD, 2)
  peer = 1 - rank
#ifdef MPI_PSTATE_F08_LARGE
  bad = .false.
  types = MPI_INTEGER
  do i = 1, 256
    obuf(i) = 1000 * rank + i - 1
  end do
  ibuf = 0
  call MPI_Buffer_attach(bsend_buf, 1024)

  do sender = 0, 1
    if (rank == sender) then
      call MPI_Send(obuf, 1_ck, MPI_INTEGER, peer, 1, MPI_COMM_WORLD)
      call MPI_Bsend(obuf, 2_ck, MPI_INTEGER, peer, 2, MPI_COMM_WORLD)
      call MPI_Ssend(obuf, 3_ck, MPI_INTEGER, peer, 3, MPI_COMM_WORLD)
      call MPI_Barrier(MPI_COMM_WORLD)
      call MPI_Rsend(obuf, 4_ck, MPI_INTEGER, peer, 4, MPI_COMM_WORLD)
      call MPI_Send(obuf, 5_ck, MPI_INTEGER, peer, 5, MPI_COMM_WORLD)
    else
      call MPI_Recv(ibuf, 1_ck, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, st)
      if (ibuf(1) /= 1000 * peer) bad = .true.
      call MPI_Recv(ibuf, 2_ck, MPI_INTEGER, peer, 2, MPI_COMM_WORLD, st)
      call MPI_Recv(ibuf, 3_ck, MPI_INTEGER, peer, 3, MPI_COMM_WORLD, st)
      call MPI_Irecv(ibuf, 4, MPI_INTEGER, peer, 4, MPI_COMM_WORLD, req)
      call MPI_Barrier(MPI_COMM_WORLD)
      call MPI_Wait(req, MPI_STATUS_IGNORE)
      call MPI_Mprobe(peer, 5, MPI_COMM_WORLD, msg, st)
      call MPI_Mrecv(ibuf, 5_ck, MPI_INTEGER, msg, st)
      call MPI_Get_count(st, MPI_INTEGER, got)
      if (got /= 5) bad = .true.
    end if
  end do
  call MPI_Sendrecv(obuf, 6_ck, MPI_INTEGER, peer, 6, ibuf, 6_ck, MPI_INTEGER, peer, 6, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  if (ibuf(6) /= 1000 * peer + 5) bad = .true.
  call MPI_Sendrecv_replace(ibuf, 7_ck, MPI_INTEGER, peer, 7, peer, 7, MPI_COMM_WORLD, &
                            MPI_STATUS_IGNORE)

  call MPI_Bcast(obuf, 8_ck, MPI_INTEGER, 0, MPI_COMM_WORLD)
  if (obuf(8) /= 7) bad = .true.
  do i = 1, 256
    obuf(i) = 1000 * rank + i - 1
  end do
  if (rank == 0) then
    call MPI_Gather(MPI_IN_PLACE, 0_ck, MPI_DATATYPE_NULL, ibuf, 9_ck, MPI_INTEGER, 0, &
                    MPI_COMM_WORLD)
  else
    call MPI_Gather(obuf, 9_ck, MPI_INTEGER, idummy, 0_ck, MPI_INTEGER, 0, MPI_COMM_WORLD)
  end if
  counts = 10
  displs = [0_ak, 10_ak]
  call MPI_Gatherv(obuf, 10_ck, MPI_INTEGER, ibuf, counts, displs, MPI_INTEGER, 0, &
                   MPI_COMM_WORLD)
  if (rank == 0 .and. ibuf(11) /= 1000) bad = .true.
  call MPI_Scatter(obuf, 11_ck, MPI_INTEGER, ibuf, 11_ck, MPI_INTEGER, 0, MPI_COMM_WORLD)
  counts = 12
  displs = [0_ak, 12_ak]
  call MPI_Scatterv(obuf, counts, displs, MPI_INTEGER, ibuf, 12_ck, MPI_INTEGER, 0, &
                    MPI_COMM_WORLD)
  if (ibuf(1) /= 12 * rank) bad = .true.
  call MPI_Allgather(obuf, 13_ck, MPI_INTEGER, ibuf, 13_ck, MPI_INTEGER, MPI_COMM_WORLD)
  counts = 14
  displs = [0_ak, 14_ak]
  call MPI_Allgatherv(obuf, 14_ck, MPI_INTEGER, ibuf, counts, displs, MPI_INTEGER, &
                      MPI_COMM_WORLD)
  if (ibuf(15) /= 1000) bad = .true.
  call MPI_Alltoall(obuf, 15_ck, MPI_INTEGER, ibuf, 15_ck, MPI_INTEGER, MPI_COMM_WORLD)
  counts = 16
  displs = [0_ak, 16_ak]
  call MPI_Alltoallv(obuf, counts, displs, MPI_INTEGER, ibuf, counts, displs, MPI_INTEGER, &
                     MPI_COMM_WORLD)
  counts = 17
  displs = [0_ak, 17_ak * 4]
  call MPI_Alltoallw(obuf, counts, displs, types, ibuf, counts, displs, types, MPI_COMM_WORLD)
  call MPI_Reduce(obuf, ibuf, 18_ck, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD)
  call MPI_Allreduce(obuf, ibuf, 19_ck, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (ibuf(2) /= 1002) bad = .true.
  ibuf(1:19) = rank + 1
  call MPI_Allreduce(MPI_IN_PLACE, ibuf, 19_ck, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (ibuf(19) /= 3) bad = .true.
  counts = 20
  call MPI_Reduce_scatter(obuf, ibuf, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Reduce_scatter_block(obuf, ibuf, 21_ck, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Scan(obuf, ibuf, 22_ck, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Exscan(obuf, ibuf, 23_ck, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)

  ! a distributed graph, the peer the one neighbour: MPICH 4.0's large-count
  ! neighbour procedures fail on any other topology
  call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, [peer], MPI_UNWEIGHTED, 1, [peer], &
                                      MPI_UNWEIGHTED, MPI_INFO_NULL, .false., ring)
  call MPI_Neighbor_allgather(obuf, 24_ck, MPI_INTEGER, ibuf, 24_ck, MPI_INTEGER, ring)
  counts = 25
  displs = [0_ak, 25_ak]
  call MPI_Neighbor_allgatherv(obuf, 25_ck, MPI_INTEGER, ibuf, counts, displs, MPI_INTEGER, ring)
  call MPI_Neighbor_alltoall(obuf, 26_ck, MPI_INTEGER, ibuf, 26_ck, MPI_INTEGER, ring)
  counts = 27
  displs = [0_ak, 27_ak]
  call MPI_Neighbor_alltoallv(obuf, counts, displs, MPI_INTEGER, ibuf, counts, displs, &
                              MPI_INTEGER, ring)
  counts = 28
  displs = [0_ak, 28_ak * 4]
  call MPI_Neighbor_alltoallw(obuf, counts, displs, types, ibuf, counts, displs, types, ring)
  call MPI_Comm_free(ring)

  call MPI_Barrier(MPI_COMM_WORLD)
  if (bad) then
    print '(a,i0)', 'F08 LARGE BAD ', rank
  else
    print '(a,i0)', 'F08 LARGE OK ', rank
  end if
#else
  print '(a,i0,a)', 'SKIP ', rank, ': this mpi_f08 has no large-count procedures'
#endif
  call MPI_Finalize()
end program
