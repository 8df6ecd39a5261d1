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
static inline char *hc_prev_block(char *b) { return b - hc_prev_size(b); }

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

#endif /* HC_BLOCK_H */
