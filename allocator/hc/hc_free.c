/* hc_free.c -- releasing blocks (Hasan & Chang 2006, §3.4, §3.10, §3.11). */
#include "hc_block.h"

#if COALESCE_IN_FREE
/* COALESCE_IN_FREE: when fewer than IN_FREE_BLOCKS blocks stay live and the heap is over
 * IN_FREE_HEAP bytes, coalesce the whole heap now (§3.11).  As in hc_complete_pays, each free
 * pays for at most HC_CC_VISITS block visits: with a large IN_FREE_BLOCKS the walk would
 * otherwise run on every free. */
static inline void hc_coalesce_in_free(void)
{
    if (hc.st.allocs_current < (uint64_t)(IN_FREE_BLOCKS) &&
        hc.st.heap_bytes > (uint64_t)(IN_FREE_HEAP) &&
        hc.frees_since_cc * HC_CC_VISITS >= (size_t)hc.st.allocs_current + hc.free_blocks) {
        HC_COUNT(coalesce_in_free, 1);
        hc_coalesce_complete();
    }
}
#endif

/* Since the last complete coalescing: bytes and blocks freed, which pay for the next one
 * (§3.8, §3.11, amortized).  Builds that never coalesce completely on their own skip it. */
static inline void hc_freed(size_t size)
{
#if HC_AMORTIZE
    hc.freed_since_cc += size;
    hc.frees_since_cc++;
#else
    (void)size;
#endif
#if COALESCE_IN_FREE
    hc_coalesce_in_free();
#endif
}

/* A quick-list size goes to the head of its quick list with its inuse bit left set: no
 * neighbour is touched, nothing is coalesced until a complete coalescing (§3.10). */
static inline void hc_free_quick(char *b, size_t size)
{
    hc_ql_push(b, (unsigned)(size / HC_GRANULE));
    hc_freed(size);
}

/* Free heap block b (checked by the caller to be in use and not on a quick list).
 *  1. A quick-list size: hc_free_quick.
 *  2. Any other block (hc_free_listed): inuse bit cleared, size copied to the trailer, the next
 *     block's prev-inuse bit cleared, then onto the head of its uncoalesced sub-list (§3.3,
 *     §3.4) (hc_free_to_list).
 *  3. BIG_AO_FIT: a big block is merged with its free neighbours at once (hc_big.c).
 *  4. BIG_CACHE: a big block is first offered to its kept list (hc_bigcache.c). */
static inline void hc_free_to_list(char *b, size_t size)
{
    /* its header overwritten (an underflow, or the block before overflowing): the trailer and
     * the next header written below would land anywhere */
    if (hc_unlikely(!hc_ends_ok(b, size)))
        hc_corrupt("free(): invalid size (the block's header overwritten: heap corrupted)");
    *hc_hdr(b) &= ~(HC_INUSE | HC_COALESCED);
    hc_set_trailer(b, size);
    hc_clear_pinuse(b + size);
#if BIG_AO_FIT
    if (size > HC_MEDIUM_MAX) {
        hc_merge_list(b);
        return;
    }
#endif
    hc_list_link(b, size, 0);
}

static inline void hc_free_listed(char *b, size_t size)
{
#if BIG_CACHE > 0
    if (size > HC_MEDIUM_MAX && hc_bc_push(b, size)) {
        hc_freed(size);
        return;
    }
#endif
    hc_free_to_list(b, size);
    hc_freed(size);
}

static void hc_free_block(char *b)
{
    HC_ARENA_HERE;
    size_t size = hc_size(b);
    if (size <= HC_QL_SIZE)
        hc_free_quick(b, size);
    else
        hc_free_listed(b, size);
}

/* Split the in-use block b down to `size` bytes, freeing the tail (realloc shrink, memalign).
 * The tail goes on its uncoalesced sub-list (its next neighbour may be free), or back into the
 * wilderness when it lies just below it; with BIG_AO_FIT a big tail is merged at once. */
static void hc_shrink_block(char *b, size_t size)
{
    HC_ARENA_HERE;
    size_t have = hc_size(b);
    if (have - size < 2 * HC_GRANULE)
        return;
    *hc_hdr(b) = (uint32_t)size | (*hc_hdr(b) & HC_FLAGS);
    char *r = b + size;
    size_t rest = have - size;
    *hc_hdr(r) = (uint32_t)rest | HC_PINUSE;
    hc.st.bytes_current -= rest;
    if (hc_wild_absorb(r, rest))
        return;
    hc_set_trailer(r, rest);
    hc_clear_pinuse(r + rest);
#if BIG_AO_FIT
    if (rest > HC_MEDIUM_MAX) { /* merged at once, as a freed big block (hc_big.c) */
        hc_merge_list(r);
        return;
    }
#endif
    hc_list_push(r, 0);
}
