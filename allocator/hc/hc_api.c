/* hc_api.c -- the malloc API.  Every entry point takes the lock (free while single-threaded,
 * hc_lock.h), does its work through the files above, checks the heap in the debug build, and
 * reports failure as NULL with errno set, never a crash. */
#include "hc_block.h"
#include "hc_lock.h"

static HC_COLD void hc_fail(const char *msg)
{
    hc_write_all(2, "hcmalloc: ", 10);
    hc_write_all(2, msg, strlen(msg));
    hc_write_all(2, "\n", 1);
    abort();
}

#if HC_DEBUG
#define HC_CHECK() hc_check()
#else
#define HC_CHECK() ((void)0)
#endif

/* A quick-list hit (§3.10): pop the head of list i (block size i * 16), count it in use. */
static inline void *hc_ql_alloc(unsigned i)
{
    char *b = hc_ql_pop(i);
    HC_COUNT(ql_hits, 1);
    hc_account_alloc((size_t)i * HC_GRANULE);
    return hc_payload(b);
}

/* An exact fit from medium list i (§3.4), most recent first: the whole block, as exact fits are
 * never split (§3.8), so only its inuse bit and the next block's prev-inuse bit change. */
static inline void *hc_medium_alloc(unsigned i)
{
    int coalesced;
    char *b = hc_list_pop(i, &coalesced);
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
    if (n <= HC_QL_REQUEST && hc.ql[hc_request_size(n) / HC_GRANULE]) {
        hc.last_clean = 0;
        return hc_ql_alloc((unsigned)(hc_request_size(n) / HC_GRANULE));
    }
    if (hc_likely(n <= hc.mmap_above)) {
        char *b = hc_alloc_block(hc_request_size(n));
        if (hc_likely(b != NULL)) {
            hc_account_alloc(hc_size(b));
            return hc_payload(b);
        }
    }
    void *p = hc_mmap_block(n, HC_GRANULE);
    if (p)
        hc_account_alloc(hc_mmap_len(p));
    return p;
}

/* Free p with the lock held.  Catches a double free or a foreign pointer where a header check
 * can (always); the debug build also walks the heap to prove p is a live block. */
static void hc_free_locked(void *p)
{
    if (!hc_in_heap(p)) {
        if (((uintptr_t)p & (HC_GRANULE - 1)) || !hc_is_mmapped(p))
            hc_fail("free(): invalid pointer (not from this malloc, or freed twice)");
        hc_account_free(hc_mmap_len(p));
        hc_munmap_block(p);
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

/* ---- the fast paths: malloc's quick-list hit and free's quick-list push (§3.10) ----
 * They run only while the process is single-threaded (no lock to take) and never in the debug
 * build (which checks the heap after every call); everything else goes to the slow paths below,
 * out of line, so malloc and free need no stack frame and reach them by a tail call. */

static HC_NOINLINE void *hc_malloc_slow(size_t n)
{
    int held = hc_lock();
    void *p = hc_malloc_locked(n);
    HC_CHECK();
    hc_unlock(held);
    if (hc_unlikely(!p))
        errno = ENOMEM;
    return p;
}

static HC_NOINLINE void hc_free_slow(void *p)
{
    if (!p)
        return;
    int held = hc_lock();
    hc_free_locked(p);
    HC_CHECK();
    hc_unlock(held);
}

void *malloc(size_t n)
{
    /* n below the medium limit: a quick-list or medium size, and the rounding cannot overflow.
     * A quick-list size tries its quick list (§3.10), a medium size its own list (§3.4): the
     * first two steps of hc_alloc_block, in its order. */
    if (hc_likely(!HC_DEBUG && HC_SINGLE_THREADED() && n <= HC_MEDIUM_MAX - HC_HDR)) {
        unsigned i = (unsigned)(hc_request_size(n) / HC_GRANULE);
        if (i <= HC_QL_MAX) {
            if (hc_likely(hc.ql[i] != 0))
                return hc_ql_alloc(i);
        } else if (hc.lists[i].unco | hc.lists[i].coal) {
            return hc_medium_alloc(i);
        }
    }
    return hc_malloc_slow(n);
}

void free(void *p)
{
    char *b = hc_block_of(p);
    /* One unsigned compare keeps the check that b is a block of the heap: NULL, mmapped and
     * foreign pointers all fall outside [first, top) and go to the slow path. */
    if (hc_likely(!HC_DEBUG && HC_SINGLE_THREADED() &&
                  (uintptr_t)(b - hc.first) < (uintptr_t)(hc.top - hc.first))) {
        uint32_t h = *hc_hdr(b);
        size_t size = h & ~HC_FLAGS;
        /* In use, not already on a quick list (a double free), 16-byte aligned. */
        if (hc_likely((h & (HC_INUSE | HC_QUICK)) == HC_INUSE && !((uintptr_t)p & (HC_GRANULE - 1)))) {
            hc_account_free(size);
            if (size <= HC_QL_SIZE)
                hc_free_quick(b, size);
            else
                hc_free_listed(b, size);
            return;
        }
    }
    hc_free_slow(p);
}

/* calloc: overflow-checked; memory fresh from the wilderness or mmap is already zero. */
void *calloc(size_t count, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    int held = hc_lock();
    void *p = hc_malloc_locked(n);
    int clean = hc.last_clean;
    HC_CHECK();
    hc_unlock(held);
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    if (!clean)
        memset(p, 0, n);
    return p;
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
    int held = hc_lock();
    void *q = NULL;
    size_t old;
    HC_COUNT(reallocs, 1);
    if (!hc_in_heap(p)) {
        if (((uintptr_t)p & (HC_GRANULE - 1)) || !hc_is_mmapped(p))
            hc_fail("realloc(): invalid pointer");
        old = hc_mmap_len(p) - hc_mmap_off(p);
        if (n > hc.mmap_above && n <= old && n >= old / 2) {
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
    q = hc_malloc_locked(n);
    if (q) {
        memcpy(q, p, old < n ? old : n);
        hc_free_locked(p);
        HC_COUNT(realloc_moved, 1);
        HC_COUNT(allocs_total, -1); /* a move is one realloc, not a new allocation */
        HC_COUNT(frees, -1);
    }
done:
    HC_CHECK();
    hc_unlock(held);
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
    if (align <= HC_GRANULE)
        return malloc(n);
    if (n > HC_MAX_REQUEST || align > HC_MAX_REQUEST - n) {
        errno = ENOMEM;
        return NULL;
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
    if (!p && (p = hc_mmap_block(n, align)) != NULL)
        hc_account_alloc(hc_mmap_len(p));
    HC_CHECK();
    hc_unlock(held);
    if (!p)
        errno = ENOMEM;
    return p;
}

static inline int hc_pow2(size_t a) { return a && !(a & (a - 1)); }

int posix_memalign(void **out, size_t align, size_t n)
{
    if (!hc_pow2(align) || align % sizeof(void *))
        return EINVAL;
    int saved = errno;
    void *p = hc_memalign(align, n);
    if (!p) {
        errno = saved;
        return ENOMEM;
    }
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

/* memalign rounds a non-power-of-two alignment up, as glibc does. */
void *memalign(size_t align, size_t n)
{
    if (align > ((size_t)1 << 62)) {
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
    int held = hc_lock();
    size_t n;
    if (hc_in_heap(p))
        n = hc_size(hc_block_of(p)) - HC_HDR;
    else
        n = hc_mmap_len(p) - hc_mmap_off(p);
    hc_unlock(held);
    return n;
}
