/* A small real program for the emitted allocator: count the words of a generated text in a
 * chained hash table that grows by realloc, free half the words, sort the rest and print a
 * checksum.  Run it linked with the emitted malloc.c and with the C library's malloc: the
 * output must be identical.  Uses only the standard API, so any malloc can be linked in. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct word { char *text; size_t count; struct word *next; };

static struct word **table;
static size_t buckets = 16, nwords;

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static void grow(void) {
    size_t nb = buckets * 2;
    struct word **t = calloc(nb, sizeof *t);
    if (!t) { perror("calloc"); exit(1); }
    for (size_t i = 0; i < buckets; i++)
        for (struct word *w = table[i], *next; w; w = next) {
            next = w->next;
            size_t j = hash(w->text) & (nb - 1);
            w->next = t[j];
            t[j] = w;
        }
    free(table);
    table = t;
    buckets = nb;
}

static void add(const char *text) {
    size_t i = hash(text) & (buckets - 1);
    for (struct word *w = table[i]; w; w = w->next)
        if (!strcmp(w->text, text)) { w->count++; return; }
    struct word *w = malloc(sizeof *w);
    if (!w || !(w->text = strdup(text))) { perror("malloc"); exit(1); }
    w->count = 1;
    w->next = table[i];
    table[i] = w;
    if (++nwords > buckets * 2) grow();
}

static int by_count(const void *a, const void *b) {
    const struct word *x = *(struct word *const *)a, *y = *(struct word *const *)b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->text, y->text);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    table = calloc(buckets, sizeof *table);
    char *buf = NULL;
    size_t cap = 0;
    uint64_t x = 42;
    for (long k = 0; k < n; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = 1 + (x >> 60) + ((x >> 20) % 3 == 0 ? (x >> 40) % 200 : 0);
        if (len + 1 > cap) {                      /* a growing buffer: realloc's path */
            cap = (len + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) { perror("realloc"); return 1; }
            buf = nb;
        }
        for (size_t i = 0; i < len; i++) buf[i] = 'a' + (char)((x >> (i % 50)) % 7);
        buf[len] = 0;
        add(buf);
    }
    /* free every word seen once: a heap full of holes, as the paper's programs leave it */
    size_t kept = 0;
    for (size_t i = 0; i < buckets; i++)
        for (struct word **p = &table[i]; *p;) {
            struct word *w = *p;
            if (w->count == 1) { *p = w->next; free(w->text); free(w); nwords--; }
            else { p = &w->next; kept++; }
        }
    struct word **all = malloc(kept * sizeof *all + 1);
    size_t m = 0;
    for (size_t i = 0; i < buckets; i++)
        for (struct word *w = table[i]; w; w = w->next) all[m++] = w;
    qsort(all, m, sizeof *all, by_count);
    uint64_t sum = 0;
    for (size_t i = 0; i < m; i++) sum = sum * 31 + hash(all[i]->text) + all[i]->count;
    printf("%zu words kept, top \"%s\" x%zu, checksum %016llx\n", m,
           m ? all[0]->text : "", m ? all[0]->count : (size_t)0, (unsigned long long)sum);
    for (size_t i = 0; i < m; i++) { free(all[i]->text); free(all[i]); }
    free(all);
    free(table);
    free(buf);
    return 0;
}
