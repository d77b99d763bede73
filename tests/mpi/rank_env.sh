#!/bin/sh
# Runs the command with VAR=VALUE in the environment of the launcher's rank
# RANK only (a setting that differs between the ranks):
#   mpirun -np N rank_env.sh RANK VAR=VALUE PROGRAM ARGS...
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}
if [ -z "$rank" ]; then
    echo "rank_env.sh: no OMPI_COMM_WORLD_RANK or PMI_RANK: not started by an MPI launcher" >&2
    exit 2
fi
[ "$rank" = "$1" ] && export "$2"
shift 2
exec "$@"
