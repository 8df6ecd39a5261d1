/* hc_stats: known call sequences against HC, printing how each moved the statistics.
 *
 * Usage: hc_stats   (with an HC build injected by LD_PRELOAD)
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

int main(void)
{
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    get_stats = (int (*)(struct hc_stats *))dlsym(RTLD_DEFAULT, "hc_stats_get");
    if (!get_stats) {
        printf("hc_stats: HC is not loaded (no hc_stats_get)\n");
        return 3;
    }
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
    fflush(stdout);
    return 0;
}
