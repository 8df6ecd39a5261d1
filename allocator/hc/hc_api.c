/* hc_api.c -- the malloc API.  The fast paths take no lock: the small pages' pop and push
 * (SMALL_MAX, hc_page.c: the owner's page lists need none, another thread's free is one atomic
 * push), the paper's quick-list and medium-list hits while the process is single-threaded, and
 * the thread cache's pop and push once it has threads (hc_tcache.c).  Everything that touches
 * an arena's heap takes that arena's lock (free while single-threaded, hc_lock.h), checks the
 * heap in the debug build, and reports failure as NULL with errno set, never a crash. */
#include "hc_block.h"
#include "hc_lock.h"

static HC_COLD void hc_fail(const char *msg)
{
    hc_write_all(2, "hcmalloc: ", 10);
    hc_write_all(2, msg, strlen(msg));
    hc_write_all(2, "\n", 1);
    abort();
}

/* A quick-list hit (§3.10): pop the head of list i (block size i * 16), count it in use.
 * strict: hc_ql_pop_link's (0, the fast path: NULL when the link is bad). */
static inline __attribute__((always_inline)) void *hc_ql_alloc(unsigned i, int strict)
{
    char *b = hc_ql_pop_link(i, strict);
    if (!strict && hc_unlikely(!b))
        return NULL;
    HC_COUNT(ql_hits, 1);
    hc_account_alloc((size_t)i * HC_GRANULE);
    return hc_payload(b);
}

/* An exact fit from medium list i (§3.4), most recent first: the whole block, as exact fits are
 * never split (§3.8), so only its inuse bit and the next block's prev-inuse bit change. */
static inline __attribute__((always_inline)) void *hc_medium_alloc(unsigned i)
{
    int coalesced;
    char *b = hc_list_pop_link(i, &coalesced, 0); /* NULL: a bad link, for the slow path */
    if (hc_unlikely(!b))
        return NULL;
    HC_COUNT(list_hits, 1);
    *hc_hdr(b) |= HC_INUSE;
    hc_set_pinuse(b + (size_t)i * HC_GRANULE);
    hc_account_alloc((size_t)i * HC_GRANULE);
    return hc_payload(b);
}

/* Allocate n bytes with the lock held: the quick list of the size, else a heap block, or an
 * mmapped one above MMAP_THRESHOLD (§3.2) or when the heap cannot grow any more. */
static void *hc_malloc_locked(size_t n)
{
    HC_ARENA_HERE;
    if (n <= HC_QL_REQUEST && hc.ql[hc_request_size(n) / HC_GRANULE]) {
        hc.last_clean = 0;
        return hc_ql_alloc((unsigned)(hc_request_size(n) / HC_GRANULE), 1);
    }
    if (HC_BC_ON && n > HC_MEDIUM_MAX - HC_HDR && n <= HC_BC_REQUEST && n <= hc.mmap_above) {
        char *b = hc_bc_pop(hc_request_size(n)); /* a kept big block of its size (hc_bigcache.c) */
        if (b) {
            hc.last_clean = 0;
            hc_account_alloc(hc_size(b));
            return hc_payload(b);
        }
    }
    if (hc_likely(n <= hc.mmap_above)) {
        char *b = hc_alloc_block(hc_request_size(n));
        if (hc_likely(b != NULL)) {
            hc_account_alloc(hc_size(b));
            return hc_payload(b);
        }
    }
    if (HC_NARENAS > 1 && hc_cur != hc_arenas)
        return NULL; /* mapped blocks belong to arena 0 (hc_arena.c): the caller goes there */
    void *p = hc_mmap_block(n, HC_GRANULE);
    if (p)
        hc_account_alloc(hc_mmap_len(p));
    return p;
}

/* Free p with the lock held.  Catches a double free or a foreign pointer where a header check
 * can (always); the debug build also walks the heap to prove p is a live block. */
static void hc_free_locked(void *p)
{
    HC_ARENA_HERE;
    if (!hc_in_heap(p)) {
        if (((uintptr_t)p & (HC_GRANULE - 1)) || !hc_is_mmapped(p))
            hc_fail("free(): invalid pointer (not from this malloc, or freed twice)");
        hc_account_free(hc_mmap_len(p));
        int saved = errno; /* free keeps errno even when munmap fails (POSIX.1-2024, glibc) */
        hc_munmap_block(p);
        errno = saved;
        return;
    }
#if HC_DEBUG
    hc_check_free_arg(p);
#endif
    char *b = hc_block_of(p);
    if (hc_unlikely(b < hc.first || b >= hc.top || ((uintptr_t)p & (HC_GRANULE - 1))))
        hc_fail("free(): invalid pointer (not a block of this heap)");
    uint32_t h = *hc_hdr(b);
    if (hc_unlikely((h & (HC_INUSE | HC_QUICK)) != HC_INUSE))
        hc_fail("free(): invalid pointer or double free");
    hc_account_free(hc_size(b));
    hc_free_block(b);
}

/* ---- the fast paths ----
 * Single-threaded: malloc's quick-list (§3.10) or medium-list (§3.4) hit and free's push, with
 * no lock to take.  With threads: the thread cache's pop and push (hc_tcache.c).  Never in the
 * debug build (which checks the heap after every locked call).  Everything else goes to the
 * slow paths below, out of line, so malloc and free need no stack frame and reach them by a
 * tail call. */

/* Allocate n bytes under the lock of arena a (hc_cur is left at a).  *clean: the memory is
 * known to be zero (calloc). */
static void *hc_malloc_in(struct hc_state *a, size_t n, int *clean)
{
    hc_use(a);
    int held = hc_lock();
    void *p = hc_malloc_locked(n);
    *clean = hc.last_clean;
    HC_CHECK();
    hc_unlock(held);
    return p;
}

/* Allocate from the thread's home arena (the current one while the process is single-threaded),
 * else from arena 0: for mapped blocks, and when the home arena cannot serve (hc_arena.c). */
static void *hc_malloc_arenas(size_t n, int *clean)
{
    if (HC_NARENAS == 1) {
        if (!HC_SINGLE_THREADED())
            (void)hc_home(); /* counted, and its exit seen: what starts the purge thread */
        return hc_malloc_in(hc_arenas, n, clean);
    }
    struct hc_state *home = HC_SINGLE_THREADED() ? hc_cur : hc_home();
    void *p = NULL;
    if (home == hc_arenas || n <= HC_MMAP_ABOVE)
        p = hc_malloc_in(home, n, clean);
    if (!p && home != hc_arenas)
        p = hc_malloc_in(hc_arenas, n, clean);
    hc_use(home);
    return p;
}

static HC_NOINLINE void *hc_malloc_slow(size_t n)
{
    void *p;
    if (hc_likely(HC_SINGLE_THREADED()) || (!HC_TC_ON && HC_NARENAS == 1)) {
        /* The paper's path: one heap, no lock (single-threaded) or its one lock.  A thread
         * with no thread cache is counted here (hc_home: its exit starts the purge thread). */
        if (!HC_TC_ON && HC_NARENAS == 1 && !HC_SINGLE_THREADED())
            (void)hc_home();
        int held = hc_lock();
        p = hc_malloc_locked(n);
        HC_CHECK();
        hc_unlock(held);
        if (HC_NARENAS > 1 && hc_unlikely(!p) && hc_cur != hc_arenas) {
            int clean; /* a forked child working on another arena: mapped blocks are arena 0's */
            p = hc_malloc_arenas(n, &clean);
        }
    } else {
        if (HC_TC_ON && n <= HC_TC_REQUEST && (p = hc_tc_refill((unsigned)(hc_request_size(n) / HC_GRANULE))))
            return p;
        int clean;
        p = hc_malloc_arenas(n, &clean);
    }
    if (hc_unlikely(!p))
        errno = ENOMEM;
    return p;
}

/* The arena p belongs to: its heap's, else arena 0 (mapped blocks, and pointers that are not
 * ours, which arena 0's checks then reject). */
static inline struct hc_state *hc_owner(void *p)
{
    if (HC_NARENAS == 1 || hc_in_heap(p))
        return hc_cur;
    struct hc_state *a = hc_arena_of(p);
    return a ? a : hc_arenas;
}

/* free's slow path.  With threads, a heap block of any arena that the thread cache holds (free's
 * fast path checks only the thread's own arena) is cached: at once when its class has room,
 * else through the flush, after the debug build's walk has proved it a live block.  Anything
 * else goes to the lock of the arena it lives in (arena 0 for mapped or foreign pointers, whose
 * checks reject the latter). */
static HC_NOINLINE void hc_free_slow(void *p)
{
    if (!p)
        return;
    if (HC_TC_ON && !HC_SINGLE_THREADED()) {
        struct hc_state *a = hc_arena_of(p);
        size_t size;
        if (a && hc_arena_block(a, p, &size) && size <= HC_TC_SIZE) {
            unsigned i = (unsigned)(size / HC_GRANULE);
            if (!HC_DEBUG && hc_tc_push(p, i))
                return;
#if HC_DEBUG
            struct hc_state *was = hc_cur;
            hc_use(a);
            int held = hc_lock();
            hc_check_free_arg(p);
            hc_unlock(held);
            hc_use(was);
#endif
            if (hc_tc_flush_push(p, i))
                return;
        }
    }
    struct hc_state *was = hc_cur, *owner = hc_owner(p);
    if (owner != was)
        hc_use(owner);
    int held = hc_lock();
    hc_free_locked(p);
    HC_CHECK();
    hc_unlock(held);
    if (owner != was)
        hc_use(was);
}

static void *hc_malloc_small_slow(size_t n);
static void *hc_malloc_big(size_t n);

/* malloc's body, which calloc also calls: a compiler may turn "malloc, then memset to 0" into a
 * call to calloc, which would call itself here. */
static inline __attribute__((always_inline)) void *hc_malloc(size_t n)
{
    /* Small blocks on the thread's pages (hc_page.c), single-threaded or not: a pop of the
     * page's free list, else out of line (a new page, or the paper's heap when none can serve). */
    if (HC_SP_ON && hc_likely(n <= HC_SP_LIMIT)) {
        void *p = hc_sp_pop(n);
        if (hc_likely(p != NULL))
            return p;
        return hc_malloc_small_slow(n);
    }
    /* n below the medium limit: a quick-list or medium size, and the rounding cannot overflow.
     * Single-threaded, a quick-list size tries its quick list (§3.10), a medium size its own
     * list (§3.4): the first two steps of hc_alloc_block, in its order.  With threads, a size
     * the thread cache holds pops the thread's own stack. */
    if (hc_likely(!HC_DEBUG && n <= HC_MEDIUM_MAX - HC_HDR)) {
        unsigned i = (unsigned)(hc_request_size(n) / HC_GRANULE);
        if (hc_likely(HC_SINGLE_THREADED())) {
            void *p = NULL; /* a bad link (a corrupted heap): the slow path names it */
            if (i <= HC_QL_MAX) {
                if (hc_likely(hc.ql[i] != 0) && hc_likely((p = hc_ql_alloc(i, 0)) != NULL))
                    return p;
            } else if (hc.lists[i].unco | hc.lists[i].coal) {
                if (hc_likely((p = hc_medium_alloc(i)) != NULL))
                    return p;
            }
        } else if (HC_TC_ON && i <= HC_TC_CLASSES) {
            void *p = hc_tc_pop(i);
            if (hc_likely(p != NULL))
                return p;
        }
    }
    /* Single-threaded, a big size tries its kept list (BIG_CACHE, hc_bigcache.c) as a quick-list
     * size tries its quick list: what hc_malloc_locked would do first. */
    else if (HC_BC_ON && !HC_DEBUG)
        return hc_malloc_big(n);
    return hc_malloc_slow(n);
}

void *malloc(size_t n) { return hc_malloc(n); }

#if HC_SP_ON
/* malloc of a small size whose page had no free block. */
static HC_NOINLINE void *hc_malloc_small_slow(size_t n)
{
    int clean;
    /* A mid size of a thread already on the pages: its runs (hc_run.c), no detour. */
    if (HC_RUN_ON && n > (size_t)(MID_RUNS) && hc_likely(hc_sp_me.state == HC_SP_LIVE)) {
        void *p = hc_run_malloc(&hc_sp_me, n, &clean);
        return p ? p : hc_malloc_slow(n);
    }
    void *p = hc_sp_malloc_slow(n, &clean);
    return p ? p : hc_malloc_slow(n);
}
#endif

/* Single-threaded free of big heap block b (checked in use): kept for the next request of its
 * size (hc_bigcache.c), else to the big list.  Out of line, so that free's other paths keep
 * their registers. */
static HC_NOINLINE void hc_free_big(char *b, size_t size)
{
    hc_account_free(size);
    hc_free_listed(b, size);
}

/* Single-threaded malloc of a big size: a kept block of its size, else the slow path. */
static HC_NOINLINE void *hc_malloc_big(size_t n)
{
    if (n <= HC_BC_REQUEST && n <= hc.mmap_above && HC_SINGLE_THREADED()) {
        char *b = hc_bc_pop(hc_request_size(n));
        if (b) {
            hc_account_alloc(hc_size(b));
            return hc_payload(b);
        }
    }
    return hc_malloc_slow(n);
}

/* free of anything but a page block: the paper's fast paths, else hc_free_slow.  Out of line
 * when the small pages are on, so that free's page path needs no stack frame. */
#if HC_SP_ON
static HC_NOINLINE void hc_free_heap(void *p)
#else
static inline __attribute__((always_inline)) void hc_free_heap(void *p)
#endif
{
    char *b = hc_block_of(p);
    /* One unsigned compare keeps the check that b is a block of the heap: NULL, mmapped and
     * foreign pointers all fall outside [first, top) and go to the slow path. */
    if (hc_likely(!HC_DEBUG && (uintptr_t)(b - hc.first) < (uintptr_t)(hc_top_now() - hc.first))) {
        uint32_t h = *hc_hdr(b);
        size_t size = h & ~HC_FLAGS;
        /* In use, not already on a quick list (a double free), 16-byte aligned. */
        if (hc_likely((h & (HC_INUSE | HC_QUICK)) == HC_INUSE && !((uintptr_t)p & (HC_GRANULE - 1)))) {
            if (hc_likely(HC_SINGLE_THREADED())) {
                if (HC_BC_ON && size > HC_MEDIUM_MAX) {
                    hc_free_big(b, size); /* out of line: kept (BIG_CACHE) or to the big list */
                    return;
                }
                hc_account_free(size);
                if (size <= HC_QL_SIZE)
                    hc_free_quick(b, size);
                else
                    hc_free_listed(b, size);
                return;
            }
            if (HC_TC_ON && size <= HC_TC_SIZE && hc_tc_push(p, (unsigned)(size / HC_GRANULE)))
                return;
        }
    }
    hc_free_slow(p);
}

void free(void *p)
{
    /* One compare tells a page block (hc_page.c) from a paper block. */
    if (HC_SP_ON && hc_sp_owns(p)) {
        hc_sp_free(p);
        return;
    }
    hc_free_heap(p);
}

/* calloc: overflow-checked; memory fresh from the wilderness or mmap is already zero. */
/* CALLOC_MMAP: a calloc above MMAP_THRESHOLD gets its own mapping even when the self-adjusting
 * threshold (MMAP_THRESHOLD_MAX, hc_os.c) has risen above it: fresh pages read as zero without
 * being written, so what the program never writes (Python's bytes(n), a sparse table) never
 * becomes resident, while malloc's blocks of that size stay in the heap (no map and unmap each,
 * no page faults).  Unless mallopt fixed the threshold: then it rules.  In arena 0, like every
 * mapped block (hc_arena.c).  NULL: not mapped here, the caller takes the ordinary path. */
static void *hc_calloc_mapped(size_t n, int *clean, size_t *scan)
{
    struct hc_state *home = hc_cur;
    hc_use(hc_arenas);
    int held = hc_lock();
    void *p = NULL;
    *clean = 1;
    if (!hc.os.threshold_fixed || n > hc.mmap_above) {
#if CALLOC_CACHE > 0
        /* CALLOC_CACHE (hc_heap.c): lengths by class, a kept mapping of this one first */
        size_t len = hc_zc_round(n);
        if (len && (p = hc_zc_take(len, n, scan)) != NULL)
            *clean = 0;
        else if (len)
            p = hc_zc_map(len, n);
#else
        p = hc_mmap_block(n, HC_GRANULE);
#endif
        if (p)
            hc_account_alloc(hc_mmap_len(p));
    }
    HC_CHECK();
    hc_unlock(held);
    hc_use(home);
    return p;
}

void *calloc(size_t count, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    if (HC_SP_ON && n <= HC_SP_LIMIT) {
        int clean;
        void *p = hc_sp_malloc_slow(n, &clean); /* the slow path knows a never-written block */
        if (p) {
            if (!clean)
                memset(p, 0, n);
            return p;
        }
    }
    if (HC_TC_ON && n <= HC_TC_REQUEST && !HC_SINGLE_THREADED()) {
        void *p = hc_malloc(n);
        if (p)
            memset(p, 0, n);
        return p;
    }
    int clean;
    size_t scan = n;
    void *p = NULL;
    if (CALLOC_MMAP && n > HC_MMAP_ABOVE && (p = hc_calloc_mapped(n, &clean, &scan)) != NULL) {
        if (!clean) { /* a kept mapping: what the program never wrote is zero and not resident */
            hc_os_zero_scan(p, scan);
            return p;
        }
    } else {
        p = hc_malloc_arenas(n, &clean);
    }
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    hc_os_calloc(p, n, clean);
    return p;
}

/* realloc with threads of a block and a size the thread cache holds: keep the block when the
 * new size fits it and uses at least half of it, else move it through the cache (malloc, copy,
 * free) -- no lock either way.  NULL: not such a block; realloc goes the locked way (§3.12). */
static void *hc_tc_realloc(void *p, size_t n)
{
    struct hc_state *a = hc_arena_of(p);
    size_t have, want = hc_request_size(n);
    if (!a || !hc_arena_block(a, p, &have) || have > HC_TC_SIZE)
        return NULL;
    if (want <= have && want * 2 >= have)
        return p;
    void *q = hc_malloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, (have - HC_HDR) < n ? have - HC_HDR : n);
    free(p);
    return q;
}

/* realloc (§3.12): in place by merging neighbours, else allocate, copy, free.  As glibc does,
 * realloc(p, 0) frees p and returns NULL; on failure p is left untouched. */
void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    if (HC_SP_ON && hc_sp_owns(p)) {
        /* A page block: kept while n still fits and uses more than half of it, else moved (to
         * another class, or across SMALL_MAX to the paper's heap). */
        size_t have = hc_sp_usable(p);
        if (!have)
            hc_fail("realloc(): invalid pointer");
        /* A run block (hc_run.c): grown or shrunk in place by its owner when the granules allow. */
        if (HC_RUN_ON && hc_run_realloc(p, n))
            return p;
        if (n <= have && n > have / 2 && (HC_SP_Q == 16 || n % 16 || !((uintptr_t)p & 15)))
            return p; /* (FIT_ALIGN8: a multiple of 16 never stays on an 8-aligned block) */
        void *q = malloc(n);
        if (q) {
            memcpy(q, p, have < n ? have : n);
            hc_sp_free(p);
            hc_sp_count_move();
        }
        return q;
    }
    if (HC_TC_ON && !HC_DEBUG && n <= HC_TC_REQUEST && !HC_SINGLE_THREADED()) {
        void *q = hc_tc_realloc(p, n);
        if (q)
            return q;
    }
    struct hc_state *was = hc_cur;
    hc_use(hc_owner(p));
    int held = hc_lock();
    void *q = NULL;
    size_t old;
    HC_COUNT(reallocs, 1);
    if (!hc_in_heap(p)) {
        if (((uintptr_t)p & (HC_GRANULE - 1)) || !hc_is_mmapped(p))
            hc_fail("realloc(): invalid pointer");
        old = hc_mmap_len(p) - hc_mmap_off(p);
        if (n > hc.mmap_above && n <= old && n >= old / 2) {
            hc_zc_written(p);
            q = p;
            goto done;
        }
        if (n > hc.mmap_above && (q = hc_mremap_block(p, n)) != NULL) {
            HC_COUNT(realloc_in_place, 1);
            goto done;
        }
    } else {
#if HC_DEBUG
        hc_check_free_arg(p);
#endif
        char *b = hc_block_of(p);
        if (hc_unlikely(b < hc.first || b >= hc.top || ((uintptr_t)p & (HC_GRANULE - 1)) ||
                        (*hc_hdr(b) & (HC_INUSE | HC_QUICK)) != HC_INUSE))
            hc_fail("realloc(): invalid pointer");
        old = hc_size(b) - HC_HDR;
        char *nb;
        if (n <= hc.mmap_above && (nb = hc_resize_in_place(b, hc_request_size(n)))) {
            q = hc_payload(nb);
            goto done;
        }
    }
    int here = hc_cur == was || HC_SINGLE_THREADED();
    if (here && (q = hc_malloc_locked(n)) != NULL) {
        memcpy(q, p, old < n ? old : n);
        hc_free_locked(p);
        HC_COUNT(realloc_moved, 1);
        HC_COUNT(allocs_total, -1); /* a move is one realloc, not a new allocation */
        HC_COUNT(frees, -1);
        goto done;
    }
    if (!here || hc_cur != hc_arenas) {
        /* p lives in another thread's arena, or this arena cannot serve n (mapped blocks are
         * arena 0's): move it by the public paths, outside this arena's lock. */
        HC_CHECK();
        hc_unlock(held);
        hc_use(was);
        q = malloc(n);
        if (q) {
            memcpy(q, p, old < n ? old : n);
            free(p);
        }
        return q;
    }
done:
    HC_CHECK();
    hc_unlock(held);
    hc_use(was);
    if (!q)
        errno = ENOMEM;
    return q;
}

void *reallocarray(void *p, size_t count, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}

/* The memalign family: align is a power of two (checked by each caller). */
static void *hc_memalign(size_t align, size_t n)
{
    if (align <= HC_GRANULE && (HC_SP_Q == 16 || align <= 8))
        return malloc(n); /* (FIT_ALIGN8: malloc's blocks may be 8-aligned only) */
    /* Runs of granules are aligned to a granule (hc_run.c). */
    if (HC_RUN_ON && align <= HC_RUN_GRAN && n > (size_t)(MID_RUNS) && n <= HC_SP_LIMIT) {
        int clean;
        void *p = hc_sp_malloc_slow(n, &clean);
        if (p)
            return p;
    }
    if (HC_SP_ON && !HC_DEBUG && align <= HC_SP_ALIGN_MAX && n <= HC_SP_LIMIT) {
        /* A power-of-two class of at least align bytes is aligned to align (hc_page.c). */
        size_t need = n > align ? n : align;
        need = (size_t)1 << (64 - __builtin_clzll((unsigned long long)(need - 1)));
        void *p;
        int clean;
        if (need <= HC_SP_LIMIT && hc_sp_class_size(need) == need &&
            (p = hc_sp_malloc_slow(need, &clean)) != NULL)
            return p;
    }
    if (n > HC_MAX_REQUEST || align > HC_MAX_REQUEST - n) {
        errno = ENOMEM;
        return NULL;
    }
    struct hc_state *was = hc_cur;
    if (HC_NARENAS > 1 && !HC_SINGLE_THREADED()) {
        was = hc_home();
        hc_use(was);
    }
    int held = hc_lock();
    void *p = NULL;
    size_t size = hc_request_size(n);
    if (n + align <= hc.mmap_above) {
        char *b = hc_alloc_aligned(size, align);
        if (b) {
            hc_account_alloc(hc_size(b));
            p = hc_payload(b);
        }
    }
    if (!p && hc_cur != hc_arenas) { /* mapped blocks are arena 0's (hc_arena.c) */
        HC_CHECK();
        hc_unlock(held);
        hc_use(hc_arenas);
        held = hc_lock();
    }
    if (!p && (p = hc_mmap_block(n, align)) != NULL)
        hc_account_alloc(hc_mmap_len(p));
    HC_CHECK();
    hc_unlock(held);
    hc_use(was);
    if (!p)
        errno = ENOMEM;
    return p;
}

static inline int hc_pow2(size_t a) { return a && !(a & (a - 1)); }

int posix_memalign(void **out, size_t align, size_t n)
{
    if (!hc_pow2(align) || align % sizeof(void *))
        return EINVAL;
    void *p = hc_memalign(align, n);
    if (!p)
        return ENOMEM; /* errno is ENOMEM too, as glibc leaves it */
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    if (!hc_pow2(align)) {
        errno = EINVAL;
        return NULL;
    }
    return hc_memalign(align, n);
}

/* memalign rounds a non-power-of-two alignment up, as glibc does: EINVAL only for an alignment
 * above 2^63 (no power of two to round to); 2^63 itself cannot be served, ENOMEM. */
void *memalign(size_t align, size_t n)
{
    if (align > ((size_t)1 << 63)) {
        errno = EINVAL;
        return NULL;
    }
    size_t a = HC_GRANULE;
    while (a < align)
        a <<= 1;
    return hc_memalign(a, n);
}

void *valloc(size_t n) { return hc_memalign((size_t)sysconf(_SC_PAGESIZE), n); }

void *pvalloc(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (n > HC_MAX_REQUEST) {
        errno = ENOMEM;
        return NULL;
    }
    return hc_memalign(page, (n + page - 1) & ~(page - 1));
}

size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (HC_SP_ON && hc_sp_in_region(p))
        return hc_sp_usable(p);
    /* The caller owns the block, so its size bits do not change under us: no lock. */
    if (hc_arena_of(p) != NULL)
        return hc_size(hc_block_of(p)) - HC_HDR;
    hc_zc_written(p);
    return hc_mmap_len(p) - hc_mmap_off(p);
}
