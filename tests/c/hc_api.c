/* hc_api: the malloc API's edge cases and misuse, checked one CHECK at a time.
 *
 * Usage: hc_api              run every check; prints "ok N checks" or one FAIL line per failure
 *        hc_api double-free  free a block twice (a debug allocator must abort with a message)
 *        hc_api invalid-free free a pointer that malloc never returned
 *        hc_api overflow     write past the end of a block (a heap-checking build must abort)
 *
 * Standard API only, so the same binary runs against glibc and, under LD_PRELOAD, against HC.
 * Failure must be NULL + errno (ENOMEM / EINVAL), never a crash (DESIGN §1, complete API).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_NAME "hc_api"
#include "check.h"

/* Keep the compiler from folding away calls whose result it thinks it knows. */
static volatile size_t opaque_zero = 0;
#define HIDE(x) ((x) + opaque_zero)
/* ... and from pairing a malloc with its free and dropping both (GCC does, at -O2). */
static void *volatile opaque_ptr;
__attribute__((noinline)) static void *launder(void *p)
{
    opaque_ptr = p;
    return opaque_ptr;
}

/* Under LD_PRELOAD of HC, the HC library exports hc_stats_get (ARCHITECTURE.md). */
static int running_hc(void)
{
    return dlsym(RTLD_DEFAULT, "hc_stats_get") != NULL;
}

static void huge_requests(void)
{
    size_t sizes[] = {SIZE_MAX, SIZE_MAX - 15, SIZE_MAX - 4096, SIZE_MAX / 2 + 1,
                      (size_t)1 << 62, (size_t)1 << 47};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = 0;
        void *p = launder(malloc(HIDE(sizes[i])));
        CHECK(p == NULL && errno == ENOMEM);
        errno = 0;
        p = launder(calloc(1, HIDE(sizes[i])));
        CHECK(p == NULL && errno == ENOMEM);
        void *q = malloc(32);
        CHECK(q != NULL);
        errno = 0;
        p = launder(realloc(launder(q), HIDE(sizes[i])));
        CHECK(p == NULL && errno == ENOMEM);  /* the old block stays valid */
        q = launder(q);
        memset(q, 7, 32);
        free(q);
        errno = 0;
        p = launder(memalign(64, HIDE(sizes[i])));
        CHECK(p == NULL && errno == ENOMEM);
        void *r = (void *)1;
        CHECK(posix_memalign(&r, 64, HIDE(sizes[i])) == ENOMEM);
        errno = 0;
        p = launder(aligned_alloc(4096, HIDE(sizes[i]) & ~(size_t)4095));
        CHECK(p == NULL && errno == ENOMEM);
        errno = 0;
        p = launder(valloc(HIDE(sizes[i])));
        CHECK(p == NULL && errno == ENOMEM);
        errno = 0;
        p = launder(pvalloc(HIDE(sizes[i])));
        CHECK(p == NULL && errno == ENOMEM);
    }
    /* After all that, ordinary requests still work. */
    void *p = launder(malloc(100));
    CHECK(p != NULL);
    free(p);
}

static void calloc_overflow(void)
{
    size_t pairs[][2] = {{SIZE_MAX, 2}, {2, SIZE_MAX}, {(size_t)1 << 32, (size_t)1 << 32},
                         {(size_t)1 << 33, (size_t)1 << 31}, {SIZE_MAX / 3 + 1, 3}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        errno = 0;
        void *p = launder(calloc(HIDE(pairs[i][0]), HIDE(pairs[i][1])));
        CHECK(p == NULL && errno == ENOMEM);
        errno = 0;
        p = launder(reallocarray(NULL, HIDE(pairs[i][0]), HIDE(pairs[i][1])));
        CHECK(p == NULL && errno == ENOMEM);
    }
    unsigned char *z = launder(calloc(HIDE(0), 16));
    free(z);
    z = launder(calloc(1000, 10));
    CHECK(z != NULL);
    int zero = 1;
    for (size_t i = 0; z && i < 10000; i++)
        zero &= z[i] == 0;
    CHECK(zero);
    free(z);
}

static void bad_alignments(void)
{
    void *p = (void *)1;
    /* posix_memalign: a power of two multiple of sizeof(void *), else EINVAL. */
    size_t bad[] = {0, 1, 2, 4, 12, 24, 48, 100, 4097, (size_t)3 << 20};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = (void *)1;
        CHECK(posix_memalign(&p, HIDE(bad[i]), 64) == EINVAL);
    }
    size_t good[] = {8, 16, 32, 64, 128, 4096, 65536, (size_t)1 << 21};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        p = NULL;
        CHECK(posix_memalign(&p, HIDE(good[i]), 100) == 0 && p && (uintptr_t)p % good[i] == 0);
        if (p) {
            CHECK(malloc_usable_size(p) >= 100);
            memset(p, 0xab, 100);
        }
        free(p);
        errno = 0;
        p = aligned_alloc(HIDE(good[i]), good[i] * 2);
        CHECK(p && (uintptr_t)p % good[i] == 0);
        free(p);
        p = memalign(HIDE(good[i]), 3);
        CHECK(p && (uintptr_t)p % good[i] == 0);
        free(p);
    }
    /* aligned_alloc: the alignment must be a power of two (C17 7.22.3.1; glibc >= 2.38 returns
     * EINVAL). Older glibc rounds the alignment up instead, so only HC is held to EINVAL. */
    size_t not_pow2[] = {0, 3, 24, 100, 4097};
    for (size_t i = 0; i < sizeof not_pow2 / sizeof not_pow2[0]; i++) {
        errno = 0;
        p = aligned_alloc(HIDE(not_pow2[i]), 200);
        if (running_hc())
            CHECK(p == NULL && errno == EINVAL);
        else
            CHECK((p == NULL && errno == EINVAL) || (p != NULL && (uintptr_t)p % 16 == 0));
        free(p);
    }
    /* valloc / pvalloc: page aligned; pvalloc rounds the size up to a whole page. */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    p = valloc(10);
    CHECK(p && (uintptr_t)p % page == 0);
    free(p);
    p = pvalloc(10);
    CHECK(p && (uintptr_t)p % page == 0 && malloc_usable_size(p) >= page);
    free(p);
}

static void realloc_edges(void)
{
    unsigned char *p = realloc(NULL, 40);  /* realloc(NULL, n) is malloc(n) */
    CHECK(p != NULL && (uintptr_t)p % 16 == 0 && malloc_usable_size(p) >= 40);
    for (int i = 0; p && i < 40; i++)
        p[i] = (unsigned char)i;
    unsigned char *q = realloc(p, 4000);
    CHECK(q != NULL);
    int same = 1;
    for (int i = 0; q && i < 40; i++)
        same &= q[i] == i;
    CHECK(same);
    q = realloc(q, 8);  /* shrinking keeps the prefix */
    CHECK(q != NULL && q[0] == 0 && q[7] == 7);
    /* realloc(p, 0): glibc frees p and returns NULL; a unique pointer is also allowed. Either way
     * no crash, and a non-NULL result must be freeable. */
    void *r = realloc(q, 0);
    free(r);
    free(NULL);  /* a no-op */
    CHECK(malloc_usable_size(NULL) == 0);
    /* Same size and grow-in-place paths (Hasan & Chang 2006, §3.12) keep the data. */
    p = malloc(200);
    CHECK(p != NULL);
    memset(p, 0x5a, 200);
    q = realloc(p, 200);
    CHECK(q != NULL && q[199] == 0x5a);
    q = realloc(q, 100000);
    CHECK(q != NULL && q[0] == 0x5a && q[199] == 0x5a);
    q = realloc(q, 3000000);  /* across MMAP_THRESHOLD (§3.2) */
    CHECK(q != NULL && q[0] == 0x5a && q[199] == 0x5a);
    q = realloc(q, 300);
    CHECK(q != NULL && q[0] == 0x5a && q[199] == 0x5a);
    free(q);
}

static void small_and_zero(void)
{
    void *p = malloc(0);  /* NULL or a unique freeable pointer */
    void *q = malloc(0);
    CHECK(p == NULL || p != q);
    free(p);
    free(q);
    for (size_t n = 1; n <= 2048; n++) {
        unsigned char *b = malloc(n);
        CHECK(b != NULL && (uintptr_t)b % 16 == 0 && malloc_usable_size(b) >= n);
        if (b)
            memset(b, 0xff, malloc_usable_size(b));
        free(b);
    }
}

static int misuse(const char *what)
{
    if (strcmp(what, "double-free") == 0) {
        /* A few live neighbours, so the freed block is an ordinary one in the middle. */
        void *a = launder(malloc(24)), *b = launder(malloc(24)), *c = launder(malloc(24));
        void *again = launder(b);
        free(b);
        free(again);
        free(a);
        free(c);
    } else if (strcmp(what, "double-free-medium") == 0) {
        void *a = launder(malloc(500)), *b = launder(malloc(500)), *c = launder(malloc(500));
        void *again = launder(b);
        free(b);
        free(again);
        free(a);
        free(c);
    } else if (strcmp(what, "invalid-free") == 0) {
        char *a = launder(malloc(64));
        free(launder(a + 16));
        free(a);
    } else if (strcmp(what, "overflow") == 0) {
        /* Write 16 bytes past the usable end of a block: the next block's header is hit. A
         * heap-checking build must notice at its next check (no later than the next call). */
        unsigned char *a = launder(malloc(40)), *b = launder(malloc(40));
        size_t n = malloc_usable_size(a);
        memset(launder(a), 0xee, n + 16);
        free(b);
        free(launder(malloc(40)));
        free(a);
    } else {
        fprintf(stderr, "hc_api: unknown mode %s\n", what);
        return 2;
    }
    printf("hc_api: %s was not detected\n", what);
    return 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1)
        return misuse(argv[1]);
    huge_requests();
    calloc_overflow();
    bad_alignments();
    realloc_edges();
    small_and_zero();
    return check_report("");
}
