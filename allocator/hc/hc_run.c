/* hc_run.c -- mid-size blocks as runs of granules on pages shared by every size, beyond Hasan &
 * Chang 2006 (MID_RUNS; docs/allocator.md, "Mid sizes in runs of granules").
 *
 * The small pages (hc_page.c) give each size class its own pages, so a program that keeps
 * thousands of blocks of many mid sizes (256 B - 4 KiB) alive and replaces them at random holds
 * one set of pages per class, each at that class's own high-water mark: no page ever empties and
 * no pool policy returns the space.  The paper's heap shares space between sizes by coalescing
 * (§3.7), at the cost of a header per block and a slower path.  With MID_RUNS > 0 (and below
 * SMALL_MAX), requests of more than MID_RUNS bytes up to SMALL_MAX are served here instead:
 *
 *  - A run page is a small page (hc_page.c: 64 KiB, owned by a thread, found from a pointer by
 *    masking, on the same region, pools, orphan and fork paths) of class HC_RUN_PCLS and kind
 *    HC_PK_RUNS, whose blocks are runs of HC_RUN_GRAN (32-byte) granules, any length from 1 to
 *    128 granules, anywhere in the page.  The page machinery reaches this file only through
 *    the kind's operations (hc_page.h's hc_pk_*: format, adopt, leave, disown, is_empty, the
 *    owner's free, free_check, flush, usable, totals, fork_child, check), which are the
 *    functions of the section "the run pages' kind" and the free, statistics and fork ones
 *    below.  After the page's 256-byte header come two bitmaps of one bit a granule: `inuse`
 *    (the granule belongs to a live block, or to the header) and `end` (the last granule of a
 *    live block).  A block's length is the distance to the next end bit: no per-block header.
 *    The page's first HC_RUN_FIRST granules (header and bitmaps) are a permanent block, so
 *    every backward search stops there.  Blocks are 32-byte aligned.  (64-byte granules halve
 *    the bitmaps but round sqlite3's 1,032-byte rows up to 1,088 bytes, 59 a page; 32-byte
 *    ones take 1,056, 61 a page.)
 *  - Holes (maximal runs of free granules) of all of a thread's run pages sit in HC_RUN_BINS
 *    (128) lists by length (1 .. 127 granules, and one list for 128 or more), a doubly linked
 *    node in the hole's first 24 bytes (with its length), with two words of bits saying which lists are non-empty.  malloc of k
 *    granules takes the first hole of the smallest non-empty list of at least k (best fit by
 *    length, as Johnstone & Wilson found fragments least), from its low end; the rest of the hole
 *    goes back to its list.  free clears the block's bits and merges it at once with the holes on
 *    either side (two bit scans), so the holes are always maximal and a page whose blocks all
 *    came back is one hole.
 *  - Kept whole: the owner's free of a run keeps up to HC_RUN_KEEP runs of each length (32 KiB
 *    in all a thread) unmerged, still counted on their page, for the next malloc of that length:
 *    a program freeing and allocating one size (a pair of calls) skips both bitmap updates and
 *    the four list operations (a 1,000-byte malloc/free pair: 310 instructions without, 163
 *    with, bench/pair_sizes.py).  They are merged at the thread's exit and by malloc_trim, and
 *    when realloc grows a block into one.  The paper's quick lists in small (§3.10).
 *  - The owner's free goes through hc_page.c's one free path: a run page keeps HC_SP_FULLBIT in
 *    its count, so the page free's signed test sends every free of a run block to the owner's
 *    slow path (hc_sp_free_owner_slow), which hands it here; small pages' frees pay nothing.
 *    Other threads' frees go onto the page's atomic list as for any small page; the owner takes
 *    them (hc_sp_collect) onto the page's local list and merges them here ("pending" blocks) when
 *    no hole fits a request, scanning its run pages only after it took 1/8 as many new pages as it
 *    has (so the scans cost O(1) a page).  A page of class HC_RUN_RCLS never exists: the requests'
 *    class, whose current page is always hc_sp_none, so malloc's page pop misses and goes to the
 *    slow path, which calls hc_run_malloc.
 *  - A run page whose blocks all came back goes to the empty pool unless it is the thread's most
 *    recently taken run page (hc_sp_retire), reused by any class.  A thread's exit orphans or
 *    retires its run pages like the others; a thread adopting an orphan merges its pending blocks
 *    and lists its holes.  fork's child never reuses a run page of a thread that did not
 *    survive the fork (its bitmaps may have been copied mid-update); its blocks can be freed.
 *  - calloc: a block at or above the page's zero_from (never handed out) is zero but for the hole
 *    node, cleared here.  realloc grows a block in place into the hole after it and shrinks it in
 *    place, the owner only.  The memalign family up to 32-byte alignment is served here.
 *  - Misuse: the owner's free of a granule that is not in use aborts (double free), of one that
 *    does not start a block aborts (invalid pointer); other threads' double frees are caught when
 *    the owner merges them.  The debug build checks a page's bitmaps and counts.
 */
#include "hc_page.h"

#if HC_SP_ON
#if HC_RUN_ON

#define HC_RUN_NG ((unsigned)(HC_SP_PAGE >> HC_RUN_SHIFT)) /* 2,048 granules a page */
#define HC_RUN_WORDS (HC_RUN_NG / 64u)                    /* 32 words a bitmap */
/* 24 granules: the header (16 with SMALL_HEADERS_APART, where it is in the directory) and the bitmaps */
#define HC_RUN_FIRST ((HC_SP_HEAD + 2u * HC_RUN_NG / 8u) >> HC_RUN_SHIFT)
#define HC_RUN_KEEP 4u                 /* freed runs kept whole per length ... */
#define HC_RUN_KEEP_BYTES (32u << 10)  /* ... and in all, per thread */

struct hc_run_maps {
    uint64_t inuse[HC_RUN_WORDS];
    uint64_t end[HC_RUN_WORDS];
};

/* A hole's first 24 bytes: its list links and its length in granules. */
struct hc_run_node { struct hc_run_node *next, *prev; uint64_t len; };

static inline struct hc_run_maps *hc_run_maps(struct hc_sp_page *pg)
{
    return (struct hc_run_maps *)(void *)(hc_sp_mem(pg) + HC_SP_HEAD);
}

/* A pointer's granule in its page (pages are aligned to their size), and a granule's address. */
static inline unsigned hc_run_g(void *p)
{
    return (unsigned)(((uintptr_t)p & (HC_SP_PAGE - 1)) >> HC_RUN_SHIFT);
}
static inline char *hc_run_at(struct hc_sp_page *pg, unsigned g) { return hc_sp_mem(pg) + ((size_t)g << HC_RUN_SHIFT); }
static inline int hc_run_bit(const uint64_t *m, unsigned g) { return (int)(m[g >> 6] >> (g & 63) & 1); }
static inline unsigned hc_run_bin(unsigned len) { return len >= HC_RUN_BINS ? HC_RUN_BINS - 1 : len - 1; }

/* The first set bit at or after g (HC_RUN_NG when none). */
static inline unsigned hc_run_next_set(const uint64_t *m, unsigned g)
{
    if (g >= HC_RUN_NG)
        return HC_RUN_NG;
    unsigned w = g >> 6;
    uint64_t x = m[w] & (~(uint64_t)0 << (g & 63));
    while (!x) {
        if (++w == HC_RUN_WORDS)
            return HC_RUN_NG;
        x = m[w];
    }
    return w * 64 + (unsigned)__builtin_ctzll(x);
}

/* The last set bit below g (g > HC_RUN_FIRST - 1: the header's granules are set, so one exists). */
static inline unsigned hc_run_prev_set(const uint64_t *m, unsigned g)
{
    unsigned h = g - 1, w = h >> 6;
    uint64_t x = m[w] & (~(uint64_t)0 >> (63 - (h & 63)));
    while (!x)
        x = m[--w];
    return w * 64 + 63 - (unsigned)__builtin_clzll(x);
}

/* Set or clear the bits [a, b) of m. */
static void hc_run_bits(uint64_t *m, unsigned a, unsigned b, int set)
{
    while (a < b) {
        unsigned w = a >> 6, lo = a & 63, hi = (b - w * 64) < 64 ? b - w * 64 : 64;
        uint64_t mask = (hi == 64 ? ~(uint64_t)0 : (((uint64_t)1 << hi) - 1)) & (~(uint64_t)0 << lo);
        if (set)
            m[w] |= mask;
        else
            m[w] &= ~mask;
        a = w * 64 + hi;
    }
}

/* The masks of k bits from a (1 <= k <= 128) in the three words from a's: no loop. */
#define HC_RUN_MASKS(a, k)                                                                       \
    unsigned w_ = (a) >> 6, lo_ = (a) & 63, e_ = lo_ + (k); /* e_ <= 191 */                    \
    uint64_t m0_ = (~(uint64_t)0 << lo_) & (e_ < 64 ? ((uint64_t)1 << e_) - 1 : ~(uint64_t)0);   \
    uint64_t m1_ = e_ <= 64 ? 0 : e_ < 128 ? ((uint64_t)1 << (e_ - 64)) - 1 : ~(uint64_t)0;        \
    uint64_t m2_ = e_ <= 128 ? 0 : ((uint64_t)1 << (e_ - 128)) - 1

static inline void hc_run_set(uint64_t *m, unsigned a, unsigned k)
{
    HC_RUN_MASKS(a, k);
    m[w_] |= m0_;
    if (m1_) {
        m[w_ + 1] |= m1_;
        if (m2_)
            m[w_ + 2] |= m2_;
    }
}

static inline void hc_run_clear(uint64_t *m, unsigned a, unsigned k)
{
    HC_RUN_MASKS(a, k);
    m[w_] &= ~m0_;
    if (m1_) {
        m[w_ + 1] &= ~m1_;
        if (m2_)
            m[w_ + 2] &= ~m2_;
    }
}

/* ---- the holes' lists (the owner's) ---- */

static inline void hc_run_hole_add(struct hc_sp_thread *t, struct hc_sp_page *pg, unsigned g, unsigned len)
{
    unsigned b = hc_run_bin(len);
    struct hc_run_node *h = (struct hc_run_node *)(void *)hc_run_at(pg, g), *n = t->rbin[b];
    h->next = n;
    h->prev = NULL;
    h->len = len;
    if (n)
        n->prev = h;
    t->rbin[b] = h;
    t->rmask[b >> 6] |= (uint64_t)1 << (b & 63);
}

static inline void hc_run_hole_remove(struct hc_sp_thread *t, struct hc_run_node *h)
{
    unsigned b = hc_run_bin((unsigned)h->len);
    if (h->prev)
        h->prev->next = h->next;
    else if ((t->rbin[b] = h->next) == NULL)
        t->rmask[b >> 6] &= ~((uint64_t)1 << (b & 63));
    if (h->next)
        h->next->prev = h->prev;
}

/* The first non-empty list from b up (HC_RUN_BINS: none). */
static inline unsigned hc_run_fit(const struct hc_sp_thread *t, unsigned b)
{
    unsigned w = b >> 6;
    uint64_t x = t->rmask[w] & (~(uint64_t)0 << (b & 63));
    while (!x) {
        if (++w == HC_RUN_BINS / 64)
            return HC_RUN_BINS;
        x = t->rmask[w];
    }
    return w * 64 + (unsigned)__builtin_ctzll(x);
}

/* Each hole of pg onto (add) or off (!add) t's lists. */
static void hc_run_holes(struct hc_sp_thread *t, struct hc_sp_page *pg, int add)
{
    struct hc_run_maps *m = hc_run_maps(pg);
    for (unsigned g = HC_RUN_FIRST; g < HC_RUN_NG;) {
        if (hc_run_bit(m->inuse, g)) {
            g = hc_run_next_set(m->end, g) + 1;
            continue;
        }
        unsigned e = hc_run_next_set(m->inuse, g);
        if (add)
            hc_run_hole_add(t, pg, g, e - g);
        else
            hc_run_hole_remove(t, (struct hc_run_node *)(void *)hc_run_at(pg, g));
        g = e;
    }
}

/* ---- the run pages' kind (HC_PK_RUNS, hc_page.h) ---- */

/* hc_sp_classes' part: requests above MID_RUNS take the run requests' class (no size:
 * memalign's class test fails), whose pages never exist; the run pages' class has the
 * granule's size. */
static void hc_run_classes(void)
{
    for (size_t i = (size_t)(MID_RUNS) / HC_SP_Q + 1; i < HC_SP_IDX; i++)
        hc_sp_cls[i] = (uint8_t)HC_RUN_RCLS;
    hc_sp_size[HC_RUN_RCLS] = 0;
    hc_sp_size[HC_RUN_PCLS] = HC_RUN_GRAN;
}

/* hc_sp_format's part (hc_pk_format): one permanent block over the header and the bitmaps, the
 * rest one hole on t's lists.  Every free goes to the owner's slow path: HC_SP_FULLBIT stays in
 * the count, and the header block counts as one while the page is owned, so that even a double
 * free on an empty page leaves the count negative (hc_run_disown takes the header's one off an
 * orphan). */
static void hc_run_format(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    struct hc_run_maps *m = hc_run_maps(pg);
    memset(m, 0, sizeof *m);
    hc_run_bits(m->inuse, 0, HC_RUN_FIRST, 1);
    hc_run_bits(m->end, HC_RUN_FIRST - 1, HC_RUN_FIRST, 1);
    pg->end = pg->bump = hc_sp_mem(pg) + HC_SP_PAGE;
    pg->used = HC_SP_FULLBIT | 1u;
    hc_run_hole_add(t, pg, HC_RUN_FIRST, HC_RUN_NG - HC_RUN_FIRST);
}

/* The owner's count while it owns pg: its live blocks, runs kept whole, and the header. */
static inline int hc_run_is_empty(struct hc_sp_page *pg) { return (pg->used & ~HC_SP_FULLBIT) == 1; }

/* pg's owner is exiting (hc_pk_disown): the header stops counting. */
static void hc_run_disown(struct hc_sp_page *pg) { pg->used--; }

/* The block at p of pg: its first and last granule, checked (the owner, or a thread holding the
 * page by the pools' lock). */
static inline __attribute__((always_inline)) void hc_run_block(struct hc_sp_page *pg, void *p,
                                                               unsigned *first, unsigned *last)
{
    struct hc_run_maps *m = hc_run_maps(pg);
    unsigned g = hc_run_g(p);
    if (hc_unlikely(((uintptr_t)p & (HC_RUN_GRAN - 1)) || g < HC_RUN_FIRST))
        hc_fail("free(): invalid pointer (not a block of a run page)");
    if (hc_unlikely(!hc_run_bit(m->inuse, g)))
        hc_fail("free(): double free (granules already free on their run page)");
    if (hc_unlikely(!hc_run_bit(m->end, g - 1) && hc_run_bit(m->inuse, g - 1)))
        hc_fail("free(): invalid pointer (inside a block of a run page)");
    *first = g;
    *last = hc_run_next_set(m->end, g);
}

/* Give back the granules [a, e] of pg's block and merge them with the holes on either side. */
static inline __attribute__((always_inline)) void hc_run_release(struct hc_sp_thread *t,
                                                                 struct hc_sp_page *pg, unsigned a,
                                                                 unsigned e)
{
    struct hc_run_maps *m = hc_run_maps(pg);
    unsigned s = a, f = e + 1, len = f - a;
    hc_run_clear(m->inuse, a, len);
    m->end[e >> 6] &= ~((uint64_t)1 << (e & 63));
    if (!hc_run_bit(m->inuse, a - 1)) { /* the hole before: its start from the bitmap */
        s = hc_run_prev_set(m->inuse, a) + 1;
        hc_run_hole_remove(t, (struct hc_run_node *)(void *)hc_run_at(pg, s));
        len += a - s;
    }
    if (f < HC_RUN_NG && !hc_run_bit(m->inuse, f)) { /* the hole after: its length in its node */
        struct hc_run_node *h = (struct hc_run_node *)(void *)hc_run_at(pg, f);
        len += (unsigned)h->len;
        hc_run_hole_remove(t, h);
    }
    hc_run_hole_add(t, pg, s, len);
}

/* The blocks on pg's local list (other threads' frees, collected) back into its bitmaps; with
 * lists, merged into t's holes, else (an adopted page, whose holes are listed afterwards) only
 * their bits cleared. */
static void hc_run_drain(struct hc_sp_thread *t, struct hc_sp_page *pg, int lists)
{
    for (void *p = pg->free, *next; p; p = next) {
        next = *(void **)p;
        unsigned a, e;
        hc_run_block(pg, p, &a, &e);
        if (lists) {
            hc_run_release(t, pg, a, e);
        } else {
            struct hc_run_maps *m = hc_run_maps(pg);
            hc_run_bits(m->inuse, a, e + 1, 0);
            m->end[e >> 6] &= ~((uint64_t)1 << (e & 63));
        }
    }
    pg->free = NULL;
}

/* pg is empty (no live block): retired unless it is the thread's newest run page. */
static void hc_run_maybe_retire(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    if (hc_run_is_empty(pg) && pg != t->cur[HC_RUN_PCLS]) {
        hc_sp_unlink(t, pg); /* its one hole off the lists (hc_run_leave) */
        hc_sp_retire(pg);
    }
}

/* hc_sp_unlink's part (hc_pk_leave): pg leaves t (retired), its holes leave t's lists. */
static void hc_run_leave(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    hc_run_holes(t, pg, 0);
    t->rpages--;
}

/* Other threads' frees into t's run pages, merged; empty pages retired.  1 when any came back. */
static int hc_run_scan(struct hc_sp_thread *t)
{
    int found = 0;
    t->rfresh = 0;
    for (struct hc_sp_page *pg = hc_sp_avail(t, HC_RUN_PCLS), *next; pg; pg = next) {
        next = pg->next;
        if (!__atomic_load_n(&pg->xfree, __ATOMIC_RELAXED) && !pg->free)
            continue;
        hc_sp_collect(pg);
        hc_run_drain(t, pg, 1);
        found = 1;
        hc_run_maybe_retire(t, pg);
    }
    return found;
}

/* hc_sp_take's part for an orphan t adopts (hc_pk_adopt): its pending blocks merged, the
 * header counted again, its holes listed. */
static void hc_run_adopt(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    hc_run_drain(t, pg, 0);
    pg->used = (pg->used + 1) | HC_SP_FULLBIT;
    hc_run_holes(t, pg, 1);
}

/* A page for t's runs: an orphan adopted, else an empty or new page formatted (hc_sp_take).  0
 * when the region is used up. */
static int hc_run_new_page(struct hc_sp_thread *t)
{
    struct hc_sp_page *pg = hc_sp_take(t, HC_RUN_PCLS);
    if (!pg)
        return 0;
    t->rpages++;
    t->rfresh++;
    hc_sp_push_avail(t, pg, 1);
    return 1;
}

/* ---- malloc, free, realloc ---- */

/* A block of n bytes (MID_RUNS < n <= SMALL_MAX) for t, or NULL (the paper's heap then). *clean:
 * the block was never written. */
static HC_NOINLINE int hc_run_refill(struct hc_sp_thread *t)
{
    return (t->rpages && t->rfresh * 8 >= t->rpages && hc_run_scan(t)) || hc_run_new_page(t);
}

static void *hc_run_malloc(struct hc_sp_thread *t, size_t n, int *clean)
{
    unsigned k = (unsigned)((n + HC_RUN_GRAN - 1) >> HC_RUN_SHIFT), b;
    void **kept = t->rkeep[k];
    if (kept) { /* a run of this length freed lately, kept whole */
        t->rkeep[k] = kept[0];
        t->rkeep_n[k]--;
        t->rkeep_bytes -= k << HC_RUN_SHIFT;
        kept[1] = NULL; /* the freed-block key */
        *clean = 0;
        hc_sp_count_alloc(t, (size_t)k << HC_RUN_SHIFT, 1);
        return kept;
    }
    while (hc_unlikely((b = hc_run_fit(t, k - 1)) == HC_RUN_BINS))
        if (!hc_run_refill(t))
            return NULL;
    struct hc_run_node *h = t->rbin[b];
    struct hc_sp_page *pg = hc_sp_page_of(h);
    struct hc_run_maps *m = hc_run_maps(pg);
    unsigned g = hc_run_g(h), len = (unsigned)h->len;
    if ((t->rbin[b] = h->next) != NULL)
        h->next->prev = NULL;
    else
        t->rmask[b >> 6] &= ~((uint64_t)1 << (b & 63));
    hc_run_set(m->inuse, g, k);
    m->end[(g + k - 1) >> 6] |= (uint64_t)1 << ((g + k - 1) & 63);
    if (len > k)
        hc_run_hole_add(t, pg, g + k, len - k);
    pg->used++;
    char *p = (char *)h, *pe = p + ((size_t)k << HC_RUN_SHIFT);
    *clean = p >= pg->zero_from;
    if (pe > pg->zero_from)
        pg->zero_from = pe;
    h->next = h->prev = NULL; /* the hole's node (and the freed-block key: the second word) */
    h->len = 0;
#if HC_DEBUG
    hc_run_check(pg, 0);
#endif
    hc_sp_count_alloc(t, (size_t)k << HC_RUN_SHIFT, 1);
    return p;
}

/* The owner's free past what it keeps whole: merged, and the page retired if now empty. */
static HC_NOINLINE void hc_run_free_merge(struct hc_sp_thread *t, struct hc_sp_page *pg, unsigned a,
                                          unsigned e)
{
    hc_run_release(t, pg, a, e);
#if HC_DEBUG
    hc_run_check(pg, 0); /* now: once retired, pg may be another thread's at once */
#endif
    if (hc_unlikely(hc_run_is_empty(pg)))
        hc_run_maybe_retire(t, pg);
}

/* The owner freed p into its run page (hc_page.c's free pushed it onto the page's local list and
 * counted it: it is taken off again and merged). */
static inline __attribute__((always_inline)) void hc_run_free_owner(struct hc_sp_thread *t,
                                                                    struct hc_sp_page *pg)
{
    void *p = pg->free;
    pg->free = *(void **)p;
    unsigned a, e;
    hc_run_block(pg, p, &a, &e);
    unsigned k = e - a + 1;
    if (t->rkeep_n[k] < HC_RUN_KEEP && t->rkeep_bytes + (k << HC_RUN_SHIFT) <= HC_RUN_KEEP_BYTES) {
        *(void **)p = t->rkeep[k]; /* kept whole, still counted on its page (its key is set) */
        t->rkeep[k] = p;
        t->rkeep_n[k]++;
        t->rkeep_bytes += k << HC_RUN_SHIFT;
        pg->used++;
        return;
    }
    hc_run_free_merge(t, pg, a, e);
}

/* Every run kept whole merged into its page (hc_pk_flush: thread exit, malloc_trim). */
static void hc_run_flush(struct hc_sp_thread *t)
{
    if (!t->rkeep_bytes)
        return;
    for (unsigned k = 1; k <= HC_RUN_BINS; k++) {
        for (void *p = t->rkeep[k], *next; p; p = next) {
            next = *(void **)p;
            struct hc_sp_page *pg = hc_sp_page_of(p);
            unsigned a = hc_run_g(p);
            hc_run_release(t, pg, a, a + k - 1);
            pg->used--;
            hc_run_maybe_retire(t, pg);
        }
        t->rkeep[k] = NULL;
        t->rkeep_n[k] = 0;
    }
    t->rkeep_bytes = 0;
}

/* The run at granule g of pg, if this thread keeps it whole: merged now (realloc grows into it).
 * 1 when it was. */
static int hc_run_unkeep(struct hc_sp_thread *t, struct hc_sp_page *pg, unsigned g)
{
    unsigned k = hc_run_next_set(hc_run_maps(pg)->end, g) - g + 1;
    if (k > HC_RUN_BINS)
        return 0;
    void *p = hc_run_at(pg, g);
    for (void **at = &t->rkeep[k]; *at; at = (void **)*at)
        if (*at == p) {
            *at = *(void **)p;
            t->rkeep_n[k]--;
            t->rkeep_bytes -= k << HC_RUN_SHIFT;
            hc_run_release(t, pg, g, g + k - 1);
            pg->used--;
            return 1;
        }
    return 0;
}

/* A second free of p while this thread keeps it whole (hc_pk_free_check). */
static void hc_run_free_check(struct hc_sp_thread *t, struct hc_sp_page *pg, void *p)
{
    if ((uintptr_t)p & (HC_RUN_GRAN - 1) || hc_run_g(p) < HC_RUN_FIRST)
        return;
    unsigned g = hc_run_g(p), k = hc_run_next_set(hc_run_maps(pg)->end, g) - g + 1;
    for (void *q = k <= HC_RUN_BINS ? t->rkeep[k] : NULL; q; q = *(void **)q)
        if (q == p)
            hc_fail("free(): double free (run kept by its thread)");
}

/* The usable bytes of the run block at p (its owner, or the thread holding it: its end bit does
 * not move while it lives). */
static inline size_t hc_run_usable(struct hc_sp_page *pg, void *p)
{
    unsigned g = hc_run_g(p);
    return (size_t)(hc_run_next_set(hc_run_maps(pg)->end, g) - g + 1) << HC_RUN_SHIFT;
}

/* realloc of p, if it is a run block, to n bytes in place, by its owner: grown into the hole
 * after it, or shrunk (the tail merged with the hole after it).  p, or NULL (the caller moves
 * it, or p is not a run block). */
static void *hc_run_realloc(void *p, size_t n)
{
    struct hc_sp_page *pg = hc_sp_page_of(p);
    struct hc_sp_thread *t = &hc_sp_me;
    if (!hc_pk_runs(pg) || __atomic_load_n(&pg->owner, __ATOMIC_RELAXED) != t || n <= (size_t)(MID_RUNS) || n > HC_SP_LIMIT)
        return NULL;
    struct hc_run_maps *m = hc_run_maps(pg);
    unsigned a, e;
    hc_run_block(pg, p, &a, &e);
    unsigned k = (unsigned)((n + HC_RUN_GRAN - 1) >> HC_RUN_SHIFT), have = e - a + 1;
    if (k == have)
        return p;
    if (k < have) { /* the tail [a + k, e] becomes free */
        m->end[(a + k - 1) >> 6] |= (uint64_t)1 << ((a + k - 1) & 63);
        hc_run_release(t, pg, a + k, e);
        hc_sp_count_free(0, (uint64_t)(have - k) << HC_RUN_SHIFT); /* (hc_page.c, "counts") */
        return p;
    }
    unsigned f = e + 1;
    if (f >= HC_RUN_NG || (hc_run_bit(m->inuse, f) && !hc_run_unkeep(t, pg, f)))
        return NULL;
    struct hc_run_node *h = (struct hc_run_node *)(void *)hc_run_at(pg, f);
    unsigned fe = f + (unsigned)h->len;
    if (a + k > fe)
        return NULL;
    hc_run_hole_remove(t, h);
    hc_run_set(m->inuse, f, a + k - f);
    m->end[e >> 6] &= ~((uint64_t)1 << (e & 63));
    m->end[(a + k - 1) >> 6] |= (uint64_t)1 << ((a + k - 1) & 63);
    if (fe > a + k)
        hc_run_hole_add(t, pg, a + k, fe - (a + k));
    char *pe = hc_run_at(pg, a + k);
    if (pe > pg->zero_from)
        pg->zero_from = pe;
#if HC_DEBUG
    hc_run_check(pg, 0);
#endif
    hc_sp_count_alloc(t, (size_t)(a + k - 1 - e) << HC_RUN_SHIFT, 0); /* grown ("counts") */
    return p;
}

/* ---- statistics, fork, checks ---- */

/* Bytes in live blocks of pg (its own granules, blocks other threads freed and the owner has not
 * merged yet included). */
static uint64_t hc_run_bytes(struct hc_sp_page *pg)
{
    struct hc_run_maps *m = hc_run_maps(pg);
    unsigned n = 0;
    for (unsigned w = 0; w < HC_RUN_WORDS; w++)
        n += (unsigned)__builtin_popcountll(__atomic_load_n(&m->inuse[w], __ATOMIC_RELAXED));
    return n > HC_RUN_FIRST ? (uint64_t)(n - HC_RUN_FIRST) << HC_RUN_SHIFT : 0;
}

/* pg's blocks and bytes in the statistics' totals (hc_pk_totals; used read once by the walk):
 * the owner's count less the header, which counts while the page is owned. */
static void hc_run_totals(struct hc_sp_page *pg, uint32_t used, struct hc_sp_totals *to)
{
    to->blocks += used - (used && __atomic_load_n(&pg->owner, __ATOMIC_RELAXED) ? 1 : 0);
    to->bytes += hc_run_bytes(pg);
    to->runs++;
}

/* fork's child (hc_pk_fork_child), pg a dead owner's run page: its bitmaps and hole links were
 * its owner's alone, and fork may have copied them mid-update, so the child never reuses the
 * page (0: it goes on no list, and no thread adopts it).  Its blocks, counted from its end bits,
 * may still be freed, onto its atomic list. */
static int hc_run_fork_child(struct hc_sp_page *pg)
{
    struct hc_run_maps *m = hc_run_maps(pg);
    unsigned n = 0;
    for (unsigned w = 0; w < HC_RUN_WORDS; w++)
        n += (unsigned)__builtin_popcountll(m->end[w]);
    pg->used = n > 1 ? n - 1 : 0;
    return 0;
}

#if HC_DEBUG
/* Every end bit ends a run of in-use granules, the header block is whole, and the owner's count
 * plus the pending blocks is the number of blocks (hc_pk_check; runs have no red zones, so
 * every changes nothing). */
static void hc_run_check(struct hc_sp_page *pg, int every)
{
    (void)every;
    struct hc_run_maps *m = hc_run_maps(pg);
    unsigned blocks = 0;
    for (unsigned g = 0; g < HC_RUN_FIRST; g++)
        if (!hc_run_bit(m->inuse, g) || hc_run_bit(m->end, g) != (g == HC_RUN_FIRST - 1))
            hc_sp_fail("run page header overwritten", pg);
    for (unsigned w = 0; w < HC_RUN_WORDS; w++) {
        if (m->end[w] & ~m->inuse[w])
            hc_sp_fail("run page: an end bit on a free granule", pg);
        blocks += (unsigned)__builtin_popcountll(m->end[w]);
    }
    if (hc_run_bit(m->inuse, HC_RUN_NG - 1) && !hc_run_bit(m->end, HC_RUN_NG - 1))
        hc_sp_fail("run page: the last block has no end", pg);
    unsigned pending = 0;
    for (char *b = pg->free; b; b = *(char **)b)
        if (++pending > HC_RUN_NG)
            hc_sp_fail("run page: local list longer than the page (a cycle: double free?)", b);
    if (blocks != (pg->used & ~HC_SP_FULLBIT) + pending)
        hc_sp_fail("run page: blocks and count do not add up", pg);
}
#endif

#else /* MID_RUNS off: a run page never exists (hc_pk_runs is 0) */

static inline HC_UNUSED void hc_run_classes(void) {}
static inline HC_UNUSED void *hc_run_malloc(struct hc_sp_thread *t, size_t n, int *clean) { (void)t; (void)n; (void)clean; return NULL; }
static inline HC_UNUSED void *hc_run_realloc(void *p, size_t n) { (void)p; (void)n; return NULL; }
static inline HC_UNUSED void hc_run_format(struct hc_sp_thread *t, struct hc_sp_page *pg) { (void)t; (void)pg; }
static inline HC_UNUSED void hc_run_adopt(struct hc_sp_thread *t, struct hc_sp_page *pg) { (void)t; (void)pg; }
static inline HC_UNUSED void hc_run_leave(struct hc_sp_thread *t, struct hc_sp_page *pg) { (void)t; (void)pg; }
static inline HC_UNUSED void hc_run_disown(struct hc_sp_page *pg) { (void)pg; }
static inline HC_UNUSED int hc_run_is_empty(struct hc_sp_page *pg) { (void)pg; return 0; }
static inline HC_UNUSED void hc_run_free_owner(struct hc_sp_thread *t, struct hc_sp_page *pg) { (void)t; (void)pg; }
static inline HC_UNUSED void hc_run_free_check(struct hc_sp_thread *t, struct hc_sp_page *pg, void *p) { (void)t; (void)pg; (void)p; }
static inline HC_UNUSED void hc_run_flush(struct hc_sp_thread *t) { (void)t; }
static inline HC_UNUSED size_t hc_run_usable(struct hc_sp_page *pg, void *p) { (void)pg; (void)p; return 0; }
static inline HC_UNUSED void hc_run_totals(struct hc_sp_page *pg, uint32_t used, struct hc_sp_totals *to) { (void)pg; (void)used; (void)to; }
static inline HC_UNUSED int hc_run_fork_child(struct hc_sp_page *pg) { (void)pg; return 1; }
#if HC_DEBUG
static inline HC_UNUSED void hc_run_check(struct hc_sp_page *pg, int every) { (void)pg; (void)every; }
#endif

#endif /* HC_RUN_ON */
#else /* no small pages, so no run page */
static inline HC_UNUSED void *hc_run_realloc(void *p, size_t n) { (void)p; (void)n; return NULL; }
#endif /* HC_SP_ON */
