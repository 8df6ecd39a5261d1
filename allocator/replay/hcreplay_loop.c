/* The replay loop: the only code that is timed (and, under callgrind, the only code counted).
 *
 * Touching: a program writes the memory it asks for, and an allocator that hands out fresh
 * pages makes the program pay page faults that one reusing warm memory does not.  So each new
 * block gets one byte written per 4 KiB page (after realloc, the whole block again), and
 * that work is inside the timed loop for every allocator alike.  It is also what makes peak
 * resident memory a fair footprint for allocators that do not report their own. */
#include "hcreplay.h"

#include <stdlib.h>

#define PAGE 4096u

static inline void touch(char *p, uint64_t size)
{
    /* the block's first byte, then the first byte of every later page it reaches into */
    uint64_t in_page = (uintptr_t)p & (PAGE - 1);
    if (__builtin_expect(size == 0, 0))
        return;
    p[0] = 1;
    if (__builtin_expect(in_page + size > PAGE, 0))
        for (uint64_t off = PAGE - in_page; off < size; off += PAGE)
            p[off] = 1;
}

__attribute__((noinline)) uint64_t hcr_replay_once(const struct hcr_trace *t, void **slots,
                                                   int touch_pages)
{
    const struct hcr_rop *op = t->ops, *end = t->ops + t->n_ops;
    uint64_t failed = 0;
    for (; op < end; op++) {
        void *p;
        switch (op->op) {
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
        case HCR_REALLOC: {
            void *old = slots[op->slot];
            p = realloc(old, op->size);
            if (!p) {
                if (op->size == 0)
                    slots[op->slot] = NULL; /* realloc(p, 0) freed p (glibc does) */
                else
                    failed++; /* failed: the old block is still there */
                continue;
            }
            slots[op->slot] = p;
            /* touch the whole block again: one byte per page, the same for every allocator,
             * and it covers the grown part whether or not the block moved */
            if (touch_pages)
                touch(p, op->size);
            continue;
        }
        case HCR_FREE:
            free(slots[op->slot]);
            slots[op->slot] = NULL;
            continue;
        default:
            __builtin_unreachable(); /* the loader emits only the ops above */
        }
        slots[op->slot] = p;
        if (!p)
            failed++;
        else if (touch_pages)
            touch(p, op->size);
    }
    /* all unfreed blocks are released before the next repeat (Hasan & Chang 2006, §4.4, whose
     * driver timed this too); the same work for every allocator */
    for (size_t i = 0; i < t->n_slots; i++)
        if (slots[i]) {
            free(slots[i]);
            slots[i] = NULL;
        }
    return failed;
}
