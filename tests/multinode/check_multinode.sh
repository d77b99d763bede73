#!/usr/bin/env bash
# numacoll across hosts: one case per CTest test, each on hosts of its own
# (nc_hosts.sh), torn down afterwards whatever happens.
#   check_multinode.sh CASE FLAVOR MPIEXEC LIB BINDIR
# CASE:
#   2x2.slot, 2x2.node      2 hosts x 2 ranks, by slot (0 1 | 2 3) and
#                           round robin (--map-by node: 0 2 | 1 3); 2x2.node
#                           with NUMACOLL_LEADER_WAIT=poll
#   3x123.slot, 3x123.node  3 hosts with 1, 2 and 3 ranks, both orders
#       test_multinode on world, dup, reversed, odd/even, one-host and
#       one-per-host communicators; the script checks that every rank ran
#       on the host the mapping puts it on, that NUMACOLL_VERBOSE's
#       "nodes=" equals the number of hosts on every world-sized
#       communicator, that NUMACOLL_STATS has a line per host in which
#       numacoll handled every call and the leaders used the MPI library,
#       that the leaders wait as NUMACOLL_LEADER_WAIT says (poll where a
#       host has more ranks than CPUs), and that /dev/shm of every host is
#       empty afterwards.
#   suites    the MPI test programs (bcast, gather family, reductions,
#             barrier) on 3 hosts x (1, 2, 3) ranks
#   preload   an unmodified program with LD_PRELOAD on 2 hosts x 2 ranks:
#             NUMACOLL_STATS shows one leader PMPI call per small broadcast
#   big       a broadcast of 2 GiB + 3 MiB (past INT_MAX bytes) on 2 hosts
#   kill      kill -9 of a rank on the second host mid-broadcast: the job
#             ends within 5 s, nothing is left running or in /dev/shm on
#             any host; kill.poll the same with NUMACOLL_LEADER_WAIT=poll
# Exit 77 (skipped) with the reason where hosts cannot be made here.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/nc_hosts.sh"
[ $# -eq 5 ] || { echo "usage: check_multinode.sh CASE FLAVOR MPIEXEC LIB BINDIR" >&2; exit 2; }
case=$1 flavor=$2 mpiexec=$3 lib=$4 bin=$5
if ! why=$(nc_hosts_can); then
    echo "SKIP: multi-host tests need namespaces here: $why"
    exit 77
fi
trap nc_hosts_down EXIT
out=$(mktemp /run/numacoll-mn-out.XXXXXX)
trap 'nc_hosts_down; rm -f "$out"' EXIT
fail() { echo "FAIL ($case, $flavor): $*"; exit 1; }

# launch SECS SPEC MAP NP [VAR=VALUE...] -- PROGRAM ARGS...: the job's
# output goes to $out (and to this log). SPEC is "1 2 3": ranks per host.
# MAP: slot (fill each host in turn) or node (round robin over the hosts).
launch()
{
    local secs=$1 spec=$2 map=$3 np=$4
    shift 4
    local envs=() k=1 n hosts=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    for n in $spec; do hosts+=("ncnode$k:$n"); k=$((k + 1)); done
    local args=()
    if [ "$flavor" = openmpi ]; then
        local IFS=,
        args=(--allow-run-as-root --oversubscribe --bind-to none --host "${hosts[*]}"
              --mca plm_rsh_agent "$here/nc_agent.sh" --mca plm_rsh_no_tree_spawn 1
              --mca btl tcp,self,vader --mca btl_vader_single_copy_mechanism none
              --mca oob_tcp_if_include "$NC_HOSTS_NET.0/24"
              --mca btl_tcp_if_include "$NC_HOSTS_NET.0/24")
        unset IFS
        [ "$map" = node ] && args+=(--map-by node)
        for e in "${envs[@]}"; do args+=(-x "$e"); done
    else
        # Hydra: -ppn 1 is its round robin (one rank per host in turn, the
        # hosts' counts aside: the spec is even there, see layout_case).
        local list=("${hosts[@]}")
        [ "$map" = node ] && list=("${hosts[@]%%:*}")
        local IFS=,
        args=(-launcher ssh -launcher-exec "$here/nc_agent.sh" -hosts "${list[*]}")
        unset IFS
        [ "$map" = node ] && args+=(-ppn 1)
        for e in "${envs[@]}"; do args+=(-genv "${e%%=*}" "${e#*=}"); done
    fi
    nc_on nchead timeout -s KILL "$secs" "$mpiexec" "${args[@]}" -n "$np" "$@" >"$out" 2>&1 &
    local job=$! rc waited=0 nstats=0
    [[ " ${envs[*]} " == *" NUMACOLL_STATS=1 "* ]] && nstats=${#hosts[@]}
    # MPICH 4.0 over UCX's tcp transport sometimes never returns from
    # MPI_Finalize once every rank is in it (ranks spin in ucp_worker_progress
    # or wait on PMI): the same with NUMACOLL_DISABLE=1, so it is the library's.
    # numacoll's own finalize (stats, segments) ran before PMPI_Finalize, so
    # when the program printed its verdict ($done_re), every host its stats
    # line (if asked for) and the launcher is still there 5 s later (15 s
    # without the stats lines), it is stopped and the case goes on, said in
    # the log.
    while kill -0 $job 2>/dev/null; do
        if [ "$flavor" = mpich ] && [ -n "${done_re:-}" ] && grep -qE "$done_re" "$out"; then
            waited=$((waited + 1))
            if [ $waited -ge 150 ] ||
               { [ $waited -ge 50 ] && [ "$nstats" -gt 0 ] &&
                 [ "$(grep -c 'numacoll stats: node ncnode' "$out")" -ge "$nstats" ]; }; then
                echo "note: MPICH hung in PMPI_Finalize after the verdict (the library's, see check_multinode.sh); stopping its launcher"
                nc_head_signal TERM mpiexec
                sleep 2
                nc_head_signal KILL mpiexec
                wait $job
                cat "$out"
                grep -qE "$done_re" "$out"
                return $?
            fi
        fi
        sleep 0.1
    done
    wait $job
    rc=$?
    cat "$out"
    return $rc
}

# expect_hosts SPEC MAP NP: every "rank R on HOST" line names the host the
# mapping puts rank R on.
expect_hosts()
{
    local spec=($1) map=$2 np=$3 r=0 k want
    local -a place=()
    if [ "$map" = slot ]; then
        for k in "${!spec[@]}"; do
            for _ in $(seq "${spec[$k]}"); do place[r]=ncnode$((k + 1)); r=$((r + 1)); done
        done
    else
        local left=("${spec[@]}")
        while [ $r -lt "$np" ]; do
            for k in "${!left[@]}"; do
                if [ "${left[$k]}" -gt 0 ] && [ $r -lt "$np" ]; then
                    place[r]=ncnode$((k + 1)); left[$k]=$((left[$k] - 1)); r=$((r + 1))
                fi
            done
        done
    fi
    for r in $(seq 0 $((np - 1))); do
        want=${place[$r]}
        grep -q "rank $r on $want\$" "$out" ||
            fail "rank $r did not run on $want: $(grep "rank $r on" "$out")"
    done
}

# expect_nodes NP H: numacoll found H nodes on every communicator of NP ranks.
expect_nodes()
{
    local np=$1 h=$2
    grep -q "comm size=$np nodes=$h " "$out" || fail "no 'comm size=$np nodes=$h' in NUMACOLL_VERBOSE"
    if grep "comm size=$np nodes=" "$out" | grep -qv "nodes=$h "; then
        fail "a communicator of $np ranks saw another node count: $(grep "comm size=$np nodes=" "$out" | sort -u)"
    fi
}

# expect_stats SPEC PMPI COLL...: a stats line per host with its rank count,
# calls of COLL handled by numacoll, and leader calls with PMPI calls. PMPI
# "0": no call of COLL went to the MPI library (else communicators of one
# rank did, and the program checks the others).
expect_stats()
{
    local spec=($1) pmpi=$2 k line
    shift 2
    for k in "${!spec[@]}"; do
        line=$(grep "numacoll stats: node ncnode$((k + 1)) (${spec[$k]} ranks)" "$out") ||
            fail "no NUMACOLL_STATS line for ncnode$((k + 1)) with ${spec[$k]} ranks"
        for c in "$@"; do
            grep -qE " $c numacoll [1-9][0-9]* calls [0-9]+ bytes, pmpi $pmpi calls [0-9]+ bytes, leaders [1-9][0-9]* calls [1-9][0-9]* pmpi(, cma [0-9]+ calls)?;" <<<"$line" ||
                fail "ncnode$((k + 1)): $c not all through numacoll with leader PMPI calls: $(grep -oE " $c numacoll [^;]*;" <<<"$line")"
        done
    done
}

# expect_clean SPEC: within 3 s of the launcher's exit nothing of the job
# runs on any host (its daemons end a moment after the launcher), and no
# host's /dev/shm holds a numacoll segment.
expect_clean()
{
    local spec=($1) k left procs
    for k in "${!spec[@]}"; do
        for _ in $(seq 30); do
            procs=$(nc_on ncnode$((k + 1)) ps -eo comm= | grep -vE '^(cat|ps|sh|nsenter|env|grep)$')
            [ -z "$procs" ] && break
            sleep 0.1
        done
        [ -z "$procs" ] || fail "ncnode$((k + 1)): still running 3 s after the launcher: $procs"
        left=$(nc_on ncnode$((k + 1)) sh -c 'ls /dev/shm | grep numacoll')
        [ -z "$left" ] || fail "ncnode$((k + 1)): left in /dev/shm: $left"
    done
}

# expect_leaders SPEC [poll]: every communicator of the job's size on several
# hosts reports the leaders' way of waiting that NUMACOLL_LEADER_WAIT=auto
# picks (poll when a host has more ranks than CPUs), or poll when asked for.
expect_leaders()
{
    local spec=($1) want=block n cpus
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) # the CPUs the ranks may use
    for n in "${spec[@]}"; do [ "$n" -gt "$cpus" ] && want=poll; done
    [ "${2:-}" = poll ] && want=poll
    local np=0
    for n in "${spec[@]}"; do np=$((np + n)); done
    grep -q "comm size=$np nodes=[0-9]* leaders=$want " "$out" ||
        fail "no 'leaders=$want' for a communicator of $np ranks in NUMACOLL_VERBOSE"
    if grep -E "comm size=$np nodes=[0-9]* leaders=" "$out" | grep -qv "leaders=$want "; then
        fail "a communicator of $np ranks waits otherwise: $(grep -oE "comm size=$np nodes=[0-9]* leaders=[a-z]*" "$out" | sort -u)"
    fi
}

# layout_case SPEC MAP [VAR=VALUE...]: test_multinode with these settings too.
layout_case()
{
    local spec=$1 map=$2 np=0 n
    shift 2
    for n in $spec; do np=$((np + n)); done
    local h
    h=$(wc -w <<<"$spec")
    if [ "$flavor" = mpich ] && [ "$map" = node ]; then
        # Hydra's round robin gives every host the same count (and repeating
        # a host in -hosts makes MPICH see one node per entry).
        spec=$(for _ in $(seq "$h"); do printf '%d ' $((np / h)); done)
        echo "note: MPICH's hydra interleaves hosts evenly: ranks per host $spec"
    fi
    nc_hosts_up "$h" || fail "could not make $h hosts"
    done_re="test_multinode: hosts $h ranks $np: 0 failures"
    launch 240 "$spec" "$map" "$np" NUMACOLL_VERBOSE=1 NUMACOLL_STATS=1 "$@" -- \
        "$bin/test_multinode" || fail "test_multinode failed"
    grep -q "test_multinode: hosts $h ranks $np: 0 failures" "$out" || fail "wrong data"
    expect_hosts "$spec" "$map" "$np"
    expect_nodes "$np" "$h"
    expect_leaders "$spec" "$([ "$*" = NUMACOLL_LEADER_WAIT=poll ] && echo poll)"
    expect_stats "$spec" "[0-9]+" bcast barrier allreduce reduce gather gatherv scatter scatterv \
        allgather allgatherv alltoall alltoallv
    expect_clean "$spec"
    echo "PASS $case ($flavor): $np ranks on $h hosts, by $map"
}

case $case in
2x2.slot) layout_case "2 2" slot ;;
2x2.node) layout_case "2 2" node NUMACOLL_LEADER_WAIT=poll ;;
3x123.slot) layout_case "1 2 3" slot ;;
3x123.node) layout_case "1 2 3" node ;;
suites)
    nc_hosts_up 3 || fail "could not make 3 hosts"
    for prog in "test_mpi_bcast quick" "test_mpi_gather quick" "test_mpi_reduce quick" \
                "test_mpi_misc barrier"; do
        done_re="(^|: )PASSED"
        # (NUMACOLL_STATS: its lines let a hung MPICH finalize be cut short, launch())
        launch 240 "1 2 3" slot 6 NUMACOLL_VERBOSE=1 NUMACOLL_STATS=1 -- $bin/$prog ||
            fail "$prog failed"
        expect_nodes 6 3
        expect_leaders "1 2 3"
    done
    expect_clean "1 2 3"
    echo "PASS suites ($flavor): bcast, gather family, reductions, barrier on 3 hosts x (1 2 3)"
    ;;
preload)
    nc_hosts_up 2 || fail "could not make 2 hosts"
    done_re="plain_bcast: 0 wrong values"
    launch 120 "2 2" slot 4 LD_PRELOAD="$lib" NUMACOLL_STATS=1 -- "$bin/plain_bcast" ||
        fail "plain_bcast failed"
    grep -q "plain_bcast: 0 wrong values" "$out" || fail "wrong data"
    expect_stats "2 2" 0 bcast barrier
    # plain_bcast: 20 broadcasts, 10 on world and 10 on a reversed world;
    # those of 1..496 bytes cost one leader call each, larger ones two.
    for k in 1 2; do
        line=$(grep -oE "node ncnode$k .* bcast numacoll [^;]*;" "$out")
        calls=$(sed -nE 's/.*leaders ([0-9]+) calls ([0-9]+) pmpi(, cma [0-9]+ calls)?;/\1 \2/p' <<<"$line")
        set -- $calls
        [ "${1:-0}" -eq 20 ] || fail "ncnode$k: $1 leader broadcasts, want 20 (one leader per host)"
        # sizes it*1000+1 ints: 1 int (4 bytes) fits the packet, the 19 others do not
        [ "${2:-0}" -eq 39 ] || fail "ncnode$k: $2 leader PMPI calls for 20 broadcasts, want 39"
    done
    expect_clean "2 2"
    echo "PASS preload ($flavor): stats per host, 1 leader PMPI call for the broadcast that fits the packet"
    ;;
big)
    nc_hosts_up 2 || fail "could not make 2 hosts"
    done_re="test_multinode: hosts 2 ranks 3: 0 failures"
    launch 240 "2 1" slot 3 NUMACOLL_STATS=1 -- "$bin/test_multinode" big ||
        fail "big broadcast failed"
    grep -q "test_multinode: hosts 2 ranks 3: 0 failures" "$out" || fail "wrong data"
    expect_clean "2 1"
    echo "PASS big ($flavor)"
    ;;
kill | kill.poll)
    nc_hosts_up 2 || fail "could not make 2 hosts"
    lw=()
    [ "$case" = kill.poll ] && lw=(NUMACOLL_LEADER_WAIT=poll)
    launch 60 "2 2" slot 4 LD_PRELOAD="$lib" "${lw[@]}" -- "$bin/kill_target" bcast 30 &
    job=$!
    for _ in $(seq 300); do
        [ "$(grep -c ' looping$' "$out")" -ge 4 ] && break
        sleep 0.1
    done
    [ "$(grep -c ' looping$' "$out")" -ge 4 ] || fail "the job did not start: $(cat "$out")"
    victim=$((2 + RANDOM % 2)) # on ncnode2
    pid=$(grep -o "rank $victim pid [0-9]*" "$out" | awk '{print $4}')
    sleep 0.$((RANDOM % 10))
    nc_on ncnode2 kill -9 "$pid" || fail "could not kill rank $victim (pid $pid on ncnode2)"
    t0=$(date +%s.%N)
    wait $job
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    echo "job ended $dt s after rank $victim was killed"
    awk -v d="$dt" 'BEGIN { exit !(d < 5) }' || fail "the job took $dt s to end"
    sleep 0.5 # the hosts' daemons reap their ranks
    expect_clean "2 2"
    echo "PASS $case ($flavor): rank $victim killed on ncnode2, job ended in $dt s, nothing left"
    ;;
*) echo "unknown case $case" >&2; exit 2 ;;
esac
