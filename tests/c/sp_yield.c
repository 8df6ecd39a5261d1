/* sp_yield: empty small pages give way to the paper's heap (allocator/hc/hc_page.c, SMALL_YIELD;
 * tests/test_allocator_pages.py).
 *
 *   sp_yield     12,000 blocks of 1,032 bytes (about 200 pages of their class, each block
 *                written) are allocated and all freed: the pages go to the empty pool.  Then 64
 *                blocks of 64 KiB (above SMALL_MAX, below MMAP_THRESHOLD: the paper's heap, which
 *                grows by 4 MiB) are allocated and written.  Prints "released R grew G empty E":
 *                the bytes of empty pages released between the frees and the end (HC's
 *                statistics, small_bytes_released), the heap's growth in bytes (heap_bytes less
 *                the pages' share), the empty pages left.  Run with a long DECAY_MS, so that the
 *                decay cannot release anything meanwhile: the figures are counts, not timings.
 *   sp_yield K   the same, with K more blocks of 1,032 bytes allocated first and kept: with
 *                K = 14,000 about 230 pages stay in use, more than the 200 emptied.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_stats.h"

enum { MID = 12000, BIG = 64, KEEP_MAX = 100000 };
static char *mid[MID], *big[BIG], *kept[KEEP_MAX];

static int stats(struct hc_stats *st)
{
    int (*get)(struct hc_stats *) = (int (*)(struct hc_stats *))dlsym(RTLD_DEFAULT, "hc_stats_get");
    memset(st, 0, sizeof *st);
    return get && get(st) == 0;
}

int main(int argc, char **argv)
{
    struct hc_stats a, b;
    int keep = argc > 1 ? atoi(argv[1]) : 0;
    if (keep < 0 || keep > KEEP_MAX)
        return 2;
    free(malloc(70000)); /* the heap set up, stdio's buffers made */
    for (int i = 0; i < keep; i++) {
        if (!(kept[i] = malloc(1032)))
            return 1;
        memset(kept[i], 3, 1032);
    }
    for (int i = 0; i < MID; i++) {
        if (!(mid[i] = malloc(1032)))
            return 1;
        memset(mid[i], 1, 1032);
    }
    for (int i = 0; i < MID; i++)
        free(mid[i]);
    if (!stats(&a))
        return 1;
    for (int i = 0; i < BIG; i++) {
        if (!(big[i] = malloc(65536)))
            return 1;
        memset(big[i], 2, 65536);
    }
    if (!stats(&b))
        return 1;
    unsigned long long heap_a = a.heap_bytes - a.small_pages * 65536, heap_b = b.heap_bytes - b.small_pages * 65536;
    printf("released %llu grew %llu empty %llu\n",
           (unsigned long long)(b.small_bytes_released - a.small_bytes_released), heap_b - heap_a,
           (unsigned long long)b.small_pages_empty);
    for (int i = 0; i < BIG; i++)
        free(big[i]);
    for (int i = 0; i < keep; i++)
        free(kept[i]);
    return 0;
}
