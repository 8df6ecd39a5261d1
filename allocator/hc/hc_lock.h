/* hc_lock.h -- a lock around each arena, free while the process is single-threaded; the fork
 * handlers; the try-lock through which one thread purges another's arena.
 *
 * glibc keeps __libc_single_threaded true until the first thread is created; only the thread
 * running main can be inside malloc then, so taking no lock is safe and keeps the paper's speed.
 * The decision is made on entry and remembered, so an unlock always matches its lock.
 *
 * The lock order (the one design for locks around fork and for purging across arenas; the
 * small-page layer and anything else that adds a lock to HC follows it):
 *
 *   1. glibc's stdio list lock (_IO_list_lock)
 *   2. a FILE's lock (flockfile; getline holds it while it reallocs)
 *   3. hc_pick_mutex: the arenas' thread counts (hc_arena.c), held with no arena lock
 *   4. hc_sp_mu: the small pages' pools (hc_page.c), a leaf: nothing else is taken under it
 *   5. arena locks, in index order, each held only for one arena's work -- except that a thread
 *      holding its own arena's lock may *try* another's (pthread_mutex_trylock, never a wait):
 *      the decay visiting idle arenas (hc_os.c) does, and gives up on one that is busy.
 *
 * fork.  glibc's fork runs the atfork prepare handlers, then takes the stdio list lock, then its
 * own malloc's locks (last, "because fork handlers may use malloc, and the libio list lock has an
 * indirect malloc dependency as well (via the getdelim function)").  glibc reaches its malloc
 * through internal hooks of fork; an allocator loaded with LD_PRELOAD has only pthread_atfork,
 * whose prepare handler runs before fork takes the list lock.  Taking the arena locks there
 * inverts 1 and 5: a thread in getline holds a FILE lock and waits for an arena; fflush(NULL)
 * holds the list lock and waits for that FILE; fork holds the arenas and waits for the list
 * lock.  So HC's prepare takes the list lock itself first (it is recursive: fork's own take of
 * it afterwards only counts up), then the pick lock, the small pages' lock and every arena lock
 * in index order (one set of handlers: a layer with a lock adds it here, never registers its
 * own, since pthread_atfork runs prepare handlers in reverse order of registration, before fork
 * takes the list lock); the parent handler releases them in reverse order, then its count of
 * the list lock (fork has already released its own); the child re-initializes them (fork has
 * already reset the list lock and every FILE lock in the child).  mimalloc does not hang here
 * because it holds no lock across fork at all (its heaps are per thread); jemalloc and tcmalloc,
 * whose prepare handlers lock their arenas, hang the same way HC did.
 *
 * While the process is single-threaded the handlers lock nothing, as glibc's fork does then
 * (it skips its list and malloc locks): no other thread can be inside malloc, and a fork made by
 * a signal handler that interrupted another fork's handlers must not wait for locks the outer
 * fork holds.  What prepare did is remembered (hc_fork_held), so the parent and child handlers
 * undo exactly that.  A fork from a signal handler in a threaded process stays unsupported, as in
 * glibc.
 */
#ifndef HC_LOCK_H
#define HC_LOCK_H

#include "hc_internal.h"

/* glibc < 2.32 (or another libc) has no __libc_single_threaded: then the lock is always taken. */
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define HC_SINGLE_THREADED() (__libc_single_threaded)
#endif
#endif
#ifndef HC_SINGLE_THREADED
#define HC_SINGLE_THREADED() 0
#endif

/* One lock per arena (hc_internal.h), glibc's adaptive mutex: it spins briefly before sleeping,
 * which suits the allocator's short critical sections.  hc_lock() locks the arena the thread is
 * working on (hc_cur), which must not change before the matching hc_unlock(). */
static pthread_mutex_t hc_mutexes[HC_NARENAS] = {
    [0 ... HC_NARENAS - 1] = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
};

static inline pthread_mutex_t *hc_mutex_of(const struct hc_state *a) { return &hc_mutexes[a - hc_arenas]; }

static inline int hc_lock(void)
{
    if (hc_likely(HC_SINGLE_THREADED()))
        return 0;
    pthread_mutex_lock(hc_mutex_of(hc_cur));
    return 1;
}

static inline void hc_unlock(int held)
{
    if (held)
        pthread_mutex_unlock(hc_mutex_of(hc_cur));
}

/* Arena a's lock if it is free now, never waiting (order rule 5): 1 when taken. */
static inline int hc_trylock_arena(struct hc_state *a)
{
    return pthread_mutex_trylock(hc_mutex_of(a)) == 0;
}

static inline void hc_unlock_arena(struct hc_state *a) { pthread_mutex_unlock(hc_mutex_of(a)); }

/* Guards the arenas' thread counts while a thread picks its home or leaves it (hc_arena.c). */
static pthread_mutex_t hc_pick_mutex = PTHREAD_MUTEX_INITIALIZER;
static void hc_arena_after_fork(void);
static void hc_sp_fork_prepare(void); /* hc_page.c: the small pages' lock */
static void hc_sp_fork_parent(void);
static void hc_sp_fork_child(void);

/* ---- fork ---- */

/* glibc exports its stdio list lock (recursive); weak, so another libc or a static link
 * without it still builds: then only the arenas are locked. */
#ifdef __GLIBC__
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
#define HC_STDIO_LOCK() (_IO_list_lock ? _IO_list_lock() : (void)0)
#define HC_STDIO_UNLOCK() (_IO_list_unlock ? _IO_list_unlock() : (void)0)
#else
#define HC_STDIO_LOCK() ((void)0)
#define HC_STDIO_UNLOCK() ((void)0)
#endif

static int hc_fork_held; /* what the last prepare took: 0 nothing (single-threaded), 1 all */

static void hc_fork_prepare(void)
{
    if (HC_SINGLE_THREADED()) {
        hc_fork_held = 0;
        return;
    }
    HC_STDIO_LOCK();
    pthread_mutex_lock(&hc_pick_mutex);
    hc_sp_fork_prepare();
    for (unsigned k = 0; k < HC_NARENAS; k++)
        pthread_mutex_lock(&hc_mutexes[k]);
    hc_fork_held = 1;
}

static void hc_fork_parent(void)
{
    if (!hc_fork_held)
        return;
    hc_fork_held = 0;
    for (unsigned k = HC_NARENAS; k-- > 0;)
        pthread_mutex_unlock(&hc_mutexes[k]);
    hc_sp_fork_parent();
    pthread_mutex_unlock(&hc_pick_mutex);
    HC_STDIO_UNLOCK();
}

/* The child's single thread: fresh arena locks; the list lock was reset by fork itself. */
static void hc_fork_child(void)
{
    if (!hc_fork_held)
        return;
    hc_fork_held = 0;
    for (unsigned k = 0; k < HC_NARENAS; k++)
        hc_mutexes[k] = (pthread_mutex_t)PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
    hc_pick_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    hc_sp_fork_child();
    hc_arena_after_fork();
}

__attribute__((constructor)) static void hc_lock_init(void)
{
    pthread_atfork(hc_fork_prepare, hc_fork_parent, hc_fork_child);
}

#endif /* HC_LOCK_H */
