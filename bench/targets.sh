#!/usr/bin/env bash
# make bench-targets: the measurements the performance issues ask for, one run each, and
# a table of every size band against its target.
#
#   reduce  (issue 12) reduce, allreduce, MPI_SUM of doubles, 0 B .. 4 MiB:
#           t_max at most 0.5x the native MPI's at 0-256 B and 512 B-64 KiB, 0.75x at
#           128-512 KiB and >= 1 MiB
#   gather  (issue 13) gather, scatter, allgather, alltoall, blocks of 0 B .. 4 MiB:
#           at most 0.6x native in every band
#   bcast   (issue 14) bcast of 1 .. 16 MiB, --off-cache: at most 0.5x native, and at
#           p = 2 at most 0.75x the in-run memcpy of one core
#
# Each band is the geometric mean numacoll-bench prints in its summary. A value above
# its target is marked '*'; the reference columns say what a band's physical limits
# measured in the same run: flag-sync (the collective's waits alone, 0-256 B), cma-copy
# (one kernel copy per block, the gather family), x memcpy (bcast). The flag column is
# the one-way hand-off between ranks 0 and 1 and the team's cache word what the team
# measured at creation: about 0.05 us when the two cores share a cache, 0.2 us or more
# when they do not (a VM's vCPUs move; a run whose two disagree moved during the run).
#
# Environment:
#   NUMACOLL_TARGETS          which parts (default "reduce gather bcast")
#   NUMACOLL_TARGETS_RUNS     how many times each (default 1; each is one bench run)
#   NUMACOLL_BENCH_NPS        process counts (default "2 4")
#   NUMACOLL_BENCH_MPIS       libraries (default "openmpi mpich")
#   NUMACOLL_BENCH_OUT        results (default bench/results; tables in targets/)
# Extra arguments go to every numacoll-bench run (not --impl: the table reads the
# implementations native and numacoll). Exits 1 when a run failed or nothing was measured.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/launch.sh
. "$here/launch.sh"
out=${NUMACOLL_BENCH_OUT:-$here/results}/targets
parts=${NUMACOLL_TARGETS:-reduce gather bcast}
runs=${NUMACOLL_TARGETS_RUNS:-1}
nps=${NUMACOLL_BENCH_NPS:-2 4}
mpis=${NUMACOLL_BENCH_MPIS:-openmpi mpich}
sizes=0,8,64,256,512,4K,32K,64K,128K,256K,512K,1M,4M

for part in $parts; do
    case $part in
    reduce|gather|bcast) ;;
    *) echo "targets: unknown part '$part' (valid: reduce gather bcast)" >&2; exit 2 ;;
    esac
done
for a in "$@"; do
    case $a in
    --impl|--impl=*|--sweep|--sweep=*) echo "targets: $a is not for targets.sh (the table reads native and numacoll)" >&2; exit 2 ;;
    esac
done

mkdir -p "$out"
table=$out/targets.txt
failed=0 measured=0
start=$SECONDS
printf '%-8s %2s %3s %7s %-10s %-10s %-18s %9s %6s  %s\n' mpi p run flag_us team \
    collective band numacoll target references > "$table"
for run in $(seq 1 "$runs"); do
    for mpi in $mpis; do
        for np in $nps; do
            rc=0
            bench_launch "$mpi" "$np" || rc=$?
            [ $rc = 2 ] && exit 2
            [ $rc = 0 ] || break
            for part in $parts; do
                case $part in
                reduce) what=(-c reduce,allreduce -m "$sizes" --iter 1000,100 --op sum --type double) ;;
                gather) what=(-c gather,scatter,allgather,alltoall -m "$sizes" --iter 1000,100) ;;
                bcast)  what=(-c bcast -m 20:24 --no-zero --off-cache --iter 5000,250) ;;
                esac
                name=$mpi-p$np-$part-run$run
                echo "== $name: $launcher ${flags[*]} $exe ${what[*]} --time-per-size 0.25 --runs 1 $*"
                rc=0
                timeout 300 "$launcher" "${flags[@]}" "$exe" "${what[@]}" --time-per-size 0.25 \
                    --runs 1 "$@" > "$out/$name.txt" || rc=$?
                if [ $rc != 0 ]; then
                    echo "targets: $name: numacoll-bench failed (exit $rc), see $out/$name.txt"
                    failed=$((failed + 1))
                    continue
                fi
                measured=$((measured + 1))
                awk -v mpi="$mpi" -v np="$np" -v run="$run" -f "$here/targets.awk" \
                    "$out/$name.txt" | tee -a "$table"
            done
        done
    done
done
echo
echo "== all bands (also in $table)"
cat "$table"
echo "targets: $measured bench runs in $((SECONDS - start)) s ($failed failed); every run's output in $out"
[ "$failed" = 0 ] && [ "$measured" -gt 0 ]
