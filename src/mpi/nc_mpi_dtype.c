#include "nc_mpi_dtype.h"

#include "common/nc_common.h"
#include "nc_mpi.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NC_STAGE_BYTES (64u << 10)

/* Predefined types whose elements are their bytes, back to back, and their
 * sizes (asked of the MPI library once, on first use: a predefined type's
 * size never changes, and the collectives' fast path then makes no
 * PMPI_Type_size call). */
static const MPI_Datatype basic[] = {
    MPI_BYTE,     MPI_CHAR,         MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR,      MPI_SHORT,
    MPI_UNSIGNED_SHORT, MPI_INT,    MPI_UNSIGNED,    MPI_LONG,               MPI_UNSIGNED_LONG,
    MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG, MPI_FLOAT, MPI_DOUBLE,            MPI_INT8_T,
    MPI_INT16_T,  MPI_INT32_T,      MPI_INT64_T,     MPI_UINT8_T,            MPI_UINT16_T,
    MPI_UINT32_T, MPI_UINT64_T,     MPI_PACKED,
};
static _Atomic int basic_size[NC_ARRAY_SIZE(basic)]; /* 0: not asked yet */

/* The index basic_index() found last: a program calls its collectives with
 * one or two types mostly, and the scan below costs 40-80 instructions at
 * MPI_DOUBLE (counted with callgrind), more than the rest of an MPI_Bcast of
 * count 0. */
static _Atomic unsigned basic_last;

/* dt's index in basic[], -1 when it is not there. */
static int basic_index(MPI_Datatype dt)
{
    /* relaxed: any index any thread stores is a valid one */
    const unsigned last = atomic_load_explicit(&basic_last, memory_order_relaxed);
    if (dt == basic[last])
        return (int)last;
    if (dt == MPI_DATATYPE_NULL)
        return -1;
    for (size_t i = 0; i < NC_ARRAY_SIZE(basic); i++)
        if (dt == basic[i]) {
            atomic_store_explicit(&basic_last, (unsigned)i, memory_order_relaxed);
            return (int)i;
        }
    return -1;
}

int nc_dtype_basic_size(MPI_Datatype dt)
{
    const int i = basic_index(dt);
    if (i < 0)
        return 0;
    /* relaxed: every thread that asks stores the same value */
    int size = atomic_load_explicit(&basic_size[i], memory_order_relaxed);
    if (!size) {
        PMPI_Type_size(dt, &size);
        atomic_store_explicit(&basic_size[i], size, memory_order_relaxed);
    }
    return size;
}

static int basic_contiguous(MPI_Datatype dt)
{
    return basic_index(dt) >= 0;
}

/* Do the type's bytes come in typemap order? Only types built from ordered
 * parts are taken as such: a struct or an indexed type can be gap-free and
 * still permuted (displacements 4, 0), and a plain copy would then reorder
 * the data between ranks that use different (count, type) pairs. */
static int in_order(MPI_Datatype dt, int depth)
{
    int ni, na, nd, comb;
    PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb);
    if (comb == MPI_COMBINER_NAMED)
        return 1;
    if (depth > 8 || nd != 1 || ni > 4 || na > 4 ||
        (comb != MPI_COMBINER_DUP && comb != MPI_COMBINER_CONTIGUOUS &&
         comb != MPI_COMBINER_RESIZED))
        return 0;
    int ints[4];
    MPI_Aint addrs[4];
    MPI_Datatype inner;
    PMPI_Type_get_contents(dt, ni, na, nd, ints, addrs, &inner);
    int ok = in_order(inner, depth + 1);
    int ini, ina, ind, icomb;
    PMPI_Type_get_envelope(inner, &ini, &ina, &ind, &icomb);
    if (icomb != MPI_COMBINER_NAMED)
        PMPI_Type_free(&inner);
    return ok;
}

void nc_dtype_unbottom(void **buf, MPI_Datatype *dt, MPI_Datatype *shifted)
{
    MPI_Aint tlb, textent;
    PMPI_Type_get_true_extent(*dt, &tlb, &textent);
    if (!tlb)
        return;
    int one = 1;
    MPI_Aint back = -tlb;
    if (PMPI_Type_create_hindexed(1, &one, &back, *dt, shifted) != MPI_SUCCESS ||
        PMPI_Type_commit(shifted) != MPI_SUCCESS)
        return;
    *buf = (void *)tlb;
    *dt = *shifted;
}

int nc_dtype_contiguous(void *buf, int count, MPI_Datatype dt, char **start)
{
    if (basic_contiguous(dt)) {
        *start = buf;
        return 1;
    }
    int size;
    MPI_Aint lb, extent, tlb, textent;
    PMPI_Type_size(dt, &size);
    PMPI_Type_get_extent(dt, &lb, &extent);
    PMPI_Type_get_true_extent(dt, &tlb, &textent);
    /* No holes inside an element, elements back to back, bytes in order. */
    if ((MPI_Aint)size != textent || (count > 1 && extent != textent) || !in_order(dt, 0))
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
        nc_copy(dst, s->stage + in, n);
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
        nc_copy(s->stage + s->filled, src, n);
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

void nc_dtype_bytes(size_t n, int *count, MPI_Datatype *type)
{
    if (n <= INT_MAX) {
        *count = (int)n;
        *type = MPI_BYTE;
        return;
    }
    const size_t gib = (size_t)1 << 30;
    MPI_Datatype block;
    PMPI_Type_contiguous((int)gib, MPI_BYTE, &block);
    int lens[2] = {(int)(n / gib), (int)(n % gib)};
    MPI_Aint disps[2] = {0, (MPI_Aint)(n - n % gib)};
    MPI_Datatype types[2] = {block, MPI_BYTE};
    PMPI_Type_create_struct(2, lens, disps, types, type);
    PMPI_Type_commit(type);
    PMPI_Type_free(&block);
    *count = 1;
}

void nc_dtype_bytes_free(MPI_Datatype *type)
{
    if (*type != MPI_BYTE)
        PMPI_Type_free(type);
}
