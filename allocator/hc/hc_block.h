/* hc_block.h -- the block layout of Hasan & Chang 2006, §3.1, ported to x86-64.
 *
 *   allocated:  [hdr: size|inuse|prev-inuse][payload ........................]
 *   free:       [hdr][next][prev][ ....................... ][trailer: size]
 *   quick list: [hdr: size|inuse|quick][next][ ... ]   (inuse left set, §3.10)
 *
 * hdr sits 4 bytes before a 16-byte boundary, so the payload is 16-byte aligned.
 */
#ifndef HC_BLOCK_H
#define HC_BLOCK_H

#include "hc_internal.h"

static inline uint32_t *hc_hdr(char *b) { return (uint32_t *)(void *)b; }
static inline size_t hc_size(char *b) { return *hc_hdr(b) & ~HC_FLAGS; }
static inline int hc_is_inuse(char *b) { return (*hc_hdr(b) & HC_INUSE) != 0; }
static inline int hc_prev_inuse(char *b) { return (*hc_hdr(b) & HC_PINUSE) != 0; }
static inline void *hc_payload(char *b) { return b + HC_HDR; }
static inline char *hc_block_of(void *p) { return (char *)p - HC_HDR; }

/* The trailer of a free block is its last 4 bytes; the next block's header follows it. */
static inline void hc_set_trailer(char *b, size_t size) { *hc_hdr(b + size - HC_HDR) = (uint32_t)size; }
static inline size_t hc_prev_size(char *b) { return *hc_hdr(b - HC_HDR); }
static inline HC_UNUSED char *hc_prev_block(char *b) { return b - hc_prev_size(b); }

static inline void hc_set_pinuse(char *b) { *hc_hdr(b) |= HC_PINUSE; }
static inline void hc_clear_pinuse(char *b) { *hc_hdr(b) &= ~HC_PINUSE; }

/* Links of free blocks: 32-bit granule offsets from the heap base (see hc_internal.h). */
static inline hc_off hc_off_of(char *b) { return (hc_off)((size_t)(b - hc.base) >> 4); }
static inline char *hc_at(hc_off o) { return hc.base + ((size_t)o << 4) + 12; }
static inline hc_off *hc_link_next(char *b) { return (hc_off *)(void *)(b + 4); }
static inline hc_off *hc_link_prev(char *b) { return (hc_off *)(void *)(b + 8); }

/* Block size for a request of n bytes: header added, rounded to the granule.  At least 16
 * without a clamp (n = 0 rounds 4 up to 16); callers bound n first (HC_MMAP_ABOVE,
 * HC_MAX_REQUEST, HC_QL_REQUEST), so the sum cannot wrap. */
static inline size_t hc_request_size(size_t n)
{
    return (n + HC_HDR + HC_GRANULE - 1) & ~(size_t)(HC_GRANULE - 1);
}

/* The list of a free block: its own medium list, or its bin of the big list.  64 bins per
 * power of two: below 2 KiB a bin holds one size, below 4 KiB two, so best fit rarely scans. */
static inline unsigned hc_index(size_t size)
{
    if (size <= HC_MEDIUM_MAX)
        return (unsigned)(size / HC_GRANULE);
    unsigned p = 63u - (unsigned)__builtin_clzll((unsigned long long)size); /* 10..31 */
    return HC_BIG + (p - 10u) * 64u + (unsigned)((size >> (p - 6u)) & 63u);
}

/* The smallest block size bin i of the big list can hold. */
static inline size_t hc_bin_low(unsigned i)
{
    unsigned p = (i - HC_BIG) / 64u + 10u;
    return ((size_t)64u + (i - HC_BIG) % 64u) << (p - 6u);
}

static inline int hc_in_heap(void *p) { return (char *)p > hc.base && (char *)p < hc.limit; }

/* The wilderness's header, read without the lock by free()'s range check.  Another thread may be
 * moving it; a block that is allocated lies below it whatever the moment, so the check holds. */
static inline char *hc_top_now(void) { return __atomic_load_n(&hc.top, __ATOMIC_RELAXED); }

/* ---- what the paper path checks of what it follows (issue 35; docs/allocator.md, "A corrupted
 * heap") ----
 * A write past a block (or before it) lands in a neighbour's header, trailer or links, and the
 * next walk follows it: a size of 0 loops for ever, a huge one leaves the heap.  So every size
 * read from a header or a trailer on the way, and every link followed, is checked before it is
 * used, and a failure aborts with a message (glibc's "corrupted double-linked list", "invalid
 * next size"), never a hang or a wild access.  A few compares on the slow paths and on a listed
 * block's free; the quick-list and medium-list hits check nothing more than before. */
static HC_COLD HC_NOINLINE __attribute__((noreturn)) void hc_corrupt(const char *what)
{
    hc_fail(what);
    __builtin_unreachable(); /* hc_fail aborts */
}

/* Is b a block start of `size` bytes (flags included: a trailer's must be 0) that lies between
 * the heap's first block and the wilderness?  b itself at 12 mod 16 (header before a granule). */
static inline int hc_span_ok(char *b, size_t size)
{
    return size >= HC_GRANULE && !(size & HC_FLAGS) && b >= hc.first &&
           size <= (size_t)(hc.top - b) && ((uintptr_t)b & (HC_GRANULE - 1)) == HC_GRANULE - HC_HDR;
}

/* Is o a link that can be followed: 0 (none) or an offset inside the heap below the wilderness?
 * (hc_at(o) is never below the base: one compare with the wilderness's header.) */
static inline int hc_off_ok(hc_off o) { return hc_at(o) < hc.top; }

/* The free block before b (b's prev-inuse bit clear), its trailer checked against its header
 * (glibc's "corrupted size vs. prev_size"). */
static inline char *hc_prev_checked(char *b)
{
    size_t ps = hc_prev_size(b);
    char *prev = b - ps;
    if (hc_unlikely(ps > (size_t)(b - hc.first) || !hc_span_ok(prev, ps) || hc_size(prev) != ps ||
                    hc_is_inuse(prev)))
        hc_corrupt("corrupted heap: a free block's size and its trailer disagree");
    return prev;
}

/* For b already known to be a block start in [first, top): does `size` end it at or below the
 * wilderness, at least a granule long?  One unsigned compare (free's path). */
static inline int hc_ends_ok(char *b, size_t size)
{
    return size - HC_GRANULE <= (size_t)(hc_top_now() - b) - HC_GRANULE;
}

/* The size of b, checked: a block that lies in the heap (glibc's "invalid next size"). */
static inline size_t hc_size_checked(char *b)
{
    size_t size = hc_size(b);
    if (hc_unlikely(!hc_span_ok(b, size)))
        hc_corrupt("corrupted heap: a block's header has an invalid size");
    return size;
}

#endif /* HC_BLOCK_H */
