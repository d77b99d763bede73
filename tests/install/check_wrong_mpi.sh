#!/usr/bin/env bash
# This tree's libnumacoll-mpi.so preloaded into a C program of the other MPI:
# the run must be correct (the MPI library alone does the work), print
# exactly one line saying the library is built for another MPI, and no stats
# (numacoll is off); LD_BIND_NOW=1 too. Not Fortran programs: the library
# brings its own MPI library (a dependency, src/mpi/CMakeLists.txt), which a
# Fortran program reaches only through its Fortran MPI library, so the wrong
# MPI's PMPI_* come first for the MPI's own Fortran layer and it fails before
# numacoll can say anything (a known limitation, README). Skipped (77) when
# the other MPI is missing.
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

# This tree's numacoll-info started by the other MPI's launcher: every process
# is a job of one rank; it must say which build to use, once, and the job must
# exit with 2. Twice: as started, and with the launcher's rank 0 starting late
# (tests/mpi/late_rank0.sh), so that the others finish first (they must not make the
# launcher abort the job before rank 0 has explained).
info=$(dirname "$lib")/../bin/numacoll-info
if [ -x "$info" ]; then
    late=$(dirname "$0")/../mpi/late_rank0.sh
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
