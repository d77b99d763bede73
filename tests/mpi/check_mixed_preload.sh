#!/usr/bin/env bash
# numacoll preloaded into one program of an MPMD launch only: the rank that runs
# it waits in MPI_Init for the others' start-up exchange, which they never
# make. Pass when it says what it waits for and how to fix it (after 10 s;
# the launcher is stopped then, or at 25 s) instead of a silent hang or garbage, and
# nothing of the job is left behind.
#   check_mixed_preload.sh FLAVOR MPIEXEC "FLAGS" LIB EXE
set -u
flavor=$1 mpiexec=$2 flags=$3 lib=$4 exe=$5
read -r -a f <<<"${flags//;/ }" # a CMake list or words
if [ "$flavor" = openmpi ]; then
    env1=(-x "LD_PRELOAD=$lib")
else
    env1=(-env LD_PRELOAD "$lib")
fi
shm_before=$(ls /dev/shm)
echo "+ $mpiexec ${f[*]} -n 1 ${env1[*]} $exe : -n 1 $exe"
log=$(mktemp)
timeout -k 5 -s TERM 25 "$mpiexec" "${f[@]}" -n 1 "${env1[@]}" "$exe" : -n 1 "$exe" >"$log" 2>&1 &
job=$! stopped=0
# the report comes after 10 s: stop the launcher once it is there rather than
# at the 25 s limit (timeout relays the TERM to it)
while kill -0 $job 2>/dev/null; do
    if grep -q "has waited [0-9]* s in MPI_Init" "$log"; then
        sleep 0.5 # the rest of the report
        kill -TERM $job 2>/dev/null && stopped=1
        break
    fi
    sleep 0.1
done
wait $job
rc=$?
out=$(cat "$log")
rm -f "$log"
echo "$out" | head -20
pat=$(printf '%s' "$exe" | sed 's/[][\.*^$+?(){}|]/\\&/g')
for _ in $(seq 20); do # the launcher's ranks go within a few seconds of it
    left=$(pgrep -f "^$pat" || true)
    [ -z "$left" ] && break
    sleep 0.5
done
# what the stopped job left in /dev/shm (the MPI library's own segments): only
# this job's, found by comparing with the listing before it
new=$(comm -13 <(echo "$shm_before" | sort) <(ls /dev/shm | sort))
for n in $new; do
    case $n in vader_segment.*) rm -f "/dev/shm/$n" ;; esac
done
if [ -n "$left" ]; then
    kill -9 $left 2>/dev/null
    echo "FAIL: processes of $exe left after the launcher stopped: $left"
    exit 1
fi
[ $rc = 124 ] || [ $stopped = 1 ] ||
    { echo "FAIL: the launcher ended with $rc before the report, expected it to wait"; exit 1; }
grep -q "has waited [0-9]* s in MPI_Init for the other ranks' numacoll start-up" <<<"$out" ||
    { echo "FAIL: no report of the wait"; exit 1; }
grep -q "every rank of the job must run numacoll" <<<"$out" || { echo "FAIL: no hint"; exit 1; }
if grep -q "^numacoll-" <<<"$new"; then
    echo "FAIL: left in /dev/shm: $(grep "^numacoll-" <<<"$new")"
    exit 1
fi
echo "OK: the preloaded rank said what it waits for"
