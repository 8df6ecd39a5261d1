/* hc_big_tree: the big list's tree keeps address-ordered first fit when a block takes a node's
 * place (allocator/hc/hc_big.c, hc_big_replace): a freed block merged with a free big neighbour
 * before it, after it, or both; a first fit split from its low end; a merge that reaches the
 * wilderness.  Blocks of 8 KiB and more: above SMALL_MAX, in the paper's heap.
 *
 * Prints one line per step, "name offset" (the block's offset from the first block, in bytes,
 * or -1 when it is not in that range), for tests/test_allocator_large.py.  Run under the debug
 * build with HCMALLOC_CHECK=1, the tree is checked after every call. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 8
#define SZ 8192

static char *base;
static const char *names[32];
static long offs[32];
static int nsaid;

static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

/* Kept, printed at the end: stdout's buffer is allocated on the first printf. */
static void say(const char *name, void *p)
{
    long off = (char *)p - base;
    names[nsaid] = name;
    offs[nsaid++] = off >= 0 && off < 16L * N * SZ ? off : -1L;
}

int main(void)
{
    char *b[N];
    for (int i = 0; i < N; i++)
        b[i] = launder(malloc(SZ)); /* b[N-1] is next to the wilderness */
    base = b[0];
    for (int i = 0; i < N; i++)
        say("block", b[i]);
    free(b[1]);
    free(b[3]);                       /* two nodes, 1 and 3 */
    free(b[2]);                       /* merged with both: node 1 stays, 3 goes */
    char *x = launder(malloc(3 * SZ - 64)); /* the merged block, first fit: at 1 */
    say("merged-both", x);
    free(x);                          /* back, no neighbour free: a new node */
    char *y = launder(malloc(SZ + 4096)); /* split from the low end of 1..3 */
    say("split-low", y);
    char *z = launder(malloc(SZ + 4096 + 12)); /* all of the remainder, which took the node's place */
    say("split-rest", z);
    free(b[0]);                       /* a node before y */
    free(y);                          /* merged with the node before it (0) */
    char *w = launder(malloc(2 * SZ + 2048));
    say("merged-prev", w);
    free(b[5]);                       /* a node at 5 */
    free(b[4]);                       /* merged with the node after it (5); z before it is in use */
    char *v = launder(malloc(2 * SZ));
    say("merged-next", v);
    free(b[6]);                       /* a node at 6, below the last block */
    free(b[N - 1]);                   /* merged with 6, which reaches the wilderness */
    char *u = launder(malloc(4 * SZ)); /* from the wilderness, starting at 6 */
    say("wilderness", u);
    free(u);
    free(v);
    free(w);
    free(z);
    for (int i = 0; i < nsaid; i++)
        printf("%s %ld\n", names[i], offs[i]);
    return 0;
}
