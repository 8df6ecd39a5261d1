/* hc_bigcache.c -- quick lists for big blocks (BIG_CACHE; beyond Hasan & Chang 2006).
 *
 * The paper gives quick lists (§3.10) to the small sizes only: a freed block of a quick-list
 * size keeps its inuse bit and goes to the head of a singly linked list of its exact size, and
 * the next request of that size takes it back with no search, no split and no merge.  A freed
 * big block (> 1 KiB) instead goes through the big list: with BIG_AO_FIT a merge with its free
 * neighbours and an insertion into the address-ordered tree, and the next request of its size a
 * first-fit walk down the tree, a removal and a carve -- about 390 instructions per malloc/free
 * pair of 6,000 bytes against mimalloc's 226 and tcmalloc's 87 (bench/pair_sizes.py).
 *
 * With BIG_CACHE = B > 0 bytes, a freed big block of up to B/2 bytes is kept the quick-list way
 * (inuse and quick bits set, never merged while kept), on a list of its exact size, as long as
 * the kept blocks total at most B bytes; a request of that exact block size takes the most
 * recent one back.  The lists are HC_BC_SLOTS slots indexed by the block size in granules
 * (mod HC_BC_SLOTS), each holding blocks of one size, and a slot keeps only the size last asked
 * for there: a request that finds no block of its size claims the slot for it (sending blocks of
 * another size that the slot held to the big list), and only frees of the claimed size are
 * kept.  A size freed but never asked for again is not kept (a program whose big sizes do not
 * repeat pays nothing in memory), nor one whose blocks a request of another size displaced.
 * Kept blocks are given back to the big list:
 *  - by a complete coalescing (§3.8), which merges them like the quick lists' blocks (their
 *    quick bit says they are free);
 *  - before the heap grows for want of a fit (hc_alloc_block), which then takes a fit among
 *    them if there is one: a kept block never makes the heap grow;
 *  - by every purge (the decay's, malloc_trim), so that their pages can be released.
 * The cost is memory: at most B bytes not merged with their neighbours while they are kept.  0: the paper's big list for every free (the default;
 * generic has 131104: blocks up to 64 KiB, docs/allocator-bench.md, "Big blocks kept for their
 * size").
 *
 * Per arena (struct hc_state), under its lock; single-threaded, malloc's and free's fast paths
 * (hc_api.c) use it with no lock, as the quick lists. */
#include "hc_block.h"

#if BIG_CACHE > 0
/* The largest block kept: half the bound (a whole number of granules), and what a 32-bit header
 * holds. */
#define HC_BC_MAX (((size_t)(BIG_CACHE) / 2 < HC_MAX_BLOCK ? (size_t)(BIG_CACHE) / 2 : (size_t)HC_MAX_BLOCK) \
                   / HC_GRANULE * HC_GRANULE)
/* The largest request whose block may be kept (its block is at most HC_BC_MAX). */
#define HC_BC_REQUEST (HC_BC_MAX > HC_HDR ? HC_BC_MAX - HC_HDR : 0)

static inline struct hc_bc_slot *hc_bc_slot_of(size_t size)
{
    return &hc.bc.slot[(size / HC_GRANULE) & (HC_BC_SLOTS - 1)];
}

/* Send slot s's blocks to the big list (its size stays, its list empties). */
static HC_NOINLINE void hc_bc_evict(struct hc_bc_slot *s)
{
    HC_ARENA_HERE;
    size_t size = s->size;
    while (s->head) {
        char *b = hc_at(s->head);
        s->head = *hc_link_next(b);
        *hc_hdr(b) &= ~HC_QUICK;
        hc.bc.bytes -= size;
        HC_FREE_BLOCKS(-1);
        hc_free_to_list(b, size);
    }
}

/* Keep freed block b of `size` bytes (> HC_MEDIUM_MAX, inuse bit set, accounted as freed) if its
 * slot is claimed for its size and the bound allows.  0: not kept; the caller lists it. */
static inline int hc_bc_push(char *b, size_t size)
{
    HC_ARENA_HERE;
    struct hc_bc_slot *s = hc_bc_slot_of(size);
    if (s->size != size || hc.bc.bytes + size > (size_t)(BIG_CACHE))
        return 0;
    *hc_hdr(b) |= HC_QUICK;
    *hc_link_next(b) = s->head;
    s->head = hc_off_of(b);
    hc.bc.bytes += size;
    HC_FREE_BLOCKS(1);
    return 1;
}

/* A request found no kept block in slot s for its block size: claim the slot for that size. */
static HC_NOINLINE void hc_bc_claim(struct hc_bc_slot *s, size_t size)
{
    if (s->head)
        hc_bc_evict(s);
    s->size = (uint32_t)size;
}

/* The most recently kept block of exactly `size` bytes (<= HC_BC_MAX), inuse bit set (not yet
 * accounted); NULL if none, the slot then claimed for the size. */
static inline char *hc_bc_pop(size_t size)
{
    HC_ARENA_HERE;
    struct hc_bc_slot *s = hc_bc_slot_of(size);
    if (hc_unlikely(s->size != size)) {
        hc_bc_claim(s, size);
        return NULL;
    }
    if (!s->head)
        return NULL;
    char *b = hc_at(s->head);
    /* a write after free lands on the kept block's header or link: checked before followed */
    if (hc_unlikely((*hc_hdr(b) & ~(HC_PINUSE | HC_COALESCED)) != (size | HC_INUSE | HC_QUICK) ||
                    !hc_off_ok(*hc_link_next(b))))
        hc_corrupt("corrupted heap: a kept big block's header or link overwritten (a write after free?)");
    s->head = *hc_link_next(b);
    *hc_hdr(b) &= ~HC_QUICK;
    hc.bc.bytes -= size;
    HC_FREE_BLOCKS(-1);
    HC_COUNT(big_cache_hits, 1);
    return b;
}

/* Every kept block to the big list (a purge: their pages may then be released). */
static void hc_bc_flush(void)
{
    HC_ARENA_HERE;
    for (unsigned i = 0; i < HC_BC_SLOTS && hc.bc.bytes; i++)
        if (hc.bc.slot[i].head)
            hc_bc_evict(&hc.bc.slot[i]);
}

/* A complete coalescing merged and listed every kept block (their quick bits): forget them. */
static void hc_bc_forget(void)
{
    HC_ARENA_HERE;
    memset(&hc.bc, 0, sizeof hc.bc);
}
#else
#define HC_BC_REQUEST ((size_t)0)
static inline HC_UNUSED char *hc_bc_pop(size_t size) { (void)size; return NULL; }
static inline void hc_bc_flush(void) {}
static inline void hc_bc_forget(void) {}
#endif
