/* mt_pair.c — the cost of one malloc(32)/free pair, for callgrind (issue 8).
 *
 *   valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=OUT mt_pair MODE PAIRS
 *
 * MODE says which other thread the process has while the pairs run:
 *   none      no thread was ever created (the single-threaded fast path);
 *   sleeping  a second thread exists and sleeps on a condition variable ("threads running");
 *   joined    a second thread was created, allocated once and was joined before the loop.
 * Collection is switched on just around the loop of PAIRS pairs (after a warm-up of the same
 * loop, so lazy binding and the first refill are not counted), so callgrind's total Ir divided
 * by PAIRS is the instructions per pair (the loop's own few instructions included).  Without
 * valgrind the client requests do nothing; the program prints one line either way:
 *   mode=sleeping pairs=100000 seconds=0.0031
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <valgrind/callgrind.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int done;

static void *sleeper(void *arg)
{
    free(malloc(32));  /* the thread allocates once, as any real thread does */
    pthread_mutex_lock(&lock);
    while (!done)
        pthread_cond_wait(&wake, &lock);
    pthread_mutex_unlock(&lock);
    return arg;
}

static void pairs(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = malloc(32);
        __asm__ volatile("" : : "r"(p) : "memory");  /* keep the pair from being optimized out */
        free(p);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "none") && strcmp(argv[1], "sleeping")
                      && strcmp(argv[1], "joined")) || atol(argv[2]) < 1) {
        fprintf(stderr, "usage: mt_pair none|sleeping|joined PAIRS\n");
        return 2;
    }
    long n = atol(argv[2]);
    pthread_t tid;
    if (strcmp(argv[1], "none")) {
        if (pthread_create(&tid, NULL, sleeper, NULL)) {
            fprintf(stderr, "mt_pair: pthread_create failed\n");
            return 1;
        }
        if (!strcmp(argv[1], "joined")) {
            pthread_mutex_lock(&lock);
            done = 1;
            pthread_cond_signal(&wake);
            pthread_mutex_unlock(&lock);
            pthread_join(tid, NULL);
        }
    }
    pairs(1000);  /* warm-up */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CALLGRIND_TOGGLE_COLLECT;
    pairs(n);
    CALLGRIND_TOGGLE_COLLECT;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!strcmp(argv[1], "sleeping")) {
        pthread_mutex_lock(&lock);
        done = 1;
        pthread_cond_signal(&wake);
        pthread_mutex_unlock(&lock);
        pthread_join(tid, NULL);
    }
    printf("mode=%s pairs=%ld seconds=%.6f\n", argv[1], n,
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return 0;
}
