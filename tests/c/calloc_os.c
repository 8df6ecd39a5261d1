/* calloc_os: what calloc costs in page faults and mappings (tests/test_allocator_large.py).
 *
 *   calloc_os threshold   a 1 MiB block mapped and freed (the self-adjusting threshold rises),
 *                         then malloc and calloc of 1 MiB: prints "mapped malloc=M calloc=C"
 *                         (1 when the block is outside the heap: its own mapping)
 *   calloc_os table       calloc of an 8 MiB table, every page read, then every page written
 *                         (a hash table's first use): prints "faults F pages P"
 *   calloc_os sparse      calloc of a 16 MiB table, every fourth page read then written (xz's
 *                         match finder on a small input): prints "resident R written W", the
 *                         pages the process's resident set grew by and the pages written
 *   calloc_os reuse       callocs of 120 KiB .. 1 MiB whose users write them (their last byte,
 *                         every page, past a realloc in place, up to malloc_usable_size), freed
 *                         and calloc'd again: exit 3 if a calloc ever returns a nonzero byte;
 *                         prints "ok"
 *   calloc_os shrink      a 1 MiB calloc written whole and freed, then a 128 KiB calloc (the
 *                         kept mapping is reused): prints "resident R", the pages the resident
 *                         set shrank by at the second calloc
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "proc.h"

static long minflt(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

/* A mapped block's pointer is a page plus 16 bytes into its mapping (HC, glibc). */
static int mapped(void *p) { return ((uintptr_t)p & 4095) == 16; }

int main(int argc, char **argv)
{
    size_t mib = (size_t)1 << 20;
    if (argc == 2 && strcmp(argv[1], "threshold") == 0) {
        char *a = malloc(mib);
        if (!a)
            return 1;
        memset(a, 1, mib);
        free(a);
        char *m = malloc(mib), *c = calloc(1, mib);
        if (!m || !c)
            return 1;
        for (size_t i = 0; i < mib; i++)
            if (c[i])
                return 3;
        printf("mapped malloc=%d calloc=%d\n", mapped(m), mapped(c));
        free(m);
        free(c);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "table") == 0) {
        size_t n = 8 * mib, page = (size_t)sysconf(_SC_PAGESIZE);
        long before = minflt();
        volatile char *t = calloc(1, n);
        if (!t)
            return 1;
        unsigned sum = 0;
        for (size_t i = 0; i < n; i += page)
            sum += t[i];
        for (size_t i = 0; i < n; i += page)
            t[i] = (char)(sum + 1);
        printf("faults %ld pages %zu\n", minflt() - before, n / page);
        free((void *)t);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "sparse") == 0) {
        size_t n = 16 * mib, page = (size_t)sysconf(_SC_PAGESIZE), written = 0;
        long before = resident();
        volatile char *t = calloc(1, n);
        if (!t)
            return 1;
        for (size_t i = 0; i < n; i += 4 * page) {
            t[i] = (char)(t[i] + 1);
            written++;
        }
        printf("resident %ld written %zu\n", resident() - before, written);
        free((void *)t);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "reuse") == 0) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        unsigned seed = 1;
        char *live[8] = { 0 };
        for (int round = 0; round < 400; round++) {
            int k = round % 8;
            free(live[k]);
            seed = seed * 1103515245u + 12345u;
            size_t n = ((120u << 10) + (seed >> 8) % (900u << 10)) & ~(size_t)15;
            char *c = calloc(1, n);
            if (!c)
                return 1;
            for (size_t i = 0; i < n; i += 8)
                if (*(uint64_t *)(void *)(c + i) != 0)
                    return 3;
            switch ((seed >> 4) % 4) {
            case 0: c[n - 1] = 1; break;
            case 1: for (size_t i = 0; i < n; i += page) c[i] = 1; break;
            case 2: {
                char *r = realloc(c, n + n / 4); /* within the mapping: kept in place */
                if (!r)
                    return 1;
                c = r;
                memset(c, 7, n + n / 4);
                break;
            }
            default: memset(c, 9, malloc_usable_size(c)); break;
            }
            live[k] = c;
        }
        for (int k = 0; k < 8; k++)
            free(live[k]);
        puts("ok");
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "shrink") == 0) {
        volatile char *big = calloc(1, mib - 4096); /* volatile: the writes before free stay */
        if (!big)
            return 1;
        for (size_t i = 0; i < mib - 4096; i += 512)
            big[i] = 1;
        free((void *)big);
        long before = resident();
        char *c = calloc(1, 128 << 10);
        if (!c)
            return 1;
        printf("resident %ld\n", before - resident());
        free(c);
        return 0;
    }
    fputs("usage: calloc_os threshold|table|sparse|reuse|shrink\n", stderr);
    return 2;
}
