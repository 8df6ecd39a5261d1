/* hc_align_big: alignments from 32 bytes to 2^35 through memalign, posix_memalign and
 * aligned_alloc: each block is aligned, writable at both ends, and free() gives back exactly
 * its mapping (the process's virtual size returns to where it was; issue 9: an alignment of
 * 4 GiB or more used to unmap the wrong range).
 *
 * Usage: hc_align_big [max_log2]      prints "ok N checks", or FAIL lines and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_NAME "hc_align_big"
#include "check.h"

static long vm_pages(void)
{
    long size = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld", &size) != 1)
            size = -1;
        fclose(f);
    }
    return size;
}

static void use(char *p, size_t n, size_t align)
{
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK(((uintptr_t)p & (align - 1)) == 0);
    CHECK(malloc_usable_size(p) >= n);
    p[0] = 1;
    p[n - 1] = 2;
    memset(p, 0x5a, n < 8192 ? n : 8192);
}

int main(int argc, char **argv)
{
    unsigned max = argc > 1 ? (unsigned)atoi(argv[1]) : 35;
    /* Warm up stdio and the heap, so their one-time mappings are not counted below. */
    free(malloc(100));
    void *volatile warm = malloc(8192); /* the paper's heap too: small pages (SMALL_MAX) */
    free(warm);                          /* leave it unreserved (volatile: not folded away) */
    long before = vm_pages();
    CHECK(before > 0);
    for (unsigned shift = 5; shift <= max; shift++) {
        size_t align = (size_t)1 << shift;
        snprintf(check_where, sizeof check_where, "shift %u", shift);
        size_t sizes[] = { 1, 100, 5000, 300000 };
        for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            size_t n = sizes[k];
            char *a = memalign(align, n);
            use(a, n, align);
            void *b = NULL;
            CHECK(posix_memalign(&b, align, n) == 0);
            use(b, n, align);
            char *c = aligned_alloc(align, n);
            use(c, n, align);
            free(a);
            free(b);
            free(c);
        }
    }
    check_where[0] = 0;
    long after = vm_pages();
    /* Blocks that went to the heap may have grown it by a little: allow 16 MiB of pages. */
    CHECK(after >= 0 && after - before < 4096);
    char detail[64];
    snprintf(detail, sizeof detail, " (virtual pages %ld -> %ld)", before, after);
    return check_report(detail);
}
