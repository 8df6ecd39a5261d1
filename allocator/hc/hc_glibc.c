/* hc_glibc.c -- the rest of glibc's malloc API, answered with HC's own numbers: malloc_trim,
 * mallinfo, mallinfo2, malloc_stats, malloc_info, mallopt.  Not in Hasan & Chang 2006.
 *
 * Two reasons to have them.  Under LD_PRELOAD a program calling them would otherwise get glibc's
 * answers about glibc's own, empty arena.  Linked statically (cc -static app.c malloc.c) a call
 * to any of them pulled libc.a's malloc.o in, whose malloc, free, ... clash with ours.
 *
 * mallopt honours what means something for HC and accepts the rest, returning 1 as glibc does
 * for a parameter it does not know (mallopt(3), BUGS: an invalid parameter is not an error):
 *   M_MMAP_THRESHOLD  the threshold, fixed from then on (as in glibc); 0 .. 32 MiB, else 0
 *   M_MMAP_MAX        0: no mapped blocks below 1 GiB (the heap's limit); other values accepted
 *   M_TRIM_THRESHOLD  the decay's DECAY_BYTES; negative: the decay never purges
 *   M_TOP_PAD         wilderness bytes a purge leaves in place
 *   M_ARENA_MAX, M_ARENA_TEST, M_MXFAST, M_PERTURB, M_CHECK_ACTION: accepted, nothing to do
 *     (ARENAS is fixed at build time; no fast bins; no perturbation; misuse always aborts).
 * With several arenas (hc_arena.c) the numbers are their sums, mallopt sets every arena, and
 * malloc_trim purges every arena after giving back the calling thread's cache.
 */
#include "hc_block.h"
#include "hc_lock.h"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))

/* glibc's limit for M_MMAP_THRESHOLD on 64-bit (HEAP_MAX_SIZE / 2). */
#define HC_MALLOPT_MMAP_MAX ((size_t)32 << 20)

/* malloc_trim(pad): release every free page now (complete coalescing, the wilderness above
 * top + pad, the inside of free big blocks).  1 if memory was released, 0 if none could be. */
int malloc_trim(size_t pad)
{
    hc_tc_flush_all(); /* the calling thread's cache first: its blocks are free memory too */
    struct hc_state *was = hc_cur;
    size_t done = 0;
    for (unsigned k = 0; k < HC_NARENAS; k++) {
        hc_use(&hc_arenas[k]);
        int held = hc_lock();
        done += hc_os_purge(pad, 1);
        hc_unlock(held);
    }
    hc_use(was);
    done += hc_sp_trim(); /* empty small pages (hc_page.c) */
    return done > 0;
}

/* The numbers both mallinfo structures carry, taken under the lock. */
struct hc_info {
    size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, uordblks, fordblks, keepcost;
};

/* Summed over the arenas (hc_arena.c), each read under its own lock. */
static struct hc_info hc_info_get(void)
{
    struct hc_info i;
    memset(&i, 0, sizeof i);
    struct hc_state *was = hc_cur;
    for (unsigned k = 0; k < HC_NARENAS; k++) {
        hc_use(&hc_arenas[k]);
        int held = hc_lock();
        size_t wild = hc.ready && hc.base && hc.end > hc.top ? (size_t)(hc.end - hc.top) : 0;
        size_t inuse = (size_t)(hc.st.bytes_current - hc.st.mapped_bytes);
        i.arena += (size_t)hc.st.heap_bytes;                /* heap taken from the OS */
        i.ordblks += hc.free_blocks + (wild > 0);           /* free blocks (counted in some builds) */
        i.hblks += (size_t)hc.st.mapped_blocks;             /* no fast bins: smblks stays 0 */
        i.hblkhd += (size_t)hc.st.mapped_bytes;
        i.usmblks += (size_t)hc.st.footprint;               /* glibc: unused; here the footprint */
        i.uordblks += inuse;                                /* heap bytes in use */
        i.fordblks += (size_t)hc.st.heap_bytes - inuse;     /* free, wilderness included */
        i.keepcost += wild;                                 /* what trimming the tops releases */
        hc_unlock(held);
    }
    hc_use(was);
    /* The small pages (hc_page.c) are heap too: taken from the OS, partly in use. */
    struct hc_sp_totals sp = hc_sp_totals();
    i.arena += (size_t)(sp.pages * HC_SP_PAGE);
    i.usmblks += (size_t)hc_sp_taken(sp.pages);
    i.uordblks += (size_t)sp.bytes;
    i.fordblks += (size_t)(sp.pages * HC_SP_PAGE - sp.bytes);
    return i;
}

struct mallinfo2 mallinfo2(void)
{
    struct hc_info i = hc_info_get();
    struct mallinfo2 m;
    memset(&m, 0, sizeof m);
    m.arena = i.arena;
    m.ordblks = i.ordblks;
    m.smblks = i.smblks;
    m.hblks = i.hblks;
    m.hblkhd = i.hblkhd;
    m.usmblks = i.usmblks;
    m.uordblks = i.uordblks;
    m.fordblks = i.fordblks;
    m.keepcost = i.keepcost;
    return m;
}

/* The old structure's fields are int: values wrap beyond 2 GiB, as glibc's do. */
struct mallinfo mallinfo(void)
{
    struct hc_info i = hc_info_get();
    struct mallinfo m;
    memset(&m, 0, sizeof m);
    m.arena = (int)i.arena;
    m.ordblks = (int)i.ordblks;
    m.smblks = (int)i.smblks;
    m.hblks = (int)i.hblks;
    m.hblkhd = (int)i.hblkhd;
    m.usmblks = (int)i.usmblks;
    m.uordblks = (int)i.uordblks;
    m.fordblks = (int)i.fordblks;
    m.keepcost = (int)i.keepcost;
    return m;
}

/* glibc's format on stderr, one arena; written with write(2), no stdio stream.  write is a
 * cancellation point: cancellation is off around it, as glibc turns it off, so a thread with a
 * pending cancel still prints (and is cancelled at its next cancellation point). */
void malloc_stats(void)
{
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    int saved = errno;
    struct hc_info i = hc_info_get();
    char buf[512];
    int n = snprintf(buf, sizeof buf,
                     "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
                     "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
                     "max mmap regions = %10zu\nmax mmap bytes   = %10zu\n",
                     i.arena, i.uordblks, i.arena + i.hblkhd, i.uordblks + i.hblkhd, i.hblks,
                     i.hblkhd);
    if (n > 0)
        hc_write_all(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    errno = saved;
    pthread_setcancelstate(cancel, NULL);
}

/* XML in the spirit of glibc's, with HC's own figures; options must be 0 (EINVAL otherwise). */
int malloc_info(int options, FILE *fp)
{
    if (options != 0) {
        errno = EINVAL;
        return -1;
    }
    struct hc_info i = hc_info_get();
    struct hc_state *was = hc_cur;
    hc_use(hc_arenas); /* mapped blocks and the threshold that adapts to them are arena 0's */
    int held = hc_lock();
    struct hc_os_state os = hc.os;
    size_t threshold = hc.mmap_above;
    hc_unlock(held);
    hc_use(was);
    fprintf(fp,
            "<malloc version=\"hc-1\">\n"
            "<heap nr=\"0\">\n"
            "<total type=\"heap\" size=\"%zu\"/>\n"
            "<total type=\"in-use\" size=\"%zu\"/>\n"
            "<total type=\"free\" count=\"%zu\" size=\"%zu\"/>\n"
            "<total type=\"wilderness\" size=\"%zu\"/>\n"
            "</heap>\n"
            "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
            "<system type=\"current\" size=\"%zu\"/>\n"
            "<system type=\"max\" size=\"%zu\"/>\n"
            "<mmap-threshold size=\"%zu\" fixed=\"%d\"/>\n"
            "<purge count=\"%llu\" size=\"%llu\"/>\n"
            "</malloc>\n",
            i.arena, i.uordblks, i.ordblks, i.fordblks, i.keepcost, i.hblks, i.hblkhd,
            i.arena + i.hblkhd, i.usmblks, threshold, os.threshold_fixed,
            (unsigned long long)os.purges, (unsigned long long)os.purged_bytes);
    return 0;
}

/* One parameter for one arena (under its lock); mallopt sets it on every arena. */
static int hc_mallopt_arena(int param, int value)
{
    int ok = 1;
    switch (param) {
    case M_MMAP_THRESHOLD:
        if (value < 0 || (size_t)value > HC_MALLOPT_MMAP_MAX) {
            ok = 0;
            break;
        }
        hc.mmap_above = (size_t)value;
        hc.os.threshold_fixed = 1;
        break;
    case M_MMAP_MAX:
        if (value == 0) {
            hc.mmap_above = (size_t)1 << 30;
            hc.os.threshold_fixed = 1;
        }
        break;
    case M_TRIM_THRESHOLD:
        hc.os.decay_off = value < 0;
        if (value >= 0)
            hc.os.decay_bytes = (size_t)value;
        hc.os.deadline = 0;
        break;
    case M_TOP_PAD:
        hc.os.top_pad = value > 0 ? (size_t)value : 0;
        break;
    default: /* M_ARENA_MAX, M_ARENA_TEST, M_MXFAST, M_PERTURB, M_CHECK_ACTION, unknown */
        break;
    }
    return ok;
}

int mallopt(int param, int value)
{
    int ok = 1;
    struct hc_state *was = hc_cur;
    for (unsigned k = 0; k < HC_NARENAS; k++) {
        hc_use(&hc_arenas[k]);
        int held = hc_lock();
        ok = hc_mallopt_arena(param, value);
        hc_unlock(held);
    }
    hc_use(was);
    return ok;
}
#endif /* glibc >= 2.33 (mallinfo2) */
