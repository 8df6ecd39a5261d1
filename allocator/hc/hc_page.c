/* hc_page.c -- small blocks on pages owned by a thread, beyond Hasan & Chang 2006 (SMALL_MAX,
 * SMALL_CLASSES; docs/allocator.md, "Small blocks on pages").
 *
 * The paper's block carries a 4-byte header, so a 16-byte request takes a 32-byte block, and a
 * block has no owner, so a block freed by another thread travels through that thread's cache
 * and the arena lock.  With SMALL_MAX > 0, requests of up to SMALL_MAX bytes are served here
 * instead (SMALL_MAX = 0: this file compiles to nothing and HC is the paper's allocator with
 * its thread cache and arenas, exactly):
 *
 *  - Size classes.  16, 32, 48, ... stepping by 16 up to 16 x SMALL_CLASSES, then SMALL_CLASSES
 *    classes per power of two (SMALL_CLASSES = 4: ..., 128, 160, 192, 224, 256, 320, ...), so a
 *    block wastes less than 1/SMALL_CLASSES of its size.  Every class is a multiple of 16: every
 *    block is 16-byte aligned, and a power-of-two class is aligned to its size up to 256 bytes
 *    (the memalign family of small sizes is served here).  Above 1 KiB, MID_CLASSES (when not
 *    0) sets the classes per power of two instead, each class stretched to fill its page
 *    (hc_sp_classes): a 64 KiB page holds only 15 blocks of 4 KiB, so the coarse spacing and the
 *    page's tail were where SMALL_MAX = 4096 lost memory against a heap of 16-byte steps.
 *  - Pages.  A page is HC_SP_PAGE (64 KiB) of one class: a 256-byte page header, then blocks
 *    with no per-block header; with SMALL_HEADERS_APART the header lives in the directory, an
 *    array of headers beside the region (page i's is hc_sp_dir[i]), and the page is all
 *    blocks.  Pages are carved upwards from one region (aligned to the page size,
 *    PROT_READ|PROT_WRITE with MAP_NORESERVE: the kernel gives a page on first touch),
 *    reserved HC_SP_GROW (64 MiB) at first and grown in place, doubling, up to HC_SP_REGION
 *    (64 GiB) as pages are carved (hc_sp_grow): it starts at the low end of a hole of
 *    HC_SP_REGION found at set-up, and the kernel, mapping downwards, fills that hole from its
 *    other end, so the growth meets another mapping only when both have used it.  A region
 *    that cannot grow serves what it holds and the heap serves the rest.  free() tells a page
 *    block from a paper block with one compare against the region (its base never moves, its
 *    span only grows) and finds the page header by masking the pointer (in the directory: by
 *    the pointer's page number).  A fresh page hands its blocks out from a bump pointer, one
 *    OS page of blocks at a time, so a page that is never filled is never touched whole;
 *    blocks beyond the bump pointer of a fresh page are known zero (calloc).
 *  - Owner.  A page belongs to one thread (the thread's record, `hc_sp_me`).  The owner pops and
 *    pushes its page's free list with no lock and no atomic instruction.  Another thread's free
 *    pushes the block onto the page's own atomic list (`xfree`, a compare-and-swap loop on its
 *    own cache line, the list's length kept in the same word); the owner takes that whole list
 *    with one exchange when the page's local list runs dry, without walking it.  hc_remote.c
 *    can keep such a block in the freeing thread or batch the pushes (REMOTE_KEEP,
 *    REMOTE_BATCH).  There is one consumer, so the exchange has no ABA problem.  The owner keeps,
 *    per class, a list of pages with free blocks (its head is the page malloc pops) and a list
 *    of full pages.  A full page comes back when its owner frees into it, or when the owner,
 *    about to take a new page, scans its full pages for other threads' frees: only after it took
 *    at least 1/8 as many new pages as it has full ones, so the scans cost O(1) per new page and
 *    blocks freed by others are found again before the thread grows by more than 1/8.
 *  - Thread exit (a pthread key destructor): each of the thread's pages goes to the empty pool
 *    if it has no live block, else to the orphan pool of its class, owner cleared; a thread
 *    needing a page of that class adopts an orphan before it takes an empty or a new page, and
 *    orphans whose blocks were all freed meanwhile go back to the empty pool, so 10,000
 *    short-lived threads reuse the same pages.  The orphans are swept when a thread takes new
 *    pages, by malloc_trim, and by the purge thread (PURGE_THREAD), which an exit that leaves
 *    orphans starts, so a program that goes quiet after its threads' blocks were freed gets
 *    those pages back too.  Calls a thread makes after its destructor ran
 *    go to the paper's heap (malloc) or onto the page's atomic list (free).
 *  - Empty pages.  A page whose blocks all came back is kept if it is the class's current page,
 *    else it goes to the empty pool, reused first (most recently emptied first) by any class.
 *    The decay gives them back as the heap's does (DECAY_MS, DECAY_BYTES, mallopt
 *    M_TRIM_THRESHOLD, hc_os.c's madvise): when a page is emptied, pages empty for DECAY_MS are
 *    released once the empty pool's unreleased pages reach DECAY_BYTES; malloc_trim releases
 *    them all.  A released page keeps its header (and, at the page's start, the OS page under
 *    it); its blocks read as zero again.  With SMALL_YIELD the heap's growth releases empty
 *    pages past SMALL_EMPTY's bound at once (hc_sp_yield); with SMALL_IDLE a class's current
 *    page left empty goes to the pool when the thread needs a page and the pool has none
 *    (hc_sp_idle_give).
 *  - fork: the pools' lock is taken around fork by hc_lock.h's handlers, in its lock order
 *    (after the stdio list lock, not at all while single-threaded); in the child, pages of
 *    threads that did not survive the fork become orphans, with none of what their owners
 *    wrote without a lock trusted (their free lists are dropped: hc_sp_fork_child).
 *  - Statistics: pages taken (small_pages, counted in heap_bytes and the footprint: the region is
 *    never unmapped), empty pages held, bytes released; the blocks on pages count in
 *    allocs_current and bytes_current when the statistics are read (a walk of the pages), not
 *    in the maxima and totals, which stay the paper's heap's (COALESCE_QL's ratio reads them).
 *  - Misuse: free of a pointer inside the region but not a block of a page in use aborts with
 *    one line; a double free on the owner's side is caught by a per-process key written into a
 *    freed block (its second word) and a walk of the page's free list when the key matches.
 *    The debug build also checks each pointer is a block boundary and each page's counts.
 *  - Page kinds (hc_page.h): everything above is the pages' shared mechanism.  How a page lays
 *    out its blocks is its kind's: this file's class pages (HC_PK_CLASS: one size class, a bump
 *    pointer and a free list; the section "the class pages' kind", and malloc's and free's fast
 *    paths) and hc_run.c's run pages (HC_PK_RUNS, MID_RUNS).  The mechanism asks a page's kind
 *    only through hc_page.h's hc_pk_* operations.
 *
 * The paper's quick lists, medium lists, big list and thread cache keep serving everything above
 * SMALL_MAX (and everything a page cannot serve: a thread past its destructor, a region the OS
 * refused), so the thread cache gives way to the pages for the small sizes.  Ideas from
 * mimalloc's thread-free lists and snmalloc's message queues; the code is HC's own.
 */
#include "hc_block.h"
#include "hc_lock.h"
#include "hc_page.h"

#if HC_SP_ON

static struct hc_sp_page hc_sp_none;
static __thread struct hc_sp_thread hc_sp_me __attribute__((tls_model("initial-exec"))) = {
    .cur = { [0 ... HC_SP_NCLS - 1] = &hc_sp_none }
};

/* hc_remote.c (after this file): other threads' blocks kept by the thread that freed them
 * (REMOTE_KEEP), and the remote-free counts. */
static inline int hc_rm_keep(struct hc_sp_page *pg, void *p, uint64_t key);
static inline void *hc_rm_take(unsigned c);
static inline void hc_rm_push(struct hc_sp_page *pg, void *p);
static inline void hc_rm_count_take(uint32_t n);
static void hc_rm_flush(void);
static void hc_rm_exit(void);
static void hc_rm_exit_counts(void);
static void hc_rm_double_free_check(struct hc_sp_page *pg, void *p);
static void hc_rm_stats(struct hc_stats *out);

/* ---- counts: page blocks in HCMALLOC_STATS' allocs_* and bytes_* (MONITOR) ----
 *
 * Each thread counts, without an atomic, the blocks and bytes it takes from pages (a block of its
 * class's size, a run's granules) and those that come back: its own frees, the frees of other
 * threads it collects as the page's owner (hc_sp_collect; class pages), and every free of a run
 * (hc_sp_free, by whichever thread frees it).  An exiting thread adds its counts to the
 * process's (hc_sp_exit), as hc_remote.c's counts are added; a thread with no record (one that
 * never took a page) adds a free to the process's at once.  So the totals are exact once the
 * threads are done.  A block another thread keeps and takes again (REMOTE_KEEP) counts as one
 * allocation, freed when it comes back to its page.
 *
 * The maxima: a thread's pages' blocks and bytes in use (live_*: its takes less its returns)
 * plus what lies outside its count (base_*: its arena's heap at its last heap call, and what
 * exited threads left in use) is what it sees in use.  An allocation only raises lim_*, the
 * most live_* reached since base_* was last set (hc_sp_rebase: each heap call, each slow
 * malloc), so malloc's fast path pays three adds and two compares (12 instructions), free's
 * three adds; the maximum is lim_* + base_*, kept in max_* when base_* moves.  The statistics
 * report the larger of the threads' and the heap's own maxima.  Exact for a program with one thread at a time; with several
 * running, an estimate (one thread's view: it does not see the blocks the others hold, and its
 * returns include those of theirs it collected). */
#if MONITOR
/* Exited threads' (and threads' with no record) n_free, b_alloc, live_n, live_b (atomic;
 * live_* as two's complement) */
static uint64_t hc_sp_gone[4];
static uint64_t hc_sp_gone_max[2]; /* the largest maxima of exited threads (hc_sp_mu) */
#endif

/* The maxima kept, and base_* set again: t's arena's heap at its last heap call (heap_*), and
 * what exited threads left. */
static inline void hc_sp_rebase(struct hc_sp_thread *t)
{
#if MONITOR
    int64_t mn = t->lim_n + t->base_n, mb = t->lim_b + t->base_b;
    if (mn > (int64_t)t->max_n)
        t->max_n = (uint64_t)mn;
    if (mb > (int64_t)t->max_b)
        t->max_b = (uint64_t)mb;
    t->base_n = (int64_t)(t->heap_n + __atomic_load_n(&hc_sp_gone[2], __ATOMIC_RELAXED));
    t->base_b = (int64_t)(t->heap_b + __atomic_load_n(&hc_sp_gone[3], __ATOMIC_RELAXED));
    t->lim_n = (int64_t)t->max_n - t->base_n;
    t->lim_b = (int64_t)t->max_b - t->base_b;
#else
    (void)t;
#endif
}

/* The paper heap's blocks and bytes in use in the calling thread's arena, after its heap call
 * (hc_account_alloc, hc_account_free). */
static inline void hc_sp_note_heap(uint64_t n, uint64_t bytes)
{
#if MONITOR
    hc_sp_me.heap_n = n;
    hc_sp_me.heap_b = bytes;
    hc_sp_rebase(&hc_sp_me);
#else
    (void)n;
    (void)bytes;
#endif
}

/* t took `bytes` more from a page: a block, or a run grown in place (then blocks is 0). */
static inline __attribute__((always_inline)) void hc_sp_count_alloc(struct hc_sp_thread *t,
                                                                    size_t bytes, int blocks)
{
#if MONITOR
    t->b_alloc += bytes;
    t->live_n += blocks;
    t->live_b += (int64_t)bytes;
    if (t->live_b > t->lim_b)
        t->lim_b = t->live_b;
    if (t->live_n > t->lim_n)
        t->lim_n = t->live_n;
#else
    (void)t;
    (void)bytes;
    (void)blocks;
#endif
}

/* realloc moved a page block (malloc, copy, hc_sp_free): one realloc, not an allocation and a
 * free, as the heap counts it (allocs_total is live_n + n_free). */
static inline void hc_sp_count_move(void)
{
#if MONITOR
    struct hc_sp_thread *t = &hc_sp_me;
    if (hc_likely(t->state == HC_SP_LIVE))
        t->n_free--;
    else
        __atomic_fetch_sub(&hc_sp_gone[0], 1, __ATOMIC_RELAXED);
#endif
}

/* n blocks of `bytes` in all came back to their pages (a run shrunk in place: n is 0), counted
 * by the calling thread. */
static inline void hc_sp_count_free(uint64_t n, uint64_t bytes)
{
#if MONITOR
    struct hc_sp_thread *t = &hc_sp_me;
    if (hc_likely(t->state == HC_SP_LIVE)) {
        t->n_free += n;
        t->live_n -= (int64_t)n;
        t->live_b -= (int64_t)bytes;
    } else {
        __atomic_fetch_add(&hc_sp_gone[0], n, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&hc_sp_gone[2], n, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&hc_sp_gone[3], bytes, __ATOMIC_RELAXED);
    }
#else
    (void)n;
    (void)bytes;
#endif
}

/* The region: [base, base + 16 * span16).  Before it exists span16 is 0, so free()'s compare
 * fails for every pointer.  All in one cache line, read together by free(); base is set once,
 * span16 only grows (a free racing a growth sees the old span, which holds every page carved
 * before).  The span is kept in 16-byte units for hc_sp_owns's one compare. */
static struct {
    uintptr_t base;
    size_t span16;
    /* SMALL_HEADERS_APART: the pages' headers, page i's at dir[i] (free() reads it with base):
     * address space of its own, reserved and grown in place with the region (hc_sp_dir_make,
     * hc_sp_grow), 192 bytes a page of it. */
    struct hc_sp_page *dir;
} hc_sp_region __attribute__((aligned(32)));
#define hc_sp_base (hc_sp_region.base)
#define hc_sp_dir (hc_sp_region.dir)
#define HC_SP_DIR_BYTES(span) (((span) >> HC_SP_SHIFT) * sizeof(struct hc_sp_page))
static char *hc_sp_top;                 /* next page to carve (atomic) */
static int hc_sp_state;                 /* 0: not set up, 1: ready, -1: the OS refused */
static uint8_t hc_sp_cls[HC_SP_IDX];    /* (n + Q - 1) / Q -> class (Q: HC_SP_Q); 0 until set up */
static uint32_t hc_sp_size[HC_SP_NCLS];
/* SMALL_PAGE_BLOCKS: the bytes of its 64 KiB slot a page of class c lays blocks on (its page
 * size), from the slot's start; 0 until set up (and with the knob off): the whole slot. */
static uint32_t hc_sp_span[HC_SP_NCLS];
static uint64_t hc_sp_magic;            /* the freed-block key (xor the block's address) */

/* The pools, under hc_sp_mu. */
static pthread_mutex_t hc_sp_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hc_sp_page *hc_sp_orphans[HC_SP_NCLS];
static size_t hc_sp_norphans, hc_sp_carved_since_sweep;
static struct hc_sp_page *hc_sp_dirty, *hc_sp_dirty_tail; /* empty, resident: newest first */
static struct hc_sp_page *hc_sp_clean;                    /* empty, released */
static size_t hc_sp_ndirty, hc_sp_nclean;
static uint64_t hc_sp_released_bytes;

static pthread_key_t hc_sp_key;
static pthread_once_t hc_sp_once = PTHREAD_ONCE_INIT;
static int hc_sp_keyed;

/* The header of the page holding p (p in the region), and the page that header describes. */
static inline struct hc_sp_page *hc_sp_page_of(void *p)
{
    if (HC_SP_APART)
        return &hc_sp_dir[((uintptr_t)p - hc_sp_base) >> HC_SP_SHIFT];
    return (struct hc_sp_page *)(void *)((uintptr_t)p & ~(uintptr_t)(HC_SP_PAGE - 1));
}

static inline char *hc_sp_mem(struct hc_sp_page *pg)
{
    if (HC_SP_APART)
        return (char *)hc_sp_base + ((size_t)(pg - hc_sp_dir) << HC_SP_SHIFT);
    return (char *)pg;
}

/* What `pages` pages took from the OS: themselves, and their headers in the directory. */
static inline uint64_t hc_sp_taken(uint64_t pages)
{
    return pages * (HC_SP_PAGE + (HC_SP_APART ? sizeof(struct hc_sp_page) : 0));
}

/* A number of its own for each page (hc_remote.c hashes it). */
static inline HC_UNUSED uintptr_t hc_sp_number(struct hc_sp_page *pg)
{
    return HC_SP_APART ? (uintptr_t)(pg - hc_sp_dir) : (uintptr_t)pg >> HC_SP_SHIFT;
}

/* p is in the region and 16-byte aligned, in one compare: the offset rotated right by 4 bits
 * (one instruction) puts a misaligned pointer's low bits at the top, past any span, so free()
 * needs no alignment test of its own; such a pointer goes to the heap's checks, which reject
 * it. */
static inline int hc_sp_owns(void *p)
{
    uintptr_t x = (uintptr_t)p - hc_sp_base;
    /* FIT_ALIGN8: blocks may be 8-byte aligned, the rotation is by 3 and the span doubled */
    return ((x >> HC_SP_QSHIFT) | (x << (64 - HC_SP_QSHIFT))) < hc_sp_region.span16 << (4 - HC_SP_QSHIFT);
}

/* p is in the region, aligned or not (malloc_usable_size: a page's class, never a mapping's
 * header read). */
static inline int hc_sp_in_region(void *p) { return (uintptr_t)p - hc_sp_base < hc_sp_region.span16 << 4; }

static inline uint64_t *hc_sp_keyp(void *p) { return (uint64_t *)(void *)((char *)p + 8); }
static inline uint64_t hc_sp_key_of(void *p) { return hc_sp_magic ^ (uintptr_t)p; }

/* The block size a request of n bytes gets here (n <= HC_SP_LIMIT, table set up). */
static inline size_t hc_sp_class_size(size_t n) { return hc_sp_size[hc_sp_cls[(n + HC_SP_Q - 1) >> HC_SP_QSHIFT]]; }

#if HC_DEBUG
static HC_COLD void hc_sp_fail(const char *what, void *p);
static void hc_sp_red_check(char *b, size_t size)
{
    for (size_t i = size - HC_SP_RED; i < size; i++)
        if ((unsigned char)b[i] != HC_SP_RED_BYTE)
            hc_sp_fail("write past the end of a small block (its red zone changed)", b);
}
#endif

/* ---- set-up ---- */

/* The class sizes (slot 0 unused), then the request-to-class table.  With MID_CLASSES, each
 * class above HC_SP_MID_FROM is stretched to the largest multiple of 16 that still fits as many
 * blocks in a page: the page's tail, which no block could use, goes to the blocks, so requests
 * just above the unstretched size take this class, not the next (4096: 15 blocks and a
 * 3,840-byte tail; stretched to 4352, no tail).  Stretching keeps the sizes increasing (a
 * larger class fits fewer blocks, and a class that fits as many as the one below is the same
 * stretched size: it is dropped). */
static void hc_sp_classes(void)
{
    unsigned c = 0; /* the last slot filled */
    for (size_t s = 16; c + 1 < HC_SP_NCLS_GENERIC;) {
        size_t fit = s;
        if (HC_SP_MID && s > HC_SP_MID_FROM) {
            size_t per_page = HC_SP_CLASS_SPAN / s;
            fit = HC_SP_CLASS_SPAN / per_page & ~(size_t)15;
        }
        if (c == 0 || fit > hc_sp_size[c])
            hc_sp_size[++c] = (uint32_t)fit;
        if (s >= HC_SP_LIMIT)
            break;
#if SMALL_P2_HEADER
        /* A power of two and a header: the class one granule above each power of two from 128
         * (144, 272, 528, 1,040; stretched above 1 KiB), for the many requests of a power-of-two
         * payload plus a few bytes (sqlite3's 1,032-byte rows took 1,088 bytes). */
        if (s >= 128 && !(s & (s - 1)) && c + 1 < HC_SP_NCLS_GENERIC) {
            size_t x = s + 16;
            if (HC_SP_MID && x > HC_SP_MID_FROM)
                x = HC_SP_CLASS_SPAN / (HC_SP_CLASS_SPAN / x) & ~(size_t)15;
            if (x > hc_sp_size[c] && x <= HC_SP_LIMIT)
                hc_sp_size[++c] = (uint32_t)x;
        }
#endif
        size_t p2 = (size_t)1 << (63 - __builtin_clzll((unsigned long long)s));
        unsigned per = HC_SP_MID && s >= HC_SP_MID_FROM ? HC_SP_MID : HC_SP_PER2;
        size_t step = p2 / per > 16 ? p2 / per : 16;
        s += step;
    }
#if HC_FIT_ON
    c = hc_fit_merge(hc_sp_size, c); /* FIT_1 .. FIT_8: the program's own classes (hc_fit.c) */
#endif
    unsigned k = 1;
    for (size_t i = 0; i < HC_SP_IDX; i++) {
        size_t n = i * HC_SP_Q;
        while (hc_sp_size[k] < n)
            k++;
        unsigned at = k;
        /* FIT_ALIGN8: a request that is a multiple of 16 may hold an object that needs 16-byte
         * alignment, so it takes the next class whose blocks have it, never an 8-aligned one */
        while (HC_SP_Q == 8 && n % 16 == 0 && hc_sp_size[at] % 16)
            at++;
        hc_sp_cls[i] = (uint8_t)at;
    }
    if (HC_RUN_ON)
        hc_run_classes(); /* the requests above MID_RUNS, and the run pages' class (hc_run.c) */
#if SMALL_PAGE_BLOCKS > 0
    /* A page size per class: the smallest power of two from an OS page that holds
     * SMALL_PAGE_BLOCKS blocks (after a header at the page's start), at most the slot. */
    for (unsigned k = 1; k <= c; k++) {
        size_t span = 4096;
        while (span < HC_SP_PAGE && (span - HC_SP_HEAD) / hc_sp_size[k] < (size_t)(SMALL_PAGE_BLOCKS))
            span <<= 1;
        hc_sp_span[k] = (uint32_t)span;
    }
#endif
}

#define HC_SP_PROT (PROT_READ | PROT_WRITE)
#define HC_SP_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

/* [at, at + n) mapped for the layer, exactly there and over nothing: 1 when it is. */
static int hc_sp_map_at(char *at, size_t n)
{
    void *m = mmap(at, n, HC_SP_PROT, HC_SP_FLAGS | MAP_FIXED_NOREPLACE, -1, 0);
    if (m == (void *)at)
        return 1;
    if (m != MAP_FAILED)
        munmap(m, n);
    return 0;
}

/* The low end of a hole of `most` bytes of address space, else of half as many, ... down to
 * `least` (a PROT_NONE probe, never touched and at once unmapped); NULL when none is free. */
static char *hc_sp_hole(size_t most, size_t least)
{
    for (size_t probe = most; probe >= least; probe >>= 1) {
        void *h = mmap(NULL, probe, PROT_NONE, HC_SP_FLAGS, -1, 0);
        if (h != MAP_FAILED) {
            munmap(h, probe);
            return h;
        }
    }
    return NULL;
}

/* The region's first HC_SP_GROW, at the low end of a hole of HC_SP_REGION when one is found
 * (a PROT_NONE probe, never touched and at once unmapped; halved under ulimit -v or valgrind),
 * else anywhere.  NULL when the OS refuses. */
static char *hc_sp_reserve(void)
{
    char *want = hc_sp_hole(HC_SP_REGION, 2 * HC_SP_GROW);
    if (want)
        want = (char *)(((uintptr_t)want + HC_SP_PAGE - 1) & ~(uintptr_t)(HC_SP_PAGE - 1));
    if (want && hc_sp_map_at(want, HC_SP_GROW)) {
        hc_os_huge(want, HC_SP_GROW); /* HUGEPAGE (hc_os.c) */
        return want;
    }
    void *m = mmap(NULL, HC_SP_GROW + HC_SP_PAGE, HC_SP_PROT, HC_SP_FLAGS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *lo = (char *)(((uintptr_t)m + HC_SP_PAGE - 1) & ~(uintptr_t)(HC_SP_PAGE - 1));
    if (lo > (char *)m)
        munmap(m, (size_t)(lo - (char *)m));
    char *hi = (char *)m + HC_SP_GROW + HC_SP_PAGE;
    if (hi > lo + HC_SP_GROW)
        munmap(lo + HC_SP_GROW, (size_t)(hi - (lo + HC_SP_GROW)));
    hc_os_huge(lo, HC_SP_GROW);
    return lo;
}

/* Grow the region in place by its size (or HC_SP_GROW, if the address space above is shorter),
 * up to HC_SP_REGION (hc_sp_mu held): 1 when it grew. */
static int hc_sp_grow(void)
{
    size_t span = hc_sp_region.span16 << 4;
    for (size_t add = span; add >= HC_SP_GROW; add = add > HC_SP_GROW ? HC_SP_GROW : 0) {
        char *at = (char *)hc_sp_base + span;
        if (add > HC_SP_REGION - span || !hc_sp_map_at(at, add))
            continue;
        /* SMALL_HEADERS_APART: headers for the new pages, or the region does not grow by this */
        if (HC_SP_APART
            && !hc_sp_map_at((char *)hc_sp_dir + HC_SP_DIR_BYTES(span), HC_SP_DIR_BYTES(add))) {
            munmap(at, add);
            continue;
        }
        hc_os_huge(at, add);
        __atomic_store_n(&hc_sp_region.span16, (span + add) >> 4, __ATOMIC_RELEASE);
        return 1;
    }
    return 0;
}

/* SMALL_HEADERS_APART: the directory's first headers, for the region's first HC_SP_GROW, at the
 * low end of a hole that would hold the headers of all of HC_SP_REGION (found as the region's
 * is), so that it can grow in place with the region; else anywhere, and the region then grows
 * only while the address space above the directory is free.  0 when the OS refuses. */
static int hc_sp_dir_make(void)
{
    size_t first = HC_SP_DIR_BYTES(HC_SP_GROW);
    char *h = hc_sp_hole(HC_SP_DIR_BYTES(HC_SP_REGION), 2 * first);
    if (h && hc_sp_map_at(h, first)) {
        hc_sp_dir = (struct hc_sp_page *)(void *)h;
        return 1;
    }
    void *m = mmap(NULL, first, HC_SP_PROT, HC_SP_FLAGS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    hc_sp_dir = m;
    return 1;
}

/* Reserve the region and make the tables: 1 when the layer can serve. */
static HC_NOINLINE int hc_sp_setup(void)
{
    int st = __atomic_load_n(&hc_sp_state, __ATOMIC_ACQUIRE);
    if (st)
        return st > 0;
    pthread_mutex_lock(&hc_sp_mu);
    if (!hc_sp_state) {
        char *lo = hc_os_strict_overcommit() ? NULL : hc_sp_reserve();
        if (lo && HC_SP_APART && !hc_sp_dir_make()) {
            munmap(lo, HC_SP_GROW);
            lo = NULL;
        }
        if (!lo) {
            __atomic_store_n(&hc_sp_state, -1, __ATOMIC_RELEASE);
        } else {
            hc_sp_top = lo;
            hc_sp_classes();
            uintptr_t x = (uintptr_t)lo ^ ((uintptr_t)getpid() << 40) ^ (uintptr_t)&x;
            x ^= x >> 31;
            x *= 0x94d049bb133111ebull;
            x ^= x >> 29;
            hc_sp_magic = x | 1u;
            __atomic_store_n(&hc_sp_region.base, (uintptr_t)lo, __ATOMIC_RELAXED);
            __atomic_store_n(&hc_sp_region.span16, HC_SP_GROW >> 4, __ATOMIC_RELEASE);
            __atomic_store_n(&hc_sp_state, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&hc_sp_mu);
    return hc_sp_state > 0;
}

static void hc_sp_exit(void *arg);

static void hc_sp_key_init(void)
{
    hc_sp_keyed = pthread_key_create(&hc_sp_key, hc_sp_exit) == 0;
}

/* Register the calling thread for its exit destructor before it owns any page. */
static HC_NOINLINE int hc_sp_start(struct hc_sp_thread *t)
{
    if (t->state == HC_SP_LIVE)
        return 1;
    if (t->state != HC_SP_NEW)
        return 0;
    t->state = HC_SP_STARTING; /* a malloc from inside pthread_setspecific goes to the heap */
    pthread_once(&hc_sp_once, hc_sp_key_init);
    if (!hc_sp_keyed || pthread_setspecific(hc_sp_key, t) != 0) {
        t->state = HC_SP_DEAD;
        return 0;
    }
    t->state = HC_SP_LIVE;
    return 1;
}

/* ---- lists ---- */

static inline struct hc_sp_page *hc_sp_avail(struct hc_sp_thread *t, unsigned c)
{
    return t->cur[c] == &hc_sp_none ? NULL : t->cur[c];
}

static void hc_sp_unlink(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    unsigned c = pg->cls;
    hc_pk_leave(t, pg);
    if (pg->prev)
        pg->prev->next = pg->next;
    else if (pg->where == HC_SP_AVAIL)
        t->cur[c] = pg->next ? pg->next : &hc_sp_none;
    else
        t->full[c] = pg->next;
    if (pg->next)
        pg->next->prev = pg->prev;
    if (pg->where == HC_SP_FULL) {
        t->nfull[c]--;
        pg->used &= ~HC_SP_FULLBIT;
    }
    pg->next = pg->prev = NULL;
}

/* Onto class c's available list: at its head (malloc pops it next) or just after the head. */
static void hc_sp_push_avail(struct hc_sp_thread *t, struct hc_sp_page *pg, int head)
{
    unsigned c = pg->cls;
    struct hc_sp_page *h = hc_sp_avail(t, c);
    pg->where = HC_SP_AVAIL;
    if (head || !h) {
        pg->prev = NULL;
        pg->next = h;
        if (h)
            h->prev = pg;
        t->cur[c] = pg;
    } else {
        pg->prev = h;
        pg->next = h->next;
        if (h->next)
            h->next->prev = pg;
        h->next = pg;
    }
}

static void hc_sp_push_full(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    unsigned c = pg->cls;
    pg->where = HC_SP_FULL;
    pg->used |= HC_SP_FULLBIT;
    pg->prev = NULL;
    pg->next = t->full[c];
    if (pg->next)
        pg->next->prev = pg;
    t->full[c] = pg;
    t->nfull[c]++;
}

/* The atomic list's word: user addresses fit in 47 bits, a page's blocks (at most 4,080) in 16. */
#define HC_SP_XSHIFT 48u
#define HC_SP_XHEAD(x) ((void *)((x) & (((uintptr_t)1 << HC_SP_XSHIFT) - 1)))

/* Another thread's free of p onto pg's atomic list: one compare-and-swap, the count with it. */
static inline void hc_sp_xpush(struct hc_sp_page *pg, void *p)
{
    uintptr_t head = __atomic_load_n(&pg->xfree, __ATOMIC_RELAXED), x;
    do {
        *(void **)p = HC_SP_XHEAD(head);
        x = (uintptr_t)p | ((head >> HC_SP_XSHIFT) + 1) << HC_SP_XSHIFT;
    } while (!__atomic_compare_exchange_n(&pg->xfree, &head, x, 1, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
}

/* Take the blocks other threads freed onto pg's own list (pg's owner, or anyone holding hc_sp_mu
 * for a page no thread owns).  The list's length comes with it, so when the page's own list is
 * empty (malloc's slow path) the blocks are not walked here: each block's link was written by
 * another core, and a walk was a chain of misses that the pops, prefetching one block ahead,
 * overlap with the program's work. */
static void hc_sp_collect(struct hc_sp_page *pg)
{
    if (!__atomic_load_n(&pg->xfree, __ATOMIC_RELAXED))
        return;
    uintptr_t x = __atomic_exchange_n(&pg->xfree, 0, __ATOMIC_ACQUIRE);
    if (!x)
        return;
    uint32_t n = (uint32_t)(x >> HC_SP_XSHIFT);
    void *first = HC_SP_XHEAD(x);
    if (pg->free) {
        void *last = first;
        while (*(void **)last)
            last = *(void **)last;
        *(void **)last = pg->free;
    }
    pg->free = first;
    hc_rm_count_take(n);
    if (!hc_pk_runs(pg)) /* (a run's free was counted when it was freed: hc_sp_free) */
        hc_sp_count_free(n, (uint64_t)n * pg->size);
    if (hc_unlikely(n > (pg->used & ~HC_SP_FULLBIT)))
        hc_fail("free(): double free (a block freed twice by other threads)");
    pg->used -= n;
}

/* ---- the empty pool and the decay (hc_sp_mu held) ---- */

static size_t hc_sp_release(struct hc_sp_page *pg)
{
    char *mem = hc_sp_mem(pg), *from = mem + (HC_SP_APART ? 0 : hc_page()); /* never the header */
    size_t done = hc_os_release(from, mem + HC_SP_PAGE);
    pg->released = 1;
    pg->zero_from = from;
    hc_sp_released_bytes += done;
    return done;
}

/* Off the empty pool, wherever the page lies on it (hc_sp_take takes the head, the decay and
 * SMALL_YIELD the tail). */
static void hc_sp_dirty_unlink(struct hc_sp_page *pg)
{
    if (pg->prev)
        pg->prev->next = pg->next;
    else
        hc_sp_dirty = pg->next;
    if (pg->next)
        pg->next->prev = pg->prev;
    else
        hc_sp_dirty_tail = pg->prev;
    hc_sp_ndirty--;
}

/* The empty pool's oldest page (its tail: hc_sp_take reuses from the head) released and moved to
 * the clean list; the bytes given back. */
static size_t hc_sp_release_oldest(void)
{
    struct hc_sp_page *pg = hc_sp_dirty_tail;
    hc_sp_dirty_unlink(pg);
    size_t done = hc_sp_release(pg);
    pg->prev = NULL;
    pg->next = hc_sp_clean;
    hc_sp_clean = pg;
    hc_sp_nclean++;
    return done;
}

/* SMALL_EMPTY (beyond the paper): how many empty pages may stay resident -- 1/SMALL_EMPTY of
 * the pages in use, at least HC_SP_EMPTY_MIN -- before the oldest are released after DECAY_MS / 8
 * instead of DECAY_MS, and whatever DECAY_BYTES says.  The decay alone kept up to DECAY_BYTES (16 pages) resident for good and
 * more for DECAY_MS: gawk ended with 45 of its 78 pages empty, 0.6 MiB of peak RSS over
 * glibc's.  Releasing every empty page at once instead raised python3's page faults 5x: it
 * drops a container (many pages empty at once, the pages in use fall) and refills them within
 * milliseconds, so the pages past the bound still wait DECAY_MS / 8 (62 ms at the default; a
 * python3 run keeps its faults, 3.9-4.0 k).  The bound is jemalloc's old active:dirty ratio
 * (lg_dirty_mult) in spirit.  SIZE_MAX: no bound.  hc_sp_mu held (the region's top moves only under it). */
#define HC_SP_EMPTY_MIN 4u
static HC_UNUSED size_t hc_sp_keep(void)
{
#if SMALL_EMPTY > 0
    size_t carved = (size_t)(hc_sp_top - (char *)hc_sp_base) / HC_SP_PAGE;
    size_t idle = hc_sp_ndirty + hc_sp_nclean, keep = carved > idle ? (carved - idle) / (SMALL_EMPTY) : 0;
    return keep > HC_SP_EMPTY_MIN ? keep : HC_SP_EMPTY_MIN;
#else
    return SIZE_MAX;
#endif
}

/* Release the oldest empty pages: all of them (malloc_trim), or those past hc_sp_keep's bound,
 * and those empty for DECAY_MS once the pool's unreleased pages reach DECAY_BYTES. */
static size_t hc_sp_decay(int all)
{
    size_t done = 0;
#if DECAY_MS > 0
    uint64_t now = 0;
    size_t keep = SIZE_MAX;
    int aged = 0;
    if (!all) {
        if (hc_arenas[0].os.decay_off)
            return 0;
        keep = hc_sp_keep();
        aged = hc_sp_ndirty * HC_SP_PAGE >= hc_arenas[0].os.decay_bytes;
        if (hc_sp_ndirty <= keep && !aged)
            return 0;
        now = hc_os_now_ms();
    }
#define HC_SP_DECAYED(pg) (now - (pg)->stamp >= (uint64_t)(DECAY_MS) / (hc_sp_ndirty > keep ? 8 : 1) && \
                           (aged || hc_sp_ndirty > keep))
#else
    if (!all)
        return 0;
#define HC_SP_DECAYED(pg) 0
#endif
    while (hc_sp_dirty_tail && (all || HC_SP_DECAYED(hc_sp_dirty_tail)))
        done += hc_sp_release_oldest();
    return done;
}

/* SMALL_YIELD (beyond the paper): the paper's heap grew by n bytes (hc_heap.c's hc_heap_grow,
 * under its arena's lock, so hc_sp_mu is only tried): while the empty pool holds more pages than
 * hc_sp_keep's bound, the oldest are released now, at least n bytes' worth rounded up to whole
 * pages, instead of after DECAY_MS / 8.  The pages cannot serve the heap, and the heap's growth is
 * memory the process needs now: sqlite3's script frees 165 MiB of 1,032-byte blocks at the end of
 * a sort, and its next phase grew the heap by ~18 MiB for page-cache blocks while the emptied
 * pages still waited for the decay, so HC's peak RSS was the sum of both (glibc's freed blocks
 * coalesce and serve that growth).  Pages within the bound are kept (python3 drops a container
 * and refills its pages within milliseconds; docs/allocator-bench.md, "Empty pages yield to the
 * heap").  Most recently emptied pages, which hc_sp_take reuses first, go last.
 * At SMALL_YIELD=2, only while the empty pool holds more pages than are in use: a phase that
 * emptied most of its pages (sqlite3's sort: 2,700 empty against 115 in use when its heap grows),
 * not a program that drops a container and refills its pages within milliseconds (python3: 49
 * empty against 127 in use when its dicts grow the heap; at 1 its 13 pages released so came
 * back as 208 more page faults, +5 %). */
static HC_UNUSED void hc_sp_yield(size_t n)
{
#if SMALL_YIELD
    if (__atomic_load_n(&hc_sp_ndirty, __ATOMIC_RELAXED) <= HC_SP_EMPTY_MIN ||
        __atomic_load_n(&hc_sp_state, __ATOMIC_RELAXED) <= 0 || pthread_mutex_trylock(&hc_sp_mu) != 0)
        return;
    size_t keep = hc_sp_keep(), pages = (n + HC_SP_PAGE - 1) / HC_SP_PAGE;
#if SMALL_YIELD >= 2
    size_t carved = (size_t)(hc_sp_top - (char *)hc_sp_base) / HC_SP_PAGE;
    if (hc_sp_ndirty <= carved - hc_sp_ndirty - hc_sp_nclean)
        pages = 0; /* no more empty pages than pages in use */
#endif
    for (; pages && hc_sp_ndirty > keep && hc_sp_dirty_tail; pages--)
        hc_sp_release_oldest();
    pthread_mutex_unlock(&hc_sp_mu);
#else
    (void)n;
#endif
}

/* From the heap's decay (hc_os.c's hc_os_decay, on allocation slow paths of any arena), so that
 * empty pages are given back even when the program no longer touches small sizes. */
static HC_UNUSED void hc_sp_decay_tick(void)
{
    size_t dirty = __atomic_load_n(&hc_sp_ndirty, __ATOMIC_RELAXED);
    if (dirty * HC_SP_PAGE < hc_arenas[0].os.decay_bytes && (SMALL_EMPTY <= 0 || dirty <= HC_SP_EMPTY_MIN))
        return;
    if (pthread_mutex_trylock(&hc_sp_mu) != 0)
        return;
    hc_sp_decay(0);
    pthread_mutex_unlock(&hc_sp_mu);
}

static void hc_sp_retire_locked(struct hc_sp_page *pg)
{
    __atomic_store_n(&pg->owner, NULL, __ATOMIC_RELAXED);
    pg->size = 0;
    pg->where = HC_SP_EMPTY;
    pg->released = 0;
#if DECAY_MS > 0
    pg->stamp = hc_os_now_ms();
#endif
    pg->prev = NULL;
    pg->next = hc_sp_dirty;
    if (hc_sp_dirty)
        hc_sp_dirty->prev = pg;
    else
        hc_sp_dirty_tail = pg;
    hc_sp_dirty = pg;
    hc_sp_ndirty++;
}

static void hc_sp_retire(struct hc_sp_page *pg)
{
    pthread_mutex_lock(&hc_sp_mu);
    hc_sp_retire_locked(pg);
    hc_sp_decay(0);
    pthread_mutex_unlock(&hc_sp_mu);
}

/* Orphans whose blocks all came back go to the empty pool (hc_sp_mu held). */
static void hc_sp_sweep_orphans(void)
{
    for (unsigned c = 1; c < HC_SP_NCLS; c++) {
        struct hc_sp_page **at = &hc_sp_orphans[c];
        while (*at) {
            struct hc_sp_page *pg = *at;
            hc_sp_collect(pg);
            if (pg->used == 0) {
                *at = pg->next;
                hc_sp_norphans--;
                hc_sp_retire_locked(pg);
            } else {
                at = &pg->next;
            }
        }
    }
    hc_sp_carved_since_sweep = 0;
}

/* Make pg a page of class c owned by t, its blocks laid out by its kind, all free. */
static void hc_sp_format(struct hc_sp_thread *t, struct hc_sp_page *pg, unsigned c, int fresh)
{
    pg->size = hc_sp_size[c];
    pg->cls = c;
    pg->kind = hc_pk_of_class(c);
    if (fresh)
        pg->zero_from = hc_sp_mem(pg) + HC_SP_HEAD;
    else if (!pg->released)
        pg->zero_from = hc_sp_mem(pg) + HC_SP_PAGE;
    pg->released = 0;
    pg->free = NULL;
    __atomic_store_n(&pg->xfree, 0, __ATOMIC_RELAXED);
    hc_pk_format(t, pg);
    __atomic_store_n(&pg->owner, t, __ATOMIC_RELAXED);
}

/* A page for class c that no thread owns: an orphan of the class (adopted, owner set), else an
 * empty page, else a new one from the region; NULL when the region is used up. */
static struct hc_sp_page *hc_sp_take(struct hc_sp_thread *t, unsigned c)
{
    struct hc_sp_page *pg;
    pthread_mutex_lock(&hc_sp_mu);
    if ((pg = hc_sp_orphans[c]) != NULL) {
        hc_sp_orphans[c] = pg->next;
        hc_sp_norphans--;
        __atomic_store_n(&pg->owner, t, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&hc_sp_mu);
        hc_sp_collect(pg);
        hc_pk_adopt(t, pg);
        return pg;
    }
    if (hc_sp_norphans && hc_sp_carved_since_sweep * 8 >= hc_sp_norphans)
        hc_sp_sweep_orphans();
    int fresh = 0;
    if ((pg = hc_sp_dirty) != NULL) {
        hc_sp_dirty_unlink(pg);
    } else if ((pg = hc_sp_clean) != NULL) {
        hc_sp_clean = pg->next;
        hc_sp_nclean--;
    } else {
        char *p = hc_sp_top;
        if ((size_t)(p + HC_SP_PAGE - (char *)hc_sp_base) > hc_sp_region.span16 << 4
            && !hc_sp_grow()) {
            pthread_mutex_unlock(&hc_sp_mu);
            return NULL;
        }
        __atomic_store_n(&hc_sp_top, p + HC_SP_PAGE, __ATOMIC_RELAXED);
        pg = hc_sp_page_of(p);
        hc_sp_carved_since_sweep++;
        fresh = 1;
    }
    hc_sp_format(t, pg, c, fresh);
    pthread_mutex_unlock(&hc_sp_mu);
    return pg;
}

/* Other threads' frees into t's full pages of class c: pages with free blocks go back to the
 * available list; a page that came back whole is kept if nothing else is available, else
 * retired.  1 when a page became available. */
static int hc_sp_scan_full(struct hc_sp_thread *t, unsigned c)
{
    int found = 0;
    t->fresh[c] = 0;
    for (struct hc_sp_page *pg = t->full[c], *next; pg; pg = next) {
        next = pg->next;
        if (!__atomic_load_n(&pg->xfree, __ATOMIC_RELAXED))
            continue;
        hc_sp_collect(pg);
        hc_sp_unlink(t, pg);
        if (pg->used == 0 && found) {
            hc_sp_retire(pg);
        } else {
            hc_sp_push_avail(t, pg, 0);
            found = 1;
        }
    }
    return found;
}

#if HC_DEBUG
static HC_COLD void hc_sp_fail(const char *what, void *p)
{
    char buf[200];
    int n = snprintf(buf, sizeof buf, "hcmalloc: heap check failed: %s (small block %p)\n", what, p);
    if (n > 0)
        hc_write_all(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    abort();
}

/* A class page's counts: free list + blocks never handed out + used = its blocks (less the
 * other threads' frees not yet collected, which used still counts), every free block on a
 * boundary; every: each block handed out has its red zone intact too. */
static void hc_class_check(struct hc_sp_page *pg, int every)
{
    char *first = hc_sp_mem(pg) + HC_SP_HEAD;
    size_t size = pg->size, blocks = (size_t)(pg->end - first) / size, nfree = 0;
    if (!size || pg->bump < first || pg->bump > pg->end || (size_t)(pg->bump - first) % size)
        hc_sp_fail("page header overwritten", pg);
    for (char *b = pg->free; b; b = *(char **)b) {
        if (b < first || b >= pg->bump || (size_t)(b - first) % size)
            hc_sp_fail("free-list link is not a block of its page (block overwritten?)", b);
        if (b < pg->bump)
            hc_sp_red_check(b, size);
        if (++nfree > blocks)
            hc_sp_fail("free list longer than the page (a cycle: double free?)", b);
    }
    if (nfree + (size_t)(pg->end - pg->bump) / size + (pg->used & ~HC_SP_FULLBIT) != blocks)
        hc_sp_fail("page's free, unused and used blocks do not add up", pg);
    for (char *b = first; every && b < pg->bump; b += size)
        hc_sp_red_check(b, size);
}

/* What a free on a class page touched, checked on every free: the page's header, the freed
 * block p (now the head of the free list) and the block its link leads to, the old head --
 * bounded work, where a walk of the whole page's free list on every free made a program with
 * thousands of free blocks on a page (glibc's tst-malloc-too-large) quadratic.  The whole page
 * is walked by the periodic walk below (hc_class_check). */
static void hc_class_check_touched(struct hc_sp_page *pg, void *p)
{
    char *first = hc_sp_mem(pg) + HC_SP_HEAD, *next = *(char **)p;
    size_t size = pg->size;
    if (!size || pg->bump < first || pg->bump > pg->end || (size_t)(pg->bump - first) % size)
        hc_sp_fail("page header overwritten", pg);
    if (next && (next < first || next >= pg->bump || (size_t)(next - first) % size))
        hc_sp_fail("free-list link is not a block of its page (block overwritten?)", next);
    if (next)
        hc_sp_red_check(next, size);
}

/* The periodic walk (HCMALLOC_CHECK, hc_debug.c's period): every block of every page the
 * calling thread owns has its red zone intact (other threads' pages are theirs to walk). */
static void hc_sp_dbg_tick(struct hc_sp_thread *t)
{
    if (hc_unlikely(!hc_dbg.ready))
        hc_dbg_setup();
    uint64_t period = hc_dbg.period;
    if (!period || ++t->dbg_calls < period)
        return;
    t->dbg_calls = 0;
    for (unsigned c = 1; c < HC_SP_NCLS; c++) {
        struct hc_sp_page *lists[2] = { hc_sp_avail(t, c), t->full[c] };
        for (int k = 0; k < 2; k++)
            for (struct hc_sp_page *pg = lists[k]; pg; pg = pg->next)
                hc_pk_check(pg, 1);
    }
}

#define HC_SP_NOT_OURS "free of a pointer that malloc did not return (not a block of its small page)"

/* p is a block boundary of a class page, handed out (below the bump pointer). */
static void hc_class_check_arg(struct hc_sp_page *pg, void *p)
{
    char *first = hc_sp_mem(pg) + HC_SP_HEAD;
    if ((char *)p < first || (char *)p >= pg->bump || (size_t)((char *)p - first) % pg->size)
        hc_sp_fail(HC_SP_NOT_OURS, p);
    hc_sp_red_check(p, pg->size);
}

/* p is a block of a page in use. */
static void hc_sp_check_arg(void *p)
{
    struct hc_sp_page *pg = hc_sp_page_of(p);
    if (!pg->size)
        hc_sp_fail(HC_SP_NOT_OURS, p);
    hc_pk_check_arg(pg, p);
}
#endif

#if SMALL_IDLE
/* SMALL_IDLE (beyond the paper): a class keeps its current page when its last block comes back
 * (a class that frees its last block and allocates again must not retire and take a page each
 * time), so a program whose blocks move through the classes -- gawk's strings growing by
 * concatenation, each copy one class up -- left one empty page in every class it passed: 40 of
 * gawk's 77 pages, 2.5 MiB, counting the words of 40,000 lines.  Such pages are marked when they
 * empty (hc_sp_free_owner_slow); when the thread needs a page and the empty pool has none (the
 * page would come from the region, or be faulted back in after a release), its marked pages
 * still empty go to the pool first, so the class that needs one reuses them. */
static HC_NOINLINE void hc_sp_idle_give(struct hc_sp_thread *t)
{
    int locked = 0;
    for (unsigned w = 0; w < 2; w++)
        for (uint64_t bits = t->idle[w]; bits; bits &= bits - 1) {
            unsigned c = w * 64 + (unsigned)__builtin_ctzll(bits);
            struct hc_sp_page *pg = t->cur[c];
            if (pg == &hc_sp_none || pg->used != 0 || pg->where != HC_SP_AVAIL)
                continue; /* used again since, or gone */
            hc_sp_collect(pg);
            hc_sp_unlink(t, pg);
            if (!locked) {
                pthread_mutex_lock(&hc_sp_mu);
                locked = 1;
            }
            hc_sp_retire_locked(pg);
        }
    t->idle[0] = t->idle[1] = 0;
    if (locked) {
        hc_sp_decay(0);
        pthread_mutex_unlock(&hc_sp_mu);
    }
}
#endif

/* ---- the class pages' kind (HC_PK_CLASS, hc_page.h) ---- */

/* pg's blocks from the start: none handed out, the bump pointer at the first. */
static void hc_class_format(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    char *first = hc_sp_mem(pg) + HC_SP_HEAD;
    size_t span = hc_sp_span[pg->cls] ? hc_sp_span[pg->cls] : HC_SP_PAGE; /* SMALL_PAGE_BLOCKS */
    (void)t;
    pg->end = first + (span - HC_SP_HEAD) / pg->size * pg->size;
    pg->bump = first;
    pg->used = 0;
}

/* The owner freed into a class page that is full, or that is now empty (hc_pk_free_owner). */
static void hc_class_free_owner(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    if (pg->where == HC_SP_FULL) {
        hc_sp_unlink(t, pg);
        hc_sp_push_avail(t, pg, 0);
    }
    if (pg->used == 0 && pg != t->cur[pg->cls]) {
        hc_sp_unlink(t, pg);
        hc_sp_retire(pg);
    }
#if SMALL_IDLE
    else if (pg->used == 0)
        t->idle[pg->cls >> 6] |= (uint64_t)1 << (pg->cls & 63);
#endif
}

static inline size_t hc_class_usable(struct hc_sp_page *pg, void *p)
{
    (void)p;
    return pg->size - HC_SP_RED;
}

static void hc_class_totals(struct hc_sp_page *pg, uint32_t used, struct hc_sp_totals *to)
{
    to->blocks += used;
    to->bytes += (uint64_t)used * pg->size;
}

/* fork's child (hc_sp_fork_child): every block below the bump pointer counts as used (the local
 * free list, dropped, may be a carve's half-linked one), and the page is adopted as any orphan. */
static int hc_class_fork_child(struct hc_sp_page *pg)
{
    char *first = hc_sp_mem(pg) + HC_SP_HEAD;
    pg->used = pg->size ? (uint32_t)((size_t)(pg->bump - first) / pg->size) : 0;
#if HC_DEBUG
    /* ...and a red zone caught half written: the red zones are stamped again (they lie past
     * every block's usable size; an overflow is the parent's to catch). */
    for (char *b = first; pg->size && b < pg->bump; b += pg->size)
        memset(b + pg->size - HC_SP_RED, HC_SP_RED_BYTE, HC_SP_RED);
#endif
    return 1;
}

/* ---- malloc ---- */

static HC_NOINLINE void *hc_sp_malloc_slow(size_t n, int *clean)
{
    if (hc_unlikely(hc_sp_state <= 0) && (hc_sp_state < 0 || !hc_sp_setup()))
        return NULL;
    struct hc_sp_thread *t = &hc_sp_me;
    if (hc_unlikely(t->state != HC_SP_LIVE) && !hc_sp_start(t))
        return NULL;
    size_t want = HC_SP_RED && n < 16 ? 16 + HC_SP_RED : n + HC_SP_RED; /* links + red zone */
    if (HC_SP_RED && want > HC_SP_LIMIT)
        return NULL; /* no room for the red zone: the paper's heap */
    unsigned c = hc_sp_cls[(want + HC_SP_Q - 1) >> HC_SP_QSHIFT];
    if (!c)
        c = 1;
    if (HC_RUN_ON && c == HC_RUN_RCLS)
        return hc_run_malloc(t, n, clean); /* mid sizes: runs of granules (hc_run.c) */
    char *b = hc_rm_take(c); /* a block of another thread's page this thread freed */
    if (b) {
        *clean = 0;
#if HC_DEBUG
        hc_sp_red_check(b, hc_sp_page_of(b)->size);
        hc_sp_dbg_tick(t);
#endif
        *hc_sp_keyp(b) = 0;
        return b;
    }
    struct hc_sp_page *pg;
    for (;;) {
        while ((pg = hc_sp_avail(t, c)) != NULL) {
            hc_sp_collect(pg);
            if (pg->free || pg->bump < pg->end)
                break;
            hc_sp_unlink(t, pg);
            hc_sp_push_full(t, pg);
        }
        if (pg)
            break;
        if (t->nfull[c] && t->fresh[c] * 8 >= t->nfull[c] && hc_sp_scan_full(t, c))
            continue;
#if SMALL_IDLE
        if ((t->idle[0] | t->idle[1]) && !__atomic_load_n(&hc_sp_ndirty, __ATOMIC_RELAXED))
            hc_sp_idle_give(t);
#endif
        if ((pg = hc_sp_take(t, c)) == NULL)
            return NULL;
        t->fresh[c]++;
        hc_sp_push_avail(t, pg, 1);
    }
    b = pg->free;
    if (b) {
        pg->free = *(void **)b;
        __builtin_prefetch(pg->free, 1); /* as hc_sp_pop does */
        *clean = 0;
#if HC_DEBUG
        hc_sp_red_check(b, pg->size);
#endif
    } else {
        /* From the bump pointer: this block, and the rest of its OS page onto the free list. */
        size_t size = pg->size;
        b = pg->bump;
        *clean = b >= pg->zero_from;
        char *lim = (char *)(((uintptr_t)b + size + 4095) & ~(uintptr_t)4095);
        if (lim > pg->end)
            lim = pg->end;
        char *q = b + size;
        void **tail = &pg->free;
        for (; q + size <= lim; q += size) {
            *tail = q;
            tail = (void **)(void *)q;
#if HC_DEBUG
            memset(q + size - HC_SP_RED, HC_SP_RED_BYTE, HC_SP_RED);
#endif
        }
        *tail = NULL;
        pg->bump = q;
    }
    pg->used++;
    hc_sp_count_alloc(t, pg->size, 1);
    hc_sp_rebase(t); /* (picks up what exited threads left) */
#if HC_DEBUG
    memset(b + pg->size - HC_SP_RED, HC_SP_RED_BYTE, HC_SP_RED);
    hc_class_check(pg, 0);
    hc_sp_dbg_tick(t);
#endif
    if (!*clean)
        *hc_sp_keyp(b) = 0;
    return b;
}

/* malloc's fast path for n <= HC_SP_LIMIT: a pop of the free list of the thread's current page
 * of the class, or NULL (then hc_sp_malloc_slow).  The debug build always takes the slow path,
 * which checks the page. */
static inline __attribute__((always_inline)) void *hc_sp_pop(size_t n)
{
#if !HC_DEBUG
    unsigned c = hc_sp_cls[(n + HC_SP_Q - 1) >> HC_SP_QSHIFT];
    struct hc_sp_page *pg = hc_sp_me.cur[c];
    void *b = pg->free;
    if (hc_likely(b != NULL)) {
        hc_sp_count_alloc(&hc_sp_me, hc_sp_size[c], 1);
        void *next = *(void **)b;
        pg->free = next;
        /* The next pop reads this block's link, most often from a cold line (a program that
         * freed many blocks a while ago gets them back in that order): start fetching it now,
         * so that pops are not a chain of misses (a prefetch of NULL never faults).  Without it
         * python3 (PYTHONMALLOC=malloc) spent a fifth of its samples on this load. */
        __builtin_prefetch(next, 1);
        pg->used++;
        *hc_sp_keyp(b) = 0;
        return b;
    }
#else
    (void)n;
#endif
    return NULL;
}

/* ---- free ---- */

static HC_COLD void hc_sp_double_free_check(struct hc_sp_page *pg, void *p)
{
    if (pg->owner != &hc_sp_me) {
        hc_rm_double_free_check(pg, p); /* kept by this thread (REMOTE_KEEP)? */
        return; /* another thread's page: its free list is not ours to walk */
    }
    for (void *q = pg->free; q; q = *(void **)q)
        if (q == p)
            hc_fail("free(): double free (block already free on its page)");
    hc_pk_free_check(&hc_sp_me, pg, p);
}

/* The owner's free that the signed test sent here: a class page full or now empty, or any free
 * of a run (hc_page.h). */
static HC_NOINLINE void hc_sp_free_owner_slow(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    hc_pk_free_owner(t, pg);
}

/* A page no thread owns, or one that is not in use (then p is not a live block). */
static HC_NOINLINE void hc_sp_free_remote(struct hc_sp_page *pg, void *p, uint64_t key)
{
    if (hc_unlikely(!pg->size))
        hc_fail("free(): invalid pointer (not a block of a small page in use, or freed twice)");
    if (hc_rm_keep(pg, p, key))
        return;
    *hc_sp_keyp(p) = key;
    hc_rm_push(pg, p); /* onto the page's atomic list, at once or in a batch (hc_remote.c) */
}

/* The owner's push, else the atomic list (p checked). */
static inline __attribute__((always_inline)) void hc_sp_free_block(struct hc_sp_page *pg, void *p,
                                                                   uint64_t key)
{
    struct hc_sp_thread *t = &hc_sp_me;
    if (hc_likely(__atomic_load_n(&pg->owner, __ATOMIC_RELAXED) == t)) {
#if MONITOR
        if (!hc_pk_runs(pg)) {
            t->n_free++;
            t->live_n--;
            t->live_b -= pg->size;
        }
#endif
        *(void **)p = pg->free;
        *hc_sp_keyp(p) = key;
        pg->free = p;
        if (hc_unlikely((int32_t)--pg->used <= 0))
            hc_sp_free_owner_slow(t, pg);
#if HC_DEBUG
        /* Still t's: a page the slow path retired may already be another thread's, mid-format
         * (its size alone does not tell; only t could make t its owner again). */
        if (__atomic_load_n(&pg->owner, __ATOMIC_RELAXED) == t) {
            if (hc_pk_runs(pg))
                hc_run_check(pg, 0);
            else
                hc_class_check_touched(pg, p);
        }
        hc_sp_dbg_tick(t);
#endif
        return;
    }
    /* Another thread's page (or an orphan): onto its atomic list. */
    hc_sp_free_remote(pg, p, key);
}

/* free of a pointer that is misaligned or carries the freed-block key: checked, then freed. */
static HC_NOINLINE void hc_sp_free_suspect(void *p)
{
    struct hc_sp_page *pg = hc_sp_page_of(p);
    if ((uintptr_t)p & (HC_SP_Q - 1))
        hc_fail("free(): invalid pointer (not a block of a small page)");
    hc_sp_double_free_check(pg, p);
    hc_sp_free_block(pg, p, hc_sp_key_of(p));
}

static inline __attribute__((always_inline)) void hc_sp_free(void *p)
{
    struct hc_sp_page *pg = hc_sp_page_of(p);
    uint64_t key = hc_sp_key_of(p);
#if HC_DEBUG
    hc_sp_check_arg(p);
#endif
    /* p is 16-byte aligned (8 with FIT_ALIGN8): the callers' hc_sp_owns let no other through. */
    if (hc_unlikely(*hc_sp_keyp(p) == key)) {
        hc_sp_free_suspect(p);
        return;
    }
    if (MONITOR && hc_pk_runs(pg))
        hc_sp_count_free(1, hc_run_usable(pg, p));
    hc_sp_free_block(pg, p, key);
}

static inline size_t hc_sp_usable(void *p)
{
    return hc_pk_usable(hc_sp_page_of(p), p);
}

/* ---- thread exit, malloc_trim, fork, statistics ---- */

/* The thread is exiting (pthread key destructor): each of its pages is retired or orphaned
 * (called with no lock held: the purge thread's start may allocate). */
static void hc_sp_exit(void *arg)
{
    struct hc_sp_thread *t = arg;
    size_t orphaned = 0;
    hc_rm_exit(); /* kept blocks back onto their pages' lists, first: some may be t's own */
    hc_pk_flush(t); /* what the kinds hold back (runs kept whole, hc_run.c) */
    t->state = HC_SP_DEAD;
    pthread_mutex_lock(&hc_sp_mu);
    for (unsigned c = 1; c < HC_SP_NCLS; c++) {
        struct hc_sp_page *lists[2] = { hc_sp_avail(t, c), t->full[c] };
        for (int k = 0; k < 2; k++)
            for (struct hc_sp_page *pg = lists[k], *next; pg; pg = next) {
                next = pg->next;
                pg->used &= ~HC_SP_FULLBIT;
                hc_pk_disown(pg); /* used: the page's live blocks, from now on */
                hc_sp_collect(pg);
                if (pg->used == 0) {
                    hc_sp_retire_locked(pg);
                } else {
                    __atomic_store_n(&pg->owner, NULL, __ATOMIC_RELAXED);
                    pg->where = HC_SP_ORPHAN;
                    pg->prev = NULL;
                    pg->next = hc_sp_orphans[c];
                    hc_sp_orphans[c] = pg;
                    hc_sp_norphans++;
                    orphaned++;
                }
            }
        t->cur[c] = &hc_sp_none;
        t->full[c] = NULL;
        t->nfull[c] = 0;
    }
    hc_sp_decay(0);
    pthread_mutex_unlock(&hc_sp_mu);
    hc_rm_exit_counts();
#if MONITOR
    hc_sp_rebase(t); /* its maxima into max_* */
    uint64_t mine[4] = { t->n_free, t->b_alloc, (uint64_t)t->live_n, (uint64_t)t->live_b };
    for (int i = 0; i < 4; i++)
        __atomic_fetch_add(&hc_sp_gone[i], mine[i], __ATOMIC_RELAXED);
    t->n_free = t->b_alloc = 0;
    t->live_n = t->live_b = 0;
    pthread_mutex_lock(&hc_sp_mu);
    if (t->max_n > hc_sp_gone_max[0])
        hc_sp_gone_max[0] = t->max_n;
    if (t->max_b > hc_sp_gone_max[1])
        hc_sp_gone_max[1] = t->max_b;
    pthread_mutex_unlock(&hc_sp_mu);
#endif
    /* Orphans left: the purge thread (started now if no thread with an arena has exited yet)
     * sweeps them once other threads have freed their blocks (hc_sp_purge_try). */
    if (orphaned)
        HC_PURGE_START(1);
}

/* malloc_trim: the calling thread collects other threads' frees on every page it owns (its
 * available pages too: a producer whose blocks all came back through the atomic lists would
 * otherwise keep them counted live and its pages owned), its empty pages retired (the current
 * page of each class kept), orphans swept, every empty page released.  The bytes released. */
static size_t hc_sp_trim(void)
{
    if (hc_sp_state <= 0)
        return 0;
    struct hc_sp_thread *t = &hc_sp_me;
    hc_rm_flush(); /* kept blocks back onto their pages' lists */
    if (t->state == HC_SP_LIVE)
        hc_pk_flush(t); /* what the kinds hold back (runs kept whole, hc_run.c) */
    if (t->state == HC_SP_LIVE)
        for (unsigned c = 1; c < HC_SP_NCLS; c++) {
            struct hc_sp_page *lists[2] = { hc_sp_avail(t, c), t->full[c] };
            for (int k = 0; k < 2; k++)
                for (struct hc_sp_page *pg = lists[k], *next; pg; pg = next) {
                    next = pg->next;
                    hc_sp_collect(pg);
                    if (hc_pk_is_empty(pg) && pg != t->cur[c]) {
                        hc_sp_unlink(t, pg);
                        hc_sp_retire(pg);
                    } else if (pg->where == HC_SP_FULL && pg->free) {
                        hc_sp_unlink(t, pg);
                        hc_sp_push_avail(t, pg, 0);
                    }
                }
        }
    pthread_mutex_lock(&hc_sp_mu);
    hc_sp_sweep_orphans();
    size_t done = hc_sp_decay(1);
    pthread_mutex_unlock(&hc_sp_mu);
    return done;
}

/* Pages taken, and the blocks and bytes handed out on them: a walk of every page (the owners
 * keep their counts without atomics, so a page another thread is working on is read as it
 * happens to be; the numbers are exact when the other threads are quiet). */
static struct hc_sp_totals hc_sp_totals(void)
{
    struct hc_sp_totals t = { 0, 0, 0, 0 };
    if (__atomic_load_n(&hc_sp_state, __ATOMIC_ACQUIRE) <= 0)
        return t;
    char *top = __atomic_load_n(&hc_sp_top, __ATOMIC_ACQUIRE);
    for (char *p = (char *)hc_sp_base; p < top; p += HC_SP_PAGE) {
        struct hc_sp_page *pg = hc_sp_page_of(p);
        uint32_t size = __atomic_load_n(&pg->size, __ATOMIC_RELAXED);
        uint32_t used = __atomic_load_n(&pg->used, __ATOMIC_RELAXED) & ~HC_SP_FULLBIT;
        t.pages++;
        if (size)
            hc_pk_totals(pg, used, &t);
    }
    return t;
}

/* The statistics: the pages count in the heap (heap_bytes) and the footprint (the region is
 * never unmapped), their blocks in allocs_current and bytes_current (the walk); with MONITOR in
 * the totals and maxima too ("counts", above). */
static void hc_sp_stats(struct hc_stats *out)
{
    struct hc_sp_totals t = hc_sp_totals();
    if (!t.pages)
        return;
    hc_rm_stats(out);
    pthread_mutex_lock(&hc_sp_mu);
    out->small_pages = t.pages;
    out->small_pages_empty = hc_sp_ndirty + hc_sp_nclean;
    out->small_bytes_released = hc_sp_released_bytes;
    pthread_mutex_unlock(&hc_sp_mu);
    out->run_pages = t.runs;
    out->heap_bytes += t.pages * HC_SP_PAGE;
    out->footprint += hc_sp_taken(t.pages);
    out->allocs_current += t.blocks;
    out->bytes_current += t.bytes;
#if MONITOR
    struct hc_sp_thread *me = &hc_sp_me;
    hc_sp_rebase(me); /* its maxima into max_* */
    uint64_t gone[4];
    for (int i = 0; i < 4; i++)
        gone[i] = __atomic_load_n(&hc_sp_gone[i], __ATOMIC_RELAXED);
    out->allocs_total += gone[0] + gone[2] + me->n_free + (uint64_t)me->live_n;
    out->bytes_total += gone[1] + me->b_alloc;
    out->frees += gone[0] + me->n_free;
    pthread_mutex_lock(&hc_sp_mu);
    uint64_t max_n = hc_sp_gone_max[0] > me->max_n ? hc_sp_gone_max[0] : me->max_n;
    uint64_t max_b = hc_sp_gone_max[1] > me->max_b ? hc_sp_gone_max[1] : me->max_b;
    pthread_mutex_unlock(&hc_sp_mu);
    if (max_n > out->allocs_max)
        out->allocs_max = max_n;
    if (max_b > out->bytes_max)
        out->bytes_max = max_b;
    /* Never below what the walk finds (blocks kept back count in use on their pages: runs kept
     * whole, REMOTE_KEEP). */
    if (out->allocs_current > out->allocs_max)
        out->allocs_max = out->allocs_current;
    if (out->bytes_current > out->bytes_max)
        out->bytes_max = out->bytes_current;
#endif
}

/* The purge thread's visit (hc_arena.c, PURGE_THREAD): the empty pool's decay, if its lock is
 * free at this instant (never a wait); 1 while empty pages wait for release.  Pages retired
 * shortly before a program went quiet are released by it, not by a later retire that may never
 * come. */
static HC_UNUSED int hc_sp_purge_try(void)
{
    if (__atomic_load_n(&hc_sp_state, __ATOMIC_ACQUIRE) <= 0)
        return 0;
    if (pthread_mutex_trylock(&hc_sp_mu) != 0)
        return 1;
    /* Orphans whose blocks have all come back (an exited thread's blocks freed by the threads
     * it handed them to) become empty pages here, for the decay below; otherwise they wait for
     * a thread to take a new page or call malloc_trim, which a quiet program never does. */
    if (hc_sp_norphans)
        hc_sp_sweep_orphans();
    hc_sp_decay(0);
    /* Enough empty pages not yet released for the decay to act on: come back soon. */
    int pending = hc_sp_ndirty * HC_SP_PAGE >= hc_arenas[0].os.decay_bytes;
    pthread_mutex_unlock(&hc_sp_mu);
    return pending;
}

/* fork: called by hc_lock.h's handlers (in its lock order: after the stdio list lock, before
 * the arenas), and only when the process has threads -- single-threaded, nothing is locked. */
static void hc_sp_fork_prepare(void) { pthread_mutex_lock(&hc_sp_mu); }
static void hc_sp_fork_parent(void) { pthread_mutex_unlock(&hc_sp_mu); }

/* In the child only the forking thread lives on: the pages of every other owner are orphaned.
 *
 * Their owners take no lock, so fork copied each of those pages at an instant of its owner's
 * work: between two stores of a push, or in the middle of a carve, which points the page's
 * free list at a block whose link is not written yet (a child that walked it died on the
 * block's old contents).  Nothing the owner writes alone is trusted here, and nothing is
 * walked: the local free list is dropped (its blocks stay counted as used: lost, at most the
 * free blocks the dead threads held), every block below the bump pointer counts as used, and
 * no byte of the page counts as known zero, since a carve may have linked blocks past the
 * bump pointer it had not yet moved.  What other threads wrote is consistent: the atomic list
 * and its count were published by compare-and-swap, after the links they carry, and the page's
 * size, class and end were written under hc_sp_mu, which fork holds.  The next thread to need
 * the class adopts the page and collects the atomic list as for any orphan. */
static void hc_sp_fork_child(void)
{
    hc_sp_mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    if (hc_sp_state <= 0)
        return;
    struct hc_sp_thread *me = &hc_sp_me;
    for (char *p = (char *)hc_sp_base; p < hc_sp_top; p += HC_SP_PAGE) {
        struct hc_sp_page *pg = hc_sp_page_of(p);
        if (!pg->owner || pg->owner == me || (pg->where != HC_SP_AVAIL && pg->where != HC_SP_FULL))
            continue;
        pg->owner = NULL;
        pg->free = NULL;
        pg->zero_from = hc_sp_mem(pg) + HC_SP_PAGE;
        pg->where = HC_SP_ORPHAN;
        pg->prev = pg->next = NULL;
        if (!hc_pk_fork_child(pg))
            continue; /* never reused, on no list (its blocks may still be freed) */
        pg->next = hc_sp_orphans[pg->cls];
        hc_sp_orphans[pg->cls] = pg;
        hc_sp_norphans++;
    }
}

#else /* !HC_SP_ON */

#define HC_SP_LIMIT ((size_t)0)
static inline int hc_sp_owns(void *p) { (void)p; return 0; }
static inline int hc_sp_in_region(void *p) { (void)p; return 0; }
static inline void *hc_sp_pop(size_t n) { (void)n; return NULL; }
static inline void *hc_malloc_small_slow(size_t n) { (void)n; return NULL; }
static inline void *hc_sp_malloc_slow(size_t n, int *clean) { (void)n; (void)clean; return NULL; }
static inline void hc_sp_free(void *p) { (void)p; }
static inline size_t hc_sp_usable(void *p) { (void)p; return 0; }
static inline size_t hc_sp_class_size(size_t n) { return n; }
#define HC_SP_ALIGN_MAX 0u
#define HC_SP_PAGE ((size_t)0)
static inline size_t hc_sp_trim(void) { return 0; }
static inline uint64_t hc_sp_taken(uint64_t pages) { (void)pages; return 0; }
static inline void hc_sp_stats(struct hc_stats *out) { (void)out; }
static inline void hc_sp_note_heap(uint64_t n, uint64_t bytes) { (void)n; (void)bytes; }
static inline HC_UNUSED void hc_sp_count_move(void) {}
static inline struct hc_sp_totals hc_sp_totals(void) { struct hc_sp_totals t = { 0, 0, 0, 0 }; return t; }
static inline HC_UNUSED void hc_sp_decay_tick(void) {}
static inline HC_UNUSED void hc_sp_yield(size_t n) { (void)n; }
static void hc_sp_fork_prepare(void) {}
static void hc_sp_fork_parent(void) {}
static void hc_sp_fork_child(void) {}
static HC_UNUSED int hc_sp_purge_try(void) { return 0; }

#endif /* HC_SP_ON */
