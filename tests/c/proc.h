/* proc.h: what the test programs of tests/c read of their own process in /proc/self. */
#ifndef TESTS_PROC_H
#define TESTS_PROC_H
#include <stdio.h>
#include <unistd.h>

/* The "KEY: N kB" line of /proc/self/FILE (status: VmSize, ...; smaps_rollup: Rss), or -1. */
static inline long proc_kib(const char *file, const char *key)
{
    char path[64], line[256], want[48];
    long kib = -1;
    snprintf(path, sizeof path, "/proc/self/%s", file);
    snprintf(want, sizeof want, "%s: %%ld", key);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, want, &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* The process's resident pages, counted by a walk of its page tables (smaps_rollup; statm's
 * count is a per-CPU estimate that lags by dozens of pages). */
static inline long resident(void)
{
    long kib = proc_kib("smaps_rollup", "Rss");
    return kib < 0 ? -1 : kib * 1024 / sysconf(_SC_PAGESIZE);
}
#endif
