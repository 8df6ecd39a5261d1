/* hc_alloc.c -- allocation's slow paths (Hasan & Chang 2006, §3.3-§3.10).  The fast path, a
 * quick-list hit, is inlined in malloc() (hc_api.c). */
#include "hc_block.h"

/* Hand out `size` bytes of the off-list free block b (§3.6 splitting, §3.10 preallocation).
 *  1. An exact fit or one a single granule larger is not split (§3.8): the whole block goes.
 *  2. Otherwise the front becomes the allocated block.  For a quick-list size the remainder is
 *     first cut into up to QL_PREALLOC more blocks of the same size, pushed on its quick list.
 *  3. What is left goes on the list of its own size, coalesced if b was (its neighbours are). */
static char *hc_carve(char *b, size_t size, int coalesced)
{
    HC_ARENA_HERE;
    size_t have = hc_size(b);
    size_t rest = have - size;
    uint32_t pinuse = *hc_hdr(b) & HC_PINUSE;
    if (rest < 2 * HC_GRANULE) {
        *hc_hdr(b) = (uint32_t)have | HC_INUSE | pinuse;
        hc_set_pinuse(b + have);
        return b;
    }
    HC_COUNT(splits, 1);
    *hc_hdr(b) = (uint32_t)size | HC_INUSE | pinuse;
    char *r = b + size;
#if QL_PREALLOC > 0
    if (size <= HC_QL_SIZE) {
        unsigned i = (unsigned)(size / HC_GRANULE);
        size_t k = rest / size;
        if (k > (size_t)QL_PREALLOC)
            k = (size_t)QL_PREALLOC;
        HC_COUNT(ql_refills, k > 0);
        HC_COUNT(ql_prealloc_blocks, k);
        for (size_t j = 0; j < k; j++, r += size) {
            *hc_hdr(r) = (uint32_t)size | HC_INUSE | HC_PINUSE;
            hc_ql_push(r, i);
        }
        rest -= k * size;
        if (!rest) {
            hc_set_pinuse(r);
            return b;
        }
    }
#endif
    *hc_hdr(r) = (uint32_t)rest | HC_PINUSE;
    hc_set_trailer(r, rest);
    hc_list_push(r, coalesced);
    return b;
}

/* The big list's block for a request of `size` bytes, taken off the list (NULL: none fits).
 * The paper's best fit (§3.3), or with BIG_AO_FIT the lowest-addressed block that fits
 * (hc_big.c).  *coalesced tells which sub-list it came from. */
static char *hc_big_take(size_t size, int *coalesced)
{
#if BIG_AO_FIT
    char *b = hc_big_first(size);
#else
    char *b = hc_big_best(size);
#endif
    if (b) {
        *coalesced = (*hc_hdr(b) & HC_COALESCED) != 0;
        hc_list_remove(b);
    }
    return b;
}

#if BIG_AO_FIT
/* BIG_AO_FIT: hand out the low `size` bytes of big block b, still in the tree, when what is left
 * is a big block too and no quick list is to be refilled: the remainder takes b's place in the
 * tree (hc_big_replace), which hc_carve would do as a removal and an insertion.  The same blocks,
 * sizes and flags as hc_big_take then hc_carve.  NULL: the caller takes those steps. */
static char *hc_big_split(char *b, size_t size)
{
    size_t have = hc_size(b);
    if (have - size <= HC_MEDIUM_MAX || (QL_PREALLOC > 0 && size <= HC_QL_SIZE))
        return NULL;
    size_t rest = have - size;
    uint32_t h = *hc_hdr(b);
    char *r = b + size;
    hc_big_replace(b, r);
    HC_COUNT(splits, 1);
    *hc_hdr(b) = (uint32_t)size | HC_INUSE | (h & HC_PINUSE);
    *hc_hdr(r) = (uint32_t)rest | HC_PINUSE | (h & HC_COALESCED);
    hc_set_trailer(r, rest);
    hc_t_fix_up(r);
    return b;
}
#endif

/* After a complete coalescing: the smallest free block of at least size bytes (§3.8). */
static char *hc_find_fit(size_t size, int *coalesced)
{
    HC_ARENA_HERE;
    int j = hc_bit_next(hc.map, hc_index(size));
    if (j >= 0 && (unsigned)j < HC_BIG)
        return hc_list_pop((unsigned)j, coalesced);
    return hc_big_take(size, coalesced);
}

/* Is a complete coalescing worth its walk over the whole heap (§3.8)?
 *  1. The paper's trigger: the footprint exceeds COALESCE_RATIO x the most bytes ever in use.
 *  2. Amortization (ours): the walk visits every block of the heap, so it waits until enough
 *     blocks were freed since the last one that each free pays for at most HC_CC_VISITS block
 *     visits, and until at least the request's bytes were freed.  A program sitting just above
 *     the ratio would otherwise walk its heap on every miss. */
static HC_UNUSED int hc_complete_pays(size_t size)
{
    size_t blocks = (size_t)hc.st.allocs_current + hc.free_blocks;
    return hc.freed_since_cc >= size && hc.frees_since_cc * HC_CC_VISITS >= blocks &&
           (double)hc.st.footprint > (double)(COALESCE_RATIO) * (double)hc.st.bytes_max;
}

/* Allocate a heap block of `size` bytes (a multiple of 16) when its quick list is empty.
 *  1. Small sizes: the next bigger quick list (§3.10).
 *  2. The exact list, then the next bigger one (§3.4, §3.6); big sizes best-fit (§3.3).
 *  3. SPLIT: the next non-empty list found through the bitmap (§3.5, §3.6).
 *  4. COALESCE: incremental coalescing until a large enough block emerges (§3.7).
 *  5. COALESCE_QL: complete coalescing when the footprint is over the ratio (§3.8).
 *  6. The wilderness, grown from the OS as needed (§3.9); with BIG_CACHE, its kept blocks go to
 *     the big list first, and a fit among them is taken instead.
 *  7. Out of heap: coalesce everything whatever the ratio, then fail (the caller may mmap). */
static HC_NOINLINE char *hc_alloc_block(size_t size)
{
    HC_ARENA_HERE;
    unsigned i = hc_index(size);
    int coalesced = 0;
    char *b;

    hc.last_clean = 0;
    if (hc_unlikely(!hc.ready) && !hc_heap_init())
        return NULL;
    if (hc.base == NULL)
        return NULL;
    hc_os_tick();

    if (size <= HC_QL_SIZE && i + 1 <= HC_QL_MAX && hc.ql[i + 1]) {
        HC_COUNT(ql_hits, 1);
        b = hc_ql_pop(i + 1);
        return b;
    }
    if (i < HC_BIG) {
        for (unsigned k = i; k <= i + 1 && k < HC_BIG; k++) {
            if ((b = hc_list_pop(k, &coalesced)) != NULL) {
                HC_COUNT(list_hits, 1);
                return hc_carve(b, size, coalesced);
            }
        }
    }
#if SPLIT
    /* A smaller size splits the next non-empty medium list, else a big block (§3.6). */
    int j;
    if (i + 2 <= HC_BIG && (j = hc_bit_next(hc.map, i + 2)) >= 0 && (unsigned)j < HC_BIG) {
        b = hc_list_pop((unsigned)j, &coalesced);
        return hc_carve(b, size, coalesced);
    }
#endif
#if BIG_AO_FIT
    if ((SPLIT || i + 1 >= HC_BIG) && (b = hc_big_first(size)) != NULL) {
        HC_COUNT(big_hits, 1);
        char *s = hc_big_split(b, size);
        if (s)
            return s;
        coalesced = (*hc_hdr(b) & HC_COALESCED) != 0;
        hc_list_remove(b);
        return hc_carve(b, size, coalesced);
    }
#else
    if ((SPLIT || i + 1 >= HC_BIG) && (b = hc_big_take(size, &coalesced)) != NULL) {
        HC_COUNT(big_hits, 1);
        return hc_carve(b, size, coalesced);
    }
#endif
#if COALESCE
    if ((b = hc_coalesce_incremental(size)) != NULL)
        return hc_carve(b, size, 1);
#endif
#if COALESCE_QL
    if (hc_complete_pays(size)) {
        HC_COUNT(coalesce_complete, 1);
        hc_coalesce_complete();
        if ((b = hc_find_fit(size, &coalesced)) != NULL)
            return hc_carve(b, size, coalesced);
    }
#endif
#if BIG_CACHE > 0
    /* BIG_CACHE: blocks kept for their sizes go to the big list before the heap grows for want
     * of a fit (hc_bigcache.c), so that they never cost the heap its growth. */
    if (hc.bc.bytes) {
        hc_bc_flush();
        if ((b = hc_find_fit(size, &coalesced)) != NULL)
            return hc_carve(b, size, coalesced);
    }
#endif
    if ((b = hc_wild_take(size)) != NULL)
        return b;
    if (hc_free_bytes() >= size) {
        hc_coalesce_complete();
        if ((b = hc_find_fit(size, &coalesced)) != NULL)
            return hc_carve(b, size, coalesced);
        return hc_wild_take(size);
    }
    return NULL;
}
