/* mt_shapes.c — multi-threaded allocation shapes, for bench/mt_bench.py (issue 8).
 *
 *   mt_shapes SHAPE THREADS AMOUNT
 *
 * Each run prints one line of key=value pairs, e.g.
 *   shape=per-thread threads=2 seconds=0.500 ops=41234567 cpu=0.998 rate=82469134 unit=ops/s
 * (cpu: the process's user + system seconds, getrusage; ops per CPU second is the figure that a
 * loaded machine disturbs least, since a thread waiting for a core or a lock uses none)
 * `rate` is the figure of merit: higher is better except for the shapes whose unit is
 * seconds or ns/round (lower is better).  Exit status 0 on success, 2 on bad arguments,
 * 1 if a check of block contents failed (the program is also a correctness test).
 *
 * Shapes (AMOUNT is seconds of running for the first four, a count for the others):
 *   per-thread       every thread allocates, writes and frees its own blocks of 16-256 B,
 *                    keeping up to 256 live in its own array; rate: malloc+free pairs/s.
 *   cross-thread     a ring of THREADS threads: each allocates batches of 64 blocks (24-264 B:
 *                    two link words, then the sizes above), writes
 *                    them, hands each batch to the next thread and frees the batches handed to
 *                    it (with 1 thread the ring is the thread itself); rate: blocks/s.
 *   cross-thread-big the ring with blocks of 512 B - 4 KiB (the mid sizes, which an allocator
 *                    may serve from per-thread pages or from a shared heap: HC's generic
 *                    SMALL_MAX was 768 until issue 17's third pass, 4096 since).
 *   producer-consumer one thread allocates batches, THREADS-1 threads free them (with 1 thread
 *                    it does both in turn); rate: frees/s.
 *   mixed            AMOUNT operations in all (split over the threads) of malloc, realloc and
 *                    free on sizes 16 B - 4 KiB, up to 512 live blocks per thread; rate: seconds.
 *   false-share      threads take turns to allocate 64 blocks of 24 B each, one block per turn
 *                    (so a single heap hands out neighbours to different threads), then write
 *                    their own blocks AMOUNT rounds; rate: ns per round.  Also prints
 *                    shared=F, the fraction of the blocks that share a 64-byte cache line with
 *                    another thread's block: the allocator's part in false sharing, exact and
 *                    free of timing noise (the times show it only when the threads really run
 *                    at once, on idle cores).
 *   false-share-handoff the main thread allocates the blocks alternately for the threads; each
 *                    thread frees the ones it got and allocates as many again (an allocator
 *                    that reuses them at once keeps the neighbours), then writes as above.
 * Every shape creates THREADS worker threads, even for 1: the process is threaded throughout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define BATCH 64

static int nthreads;
static double amount;
static atomic_int stop_flag;
static atomic_int check_failed;

/* ---- helpers ---- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t next_random(uint64_t *state)  /* xorshift64* */
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A small size, 16-256 B, skewed towards the small end as real programs are. */
static size_t small_size(uint64_t *rng)
{
    uint64_t r = next_random(rng);
    return (r & 3) ? 16 + (r >> 8) % 64 : 16 + (r >> 8) % 241;
}

static void *alloc_filled(size_t size, unsigned char tag)
{
    unsigned char *p = malloc(size);
    if (!p) {
        fprintf(stderr, "mt_shapes: malloc(%zu) failed\n", size);
        exit(1);
    }
    memset(p, tag, size);
    return p;
}

static void check_byte(const void *p, size_t at, unsigned char tag)
{
    if (((const unsigned char *)p)[at] != tag)
        atomic_store(&check_failed, 1);
}

static void run_threads(void *(*body)(void *), void *args, size_t arg_size)
{
    pthread_t tids[MAX_THREADS];
    for (int i = 0; i < nthreads; i++) {
        int rc = pthread_create(&tids[i], NULL, body, (char *)args + i * arg_size);
        if (rc) {
            fprintf(stderr, "mt_shapes: pthread_create: %s\n", strerror(rc));
            exit(1);
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
}

/* Starts THREADS workers, lets them run AMOUNT seconds, stops and joins them. */
static double run_timed(void *(*body)(void *), void *args, size_t arg_size)
{
    pthread_t tids[MAX_THREADS];
    double t0 = now();
    for (int i = 0; i < nthreads; i++) {
        int rc = pthread_create(&tids[i], NULL, body, (char *)args + i * arg_size);
        if (rc) {
            fprintf(stderr, "mt_shapes: pthread_create: %s\n", strerror(rc));
            exit(1);
        }
    }
    struct timespec d = {(time_t)amount, (long)((amount - (time_t)amount) * 1e9)};
    while (nanosleep(&d, &d) == -1 && errno == EINTR)
        ;
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
    return now() - t0;
}

/* ---- a mutex queue of batches: a batch is a chain of blocks linked through their first word;
 *      batches are chained through their first block's second word (blocks are >= 16 B) ---- */

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t room;      /* signalled when the queue was taken from while a pusher waits */
    pthread_cond_t nonempty;  /* signalled on a push while a taker waits */
    void *head, *tail;
    int length;
    int room_waiters, empty_waiters;
    char pad[64];
};

/* The hand-off wakes a thread only when one is waiting: a waiting consumer once WAKE_AT batches
 * are queued, a waiting producer once the queue has drained to half (ROOM_AT).  A broadcast on
 * every push and every take made ~150,000 context switches a second at 4 threads on 2 cores
 * (half the process's CPU time in the kernel), and the shape measured the scheduler more than
 * the allocator. */
#define QUEUE_CAP 64
#define ROOM_AT (QUEUE_CAP / 2)
#define WAKE_AT 32

static void queue_init(struct queue *q)
{
    /* Adaptive: a thread that finds the lock taken spins briefly before it sleeps (the lock is
     * held for a few instructions). */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&q->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    pthread_cond_init(&q->room, NULL);
    pthread_cond_init(&q->nonempty, NULL);
    q->head = q->tail = NULL;
    q->length = 0;
    q->room_waiters = q->empty_waiters = 0;
}

static void **links(void *block) { return (void **)block; }

static void queue_push(struct queue *q, void *batch)
{
    links(batch)[1] = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail)
        links(q->tail)[1] = batch;
    else
        q->head = batch;
    q->tail = batch;
    q->length++;
    if (q->empty_waiters && q->length >= WAKE_AT)
        pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}

/* Takes every batch queued (a chain through word 1), or NULL. */
static void *queue_take_all(struct queue *q)
{
    pthread_mutex_lock(&q->lock);
    void *all = q->head;
    q->head = q->tail = NULL;
    q->length = 0;
    if (q->room_waiters)
        pthread_cond_broadcast(&q->room);
    pthread_mutex_unlock(&q->lock);
    return all;
}

/* A consumer's take: one batch, waiting while the queue is empty; NULL once stopped and empty. */
static void *queue_take_one(struct queue *q, atomic_int *stop)
{
    pthread_mutex_lock(&q->lock);
    while (!q->head && !atomic_load(stop)) {
        q->empty_waiters++;
        pthread_cond_wait(&q->nonempty, &q->lock);
        q->empty_waiters--;
    }
    void *batch = q->head;
    if (batch) {
        q->head = links(batch)[1];
        if (!q->head)
            q->tail = NULL;
        q->length--;
        links(batch)[1] = NULL;
        if (q->room_waiters && q->length <= ROOM_AT)
            pthread_cond_signal(&q->room);
    }
    pthread_mutex_unlock(&q->lock);
    return batch;
}

/* The producer's wait while the queue holds QUEUE_CAP batches. */
static void queue_wait_room(struct queue *q, atomic_int *stop)
{
    pthread_mutex_lock(&q->lock);
    if (q->length >= QUEUE_CAP && q->empty_waiters)
        pthread_cond_broadcast(&q->nonempty);
    while (q->length >= QUEUE_CAP && !atomic_load(stop)) {
        q->room_waiters++;
        pthread_cond_wait(&q->room, &q->lock);
        q->room_waiters--;
    }
    pthread_mutex_unlock(&q->lock);
}

/* Wakes every thread waiting on q (to see the stop flag). */
static void queue_wake_all(struct queue *q)
{
    pthread_mutex_lock(&q->lock);
    pthread_cond_broadcast(&q->nonempty);
    pthread_cond_broadcast(&q->room);
    pthread_mutex_unlock(&q->lock);
}

/* A batch of BATCH blocks of small sizes; each block's bytes from 16 on carry the tag. */
static int big_blocks;  /* the -big shapes: 512 B - 4 KiB instead */

static void *make_batch(uint64_t *rng, unsigned char tag)
{
    void *first = NULL;
    for (int i = 0; i < BATCH; i++) {
        size_t n = big_blocks ? 512 + next_random(rng) % 3585 : small_size(rng) + 8;
        void *b = alloc_filled(n, tag);  /* 24-264 B (or 512 B-4 KiB): links, then a tag */
        links(b)[0] = first;
        first = b;
    }
    return first;
}

/* Frees a chain of batches; returns the number of blocks freed. */
static long free_batches(void *batches, unsigned char tag)
{
    long n = 0;
    while (batches) {
        void *next_batch = links(batches)[1];
        void *b = batches;
        while (b) {
            void *next = links(b)[0];
            check_byte(b, 16, tag);  /* the first byte after the two link words */
            free(b);
            n++;
            b = next;
        }
        batches = next_batch;
    }
    return n;
}

/* ---- per-thread ---- */

struct worker {
    int id;
    long ops;
    double seconds;
    char pad[64];
};

#define LIVE 256

static void *per_thread_body(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = 0x9E3779B97F4A7C15ULL * (w->id + 1);
    void *live[LIVE] = {0};
    unsigned char tag = (unsigned char)(w->id + 1);
    long ops = 0;
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        for (int k = 0; k < 1024; k++) {
            unsigned slot = next_random(&rng) % LIVE;
            if (live[slot]) {
                check_byte(live[slot], 0, tag);
                free(live[slot]);
            }
            live[slot] = alloc_filled(small_size(&rng), tag);
        }
        ops += 1024;
    }
    for (int i = 0; i < LIVE; i++)
        free(live[i]);
    w->ops = ops;
    return NULL;
}

/* ---- cross-thread ring ---- */

static struct queue queues[MAX_THREADS];

static void *ring_body(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = 0xD1B54A32D192ED03ULL * (w->id + 1);
    struct queue *mine = &queues[w->id], *next = &queues[(w->id + 1) % nthreads];
    int from = (w->id + nthreads - 1) % nthreads;  /* whose batches arrive here */
    long freed = 0;
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        freed += free_batches(queue_take_all(mine), (unsigned char)(from + 1));
        void *batch = make_batch(&rng, (unsigned char)(w->id + 1));
        /* Bound the blocks in flight: while the next thread is 32 batches behind, wait for it
         * (it broadcasts when it takes them), freeing what arrives here meanwhile. */
        pthread_mutex_lock(&next->lock);
        while (next->length >= 32 && !atomic_load(&stop_flag)) {
            if (nthreads > 1 && mine->head) {
                pthread_mutex_unlock(&next->lock);
                freed += free_batches(queue_take_all(mine), (unsigned char)(from + 1));
                pthread_mutex_lock(&next->lock);
                continue;
            }
            struct timespec soon;
            clock_gettime(CLOCK_REALTIME, &soon);
            soon.tv_nsec += 1000000;  /* 1 ms: also wakes to see the stop flag */
            if (soon.tv_nsec >= 1000000000) {
                soon.tv_sec++;
                soon.tv_nsec -= 1000000000;
            }
            next->room_waiters++;
            pthread_cond_timedwait(&next->room, &next->lock, &soon);
            next->room_waiters--;
        }
        pthread_mutex_unlock(&next->lock);
        queue_push(next, batch);
    }
    w->ops = freed;
    return NULL;
}

/* ---- producer-consumer ---- */

static struct queue shared;

static void *producer_consumer_body(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = 0x8CB92BA72F3D8DD7ULL * (w->id + 1);
    long freed = 0;
    if (nthreads == 1) {  /* one thread: produce a batch, then free it */
        while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
            queue_push(&shared, make_batch(&rng, 1));
            freed += free_batches(queue_take_all(&shared), 1);
        }
    } else if (w->id == 0) {  /* the producer */
        while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
            void *batch = make_batch(&rng, 1);
            queue_wait_room(&shared, &stop_flag);
            queue_push(&shared, batch);
        }
        queue_wake_all(&shared);  /* wake the consumers to see the stop */
    } else {  /* a consumer: takes one batch at a time */
        void *batch;
        while ((batch = queue_take_one(&shared, &stop_flag)) != NULL)
            freed += free_batches(batch, 1);
    }
    w->ops = freed;
    return NULL;
}

/* ---- mixed malloc/realloc/free ---- */

#define MIXED_LIVE 512

static size_t mixed_size(uint64_t *rng)
{
    uint64_t r = next_random(rng);
    switch (r & 7) {
    case 0: return 16 + (r >> 8) % 4081;   /* up to 4 KiB */
    case 1: case 2: return 16 + (r >> 8) % 1009;
    default: return 16 + (r >> 8) % 241;
    }
}

static void *mixed_body(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = 0x94D049BB133111EBULL * (w->id + 1);
    void *live[MIXED_LIVE] = {0};
    size_t sizes[MIXED_LIVE] = {0};
    unsigned char tag = (unsigned char)(w->id + 1);
    long todo = (long)(amount / nthreads);
    double t0 = now();
    for (long i = 0; i < todo; i++) {
        unsigned slot = next_random(&rng) % MIXED_LIVE;
        if (!live[slot]) {
            sizes[slot] = mixed_size(&rng);
            live[slot] = alloc_filled(sizes[slot], tag);
        } else if (next_random(&rng) & 1) {
            size_t size = mixed_size(&rng);
            unsigned char *p = realloc(live[slot], size);
            if (!p) {
                fprintf(stderr, "mt_shapes: realloc(%zu) failed\n", size);
                exit(1);
            }
            check_byte(p, (size < sizes[slot] ? size : sizes[slot]) - 1, tag);
            if (size > sizes[slot])
                memset(p + sizes[slot], tag, size - sizes[slot]);
            live[slot] = p;
            sizes[slot] = size;
        } else {
            check_byte(live[slot], sizes[slot] - 1, tag);
            free(live[slot]);
            live[slot] = NULL;
        }
    }
    for (int i = 0; i < MIXED_LIVE; i++)
        free(live[i]);
    w->ops = todo;
    w->seconds = now() - t0;
    return NULL;
}

/* ---- false sharing ---- */

#define FS_BLOCKS 64
#define FS_SIZE 24

static atomic_long turn;
static pthread_barrier_t barrier;
static void *handed[MAX_THREADS][FS_BLOCKS];
static int handoff;
static void *owned[MAX_THREADS][FS_BLOCKS];

/* The fraction of all blocks that share a 64-byte cache line with another thread's block. */
static double shared_fraction(void)
{
    long shared = 0;
    for (int t = 0; t < nthreads; t++)
        for (int i = 0; i < FS_BLOCKS; i++) {
            uintptr_t first = (uintptr_t)owned[t][i] / 64;
            uintptr_t last = ((uintptr_t)owned[t][i] + FS_SIZE - 1) / 64;
            int found = 0;
            for (int u = 0; u < nthreads && !found; u++)
                for (int j = 0; u != t && j < FS_BLOCKS && !found; j++) {
                    uintptr_t f = (uintptr_t)owned[u][j] / 64;
                    uintptr_t l = ((uintptr_t)owned[u][j] + FS_SIZE - 1) / 64;
                    found = f <= last && first <= l;
                }
            shared += found;
        }
    return (double)shared / (nthreads * FS_BLOCKS);
}

static void write_rounds(struct worker *w, void **blocks)
{
    long rounds = (long)amount;
    for (int i = 0; i < FS_BLOCKS; i++)
        owned[w->id][i] = blocks[i];
    pthread_barrier_wait(&barrier);
    double t0 = now();
    for (long r = 0; r < rounds; r++)
        for (int i = 0; i < FS_BLOCKS; i++)
            ++*(volatile long *)blocks[i];
    w->seconds = now() - t0;
    pthread_barrier_wait(&barrier);  /* every thread has stopped writing; the blocks stay */
    for (int i = 0; i < FS_BLOCKS; i++)
        if (*(long *)blocks[i] != rounds)
            atomic_store(&check_failed, 1);
    w->ops = rounds;
}

static void *false_share_body(void *arg)
{
    struct worker *w = arg;
    void *blocks[FS_BLOCKS];
    if (handoff) {  /* free what the main thread gave us, allocate as many again */
        for (int i = 0; i < FS_BLOCKS; i++)
            free(handed[w->id][i]);
        for (int i = 0; i < FS_BLOCKS; i++)
            blocks[i] = calloc(1, FS_SIZE);
    } else {  /* take turns with the other threads, one block per turn */
        for (int i = 0; i < FS_BLOCKS; i++) {
            while (atomic_load(&turn) != (long)i * nthreads + w->id)
                sched_yield();
            blocks[i] = calloc(1, FS_SIZE);
            atomic_fetch_add(&turn, 1);
        }
    }
    for (int i = 0; i < FS_BLOCKS; i++)
        if (!blocks[i]) {
            fprintf(stderr, "mt_shapes: calloc failed\n");
            exit(1);
        }
    write_rounds(w, blocks);
    return NULL;
}

/* ---- main ---- */

static int usage(void)
{
    fprintf(stderr, "usage: mt_shapes per-thread|cross-thread|cross-thread-big|producer-consumer"
                    " THREADS SECONDS\n"
                    "       mt_shapes mixed THREADS OPERATIONS\n"
                    "       mt_shapes false-share|false-share-handoff THREADS ROUNDS\n"
                    "(THREADS 1-%d)\n", MAX_THREADS);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return usage();
    const char *shape = argv[1];
    char *end;
    nthreads = (int)strtol(argv[2], &end, 10);
    if (*end || nthreads < 1 || nthreads > MAX_THREADS)
        return usage();
    amount = strtod(argv[3], &end);
    if (*end || !(amount > 0))
        return usage();

    struct worker workers[MAX_THREADS];
    memset(workers, 0, sizeof workers);
    for (int i = 0; i < nthreads; i++)
        workers[i].id = i;
    double seconds;
    const char *unit;
    double rate;
    long ops = 0;
    double line_share = -1;  /* the false-sharing shapes' fraction of blocks in shared lines */

    if (!strcmp(shape, "per-thread") || !strcmp(shape, "cross-thread")
        || !strcmp(shape, "producer-consumer") || !strcmp(shape, "cross-thread-big")) {
        big_blocks = !strcmp(shape, "cross-thread-big");
        void *(*body)(void *) = !strcmp(shape, "per-thread") ? per_thread_body
                              : !strncmp(shape, "cross-thread", 12) ? ring_body
                              : producer_consumer_body;
        for (int i = 0; i < nthreads; i++)
            queue_init(&queues[i]);
        queue_init(&shared);
        seconds = run_timed(body, workers, sizeof workers[0]);
        for (int i = 0; i < nthreads; i++)
            ops += workers[i].ops;
        for (int i = 0; i < nthreads; i++)  /* leftovers in flight, not counted */
            free_batches(queue_take_all(&queues[i]),
                         (unsigned char)((i + nthreads - 1) % nthreads + 1));
        free_batches(queue_take_all(&shared), 1);
        unit = body == producer_consumer_body ? "frees/s" : body == ring_body ? "blocks/s"
                                                                               : "ops/s";
        rate = ops / seconds;
    } else if (!strcmp(shape, "mixed")) {
        double t0 = now();
        run_threads(mixed_body, workers, sizeof workers[0]);
        seconds = now() - t0;
        for (int i = 0; i < nthreads; i++)
            ops += workers[i].ops;
        unit = "seconds";
        rate = seconds;
    } else if (!strcmp(shape, "false-share") || !strcmp(shape, "false-share-handoff")) {
        handoff = shape[11] != '\0';
        pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
        if (handoff)
            for (int i = 0; i < FS_BLOCKS; i++)
                for (int t = 0; t < nthreads; t++)
                    handed[t][i] = alloc_filled(FS_SIZE, 0);
        run_threads(false_share_body, workers, sizeof workers[0]);
        seconds = 0;
        for (int i = 0; i < nthreads; i++)  /* the slowest thread's time */
            if (workers[i].seconds > seconds)
                seconds = workers[i].seconds;
        ops = workers[0].ops;
        unit = "ns/round";
        rate = seconds * 1e9 / amount;
        line_share = shared_fraction();  /* before the frees: the addresses are still live */
        for (int t = 0; t < nthreads; t++)
            for (int i = 0; i < FS_BLOCKS; i++)
                free(owned[t][i]);
    } else {
        return usage();
    }
    if (atomic_load(&check_failed)) {
        fprintf(stderr, "mt_shapes: %s: a block's contents changed under its owner\n", shape);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6
               + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    printf("shape=%s threads=%d seconds=%.4f ops=%ld cpu=%.4f", shape, nthreads, seconds, ops, cpu);
    if (line_share >= 0)
        printf(" shared=%.3f", line_share);
    printf(" rate=%.6g unit=%s\n", rate, unit);
    return 0;
}
