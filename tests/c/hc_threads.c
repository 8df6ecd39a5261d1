/* hc_threads: the allocator under threads and fork.
 *
 * Usage: hc_threads ring [ITEMS]   8 threads in a ring: each allocates blocks and hands them to
 *                                  the next thread, which checks and frees them (so nearly every
 *                                  free happens on a thread other than the allocating one), while
 *                                  also churning its own short-lived blocks
 *        hc_threads fork [FORKS]   worker threads allocate and free without pause while the main
 *                                  thread forks; each child must be able to malloc and free
 *                                  (a lock held across fork would hang it: an alarm turns a hang
 *                                  into a failure).  The workers and the main thread also trade
 *                                  blocks through shared slots, each freeing one another thread
 *                                  allocated, so frees of other threads' blocks are under way
 *                                  at every fork and the forking thread holds some
 *
 *        hc_threads short [THREADS]  THREADS short-lived threads, four at a time, each allocating
 *                                  (and freeing some, leaving others cached) before it exits;
 *                                  prints HC's heap size after the first tenth and at the end, so
 *                                  a cache leaked per dead thread shows as growth
 *
 * Standard API and pthreads only: runs against glibc as is, against HC under LD_PRELOAD.
 * Prints one "ok ..." line and exits 0, or "hc_threads: FAIL ..." and exits 1.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS 8
#define QCAP 256

static void die(const char *what)
{
    printf("hc_threads: FAIL: %s\n", what);
    fflush(stdout);
    _exit(1);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

/* Mostly small, some medium and big blocks, rarely one above MMAP_THRESHOLD (§3.2). */
static size_t pick_size(uint64_t *s)
{
    unsigned r = rnd(s) % 1000;
    if (r < 750)
        return 1 + rnd(s) % 128;
    if (r < 950)
        return 129 + rnd(s) % 900;
    if (r < 998)
        return 1025 + rnd(s) % 30000;
    return 100 * 1024 + rnd(s) % (400 * 1024);
}

/* The block's first and last bytes and a word at every 64 bytes carry its tag. */
static void stamp(unsigned char *p, size_t n, uint64_t tag)
{
    /* HC_STRESS_ALIGN8 (FIT_ALIGN8's tables): a size not a multiple of 16 may be 8-aligned */
    static int align8 = -1;
    if (align8 < 0)
        align8 = getenv("HC_STRESS_ALIGN8") != NULL;
    if ((uintptr_t)p % (align8 && n % 16 ? 8 : 16))
        die("block not 16-byte aligned");
    if (malloc_usable_size(p) < n)
        die("malloc_usable_size < request");
    for (size_t i = 0; i + 8 < n; i += 64)
        memcpy(p + i, &tag, 8);
    p[n - 1] = (unsigned char)tag;
}

static void verify(const unsigned char *p, size_t n, uint64_t tag)
{
    for (size_t i = 0; i + 8 < n; i += 64)
        if (memcmp(p + i, &tag, 8) != 0)
            die("block contents changed between threads");
    if (p[n - 1] != (unsigned char)tag)
        die("block's last byte changed between threads");
}

/* ---- ring mode ---- */

struct item {
    unsigned char *p;
    size_t n;
    uint64_t tag;
};

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct item items[QCAP];
    unsigned head, count, closed;
};

static struct queue queues[NTHREADS];
static unsigned long items_per_thread = 100000;
static atomic_ulong moved;

static void push(struct queue *q, struct item it)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == QCAP)
        pthread_cond_wait(&q->cond, &q->lock);
    q->items[(q->head + q->count++) % QCAP] = it;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

/* Take one item; returns 0 once the queue is closed and empty (or at once if it is empty and
 * `wait` is 0). */
static int pop(struct queue *q, struct item *out, int wait)
{
    pthread_mutex_lock(&q->lock);
    while (wait && q->count == 0 && !q->closed)
        pthread_cond_wait(&q->cond, &q->lock);
    if (q->count == 0) {
        pthread_mutex_unlock(&q->lock);
        return 0;
    }
    *out = q->items[q->head];
    q->head = (q->head + 1) % QCAP;
    q->count--;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
    return 1;
}

static void consume(const struct item *it)
{
    verify(it->p, it->n, it->tag);
    free(it->p);
    atomic_fetch_add(&moved, 1);
}

static void *ring_worker(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    uint64_t seed = 0x1234567ULL * (me + 1);
    struct queue *mine = &queues[me], *next = &queues[(me + 1) % NTHREADS];
    unsigned char *local[16] = {0};
    size_t local_n[16] = {0};
    for (unsigned long i = 0; i < items_per_thread; i++) {
        struct item it = {.n = pick_size(&seed), .tag = rnd(&seed)};
        it.p = malloc(it.n);
        if (!it.p)
            die("malloc returned NULL");
        stamp(it.p, it.n, it.tag);
        /* Free some of what the previous thread sent: frees on a thread other than the one that
         * allocated, the case a per-thread design would get wrong. */
        struct item got;
        for (int k = 0; k < 4 && pop(mine, &got, 0); k++)
            consume(&got);
        push(next, it);
        /* Thread-local churn: short-lived blocks reused at once (the quick-list case, §3.10). */
        unsigned k = rnd(&seed) % 16;
        if (local[k]) {
            verify(local[k], local_n[k], (uint64_t)k * 0x0101010101010101ULL ^ me);
            free(local[k]);
        }
        local_n[k] = 1 + rnd(&seed) % 256;
        local[k] = rnd(&seed) % 2 ? malloc(local_n[k]) : calloc(1, local_n[k]);
        if (!local[k])
            die("malloc returned NULL");
        stamp(local[k], local_n[k], (uint64_t)k * 0x0101010101010101ULL ^ me);
    }
    for (unsigned k = 0; k < 16; k++)
        free(local[k]);
    return NULL;
}

static void *ring_consumer_tail(void *arg)
{
    struct queue *q = arg;
    struct item it;
    while (pop(q, &it, 1))
        consume(&it);
    return NULL;
}

static int ring(void)
{
    pthread_t t[NTHREADS], tail[NTHREADS];
    for (unsigned i = 0; i < NTHREADS; i++) {
        pthread_mutex_init(&queues[i].lock, NULL);
        pthread_cond_init(&queues[i].cond, NULL);
    }
    for (unsigned i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], NULL, ring_worker, (void *)(uintptr_t)i))
            die("pthread_create");
    /* Once producing is under way, a consumer per queue takes what the workers leave. */
    for (unsigned i = 0; i < NTHREADS; i++)
        if (pthread_create(&tail[i], NULL, ring_consumer_tail, &queues[i]))
            die("pthread_create");
    for (unsigned i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (unsigned i = 0; i < NTHREADS; i++) {
        pthread_mutex_lock(&queues[i].lock);
        queues[i].closed = 1;
        pthread_cond_broadcast(&queues[i].cond);
        pthread_mutex_unlock(&queues[i].lock);
    }
    for (unsigned i = 0; i < NTHREADS; i++)
        pthread_join(tail[i], NULL);
    unsigned long want = items_per_thread * NTHREADS;
    if (atomic_load(&moved) != want) {
        printf("hc_threads: FAIL: %lu of %lu blocks came through the ring\n",
               (unsigned long)atomic_load(&moved), want);
        return 1;
    }
    printf("ok ring threads=%d blocks=%lu\n", NTHREADS, want);
    return 0;
}

/* ---- fork mode ---- */

static atomic_int stop;

/* Blocks any thread may free: a trade puts a new block into a slot and frees what it held. */
#define TRADE_SLOTS 64
static void *_Atomic trade_slot[TRADE_SLOTS];

static void trade(uint64_t *seed)
{
    size_t n = 256 + rnd(seed) % 4000;  /* the sizes a freeing thread may keep (REMOTE_KEEP) */
    unsigned char *b = malloc(n);
    if (!b)
        die("malloc returned NULL");
    memset(b, 0x5a, n);
    unsigned char *old = atomic_exchange(&trade_slot[rnd(seed) % TRADE_SLOTS], b);
    if (old && old[0] != 0x5a)
        die("a traded block changed");
    free(old);
}

static void *churn(void *arg)
{
    uint64_t seed = 0xabcdefULL + (uintptr_t)arg;
    unsigned char *held[64] = {0};
    size_t held_n[64] = {0};
    while (!atomic_load(&stop)) {
        trade(&seed);
        unsigned k = rnd(&seed) % 64;
        if (held[k]) {
            verify(held[k], held_n[k], k);
            free(held[k]);
        }
        held_n[k] = pick_size(&seed);
        held[k] = malloc(held_n[k]);
        if (!held[k])
            die("malloc returned NULL");
        stamp(held[k], held_n[k], k);
    }
    for (unsigned k = 0; k < 64; k++)
        free(held[k]);
    return NULL;
}

static void child_work(void)
{
    alarm(10);  /* a deadlock inherited from the parent shows up as SIGALRM, not a hang */
    uint64_t seed = (uint64_t)getpid();
    void *p[200];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 200; i++) {
            size_t n = pick_size(&seed);
            p[i] = malloc(n);
            if (!p[i])
                die("child: malloc returned NULL");
            stamp(p[i], n, (uint64_t)i);
        }
        for (int i = 0; i < 200; i++)
            free(p[i]);
    }
    for (int k = 0; k < TRADE_SLOTS; k++)  /* blocks of threads the child does not have */
        free(atomic_exchange(&trade_slot[k], NULL));
    for (int k = 0; k < 200; k++)
        trade(&seed);
    char *s = strdup("child can allocate");
    if (!s)
        die("child: strdup failed");
    free(s);
    _exit(0);
}

static int forks(int n)
{
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, churn, (void *)i))
            die("pthread_create");
    int failed = 0;
    uint64_t seed = 0x1234567ULL;
    for (int i = 0; i < n; i++) {
        usleep(2000);  /* let the workers be in the middle of something */
        for (int k = 0; k < 16; k++)
            trade(&seed);
        void *mine = malloc(1000);  /* the parent holds memory across the fork too */
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0)
            child_work();
        int status;
        if (waitpid(pid, &status, 0) != pid)
            die("waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("hc_threads: FAIL: child %d %s %d\n", i,
                   WIFSIGNALED(status) ? "killed by signal" : "exited with",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            failed = 1;
        }
        free(mine);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int k = 0; k < TRADE_SLOTS; k++)
        free(atomic_exchange(&trade_slot[k], NULL));
    if (failed)
        return 1;
    printf("ok fork children=%d\n", n);
    return 0;
}

/* ---- short mode ---- */

/* HC's heap_bytes through hc_stats_get (found at run time, so the program stays allocator
 * neutral); 0 under another allocator.  The struct starts with version, monitor, allocs_current,
 * allocs_max, allocs_total, bytes_current, bytes_max, bytes_total, frees, reallocs, footprint,
 * heap_bytes (allocator/hc/hc_stats.h). */
static unsigned long long heap_bytes(void)
{
    int (*get)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "hc_stats_get");
    unsigned long long st[64] = {0};
    if (!get || get(st) != 0)
        return 0;
    return st[11];
}

static void *short_lived(void *arg)
{
    uint64_t seed = 0x5eedULL + (uintptr_t)arg;
    void *p[100];
    for (int i = 0; i < 100; i++) {
        size_t n = 1 + rnd(&seed) % 1000;
        if (!(p[i] = malloc(n)))
            die("malloc returned NULL");
        stamp(p[i], n, (uint64_t)i);
    }
    for (int i = 0; i < 100; i += 2)  /* these sit in the thread's cache when it exits */
        free(p[i]);
    for (int i = 1; i < 100; i += 2)
        free(p[i]);
    for (int i = 0; i < 50; i++)  /* and some taken back out of it */
        free(malloc(1 + rnd(&seed) % 1000));
    return NULL;
}

static int short_threads(unsigned long n)
{
    unsigned long long early = 0;
    for (unsigned long i = 0; i < n; i += 4) {
        pthread_t t[4];
        for (uintptr_t k = 0; k < 4; k++)
            if (pthread_create(&t[k], NULL, short_lived, (void *)(i + k)))
                die("pthread_create");
        for (int k = 0; k < 4; k++)
            pthread_join(t[k], NULL);
        /* the early figure is the largest heap seen over the first tenth: with small pages the
         * heap at one instant depends on how many empty pages the purge has given back yet */
        if (i < n / 10) {
            unsigned long long h = heap_bytes();
            early = h > early ? h : early;
        }
    }
    printf("ok short threads=%lu heap_early=%llu heap_end=%llu\n", n, early, heap_bytes());
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && strcmp(argv[1], "ring") == 0) {
        if (argc > 2)
            items_per_thread = strtoul(argv[2], NULL, 0);
        return ring();
    }
    if (argc > 1 && strcmp(argv[1], "fork") == 0)
        return forks(argc > 2 ? atoi(argv[2]) : 30);
    if (argc > 1 && strcmp(argv[1], "short") == 0)
        return short_threads(argc > 2 ? strtoul(argv[2], NULL, 0) : 10000);
    fprintf(stderr, "usage: hc_threads ring [ITEMS] | fork [FORKS] | short [THREADS]\n");
    return 2;
}
