/* hc_debug.c -- the debug build (-DHC_DEBUG=1): after every call, walk the whole heap and every
 * list and check every invariant of Hasan & Chang 2006, §3; abort with one line on the first
 * violation.  O(heap) per call: for tests, not for production. */
#include "hc_block.h"

#if HC_DEBUG

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

static void hc_check(void)
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
                HC_REQUIRE(s <= HC_QL_SIZE, "quick-list block larger than QL_HIGH", b);
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

/* Before free/realloc: is p really a live heap block?  A walk finds out (a stray pointer would
 * otherwise be caught only after it corrupted the heap). */
static void hc_check_free_arg(void *p)
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

#endif /* HC_DEBUG */

/* After each call that held the lock: the whole check in the debug build, nothing otherwise. */
#if HC_DEBUG
#define HC_CHECK() hc_check()
#else
#define HC_CHECK() ((void)0)
#endif
