/* hc_lock.h -- a lock around each arena, free while the process is single-threaded.
 *
 * glibc keeps __libc_single_threaded true until the first thread is created; only the thread
 * running main can be inside malloc then, so taking no lock is safe and keeps the paper's speed.
 * The decision is made on entry and remembered, so an unlock always matches its lock.
 * fork: the prepare handler takes the lock so no other thread is mid-call when the child is
 * copied; the parent releases it and the child starts with a fresh lock.
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

/* fork: every arena locked, in index order, so no thread is inside the allocator when the child
 * is copied; released in the parent, made anew in the child. */
static void hc_fork_prepare(void)
{
    for (unsigned k = 0; k < HC_NARENAS; k++)
        pthread_mutex_lock(&hc_mutexes[k]);
}

static void hc_fork_parent(void)
{
    for (unsigned k = HC_NARENAS; k-- > 0;)
        pthread_mutex_unlock(&hc_mutexes[k]);
}

static void hc_fork_child(void)
{
    for (unsigned k = 0; k < HC_NARENAS; k++)
        hc_mutexes[k] = (pthread_mutex_t)PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
}

__attribute__((constructor)) static void hc_lock_init(void)
{
    pthread_atfork(hc_fork_prepare, hc_fork_parent, hc_fork_child);
}

#endif /* HC_LOCK_H */
