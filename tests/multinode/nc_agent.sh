#!/usr/bin/env bash
# The launcher's remote shell for the namespace hosts of nc_hosts.sh: the
# MPI launchers call it as they call ssh,
#   nc_agent.sh [-x ...] HOST COMMAND...
# (Open MPI: --mca plm_rsh_agent; MPICH: -launcher ssh -launcher-exec). It
# runs COMMAND with /bin/sh on HOST, as sshd would, with a clean environment.
set -u
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done # ssh options (-x)
[ $# -ge 2 ] || { echo "usage: nc_agent.sh [-x] HOST COMMAND..." >&2; exit 255; }
host=$1
shift
[ -n "${NC_HOSTS_STATE:-}" ] || { echo "nc_agent.sh: NC_HOSTS_STATE is not set" >&2; exit 255; }
source "$(dirname "$0")/nc_hosts.sh"
nc_on "$host" /bin/sh -c "$*" || exit $?
