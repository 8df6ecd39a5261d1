/* hc_os.c -- HC and the operating system, beyond Hasan & Chang 2006 (docs/allocator.md, "HC and
 * the operating system").  Three mechanisms, each behind a knob whose 0 is the paper's allocator:
 *
 *  - Heap commit (HEAP_LAZY).  The paper's heap grows by sbrk, one system call per HEAP_UNIT.
 *    Here the reserved region is readable and writable from the start (MAP_NORESERVE: no commit
 *    charge), so the kernel hands out a page when it is first touched and growing the heap is
 *    bookkeeping only.  HEAP_UNIT still steps the wilderness's accounting (§3.9: heap_bytes and
 *    the footprint grow by whole units), which is what the paper measures.  Where the reservation
 *    cannot be writable (vm.overcommit_memory=2 charges it whole; a refusal), it is PROT_NONE and
 *    committed with mprotect in steps that grow with the heap (1/8 of it), not per HEAP_UNIT.
 *    HEAP_LAZY=0 is the paper's: PROT_NONE, an mprotect per HEAP_UNIT of growth.
 *
 *  - The mmap threshold (MMAP_THRESHOLD_MAX).  glibc's rule: when a mapped block is freed, a
 *    request of its size is evidently not rare, so the threshold rises to it (up to the knob),
 *    and later requests of that size are served from the heap instead of a map and unmap each.
 *    mallopt(M_MMAP_THRESHOLD) fixes the threshold, as in glibc.  Read and written under the
 *    heap's lock only (every path that reads it holds it).
 *
 *  - Memory given back (DECAY_MS, DECAY_BYTES; hc_os_purge, also malloc_trim).  Free memory that
 *    stayed free is released with madvise(MADV_DONTNEED): the wilderness's written pages above
 *    its top, and the whole pages inside the free blocks of the big list (hc_os_purge says which
 *    and when).  MADV_DONTNEED rather than MADV_FREE: the resident size drops at once (MADV_FREE
 *    pages stay counted in RSS until the kernel is short of memory, so a user watching RSS, or a
 *    container limit, sees nothing), and a released page reads as zero, which calloc's
 *    clean-memory tracking relies on.  The decay is evaluated on allocation slow paths, each
 *    reading a cheap clock (CLOCK_MONOTONIC_COARSE: a vDSO load of a value the kernel updates
 *    every tick), in periods of DECAY_MS (hc_os_decay).  With threads, other arenas are purged
 *    too (hc_arena.c: the decay visits them under try-locks, the last thread out of an arena
 *    purges it, and the purge thread of PURGE_THREAD runs the decay on every arena).  A
 *    single-threaded process never gets a thread (it would end the lock-free path of
 *    hc_lock.h), so one that makes no allocator calls keeps its memory until its next slow-path
 *    call (or its own malloc_trim).  Purging leaves heap_bytes and the footprint as they were:
 *    they count address space taken from the OS in HEAP_UNIT steps (the paper's measure), not
 *    resident pages; malloc_info reports what was released.
 */
#include "hc_block.h"
#include "hc_lock.h"
#include <time.h>

#define HC_DECAY_EVERY 16u                /* slow-path allocations between clock reads */
#define HC_COMMIT_MIN ((size_t)1 << 16)   /* mprotect commit: at least this, or heap / 8 */
#define HC_DECAY_BLOCK ((size_t)1 << 16)  /* the decay releases free blocks from this size up */

/* ---- heap commit ---- */

/* vm.overcommit_memory: 2 means a writable private mapping is charged whole, NORESERVE or not. */
static int hc_os_strict_overcommit(void)
{
    char c = 0;
    int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (read(fd, &c, 1) != 1)
        c = 0;
    close(fd);
    return c == '2';
}

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older kernels take it as a hint */
#endif

/* HUGEPAGE (beyond the paper): at 1 the heap's reservations and the small pages' region, at 2
 * also mapped blocks (hc_heap.c), are marked MADV_HUGEPAGE, so that where the kernel's
 * transparent huge pages are "madvise" (the common default) a 2 MiB stretch written is one page
 * fault and one TLB entry instead of 512.  A stretch partly written becomes resident whole, and
 * the decay's release of part of one splits it: a knob for speed, off by default.  Mapped blocks
 * are apart (2) because they are where the partly written tables are (xz's match finder: 2 is
 * +32 % peak RSS there).  One madvise per mapping; its failure (no THP in the kernel) changes
 * nothing. */
static inline void hc_os_huge(void *p, size_t sz)
{
#if HUGEPAGE > 0 && defined(MADV_HUGEPAGE)
    (void)madvise(p, sz, MADV_HUGEPAGE);
#else
    (void)p, (void)sz;
#endif
}

/* Map sz bytes of reservation at exactly `at` (MAP_FIXED_NOREPLACE: never over another
 * mapping), or anywhere if at is NULL; NULL when the OS refuses or the place is taken. */
static char *hc_os_map_at(char *at, size_t sz, int prot)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (at ? MAP_FIXED_NOREPLACE : 0);
    char *m = mmap(at, sz, prot, flags, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (at && m != at) { /* an old kernel took the address as a hint */
        munmap(m, sz);
        return NULL;
    }
    hc_os_huge(m, sz);
    return m;
}

/* Reserve sz bytes of address space for the heap, at `at` if not NULL; NULL when the OS
 * refuses.  The first reservation (hc.base still NULL) decides whether the heap is writable
 * from the start (HEAP_LAZY); the growths of hc_heap_grow map theirs alike. */
static char *hc_os_reserve(char *at, size_t sz)
{
    static int strict = -1;
    if (hc.base)
        return hc_os_map_at(at, sz, hc.os.lazy ? PROT_READ | PROT_WRITE : PROT_NONE);
    if (HEAP_LAZY && strict < 0)
        strict = hc_os_strict_overcommit();
    char *m;
    if (HEAP_LAZY && !strict && (m = hc_os_map_at(at, sz, PROT_READ | PROT_WRITE)) != NULL) {
        hc.os.lazy = 1;
        return m;
    }
    if ((m = hc_os_map_at(at, sz, PROT_NONE)) == NULL)
        return NULL;
    hc.os.lazy = 0;
    hc.os.committed = m;
    return m;
}

/* Make the heap usable up to `upto` (<= hc.limit).  0 when the OS says no. */
static int hc_os_commit(char *upto)
{
    if (hc.os.lazy || upto <= hc.os.committed)
        return 1;
    size_t page = hc_page();
    /* HEAP_LAZY=0 is the paper's commit: exactly what the heap grows by (whole HEAP_UNITs).
     * The fallback of HEAP_LAZY=1 commits ahead, 1/8 of the heap at a time. */
    size_t step = HEAP_LAZY ? (size_t)(hc.os.committed - hc.base) / 8 : 0;
    if (HEAP_LAZY && step < HC_COMMIT_MIN)
        step = HC_COMMIT_MIN;
    if (step < (size_t)(upto - hc.os.committed))
        step = (size_t)(upto - hc.os.committed);
    step = (step + page - 1) & ~(page - 1);
    if (step > (size_t)(hc.limit - hc.os.committed))
        step = (size_t)(hc.limit - hc.os.committed);
    if (mprotect(hc.os.committed, step, PROT_READ | PROT_WRITE) != 0) {
        /* Short of memory for the big step: try exactly what is needed. */
        step = ((size_t)(upto - hc.os.committed) + page - 1) & ~(page - 1);
        if (mprotect(hc.os.committed, step, PROT_READ | PROT_WRITE) != 0)
            return 0;
    }
    hc.os.committed += step;
    return 1;
}

/* ---- the mmap threshold ---- */

/* A mapped block whose payload held `usable` bytes was freed (glibc's rule, see above). */
static inline void hc_os_mapped_freed(size_t usable)
{
#if MMAP_THRESHOLD_MAX > 0
    size_t max = (size_t)(MMAP_THRESHOLD_MAX) < ((size_t)1 << 30) ? (size_t)(MMAP_THRESHOLD_MAX)
                                                                  : ((size_t)1 << 30);
    if (!hc.os.threshold_fixed && usable > hc.mmap_above && usable <= max)
        hc.mmap_above = usable;
#else
    (void)usable;
#endif
}

/* ---- memory given back ---- */

static inline char *hc_page_up(char *p)
{
    size_t page = hc_page();
    return (char *)(((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1));
}

static inline char *hc_page_down(char *p) { return (char *)((uintptr_t)p & ~(uintptr_t)(hc_page() - 1)); }

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL and nothing happens */
#endif

#define HC_POPULATE_MAX ((size_t)64 << 20) /* CALLOC_POPULATE: larger callocs stay lazy */

/* calloc's zeroing of the n bytes at p; clean: they were never written (fresh from the OS).
 *  - Fresh memory is zero already.  From CALLOC_POPULATE bytes up to HC_POPULATE_MAX its pages
 *    are populated writable at once (madvise MADV_POPULATE_WRITE, one call): a program that
 *    reads its zeroed table before writing it (xz's match finder: 17 MB per thread) would
 *    otherwise take two faults per page, one mapping the kernel's shared zero page and one
 *    replacing it at the first write.  Smaller blocks stay lazy (a zeroed buffer the program
 *    may never write: Python's bytes(n)), and so do larger ones (a huge sparse array).
 *  - Memory written before is zeroed by memset, except from CALLOC_RELEASE bytes up: its whole
 *    pages are given back (MADV_DONTNEED; they read as zero and fault in when written, as from
 *    a fresh mmap) and only the partial first and last pages are cleared, so a block the
 *    program never writes (Python's bytes(n)) does not stay resident.
 * Both 0: glibc's calloc, memset of reused memory only. */
static void hc_os_calloc(void *p, size_t n, int clean)
{
    char *lo = hc_page_up((char *)p), *hi = hc_page_down((char *)p + n);
    if (clean) {
#if CALLOC_POPULATE > 0
        if (n >= (size_t)(CALLOC_POPULATE) && n <= HC_POPULATE_MAX && lo < hi)
            (void)madvise(lo, (size_t)(hi - lo), MADV_POPULATE_WRITE);
#endif
        (void)lo, (void)hi;
        return;
    }
#if CALLOC_RELEASE > 0
    if (n >= (size_t)(CALLOC_RELEASE) && lo < hi && madvise(lo, (size_t)(hi - lo), MADV_DONTNEED) == 0) {
        memset(p, 0, (size_t)(lo - (char *)p));
        memset(hi, 0, (size_t)((char *)p + n - hi));
        return;
    }
#endif
    memset(p, 0, n);
}

/* Zero the n bytes at p writing only what is not zero already (CALLOC_CACHE's reused mappings):
 * each whole page is read up to its first nonzero word and cleared from there.  A page the
 * program never wrote reads as the kernel's shared zero page, costs a read fault the first
 * time, and is never written, so it stays out of the resident set; a written page is cleared
 * as memset would. */
static HC_UNUSED void hc_os_zero_scan(void *p, size_t n)
{
    char *lo = hc_page_up((char *)p), *hi = hc_page_down((char *)p + n);
    if (hi <= lo) {
        memset(p, 0, n);
        return;
    }
    memset(p, 0, (size_t)(lo - (char *)p));
    memset(hi, 0, (size_t)((char *)p + n - hi));
    size_t words = hc_page() / 8;
    for (char *q = lo; q < hi; q += words * 8) {
        const uint64_t *w = (const uint64_t *)(void *)q;
        size_t i = 0;
        for (; i < words; i += 8)
            if (w[i] | w[i + 1] | w[i + 2] | w[i + 3] | w[i + 4] | w[i + 5] | w[i + 6] | w[i + 7])
                break;
        if (i < words)
            memset(q + i * 8, 0, (words - i) * 8);
    }
}

static size_t hc_os_release(char *lo, char *hi)
{
    if (hi <= lo)
        return 0;
    if (madvise(lo, (size_t)(hi - lo), MADV_DONTNEED) != 0)
        return 0;
    return (size_t)(hi - lo);
}

/* Free memory that may still be resident: written wilderness above its top, and free bytes
 * not yet released (an estimate: free bytes beyond what was free right after the last purge). */
static HC_UNUSED size_t hc_os_dirty(void)
{
    size_t free_bytes = hc_free_bytes();
    if (hc.os.free_purged > free_bytes)
        hc.os.free_purged = free_bytes;
    size_t wild = hc.clean > hc.top ? (size_t)(hc.clean - hc.top) : 0;
    return wild + (free_bytes - hc.os.free_purged);
}

/* The decay's marks.  A free block of the big list carries one in its first granule's spare
 * word (after header, next and prev links): its size, tagged "seen free at a period's end" or
 * "released".  A block is released when a period ends and it is still free and unchanged since
 * the previous period's end (a merge changes the size at its header; an allocation hands the
 * word to the program, whose payload starts 8 bytes before it), so a block the program keeps
 * reusing is never released, and a released one is not released again.  A stale mark can only
 * make a block's release come a period early or late; only the resident size is at stake,
 * never the contents. */
#define HC_MARK_SEEN 0x3u     /* sizes are multiples of 16: the low bits carry the tag */
#define HC_MARK_RELEASED 0x5u
static inline uint32_t *hc_mark(char *b) { return (uint32_t *)(void *)(b + 12); }

/* A valley: free bytes at least 3/4 of the heap below the wilderness. */
static inline int hc_os_valley(void) { return hc_free_bytes() >= (size_t)(hc.top - hc.first) / 4 * 3; }

/* One free block of the big list at a purge: released now, or marked seen (its size added to
 * *seen), or left alone (see hc_os_purge).  The bytes released.  Its first granule stays (with
 * BIG_AO_FIT its first two: the tree node, hc_big.c), and its trailer. */
static size_t hc_os_purge_block(char *b, int all, int valley, size_t *seen)
{
    uint32_t size = (uint32_t)hc_size(b), mark = *hc_mark(b);
    if (mark == (size | HC_MARK_RELEASED) && !all)
        return 0;
    if (mark != (size | HC_MARK_SEEN) && !all && !valley) {
        *hc_mark(b) = size | HC_MARK_SEEN;
        *seen += size;
        return 0;
    }
    *hc_mark(b) = size | HC_MARK_RELEASED;
    return hc_os_release(hc_page_up(b + (BIG_AO_FIT ? 2 : 1) * HC_GRANULE), hc_page_down(b + size - HC_HDR));
}

/* Release free pages; the bytes released.  Called with the lock held.
 *  all (malloc_trim): coalesce the whole heap (§3.8), release the wilderness above top + pad and
 *    the whole pages inside every free block of at least two pages.
 *  else (the decay): release the wilderness the same way, and the free blocks of at least
 *    HC_DECAY_BLOCK bytes that stayed free for a whole period (marks).  In a valley (free bytes
 *    >= 3/4 of the heap below the wilderness) the heap is coalesced first (the walk is worth it
 *    then, and it is what gives back memory held in quick lists; the merged blocks have new
 *    sizes, so their marks start again); in a valley that held throughout a whole period (a
 *    program past its peak) every such block not yet released is released without waiting for
 *    marks. */
static size_t hc_os_purge(size_t pad, int all)
{
    if (!hc.ready || hc.base == NULL || hc.end == hc.base)
        return 0;
    size_t done = 0, seen = 0;
    hc_bc_flush(); /* BIG_CACHE's kept blocks to the big list, their pages with it */
    int valley = hc_os_valley();
    hc.os.valleys = valley && !all ? hc.os.valleys + 1 : 0;
    if (all || valley)
        hc_coalesce_complete();
    valley = hc.os.valleys >= 2; /* a valley throughout a whole period: past the peak */
    /* 1. The wilderness: the header at hc.top stays, the pages from top + pad up go. */
    char *from = hc_page_up(hc.top + HC_HDR + (pad < (size_t)(hc.end - hc.top) ? pad : 0));
    char *to = hc_page_up(hc.clean < hc.end ? hc.clean : hc.end);
    if (from < to) {
        done += hc_os_release(from, to);
        hc.clean = from > hc.top + HC_HDR ? from : hc.top + HC_HDR;
    }
    /* 2. Free blocks of the big list: header, links, mark and trailer stay. */
    size_t smallest = all ? 2 * hc_page() : HC_DECAY_BLOCK;
#if BIG_AO_FIT
    for (char *b = hc_big_lowest(); b; b = hc_big_next(b))
        if (hc_size(b) >= smallest)
            done += hc_os_purge_block(b, all, valley, &seen);
#else
    for (int j = hc_bit_next(hc.map, hc_index(smallest)); j >= 0; j = hc_bit_next(hc.map, (unsigned)j + 1)) {
        hc_off heads[2] = { hc.lists[j].unco, hc.lists[j].coal };
        for (int k = 0; k < 2; k++)
            for (hc_off o = heads[k]; o; o = *hc_link_next(hc_at(o)))
                done += hc_os_purge_block(hc_at(o), all, valley, &seen);
    }
#endif
    /* Blocks only seen this time stay counted as unreleased, so the next period comes. */
    hc.os.free_purged = hc_free_bytes() - seen;
#if CALLOC_CACHE > 0
    if (hc_cur == hc_arenas) /* calloc's kept mappings: only the pages written are resident */
        done += hc_zc_drop(all);
#endif
    hc.os.purges++;
    hc.os.purged_bytes += done;
    return done;
}

#if DECAY_MS > 0
static uint64_t hc_os_now_ms(void)
{
    struct timespec t;
#ifdef CLOCK_MONOTONIC_COARSE
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &t) != 0)
#endif
        clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* One step of the decay on the current arena, at time now (ms), with its lock held.  Periods
 * of DECAY_MS: while a period runs, the low-water mark of unreleased free memory is kept; at its
 * end, what stayed free throughout (the low-water mark) is released if it reaches decay_bytes.
 * A program that keeps reusing its free memory never pays for a purge; one that freed and went
 * quiet does, within two periods. */
static void hc_os_decay_at(uint64_t now, size_t dirty)
{
    if (dirty < hc.os.decay_bytes) {
        hc.os.deadline = 0;
        return;
    }
    if (!hc.os.deadline) {
        hc.os.deadline = now + (uint64_t)(DECAY_MS);
        hc.os.low = dirty;
        hc.os.valleys = (unsigned)hc_os_valley();
        return;
    }
    if (dirty < hc.os.low)
        hc.os.low = dirty;
    if (hc.os.valleys && !hc_os_valley())
        hc.os.valleys = 0; /* a valley counts only if it held at every check of the period */
    if (now < hc.os.deadline)
        return;
    if (hc.os.low >= hc.os.decay_bytes)
        hc_os_purge(hc.os.top_pad, 0);
    hc.os.deadline = now + (uint64_t)(DECAY_MS);
    hc.os.low = hc_os_dirty();
}

static void hc_os_decay_step(void)
{
    if (hc.ready && !hc.os.decay_off)
        hc_os_decay_at(hc_os_now_ms(), hc_os_dirty());
}

/* With threads and several arenas, the decay also visits the other arenas (hc_arena.c says
 * why): at most once per DECAY_MS / 2 in the whole process, each one under a try-lock, taken
 * while the caller holds its own arena's lock (a try never waits, so no lock-order cycle). */
static int hc_arena_purge_try(struct hc_state *a, int all);
static uint64_t hc_os_visit_next;

static HC_NOINLINE void hc_os_visit(uint64_t now)
{
    uint64_t next = __atomic_load_n(&hc_os_visit_next, __ATOMIC_RELAXED);
    uint64_t gap = (uint64_t)(DECAY_MS) / 2 ? (uint64_t)(DECAY_MS) / 2 : 1;
    if (now < next || !__atomic_compare_exchange_n(&hc_os_visit_next, &next, now + gap, 0,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;
    struct hc_state *me = hc_cur;
    for (unsigned k = 0; k < HC_NARENAS; k++) {
        struct hc_state *a = &hc_arenas[k];
        if (a != me && __atomic_load_n(&a->ready, __ATOMIC_RELAXED))
            hc_arena_purge_try(a, 0);
    }
}

/* The decay, on allocation slow paths (every HC_DECAY_EVERY-th): the calling thread's arena,
 * and with threads the others now and then.  Single-threaded, the clock is read only while
 * DECAY_BYTES of free memory are unreleased. */
static HC_NOINLINE void hc_os_decay(void)
{
    hc_sp_decay_tick(); /* the small pages' empty pool shares the clock (hc_page.c) */
    size_t dirty = hc_os_dirty();
    int visit = HC_NARENAS > 1 && !HC_SINGLE_THREADED();
    if (dirty < hc.os.decay_bytes && !visit) {
        hc.os.deadline = 0;
        return;
    }
    uint64_t now = hc_os_now_ms();
    hc_os_decay_at(now, dirty);
    if (visit)
        hc_os_visit(now);
}

/* The process's threads still running, the caller included, or -1 if /proc cannot say.  From
 * /proc/self/stat: num_threads (field 20) counts a main thread that ended with pthread_exit --
 * a zombie, state 'Z' (field 3), until the whole process ends -- so it is taken off.  No
 * allocation (the purge thread calls it), the comm field skipped past its last ')'. */
static HC_UNUSED int hc_os_live_threads(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *s = strrchr(buf, ')');
    if (!s || s[1] != ' ')
        return -1;
    char state = s[2];
    long field = 3, threads = -1;
    for (char *c = s + 2; *c && field < 20; c++)
        if (*c == ' ' && ++field == 20)
            threads = strtol(c + 1, NULL, 10);
    if (threads <= 0)
        return -1;
    return (int)(threads - (state == 'Z'));
}
#else
static inline void hc_os_decay_step(void) {}
#endif

/* On every allocation slow path, with the lock held: the decay's clock, read now and then. */
static inline void hc_os_tick(void)
{
#if DECAY_MS > 0
    /* Every HC_DECAY_EVERY-th slow path: a clock read on each one cost a single-threaded
     * replay ~8 % more instructions per call.  Counted, not timed, so that a replay's
     * instruction count stays the same from run to run (--metric instructions). */
    if (hc_unlikely(++hc.os.ticks % HC_DECAY_EVERY == 0) && !hc.os.decay_off)
        hc_os_decay();
#endif
}
