/* kingsley.c — a Kingsley-style power-of-two allocator: the CK baseline of Hasan & Chang 2006
 * (§4.2), written for hctune; build it as a shared library and inject it with LD_PRELOAD.
 *
 * The algorithm in a paragraph (Wilson et al. 1995 call it simple segregated storage):
 *   1. every request, plus a 16-byte header, is rounded up to a power of two, 2^k bytes;
 *   2. each k has a LIFO free list; malloc pops it, free pushes onto it; blocks never split,
 *      never coalesce and never go back to the OS;
 *   3. an empty list is refilled by carving a fresh chunk of at least 16 KiB (or one block,
 *      when a block is larger) from an mmap'd arena.
 * Hence the paper's picture of CK: the fastest allocator of its tables and the most memory
 * (Tables 8, 9).
 *
 * 64-bit port: the header is 16 bytes so that payloads stay 16-byte aligned (x86-64 ABI); the
 * smallest block is 32 bytes.  The complete malloc API is provided, thread-safe through one
 * mutex (skipped while single-threaded), fork-safe through pthread_atfork. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#define HDR 16u
#define MIN_K 5 /* 32-byte blocks: header + 16 bytes */
#define MAX_K 62
#define CHUNK (16u * 1024)        /* smallest refill carved for one list */
#define ARENA (4u * 1024 * 1024) /* the arena grows by this much (address space, not RSS) */
#define MAGIC 0x6b736c79u         /* "ksly": a live block */
#define ALIGNED 0x616c6e64u       /* "alnd": an aligned pointer inside a larger block */

struct hdr {
    uint32_t k;     /* log2 of the block size (MAGIC blocks) */
    uint32_t tag;   /* MAGIC or ALIGNED */
    uint64_t back;  /* ALIGNED: bytes from the enclosing block's payload to this pointer */
};

struct freeblk {
    struct freeblk *next;
};

static struct freeblk *lists[MAX_K + 1];
static char *arena_cur, *arena_end;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The lock costs nothing while the process has one thread (glibc's __libc_single_threaded),
 * as the paper's single-threaded allocators paid nothing for it. */
static inline void lock_heap(void)
{
    if (!__libc_single_threaded)
        pthread_mutex_lock(&lock);
}

static inline void unlock_heap(void)
{
    if (!__libc_single_threaded)
        pthread_mutex_unlock(&lock);
}

static void botch(const char *what)
{
    /* a bad pointer passed to free/realloc: stop at once, as Kingsley's allocator did */
    static const char pre[] = "kingsley: ";
    write(2, pre, sizeof pre - 1);
    write(2, what, strlen(what));
    write(2, "\n", 1);
    abort();
}

static inline struct hdr *hdr_of(void *p) { return (struct hdr *)((char *)p - HDR); }

/* The k whose 2^k block holds n payload bytes, or -1 when no block can. */
static int bucket(size_t n)
{
    if (n > ((size_t)1 << MAX_K) - HDR)
        return -1;
    size_t need = n + HDR;
    int k = MIN_K;
    while (((size_t)1 << k) < need)
        k++;
    return k;
}

static void *map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Refill list k with fresh blocks (step 3); lock held.  0 on success. */
static int morecore(int k)
{
    size_t bsize = (size_t)1 << k, chunk = bsize > CHUNK ? bsize : CHUNK;
    char *mem;
    if (chunk >= ARENA) {
        mem = map(chunk); /* a block bigger than an arena step gets its own mapping */
    } else {
        if ((size_t)(arena_end - arena_cur) < chunk) {
            char *a = map(ARENA); /* the tail of the old arena is simply abandoned */
            if (!a)
                return -1;
            arena_cur = a;
            arena_end = a + ARENA;
        }
        mem = arena_cur;
        arena_cur += chunk;
    }
    if (!mem)
        return -1;
    for (size_t off = chunk; off >= bsize; off -= bsize) {
        struct hdr *h = (struct hdr *)(mem + off - bsize);
        h->k = (uint32_t)k;
        struct freeblk *b = (struct freeblk *)((char *)h + HDR);
        b->next = lists[k];
        lists[k] = b;
    }
    return 0;
}

void *malloc(size_t n)
{
    int k = bucket(n);
    if (k < 0) {
        errno = ENOMEM;
        return NULL;
    }
    lock_heap();
    if (!lists[k] && morecore(k)) {
        unlock_heap();
        errno = ENOMEM;
        return NULL;
    }
    struct freeblk *b = lists[k];
    lists[k] = b->next;
    unlock_heap();
    struct hdr *h = hdr_of(b);
    h->tag = MAGIC;
    h->back = 0;
    return b;
}

/* The block's own payload pointer, whether p is it or an aligned pointer inside it. */
static void *base_of(void *p)
{
    struct hdr *h = hdr_of(p);
    if (h->tag == ALIGNED)
        p = (char *)p - h->back, h = hdr_of(p);
    if (h->tag != MAGIC || h->k < MIN_K || h->k > MAX_K)
        botch("free() or realloc() of a pointer it did not allocate, or a double free");
    return p;
}

void free(void *p)
{
    if (!p)
        return;
    p = base_of(p);
    struct hdr *h = hdr_of(p);
    int k = (int)h->k;
    h->tag = 0; /* so a second free is caught */
    struct freeblk *b = p;
    lock_heap();
    b->next = lists[k];
    lists[k] = b;
    unlock_heap();
}

size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    void *base = base_of(p);
    return ((size_t)1 << hdr_of(base)->k) - HDR - (size_t)((char *)p - (char *)base);
}

void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    size_t have = malloc_usable_size(p);
    if (n <= have)
        return p; /* still fits its power of two: Kingsley keeps it in place */
    void *q = malloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, have);
    free(p);
    return q;
}

/* Alignment above 16: over-allocate and mark the aligned pointer with a header of its own that
 * points back to the enclosing block. */
static void *aligned(size_t align, size_t n)
{
    if (align <= HDR)
        return malloc(n);
    size_t total;
    if (__builtin_add_overflow(n, align + HDR, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    char *base = malloc(total);
    if (!base)
        return NULL;
    char *user = (char *)(((uintptr_t)base + HDR + align - 1) & ~(uintptr_t)(align - 1));
    struct hdr *h = hdr_of(user);
    h->k = 0;
    h->tag = ALIGNED;
    h->back = (uint64_t)(user - base);
    return user;
}

static void *aligned_block(size_t align, size_t n) { return aligned(align, n); }

#include "api_derived.h"

/* ---- fork safety: no other thread may hold the lock in the child ---- */

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork(void) { pthread_mutex_unlock(&lock); }
static void in_child(void) { pthread_mutex_init(&lock, NULL); }

__attribute__((constructor)) static void kingsley_init(void)
{
    pthread_atfork(before_fork, after_fork, in_child);
}
