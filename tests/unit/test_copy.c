/*
 * The bulk copies of common/nc_common.h against memcpy: nc_copy (its backward
 * path for 4K-aliased buffers) and nc_copy_nt (non-temporal stores after an
 * aligned head, a cached tail), every destination alignment in a line, sizes
 * around every threshold, and the bytes around the destination untouched.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nc_common.h"

#include "nc_check.h"

#define GUARD 128

static int check_one(int nt, size_t doff, size_t soff, size_t n, unsigned char *src,
                     unsigned char *dst)
{
    for (size_t i = 0; i < n + soff; i++)
        src[i] = (unsigned char)(i * 131u + n + doff);
    memset(dst, 0xA5, n + doff + 2 * GUARD);
    unsigned char *d = dst + GUARD + doff;
    if (nt) {
        nc_copy_nt(d, src + soff, n);
        nc_copy_nt_fence();
    } else {
        nc_copy(d, src + soff, n);
    }
    CHECK(!memcmp(d, src + soff, n), "%s: n=%zu dst+%zu src+%zu: bytes differ", nt ? "nt" : "copy",
          n, doff, soff);
    for (size_t i = 0; i < GUARD + doff; i++)
        CHECK(dst[i] == 0xA5, "%s: n=%zu dst+%zu: byte %zu before the copy written",
              nt ? "nt" : "copy", n, doff, i);
    for (size_t i = 0; i < GUARD; i++)
        CHECK(d[n + i] == 0xA5, "%s: n=%zu dst+%zu: byte %zu after the copy written",
              nt ? "nt" : "copy", n, doff, i);
    return 0;
}

int main(void)
{
    static const size_t sizes[] = {0,   1,   15,  16,   17,   63,   64,   65,    255,   256,
                                   257, 300, 511, 1023, 1024, 1025, 4095, 4096, 65536 + 7, 1 << 20};
    const size_t cap = (1 << 20) + 8192; /* aligned_alloc: a multiple of the alignment */
    unsigned char *src = aligned_alloc(4096, cap), *dst = aligned_alloc(4096, cap + 4096);
    CHECK(src && dst, "memory");
    for (int nt = 0; nt < 2; nt++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (size_t doff = 0; doff < 64; doff += (sizes[i] > 4096 ? 7 : 1))
                if (check_one(nt, doff, (doff * 5) % 64, sizes[i], src, dst))
                    return 1;
    /* 4K aliasing: destination 1..31 bytes past the source modulo 4096 (nc_copy
     * copies backward there) */
    for (size_t a = 1; a < 32; a += 3)
        if (check_one(0, (4096 - GUARD + a) % 4096, 0, 8192, src, dst))
            return 1;
    free(src);
    free(dst);
    if (failures) {
        fprintf(stderr, "test_copy: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_copy: OK\n");
    return 0;
}
