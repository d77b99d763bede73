#!/usr/bin/env bash
# Runs a command (a test program, or a launcher and its job) and checks its
# exit code and that exactly N of its output lines match an extended regex:
# an explanation said once (by one rank, not by every rank, and not lost), or
# once per process (not once per team or call).
#   check_lines.sh WANT_RC N REGEX COMMAND ARGS...
set -u
want=$1 lines=$2 re=$3
shift 3
echo "+ $*"
out=$("$@" 2>&1)
rc=$?
echo "$out"
n=$(grep -cE -- "$re" <<<"$out")
if [ "$rc" != "$want" ] || [ "$n" != "$lines" ]; then
    echo "FAIL: exit code $rc (want $want), $n lines matching \"$re\" (want $lines)"
    exit 1
fi
echo "OK: exit code $rc, $n lines matching \"$re\""
