/* fit_sizes: every request size served under a fitted class table (allocator/hc/hc_fit.c).
 *
 * Usage: fit_sizes MAX    every request size 0..MAX+64: malloc's usable size at least the request,
 *                         alignment (16 bytes for a request that is a multiple of 16, 8 for any
 *                         other: FIT_ALIGN8's classes of an odd number of words), calloc of dirty
 *                         memory zeroed, realloc to a size in another class and back with the
 *                         contents kept, the memalign family at 16..512 with usable sizes, and
 *                         blocks of every size live at once, each keeping its own pattern
 * Standard API only: runs against glibc as is.  Prints "ok fit_sizes max=MAX" and exits 0, or
 * "fit_sizes: FAIL ..." and exits 1.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, size_t n)
{
    printf("fit_sizes: FAIL %s (size %zu)\n", what, n);
    exit(1);
}

static void aligned_for(void *p, size_t n)
{
    if ((uintptr_t)p & 7)
        die("not 8-byte aligned", n);
    if (n >= 16 && n % 16 == 0 && ((uintptr_t)p & 15))
        die("a multiple of 16 not 16-byte aligned", n);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fit_sizes MAX\n");
        return 2;
    }
    size_t max = strtoul(argv[1], NULL, 0), top = max + 64;
    unsigned char **keep = calloc(top + 1, sizeof *keep);
    for (size_t n = 0; n <= top; n++) {
        unsigned char *p = malloc(n);
        if (!p)
            die("malloc returned NULL", n);
        aligned_for(p, n);
        size_t u = malloc_usable_size(p);
        if (u < n)
            die("usable size below the request", n);
        memset(p, 0xa5, u);
        free(p);
        unsigned char *z = calloc(1, n);
        if (!z)
            die("calloc returned NULL", n);
        for (size_t i = 0; i < n; i++)
            if (z[i])
                die("calloc: memory not zeroed", n);
        memset(z, 0x5a, n);
        size_t m = n * 3 + 40;            /* another class */
        unsigned char *r = realloc(z, m);
        if (!r)
            die("realloc returned NULL", m);
        aligned_for(r, m);
        for (size_t i = 0; i < n; i++)
            if (r[i] != 0x5a)
                die("realloc did not keep the contents (up)", n);
        memset(r, 0x3c, m);
        r = realloc(r, n ? n : 1);
        for (size_t i = 0; i < n; i++)
            if (r[i] != 0x3c)
                die("realloc did not keep the contents (down)", n);
        free(r);
        keep[n] = malloc(n ? n : 1);
        if (!keep[n])
            die("malloc returned NULL", n);
        memset(keep[n], (int)(n & 0xff), n);
    }
    for (size_t n = 0; n <= top; n++) {
        for (size_t i = 0; i < n; i++)
            if (keep[n][i] != (unsigned char)(n & 0xff))
                die("a live block was overwritten", n);
        free(keep[n]);
    }
    for (size_t a = 16; a <= 512; a *= 2)
        for (size_t n = 1; n <= top; n += 7) {
            void *p = NULL;
            if (posix_memalign(&p, a, n) || !p || ((uintptr_t)p & (a - 1)))
                die("posix_memalign: not aligned", n);
            if (malloc_usable_size(p) < n)
                die("posix_memalign: usable size below the request", n);
            memset(p, 1, n);
            void *q = aligned_alloc(a, (n + a - 1) / a * a);
            void *s = memalign(a, n);
            if (!q || ((uintptr_t)q & (a - 1)) || !s || ((uintptr_t)s & (a - 1)))
                die("aligned_alloc/memalign: not aligned", n);
            memset(s, 2, n);
            free(p);
            free(q);
            free(s);
        }
    free(keep);
    printf("ok fit_sizes max=%zu\n", max);
    return 0;
}
