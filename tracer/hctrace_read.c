/* hctrace_read.c — the C reader of the hctune trace format (build/libhctrace_read.a).
 *
 * Bounded memory whatever the trace's size: the file is never mapped or read whole.  hct_open
 * reads the header and each chunk header (pread), so a truncated or foreign file is refused up
 * front with one line, and keeps an index of the chunks (a few tens of bytes per chunk of
 * 32-64 KiB).  Chunks are the per-thread buffers of the tracer; they overlap in seq when several
 * threads allocate, so hct_next merges them: chunks enter a small min-heap of cursors in
 * first_seq order, each reading its chunk's payload into a buffer of its own, and the smallest
 * pending seq is returned next.  Memory: the index plus one payload per chunk in the heap (about
 * one per thread allocating at the same time).  Buffers are mmap'd and reused, so a replay
 * harness linking this reader does not call the allocator under test per chunk.
 * Layout: configs/trace_format.toml, docs/trace-format.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hctrace.h"
#include "hctrace_varint.h"

typedef struct chunk {
    uint64_t off;               /* the payload's offset in the file */
    uint64_t first_seq, base_time;
    uint32_t thread, count, len;
} chunk;

typedef struct buffer {
    uint8_t *p;
    size_t cap;
} buffer;

typedef struct cursor {
    const chunk *c;
    buffer buf;                 /* the chunk's payload, read at push */
    const uint8_t *pos, *end;
    uint32_t left;              /* events not yet decoded */
    uint64_t prev_seq, prev_ptr, prev_time;
    hct_event ev;               /* the pending (decoded, not yet returned) event */
} cursor;

#define POOL_MAX 64             /* free payload buffers kept for reuse */

struct hct_reader {
    int fd;
    uint64_t len;
    unsigned flags;
    uint32_t pid, ppid;
    uint64_t start_ns, events;
    char *command;
    size_t command_cap;      /* its mapping's length */
    chunk *chunks;
    size_t nchunks, capchunks, next_chunk;
    cursor *heap;
    size_t nheap, capheap;
    buffer pool[POOL_MAX];
    size_t npool;
    char err[256];
};

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int by_first_seq(const void *a, const void *b)
{
    const chunk *x = a, *y = b;
    return (x->first_seq > y->first_seq) - (x->first_seq < y->first_seq);
}

/* mmap'd memory for the reader's own arrays: not the allocator a replay measures. */
static void *grow(void *old, size_t old_bytes, size_t new_bytes)
{
    void *p = mmap(NULL, new_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (old) {
        memcpy(p, old, old_bytes);
        munmap(old, old_bytes);
    }
    return p;
}

/* Read exactly n bytes at off (short only at the end of the file); the count read, -1 on error. */
static ssize_t read_at(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

/* Chunks by first_seq, in place: glibc's qsort mallocs a buffer, and a streamed replay opens
 * the trace again inside the allocator it measures (heapsort: no memory, n log n). */
static void sift(chunk *c, size_t root, size_t n)
{
    for (size_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && by_first_seq(&c[child], &c[child + 1]) < 0)
            child++;
        if (by_first_seq(&c[root], &c[child]) >= 0)
            return;
        chunk tmp = c[root];
        c[root] = c[child];
        c[child] = tmp;
    }
}

static void sort_chunks(chunk *c, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift(c, i, n);
    for (size_t end = n; end-- > 1;) {
        chunk tmp = c[0];
        c[0] = c[end];
        c[end] = tmp;
        sift(c, 0, end);
    }
}

/* Index every chunk header; 0 on success, -1 with err set. */
static int index_chunks(hct_reader *r, uint64_t off, const char *path, char *err, size_t errlen)
{
    uint8_t head[HCT_CHUNK_HEADER_MAX];
    while (off < r->len) {
        uint64_t at = off;
        ssize_t got = read_at(r->fd, head, sizeof head, off);
        if (got <= 0) {
            fail(err, errlen, "%s: cannot read: %s", path, got < 0 ? strerror(errno) : "short");
            return -1;
        }
        const uint8_t *p = head, *end = head + got;
        uint64_t thread, first, count, plen, base = 0;
        if (*p++ != HCT_CHUNK_MARKER) {
            fail(err, errlen, "%s: corrupt trace: no chunk marker at offset %llu", path,
                 (unsigned long long)at);
            return -1;
        }
        if (!(p = hct_get_varint(p, end, &thread)) || !(p = hct_get_varint(p, end, &first)) ||
            !(p = hct_get_varint(p, end, &count)) || !(p = hct_get_varint(p, end, &plen)) ||
            ((r->flags & (HCT_FLAG_TIME | HCT_FLAG_CLOCK)) && !(p = hct_get_varint(p, end, &base))) ||
            plen > r->len - (at + (uint64_t)(p - head))) {
            fail(err, errlen, "%s: truncated trace: chunk at offset %llu runs past the end of the "
                 "file (%llu bytes)", path, (unsigned long long)at, (unsigned long long)r->len);
            return -1;
        }
        if (count == 0 || count > plen || thread > UINT32_MAX || plen > UINT32_MAX) {
            fail(err, errlen, "%s: corrupt trace: bad chunk header at offset %llu", path,
                 (unsigned long long)at);
            return -1;
        }
        if (r->nchunks == r->capchunks) {
            size_t cap = r->capchunks ? 2 * r->capchunks : 1024;
            chunk *n = grow(r->chunks, r->capchunks * sizeof *n, cap * sizeof *n);
            if (!n) {
                fail(err, errlen, "%s: out of memory indexing the trace", path);
                return -1;
            }
            r->chunks = n;
            r->capchunks = cap;
        }
        off = at + (uint64_t)(p - head);
        r->chunks[r->nchunks++] = (chunk){off, first, base, (uint32_t)thread, (uint32_t)count,
                                          (uint32_t)plen};
        r->events += count;
        off += plen;
    }
    /* Stable enough: one thread's chunks never share a first_seq. */
    sort_chunks(r->chunks, r->nchunks);
    return 0;
}

hct_reader *hct_open(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fail(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        fail(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    /* mmap'd, not malloc'd, like every array of the reader: a streamed replay opens the trace
     * again for each repeat, and the allocator it measures must not see the reader */
    hct_reader *r = grow(NULL, 0, sizeof *r);
    if (!r) {
        close(fd);
        fail(err, errlen, "out of memory");
        return NULL;
    }
    r->fd = fd;
    r->len = (uint64_t)st.st_size;
    uint8_t h[HCT_COMMAND_OFFSET];
    if (r->len < HCT_COMMAND_OFFSET) {
        ssize_t got = read_at(fd, h, HCT_MAGIC_LEN, 0);
        if (got > 0 && memcmp(h, HCT_MAGIC, (size_t)got) == 0)
            fail(err, errlen, "%s: truncated trace: %llu bytes, shorter than the header", path,
                 (unsigned long long)r->len);
        else
            fail(err, errlen, "%s: not an hctune trace (too short: %llu bytes)", path,
                 (unsigned long long)r->len);
        hct_close(r);
        return NULL;
    }
    if (read_at(fd, h, sizeof h, 0) != (ssize_t)sizeof h) {
        fail(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        hct_close(r);
        return NULL;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint32_t hlen = get_u32(h + HCT_HEADER_LEN_OFFSET);
    uint32_t clen = get_u32(h + HCT_COMMAND_LEN_OFFSET);
    if (memcmp(h + HCT_MAGIC_OFFSET, HCT_MAGIC, HCT_MAGIC_LEN) != 0) {
        fail(err, errlen, "%s: not an hctune trace (wrong magic bytes)", path);
    } else if (get_u16(h + HCT_VERSION_OFFSET) < HCT_MIN_VERSION ||
               get_u16(h + HCT_VERSION_OFFSET) > HCT_VERSION) {
        fail(err, errlen, "%s: trace format version %u, this reader knows versions %u to %u",
             path, get_u16(h + HCT_VERSION_OFFSET), HCT_MIN_VERSION, HCT_VERSION);
    } else if (hlen < HCT_COMMAND_OFFSET + (uint64_t)clen || hlen > r->len) {
        fail(err, errlen, "%s: truncated trace: header of %u bytes, file of %llu", path, hlen,
             (unsigned long long)r->len);
    } else {
        r->flags = get_u16(h + HCT_FLAGS_OFFSET);
        r->pid = get_u32(h + HCT_PID_OFFSET);
        r->ppid = get_u32(h + HCT_PPID_OFFSET);
        r->start_ns = get_u64(h + HCT_START_TIME_OFFSET);
        r->command = grow(NULL, 0, (size_t)clen + 1);
        r->command_cap = r->command ? (size_t)clen + 1 : 0;
        if (!r->command) {
            fail(err, errlen, "out of memory");
        } else if (read_at(fd, r->command, clen, HCT_COMMAND_OFFSET) != (ssize_t)clen) {
            fail(err, errlen, "%s: cannot read the command line", path);
        } else {
            r->command[clen] = 0;
            if (index_chunks(r, hlen, path, err, errlen) == 0)
                return r;
        }
    }
    hct_close(r);
    return NULL;
}

/* Decode the next event of cursor k into k->ev; 0 ok, -1 corrupt. */
static inline __attribute__((always_inline)) int decode(hct_reader *r, cursor *k)
{
    const uint8_t *p = k->pos, *end = k->end;
    uint64_t v;
    if (p >= end)
        goto corrupt;
    uint8_t tag = *p++;
    hct_event *e = &k->ev;
    e->op = tag & HCT_OP_MASK;
    if (e->op < HCT_MALLOC || e->op > HCT_MEMALIGN)
        goto corrupt;
    uint64_t dseq = tag >> HCT_SEQ_SHIFT;
    if (dseq == HCT_SEQ_ESCAPE) {
        if (!(p = hct_get_varint(p, end, &v)))
            goto corrupt;
        dseq += v;
    }
    e->seq = k->prev_seq + 1 + dseq;
    if (!(p = hct_get_varint(p, end, &v)))
        goto corrupt;
    int64_t d = hct_unzigzag(v);
    if (tag & HCT_GRANULE_BIT)
        d = (int64_t)((uint64_t)d << HCT_PTR_GRANULE_SHIFT);
    e->ptr = k->prev_ptr + (uint64_t)d;
    e->size = e->old_ptr = e->align = 0;
    if (e->op != HCT_FREE && !(p = hct_get_varint(p, end, &e->size)))
        goto corrupt;
    if (e->op == HCT_REALLOC) {
        if (!(p = hct_get_varint(p, end, &v)))
            goto corrupt;
        e->old_ptr = e->ptr + (uint64_t)hct_unzigzag(v);
    }
    if (e->op == HCT_MEMALIGN && !(p = hct_get_varint(p, end, &e->align)))
        goto corrupt;
    e->time_ns = k->prev_time;     /* flags.CLOCK: the chunk's base time; else 0 */
    if (r->flags & HCT_FLAG_TIME) {
        if (!(p = hct_get_varint(p, end, &v)))
            goto corrupt;
        e->time_ns = k->prev_time = k->prev_time + v;
    }
    e->thread = k->c->thread;
    k->prev_seq = e->seq;
    k->prev_ptr = e->ptr;
    k->pos = p;
    k->left--;
    if (k->left == 0 && p != end)
        goto corrupt;
    return 0;
corrupt:
    snprintf(r->err, sizeof r->err, "corrupt trace: bad event in the chunk at offset %llu",
             (unsigned long long)k->c->off);
    return -1;
}

static int less(const cursor *a, const cursor *b) { return a->ev.seq < b->ev.seq; }

static void sift_down(hct_reader *r, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < r->nheap && less(&r->heap[l], &r->heap[m]))
            m = l;
        if (l + 1 < r->nheap && less(&r->heap[l + 1], &r->heap[m]))
            m = l + 1;
        if (m == i)
            return;
        cursor t = r->heap[i];
        r->heap[i] = r->heap[m];
        r->heap[m] = t;
        i = m;
    }
}

/* A buffer of at least n bytes: a pooled one, or a new mapping. */
static int take_buffer(hct_reader *r, size_t n, buffer *out)
{
    for (size_t i = r->npool; i-- > 0;)
        if (r->pool[i].cap >= n) {
            *out = r->pool[i];
            r->pool[i] = r->pool[--r->npool];
            return 0;
        }
    size_t cap = n < 65536 ? 65536 : (n + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    *out = (buffer){p, cap};
    return 0;
}

static void give_buffer(hct_reader *r, buffer b)
{
    if (!b.p)
        return;
    if (r->npool < POOL_MAX)
        r->pool[r->npool++] = b;
    else
        munmap(b.p, b.cap);
}

static int push_chunk(hct_reader *r, const chunk *c)
{
    if (r->nheap == r->capheap) {
        size_t cap = r->capheap ? 2 * r->capheap : 16;
        cursor *n = grow(r->heap, r->capheap * sizeof *n, cap * sizeof *n);
        if (!n) {
            snprintf(r->err, sizeof r->err, "out of memory merging thread chunks");
            return -1;
        }
        r->heap = n;
        r->capheap = cap;
    }
    buffer b;
    if (take_buffer(r, c->len, &b) < 0) {
        snprintf(r->err, sizeof r->err, "out of memory reading a chunk of %u bytes", c->len);
        return -1;
    }
    if (read_at(r->fd, b.p, c->len, c->off) != (ssize_t)c->len) {
        snprintf(r->err, sizeof r->err, "cannot read the chunk at offset %llu: %s",
                 (unsigned long long)c->off, errno ? strerror(errno) : "short read");
        give_buffer(r, b);
        return -1;
    }
    cursor *k = &r->heap[r->nheap];
    *k = (cursor){.c = c, .buf = b, .pos = b.p, .end = b.p + c->len, .left = c->count,
                  .prev_seq = c->first_seq - 1, .prev_ptr = 0, .prev_time = c->base_time};
    if (decode(r, k) < 0) {
        give_buffer(r, b);
        return -1;
    }
    /* sift up */
    size_t i = r->nheap++;
    while (i > 0 && less(&r->heap[i], &r->heap[(i - 1) / 2])) {
        cursor t = r->heap[i];
        r->heap[i] = r->heap[(i - 1) / 2];
        r->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    return 0;
}

int hct_next(hct_reader *r, hct_event *ev)
{
    if (r->err[0])
        return -1;
    while (r->next_chunk < r->nchunks &&
           (r->nheap == 0 || r->chunks[r->next_chunk].first_seq <= r->heap[0].ev.seq))
        if (push_chunk(r, &r->chunks[r->next_chunk++]) < 0)
            return -1;
    if (r->nheap == 0)
        return 0;
    cursor *top = &r->heap[0];
    *ev = top->ev;
    if (top->left > 0) {
        if (decode(r, top) < 0)
            return -1;
    } else {
        give_buffer(r, top->buf);
        r->heap[0] = r->heap[--r->nheap];
    }
    sift_down(r, 0);
    return 1;
}

const char *hct_error(const hct_reader *r) { return r->err[0] ? r->err : "no error"; }
const char *hct_command(const hct_reader *r) { return r->command ? r->command : ""; }
uint32_t hct_pid(const hct_reader *r) { return r->pid; }
uint32_t hct_ppid(const hct_reader *r) { return r->ppid; }
uint64_t hct_start_time_ns(const hct_reader *r) { return r->start_ns; }
unsigned hct_flags(const hct_reader *r) { return r->flags; }
uint64_t hct_count(const hct_reader *r) { return r->events; }

void hct_close(hct_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    for (size_t i = 0; i < r->nheap; i++)
        munmap(r->heap[i].buf.p, r->heap[i].buf.cap);
    for (size_t i = 0; i < r->npool; i++)
        munmap(r->pool[i].p, r->pool[i].cap);
    if (r->command)
        munmap(r->command, r->command_cap);
    if (r->chunks)
        munmap(r->chunks, r->capchunks * sizeof *r->chunks);
    if (r->heap)
        munmap(r->heap, r->capheap * sizeof *r->heap);
    munmap(r, sizeof *r);
}
