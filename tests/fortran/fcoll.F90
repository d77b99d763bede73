! MPI_Bcast, MPI_Barrier, MPI_Reduce and MPI_Allreduce from Fortran, checked
! element by element. One source, compiled for each binding: -DNC_MPIF
! (include 'mpif.h'), -DNC_USEMPI (use mpi), -DNC_F08 (use mpi_f08).
!
!   fcoll [thread] [nomismatch]
!     thread       MPI_Init_thread instead of MPI_Init
!     nomismatch   leave out the size mismatch: for runs where the MPI library
!                  does the broadcasts (numacoll off), for which a mismatch
!                  is an erroneous program that may hang
!
! On MPI_COMM_WORLD and on a split communicator (odd/even ranks, reversed):
! integers of 1, 1000 and 100000 elements from every root (the element after
! the message must stay untouched); a vector type (holes, every gap checked);
! a contiguous type; MPI_BOTTOM with an absolute (hindexed) type; barriers,
! one of them with a late rank that the others must wait for; a size mismatch
! with MPI_ERRORS_RETURN, whose ierror must be MPI_ERR_TRUNCATE on the rank
! that expected less.
! Reductions, on both communicators, of 1, 1000 and 100000 elements:
! MPI_Allreduce, then MPI_Reduce to every root, of INTEGER with MPI_SUM and
! MPI_MAX and of DOUBLE PRECISION with MPI_SUM (small integers: exact in any
! order), each also with MPI_IN_PLACE (every rank of an allreduce, the root of
! a reduce); the element after the result and the send buffer must stay
! untouched, and so must the receive buffer of a reduce's other ranks. A
! user op (MPI_Op_create, a Fortran subroutine, not commutative) composing
! affine maps x -> a*x + b (mod 32749) on a contiguous pair of INTEGERs:
! the result must be MPI's rank order x0 op x1 op ... op x(p-1) (the test
! checks its data tells that from the reverse order). Fortran's own pair and
! logical types, MPI_Allreduce of 1 and 1000 elements on both communicators:
! MPI_MAXLOC on MPI_2INTEGER, MPI_MINLOC on MPI_2DOUBLE_PRECISION and
! MPI_MAXLOC on MPI_2REAL (many ties: the lowest index wins), MPI_LAND,
! MPI_LOR and MPI_LXOR on LOGICAL (all true, all false, one rank odd out,
! mixed).
! The gather family with blocks of 1 and 1000 INTEGERs on both communicators:
! MPI_Gather and MPI_Scatter from every root, MPI_Gatherv and MPI_Scatterv
! from the first and the last, MPI_Allgather(v), MPI_Alltoall(v); v-forms
! with uneven counts (0 among them for 1-element blocks) laid out in reverse
! rank order; each with MPI_IN_PLACE where MPI has it (not MPI_Alltoallv);
! every element checked, and the one after the data. numacoll takes these on
! a communicator of one rank too (a local copy, docs/gather.md). Then
! MPI_Alltoallw of the alltoallv's blocks, which numacoll only counts (the
! MPI library's call).
!
! Rank 0 prints the calls it expects numacoll to have handled (communicators
! of 2 or more ranks) and those it expects the MPI library to have (1 rank;
! every MPI_Alltoallw; the non-commutative user op when the communicator spans
! several nodes, i.e. with NUMACOLL_TEST_VIRTUAL_NODES > 1), for
! tests/fortran/check_fortran.sh to compare with the NUMACOLL_STATS line,
! then "fcoll: N errors".
#if defined(NC_F08)
#define COMM_T type(MPI_Comm)
#define TYPE_T type(MPI_Datatype)
#define OP_T type(MPI_Op)
#else
#define COMM_T integer
#define TYPE_T integer
#define OP_T integer
#endif

! The user op: an element is a pair (a, b), the map x -> a*x + b (mod M);
! u op v is "u, then v": x -> v%a*(u%a*x + u%b) + v%b. Associative, not
! commutative. M < 2**15 keeps every product in a default INTEGER.
module fcoll_ops
#if defined(NC_F08)
  use mpi_f08
#elif defined(NC_USEMPI)
  use mpi
#endif
  implicit none
#if defined(NC_MPIF)
  include 'mpif.h'
#endif
  private
  public :: affine_m, compose, affine_op
  integer, parameter :: affine_m = 32749

contains

  pure function compose(u, v) result(w)
    integer, intent(in) :: u(2), v(2)
    integer :: w(2)
    w(1) = mod(v(1) * u(1), affine_m)
    w(2) = mod(v(1) * u(2) + v(2), affine_m)
  end function

  ! MPI_User_function: inoutvec(k) = invec(k) op inoutvec(k), len pairs.
#if defined(NC_F08)
  subroutine affine_op(invec, inoutvec, len, datatype)
    use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    integer, pointer :: a(:, :), b(:, :)
    integer :: k
    call c_f_pointer(invec, a, [2, len])
    call c_f_pointer(inoutvec, b, [2, len])
    do k = 1, len
      b(:, k) = compose(a(:, k), b(:, k))
    end do
  end subroutine
#else
  subroutine affine_op(invec, inoutvec, len, datatype)
    integer :: len, datatype
    integer :: invec(2, len), inoutvec(2, len)
    integer :: k
    do k = 1, len
      inoutvec(:, k) = compose(invec(:, k), inoutvec(:, k))
    end do
  end subroutine
#endif
end module

program fcoll
#if defined(NC_F08)
  use mpi_f08
#elif defined(NC_USEMPI)
  use mpi
#endif
  use fcoll_ops
  implicit none
#if defined(NC_MPIF)
  include 'mpif.h'
#endif
  COMM_T :: world, half
  OP_T :: affine
  integer :: rank, nranks, hsize, ierr, provided, errors, n, vnodes, st, ierr_last
  ! calls(c) numacoll, calls(c + 1) MPI library, for c = the collectives' k_*
  integer, parameter :: k_bcast = 1, k_barrier = 3, k_reduce = 5, k_allreduce = 7, &
    k_gather = 9, k_gatherv = 11, k_scatter = 13, k_scatterv = 15, k_allgather = 17, &
    k_allgatherv = 19, k_alltoall = 21, k_alltoallv = 23, k_alltoallw = 25, nk = 26
  integer(8) :: calls(nk), total(nk)
  character(len=16) :: arg
  logical :: thread, mismatch
  integer :: i
  integer, parameter :: sizes(3) = [1, 1000, 100000]

  errors = 0
  calls = 0
  thread = .false.
  mismatch = .true.
  do i = 1, command_argument_count()
    call get_command_argument(i, arg)
    if (arg == 'thread') thread = .true.
    if (arg == 'nomismatch') mismatch = .false.
  end do
  ! numacoll leaves a non-commutative user op to the MPI library when the
  ! communicator spans several nodes: with v virtual nodes a communicator of
  ! s ranks spans min(s, v) (nc_mpi_comm.c cuts each node into v blocks).
  vnodes = 1
  call get_environment_variable('NUMACOLL_TEST_VIRTUAL_NODES', arg, status=st)
  if (st == 0) read(arg, *, iostat=st) vnodes
  if (st /= 0) vnodes = 1
  if (thread) then
    call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
  else
    call MPI_Init(ierr)
  end if
  world = MPI_COMM_WORLD
  call MPI_Comm_rank(world, rank, ierr)
  call MPI_Comm_size(world, nranks, ierr)
  call MPI_Comm_split(world, mod(rank, 2), nranks - rank, half, ierr)
  call MPI_Comm_size(half, hsize, ierr)

  do n = 1, size(sizes)
    call ints(world, nranks, sizes(n))
    call ints(half, hsize, sizes(n))
  end do
  call vector(world, nranks)
  call vector(half, hsize)
  call contig(world, nranks)
  call bottom(world, nranks)
  call bottom(half, hsize)
  call barriers(world, nranks)
  call barriers(half, hsize)
  call MPI_Op_create(affine_op, .false., affine, ierr)
  do n = 1, size(sizes)
    call reductions(world, nranks, sizes(n))
    call reductions(half, hsize, sizes(n))
  end do
  call MPI_Op_free(affine, ierr)
  do n = 1, 2
    call fortran_types(world, nranks, sizes(n))
    call fortran_types(half, hsize, sizes(n))
    call gather_family(world, nranks, sizes(n))
    call gather_family(half, hsize, sizes(n))
  end do
  if (mismatch) then
    call truncate(world, nranks, 500)
    call truncate(world, nranks, 20000)
  end if

  ! These two are counted too.
  call tally(nranks, k_reduce)
  call tally(nranks, k_allreduce)
  call MPI_Reduce(calls, total, nk, MPI_INTEGER8, MPI_SUM, 0, world, ierr)
  call MPI_Allreduce(MPI_IN_PLACE, errors, 1, MPI_INTEGER, MPI_SUM, world, ierr)
  if (rank == 0) then
    print '(26(a,i0))', 'fcoll expect: bcast numacoll ', total(1), ' pmpi ', total(2), &
      ' barrier numacoll ', total(3), ' pmpi ', total(4), &
      ' reduce numacoll ', total(5), ' pmpi ', total(6), &
      ' allreduce numacoll ', total(7), ' pmpi ', total(8), &
      ' gather numacoll ', total(9), ' pmpi ', total(10), &
      ' gatherv numacoll ', total(11), ' pmpi ', total(12), &
      ' scatter numacoll ', total(13), ' pmpi ', total(14), &
      ' scatterv numacoll ', total(15), ' pmpi ', total(16), &
      ' allgather numacoll ', total(17), ' pmpi ', total(18), &
      ' allgatherv numacoll ', total(19), ' pmpi ', total(20), &
      ' alltoall numacoll ', total(21), ' pmpi ', total(22), &
      ' alltoallv numacoll ', total(23), ' pmpi ', total(24), &
      ' alltoallw numacoll ', total(25), ' pmpi ', total(26)
    print '(a,i0,a)', 'fcoll: ', errors, ' errors'
  end if
  call MPI_Comm_free(half, ierr)
#if defined(NC_F08)
  call MPI_Finalize()
#else
  call MPI_Finalize(ierr)
#endif
  if (errors /= 0) error stop 1

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      errors = errors + 1
      print '(a,i0,a,a)', 'fcoll: FAIL rank ', rank, ': ', what
    end if
  end subroutine

  ! Who should have handled a call of collective k (k_*) on a communicator of
  ! csize ranks: numacoll when it has 2 or more.
  subroutine tally(csize, k)
    integer, intent(in) :: csize, k
    call tally_to(k, csize >= 2)
  end subroutine

  subroutine tally_to(k, numacoll)
    integer, intent(in) :: k
    logical, intent(in) :: numacoll
    if (numacoll) then
      calls(k) = calls(k) + 1
    else
      calls(k + 1) = calls(k + 1) + 1
    end if
  end subroutine

  integer function pat(i, root, n)
    integer, intent(in) :: i, root, n
    pat = mod(i * 7 + root * 131 + n, 1000003)
  end function

  subroutine ints(comm, csize, n)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize, n
    integer, allocatable :: buf(:)
    integer :: me, root, i, bad, ierr
    call MPI_Comm_rank(comm, me, ierr)
    allocate(buf(n + 1))
    do root = 0, csize - 1
      do i = 1, n
        buf(i) = -1
        if (me == root) buf(i) = pat(i, root, n)
      end do
      buf(n + 1) = -2
      call MPI_Bcast(buf, n, MPI_INTEGER, root, comm, ierr)
      call tally(csize, k_bcast)
      call check(ierr == MPI_SUCCESS, 'ints: ierror')
      bad = 0
      do i = 1, n
        if (buf(i) /= pat(i, root, n)) bad = bad + 1
      end do
      call check(bad == 0, 'ints: wrong elements')
      call check(buf(n + 1) == -2, 'ints: element after the message written')
    end do
  end subroutine

  ! 3 vectors of 50 blocks of 2 doubles, stride 3: 447 doubles spanned.
  subroutine vector(comm, csize)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize
    real(8) :: a(600)
    TYPE_T :: vec
    integer :: me, root, i, j, bad, ierr
    logical :: covered
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Type_vector(50, 2, 3, MPI_DOUBLE_PRECISION, vec, ierr)
    call MPI_Type_commit(vec, ierr)
    do root = 0, csize - 1
      do i = 1, size(a)
        a(i) = -1
        if (me == root) a(i) = i + 1000 * root
      end do
      call MPI_Bcast(a, 3, vec, root, comm, ierr)
      call tally(csize, k_bcast)
      call check(ierr == MPI_SUCCESS, 'vector: ierror')
      bad = 0
      do i = 1, size(a)
        j = mod(i - 1, 149)
        covered = i <= 3 * 149 .and. mod(j, 3) < 2
        if (me == root .or. covered) then
          if (a(i) /= i + 1000 * root) bad = bad + 1
        else
          if (a(i) /= -1) bad = bad + 1
        end if
      end do
      call check(bad == 0, 'vector: wrong elements or holes written')
    end do
    call MPI_Type_free(vec, ierr)
  end subroutine

  subroutine contig(comm, csize)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize
    integer :: buf(1200), me, root, i, bad, ierr
    TYPE_T :: three
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Type_contiguous(3, MPI_INTEGER, three, ierr)
    call MPI_Type_commit(three, ierr)
    do root = 0, csize - 1
      do i = 1, size(buf)
        buf(i) = -1
        if (me == root) buf(i) = pat(i, root, 3)
      end do
      call MPI_Bcast(buf, 400, three, root, comm, ierr)
      call tally(csize, k_bcast)
      call check(ierr == MPI_SUCCESS, 'contig: ierror')
      bad = 0
      do i = 1, size(buf)
        if (buf(i) /= pat(i, root, 3)) bad = bad + 1
      end do
      call check(bad == 0, 'contig: wrong elements')
    end do
    call MPI_Type_free(three, ierr)
  end subroutine

  ! MPI_BOTTOM and a type holding x's absolute address. x is volatile: the
  ! call writes it without naming it.
  subroutine bottom(comm, csize)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize
    integer, volatile :: x(500)
    integer(kind=MPI_ADDRESS_KIND) :: addr(1)
    integer :: lens(1), me, root, i, bad, ierr
    TYPE_T :: abs_t
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Get_address(x, addr(1), ierr)
    lens(1) = size(x)
    call MPI_Type_create_hindexed(1, lens, addr, MPI_INTEGER, abs_t, ierr)
    call MPI_Type_commit(abs_t, ierr)
    do root = 0, csize - 1
      do i = 1, size(x)
        x(i) = -1
        if (me == root) x(i) = pat(i, root, 77)
      end do
      call MPI_Bcast(MPI_BOTTOM, 1, abs_t, root, comm, ierr)
      call tally(csize, k_bcast)
      call check(ierr == MPI_SUCCESS, 'bottom: ierror')
      bad = 0
      do i = 1, size(x)
        if (x(i) /= pat(i, root, 77)) bad = bad + 1
      end do
      call check(bad == 0, 'bottom: wrong elements')
    end do
    call MPI_Type_free(abs_t, ierr)
  end subroutine

  subroutine barriers(comm, csize)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize
    integer :: me, i, ierr
    double precision :: t0
    call MPI_Comm_rank(comm, me, ierr)
    do i = 1, 10
      call MPI_Barrier(comm, ierr)
      call tally(csize, k_barrier)
      call check(ierr == MPI_SUCCESS, 'barrier: ierror')
    end do
#if defined(NC_F08)
    call MPI_Barrier(comm)
    call tally(csize, k_barrier)
#endif
    ! The last rank arrives 0.3 s late: nobody may leave before it came.
    if (csize > 1) then
      t0 = MPI_Wtime()
      if (me == csize - 1) then
        do while (MPI_Wtime() - t0 < 0.3d0)
        end do
      end if
      call MPI_Barrier(comm, ierr)
      call tally(csize, k_barrier)
      call check(MPI_Wtime() - t0 >= 0.2d0, 'barrier: left before the last rank came')
    end if
  end subroutine

  ! Rank 0 expects n elements, the root (last rank) and the others send 2n.
  subroutine truncate(comm, csize, n)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize, n
    integer, allocatable :: buf(:)
    integer :: me, root, mine, cls, i, bad, ierr, ierr2
    call MPI_Comm_rank(comm, me, ierr)
    if (csize < 2) return
    allocate(buf(2 * n))
    call MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN, ierr)
    root = csize - 1
    mine = 2 * n
    if (me == 0) mine = n
    buf = 0
    if (me == root) buf = 7
    call MPI_Bcast(buf, mine, MPI_INTEGER, root, comm, ierr)
    call tally(csize, k_bcast)
    if (me == 0) then
      cls = MPI_SUCCESS
      if (ierr /= MPI_SUCCESS) call MPI_Error_class(ierr, cls, ierr2)
      call check(cls == MPI_ERR_TRUNCATE, 'truncate: ierror is not MPI_ERR_TRUNCATE')
    else
      call check(ierr == MPI_SUCCESS, 'truncate: ierror on a rank with the right size')
    end if
    ! Still usable afterwards.
    do i = 1, n
      buf(i) = -1
      if (me == root) buf(i) = pat(i, root, n)
    end do
    call MPI_Bcast(buf, n, MPI_INTEGER, root, comm, ierr)
    call tally(csize, k_bcast)
    bad = 0
    do i = 1, n
      if (buf(i) /= pat(i, root, n)) bad = bad + 1
    end do
    call check(ierr == MPI_SUCCESS .and. bad == 0, 'truncate: the next broadcast failed')
    call MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL, ierr)
  end subroutine

  ! ---- reductions ----

  subroutine reductions(comm, csize, n)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize, n
    logical :: inplace
    integer :: j
    do j = 0, 1
      inplace = j == 1
      call red_int(comm, csize, n, 1, inplace)
      call red_int(comm, csize, n, 2, inplace)
      call red_dbl(comm, csize, n, inplace)
    end do
    call red_user(comm, csize, n)
  end subroutine

  ! What a reduction check is about: root -1 is the allreduce.
  function tag(what, n, root, inplace)
    character(len=*), intent(in) :: what
    integer, intent(in) :: n, root
    logical, intent(in) :: inplace
    character(len=80) :: tag
    write(tag, '(2a,i0,a,i0,a,l1)') what, ' n=', n, ' root=', root, ' in_place=', inplace
  end function

  integer function ival(i, r, n)
    integer, intent(in) :: i, r, n
    ival = mod(i * 13 + r * 101 + n, 2001) - 1000
  end function

  ! MPI_INTEGER with MPI_SUM (opk 1) or MPI_MAX (opk 2): MPI_Allreduce, then
  ! MPI_Reduce to every root; inplace: MPI_IN_PLACE on every rank of the
  ! allreduce and at the root of a reduce.
  subroutine red_int(comm, csize, n, opk, inplace)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize, n, opk
    logical, intent(in) :: inplace
    integer, allocatable :: s(:), r(:), want(:)
    integer :: me, root, i, j, bad, ierr
    logical :: reader
    character(len=80) :: what
    OP_T :: op
    call MPI_Comm_rank(comm, me, ierr)
    allocate(s(n + 1), r(n + 1), want(n))
    op = MPI_SUM
    if (opk == 2) op = MPI_MAX
    do i = 1, n
      want(i) = ival(i, 0, n)
      do j = 1, csize - 1
        if (opk == 1) then
          want(i) = want(i) + ival(i, j, n)
        else
          want(i) = max(want(i), ival(i, j, n))
        end if
      end do
    end do
    do root = -1, csize - 1
      what = tag(merge('int sum', 'int max', opk == 1), n, root, inplace)
      reader = root < 0 .or. me == root
      do i = 1, n
        s(i) = ival(i, me, n)
      end do
      s(n + 1) = -5000
      r = -7000
      if (inplace .and. reader) r(1:n) = s(1:n)
      if (root < 0) then
        if (inplace) then
          call MPI_Allreduce(MPI_IN_PLACE, r, n, MPI_INTEGER, op, comm, ierr)
        else
          call MPI_Allreduce(s, r, n, MPI_INTEGER, op, comm, ierr)
        end if
        call tally(csize, k_allreduce)
      else
        if (inplace .and. reader) then
          call MPI_Reduce(MPI_IN_PLACE, r, n, MPI_INTEGER, op, root, comm, ierr)
        else
          call MPI_Reduce(s, r, n, MPI_INTEGER, op, root, comm, ierr)
        end if
        call tally(csize, k_reduce)
      end if
      call check(ierr == MPI_SUCCESS, trim(what) // ': ierror')
      bad = 0
      do i = 1, n
        if (reader .and. r(i) /= want(i)) bad = bad + 1
        if (.not. reader .and. r(i) /= -7000) bad = bad + 1
        if (s(i) /= ival(i, me, n)) bad = bad + 1
      end do
      call check(bad == 0, trim(what) // ': wrong elements, or the send buffer or a' // &
                 ' non-root receive buffer written')
      call check(r(n + 1) == -7000 .and. s(n + 1) == -5000, &
                 trim(what) // ': element after the message written')
    end do
  end subroutine

  ! Small integers: exact sums in any order.
  real(8) function dval(i, r, n)
    integer, intent(in) :: i, r, n
    dval = mod(i + 3 * r + n, 17)
  end function

  ! DOUBLE PRECISION with MPI_SUM, as red_int.
  subroutine red_dbl(comm, csize, n, inplace)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize, n
    logical, intent(in) :: inplace
    real(8), allocatable :: s(:), r(:), want(:)
    integer :: me, root, i, j, bad, ierr
    logical :: reader
    character(len=80) :: what
    call MPI_Comm_rank(comm, me, ierr)
    allocate(s(n + 1), r(n + 1), want(n))
    do i = 1, n
      want(i) = dval(i, 0, n)
      do j = 1, csize - 1
        want(i) = want(i) + dval(i, j, n)
      end do
    end do
    do root = -1, csize - 1
      what = tag('double sum', n, root, inplace)
      reader = root < 0 .or. me == root
      do i = 1, n
        s(i) = dval(i, me, n)
      end do
      s(n + 1) = -5000
      r = -7000
      if (inplace .and. reader) r(1:n) = s(1:n)
      if (root < 0) then
        if (inplace) then
          call MPI_Allreduce(MPI_IN_PLACE, r, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
        else
          call MPI_Allreduce(s, r, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
        end if
        call tally(csize, k_allreduce)
      else
        if (inplace .and. reader) then
          call MPI_Reduce(MPI_IN_PLACE, r, n, MPI_DOUBLE_PRECISION, MPI_SUM, root, comm, ierr)
        else
          call MPI_Reduce(s, r, n, MPI_DOUBLE_PRECISION, MPI_SUM, root, comm, ierr)
        end if
        call tally(csize, k_reduce)
      end if
      call check(ierr == MPI_SUCCESS, trim(what) // ': ierror')
      bad = 0
      do i = 1, n
        if (reader .and. r(i) /= want(i)) bad = bad + 1
        if (.not. reader .and. r(i) /= -7000) bad = bad + 1
        if (s(i) /= dval(i, me, n)) bad = bad + 1
      end do
      call check(bad == 0, trim(what) // ': wrong elements, or the send buffer or a' // &
                 ' non-root receive buffer written')
      call check(r(n + 1) == -7000 .and. s(n + 1) == -5000, &
                 trim(what) // ': element after the message written')
    end do
  end subroutine

  ! Rank r's affine map at element i: a in [2, 1001], b in [1, M).
  function aval(i, r, n) result(p)
    integer, intent(in) :: i, r, n
    integer :: p(2)
    p(1) = 2 + mod(i * 3 + r * 5 + n, 1000)
    p(2) = 1 + mod(i * 7 + r * 11, affine_m - 1)
  end function

  ! The user op (host's affine, not commutative) on MPI_Type_contiguous(2,
  ! MPI_INTEGER): MPI_Allreduce, then MPI_Reduce to every root. The result
  ! must be x0 op x1 op ... op x(p-1), p = csize, in the communicator's rank
  ! order (the split communicator's is the reverse of MPI_COMM_WORLD's).
  ! numacoll takes it on one node only.
  subroutine red_user(comm, csize, n)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize, n
    integer, allocatable :: s(:, :), r(:, :), want(:, :)
    integer :: me, root, i, j, bad, diff, ierr, rev(2)
    logical :: reader, numacoll
    character(len=80) :: what
    TYPE_T :: pair
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Type_contiguous(2, MPI_INTEGER, pair, ierr)
    call MPI_Type_commit(pair, ierr)
    allocate(s(2, n + 1), r(2, n + 1), want(2, n))
    diff = 0
    do i = 1, n
      want(:, i) = aval(i, 0, n)
      rev = aval(i, csize - 1, n)
      do j = 1, csize - 1
        want(:, i) = compose(want(:, i), aval(i, j, n))
        rev = compose(rev, aval(i, csize - 1 - j, n))
      end do
      if (any(rev /= want(:, i))) diff = diff + 1
    end do
    if (csize > 1) call check(diff > 0, 'user op: the test data does not reveal the order')
    numacoll = csize >= 2 .and. vnodes <= 1
    do root = -1, csize - 1
      what = tag('user op', n, root, .false.)
      reader = root < 0 .or. me == root
      do i = 1, n
        s(:, i) = aval(i, me, n)
      end do
      s(:, n + 1) = -5
      r = -7
      if (root < 0) then
        call MPI_Allreduce(s, r, n, pair, affine, comm, ierr)
        call tally_to(k_allreduce, numacoll)
      else
        call MPI_Reduce(s, r, n, pair, affine, root, comm, ierr)
        call tally_to(k_reduce, numacoll)
      end if
      call check(ierr == MPI_SUCCESS, trim(what) // ': ierror')
      bad = 0
      do i = 1, n
        if (reader .and. any(r(:, i) /= want(:, i))) bad = bad + 1
        if (.not. reader .and. any(r(:, i) /= -7)) bad = bad + 1
        if (any(s(:, i) /= aval(i, me, n))) bad = bad + 1
      end do
      call check(bad == 0, trim(what) // ': not rank order, or the send buffer or a' // &
                 ' non-root receive buffer written')
      call check(all(r(:, n + 1) == -7) .and. all(s(:, n + 1) == -5), &
                 trim(what) // ': element after the message written')
    end do
    call MPI_Type_free(pair, ierr)
  end subroutine

  ! Fortran's pair and logical types (numacoll's since they map onto its
  ! own: 2INTEGER is its 2INT, 2REAL and 2DOUBLE_PRECISION its 2FLOAT and
  ! 2DOUBLE, LOGICAL the integers' logical ops): MPI_Allreduce of n elements.
  ! Values repeat every 3 ranks, so most elements tie and the index decides.
  subroutine fortran_types(comm, csize, n)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize, n
    integer, allocatable :: si(:, :), ri(:, :)
    real(8), allocatable :: sd(:, :), rd(:, :)
    real(4), allocatable :: sr(:, :), rr(:, :)
    logical, allocatable :: sl(:), rl(:), want(:)
    integer :: me, k, j, bad, ierr, o, at
    real(8) :: best
    character(len=80) :: what
    OP_T :: lop(3)
    call MPI_Comm_rank(comm, me, ierr)
    allocate(si(2, n), ri(2, n), sd(2, n), rd(2, n), sr(2, n), rr(2, n))
    allocate(sl(n + 1), rl(n + 1), want(n))
    do k = 1, n
      si(1, k) = mod(me * k, 3)
      si(2, k) = me
      sd(1, k) = 0.5d0 * mod(me + k, 3)
      sd(2, k) = 2.0d0 * me + 0.25d0
      sr(1, k) = 1.5 * mod(me * (k + 1), 3)
      sr(2, k) = real(csize - me)
    end do
    ri = -1
    rd = -1
    rr = -1
    call MPI_Allreduce(si, ri, n, MPI_2INTEGER, MPI_MAXLOC, comm, ierr)
    call check(ierr == MPI_SUCCESS, tag('2integer maxloc: ierror', n, -1, .false.))
    call MPI_Allreduce(sd, rd, n, MPI_2DOUBLE_PRECISION, MPI_MINLOC, comm, ierr)
    call check(ierr == MPI_SUCCESS, tag('2double_precision minloc: ierror', n, -1, .false.))
    call MPI_Allreduce(sr, rr, n, MPI_2REAL, MPI_MAXLOC, comm, ierr)
    call check(ierr == MPI_SUCCESS, tag('2real maxloc: ierror', n, -1, .false.))
    do j = 1, 3
      call tally(csize, k_allreduce)
    end do
    bad = 0
    do k = 1, n
      ! 2INTEGER, MAXLOC: the index is the rank, ranks in order
      best = -1
      at = -1
      do j = 0, csize - 1
        if (mod(j * k, 3) > best) then
          best = mod(j * k, 3)
          at = j
        end if
      end do
      if (ri(1, k) /= best .or. ri(2, k) /= at) bad = bad + 1
      ! 2DOUBLE_PRECISION, MINLOC: index 2*rank + 0.25, lowest first
      best = 1d9
      at = -1
      do j = 0, csize - 1
        if (0.5d0 * mod(j + k, 3) < best) then
          best = 0.5d0 * mod(j + k, 3)
          at = j
        end if
      end do
      if (rd(1, k) /= best .or. rd(2, k) /= 2.0d0 * at + 0.25d0) bad = bad + 1
      ! 2REAL, MAXLOC: index csize - rank, so the lowest index is the
      ! highest rank of the ties
      best = -1
      at = -1
      do j = csize - 1, 0, -1
        if (1.5 * mod(j * (k + 1), 3) > best) then
          best = 1.5 * mod(j * (k + 1), 3)
          at = j
        end if
      end do
      if (rr(1, k) /= real(best, 4) .or. rr(2, k) /= real(csize - at)) bad = bad + 1
    end do
    call check(bad == 0, tag('fortran pairs: wrong pairs', n, -1, .false.))

    lop = [MPI_LAND, MPI_LOR, MPI_LXOR]
    do o = 1, 3
      ! element k: pattern mod(k, 4): all true, all false, rank 0 odd out,
      ! ranks alternating
      do k = 1, n
        select case (mod(k, 4))
        case (0)
          sl(k) = .true.
        case (1)
          sl(k) = .false.
        case (2)
          sl(k) = me /= 0
        case default
          sl(k) = mod(me + k, 2) == 0
        end select
      end do
      sl(n + 1) = .true.
      rl = .false.
      rl(n + 1) = .true.
      do k = 1, n
        want(k) = sl_of(k, 0)
        do j = 1, csize - 1
          select case (o)
          case (1)
            want(k) = want(k) .and. sl_of(k, j)
          case (2)
            want(k) = want(k) .or. sl_of(k, j)
          case default
            want(k) = want(k) .neqv. sl_of(k, j)
          end select
        end do
      end do
      call MPI_Allreduce(sl, rl, n, MPI_LOGICAL, lop(o), comm, ierr)
      call tally(csize, k_allreduce)
      write(what, '(a,i0)') 'logical op ', o
      call check(ierr == MPI_SUCCESS, tag(trim(what) // ': ierror', n, -1, .false.))
      bad = 0
      do k = 1, n
        if (rl(k) .neqv. want(k)) bad = bad + 1
      end do
      call check(bad == 0, tag(trim(what) // ': wrong elements', n, -1, .false.))
      call check(rl(n + 1), tag(trim(what) // ': element after the message written', n, -1, &
                 .false.))
    end do
  end subroutine

  ! Element i of rank f's block for rank t (t = 0 where one block goes to all).
  integer function av(i, f, t)
    integer, intent(in) :: i, f, t
    av = (f * 64 + t) * 1009 + i
  end function

  ! Elements in the gather family's v-forms from rank f to rank t.
  integer function vn(n, f, t)
    integer, intent(in) :: n, f, t
    vn = max(n + mod(f + 2 * t, 3) - 1, 0)
  end function

  ! x(dsp(j) + i), i <= cnt(j), for every rank j: the block rank j sends to
  ! rank 0's place (from < 0: av(i, j, 0)) or that rank `from` sends to j
  ! (av(i, from, j)).
  subroutine put_blocks(x, cnt, dsp, csize, from)
    integer, intent(inout) :: x(:)
    integer, intent(in) :: cnt(0:), dsp(0:), csize, from
    integer :: i, j
    do j = 0, csize - 1
      do i = 1, cnt(j)
        if (from < 0) then
          x(dsp(j) + i) = av(i, j, 0)
        else
          x(dsp(j) + i) = av(i, from, j)
        end if
      end do
    end do
  end subroutine

  ! Fresh buffers for the next call: s = -5, r = want = -7 (what no call
  ! writes), then, for mine >= 0, my block of mine elements to send at s(1).
  subroutine fresh(s, r, want, me, mine)
    integer, intent(inout) :: s(:), r(:), want(:)
    integer, intent(in) :: me, mine
    integer :: i
    s = -5
    r = -7
    want = -7
    do i = 1, mine
      s(i) = av(i, me, 0)
    end do
  end subroutine

  subroutine xg_check(r, want, what, n, root, inplace)
    integer, intent(in) :: r(:), want(:), n, root
    character(len=*), intent(in) :: what
    logical, intent(in) :: inplace
    call check(ierr_last == MPI_SUCCESS, tag(what // ': ierror', n, root, inplace))
    call check(all(r == want), tag(what // ': wrong elements, or past the data written', n, &
               root, inplace))
  end subroutine

  ! The gather family, blocks of n INTEGERs (see the top).
  subroutine gather_family(comm, csize, n)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: csize, n
    integer, allocatable :: s(:), r(:), want(:), cnt(:), dsp(:), scnt(:), sdsp(:), rcnt(:), &
                            rdsp(:), ecnt(:), edsp(:)
    TYPE_T, allocatable :: wtypes(:)
    integer :: me, root, i, j, ierr, tot, m, ip, last, isz
    logical :: inp
    call MPI_Comm_rank(comm, me, ierr)
    m = csize * (n + 2) + 1
    allocate(s(m), r(m), want(m), cnt(0:csize - 1), dsp(0:csize - 1), scnt(0:csize - 1), &
             sdsp(0:csize - 1), rcnt(0:csize - 1), rdsp(0:csize - 1), ecnt(0:csize - 1), &
             edsp(0:csize - 1))
    ! equal blocks: n elements each, in rank order
    ecnt = n
    do j = 0, csize - 1
      edsp(j) = j * n
    end do
    ! v-forms: rank j's block (vn(n, j, 0) elements) at dsp(j), reverse rank order
    tot = 0
    do j = csize - 1, 0, -1
      cnt(j) = vn(n, j, 0)
      dsp(j) = tot
      tot = tot + cnt(j)
    end do
    do ip = 0, 1
      inp = ip == 1
      ! MPI_Gather, every root
      do root = 0, csize - 1
        call fresh(s, r, want, me, n)
        if (me == root) call put_blocks(want, ecnt, edsp, csize, -1)
        if (inp .and. me == root) then
          r(me * n + 1:me * n + n) = s(1:n)
          call MPI_Gather(MPI_IN_PLACE, n, MPI_INTEGER, r, n, MPI_INTEGER, root, comm, ierr_last)
        else
          call MPI_Gather(s, n, MPI_INTEGER, r, n, MPI_INTEGER, root, comm, ierr_last)
        end if
        call tally_to(k_gather, .true.)
        call xg_check(r, want, 'gather', n, root, inp)
      end do
      ! MPI_Scatter, every root
      do root = 0, csize - 1
        call fresh(s, r, want, me, -1)
        if (me == root) call put_blocks(s, ecnt, edsp, csize, root)
        if (.not. (inp .and. me == root)) then
          do i = 1, n
            want(i) = av(i, root, me)
          end do
        end if
        if (inp .and. me == root) then
          call MPI_Scatter(s, n, MPI_INTEGER, MPI_IN_PLACE, n, MPI_INTEGER, root, comm, ierr_last)
        else
          call MPI_Scatter(s, n, MPI_INTEGER, r, n, MPI_INTEGER, root, comm, ierr_last)
        end if
        call tally_to(k_scatter, .true.)
        call xg_check(r, want, 'scatter', n, root, inp)
      end do
      ! MPI_Gatherv and MPI_Scatterv, the first and the last root
      do last = 0, 1
        root = last * (csize - 1)
        call fresh(s, r, want, me, cnt(me))
        if (me == root) call put_blocks(want, cnt, dsp, csize, -1)
        if (inp .and. me == root) then
          r(dsp(me) + 1:dsp(me) + cnt(me)) = s(1:cnt(me))
          call MPI_Gatherv(MPI_IN_PLACE, cnt(me), MPI_INTEGER, r, cnt, dsp, MPI_INTEGER, root, &
                           comm, ierr_last)
        else
          call MPI_Gatherv(s, cnt(me), MPI_INTEGER, r, cnt, dsp, MPI_INTEGER, root, comm, &
                           ierr_last)
        end if
        call tally_to(k_gatherv, .true.)
        call xg_check(r, want, 'gatherv', n, root, inp)

        call fresh(s, r, want, me, -1)
        if (me == root) call put_blocks(s, cnt, dsp, csize, root)
        if (.not. (inp .and. me == root)) then
          do i = 1, cnt(me)
            want(i) = av(i, root, me)
          end do
        end if
        if (inp .and. me == root) then
          call MPI_Scatterv(s, cnt, dsp, MPI_INTEGER, MPI_IN_PLACE, cnt(me), MPI_INTEGER, root, &
                            comm, ierr_last)
        else
          call MPI_Scatterv(s, cnt, dsp, MPI_INTEGER, r, cnt(me), MPI_INTEGER, root, comm, &
                            ierr_last)
        end if
        call tally_to(k_scatterv, .true.)
        call xg_check(r, want, 'scatterv', n, root, inp)
      end do
      ! MPI_Allgather, MPI_Allgatherv
      call fresh(s, r, want, me, n)
      call put_blocks(want, ecnt, edsp, csize, -1)
      if (inp) then
        r(me * n + 1:me * n + n) = s(1:n)
        call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, n, MPI_INTEGER, comm, ierr_last)
      else
        call MPI_Allgather(s, n, MPI_INTEGER, r, n, MPI_INTEGER, comm, ierr_last)
      end if
      call tally_to(k_allgather, .true.)
      call xg_check(r, want, 'allgather', n, -1, inp)
      call fresh(s, r, want, me, cnt(me))
      call put_blocks(want, cnt, dsp, csize, -1)
      if (inp) then
        r(dsp(me) + 1:dsp(me) + cnt(me)) = s(1:cnt(me))
        call MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, cnt, dsp, MPI_INTEGER, comm, &
                            ierr_last)
      else
        call MPI_Allgatherv(s, cnt(me), MPI_INTEGER, r, cnt, dsp, MPI_INTEGER, comm, ierr_last)
      end if
      call tally_to(k_allgatherv, .true.)
      call xg_check(r, want, 'allgatherv', n, -1, inp)
      ! MPI_Alltoall
      call fresh(s, r, want, me, -1)
      do j = 0, csize - 1
        do i = 1, n
          s(j * n + i) = av(i, me, j)
          want(j * n + i) = av(i, j, me)
        end do
      end do
      if (inp) then
        r(1:csize * n) = s(1:csize * n)
        call MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, n, MPI_INTEGER, comm, ierr_last)
      else
        call MPI_Alltoall(s, n, MPI_INTEGER, r, n, MPI_INTEGER, comm, ierr_last)
      end if
      call tally_to(k_alltoall, .true.)
      call xg_check(r, want, 'alltoall', n, -1, inp)
    end do
    ! MPI_Alltoallv: vn(n, f, t) elements from f to t, both sides in reverse rank order
    call fresh(s, r, want, me, -1)
    tot = 0
    do j = csize - 1, 0, -1
      scnt(j) = vn(n, me, j)
      sdsp(j) = tot
      tot = tot + scnt(j)
    end do
    tot = 0
    do j = csize - 1, 0, -1
      rcnt(j) = vn(n, j, me)
      rdsp(j) = tot
      tot = tot + rcnt(j)
    end do
    do j = 0, csize - 1
      do i = 1, scnt(j)
        s(sdsp(j) + i) = av(i, me, j)
      end do
      do i = 1, rcnt(j)
        want(rdsp(j) + i) = av(i, j, me)
      end do
    end do
    call MPI_Alltoallv(s, scnt, sdsp, MPI_INTEGER, r, rcnt, rdsp, MPI_INTEGER, comm, ierr_last)
    call tally_to(k_alltoallv, .true.)
    call xg_check(r, want, 'alltoallv', n, -1, .false.)
    ! MPI_Alltoallw of the same blocks (a datatype per block, displacements in
    ! bytes): always the MPI library's, counted by numacoll
    allocate(wtypes(0:csize - 1))
    wtypes = MPI_INTEGER
    isz = storage_size(s(1)) / 8
    r = -7
    call MPI_Alltoallw(s, scnt, sdsp * isz, wtypes, r, rcnt, rdsp * isz, wtypes, comm, ierr_last)
    call tally_to(k_alltoallw, .false.)
    call xg_check(r, want, 'alltoallw', n, -1, .false.)
  end subroutine

  logical function sl_of(k, r)
    integer, intent(in) :: k, r
    select case (mod(k, 4))
    case (0)
      sl_of = .true.
    case (1)
      sl_of = .false.
    case (2)
      sl_of = r /= 0
    case default
      sl_of = mod(r + k, 2) == 0
    end select
  end function

end program
