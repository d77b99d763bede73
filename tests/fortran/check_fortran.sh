#!/usr/bin/env bash
# Run a Fortran test program (fcoll.F90) through numacoll and check its output.
#   check_fortran.sh FLAVOR MPIEXEC "MPIEXEC FLAGS" NP preload|linked LIB PROGRAM [ARG|VAR=value]...
# Passes when the program exits 0 after "fcoll: 0 errors", numacoll's start-up
# ran once ("started: node budget page shared by NP ranks"), and the single
# NUMACOLL_STATS line counts exactly the broadcasts, barriers, reductions and
# gather-family calls (MPI_Alltoallw included) the program expects numacoll and the MPI library to have handled
# ("fcoll expect: bcast numacoll A pmpi B barrier ... reduce ... allreduce ...").
set -u
flavor=$1 mpiexec=$2 flags=$3 np=$4 mode=$5 lib=$6 prog=$7
shift 7
envs=(NUMACOLL_STATS=1 NUMACOLL_VERBOSE=1)
[ "$mode" = preload ] && envs+=(LD_PRELOAD="$lib")
args=()
for a in "$@"; do
    if [[ $a =~ ^[A-Z_]+= ]]; then envs+=("$a"); else args+=("$a"); fi
done
read -r -a cmd <<<"$mpiexec $flags -n $np"
for e in "${envs[@]}"; do
    if [ "$flavor" = openmpi ]; then cmd+=(-x "$e"); else cmd+=(-genv "${e%%=*}" "${e#*=}"); fi
done
echo "+ ${cmd[*]} $prog ${args[*]}"
out=$("${cmd[@]}" "$prog" "${args[@]}" 2>&1)
rc=$?
echo "$out" | grep -v "^numacoll\[[0-9]*\]   \|team p=\|barrier: .* bytes\|placement check"

fail() { echo "FAIL: $*"; exit 1; }
[ $rc = 0 ] || fail "exit code $rc"
grep -q "^fcoll: 0 errors" <<<"$out" || fail "the program found wrong results"
n=$(grep -c "started: node budget page shared by $np ranks" <<<"$out")
[ "$n" = 1 ] || fail "numacoll's start-up line seen $n times, expected once"
[ "$(grep -c "^numacoll stats:" <<<"$out")" = 1 ] || fail "not exactly one stats line"
want= got=
for c in bcast barrier reduce allreduce gather gatherv scatter scatterv allgather allgatherv \
    alltoall alltoallv alltoallw; do
    # "[:;] $c" and " $c": reduce is not the end of allreduce.
    w=$(sed -n "s/^fcoll expect:.* $c numacoll \([0-9]*\) pmpi \([0-9]*\)\( .*\)\{0,1\}\$/\1 \2/p" <<<"$out")
    g=$(sed -n "s/^numacoll stats:.*[:;] $c numacoll \([0-9]*\) calls [0-9]* bytes, pmpi \([0-9]*\) calls.*/\1 \2/p" <<<"$out")
    # the stats line leaves out a collective nobody called
    [ -n "$g" ] || g="0 0"
    [ -n "$w" ] || fail "no $c counts in the expect line to compare"
    want+="${want:+, }$c $w" got+="${got:+, }$c $g"
done
[ "$want" = "$got" ] ||
    fail "calls (numacoll pmpi): expected $want; stats say $got"
echo "OK: numacoll handled what the program expected ($got)"
