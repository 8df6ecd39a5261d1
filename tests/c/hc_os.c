/* hc_os: memory given back to the OS (issue 9), read from /proc/self/statm.
 *
 * Usage: hc_os decay   allocate 512 MiB in small, medium and large blocks, free it all, then
 *                      wait: every 10 ms one 8 KiB malloc/free (a call that reaches the
 *                      allocator's slow path, where HC's decay reads its clock: HC has no
 *                      background thread, so an idle program is purged on its next calls) and a
 *                      read of the resident size.  Prints "rss_peak_kib N", then
 *                      "released_ms M rss_kib R" when RSS fell below 32 MiB, or
 *                      "timeout rss_kib R" after 3 s.
 *        hc_os series [MS]  the decay's wait for MS ms (default 3000), printing "t_ms rss_kib"
 *                      at every poll (bench/decay_plot.py plots it).
 *        hc_os trim    the same allocation and frees, then malloc_trim(0): prints
 *                      "trim RET rss_kib R" right after it.
 *        hc_os reserve MIB  one 1000-byte block, then "vm_kib V" (the process's address
 *                      space, VmSize); then MIB MiB of 40 KiB blocks (below the mmap threshold:
 *                      the heap), written and checked, and "vm_kib V" again.
 * Standard glibc API only, so the same binary runs on glibc and, under LD_PRELOAD, on HC.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

#define TOTAL ((size_t)512 << 20)
#define LIMIT_KIB (32 * 1024)

static long rss_kib(void)
{
    long size = 0, resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2)
            resident = -1;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static uint64_t rng = 88172645463325252ull;
static size_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (size_t)rng;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* 128 MiB of 16..64-byte blocks, 128 MiB of 100..1000, 256 MiB of 1 KiB..256 KiB, written
 * whole; then freed, odd ones first (holes everywhere), then the rest.  The pointer array is
 * mapped directly, so nothing of the test's own stays in the heap. */
static void churn(void)
{
    size_t cap = 16u << 20, n = 0;
    char **ptrs = mmap(NULL, cap * sizeof *ptrs, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptrs == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    size_t phase[3][3] = { { TOTAL / 4, 16, 64 }, { TOTAL / 4, 100, 1000 }, { TOTAL / 2, 1024, 262144 } };
    for (int p = 0; p < 3; p++) {
        size_t done = 0, lo = phase[p][1], span = phase[p][2] - lo + 1;
        while (done < phase[p][0] && n < cap) {
            size_t sz = lo + next() % span;
            char *b = malloc(sz);
            if (!b) {
                perror("malloc");
                exit(2);
            }
            memset(b, 1, sz);
            ptrs[n++] = b;
            done += sz;
        }
    }
    printf("rss_peak_kib %ld\n", rss_kib());
    for (size_t i = 1; i < n; i += 2)
        free(ptrs[i]);
    for (size_t i = 0; i < n; i += 2)
        free(ptrs[i]);
    munmap(ptrs, cap * sizeof *ptrs);
}

static int reserve(size_t mib)
{
    char *one = malloc(1000);
    if (!one)
        return 1;
    printf("vm_kib %ld\n", proc_kib("status", "VmSize"));
    size_t n = (mib << 20) / 40960;
    char **v = malloc(n * sizeof *v);
    if (!v)
        return 1;
    for (size_t i = 0; i < n; i++) {
        if (!(v[i] = malloc(40960)))
            return 1;
        memset(v[i], (int)(i & 0x7f), 40960);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < 40960; j += 4093)
            if (v[i][j] != (char)(i & 0x7f))
                return 3;
    printf("vm_kib %ld\n", proc_kib("status", "VmSize"));
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
    free(one);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "decay";
    if (!strcmp(mode, "reserve"))
        return reserve(argc > 2 ? (size_t)atoi(argv[2]) : 1);
    churn();
    if (!strcmp(mode, "trim")) {
        int r = malloc_trim(0);
        printf("trim %d rss_kib %ld\n", r, rss_kib());
        if (argc > 2)
            malloc_info(0, stdout);
        return 0;
    }
    double t0 = now_ms();
    int series = !strcmp(mode, "series");
    double until = series && argc > 2 ? atof(argv[2]) : 3000;
    for (;;) {
        long rss = rss_kib();
        double t = now_ms() - t0;
        if (series) {
            printf("%.1f %ld\n", t, rss);
            if (t > until)
                return 0;
            goto poll;
        }
        if (rss >= 0 && rss < LIMIT_KIB) {
            printf("released_ms %.0f rss_kib %ld\n", t, rss);
            return 0;
        }
        if (t > 3000) {
            printf("timeout rss_kib %ld\n", rss);
            if (argc > 2)
                malloc_info(0, stdout);
            return 0;
        }
    poll:;
        char *volatile p = malloc(8192);
        p[0] = 1;
        free(p);
        usleep(10000);
    }
}
