#!/bin/busybox sh
# /init of the guest initramfs (busybox sh). Mounts what numacoll needs, runs
# every line of /tests.list and powers off. Output goes to the serial console,
# which run.sh parses:
#   === GUEST-UP uptime=<s> kernel=<release> cpus=<n> nodes=<online list>
#   === BEGIN <name>
#   ... the program's own lines, ending with RESULT: PASS / RESULT: FAIL ...
#   === END <name> rc=<exit code> secs=<wall>
#   === GUEST-DONE uptime=<s>
# /tests.list, one test a line:  NAME|TIMEOUT_SECONDS|VAR=value VAR2=value|COMMAND ARGS|MODE
# MODE "result": the program prints its own RESULT line; "rc": a tool that does
# not, and init prints RESULT from its exit status.
/bin/busybox mkdir -p /proc /sys /dev /tmp /usr/bin /usr/sbin /sbin
/bin/busybox mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mkdir -p /dev/shm
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t tmpfs -o mode=1777 tmp /tmp
now() { cut -d' ' -f1 /proc/uptime; }

echo "=== GUEST-UP uptime=$(now) kernel=$(uname -r) cpus=$(nproc) nodes=$(cat /sys/devices/system/node/online 2>/dev/null)"
for n in /sys/devices/system/node/node*; do
    [ -d "$n" ] && echo "guest: ${n##*/} cpus=$(cat "$n/cpulist") $(grep MemTotal "$n/meminfo" | sed 's/.*MemTotal: *//')"
done

while IFS='|' read -r name tmo envs cmd mode; do
    [ -z "$name" ] && continue
    case "$name" in \#*) continue ;; esac
    echo "=== BEGIN $name"
    t0=$(now)
    # shellcheck disable=SC2086  # envs and cmd are word lists by design
    timeout -s KILL "$tmo" env $envs $cmd
    rc=$?
    if [ "$mode" = rc ]; then
        if [ $rc -eq 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL exit status $rc"; fi
    fi
    t1=$(now)
    echo "=== END $name rc=$rc secs=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")"
done </tests.list

echo "=== GUEST-DONE uptime=$(now)"
sync
poweroff -f
