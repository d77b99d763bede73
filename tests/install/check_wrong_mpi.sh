#!/usr/bin/env bash
# This tree's libnumacoll-mpi.so preloaded into programs of the other MPI: a
# C program and Fortran ones (mpif.h; mpi_f08 with MPI_Init_thread). Each run
# must be correct (the MPI library alone does the work), print exactly one
# line saying the library is built for another MPI, and no stats (numacoll is
# off). LD_BIND_NOW=1: every symbol the library references must exist in the
# other MPI, or be weak (nc_mpi.h). Skipped (77) when the other MPI or its
# Fortran compiler is missing.
#   check_wrong_mpi.sh FLAVOR LIB WORKDIR PLAIN_BCAST_C FCOLL_F90 OTHER_MPICC OTHER_MPIF90 OTHER_MPIEXEC
set -u
flavor=$1 lib=$2 work=$3 plain=$4 fcoll=$5 mpicc=$6 mpif90=$7 mpiexec=$8
for t in "$mpicc" "$mpif90" "$mpiexec"; do
    [ -x "$t" ] || { echo "SKIP: the other MPI is not installed ($t)"; exit 77; }
done
"$mpif90" --version >/dev/null 2>&1 || { echo "SKIP: $mpif90 cannot compile"; exit 77; }
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
"$mpif90" -O2 -DNC_MPIF -fallow-argument-mismatch "$fcoll" -o "$work/fcoll_mpif_other"
"$mpif90" -O2 -DNC_F08 "$fcoll" -o "$work/fcoll_f08_other"
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
# nomismatch: a size mismatch is an erroneous program for the MPI library.
check "Fortran mpif.h" "fcoll: 0 errors" "$work/fcoll_mpif_other" nomismatch
check "Fortran mpi_f08, MPI_Init_thread" "fcoll: 0 errors" "$work/fcoll_f08_other" thread nomismatch
exit $fail
