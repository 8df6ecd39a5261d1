/* wordtable: the small-object program of issue 17, for bench/small_pages.py.  A hash table of
 * words -- 24-byte nodes (next, word, count) and their 4..13-byte strings -- fed ROUNDS random
 * words, one in four rounds also deleting a random word, next to a churning pool of 500 buffers
 * of 1..64 KiB that are reallocated or replaced at random and written.  The commonest shape of
 * C and C++ programs: many small nodes that live long, and buffers that come and go.
 * Prints a checksum (the same under every allocator).
 *   usage: wordtable [ROUNDS] [THREADS]   (THREADS > 1: each thread its own table and pool) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
    struct node *next;
    char *word;
    uint64_t count;
};

#define NBUCKETS 65536
#define NBUF 500

static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static long rounds = 400000;

static void *run(void *arg)
{
    uint64_t x = 2006 + (uintptr_t)arg * 7919, sum = 0;
    struct node **table = calloc(NBUCKETS, sizeof *table);
    char *buf[NBUF] = { 0 };
    if (!table)
        exit(1);
    for (long r = 0; r < rounds; r++) {
        char w[16];
        uint64_t v = next_rand(&x);
        int len = 3 + (int)(v % 11);
        for (int i = 0; i < len; i++)
            w[i] = (char)('a' + (v >> (5 + 2 * i)) % 6); /* ~6^len words: repeats are common */
        w[len] = 0;
        struct node **at = &table[hash(w) % NBUCKETS], *n;
        for (n = *at; n && strcmp(n->word, w); n = n->next)
            ;
        if (n) {
            n->count++;
        } else {
            n = malloc(sizeof *n);
            n->word = malloc((size_t)len + 1);
            if (!n || !n->word)
                exit(1);
            memcpy(n->word, w, (size_t)len + 1);
            n->count = 1;
            n->next = *at;
            *at = n;
        }
        if (v % 4 == 0) { /* delete the first word of a random bucket */
            struct node **d = &table[(v >> 17) % NBUCKETS];
            if (*d) {
                struct node *dead = *d;
                *d = dead->next;
                sum += dead->count;
                free(dead->word);
                free(dead);
            }
        }
        if (v % 2 == 0) { /* the buffer pool */
            unsigned k = (unsigned)((v >> 23) % NBUF);
            size_t size = 1024 + (size_t)((v >> 33) % (63 * 1024));
            if ((v >> 40) % 2) {
                char *p = realloc(buf[k], size);
                if (!p)
                    exit(1);
                buf[k] = p;
            } else {
                free(buf[k]);
                if (!(buf[k] = malloc(size)))
                    exit(1);
            }
            memset(buf[k], (int)r, size < 4096 ? size : 4096);
            buf[k][size - 1] = 1;
        }
    }
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct node *n = table[b], *next; n; n = next) {
            next = n->next;
            sum += n->count * (uint64_t)strlen(n->word);
            free(n->word);
            free(n);
        }
    for (unsigned k = 0; k < NBUF; k++)
        free(buf[k]);
    free(table);
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atol(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    uint64_t total = 0;
    if (threads <= 1) {
        total = (uint64_t)(uintptr_t)run(0);
    } else {
        pthread_t t[64];
        if (threads > 64)
            threads = 64;
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, run, (void *)(uintptr_t)i);
        for (int i = 0; i < threads; i++) {
            void *s;
            pthread_join(t[i], &s);
            total += (uint64_t)(uintptr_t)s;
        }
    }
    printf("%llu\n", (unsigned long long)total);
    return 0;
}
