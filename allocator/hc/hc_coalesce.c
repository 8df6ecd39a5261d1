/* hc_coalesce.c -- incremental coalescing (Hasan & Chang 2006, §3.7) and complete coalescing
 * (§3.8 COALESCE_QL, §3.11 COALESCE_IN_FREE). */
#include "hc_block.h"

/* Merge the off-list free block b with every free neighbour.  The neighbours come off their
 * lists, except, when keep is not NULL, the first big one (a tree node): it stays in the tree and
 * is returned in *keep, so that the merged block can take its place (hc_big_replace: no other
 * free block lies in between).  Returns the merged block, off-list, header and trailer written;
 * or NULL when it ended up just below the wilderness and was taken into it (§3.9: the
 * wilderness grows backwards). */
static HC_UNUSED char *hc_merge_keep(char *b, char **keep)
{
    HC_ARENA_HERE;
    size_t size = hc_size(b);
    char *node = NULL;
    while (!hc_prev_inuse(b)) {
        char *prev = hc_prev_checked(b);
        size_t ps = hc_size(prev);
        if (ps + size > HC_MAX_BLOCK)
            break;
        if (keep && !node && ps > HC_MEDIUM_MAX)
            node = prev;
        else
            hc_list_remove(prev);
        b = prev;
        size += ps;
    }
    for (;;) {
        char *next = b + size;
        if (next == hc.top) {
            if (node)
                hc_list_remove(node);
            *hc_hdr(b) = (uint32_t)size | (*hc_hdr(b) & HC_PINUSE);
            hc_wild_absorb(b, size);
            return NULL;
        }
        if (hc_is_inuse(next) || hc_size_checked(next) + size > HC_MAX_BLOCK)
            break;
        if (keep && !node && hc_size(next) > HC_MEDIUM_MAX)
            node = next;
        else
            hc_list_remove(next);
        size += hc_size(next);
    }
    *hc_hdr(b) = (uint32_t)size | (*hc_hdr(b) & HC_PINUSE);
    hc_set_trailer(b, size);
    if (keep)
        *keep = node;
    return b;
}

static HC_UNUSED char *hc_merge(char *b) { return hc_merge_keep(b, NULL); }

#if BIG_AO_FIT
/* BIG_AO_FIT: merge the off-list free block b (header written) with every free neighbour and
 * list the result, or give it to the wilderness: what hc_merge and hc_list_push(m, 1) do, with
 * the same blocks, sizes and flags, in fewer steps.  The first big neighbour (a tree node) stays
 * in the tree and the merged block takes its place, so a free that meets a free big neighbour
 * moves no node up or down the tree. */
static void hc_merge_list(char *b)
{
    char *node;
    b = hc_merge_keep(b, &node);
    if (!b)
        return;
    if (!node) {
        hc_list_push(b, 1);
        return;
    }
    hc_big_replace(node, b);
    *hc_hdr(b) |= HC_COALESCED;
    hc_t_grow_up(b, (uint32_t)hc_size(b));
}
#endif

/* Incremental coalescing (§3.7), for a request of `size` bytes:
 *  1. Find, through the bitmap of uncoalesced sub-lists, a list with uncoalesced blocks.
 *  2. Take its blocks one by one and merge each with its free neighbours.
 *  3. A merged block of at least `size` bytes is returned (off-list) for the caller to split;
 *     a smaller one goes on the coalesced sub-list of its size.
 *  4. NULL when no uncoalesced blocks remain.  Quick lists are left alone (§3.10). */
static HC_UNUSED char *hc_coalesce_incremental(size_t size)
{
    HC_ARENA_HERE;
    int i = hc_bit_next(hc.unco, 1);
    if (i < 0)
        return NULL;
    HC_COUNT(coalesce_incremental, 1);
    for (; i >= 0; i = hc_bit_next(hc.unco, 1)) {
        char *b = hc_at(hc.lists[i].unco);
        hc_list_remove(b);
        b = hc_merge(b);
        if (!b)
            continue;
        if (hc_size(b) >= size)
            return b;
        hc_list_push(b, 1);
    }
    return NULL;
}

/* Complete coalescing (§3.8, §3.11): every free block of the heap, quick lists included.
 *  1. Forget every list and quick list (and BIG_CACHE's kept blocks): the walk below lists each
 *     free block again.
 *  2. Walk the heap from the first block to the wilderness.  A block is free if its inuse bit is
 *     clear or it is on a quick list (inuse and quick bits both set, §3.10), so the quick lists
 *     need no walk of their own (a walk in their LIFO order, all over the heap, was most of the
 *     cost of a complete coalescing of a heap of many small blocks).
 *  3. Merge each run of free blocks into one: header, trailer, the next block's prev-inuse bit
 *     cleared (a quick-list block left it set); put it on the coalesced sub-list of its size, or
 *     into the wilderness if the run ends there. */
static inline int hc_free_or_quick(char *b)
{
    return (*hc_hdr(b) & (HC_INUSE | HC_QUICK)) != HC_INUSE;
}

static void hc_coalesce_complete(void)
{
    HC_ARENA_HERE;
    if (!hc.ready || hc.end == hc.base)
        return;
    memset(hc.ql, 0, sizeof hc.ql);
    hc_bc_forget(); /* BIG_CACHE's kept blocks carry the quick bit too (hc_bigcache.c) */
    memset(hc.lists, 0, sizeof hc.lists);
    memset(hc.map, 0, sizeof hc.map);
    memset(hc.unco, 0, sizeof hc.unco);
    hc.big_root = 0;
    hc.free_blocks = 0;
    hc.freed_since_cc = 0;
    hc.frees_since_cc = 0;

    char *b = hc.first;
    while (b < hc.top) {
        size_t size = hc_size_checked(b);
        if (!hc_free_or_quick(b)) {
            b += size;
            continue;
        }
        char *next = b + size;
        while (next != hc.top && hc_free_or_quick(next) && size + hc_size_checked(next) <= HC_MAX_BLOCK) {
            size += hc_size(next);
            next = b + size;
        }
        *hc_hdr(b) = (uint32_t)size | (*hc_hdr(b) & HC_PINUSE);
        if (hc_wild_absorb(b, size))
            break;
        hc_set_trailer(b, size);
        hc_clear_pinuse(next);
        hc_list_push(b, 1);
        b = next;
    }
}
