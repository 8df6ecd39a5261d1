/* Trace -> compact op array with dense object ids (DESIGN §3: "the replay side turns pointer
 * tags into dense object ids once, so replay never hashes").
 *
 * Pointers are mapped to slots with an open-addressing table that exists only while loading.
 * Slots are recycled through a free-id stack, so the slot array is as long as the most objects
 * ever live at once, not the number of allocations: the replay loop touches little memory of
 * its own.  All of it is mmap'd, so the allocator under test never sees the harness. */
#define _GNU_SOURCE
#include "hcreplay.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hctrace.h"

/* ---- growable mmap'd arrays ---- */

void *hcr_map(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void hcr_unmap(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes ? bytes : 1);
}

/* Double *cap (elements of elem bytes) and move the array; 0 on success. */
static int grow(void **arr, size_t *cap, size_t elem)
{
    size_t ncap = *cap ? *cap * 2 : 4096;
    void *p = *arr ? mremap(*arr, *cap * elem, ncap * elem, MREMAP_MAYMOVE)
                   : mmap(NULL, ncap * elem, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                          -1, 0);
    if (p == MAP_FAILED)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

/* ---- pointer -> slot table (linear probing, backward-shift deletion: no tombstones) ---- */

struct ptab {
    uint64_t *keys; /* 0 = empty (malloc never returns NULL for a live object) */
    uint32_t *vals;
    size_t cap, n; /* cap is a power of two */
};

static size_t hash_ptr(uint64_t p, size_t mask)
{
    return (size_t)(((p >> 4) * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

static int ptab_init(struct ptab *t, size_t cap)
{
    t->cap = cap;
    t->n = 0;
    t->keys = hcr_map(cap * sizeof *t->keys);
    t->vals = hcr_map(cap * sizeof *t->vals);
    return t->keys && t->vals ? 0 : -1;
}

static void ptab_free(struct ptab *t)
{
    hcr_unmap(t->keys, t->cap * sizeof *t->keys);
    hcr_unmap(t->vals, t->cap * sizeof *t->vals);
}

/* Index of key, or of the empty cell where it would go. */
static size_t ptab_find(const struct ptab *t, uint64_t key)
{
    size_t mask = t->cap - 1, i = hash_ptr(key, mask);
    while (t->keys[i] && t->keys[i] != key)
        i = (i + 1) & mask;
    return i;
}

static int ptab_put(struct ptab *t, uint64_t key, uint32_t val);

static int ptab_rehash(struct ptab *t)
{
    struct ptab old = *t;
    if (ptab_init(t, old.cap * 2))
        return -1;
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i])
            ptab_put(t, old.keys[i], old.vals[i]);
    ptab_free(&old);
    return 0;
}

static int ptab_put(struct ptab *t, uint64_t key, uint32_t val)
{
    if ((t->n + 1) * 2 > t->cap && ptab_rehash(t))
        return -1;
    size_t i = ptab_find(t, key);
    if (!t->keys[i])
        t->n++;
    t->keys[i] = key;
    t->vals[i] = val;
    return 0;
}

static void ptab_del(struct ptab *t, size_t i)
{
    size_t mask = t->cap - 1, j = i;
    t->keys[i] = 0;
    t->n--;
    for (;;) {
        j = (j + 1) & mask;
        if (!t->keys[j])
            return;
        size_t home = hash_ptr(t->keys[j], mask);
        /* move keys[j] back into the hole at i unless its home lies cyclically in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            t->keys[i] = t->keys[j];
            t->vals[i] = t->vals[j];
            t->keys[j] = 0;
            i = j;
        }
    }
}

/* ---- the loader ---- */

struct loader {
    struct hcr_trace *t;
    int threaded;
    unsigned cur;       /* the current event's replay thread (always 0 unless threaded) */
    struct ptab live;
    struct ptab size_ix; /* (size | align_log2 << 56) -> index in t->sizes (key 0: index 0) */
    const char *limit;   /* set when the trace is beyond what an op can say */
    /* recycled slots, one stack per replay thread (only [0] unless threaded) */
    uint32_t *free_ids[HCR_MAX_THREADS];
    size_t n_free[HCR_MAX_THREADS], free_cap[HCR_MAX_THREADS];
    uint64_t *slot_size; /* requested bytes of each live slot, for max live bytes */
    size_t size_cap;
    uint64_t live_bytes, live_objects;
    uint8_t *tid_seen; /* by recorded thread id (dense per process) */
    size_t tid_cap;
    /* streamed loads (hcr_stream_*): 1 = count the ops only (the first pass), 2 = put them in
     * chunk[] (a repeat); 0 = keep them all in t->ops */
    int mode;
    struct hcr_rop *chunk;
    size_t chunk_n;
};

/* The index of (size, align_log2) in the table t->sizes/aligns, added if new; -1 when out of
 * memory or the table is full. */
static int64_t size_index(struct loader *L, uint64_t size, unsigned align_log2)
{
    struct hcr_trace *t = L->t;
    /* the key: size and alignment (sizes past 2^56 fail in the program, so are never here),
     * +1 as key 0 is the empty cell, rotated as the table hashes pointers (their low 4 bits
     * dropped) and sizes differ there */
    uint64_t key = ((size & ((1ull << 56) - 1)) | (uint64_t)align_log2 << 56) + 1;
    key = key << 4 | key >> 60;
    size_t i = ptab_find(&L->size_ix, key);
    if (L->size_ix.keys[i])
        return L->size_ix.vals[i];
    if (t->n_sizes >= HCR_ARG_LIMIT) {
        L->limit = "more distinct sizes of 16 MiB and over, or of aligned allocations, than the "
                   "replay's ops can index (2^24)";
        return -1;
    }
    if ((t->n_sizes == t->sizes_cap &&
         grow((void **)&t->sizes, &t->sizes_cap, sizeof *t->sizes)) ||
        (t->n_sizes == t->aligns_cap && grow((void **)&t->aligns, &t->aligns_cap, 1)))
        return -1;
    t->sizes[t->n_sizes] = size;
    t->aligns[t->n_sizes] = (uint8_t)align_log2;
    if (ptab_put(&L->size_ix, key, (uint32_t)t->n_sizes))
        return -1;
    return (int64_t)t->n_sizes++;
}

static int emit(struct loader *L, unsigned op, uint32_t slot, uint64_t size, unsigned align_log2)
{
    struct hcr_trace *t = L->t;
    if (!L->mode && t->n_ops == t->ops_cap &&
        grow((void **)&t->ops, &t->ops_cap, sizeof *t->ops))
        return -1;
    uint64_t arg = 0;
    if (op == HCR_MEMALIGN || (op != HCR_FREE && size >= HCR_ARG_LIMIT)) {
        int64_t ix = size_index(L, size, op == HCR_MEMALIGN ? align_log2 : 0);
        if (ix < 0)
            return -1;
        arg = (uint64_t)ix;
        if (op != HCR_MEMALIGN)
            op = op == HCR_MALLOC ? HCR_MALLOC_BIG : op == HCR_CALLOC ? HCR_CALLOC_BIG
                                                                      : HCR_REALLOC_BIG;
    } else if (op != HCR_FREE) {
        arg = size;
    }
    if (L->mode) {           /* streamed: counted, or into the chunk the replay drains */
        if (L->mode == 2)
            L->chunk[L->chunk_n++] = (struct hcr_rop){slot, op | (uint32_t)arg << HCR_ARG_SHIFT};
        t->n_ops++;
        return 0;
    }
    t->ops[t->n_ops] = (struct hcr_rop){slot, op | (uint32_t)arg << HCR_ARG_SHIFT};
    /* a threaded load: each op's replay thread, once a second thread appears (the mapping is
     * zero-filled, so the ops before it are the first thread's) */
    if (L->threaded && (L->cur || t->op_thread)) {
        while (t->op_thread_cap < t->ops_cap)
            if (grow((void **)&t->op_thread, &t->op_thread_cap, 1))
                return -1;
        t->op_thread[t->n_ops] = (uint8_t)L->cur;
    }
    t->n_ops++;
    return 0;
}

static int new_slot(struct loader *L, uint32_t *slot)
{
    struct hcr_trace *t = L->t;
    if (L->n_free[L->cur]) {
        *slot = L->free_ids[L->cur][--L->n_free[L->cur]];
    } else {
        if (t->n_slots >= UINT32_MAX)
            return -1;
        *slot = (uint32_t)t->n_slots++;
        if (*slot >= L->size_cap && grow((void **)&L->slot_size, &L->size_cap, sizeof(uint64_t)))
            return -1;
    }
    return 0;
}

static int release_slot(struct loader *L, uint32_t slot)
{
    unsigned c = L->cur;
    if (L->n_free[c] == L->free_cap[c] &&
        grow((void **)&L->free_ids[c], &L->free_cap[c], sizeof(uint32_t)))
        return -1;
    L->free_ids[c][L->n_free[c]++] = slot;
    L->live_bytes -= L->slot_size[slot];
    L->live_objects--;
    return 0;
}

static void note_live(struct loader *L, uint32_t slot, uint64_t size)
{
    L->slot_size[slot] = size;
    L->live_bytes += size;
    if (L->live_bytes > L->t->max_live_bytes)
        L->t->max_live_bytes = L->live_bytes;
    if (L->live_objects > L->t->max_live_objects)
        L->t->max_live_objects = L->live_objects;
}

static int note_thread(struct loader *L, uint64_t tid)
{
    if (tid > UINT32_MAX)
        return -1;
    while (tid >= L->tid_cap)
        if (grow((void **)&L->tid_seen, &L->tid_cap, 1))
            return -1;
    if (!L->tid_seen[tid]) {
        L->tid_seen[tid] = 1;
        L->t->threads++;
        if (tid > L->t->max_tid)
            L->t->max_tid = (uint32_t)tid;
    }
    L->cur = L->threaded ? hcr_replay_thread(tid) : 0;
    return 0;
}

static unsigned log2_ceil(uint64_t a)
{
    unsigned k = 0;
    while (k < 63 && (1ull << k) < a)
        k++;
    return k;
}

/* Take a new object at ptr: if the address is still live in the trace, the program freed it
 * through a path the tracer did not see; free it here too so replay stays consistent. */
static int bind(struct loader *L, uint64_t ptr, uint64_t size, uint32_t *slot)
{
    size_t i = ptab_find(&L->live, ptr);
    if (L->live.keys[i]) {
        uint32_t old = L->live.vals[i];
        ptab_del(&L->live, i);
        if (emit(L, HCR_FREE, old, 0, 0) || release_slot(L, old))
            return -1;
        L->t->repaired++;
    }
    if (new_slot(L, slot) || ptab_put(&L->live, ptr, *slot))
        return -1;
    L->live_objects++;
    note_live(L, *slot, size);
    return 0;
}

static int add_event(struct loader *L, const hct_event *ev)
{
    uint64_t ptr = (uint64_t)ev->ptr, size = (uint64_t)ev->size;
    uint32_t slot;
    size_t i;
    if (note_thread(L, (uint64_t)ev->thread))
        return -1;
    switch (ev->op) {
    case HCT_MALLOC:
    case HCT_CALLOC:
    case HCT_MEMALIGN:
        if (!ptr)
            return 0; /* the call failed in the program: nothing was allocated */
        if (bind(L, ptr, size, &slot))
            return -1;
        if (ev->op == HCT_MEMALIGN)
            return emit(L, HCR_MEMALIGN, slot, size, log2_ceil((uint64_t)ev->align));
        return emit(L, ev->op == HCT_MALLOC ? HCR_MALLOC : HCR_CALLOC, slot, size, 0);
    case HCT_FREE:
        if (!ptr)
            return 0;
        i = ptab_find(&L->live, ptr);
        if (!L->live.keys[i]) {
            L->t->skipped++; /* allocated before tracing began, or by an untraced path */
            return 0;
        }
        slot = L->live.vals[i];
        ptab_del(&L->live, i);
        return emit(L, HCR_FREE, slot, 0, 0) || release_slot(L, slot) ? -1 : 0;
    case HCT_REALLOC: {
        uint64_t old = (uint64_t)ev->old_ptr;
        int have_old = 0;
        if (old) {
            i = ptab_find(&L->live, old);
            have_old = L->live.keys[i] != 0;
            if (!have_old)
                L->t->skipped++;
        }
        if (!have_old) {
            if (!ptr)
                return 0;
            /* realloc(NULL, n), or of an object we never saw: a fresh object */
            if (bind(L, ptr, size, &slot))
                return -1;
            return emit(L, HCR_REALLOC, slot, size, 0);
        }
        slot = L->live.vals[i];
        if (!ptr) {
            if (size)
                return 0; /* failed: the old block stays as it was */
            /* realloc(p, 0) that freed p: replay it as free, the same for every allocator */
            ptab_del(&L->live, i);
            return emit(L, HCR_FREE, slot, 0, 0) || release_slot(L, slot) ? -1 : 0;
        }
        ptab_del(&L->live, i);
        i = ptab_find(&L->live, ptr);
        if (L->live.keys[i]) { /* new address still live in the trace: implicit free */
            uint32_t other = L->live.vals[i];
            ptab_del(&L->live, i);
            if (emit(L, HCR_FREE, other, 0, 0) || release_slot(L, other))
                return -1;
            L->t->repaired++;
        }
        if (ptab_put(&L->live, ptr, slot))
            return -1;
        L->live_bytes -= L->slot_size[slot];
        note_live(L, slot, size);
        return emit(L, HCR_REALLOC, slot, size, 0);
    }
    default:
        return 1; /* unknown op */
    }
}

/* The clock: a tick where the trace's time has moved on by the clock's quantum since the last
 * one (threads' chunks interleave, so a time behind the last tick is not one); 0, or -1 when
 * out of memory. */
static int clock_tick(struct hcr_trace *t, uint64_t ns)
{
    if (t->n_ticks && ns < t->ticks[t->n_ticks - 1].ns + HCT_CLOCK_QUANTUM_NS)
        return 0;
    if (t->n_ticks == t->ticks_cap &&
        grow((void **)&t->ticks, &t->ticks_cap, sizeof *t->ticks))
        return -1;
    t->ticks[t->n_ticks++] = (struct hcr_tick){t->n_ops, ns};
    return 0;
}

size_t hcr_load_max_ops;
int hcr_load_stopped;
int hcr_load_fresh;

/* The trace's events, decoded into ops (hcr_load, below, reads them from the ops cache when
 * it has them). */
static int load_events(const char *path, struct hcr_trace *t, int threaded, char *err,
                       size_t errlen)
{
    memset(t, 0, sizeof *t);
    hct_reader *r = hct_open(path, err, errlen);
    if (!r)
        return -1;
    const char *cmd = hct_command(r);
    snprintf(t->command, sizeof t->command, "%s", cmd ? cmd : "");

    struct loader L = {.t = t, .threaded = threaded};
    int rc = 0;
    if (ptab_init(&L.live, 1 << 16) || ptab_init(&L.size_ix, 1 << 10)) {
        snprintf(err, errlen, "out of memory loading %s", path);
        hct_close(r);
        return -1;
    }
    hct_event ev;
    int got;
    const int clocked = (hct_flags(r) & (HCT_FLAG_TIME | HCT_FLAG_CLOCK)) != 0;
    while ((got = hct_next(r, &ev)) == 1) {
        if (hcr_load_max_ops && t->n_ops >= hcr_load_max_ops) {
            hcr_load_stopped = 1; /* a part: the rest is never read */
            got = 0;
            break;
        }
        t->events++;
        int e = clocked && clock_tick(t, ev.time_ns) ? -1 : add_event(&L, &ev);
        if (e < 0) {
            if (L.limit)
                snprintf(err, errlen, "%s: %s", path, L.limit);
            else
                snprintf(err, errlen, "out of memory loading %s", path);
            rc = -1;
            break;
        }
        if (e > 0) {
            snprintf(err, errlen, "%s: event %llu has unknown op %d", path,
                     (unsigned long long)t->events, (int)ev.op);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && got < 0) {
        const char *msg = hct_error(r);
        snprintf(err, errlen, "%s", msg && *msg ? msg : "corrupt trace");
        rc = -1;
    }
    hct_close(r);
    ptab_free(&L.live);
    ptab_free(&L.size_ix);
    for (unsigned c = 0; c < HCR_MAX_THREADS; c++)
        hcr_unmap(L.free_ids[c], L.free_cap[c] * sizeof(uint32_t));
    hcr_unmap(L.tid_seen, L.tid_cap);
    hcr_unmap(L.slot_size, L.size_cap * sizeof(uint64_t));
    if (rc == 0 && t->n_ops == 0) {
        snprintf(err, errlen, "%s: the trace has no allocations to replay", path);
        rc = -1;
    }
    return rc;
}

/* ---- streamed replay: traces too big to hold as ops (issue 23) ----
 *
 * A billion events would be 8 GB of ops.  A streamed replay holds none of them: a first pass
 * reads the whole trace through the same loader, keeping only what the replay needs before it
 * starts (the slot count, the table of big and aligned sizes, max live) and the loader's own
 * tables at the size they reached; then every repeat reads the trace again and turns it into
 * ops a chunk (HCR_STREAM_CHUNK ops) at a time, which the replay drains.  The same loader in the
 * same order gives the same slots, so each repeat replays exactly the ops a whole load would
 * have.  Reading and decoding are outside the timed part; the loader's tables are sized and
 * touched before the replay's baseline, so the peak RSS over that baseline is the allocator's.
 * Threads: a streamed replay is a single-thread replay in the recorded global order (as
 * --threads off). */
struct hcr_stream {
    char path[4096];
    struct loader L;
    hct_reader *r;
    size_t n_slots;          /* from the first pass: the slot array's length */
};

/* Events into the loader until the trace ends or (a repeat) the chunk has no room for one
 * more event's ops (at most two: an implicit free, then its own); 0, or -1 with err set. */
static int stream_events(struct hcr_stream *s, struct hcr_trace *t, size_t room, char *err,
                         size_t errlen)
{
    hct_event ev;
    for (;;) {
        if (s->L.mode == 2 && s->L.chunk_n + 2 > room)
            return 0;
        int got = hct_next(s->r, &ev);
        if (got == 0)
            return 0;
        if (got < 0) {
            const char *msg = hct_error(s->r);
            snprintf(err, errlen, "%s", msg && *msg ? msg : "corrupt trace");
            return -1;
        }
        t->events++;
        int e = add_event(&s->L, &ev);
        if (e < 0) {
            snprintf(err, errlen, "%s: %s", s->path,
                     s->L.limit ? s->L.limit : "out of memory loading the trace");
            return -1;
        }
        if (e > 0) {
            snprintf(err, errlen, "%s: event %llu has unknown op %d", s->path,
                     (unsigned long long)t->events, (int)ev.op);
            return -1;
        }
    }
}

/* What the first pass learns, kept in a small file per trace (the user's cache folder,
 * $XDG_CACHE_HOME/hctune/replay or ~/.cache/hctune/replay, named by the trace file's device,
 * inode, size and modification time), so that the next replay of the same trace (a search
 * replays it once per trial) reads the trace once per repeat, not once more. */
#define CACHE_MAGIC "HCRPASS1"
struct pass1 {
    char magic[8];
    uint64_t dev, ino, size, mtime_ns;
    uint64_t n_ops, n_slots, events, skipped, repaired, threads, max_tid, max_live_bytes,
        max_live_objects, n_sizes;
    uint64_t live_cap, size_ix_cap, size_cap, tid_cap, free_cap;
};

static int cache_name(const char *path, struct pass1 *h, char *name, size_t len)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CACHE_MAGIC, 8);
    h->dev = (uint64_t)st.st_dev;
    h->ino = (uint64_t)st.st_ino;
    h->size = (uint64_t)st.st_size;
    h->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[3072];
    if (xdg && *xdg)
        snprintf(dir, sizeof dir, "%s/hctune", xdg);
    else if (home && *home)
        snprintf(dir, sizeof dir, "%s/.cache/hctune", home);
    else
        return -1;
    strncat(dir, "/replay", sizeof dir - strlen(dir) - 1);
    for (char *c = dir + 1; *c; c++)      /* mkdir -p */
        if (*c == '/') {
            *c = 0;
            mkdir(dir, 0755);
            *c = '/';
        }
    mkdir(dir, 0755);
    snprintf(name, len, "%s/%016llx-%016llx-%016llx-%016llx.pass1", dir,
             (unsigned long long)h->dev, (unsigned long long)h->ino,
             (unsigned long long)h->size, (unsigned long long)h->mtime_ns);
    return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

/* The first pass's results from the cache into s and t: 1 when found, 0 when not. */
static int cache_load(struct hcr_stream *s, struct hcr_trace *t, const struct pass1 *want,
                      const char *name)
{
    struct pass1 h;
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int ok = read_all(fd, &h, sizeof h) == 0 && memcmp(&h, want, offsetof(struct pass1, n_ops)) == 0
             && h.n_sizes <= HCR_ARG_LIMIT;
    struct loader *L = &s->L;
    if (ok) {
        while (ok && t->sizes_cap < h.n_sizes)
            ok = grow((void **)&t->sizes, &t->sizes_cap, sizeof *t->sizes) == 0;
        while (ok && t->aligns_cap < h.n_sizes)
            ok = grow((void **)&t->aligns, &t->aligns_cap, 1) == 0;
        ok = ok && read_all(fd, t->sizes, h.n_sizes * sizeof *t->sizes) == 0 &&
             read_all(fd, t->aligns, h.n_sizes) == 0;
    }
    close(fd);
    if (!ok)
        return 0;
    t->n_sizes = h.n_sizes;
    ptab_free(&L->live);
    ptab_free(&L->size_ix);
    if (ptab_init(&L->live, h.live_cap) || ptab_init(&L->size_ix, h.size_ix_cap))
        return 0;
    for (size_t i = 0; i < t->n_sizes; i++) {
        uint64_t key = ((t->sizes[i] & ((1ull << 56) - 1)) | (uint64_t)t->aligns[i] << 56) + 1;
        if (ptab_put(&L->size_ix, key << 4 | key >> 60, (uint32_t)i))
            return 0;
    }
    L->size_cap = h.size_cap;
    L->tid_cap = h.tid_cap;
    L->free_cap[0] = h.free_cap;
    if ((h.size_cap && !(L->slot_size = hcr_map(h.size_cap * sizeof *L->slot_size))) ||
        (h.tid_cap && !(L->tid_seen = hcr_map(h.tid_cap))) ||
        (h.free_cap && !(L->free_ids[0] = hcr_map(h.free_cap * sizeof(uint32_t)))))
        return 0;
    t->n_ops = h.n_ops;
    t->n_slots = h.n_slots;
    t->events = h.events;
    t->skipped = h.skipped;
    t->repaired = h.repaired;
    t->threads = h.threads;
    t->max_tid = (uint32_t)h.max_tid;
    t->max_live_bytes = h.max_live_bytes;
    t->max_live_objects = h.max_live_objects;
    return 1;
}

static void cache_store(const struct hcr_stream *s, const struct hcr_trace *t,
                        const struct pass1 *key, const char *name)
{
    struct pass1 h = *key;
    const struct loader *L = &s->L;
    h.n_ops = t->n_ops;
    h.n_slots = t->n_slots;
    h.events = t->events;
    h.skipped = t->skipped;
    h.repaired = t->repaired;
    h.threads = t->threads;
    h.max_tid = t->max_tid;
    h.max_live_bytes = t->max_live_bytes;
    h.max_live_objects = t->max_live_objects;
    h.n_sizes = t->n_sizes;
    h.live_cap = L->live.cap;
    h.size_ix_cap = L->size_ix.cap;
    h.size_cap = L->size_cap;
    h.tid_cap = L->tid_cap;
    h.free_cap = L->free_cap[0];
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d", name, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    int ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h &&
             write(fd, t->sizes, t->n_sizes * sizeof *t->sizes) ==
                 (ssize_t)(t->n_sizes * sizeof *t->sizes) &&
             write(fd, t->aligns, t->n_sizes) == (ssize_t)t->n_sizes;
    close(fd);
    if (!ok || rename(tmp, name) != 0)
        unlink(tmp);
}

struct hcr_stream *hcr_stream_open(const char *path, struct hcr_trace *t, char *err,
                                   size_t errlen)
{
    memset(t, 0, sizeof *t);
    struct hcr_stream *s = hcr_map(sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory loading %s", path);
        return NULL;
    }
    snprintf(s->path, sizeof s->path, "%s", path);
    if (!(s->r = hct_open(path, err, errlen))) {
        hcr_unmap(s, sizeof *s);
        return NULL;
    }
    const char *cmd = hct_command(s->r);
    snprintf(t->command, sizeof t->command, "%s", cmd ? cmd : "");
    s->L = (struct loader){.t = t, .mode = 1};
    if (ptab_init(&s->L.live, 1 << 16) || ptab_init(&s->L.size_ix, 1 << 10)) {
        snprintf(err, errlen, "out of memory loading %s", path);
        return NULL;
    }
    struct pass1 key;
    char name[4096];
    int cached = !getenv("HCREPLAY_NO_CACHE") && cache_name(path, &key, name, sizeof name) == 0;
    if (!cached || !cache_load(s, t, &key, name)) {
        if (stream_events(s, t, 0, err, errlen))
            return NULL;
        if (cached)
            cache_store(s, t, &key, name);
    }
    hct_close(s->r);
    s->r = NULL;
    if (t->n_ops == 0) {
        snprintf(err, errlen, "%s: the trace has no allocations to replay", path);
        return NULL;
    }
    s->n_slots = t->n_slots;
    s->L.chunk = hcr_map(HCR_STREAM_CHUNK * sizeof *s->L.chunk);
    if (!s->L.chunk) {
        snprintf(err, errlen, "out of memory loading %s", path);
        return NULL;
    }
    /* the tables keep their size; touch them now so that no repeat faults them in */
    memset(s->L.live.keys, 0, s->L.live.cap * sizeof *s->L.live.keys);
    return s;
}

int hcr_stream_rewind(struct hcr_stream *s, struct hcr_trace *t, char *err, size_t errlen)
{
    if (s->r)
        hct_close(s->r);
    if (!(s->r = hct_open(s->path, err, errlen)))
        return -1;
    struct loader *L = &s->L;
    memset(L->live.keys, 0, L->live.cap * sizeof *L->live.keys);
    L->live.n = 0;
    memset(L->n_free, 0, sizeof L->n_free);
    if (L->tid_seen)
        memset(L->tid_seen, 0, L->tid_cap);
    L->live_bytes = L->live_objects = 0;
    L->cur = 0;
    L->mode = 2;
    L->chunk_n = 0;
    t->n_slots = 0;
    t->events = t->skipped = t->repaired = t->threads = 0;
    t->n_ops = 0;
    return 0;
}

long hcr_stream_next(struct hcr_stream *s, struct hcr_trace *t, const struct hcr_rop **ops,
                     char *err, size_t errlen)
{
    s->L.chunk_n = 0;
    if (stream_events(s, t, HCR_STREAM_CHUNK, err, errlen))
        return -1;
    *ops = s->L.chunk;
    return (long)s->L.chunk_n;
}

size_t hcr_stream_slots(const struct hcr_stream *s) { return s->n_slots; }

/* ---- the ops cache: a loaded trace kept as its ops ----
 *
 * Decoding a trace into ops costs more than replaying it once (jq's 4.3 M events: ~0.75 s of
 * CPU to load, ~0.4 s to replay on glibc), and a search replays the same trace once per trial.
 * So the first whole load writes its ops, size table and figures to a file beside the first
 * pass's (same folder, same key: the trace's device, inode, size and modification time; 8
 * bytes an op), and later loads read them back; a part (--ops) reads only its first ops.
 * HCREPLAY_NO_CACHE=1 turns it off; a file that does not read back whole is ignored. */
#define OPS_MAGIC "HCROPS02"  /* 02: the clock's ticks after the threads */
struct opsh {
    char magic[8];
    uint64_t dev, ino, size, mtime_ns, threaded;
    uint64_t n_ops, n_sizes, n_slots, events, skipped, repaired, threads, max_tid,
        max_live_bytes, max_live_objects, has_op_thread, n_ticks;
    char command[512];
};

static int ops_cache_name(const char *path, int threaded, struct opsh *h, char *name,
                          size_t len)
{
    struct pass1 key;
    char base[4200];
    if (getenv("HCREPLAY_NO_CACHE") || cache_name(path, &key, base, sizeof base))
        return -1;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, OPS_MAGIC, 8);
    h->dev = key.dev;
    h->ino = key.ino;
    h->size = key.size;
    h->mtime_ns = key.mtime_ns;
    h->threaded = (uint64_t)threaded;
    size_t n = strlen(base);
    if (n > 6 && !strcmp(base + n - 6, ".pass1"))
        base[n - 6] = 0;
    snprintf(name, len, "%s%s", base, threaded ? ".ops-threaded" : ".ops");
    return 0;
}

/* 1 when the ops came from the cache (a part: its first hcr_load_max_ops), 0 when not. */
static int ops_cache_load(const char *name, const struct opsh *want, struct hcr_trace *t)
{
    struct opsh h;
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (read_all(fd, &h, sizeof h) || memcmp(h.magic, want->magic, 8) || h.dev != want->dev ||
        h.ino != want->ino || h.size != want->size || h.mtime_ns != want->mtime_ns ||
        h.threaded != want->threaded || h.n_ops == 0) {
        close(fd);
        return 0;
    }
    size_t n = (size_t)h.n_ops;
    int part = hcr_load_max_ops && hcr_load_max_ops < n;
    if (part)
        n = hcr_load_max_ops;
    memset(t, 0, sizeof *t);
    t->ops = hcr_map(n * sizeof *t->ops);
    t->sizes = hcr_map((size_t)h.n_sizes * sizeof *t->sizes);
    t->aligns = hcr_map((size_t)h.n_sizes);
    t->op_thread = h.has_op_thread ? hcr_map(n) : NULL;
    off_t sizes_at = (off_t)(sizeof h + h.n_ops * sizeof *t->ops);
    off_t thread_at = sizes_at + (off_t)(h.n_sizes * (sizeof *t->sizes + 1));
    int ok = t->ops && t->sizes && t->aligns && (!h.has_op_thread || t->op_thread) &&
             !read_all(fd, t->ops, n * sizeof *t->ops) &&
             lseek(fd, sizes_at, SEEK_SET) == sizes_at &&
             !read_all(fd, t->sizes, (size_t)h.n_sizes * sizeof *t->sizes) &&
             !read_all(fd, t->aligns, (size_t)h.n_sizes) &&
             (!h.has_op_thread || (lseek(fd, thread_at, SEEK_SET) == thread_at &&
                                   !read_all(fd, t->op_thread, n)));
    /* the clock's ticks (a part: those within its ops) */
    size_t nt = (size_t)h.n_ticks;
    off_t ticks_at = thread_at + (off_t)(h.has_op_thread ? h.n_ops : 0);
    if (ok && nt) {
        t->ticks = hcr_map(nt * sizeof *t->ticks);
        ok = t->ticks && lseek(fd, ticks_at, SEEK_SET) == ticks_at &&
             !read_all(fd, t->ticks, nt * sizeof *t->ticks);
        if (ok) {
            t->ticks_cap = nt;
            while (nt && t->ticks[nt - 1].op > n)
                nt--;
            t->n_ticks = nt;
        }
    }
    close(fd);
    if (!ok) {
        hcr_unmap(t->ops, n * sizeof *t->ops);
        hcr_unmap(t->sizes, (size_t)h.n_sizes * sizeof *t->sizes);
        hcr_unmap(t->aligns, (size_t)h.n_sizes);
        hcr_unmap(t->op_thread, h.has_op_thread ? n : 0);
        hcr_unmap(t->ticks, t->ticks ? (size_t)h.n_ticks * sizeof *t->ticks : 0);
        memset(t, 0, sizeof *t);
        return 0;
    }
    t->n_ops = t->ops_cap = n;
    t->n_sizes = t->sizes_cap = t->aligns_cap = (size_t)h.n_sizes;
    t->op_thread_cap = h.has_op_thread ? n : 0;
    t->n_slots = (size_t)h.n_slots;
    t->events = part ? n : h.events;  /* a part: about one event an op */
    t->skipped = h.skipped;
    t->repaired = h.repaired;
    t->threads = h.threads;
    t->max_tid = (uint32_t)h.max_tid;
    t->max_live_bytes = h.max_live_bytes;
    t->max_live_objects = h.max_live_objects;
    memcpy(t->command, h.command, sizeof t->command);
    t->command[sizeof t->command - 1] = 0;
    hcr_load_stopped = part;
    return 1;
}

static int write_all(int fd, const void *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = write(fd, (const char *)buf + done, n - done);
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

static void ops_cache_store(const char *name, const struct opsh *key,
                            const struct hcr_trace *t)
{
    struct opsh h = *key;
    h.n_ops = t->n_ops;
    h.n_sizes = t->n_sizes;
    h.n_slots = t->n_slots;
    h.events = t->events;
    h.skipped = t->skipped;
    h.repaired = t->repaired;
    h.threads = t->threads;
    h.max_tid = t->max_tid;
    h.max_live_bytes = t->max_live_bytes;
    h.max_live_objects = t->max_live_objects;
    h.has_op_thread = t->op_thread != NULL;
    h.n_ticks = t->n_ticks;
    memcpy(h.command, t->command, sizeof h.command);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.%d", name, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    int ok = !write_all(fd, &h, sizeof h) &&
             !write_all(fd, t->ops, t->n_ops * sizeof *t->ops) &&
             !write_all(fd, t->sizes, t->n_sizes * sizeof *t->sizes) &&
             !write_all(fd, t->aligns, t->n_sizes) &&
             (!t->op_thread || !write_all(fd, t->op_thread, t->n_ops)) &&
             (!t->n_ticks || !write_all(fd, t->ticks, t->n_ticks * sizeof *t->ticks));
    close(fd);
    if (!ok || rename(tmp, name) != 0)
        unlink(tmp);
}

/* The ops from the cache, with the reader's buffers made and freed through the allocator under
 * test as a load from the trace would (one event read), so every replay starts from the same
 * heap; 1 when found. */
static int from_cache(const char *path, const char *name, const struct opsh *key,
                      struct hcr_trace *t)
{
    if (!ops_cache_load(name, key, t))
        return 0;
    char err[256];
    hct_reader *r = hct_open(path, err, sizeof err);
    if (r) {
        hct_event ev;
        hct_next(r, &ev);
        hct_close(r);
    }
    return 1;
}

int hcr_load(const char *path, struct hcr_trace *t, int threaded, char *err, size_t errlen)
{
    struct opsh key;
    char name[4300];
    hcr_load_stopped = 0;
    if (ops_cache_name(path, threaded, &key, name, sizeof name) == 0) {
        if (from_cache(path, name, &key, t))
            return 0;
        /* not cached yet: decoded from the trace, and the cache written; main then runs the
           harness again so that the replay starts from the heap every later one has
           (decoding leaves glibc's heap and mmap threshold changed: up to 64 KiB more peak
           RSS on the test traces) */
        int rc = load_events(path, t, threaded, err, errlen);
        if (rc == 0 && !hcr_load_stopped) {
            ops_cache_store(name, &key, t);
            hcr_load_fresh = access(name, R_OK) == 0;
        }
        return rc;
    }
    return load_events(path, t, threaded, err, errlen); /* no cache: from the trace */
}
