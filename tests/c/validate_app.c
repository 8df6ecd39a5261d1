/* validate_app: a small real program with a known allocation pattern, for `hctune validate`.
 *
 *   validate_app [N] [SEED]
 *
 * Builds a chained hash table of N strings (16..200 bytes, from a fixed generator), counts
 * them in a calloc'd array, frees every other one, grows one buffer with realloc by joining
 * the survivors' first bytes, and prints a checksum of everything it read back.  Different
 * N or SEED: a different input of the same program.  ~20 ms for the default N on one core.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node { struct node *next; size_t len; char text[]; };

static uint64_t state;
static uint64_t next_rand(void)
{
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return state;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 60000;
    state = argc > 2 ? strtoull(argv[2], NULL, 10) | 1 : 2006;
    size_t buckets = 4096;
    struct node **table = malloc(buckets * sizeof *table);
    unsigned *counts = calloc(buckets, sizeof *counts);
    if (!table || !counts)
        return 1;
    memset(table, 0, buckets * sizeof *table);
    for (size_t i = 0; i < n; i++) {
        size_t len = 16 + next_rand() % 185;
        struct node *nd = malloc(sizeof *nd + len + 1);
        if (!nd)
            return 1;
        nd->len = len;
        for (size_t j = 0; j < len; j++)
            nd->text[j] = (char)('a' + next_rand() % 26);
        nd->text[len] = 0;
        size_t b = (size_t)(next_rand() % buckets);
        nd->next = table[b];
        table[b] = nd;
        counts[b]++;
    }
    uint64_t sum = 0;
    char *joined = NULL;
    size_t jlen = 0;
    for (size_t b = 0; b < buckets; b++) {
        struct node **pp = &table[b];
        int k = 0;
        while (*pp) {
            struct node *nd = *pp;
            if (k++ % 2) {
                *pp = nd->next;
                free(nd);
                continue;
            }
            char *grown = realloc(joined, jlen + 9);
            if (!grown)
                return 1;
            joined = grown;
            memcpy(joined + jlen, nd->text, 8);
            jlen += 8;
            joined[jlen] = 0;
            pp = &nd->next;
        }
        sum = sum * 31 + counts[b];
    }
    for (size_t i = 0; i < jlen; i++)
        sum = sum * 131 + (unsigned char)joined[i];
    size_t kept = 0;
    for (size_t b = 0; b < buckets; b++)
        for (struct node *nd = table[b], *nx; nd; nd = nx) {
            nx = nd->next;
            kept++;
            free(nd);
        }
    printf("%zu strings, %zu kept, %zu bytes joined, checksum %016llx\n", n, kept, jlen,
           (unsigned long long)sum);
    free(joined);
    free(table);
    free(counts);
    return 0;
}
