#!/usr/bin/env bash
# numacoll preloaded into one program of an MPMD launch only: the rank that runs
# it waits in MPI_Init for the others' start-up exchange, which they never
# make. Pass when, within 14 s, it says what it waits for and how to fix it
# (instead of a silent hang or garbage), and nothing is left behind after the
# launcher is stopped.
#   check_mixed_preload.sh FLAVOR MPIEXEC "FLAGS" LIB EXE
set -u
flavor=$1 mpiexec=$2 flags=$3 lib=$4 exe=$5
read -r -a f <<<"${flags//;/ }" # a CMake list or words
if [ "$flavor" = openmpi ]; then
    env1=(-x "LD_PRELOAD=$lib")
else
    env1=(-env LD_PRELOAD "$lib")
fi
echo "+ $mpiexec ${f[*]} -n 1 ${env1[*]} $exe : -n 1 $exe"
out=$(timeout -s TERM 14 "$mpiexec" "${f[@]}" -n 1 "${env1[@]}" "$exe" : -n 1 "$exe" 2>&1)
rc=$?
echo "$out" | head -20
for _ in $(seq 20); do # the launcher's ranks go within a few seconds of it
    left=$(pgrep -f "^$exe" || true)
    [ -z "$left" ] && break
    sleep 0.5
done
if [ -n "$left" ]; then
    kill -9 $left 2>/dev/null
    echo "FAIL: processes of $exe left after the launcher stopped: $left"
    exit 1
fi
rm -f /dev/shm/vader_segment.* 2>/dev/null # Open MPI's own, from the stopped job
[ $rc = 124 ] || { echo "FAIL: the launcher ended with $rc, expected the 14 s limit"; exit 1; }
grep -q "has waited [0-9]* s in MPI_Init for the other ranks' numacoll start-up" <<<"$out" ||
    { echo "FAIL: no report of the wait"; exit 1; }
grep -q "every rank of the job must run numacoll" <<<"$out" || { echo "FAIL: no hint"; exit 1; }
if ls /dev/shm/numacoll-* >/dev/null 2>&1; then
    echo "FAIL: left in /dev/shm: $(ls /dev/shm/numacoll-*)"
    exit 1
fi
echo "OK: the preloaded rank said what it waits for"
