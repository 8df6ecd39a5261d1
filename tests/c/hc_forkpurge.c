/* hc_forkpurge: what a program may rely on beyond malloc and free (issue 22) -- fork against
 * stdio's locks, fork from a signal handler, memory of exited threads given back, glibc's errno
 * rules.  Standard glibc API only: the same binary runs on glibc and, under LD_PRELOAD, on HC.
 *
 * Usage: hc_forkpurge stdio-fork FILE  one run: threads getline long lines of FILE (each holds
 *                      its FILE's lock while getline reallocs), threads allocate inside
 *                      flockfile, one calls fflush(NULL) (the list lock, then every FILE's),
 *                      three fork (each child allocates and exits).  "ok stdio-fork forks=N";
 *                      a lock-order inversion hangs it (the caller's timeout is the failure).
 *        hc_forkpurge signal-fork  single-threaded: forks in a loop while a second process
 *                      sends signals whose handler forks too (some land inside the outer fork's
 *                      atfork handlers).  "ok signal-fork forks=N nested=M"; a hang is the failure.
 *        hc_forkpurge churn CYCLES MIB  CYCLES times: 4 threads each allocate MIB MiB in mixed
 *                      sizes (a window of live blocks), free everything and exit.  Then light
 *                      use (every 10 ms one 8 KiB and a few small malloc/free) for up to 3 s.
 *                      Prints "cycle K rss_kib R" after each cycle, then "released_ms M rss_kib R"
 *                      when RSS fell below 64 MiB, or "timeout rss_kib R".
 *                      churn CYCLES MIB idle|small: instead of light use, no allocator call at
 *                      all (idle) or only the small malloc/free (a thread cache serves them).
 *                      churn CYCLES MIB light|idle|small series: "t_ms rss_kib" every 10 ms for
 *                      3 s after the last cycle (bench/decay_plot.py plots it).
 *        hc_forkpurge errno  free keeps errno when munmap fails (the map count exhausted);
 *                      posix_memalign / memalign / aligned_alloc failures set errno as glibc
 *                      does.  "ok N checks".
 *        hc_forkpurge stats-cancel  a thread with a pending cancel calls malloc_stats: it must
 *                      print before the thread is cancelled.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK_NAME "hc_forkpurge"
#include "check.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static long rss_kib(void)
{
    char buf[128];
    long size = 0, resident = -1;
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            if (sscanf(buf, "%ld %ld", &size, &resident) != 2)
                resident = -1;
        }
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ---- stdio-fork ---- */

static volatile int stop;
static const char *lines_path;
static FILE *shared; /* a FILE other threads lock with flockfile and allocate under */

static void *reader(void *arg)
{
    (void)arg;
    FILE *f = fopen(lines_path, "r");
    if (!f)
        return NULL;
    while (!stop) {
        char *line = NULL; /* a fresh buffer each time: getline reallocs under the FILE lock */
        size_t cap = 0;
        if (getline(&line, &cap, f) < 0)
            rewind(f);
        free(line);
        usleep(50); /* lock released for a while: contention, not starvation of the others */
    }
    fclose(f);
    return NULL;
}

static void *locker(void *arg)
{
    uint64_t s = (uintptr_t)arg * 2654435761u + 1;
    while (!stop) {
        flockfile(shared);
        for (int i = 0; i < 50; i++) {
            void *p = malloc(16 + xorshift(&s) % 70000);
            if (p)
                memset(p, 1, 16);
            free(p);
        }
        funlockfile(shared);
        usleep(50);
    }
    return NULL;
}

static void *flusher(void *arg)
{
    (void)arg;
    while (!stop) {
        fflush(NULL);
        usleep(20);
    }
    return NULL;
}

static int forks_done;

static void *forker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 15; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            void *p = malloc(100000);
            void *q = malloc(40);
            free(q);
            free(p);
            _exit(p && q ? 0 : 3);
        }
        if (pid < 0)
            continue;
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            __atomic_add_fetch(&forks_done, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static int stdio_fork(const char *path)
{
    lines_path = path;
    shared = fopen(path, "r");
    if (!shared) {
        perror(path);
        return 2;
    }
    pthread_t r[3], l[2], fl, fk[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&r[i], NULL, reader, NULL);
    for (int i = 0; i < 2; i++)
        pthread_create(&l[i], NULL, locker, (void *)(uintptr_t)(i + 1));
    pthread_create(&fl, NULL, flusher, NULL);
    for (int i = 0; i < 3; i++)
        pthread_create(&fk[i], NULL, forker, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(fk[i], NULL);
    stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(r[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(l[i], NULL);
    pthread_join(fl, NULL);
    fclose(shared);
    printf("ok stdio-fork forks=%d\n", forks_done);
    return forks_done == 45 ? 0 : 1;
}

/* ---- signal-fork ---- */

static volatile sig_atomic_t nested;

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        nested++;
    errno = saved;
}

static int signal_fork(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGCHLD, SIG_DFL);
    pid_t me = getpid();
    pid_t sender = fork();
    if (sender == 0) {
        /* Signals as fast as they go, until the parent is gone or 2 s passed. */
        double end = now_ms() + 2000;
        while (now_ms() < end && kill(me, SIGUSR1) == 0)
            for (volatile int i = 0; i < 2000; i++)
                ;
        _exit(0);
    }
    int forks = 0;
    double end = now_ms() + 150;
    while (now_ms() < end) {
        void *p = malloc(200 + (size_t)forks % 5000);
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        free(p);
        if (pid > 0) {
            forks++;
            int st;
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        }
        while (waitpid(-1, NULL, WNOHANG) > 0) /* the handler's children */
            ;
    }
    kill(sender, SIGKILL);
    signal(SIGUSR1, SIG_IGN);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    printf("ok signal-fork forks=%d nested=%d\n", forks, (int)nested);
    return 0;
}

/* ---- churn ---- */

#define WINDOW 1024

static size_t churn_bytes;

/* Mixed sizes: 70 % 16..1024 B, 25 % 1..64 KiB, 5 % 64..512 KiB, written whole; a window of
 * WINDOW live blocks, the oldest freed as a new one comes; at the end everything is freed. */
static void *churner(void *arg)
{
    uint64_t s = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 7;
    void **live = calloc(WINDOW, sizeof *live);
    size_t done = 0;
    for (unsigned i = 0; done < churn_bytes; i++) {
        uint64_t r = xorshift(&s);
        unsigned kind = (unsigned)(r % 100);
        size_t n = kind < 70 ? 16 + (r >> 8) % 1009 : kind < 95 ? 1024 + (r >> 8) % 64512
                                                              : 65536 + (r >> 8) % 458752;
        unsigned slot = i % WINDOW;
        free(live[slot]);
        live[slot] = malloc(n);
        if (live[slot])
            memset(live[slot], (int)i, n);
        done += n;
    }
    for (unsigned i = 0; i < WINDOW; i++)
        free(live[i]);
    free(live);
    return NULL;
}

static int churn(int cycles, size_t mib, const char *after, int series)
{
    churn_bytes = mib << 20;
    for (int c = 0; c < cycles; c++) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, churner, (void *)(uintptr_t)(c * 4 + i + 1));
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        printf("cycle %d rss_kib %ld\n", c, rss_kib());
    }
    double start = now_ms();
    void *small[8];
    int light = !strcmp(after, "light"), some = !strcmp(after, "small");
    while (now_ms() - start < 3000) {
        long rss = rss_kib();
        if (series) {
            printf("%.0f %ld\n", now_ms() - start, rss);
        } else if (rss < 64 * 1024) {
            printf("released_ms %.0f rss_kib %ld\n", now_ms() - start, rss);
            return 0;
        }
        void *p = light ? malloc(8192) : NULL;
        if (p)
            memset(p, 1, 8192);
        if (light || some) {
            for (int i = 0; i < 8; i++)
                small[i] = malloc(24 + 16 * (size_t)i);
            for (int i = 0; i < 8; i++)
                free(small[i]);
        }
        free(p);
        usleep(10000);
    }
    if (!series)
        printf("timeout rss_kib %ld\n", rss_kib());
    return 0;
}

/* ---- errno ---- */

/* The address range of the mapping that holds p, from /proc/self/maps (read with read(2)). */
static int mapping_of(void *p, uintptr_t *lo, uintptr_t *hi)
{
    static char buf[1 << 16];
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    size_t len = n > 0 ? (size_t)n : 0;
    while (n > 0 && len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = 0;
    for (char *line = buf; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && (uintptr_t)p >= a && (uintptr_t)p < b) {
            *lo = a;
            *hi = b;
            return 1;
        }
    }
    return 0;
}

static int is_mapped(void *p)
{
    long page = sysconf(_SC_PAGESIZE);
    return msync((void *)((uintptr_t)p & ~(uintptr_t)(page - 1)), (size_t)page, MS_ASYNC) == 0;
}

/* free of a mapped block whose munmap fails: the block's mapping sits inside a larger one, so
 * unmapping it splits that mapping in two, which needs one more map than the process may have
 * once the map count (vm.max_map_count) is exhausted by alternating page protections.  Three
 * blocks mapped one after the other usually lie side by side and merge into one mapping; if the
 * middle one's mapping does not reach past both its ends, pages mapped against them do. */
static void free_keeps_errno(void)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t size = (size_t)64 << 20; /* above every mmap threshold */
    char *b[3];
    for (int i = 0; i < 3; i++) {
        b[i] = malloc(size);
        CHECK(b[i] != NULL);
        if (!b[i])
            return;
        memset(b[i], 1, 4096);
    }
    char *p = b[1];
    uintptr_t lo = 0, hi = 0, start = (uintptr_t)p - (uintptr_t)page, end = (uintptr_t)p + size + (uintptr_t)page;
    CHECK(mapping_of(p, &lo, &hi));
    if (lo > start)
        mmap((void *)(lo - (uintptr_t)page), (size_t)page, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (hi < end)
        mmap((void *)hi, (size_t)page, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(mapping_of(p, &lo, &hi) && lo <= start && hi >= end); /* else this test proves nothing */
    /* Exhaust the map count: a large PROT_READ region, every other page made PROT_NONE. */
    size_t pages = 2 * 70000;
    char *r = mmap(NULL, pages * (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    CHECK(r != MAP_FAILED);
    if (r == MAP_FAILED)
        return;
    for (size_t i = 1; i < pages; i += 2)
        if (mprotect(r + i * (size_t)page, (size_t)page, PROT_NONE) != 0)
            break;
    /* One split needs two maps; single maps may still fit: take them too. */
    for (int k = 0; k < 64; k++) {
        void *m = mmap(NULL, (size_t)page, k % 2 ? PROT_NONE : PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (m == MAP_FAILED)
            break;
    }
    uintptr_t addr = (uintptr_t)p; /* looked at after the free, never dereferenced */
    errno = 1234;
    free(p);
    int kept = errno;
    int failed = is_mapped((void *)addr); /* munmap failed: the block's pages are still there */
    CHECK(failed);
    CHECK(kept == 1234);
    munmap(r, pages * (size_t)page);
    printf("free_errno munmap_failed=%d errno=%d\n", failed, kept);
}

static void memalign_errno(void)
{
    void *p = (void *)1;
    volatile size_t huge = SIZE_MAX - 4096; /* volatile: no compile-time size warning */
    errno = 0;
    CHECK(posix_memalign(&p, 64, huge) == ENOMEM && errno == ENOMEM);
    errno = 0;
    CHECK(posix_memalign(&p, 3, 64) == EINVAL && errno == 0);
    errno = 0;
    CHECK(memalign((size_t)1 << 63, 1) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(memalign(((size_t)1 << 63) + 1, 1) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(memalign(64, huge) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(aligned_alloc(64, huge) == NULL && errno == ENOMEM);
}

static long max_map_count(void)
{
    char buf[32];
    long v = -1;
    int fd = open("/proc/sys/vm/max_map_count", O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n > 0) {
            buf[n] = 0;
            v = atol(buf);
        }
        close(fd);
    }
    return v;
}

static int errno_rules(void)
{
    memalign_errno();
    long maps = max_map_count();
    if (maps > 0 && maps <= 100000)
        free_keeps_errno();
    else
        printf("free_errno skipped: vm.max_map_count is %ld (exhausting it is too slow)\n", maps);
    return check_report("");
}

/* ---- stats-cancel ---- */

static void *stats_thread(void *arg)
{
    (void)arg;
    pthread_cancel(pthread_self()); /* deferred: pending until a cancellation point */
    malloc_stats();
    for (;;)
        pause(); /* a cancellation point: the thread ends here */
    return NULL;
}

static int stats_cancel(void)
{
    pthread_t t;
    pthread_create(&t, NULL, stats_thread, NULL);
    void *ret;
    pthread_join(t, &ret);
    printf("ok stats-cancel cancelled=%d\n", ret == PTHREAD_CANCELED);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "stdio-fork"))
        return stdio_fork(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "signal-fork"))
        return signal_fork();
    if (argc >= 4 && !strcmp(argv[1], "churn"))
        return churn(atoi(argv[2]), (size_t)atol(argv[3]), argc > 4 ? argv[4] : "light",
                     argc > 5 && !strcmp(argv[5], "series"));
    if (argc >= 2 && !strcmp(argv[1], "errno"))
        return errno_rules();
    if (argc >= 2 && !strcmp(argv[1], "stats-cancel"))
        return stats_cancel();
    fprintf(stderr, "usage: hc_forkpurge stdio-fork FILE | signal-fork | churn CYCLES MIB | errno | "
                    "stats-cancel\n");
    return 2;
}
