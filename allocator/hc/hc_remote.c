/* hc_remote.c -- frees of other threads' page blocks, beyond Hasan & Chang 2006 (REMOTE_KEEP,
 * REMOTE_BATCH; docs/allocator.md, "Small blocks on pages").
 *
 * A block on a small page (hc_page.c) belongs to its page's owner.  Freed by another thread it
 * goes back onto the page's atomic list (hc_sp_xpush: one compare-and-swap, the list's length
 * carried in the same word so that the owner takes the list without walking it), and the owner
 * hands it out again.  Two knobs change that, both off by default (measured in
 * docs/allocator-bench.md, "Threads"):
 *
 *  - REMOTE_KEEP: a thread that frees another thread's block of at least HC_RM_MIN bytes keeps
 *    it, on a stack of its own per size class, up to REMOTE_KEEP blocks a class and HC_RM_BYTES
 *    in all; its next malloc of that class whose own page has no free block takes it
 *    (hc_sp_malloc_slow, before the atomic lists and new pages).  glibc's tcache does this with
 *    any block.  Small blocks are never kept: a block of less than a few cache lines shares
 *    lines with its neighbours, and reusing it in another thread brings back the false sharing
 *    that pages owned by a thread avoid (mt_bench's false-share-handoff shape, 24-byte blocks).
 *  - REMOTE_BATCH: the freeing thread holds the blocks it frees per page, in HC_RB_SLOTS slots
 *    chosen by the page's address, and pushes a page's blocks with one compare-and-swap once it
 *    holds REMOTE_BATCH of them or another page needs the slot.  A thread waits to give back at
 *    most HC_RB_SLOTS x REMOTE_BATCH blocks.
 *
 * The fast paths are unchanged: malloc still pops the current page's list first, and free's
 * own-page push is the same; only the remote free and malloc's slow path look here.
 *
 *  - Counting: a kept or held block stays counted in its page's `used` (it is not free to the
 *    owner), so the page is never emptied, retired or released under it; handed out again it
 *    is simply a live block of that page.
 *  - Only a thread started on the pages (it allocated a small block, so it has an exit
 *    destructor) keeps or holds blocks; a thread that only frees pushes each at once, and so
 *    does every thread with the blocks of an orphan (its owner exited: the orphans are swept
 *    once their blocks are all back, hc_sp_purge_try, which a kept block would stop).  A thread
 *    that goes quiet keeps what it kept and held until it exits or calls malloc_trim: at most
 *    HC_RM_BYTES and HC_RB_SLOTS x REMOTE_BATCH blocks, whose pages stay in use meanwhile.
 *  - Thread exit: kept and held blocks go back onto their pages' atomic lists before the
 *    thread's own pages are retired or orphaned (hc_sp_exit); malloc_trim does the same for the
 *    calling thread.
 *  - fork: the forking thread's kept and held blocks live on in the child (counted used on their
 *    pages, as in the parent); those of the other threads are lost with them, as the blocks
 *    they were using are.
 *  - Double free: a kept or held block carries the freed-block key as any free page block; a
 *    second free by the same thread looks through its keep and its slot for that page
 *    (hc_rm_double_free_check).
 *  - Statistics (MONITOR): blocks kept, batches pushed, and on the owner's side the lists of
 *    other threads' frees taken and the blocks on them (without REMOTE_BATCH each of those
 *    blocks was one compare-and-swap).  Each thread counts its own without an atomic and adds
 *    them to the process's at exit (hc_rm_stats adds the calling thread's too), so they are
 *    exact once the threads are done; the free path itself counts nothing (a free of another
 *    thread's block may come from a thread with no exit hook to add its counts).
 *
 * Ideas from glibc's tcache, mimalloc's thread-free lists and snmalloc's batched messages; the
 * code is HC's own.
 */
#include "hc_block.h"
#include "hc_page.h"

#if HC_SP_ON

#define HC_RM_ON (REMOTE_KEEP > 0)
#define HC_RM_MIN 256u                  /* smallest block size kept (bytes) */
#define HC_RM_BYTES ((size_t)256 << 10) /* a thread keeps at most this many bytes in all */
#define HC_RM_COUNT ((REMOTE_KEEP) < 255 ? (REMOTE_KEEP) : 255)

#define HC_RB_ON (REMOTE_BATCH > 1)
#define HC_RB_SLOTS 16u                 /* pages a thread holds frees for at once */

/* Blocks freed onto one page of another thread, not yet pushed (REMOTE_BATCH). */
struct hc_rb_slot {
    struct hc_sp_page *pg;    /* NULL: empty */
    void *head, *tail;        /* linked through their first word, tail's link unset */
    uint32_t n;
};

struct hc_rm_thread {
#if HC_RM_ON
    void *head[HC_SP_NCLS];   /* kept blocks of class c, linked through their first word */
    uint8_t n[HC_SP_NCLS];
    size_t bytes;
#endif
#if HC_RB_ON
    struct hc_rb_slot slot[HC_RB_SLOTS]; /* by page address */
#endif
    /* MONITOR: blocks this thread kept, batches it pushed; as owner, lists of other threads'
     * frees it took (hc_sp_collect) and the blocks on them */
    uint64_t kept, batches, takes, returned;
};

static __thread struct hc_rm_thread hc_rm_me __attribute__((tls_model("initial-exec")));
static uint64_t hc_rm_total[4]; /* exited threads' kept, batches, takes, returned (atomic) */

/* The owner (or a thread sweeping orphans) took a list of n blocks other threads freed. */
static inline void hc_rm_count_take(uint32_t n)
{
#if MONITOR
    hc_rm_me.takes++;
    hc_rm_me.returned += n;
#else
    (void)n;
#endif
}

#if HC_RB_ON
/* The slot's blocks onto their page's atomic list with one compare-and-swap; the slot empties. */
static void hc_rb_push(struct hc_rb_slot *s)
{
    struct hc_sp_page *pg = s->pg;
    uintptr_t head = __atomic_load_n(&pg->xfree, __ATOMIC_RELAXED), x;
    do {
        *(void **)s->tail = HC_SP_XHEAD(head);
        x = (uintptr_t)s->head | ((head >> HC_SP_XSHIFT) + s->n) << HC_SP_XSHIFT;
    } while (!__atomic_compare_exchange_n(&pg->xfree, &head, x, 1, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
#if MONITOR
    hc_rm_me.batches++;
#endif
    s->pg = NULL;
    s->n = 0;
}
#endif

/* p (its key written), a block of pg, which the calling thread does not own, goes back to pg's
 * owner: held in the page's slot with REMOTE_BATCH (pushed when it holds REMOTE_BATCH blocks, or
 * when another page needs the slot), else pushed at once. */
static inline void hc_rm_push(struct hc_sp_page *pg, void *p)
{
#if HC_RB_ON
    if (hc_likely(hc_sp_me.state == HC_SP_LIVE && __atomic_load_n(&pg->owner, __ATOMIC_RELAXED))) {
        struct hc_rb_slot *s = &hc_rm_me.slot[hc_sp_number(pg) % HC_RB_SLOTS];
        if (s->pg != pg) {
            if (s->pg)
                hc_rb_push(s);
            s->pg = pg;
            s->tail = p;
        } else {
            *(void **)p = s->head;
        }
        s->head = p;
        if (++s->n >= (uint32_t)(REMOTE_BATCH))
            hc_rb_push(s);
        return;
    }
#endif
    hc_sp_xpush(pg, p);
}

/* Every held block pushed (thread exit, malloc_trim). */
static void hc_rb_flush(void)
{
#if HC_RB_ON
    for (unsigned i = 0; i < HC_RB_SLOTS; i++)
        if (hc_rm_me.slot[i].pg)
            hc_rb_push(&hc_rm_me.slot[i]);
#endif
}

#if HC_RM_ON
/* free of p, a block of pg (a page in use that the calling thread does not own): 1 when kept. */
static inline int hc_rm_keep(struct hc_sp_page *pg, void *p, uint64_t key)
{
    struct hc_rm_thread *r = &hc_rm_me;
    uint32_t size = pg->size;
    unsigned c = pg->cls;
    if (size < HC_RM_MIN || r->n[c] >= HC_RM_COUNT || r->bytes + size > HC_RM_BYTES
        || hc_sp_me.state != HC_SP_LIVE || !__atomic_load_n(&pg->owner, __ATOMIC_RELAXED))
        return 0;
    *(void **)p = r->head[c];
    *hc_sp_keyp(p) = key;
    r->head[c] = p;
    r->n[c]++;
    r->bytes += size;
#if MONITOR
    r->kept++;
#endif
    return 1;
}

/* malloc's slow path for class c: a kept block, or NULL. */
static inline void *hc_rm_take(unsigned c)
{
    struct hc_rm_thread *r = &hc_rm_me;
    void *b = r->head[c];
    if (b) {
        r->head[c] = *(void **)b;
        r->n[c]--;
        r->bytes -= hc_sp_page_of(b)->size;
    }
    return b;
}

/* Every kept and held block back onto its page's atomic list (thread exit, malloc_trim). */
static void hc_rm_flush(void)
{
    struct hc_rm_thread *r = &hc_rm_me;
    hc_rb_flush();
    for (unsigned c = 1; c < HC_SP_NCLS; c++) {
        for (void *b = r->head[c], *next; b; b = next) {
            next = *(void **)b;
            hc_sp_xpush(hc_sp_page_of(b), b);
        }
        r->head[c] = NULL;
        r->n[c] = 0;
    }
    r->bytes = 0;
}

#else
static inline int hc_rm_keep(struct hc_sp_page *pg, void *p, uint64_t key)
{
    (void)pg; (void)p; (void)key;
    return 0;
}
static inline void *hc_rm_take(unsigned c) { (void)c; return NULL; }
static void hc_rm_flush(void) { hc_rb_flush(); }
#endif /* HC_RM_ON */

/* A second free of p by the thread that keeps it or holds it. */
static void hc_rm_double_free_check(struct hc_sp_page *pg, void *p)
{
#if HC_RM_ON
    if (pg->size)
        for (void *q = hc_rm_me.head[pg->cls]; q; q = *(void **)q)
            if (q == p)
                hc_fail("free(): double free (block already freed by this thread)");
#endif
#if HC_RB_ON
    struct hc_rb_slot *s = &hc_rm_me.slot[hc_sp_number(pg) % HC_RB_SLOTS];
    if (s->pg == pg) {
        void *q = s->head;
        for (uint32_t i = 0; i < s->n; i++, q = *(void **)q) /* the tail's link is not set */
            if (q == p)
                hc_fail("free(): double free (block already freed by this thread)");
    }
#endif
    (void)pg; (void)p;
}

/* The thread is exiting (hc_sp_exit, first): its kept and held blocks go back. */
static void hc_rm_exit(void) { hc_rm_flush(); }

/* ... and last: its counts into the process's. */
static void hc_rm_exit_counts(void)
{
#if MONITOR
    uint64_t *mine[4] = { &hc_rm_me.kept, &hc_rm_me.batches, &hc_rm_me.takes, &hc_rm_me.returned };
    for (int i = 0; i < 4; i++) {
        __atomic_fetch_add(&hc_rm_total[i], *mine[i], __ATOMIC_RELAXED);
        *mine[i] = 0;
    }
#endif
}

static void hc_rm_stats(struct hc_stats *out)
{
    out->small_remote_kept = __atomic_load_n(&hc_rm_total[0], __ATOMIC_RELAXED) + hc_rm_me.kept;
    out->small_remote_batches = __atomic_load_n(&hc_rm_total[1], __ATOMIC_RELAXED)
                                + hc_rm_me.batches;
    out->small_remote_takes = __atomic_load_n(&hc_rm_total[2], __ATOMIC_RELAXED) + hc_rm_me.takes;
    out->small_remote_returned = __atomic_load_n(&hc_rm_total[3], __ATOMIC_RELAXED)
                                 + hc_rm_me.returned;
}

#endif /* HC_SP_ON */
