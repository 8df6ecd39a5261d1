/* hc_lock.h -- one lock around the allocator, free while the process is single-threaded.
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

static pthread_mutex_t hc_mutex = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;

static inline int hc_lock(void)
{
    if (hc_likely(HC_SINGLE_THREADED()))
        return 0;
    pthread_mutex_lock(&hc_mutex);
    return 1;
}

static inline void hc_unlock(int held)
{
    if (held)
        pthread_mutex_unlock(&hc_mutex);
}

static void hc_fork_prepare(void) { pthread_mutex_lock(&hc_mutex); }
static void hc_fork_parent(void) { pthread_mutex_unlock(&hc_mutex); }
static void hc_fork_child(void) { hc_mutex = (pthread_mutex_t)PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP; }

__attribute__((constructor)) static void hc_lock_init(void)
{
    pthread_atfork(hc_fork_prepare, hc_fork_parent, hc_fork_child);
}

#endif /* HC_LOCK_H */
