#!/usr/bin/env bash
# This tree's libnumacoll-mpi.so in programs of the other MPI, and one case
# of this MPI that must not be mistaken for them:
#   1. a C program of the other MPI, preloaded: the run must be correct (the
#      MPI library alone does the work), print exactly one line saying the
#      library is built for another MPI, and no stats (numacoll is off);
#      LD_BIND_NOW=1 too;
#   2. programs of the other MPI that reach it through another library, whose
#      calls would land in this library's MPI (it comes first in the lookup
#      order): Fortran (`use mpi` with MPI_Init, `use mpi_f08` with
#      MPI_Init_thread) and a C program whose MPI calls are all in a shared
#      library of its own (as with PETSc). Each must stop in its
#      initialisation with exactly one line saying why and which library to
#      preload, a non-zero exit code and no crash (they used to die in the
#      MPI: "MPI_Comm_f2c() function was called before MPI_INIT", or
#      SIGSEGV), also with the launcher's rank 0 starting late;
#   3. a C program of this MPI that loads the other MPI's library with
#      dlopen(RTLD_GLOBAL) before MPI_Init (a plug-in would): it runs, with
#      numacoll on, no warning;
#   4. this tree's numacoll-info under the other launcher: one line naming
#      the build to use, a non-zero exit, also with rank 0 late.
# Skipped (77) when the other MPI is missing; the Fortran part when its
# Fortran compiler is.
#   check_wrong_mpi.sh FLAVOR LIB WORKDIR PLAIN_BCAST_C THIS_MPICC OTHER_MPICC OTHER_MPIF90 OTHER_MPIEXEC
set -u
flavor=$1 lib=$2 work=$3 plain=$4 this_mpicc=$5 mpicc=$6 mpif90=$7 mpiexec=$8
for t in "$mpicc" "$mpiexec"; do
    [ -x "$t" ] || { echo "SKIP: the other MPI is not installed ($t)"; exit 77; }
done
if [ "$flavor" = openmpi ]; then
    this="Open MPI" other=MPICH other_lib=libmpich.so.12
    launch=("$mpiexec" -n 3 -genv LD_PRELOAD "$lib" -genv NUMACOLL_STATS 1 -genv LD_BIND_NOW 1)
else
    this=MPICH other="Open MPI" other_lib=libmpi.so.40
    launch=("$mpiexec" --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader
            --mca btl_vader_single_copy_mechanism none -np 3
            -x LD_PRELOAD="$lib" -x NUMACOLL_STATS=1 -x LD_BIND_NOW=1)
fi
late=("$(dirname "$0")/../mpi/late_rank0.sh")
fail=0
set -e
"$mpicc" -O2 "$plain" -o "$work/plain_other"
set +e

# 1. check LABEL GOOD_OUTPUT PROGRAM ARGS...
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

# 2. check_stops LABEL PROGRAM: the program stops with the explanation, as
# started and with rank 0 late
check_stops() {
    local label=$1 prog=$2 how out rc n
    for how in "" late; do
        local pre=()
        [ -n "$how" ] && pre=("${late[@]}")
        echo "+ ${launch[*]} ${pre[*]} $prog"
        out=$("${launch[@]}" "${pre[@]}" "$prog" 2>&1); rc=$?
        echo "$out"
        n=$(grep -c "built for $this, but this program reaches $other through .*: its MPI calls would land in $this and crash, so it stops here; preload or link the $other build instead" <<<"$out")
        if [ $rc = 0 ] || [ "$n" != 1 ] || grep -qiE "signal|segmentation|before MPI_INIT|sum +[0-9]" <<<"$out"; then
            echo "FAIL $label${how:+, rank 0 late}: exit code $rc, $n explaining lines (want 1)"
            fail=1
        else
            echo "OK $label${how:+, rank 0 late}"
        fi
    done
}
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
    cat >"$work/fortran08_other.f90" <<'EOF'
program fortran08_other
  use mpi_f08
  integer :: provided, rank, x
  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  x = rank
  call MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  print *, 'sum', x
  call MPI_Finalize()
end program
EOF
    for f in fortran_other fortran08_other; do
        if "$mpif90" "$work/$f.f90" -o "$work/$f"; then
            check_stops "Fortran program ($f)" "$work/$f"
        else
            echo "FAIL: $mpif90 cannot build $f.f90"
            fail=1
        fi
    done
else
    echo "(no $mpif90: the Fortran part skipped)"
fi
cat >"$work/via_lib.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
void via_run(int *argc, char ***argv)
{
    int rank, x;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&rank, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("sum %d\n", x);
    MPI_Finalize();
}
EOF
cat >"$work/via_main.c" <<'EOF'
void via_run(int *argc, char ***argv);
int main(int argc, char **argv)
{
    via_run(&argc, &argv);
    return 0;
}
EOF
if "$mpicc" -shared -fPIC "$work/via_lib.c" -o "$work/libvia_other.so" &&
   cc "$work/via_main.c" -L"$work" -lvia_other -Wl,-rpath,"$work" -o "$work/via_other"; then
    check_stops "C program calling MPI through its own library" "$work/via_other"
else
    echo "FAIL: cannot build the C program with its own MPI library"
    fail=1
fi

# 3. This MPI's program with the other MPI's library loaded globally, run as
# a job of one rank: numacoll stays on (its stats line; a job of one rank
# hands its broadcast to the MPI library, so the count is not the point).
cat >"$work/dlopen_other.c" <<EOF
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    if (!dlopen("$other_lib", RTLD_NOW | RTLD_GLOBAL)) {
        printf("cannot load $other_lib: %s\n", dlerror());
        return 1;
    }
    int v = 7;
    MPI_Init(&argc, &argv);
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    printf("dlopen_other: bcast %s\n", v == 7 ? "right" : "wrong");
    MPI_Finalize();
    return 0;
}
EOF
if "$this_mpicc" "$work/dlopen_other.c" -ldl -o "$work/dlopen_other"; then
    echo "+ LD_PRELOAD=$lib NUMACOLL_STATS=1 $work/dlopen_other"
    out=$(LD_PRELOAD="$lib" NUMACOLL_STATS=1 OMPI_MCA_btl=self,vader timeout -k 5 60 "$work/dlopen_other" 2>&1); rc=$?
    echo "$out"
    if [ $rc != 0 ] || ! grep -q "dlopen_other: bcast right" <<<"$out" ||
       ! grep -qE "^numacoll stats: .* bcast numacoll [0-9]+ calls" <<<"$out" ||
       grep -qE "numacoll\[[0-9]+\] (error|warning)" <<<"$out"; then
        echo "FAIL $this program with $other_lib loaded: exit code $rc (want 0, the right value, numacoll on: its stats line, no error or warning)"
        fail=1
    else
        echo "OK $this program with $other_lib loaded"
    fi
else
    echo "FAIL: $this_mpicc cannot build dlopen_other.c"
    fail=1
fi

# 4. This tree's numacoll-info started by the other MPI's launcher: every
# process is a job of one rank; it must say which build to use, once, and the
# job must exit with 2, as started and with rank 0 late (the others finish
# first: they must not make the launcher abort the job before rank 0 has
# explained).
info=$(dirname "$lib")/../bin/numacoll-info
if [ -x "$info" ]; then
    for how in "" late; do
        pre=()
        [ -n "$how" ] && pre=("${late[@]}")
        echo "+ ${launch[*]} ${pre[*]} $info"
        out=$("${launch[@]}" "${pre[@]}" "$info" 2>&1); rc=$?
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
