/* sp_empty: how many emptied small pages stay resident (allocator/hc/hc_page.c, SMALL_EMPTY;
 * tests/test_allocator_os.py).
 *
 *   sp_empty      14 pages of 256-byte blocks (written) are allocated and all freed, so 13 or 14
 *                 pages go to the empty pool (less than DECAY_BYTES: the decay alone never
 *                 releases them); after 300 ms, past DECAY_MS / 8, two pages of 128-byte blocks
 *                 are filled and freed (a page emptied: the pool is looked at again).  Prints
 *                 "resident R released B": the pages (of the OS) resident then beyond those
 *                 before the first allocation, and the bytes of empty small pages HC released
 *                 meanwhile (its statistics, small_bytes_released; 0 under another allocator).
 *                 Sleeping longer can only release more, so the figures do not depend on the
 *                 machine's speed; the resident count moves by some 50 pages from run to run
 *                 (239-290 with no bound), the released bytes do not.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <unistd.h>

#include "hc_stats.h"
#include "proc.h"

enum { BIG = 14 * 250, SMALL = 2 * 500 };
static char *blocks[BIG], *small[SMALL];

static unsigned long long released(void)
{
    int (*get)(struct hc_stats *) = (int (*)(struct hc_stats *))dlsym(RTLD_DEFAULT, "hc_stats_get");
    struct hc_stats st;
    memset(&st, 0, sizeof st);
    return get && get(&st) == 0 ? (unsigned long long)st.small_bytes_released : 0;
}

int main(void)
{
    free(malloc(256)); /* the pages' region set up, stdio's buffers made */
    free(malloc(128));
    long before = resident();
    unsigned long long released_before = released();
    for (int i = 0; i < BIG; i++) {
        if (!(blocks[i] = malloc(256)))
            return 1;
        memset(blocks[i], 1, 256);
    }
    for (int i = 0; i < BIG; i++)
        free(blocks[i]);
    usleep(300 * 1000);
    for (int i = 0; i < SMALL; i++) {
        if (!(small[i] = malloc(128)))
            return 1;
        small[i][0] = 1;
    }
    for (int i = 0; i < SMALL; i++)
        free(small[i]);
    long now = resident();
    printf("resident %ld released %llu\n", now - before, released() - released_before);
    return 0;
}
