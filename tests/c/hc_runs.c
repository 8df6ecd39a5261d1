/* hc_runs.c -- mid sizes as runs of granules on shared pages (allocator/hc/hc_run.c, MID_RUNS).
 *
 * Usage: hc_runs share            eight mid sizes, 1,500 blocks each, one size after another;
 *                                 7 of every 8 freed; then 1,500 blocks of a ninth size.  Prints
 *                                 the small pages taken and the run pages among them: the ninth
 *                                 size fits the holes of the others only when sizes share pages
 *        hc_runs inplace          realloc grows a block into the free granules after it and
 *                                 shrinks it, in place (same pointer, contents kept), and moves
 *                                 it when the next granules are in use
 *        hc_runs interior         frees a pointer 32 bytes into a 1,000-byte block (must abort)
 *        hc_runs remotedouble     another thread frees a block of the main thread's twice; the
 *                                 main thread's next mallocs merge them (must abort)
 *        hc_runs adopt            a thread fills blocks of many mid sizes and exits; the main
 *                                 thread frees every other one, a second thread adopts the
 *                                 orphaned pages and allocates into their holes; contents are
 *                                 checked throughout, and after everything is freed and
 *                                 malloc_trim, at most two pages are in use (glibc's own blocks)
 *
 * Standard API and pthreads: runs against glibc as is.  HC's statistics through hc_stats_get
 * (looked up at run time; 0 under another allocator).
 * Prints one "ok ..." line and exits 0, or "hc_runs: FAIL ..." and exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hc_stats.h"

static void die(const char *what, size_t n)
{
    printf("hc_runs: FAIL: %s (n=%zu)\n", what, n);
    fflush(stdout);
    _exit(1);
}

static int stats(struct hc_stats *st)
{
    int (*get)(struct hc_stats *) = (int (*)(struct hc_stats *))dlsym(RTLD_DEFAULT, "hc_stats_get");
    memset(st, 0, sizeof *st);
    return get && get(st) == 0;
}

static void fill(unsigned char *p, size_t n, unsigned tag)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(tag + i);
}

static void check(const unsigned char *p, size_t n, unsigned tag)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(tag + i))
            die("contents changed", n);
}

/* ---- share ---- */

#define PER 1500
static int share(void)
{
    static void *blocks[8][PER];
    static const size_t size[8] = { 300, 520, 760, 1100, 1500, 2000, 2600, 3300 };
    for (int s = 0; s < 8; s++)
        for (int i = 0; i < PER; i++)
            if (!(blocks[s][i] = malloc(size[s])))
                die("malloc", size[s]);
    for (int s = 0; s < 8; s++)
        for (int i = 0; i < PER; i++)
            if (i % 8) {
                free(blocks[s][i]);
                blocks[s][i] = NULL;
            }
    struct hc_stats before, after;
    stats(&before);
    static void *ninth[PER];
    for (int i = 0; i < PER; i++)
        if (!(ninth[i] = malloc(1800)))
            die("malloc", 1800);
    stats(&after);
    printf("ok share new_pages=%llu run_pages=%llu\n",
           (unsigned long long)(after.small_pages - before.small_pages),
           (unsigned long long)after.run_pages);
    return 0;
}

/* ---- realloc in place ---- */

static int inplace(void)
{
    unsigned char *a = malloc(1000), *b = malloc(1000), *c = malloc(1000);
    if (!a || !b || !c)
        die("malloc", 1000);
    fill(b, 1000, 7);
    free(c); /* the granules after b are free (b was carved just before c) */
    unsigned char *g = realloc(b, 1900);
    if (g != b)
        die("realloc did not grow in place into the free granules", 1900);
    check(g, 1000, 7);
    fill(g, 1900, 9);
    unsigned char *s = realloc(g, 600);
    if (s != g)
        die("realloc did not shrink in place", 600);
    check(s, 600, 9);
    if (malloc_usable_size(s) < 600 || malloc_usable_size(s) >= 1000)
        die("usable size after the shrink", malloc_usable_size(s));
    fill(a, 1000, 3);
    unsigned char *d = malloc(1000); /* the granules after a are in use by s's block */
    unsigned char *m = realloc(a, 3000);
    if (!m)
        die("realloc", 3000);
    check(m, 1000, 3);
    free(m);
    free(s);
    free(d);
    printf("ok inplace\n");
    return 0;
}

/* ---- remote double free ---- */

static void *volatile shared;

static void *free_twice(void *arg)
{
    (void)arg;
    free(shared);
    free(shared);
    return NULL;
}

static int remotedouble(void)
{
    void *keep[200];
    for (int i = 0; i < 200; i++)
        keep[i] = malloc(1000);
    shared = keep[100];
    pthread_t t;
    pthread_create(&t, NULL, free_twice, NULL);
    pthread_join(t, NULL);
    /* The page's atomic list holds the block twice; the owner merges it when no hole fits. */
    for (int i = 0; i < 2000; i++)
        if (!malloc(1000))
            die("malloc", 1000);
    printf("double free not caught\n");
    (void)keep;
    return 0;
}

/* ---- adoption of orphaned run pages ---- */

#define AN 3000
static unsigned char *ablocks[AN];
static size_t asizes[AN];

static void *fill_and_exit(void *arg)
{
    (void)arg;
    for (int i = 0; i < AN; i++) {
        asizes[i] = 257 + (size_t)i * 37 % 3800;
        if (!(ablocks[i] = malloc(asizes[i])))
            die("malloc", asizes[i]);
        fill(ablocks[i], asizes[i], (unsigned)i);
    }
    return NULL;
}

static void *adopt_and_use(void *arg)
{
    (void)arg;
    for (int i = 0; i < AN; i += 2) {
        asizes[i] = 257 + (size_t)i * 53 % 3800;
        if (!(ablocks[i] = malloc(asizes[i])))
            die("malloc", asizes[i]);
        fill(ablocks[i], asizes[i], (unsigned)i * 5);
    }
    for (int i = 1; i < AN; i += 2)
        check(ablocks[i], asizes[i], (unsigned)i);
    return NULL;
}

static int adopt(void)
{
    pthread_t t;
    pthread_create(&t, NULL, fill_and_exit, NULL);
    pthread_join(t, NULL);
    for (int i = 0; i < AN; i += 2)
        free(ablocks[i]);
    pthread_create(&t, NULL, adopt_and_use, NULL);
    pthread_join(t, NULL);
    for (int i = 0; i < AN; i++) {
        check(ablocks[i], asizes[i], (unsigned)i * (i % 2 ? 1 : 5));
        free(ablocks[i]);
    }
    malloc_trim(0);
    struct hc_stats st;
    stats(&st);
    /* the blocks glibc keeps for its cached thread stacks may hold a page */
    unsigned long long in_use = st.small_pages - st.small_pages_empty;
    printf("ok adopt pages_in_use=%s\n", in_use <= 2 ? "few" : "many");
    fprintf(stderr, "adopt: small pages %llu, empty %llu, run pages %llu\n",
            (unsigned long long)st.small_pages, (unsigned long long)st.small_pages_empty,
            (unsigned long long)st.run_pages);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "share") == 0)
        return share();
    if (argc > 1 && strcmp(argv[1], "inplace") == 0)
        return inplace();
    if (argc > 1 && strcmp(argv[1], "interior") == 0) {
        char *volatile p = malloc(1000);
        free(p + 32);
        printf("interior free not caught\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "remotedouble") == 0)
        return remotedouble();
    if (argc > 1 && strcmp(argv[1], "adopt") == 0)
        return adopt();
    fprintf(stderr, "usage: hc_runs share | inplace | interior | remotedouble | adopt\n");
    return 2;
}
