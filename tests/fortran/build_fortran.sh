#!/usr/bin/env bash
# Compile fcoll.F90 for each Fortran binding with the MPI's Fortran wrapper.
#   build_fortran.sh MPIF90 SOURCE OUTDIR LIBDIR
# Writes OUTDIR/fcoll_mpif, fcoll_usempi, fcoll_f08 and fcoll_usempi_linked
# (linked with LIBDIR/libnumacoll-mpi.so in front of the MPI libraries).
set -eu
mpif90=$1 src=$2 out=$3 libdir=$4
if ! "$mpif90" --version >/dev/null 2>&1; then
    echo "build_fortran: $mpif90 cannot compile (is gfortran installed? scripts/install-deps.sh test)" >&2
    exit 1
fi
# mpif.h and MPICH's `use mpi` give choice buffers no explicit interface:
# gfortran >= 10 then rejects calls with different buffer types unless told.
legacy=-fallow-argument-mismatch
build() {
    local name=$1; shift
    echo "+ $mpif90 -O2 -g $src $* -o $out/$name"
    "$mpif90" -O2 -g "$src" "$@" -o "$out/$name.tmp"
    mv "$out/$name.tmp" "$out/$name"
}
build fcoll_mpif -DNC_MPIF $legacy
build fcoll_usempi -DNC_USEMPI $legacy
build fcoll_f08 -DNC_F08
build fcoll_usempi_linked -DNC_USEMPI $legacy -L"$libdir" -lnumacoll-mpi -Wl,-rpath,"$libdir"
