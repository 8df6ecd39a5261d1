/* hc_debug.c -- the debug build: check the invariants of Hasan & Chang 2006, §3 and abort with
 * one line on the first violation.  Two levels (docs/allocator.md, "The debug build"):
 *
 *   -DHC_DEBUG=1  every call checks what it touches, in O(1): the block a free or realloc is
 *                 given and both its neighbours, the wilderness and the block below it, the
 *                 head of every quick list and of a rotating share of the other lists; the
 *                 whole heap is walked every N calls, N = max(HC_DEBUG_FULL_EVERY, 4 x the
 *                 blocks in the heap), so the walks cost O(1) per call on average.  Usable on
 *                 real programs (a few times slower than the release build).
 *   -DHC_DEBUG=2  the whole heap after every call and a walk to prove each freed pointer is a
 *                 block: O(heap) per call, for tests.
 *
 * HCMALLOC_CHECK=N in the environment walks the whole heap every N calls instead (1: after
 * every call, as level 2; 0: never, only the per-call checks). */
#include "hc_block.h"

#if HC_DEBUG

#ifndef HC_DEBUG_FULL_EVERY
#define HC_DEBUG_FULL_EVERY 4096u
#endif
#define HC_DEBUG_LISTS_PER_CALL 8u   /* list heads checked per call, in turn */

static HC_COLD void hc_fail_at(const char *what, char *b)
{
    char buf[256];
    int n = snprintf(buf, sizeof buf, "hcmalloc: heap check failed: %s (block %p, header 0x%x)\n",
                     what, (void *)b, b ? (unsigned)*hc_hdr(b) : 0u);
    if (n > 0)
        hc_write_all(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    abort();
}

#define HC_REQUIRE(cond, what, b)                                                                \
    do {                                                                                         \
        if (hc_unlikely(!(cond)))                                                                \
            hc_fail_at(what, b);                                                                 \
    } while (0)

/* A multiset fingerprint (count, sum, sum of squares of offsets), so "every free block is on
 * exactly one list" is checked without allocating a visited set. */
struct hc_print { uint64_t n, sum, sq; };
static void hc_print_add(struct hc_print *f, char *b)
{
    uint64_t o = hc_off_of(b);
    f->n++;
    f->sum += o;
    f->sq += o * o;
}
static int hc_print_eq(struct hc_print a, struct hc_print b)
{
    return a.n == b.n && a.sum == b.sum && a.sq == b.sq;
}

static void hc_check_full(void)
{
    if (!hc.ready || !hc.base || hc.end == hc.base)
        return;
    struct hc_print heap_free = { 0, 0, 0 }, heap_quick = { 0, 0, 0 };
    struct hc_print list_free = { 0, 0, 0 }, list_quick = { 0, 0, 0 };
    uint64_t inuse_blocks = 0, inuse_bytes = 0, free_bytes = 0;
    int prev_inuse = 1, prev_coalesced = 0;
    size_t prev_size = 0;

    /* 1. The heap walk: sizes, boundary tags, inuse/prev-inuse bits, flags. */
    HC_REQUIRE(hc.top >= hc.first && hc.top + HC_HDR <= hc.end, "wilderness out of the heap", hc.top);
    HC_REQUIRE((size_t)(hc.end - hc.base) == hc.st.heap_bytes, "heap_bytes differs from the committed heap", NULL);
    for (char *b = hc.first; b < hc.top; b += hc_size(b)) {
        uint32_t h = *hc_hdr(b);
        size_t s = hc_size(b);
        HC_REQUIRE(s >= HC_MIN_BLOCK && s % HC_GRANULE == 0, "bad block size", b);
        HC_REQUIRE(b + s <= hc.top, "block runs into the wilderness", b);
        HC_REQUIRE(!!(h & HC_PINUSE) == prev_inuse, "prev-inuse bit differs from the previous block", b);
        if (h & HC_INUSE) {
            HC_REQUIRE(!(h & HC_COALESCED), "in-use block marked coalesced", b);
            if (h & HC_QUICK) {
                HC_REQUIRE(s <= HC_QL_SIZE || (BIG_CACHE > 0 && s > HC_MEDIUM_MAX),
                           "quick-list block larger than QL_HIGH", b);
                hc_print_add(&heap_quick, b);
                free_bytes += s;
            } else {
                inuse_blocks++;
                inuse_bytes += s;
            }
            prev_inuse = 1;
            prev_coalesced = 0;
        } else {
            HC_REQUIRE(!(h & HC_QUICK), "free block marked quick", b);
            HC_REQUIRE(hc_prev_size(b + s) == s, "trailer differs from the header", b);
            HC_REQUIRE(!(prev_coalesced && (h & HC_COALESCED) && prev_size + s <= HC_MAX_BLOCK),
                       "two adjacent coalesced free blocks", b);
            hc_print_add(&heap_free, b);
            free_bytes += s;
            prev_inuse = 0;
            prev_coalesced = (h & HC_COALESCED) != 0;
        }
        prev_size = s;
    }
    HC_REQUIRE(!!(*hc_hdr(hc.top) & HC_PINUSE) == prev_inuse, "wilderness prev-inuse bit wrong", hc.top);
    HC_REQUIRE(!prev_coalesced, "coalesced free block just below the wilderness", hc.top);

    /* 2. The lists: membership, links, sizes, sub-list flags, bitmap and its summary word. */
    for (unsigned w = 0; w < HC_MAP_WORDS; w++) {
        HC_REQUIRE(!!(hc.map[HC_MAP_WORDS] & (1ull << w)) == !!hc.map[w], "bitmap summary wrong", NULL);
        HC_REQUIRE(!!(hc.unco[HC_MAP_WORDS] & (1ull << w)) == !!hc.unco[w],
                   "uncoalesced bitmap summary wrong", NULL);
    }
    for (unsigned i = 1; i < HC_NLISTS; i++) {
        for (int k = 0; k < 2; k++) {
            hc_off head = k ? hc.lists[i].coal : hc.lists[i].unco;
            hc_off prev = 0;
            for (hc_off o = head; o; o = *hc_link_next(hc_at(o))) {
                char *b = hc_at(o);
                HC_REQUIRE(b >= hc.first && b < hc.top, "list entry outside the heap", b);
                HC_REQUIRE(!hc_is_inuse(b), "in-use block on a free list", b);
                HC_REQUIRE(hc_index(hc_size(b)) == i, "block on the wrong size list", b);
                HC_REQUIRE(!!(*hc_hdr(b) & HC_COALESCED) == k, "block on the wrong sub-list", b);
                HC_REQUIRE(*hc_link_prev(b) == prev, "broken back link", b);
                hc_print_add(&list_free, b);
                HC_REQUIRE(list_free.n <= heap_free.n, "free list cycle or stray entry", b);
                prev = o;
            }
        }
        int listed = hc.lists[i].coal || hc.lists[i].unco;
        HC_REQUIRE(!!(hc.map[i >> 6] & (1ull << (i & 63))) == listed, "bitmap differs from the lists", NULL);
        HC_REQUIRE(!!(hc.unco[i >> 6] & (1ull << (i & 63))) == !!hc.lists[i].unco,
                   "uncoalesced bitmap differs from the lists", NULL);
        if (i > HC_QL_MAX) {
            HC_REQUIRE(i >= HC_BIG || !hc.ql[i], "quick list above QL_HIGH", NULL);
            continue;
        }
        for (hc_off o = hc.ql[i]; o; o = *hc_link_next(hc_at(o))) {
            char *b = hc_at(o);
            HC_REQUIRE(b >= hc.first && b < hc.top, "quick-list entry outside the heap", b);
            HC_REQUIRE((*hc_hdr(b) & (HC_INUSE | HC_QUICK)) == (HC_INUSE | HC_QUICK),
                       "quick-list block without inuse and quick bits", b);
            HC_REQUIRE(hc_size(b) == i * HC_GRANULE, "block on the wrong quick list", b);
            hc_print_add(&list_quick, b);
            HC_REQUIRE(list_quick.n <= heap_quick.n, "quick list cycle or stray entry", b);
        }
    }
#if BIG_CACHE > 0
    /* BIG_CACHE's kept blocks (hc_bigcache.c): quick lists of big sizes, one size a slot. */
    size_t kept = 0;
    for (unsigned i = 0; i < HC_BC_SLOTS; i++) {
        struct hc_bc_slot *sl = &hc.bc.slot[i];
        HC_REQUIRE(!sl->head || (sl->size / HC_GRANULE) % HC_BC_SLOTS == i, "kept big blocks in the wrong slot", NULL);
        for (hc_off o = sl->head; o; o = *hc_link_next(hc_at(o))) {
            char *b = hc_at(o);
            HC_REQUIRE(b >= hc.first && b < hc.top, "kept big block outside the heap", b);
            HC_REQUIRE((*hc_hdr(b) & (HC_INUSE | HC_QUICK)) == (HC_INUSE | HC_QUICK),
                       "kept big block without inuse and quick bits", b);
            HC_REQUIRE(hc_size(b) == sl->size && sl->size > HC_MEDIUM_MAX && sl->size <= HC_BC_MAX,
                       "kept big block of another size than its slot", b);
            kept += sl->size;
            hc_print_add(&list_quick, b);
            HC_REQUIRE(list_quick.n <= heap_quick.n, "kept big block list cycle or stray entry", b);
        }
    }
    HC_REQUIRE(kept == hc.bc.bytes && kept <= (size_t)(BIG_CACHE), "kept big bytes wrong", NULL);
#endif
#if BIG_AO_FIT
    /* The big list's tree (hc_big.c): address order, links both ways, priorities, maxima. */
    HC_REQUIRE(!hc.big_root || !*hc_t_parent(hc_at(hc.big_root)), "tree root with a parent", NULL);
    char *last = NULL;
    for (char *b = hc_big_lowest(); b; b = hc_big_next(b)) {
        HC_REQUIRE(b >= hc.first && b < hc.top, "tree node outside the heap", b);
        HC_REQUIRE(b > last, "tree out of address order (or a cycle)", b);
        HC_REQUIRE(!hc_is_inuse(b), "in-use block in the big list's tree", b);
        HC_REQUIRE(hc_size(b) > HC_MEDIUM_MAX, "medium block in the big list's tree", b);
        hc_off o = hc_off_of(b), kids[2] = { *hc_t_left(b), *hc_t_right(b) };
        for (int k = 0; k < 2; k++) {
            HC_REQUIRE(!kids[k] || *hc_t_parent(hc_at(kids[k])) == o, "tree child without its parent link", b);
            HC_REQUIRE(!kids[k] || hc_t_prio(kids[k]) <= hc_t_prio(o), "tree child above its parent's priority", b);
        }
        uint32_t m = *hc_t_max(b);
        hc_t_fix(b);
        HC_REQUIRE(*hc_t_max(b) == m, "tree node's subtree maximum wrong", b);
        hc_print_add(&list_free, b);
        HC_REQUIRE(list_free.n <= heap_free.n, "tree holds a stray entry", b);
        last = b;
    }
#endif
    HC_REQUIRE(hc_print_eq(heap_free, list_free), "free blocks and free lists differ", NULL);
    HC_REQUIRE(hc_print_eq(heap_quick, list_quick), "quick-list blocks and quick lists differ", NULL);

    /* 3. The statistics agree with the heap. */
    HC_REQUIRE(free_bytes == hc_free_bytes(), "free byte count differs from the lists", NULL);
    HC_REQUIRE(heap_free.n + heap_quick.n == hc.free_blocks, "free block count differs from the lists", NULL);
    HC_REQUIRE(inuse_blocks + hc.st.mapped_blocks == hc.st.allocs_current, "allocs_current wrong", NULL);
    HC_REQUIRE(inuse_bytes + hc.st.mapped_bytes == hc.st.bytes_current, "bytes_current wrong", NULL);
    HC_REQUIRE(hc.st.bytes_current <= hc.st.bytes_max, "bytes_max below bytes_current", NULL);
    HC_REQUIRE(hc.st.heap_bytes + hc.st.mapped_bytes <= hc.st.footprint, "footprint below heap + mapped", NULL);
}

/* Before free/realloc at level 2: is p really a live heap block?  A walk finds out. */
static void hc_check_free_arg_walk(void *p)
{
    char *t = hc_block_of(p);
    for (char *b = hc.first; b && b < hc.top; b += hc_size(b)) {
        if (b == t) {
            HC_REQUIRE(hc_is_inuse(b) && !(*hc_hdr(b) & HC_QUICK), "free of a block that is not allocated (double free?)", b);
            return;
        }
        if (b > t)
            break;
    }
    hc_fail_at("free of a pointer that malloc did not return", t);
}

/* ---- the per-call checks (level 1) ---- */

/* The full-walk period: 1 = every call (level 2, or HCMALLOC_CHECK=1), 0 = never, else every
 * `period` calls (or as scaled by the heap's size when not set by HCMALLOC_CHECK). */
static struct {
    int ready;
    int fixed;               /* HCMALLOC_CHECK set: the period does not scale */
    uint64_t period;
    uint64_t calls;
    unsigned cursor;         /* the next list whose head is checked */
} hc_dbg;

static void hc_dbg_setup(void)
{
    hc_dbg.ready = 1;
    hc_dbg.period = HC_DEBUG >= 2 ? 1 : HC_DEBUG_FULL_EVERY;
    const char *e = getenv("HCMALLOC_CHECK");   /* getenv does not allocate */
    if (e && *e >= '0' && *e <= '9') {
        uint64_t n = 0;
        for (; *e >= '0' && *e <= '9'; e++)
            n = n * 10 + (uint64_t)(*e - '0');
        hc_dbg.period = n;
        hc_dbg.fixed = 1;
    }
}

static inline int hc_dbg_walks_every_call(void)
{
    if (hc_unlikely(!hc_dbg.ready))
        hc_dbg_setup();
    return hc_dbg.period == 1;
}

/* A header that can be a block's: a plausible size inside [first, top). */
static inline int hc_dbg_plausible(char *b)
{
    size_t s = hc_size(b);
    return b >= hc.first && b < hc.top && s >= HC_MIN_BLOCK && s % HC_GRANULE == 0 &&
           s <= (size_t)(hc.top - b);
}

/* A free block on list i's sub-list k, as the head of that list (no predecessor). */
static void hc_dbg_list_head(unsigned i, int k, hc_off o)
{
    char *b = hc_at(o);
    HC_REQUIRE(hc_dbg_plausible(b), "list head is not a block (header overwritten?)", b);
    HC_REQUIRE(!hc_is_inuse(b), "in-use block on a free list", b);
    HC_REQUIRE(hc_index(hc_size(b)) == i, "block on the wrong size list", b);
    HC_REQUIRE(!!(*hc_hdr(b) & HC_COALESCED) == k, "block on the wrong sub-list", b);
    HC_REQUIRE(*hc_link_prev(b) == 0, "list head with a back link", b);
    HC_REQUIRE(hc_prev_size(b + hc_size(b)) == hc_size(b), "trailer differs from the header", b);
    HC_REQUIRE(!hc_prev_inuse(b + hc_size(b)), "prev-inuse bit set after a free block", b);
    hc_off n = *hc_link_next(b);
    if (n) {
        char *c = hc_at(n);
        HC_REQUIRE(c >= hc.first && c < hc.top, "list link outside the heap", b);
        HC_REQUIRE(*hc_link_prev(c) == o, "broken back link", c);
    }
}

/* The block free or realloc was given, and its neighbours: the header and the two boundary
 * tags around it must agree, which a stray pointer, a double free or an overflow from the
 * block below breaks. */
static void hc_dbg_block_and_neighbours(char *t)
{
    HC_REQUIRE(hc_dbg_plausible(t),
               "free of a pointer that malloc did not return (or its header was overwritten)", t);
    uint32_t h = *hc_hdr(t);
    char *n = t + hc_size(t);
    int next_pinuse = n == hc.top ? hc_prev_inuse(hc.top) : hc_prev_inuse(n);
    if (!(h & HC_INUSE)) {
        /* a free block: freed before (a double free) if its boundary tags agree */
        HC_REQUIRE(next_pinuse || hc_prev_size(n) != hc_size(t),
                   "free of a block that is not allocated (double free?)", t);
        hc_fail_at("free of a pointer that malloc did not return", t);
    }
    HC_REQUIRE(next_pinuse, "free of a pointer that malloc did not return "
               "(the next block does not see it in use)", t);
    HC_REQUIRE(!(h & HC_QUICK), "free of a block that is not allocated (double free?)", t);
    HC_REQUIRE(!(h & HC_COALESCED), "in-use block marked coalesced", t);
    if (n < hc.top) {
        HC_REQUIRE(hc_dbg_plausible(n), "header of the next block overwritten (overflow?)", n);
        if (!hc_is_inuse(n))
            HC_REQUIRE(hc_prev_size(n + hc_size(n)) == hc_size(n),
                       "trailer of the next free block overwritten", n);
    }
    if (!(h & HC_PINUSE)) {
        size_t ps = hc_prev_size(t);
        char *p = t - ps;
        HC_REQUIRE(ps >= HC_MIN_BLOCK && p >= hc.first && hc_size(p) == ps && !hc_is_inuse(p),
                   "the free block below differs from its trailer (overflow?)", t);
    }
}

/* Before free/realloc: p must be a live block.  Level 2 walks the heap to prove it. */
static void hc_check_free_arg(void *p)
{
    if (hc_dbg_walks_every_call()) {
        hc_check_free_arg_walk(p);
        return;
    }
    HC_REQUIRE(!((uintptr_t)p & (HC_GRANULE - 1)), "free of a pointer that malloc did not return "
               "(misaligned)", hc_block_of(p));
    hc_dbg_block_and_neighbours(hc_block_of(p));
}

/* After every call, with the lock held. */
static void hc_check(void)
{
    if (!hc.ready || !hc.base || hc.end == hc.base)
        return;
    if (hc_unlikely(!hc_dbg.ready))
        hc_dbg_setup();
    uint64_t period = hc_dbg.period;
    if (!hc_dbg.fixed && period > 1) {
        /* scaled by the heap, so the walks cost O(1) blocks per call on average */
        uint64_t blocks = hc.free_blocks + hc.st.allocs_current;
        if (period < 4 * blocks)
            period = 4 * blocks;
    }
    if (period && ++hc_dbg.calls >= period) {
        hc_dbg.calls = 0;
        hc_check_full();
        return;
    }
    /* the wilderness and the block just below it */
    HC_REQUIRE(hc.top >= hc.first && hc.top + HC_HDR <= hc.end, "wilderness out of the heap", hc.top);
    if (!hc_prev_inuse(hc.top)) {
        size_t ps = hc_prev_size(hc.top);
        char *b = hc.top - ps;
        HC_REQUIRE(ps >= HC_MIN_BLOCK && b >= hc.first && hc_size(b) == ps && !hc_is_inuse(b),
                   "the free block below the wilderness differs from its trailer", hc.top);
        HC_REQUIRE(!(*hc_hdr(b) & HC_COALESCED), "coalesced free block just below the wilderness", b);
    }
    /* the head of every quick list */
    for (unsigned i = 1; i <= HC_QL_MAX && i < HC_BIG; i++) {
        if (!hc.ql[i])
            continue;
        char *b = hc_at(hc.ql[i]);
        HC_REQUIRE(hc_dbg_plausible(b), "quick-list head is not a block (header overwritten?)", b);
        HC_REQUIRE((*hc_hdr(b) & (HC_INUSE | HC_QUICK)) == (HC_INUSE | HC_QUICK),
                   "quick-list block without inuse and quick bits", b);
        HC_REQUIRE(hc_size(b) == i * HC_GRANULE, "block on the wrong quick list", b);
        hc_off n = *hc_link_next(b);
        HC_REQUIRE(!n || (hc_at(n) >= hc.first && hc_at(n) < hc.top), "quick-list link outside the heap", b);
    }
    /* the heads of a few other lists, in turn, and their bitmap bits */
    for (unsigned k = 0; k < HC_DEBUG_LISTS_PER_CALL; k++) {
        unsigned i = hc_dbg.cursor;
        hc_dbg.cursor = i + 1 < HC_NLISTS ? i + 1 : 1;
        if (i == 0)
            continue;
        int listed = hc.lists[i].coal || hc.lists[i].unco;
        HC_REQUIRE(!!(hc.map[i >> 6] & (1ull << (i & 63))) == listed, "bitmap differs from the lists", NULL);
        HC_REQUIRE(!!(hc.unco[i >> 6] & (1ull << (i & 63))) == !!hc.lists[i].unco,
                   "uncoalesced bitmap differs from the lists", NULL);
        if (hc.lists[i].coal)
            hc_dbg_list_head(i, 1, hc.lists[i].coal);
        if (hc.lists[i].unco)
            hc_dbg_list_head(i, 0, hc.lists[i].unco);
    }
    HC_REQUIRE(hc.st.bytes_current <= hc.st.bytes_max, "bytes_max below bytes_current", NULL);
}

#endif /* HC_DEBUG */

/* After each call that held the lock: the whole check in the debug build, nothing otherwise. */
#if HC_DEBUG
#define HC_CHECK() hc_check()
#else
#define HC_CHECK() ((void)0)
#endif
