! MPI_Bcast and MPI_Barrier from Fortran, checked element by element. One
! source, compiled for each binding: -DNC_MPIF (include 'mpif.h'),
! -DNC_USEMPI (use mpi), -DNC_F08 (use mpi_f08).
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
! that expected less. Rank 0 prints the calls it expects numacoll to have
! handled (communicators of 2 or more ranks) and those it expects the MPI
! library to have (1 rank), for tests/fortran/check_fortran.sh to compare with
! the NUMACOLL_STATS line, then "fcoll: N errors".
#if defined(NC_F08)
#define COMM_T type(MPI_Comm)
#define TYPE_T type(MPI_Datatype)
#else
#define COMM_T integer
#define TYPE_T integer
#endif

program fcoll
#if defined(NC_F08)
  use mpi_f08
#elif defined(NC_USEMPI)
  use mpi
#endif
  implicit none
#if defined(NC_MPIF)
  include 'mpif.h'
#endif
  COMM_T :: world, half
  integer :: rank, nranks, hsize, ierr, provided, errors, n
  ! calls: bcast numacoll, bcast MPI library, barrier numacoll, barrier MPI library
  integer(8) :: calls(4), total(4)
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
  if (mismatch) then
    call truncate(world, nranks, 500)
    call truncate(world, nranks, 20000)
  end if

  call MPI_Reduce(calls, total, 4, MPI_INTEGER8, MPI_SUM, 0, world, ierr)
  call MPI_Allreduce(MPI_IN_PLACE, errors, 1, MPI_INTEGER, MPI_SUM, world, ierr)
  if (rank == 0) then
    print '(a,i0,a,i0,a,i0,a,i0)', 'fcoll expect: bcast numacoll ', total(1), ' pmpi ', &
      total(2), ' barrier numacoll ', total(3), ' pmpi ', total(4)
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

  ! Who should have handled a call on a communicator of csize ranks.
  subroutine tally(csize, barrier)
    integer, intent(in) :: csize
    logical, intent(in) :: barrier
    integer :: i
    i = 1
    if (barrier) i = 3
    if (csize < 2) i = i + 1
    calls(i) = calls(i) + 1
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
      call tally(csize, .false.)
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
      call tally(csize, .false.)
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
      call tally(csize, .false.)
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
      call tally(csize, .false.)
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
      call tally(csize, .true.)
      call check(ierr == MPI_SUCCESS, 'barrier: ierror')
    end do
#if defined(NC_F08)
    call MPI_Barrier(comm)
    call tally(csize, .true.)
#endif
    ! The last rank arrives 0.3 s late: nobody may leave before it came.
    if (csize > 1) then
      t0 = MPI_Wtime()
      if (me == csize - 1) then
        do while (MPI_Wtime() - t0 < 0.3d0)
        end do
      end if
      call MPI_Barrier(comm, ierr)
      call tally(csize, .true.)
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
    call tally(csize, .false.)
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
    call tally(csize, .false.)
    bad = 0
    do i = 1, n
      if (buf(i) /= pat(i, root, n)) bad = bad + 1
    end do
    call check(ierr == MPI_SUCCESS .and. bad == 0, 'truncate: the next broadcast failed')
    call MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL, ierr)
  end subroutine

end program
