/* hc_glibc_api: glibc's malloc API beyond malloc/free (mallinfo2, mallopt, malloc_trim,
 * malloc_stats, malloc_info) answered by HC, linked statically with the emitted malloc.c:
 *     cc -static hc_glibc_api.c malloc.c      (issue 9: this used to fail with duplicate
 *                                              symbols, libc.a's malloc.o being pulled in)
 * Checks the numbers against HC's own statistics (hc_stats_get); prints "ok N checks".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_stats.h"

/* Weak: under LD_PRELOAD the preloaded HC provides it; linked with malloc.c, malloc.c does. */
#pragma weak hc_stats_get

#define CHECK_NAME "hc_glibc_api"
#include "check.h"

int main(void)
{
    struct hc_stats st;
    if (!hc_stats_get) {
        printf("hc_glibc_api: HC is not this process's malloc\n");
        return 1;
    }
    static char *small[20000];
    for (int i = 0; i < 20000; i++) {
        small[i] = malloc(200);
        memset(small[i], 1, 200);
    }
    char *big = malloc(1 << 20);
    memset(big, 1, 1 << 20);
    hc_stats_get(&st);
    struct mallinfo2 mi = mallinfo2();
    CHECK(mi.arena == st.heap_bytes && mi.arena > 20000 * 200);
    CHECK(mi.hblks == st.mapped_blocks && mi.hblks >= 1);
    CHECK(mi.hblkhd == st.mapped_bytes && mi.hblkhd >= (1 << 20));
    CHECK(mi.uordblks == st.bytes_current - st.mapped_bytes);
    CHECK(mi.uordblks + mi.fordblks == mi.arena);
    CHECK(mi.usmblks == st.footprint);
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo old = mallinfo();
    CHECK((size_t)old.arena == mi.arena && (size_t)old.hblks == mi.hblks);

    /* mallopt: the mmap threshold is honoured, fixed from then on. */
    CHECK(mallopt(M_MMAP_THRESHOLD, 4 << 20) == 1);
    uint64_t mapped = st.mapped_blocks;
    char *mid = malloc(2 << 20); /* below the new threshold: from the heap */
    hc_stats_get(&st);
    CHECK(mid != NULL && st.mapped_blocks == mapped);
    CHECK(mallopt(M_MMAP_THRESHOLD, -1) == 0);
    CHECK(mallopt(M_TRIM_THRESHOLD, 1 << 20) == 1);
    CHECK(mallopt(M_TOP_PAD, 0) == 1);
    CHECK(mallopt(M_ARENA_MAX, 1) == 1 && mallopt(M_ARENA_TEST, 1) == 1);
    CHECK(mallopt(12345, 1) == 1); /* unknown: accepted, as glibc does (mallopt(3), BUGS) */

    /* malloc_trim releases the freed blocks; the heap's accounting stays (the footprint). */
    for (int i = 0; i < 20000; i++)
        free(small[i]);
    free(mid);
    CHECK(malloc_trim(0) == 1);
    hc_stats_get(&st);
    mi = mallinfo2();
    CHECK(mi.arena == st.heap_bytes && mi.keepcost > 0);

    malloc_stats(); /* glibc's format on stderr; the test reads it */
    FILE *f = tmpfile();
    CHECK(f && malloc_info(0, f) == 0);
    if (f) {
        char buf[2048] = { 0 };
        rewind(f);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        CHECK(n > 0 && strstr(buf, "<malloc version=\"hc-1\">") && strstr(buf, "<purge count=\"1\""));
        fclose(f);
    }
    errno = 0;
    CHECK(malloc_info(1, stdout) == -1 && errno == EINVAL);
    free(big);
    return check_report("");
}
