/* hc_heap.c -- memory from the OS: the contiguous heap and its wilderness (Hasan & Chang 2006,
 * §3.9), and mmapped blocks for huge requests (§3.2).
 *
 * The heap is one contiguous region grown upward in multiples of HEAP_UNIT, like sbrk but
 * private to this allocator; hc_os.c says how pages get committed.  Its address space is
 * reserved HC_HEAP_GROW (64 MiB) at first, at the low end of a hole of HC_RESERVE_MAX (64 GiB,
 * what 32-bit granule offsets address) found when the heap is first used, and grown in place,
 * doubling, with MAP_FIXED_NOREPLACE as the heap needs it: the kernel places other mappings
 * from the hole's other end (it maps downwards), so the heap meets one only when both have used
 * the hole.  (It reserved the whole 64 GiB at once before: address space only, but every
 * process under HC showed a 64 GiB VmSize per arena used, and ulimit -v had to allow it.)  The
 * small pages' region does the same (hc_page.c).  The
 * wilderness is the committed space from hc.top (its header) to hc.end.  Its header holds only
 * the prev-inuse bit: the wilderness's size is hc.end - hc.top, so it is never on a list and
 * never limited by the 32-bit header.
 */
#include "hc_block.h"

#define HC_RESERVE_MAX ((size_t)1 << 36) /* 64 GiB: what 32-bit granule offsets can address */
#define HC_RESERVE_MIN ((size_t)1 << 26) /* below this (a tight ulimit -v) use mmap only */
#define HC_HEAP_GROW ((size_t)1 << 26)   /* reserved at first, and the least growth after */

static size_t hc_page(void)
{
    static size_t page;
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

static void hc_note_footprint(void)
{
    uint64_t now = hc.st.heap_bytes + hc.st.mapped_bytes;
    if (now > hc.st.footprint)
        hc.st.footprint = now;
}

/* Reserve the heap.  Returns 0 when no region could be reserved (everything is mmapped then). */
static HC_COLD int hc_heap_init(void)
{
    hc.ready = 1;
    hc.st.version = HC_STATS_VERSION;
    hc.st.monitor = MONITOR;
    for (size_t sz = HC_RESERVE_MAX; sz >= HC_RESERVE_MIN; sz >>= 1) {
        /* A hole of sz: a probe, never touched and at once unmapped. */
        char *hole = mmap(NULL, sz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (hole == MAP_FAILED)
            continue;
        munmap(hole, sz);
        size_t first = sz < HC_HEAP_GROW ? sz : HC_HEAP_GROW;
        char *m = hc_os_reserve(hole, first);
        if (!m && (m = hc_os_reserve(NULL, sz)) != NULL) /* the hole was taken meanwhile */
            first = sz;
        if (!m)
            continue;
        hc.base = m;
        hc.limit = hc.base + first;
        hc.cap = hc.base + sz;
        hc.end = hc.base;
        /* Granule 0 is never a block (offset 0 means "none"): the first block is at offset 1. */
        hc.first = hc.top = hc_at(1);
        hc.clean = hc.top;
        return 1;
    }
    return 0;
}

/* Reserve at least `more` bytes of address space above hc.limit, in place: as much again as is
 * reserved (doubling), or less down to what is needed when the space above is shorter.  1 when
 * it grew.  limit is read without the lock (hc_arena_of): it only grows, and a block above the
 * old limit reaches another thread only after this store. */
static int hc_heap_reserve_more(size_t more)
{
    size_t room = (size_t)(hc.cap - hc.limit), have = (size_t)(hc.limit - hc.base);
    more = (more + HC_HEAP_GROW - 1) & ~(HC_HEAP_GROW - 1);
    if (more > room)
        return 0;
    for (size_t add = have > more ? have : more;; add = add / 2 > more ? add / 2 : more) {
        if (add > room)
            add = room;
        if (hc_os_reserve(hc.limit, add)) {
            __atomic_store_n(&hc.limit, hc.limit + add, __ATOMIC_RELEASE);
            return 1;
        }
        if (add == more)
            return 0;
    }
}

/* Grow the heap by at least `need` bytes at hc.end, in whole HEAP_UNITs (the accounting of
 * §3.9; hc_os_commit decides whether that takes a system call).  0 when the OS says no. */
static int hc_heap_grow(size_t need)
{
    HC_ARENA_HERE;
    size_t page = hc_page();
    size_t unit = ((size_t)(HEAP_UNIT) + page - 1) & ~(page - 1); /* whole pages */
    size_t n = (need + unit - 1) / unit * unit;
    if (n < need || (size_t)(hc.cap - hc.end) < n)
        return 0;
    if ((size_t)(hc.limit - hc.end) < n && !hc_heap_reserve_more(n - (size_t)(hc.limit - hc.end)))
        return 0;
    if (!hc_os_commit(hc.end + n))
        return 0;
    hc.end += n;
    hc.st.heap_bytes += n;
    hc_note_footprint();
    HC_COUNT(wilderness_grows, 1);
    hc_sp_yield(n); /* SMALL_YIELD: empty small pages past their bound give way (hc_page.c) */
    return 1;
}

/* Carve a block of `size` bytes from the wilderness (§3.9); NULL when the heap cannot grow.
 *  1. Expand the wilderness backwards over the free blocks just below it.
 *  2. Grow it from the OS if it is smaller than the block plus the header of what remains.
 *  3. The block starts at the old top; the wilderness starts right after it. */
static char *hc_wild_take(size_t size)
{
    HC_ARENA_HERE;
    if (hc.end == hc.base) { /* the first call: commit the first unit, write the top header */
        if (!hc_heap_grow((size_t)(hc.top - hc.base) + HC_HDR))
            return NULL;
        *hc_hdr(hc.top) = HC_PINUSE;
        hc.clean = hc.top + HC_HDR;
    }
    while (!hc_prev_inuse(hc.top)) {
        char *prev = hc_prev_checked(hc.top);
        hc_list_remove(prev);
        *hc_hdr(prev) &= HC_PINUSE;
        hc.top = prev;
    }
    size_t have = (size_t)(hc.end - hc.top);
    if (have < size + HC_HDR && !hc_heap_grow(size + HC_HDR - have))
        return NULL;
    char *b = hc.top;
    *hc_hdr(b) = (uint32_t)size | HC_INUSE | (*hc_hdr(b) & HC_PINUSE);
    hc.last_clean = b + HC_HDR >= hc.clean;
    hc.top = b + size;
    *hc_hdr(hc.top) = HC_PINUSE;
    if (hc.top + HC_HDR > hc.clean)
        hc.clean = hc.top + HC_HDR;
    HC_COUNT(wilderness_allocs, 1);
    return b;
}

/* Give a free block back to the wilderness when it lies just below it.  1 if it did. */
static int hc_wild_absorb(char *b, size_t size)
{
    if (b + size != hc.top)
        return 0;
    *hc_hdr(b) &= HC_PINUSE;
    hc.top = b;
    return 1;
}

/* ---- mmapped blocks (§3.2) ----
 * [mapping start ... | start (8) | pages (4) | tag (4) | payload ...]: the 16 bytes before the
 * payload say how to unmap it: the mapping's first byte and its length in pages (a mapping is
 * at most 16 TiB), so an alignment of any size is undone exactly (the payload may start far
 * into the mapping).  The tag in the header slot tells free() it is not a heap block. */
#define HC_MAP_PAGES_MAX 0xFFFFFFFFu
/* MMAP_UNIT (beyond the paper): mapped blocks are made in whole units of this many bytes (a
 * power of two above the page; else the page, as in the paper).  Address space only: the pages
 * past the request are never touched, so never resident.  The kernel places each new mapping
 * right below the last one, so lengths of odd page counts shift everything mapped after them
 * off any alignment: python3's pymalloc then got 1 MiB arenas not aligned to its 16 KiB pools,
 * each holding one pool less, and mapped and unmapped 1.3-1.6x as many arenas as under glibc
 * (strace, python-pymalloc). */
static inline size_t hc_map_unit(size_t page)
{
    size_t u = (size_t)(MMAP_UNIT);
    return u > page && (u & (u - 1)) == 0 ? u : page;
}

/* A calloc mapping (tag HC_MMAP_TAG_Z) always has its payload 16 bytes in, so its first word
 * holds instead how far the program may have written it (hc_zc_dirty). */
static inline char *hc_mmap_start(char *p)
{
    return *(uint32_t *)(void *)(p - 4) == HC_MMAP_TAG_Z ? p - 16 : *(char **)(void *)(p - 16);
}
static inline size_t hc_mmap_len(char *p) { return (size_t)*(uint32_t *)(void *)(p - 8) * hc_page(); }
static inline size_t hc_mmap_off(char *p) { return (size_t)(p - hc_mmap_start(p)); }
static inline int hc_is_mmapped(char *p)
{
    return (*(uint32_t *)(void *)(p - 4) & ~(HC_MMAP_TAG ^ HC_MMAP_TAG_Z)) == HC_MMAP_TAG;
}

static inline void hc_mmap_header(char *p, char *m, size_t len)
{
    *(char **)(void *)(p - 16) = m;
    *(uint32_t *)(void *)(p - 8) = (uint32_t)(len / hc_page());
    *(uint32_t *)(void *)(p - 4) = HC_MMAP_TAG;
}

/* ---- calloc's own mappings, kept for reuse (CALLOC_CACHE; beyond the paper) ----
 * With CALLOC_MMAP a calloc above the threshold gets a mapping, so zeroed memory the program
 * never writes (Python's bytes(n)) never becomes resident -- but a map and an unmap per calloc
 * made 15x glibc's OS calls.  Instead, a freed calloc mapping (tag HC_MMAP_TAG_Z, its length
 * rounded up to one of HC_ZC_STEPS lengths per power of two) is kept, up to CALLOC_CACHE bytes
 * of address space and HC_ZC_SLOTS mappings, and the next calloc of its length or less takes
 * the smallest that fits back with no call to the OS.  Its pages are then zeroed by
 * hc_os_zero_scan, which writes only the pages that are not zero already: a page the program
 * never wrote stays the kernel's shared zero page (not resident), as in a fresh mapping.  Only
 * what the program wrote stays resident while kept, as in glibc's heap.  Arena 0's (mapped
 * blocks all live there), under its lock; malloc_trim unmaps them all, the decay's purges
 * those unused for a whole period (hc_zc_drop).
 *
 * What a kept mapping holds resident: every page a user of it wrote stays resident (cleared by
 * the scan, never given back) until the mapping is unmapped.  Reused at sizes that vary, a
 * mapping collects them: python3's bytes(n) writes its header and the page of its last byte,
 * a different page at each size, so the kept mappings of python-pymalloc came to hold a third
 * of their pages resident (read from /proc/self/pagemap), ~10 MiB the program never touched
 * again -- 43 % of them past the end of the request the mapping was serving.  So each mapping
 * carries its dirty extent (bytes from its start that may hold written pages: the largest
 * request served since it was made or last released, page-rounded; the whole mapping once
 * realloc grew the block in place or malloc_usable_size was asked), and a reuse:
 *  - scans only up to that extent (the pages past it were never written: zero, not resident);
 *  - with CALLOC_SHRINK = k > 0, takes the fitting mapping with the fewest dirty bytes past the
 *    request, and releases them (MADV_DONTNEED, one call) when they are more than 1/k of the
 *    mapping.  Each release is a system call, so it is off by default (docs/allocator.md). */
#define HC_ZC_SLOTS 64u
#define HC_ZC_STEPS 2u /* lengths: 2 per power of two */
static inline size_t *hc_zc_dirty(char *p) { return (size_t *)(void *)(p - 16); }
/* Mapped block p may now be written up to its mapping's end (realloc kept it in place for a
 * larger size; malloc_usable_size told the program it may). */
static inline void hc_zc_written(char *p)
{
    if (*(uint32_t *)(void *)(p - 4) == HC_MMAP_TAG_Z)
        *hc_zc_dirty(p) = hc_mmap_len(p);
}

static struct {
    unsigned n;
    size_t bytes;
    char *map[HC_ZC_SLOTS];
    size_t len[HC_ZC_SLOTS];
    size_t dirty[HC_ZC_SLOTS];       /* hc_zc_dirty of each */
    unsigned char seen[HC_ZC_SLOTS]; /* kept at a decay purge: unmapped at the next if still here */
} hc_zc;

/* The mapping length of a calloc of n bytes: n + the 16-byte header, rounded up to a multiple
 * of 1/HC_ZC_STEPS of its power of two (few lengths, so a kept one fits most requests) and
 * MMAP_UNIT.  Address space only: pages never written are never resident. */
static HC_UNUSED size_t hc_zc_round(size_t n)
{
    size_t page = hc_page(), x = n + 16;
    if (x < n)
        return 0;
    size_t q = ((size_t)1 << (63 - __builtin_clzll((unsigned long long)x))) / HC_ZC_STEPS;
    if (q > page && x <= SIZE_MAX - q)
        x = (x + q - 1) & ~(q - 1);
    size_t unit = hc_map_unit(page);
    return x <= SIZE_MAX - unit ? (x + unit - 1) & ~(unit - 1) : 0;
}

/* Keep the mapping of freed calloc block p (its statistics already taken off); 0: not kept. */
static int hc_zc_put(char *p)
{
    size_t len = hc_mmap_len(p);
    if (*(uint32_t *)(void *)(p - 4) != HC_MMAP_TAG_Z ||
        hc_zc.n == HC_ZC_SLOTS || len > (size_t)(CALLOC_CACHE) - hc_zc.bytes ||
        hc_zc.bytes > (size_t)(CALLOC_CACHE))
        return 0;
    hc_zc.map[hc_zc.n] = hc_mmap_start(p);
    hc_zc.dirty[hc_zc.n] = *hc_zc_dirty(p);
    hc_zc.seen[hc_zc.n] = 0;
    hc_zc.len[hc_zc.n++] = len;
    hc_zc.bytes += len;
    hc.st.calloc_maps_kept = hc_zc.bytes;
    return 1;
}

/* Mapping m of len bytes as the block of a calloc of n bytes (payload 16 bytes in, as
 * hc_mmap_block's), whose pages up to dirty may have been written before. */
static char *hc_zc_place(char *m, size_t len, size_t n, size_t dirty)
{
    char *p = m + 16;
    hc_mmap_header(p, m, len);
    *(uint32_t *)(void *)(p - 4) = HC_MMAP_TAG_Z;
    size_t page = hc_page(), need = (16 + n + page - 1) & ~(page - 1);
    *hc_zc_dirty(p) = need > dirty ? need : dirty;
    hc.st.mapped_bytes += len;
    hc.st.mapped_blocks++;
    hc_note_footprint();
    return p;
}

/* A new mapping of len bytes (hc_zc_round's) for a calloc of n: its payload, zero; NULL if
 * the OS refuses. */
static HC_UNUSED void *hc_zc_map(size_t len, size_t n)
{
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (HUGEPAGE >= 2) /* mapped blocks too (hc_os.c) */
        hc_os_huge(m, len);
    hc.last_clean = 1;
    hc_sp_yield(len); /* SMALL_YIELD (hc_page.c) */
    HC_COUNT(mmaps, 1);
    return hc_zc_place(m, len, n, 0);
}

/* A kept mapping of at least len bytes as the block of a calloc of n bytes: its payload, or
 * NULL.  The smallest that fits (the least dirty of those), or with CALLOC_SHRINK the one with
 * the fewest dirty bytes past the request (then the smallest).  Its contents are NOT zero: the
 * caller zeroes the first *scan bytes (past them the pages were never written).  A longer
 * mapping costs no memory for its pages never written. */
static HC_UNUSED void *hc_zc_take(size_t len, size_t n, size_t *scan)
{
    size_t page = hc_page(), need = (16 + n + page - 1) & ~(page - 1);
    unsigned best = HC_ZC_SLOTS;
    size_t best_past = 0;
    for (unsigned i = hc_zc.n; i-- > 0;) {
        if (hc_zc.len[i] < len)
            continue;
        size_t past = CALLOC_SHRINK > 0 && hc_zc.dirty[i] > need ? hc_zc.dirty[i] - need : 0;
        if (best == HC_ZC_SLOTS || past < best_past ||
            (past == best_past && (hc_zc.len[i] < hc_zc.len[best] ||
                                   (hc_zc.len[i] == hc_zc.len[best] && hc_zc.dirty[i] < hc_zc.dirty[best])))) {
            best = i;
            best_past = past;
        }
    }
    if (best == HC_ZC_SLOTS)
        return NULL;
    unsigned i = best;
    len = hc_zc.len[i];
    char *m = hc_zc.map[i];
    size_t dirty = hc_zc.dirty[i];
    hc_zc.n--;
    hc_zc.map[i] = hc_zc.map[hc_zc.n];
    hc_zc.len[i] = hc_zc.len[hc_zc.n];
    hc_zc.dirty[i] = hc_zc.dirty[hc_zc.n];
    hc_zc.seen[i] = hc_zc.seen[hc_zc.n];
    hc_zc.bytes -= len;
    hc.st.calloc_maps_kept = hc_zc.bytes;
    HC_COUNT(calloc_maps_reused, 1);
#if CALLOC_SHRINK > 0
    if (dirty > need && dirty - need > len / (size_t)(CALLOC_SHRINK) &&
        madvise(m + need, dirty - need, MADV_DONTNEED) == 0)
        dirty = need;
#endif
    *scan = dirty > 16 ? (dirty - 16 < n ? dirty - 16 : n) : 0;
    return hc_zc_place(m, len, n, dirty);
}

/* Unmap kept mappings: all of them (malloc_trim), or (the decay's purge) those already kept at
 * the previous purge, unused for a whole period -- as the heap's free blocks are released, so
 * a program that keeps reusing them never pays a map and an unmap.  The bytes unmapped. */
static HC_UNUSED size_t hc_zc_drop(int all)
{
    size_t done = 0;
    for (unsigned i = 0; i < hc_zc.n;) {
        if (!all && !hc_zc.seen[i]) {
            hc_zc.seen[i++] = 1;
            continue;
        }
        munmap(hc_zc.map[i], hc_zc.len[i]);
        done += hc_zc.len[i];
        hc_zc.bytes -= hc_zc.len[i];
        hc_zc.n--;
        hc_zc.map[i] = hc_zc.map[hc_zc.n];
        hc_zc.len[i] = hc_zc.len[hc_zc.n];
        hc_zc.dirty[i] = hc_zc.dirty[hc_zc.n];
        hc_zc.seen[i] = hc_zc.seen[hc_zc.n];
    }
    hc.st.calloc_maps_kept = hc_zc.bytes;
    return done;
}

static void *hc_mmap_block(size_t n, size_t align)
{
    HC_ARENA_HERE;
    size_t page = hc_page();
    if (align < HC_GRANULE)
        align = HC_GRANULE;
    if (n > HC_MAX_REQUEST || align > HC_MAX_REQUEST - n)
        return NULL;
    size_t unit = align > page ? page : hc_map_unit(page);
    size_t len = (n + 16 + (align > HC_GRANULE ? align : 0) + unit - 1) & ~(unit - 1);
    if (len / page > HC_MAP_PAGES_MAX)
        return NULL;
    /* Above a page of alignment only the aligned part is kept: the over-sized mapping is made
     * without a commit charge (MAP_NORESERVE: memalign(1 << 35, 100) must not need 32 GiB of
     * commit) and its front and tail are unmapped. */
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (align > page ? MAP_NORESERVE : 0);
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    hc_sp_yield(len); /* SMALL_YIELD (hc_page.c) */
    char *p = (char *)(((uintptr_t)m + 16 + align - 1) & ~(uintptr_t)(align - 1));
    if (align > page) {
        char *s = (char *)((uintptr_t)(p - 16) & ~(uintptr_t)(page - 1));
        char *e = (char *)(((uintptr_t)p + n + page - 1) & ~(uintptr_t)(page - 1));
        if (s > m)
            munmap(m, (size_t)(s - m));
        if (m + len > e)
            munmap(e, (size_t)(m + len - e));
        m = s;
        len = (size_t)(e - s);
    }
    if (HUGEPAGE >= 2) /* mapped blocks too (hc_os.c) */
        hc_os_huge(m, len);
    hc_mmap_header(p, m, len);
    hc.st.mapped_bytes += len;
    hc.st.mapped_blocks++;
    hc_note_footprint();
    hc.last_clean = 1;
    HC_COUNT(mmaps, 1);
    return p;
}

static void hc_munmap_block(char *p)
{
    HC_ARENA_HERE;
    size_t len = hc_mmap_len(p);
    hc_os_mapped_freed(len - hc_mmap_off(p));
    hc.st.mapped_bytes -= len;
    hc.st.mapped_blocks--;
    if (CALLOC_CACHE > 0 && hc_zc_put(p))
        return;
    munmap(hc_mmap_start(p), len);
}

/* Grow or shrink an mmapped block for realloc: the kernel moves the pages, nothing is copied.
 * Only for blocks at the start of their mapping (not the memalign family's). NULL: not done. */
static char *hc_mremap_block(char *p, size_t n)
{
    HC_ARENA_HERE;
    size_t page = hc_page();
    if (hc_mmap_off(p) != 16 || n > HC_MAX_REQUEST)
        return NULL;
    size_t old = hc_mmap_len(p);
    size_t unit = hc_map_unit(page);
    size_t len = (n + 16 + unit - 1) & ~(unit - 1);
    if (len / page > HC_MAP_PAGES_MAX)
        return NULL;
    char *m = mremap(p - 16, old, len, MREMAP_MAYMOVE);
    if (m == MAP_FAILED)
        return NULL;
    hc_mmap_header(m + 16, m, len);
    hc.st.mapped_bytes += len - old;
    hc.st.bytes_current += len - old;
    if (hc.st.bytes_current > hc.st.bytes_max)
        hc.st.bytes_max = hc.st.bytes_current;
    hc_note_footprint();
    return m + 16;
}
