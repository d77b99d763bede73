# Several "hosts" on one machine, made of Linux namespaces (sourced by bash).
#
# Each host is a holder process started by unshare(1) with its own
#   - network namespace: eth0 = 10.99.0.K/24, joined by a veth pair to a
#     bridge in the head (10.99.0.254);
#   - UTS namespace: hostname ncnodeK (the head is "nchead"); IPC namespace;
#   - mount namespace: private tmpfs on /dev/shm (/tmp stays shared, like the
#     network file system of a cluster: the build tree may live there), a generated
#     /etc/hosts naming every host, and a boot id of its own (UCX, behind
#     MPICH, takes equal boot ids for one machine and tries shared memory);
#   - PID namespace, whose init is the holder: when the holder ends, the
#     kernel kills everything that runs on the host.
# The head holds the launcher (mpirun / mpiexec) and has no PID namespace of
# its own: its agents must enter the hosts' PID namespaces, which the kernel
# allows only from an ancestor namespace; nc_hosts_down kills what runs in
# the head's network namespace. Nothing is added to the machine's own
# network namespace, so several harnesses can run at once.
#
# Lifetime: every holder reads a control FIFO that this shell holds open on
# fd 9. When the shell ends, however it ends (exit, signal, SIGKILL by a
# CTest timeout), the FIFO's last writer is gone, each holder reads EOF and
# exits, and its namespaces go with it. nc_hosts_down is the orderly path.
# Children of this shell must not inherit fd 9: nc_on closes it.
#
#   nc_hosts_up N           make nchead and ncnode1..N, export NC_HOSTS_STATE
#   nc_on HOST CMD...       run CMD on a host (its namespaces, a clean env)
#   nc_head_signal SIG NAME signal the head's processes called NAME*
#   nc_hosts_down           kill every host, remove the state directory
#   nc_hosts_can            exit status 0 when this machine can do it, else
#                           prints the reason
# The launcher agent (nc_agent.sh) uses NC_HOSTS_STATE to find the hosts.

NC_HOSTS_NET=10.99.0

nc_hosts_can()
{
    local t
    for t in unshare nsenter ip mkfifo; do
        command -v "$t" >/dev/null || { echo "no $t in PATH"; return 1; }
    done
    [ "$(id -u)" = 0 ] || { echo "needs root (network, mount and PID namespaces)"; return 1; }
    if ! unshare --net --uts --mount --pid --fork --propagation private \
            sh -c 'ip link add nc_t0 type bridge && mount -t tmpfs tmpfs /dev/shm' 2>/dev/null; then
        echo "unshare of net/uts/mount/pid namespaces or a bridge is refused here"
        return 1
    fi
}

# _nc_holder NAME [PIDNS_FLAGS]: start one holder; its PID (the init of its
# PID namespace, if it has one) goes to $NC_HOSTS_STATE/NAME.pid.
_nc_holder()
{
    local name=$1 st=$NC_HOSTS_STATE
    unshare --net --uts --ipc --mount --fork --kill-child ${2:-} \
        --propagation private -- /bin/sh -c '
        hostname "$1" &&
        mount -t tmpfs -o size=2g,mode=1777 tmpfs /dev/shm &&
        mount --bind "$2/hosts" /etc/hosts &&
        cat /proc/sys/kernel/random/uuid >"$2/$1.boot_id" &&
        mount --bind "$2/$1.boot_id" /proc/sys/kernel/random/boot_id &&
        ip link set lo up || exit 1
        : >"$2/$1.ready"
        # As init, reap what ends on the host (a launcher daemon whose agent
        # went first is reparented here) until the control FIFO closes.
        exec 3<&0
        cat <&3 >/dev/null 3<&- &
        wait $!' nc-holder "$name" "$st" <"$st/ctl" >/dev/null 2>"$st/$name.err" &
    local up=$!
    disown $up
    for _ in $(seq 100); do
        [ -e "$st/$name.ready" ] && break
        kill -0 $up 2>/dev/null || break
        sleep 0.05
    done
    local init
    init=$(pgrep -P $up | head -n1)
    if [ ! -e "$st/$name.ready" ] || [ -z "$init" ]; then
        echo "nc_hosts: host $name did not start: $(cat "$st/$name.err")" >&2
        return 1
    fi
    echo "$init" >"$st/$name.pid"
}

nc_hosts_up()
{
    local n=$1 k d
    # What a harness killed by SIGKILL left: its namespaces died with it, its
    # state directory (and the script's output file) did not.
    for d in /run/numacoll-hosts.*; do
        [ -d "$d" ] && ! kill -0 "$(cat "$d/nchead.pid" 2>/dev/null)" 2>/dev/null &&
            [ "$(find "$d" -maxdepth 0 -mmin +1)" ] && rm -rf "$d"
    done
    find /run -maxdepth 1 -name 'numacoll-mn-out.*' -mmin +60 -delete 2>/dev/null
    NC_HOSTS_STATE=$(mktemp -d /run/numacoll-hosts.XXXXXX) || return 1
    export NC_HOSTS_STATE
    local st=$NC_HOSTS_STATE
    {
        echo "127.0.0.1 localhost"
        echo "$NC_HOSTS_NET.254 nchead"
        for k in $(seq "$n"); do echo "$NC_HOSTS_NET.$k ncnode$k"; done
    } >"$st/hosts"
    mkfifo "$st/ctl"
    # Open the FIFO read-write first (never blocks), then keep only a writer
    # on fd 9: the holders' reads see EOF once fd 9 is closed everywhere.
    exec 9<>"$st/ctl"
    _nc_holder nchead || return 1
    local head
    head=$(cat "$st/nchead.pid")
    nsenter -t "$head" -n sh -c "ip link add br0 type bridge &&
        ip addr add $NC_HOSTS_NET.254/24 dev br0 && ip link set br0 up" || return 1
    for k in $(seq "$n"); do
        _nc_holder ncnode$k "--pid --mount-proc" || return 1
        local pid
        pid=$(cat "$st/ncnode$k.pid")
        # The veth pair is made inside the head and its peer moved to the host,
        # so no interface ever appears in the machine's own namespace.
        nsenter -t "$head" -n sh -c "ip link add h$k type veth peer name eth0 netns $pid &&
            ip link set h$k master br0 && ip link set h$k up" || return 1
        nsenter -t "$pid" -n sh -c "ip addr add $NC_HOSTS_NET.$k/24 dev eth0 &&
            ip link set eth0 up" || return 1
    done
    echo "$n" >"$st/count"
}

# nc_on HOST CMD...: what ssh HOST CMD would do, with the caller's working
# directory and a clean environment (PATH, HOME, and NC_HOSTS_STATE so that a
# launcher on the head can reach the other hosts).
nc_on()
{
    local host=$1
    shift
    local pid
    pid=$(cat "$NC_HOSTS_STATE/$host.pid" 2>/dev/null) || {
        echo "nc_on: no host $host" >&2
        return 127
    }
    nsenter -t "$pid" -n -u -m -p --wd="$PWD" -- \
        env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME="${HOME:-/root}" NC_HOSTS_STATE="$NC_HOSTS_STATE" "$@" 9>&-
}

# nc_head_signal SIG NAME: signal the processes called NAME* on the head.
nc_head_signal()
{
    local p head_net
    head_net=$(readlink "/proc/$(cat "$NC_HOSTS_STATE/nchead.pid" 2>/dev/null)/ns/net" 2>/dev/null)
    [ -n "$head_net" ] || return 0
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$head_net" ] &&
            case $(cat "$p/comm" 2>/dev/null) in "$2"*) kill -"$1" "${p#/proc/}" 2>/dev/null ;; esac
    done
}

nc_hosts_down()
{
    [ -n "${NC_HOSTS_STATE:-}" ] && [ -d "$NC_HOSTS_STATE" ] || return 0
    local f p head_net
    head_net=$(readlink "/proc/$(cat "$NC_HOSTS_STATE/nchead.pid" 2>/dev/null)/ns/net" 2>/dev/null)
    if [ -n "$head_net" ]; then
        for p in /proc/[0-9]*; do
            [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$head_net" ] && kill -9 "${p#/proc/}" 2>/dev/null
        done
    fi
    for f in "$NC_HOSTS_STATE"/*.pid; do
        [ -e "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    exec 9>&-
    rm -rf "$NC_HOSTS_STATE"
    NC_HOSTS_STATE=
}
