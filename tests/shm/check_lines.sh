#!/usr/bin/env bash
# Runs a test program and passes when it exits 0 after printing PASSED and
# exactly N of its output lines match REGEX (a line said once per process,
# not once per team or call).
#   check_lines.sh N REGEX COMMAND ARGS...
set -u
want=$1 re=$2
shift 2
echo "+ $*"
out=$("$@" 2>&1)
rc=$?
echo "$out"
n=$(grep -cE -- "$re" <<<"$out")
if [ "$rc" != 0 ] || ! grep -q '^PASSED$' <<<"$out" || [ "$n" != "$want" ]; then
    echo "FAIL: exit code $rc, $n lines matching \"$re\" (want $want)"
    exit 1
fi
echo "OK: $n lines matching \"$re\""
