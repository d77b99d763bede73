#!/usr/bin/env bash
# make bench: numacoll's broadcast (1 B .. 16 MiB, and 0) and barrier, then its reduce
# and allreduce (MPI_SUM of doubles, 0 and 8 B .. 16 MiB in steps of 8x, at most 1000
# calls per size), then gather, scatter, allgather and alltoall (blocks of 8 B, 4 KiB, 64 KiB,
# 1 MiB), against the MPI library's own, on this machine, with p = number of
# cores and p = 4 (oversubscribed when the machine has fewer cores), for Open MPI and
# for MPICH when it is built.
# Prints each table and a summary; writes bench/results/<mpi>-p<p>.{txt,csv,png} (bcast,
# barrier), <mpi>-p<p>-reduce.{txt,csv,png} (reduce, allreduce),
# <mpi>-p<p>-gather.{txt,csv,png} (gather, scatter, allgather, alltoall) and
# bench/results/summary.txt. See bench/README.md.
#
# Environment:
#   NUMACOLL_BUILD_DIR        Open MPI build tree (default: build)
#   NUMACOLL_BUILD_DIR_MPICH  MPICH build tree (default: build-mpich)
#   NUMACOLL_BENCH_OUT        results directory (default: bench/results)
#   NUMACOLL_BENCH_TIME       seconds of timed calls per implementation and size (0.1)
#   NUMACOLL_BENCH_TIME_OVERSUB  the same with more ranks than cores (default: half of
#                             NUMACOLL_BENCH_TIME, which keeps make bench under 5 minutes)
#   NUMACOLL_BENCH_RUNS       runs; 3 or more drop the min and max of t_max (3; the paper: 5)
#   NUMACOLL_BENCH_NPS        process counts (default: "$(nproc) 4")
#   NUMACOLL_BENCH_MPIS       which libraries (default: "openmpi mpich")
#   NUMACOLL_BENCH_REDUCE_SIZES  sizes of reduce and allreduce
#                             (default 0,8,64,512,4K,32K,256K,1M,4M,16M; "": no reductions)
#   NUMACOLL_BENCH_REDUCE_OPTS   their operation and type (default "--op sum --type double")
#   NUMACOLL_BENCH_GATHER_SIZES  block sizes of gather, scatter, allgather, alltoall
#                             (default 8,4K,64K,1M; "": not measured)
# Extra arguments go to every numacoll-bench run (e.g. --impl native,numacoll,flat=numacoll:tree=flat).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/launch.sh
. "$here/launch.sh"
out=${NUMACOLL_BENCH_OUT:-$here/results}
tps=${NUMACOLL_BENCH_TIME:-0.1}
tps_over=${NUMACOLL_BENCH_TIME_OVERSUB:-$(awk -v t="$tps" 'BEGIN { print t / 2 }')}
runs=${NUMACOLL_BENCH_RUNS:-3}
cores=$(nproc)
nps=${NUMACOLL_BENCH_NPS:-$(printf '%s\n' "$cores" 4 | sort -nu | tr '\n' ' ')}
mpis=${NUMACOLL_BENCH_MPIS:-openmpi mpich}
red_sizes=${NUMACOLL_BENCH_REDUCE_SIZES-0,8,64,512,4K,32K,256K,1M,4M,16M}
read -r -a red_opts <<< "${NUMACOLL_BENCH_REDUCE_OPTS:---op sum --type double}"
xg_sizes=${NUMACOLL_BENCH_GATHER_SIZES-8,4K,64K,1M}
# Debian's python3-matplotlib belongs to /usr/bin/python3 (not to a pyenv/venv python3)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
export NUMACOLL_BENCH_PYTHON=$py

mkdir -p "$out"
start=$SECONDS
csvs=()
for mpi in $mpis; do
    for np in $nps; do
        rc=0
        bench_launch "$mpi" "$np" || rc=$?
        [ $rc = 2 ] && exit 2
        [ $rc = 0 ] || break
        t=$tps
        [ "$np" -gt "$cores" ] && t=$tps_over
        for part in bcast reduce gather; do
            if [ "$part" = bcast ]; then
                name=$mpi-p$np
                what=(-c bcast,barrier -m 0:24 --iter 5000,250)
            elif [ "$part" = gather ]; then
                [ -n "$xg_sizes" ] || continue
                name=$mpi-p$np-gather
                what=(-c gather,scatter,allgather,alltoall -m "$xg_sizes" --iter 1000,100)
            else
                [ -n "$red_sizes" ] || continue
                name=$mpi-p$np-reduce
                # at most 1000 calls per size: the reductions' small sizes are where a
                # loaded machine's preemptions stretch the time per size most
                what=(-c reduce,allreduce -m "$red_sizes" --iter 1000,250 "${red_opts[@]}")
            fi
            echo "== $name: $launcher ${flags[*]} $exe ${what[*]}"
            rc=0
            timeout 240 "$launcher" "${flags[@]}" "$exe" "${what[@]}" --off-cache \
                --time-per-size "$t" --runs "$runs" \
                --csv "$out/$name.csv" --plot "$out/$name.png" "$@" \
                > "$out/$name.txt" || rc=$?
            cat "$out/$name.txt"
            case $rc in
            0) csvs+=("$out/$name.csv") ;;
            3) csvs+=("$out/$name.csv"); echo "bench: $name: the plot failed (see above)" ;;
            124) echo "bench: $name: timed out after 240 s" ;;
            *) echo "bench: $name: numacoll-bench failed (exit $rc)" ;;
            esac
            echo
        done
    done
done

if [ ${#csvs[@]} -eq 0 ]; then
    echo "bench: nothing was measured" >&2
    exit 1
fi
echo "== summary (also in $out/summary.txt)"
"$py" "$here/plot.py" --summary "${csvs[@]}" | tee "$out/summary.txt"
echo
echo "bench: results in $out ($((SECONDS - start)) s)"
