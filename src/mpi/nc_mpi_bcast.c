/*
 * MPI_Bcast (nc_mpi_bcast, behind the C and Fortran entry points): numacoll's
 * shared-memory broadcast inside each node, the MPI library between node
 * leaders.
 *
 *   1. on the root's node: intra-node broadcast from the root;
 *   2. between nodes (leaders only, PMPI on the leaders' communicator, root =
 *      the leader of the root's node): a 16-byte header {bytes, bad} then the
 *      data as MPI_BYTE (a non-contiguous buffer is packed for this step);
 *   3. on every other node: intra-node broadcast from its leader.
 * Size mismatches end in MPI_ERR_TRUNCATE on the ranks that disagree, never
 * in a hang: a leader whose size differs from the header receives into
 * scratch memory and forwards the root's size, so its members compare with
 * the root's; if the root's own node is inconsistent (bad), leaders forward
 * zero bytes and every rank that expected data reports the error.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/nc_common.h"
#include "nc_mpi.h"
#include "nc_mpi_dtype.h"

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

/* Step 2 for a leader: returns a numacoll error code, and where the data for
 * step 3 comes from when it is not the user's buffer. */
static int inter(nc_mpi_comm_t *c, void *buf, int count, MPI_Datatype dt, size_t bytes,
                 int root_node, int intra_rc, char **scratch, size_t *scratch_bytes)
{
    int me_root_node = c->node_of[c->rank] == root_node;
    uint64_t hdr[2] = {bytes, intra_rc != 0};
    PMPI_Bcast(hdr, 2, MPI_UINT64_T, root_node, c->leaders);
    if (hdr[1]) {
        /* The root's node disagrees with itself: nothing trustworthy to send. */
        *scratch = NULL;
        *scratch_bytes = 0;
        return me_root_node ? intra_rc : NUMACOLL_ERR_TRUNCATE;
    }
    char *start, *packed = NULL, *data;
    int contig = nc_dtype_contiguous(buf, count, dt, &start);
    if (me_root_node || hdr[0] == bytes) {
        if (contig) {
            data = start;
        } else {
            packed = malloc(bytes ? bytes : 1);
            if (!packed)
                return NUMACOLL_ERR_NOMEM; /* MPI's own failure mode here: abort */
            int pos = 0;
            if (me_root_node)
                PMPI_Pack(buf, count, dt, packed, (int)bytes, &pos, c->comm);
            data = packed;
        }
        PMPI_Bcast(data, (int)bytes, MPI_BYTE, root_node, c->leaders);
        if (packed && !me_root_node) {
            int pos = 0;
            PMPI_Unpack(packed, (int)bytes, &pos, buf, count, dt, c->comm);
        }
        free(packed);
        return me_root_node ? intra_rc : 0;
    }
    /* My size differs from the root's: take the root's bytes aside, keep what
     * fits, and let my node compare its sizes with the root's. */
    *scratch_bytes = hdr[0];
    *scratch = malloc(hdr[0] ? hdr[0] : 1);
    if (!*scratch)
        return NUMACOLL_ERR_NOMEM;
    PMPI_Bcast(*scratch, (int)hdr[0], MPI_BYTE, root_node, c->leaders);
    size_t keep = bytes < hdr[0] ? bytes : hdr[0];
    if (contig) {
        nc_copy(start, *scratch, keep);
    } else {
        /* Whole elements that fit. */
        int size;
        PMPI_Type_size(dt, &size);
        int pos = 0, n = size ? (int)(keep / (size_t)size) : 0;
        PMPI_Unpack(*scratch, (int)hdr[0], &pos, buf, n, dt, c->comm);
    }
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
    PMPI_Type_size(dt, &tsize);
    size_t bytes = (size_t)count * (size_t)tsize;
    nc_mpi_count(NC_MPI_BCAST, 1, bytes);
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
    return rc ? nc_mpi_error(comm, rc, "MPI_Bcast") : MPI_SUCCESS;
}
