#!/bin/sh
# Runs the command with the launcher's rank 0 starting two seconds late, so that
# the other ranks finish first: a failure explained by rank 0 alone must still
# be explained (the other ranks must not make the launcher abort the job
# before rank 0 has written its line).
#   mpirun -np 3 late_rank0.sh PROGRAM ARGS...
[ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" = 0 ] && sleep 2
exec "$@"
