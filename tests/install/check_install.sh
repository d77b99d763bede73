#!/usr/bin/env bash
# `make install` of this tree into a fresh prefix (the whole Open MPI tree, the
# "mpi" component of the MPICH one, as the Makefile does): the library and the
# tools of this MPI in lib/numacoll/FLAVOR/, then a C program of
# this MPI through the installed library: preloaded as pkg-config's `preload`
# variable says, linked with pkg-config --libs, and built by a CMake project with
# find_package(numacoll). Every run must check every byte, and the stats must
# show numacoll handled every broadcast and barrier.
#   check_install.sh FLAVOR BUILD_DIR LIBDIR MPICC MPIEXEC "MPIEXEC FLAGS" PLAIN_BCAST_C
set -u
flavor=$1 build=$2 libdir=$3 mpicc=$4 mpiexec=$5 flags=$6 plain=$7
prefix=$(mktemp -d /tmp/numacoll-install.XXXXXX)
log=$(mktemp /tmp/numacoll-install-log.XXXXXX)
trap 'rm -rf "$prefix" "$log"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

component=()
[ "$flavor" = mpich ] && component=(--component mpi)
cmake --install "$build" --prefix "$prefix" "${component[@]}" >"$log" ||
    { cat "$log"; fail "cmake --install"; }
(cd "$prefix" && find . -type f -o -type l | sort | sed 's/^/installed: /')
so=$prefix/$libdir/numacoll/$flavor/libnumacoll-mpi.so
[ -e "$so" ] || fail "no $so"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
preload=$(pkg-config --variable=preload numacoll-$flavor) || fail "pkg-config numacoll-$flavor"
echo "preload: $preload"
[ "$(readlink -f "$preload")" = "$(readlink -f "$so")" ] || fail "preload is not $so"
# Each MPI's tools next to its library (the Open MPI ones in bin/ too); the
# bench finds that library from there.
tools=$prefix/$libdir/numacoll/$flavor/bin
for t in numacoll-bench numacoll-setup-bench numacoll-info numacoll-tune; do
    [ -x "$tools/$t" ] || fail "no $tools/$t"
done
ldd "$tools/numacoll-bench" | grep -q "libnumacoll-mpi.so.1 => $prefix/$libdir/numacoll/$flavor/" ||
    fail "$tools/numacoll-bench does not find $flavor's installed libnumacoll-mpi.so"
"$tools/numacoll-bench" --help >/dev/null || fail "$tools/numacoll-bench --help"
if [ "$flavor" = openmpi ]; then
    # The tools come with the Open MPI tree; numacoll-bench finds its library.
    ldd "$prefix/bin/numacoll-bench" | grep -q "libnumacoll-mpi.so.1 => $prefix/" ||
        fail "installed numacoll-bench does not find the installed libnumacoll-mpi.so"
    # The core alone (numacoll.pc): a program linked as pkg-config says runs
    # without LD_LIBRARY_PATH.
    core_c=$prefix/core.c
    cat >"$core_c" <<'EOC'
#include <numacoll.h>
#include <stdio.h>
int main(void)
{
    printf("core: %s\n", numacoll_strerror(NUMACOLL_ERR_TRUNCATE));
    return 0;
}
EOC
    # shellcheck disable=SC2046
    cc "$core_c" $(pkg-config --cflags --libs numacoll) -o "$prefix/core" ||
        fail "compile with pkg-config --libs numacoll"
    env -u LD_LIBRARY_PATH "$prefix/core" || fail "a program linked with pkg-config --libs numacoll does not run"
fi

# run LABEL PROGRAM [preload]: stats must show numacoll at work.
run() {
    local label=$1 prog=$2 pre=${3:-}
    local cmd envs=(NUMACOLL_STATS=1)
    [ -n "$pre" ] && envs+=(LD_PRELOAD="$pre")
    read -r -a cmd <<<"$mpiexec $flags -n 3"
    for e in "${envs[@]}"; do
        if [ "$flavor" = openmpi ]; then cmd+=(-x "$e"); else cmd+=(-genv "${e%%=*}" "${e#*=}"); fi
    done
    echo "+ ${cmd[*]} $prog"
    local out rc
    out=$("${cmd[@]}" "$prog" 2>&1); rc=$?
    echo "$out"
    [ $rc = 0 ] || fail "$label: exit code $rc"
    grep -q "plain_bcast: 0 wrong values" <<<"$out" || fail "$label: wrong data"
    grep -qE "bcast numacoll [1-9][0-9]* calls [0-9]+ bytes, pmpi 0 calls" <<<"$out" ||
        fail "$label: stats do not show numacoll handling every broadcast"
    grep -qE "barrier numacoll [1-9][0-9]* calls [0-9]+ bytes, pmpi 0 calls" <<<"$out" ||
        fail "$label: stats do not show numacoll handling every barrier"
}
"$mpicc" -O2 "$plain" -o "$prefix/plain" || fail "compile"
# (programs are built inside the prefix, after the listing above)
run preloaded "$prefix/plain" "$preload"
# shellcheck disable=SC2046
"$mpicc" -O2 "$plain" $(pkg-config --cflags --libs numacoll-$flavor) -o "$prefix/plain_linked" ||
    fail "compile with pkg-config --libs numacoll-$flavor"
readelf -d "$prefix/plain_linked" | grep -q "NEEDED.*libnumacoll-mpi" || fail "not linked"
run linked "$prefix/plain_linked"
# find_package(numacoll): a CMake project linking this MPI's layer before the MPI
cm=$prefix/cmake-app
mkdir -p "$cm"
cat >"$cm/CMakeLists.txt" <<EOC
cmake_minimum_required(VERSION 3.16)
project(plain_cmake C)
find_package(MPI REQUIRED COMPONENTS C)
find_package(numacoll 0.1 CONFIG REQUIRED)
if(NOT "$flavor" IN_LIST numacoll_MPI_FLAVORS)
  message(FATAL_ERROR "numacoll_MPI_FLAVORS: \${numacoll_MPI_FLAVORS}")
endif()
add_executable(plain_cmake $plain)
target_link_libraries(plain_cmake PRIVATE numacoll::mpi-$flavor MPI::MPI_C)
EOC
cmake -S "$cm" -B "$cm/build" -DCMAKE_PREFIX_PATH="$prefix" -DMPI_C_COMPILER="$mpicc" >"$log" 2>&1 ||
    { cat "$log"; fail "configure a project with find_package(numacoll)"; }
cmake --build "$cm/build" >"$log" 2>&1 || { cat "$log"; fail "build with numacoll::mpi-$flavor"; }
readelf -d "$cm/build/plain_cmake" | grep -q "NEEDED.*libnumacoll-mpi" || fail "not linked (CMake)"
run cmake "$cm/build/plain_cmake"
echo "OK"
