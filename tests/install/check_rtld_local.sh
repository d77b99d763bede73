#!/usr/bin/env bash
# The library preloaded into a program whose MPI comes in a plugin loaded with
# dlopen(RTLD_LOCAL) (mpi4py, language bindings): the MPI library is not in the
# global scope, numacoll must still reach it (its own dependency), handle the
# calls and get every value right.
#   check_rtld_local.sh FLAVOR LIB WORKDIR SRCDIR MPICC MPIEXEC FLAGS
set -u
flavor=$1 lib=$2 work=$3 src=$4 mpicc=$5 mpiexec=$6 flags=$7
set -e
"$mpicc" -shared -fPIC "$src/rtld_plugin.c" -o "$work/rtld_plugin.so"
cc "$src/rtld_driver.c" -o "$work/rtld_driver" -ldl
set +e
if [ "$flavor" = openmpi ]; then
    # shellcheck disable=SC2086
    out=$("$mpiexec" $flags -np 2 -x LD_PRELOAD="$lib" -x NUMACOLL_STATS=1 \
          "$work/rtld_driver" "$work/rtld_plugin.so" 2>&1)
else
    out=$("$mpiexec" -n 2 -env LD_PRELOAD "$lib" -env NUMACOLL_STATS 1 \
          "$work/rtld_driver" "$work/rtld_plugin.so" 2>&1)
fi
rc=$?
echo "$out"
if [ $rc = 0 ] && grep -q "plugin: 0 wrong values" <<<"$out" &&
    grep -q "bcast numacoll 20 calls" <<<"$out"; then
    echo OK
    exit 0
fi
echo "FAIL: rc=$rc (want 0, \"plugin: 0 wrong values\" and numacoll handling all 20 broadcasts)"
exit 1
