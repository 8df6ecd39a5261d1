/* hc_stress: randomized malloc-API stress test that checks every block it holds.
 *
 * Usage: hc_stress OPS [SEED [SLOTS [THREADS]]]
 *
 * Written against the standard malloc API only, so it runs against glibc as is and against any
 * allocator injected with LD_PRELOAD (the HC builds of Hasan & Chang 2006, §3). Each operation
 * picks a random slot: an empty slot is filled by one of malloc, calloc, realloc(NULL, n),
 * posix_memalign, aligned_alloc, memalign, valloc or pvalloc; a full slot is checked and then
 * freed or realloc'ed. Sizes are skewed toward small ones (most programs' requests are, §3.10)
 * but reach past the default MMAP_THRESHOLD (100 KiB, §3.2).
 *
 * Checked on every block: 16-byte alignment (x86-64 ABI) or the requested alignment,
 * malloc_usable_size >= request, calloc zeroes, realloc keeps the old contents, and the whole
 * usable area still holds the pattern written into it (so an allocator that reports more usable
 * bytes than it owns, or that scribbles on a live block, is caught).
 * With THREADS > 1 the OPS are split over that many threads, each with its own slots and random
 * stream, and one op in eight swaps the chosen slot with a slot of a shared exchange table, so
 * blocks are checked, reallocated and freed by threads other than the one that allocated them
 * (a thread cache's cross-thread frees).
 * Prints one "ok ..." line and exits 0, or one "hc_stress: FAIL ..." line and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct slot {
    unsigned char *p;
    size_t size;     /* bytes asked for */
    size_t usable;   /* malloc_usable_size at allocation: all of it carries the pattern */
    uint64_t tag;    /* seeds the pattern */
};

static __thread uint64_t rng_state;
static __thread unsigned long op_index;

static uint64_t rnd(void)  /* xorshift64*: fast and reproducible from the seed */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static void fail(const char *what, const struct slot *s)
{
    printf("hc_stress: FAIL at op %lu: %s (ptr %p size %zu usable %zu)\n", op_index, what,
           s ? (void *)s->p : NULL, s ? s->size : 0, s ? s->usable : 0);
    fflush(stdout);
    _exit(1);
}

/* Request sizes: 70 % up to 128 bytes (quick lists), 20 % up to 1 KiB (medium lists, §3.4),
 * 9.5 % from 1 KiB to 64 KiB (big list, §3.3) and 0.5 % up to 1 MiB (mostly mmap, §3.2), the
 * last two log-uniform so a few huge blocks do not dominate the run time; a few zero sizes. */
static size_t pick_size(void)
{
    unsigned r = rnd() % 1000;
    if (r < 5)
        return 0;
    if (r < 700)
        return 1 + rnd() % 128;
    if (r < 900)
        return 129 + rnd() % (1024 - 128);
    size_t base = (size_t)1024 << (r < 995 ? rnd() % 6 : 6 + rnd() % 4);
    return base + 1 + rnd() % base;
}

/* The pattern is one 64-bit word per 8 bytes, derived from the block's tag and the word index,
 * so filling is fast and a block moved by 8 bytes or mixed with another block is caught. */
static uint64_t pattern_word(uint64_t tag, size_t k)
{
    return tag ^ ((k + 1) * 0x9E3779B97F4A7C15ULL);
}

static unsigned char pattern_byte(uint64_t tag, size_t i)
{
    return (unsigned char)(pattern_word(tag, i >> 3) >> ((i & 7) * 8));
}

static void fill(struct slot *s)
{
    size_t words = s->usable / 8;
    for (size_t k = 0; k < words; k++) {
        uint64_t w = pattern_word(s->tag, k);
        memcpy(s->p + 8 * k, &w, 8);
    }
    for (size_t i = words * 8; i < s->usable; i++)
        s->p[i] = pattern_byte(s->tag, i);
}

/* Every byte of [from, to) must still hold the pattern; compared a word at a time. */
static void check_range(const struct slot *s, size_t from, size_t to, const char *what)
{
    size_t i = from;
    for (; i < to && (i & 7); i++)
        if (s->p[i] != pattern_byte(s->tag, i))
            fail(what, s);
    for (; i + 8 <= to; i += 8) {
        uint64_t w;
        memcpy(&w, s->p + i, 8);
        if (w != pattern_word(s->tag, i >> 3))
            fail(what, s);
    }
    for (; i < to; i++)
        if (s->p[i] != pattern_byte(s->tag, i))
            fail(what, s);
}

static void check_fresh(struct slot *s, size_t align, const char *how)
{
    char what[96];
    if (s->p == NULL) {
        if (s->size > 0) {
            snprintf(what, sizeof what, "%s returned NULL (errno %d)", how, errno);
            fail(what, s);
        }
        return;  /* malloc(0) may return NULL */
    }
    if ((uintptr_t)s->p % align) {
        snprintf(what, sizeof what, "%s: pointer not %zu-byte aligned", how, align);
        fail(what, s);
    }
    s->usable = malloc_usable_size(s->p);
    if (s->usable < s->size) {
        snprintf(what, sizeof what, "%s: malloc_usable_size < request", how);
        fail(what, s);
    }
}

/* HC_STRESS_ALIGN8 set (a fitted table with FIT_ALIGN8, allocator/hc/hc_fit.c): a request that
 * is not a multiple of 16 may be 8-byte aligned (jemalloc's and mimalloc's rule); else 16. */
static size_t plain_align(size_t n)
{
    static int align8 = -1;
    if (align8 < 0)
        align8 = getenv("HC_STRESS_ALIGN8") != NULL;
    return align8 && n % 16 ? 8 : 16;
}

static void do_alloc(struct slot *s)
{
    size_t align = 16;
    const char *how;
    unsigned kind = rnd() % 100;
    s->size = pick_size();
    s->tag = rnd() | 1;
    align = plain_align(s->size);
    if (kind < 55) {
        how = "malloc";
        s->p = malloc(s->size);
    } else if (kind < 75) {
        how = "calloc";
        size_t n = 1 + rnd() % 8, each = s->size / n;
        s->size = n * each;
        align = plain_align(s->size);
        s->p = calloc(n, each);
        check_fresh(s, align, how);
        if (s->p)
            for (size_t i = 0; i < s->size; i++)
                if (s->p[i])
                    fail("calloc: memory not zeroed", s);  /* every byte: the contract */
        fill(s);
        return;
    } else if (kind < 85) {
        how = "realloc(NULL, n)";
        s->p = realloc(NULL, s->size);
    } else {
        /* The memalign family: alignments 16 .. 64 KiB, skewed toward small ones. */
        align = (size_t)16 << (rnd() % 4 == 0 ? rnd() % 13 : rnd() % 4);
        switch (kind % 5) {
        case 0: {
            how = "posix_memalign";
            void *p = NULL;
            int rc = posix_memalign(&p, align, s->size);
            if (rc != 0) {
                errno = rc;
                p = NULL;
            }
            s->p = p;
            break;
        }
        case 1:
            how = "aligned_alloc";
            s->p = aligned_alloc(align, (s->size + align - 1) / align * align);
            break;
        case 2:
            how = "memalign";
            s->p = memalign(align, s->size);
            break;
        case 3:
            how = "valloc";
            align = (size_t)sysconf(_SC_PAGESIZE);
            s->p = valloc(s->size);
            break;
        default:
            how = "pvalloc";
            align = (size_t)sysconf(_SC_PAGESIZE);
            s->p = pvalloc(s->size);
            if (s->p && malloc_usable_size(s->p) < (s->size + align - 1) / align * align)
                fail("pvalloc: usable size not rounded up to a page", s);
            break;
        }
    }
    check_fresh(s, align, how);
    if (s->p)
        fill(s);
}

static void do_realloc(struct slot *s)
{
    struct slot old = *s;
    size_t n = pick_size();
    if (n == 0)
        n = 1;  /* realloc(p, 0) is the API test's business, not a stress case */
    /* Half the time grow or shrink a little: the in-place paths of §3.12. */
    if (rnd() % 2 && s->size > 0)
        n = s->size + (rnd() % 2 ? 1 + rnd() % 256 : -(1 + rnd() % (s->size < 64 ? s->size : 64)));
    if (n == 0)
        n = 1;
    unsigned char *q = realloc(s->p, n);
    if (q == NULL)
        fail("realloc returned NULL", s);
    s->p = q;
    s->size = n;
    if ((uintptr_t)q % plain_align(n))
        fail("realloc: pointer not 16-byte aligned", s);
    s->usable = malloc_usable_size(q);
    if (s->usable < n)
        fail("realloc: malloc_usable_size < request", s);
    size_t keep = old.size < n ? old.size : n;
    check_range(s, 0, keep, "realloc did not keep the old contents");
    s->tag = rnd() | 1;
    fill(s);
}

/* ---- the run: one thread, or several sharing an exchange table ---- */

#define EXCHANGE 64
static struct slot exchange[EXCHANGE];
static pthread_mutex_t exchange_lock = PTHREAD_MUTEX_INITIALIZER;
static int nthreads = 1;

struct run {
    unsigned long ops, allocs, frees, reallocs;
    uint64_t seed;
    size_t nslots;
};

static void *run_ops(void *arg)
{
    struct run *r = arg;
    rng_state = r->seed;
    struct slot *slots = calloc(r->nslots, sizeof *slots);
    if (!slots) {
        printf("hc_stress: FAIL: cannot allocate %zu slots\n", r->nslots);
        _exit(1);
    }
    for (op_index = 0; op_index < r->ops; op_index++) {
        struct slot *s = &slots[rnd() % r->nslots];
        if (nthreads > 1 && rnd() % 8 == 0) {
            /* Trade blocks with the other threads: what comes back was allocated elsewhere. */
            struct slot *x = &exchange[rnd() % EXCHANGE];
            pthread_mutex_lock(&exchange_lock);
            struct slot t = *x;
            *x = *s;
            *s = t;
            pthread_mutex_unlock(&exchange_lock);
        }
        if (s->p == NULL) {
            do_alloc(s);
            r->allocs++;
            continue;
        }
        check_range(s, 0, s->usable, "block contents changed while it was allocated");
        if (s->p && s->size > 0 && rnd() % 4 == 0) {
            do_realloc(s);
            r->reallocs++;
        } else {
            free(s->p);
            memset(s, 0, sizeof *s);
            r->frees++;
        }
    }
    /* Everything still held must be intact; then give it all back. */
    for (size_t i = 0; i < r->nslots; i++) {
        check_range(&slots[i], 0, slots[i].usable, "block contents changed (final check)");
        free(slots[i].p);
    }
    free(slots);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hc_stress OPS [SEED [SLOTS [THREADS]]]\n");
        return 2;
    }
    unsigned long ops = strtoul(argv[1], NULL, 0);
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) * 0x9E3779B97F4A7C15ULL + 1 : 88172645463325252ULL;
    size_t nslots = argc > 3 ? strtoul(argv[3], NULL, 0) : 2000;
    nthreads = argc > 4 ? atoi(argv[4]) : 1;
    if (nthreads < 1 || nthreads > 64) {
        fprintf(stderr, "hc_stress: THREADS must be 1..64\n");
        return 2;
    }
    struct run runs[64];
    pthread_t tids[64];
    for (int t = 0; t < nthreads; t++) {
        runs[t] = (struct run){ ops / (unsigned long)nthreads + (t == 0 ? ops % (unsigned long)nthreads : 0),
                                0, 0, 0, seed + (uint64_t)t * 0x2545F4914F6CDD1DULL,
                                nslots / (size_t)nthreads ? nslots / (size_t)nthreads : 1 };
    }
    if (nthreads == 1) {
        run_ops(&runs[0]);
    } else {
        for (int t = 0; t < nthreads; t++)
            if (pthread_create(&tids[t], NULL, run_ops, &runs[t])) {
                printf("hc_stress: FAIL: pthread_create\n");
                return 1;
            }
        for (int t = 0; t < nthreads; t++)
            pthread_join(tids[t], NULL);
        for (int k = 0; k < EXCHANGE; k++) {
            check_range(&exchange[k], 0, exchange[k].usable, "block contents changed (exchange)");
            free(exchange[k].p);
        }
    }
    unsigned long allocs = 0, frees = 0, reallocs = 0;
    for (int t = 0; t < nthreads; t++) {
        allocs += runs[t].allocs;
        frees += runs[t].frees;
        reallocs += runs[t].reallocs;
    }
    printf("ok ops=%lu allocs=%lu reallocs=%lu frees=%lu\n", ops, allocs, reallocs, frees);
    return 0;
}
