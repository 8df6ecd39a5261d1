/* trace_known — a known allocation sequence for the tracer's tests (tests/test_trace_known.py).
 *
 * Every allocator call it makes is also logged, as it happens, to the file named by
 * TRACE_KNOWN_LOG ("pid label op ptr old_ptr size align" per line, written with write(2) so the
 * log itself allocates nothing).  The test checks each label's calls appear, in order and
 * exactly, in the trace of that process, on one thread, and nothing of the parent leaks into a
 * forked child's trace.  Covers: malloc, calloc, realloc (moving, NULL, to 0), the memalign
 * family, two threads whose blocks the main thread frees, a forked child ending in _exit, a
 * forked child that allocates then execs, and blocks left live at exit. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int log_fd = -1;

static char *put_hex(char *p, uint64_t v)
{
    char tmp[17];
    int n = 0;
    do
        tmp[n++] = "0123456789abcdef"[v & 15];
    while ((v >>= 4));
    *p++ = '0';
    *p++ = 'x';
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_dec(char *p, uint64_t v)
{
    char tmp[21];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10));
    while (n)
        *p++ = tmp[--n];
    return p;
}

static void log_ev(const char *label, const char *op, const void *ptr, const void *old,
                   size_t size, size_t align)
{
    char line[200], *p = line;
    p = put_dec(p, (uint64_t)getpid());
    *p++ = ' ';
    p = stpcpy(p, label);
    *p++ = ' ';
    p = stpcpy(p, op);
    *p++ = ' ';
    p = put_hex(p, (uintptr_t)ptr);
    *p++ = ' ';
    p = put_hex(p, (uintptr_t)old);
    *p++ = ' ';
    p = put_dec(p, size);
    *p++ = ' ';
    p = put_dec(p, align);
    *p++ = '\n';
    if (write(log_fd, line, (size_t)(p - line)) < 0)
        _exit(3);
}

static void *M(const char *who, size_t n)
{
    void *p = malloc(n);
    log_ev(who, "malloc", p, NULL, n, 0);
    return p;
}

static void F(const char *who, void *p)
{
    log_ev(who, "free", p, NULL, 0, 0);   /* logged first: the tracer records free before too */
    free(p);
}

#define THREAD_ITERS 400
static void *thread_main(void *arg)
{
    const char *who = arg;
    size_t base = who[1] == '1' ? 16 : 24;
    void **keep = M(who, 200 * sizeof(void *));
    int k = 0;
    for (int i = 0; i < THREAD_ITERS; i++) {
        void *p = M(who, base + (size_t)(i % 50));
        if (i % 2 == 0 && k < 200)
            keep[k++] = p;        /* handed to the main thread, which frees them */
        else
            F(who, p);
    }
    return keep;
}

int main(void)
{
    const char *path = getenv("TRACE_KNOWN_LOG");
    if (!path || (log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0)
        return 2;
    void *p[100];
    for (int i = 0; i < 100; i++)
        p[i] = M("main", (size_t)(i * 37 % 2100) + 1);

    void *c = calloc(10, 100);
    log_ev("main", "calloc", c, NULL, 1000, 0);
    uintptr_t old = (uintptr_t)p[0];         /* its value only, for the log */
    void *r = realloc(p[0], 5000);
    log_ev("main", "realloc", r, (void *)old, 5000, 0);
    p[0] = r;
    void *r2 = realloc(NULL, 77);            /* recorded as a malloc */
    log_ev("main", "malloc", r2, NULL, 77, 0);
    log_ev("main", "free", p[1], NULL, 0, 0);
    if (realloc(p[1], 0) != NULL)             /* glibc frees: recorded as a free */
        return 4;
    p[1] = NULL;

    void *a;
    if (posix_memalign(&a, 64, 200))
        return 5;
    log_ev("main", "memalign", a, NULL, 200, 64);
    void *b = aligned_alloc(128, 256);
    log_ev("main", "memalign", b, NULL, 256, 128);
    void *m = memalign(32, 100);
    log_ev("main", "memalign", m, NULL, 100, 32);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *v = valloc(1000);
    log_ev("main", "memalign", v, NULL, 1000, page);
    void *pv = pvalloc(5000);
    log_ev("main", "memalign", pv, NULL, (5000 + page - 1) / page * page, page);

    for (int i = 2; i < 100; i += 2) {
        F("main", p[i]);
        p[i] = NULL;
    }

    pthread_t t1, t2;
    void *k1, *k2;
    if (pthread_create(&t1, NULL, thread_main, "t1") || pthread_create(&t2, NULL, thread_main, "t2"))
        return 6;
    pthread_join(t1, &k1);
    pthread_join(t2, &k2);
    for (int i = 0; i < THREAD_ITERS / 2; i++) {
        F("main", ((void **)k1)[i]);
        F("main", ((void **)k2)[i]);
    }
    F("main", k1);
    F("main", k2);

    pid_t c1 = fork();
    if (c1 == 0) {
        void *q[50];
        for (int i = 0; i < 50; i++)
            q[i] = M("child", 3000 + (size_t)i);
        for (int i = 0; i < 50; i += 2)
            F("child", q[i]);
        _exit(0);                              /* no destructors: the tracer hooks _exit */
    }
    pid_t c2 = fork();
    if (c2 == 0) {
        for (int i = 0; i < 10; i++)
            M("child2", 4000 + (size_t)i);
        execl("/bin/true", "true", (char *)NULL);
        _exit(7);
    }
    int st1, st2;
    waitpid(c1, &st1, 0);
    waitpid(c2, &st2, 0);
    if (!WIFEXITED(st1) || WEXITSTATUS(st1) || !WIFEXITED(st2) || WEXITSTATUS(st2))
        return 8;

    for (int i = 3; i < 100; i += 2)          /* p[1] is gone; p[97], p[99] stay live */
        if (i < 97)
            F("main", p[i]);
    F("main", c);
    F("main", r2);
    F("main", a);
    F("main", b);
    F("main", m);
    F("main", v);
    F("main", pv);
    return 0;
}
