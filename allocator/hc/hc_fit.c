/* hc_fit.c -- size classes fitted to one program, beyond Hasan & Chang 2006 (FIT_1 .. FIT_8;
 * docs/profile-guided.md, issue 36).
 *
 * The small pages' generic classes (hc_page.c, hc_sp_classes) step by 16 bytes to 16 x
 * SMALL_CLASSES, then SMALL_CLASSES per power of two: a 392-byte request takes a 448-byte block.
 * hctune derives from a program's trace the few sizes that carry most of its live bytes at the
 * peak (hctune.trace.fitted) and emits them here, as data: up to HC_FIT_MAX exact classes added
 * to the generic table.  Every other size keeps its generic class, so a program run on an input
 * its profile never saw is served as by generic HC.  All 0 (the default): no slot is reserved
 * and the class table is generic HC's exactly.
 *
 * A hand-edited table is checked when it is compiled, never at run time: each entry 0 or a
 * multiple of 16 (blocks stay 16-byte aligned) within the small pages' sizes, the non-zero ones
 * ascending.  A fitted class equal to a generic one is kept once.
 *
 * FIT_ALIGN8 lets entries be multiples of 8: a class of an odd number of 8-byte words (24, 40,
 * 56, ...) has 8-byte aligned blocks, as jemalloc's 24-byte class and mimalloc's word-sized
 * bins do.  An object that needs 16-byte alignment has a size that is a multiple of 16, so a
 * request of 24 bytes cannot be one, unless it is a struct with a flexible array member whose
 * first member is 16-byte aligned (jemalloc's issue 1073 names the case); the request-to-class
 * table then steps by 8 (hc_page.h, HC_SP_Q) and free's ownership test rotates by 3.  Off (the
 * default) every block is 16-byte aligned.
 */
#include "hc_page.h"

#if HC_SP_ON && HC_FIT_ON

static const uint32_t hc_fit_table[HC_FIT_MAX] = {
    FIT_1, FIT_2, FIT_3, FIT_4, FIT_5, FIT_6, FIT_7, FIT_8,
};

#define HC_FIT_OK(v) ((v) == 0 || ((v) % HC_SP_Q == 0 && (v) >= 16 && (v) <= HC_SP_LIMIT))
#define HC_FIT_UP(a, b) ((b) == 0 || (a) < (b))
_Static_assert(HC_FIT_OK(FIT_1) && HC_FIT_OK(FIT_2) && HC_FIT_OK(FIT_3) && HC_FIT_OK(FIT_4)
               && HC_FIT_OK(FIT_5) && HC_FIT_OK(FIT_6) && HC_FIT_OK(FIT_7) && HC_FIT_OK(FIT_8),
               "the fitted class table FIT_1 .. FIT_8: each entry must be 0 or a multiple of 16 "
               "(of 8 with FIT_ALIGN8) from 16 up to the small pages' limit (SMALL_MAX, at most 4096)");
_Static_assert(HC_FIT_UP(FIT_1, FIT_2) && HC_FIT_UP(FIT_2, FIT_3) && HC_FIT_UP(FIT_3, FIT_4)
               && HC_FIT_UP(FIT_4, FIT_5) && HC_FIT_UP(FIT_5, FIT_6) && HC_FIT_UP(FIT_6, FIT_7)
               && HC_FIT_UP(FIT_7, FIT_8)
               && (FIT_1 || !(FIT_2 | FIT_3 | FIT_4 | FIT_5 | FIT_6 | FIT_7 | FIT_8)),
               "the fitted class table FIT_1 .. FIT_8: its non-zero entries must come first, "
               "in ascending order");

/* The fitted classes merged into the generic class sizes size[1 .. n] (ascending, with
 * HC_FIT_MAX free slots after them): the new count. */
static unsigned hc_fit_merge(uint32_t *size, unsigned n)
{
    for (unsigned i = 0; i < HC_FIT_MAX && hc_fit_table[i]; i++) {
        uint32_t v = hc_fit_table[i];
        unsigned at = 1;
        while (at <= n && size[at] < v)
            at++;
        if (at <= n && size[at] == v)
            continue;                   /* a generic class already */
        for (unsigned j = n; j >= at; j--)
            size[j + 1] = size[j];
        size[at] = v;
        n++;
    }
    return n;
}

#endif
