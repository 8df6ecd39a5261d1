/* pair_loop: N malloc/free pairs of SIZE bytes per thread, for callgrind (bench/small_pages.py).
 * Each thread keeps 64 blocks live and replaces one per pair (free the oldest, malloc a new
 * one), so the pair is a real free-list pop and push, not a block handed straight back.
 * With CROSS, thread k frees the blocks thread k+1 allocated (blocks handed over a ring).
 *   usage: pair_loop N SIZE [THREADS [CROSS]] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long n_pairs;
static size_t size;
static int cross;

#define LIVE 64

static void *run(void *arg)
{
    (void)arg;
    void *live[LIVE] = { 0 };
    for (long i = 0; i < n_pairs; i++) {
        unsigned k = (unsigned)(i % LIVE);
        free(live[k]);
        live[k] = malloc(size);
        if (!live[k])
            exit(1);
        *(volatile char *)live[k] = 1;
    }
    for (unsigned k = 0; k < LIVE; k++)
        free(live[k]);
    return NULL;
}

/* CROSS: a producer allocates into a ring, consumers free from it (under a lock: the lock is
 * the same for every allocator). */
#define RING 1024
static void *ring[RING];
static long head, tail, produced_all;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *consumer(void *arg)
{
    (void)arg;
    for (;;) {
        void *p = NULL;
        int done;
        pthread_mutex_lock(&mu);
        if (tail < head)
            p = ring[tail++ % RING];
        done = produced_all && tail == head;
        pthread_mutex_unlock(&mu);
        if (p)
            free(p);
        else if (done)
            return NULL;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    n_pairs = atol(argv[1]);
    size = (size_t)atol(argv[2]);
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    cross = argc > 4 && atoi(argv[4]);
    pthread_t t[16];
    if (threads > 16)
        threads = 16;
    if (!cross) {
        for (int i = 1; i < threads; i++)
            pthread_create(&t[i], NULL, run, NULL);
        run(NULL);
        for (int i = 1; i < threads; i++)
            pthread_join(t[i], NULL);
        return 0;
    }
    for (int i = 1; i < threads; i++)
        pthread_create(&t[i], NULL, consumer, NULL);
    for (long i = 0; i < n_pairs; i++) {
        void *p = malloc(size);
        *(volatile char *)p = 1;
        for (;;) {
            pthread_mutex_lock(&mu);
            if (head - tail < RING) {
                ring[head++ % RING] = p;
                pthread_mutex_unlock(&mu);
                break;
            }
            pthread_mutex_unlock(&mu);
        }
    }
    pthread_mutex_lock(&mu);
    produced_all = 1;
    pthread_mutex_unlock(&mu);
    for (int i = 1; i < threads; i++)
        pthread_join(t[i], NULL);
    return 0;
}
