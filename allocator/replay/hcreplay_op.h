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

/* Replay op (its kind `kind`, flags stripped) on its slot: 1 when a call that should have
 * succeeded failed, else 0. */
static inline __attribute__((always_inline)) uint64_t hcr_apply(unsigned kind,
                                                                 const struct hcr_rop *op,
                                                                 void **slots, int touch_pages)
{
    void *p;
    switch (kind) {
    case HCR_MALLOC:
        p = malloc(op->size);
        break;
    case HCR_CALLOC:
        p = calloc(1, op->size);
        break;
    case HCR_MEMALIGN:
        if (posix_memalign(&p, (size_t)1 << op->align_log2 < sizeof(void *)
                                   ? sizeof(void *)
                                   : (size_t)1 << op->align_log2,
                           op->size))
            p = NULL;
        break;
    case HCR_REALLOC:
        p = realloc(slots[op->slot], op->size);
        if (!p) {
            if (op->size == 0) {
                slots[op->slot] = NULL; /* realloc(p, 0) freed p (glibc does) */
                return 0;
            }
            return 1; /* failed: the old block is still there */
        }
        slots[op->slot] = p;
        /* touch the whole block again: one byte per page, the same for every allocator, and
         * it covers the grown part whether or not the block moved */
        if (touch_pages)
            hcr_touch(p, op->size);
        return 0;
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
        hcr_touch(p, op->size);
    return 0;
}

#endif /* HCREPLAY_OP_H */
