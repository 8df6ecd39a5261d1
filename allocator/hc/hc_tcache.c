/* hc_tcache.c -- the thread cache: per-thread stacks of free blocks in front of the shared heap.
 *
 * Hasan & Chang's allocator is single-threaded.  While the process is (hc_lock.h), HC runs as
 * the paper describes, its quick lists popped and pushed with no lock.  Once it has threads,
 * every block of TCACHE_MAX bytes or less goes through the calling thread's cache first:
 *
 *   malloc  pop the head of the thread's stack for the size class           (no lock, no atomic)
 *   free    push onto the thread's stack while it has room                   (no lock, no atomic)
 *   refill  an empty stack takes half a cache of blocks from the heap under one lock: its quick
 *           list, else hc_alloc_block (the paper's whole policy: the next quick list, the exact
 *           and next medium lists, SPLIT, COALESCE, COALESCE_QL, the wilderness)
 *   flush   a full stack gives its older half back to the heap under one lock (hc_free_block:
 *           quick list or uncoalesced sub-list, as any free)
 *   exit    a thread's cache goes back to the heap from a pthread key destructor; calls the
 *           thread makes after that (later destructors) go straight to the heap
 *
 * Refills start small and double up to half a cache (a slow start): a thread that asks for a size
 * once, as short-lived threads do, takes two blocks of it, not half a cache.
 *
 * Size classes are block sizes: class i holds blocks of i x 16 bytes (the quick and medium lists'
 * own index), so a cached block keeps its header and is handed out whole.  A class holds at most
 * TCACHE_COUNT blocks and at most HC_TC_CLASS_BYTES of them (at least 4 blocks), so a thread never
 * caches more than ~250 KiB however the knobs are set.
 *
 * Cross-thread frees go to the freeing thread's cache, as glibc's tcache does, rather than back
 * to the allocating thread as mimalloc does.  HC has one shared heap: a block has no owner to
 * return to (no per-thread pages, and its 4-byte header has no room for a thread id), and every
 * block is a valid member of any thread's cache.  A producer/consumer pair then costs the
 * producer one lock per refill and the consumer one lock per flush, each for half a cache.
 *
 * What a cached block looks like: to the heap, an in-use block (its header is untouched, so
 * coalescing walks past it and the debug checker counts it in use; the statistics count it as
 * allocated); to the cache, [hdr][next pointer (8)][key (4)].  Headers are only ever written
 * under the heap's lock once the process has threads -- freeing into the cache writes the payload
 * only -- because another thread's flush may be setting the prev-inuse bit of the same header.
 * The key (a per-process random word) marks a block as cached: free() of a block that carries it
 * looks through the thread's cache and reports a double free if the block is there.
 */
#include "hc_block.h"
#include "hc_lock.h"

#define HC_TC_ON (TCACHE_COUNT > 0)
/* The largest cached block size, rounded down to a granule and kept within the medium sizes. */
#define HC_TC_SIZE ((size_t)((TCACHE_MAX) < HC_MEDIUM_MAX ? (TCACHE_MAX) : HC_MEDIUM_MAX) / HC_GRANULE * HC_GRANULE)
#define HC_TC_CLASSES (HC_TC_SIZE / HC_GRANULE)
#define HC_TC_REQUEST (HC_TC_SIZE >= HC_MIN_BLOCK ? HC_TC_SIZE - HC_HDR : 0)
#ifndef HC_TC_CLASS_BYTES
#define HC_TC_CLASS_BYTES 4096u
#endif

enum { HC_TC_NEW = 0, HC_TC_STARTING, HC_TC_LIVE, HC_TC_DEAD };

struct hc_tcache {
    void *head[HC_TC_CLASSES + 1];     /* payloads; the next payload is stored in each */
    uint16_t room[HC_TC_CLASSES + 1];  /* blocks class i may still take; 0 until the cache lives */
    uint16_t fill[HC_TC_CLASSES + 1];  /* blocks the next refill of class i takes */
    unsigned char state;
};

/* Zero-initialized: a thread's first free finds no room and its first malloc no block, so both
 * take the slow path, which starts the cache (registers its exit destructor) before using it. */
static __thread struct hc_tcache hc_tc __attribute__((tls_model("initial-exec")));
static pthread_key_t hc_tc_key;
static uint32_t hc_tc_magic; /* the cached-block key; never 0 */

static inline uint32_t *hc_tc_keyp(void *p) { return (uint32_t *)(void *)((char *)p + 8); }

/* How many blocks class i holds at most, and how many a refill or a flush moves. */
static inline unsigned hc_tc_limit(unsigned i)
{
    unsigned by_bytes = HC_TC_CLASS_BYTES / (i * HC_GRANULE);
    if (by_bytes < 4)
        by_bytes = 4;
    return (unsigned)(TCACHE_COUNT) < by_bytes ? (unsigned)(TCACHE_COUNT) : by_bytes;
}

static inline unsigned hc_tc_batch(unsigned i)
{
    unsigned n = hc_tc_limit(i) / 2;
    return n ? n : 1;
}

/* ---- the fast paths (called from malloc and free in hc_api.c) ---- */

/* The cached block of class i, or NULL. */
static inline void *hc_tc_pop(unsigned i)
{
    struct hc_tcache *tc = &hc_tc;
    void *p = tc->head[i];
    if (hc_likely(p != NULL)) {
        tc->head[i] = *(void **)p;
        tc->room[i]++;
        *hc_tc_keyp(p) = 0;
    }
    return p;
}

/* Put payload p on class i's stack, marked cached; the caller knows the class has room. */
static inline void hc_tc_put(struct hc_tcache *tc, void *p, unsigned i)
{
    tc->room[i]--;
    *(void **)p = tc->head[i];
    *hc_tc_keyp(p) = hc_tc_magic;
    tc->head[i] = p;
}

/* Cache payload p of class i if the class has room; 0 if not. */
static inline int hc_tc_push(void *p, unsigned i)
{
    struct hc_tcache *tc = &hc_tc;
    if (hc_unlikely(!tc->room[i] || *hc_tc_keyp(p) == hc_tc_magic))
        return 0;
    hc_tc_put(tc, p, i);
    return 1;
}

/* ---- the slow paths ---- */

static void hc_tc_exit(void *arg);

/* Once per process, from the first thread that starts a cache: the exit destructor's key and
 * the cached-block key. */
static pthread_once_t hc_tc_once = PTHREAD_ONCE_INIT;
static int hc_tc_keyed;

static void hc_tc_init(void)
{
    if (pthread_key_create(&hc_tc_key, hc_tc_exit) != 0)
        return;
    hc_tc_keyed = 1;
    uintptr_t x = (uintptr_t)&hc_tc_key ^ ((uintptr_t)getpid() << 32) ^ (uintptr_t)&x;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    hc_tc_magic = (uint32_t)x | 1u;
}

/* Make the calling thread's cache usable: 1 when it is (now) live.  A thread is registered for
 * its exit destructor before it caches anything, so no cached block outlives its thread. */
static HC_NOINLINE int hc_tc_start(struct hc_tcache *tc)
{
    if (hc_likely(tc->state == HC_TC_LIVE))
        return 1;
    if (tc->state != HC_TC_NEW)
        return 0; /* starting (a malloc from inside pthread_setspecific) or the thread is exiting */
    tc->state = HC_TC_STARTING;
    pthread_once(&hc_tc_once, hc_tc_init);
    if (!hc_tc_keyed || pthread_setspecific(hc_tc_key, tc) != 0) {
        tc->state = HC_TC_DEAD;
        return 0;
    }
    for (unsigned i = 1; i <= HC_TC_CLASSES; i++) {
        tc->room[i] = (uint16_t)hc_tc_limit(i);
        tc->fill[i] = 2;
    }
    tc->state = HC_TC_LIVE;
    return 1;
}

/* Give the heaps every cached block of the list from payload p on; how many.  Each block goes
 * back to its own arena, under that arena's lock, taken once for each run of blocks of one
 * arena. */
static unsigned hc_tc_release(void *p)
{
    unsigned n = 0;
    struct hc_state *locked = NULL;
    int held = 0;
    for (; p; n++) {
        void *next = *(void **)p;
        char *b = hc_block_of(p);
        struct hc_state *a = hc_arena_of(p);
        if (a != locked) {
            if (locked) {
                HC_CHECK();
                hc_unlock(held);
            }
            hc_use(a);
            held = hc_lock();
            HC_COUNT(tcache_flushes, locked == NULL);
            locked = a;
        }
        *hc_tc_keyp(p) = 0;
        hc_account_free(hc_size(b));
        hc_free_block(b);
        p = next;
    }
    if (locked) {
        HC_CHECK();
        hc_unlock(held);
    }
    hc_use(hc_home());
    return n;
}

/* malloc of a class-i size with an empty (or not yet started) cache: take half a cache of
 * blocks from the heap under one lock, return one of them.  NULL: the cache cannot serve (the
 * thread is exiting, or the heap is out of memory); the caller goes to the heap directly. */
static HC_NOINLINE void *hc_tc_refill(unsigned i)
{
    struct hc_tcache *tc = &hc_tc;
    if (!hc_tc_start(tc))
        return NULL;
    void *p = hc_tc_pop(i); /* the debug build comes here without trying the fast path */
    if (p)
        return p;
    size_t size = (size_t)i * HC_GRANULE;
    unsigned n = tc->fill[i] < hc_tc_batch(i) ? tc->fill[i] : hc_tc_batch(i);
    tc->fill[i] = (uint16_t)(2 * n);
    hc_use(hc_home());
    int held = hc_lock();
    HC_COUNT(tcache_refills, 1);
    for (unsigned k = 0; k < n; k++) {
        char *b;
        if (i <= HC_QL_MAX && hc.ql[i]) {
            b = hc_ql_pop(i);
            HC_COUNT(ql_hits, 1);
        } else if ((b = hc_alloc_block(size)) == NULL) {
            break;
        }
        hc_account_alloc(hc_size(b));
        if (!p) {
            p = hc_payload(b);
        } else {
            /* Room is certain: the class was empty and a batch is at most half its limit. */
            hc_tc_put(tc, hc_payload(b), i);
        }
    }
    HC_CHECK();
    hc_unlock(held);
    return p;
}

/* Is payload p, which carries the cached-block key, really in the calling thread's cache? */
static HC_NOINLINE int hc_tc_holds(void *p)
{
    struct hc_tcache *tc = &hc_tc;
    size_t size = hc_size(hc_block_of(p));
    unsigned i = (unsigned)(size / HC_GRANULE);
    if (i > HC_TC_CLASSES)
        return 0;
    for (void *q = tc->head[i]; q; q = *(void **)q)
        if (q == p)
            return 1;
    return 0;
}

/* free of a checked in-use block of class i whose class has no room (or whose cache has not
 * started): make room by giving the older half of the class back to the heap under one lock,
 * then cache p.  0: the cache cannot take it (thread exiting); the caller frees to the heap. */
static HC_NOINLINE int hc_tc_flush_push(void *p, unsigned i)
{
    struct hc_tcache *tc = &hc_tc;
    if (*hc_tc_keyp(p) == hc_tc_magic && hc_tc_holds(p))
        hc_fail("free(): double free (block already in this thread's cache)");
    if (hc_unlikely(tc->state != HC_TC_LIVE) && !hc_tc_start(tc))
        return 0;
    if (!tc->room[i]) {
        unsigned keep = hc_tc_limit(i) - hc_tc_batch(i);
        void *last = tc->head[i];
        for (unsigned k = 1; k < keep && last; k++)
            last = *(void **)last;
        void *older;
        if (keep && last) {
            older = *(void **)last;
            *(void **)last = NULL;
        } else {
            older = tc->head[i];
            tc->head[i] = NULL;
        }
        tc->room[i] = (uint16_t)(tc->room[i] + hc_tc_release(older));
    }
    hc_tc_put(tc, p, i);
    return 1;
}

/* The thread is exiting (pthread key destructor): every cached block goes back to the heap, and
 * the cache is closed -- no room, no blocks -- so calls made by later destructors go to the heap. */
static void hc_tc_exit(void *arg)
{
    struct hc_tcache *tc = arg;
    for (unsigned i = 1; i <= HC_TC_CLASSES; i++) {
        hc_tc_release(tc->head[i]);
        tc->head[i] = NULL;
        tc->room[i] = 0;
    }
    tc->state = HC_TC_DEAD;
}

/* Give every block of the calling thread's cache back to the heaps, keeping the cache open
 * (malloc_trim: cached blocks are free memory the purge could not otherwise reach). */
static void hc_tc_flush_all(void)
{
    struct hc_tcache *tc = &hc_tc;
    if (!HC_TC_ON || tc->state != HC_TC_LIVE)
        return;
    for (unsigned i = 1; i <= HC_TC_CLASSES; i++) {
        tc->room[i] = (uint16_t)(tc->room[i] + hc_tc_release(tc->head[i]));
        tc->head[i] = NULL;
    }
}
