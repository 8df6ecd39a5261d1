/* hc_stats.h -- the HC allocator's statistics, declared once (Hasan & Chang 2006, §3.11).
 *
 * The paper keeps some statistics always (the ones its policies need: bytes in use and their
 * maximum for COALESCE_QL, live blocks for COALESCE_IN_FREE, memory taken from the OS) and the
 * rest only when MONITOR is on.  Fields marked [always] are right in every build; the others
 * stay 0 when MONITOR is 0.  Byte counts are block bytes (header and rounding included) for heap
 * blocks and whole mappings for mmapped ones: what the allocator really hands out.  The small
 * pages' blocks (SMALL_MAX) count by their class's size; with MONITOR off the maxima are the
 * paper heap's alone (the pages' fast paths count nothing then).
 *
 * Read them with hc_stats_get(); the replay harness finds it with
 * dlsym(RTLD_DEFAULT, "hc_stats_get").  HCMALLOC_STATS=1 prints them to stderr at exit,
 * HCMALLOC_STATS=/path writes them there, one "name value" line each.
 */
#ifndef HC_STATS_H
#define HC_STATS_H

#include <stdint.h>

#define HC_STATS_VERSION 4

/* X(name, doc): every field is a uint64_t. */
#define HC_STATS_FIELDS(X)                                                                       \
    X(version, "layout version of this struct (HC_STATS_VERSION) [always]")                     \
    X(monitor, "1 when built with MONITOR, i.e. the counters below [always] are kept [always]")  \
    X(allocs_current, "blocks currently allocated [always]")                                    \
    X(allocs_max, "most blocks allocated at once [always]")                                     \
    X(allocs_total, "allocations ever made (malloc, calloc, memalign family, realloc moves)")   \
    X(bytes_current, "bytes currently allocated [always]")                                      \
    X(bytes_max, "most bytes allocated at once [always]")                                       \
    X(bytes_total, "bytes ever allocated")                                                      \
    X(frees, "blocks freed (free, and realloc moves)")                                          \
    X(reallocs, "realloc calls on a live block")                                                \
    X(footprint, "high-water mark of memory taken from the OS: heap + mmapped [always]")        \
    X(heap_bytes, "heap memory currently taken from the OS (wilderness included) [always]")     \
    X(mapped_bytes, "bytes currently in mmapped blocks (§3.2) [always]")                        \
    X(mapped_blocks, "blocks currently mmapped [always]")                                       \
    X(ql_hits, "allocations served from a quick list (§3.10)")                                  \
    X(ql_refills, "quick lists refilled by preallocation after a split (§3.10)")                \
    X(ql_prealloc_blocks, "blocks preallocated into quick lists (§3.10)")                       \
    X(list_hits, "allocations served from the exact or next medium list (§3.4)")                \
    X(big_hits, "allocations served best-fit from the big list (§3.3)")                         \
    X(big_cache_hits, "allocations served by a freed big block of their exact size kept by BIG_CACHE (hc_bigcache.c)") \
    X(splits, "free blocks split to serve a request (§3.6)")                                    \
    X(coalesce_incremental, "incremental coalescing runs (§3.7)")                               \
    X(coalesce_complete, "complete coalescing runs from malloc (§3.8)")                         \
    X(coalesce_in_free, "complete coalescing runs from free (§3.11)")                           \
    X(wilderness_allocs, "allocations carved from the wilderness (§3.9)")                       \
    X(wilderness_grows, "times the wilderness was grown from the OS (§3.9)")                    \
    X(mmaps, "blocks given their own mmap (§3.2)")                                              \
    X(calloc_maps_reused, "callocs served by a kept mapping of an earlier calloc (CALLOC_CACHE)")  \
    X(calloc_maps_kept, "bytes of address space in calloc's kept mappings (CALLOC_CACHE) [always]") \
    X(realloc_in_place, "reallocs served in place by merging neighbours (§3.12)")               \
    X(realloc_moved, "reallocs that allocated, copied and freed (§3.12)")                      \
    X(tcache_refills, "thread caches refilled from the heap, half a cache each (hc_tcache.c)")    \
    X(tcache_flushes, "thread caches that gave blocks back: half a full class, or all at exit")  \
    X(small_pages, "64 KiB pages taken for small blocks (SMALL_MAX, hc_page.c), counted in heap_bytes and the footprint; their blocks count in allocs_current and bytes_current, and with MONITOR in the maxima, allocs_total, bytes_total and frees too (hc_page.c, counts) [always]") \
    X(small_pages_empty, "of them, empty pages kept for reuse [always]")                      \
    X(small_bytes_released, "bytes of empty small pages given back (decay, malloc_trim) [always]") \
    X(small_remote_kept, "small blocks of another thread's page kept by the thread that freed them, for its own next requests (REMOTE_KEEP, hc_remote.c)") \
    X(small_remote_batches, "pushes of several blocks of one page at once onto its atomic list by the thread that freed them (REMOTE_BATCH)") \
    X(small_remote_takes, "lists of other threads' frees taken from a small page by its owner (one atomic exchange each)") \
    X(small_remote_returned, "blocks on them: small blocks freed by another thread that came back to their page") \
    X(run_pages, "of the small pages, those holding mid sizes as runs of 32-byte granules (MID_RUNS, hc_run.c) [always]")

struct hc_stats {
#define HC_STATS_MEMBER(name, doc) uint64_t name;
    HC_STATS_FIELDS(HC_STATS_MEMBER)
#undef HC_STATS_MEMBER
};

/* Copy the statistics into *out; returns 0.  Thread-safe. */
int hc_stats_get(struct hc_stats *out);

#endif /* HC_STATS_H */
