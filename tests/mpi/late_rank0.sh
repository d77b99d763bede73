#!/bin/sh
# Runs the command with the launcher's rank 0 starting only after every other
# rank of the node has finished it (at most 30 s later): a failure explained
# by rank 0 alone must still be explained, so the other ranks must not make
# the launcher abort the job (killing rank 0) before rank 0 has written its
# line. The ranks meet in a directory named after their common parent (the
# launcher's process on the node).
#   mpirun -np N late_rank0.sh PROGRAM ARGS...
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
size=${OMPI_COMM_WORLD_LOCAL_SIZE:-${MPI_LOCALNRANKS:-${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-1}}}}
dir=${TMPDIR:-/tmp}/nc_late_rank0.$PPID
if [ "$rank" != 0 ]; then
    "$@"
    rc=$?
    mkdir -p "$dir" && touch "$dir/$rank"
    exit $rc
fi
i=0
while [ $i -lt 300 ] && [ "$(ls "$dir" 2>/dev/null | wc -l)" -lt $((size - 1)) ]; do
    sleep 0.1
    i=$((i + 1))
done
rm -rf "$dir"
exec "$@"
