/* replay_threads: a small threaded program to trace and replay on threads.
 *
 * Usage: replay_threads [ROUNDS]
 * 4 threads in a ring.  Each round a thread allocates a batch of blocks of mixed sizes, hands
 * the batch to the next thread through a one-slot mailbox, takes the previous thread's batch,
 * grows half of those blocks with realloc and frees all of them: nearly every free and realloc
 * is of a block another thread allocated.  Each thread also churns short-lived blocks of its
 * own.  Every thread makes the same calls on every run, so a trace's call count is fixed.
 * Prints "ok CALLS" and exits 0.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 4
#define BATCH 64

struct mailbox {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    void **batch; /* NULL: empty */
};

static struct mailbox box[NTHREADS];
static long rounds = 200;
/* keeps the compiler from folding a malloc/free pair away; one per thread, or one thread would
 * free the block another just stored there */
static _Thread_local void *volatile sink;

static void put(struct mailbox *m, void **batch)
{
    pthread_mutex_lock(&m->lock);
    while (m->batch)
        pthread_cond_wait(&m->changed, &m->lock);
    m->batch = batch;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
}

static void **take(struct mailbox *m)
{
    pthread_mutex_lock(&m->lock);
    while (!m->batch)
        pthread_cond_wait(&m->changed, &m->lock);
    void **b = m->batch;
    m->batch = NULL;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    return b;
}

static void *thread_main(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    uint32_t seed = 2654435761u * (me + 1);
    for (long r = 0; r < rounds; r++) {
        void **batch = malloc(BATCH * sizeof *batch);
        for (int i = 0; i < BATCH; i++) {
            seed = seed * 1103515245u + 12345u;
            size_t n = 16 + (seed >> 16) % (i % 8 == 0 ? 4000 : 200);
            batch[i] = malloc(n);
            memset(batch[i], (int)me, n < 64 ? n : 64);
        }
        put(&box[(me + 1) % NTHREADS], batch);
        void **got = take(&box[me]);
        for (int i = 0; i < BATCH; i++) {
            if (i % 2) {
                void *p = realloc(got[i], 300 + (size_t)i * 8);
                if (!p)
                    abort();
                got[i] = p;
            }
            free(got[i]);
        }
        free(got);
        for (int i = 0; i < 16; i++) { /* own short-lived blocks */
            sink = malloc(24 + (size_t)i * 16);
            free(sink);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = strtol(argv[1], NULL, 10);
    for (int i = 0; i < NTHREADS; i++) {
        pthread_mutex_init(&box[i].lock, NULL);
        pthread_cond_init(&box[i].changed, NULL);
    }
    char *mine = malloc(100); /* the main thread allocates first: recorded thread 0 */
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_create(&th[i], NULL, thread_main, (void *)(uintptr_t)i))
            return 1;
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    free(mine);
    /* per thread and round: batch array + BATCH mallocs, BATCH/2 reallocs, BATCH + 1 frees,
     * 16 churn pairs */
    long calls = 2 + (long)NTHREADS * rounds * (1 + BATCH + BATCH / 2 + BATCH + 1 + 32);
    printf("ok %ld\n", calls);
    return 0;
}
