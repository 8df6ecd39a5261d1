/* churn_words: the small-object C program of issue 17.  Two things live side by side, as in
 * many C and C++ programs:
 *  - a word table: a chained hash table of nodes of 16..32 bytes (next pointer, count, the word),
 *    one per distinct word seen, never freed until the end;
 *  - a pool of 500 buffers of 1..64 KiB, one of which is replaced (free + malloc) or resized
 *    (realloc) every round, at random, each written whole (a buffer being filled).
 * Deterministic (xorshift, fixed seed): every allocator does the same work.
 *
 *     churn_words [rounds (400000)] [buffers (500)]
 *
 * Prints a checksum of the table and the pool, the same under every allocator. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
    struct node *next;
    uint32_t count;
    char word[]; /* 2..14 letters and a NUL: 16..32-byte requests */
};

static uint64_t rng = 2006;

static uint64_t next_rand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void die(void)
{
    fputs("churn_words: out of memory\n", stderr);
    exit(1);
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 400000;
    long nbuf = argc > 2 ? atol(argv[2]) : 500;
    if (rounds < 1 || nbuf < 1 || nbuf > 1000000) {
        fputs("usage: churn_words [rounds >= 1] [buffers 1..1000000]\n", stderr);
        return 2;
    }
    enum { BUCKETS = 1 << 16 };
    struct node **table = calloc(BUCKETS, sizeof *table);
    char **buf = calloc((size_t)nbuf, sizeof *buf);
    size_t *len = calloc((size_t)nbuf, sizeof *len);
    if (!table || !buf || !len)
        die();
    uint64_t sum = 0;
    long words = 0;
    for (long r = 0; r < rounds; r++) {
        /* A word from a vocabulary of about 260,000 (the word's letters come from its number). */
        uint64_t w = next_rand() % 262144, h = w;
        char word[16];
        size_t n = 2 + (size_t)(w % 13);
        for (size_t i = 0; i < n; i++, h /= 7)
            word[i] = (char)('a' + (h + i * 5) % 26);
        word[n] = 0;
        uint64_t hash = 1469598103934665603ull;
        for (size_t i = 0; i < n; i++)
            hash = (hash ^ (unsigned char)word[i]) * 1099511628211ull;
        struct node **slot = &table[hash % BUCKETS], *e;
        for (e = *slot; e && strcmp(e->word, word) != 0; e = e->next)
            ;
        if (!e) {
            e = malloc(sizeof *e + n + 1);
            if (!e)
                die();
            memcpy(e->word, word, n + 1);
            e->count = 0;
            e->next = *slot;
            *slot = e;
            words++;
        }
        e->count++;

        /* One buffer of the pool: replaced (2 in 3) or resized in place of it (1 in 3). */
        uint64_t x = next_rand();
        long k = (long)(x % (uint64_t)nbuf);
        size_t size = 1024 + (size_t)((x >> 24) % (63 * 1024 + 1));
        if ((x >> 48) % 3 == 0 && buf[k]) {
            char *p = realloc(buf[k], size);
            if (!p)
                die();
            if (size > len[k])
                memset(p + len[k], (int)(r & 0xff), size - len[k]);
            buf[k] = p;
        } else {
            free(buf[k]);
            buf[k] = malloc(size);
            if (!buf[k])
                die();
            memset(buf[k], (int)(r & 0xff), size);
        }
        len[k] = size;
        sum += (unsigned char)buf[k][size / 2];
    }
    for (long k = 0; k < nbuf; k++) {
        if (buf[k])
            sum += (unsigned char)buf[k][0] + len[k];
        free(buf[k]);
    }
    for (long b = 0; b < BUCKETS; b++)
        for (struct node *e = table[b], *nx; e; e = nx) {
            nx = e->next;
            sum += e->count * (uint64_t)(unsigned char)e->word[0];
            free(e);
        }
    free(table);
    free(buf);
    free(len);
    printf("%ld words, checksum %llu\n", words, (unsigned long long)sum);
    return 0;
}
