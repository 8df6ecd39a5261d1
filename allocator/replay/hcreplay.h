/* hcreplay: replay a heap trace against whatever malloc the process is linked with (Hasan &
 * Chang 2006, §4.4: a driver calls malloc/realloc/free exactly as the program did, repeated,
 * with every unfreed block released between repeats).
 *
 * The trace is loaded once, before any timing, into a compact array of ops (8 bytes each) whose
 * objects are dense ids (slots), so the replay loop never hashes a pointer.  The harness keeps
 * its own memory (ops, slots) in mmap'd regions so that the allocator under test sees only
 * the program's requests. */
#ifndef HCREPLAY_H
#define HCREPLAY_H

#include <stddef.h>
#include <stdint.h>

enum hcr_op {
    HCR_MALLOC = 1,
    HCR_CALLOC,   /* size is n*size, asked as calloc(1, size) */
    HCR_REALLOC,  /* slot = realloc(slot, size); the object keeps its id */
    HCR_FREE,
    HCR_MEMALIGN, /* posix_memalign(&slot, 1 << align_log2, size): size and alignment in the
                     table (hcr_trace.sizes, .aligns) */
    /* the first three again, with a size of 2^24 bytes or more: the size is in the table */
    HCR_MALLOC_BIG,
    HCR_CALLOC_BIG,
    HCR_REALLOC_BIG,
};

/* Most OS threads a threaded replay uses: recorded thread 0 (the first that allocated, the
 * main thread) is replayed on the main thread, others on their own thread; beyond this many,
 * recorded threads share replay threads (each keeping its order: see hcreplay_threads.c). */
#define HCR_MAX_THREADS 64

/* One replayed call in 8 bytes, so a trace of a billion events replays in 8 GB (it took 16 and
 * a byte): the slot, and a word whose low byte is the op and whose upper 24 bits are its size
 * (malloc, calloc, realloc below 16 MiB: nearly every call) or the index of its (size,
 * alignment) in the table hcr_trace.sizes/aligns (memalign, and the _BIG ops).  Decoding costs
 * the loop one shift over plain fields (tests/test_replay_overhead.py bounds its instructions
 * per op).  A threaded replay keeps each op's turn (wait, hand) in a byte beside it
 * (hcreplay_threads.c). */
struct hcr_rop {
    uint32_t slot;          /* dense object id */
    uint32_t w;             /* op (low byte), size or table index (upper 24 bits) */
};
#define HCR_ARG_SHIFT 8
#define HCR_ARG_LIMIT (1u << 24)      /* sizes below this sit in the op; also the table's limit */

/* The op: the word's low byte, read as a byte (little-endian), so dispatching loads no more */
static inline unsigned hcr_kind(const struct hcr_rop *r) { return *(const uint8_t *)&r->w; }
static inline uint32_t hcr_arg(struct hcr_rop r) { return r.w >> HCR_ARG_SHIFT; }

/* The trace's clock (a trace with flags.CLOCK or TIME): from op `op` on, the trace's time is
 * `ns` (since it started); one tick wherever the time moved on by the clock's quantum, so a
 * trace of an hour holds at most 360,000.  Loaded with the ops (hcr_load; not streamed). */
struct hcr_tick {
    uint64_t op, ns;
};

struct hcr_trace {
    struct hcr_rop *ops;
    size_t n_ops;
    uint64_t *sizes;         /* the table: sizes of memalign and _BIG ops */
    uint8_t *aligns;         /* and log2 of their alignments (memalign's; else 0) */
    size_t n_sizes;
    uint8_t *op_thread;      /* threaded loads with more than one replay thread: each op's */
    size_t n_slots;          /* most objects live at once: the slot array's length */
    uint64_t max_live_bytes; /* most requested bytes live at once (trace order) */
    uint64_t max_live_objects;
    uint64_t events;         /* events read from the trace */
    uint64_t skipped;        /* frees/reallocs of pointers the trace never allocated */
    uint64_t repaired;       /* an address handed out again while still live: implicit free */
    uint64_t threads;        /* distinct thread ids seen */
    uint32_t max_tid;        /* largest recorded thread id */
    struct hcr_tick *ticks;  /* the clock (none: n_ticks 0) */
    size_t n_ticks, ticks_cap;
    size_t ops_cap, sizes_cap, aligns_cap, op_thread_cap; /* mapped lengths (elements) */
    char command[512];
};

/* The bytes the loaded trace takes in memory (ops and the size table). */
static inline uint64_t hcr_trace_bytes(const struct hcr_trace *t)
{
    return (uint64_t)t->n_ops * (sizeof *t->ops + (t->op_thread ? 1 : 0)) +
           (uint64_t)t->n_sizes * (sizeof *t->sizes + sizeof *t->aligns);
}

/* The replay thread of recorded thread tid: itself below HCR_MAX_THREADS, else shared by
 * round robin among threads 1.. (0 stays the main thread's alone). */
static inline unsigned hcr_replay_thread(uint64_t tid)
{
    return tid < HCR_MAX_THREADS ? (unsigned)tid
                                 : 1 + (unsigned)((tid - 1) % (HCR_MAX_THREADS - 1));
}

/* Load TRACE through the C reader (build/libhctrace_read.a).  0 on success, else -1 with a
 * one-line message in err.  threaded: also record each op's replay thread (op_thread, made when
 * a second one appears), and
 * recycle a freed slot only on the thread that freed it, so a slot's reuse never makes one
 * thread wait for another that the program did not (single-thread traces load the same either
 * way). */
int hcr_load(const char *path, struct hcr_trace *t, int threaded, char *err, size_t errlen);
/* A part of the trace (hcreplay --ops): hcr_load stops reading once it has this many ops
 * (0: the whole trace) and sets hcr_load_stopped when events were left unread; then the
 * trace's figures (max live, slots, threads) are the part's. */
extern size_t hcr_load_max_ops;
extern int hcr_load_stopped;
/* hcr_load decoded the trace and wrote the ops cache (hcreplay_load.c): the next load of it
 * reads the cache */
extern int hcr_load_fresh;

/* Streamed replay, for traces whose ops would not fit in memory (hcreplay_load.c): open = a
 * first pass that fills t (command, n_slots, the size table, max live; not ops); each repeat
 * rewinds, then takes the ops a chunk at a time (at most HCR_STREAM_CHUNK; 0 at the end, -1 and
 * err on a bad trace) and replays them with hcr_replay_ops. */
#define HCR_STREAM_CHUNK (64u * 1024)
#define HCR_STREAM_ABOVE (2ull << 30)   /* --stream auto: ops bytes above which to stream */
struct hcr_stream;
struct hcr_stream *hcr_stream_open(const char *path, struct hcr_trace *t, char *err,
                                   size_t errlen);
int hcr_stream_rewind(struct hcr_stream *s, struct hcr_trace *t, char *err, size_t errlen);
long hcr_stream_next(struct hcr_stream *s, struct hcr_trace *t, const struct hcr_rop **ops,
                     char *err, size_t errlen);
size_t hcr_stream_slots(const struct hcr_stream *s);
/* Replay ops[0..n) against slots[], freeing nothing else; failed allocations. */
uint64_t hcr_replay_ops(const struct hcr_trace *t, const struct hcr_rop *ops, size_t n,
                        void **slots, int touch);

/* Replay every op once against slots[] (n_slots long, all NULL on entry), then free what is
 * still live so that slots[] is all NULL again.  touch: write one byte in every 4 KiB page of
 * every new block, as the program would.  Returns the number of failed allocations. */
uint64_t hcr_replay_once(const struct hcr_trace *t, void **slots, int touch);

/* Threaded replay (hcreplay_threads.c): each recorded thread's ops on its own thread, in
 * recorded order; an op on a slot whose previous op was another thread's waits for it. */
struct hcr_mt;
/* Split a threaded load into per-thread streams with their hand-offs; NULL if out of memory. */
struct hcr_mt *hcr_mt_prepare(const struct hcr_trace *t);
unsigned hcr_mt_threads(const struct hcr_mt *mt);     /* OS threads the replay uses */
uint64_t hcr_mt_handoffs(const struct hcr_mt *mt);    /* ops that wait for another thread */
/* Create and end the worker threads once, so that later repeats reuse their stacks (and the
 * first repeat's peak RSS is the allocator's, not new thread stacks'). */
int hcr_mt_prime(const struct hcr_mt *mt);
/* One repeat on threads, then free what is still live (as hcr_replay_once); wall and CPU time
 * (all threads) of it in *wall_ns, *cpu_ns.  Returns failed allocations, or UINT64_MAX when a
 * thread could not be created. */
uint64_t hcr_mt_replay_once(struct hcr_mt *mt, void **slots, int touch, uint64_t *wall_ns,
                            uint64_t *cpu_ns);

/* Anonymous memory for the harness itself, never from malloc; zero-filled and pre-faulted. */
void *hcr_map(size_t bytes);
void hcr_unmap(void *p, size_t bytes);

/* The RSS curve of the first repeat: the replay loop (and a threaded replay's busiest thread)
 * stops every `every` ops to read the RSS (hcr_curve_sample), so the time-weighted mean RSS of
 * the program can be told apart from its peak; the trace's op order is the clock, so an
 * allocator's own speed does not weigh its samples.  every == 0: off (later repeats). */
struct hcr_curve {
    uint64_t every;     /* ops between samples */
    uint64_t base;      /* RSS before the repeat (bytes): the samples count above it */
    uint64_t ops;       /* ops the samples stand for */
    uint64_t samples;
    double sum;         /* sum of (RSS over base) x ops it stands for */
    /* with the trace's clock (single-thread replays of a clocked trace), the mean is over the
     * trace's time instead: between two samples the RSS is taken as moving linearly with the
     * ops, and each stretch of time between ops weighs the RSS of that point (so an idle phase
     * weighs the heap the program held through it, however few its ops) */
    const struct hcr_tick *ticks;
    size_t n_ticks, next_tick;
    uint64_t pos;       /* ops replayed so far (the trace's op index) */
    double prev_rss;    /* the previous sample (over base) */
    double area;        /* sum of RSS over base x ns */
    uint64_t span_ns;   /* the trace's time the ticks covered */
    uint64_t max;       /* the largest sample (over base) and the ops replayed when it was read */
    uint64_t max_at;
};
extern struct hcr_curve hcr_curve;

/* Bounds a search gives a replay that may already have lost (--max-rss, --max-cpu-seconds):
 * checked at every RSS sample of the first repeat and after every repeat; passing one ends the
 * process at once with exit status HCR_PRUNED_EXIT and one JSON line saying which and where
 * (hcr_bound_exceeded).  0: no bound. */
#define HCR_PRUNED_EXIT 3
struct hcr_bound {
    uint64_t max_rss;      /* bytes of RSS over the baseline */
    uint64_t max_cpu_ns;   /* process CPU time since the first repeat began */
    uint64_t cpu_start;    /* process CPU time then (set by hcr_bound_start) */
};
extern struct hcr_bound hcr_bound;
void hcr_bound_start(void);
/* Check the bounds against `rss_over_base` (bytes) after `ops_done` ops; never returns when one
 * is passed. */
void hcr_bound_check(uint64_t rss_over_base, uint64_t ops_done);
/* One sample standing for the `ops` ops just replayed (reads /proc/self/statm, no malloc). */
void hcr_curve_sample(uint64_t ops);
/* The mean RSS over base of the curve so far: time-weighted when the clock covered some time
 * (*by_time = 1), else weighted by ops; -1 with no sample. */
double hcr_curve_mean(int *by_time);

/* Resident memory of this process, from /proc/self/status (bytes; 0 if unreadable). */
uint64_t hcr_vm_rss(void);
uint64_t hcr_vm_hwm(void);
/* Reset VmHWM to the current VmRSS (/proc/self/clear_refs "5"); 0 on success. */
int hcr_reset_hwm(void);

/* Output into a fixed buffer (stdio would malloc through the allocator under test), written
 * to stdout by hcr_flush (hcreplay_out.c). */
void hcr_put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hcr_flush(void);
void hcr_put_clear(void);   /* drop what was put and not yet written */

/* --explain (hcreplay_explain.c): replay once in recorded order, stop at the trace's peak of
 * live bytes and print, as one JSON object, the RSS there split into its parts from the
 * allocator's own statistics, and the curve of live bytes and RSS over the run.  Exit code. */
int hcr_explain(const char *path, const struct hcr_trace *t, void **slots, int touch);

#endif
