/* replay_malloc_api: data integrity under many sizes, alignments, threads and fork, for the
 * baselines of allocator/replay/ (Kingsley) run under LD_PRELOAD.  Prints "ok N" or FAIL lines.
 * Standard API only: the same binary passes on glibc. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
#define CHECK(c)                                                                               \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);                                \
            printf("replay_malloc_api: FAIL line %d: %s\n", __LINE__, #c);                     \
        }                                                                                      \
    } while (0)

#define SLOTS 512

/* Fill each block with a byte derived from its slot, check it before freeing or growing. */
static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    unsigned char *blk[SLOTS] = {0};
    size_t len[SLOTS] = {0};
    for (int i = 0; i < 100000; i++) {
        int s = (int)(rand_r(&seed) % SLOTS);
        unsigned char tag = (unsigned char)(s * 7 + (int)(uintptr_t)arg);
        if (blk[s]) {
            for (size_t j = 0; j < len[s]; j += 61)
                CHECK(blk[s][j] == tag);
        }
        unsigned r = rand_r(&seed), q = rand_r(&seed);
        size_t n = q % 16 == 0 ? q % 70000 : q % 300;
        switch (r % 4) {
        case 0:
            free(blk[s]);
            blk[s] = NULL, len[s] = 0;
            break;
        case 1: { /* realloc keeps the old contents */
            unsigned char *p = realloc(blk[s], n + 1);
            CHECK(p != NULL);
            memset(p, tag, n + 1);
            blk[s] = p, len[s] = n + 1;
            break;
        }
        case 2: {
            size_t a = (size_t)16 << (r % 6);
            void *p = NULL;
            CHECK(posix_memalign(&p, a, n) == 0 && ((uintptr_t)p & (a - 1)) == 0);
            CHECK(malloc_usable_size(p) >= n);
            free(blk[s]);
            blk[s] = p, len[s] = n;
            memset(p, tag, n);
            break;
        }
        default: {
            unsigned char *p = calloc(1, n);
            CHECK(p != NULL && ((uintptr_t)p & 15) == 0);
            for (size_t j = 0; j < n; j += 13)
                CHECK(p[j] == 0);
            free(blk[s]);
            blk[s] = p, len[s] = n;
            memset(p, tag, n);
        }
        }
    }
    for (int s = 0; s < SLOTS; s++)
        free(blk[s]);
    return NULL;
}

int main(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    /* fork while other threads allocate: the child must be able to allocate */
    pid_t pid = fork();
    if (pid == 0) {
        void *p = malloc(100);
        _exit(p ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    /* memalign rounds an alignment that is not a power of two up to one (glibc, HC) */
    for (size_t a = 3; a <= 5000; a = a * 3 + 1) {
        size_t up = 1;
        while (up < a)
            up <<= 1;
        unsigned char *p = memalign(a, 100);
        CHECK(p != NULL && ((uintptr_t)p & (up - 1)) == 0);
        if (p)
            memset(p, 1, 100);
        free(p);
    }
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
