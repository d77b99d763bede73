/* Segment layout arithmetic: the paper's 780 KiB example and the invariants. */
#include <stdio.h>

#include "config/nc_config.h"
#include "shm/nc_seg.h"

#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL %d: %s: ", __LINE__, #c); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); return 1; } } while (0)

int main(void)
{
    nc_layout_t l;
    /* Figure 1: p=8, s=8, f=8 KiB, q=2, 4 KiB pages -> page + q*page + p*s*(page+f). */
    CHECK(nc_layout_compute(&l, 8, 8192, 8, 2, NC_LAYOUT_PAPER, 4096, NULL, 0) == 0, "compute");
    /* the paper's 780 KiB plus numacoll's call ring: 64 slots of 4 KiB + three pages of 8
     * acks, 8 x 2 probe lines and 64 claim words of two lines */
    CHECK(l.calls_bytes == 67 * 4096 && l.calls_off == l.hdr_bytes, "call ring %zu", l.calls_bytes);
    CHECK(l.bcast_bytes == 780 * 1024 + l.calls_bytes, "paper size %zu", l.bcast_bytes);
    CHECK(l.bcast_bytes == 4096 + 67 * 4096 + 2 * 4096 + 8 * 8 * (4096 + 8192), "formula");
    CHECK(l.total == l.bcast_bytes, "no barrier area asked");
    /* Every block page-aligned, members back to back. */
    CHECK(l.sets_off % 4096 == 0 && l.rank_off % 4096 == 0 && l.rank_bytes % 4096 == 0, "align");
    CHECK(l.ctrl_stride == 4096 && l.buf_off == 8 * 4096 && l.buf_stride == 8192, "paper blocks");

    /* Compact: control blocks a cache line each, packed in a page. */
    nc_shm_need_t needs[2] = {{.shared = 100, .member = 0}, {.shared = 0, .member = 5000}};
    CHECK(nc_layout_compute(&l, 8, 8192, 8, 2, NC_LAYOUT_COMPACT, 4096, needs, 1) == 0, "compact");
    CHECK(l.ctrl_stride == 64 && l.ctrl_bytes == 4096, "compact ctrl");
    CHECK(l.bcast_bytes == 4096 + 67 * 4096 + 2 * 4096 + 8 * (4096 + 8 * 8192), "compact size %zu",
          l.bcast_bytes);
    CHECK(l.barrier_off == l.bcast_bytes && l.barrier_bytes == 4096, "barrier rounded to a page");
    CHECK(l.area_off[0] == l.barrier_off && l.area_bytes[0] == 4096, "area 0 is the barrier's");
    /* A collective's member part: in every member block, after the queue. */
    CHECK(nc_layout_compute(&l, 8, 8192, 8, 2, NC_LAYOUT_COMPACT, 4096, needs, 2) == 0, "areas");
    CHECK(l.marea_off[1] == 4096 + 8 * 8192 && l.marea_bytes[1] == 8192 && l.marea_bytes[0] == 0,
          "member area %zu %zu", l.marea_off[1], l.marea_bytes[1]);
    CHECK(l.rank_bytes == 4096 + 8 * 8192 + 8192 && l.total == l.bcast_bytes + 4096,
          "sizes %zu %zu", l.rank_bytes, l.total);
    CHECK(nc_layout_compute(&l, 8, 8192, 8, 2, 0, 4096, needs, NC_LAYOUT_AREAS + 1) ==
              NUMACOLL_ERR_INVAL, "too many areas");

    /* f not a page multiple: buffers still start on pages. */
    CHECK(nc_layout_compute(&l, 3, 5000, 4, 1, NC_LAYOUT_COMPACT, 4096, NULL, 0) == 0, "odd f");
    CHECK(l.buf_stride == 8192, "stride %zu", l.buf_stride);
    /* Large p: leaders and pids spill into more header pages. */
    CHECK(nc_layout_compute(&l, 1024, 8192, 1, 1, NC_LAYOUT_COMPACT, 4096, NULL, 0) == 0, "p=1024");
    CHECK(l.hdr_bytes == 3 * 4096, "hdr %zu", l.hdr_bytes);
    /* Invalid shapes. */
    CHECK(nc_layout_compute(&l, 4, 8192, 8, 3, 0, 4096, NULL, 0) == NUMACOLL_ERR_INVAL, "q must divide s");
    CHECK(nc_layout_compute(&l, 0, 8192, 8, 1, 0, 4096, NULL, 0) == NUMACOLL_ERR_INVAL, "p >= 1");
    printf("layout: PASSED\n");
    return 0;
}
