/* hc_pages: HC's small blocks on pages owned by a thread (allocator/hc/hc_page.c, SMALL_MAX).
 *
 * Usage: hc_pages sizes MAX           every request size 0..MAX+64: usable size, alignment, calloc
 *                                     of dirty memory, realloc across sizes (contents kept), the
 *                                     memalign family at 32..512; prints the largest waste
 *                                     (unused bytes / request) of the requests from 256 to MAX
 *        hc_pages prodcons MS THREADS one producer allocating, THREADS-1 consumers freeing, for
 *                                     MS milliseconds; resident memory sampled, and the peak of the
 *                                     second half must stay near the first half's
 *        hc_pages handback ROUNDS THREADS  the main thread allocates 4096 blocks of 8-500 B a round
 *                                     and deals them to THREADS consumers, which free them (every
 *                                     free a remote one); the owner must get its blocks back:
 *                                     after ROUNDS rounds its pages in use are no more than after
 *                                     the first round plus one per size class (32), and once the
 *                                     consumers are done and malloc_trim ran, the live blocks are
 *                                     the ones live before the first round (none lost)
 *        hc_pages orphans MS          a thread allocates 4096 small blocks and exits; the main
 *                                     thread then frees them all (onto the orphaned pages' atomic
 *                                     lists) and waits: within MS milliseconds every page must be
 *                                     empty (the purge thread sweeps the orphans), with no further
 *                                     call to the allocator from the program
 *        hc_pages short THREADS       THREADS short-lived threads (four at a time) that allocate
 *                                     small blocks, free half and leave half for the main thread
 *                                     to free after they exited; HC's small pages must not grow
 *                                     with the number of threads (at most 384 pages)
 *        hc_pages doublefree [SIZE]   frees a block of SIZE bytes (32) twice, another freed
 *                                     between (the allocator must abort): a class page's block,
 *                                     or a run's with MID_RUNS below SIZE
 *        hc_pages misaligned          frees a pointer 8 bytes into a small block (must abort)
 *        hc_pages keep SIZE N         the main thread allocates N blocks of SIZE bytes; another
 *                                     thread (on the pages: it allocated before) frees them all,
 *                                     then allocates N blocks of SIZE and frees them, and exits;
 *                                     then the main thread calls malloc_trim; prints HC's
 *                                     counts of blocks kept (REMOTE_KEEP), batches pushed
 *                                     (REMOTE_BATCH), lists taken back by the owner and the
 *                                     blocks on them, and how many of the thread's N
 *                                     allocations were the main thread's blocks
 *        hc_pages keepdouble          another thread frees a 1000-byte block of the main thread
 *                                     twice (the allocator must abort)
 *        hc_pages regions MIB         the process's address space (VmSize, MiB) is printed, then
 *                                     MIB MiB of 64-byte blocks are allocated, written, each
 *                                     checked to be a page block (usable size 64) when pages
 *                                     are on -- past the first region of pages when MIB > 64 --
 *                                     and freed
 *
 * Standard API and pthreads: runs against glibc as is.  HC's statistics through hc_stats_get
 * (looked up at run time; 0 under another allocator).
 * Prints one "ok ..." line and exits 0, or "hc_pages: FAIL ..." and exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hc_stats.h"
#include "proc.h"

static void die(const char *what, size_t n)
{
    printf("hc_pages: FAIL: %s (n=%zu)\n", what, n);
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

static int stats(struct hc_stats *st)
{
    int (*get)(struct hc_stats *) = (int (*)(struct hc_stats *))dlsym(RTLD_DEFAULT, "hc_stats_get");
    memset(st, 0, sizeof *st);
    return get && get(st) == 0;
}

/* ---- sizes ---- */

static int sizes(size_t max)
{
    double worst = 0;
    for (size_t n = 0; n <= max + 64; n++) {
        unsigned char *p = malloc(n);
        if (!p)
            die("malloc returned NULL", n);
        size_t u = malloc_usable_size(p);
        if (u < n)
            die("usable size below the request", n);
        if (n >= 16 && ((uintptr_t)p & 15))
            die("not 16-byte aligned", n);
        if (n >= 256 && n <= max && (double)(u - n) / (double)n > worst)
            worst = (double)(u - n) / (double)n;
        memset(p, 0xa5, u);
        free(p);
        /* calloc after dirty memory of the same size was freed */
        unsigned char *z = calloc(1, n);
        if (!z)
            die("calloc returned NULL", n);
        for (size_t i = 0; i < n; i++)
            if (z[i])
                die("calloc: memory not zeroed", n);
        memset(z, 0x5a, n);
        /* realloc to a size on the other side, and back */
        size_t m = n * 3 + 100;
        unsigned char *r = realloc(z, m);
        if (!r)
            die("realloc returned NULL", m);
        for (size_t i = 0; i < n; i++)
            if (r[i] != 0x5a)
                die("realloc did not keep the contents (up)", n);
        memset(r, 0x3c, m);
        r = realloc(r, n ? n : 1);
        for (size_t i = 0; i < n; i++)
            if (r[i] != 0x3c)
                die("realloc did not keep the contents (down)", n);
        free(r);
    }
    for (size_t a = 32; a <= 512; a *= 2)
        for (size_t n = 1; n <= max + 64; n += 7) {
            void *p = NULL;
            if (posix_memalign(&p, a, n) || !p || ((uintptr_t)p & (a - 1)))
                die("posix_memalign: not aligned", n);
            if (malloc_usable_size(p) < n)
                die("posix_memalign: usable size below the request", n);
            memset(p, 1, n);
            void *q = aligned_alloc(a, (n + a - 1) / a * a);
            if (!q || ((uintptr_t)q & (a - 1)))
                die("aligned_alloc: not aligned", n);
            free(p);
            free(q);
        }
    struct hc_stats st;
    stats(&st);
    printf("ok sizes max=%zu worst_waste=%.3f small_pages=%llu\n", max, worst,
           (unsigned long long)(st.small_pages > 0));
    return 0;
}

/* ---- producer / consumers ---- */

#define QCAP 4096
static void *_Atomic queue[QCAP];
static atomic_size_t q_head, q_tail; /* producer writes head, consumers take from tail */
static atomic_int stop;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *consumer(void *arg)
{
    (void)arg;
    size_t freed = 0;
    while (!atomic_load(&stop) || atomic_load(&q_tail) != atomic_load(&q_head)) {
        void *p = NULL;
        pthread_mutex_lock(&q_lock);
        size_t t = atomic_load(&q_tail);
        if (t != atomic_load(&q_head)) {
            p = atomic_load(&queue[t % QCAP]);
            atomic_store(&q_tail, t + 1);
        }
        pthread_mutex_unlock(&q_lock);
        if (p) {
            unsigned char *b = p;
            if (b[0] != (unsigned char)(uintptr_t)b)
                die("consumer: block contents changed", 0);
            free(p);
            freed++;
        } else {
            sched_yield();
        }
    }
    return (void *)freed;
}

static int prodcons(long ms, int threads)
{
    pthread_t t[16];
    if (threads < 2 || threads > 16)
        die("THREADS must be 2..16", (size_t)threads);
    for (int i = 0; i < threads - 1; i++)
        if (pthread_create(&t[i], NULL, consumer, NULL))
            die("pthread_create", 0);
    uint64_t seed = 99;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long first = 0, second = 0;
    size_t made = 0;
    for (;;) {
        if ((made & 1023) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            long el = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
            if (el >= ms)
                break;
            long r = rss_kb();
            if (el < ms / 2) {
                if (r > first)
                    first = r;
            } else if (r > second) {
                second = r;
            }
        }
        while (atomic_load(&q_head) - atomic_load(&q_tail) >= QCAP)
            sched_yield();
        size_t n = 8 + rnd(&seed) % 500;
        unsigned char *p = malloc(n);
        if (!p)
            die("malloc returned NULL", n);
        p[0] = (unsigned char)(uintptr_t)p;
        size_t h = atomic_load(&q_head);
        atomic_store(&queue[h % QCAP], p);
        atomic_store(&q_head, h + 1);
        made++;
    }
    atomic_store(&stop, 1);
    size_t freed = 0;
    for (int i = 0; i < threads - 1; i++) {
        void *f;
        pthread_join(t[i], &f);
        freed += (size_t)f;
    }
    if (freed != made)
        die("blocks lost between producer and consumers", made - freed);
    /* Bounded: the second half's peak within 25 % (+4 MiB) of the first half's. */
    if (second > first + first / 4 + 4096)
        die("resident memory kept growing", (size_t)(second - first));
    printf("ok prodcons blocks=%s\n", made > 1000 ? "many" : "few");
    fprintf(stderr, "prodcons: %zu blocks, peak RSS first half %ld KiB, second half %ld KiB\n",
            made, first, second);
    return 0;
}

/* ---- hand-back: every block freed by another thread, in rounds ---- */

#define HB_BLOCKS 4096
static void *hb_blocks[HB_BLOCKS];
static int hb_threads;
static pthread_barrier_t hb_start, hb_done;
static atomic_int hb_stop;

static void *hb_consumer(void *arg)
{
    size_t k = (size_t)(uintptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&hb_start);
        if (atomic_load(&hb_stop))
            return NULL;
        for (size_t i = k; i < HB_BLOCKS; i += (size_t)hb_threads) {
            unsigned char *b = hb_blocks[i];
            if (b[0] != (unsigned char)(uintptr_t)b)
                die("consumer: block contents changed", i);
            free(b);
        }
        pthread_barrier_wait(&hb_done);
    }
}

static int handback(long rounds, int threads)
{
    pthread_t t[16];
    struct hc_stats st;
    if (threads < 1 || threads > 16 || rounds < 2)
        die("THREADS must be 1..16 and ROUNDS at least 2", (size_t)threads);
    hb_threads = threads;
    pthread_barrier_init(&hb_start, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&hb_done, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, hb_consumer, (void *)(uintptr_t)i))
            die("pthread_create", 0);
    stats(&st); /* the look-up's own allocations, if any, before the baseline */
    int have = stats(&st);
    uint64_t live0 = st.allocs_current, first = 0;
    uint64_t seed = 7;
    for (long r = 0; r < rounds; r++) {
        for (size_t i = 0; i < HB_BLOCKS; i++) {
            size_t n = 8 + rnd(&seed) % 493;
            unsigned char *p = malloc(n);
            if (!p)
                die("malloc returned NULL", n);
            p[0] = (unsigned char)(uintptr_t)p;
            hb_blocks[i] = p;
        }
        pthread_barrier_wait(&hb_start);
        pthread_barrier_wait(&hb_done);
        if (r == 0 && have) {
            stats(&st);
            first = st.small_pages - st.small_pages_empty;
        }
    }
    stats(&st);
    uint64_t last = st.small_pages - st.small_pages_empty;
    if (have && last > first + 32)  /* 32: more than the classes 8-500 B fall in (27) */
        die("the owner's pages kept growing: pages in use after the last round",
            (size_t)last);
    malloc_trim(0);
    stats(&st);
    uint64_t inuse = st.small_pages - st.small_pages_empty;
    if (have && st.allocs_current != live0)
        die("blocks freed by other threads not back with their owner (live blocks)",
            (size_t)(st.allocs_current - live0));
    atomic_store(&hb_stop, 1);
    pthread_barrier_wait(&hb_start);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("ok handback rounds=%ld threads=%d\n", rounds, threads);
    fprintf(stderr, "handback: pages in use after round 1: %llu, after the last: %llu, after "
            "malloc_trim: %llu\n", (unsigned long long)first, (unsigned long long)last,
            (unsigned long long)inuse);
    return 0;
}

/* ---- orphans: blocks of an exited thread freed later ---- */

static void *orphan_maker(void *arg)
{
    uint64_t seed = 3;
    if (arg)
        return NULL; /* the warm-up thread */
    for (size_t i = 0; i < HB_BLOCKS; i++) {
        size_t n = 8 + rnd(&seed) % 493;
        unsigned char *p = malloc(n);
        if (!p)
            die("malloc returned NULL", n);
        p[0] = (unsigned char)(uintptr_t)p;
        hb_blocks[i] = p;
    }
    return arg;
}

static int orphans(long ms)
{
    struct hc_stats st;
    pthread_t t;
    /* Before the baseline: the look-up's own allocations, if any, and a thread made and joined
     * (pthread_create allocates the new thread's TLS vector in the creating thread, kept with
     * the cached stack that the next thread reuses). */
    if (pthread_create(&t, NULL, orphan_maker, hb_blocks) || pthread_join(t, NULL))
        die("pthread_create", 0);
    stats(&st);
    if (!stats(&st)) {
        printf("ok orphans (not HC)\n");
        return 0;
    }
    uint64_t base = st.small_pages - st.small_pages_empty; /* the main thread's own pages */
    if (pthread_create(&t, NULL, orphan_maker, NULL) || pthread_join(t, NULL))
        die("pthread_create", 0);
    for (size_t i = 0; i < HB_BLOCKS; i++)
        free(hb_blocks[i]);
    stats(&st);
    uint64_t pages = st.small_pages;
    long waited = 0;
    struct timespec tick = {0, 20 * 1000000L};
    while (st.small_pages - st.small_pages_empty > base && waited < ms) {
        nanosleep(&tick, NULL);
        waited += 20;
        stats(&st);
    }
    if (st.small_pages - st.small_pages_empty > base)
        die("orphaned pages whose blocks were all freed are still not empty (pages in use)",
            (size_t)(st.small_pages - st.small_pages_empty - base));
    printf("ok orphans pages=%s\n", pages > 8 ? "many" : "few");
    fprintf(stderr, "orphans: %llu pages, all empty after %ld ms\n", (unsigned long long)pages,
            waited);
    return 0;
}

/* ---- short-lived threads ---- */

static void *_Atomic left[4][64];

static void *short_lived(void *arg)
{
    uintptr_t k = (uintptr_t)arg;
    uint64_t seed = 0x5eed + k;
    void *p[128];
    for (int i = 0; i < 128; i++) {
        size_t n = 1 + rnd(&seed) % 700;
        if (!(p[i] = malloc(n)))
            die("malloc returned NULL", n);
        memset(p[i], (int)i, n);
    }
    for (int i = 0; i < 128; i += 2)
        free(p[i]);
    for (int i = 1; i < 128; i += 2)
        atomic_store(&left[k % 4][i / 2], p[i]); /* freed by the main thread after exit */
    return NULL;
}

static int short_threads(unsigned long n)
{
    struct hc_stats st;
    unsigned long long early = 0;
    for (unsigned long i = 0; i < n; i += 4) {
        pthread_t t[4];
        for (uintptr_t k = 0; k < 4; k++)
            if (pthread_create(&t[k], NULL, short_lived, (void *)k))
                die("pthread_create", 0);
        for (int k = 0; k < 4; k++)
            pthread_join(t[k], NULL);
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 64; j++)
                free(atomic_exchange(&left[k][j], NULL));
        if (i + 4 >= n / 10 && !early) {
            stats(&st);
            early = st.small_pages + 1;
        }
    }
    stats(&st);
    /* Bounded: at most four threads live at once, each with a page per size class it uses (at
     * most 48 classes under 700 bytes), and their orphaned pages are adopted by the next ones.
     * A page leaked per thread would make 10,000; the first tenth's count is printed as well. */
    if (st.small_pages > 4 * 48 * 2)
        die("small pages grew with the number of threads", (size_t)st.small_pages);
    printf("ok short threads=%lu\n", n);
    fprintf(stderr, "short: small pages after a tenth %llu, at the end %llu\n", early - 1,
            (unsigned long long)st.small_pages);
    return 0;
}

/* ---- regions ---- */

static int regions(size_t mib)
{
    void *volatile first = malloc(24); /* the pages are set up (if not already) */
    long vm = proc_kib("status", "VmSize");
    free(first);
    size_t n = (mib << 20) / 64;
    void **blocks = malloc(n * sizeof *blocks); /* above SMALL_MAX: the paper's heap */
    if (!blocks)
        die("malloc of the array", n);
    for (size_t i = 0; i < n; i++) {
        char *b = blocks[i] = malloc(64);
        if (!b || ((uintptr_t)b & 15))
            die("malloc(64)", i);
        memset(b, (int)i, 64);
    }
    struct hc_stats st;
    int hc = stats(&st);
    unsigned long long pages = st.small_pages;
    for (size_t i = 0; i < n; i++) {
        unsigned char *b = blocks[i];
        if (b[0] != (unsigned char)i || b[63] != (unsigned char)i)
            die("block contents", i);
        if (pages && malloc_usable_size(b) != 64)
            die("not a block of a small page (usable size)", malloc_usable_size(b));
    }
    for (size_t i = n; i-- > 0;)
        free(blocks[i]);
    free(blocks);
    if (hc && stats(&st) && st.allocs_current > 16)
        die("blocks still counted after every free", (size_t)st.allocs_current);
    printf("ok regions mib=%zu vm=%ld\n", mib, vm >> 10);
    fprintf(stderr, "regions: %llu pages\n", pages);
    return 0;
}

/* ---- keep: blocks of another thread's pages freed, then allocated, by one thread ---- */

static size_t kp_size, kp_n;
static void **kp_blocks;
static size_t kp_reused;

static void *kp_thread(void *arg)
{
    void *volatile first = malloc(16); /* on the pages: a thread that never allocated keeps nothing */
    free(first);
    if (arg) {
        void *volatile p = kp_blocks[0];
        free(p);
        free(p);
        return NULL;
    }
    void **mine = calloc(kp_n, sizeof *mine); /* before the frees: it could take a kept block */
    if (!mine)
        die("malloc returned NULL", kp_n);
    for (size_t i = 0; i < kp_n; i++)
        free(kp_blocks[i]);
    for (size_t i = 0; i < kp_n; i++) {
        if (!(mine[i] = malloc(kp_size)))
            die("malloc returned NULL", kp_size);
        memset(mine[i], 0x33, kp_size);
        for (size_t j = 0; j < kp_n; j++)
            kp_reused += mine[i] == kp_blocks[j];
    }
    for (size_t i = 0; i < kp_n; i++)
        free(mine[i]);
    free(mine);
    return NULL;
}

static int keep(size_t size, size_t n, int twice)
{
    struct hc_stats st;
    pthread_t t;
    kp_size = size;
    kp_n = n;
    if (!(kp_blocks = malloc(n * sizeof *kp_blocks)))
        die("malloc returned NULL", n);
    for (size_t i = 0; i < n; i++) {
        if (!(kp_blocks[i] = malloc(size)))
            die("malloc returned NULL", size);
        memset(kp_blocks[i], 0x11, size);
    }
    if (pthread_create(&t, NULL, kp_thread, (void *)(uintptr_t)twice) || pthread_join(t, NULL))
        die("pthread_create", 0);
    if (twice) {
        printf("double free not caught\n");
        return 0;
    }
    malloc_trim(0); /* the main thread takes back what the other thread freed */
    stats(&st);
    printf("ok keep kept=%llu batches=%llu takes=%llu returned=%llu reused=%zu\n",
           (unsigned long long)st.small_remote_kept, (unsigned long long)st.small_remote_batches,
           (unsigned long long)st.small_remote_takes,
           (unsigned long long)st.small_remote_returned, kp_reused);
    free(kp_blocks);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 2 && strcmp(argv[1], "sizes") == 0)
        return sizes(strtoul(argv[2], NULL, 0));
    if (argc > 3 && strcmp(argv[1], "prodcons") == 0)
        return prodcons(strtol(argv[2], NULL, 0), atoi(argv[3]));
    if (argc > 3 && strcmp(argv[1], "handback") == 0)
        return handback(strtol(argv[2], NULL, 0), atoi(argv[3]));
    if (argc > 2 && strcmp(argv[1], "orphans") == 0)
        return orphans(strtol(argv[2], NULL, 0));
    if (argc > 2 && strcmp(argv[1], "short") == 0)
        return short_threads(strtoul(argv[2], NULL, 0));
    if (argc > 1 && strcmp(argv[1], "doublefree") == 0) {
        size_t size = argc > 2 ? strtoul(argv[2], NULL, 10) : 32;
        void *volatile p = malloc(size);
        void *volatile q = malloc(size);
        free(p);
        free(q);
        free(p);
        printf("double free not caught\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "misaligned") == 0) {
        char *volatile p = malloc(64);
        free(p + 8); /* inside a small page, not a block: free's one compare sends it to the
                      * heap's checks (hc_sp_owns), which must abort */
        printf("misaligned free not caught\n");
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "regions") == 0)
        return regions(strtoul(argv[2], NULL, 0));
    if (argc > 3 && strcmp(argv[1], "keep") == 0)
        return keep(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0), 0);
    if (argc > 1 && strcmp(argv[1], "keepdouble") == 0)
        return keep(1000, 1, 1);
    fprintf(stderr, "usage: hc_pages sizes MAX | prodcons MS THREADS | handback ROUNDS THREADS"
            " | orphans MS | short THREADS | doublefree [SIZE] | regions MIB | keep SIZE N | keepdouble\n");
    return 2;
}
