/* hc_realloc.c -- realloc (Hasan & Chang 2006, §3.12). */
#include "hc_block.h"

/* Resize heap block b to `size` bytes in place: the block (it starts earlier when free blocks
 * before it were merged), or NULL when the caller must move it.
 *  1. Shrinking: split off the tail when it is at least two granules (§3.8's rule).
 *  2. Growing: add the free blocks that follow (not quick-list blocks: their inuse bit is set,
 *     §3.10), then the wilderness if they reach it, then the free blocks that precede.
 *  3. Enough?  Take them off their lists, slide the data down if the block now starts earlier,
 *     and give back what is more than needed. */
static char *hc_resize_in_place(char *b, size_t size)
{
    HC_ARENA_HERE;
    size_t have = hc_size(b);
    if (size <= have) {
        if (have > HC_QL_SIZE)
            hc_shrink_block(b, size);
        return b;
    }
    size_t avail = have;
    char *next = b + have;
    while (next != hc.top && !hc_is_inuse(next) && avail + hc_size_checked(next) <= HC_MAX_BLOCK) {
        avail += hc_size(next);
        next = b + avail;
    }
    size_t from_wild = 0;
    if (avail < size && next == hc.top)
        from_wild = size - avail;
    size_t before = 0;
    char *start = b;
    if (avail < size && !from_wild) {
        while (!hc_prev_inuse(start)) {
            char *prev = hc_prev_checked(start);
            if (avail + before + hc_size(prev) > HC_MAX_BLOCK)
                break;
            before += hc_size(prev);
            start = prev;
            if (avail + before >= size)
                break;
        }
        if (avail + before < size)
            return NULL;
    }
    if (from_wild) {
        size_t room = (size_t)(hc.end - hc.top);
        if (room < from_wild + HC_HDR && !hc_heap_grow(from_wild + HC_HDR - room))
            return NULL;
    }
    /* Commit: unlink the neighbours we take. */
    for (char *n = b + have; n != b + avail; n += hc_size(n))
        hc_list_remove(n);
    for (char *p = start; p != b; p += hc_size(p))
        hc_list_remove(p);
    uint32_t pinuse = *hc_hdr(start) & HC_PINUSE;
    size_t total = before + avail;
    if (start != b)
        memmove(start + HC_HDR, b + HC_HDR, have - HC_HDR);
    hc.st.bytes_current += total - have;
    if (from_wild) {
        total = size;
        *hc_hdr(start) = (uint32_t)total | HC_INUSE | pinuse;
        hc.top = start + total;
        *hc_hdr(hc.top) = HC_PINUSE;
        if (hc.top + HC_HDR > hc.clean)
            hc.clean = hc.top + HC_HDR;
        hc.st.bytes_current += from_wild;
    } else {
        *hc_hdr(start) = (uint32_t)total | HC_INUSE | pinuse;
        hc_set_pinuse(start + total);
        hc_shrink_block(start, size);
    }
    if (hc.st.bytes_current > hc.st.bytes_max)
        hc.st.bytes_max = hc.st.bytes_current;
    HC_COUNT(realloc_in_place, 1);
    return start;
}
