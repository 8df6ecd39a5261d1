/* hcreplay_op.h -- one replayed operation, inlined into both replay loops: the single-thread
 * one (hcreplay_loop.c) and each thread's (hcreplay_threads.c), so they time the same work.
 *
 * Touching: a program writes the memory it asks for, and an allocator that hands out fresh
 * pages makes the program pay page faults that one reusing warm memory does not.  So each new
 * block gets one byte written per 4 KiB page (after realloc, the whole block again), and
 * that work is inside the timed loop for every allocator alike.  It is also what makes peak
 * resident memory a fair footprint for allocators that do not report their own. */
#ifndef HCREPLAY_OP_H
#define HCREPLAY_OP_H

#include "hcreplay.h"

#include <stdlib.h>

#define HCR_PAGE 4096u

static inline void hcr_touch(char *p, uint64_t size)
{
    /* the block's first byte, then the first byte of every later page it reaches into */
    uint64_t in_page = (uintptr_t)p & (HCR_PAGE - 1);
    if (__builtin_expect(size == 0, 0))
        return;
    p[0] = 1;
    if (__builtin_expect(in_page + size > HCR_PAGE, 0))
        for (uint64_t off = HCR_PAGE - in_page; off < size; off += HCR_PAGE)
            p[off] = 1;
}

static inline __attribute__((always_inline)) uint64_t hcr_realloc(const struct hcr_rop *op,
                                                                   uint64_t size, void **slots,
                                                                   int touch_pages)
{
    void *p = realloc(slots[op->slot], size);
    if (!p) {
        if (size == 0) {
            slots[op->slot] = NULL; /* realloc(p, 0) freed p (glibc does) */
            return 0;
        }
        return 1; /* failed: the old block is still there */
    }
    slots[op->slot] = p;
    /* touch the whole block again: one byte per page, the same for every allocator, and it
     * covers the grown part whether or not the block moved */
    if (touch_pages)
        hcr_touch(p, size);
    return 0;
}

/* Replay *op (its kind `kind`) on its slot; sizes of memalign and the _BIG ops from the
 * trace's table `sizes` (and `aligns`), which the loops hold in locals: 1 when a call that
 * should have succeeded failed, else 0.  The slot is read from *op where it is used rather than
 * kept across the call (a load, where keeping it costs a spill and a reload). */
static inline __attribute__((always_inline)) uint64_t hcr_apply(unsigned kind,
                                                                 const struct hcr_rop *op,
                                                                 const uint64_t *sizes,
                                                                 const uint8_t *aligns,
                                                                 void **slots, int touch_pages)
{
    void *p;
    uint64_t size;
    switch (kind) {
    case HCR_MALLOC:
        size = hcr_arg(*op);
        p = malloc(size);
        break;
    case HCR_MALLOC_BIG:
        size = sizes[hcr_arg(*op)];
        p = malloc(size);
        break;
    case HCR_CALLOC:
        size = hcr_arg(*op);
        p = calloc(1, size);
        break;
    case HCR_CALLOC_BIG:
        size = sizes[hcr_arg(*op)];
        p = calloc(1, size);
        break;
    case HCR_MEMALIGN: {
        uint32_t i = hcr_arg(*op);
        size = sizes[i];
        size_t align = (size_t)1 << aligns[i];
        if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size))
            p = NULL;
        break;
    }
    case HCR_REALLOC:
        return hcr_realloc(op, hcr_arg(*op), slots, touch_pages);
    case HCR_REALLOC_BIG:
        return hcr_realloc(op, sizes[hcr_arg(*op)], slots, touch_pages);
    case HCR_FREE:
        free(slots[op->slot]);
        slots[op->slot] = NULL;
        return 0;
    default:
        __builtin_unreachable(); /* the loader emits only the ops above */
    }
    slots[op->slot] = p;
    if (!p)
        return 1;
    if (touch_pages)
        hcr_touch(p, size);
    return 0;
}

#endif /* HCREPLAY_OP_H */
