/* hc_bigcache: BIG_CACHE's kept big blocks (allocator/hc/hc_bigcache.c), step by step.
 * 16 blocks of 6,000 bytes (6,016-byte blocks: above SMALL_MAX, in the paper's heap) are taken
 * from the wilderness; the last stays in use so that no free reaches the wilderness.  Then:
 *  - "lifo": blocks 0, 2, ..., 14 freed, one malloc of their size: the most recently freed one
 *    kept (14's... as far as the bound lets them be kept), or the lowest (0) from the big list;
 *  - "evicted": a freed block of 7,040 bytes shares their slot (6016 / 16 and 7040 / 16 are
 *    equal mod 64): the slot's kept blocks go to the big list, and the next 6,000-byte malloc is
 *    the first fit there;
 *  - "trim": block 11 freed (kept; the 7,040-byte block's slot is its), then malloc_trim gives
 *    every kept block to the big list: the next malloc is the first fit there, not block 11.
 * Prints "name index" lines (the block's index among the 16, -1 for none of them) after the
 * steps (stdout's buffer is allocated at the first printf), for tests/test_allocator_large.py; HCMALLOC_STATS counts the kept blocks' reuse. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 16
#define SZ 6000

static char *a[N];
static const char *names[16];
static int idx[16], nsaid;

static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

static void say(const char *name, void *p)
{
    int k = -1;
    for (int i = 0; i < N; i++)
        if (a[i] == p)
            k = i;
    names[nsaid] = name;
    idx[nsaid++] = k;
}

int main(void)
{
    for (int i = 0; i < N; i++)
        a[i] = launder(malloc(SZ));
    for (int i = 0; i < N - 1; i += 2)
        free(a[i]);
    char *p = launder(malloc(SZ));
    say("lifo", p);
    char *b = launder(malloc(7036)); /* a 7,040-byte block: from the wilderness */
    free(b);                         /* its slot held the 6,016-byte blocks: they go */
    char *q = launder(malloc(SZ));
    say("evicted", q);
    free(a[11]);
    malloc_trim(0);
    char *c = launder(malloc(SZ));
    say("trim", c);
    for (int i = 0; i < nsaid; i++)
        printf("%s %d\n", names[i], idx[i]);
    return 0;
}
