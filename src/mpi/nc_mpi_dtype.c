#include "nc_mpi_dtype.h"

#include <stdlib.h>
#include <string.h>

#define NC_STAGE_BYTES (64u << 10)

int nc_dtype_contiguous(void *buf, int count, MPI_Datatype dt, char **start)
{
    int size;
    MPI_Aint lb, extent, tlb, textent;
    PMPI_Type_size(dt, &size);
    PMPI_Type_get_extent(dt, &lb, &extent);
    PMPI_Type_get_true_extent(dt, &tlb, &textent);
    /* No holes inside an element, and elements back to back. */
    if ((MPI_Aint)size != textent || (count > 1 && extent != textent))
        return 0;
    *start = (char *)buf + tlb;
    return 1;
}

int nc_dtype_stream_init(nc_dtype_stream_t *s, void *buf, int count, MPI_Datatype dt,
                         MPI_Comm comm)
{
    int size;
    MPI_Aint lb;
    memset(s, 0, sizeof *s);
    s->buf = buf;
    s->count = count;
    s->dt = dt;
    s->comm = comm;
    PMPI_Type_size(dt, &size);
    PMPI_Type_get_extent(dt, &lb, &s->extent);
    s->esize = (size_t)size;
    s->cap_elems = s->esize ? (NC_STAGE_BYTES + s->esize - 1) / s->esize : 1;
    if (s->cap_elems > (size_t)count)
        s->cap_elems = (size_t)(count > 0 ? count : 1);
    s->stage = malloc(s->cap_elems * (s->esize ? s->esize : 1));
    s->first = -1;
    return s->stage ? 0 : -1;
}

void nc_dtype_stream_fini(nc_dtype_stream_t *s)
{
    free(s->stage);
    s->stage = NULL;
}

static size_t window_elems(const nc_dtype_stream_t *s, long first)
{
    size_t left = (size_t)s->count - (size_t)first;
    return left < s->cap_elems ? left : s->cap_elems;
}

/* Root: serve packed bytes [off, off+len) from windows of whole elements. */
void nc_dtype_pack(void *ctx, size_t off, void *shm, size_t len)
{
    nc_dtype_stream_t *s = ctx;
    char *dst = shm;
    while (len) {
        long e = (long)(off / s->esize);
        if (s->first < 0 || e < s->first || e >= s->first + (long)s->cap_elems) {
            s->first = e - e % (long)s->cap_elems;
            int pos = 0, n = (int)window_elems(s, s->first);
            int rc = PMPI_Pack(s->buf + s->first * s->extent, n, s->dt, s->stage,
                               (int)(s->cap_elems * s->esize), &pos, s->comm);
            if (rc != MPI_SUCCESS && !s->err)
                s->err = rc;
        }
        size_t in = off - (size_t)s->first * s->esize;
        size_t avail = window_elems(s, s->first) * s->esize - in;
        size_t n = len < avail ? len : avail;
        memcpy(dst, s->stage + in, n);
        dst += n;
        off += n;
        len -= n;
    }
}

/* Others: gather packed bytes in order; unpack each completed window. */
void nc_dtype_unpack(void *ctx, size_t off, void *shm, size_t len)
{
    nc_dtype_stream_t *s = ctx;
    const char *src = shm;
    size_t total = (size_t)s->count * s->esize;
    if (off >= total)
        return;
    if (off + len > total)
        len = total - off;
    while (len) {
        if (s->first < 0) {
            s->first = (long)(off / s->esize);
            s->filled = 0;
        }
        size_t wbytes = window_elems(s, s->first) * s->esize;
        size_t n = wbytes - s->filled < len ? wbytes - s->filled : len;
        memcpy(s->stage + s->filled, src, n);
        s->filled += n;
        src += n;
        off += n;
        len -= n;
        if (s->filled == wbytes) {
            int pos = 0;
            int rc = PMPI_Unpack(s->stage, (int)wbytes, &pos, s->buf + s->first * s->extent,
                                 (int)window_elems(s, s->first), s->dt, s->comm);
            if (rc != MPI_SUCCESS && !s->err)
                s->err = rc;
            s->first += (long)window_elems(s, s->first);
            s->filled = 0;
            if ((size_t)s->first >= (size_t)s->count)
                s->first = -1;
        }
    }
}
