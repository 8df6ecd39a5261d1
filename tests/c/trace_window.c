/* trace_window: a program whose blocks span a tracing window (tests/test_trace_window.py).
 *
 *   trace_window PAUSE_MS [THREADS]
 *   trace_window wait [THREADS]     instead of each pause: print "pause" and wait for a line on
 *                                   stdin (the test sends the tracer's toggle signal meanwhile)
 *
 * Phase 1: 100 blocks A of sizes 1000+i, A[0..49] freed.  Pause.  Phase 2 (inside the window,
 * which begins during the pause): frees A[50..74], allocates B[0..49] of sizes 5000+i, frees
 * B[0..9], and (THREADS > 0) each of THREADS threads frees one A block and allocates 20 blocks
 * of sizes 20000+i.  Pause.  Phase 3 (after the window): frees A[75..99], allocates 30 blocks of
 * sizes 9000+i.  Nothing is freed at exit.  Each pause is preceded by calls that move no bytes
 * (malloc(0)/free pairs) so that every thread looks at the clock just after it.
 * The trace of the window must hold A[50..99] as live at its start, no 9000+ sizes, and end with
 * A[75..99] and B[10..49] (and the threads' blocks) live. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *volatile sink;

static void pause_ms(long ms)
{
    if (ms < 0) {                      /* "wait": the other side says when to go on */
        char line[16];
        printf("pause\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin))
            exit(3);
        return;
    }
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void zero_calls(int n)
{
    for (int i = 0; i < n; i++) {
        sink = malloc(0);
        free(sink);
    }
}

static void *A[100], *B[50], *C[30];

static void *worker(void *arg)
{
    intptr_t k = (intptr_t)arg;
    zero_calls(40);
    free(A[95 - k]);       /* a block of phase 1, freed inside the window by another thread */
    A[95 - k] = NULL;
    for (int i = 0; i < 20; i++)
        sink = malloc(20000 + (size_t)i);   /* kept */
    return NULL;
}

int main(int argc, char **argv)
{
    long pause = argc > 1 ? (strcmp(argv[1], "wait") == 0 ? -1 : atol(argv[1])) : 500;
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    if (threads > 4)
        threads = 4;
    for (int i = 0; i < 100; i++) {
        A[i] = malloc(1000 + (size_t)i);
        memset(A[i], 1, 1000 + (size_t)i);
    }
    for (int i = 0; i < 50; i++)
        free(A[i]);
    zero_calls(40);
    pause_ms(pause);
    zero_calls(40);
    for (int i = 50; i < 75; i++)
        free(A[i]);
    for (int i = 0; i < 50; i++)
        B[i] = malloc(5000 + (size_t)i);
    for (int i = 0; i < 10; i++)
        free(B[i]);
    pthread_t th[4];
    for (int k = 0; k < threads; k++)
        pthread_create(&th[k], NULL, worker, (void *)(intptr_t)k);
    for (int k = 0; k < threads; k++)
        pthread_join(th[k], NULL);
    zero_calls(40);
    pause_ms(pause);
    zero_calls(40);
    for (int i = 75; i < 100; i++)
        free(A[i]);       /* free(NULL) for the threads' ones: no event */
    for (int i = 0; i < 30; i++)
        C[i] = malloc(9000 + (size_t)i);
    printf("done\n");
    return 0;
}
