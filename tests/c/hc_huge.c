/* hc_huge: which of HC's mappings the kernel was asked to back with transparent huge pages
 * (HUGEPAGE, allocator/hc/hc_os.c), for tests/test_allocator_os.py.
 *
 * Allocates a small block (the small pages' region), a block of the paper's heap and a mapped
 * block, then prints for each "NAME 1" when the mapping that holds it carries the "hg" flag in
 * /proc/self/smaps (madvise MADV_HUGEPAGE), "NAME 0" when it does not, "NAME -1" when no
 * mapping holds it.  The flag is the request, whatever the kernel's THP setting. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

/* 1: the mapping holding p has VmFlags "hg"; 0: it has not; -1: none holds p. */
static int huge_flag(void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0, found = -1;
    uintptr_t a = (uintptr_t)p;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a >= lo && a < hi;
        } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL;
            break;
        }
    }
    if (f)
        fclose(f);
    return found;
}

int main(void)
{
    void *small = launder(malloc(64));
    void *heap = launder(malloc(40000));
    void *mapped = launder(malloc(64 << 20));
    int got[3] = { huge_flag(small), huge_flag(heap), huge_flag(mapped) };
    printf("small %d\nheap %d\nmapped %d\n", got[0], got[1], got[2]);
    free(mapped);
    free(heap);
    free(small);
    return 0;
}
