/* large_blocks: a program of large blocks for bench/alloc_bench.py (issue 9).  Keeps a live set
 * of 64 blocks of 64 KiB .. 4 MiB and replaces one at a time, 40,000 times, writing each block's
 * first and last pages and one page in eight in between (a buffer that is filled sparsely, then
 * dropped): what makes an allocator map and unmap on every call, or keep memory around. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 40000;
    char *live[64] = { 0 };
    size_t sizes[64] = { 0 };
    uint64_t x = 2006, sum = 0;
    for (long r = 0; r < rounds; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned k = (unsigned)(x % 64);
        free(live[k]);
        size_t n = (size_t)65536 << (x >> 20) % 7; /* 64 KiB .. 4 MiB */
        n += (x >> 32) % n;
        char *p = malloc(n);
        if (!p)
            return 1;
        for (size_t off = 0; off < n; off += 8 * 4096)
            p[off] = (char)r;
        p[n - 1] = 1;
        live[k] = p;
        sizes[k] = n;
        sum += (uint64_t)(unsigned char)p[0];
    }
    for (int k = 0; k < 64; k++)
        free(live[k]);
    printf("%llu %zu\n", (unsigned long long)sum, sizes[0]);
    return 0;
}
