/* hc_arena.c -- which arena a thread works on (the arenas themselves: hc_internal.h).
 *
 * Behind the thread caches, threads still meet in the shared heap: for blocks larger than
 * TCACHE_MAX, for refills and flushes.  With one heap its lock and its lists go back and forth
 * between cores (Iyengar's scaling study makes the same point for one free list).  So there are
 * ARENAS heaps, each a complete instance of the paper's allocator -- its own reserved region,
 * quick lists, medium lists, big list, wilderness, coalescing and statistics -- under its own
 * lock:
 *   - a thread's home arena is chosen when it first needs one with threads running: the arena
 *     with the fewest live threads, an arena already used (holding free memory) before one never
 *     touched; its mallocs (and its thread cache's refills) are served there;
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
#include <signal.h>
#include <time.h>

/* Memory given back across arenas (the design; hc_lock.h has the lock order).  The decay of
 * hc_os.c runs on allocation slow paths and purges the calling thread's arena; three rules make
 * sure the other arenas' free memory goes back too, whatever ARENAS is:
 *   - when an arena's last thread exits, a decay period starts there (hc_arena_leave): unless a
 *     new thread reuses the memory within DECAY_MS, the purge thread (or another thread's visit)
 *     purges the arena at the period's end, so memory of exited threads does not wait for an
 *     allocation there (HC_EXIT_PURGE_NOW=1: purged at the exit itself);
 *   - a new thread takes the arena with the fewest live threads, one already used before one
 *     never touched, so generations of short-lived threads reuse the same few arenas instead of
 *     filling fresh ones (before: round robin, ~250 MiB more per generation with ARENAS=64);
 *   - the decay visits the other arenas, at most once per DECAY_MS / 2 in the whole process,
 *     under try-locks (hc_arena_purge_try): a busy arena is skipped, never waited for.
 * hc_arena_purge_try(a, all) is the interface for any other layer that wants an arena's free
 * memory released: it never blocks, and returns whether it got the lock. */
static __thread struct hc_state *hc_home_arena __attribute__((tls_model("initial-exec")));
static __thread unsigned char hc_home_counted __attribute__((tls_model("initial-exec")));
static unsigned hc_arena_threads[HC_NARENAS]; /* live threads whose home each arena is */
static unsigned hc_arena_homes;               /* their sum; both under hc_pick_mutex */
static pthread_key_t hc_arena_key;
static int hc_arena_keyed;
static pthread_once_t hc_arena_once = PTHREAD_ONCE_INIT;

static void hc_arena_leave(void *arg);
static void hc_tc_flush_all(void);

static void hc_arena_key_init(void)
{
    hc_arena_keyed = pthread_key_create(&hc_arena_key, hc_arena_leave) == 0;
}

/* The arena a new thread should take: fewest live threads, then one already used, then the
 * lowest index.  Called with hc_pick_mutex held. */
static unsigned hc_arena_pick(void)
{
    unsigned best = 0;
    for (unsigned k = 1; k < HC_NARENAS; k++) {
        unsigned tk = hc_arena_threads[k], tb = hc_arena_threads[best];
        /* ready is written once, under the arena's lock: a stale 0 only costs a fresh arena */
        if (tk < tb || (tk == tb && __atomic_load_n(&hc_arenas[k].ready, __ATOMIC_RELAXED) &&
                        !__atomic_load_n(&hc_arenas[best].ready, __ATOMIC_RELAXED)))
            best = k;
    }
    return best;
}

static HC_NOINLINE struct hc_state *hc_home_assign(void)
{
    pthread_mutex_lock(&hc_pick_mutex);
    unsigned k = hc_arena_pick();
    hc_arena_threads[k]++;
    hc_arena_homes++;
    pthread_mutex_unlock(&hc_pick_mutex);
    hc_home_arena = &hc_arenas[k]; /* before anything below can call malloc again */
    hc_home_counted = 1;
    /* Registered for hc_arena_leave at exit (pthread_setspecific may calloc: hc_home_arena is
     * already set, so that call does not come back here). */
    pthread_once(&hc_arena_once, hc_arena_key_init);
    if (hc_arena_keyed)
        pthread_setspecific(hc_arena_key, hc_home_arena);
    return hc_home_arena;
}

/* The calling thread's home arena. */
static inline struct hc_state *hc_home(void)
{
    /* Even with one arena: the assignment counts the thread and registers its exit. */
    struct hc_state *a = hc_home_arena;
    return hc_likely(a != NULL) ? a : hc_home_assign();
}

/* Release arena a's free memory if its lock is free now (hc_os_purge: all = malloc_trim's
 * purge, else one step of the decay); 1 if the lock was taken.  Never waits. */
/* The last thread out of an arena starts a decay period there (HC_EXIT_PURGE_NOW=0, default):
 * the arena is purged when the period ends with its memory untouched -- by the purge thread,
 * woken for it, or by another thread's visit -- so a new generation of threads that takes the
 * arena within DECAY_MS reuses its pages instead of faulting them in again (4 threads x 16 MiB,
 * 20 generations: 23,000 page faults deferred, 125,000 with an immediate purge; glibc makes
 * 327,000).  -DHC_EXIT_PURGE_NOW=1: malloc_trim's purge of the arena at the exit itself. */
#ifndef HC_EXIT_PURGE_NOW
#define HC_EXIT_PURGE_NOW 0
#endif
static HC_UNUSED int hc_arena_purge_try(struct hc_state *a, int all)
{
    if (!hc_trylock_arena(a))
        return 0;
    struct hc_state *was = hc_cur;
    hc_use(a);
    if (all)
        hc_os_purge(hc.os.top_pad, 1);
    else
        hc_os_decay_step();
    hc_use(was);
    hc_unlock_arena(a);
    return 1;
}

/* ---- the purge thread (PURGE_THREAD) ----
 * The decay runs on allocation slow paths, so a program that goes quiet -- sleeps, or makes
 * only small calls its thread cache serves -- keeps what the arenas shared with its remaining
 * threads hold (arena 0 above all, where every thread's large blocks live).  With PURGE_THREAD
 * a thread, started when a thread first exits (so never in a single-threaded process, and not
 * in one whose threads all live on), runs the decay on every arena and on the small pages'
 * empty pool each DECAY_MS / 2, under try-locks (hc_arena_purge_try's rule); while no arena has
 * a decay period running (nothing to give back) it naps 8 times longer.  It never allocates.
 * It must never decide when the process ends or which signals it gets (issue 35):
 *   - it is never the last thread: a thread that exits as the process's last running one does
 *     not start it, and it ends itself when it finds it is alone (hc_os_live_threads: a main
 *     thread that called pthread_exit is a zombie, not a running thread) -- at each wake, and
 *     promptly after the exit of the last thread with a home (poked: HC_PURGE_ENDING), so that
 *     main ending with pthread_exit(NULL), or a forked child's only thread exiting, ends the
 *     process with status 0 as under glibc;
 *   - it keeps the signal mask of the thread that started it (an application thread's), and
 *     blocks every signal only while it sweeps the arenas, holding their locks (a handler that
 *     called malloc there would wait on itself): a SIGTERM, a Ctrl-C reach the process;
 *   - a forked child has none until one of its own threads exits (not its last one). */
#if DECAY_MS > 0 && PURGE_THREAD
#define HC_PURGE_WATCH 1   /* a poke: an arena's decay period started at its last thread's exit */
#define HC_PURGE_ENDING 2  /* a poke: the last thread with a home is exiting: alone soon? */
static int hc_purge_started;
static int hc_purge_poked;           /* HC_PURGE_* bits: wake up now */
static int hc_purge_ready;           /* hc_purge_mu and hc_purge_cv initialised (once; a fork's child again) */
static pthread_mutex_t hc_purge_mu;  /* a leaf: only around the nap and the poke */
static pthread_cond_t hc_purge_cv;   /* CLOCK_MONOTONIC */
static int hc_sp_purge_try(void); /* hc_page.c: the small pages' empty pool */

/* Sleep ms, or less if poked; the pokes that came. */
static int hc_purge_nap(uint64_t ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&hc_purge_mu);
    while (!hc_purge_poked && pthread_cond_timedwait(&hc_purge_cv, &hc_purge_mu, &t) == 0)
        ;
    int poked = hc_purge_poked;
    hc_purge_poked = 0;
    pthread_mutex_unlock(&hc_purge_mu);
    return poked;
}

/* Is the purge thread the only thread still running?  Where /proc cannot say: when no thread
 * has a home (it may then end while a thread that never allocated runs on: only a purge lost). */
static int hc_purge_alone(void)
{
    int live = hc_os_live_threads();
    if (live >= 0)
        return live <= 1;
    return __atomic_load_n(&hc_arena_homes, __ATOMIC_RELAXED) == 0;
}

/* After an ENDING poke: the exiting thread is still running its destructors.  Look again
 * every 2 ms until the count of running threads falls below what it was (that thread gone) or
 * 250 ms pass; 1 if the purge thread is then alone. */
static int hc_purge_alone_soon(void)
{
    int was = hc_os_live_threads();
    for (int i = 0; i < 125 && was > 1; i++) {
        struct timespec ms2 = {0, 2000000L};
        nanosleep(&ms2, NULL);
        int live = hc_os_live_threads();
        if (live < was)
            return live <= 1;
    }
    return hc_purge_alone();
}

/* One sweep: the decay on every arena, then the small pages' empty pool, with every signal
 * blocked while any lock is held.  1 if there is still something to give back. */
static int hc_purge_sweep(void)
{
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    uint64_t now = hc_os_now_ms();
    int busy = 0;
    for (unsigned k = 0; k < HC_NARENAS; k++) {
        struct hc_state *a = &hc_arenas[k];
        if (!__atomic_load_n(&a->ready, __ATOMIC_RELAXED))
            continue;
        if (!hc_trylock_arena(a)) {
            busy = 1; /* in use: look again soon */
            continue;
        }
        hc_use(a);
        if (!hc.os.decay_off)
            hc_os_decay_at(now, hc_os_dirty());
        busy |= hc.os.deadline != 0;
        hc_unlock_arena(a);
    }
    busy |= hc_sp_purge_try();
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    return busy;
}

static void *hc_purge_main(void *arg)
{
    (void)arg;
    uint64_t gap = (uint64_t)(DECAY_MS) / 2 ? (uint64_t)(DECAY_MS) / 2 : 1;
    int busy = 1;
    for (;;) {
        int poked = hc_purge_nap(busy ? gap : 8 * gap);
        if ((poked & HC_PURGE_ENDING) ? hc_purge_alone_soon() : hc_purge_alone())
            break;
        busy = hc_purge_sweep();
    }
    /* Alone: no other thread can start another one now (only a running thread could). */
    __atomic_store_n(&hc_purge_started, 0, __ATOMIC_RELEASE);
    return NULL;
}

static void hc_purge_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&hc_purge_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&hc_purge_mu, NULL);
    hc_purge_ready = 1;
}

/* Called with no lock held (pthread_create may allocate), from a thread's exit: wake the
 * thread with the HC_PURGE_* bits in poke if it runs, else start it -- unless the exiting
 * thread is the process's last running one. */
static void hc_purge_start(int poke)
{
    if (__atomic_exchange_n(&hc_purge_started, 1, __ATOMIC_ACQ_REL)) {
        if (!poke)
            return;
        pthread_mutex_lock(&hc_purge_mu);
        hc_purge_poked |= poke;
        pthread_cond_signal(&hc_purge_cv);
        pthread_mutex_unlock(&hc_purge_mu);
        return;
    }
    int live = hc_os_live_threads();
    if (live >= 0 ? live <= 1 : __atomic_load_n(&hc_arena_homes, __ATOMIC_RELAXED) == 0) {
        __atomic_store_n(&hc_purge_started, 0, __ATOMIC_RELEASE); /* the last thread: none */
        return;
    }
    /* Once per process (a forked child's: hc_arena_after_fork), never while a running purge
     * thread or a poke could be using them. */
    if (!hc_purge_ready)
        hc_purge_init();
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (pthread_create(&t, &attr, hc_purge_main, NULL) != 0)
        __atomic_store_n(&hc_purge_started, 0, __ATOMIC_RELEASE); /* try again at the next exit */
    pthread_attr_destroy(&attr);
}
#define HC_PURGE_START(poke) hc_purge_start(poke)
#define HC_PURGE_FORGET() (hc_purge_started = 0, hc_purge_ready = 0, hc_purge_poked = 0)
#else
#define HC_PURGE_WATCH 1
#define HC_PURGE_ENDING 2
#define HC_PURGE_START(poke) ((void)(poke))
#define HC_PURGE_FORGET() ((void)0)
#endif

/* A thread with a home arena exits (pthread key destructor): its cache goes back first, then it
 * stops counting for its arena; the last thread out starts the arena's decay period (the memory
 * of threads that exited would otherwise wait for an allocation there) and wakes the purge
 * thread, or starts it.  The thread keeps its home for calls
 * made by later destructors, uncounted. */
static void hc_arena_leave(void *arg)
{
    struct hc_state *a = arg;
    if (!hc_home_counted || a == NULL)
        return;
    int saved = errno;
    hc_tc_flush_all();
    pthread_mutex_lock(&hc_pick_mutex);
    unsigned left = --hc_arena_threads[a - hc_arenas];
    unsigned homes = --hc_arena_homes;
    pthread_mutex_unlock(&hc_pick_mutex);
    hc_home_counted = 0;
    int watch = 0;
#if DECAY_MS > 0
    if (left == 0 && __atomic_load_n(&a->ready, __ATOMIC_RELAXED)) {
        struct hc_state *was = hc_cur;
        hc_use(a);
        pthread_mutex_lock(hc_mutex_of(a));
        if (!hc.os.decay_off && HC_EXIT_PURGE_NOW && hc_os_dirty() >= hc.os.decay_bytes) {
            hc_os_purge(hc.os.top_pad, 1);
        } else if (!hc.os.decay_off) {
            hc.os.deadline = 0; /* a decay period starts now */
            hc_os_decay_at(hc_os_now_ms(), hc_os_dirty());
            watch = hc.os.deadline != 0;
        }
        pthread_mutex_unlock(hc_mutex_of(a));
        hc_use(was);
    }
#else
    (void)left;
#endif
    /* The last thread with a home leaving: the process may be ending (main's pthread_exit). */
    HC_PURGE_START((watch ? HC_PURGE_WATCH : 0) | (homes <= 1 ? HC_PURGE_ENDING : 0));
    errno = saved;
}

/* fork's child has one thread, the forking one: only its home counts.  No purge thread (fork
 * copies only the caller), and its mutex and condition variable are initialised afresh when
 * one starts (the parent's may have been held at the fork). */
static void hc_arena_after_fork(void)
{
    HC_PURGE_FORGET(); /* the purge thread was not copied */
    memset(hc_arena_threads, 0, sizeof hc_arena_threads);
    hc_arena_homes = 0;
    if (hc_home_arena && hc_home_counted) {
        hc_arena_threads[hc_home_arena - hc_arenas] = 1;
        hc_arena_homes = 1;
    }
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
