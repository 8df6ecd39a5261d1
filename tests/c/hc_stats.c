/* hc_stats: known call sequences against HC, printing how each moved the statistics.
 *
 * Usage: hc_stats [SCENARIO [ARG]]   (with an HC build injected by LD_PRELOAD)
 *        no argument: the fixed sequence; a scenario name: one policy scenario in a fresh heap
 *
 * For each phase prints one JSON line {"phase": NAME, "delta": {field: after - before, ...},
 * "after": {...}, "facts": {...}}; tests/test_allocator_stats.py holds the numbers to the
 * paper's rules (Hasan & Chang 2006, §3.1 sizes, §3.2 mmap, §3.4 LIFO lists, §3.10 quick lists,
 * §3.11 statistics, §3.12 realloc). Statistics are read with hc_stats_get, found the way the
 * replay harness finds it: dlsym(RTLD_DEFAULT, "hc_stats_get"). Exit 3 when HC is not loaded.
 * stdout gets a static buffer so printing never calls malloc between snapshots.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_stats.h"

static int (*get_stats)(struct hc_stats *);
static struct hc_stats before, after;
static char facts[1024];
static char outbuf[1 << 16];

static void *volatile keep;  /* stops the compiler from dropping malloc/free pairs */
static void *launder(void *p)
{
    keep = p;
    return keep;
}

static void begin(void)
{
    facts[0] = 0;
    get_stats(&before);
}

static void fact(const char *name, long long value)
{
    size_t n = strlen(facts);
    snprintf(facts + n, sizeof facts - n, "%s\"%s\": %lld", n ? ", " : "", name, value);
}

static void end(const char *phase)
{
    get_stats(&after);
    printf("{\"phase\": \"%s\", \"delta\": {", phase);
    const char *sep = "";
#define HC_PRINT_DELTA(name, doc)                                                         \
    printf("%s\"%s\": %lld", sep, #name, (long long)(after.name - before.name));          \
    sep = ", ";
    HC_STATS_FIELDS(HC_PRINT_DELTA)
    printf("}, \"after\": {");
    sep = "";
#define HC_PRINT_AFTER(name, doc)                                                         \
    printf("%s\"%s\": %llu", sep, #name, (unsigned long long)after.name);                  \
    sep = ", ";
    HC_STATS_FIELDS(HC_PRINT_AFTER)
    printf("}, \"facts\": {%s}}\n", facts);
}

/* The fixed sequence: one phase per rule. */
static void sequence(void)
{
    void *p[100];

    /* 1. A hundred 40-byte requests: 48-byte blocks (4-byte header, 16-byte steps, §3.1),
     *    small with QL_HIGH >= 48: quick lists refilled with preallocation (§3.10). */
    begin();
    for (int i = 0; i < 100; i++)
        p[i] = launder(malloc(40));
    end("malloc-small");

    begin();
    for (int i = 0; i < 100; i++)
        free(p[i]);
    end("free-small");

    /* 2. The same again: every block now comes back off the quick list. */
    begin();
    for (int i = 0; i < 100; i++)
        p[i] = launder(malloc(40));
    end("malloc-small-again");
    for (int i = 0; i < 100; i++)
        free(p[i]);

    /* 2b. An empty quick list refilled by splitting a free big block: the remainder is
     *     preallocated into the quick list, up to QL_PREALLOC blocks (§3.6, §3.10). 60 bytes is
     *     a 64-byte block, the largest quick list of QL_HIGH 72, so no bigger quick list can
     *     serve it instead; a guard keeps the big block from merging with the wilderness. */
    void *big = launder(malloc(4000)), *guard0 = launder(malloc(2000));
    free(big);
    begin();
    for (int i = 0; i < 50; i++)
        p[i] = launder(malloc(60));
    end("ql-refill");
    for (int i = 0; i < 50; i++)
        free(p[i]);
    free(guard0);

    /* 3. Medium blocks (500 bytes -> 512-byte block, §3.4): free the middle one, ask again;
     *    LIFO lists give the same block back. */
    begin();
    void *a = launder(malloc(500)), *b = launder(malloc(500)), *c = launder(malloc(500));
    free(b);
    void *b2 = launder(malloc(500));
    fact("same_block", b2 == b);
    end("medium-lifo");
    free(a);
    free(b2);
    free(c);

    /* 4. A huge block: its own mapping (§3.2), unmapped on free. */
    begin();
    void *h = launder(malloc(300 * 1024));
    end("mmap-alloc");
    begin();
    free(h);
    end("mmap-free");

    /* 5. realloc grows into a free neighbour in place (§3.12). */
    begin();
    char *r = launder(malloc(1000));
    char *n = launder(malloc(1000));
    char *guard = launder(malloc(1000));  /* keeps n from merging with the wilderness */
    fact("adjacent", n - r == 1008);
    memset(r, 1, 1000);
    free(n);
    char *r2 = launder(realloc(r, 1800));
    fact("same_block", r2 == r);
    fact("kept", r2[0] == 1 && r2[999] == 1);
    end("realloc-grow");
    free(r2);
    free(guard);

    /* 6. calloc, realloc and the memalign family are counted as allocations too. */
    begin();
    void *q1 = launder(calloc(10, 10));
    void *q2 = NULL;
    if (posix_memalign(&q2, 256, 100) != 0)
        q2 = NULL;
    void *q3 = launder(aligned_alloc(64, 128));
    fact("all", q1 && q2 && q3);
    end("other-calls");
    begin();
    free(q1);
    free(q2);
    free(q3);
    end("other-frees");

    /* 7. Many blocks, then nearly all freed: with COALESCE_IN_FREE the heap (> IN_FREE_HEAP) is
     *    completely coalesced once fewer than IN_FREE_BLOCKS blocks are live (§3.11). */
    static void *many[3000];
    begin();
    fact("live_before", (long long)before.allocs_current);
    for (int i = 0; i < 3000; i++)
        many[i] = launder(malloc(100 + i % 200));
    for (int i = 0; i < 3000; i++)
        free(many[i]);
    end("in-free");
}

/* ---- policy scenarios: one per run, in a fresh heap, so the knobs' effects are visible ---- */

/* §3.8 COALESCE_QL: small blocks freed onto quick lists are reused for big requests only after
 * a complete coalescing; without it the wilderness must grow for every big block. */
static void scenario_coalesce_ql(void)
{
    static void *small[20000];
    for (int i = 0; i < 20000; i++)
        small[i] = launder(malloc(24));  /* 32-byte blocks: quick lists for any QL_HIGH */
    for (int i = 0; i < 20000; i++)
        free(small[i]);
    static void *big[200];
    begin();
    for (int i = 0; i < 200; i++)
        big[i] = launder(malloc(2000));
    end("coalesce-ql");
    for (int i = 0; i < 200; i++)
        free(big[i]);
}

/* §3.6 SPLIT: a free big block is split for medium requests instead of taking the wilderness. */
static void scenario_split(void)
{
    void *x = launder(malloc(8000)), *guard = launder(malloc(3000));
    uintptr_t from = (uintptr_t)x, to = from + 8000;
    free(x);
    void *m[10];
    begin();
    for (int i = 0; i < 10; i++)
        m[i] = launder(malloc(200));
    fact("inside", (uintptr_t)m[0] >= from && (uintptr_t)m[0] < to);
    end("split");
    for (int i = 0; i < 10; i++)
        free(m[i]);
    free(guard);
}

/* §3.8: a block that is the request's size plus one granule is handed out whole, not split;
 * two granules more is split (with SPLIT). */
static void scenario_fit(void)
{
    char *a = launder(malloc(500)), *g1 = launder(malloc(3000));  /* a: 512-byte block */
    char *b = launder(malloc(516)), *g2 = launder(malloc(3000));  /* b: 528-byte block */
    free(a);
    begin();
    char *a2 = launder(malloc(490));  /* 496-byte block: a is one granule more */
    fact("same_block", a2 == a);
    fact("usable", (long long)malloc_usable_size(a2));
    end("fit-plus-one");
    free(b);
    begin();
    char *b2 = launder(malloc(490));  /* b is two granules more: split */
    fact("same_block", b2 == b);
    fact("usable", (long long)malloc_usable_size(b2));
    end("fit-plus-two");
    free(a2);
    free(b2);
    free(g1);
    free(g2);
}

/* §3.7 COALESCE: four freed neighbours on the uncoalesced list of their size are merged to
 * serve a request none of them could. */
static void scenario_incremental(void)
{
    char *n[4];
    for (int i = 0; i < 4; i++)
        n[i] = launder(malloc(500));
    void *guard = launder(malloc(3000));
    int adjacent = n[1] - n[0] == 512 && n[2] - n[1] == 512 && n[3] - n[2] == 512;
    for (int i = 0; i < 4; i++)
        free(n[i]);
    begin();
    fact("adjacent", adjacent);
    char *big = launder(malloc(1500));
    fact("reused", big == n[0]);
    end("incremental");
    free(big);
    free(guard);
}

/* §3.2 MMAP_THRESHOLD: requests above it get their own mapping; at or below, the heap. */
static void scenario_mmap_threshold(const char *arg)
{
    size_t t = strtoul(arg, NULL, 0);
    begin();
    void *at = launder(malloc(t));
    end("mmap-at-threshold");
    begin();
    void *above = launder(malloc(t + 1));
    end("mmap-above-threshold");
    free(at);
    free(above);
}

/* §3.9 HEAP_UNIT: the wilderness grows from the OS in multiples of HEAP_UNIT. */
static void scenario_heap_unit(void)
{
    static void *p[3000];
    begin();
    for (int i = 0; i < 3000; i++)
        p[i] = launder(malloc(100 + (i % 7) * 100));
    end("heap-unit");
    for (int i = 0; i < 3000; i++)
        free(p[i]);
}

/* Small pages' blocks (SMALL_MAX) in allocs_* and bytes_*, blocks passed between threads: the
 * main thread's blocks freed by another thread (back through their pages' atomic lists), and
 * another thread's blocks freed by main after that thread exited (its pages orphaned). */
#define PAGE_BLOCKS 1000
static void *page_blocks[PAGE_BLOCKS];

static void *free_them(void *arg)
{
    (void)arg;
    for (int i = 0; i < PAGE_BLOCKS; i++)
        free(page_blocks[i]);
    return NULL;
}

static void *make_them(void *arg)
{
    (void)arg;
    for (int i = 0; i < PAGE_BLOCKS; i++)
        page_blocks[i] = launder(malloc(100));
    return NULL;
}

static void scenario_page_threads(void)
{
    pthread_t th;
    /* Threads made (and their start-up allocations done) before the first snapshot. */
    pthread_create(&th, NULL, free_them, NULL); /* frees nothing yet: the array is all NULL */
    pthread_join(th, NULL);

    begin();
    for (int i = 0; i < PAGE_BLOCKS; i++)
        page_blocks[i] = launder(malloc(100)); /* 112-byte class */
    end("pages-malloc");

    begin();
    pthread_create(&th, NULL, free_them, NULL);
    pthread_join(th, NULL);
    malloc_trim(0); /* the owner collects the other thread's frees */
    end("pages-remote-free");

    pthread_create(&th, NULL, make_them, NULL);
    pthread_join(th, NULL);
    begin();
    for (int i = 0; i < PAGE_BLOCKS; i++)
        free(page_blocks[i]);
    malloc_trim(0); /* the orphaned pages swept */
    end("pages-orphan-free");

    begin();
    for (int i = 0; i < PAGE_BLOCKS; i++)
        page_blocks[i] = launder(malloc(100));
    for (int i = 0; i < PAGE_BLOCKS; i++)
        page_blocks[i] = launder(realloc(page_blocks[i], 300)); /* moved: 320-byte class */
    fact("moved", page_blocks[0] != NULL);
    for (int i = 0; i < PAGE_BLOCKS; i++)
        free(page_blocks[i]);
    end("pages-realloc");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    get_stats = (int (*)(struct hc_stats *))dlsym(RTLD_DEFAULT, "hc_stats_get");
    if (!get_stats) {
        printf("hc_stats: HC is not loaded (no hc_stats_get)\n");
        return 3;
    }
    const char *what = argc > 1 ? argv[1] : "sequence";
    if (strcmp(what, "sequence") == 0)
        sequence();
    else if (strcmp(what, "coalesce-ql") == 0)
        scenario_coalesce_ql();
    else if (strcmp(what, "split") == 0)
        scenario_split();
    else if (strcmp(what, "fit") == 0)
        scenario_fit();
    else if (strcmp(what, "incremental") == 0)
        scenario_incremental();
    else if (strcmp(what, "mmap-threshold") == 0 && argc > 2)
        scenario_mmap_threshold(argv[2]);
    else if (strcmp(what, "heap-unit") == 0)
        scenario_heap_unit();
    else if (strcmp(what, "page-threads") == 0)
        scenario_page_threads();
    else {
        fprintf(stderr, "usage: hc_stats [sequence | coalesce-ql | split | fit | incremental | "
                        "mmap-threshold BYTES | heap-unit | page-threads]\n");
        return 2;
    }
    fflush(stdout);
    return 0;
}
