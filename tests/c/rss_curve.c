/* A program with one peak: 40 MiB of 64 KiB blocks, written, freed, then 300 ms of rest.  Its
 * RSS after the peak is what the allocator keeps: jemalloc keeps freed pages for
 * dirty_decay_ms (10 s by default), glibc trims the top of its heap at once. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCKS 640
#define SIZE (64 * 1024)

int main(void)
{
    static void *b[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        b[i] = malloc(SIZE);
        if (!b[i])
            return 1;
        memset(b[i], i, SIZE);
    }
    for (int i = 0; i < BLOCKS; i++)
        free(b[i]);
    struct timespec rest = {0, 300 * 1000000L};
    nanosleep(&rest, NULL);
    return 0;
}
