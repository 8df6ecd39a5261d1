/* The replay loop: the only code that is timed (and, under callgrind, the only code counted).
 * What each operation does, the page touching included, is hcreplay_op.h's. */
#include "hcreplay_op.h"

__attribute__((noinline)) uint64_t hcr_replay_once(const struct hcr_trace *t, void **slots,
                                                   int touch_pages)
{
    const struct hcr_rop *op = t->ops, *end = t->ops + t->n_ops;
    /* in locals: a pointer to the trace would be read again after every call */
    const uint64_t *sizes = t->sizes;
    const uint8_t *aligns = t->aligns;
    const size_t n_slots = t->n_slots;
    uint64_t failed = 0;
    /* in chunks of hcr_curve.every ops when the RSS curve is sampled (the first repeat),
       else in one; the inner loop is the same either way */
    const uint64_t every = hcr_curve.every ? hcr_curve.every : UINT64_MAX;
    while (op < end) {
        const struct hcr_rop *stop = (uint64_t)(end - op) > every ? op + every : end;
        const uint64_t n = (uint64_t)(stop - op);
        for (; op < stop; op++)
            failed += hcr_apply(hcr_kind(op), op, sizes, aligns, slots, touch_pages);
        if (hcr_curve.every)
            hcr_curve_sample(n);
    }
    /* all unfreed blocks are released before the next repeat (Hasan & Chang 2006, §4.4, whose
     * driver timed this too); the same work for every allocator */
    for (size_t i = 0; i < n_slots; i++)
        if (slots[i]) {
            free(slots[i]);
            slots[i] = NULL;
        }
    return failed;
}

/* A streamed replay's chunk (hcreplay_load.c: hcr_stream_next): the same ops, the same work. */
__attribute__((noinline)) uint64_t hcr_replay_ops(const struct hcr_trace *t,
                                                  const struct hcr_rop *op, size_t n,
                                                  void **slots, int touch_pages)
{
    const struct hcr_rop *end = op + n;
    const uint64_t *sizes = t->sizes;
    const uint8_t *aligns = t->aligns;
    uint64_t failed = 0;
    for (; op < end; op++)
        failed += hcr_apply(hcr_kind(op), op, sizes, aligns, slots, touch_pages);
    return failed;
}
