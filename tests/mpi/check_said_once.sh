#!/usr/bin/env bash
# Runs a command (a launcher and its job) and checks its exit code and that
# the explanation appears exactly once (said by one rank, not by every rank,
# and not lost).
#   check_said_once.sh WANT_RC REGEX COMMAND ARGS...
set -u
want=$1 re=$2
shift 2
echo "+ $*"
out=$("$@" 2>&1)
rc=$?
echo "$out"
n=$(grep -cE -- "$re" <<<"$out")
if [ "$rc" != "$want" ] || [ "$n" != 1 ]; then
    echo "FAIL: exit code $rc (want $want), $n lines matching \"$re\" (want 1)"
    exit 1
fi
echo "OK: exit code $rc, said once"
