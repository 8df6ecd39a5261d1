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
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static long minflt(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

/* The process's resident pages (/proc/self/statm's second field). */
static long resident(void)
{
    long size = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &size, &rss) != 2)
        rss = -1;
    if (f)
        fclose(f);
    return rss;
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
    fputs("usage: calloc_os threshold|table|sparse\n", stderr);
    return 2;
}
