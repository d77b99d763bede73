# Sourced by bench/run.sh and bench/targets.sh: how to start numacoll-bench.
#
# bench_launch MPI NP sets:
#   build     the build tree of that MPI (NUMACOLL_BUILD_DIR[_MPICH], or build/ and
#             build-mpich/ next to bench/)
#   launcher  its mpiexec (mpirun.openmpi, mpiexec.mpich)
#   exe       $build/bin/numacoll-bench
#   flags     the launcher's options: one rank per core, bound, when the ranks fit (how
#             users run); with more ranks than cores unbound (Open MPI's own choice when
#             oversubscribed) so the scheduler can spread them
# and returns 1 (with a note on stdout) when the build or the launcher is missing,
# 2 for an unknown MPI.
bench_launch() {
    local mpi=$1 np=$2 top cores
    top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    cores=$(nproc)
    case $mpi in
    openmpi) build=${NUMACOLL_BUILD_DIR:-$top/build}; launcher=mpirun.openmpi ;;
    mpich)   build=${NUMACOLL_BUILD_DIR_MPICH:-$top/build-mpich}; launcher=mpiexec.mpich ;;
    *) echo "bench: unknown MPI '$mpi' (valid: openmpi mpich)" >&2; return 2 ;;
    esac
    exe=$build/bin/numacoll-bench
    if [ ! -x "$exe" ] || ! command -v "$launcher" >/dev/null; then
        echo "bench: skipping $mpi ($exe or $launcher missing)"
        return 1
    fi
    flags=(-n "$np")
    if [ "$mpi" = openmpi ]; then
        [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
        if [ "$np" -le "$cores" ]; then
            flags+=(--bind-to core --map-by core)
        else
            flags+=(--oversubscribe --bind-to none)
        fi
    else
        [ "$np" -le "$cores" ] && flags+=(-bind-to core)
    fi
    return 0
}
