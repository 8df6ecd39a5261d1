/* The replay loop: the only code that is timed (and, under callgrind, the only code counted).
 * What each operation does, the page touching included, is hcreplay_op.h's. */
#include "hcreplay_op.h"

__attribute__((noinline)) uint64_t hcr_replay_once(const struct hcr_trace *t, void **slots,
                                                   int touch_pages)
{
    const struct hcr_rop *op = t->ops, *end = t->ops + t->n_ops;
    uint64_t failed = 0;
    for (; op < end; op++)
        failed += hcr_apply(op->op, op, slots, touch_pages);
    /* all unfreed blocks are released before the next repeat (Hasan & Chang 2006, §4.4, whose
     * driver timed this too); the same work for every allocator */
    for (size_t i = 0; i < t->n_slots; i++)
        if (slots[i]) {
            free(slots[i]);
            slots[i] = NULL;
        }
    return failed;
}
