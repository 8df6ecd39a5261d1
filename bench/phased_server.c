/* A long-running, threaded, server-like C program for bench/xalloc_headline.py: the shape of a
 * service whose memory is freed and kept.  THREADS worker threads serve ROUNDS rounds; a round
 * is a burst, then a quiet spell:
 *   - burst: each thread serves requests; a request reads into a buffer (256 B - 16 KiB), parses
 *     it into a list of small fields (16 - 200 B), builds a reply (1 - 64 KiB) and keeps a
 *     session record (a name and a state of 256 B - 4 KiB) in the thread's own session table;
 *   - quiet: the sessions expire (all but one in 32 are freed, so survivors stay scattered over
 *     the pages the burst used) and the thread serves small requests for a while, sleeping 2 ms
 *     between each batch, as a service between peaks does.
 * Freed memory that the allocator keeps (glibc's arenas, a thread cache, a decay period) is
 * resident through the quiet spells: the time-weighted mean RSS (`--memory-measure mean`) sees
 * it, the peak hardly does.  Deterministic output (each thread's own generator; the sums do not
 * depend on the scheduling): the number of sessions left and a checksum.
 *
 *   phased_server [THREADS [ROUNDS [REQUESTS [SEED]]]]     (defaults 4 6 3000 1)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct field {
    struct field *next;
    size_t len;
    char text[];
};

struct session {
    struct session *next;
    char *name;
    char *state;
    uint64_t id;
};

struct worker {
    pthread_t thread;
    unsigned index;
    uint64_t rng;
    struct session *sessions;
    uint64_t kept;
    uint64_t sum;
};

static unsigned rounds = 6, requests = 3000;

static uint64_t next(struct worker *w)
{
    /* xorshift64*: one generator per thread, so the output does not depend on scheduling */
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ull;
}

static size_t between(struct worker *w, size_t lo, size_t hi)
{
    return lo + next(w) % (hi - lo + 1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "phased_server: out of memory\n");
        exit(1);
    }
    return p;
}

/* One request: read, parse into fields, reply; a burst's requests also open a session. */
static void serve(struct worker *w, size_t max_request, size_t max_reply, int open_session)
{
    size_t n = between(w, 256, max_request);
    unsigned char *req = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        req[i] = (unsigned char)next(w);
    struct field *fields = NULL;
    for (size_t off = 0; off < n;) {
        size_t len = between(w, 16, 200);
        if (len > n - off)
            len = n - off;
        struct field *f = xmalloc(sizeof *f + len);
        f->len = len;
        memcpy(f->text, req + off, len);
        f->next = fields;
        fields = f;
        off += len;
    }
    size_t rn = between(w, 1024, max_reply);
    unsigned char *reply = xmalloc(rn);
    memset(reply, 0, rn);
    size_t at = 0;
    for (struct field *f = fields; f; f = f->next) {
        reply[at % rn] ^= f->text[0];
        at += f->len;
    }
    w->sum += reply[0] + reply[rn - 1] + n;
    if (open_session) {
        struct session *s = xmalloc(sizeof *s);
        s->id = next(w);
        s->name = xmalloc(between(w, 16, 48));
        s->name[0] = (char)s->id;
        s->state = xmalloc(between(w, 256, 4096));
        memcpy(s->state, req, 64);
        s->next = w->sessions;
        w->sessions = s;
    }
    while (fields) {
        struct field *f = fields->next;
        free(fields);
        fields = f;
    }
    free(reply);
    free(req);
}

/* The end of a burst: all sessions but one in 32 expire. */
static void expire(struct worker *w)
{
    struct session **p = &w->sessions;
    while (*p) {
        struct session *s = *p;
        if (s->id % 32) {
            *p = s->next;
            w->sum += (unsigned char)s->state[0];
            free(s->name);
            free(s->state);
            free(s);
        } else {
            p = &s->next;
        }
    }
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct timespec nap = {0, 2000000};
    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned i = 0; i < requests; i++)
            serve(w, 16384, 65536, 1);
        expire(w);
        for (unsigned q = 0; q < 100; q++) {
            for (unsigned i = 0; i < requests / 200 + 1; i++)
                serve(w, 1024, 4096, 0);
            nanosleep(&nap, NULL);
        }
    }
    for (struct session *s = w->sessions; s; s = s->next)
        w->kept++;
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 4;
    if (argc > 2)
        rounds = (unsigned)atoi(argv[2]);
    if (argc > 3)
        requests = (unsigned)atoi(argv[3]);
    uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    if (threads < 1 || threads > 64 || rounds < 1 || requests < 1) {
        fprintf(stderr, "usage: phased_server [THREADS [ROUNDS [REQUESTS [SEED]]]]\n");
        return 2;
    }
    struct worker *ws = calloc(threads, sizeof *ws);
    if (!ws)
        return 1;
    for (unsigned t = 0; t < threads; t++) {
        ws[t].index = t;
        ws[t].rng = 0x9e3779b97f4a7c15ull * (t + 1) ^ seed * 0xbf58476d1ce4e5b9ull;
        if (!ws[t].rng)
            ws[t].rng = 1;
        if (pthread_create(&ws[t].thread, NULL, run, &ws[t])) {
            fprintf(stderr, "phased_server: cannot start a thread\n");
            return 1;
        }
    }
    uint64_t kept = 0, sum = 0;
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(ws[t].thread, NULL);
        kept += ws[t].kept;
        sum += ws[t].sum;
    }
    printf("%llu sessions kept, checksum %llu\n", (unsigned long long)kept,
           (unsigned long long)sum);
    free(ws);
    return 0;
}
