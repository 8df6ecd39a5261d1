/* sp_empty: how many emptied small pages stay resident (allocator/hc/hc_page.c, SMALL_EMPTY;
 * tests/test_allocator_os.py).
 *
 *   sp_empty      14 pages of 256-byte blocks (written) are allocated and all freed, so 13 or 14
 *                 pages go to the empty pool (less than DECAY_BYTES: the decay alone never
 *                 releases them); after 300 ms, past DECAY_MS / 8, two pages of 128-byte blocks
 *                 are filled and freed (a page emptied: the pool is looked at again).  Prints
 *                 "resident R", the pages (of the OS) resident then beyond those before the first
 *                 allocation.  Sleeping longer can only release more, so the figure does not
 *                 depend on the machine's speed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

enum { BIG = 14 * 250, SMALL = 2 * 500 };
static char *blocks[BIG], *small[SMALL];

int main(void)
{
    free(malloc(256)); /* the pages' region set up, stdio's buffers made */
    free(malloc(128));
    long before = resident();
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
    printf("resident %ld\n", resident() - before);
    return 0;
}
