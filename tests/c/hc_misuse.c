/* hc_misuse: a heap the program corrupts (issue 35).  The allocator must end each case with an
 * abort and a message on stderr -- never a hang, never a bare SIGSEGV -- where it can see the
 * corruption at all (a block with a header: the paper's blocks; the debug build: every kind).
 * Standard API only: the same binary runs on glibc and, under LD_PRELOAD, on HC.
 *
 * Usage: hc_misuse overflow N FILL  eight blocks of N bytes; 8 bytes of FILL written just past
 *                    the usable end of the fourth (the next block's header); all freed, all
 *                    allocated and freed again.  Prints "survived" if nothing noticed.
 *        hc_misuse underflow N   8 bytes written just before a block of N (among others), then
 *                    it is freed, and the rest.
 *        hc_misuse interior N    free(p + 16) of a block of N bytes.
 *        hc_misuse uaf N         a block of N bytes freed, then written (16 bytes at its start),
 *                    then more allocation and freeing of that size.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink; /* keeps the compiler from reasoning about the misuse */

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: hc_misuse overflow|underflow|interior|uaf N [FILL]\n");
        return 2;
    }
    const char *mode = argv[1];
    size_t n = strtoul(argv[2], NULL, 0);
    int fill = argc > 3 ? (int)strtol(argv[3], NULL, 0) : 0x41;
    char *p[8];
    for (int i = 0; i < 8; i++) {
        p[i] = malloc(n);
        memset(p[i], 0x5a, n);
    }
    if (strcmp(mode, "overflow") == 0) {
        memset(p[3] + malloc_usable_size(p[3]), fill, 8);
    } else if (strcmp(mode, "underflow") == 0) {
        memset(p[3] - 8, fill, 8);
    } else if (strcmp(mode, "interior") == 0) {
        sink = p[3] + 16;
        free(sink);
        puts("survived");
        return 0;
    } else if (strcmp(mode, "uaf") == 0) {
        free(p[3]);
        sink = p[3];
        memset(sink, fill, 16);
        p[3] = malloc(n);
    } else {
        fprintf(stderr, "hc_misuse: unknown mode %s\n", mode);
        return 2;
    }
    for (int i = 0; i < 8; i++)
        free(p[i]);
    for (int i = 0; i < 8; i++)
        p[i] = malloc(n);
    for (int i = 0; i < 8; i++)
        free(p[i]);
    puts("survived");
    return 0;
}
