/* bump.c — the cheapest malloc there can be, used only to measure the replay harness itself:
 * replaying a trace with it costs the harness's loop, the page touching and a few instructions
 * per call, so its time over glibc's bounds the harness overhead (tests/test_replay_overhead.py).
 *
 * Allocation bumps a pointer through one big reserved region; free only counts.  When every
 * block is free again (hcreplay frees all live blocks between repeats, Hasan & Chang 2006
 * §4.4) the pointer goes back to the start, so later repeats reuse warm, already-faulted pages
 * instead of paying a page fault per 4 KiB forever.  Not a general allocator: it never reuses
 * memory while anything is live.  Thread-safe through atomics, good enough for the harness.
 * HCBUMP_STATS=1 prints the number of rewinds at exit (tests check the rewinding happened). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HDR 16u
#define RESERVE ((size_t)64 << 30) /* address space only; pages appear when touched */

static char *base;
static size_t top;          /* bytes handed out since the last rewind */
static size_t live;         /* blocks not yet freed */
static size_t rewinds;

static int init(void)
{
    if (base)
        return 0;
    void *p = mmap(NULL, RESERVE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    char *expected = NULL;
    if (!__atomic_compare_exchange_n(&base, &expected, (char *)p, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        munmap(p, RESERVE);
    return 0;
}

/* n payload bytes at a multiple of align (>= 16) from the start of the region */
static void *bump(size_t n, size_t align)
{
    if (init() || n > RESERVE)
        goto oom;
    size_t need = (n + HDR + 15) & ~(size_t)15;
    if (align > HDR)
        need += align;
    size_t start = __atomic_fetch_add(&top, need, __ATOMIC_RELAXED);
    if (start + need > RESERVE)
        goto oom;
    char *p = base + start + HDR;
    if (align > HDR)
        p = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    ((size_t *)p)[-1] = n; /* the size, for realloc and malloc_usable_size */
    __atomic_fetch_add(&live, 1, __ATOMIC_RELAXED);
    return p;
oom:
    errno = ENOMEM;
    return NULL;
}

void *malloc(size_t n) { return bump(n, HDR); }

void free(void *p)
{
    if (!p)
        return;
    if (__atomic_sub_fetch(&live, 1, __ATOMIC_ACQ_REL) == 0) {
        __atomic_store_n(&top, 0, __ATOMIC_RELAXED); /* everything is free: start over */
        rewinds++;
    }
}

size_t malloc_usable_size(void *p) { return p ? ((size_t *)p)[-1] : 0; }

void *calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = malloc(total);
    if (p)
        memset(p, 0, total); /* rewound memory is not zero */
    return p;
}

void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    size_t old = ((size_t *)p)[-1];
    if (n <= old) {
        ((size_t *)p)[-1] = n;
        return p;
    }
    void *q = malloc(n);
    if (q) {
        memcpy(q, p, old);
        free(p);
    }
    return q;
}

void *reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, total);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (!align || (align & (align - 1)) || align % sizeof(void *))
        return EINVAL;
    void *p = bump(n, align);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n) { return bump(n, align > HDR ? align : HDR); }
void *memalign(size_t align, size_t n) { return bump(n, align > HDR ? align : HDR); }
void *valloc(size_t n) { return bump(n, 4096); }
void *pvalloc(size_t n) { return bump((n + 4095) & ~(size_t)4095, 4096); }

__attribute__((destructor)) static void bump_report(void)
{
    const char *v = getenv("HCBUMP_STATS");
    if (v && *v && strcmp(v, "0")) {
        char line[96];
        int len = snprintf(line, sizeof line, "hcbump: rewinds=%zu live=%zu\n", rewinds, live);
        write(2, line, (size_t)len);
    }
}
