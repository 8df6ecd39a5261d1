/* hc_big.c -- the big list in address order (BIG_AO_FIT=1), beyond Hasan & Chang 2006.
 *
 * The paper's big list (§3.3) is searched best-fit and its blocks are coalesced late (§3.7,
 * §3.8: only when no list can serve).  On a program that keeps long-lived small blocks among
 * short-lived large ones (bench/churn_words.c: a word table and 500 buffers of 1..64 KiB), that
 * heap grows without end: a best fit lands anywhere, the small blocks carved from big free
 * blocks end up in every 64 KiB of the heap, and free neighbours stay apart, so the next large
 * request fits nowhere and the wilderness grows (docs/allocator.md, "Large blocks").  With
 * BIG_AO_FIT the big list is searched first-fit in address order (the lowest-addressed block
 * that fits, split from its low end), and a freed big block is merged with its free neighbours
 * at once: Johnstone and Wilson's finding (1998) that address-ordered fits with immediate
 * coalescing fragment least.  Live blocks then pack towards the heap's start and the free space
 * above them stays in few large pieces.  BIG_AO_FIT=0 is the paper's big list exactly.
 *
 * The free blocks of big sizes (> 1 KiB) are kept in one binary search tree ordered by address,
 * a treap: each node's priority is a hash of its address (so it costs no memory and the shape
 * is the same from run to run), which keeps the expected depth logarithmic whatever order the
 * blocks come in.  Each node also holds the largest block size in its subtree, so the first fit
 * is one walk down: left while the left subtree has a block large enough, else this block if it
 * fits, else right.  A node lives in its free block (at least 1040 bytes):
 *     +0 header  +4 left  +8 right  +12 the decay's mark (hc_os.c)  +16 parent  +20 subtree max
 *     +24 priority
 * Links are granule offsets like the lists' (0 = none); the debug build checks the whole tree.
 *
 * The priority is drawn from the node's address when it is inserted and kept in the node, so
 * that a block next to a node can take the node's place (hc_big_replace): nothing else lies
 * between them in address order, so the tree keeps its shape and only the maxima above change.
 * That is how the two commonest changes are made without moving a node up or down: a first fit
 * split from its low end (the remainder takes the block's place, hc_alloc.c's hc_big_split) and
 * a freed block merged with a free big neighbour (the merged block takes the neighbour's place,
 * hc_coalesce.c's hc_merge_list).  Before, each was a removal (rotations down to a leaf) and an
 * insertion (rotations up), on nodes that lie in free blocks all over the heap: on
 * bench/wordtable.c a fifth of the program's instructions outside memcpy.
 */
#include "hc_block.h"

#if BIG_AO_FIT
static inline hc_off *hc_t_left(char *b) { return (hc_off *)(void *)(b + 4); }
static inline hc_off *hc_t_right(char *b) { return (hc_off *)(void *)(b + 8); }
static inline hc_off *hc_t_parent(char *b) { return (hc_off *)(void *)(b + 16); }
static inline uint32_t *hc_t_max(char *b) { return (uint32_t *)(void *)(b + 20); }
static inline uint32_t *hc_t_pri(char *b) { return (uint32_t *)(void *)(b + 24); }

/* A new node's priority: a mix of its offset's bits (the tree is a max-heap on these). */
static inline uint32_t hc_t_hash(hc_off o)
{
    uint32_t x = o * 0x9E3779B1u;
    x ^= x >> 15;
    x *= 0x85EBCA77u;
    return x ^ (x >> 13);
}

/* A link about to be followed down or up the tree: inside the heap, else the tree was
 * overwritten (a write after free lands on a free block's links first). */
static inline hc_off hc_t_go(hc_off o)
{
    if (hc_unlikely(!hc_off_ok(o)))
        hc_corrupt("corrupted big-block tree (a free block's links overwritten)");
    return o;
}

/* The priority of the node at offset o, as drawn when it was inserted. */
static inline uint32_t hc_t_prio(hc_off o) { return *hc_t_pri(hc_at(o)); }

static inline uint32_t hc_t_max_of(hc_off o) { return o ? *hc_t_max(hc_at(o)) : 0; }

/* Recompute b's subtree maximum from its own size and its children's. */
static inline void hc_t_fix(char *b)
{
    uint32_t m = (uint32_t)hc_size(b), l = hc_t_max_of(*hc_t_left(b)), r = hc_t_max_of(*hc_t_right(b));
    *hc_t_max(b) = m > l ? (m > r ? m : r) : (l > r ? l : r);
}

/* Make p's link to its child old point to new instead (p = 0: the root). */
static inline void hc_t_relink(hc_off p, hc_off old, hc_off new_)
{
    if (!p)
        hc.big_root = new_;
    else if (*hc_t_left(hc_at(p)) == old)
        *hc_t_left(hc_at(p)) = new_;
    else
        *hc_t_right(hc_at(p)) = new_;
}

/* Rotate node c above its parent x; both subtree maxima recomputed. */
static void hc_t_rotate_up(hc_off c)
{
    char *cb = hc_at(c);
    hc_off x = *hc_t_parent(cb);
    char *xb = hc_at(x);
    hc_off g = *hc_t_parent(xb), m;
    if (*hc_t_left(xb) == c) {
        m = *hc_t_right(cb);
        *hc_t_left(xb) = m;
        *hc_t_right(cb) = x;
    } else {
        m = *hc_t_left(cb);
        *hc_t_right(xb) = m;
        *hc_t_left(cb) = x;
    }
    if (m)
        *hc_t_parent(hc_at(m)) = x;
    *hc_t_parent(xb) = c;
    *hc_t_parent(cb) = g;
    hc_t_relink(g, x, c);
    hc_t_fix(xb);
    hc_t_fix(cb);
}

/* Recompute the maxima from b up to the root, stopping at the first that does not change (the
 * ones above it are computed from it). */
static void hc_t_fix_up(char *b)
{
    for (;;) {
        uint32_t was = *hc_t_max(b);
        hc_t_fix(b);
        hc_off p = hc_t_go(*hc_t_parent(b));
        if (!p || *hc_t_max(b) == was)
            return;
        b = hc_at(p);
    }
}

/* Put free block b (header and trailer written) into the tree. */
static void hc_big_insert(char *b)
{
    HC_ARENA_HERE;
    hc_off o = hc_off_of(b), p = 0, c = hc.big_root;
    uint32_t size = (uint32_t)hc_size(b);
    *hc_t_left(b) = 0;
    *hc_t_right(b) = 0;
    *hc_t_max(b) = size;
    uint32_t prio = hc_t_hash(o);
    *hc_t_pri(b) = prio;
    while (c) {
        char *cb = hc_at(c);
        if (*hc_t_max(cb) < size)
            *hc_t_max(cb) = size;
        p = c;
        c = hc_t_go(o < c ? *hc_t_left(cb) : *hc_t_right(cb));
    }
    *hc_t_parent(b) = p;
    if (!p)
        hc.big_root = o;
    else if (o < p)
        *hc_t_left(hc_at(p)) = o;
    else
        *hc_t_right(hc_at(p)) = o;
    while ((p = *hc_t_parent(b)) != 0 && hc_t_prio(p) < prio)
        hc_t_rotate_up(o);
    HC_FREE_BLOCKS(1);
}

/* Is node b (offset o) linked both ways: its parent's child (or the root), its children's
 * parent?  A block's links overwritten would otherwise send the rotations below round a cycle
 * for ever ("corrupted double-linked list", for a tree). */
static inline void hc_t_check(char *b, hc_off o)
{
    hc_off l = *hc_t_left(b), r = *hc_t_right(b), p = *hc_t_parent(b);
    if (hc_unlikely(!hc_off_ok(l) || !hc_off_ok(r) || !hc_off_ok(p) || l == o || r == o ||
                    (p ? *hc_t_left(hc_at(p)) != o && *hc_t_right(hc_at(p)) != o : hc.big_root != o) ||
                    (l && *hc_t_parent(hc_at(l)) != o) || (r && *hc_t_parent(hc_at(r)) != o)))
        hc_corrupt("corrupted big-block tree (a free block's links overwritten)");
}

/* Take free block b out of the tree: rotate it down until it has at most one child, splice it
 * out, then recompute the maxima on the way to the root. */
static void hc_big_remove(char *b)
{
    HC_ARENA_HERE;
    hc_off o = hc_off_of(b);
    hc_t_check(b, o);
    /* Each rotation takes b a level down: a tree deeper than this (the expected depth of a
     * treap of a million nodes is ~40) has a cycle in it. */
    for (unsigned level = 0;; level++) {
        hc_off l = *hc_t_left(b), r = *hc_t_right(b);
        if (hc_unlikely(level > 1000))
            hc_corrupt("corrupted big-block tree (a cycle: links overwritten)");
        if (l && r) {
            hc_t_rotate_up(hc_t_prio(l) > hc_t_prio(r) ? l : r);
            continue;
        }
        hc_off c = l ? l : r, p = *hc_t_parent(b);
        if (c)
            *hc_t_parent(hc_at(c)) = p;
        hc_t_relink(p, o, c);
        if (p)
            hc_t_fix_up(hc_at(p));
        break;
    }
    HC_FREE_BLOCKS(-1);
}

/* Node b's block grew to `size` bytes: the maxima from b up that are smaller become size (one
 * load a level, where hc_t_fix_up reads both children). */
static void hc_t_grow_up(char *b, uint32_t size)
{
    HC_ARENA_HERE;
    for (;;) {
        if (*hc_t_max(b) >= size)
            return;
        *hc_t_max(b) = size;
        hc_off p = hc_t_go(*hc_t_parent(b));
        if (!p)
            return;
        b = hc_at(p);
    }
}

/* Block nb takes node b's place in the tree: links, priority and subtree maximum move to nb, and
 * b is no longer in the tree.  No other node may lie between b and nb in address order (nb is
 * b's remainder after a split from its low end, or a merged block that holds b).  The two may
 * overlap (nb 16 bytes before b), so b's fields are read before nb's are written.  The caller
 * writes nb's header, then calls hc_t_fix_up(nb) (hc_t_grow_up(nb) if nb is not smaller). */
static void hc_big_replace(char *b, char *nb)
{
    HC_ARENA_HERE;
    if (nb == b)
        return;
    hc_off o = hc_off_of(b), no = hc_off_of(nb);
    hc_off l = *hc_t_left(b), r = *hc_t_right(b), p = *hc_t_parent(b);
    uint32_t max = *hc_t_max(b), prio = *hc_t_pri(b);
    *hc_t_left(nb) = l;
    *hc_t_right(nb) = r;
    *hc_t_parent(nb) = p;
    *hc_t_max(nb) = max;
    *hc_t_pri(nb) = prio;
    if (l)
        *hc_t_parent(hc_at(l)) = no;
    if (r)
        *hc_t_parent(hc_at(r)) = no;
    hc_t_relink(p, o, no);
}

/* Address-ordered first fit: the lowest-addressed free big block of at least size bytes, still
 * in the tree; NULL if none. */
static char *hc_big_first(size_t size)
{
    HC_ARENA_HERE;
    hc_off o = hc_t_go(hc.big_root);
    if (!o || hc_t_max_of(o) < size)
        return NULL;
    for (;;) {
        char *b = hc_at(o);
        hc_off l = hc_t_go(*hc_t_left(b));
        if (l && hc_t_max_of(l) >= size)
            o = l;
        else if (hc_size(b) >= size)
            return b;
        else if (!(o = hc_t_go(*hc_t_right(b))))
            hc_corrupt("corrupted big-block tree (a subtree's largest size overwritten)");
    }
}

/* In-order walk (the purge, the debug build): the lowest block, then each one's successor. */
static HC_UNUSED char *hc_big_lowest(void)
{
    HC_ARENA_HERE;
    hc_off o = hc.big_root;
    if (!o)
        return NULL;
    while (*hc_t_left(hc_at(o)))
        o = *hc_t_left(hc_at(o));
    return hc_at(o);
}

static HC_UNUSED char *hc_big_next(char *b)
{
    HC_ARENA_HERE;
    hc_off o = *hc_t_right(b);
    if (o) {
        while (*hc_t_left(hc_at(o)))
            o = *hc_t_left(hc_at(o));
        return hc_at(o);
    }
    hc_off c = hc_off_of(b);
    for (hc_off p = *hc_t_parent(b); p; c = p, p = *hc_t_parent(hc_at(p)))
        if (*hc_t_left(hc_at(p)) == c)
            return hc_at(p);
    return NULL;
}
#endif
