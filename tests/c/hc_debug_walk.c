/* hc_debug_walk: a heap corruption that no later call touches, for the debug build's periodic
 * full walk (tests/test_allocator_debug.py).
 *
 * Usage: hc_debug_walk CALLS   overflow one block into the header of a block nobody frees,
 *                              then make CALLS malloc/free pairs of another size; prints
 *                              "not detected" and exits 0 if the allocator never noticed. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 10000;
    unsigned char *a = launder(malloc(40)), *b = launder(malloc(40));
    memset(launder(a), 0xee, malloc_usable_size(a) + 8);   /* into b's header */
    for (long i = 0; i < calls; i++)
        free(launder(malloc(200)));
    /* write(2), not printf: stdout's first printf would malloc its buffer from the corrupt
     * heap, where an unchecked allocator may loop for ever */
    char line[64];
    int n = snprintf(line, sizeof line, "not detected %p\n", (void *)b);
    if (n > 0 && write(1, line, (size_t)n) < 0)
        return 1;
    return 0;
}
