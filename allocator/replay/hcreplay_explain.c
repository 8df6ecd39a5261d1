/* hcreplay --explain: where the bytes of the trace's peak go, for whatever malloc this process
 * has (glibc's, or one LD_PRELOAD brings in).
 *
 * The trace is replayed once, in its recorded order on this one thread, and stopped at the op
 * where the most requested bytes are live (the trace's peak).  There the process's RSS is split
 * into parts, each read from where it is known:
 *   other                   the RSS before the replay: this harness, its libraries, the
 *                           loaded trace (measured, /proc/self/status)
 *   live                    what the program holds: the requested bytes of the live blocks
 *   internal_fragmentation  malloc_usable_size of every live block, less what was asked
 *   metadata, free_in_allocator, not_returned
 *                           from the allocator's own statistics: glibc's and HC's mallinfo2
 *                           (HC also hc_stats_get), jemalloc's mallctl("stats.*"), mimalloc's
 *                           mi_process_info, tcmalloc's MallocExtension numeric properties,
 *                           each found with dlsym so one binary reads them all
 * and the sum is set beside the RSS (the caller checks it: tuner/hctune/explain.py).  The same
 * replay goes on to the end, sampling the live bytes and the RSS, so the answer also has the
 * curve of both over the run.  Nothing here calls malloc: the output goes through a static
 * buffer, the samples through hcr_map. */
#define _GNU_SOURCE
#include "hcreplay.h"
#include "hcreplay_op.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CURVE_POINTS 64

/* what the allocator says, in bytes; `raw` names every figure it came from */
struct parts {
    const char *allocator;  /* as detected: glibc, hc, jemalloc, mimalloc, tcmalloc */
    uint64_t metadata, free_in_allocator, not_returned;
    const char *estimated;  /* a part the allocator does not report (NULL: none) */
};

static void *sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        dlerror(); /* a failed dlsym leaves a malloc'd message: free it */
        dlerror();
    }
    return p;
}

static uint64_t sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* Resident bytes of [lo, hi) (mincore); the vector is the harness's own memory. */
static uint64_t resident(uintptr_t lo, uintptr_t hi)
{
    long pg = sysconf(_SC_PAGESIZE);
    lo &= ~(uintptr_t)(pg - 1);
    if (hi <= lo)
        return 0;
    size_t pages = (hi - lo + (uintptr_t)pg - 1) / (uintptr_t)pg;
    unsigned char *vec = hcr_map(pages);
    if (!vec)
        return 0;
    uint64_t n = 0;
    if (mincore((void *)lo, pages * (size_t)pg, vec) == 0)
        for (size_t i = 0; i < pages; i++)
            n += vec[i] & 1;
    hcr_unmap(vec, pages);
    return n * (uint64_t)pg;
}

typedef struct mallinfo2 (*mallinfo2_fn)(void);
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef void (*mi_info_fn)(size_t *, size_t *, size_t *, size_t *, size_t *, size_t *, size_t *,
                           size_t *);
typedef int (*tc_prop_fn)(const char *, size_t *);

static uint64_t je(mallctl_fn ctl, const char *name)
{
    size_t v = 0, len = sizeof v;
    if (ctl(name, &v, &len, NULL, 0) != 0)
        return 0;
    hcr_put(", \"%s\": %zu", name, v);
    return v;
}

static uint64_t tc(tc_prop_fn get, const char *name)
{
    size_t v = 0;
    if (!get(name, &v))
        return 0;
    hcr_put(", \"%s\": %zu", name, v);
    return v;
}

/* The allocator's parts at this moment; `usable` is the live blocks' usable bytes.  Its raw
 * figures are written as the JSON members of "allocator_stats". */
static struct parts read_allocator(uint64_t usable)
{
    struct parts p = {0};
    hcr_put("\"allocator_stats\": {\"usable_bytes\": %llu", (unsigned long long)usable);
    mallctl_fn ctl = (mallctl_fn)sym("mallctl");
    mi_info_fn mi = (mi_info_fn)sym("mi_process_info");
    tc_prop_fn tcp = (tc_prop_fn)sym("MallocExtension_GetNumericProperty");
    mallinfo2_fn mi2 = (mallinfo2_fn)sym("mallinfo2");
    if (ctl) {
        /* jemalloc: stats are a snapshot taken when "epoch" is written */
        uint64_t e = 1;
        size_t len = sizeof e;
        ctl("epoch", &e, &len, &e, sizeof e);
        uint64_t allocated = je(ctl, "stats.allocated"), active = je(ctl, "stats.active");
        uint64_t meta = je(ctl, "stats.metadata");
        je(ctl, "stats.resident");
        uint64_t page = je(ctl, "arenas.page");
        uint64_t dirty = je(ctl, "stats.arenas.4096.pdirty");   /* 4096: all arenas */
        uint64_t muzzy = je(ctl, "stats.arenas.4096.pmuzzy");
        uint64_t tcache = je(ctl, "stats.arenas.4096.tcache_bytes");
        p.allocator = "jemalloc";
        /* blocks in a thread cache count as allocated to the arena: they are free to us */
        p.metadata = meta + sub(sub(allocated, tcache), usable);
        p.free_in_allocator = sub(active, allocated) + tcache;
        p.not_returned = (dirty + muzzy) * page;
    } else if (tcp) {
        uint64_t in_use = tc(tcp, "generic.current_allocated_bytes");
        uint64_t heap = tc(tcp, "generic.heap_size");
        uint64_t physical = tc(tcp, "generic.total_physical_bytes");
        uint64_t unmapped = tc(tcp, "tcmalloc.pageheap_unmapped_bytes");
        uint64_t pfree = tc(tcp, "tcmalloc.pageheap_free_bytes");
        uint64_t caches = tc(tcp, "tcmalloc.central_cache_free_bytes") +
                          tc(tcp, "tcmalloc.transfer_cache_free_bytes") +
                          tc(tcp, "tcmalloc.thread_cache_free_bytes");
        p.allocator = "tcmalloc";
        /* total_physical_bytes = the mapped heap plus tcmalloc's own metadata */
        p.metadata = sub(physical, sub(heap, unmapped)) + sub(in_use, usable);
        p.free_in_allocator = caches;
        p.not_returned = pfree;
    } else if (mi) {
        size_t el, us, sy, rss, peak_rss, commit = 0, peak_commit, faults;
        mi(&el, &us, &sy, &rss, &peak_rss, &commit, &peak_commit, &faults);
        hcr_put(", \"current_commit\": %zu, \"current_rss\": %zu", commit, rss);
        p.allocator = "mimalloc";
        /* mimalloc reports what it has committed, not how: everything beyond the live blocks'
         * usable bytes is memory it keeps (free blocks in its pages, free pages, its page
         * and segment headers) */
        p.free_in_allocator = sub(commit, usable);
        p.estimated = "free_in_allocator"; /* committed is not resident: the RSS bounds it */
    } else if (mi2) {
        struct mallinfo2 m = mi2();
        hcr_put(", \"arena\": %zu, \"uordblks\": %zu, \"fordblks\": %zu, \"hblkhd\": %zu"
            ", \"keepcost\": %zu",
            m.arena, m.uordblks, m.fordblks, m.hblkhd, m.keepcost);
        int hc = sym("hc_stats_get") != NULL;
        p.allocator = hc ? "hc" : "glibc";
        /* headers and rounding beyond the usable size, in heap blocks and mapped ones */
        p.metadata = sub(m.uordblks + m.hblkhd, usable);
        /* free blocks; the top (glibc) or wilderness (HC) apart */
        p.free_in_allocator = sub(m.fordblks, m.keepcost);
        if (!hc) {
            /* glibc's top chunk ends at the break: its resident pages are the free memory
             * not given back (the rest of it was never touched) */
            uintptr_t brk = (uintptr_t)sbrk(0);
            p.not_returned = resident(brk - m.keepcost, brk);
        } else {
            /* HC's wilderness: where it lies is HC's own; the part the RSS holds is what is
             * left of it once the other parts are counted (see the caller) */
            p.not_returned = m.keepcost;
            p.estimated = "not_returned";
        }
    } else {
        p.allocator = "unknown";
        p.estimated = "free_in_allocator";
    }
    hcr_put("}");
    return p;
}

static uint64_t op_size(const struct hcr_trace *t, const struct hcr_rop *op)
{
    switch (hcr_kind(op)) {
    case HCR_MALLOC:
    case HCR_CALLOC:
    case HCR_REALLOC:
        return hcr_arg(*op);
    case HCR_FREE:
        return 0;
    default:
        return t->sizes[hcr_arg(*op)];
    }
}

int hcr_explain(const char *path, const struct hcr_trace *t, void **slots, int touch)
{
    (void)path;
    uint64_t *size = hcr_map(t->n_slots * sizeof *size);
    uint64_t *curve = hcr_map(3 * (CURVE_POINTS + 2) * sizeof *curve);
    if (!size || !curve) {
        dprintf(2, "hcreplay: error: out of memory for %zu slots\n", t->n_slots);
        return 2;
    }
    /* a first pass over the ops: the op after which the most requested bytes are live */
    uint64_t live = 0, peak = 0;
    size_t peak_at = 0;
    for (size_t i = 0; i < t->n_ops; i++) {
        const struct hcr_rop *op = &t->ops[i];
        uint64_t s = op_size(t, op);
        live = live - size[op->slot] + s;
        size[op->slot] = s;
        if (live > peak) {
            peak = live;
            peak_at = i + 1;
        }
    }
    memset(size, 0, t->n_slots * sizeof *size);
    /* the RSS before the replay, less what the allocator already held then (its metadata,
     * caches, blocks the loader asked for): those it reports again at the peak */
    uint64_t before = hcr_vm_rss();
    struct parts p0 = read_allocator(0);
    uint64_t held0 = p0.estimated ? 0 : p0.metadata + p0.free_in_allocator + p0.not_returned;
    uint64_t other = sub(before, held0);
    uint64_t every = t->n_ops / CURVE_POINTS ? t->n_ops / CURVE_POINTS : 1;
    size_t points = 0;
    live = 0;
    uint64_t failed = 0, rss_peak = 0, usable = 0, held = 0;
    struct parts p = {0};
    hcr_put_clear(); /* the baseline's statistics, read only for `held0` */
    hcr_put("{");
    for (size_t i = 0; i < t->n_ops; i++) {
        const struct hcr_rop *op = &t->ops[i];
        uint64_t s = op_size(t, op);
        failed += hcr_apply(hcr_kind(op), op, t->sizes, t->aligns, slots, touch);
        live = live - size[op->slot] + (slots[op->slot] ? s : 0);
        size[op->slot] = slots[op->slot] ? s : 0;
        if (i + 1 == peak_at) {
            rss_peak = hcr_vm_rss();
            for (size_t k = 0; k < t->n_slots; k++)
                if (slots[k]) {
                    usable += malloc_usable_size(slots[k]);
                    held++;
                }
            p = read_allocator(usable);
            hcr_put(", ");
        }
        if (((i + 1) % every == 0 || i + 1 == t->n_ops) && points < CURVE_POINTS + 2) {
            curve[3 * points] = i + 1;
            curve[3 * points + 1] = live;
            curve[3 * points + 2] = hcr_vm_rss();
            points++;
        }
    }
    if (!p.allocator) { /* an empty trace: no peak; the allocator as it is */
        rss_peak = hcr_vm_rss();
        p = read_allocator(0);
        hcr_put(", ");
    }
    hcr_put("\"rss_before\": %llu, \"allocator_before\": %llu, ", (unsigned long long)before,
        (unsigned long long)held0);
    hcr_put("\"allocator\": \"%s\", \"rss\": %llu, \"other\": %llu, \"live\": %llu, "
        "\"usable\": %llu, \"live_blocks\": %llu, \"metadata\": %llu, "
        "\"free_in_allocator\": %llu, \"not_returned\": %llu, \"estimated\": ",
        p.allocator, (unsigned long long)rss_peak, (unsigned long long)other,
        (unsigned long long)peak, (unsigned long long)usable, (unsigned long long)held,
        (unsigned long long)p.metadata, (unsigned long long)p.free_in_allocator,
        (unsigned long long)p.not_returned);
    if (p.estimated)
        hcr_put("\"%s\"", p.estimated);
    else
        hcr_put("null");
    hcr_put(", \"peak_op\": %llu, \"ops\": %llu, \"failed\": %llu, \"threads\": %llu, \"curve\": [",
        (unsigned long long)peak_at, (unsigned long long)t->n_ops,
        (unsigned long long)failed, (unsigned long long)t->threads);
    for (size_t k = 0; k < points; k++)
        hcr_put("%s[%llu, %llu, %llu]", k ? ", " : "", (unsigned long long)curve[3 * k],
            (unsigned long long)curve[3 * k + 1], (unsigned long long)curve[3 * k + 2]);
    hcr_put("]}\n");
    hcr_flush();
    return 0;
}
