/*
 * MPI_Bcast (nc_mpi_bcast, behind the C and Fortran entry points): numacoll's
 * shared-memory broadcast inside each node, the MPI library between node
 * leaders.
 *
 *   1. on the root's node: intra-node broadcast from the root;
 *   2. between nodes (leaders only, PMPI on the leaders' communicator, root =
 *      the leader of the root's node):
 *      a. one packet of NC_BCAST_PACKET bytes, the same size on every leader
 *         whatever its own count: {bytes, bad} and, when the root's message
 *         fits (bytes <= NC_BCAST_INLINE), the message itself (packed when
 *         not contiguous). A small broadcast costs one leader collective, as
 *         in the MPI library alone;
 *      b. only when the root's message did not fit: the data, as bytes
 *         (contiguous; packed otherwise; past INT_MAX bytes as one
 *         struct-of-GiB type, or the user's own type when not contiguous);
 *   3. on every other node: intra-node broadcast from its leader.
 * Every leader takes the same steps, decided by the root's size in the
 * packet, so sizes that differ across ranks end in MPI_ERR_TRUNCATE on the
 * ranks that disagree, never in a hang: a leader whose size differs from the
 * root's takes the root's bytes aside (scratch) and forwards the root's size,
 * so its members compare with the root's; if the root's own node is
 * inconsistent (bad), leaders forward zero bytes and every rank that
 * expected data reports the error.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/nc_common.h"
#include "nc_mpi.h"
#include "nc_mpi_dtype.h"

#define NC_BCAST_PACKET 512
#define NC_BCAST_INLINE (NC_BCAST_PACKET - 2 * sizeof(uint64_t))

typedef struct bcast_packet {
    uint64_t bytes, bad;
    unsigned char data[NC_BCAST_INLINE];
} bcast_packet_t;
_Static_assert(sizeof(bcast_packet_t) == NC_BCAST_PACKET, "packet size");

static int intra(nc_mpi_comm_t *c, void *buf, int count, MPI_Datatype dt, size_t bytes,
                 int lroot)
{
    if (!c->team)
        return 0;
    if (!bytes)
        return numacoll_bcast(c->team, NULL, 0, lroot);
    char *start;
    if (nc_dtype_contiguous(buf, count, dt, &start))
        return numacoll_bcast(c->team, start, bytes, lroot);
    nc_dtype_stream_t s;
    if (nc_dtype_stream_init(&s, buf, count, dt, c->comm))
        return NUMACOLL_ERR_NOMEM;
    int rc = numacoll_bcast_cb(c->team, bytes, lroot,
                               c->lrank_of[c->rank] == lroot ? nc_dtype_pack : nc_dtype_unpack, &s);
    if (!rc && s.err)
        rc = NUMACOLL_ERR_INVAL;
    nc_dtype_stream_fini(&s);
    return rc;
}

/* n packed bytes at src into (count, dt), whole elements only (of a
 * mismatched message past INT_MAX bytes, those of its first INT_MAX). */
static void unpack_into(nc_mpi_comm_t *c, const void *src, size_t n, void *buf, int count,
                        MPI_Datatype dt)
{
    char *start;
    if (nc_dtype_contiguous(buf, count, dt, &start)) {
        nc_copy(start, src, n);
        return;
    }
    int size, pos = 0;
    PMPI_Type_size(dt, &size);
    const size_t m = n > INT_MAX ? INT_MAX : n;
    size_t fit = size ? m / (size_t)size : 0;
    if (fit > (size_t)count)
        fit = (size_t)count;
    PMPI_Unpack(src, (int)m, &pos, buf, (int)fit, dt, c->comm);
}

/* Step 2b, the bytes: contiguous, packed, or past INT_MAX in the user's type. */
static int data_step(nc_mpi_comm_t *c, void *buf, int count, MPI_Datatype dt, size_t bytes,
                     int root_node, int me_root_node)
{
    char *start;
    int n;
    MPI_Datatype t;
    if (nc_dtype_contiguous(buf, count, dt, &start)) {
        nc_dtype_bytes(bytes, &n, &t);
        nc_leader_bcast(c, start, n, t, root_node);
        nc_dtype_bytes_free(&t);
        return 0;
    }
    if (bytes > INT_MAX) { /* MPI_Pack counts in int: let the library walk the type */
        nc_leader_bcast(c, buf, count, dt, root_node);
        return 0;
    }
    char *packed = malloc(bytes);
    if (!packed)
        return NUMACOLL_ERR_NOMEM; /* MPI's own failure mode here: abort */
    int pos = 0;
    if (me_root_node)
        PMPI_Pack(buf, count, dt, packed, (int)bytes, &pos, c->comm);
    nc_leader_bcast(c, packed, (int)bytes, MPI_BYTE, root_node);
    if (!me_root_node) {
        pos = 0;
        PMPI_Unpack(packed, (int)bytes, &pos, buf, count, dt, c->comm);
    }
    free(packed);
    return 0;
}

/* Step 2 for a leader: returns a numacoll error code, and where the data for
 * step 3 comes from when it is not the user's buffer. */
static int inter(nc_mpi_comm_t *c, void *buf, int count, MPI_Datatype dt, size_t bytes,
                 int root_node, int intra_rc, char **scratch, size_t *scratch_bytes)
{
    const int me_root_node = c->node_of[c->rank] == root_node;
    bcast_packet_t pkt;
    pkt.bytes = bytes;
    pkt.bad = intra_rc != 0;
    if (me_root_node && !pkt.bad && bytes <= NC_BCAST_INLINE && bytes) {
        char *start;
        int pos = 0;
        if (nc_dtype_contiguous(buf, count, dt, &start))
            memcpy(pkt.data, start, bytes);
        else
            PMPI_Pack(buf, count, dt, pkt.data, (int)sizeof pkt.data, &pos, c->comm);
    }
    /* 2a. */
    nc_leader_bcast(c, &pkt, (int)sizeof pkt, MPI_BYTE, root_node);
    const int inline_data = pkt.bytes <= NC_BCAST_INLINE;
    nc_mpi_count_leader(NC_MPI_BCAST, pkt.bad || inline_data ? 1 : 2);
    if (pkt.bad) {
        /* The root's node disagrees with itself: nothing trustworthy to send. */
        *scratch = NULL;
        *scratch_bytes = 0;
        return me_root_node ? intra_rc : NUMACOLL_ERR_TRUNCATE;
    }
    if (me_root_node || pkt.bytes == bytes) {
        if (me_root_node && inline_data)
            return intra_rc;
        if (inline_data) {
            if (bytes)
                unpack_into(c, pkt.data, bytes, buf, count, dt);
            return 0;
        }
        /* 2b. */
        int rc = data_step(c, buf, count, dt, bytes, root_node, me_root_node);
        return me_root_node ? intra_rc : rc;
    }
    /* My size differs from the root's: take the root's bytes aside, keep what
     * fits, and let my node compare its sizes with the root's. */
    *scratch_bytes = pkt.bytes;
    *scratch = malloc(pkt.bytes ? pkt.bytes : 1);
    if (!*scratch)
        return NUMACOLL_ERR_NOMEM;
    if (inline_data) {
        memcpy(*scratch, pkt.data, pkt.bytes);
    } else {
        int n;
        MPI_Datatype t;
        nc_dtype_bytes(pkt.bytes, &n, &t);
        nc_leader_bcast(c, *scratch, n, t, root_node);
        nc_dtype_bytes_free(&t);
    }
    unpack_into(c, *scratch, bytes < pkt.bytes ? bytes : pkt.bytes, buf, count, dt);
    return NUMACOLL_ERR_TRUNCATE;
}

int nc_mpi_bcast(void *buf, int count, nc_mpi_word_t datatype, int root, nc_mpi_word_t comm_w)
{
    MPI_Datatype dt = NC_MPI_HANDLE(MPI_Datatype, datatype);
    MPI_Comm comm = NC_MPI_HANDLE(MPI_Comm, comm_w);
    nc_mpi_comm_t *c = nc_mpi_comm_get(comm, NC_MPI_BCAST);
    int tsize = 0;
    if (!c) {
        if (count > 0 && dt != MPI_DATATYPE_NULL)
            PMPI_Type_size(dt, &tsize);
        nc_mpi_count(NC_MPI_BCAST, 0, (size_t)(count > 0 ? count : 0) * (size_t)tsize);
        return PMPI_Bcast(buf, count, dt, root, comm);
    }
    if (root < 0 || root >= c->size) {
        PMPI_Comm_call_errhandler(comm, MPI_ERR_ROOT);
        return MPI_ERR_ROOT;
    }
    if (count < 0) {
        PMPI_Comm_call_errhandler(comm, MPI_ERR_COUNT);
        return MPI_ERR_COUNT;
    }
    if (dt == MPI_DATATYPE_NULL) {
        PMPI_Comm_call_errhandler(comm, MPI_ERR_TYPE);
        return MPI_ERR_TYPE;
    }
    if (!(tsize = nc_dtype_basic_size(dt)))
        PMPI_Type_size(dt, &tsize);
    size_t bytes = (size_t)count * (size_t)tsize;
    nc_mpi_count_nc(c, NC_MPI_BCAST, bytes);
    const unsigned long long cma = nc_mpi_cma_mark(c);
    MPI_Datatype shifted = MPI_DATATYPE_NULL;
    if (buf == MPI_BOTTOM && bytes)
        nc_dtype_unbottom(&buf, &dt, &shifted);

    const int root_node = c->node_of[root], my_node = c->node_of[c->rank];
    int rc = 0;
    /* 1. */
    if (my_node == root_node)
        rc = intra(c, buf, count, dt, bytes, c->lrank_of[root]);
    if (c->nnodes > 1) {
        char *scratch = NULL;
        size_t sbytes = 0;
        int have_scratch = 0;
        /* 2. */
        if (c->leaders != MPI_COMM_NULL) {
            rc = inter(c, buf, count, dt, bytes, root_node, rc, &scratch, &sbytes);
            have_scratch = rc == NUMACOLL_ERR_TRUNCATE && my_node != root_node;
        }
        /* 3. */
        if (my_node != root_node && c->team) {
            int irc;
            if (have_scratch)
                irc = numacoll_bcast(c->team, scratch, sbytes, 0);
            else
                irc = intra(c, buf, count, dt, bytes, 0);
            if (!rc)
                rc = irc;
        }
        free(scratch);
    }
    if (shifted != MPI_DATATYPE_NULL)
        PMPI_Type_free(&shifted);
    nc_mpi_count_cma(c, NC_MPI_BCAST, cma);
    return rc ? nc_mpi_error(comm, rc, "MPI_Bcast") : MPI_SUCCESS;
}
