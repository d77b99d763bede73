#!/usr/bin/env bash
# This tree's libnumacoll-mpi.so preloaded into a C program of the other MPI:
# the run must be correct (the MPI library alone does the work), print
# exactly one line saying the library is built for another MPI, and no stats
# (numacoll is off); LD_BIND_NOW=1 too.
# Preloaded into a Fortran program of the other MPI: the library brings its
# own MPI library (a dependency, src/mpi/CMakeLists.txt), which comes before
# the program's for the MPI's Fortran layer, so the program cannot run; it
# must stop in MPI_Init with exactly one line saying why and which library to
# preload, a non-zero exit code and no crash (it used to die in the MPI's
# initialisation: "MPI_Comm_f2c() function was called before MPI_INIT", or
# SIGSEGV), also with the launcher's rank 0 starting late. Skipped (77) when
# the other MPI is missing; the Fortran part when its Fortran compiler is.
# Then this tree's numacoll-info under the other launcher: one line naming the
# build to use, a non-zero exit.
#   check_wrong_mpi.sh FLAVOR LIB WORKDIR PLAIN_BCAST_C FCOLL_F90 OTHER_MPICC OTHER_MPIF90 OTHER_MPIEXEC
set -u
flavor=$1 lib=$2 work=$3 plain=$4 fcoll=$5 mpicc=$6 mpif90=$7 mpiexec=$8
for t in "$mpicc" "$mpiexec"; do
    [ -x "$t" ] || { echo "SKIP: the other MPI is not installed ($t)"; exit 77; }
done
if [ "$flavor" = openmpi ]; then
    this="Open MPI" other=MPICH
    launch=("$mpiexec" -n 3 -genv LD_PRELOAD "$lib" -genv NUMACOLL_STATS 1 -genv LD_BIND_NOW 1)
else
    this=MPICH other="Open MPI"
    launch=("$mpiexec" --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader
            --mca btl_vader_single_copy_mechanism none -np 3
            -x LD_PRELOAD="$lib" -x NUMACOLL_STATS=1 -x LD_BIND_NOW=1)
fi
fail=0
set -e
"$mpicc" -O2 "$plain" -o "$work/plain_other"
set +e

# check LABEL GOOD_OUTPUT PROGRAM ARGS...
check() {
    local label=$1 good=$2; shift 2
    echo "+ ${launch[*]} $*"
    local out rc
    out=$("${launch[@]}" "$@" 2>&1); rc=$?
    echo "$out"
    local n
    n=$(grep -c "built for $this, but this program runs $other" <<<"$out")
    if [ $rc != 0 ] || ! grep -q "$good" <<<"$out" || [ "$n" != 1 ] ||
       grep -q "^numacoll stats:" <<<"$out" || grep -q "numacoll\[[0-9]*\] error" <<<"$out"; then
        echo "FAIL $label: exit code $rc, $n wrong-MPI lines (want 1), correct output: $(grep -c "$good" <<<"$out")"
        fail=1
    else
        echo "OK $label"
    fi
}
check "C program" "plain_bcast: 0 wrong values" "$work/plain_other"

# check_fortran LABEL [PREFIX...]: the Fortran program stops with the explanation
check_fortran() {
    local label=$1; shift
    echo "+ ${launch[*]} $* $work/fortran_other"
    local out rc n
    out=$("${launch[@]}" "$@" "$work/fortran_other" 2>&1); rc=$?
    echo "$out"
    n=$(grep -c "built for $this is in a process that also loaded $other, the program's MPI: .*preload or link the $other build instead" <<<"$out")
    if [ $rc = 0 ] || [ "$n" != 1 ] || grep -qiE "signal|segmentation|before MPI_INIT|sum +[0-9]" <<<"$out"; then
        echo "FAIL $label: exit code $rc, $n explaining lines (want 1)"
        fail=1
    else
        echo "OK $label"
    fi
}
late=$(dirname "$0")/../mpi/late_rank0.sh
if [ -x "$mpif90" ]; then
    cat >"$work/fortran_other.f90" <<'EOF'
program fortran_other
  use mpi
  integer :: ierr, rank, x
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = rank
  call MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  print *, 'sum', x
  call MPI_Finalize(ierr)
end program
EOF
    if "$mpif90" "$work/fortran_other.f90" -o "$work/fortran_other"; then
        check_fortran "Fortran program"
        check_fortran "Fortran program, rank 0 late" "$late"
    else
        echo "FAIL: $mpif90 cannot build a Fortran program"
        fail=1
    fi
else
    echo "(no $mpif90: the Fortran part skipped)"
fi

# This tree's numacoll-info started by the other MPI's launcher: every process
# is a job of one rank; it must say which build to use, once, and the job must
# exit with 2. Twice: as started, and with the launcher's rank 0 starting late
# (tests/mpi/late_rank0.sh), so that the others finish first (they must not make the
# launcher abort the job before rank 0 has explained).
info=$(dirname "$lib")/../bin/numacoll-info
if [ -x "$info" ]; then
    for how in "" "$late"; do
        echo "+ ${launch[*]} $how $info"
        out=$("${launch[@]}" $how "$info" 2>&1); rc=$?
        echo "$out"
        n=$(grep -c "started by $other's launcher for 3 ranks, but this numacoll-info is built with $this" <<<"$out")
        if [ $rc = 0 ] || [ "$n" != 1 ]; then
            echo "FAIL numacoll-info under the other launcher${how:+, rank 0 late}: exit code $rc, $n explaining lines (want 1)"
            fail=1
        else
            echo "OK numacoll-info under the other launcher${how:+, rank 0 late}"
        fi
    done
fi
exit $fail
