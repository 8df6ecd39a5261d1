/* hc_lists.c -- the free lists and the bitmap over them (Hasan & Chang 2006, §3.3-§3.5, §3.10).
 *
 * lists[i] (i = block size / 16, 1..64) hold the free blocks of one size, the medium sizes of
 * §3.4 and also small sizes that are not on a quick list (split remainders, coalesced blocks);
 * lists[HC_BIG..] are the big list for blocks over 1 KiB, searched best-fit (§3.3), in size
 * bins (see hc_internal.h).  Each list
 * is two LIFO sub-lists, coalesced and uncoalesced, so coalescing never revisits merged blocks.
 * ql[i] are the quick lists of the small sizes (<= QL_HIGH): singly linked, inuse bit kept set.
 */
#include "hc_block.h"

_Static_assert(HC_MAP_WORDS < 64, "one summary word per bitmap");

static inline void hc_bit_set(uint64_t *m, unsigned i)
{
    m[i >> 6] |= 1ull << (i & 63);
    m[HC_MAP_WORDS] |= 1ull << (i >> 6);
}

static inline void hc_bit_clear(uint64_t *m, unsigned i)
{
    if (!(m[i >> 6] &= ~(1ull << (i & 63))))
        m[HC_MAP_WORDS] &= ~(1ull << (i >> 6));
}

/* The first index >= i whose bit is set, or -1 (§3.5: a few instructions instead of a scan):
 * i's own word, else the first non-zero word after it, found through the summary word. */
static inline int hc_bit_next(const uint64_t *m, unsigned i)
{
    unsigned w = i >> 6;
    uint64_t bits = m[w] & (~0ull << (i & 63));
    if (!bits) {
        uint64_t words = m[HC_MAP_WORDS] & (~0ull << w << 1);
        if (!words)
            return -1;
        w = (unsigned)__builtin_ctzll(words);
        bits = m[w];
    }
    return (int)(w * 64 + (unsigned)__builtin_ctzll(bits));
}

/* Put free block b of `size` bytes (header and trailer already written) at the head of its
 * sub-list.  Inline where free() pushes a medium block (§3.4's hot path); hc_list_push below
 * serves the slow paths. */
static inline void hc_list_link(char *b, size_t size, int coalesced)
{
    unsigned i = hc_index(size);
#if BIG_AO_FIT
    if (i >= HC_BIG) { /* the big list is a tree in address order (hc_big.c) */
        *hc_hdr(b) = coalesced ? *hc_hdr(b) | HC_COALESCED : *hc_hdr(b) & ~HC_COALESCED;
        hc_big_insert(b);
        return;
    }
#endif
    hc_off *head = coalesced ? &hc.lists[i].coal : &hc.lists[i].unco;
    hc_off o = hc_off_of(b);
    if (coalesced)
        *hc_hdr(b) |= HC_COALESCED;
    else
        *hc_hdr(b) &= ~HC_COALESCED;
    *hc_link_next(b) = *head;
    *hc_link_prev(b) = 0;
    if (*head)
        *hc_link_prev(hc_at(*head)) = o;
    *head = o;
    hc_bit_set(hc.map, i);
    if (!coalesced)
        hc_bit_set(hc.unco, i);
    HC_FREE_BLOCKS(1);
}

static HC_NOINLINE void hc_list_push(char *b, int coalesced) { hc_list_link(b, hc_size(b), coalesced); }

/* Take free block b off whichever sub-list holds it. */
static void hc_list_remove(char *b)
{
    HC_ARENA_HERE;
    size_t size = hc_size(b);
#if BIG_AO_FIT
    if (size > HC_MEDIUM_MAX) {
        *hc_hdr(b) &= ~HC_COALESCED;
        hc_big_remove(b);
        return;
    }
#endif
    unsigned i = hc_index(size);
    int coalesced = (*hc_hdr(b) & HC_COALESCED) != 0;
    hc_off *head = coalesced ? &hc.lists[i].coal : &hc.lists[i].unco;
    hc_off next = *hc_link_next(b), prev = *hc_link_prev(b), o = hc_off_of(b);
    /* glibc's "corrupted double-linked list": the blocks on either side must point back at b */
    if (hc_unlikely(!hc_off_ok(next) || !hc_off_ok(prev) ||
                    (prev ? *hc_link_next(hc_at(prev)) : *head) != o ||
                    (next && *hc_link_prev(hc_at(next)) != o)))
        hc_corrupt("corrupted double-linked list (a free block's links overwritten)");
    if (prev)
        *hc_link_next(hc_at(prev)) = next;
    else
        *head = next;
    if (next)
        *hc_link_prev(hc_at(next)) = prev;
    *hc_hdr(b) &= ~HC_COALESCED;
    if (!*head) {
        if (!coalesced)
            hc_bit_clear(hc.unco, i);
        if (!hc.lists[i].coal && !hc.lists[i].unco)
            hc_bit_clear(hc.map, i);
    }
    HC_FREE_BLOCKS(-1);
}

/* LIFO (§3.4): the most recently freed block of list i, uncoalesced first; off its list.
 * *coalesced tells which sub-list it came from (a split remainder goes back to the same kind).
 * The head is unlinked directly: this is the medium sizes' hot path. */
#define HC_LINK_BAD "corrupted free list (a free block's link overwritten: a write after free?)"
/* strict (a constant): a link that leads out of the heap (a write after free lands on the
 * links first) aborts; else (malloc's fast path, which has no stack frame to make a call from)
 * the block stays listed and NULL sends the caller to its slow path, whose strict pop aborts. */
static inline __attribute__((always_inline)) char *hc_list_pop_link(unsigned i, int *coalesced, int strict)
{
    struct hc_list *l = &hc.lists[i];
    hc_off *head = l->unco ? &l->unco : &l->coal;
    if (!*head)
        return NULL;
    char *b = hc_at(*head);
    hc_off next = *hc_link_next(b);
    if (hc_unlikely(!hc_off_ok(next))) {
        if (strict)
            hc_corrupt(HC_LINK_BAD);
        return NULL;
    }
    *coalesced = head == &l->coal;
    *head = next;
    if (next) {
        *hc_link_prev(hc_at(next)) = 0;
    } else {
        if (!*coalesced)
            hc_bit_clear(hc.unco, i);
        if (!l->coal && !l->unco)
            hc_bit_clear(hc.map, i);
    }
    *hc_hdr(b) &= ~HC_COALESCED;
    HC_FREE_BLOCKS(-1);
    return b;
}

static inline char *hc_list_pop(unsigned i, int *coalesced) { return hc_list_pop_link(i, coalesced, 1); }

/* Best fit in the big list (§3.3): the smallest block of at least size bytes, still listed.
 *  1. Search the bin of `size` itself: it also holds blocks smaller than size.
 *  2. Failing that, every block of the next non-empty bin fits: take its smallest.
 * A block that no other can beat ends a search: an exact or one-granule-larger one (it will not
 * be split anyway, §3.8), or one of the smallest size the bin can hold. */
static HC_UNUSED char *hc_bin_best(unsigned bin, size_t size)
{
    HC_ARENA_HERE;
    char *best = NULL;
    size_t best_size = (size_t)-1;
    size_t good = hc_bin_low(bin) > size + HC_GRANULE ? hc_bin_low(bin) : size + HC_GRANULE;
    hc_off heads[2] = { hc.lists[bin].unco, hc.lists[bin].coal };
    for (int k = 0; k < 2; k++) {
        for (hc_off o = heads[k]; o; o = *hc_link_next(hc_at(o))) {
            char *b = hc_at(o);
            size_t s = hc_size(b);
            if (s >= size && s < best_size) {
                best = b;
                best_size = s;
                if (s <= good)
                    return best;
            }
        }
    }
    return best;
}

static HC_UNUSED char *hc_big_best(size_t size)
{
    HC_ARENA_HERE;
    unsigned bin = hc_index(size < HC_MEDIUM_MAX + HC_GRANULE ? HC_MEDIUM_MAX + HC_GRANULE : size);
    char *b = hc_bin_best(bin, size);
    if (b)
        return b;
    int j = hc_bit_next(hc.map, bin + 1);
    return j < 0 ? NULL : hc_bin_best((unsigned)j, size);
}

/* ---- quick lists (§3.10): a block keeps its inuse bit; the quick bit marks it as free ---- */
static inline void hc_ql_push(char *b, unsigned i)
{
    *hc_hdr(b) |= HC_QUICK;
    *hc_link_next(b) = hc.ql[i];
    hc.ql[i] = hc_off_of(b);
    HC_FREE_BLOCKS(1);
}

/* strict: as hc_list_pop_link's (a link out of the heap: abort, or NULL for the slow path). */
static inline __attribute__((always_inline)) char *hc_ql_pop_link(unsigned i, int strict)
{
    char *b = hc_at(hc.ql[i]);
    hc_off next = *hc_link_next(b);
    char *nb = hc_at(next);
    if (hc_unlikely(nb >= hc.top)) {
        if (strict)
            hc_corrupt(HC_LINK_BAD);
        return NULL;
    }
    hc.ql[i] = next;
    /* The next pop loads the new head's link, often from a cold line: start fetching it now
     * (a prefetch never faults; offset 0 is a harmless address in the heap). */
    __builtin_prefetch(nb + HC_HDR);
    *hc_hdr(b) &= ~HC_QUICK;
    HC_FREE_BLOCKS(-1);
    return b;
}

static inline char *hc_ql_pop(unsigned i) { return hc_ql_pop_link(i, 1); }
