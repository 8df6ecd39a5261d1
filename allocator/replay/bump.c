/* bump.c — about the cheapest malloc there can be, used only to measure the replay harness
 * itself: replaying a trace with it costs the harness's loop, the page touching and a handful
 * of instructions per call, so its time next to glibc's bounds the harness overhead
 * (tests/test_replay_overhead.py, docs/replay.md).
 *
 * Allocation bumps a pointer through one big reserved region.  A pure bump allocator would hand
 * out cold memory on every call and measure cache misses and memcpy rather than the harness, so
 * sizes are rounded up to a power of two, a freed block is pushed on the LIFO list of its power
 * and handed out again to the next request of that power (no splitting, no coalescing, no
 * search), and realloc stays in place whenever the new size fits the block's power.  When every
 * block is free again (hcreplay frees all live blocks between repeats, Hasan & Chang 2006 §4.4)
 * the pointer goes back to the start and the lists are emptied, so later repeats reuse warm,
 * already-faulted pages.  Not a general allocator: single-threaded (the harness is), memory
 * hungry, and aligned blocks are never reused while anything is live.
 * HCBUMP_STATS=1 prints the number of rewinds at exit (tests check the rewinding happened). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HDR 16u /* blocks are 16-byte aligned; the capacity word sits just before */
#define NOREUSE ((size_t)1 << 63) /* capacity flag: an aligned block, never recycled */

/* address space only (pages appear when touched); halved until the mmap succeeds, since
 * valgrind and ulimit -v allow less */
static size_t reserve = (size_t)64 << 30;
static char *base;
static size_t top;         /* bytes handed out since the last rewind */
static size_t live;        /* blocks not yet freed */
static size_t rewinds;
static void *recycle[64];  /* k: freed blocks of 2^k bytes, linked through their first word */

static int init(void)
{
    if (base)
        return 0;
    for (; reserve >= ((size_t)64 << 20); reserve /= 2) {
        void *p = mmap(NULL, reserve, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            base = p;
            return 0;
        }
    }
    return -1;
}

/* the 16 bytes before a block: [0] the size asked (what realloc copies), [1] the capacity */
static inline size_t *hdr(void *p) { return (size_t *)p - 1; }
static inline size_t *asked(void *p) { return (size_t *)p - 2; }

/* log2 of the power of two that holds n bytes (at least 16) */
static inline unsigned power(size_t n) { return n <= 16 ? 4 : 64 - __builtin_clzl(n - 1); }

/* n payload bytes at a multiple of align (>= 16) */
static void *bump(size_t n, size_t align)
{
    if (init() || n > reserve / 2)
        goto oom;
    unsigned k = power(n);
    size_t cap = (size_t)1 << k;
    if (align <= HDR && recycle[k]) {
        void *p = recycle[k];
        recycle[k] = *(void **)p;
        *asked(p) = n;
        live++;
        return p;
    }
    size_t need = cap + HDR + (align > HDR ? align : 0);
    if (top + need > reserve)
        goto oom;
    char *p = base + top + HDR;
    if (align > HDR)
        p = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    top += need;
    *hdr(p) = align > HDR ? cap | NOREUSE : cap;
    *asked(p) = n;
    live++;
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
    if (--live == 0) {
        top = 0; /* everything is free: start over, from warm pages */
        memset(recycle, 0, sizeof recycle);
        rewinds++;
        return;
    }
    size_t cap = *hdr(p);
    if (!(cap & NOREUSE)) {
        unsigned k = (unsigned)__builtin_ctzl(cap);
        *(void **)p = recycle[k];
        recycle[k] = p;
    }
}

static size_t capacity(void *p) { return *hdr(p) & ~NOREUSE; }

size_t malloc_usable_size(void *p) { return p ? capacity(p) : 0; }

void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    if (n <= capacity(p)) {
        *asked(p) = n;
        return p;
    }
    void *q = malloc(n);
    if (q) {
        memcpy(q, p, *asked(p));
        free(p);
    }
    return q;
}

static void *aligned_block(size_t align, size_t n) { return bump(n, align > HDR ? align : HDR); }

#include "api_derived.h"

__attribute__((destructor)) static void bump_report(void)
{
    const char *v = getenv("HCBUMP_STATS");
    if (v && *v && strcmp(v, "0")) {
        char line[96];
        int len = snprintf(line, sizeof line, "hcbump: rewinds=%zu live=%zu\n", rewinds, live);
        write(2, line, (size_t)len);
    }
}
