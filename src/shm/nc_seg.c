/*
 * Segment create / attach / reserve + first touch / verify / detach.
 */
#include "shm/nc_seg.h"

#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/nc_config.h"
#include "shm/nc_shm.h"

int nc_layout_compute(nc_layout_t *l, int p, size_t f, int s, int q, int kind, size_t page,
                      const nc_shm_need_t *needs, int nneeds)
{
    if (p < 1 || s < 1 || q < 1 || s % q || f < 1 || !page || nneeds < 0 ||
        nneeds > NC_LAYOUT_AREAS || (nneeds && !needs))
        return NUMACOLL_ERR_INVAL;
    memset(l, 0, sizeof *l);
    l->page = page;
    l->p = p;
    l->s = s;
    l->q = q;
    l->f = f;
    l->kind = kind;

    l->hdr_off = 0;
    l->hdr_bytes = nc_round_up(NC_SEG_LEADERS_OFF + 2 * sizeof(int32_t) * (size_t)p, page);
    l->calls_off = l->hdr_off + l->hdr_bytes;
    l->claims_off = nc_call_claims_off(p);
    l->claims = nc_call_claims(p);
    l->calls_bytes = nc_round_up(l->claims_off + l->claims * sizeof(nc_call_claim_t), page);
    l->sets_off = l->calls_off + l->calls_bytes;
    l->set_bytes = page;
    l->rank_off = l->sets_off + (size_t)q * l->set_bytes;
    if (kind == NC_LAYOUT_PAPER) {
        l->ctrl_stride = page;
        l->ctrl_bytes = (size_t)s * page;
    } else {
        l->ctrl_stride = NC_CACHELINE;
        l->ctrl_bytes = nc_round_up((size_t)s * NC_CACHELINE, page);
    }
    l->buf_off = l->ctrl_bytes;
    l->buf_stride = nc_round_up(f, page);
    l->rank_bytes = l->ctrl_bytes + (size_t)s * l->buf_stride;
    l->nareas = nneeds;
    for (int m = 0; m < nneeds; m++) {
        l->marea_off[m] = l->rank_bytes;
        l->marea_bytes[m] = nc_round_up(needs[m].member, page);
        l->rank_bytes += l->marea_bytes[m];
    }
    l->bcast_bytes = l->rank_off + (size_t)p * l->rank_bytes;
    l->barrier_off = l->bcast_bytes;
    size_t off = l->barrier_off;
    for (int m = 0; m < nneeds; m++) {
        l->area_off[m] = off;
        l->area_bytes[m] = nc_round_up(needs[m].shared, page);
        off += l->area_bytes[m];
    }
    l->barrier_bytes = off - l->barrier_off;
    l->total = off;
    return 0;
}

static void set_random(void *base, size_t bytes, int on)
{
    /* Readahead / fault-around off while members first-touch their pages, so
     * the kernel does not place a neighbour's pages on the toucher's node. */
    if (madvise(base, bytes, on ? MADV_RANDOM : MADV_NORMAL) && nc_log_level() >= 3)
        nc_log_info(3, "madvise(%s): %s", on ? "MADV_RANDOM" : "MADV_NORMAL", strerror(errno));
}

static int seg_map(nc_seg_t *seg)
{
    seg->base = mmap(NULL, seg->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
    if (seg->base == MAP_FAILED) {
        nc_log_error("mmap(%s, %zu): %s", seg->name, seg->bytes, strerror(errno));
        seg->base = NULL;
        return NUMACOLL_ERR_SHM;
    }
    set_random(seg->base, seg->bytes, 1);
    return 0;
}

int nc_seg_create(nc_seg_t *seg, const nc_layout_t *l, uint32_t seq0, char *why, size_t whylen)
{
    memset(seg, 0, sizeof *seg);
    seg->fd = -1;
    seg->l = *l;
    seg->bytes = l->total;
    nc_shm_name(seg->name, sizeof seg->name);
    int fd = nc_shm_create(seg->name, seg->bytes);
    if (fd < 0) {
        snprintf(why, whylen, "segment of %zu bytes could not be created (%s)", seg->bytes,
                 numacoll_strerror(fd));
        return fd;
    }
    seg->fd = fd;
    /* Test only: break first touch on purpose so the placement check has
     * something to find (tests/guest). */
    const char *bad = getenv("NUMACOLL_TEST_TOUCH_ALL_FROM_RANK0");
    int touch_all = bad && *bad == '1';
    /* Rank 0's parts: header, call ring, sets, its own block, the barrier.
     * Every other member reserves its block in nc_seg_first_touch(). */
    int rc = touch_all ? nc_shm_reserve(fd, 0, l->total, "the segment", why, whylen) : 0;
    if (!rc)
        rc = nc_shm_reserve(fd, 0, l->rank_off + l->rank_bytes,
                            "the segment's header, call ring and member 0's block", why, whylen);
    if (!rc)
        rc = nc_shm_reserve(fd, l->barrier_off, l->barrier_bytes,
                            "the collectives' shared areas", why, whylen);
    if (!rc)
        rc = seg_map(seg);
    if (rc) {
        nc_seg_detach(seg);
        return rc;
    }
    if (touch_all)
        for (size_t off = 0; off < seg->bytes; off += l->page)
            ((char *)seg->base)[off] = 0;

    nc_seg_hdr_t *h = nc_seg_hdr(seg);
    h->magic = NC_SEG_MAGIC;
    h->version = NC_SEG_VERSION;
    h->p = (uint32_t)l->p;
    h->total_bytes = seg->bytes;
    h->frag_size = l->f;
    h->queue_len = (uint32_t)l->s;
    h->sets = (uint32_t)l->q;
    h->layout = (uint32_t)l->kind;
    atomic_store_explicit(&h->broken, 0, memory_order_relaxed);
    /* Values no reader expects first: call c is first announced as c >= seq0
     * and set k first published as seq0 + k; every member has resolved the
     * calls before seq0, so call c's slot holds call c - RING (C3b of
     * coll/nc_bcast.c) and no claim line holds a call from seq0 on (C2a). */
    for (uint32_t k = 0; k < NC_CALL_RING; k++)
        atomic_store_explicit(&nc_seg_call(seg, seq0 + k)->seq, seq0 + k - NC_CALL_RING,
                              memory_order_relaxed);
    for (size_t k = 0; k < l->claims; k++)
        atomic_store_explicit(nc_seg_claim(seg, k), NC_CALLS64_0(seq0) - 1u, memory_order_relaxed);
    for (int i = 0; i < l->p; i++) {
        nc_call_ack_t *a = nc_seg_ack(seg, i);
        atomic_store_explicit(&a->done, seq0 - 1u, memory_order_relaxed);
        /* CMA: nothing posted, every call before seq0 finished, none faulted */
        atomic_store_explicit(&a->post, NC_CALLS64_0(seq0) - 1u, memory_order_relaxed);
        atomic_store_explicit(&a->fin, NC_CALLS64_0(seq0) - 1u, memory_order_relaxed);
        a->ferr = NC_CALLS64_0(seq0) - 1u;
        atomic_store_explicit(&a->waiting, NC_CALLS64_0(seq0) - 1u, memory_order_relaxed);
    }
    for (int k = 0; k < l->q; k++) {
        nc_set_ctl_t *sc = nc_seg_set(seg, k);
        atomic_store_explicit(&sc->op, seq0 - 1u, memory_order_relaxed);
        atomic_store_explicit(&sc->nreaders, 0, memory_order_relaxed);
    }
    /* release: header and set pages visible before ready; pairs with the
     * acquire of ready in nc_seg_attach(). */
    atomic_store_explicit(&h->ready, 1, memory_order_release);
    return 0;
}

int nc_seg_attach(nc_seg_t *seg, const char *name, int pid, int fd, const nc_layout_t *l)
{
    memset(seg, 0, sizeof *seg);
    seg->l = *l;
    seg->bytes = l->total;
    snprintf(seg->name, sizeof seg->name, "%s", name);
    seg->fd = nc_shm_open(pid, fd, name, seg->bytes);
    if (seg->fd < 0) {
        int rc = seg->fd;
        seg->fd = -1;
        return rc;
    }
    int rc = seg_map(seg);
    if (rc) {
        nc_seg_detach(seg);
        return rc;
    }
    nc_seg_hdr_t *h = nc_seg_hdr(seg);
    /* acquire: pairs with the release of ready in nc_seg_create(). */
    if (!atomic_load_explicit(&h->ready, memory_order_acquire) || h->magic != NC_SEG_MAGIC ||
        h->version != NC_SEG_VERSION || h->p != (uint32_t)l->p || h->total_bytes != seg->bytes ||
        h->frag_size != l->f || h->queue_len != (uint32_t)l->s || h->sets != (uint32_t)l->q ||
        h->layout != (uint32_t)l->kind) {
        nc_log_error("segment %s: header does not match (magic %llx version %u p %u, expected "
                     "version %u p %d)",
                     name, (unsigned long long)h->magic, h->version, h->p, NC_SEG_VERSION, l->p);
        nc_seg_detach(seg);
        return NUMACOLL_ERR_MISMATCH;
    }
    return 0;
}

void nc_seg_unpublish(nc_seg_t *seg)
{
    if (seg->fd >= 0)
        close(seg->fd);
    seg->fd = -1;
}

void nc_seg_detach(nc_seg_t *seg)
{
    if (seg->fd >= 0)
        close(seg->fd);
    seg->fd = -1;
    if (seg->base)
        munmap(seg->base, seg->bytes);
    seg->base = NULL;
}

/* Keep pages where first touch put them: an explicit shared policy for the
 * range (preferred = this node, still falls back when the node is full).
 * Automatic NUMA balancing does not migrate pages under an explicit policy
 * (no MPOL_F_MOF), which it otherwise does after a while (tests/guest). */
static void keep_on_node(void *addr, size_t bytes, int node)
{
    unsigned long mask[16] = {0};
    if (node < 0 || node >= (int)(sizeof mask * 8) || !bytes)
        return;
    mask[node / (8 * sizeof mask[0])] |= 1ul << (node % (8 * sizeof mask[0]));
    if (mbind(addr, bytes, MPOL_PREFERRED, mask, sizeof mask * 8, 0))
        nc_log_info(3, "mbind(node %d): %s", node, strerror(errno));
}

int nc_seg_first_touch(nc_seg_t *seg, int rank, int node, char *why, size_t whylen)
{
    const nc_layout_t *l = &seg->l;
    char *blk = nc_seg_rank_block(seg, rank);
    /* The policy first, so that the reservation (which allocates the pages)
     * already puts them on the node; rank 0 reserved its parts at creation. */
    keep_on_node(blk, l->rank_bytes, node);
    if (rank != 0) {
        char what[64];
        snprintf(what, sizeof what, "member %d's block", rank);
        int rc = nc_shm_reserve(seg->fd, l->rank_off + (size_t)rank * l->rank_bytes,
                                l->rank_bytes, what, why, whylen);
        if (rc)
            return rc;
        /* Rank 0 keeps its descriptor until every member attached. */
        close(seg->fd);
        seg->fd = -1;
    }
    /* Control blocks must read zero; writing the zero is the first touch. */
    memset(blk, 0, l->ctrl_bytes);
    for (size_t off = l->ctrl_bytes; off < l->rank_bytes; off += l->page)
        blk[off] = 0;
    if (rank == 0) {
        memset((char *)seg->base + l->barrier_off, 0, l->barrier_bytes);
        /* Header, call ring and set pages were written by rank 0 at creation. */
    }
    nc_seg_pids(seg)[rank] = (int32_t)getpid();
    if (rank == 0) {
        keep_on_node(seg->base, l->rank_off, node);
        keep_on_node((char *)seg->base + l->barrier_off, l->barrier_bytes, node);
    }
    set_random(seg->base, seg->bytes, 0);
    return 0;
}

/* Name the block that holds byte offset `off` of the segment. */
static void block_name(const nc_layout_t *l, size_t off, char *buf, size_t len)
{
    if (off < l->sets_off)
        snprintf(buf, len, "%s page %zu", off < l->calls_off ? "header/leaders" : "call ring",
                 off < l->calls_off ? off / l->page : (off - l->calls_off) / l->page);
    else if (off < l->rank_off)
        snprintf(buf, len, "set page %zu", (off - l->sets_off) / l->set_bytes);
    else if (off < l->bcast_bytes) {
        size_t r = (off - l->rank_off) / l->rank_bytes, in = (off - l->rank_off) % l->rank_bytes;
        int m = l->nareas - 1;
        while (m >= 0 && in < l->marea_off[m])
            m--;
        if (in < l->ctrl_bytes)
            snprintf(buf, len, "member %zu control page %zu", r, in / l->page);
        else if (m >= 0)
            snprintf(buf, len, "member %zu collective area %d page %zu", r, m,
                     (in - l->marea_off[m]) / l->page);
        else
            snprintf(buf, len, "member %zu buffer %zu page %zu", r,
                     (in - l->buf_off) / l->buf_stride, (in - l->buf_off) % l->buf_stride / l->page);
    } else {
        int m = l->nareas - 1;
        while (m > 0 && off < l->area_off[m])
            m--;
        snprintf(buf, len, "%s page %zu", m ? "collective area" : "barrier",
                 (off - l->area_off[m]) / l->page);
    }
}

static void check_range(const nc_seg_t *seg, size_t off, size_t bytes, int expect,
                        nc_placement_t *out)
{
    size_t page = seg->l.page, n = bytes / page;
    if (!n || !out->checked)
        return;
    void **pages = malloc(n * sizeof *pages);
    int *status = malloc(n * sizeof *status);
    if (!pages || !status) {
        out->checked = 0;
        snprintf(out->detail, sizeof out->detail, "out of memory for move_pages()");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        pages[i] = (char *)seg->base + off + i * page;
    if (move_pages(0, (unsigned long)n, pages, NULL, status, 0)) {
        out->checked = 0;
        snprintf(out->detail, sizeof out->detail, "move_pages() failed: %s", strerror(errno));
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        out->pages++;
        if (status[i] == expect)
            continue;
        if (!out->misplaced++) {
            char what[96];
            block_name(&seg->l, off + i * page, what, sizeof what);
            if (status[i] >= 0)
                snprintf(out->detail, sizeof out->detail, "%s is on NUMA node %d, expected %d",
                         what, status[i], expect);
            else
                snprintf(out->detail, sizeof out->detail, "%s: move_pages status %d (%s)", what,
                         status[i], strerror(-status[i]));
        }
    }
done:
    free(pages);
    free(status);
}

void nc_seg_verify(const nc_seg_t *seg, int rank, int expect_node, nc_placement_t *out)
{
    memset(out, 0, sizeof *out);
    if (expect_node < 0) {
        snprintf(out->detail, sizeof out->detail,
                 "member %d is not bound inside one NUMA node: nothing to expect", rank);
        return;
    }
    out->checked = 1;
    const nc_layout_t *l = &seg->l;
    check_range(seg, l->rank_off + (size_t)rank * l->rank_bytes, l->rank_bytes, expect_node, out);
    if (rank == 0)
        check_range(seg, 0, l->rank_off, expect_node, out);
}
