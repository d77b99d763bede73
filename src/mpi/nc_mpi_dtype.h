/*
 * Streaming a typed MPI buffer through numacoll's byte-range callbacks.
 *
 * Contiguous data (no holes, no padding) goes straight through the queue.
 * Anything else is packed (root) or unpacked (others) with MPI_Pack /
 * MPI_Unpack a window of whole elements at a time, fragment by fragment, so
 * the whole message is never staged: the window is max(64 KiB, one element)
 * (for count = 1 of a huge derived type, one element is the whole message).
 */
#ifndef NC_MPI_DTYPE_H
#define NC_MPI_DTYPE_H

#include <mpi.h>
#include <stddef.h>

typedef struct nc_dtype_stream {
    char *buf;            /* user buffer */
    int count;
    MPI_Datatype dt;
    MPI_Comm comm;        /* for MPI_Pack's communicator argument */
    size_t esize;         /* packed bytes per element (MPI_Type_size) */
    MPI_Aint extent;
    char *stage;          /* packed window */
    size_t cap_elems;     /* elements per window */
    long first;           /* first element in the window, -1 none */
    size_t filled;        /* receiver: packed bytes in the window */
    int err;              /* first MPI error */
} nc_dtype_stream_t;

/* MPI_BOTTOM and a type of absolute addresses as a buffer MPI_Pack takes
 * (MPICH's refuses a NULL inbuf): *buf becomes the type's true lower bound and
 * *dt the type shifted back by it, a new type stored in *shifted for the
 * caller to free. Leaves everything as it is when the type starts at 0. */
void nc_dtype_unbottom(void **buf, MPI_Datatype *dt, MPI_Datatype *shifted);

/* The size of a predefined type whose elements are their bytes (MPI_BYTE,
 * MPI_INT, MPI_DOUBLE, ...: extent = size), without a call into the MPI
 * library after the first; 0 for any other type. */
int nc_dtype_basic_size(MPI_Datatype dt);

/* Returns 1 when (count, dt) is contiguous; then *start is the first byte. */
int nc_dtype_contiguous(void *buf, int count, MPI_Datatype dt, char **start);

/* n bytes as one MPI (count, type) pair, n past INT_MAX included: MPI_BYTE
 * when n fits an int, else one struct of 1 GiB blocks and the rest, which the
 * caller frees with nc_dtype_bytes_free(). */
void nc_dtype_bytes(size_t n, int *count, MPI_Datatype *type);
void nc_dtype_bytes_free(MPI_Datatype *type);

int nc_dtype_stream_init(nc_dtype_stream_t *s, void *buf, int count, MPI_Datatype dt,
                         MPI_Comm comm);
void nc_dtype_stream_fini(nc_dtype_stream_t *s);
/* numacoll_copy_fn callbacks: ctx is the stream. */
void nc_dtype_pack(void *ctx, size_t off, void *shm, size_t len);
void nc_dtype_unpack(void *ctx, size_t off, void *shm, size_t len);

#endif
