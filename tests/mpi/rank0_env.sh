#!/bin/sh
# Runs the command with VAR=VALUE in the environment of the launcher's rank 0
# only (a setting that differs between the ranks):
#   mpirun -np N rank0_env.sh VAR=VALUE PROGRAM ARGS...
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
[ "$rank" = 0 ] && export "$1"
shift
exec "$@"
