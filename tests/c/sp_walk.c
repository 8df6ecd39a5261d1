/* sp_walk: blocks that move up through the small pages' classes (allocator/hc/hc_page.c,
 * SMALL_IDLE; tests/test_allocator_pages.py).
 *
 *   sp_walk      for each size from 1,100 to 4,000 bytes in steps of 100 (about 28 classes of
 *                generic's table), 40 blocks are allocated, written, and all freed, so the
 *                class's current page is left empty before the next size starts -- the way
 *                gawk's strings grown by concatenation pass through the classes.  Prints
 *                "pages P empty E" from HC's statistics: the pages taken from the region, and of
 *                them those in the empty pool.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_stats.h"

enum { BLOCKS = 40 };

int main(void)
{
    int (*get)(struct hc_stats *) = (int (*)(struct hc_stats *))dlsym(RTLD_DEFAULT, "hc_stats_get");
    static char *b[BLOCKS];
    struct hc_stats st;
    for (size_t size = 1100; size <= 4000; size += 100) {
        for (int i = 0; i < BLOCKS; i++) {
            if (!(b[i] = malloc(size)))
                return 1;
            memset(b[i], 1, size);
        }
        for (int i = 0; i < BLOCKS; i++)
            free(b[i]);
    }
    memset(&st, 0, sizeof st);
    if (!get || get(&st) != 0)
        return 1;
    printf("pages %llu empty %llu\n", (unsigned long long)st.small_pages,
           (unsigned long long)st.small_pages_empty);
    return 0;
}
