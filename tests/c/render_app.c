/* render_app: a program linked with an emitted malloc.c (`cc -O2 render_app.c malloc.c`), as the
 * quick start of the emitted file says.  It exercises every entry point once and prints the
 * allocator's statistics as "name value" lines, so tests/test_render_*.py can see that the
 * knobs baked into the file (or given with -D) took effect.
 * Exit 0 when every call behaved; 1 with a "render_app: FAIL" line otherwise.
 * `render_app usable` instead prints malloc_usable_size for a few request sizes (the table in
 * docs/allocator.md; linked without malloc.c it shows glibc's). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_stats.h"

#define CHECK(c)                                                                                 \
    do {                                                                                         \
        if (!(c)) {                                                                              \
            printf("render_app: FAIL line %d: %s\n", __LINE__, #c);                              \
            return 1;                                                                            \
        }                                                                                        \
    } while (0)

/* Every block goes through here so the compiler cannot elide a malloc/free pair. */
static void *volatile sink;
static void *keep(void *p)
{
    sink = p;
    return sink;
}

static int usable(void)
{
    static const size_t sizes[] = { 1, 12, 13, 24, 28, 40, 60, 100, 1000 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        printf("%zu %zu\n", sizes[i], malloc_usable_size(keep(malloc(sizes[i]))));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "usable") == 0)
        return usable();
    /* 200 bytes is a 208-byte block: small when QL_HIGH >= 208 (a quick-list hit the second
     * time, Hasan & Chang 2006 §3.10), medium otherwise (§3.4). */
    void *p = keep(malloc(200));
    CHECK(p && ((uintptr_t)p & 15) == 0);
    uintptr_t was = (uintptr_t)p; /* a freed pointer may not be compared; its address may */
    free(p);
    void *q = keep(malloc(200));
    CHECK((uintptr_t)q == was);
    unsigned char *c = calloc(100, 100);
    CHECK(c && c[0] == 0 && c[9999] == 0);
    c = realloc(c, 20000);
    CHECK(c && c[9999] == 0);
    void *a = NULL;
    CHECK(posix_memalign(&a, 4096, 100) == 0 && ((uintptr_t)a & 4095) == 0);
    void *b = aligned_alloc(64, 64);
    CHECK(b && ((uintptr_t)b & 63) == 0);
    void *h = malloc(1 << 20); /* above MMAP_THRESHOLD: its own mapping (§3.2) */
    CHECK(h && malloc_usable_size(h) >= (1u << 20));
    volatile size_t huge = SIZE_MAX; /* volatile: the compiler must not see the bad sizes */
    errno = 0;
    CHECK(keep(malloc(huge)) == NULL && errno == ENOMEM);
    CHECK(keep(calloc(huge / 2, 3)) == NULL && errno == ENOMEM);
    free(h);
    free(b);
    free(a);
    free(c);
    free(q);

    struct hc_stats s;
    CHECK(hc_stats_get(&s) == 0 && s.version == HC_STATS_VERSION);
#define PRINT(name, doc) printf("%s %llu\n", #name, (unsigned long long)s.name);
    HC_STATS_FIELDS(PRINT)
    return 0;
}
