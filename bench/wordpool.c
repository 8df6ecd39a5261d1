/* A small-object C program for bench/xalloc_headline.py: a word table (every distinct word of
 * a text, strdup'd, in a chained hash table that is thinned every few thousand lines) beside a
 * churning pool of buffers (32 B - 4 KiB, one replaced per word).  Prints the number of
 * distinct words it ended with.
 *
 *   wordpool FILE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 65536
#define POOL 20000

struct word {
    struct word *next;
    char *text;
    unsigned long count;
};

static struct word *table[BUCKETS];

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

static void thin(unsigned keep_mod)
{
    for (unsigned b = 0; b < BUCKETS; b++) {
        struct word **p = &table[b];
        while (*p) {
            struct word *w = *p;
            if (w->count % keep_mod) {
                *p = w->next;
                free(w->text);
                free(w);
            } else {
                p = &w->next;
            }
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: wordpool FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    static void *pool[POOL];
    unsigned long n = 0, lines = 0, seed = 12345;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        for (char *w = strtok(line, " \n"); w; w = strtok(NULL, " \n")) {
            unsigned h = hash(w) % BUCKETS;
            struct word *e = table[h];
            while (e && strcmp(e->text, w))
                e = e->next;
            if (!e) {
                e = malloc(sizeof *e);
                e->text = strdup(w);
                e->count = 0;
                e->next = table[h];
                table[h] = e;
            }
            e->count++;
            seed = seed * 6364136223846793005ul + 1442695040888963407ul;
            unsigned slot = (unsigned)(seed >> 33) % POOL;
            free(pool[slot]);
            size_t size = 32 + (size_t)((seed >> 17) % 4064);
            pool[slot] = malloc(size);
            memset(pool[slot], (int)n, size < 64 ? size : 64);
            n++;
        }
        if (++lines % 5000 == 0)
            thin(3);
    }
    fclose(f);
    unsigned long distinct = 0;
    for (unsigned b = 0; b < BUCKETS; b++)
        for (struct word *e = table[b]; e; e = e->next)
            distinct++;
    printf("%lu\n", distinct);
    return 0;
}
