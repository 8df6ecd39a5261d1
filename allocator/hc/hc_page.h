/* hc_page.h -- what a small page is, and its kinds, beyond Hasan & Chang 2006 (SMALL_MAX,
 * MID_RUNS; docs/allocator.md, "Small blocks on pages" and "Page kinds").
 *
 * A small page (hc_page.c) is HC_SP_PAGE bytes of the region, owned by one thread: a header
 * (struct hc_sp_page), then blocks with no per-block header.  What the pages share is one
 * mechanism, in hc_page.c: the region, the owner and its lists, other threads' frees onto the
 * page's atomic list, thread exit and the orphan pool, adoption, the empty pool and its decay,
 * SMALL_YIELD, fork, the statistics' walk.  How a page lays out its blocks is its kind:
 *
 *  - HC_PK_CLASS (hc_page.c): blocks of one size class, handed out from a bump pointer and a
 *    local free list (the malloc and free fast paths, which only these pages have).
 *  - HC_PK_RUNS (hc_run.c, MID_RUNS): runs of 32-byte granules of any length, with bitmaps,
 *    on pages every mid size shares; every free of a run goes through the owner's slow free.
 *
 * The shared mechanism asks a page's kind through the hc_pk_* operations at the end of this
 * header, each an inline test of pg->kind that calls the kind's own function (hc_class_* or
 * hc_run_*), and nothing else in hc_page.c tests a kind.  With MID_RUNS off the tests are
 * constant and the compiler drops them: the class pages' paths are the code they were.  No
 * operation is an indirect call, and none is on malloc's or free's fast path, which only
 * class pages take (a run page keeps HC_SP_FULLBIT in its count, so free's one signed test
 * sends its frees to the slow path, hc_sp_free_owner_slow).  A new kind adds its case to each
 * operation.
 *
 * What every kind keeps as the shared mechanism reads it: `size` is non-zero while the page is
 * in use (hc_remote.c keeps another thread's blocks from 256 bytes: a run page's size is its
 * 32-byte granule, so its blocks are never kept); `free` is the page's local list, where
 * hc_sp_collect puts other threads' frees; `used` counts live blocks while no thread owns the
 * page (an orphan is empty at 0, for every kind), and what hc_pk_is_empty says while one does.
 */
#ifndef HC_PAGE_H
#define HC_PAGE_H

#include "hc_internal.h"

/* hc_stats.c's accounting tells the pages' counts the heap's (hc_page.c, "counts"). */
static inline void hc_sp_note_heap(uint64_t n, uint64_t bytes);

#define HC_SP_ON (SMALL_MAX > 0)
/* MID_RUNS (hc_run.c): requests above it up to SMALL_MAX are runs of granules on shared pages. */
#define HC_RUN_ON (HC_SP_ON && (MID_RUNS) > 0 && (MID_RUNS) < (SMALL_MAX) && (MID_RUNS) < 4096)
#define HC_RUN_SHIFT 5u
#define HC_RUN_GRAN (1u << HC_RUN_SHIFT) /* a run's granule: 32 bytes */
#define HC_RUN_BINS (4096u >> HC_RUN_SHIFT) /* hole lists: 1 .. 127 granules, and 128 or more */

#if HC_SP_ON

#define HC_SP_LIMIT ((size_t)((SMALL_MAX) < 4096 ? (SMALL_MAX) : 4096))
#define HC_SP_PER2 ((SMALL_CLASSES) >= 8 ? 8u : (SMALL_CLASSES) >= 4 ? 4u : (SMALL_CLASSES) >= 2 ? 2u : 1u)
/* Classes per power of two from HC_SP_MID_FROM up (MID_CLASSES; 0: HC_SP_PER2's spacing
 * throughout, the class sizes unstretched). */
#define HC_SP_MID ((MID_CLASSES) >= 64 ? 64u : (MID_CLASSES) >= 32 ? 32u : (MID_CLASSES) >= 16 ? 16u \
                   : (MID_CLASSES) >= 8 ? 8u : (MID_CLASSES) >= 4 ? 4u : (MID_CLASSES) >= 2 ? 2u \
                   : (MID_CLASSES) >= 1 ? 1u : 0u)
#define HC_SP_MID_FROM 1024u
#define HC_SP_SHIFT 16u
#define HC_SP_PAGE ((size_t)1 << HC_SP_SHIFT)
/* SMALL_HEADERS_APART: a page's header lives in the directory (hc_page.c, hc_sp_dir), an array
 * of headers apart from the pages, instead of at the page's start.  At the start, every header's
 * lines fall on the same few cache sets (the pages are 64 KiB apart), so a program that touches
 * many pages' headers in turn -- random frees over hundreds of pages -- misses on them; in the
 * directory they lie side by side, and the page's 64 KiB are all blocks. */
#define HC_SP_APART ((SMALL_HEADERS_APART) != 0)
#define HC_SP_HEAD (HC_SP_APART ? 0u : 256u) /* header bytes at the page's start: three cache lines, rounded up */
/* What MID_CLASSES stretches its classes to fill: a page less a header at its start, in both
 * layouts, so that they have one class table (and its bounded waste). */
#define HC_SP_CLASS_SPAN (HC_SP_PAGE - 256u)
#define HC_SP_REGION ((size_t)1 << 36)       /* 64 GiB of address space at most ... */
#define HC_SP_GROW ((size_t)1 << 26)         /* ... reserved 64 MiB at first, then doubling */
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000         /* Linux 4.17; older kernels take it as a hint */
#endif
/* Classes at most, slot 0 unused (8 per power of two to 4 KiB: 48; SMALL_CLASSES 8 and
 * MID_CLASSES 16: 64; MID_CLASSES 64, where the stretch leaves one class per count of blocks
 * a page holds, 63 down to 15: 32 + 50) */
#define HC_SP_NCLS_GENERIC (HC_SP_MID >= 32 ? 96u : HC_SP_PER2 >= 8 && HC_SP_MID >= 16 ? 72u : 64u)
/* FIT_1 .. FIT_8 (hc_fit.c): the fitted classes' slots, reserved only when a table is given. */
#define HC_FIT_MAX 8u
#define HC_FIT_ON (((FIT_1) | (FIT_2) | (FIT_3) | (FIT_4) | (FIT_5) | (FIT_6) | (FIT_7) | (FIT_8)) != 0)
#define HC_SP_NCLS_SIZED (HC_SP_NCLS_GENERIC + (HC_FIT_ON ? HC_FIT_MAX : 0u))
/* With MID_RUNS, two more: the run requests' class (its current page is always hc_sp_none, so
 * malloc's pop misses and the slow path calls hc_run_malloc) and the run pages' class. */
#define HC_SP_NCLS (HC_SP_NCLS_SIZED + (HC_RUN_ON ? 2u : 0u))
#define HC_RUN_RCLS (HC_SP_NCLS - 2u)
#define HC_RUN_PCLS (HC_SP_NCLS - 1u)
/* The request-to-class table's step: 16 bytes, or 8 with FIT_ALIGN8 and a fitted table (hc_fit.c:
 * fitted classes of an odd number of 8-byte words, whose blocks are 8-byte aligned). */
#define HC_SP_QSHIFT ((FIT_ALIGN8) && HC_FIT_ON ? 3u : 4u)
#define HC_SP_Q (1u << HC_SP_QSHIFT)
#define HC_SP_IDX ((HC_SP_LIMIT + HC_SP_Q - 1u) / HC_SP_Q + 1u)
#define HC_SP_ALIGN_MAX 256u                 /* a power-of-two class is aligned to its size up to here */
/* The debug build ends every block with a 16-byte red zone (a pattern checked when the block is
 * freed or handed out again, and on the page walks), so a write past a block's end is caught as
 * the paper's blocks' headers catch it.  Release builds have none. */
#define HC_SP_RED (HC_DEBUG ? 16u : 0u)
#define HC_SP_RED_BYTE 0xa7

enum { HC_SP_AVAIL = 1, HC_SP_FULL, HC_SP_ORPHAN, HC_SP_EMPTY };
#define HC_SP_FULLBIT 0x80000000u
enum { HC_SP_NEW = 0, HC_SP_STARTING, HC_SP_LIVE, HC_SP_DEAD };

struct hc_sp_thread;

struct hc_sp_page {
    /* line 0: written when the page changes hands, read by every free */
    struct hc_sp_thread *owner; /* NULL: orphan or empty */
    uint32_t size;              /* block size (a run page: its granule); 0: not in use (empty,
                                 * or never used) */
    uint32_t cls;
    char *end;                  /* end of the last whole block */
    char *zero_from;            /* bytes from here up were never written (or released) */
    uint64_t stamp;             /* when it went to the empty pool (ms, coarse clock) */
    unsigned char released;     /* in the empty pool, its blocks' pages given back */
    unsigned char kind;         /* HC_PK_CLASS or HC_PK_RUNS (below), set with cls (hc_sp_format) */
    char pad0[64 - 42];
    /* line 1: the owner's */
    void *free;                 /* local free list: the next block is each block's first word */
    char *bump;                 /* next block never handed out */
    struct hc_sp_page *next, *prev; /* the list the page is on (where) */
    uint32_t used;              /* blocks handed out and not freed by the owner; HC_SP_FULLBIT
                                 * added while the page is on the full list, so that free's one
                                 * signed test catches both "now empty" and "was full" */
    uint32_t where;
    char pad1[64 - 40];
    /* line 2: other threads' frees: the head of their list in the low HC_SP_XSHIFT bits, how
     * many blocks it holds above them (hc_sp_xpush), so the owner takes the list without
     * walking it */
    uintptr_t xfree;
    char pad2[64 - sizeof(uintptr_t)];
};
_Static_assert(offsetof(struct hc_sp_page, free) == 64 && offsetof(struct hc_sp_page, xfree) == 128
               && sizeof(struct hc_sp_page) == 192,
               "a page header's three cache lines");

/* A thread's pages.  cur[c] is the head of class c's list of pages with free blocks, or
 * hc_sp_none (whose free list is empty) so that malloc's fast path needs no NULL test. */
struct hc_sp_thread {
    struct hc_sp_page *cur[HC_SP_NCLS];
    struct hc_sp_page *full[HC_SP_NCLS];
    uint32_t nfull[HC_SP_NCLS];
    uint32_t fresh[HC_SP_NCLS]; /* pages taken since the last scan of the full list */
#if SMALL_IDLE
    uint64_t idle[2];           /* classes whose current page was left empty (SMALL_IDLE) */
#endif
#if HC_RUN_ON
    void *rbin[HC_RUN_BINS];    /* MID_RUNS: the holes of the thread's run pages by length (hc_run.c) */
    uint64_t rmask[HC_RUN_BINS / 64]; /* bit b: rbin[b] is not empty */
    uint32_t rpages, rfresh;    /* run pages owned; taken since the last scan for others' frees */
    void *rkeep[HC_RUN_BINS + 1];         /* freed runs kept whole, by length in granules */
    unsigned char rkeep_n[HC_RUN_BINS + 1];
    uint32_t rkeep_bytes;
#endif
    unsigned char state;
#if MONITOR
    /* Page blocks in HCMALLOC_STATS' allocs_* and bytes_* (hc_page.c, "counts"): blocks that came
     * back (its own frees, other threads' frees it collected as owner, every free of a run),
     * bytes taken; blocks and bytes in use by its count, the most of them since base_* was set,
     * what lies outside its count (its arena's heap, exited threads' blocks), the maxima kept;
     * its arena's heap at its last heap call.  In this order so that no two counts one call
     * adds to are neighbours (a compiler pairs neighbours into a vector add, a dozen
     * instructions more on malloc's fast path). */
    uint64_t b_alloc;
    int64_t lim_b, live_b, lim_n, live_n, base_b;
    uint64_t n_free;
    int64_t base_n;
    uint64_t max_n, max_b, heap_n, heap_b;
#endif
#if HC_DEBUG
    uint64_t dbg_calls;         /* calls since the last walk of the thread's pages */
#endif
};

/* ---- page kinds ---- */

enum { HC_PK_CLASS = 0, HC_PK_RUNS = 1 };

/* The blocks and bytes in use on the pages (hc_sp_totals' walk); runs: run pages among them. */
struct hc_sp_totals { uint64_t pages, blocks, bytes, runs; };

/* The class pages' operations (hc_page.c). */
static void hc_class_format(struct hc_sp_thread *t, struct hc_sp_page *pg);
static void hc_class_free_owner(struct hc_sp_thread *t, struct hc_sp_page *pg);
static inline size_t hc_class_usable(struct hc_sp_page *pg, void *p);
static void hc_class_totals(struct hc_sp_page *pg, uint32_t used, struct hc_sp_totals *to);
static int hc_class_fork_child(struct hc_sp_page *pg);
#if HC_DEBUG
static void hc_class_check(struct hc_sp_page *pg, int every);
static void hc_class_check_arg(struct hc_sp_page *pg, void *p);
#endif

/* The run pages' (hc_run.c; stubs there when MID_RUNS is off).  Besides the operations: the
 * classes' set-up, malloc of a mid size (hc_sp_malloc_slow and hc_api.c call it for the
 * requests' class, HC_RUN_RCLS) and realloc in place (hc_api.c). */
static void hc_run_classes(void);
static void *hc_run_malloc(struct hc_sp_thread *t, size_t n, int *clean);
static void *hc_run_realloc(void *p, size_t n);
static void hc_run_format(struct hc_sp_thread *t, struct hc_sp_page *pg);
static void hc_run_adopt(struct hc_sp_thread *t, struct hc_sp_page *pg);
static void hc_run_leave(struct hc_sp_thread *t, struct hc_sp_page *pg);
static void hc_run_disown(struct hc_sp_page *pg);
static int hc_run_is_empty(struct hc_sp_page *pg);
static void hc_run_free_owner(struct hc_sp_thread *t, struct hc_sp_page *pg);
static void hc_run_free_check(struct hc_sp_thread *t, struct hc_sp_page *pg, void *p);
static void hc_run_flush(struct hc_sp_thread *t);
static size_t hc_run_usable(struct hc_sp_page *pg, void *p);
static void hc_run_totals(struct hc_sp_page *pg, uint32_t used, struct hc_sp_totals *to);
static int hc_run_fork_child(struct hc_sp_page *pg);
#if HC_DEBUG
static void hc_run_check(struct hc_sp_page *pg, int every);
#endif

/* The kind of the pages of class c, and whether pg is a run page. */
static inline unsigned char hc_pk_of_class(unsigned c)
{
    return HC_RUN_ON && c == HC_RUN_PCLS ? HC_PK_RUNS : HC_PK_CLASS;
}
static inline int hc_pk_runs(const struct hc_sp_page *pg) { return HC_RUN_ON && pg->kind == HC_PK_RUNS; }

/* pg, taken for t (new, or from the empty pool): its blocks laid out, all free, and used set
 * (hc_sp_format, hc_sp_mu held; size, class, kind and zero_from are set, owner is not yet). */
static inline void hc_pk_format(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    if (hc_pk_runs(pg))
        hc_run_format(t, pg);
    else
        hc_class_format(t, pg);
}

/* pg, an orphan t adopts, its atomic list collected: made t's (class pages: nothing to do). */
static inline void hc_pk_adopt(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    if (hc_pk_runs(pg))
        hc_run_adopt(t, pg);
}

/* pg leaves t's lists (hc_sp_unlink: retired, moved to the full list, or back). */
static inline void hc_pk_leave(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    if (hc_pk_runs(pg))
        hc_run_leave(t, pg);
}

/* pg's owner is exiting: used becomes the page's live blocks (hc_sp_exit; HC_SP_FULLBIT
 * already cleared). */
static inline void hc_pk_disown(struct hc_sp_page *pg)
{
    if (hc_pk_runs(pg))
        hc_run_disown(pg);
}

/* No live block on pg, which the calling thread owns. */
static inline int hc_pk_is_empty(struct hc_sp_page *pg)
{
    return hc_pk_runs(pg) ? hc_run_is_empty(pg) : (pg->used & ~HC_SP_FULLBIT) == 0;
}

/* The owner's free that free's signed test sent to the slow path (the block is on pg's local
 * list and uncounted: a class page that was full or is now empty, every free of a run). */
static inline void hc_pk_free_owner(struct hc_sp_thread *t, struct hc_sp_page *pg)
{
    if (hc_pk_runs(pg))
        hc_run_free_owner(t, pg);
    else
        hc_class_free_owner(t, pg);
}

/* A double free the local list's walk cannot see: p freed, but held by t's kind (a run kept
 * whole).  Aborts; class pages hold nothing. */
static inline void hc_pk_free_check(struct hc_sp_thread *t, struct hc_sp_page *pg, void *p)
{
    if (hc_pk_runs(pg))
        hc_run_free_check(t, pg, p);
}

/* What t's kinds hold back from their pages, given back (thread exit, malloc_trim). */
static inline void hc_pk_flush(struct hc_sp_thread *t)
{
    if (HC_RUN_ON)
        hc_run_flush(t);
}

/* The usable bytes of the block at p. */
static inline size_t hc_pk_usable(struct hc_sp_page *pg, void *p)
{
    return hc_pk_runs(pg) ? hc_run_usable(pg, p) : hc_class_usable(pg, p);
}

/* pg (in use, used read once: another thread may own it) added to the statistics' totals. */
static inline void hc_pk_totals(struct hc_sp_page *pg, uint32_t used, struct hc_sp_totals *to)
{
    if (hc_pk_runs(pg))
        hc_run_totals(pg, used, to);
    else
        hc_class_totals(pg, used, to);
}

/* fork's child, pg a page of an owner that did not survive: used recounted from what the
 * parent's other threads could not have left half-written (hc_sp_fork_child).  1 when the page
 * may be adopted (onto the orphan pool), 0 when it is never reused (its blocks can be freed). */
static inline int hc_pk_fork_child(struct hc_sp_page *pg)
{
    return hc_pk_runs(pg) ? hc_run_fork_child(pg) : hc_class_fork_child(pg);
}

#if HC_DEBUG
/* pg's counts and links (every: each block's red zone too, the periodic walk). */
static inline void hc_pk_check(struct hc_sp_page *pg, int every)
{
    if (hc_pk_runs(pg))
        hc_run_check(pg, every);
    else
        hc_class_check(pg, every);
}

/* p, about to be freed, is a block of pg (in use) that malloc returned (runs: hc_run_block
 * checks it on the free). */
static inline void hc_pk_check_arg(struct hc_sp_page *pg, void *p)
{
    if (!hc_pk_runs(pg))
        hc_class_check_arg(pg, p);
}
#endif

#else /* !HC_SP_ON */

struct hc_sp_totals { uint64_t pages, blocks, bytes, runs; };
#define HC_SP_QSHIFT 4u
#define HC_SP_Q 16u

#endif /* HC_SP_ON */
#endif /* HC_PAGE_H */
