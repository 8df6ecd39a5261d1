/* hc_internal.h -- types, constants and the global state shared by the HC allocator's files.
 *
 * The allocator is one translation unit: templates/malloc.c.j2 inlines these files after the
 * knob #defines, in the order hc_all.c's #include list gives (the headers, then each .c after
 * those it calls), so every internal function is static.  A function a file calls before the file that defines
 * it is declared at the end of this header.  The knobs (QL_HIGH, SPLIT, ...)
 * arrive as #defines rendered from configs/knobs.toml; nothing here gives them defaults.
 *
 * 64-bit port of Hasan & Chang 2006, §3.1 (the decisions, in one place):
 *  - A block starts 4 bytes before a 16-byte boundary: a 4-byte header (size | inuse |
 *    prev-inuse), then a 16-byte-aligned payload, as the x86-64 ABI asks of malloc.  Block sizes
 *    are multiples of 16 (the granule) and the smallest block is 16 bytes: 12 usable.  A free
 *    block copies its size into a 4-byte trailer (its last 4 bytes) for backward coalescing.
 *  - The heap is one contiguous region reserved once and grown HEAP_UNIT bytes at a time (§3.9;
 *    how its pages are committed is hc_os.c's); it does not fight glibc or anyone over sbrk.
 *  - Free-list links are 32-bit granule offsets from the heap base (64 GiB of heap at most), so a
 *    16-byte free block holds header, next, prev and trailer and every size can sit on a doubly
 *    linked list.
 *  - The big list (§3.3) is still searched best-fit, but kept as size-ordered bins (16 per
 *    power of two) instead of one list: the paper could count on few blocks over 1 KiB, today's
 *    programs cannot, and a linear best-fit scan over thousands of them is quadratic.  The best
 *    fit is the smallest fitting block of the request's own bin or else of the next non-empty
 *    bin, so the choice is exactly the one a single best-fit list would make.
 *  - Header bits: 0 inuse, 1 prev-inuse (the paper's two), 2 "on a coalesced sub-list" (the
 *    paper's spare third bit), 3 "on a quick list" (free to use since sizes step by 16).
 */
#ifndef HC_INTERNAL_H
#define HC_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hc_stats.h"

#ifndef HC_DEBUG
#define HC_DEBUG 0
#endif

#define hc_likely(x) __builtin_expect(!!(x), 1)
#define hc_unlikely(x) __builtin_expect(!!(x), 0)
#define HC_NOINLINE __attribute__((noinline))
#define HC_COLD __attribute__((noinline, cold))
#define HC_UNUSED __attribute__((unused))

/* ---- sizes ---- */
#define HC_GRANULE 16u           /* block sizes step by this (§3.1 ported) */
#define HC_HDR 4u                /* header bytes */
#define HC_MIN_BLOCK 16u         /* header + 12 usable bytes */
#define HC_MEDIUM_MAX 1024u      /* blocks up to here have their own list (§3.4) */
#define HC_BIG ((HC_MEDIUM_MAX / HC_GRANULE) + 1u) /* first bin of the big list (§3.3) */
#define HC_BIG_BINS 1408u        /* 64 bins per power of two, 1 KiB .. 4 GiB (hc_index) */
#define HC_NLISTS (HC_BIG + HC_BIG_BINS) /* medium: index = block size / 16 (0 unused) */
#define HC_MAP_WORDS ((HC_NLISTS + 63u) / 64u) /* at most 63: one summary word covers them */
/* Knob values as the code uses them.  hctune checks every knob's range; these keep a hand-made
 * -D value from breaking the layout: QL_HIGH rounds down to a block size and stays within the
 * medium sizes, heap requests stay far below what a 32-bit header can hold. */
#define HC_QL_SIZE ((size_t)((QL_HIGH) < HC_MEDIUM_MAX ? (QL_HIGH) : HC_MEDIUM_MAX) / HC_GRANULE * HC_GRANULE)
#define HC_MMAP_ABOVE ((size_t)((MMAP_THRESHOLD) < (1 << 30) ? (MMAP_THRESHOLD) : (1 << 30)))
#define HC_QL_MAX (HC_QL_SIZE / HC_GRANULE)                       /* its list index */
/* The largest request a quick-list block holds; n <= this also rules out overflow in rounding. */
#define HC_QL_REQUEST (HC_QL_SIZE >= HC_MIN_BLOCK ? HC_QL_SIZE - HC_HDR : 0)
#define HC_MAX_BLOCK 0xFFFFFFF0u /* a header holds 32 bits: merges stop short of this */
#define HC_CC_VISITS 2u          /* complete coalescing: at most two block visits per free */
#define HC_MAX_REQUEST ((size_t)PTRDIFF_MAX - (1u << 20)) /* beyond: ENOMEM, never overflow */

/* ---- header bits ---- */
#define HC_INUSE 1u
#define HC_PINUSE 2u
#define HC_COALESCED 4u
#define HC_QUICK 8u
#define HC_FLAGS 15u
#define HC_MMAP_TAG 0x6d6d4301u  /* header of an mmapped block: inuse + a tag no heap size has */
#define HC_MMAP_TAG_Z 0x6d6d4303u /* the same, for calloc's own mapping (CALLOC_CACHE keeps it) */

typedef uint32_t hc_off; /* a block as a granule offset from the heap base; 0 = none */

struct hc_list {
    hc_off coal; /* coalesced sub-list: blocks already merged with their neighbours */
    hc_off unco; /* uncoalesced sub-list: freed and not yet merged (§3.4) */
};

/* HC and the operating system (hc_os.c): heap commit, the mmap threshold, purging. */
struct hc_os_state {
    int lazy;              /* the heap is writable from the start: no commit calls (HEAP_LAZY) */
    int threshold_fixed;   /* mallopt(M_MMAP_THRESHOLD) was called: the threshold stays */
    int decay_off;         /* mallopt(M_TRIM_THRESHOLD, -1): no purging by the decay */
    char *committed;       /* without lazy: the heap is mprotected writable up to here */
    size_t decay_bytes;    /* purge when this much free memory is unreleased (DECAY_BYTES) */
    size_t top_pad;        /* bytes of wilderness kept by a purge (mallopt M_TOP_PAD) */
    size_t free_purged;    /* free bytes right after the last purge (their pages were released) */
    uint64_t deadline;     /* CLOCK_MONOTONIC_COARSE ms at which the decay's period ends */
    size_t low;            /* the period's low-water mark of unreleased free memory */
    unsigned valleys;      /* period ends in a row at which the heap was mostly free */
    uint64_t ticks;        /* allocation slow paths, counted to read the clock now and then */
    uint64_t purges;       /* purges done (decay and malloc_trim) */
    uint64_t purged_bytes; /* bytes released by them (pages released again counted again) */
};

/* BIG_CACHE (hc_bigcache.c): freed big blocks kept by exact size, the quick-list way.  Off, its
 * calls are stubs the compiler drops behind `if (HC_BC_ON && ...)`, as for the pages. */
#define HC_BC_ON (BIG_CACHE > 0)
#define HC_BC_SLOTS 64u
struct hc_bc_slot {
    uint32_t size; /* the block size this slot holds */
    hc_off head;   /* its most recently kept block; singly linked through the next link */
};
struct hc_bc {
    size_t bytes; /* kept, at most BIG_CACHE */
    struct hc_bc_slot slot[HC_BC_SLOTS];
};

struct hc_state {
    char *base;        /* start of the reserved region */
    char *limit;       /* its end: reserved so far (grows in place, hc_heap_grow) */
    char *cap;         /* the most it may grow to: the end of the hole it started in */
    char *first;       /* the first block */
    char *top;         /* the wilderness: its header (§3.9) */
    char *end;         /* end of the committed heap */
    char *clean;       /* committed memory from here up has never been written: zero */
    int ready;         /* heap reserved */
    int last_clean;    /* the block just allocated was never written (calloc skips memset) */
    /* Each bitmap's last word summarizes it: bit w set when word w is non-zero, so finding
     * the next set bit costs two count-trailing-zeros whatever the number of bins. */
    uint64_t map[HC_MAP_WORDS + 1];  /* bitmap: bit i set when lists[i] is non-empty (§3.5) */
    uint64_t unco[HC_MAP_WORDS + 1]; /* bit i set when lists[i].unco is non-empty (§3.7) */
    hc_off ql[HC_BIG];           /* quick lists, singly linked (§3.10) */
    struct hc_list lists[HC_NLISTS];
    hc_off big_root;                /* BIG_AO_FIT: the big list's address-ordered tree (hc_big.c) */
    size_t free_blocks;             /* blocks on all lists and quick lists (HC_FREE_BLOCKS) */
    size_t freed_since_cc;          /* bytes freed since the last complete coalescing */
    size_t frees_since_cc;          /* blocks freed since then */
    struct hc_stats st;
    size_t mmap_above;              /* requests above this are mapped (MMAP_THRESHOLD, hc_os.c) */
    struct hc_os_state os;
#if BIG_CACHE > 0
    struct hc_bc bc;                /* BIG_CACHE: kept big blocks (hc_bigcache.c) */
#endif
};

/* The arenas (hc_arena.c): ARENAS independent heaps, each a struct hc_state with its own
 * reserved region and lock.  `hc` is the arena the calling thread is working on: every file
 * says hc.field and means that arena.  A single-threaded process only ever uses arena 0; with
 * threads, each thread has a home arena (round robin) and works on another only to free or
 * reallocate a block that lives there.  ARENAS=1 is the paper's one heap. */
#define HC_NARENAS ((ARENAS) < 1 ? 1 : (ARENAS) > 64 ? 64 : (ARENAS))
static struct hc_state hc_arenas[HC_NARENAS] = {
    [0 ... HC_NARENAS - 1] = { .mmap_above = HC_MMAP_ABOVE, .os = { .decay_bytes = DECAY_BYTES } }
};
#if HC_NARENAS > 1
static __thread struct hc_state *hc_cur __attribute__((tls_model("initial-exec"))) = &hc_arenas[0];
static inline struct hc_state *hc_cur_tls(void) { return hc_cur; }
/* `hc` reads the thread-local pointer, which the compiler reloads after most stores; a function
 * that works on one arena throughout starts with HC_ARENA_HERE, a local copy `hc` then uses. */
#define hc (*hc_cur)
#define HC_ARENA_HERE struct hc_state *const hc_cur HC_UNUSED = hc_cur_tls()
static inline void hc_use(struct hc_state *a) { hc_cur = a; }
#else
/* One arena: `hc` is it, at a fixed address, as in the paper's allocator. */
#define hc_cur (&hc_arenas[0])
#define hc (hc_arenas[0])
#define HC_ARENA_HERE ((void)0)
static inline void hc_use(struct hc_state *a) { (void)a; }
#endif

/* Bytes on all lists and quick lists.  Every heap block below the wilderness is either in use
 * (bytes_current less the mmapped bytes) or free, so the fast paths need not count them. */
static inline size_t hc_free_bytes(void)
{
    return (size_t)(hc.top - hc.first) - (size_t)(hc.st.bytes_current - hc.st.mapped_bytes);
}

/* Free blocks are counted only where a policy reads them: the amortization of complete
 * coalescing (§3.8, §3.11), and the debug build's checker. */
#define HC_AMORTIZE (COALESCE_QL || COALESCE_IN_FREE)
#if HC_AMORTIZE || HC_DEBUG
#define HC_FREE_BLOCKS(n) (hc.free_blocks += (size_t)(n))
#else
#define HC_FREE_BLOCKS(n) ((void)0)
#endif

/* Path counters exist only with MONITOR (§3.11); the [always] statistics are updated directly. */
#if MONITOR
#define HC_COUNT(field, n) (hc.st.field += (uint64_t)(n))
#else
#define HC_COUNT(field, n) ((void)0)
#endif

/* ---- shared by the files ---- */
static HC_COLD void hc_fail(const char *msg);
static void hc_list_push(char *b, int coalesced);
static void hc_list_remove(char *b);
static char *hc_wild_take(size_t size);
static char *hc_alloc_block(size_t size);
static void hc_free_block(char *b);
static inline void hc_free_to_list(char *b, size_t size);
#if BIG_CACHE > 0
static inline int hc_bc_push(char *b, size_t size);
static void hc_bc_flush(void);
static void hc_bc_forget(void);
#else
static inline void hc_bc_flush(void);
static inline void hc_bc_forget(void);
#endif
static void *hc_mmap_block(size_t n, size_t align);
static void hc_munmap_block(char *p);
static void hc_coalesce_complete(void);
static void hc_account_alloc(size_t bytes);
static void hc_account_free(size_t bytes);
static size_t hc_page(void);
static char *hc_os_reserve(char *at, size_t sz);
static inline void hc_os_huge(void *p, size_t sz);
static int hc_os_commit(char *upto);
static inline void hc_os_mapped_freed(size_t usable);
static inline void hc_os_tick(void);
static size_t hc_os_purge(size_t pad, int all);
#if BIG_AO_FIT
static void hc_big_insert(char *b);
static void hc_big_remove(char *b);
#endif
static void hc_sp_stats(struct hc_stats *out);
static void hc_sp_decay_tick(void);
static void hc_sp_yield(size_t n);
#if HC_DEBUG
static void hc_check(void);
static void hc_check_free_arg(void *p);
#endif

#endif /* HC_INTERNAL_H */
