/* hc_align.c -- aligned blocks for posix_memalign, aligned_alloc, memalign, valloc, pvalloc.
 * Not in Hasan & Chang 2006; built from its pieces: over-allocate, then free the front and the
 * tail as ordinary free blocks (§3.4) so nothing is lost to the alignment. */
#include "hc_block.h"

/* A heap block whose payload is a multiple of align (a power of two > 16) holding size bytes.
 *  1. Allocate size + align - 16 bytes: some payload address inside is aligned, and its
 *     distance from the start is a multiple of 16, so the front is 0 or a whole free block.
 *  2. Free the front (its own block, on its uncoalesced sub-list).
 *  3. Give back the tail beyond size. */
static char *hc_alloc_aligned(size_t size, size_t align)
{
    HC_ARENA_HERE;
    char *b = hc_alloc_block(size + align - HC_GRANULE);
    if (!b)
        return NULL;
    hc.st.bytes_current += hc_size(b);
    uintptr_t p = ((uintptr_t)b + HC_HDR + align - 1) & ~(uintptr_t)(align - 1);
    char *nb = (char *)p - HC_HDR;
    size_t front = (size_t)(nb - b);
    if (front) {
        size_t total = hc_size(b);
        *hc_hdr(b) = (uint32_t)front | (*hc_hdr(b) & HC_PINUSE);
        hc_set_trailer(b, front);
        *hc_hdr(nb) = (uint32_t)(total - front) | HC_INUSE;
        hc_list_push(b, 0);
        hc.st.bytes_current -= front;
    }
    hc.last_clean = 0;
    hc_shrink_block(nb, size);
    hc.st.bytes_current -= hc_size(nb);
    return nb;
}
