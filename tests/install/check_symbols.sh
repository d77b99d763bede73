#!/usr/bin/env bash
# libnumacoll-mpi.so loads anywhere and exports what its MPI needs, nothing else.
#   check_symbols.sh FLAVOR LIB
set -u
flavor=$1 lib=$2
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. Its MPI library is a dependency (the PMPI_* and, for Open MPI, the
#    predefined objects it uses resolve in the global scope even when a
#    program dlopens its MPI RTLD_LOCAL), and a non-MPI process that inherits
#    LD_PRELOAD (a launcher, a shell) loads it even binding every symbol now.
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "NEEDED: $needed"
grep -qE "libmpi|libmpich" <<<"$needed" || bad "does not depend on its MPI library"
LD_BIND_NOW=1 LD_PRELOAD="$lib" /bin/true || bad "a non-MPI process cannot load it (LD_BIND_NOW=1)"

# 2. The exported symbols.
#    Exported: numacoll_*, the C entry points and this MPI's Fortran ones.
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
other=$(grep -vE '^(numacoll_|MPI_|mpi_)' <<<"$exported")
[ -n "$other" ] && bad "exported beyond numacoll_*, MPI_*, mpi_*:" $other
c="MPI_Init MPI_Init_thread MPI_Finalize MPI_Bcast MPI_Barrier MPI_Reduce MPI_Allreduce MPI_Gather
   MPI_Gatherv MPI_Scatter MPI_Scatterv MPI_Allgather MPI_Allgatherv MPI_Alltoall MPI_Alltoallv
   MPI_Alltoallw"
gf="gather gatherv scatter scatterv allgather allgatherv alltoall alltoallv alltoallw"
mangle() { for n in "$@"; do echo "mpi_${n}_ mpi_${n}__ mpi_$n MPI_${n^^}"; done; }
f08() { for n in "$@"; do echo "mpi_${n}_f08_"; done; }
if [ "$flavor" = openmpi ]; then
    want="$c $(mangle init init_thread finalize barrier bcast reduce allreduce $gf) $(f08 init init_thread finalize barrier bcast reduce allreduce $gf)"
else
    want="$c $(mangle init init_thread) $(f08 init init_thread finalize barrier)"
fi
want=$(tr ' ' '\n' <<<"$want" | grep . | sort)
got=$(grep -E '^(MPI_|mpi_)' <<<"$exported")
if [ "$want" != "$got" ]; then
    bad "MPI entry points differ from what $flavor needs:"
    diff <(echo "$want") <(echo "$got") | sed 's/^</  missing:/; s/^>/  extra:/' | grep -v '^[0-9]'
fi
echo "exported MPI entry points ($flavor):" $got
[ $fail = 0 ] && echo "OK"
exit $fail
