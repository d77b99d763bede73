#!/usr/bin/env bash
# Small /dev/shm: numacoll must never be the reason a job dies (no SIGBUS),
# every byte stays right, fallbacks are said once, nothing is left behind.
# Each case mounts a private tmpfs on /dev/shm in a new mount namespace.
#   check_small_shm.sh FLAVOR MPIEXEC LIB BINDIR
# Exit 77 (skipped) where this process cannot make a mount namespace.
set -u
flavor=$1 mpiexec=$2 lib=$3 bin=$4
if ! unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs /dev/shm' 2>/dev/null; then
    echo "SKIP: cannot mount a tmpfs in a new mount namespace here (needs root or CAP_SYS_ADMIN)"
    exit 77
fi
fail=0
# run SIZE NP ENV... -- PROGRAM ARGS: output in $out, exit code in $rc.
run() {
    local size=$1 np=$2; shift 2
    local envs=() args
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    if [ "$flavor" = openmpi ]; then
        # vader cannot fit in a 4 MiB /dev/shm either: Open MPI warns and uses
        # TCP over loopback, as it does for users.
        args=(--allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader,tcp
              --mca btl_tcp_if_include lo --mca btl_vader_single_copy_mechanism none
              -np "$np" -x LD_PRELOAD="$lib" -x NUMACOLL_STATS=1)
        for e in "${envs[@]}"; do args+=(-x "$e"); done
    else
        # UCX's own shared memory goes to /tmp: MPICH cannot start in 4 MiB.
        args=(-n "$np" -env LD_PRELOAD "$lib" -env NUMACOLL_STATS 1 -env UCX_POSIX_DIR /tmp)
        for e in "${envs[@]}"; do args+=(-env "${e%%=*}" "${e#*=}"); done
    fi
    out=$(unshare -m sh -c 'mount -t tmpfs -o size="$0" tmpfs /dev/shm || exit 99
                             timeout 120 "$@"; rc=$?
                             left=$(ls /dev/shm | grep "^numacoll-")
                             [ -z "$left" ] || { echo "LEFT IN /dev/shm: $left"; rc=98; }
                             exit $rc' "$size" "$mpiexec" "${args[@]}" "$@" 2>&1)
    rc=$?
}
check() { # NAME CONDITION-DESCRIPTION, reads $ok
    if [ "$ok" = 1 ]; then echo "ok   $1"; else echo "FAIL $1"; echo "$out" | tail -30; fail=1; fi
}

# 1. 4 MiB /dev/shm, a plain program at p = 4: completes, every byte right,
#    some communicator still runs in numacoll (shorter queue).
run 4m 4 -- "$bin/plain_bcast"
ok=1
[ $rc = 0 ] && grep -q "plain_bcast: 0 wrong values" <<<"$out" || ok=0
grep -q "bcast numacoll [1-9][0-9]* calls" <<<"$out" || ok=0
grep -qi "SIGBUS\|Bus error" <<<"$out" && ok=0
check "4 MiB /dev/shm, plain_bcast p=4 (rc=$rc)"

# 2. 64 MiB (Docker's default), 40 duplicates of MPI_COMM_WORLD, 100 KB each:
#    completes; the budget warnings come once per process, not per communicator.
run 64m 4 -- "$bin/dups_bcast" 40 100000
ok=1
[ $rc = 0 ] && grep -q "40 communicators x 100000 bytes x 2 rounds, 0 wrong bytes" <<<"$out" || ok=0
grep -q "bcast numacoll [1-9][0-9]* calls" <<<"$out" || ok=0
n_reduced=$(grep -c "warning: shared-memory budget .* reached" <<<"$out")
n_full=$(grep -c "warning: shared-memory budget .* is used up" <<<"$out")
pids_reduced=$(grep "warning: shared-memory budget .* reached" <<<"$out" | grep -o "numacoll\[[0-9]*\]" | sort -u | wc -l)
[ "$n_full" -ge 1 ] && [ "$n_full" -le 4 ] && [ "$n_reduced" = "$pids_reduced" ] || ok=0
check "64 MiB /dev/shm, 40 dups x 100 KB p=4 (rc=$rc, budget lines: $n_reduced reduced, $n_full full)"

# 3. The budget cannot help (NUMACOLL_SHM_LIMIT above /dev/shm): the space
#    reservation fails, the communicator goes to the MPI library, one line
#    says what was needed and what /dev/shm has.
run 4m 4 NUMACOLL_SHM_LIMIT=1g -- "$bin/dups_bcast" 4 100000
ok=1
[ $rc = 0 ] && grep -q "4 communicators x 100000 bytes x 2 rounds, 0 wrong bytes" <<<"$out" || ok=0
grep -q "needs .* of /dev/shm, which has .* free of 4.0 MiB" <<<"$out" || ok=0
[ "$(grep -c "needs .* of /dev/shm, which has" <<<"$out")" -le 4 ] || ok=0
check "4 MiB /dev/shm, NUMACOLL_SHM_LIMIT=1g: reservation fails cleanly (rc=$rc)"

# 4. A bad tunable on a 300-call program: its error is printed once per rank.
run 64m 2 NUMACOLL_BCAST_TREE=nosuchtree -- "$bin/dups_bcast" 3 1000 50
ok=1
[ $rc = 0 ] && grep -q "0 wrong bytes" <<<"$out" || ok=0
n_bad=$(grep -c 'NUMACOLL_BCAST_TREE="nosuchtree" is not valid' <<<"$out")
[ "$n_bad" -ge 1 ] && [ "$n_bad" -le 2 ] || ok=0
check "bad tunable said once per process ($n_bad lines for 2 ranks)"

exit $fail
