/* trace_crash: programs that end badly, for the tracer's crash and exit paths (issue 11).
 *
 * Usage: trace_crash segv N        N mallocs (kept), then a NULL dereference (SIGSEGV)
 *        trace_crash abort N       N mallocs, then abort() (SIGABRT)
 *        trace_crash overflow N    N mallocs, then unbounded recursion (SIGSEGV on a full stack)
 *        trace_crash threads N     4 threads make N mallocs each and stay blocked; then exit(0)
 *        trace_crash threads-segv N  the same, then a NULL dereference
 *        trace_crash handler N     N mallocs; the program's own SIGSEGV handler prints
 *                                  "handler ran", resets SIGSEGV to default and re-raises it
 *
 * Each mode prints "ready" on stdout (flushed) before it ends the process. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NTHREADS 4

static long n_allocs;
static pthread_barrier_t ready;

static void *volatile sink;

static void allocate(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = malloc(16 + (size_t)(i % 200));
        sink = p;                       /* kept: the trace's live set grows to n blocks */
    }
}

static void *worker(void *arg)
{
    (void)arg;
    allocate(n_allocs);
    pthread_barrier_wait(&ready);
    for (;;)
        pause();                        /* still running when the process ends */
    return NULL;
}

static void on_segv(int sig)
{
    static const char msg[] = "handler ran\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(3);
    signal(sig, SIG_DFL);
    raise(sig);
}

#pragma GCC diagnostic ignored "-Winfinite-recursion"
static int recurse(volatile char *up)
{
    volatile char frame[1024];
    frame[0] = up ? up[0] : 1;
    return recurse(frame) + frame[1023];
}

static void crash(void)
{
    /* both volatile: the compiler can neither see the pointer is NULL nor drop the store */
    volatile int *volatile nowhere = NULL;
    *nowhere = 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: trace_crash MODE N\n");
        return 2;
    }
    const char *mode = argv[1];
    n_allocs = atol(argv[2]);
    if (strncmp(mode, "threads", 7) == 0) {
        pthread_t t[NTHREADS];
        pthread_barrier_init(&ready, NULL, NTHREADS + 1);
        for (int i = 0; i < NTHREADS; i++)
            pthread_create(&t[i], NULL, worker, NULL);
        pthread_barrier_wait(&ready);
    } else {
        allocate(n_allocs);
    }
    if (strcmp(mode, "handler") == 0)
        signal(SIGSEGV, on_segv);
    puts("ready");
    fflush(stdout);
    if (strcmp(mode, "segv") == 0 || strcmp(mode, "threads-segv") == 0 ||
        strcmp(mode, "handler") == 0)
        crash();
    else if (strcmp(mode, "abort") == 0)
        abort();
    else if (strcmp(mode, "overflow") == 0)
        return recurse(NULL);
    else if (strcmp(mode, "threads") == 0)
        exit(0);
    fprintf(stderr, "trace_crash: unknown mode %s\n", mode);
    return 2;
}
