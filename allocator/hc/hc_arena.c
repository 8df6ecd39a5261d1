/* hc_arena.c -- which arena a thread works on (the arenas themselves: hc_internal.h).
 *
 * Behind the thread caches, threads still meet in the shared heap: for blocks larger than
 * TCACHE_MAX, for refills and flushes.  With one heap its lock and its lists go back and forth
 * between cores (Iyengar's scaling study makes the same point for one free list).  So there are
 * ARENAS heaps, each a complete instance of the paper's allocator -- its own reserved region,
 * quick lists, medium lists, big list, wilderness, coalescing and statistics -- under its own
 * lock:
 *   - a thread's home arena is given round robin when it first needs one with threads running;
 *     its mallocs (and its thread cache's refills) are served there;
 *   - a free goes to the arena the block lives in, found from the pointer by comparing it with
 *     each arena's reserved region;
 *   - mapped blocks (§3.2) all belong to arena 0, so each arena's statistics add up on their
 *     own: a request above MMAP_THRESHOLD, or one the home arena cannot serve, goes to arena 0;
 *   - a single-threaded process only ever uses arena 0, through the paper's paths unchanged.
 * hc_cur (the `hc` of every file) is switched to the arena being worked on before its lock is
 * taken and back to the home arena after it is released.
 */
#include "hc_block.h"
#include "hc_lock.h"

static __thread struct hc_state *hc_home_arena __attribute__((tls_model("initial-exec")));
static unsigned hc_arena_next;

static HC_NOINLINE struct hc_state *hc_home_assign(void)
{
    unsigned k = __atomic_fetch_add(&hc_arena_next, 1, __ATOMIC_RELAXED) % HC_NARENAS;
    return hc_home_arena = &hc_arenas[k];
}

/* The calling thread's home arena. */
static inline struct hc_state *hc_home(void)
{
    if (HC_NARENAS == 1)
        return hc_arenas;
    struct hc_state *a = hc_home_arena;
    return hc_likely(a != NULL) ? a : hc_home_assign();
}

/* The arena whose heap holds p, or NULL (a mapped block, or not ours).  An arena's region is
 * written once, before any of its blocks exists, so reading it without the lock is safe. */
static inline struct hc_state *hc_arena_of(void *p)
{
    for (unsigned k = 0; k < HC_NARENAS; k++) {
        struct hc_state *a = &hc_arenas[k];
        if ((char *)p > a->base && (char *)p < a->limit)
            return a;
    }
    return NULL;
}

/* Is payload p an in-use heap block of its arena a, as free() checks it (the range, the
 * alignment, the header's inuse and quick bits)?  Its block size in *size. */
static inline int hc_arena_block(struct hc_state *a, void *p, size_t *size)
{
    char *b = hc_block_of(p);
    char *top = __atomic_load_n(&a->top, __ATOMIC_RELAXED);
    if ((uintptr_t)(b - a->first) >= (uintptr_t)(top - a->first) || ((uintptr_t)p & (HC_GRANULE - 1)))
        return 0;
    uint32_t h = *hc_hdr(b);
    *size = h & ~HC_FLAGS;
    return (h & (HC_INUSE | HC_QUICK)) == HC_INUSE;
}

/* Sum the arenas' statistics (each read under its lock).  Maxima and the footprint are the sums
 * of each arena's own, so with several arenas they bound the process's from above. */
static void hc_arena_stats(struct hc_stats *out)
{
    memset(out, 0, sizeof *out);
    struct hc_state *home = hc_cur;
    for (unsigned k = 0; k < HC_NARENAS; k++) {
        hc_use(&hc_arenas[k]);
        int held = hc_lock();
        const uint64_t *in = (const uint64_t *)(const void *)&hc.st;
        uint64_t *sum = (uint64_t *)(void *)out;
        for (size_t f = 0; f < sizeof *out / sizeof(uint64_t); f++)
            sum[f] += in[f];
        hc_unlock(held);
    }
    hc_use(home);
}
