/* hctrace_preload.c — the LD_PRELOAD tracer (build/libhctrace.so).
 *
 *   HCTRACE_OUT=app.hct LD_PRELOAD=build/libhctrace.so ./app args
 *   (HCTRACE_TIME=1 adds an exact time stamp to every event; without it every chunk carries the
 *    coarse time of its first event and spans at most HCT_CLOCK_QUANTUM_NS: the trace's clock;
 *    HCTRACE_CLOCK=0 leaves it out)
 *   (HCTRACE_SUMMARY=1 also writes <trace>.sum at exit: the calls and bytes counted while
 *    recording, which `hctune profile` prints instead of reading the trace again)
 *   (HCTRACE_START_AFTER=S HCTRACE_DURATION=S record only a window of the run, see below)
 *
 * Records every malloc, calloc, realloc, reallocarray, free and memalign-family call of a
 * dynamically linked program in the hctune trace format (docs/trace-format.md).  Like
 * heaptrack's preload library it only records: each hook is resolved once with
 * dlsym(RTLD_NEXT), dlsym's own bootstrap calloc is served from a small static pool, a
 * thread-local guard passes our own (and libc's nested) calls straight through, and output goes
 * through a fixed per-thread buffer written with one writev(2) per chunk (no stdio, no malloc).
 *
 * Global order across threads: every event takes a number from one process-wide counter (a
 * plain increment while glibc says the process is single-threaded).  free takes its number
 * BEFORE the real free, allocations AFTER the real call, so an address freed by one thread and
 * handed to another is always seen freed first.  Each thread's buffer becomes one chunk; the
 * file is O_APPEND, so chunks of different threads never interleave inside each other, and the
 * readers merge them by sequence number.
 *
 * Files: the first process writes $HCTRACE_OUT (default hctrace.hct); any process that finds
 * it taken (a forked child, an exec'd program) writes $HCTRACE_OUT.<pid>, then
 * $HCTRACE_OUT.<pid>.<n>.  Buffers are flushed when a thread exits (a pthread key destructor),
 * at exit (destructor + atexit), before exec and _exit, and a forked child drops the copy of its
 * parent's unflushed buffer (the parent writes those events) and opens its own file.
 *
 * Crashes and threads still running at exit: every thread's buffer is in a registry
 * (g_bufs).  At exit, and when the process dies of a fatal signal (SIGSEGV, SIGBUS, SIGABRT,
 * SIGFPE, SIGILL, and SIGTERM or SIGINT left at their default), the thread that ends it stops every other thread from recording (g_stop,
 * made visible to them by membarrier(2): their hooks pay no atomic instruction for it), waits
 * for those in the middle of recording an event to finish it, and writes all buffers.  The signal handlers are ours
 * from start-up, on an alternate stack (a stack overflow still gets its trace written); a
 * program that installs its own handler for one of these signals (sigaction/signal, wrapped
 * below) keeps it: our handler calls it, and writes the trace only when the program's action is
 * the default one, which is then restored and the signal raised again, so the process ends
 * with the same status (and core dump) as without the tracer.  Everything on those paths is
 * async-signal-safe (writev, open, fstat, membarrier; no locks, no malloc).
 *
 * Windowed tracing (HCTRACE_START_AFTER and/or HCTRACE_DURATION, seconds, decimals allowed):
 * before the window the hooks record nothing but keep a table of the live blocks (address ->
 * size and alignment, in memory of the tracer's own mmap, behind one spin lock).  The first
 * hook that sees the start time pass (each thread looks at the clock every WINDOW_TICK calls)
 * writes, under that lock, one malloc (or memalign) event per live block, then switches to
 * recording and drops the table: the window's trace begins with the heap as it was, so its
 * frees of earlier blocks are known and its live bytes are right.  A hook that saw "before"
 * takes the lock and looks again, so no event falls between the table and the window.  After
 * DURATION the hooks pass everything through.  Children forked before the window inherit the
 * table; a child forked inside the window starts a file without its parent's blocks.
 * HCTRACE_SIGNAL=N (a signal number, e.g. 12 for SIGUSR2) opens the window when the process
 * gets signal N and shuts it at the second one (or DURATION after the first): the handler only
 * counts, the hooks act at their next look at the clock.  A program that installs its own
 * handler for N takes the signal back. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>
#include <time.h>
#include <unistd.h>

#include "hctrace.h"
#include "hctrace_enc.h"

static void *map_zalloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
#define HCT_MAP_ZALLOC(bytes) map_zalloc(bytes)
#define HCT_MAP_RELEASE(p, bytes) munmap((p), (bytes))
#include "hctrace_map.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define BUF_BYTES (32 * 1024)
#define PATH_MAX_LEN 4096
#define CMD_MAX 4000

extern char __libc_single_threaded;

/* ---- the real allocator, resolved once ---- */
/* The functions this library hooks, listed once (an X-macro): X(name, return type,
 * parameters, attributes).  Each gets a pointer real_<name> to the next definition, resolved
 * by init(); a new hook is one line here plus its definition below. */
#define HCT_HOOKS(X) \
    X(malloc, void *, (size_t), ) \
    X(free, void, (void *), ) \
    X(calloc, void *, (size_t, size_t), ) \
    X(realloc, void *, (void *, size_t), ) \
    X(reallocarray, void *, (void *, size_t, size_t), ) \
    X(posix_memalign, int, (void **, size_t, size_t), ) \
    X(aligned_alloc, void *, (size_t, size_t), ) \
    X(memalign, void *, (size_t, size_t), ) \
    X(valloc, void *, (size_t), ) \
    X(pvalloc, void *, (size_t), ) \
    X(execve, int, (const char *, char *const[], char *const[]), ) \
    X(execvpe, int, (const char *, char *const[], char *const[]), ) \
    X(fexecve, int, (int, char *const[], char *const[]), ) \
    X(_exit, void, (int), __attribute__((noreturn)))

#define HCT_REAL_POINTER(name, ret, params, attrs) static ret (*real_##name) params attrs;
HCT_HOOKS(HCT_REAL_POINTER)
#undef HCT_REAL_POINTER

enum { ST_NONE, ST_INIT, ST_READY, ST_OFF };
static _Atomic int g_state = ST_NONE;
static int g_fd = -1;
static unsigned g_flags;
static uint64_t g_seq;               /* the next event number (atomic when multi-threaded) */
static _Atomic uint32_t g_threads;   /* dense thread ids */
static uint64_t g_mono0;             /* CLOCK_MONOTONIC at start, for time_ns */
static pthread_key_t g_key;
static char g_out[PATH_MAX_LEN];
static dev_t g_dev;                  /* our file's identity, to notice a closed/reused fd */
static ino_t g_ino;

/* ---- windowed tracing (see the top of the file) ---- */
enum { WIN_BEFORE, WIN_RECORDING, WIN_AFTER };
#define WINDOW_TICK 16               /* calls between two looks at the clock, per thread */
static int g_windowed;               /* set once at start-up */
static _Atomic int g_win = WIN_RECORDING;
static uint64_t g_win_start_ns, g_win_end_ns;   /* since g_mono0; end 0 = until exit */
static uint64_t g_win_dur_ns;        /* the window's length when a signal opens it (0: open) */
static int g_toggle_sig;             /* HCTRACE_SIGNAL: the signal that opens, then shuts it */
static _Atomic int g_toggles;        /* how many times it came */
static int g_toggles_seen;           /* how many of them the hooks have acted on (the lock's) */
static uint64_t g_win_period_ns;     /* HCTRACE_PERIOD: a window of DURATION every PERIOD */
static uint64_t g_windows;           /* windows opened so far */
static _Atomic int g_win_lock;
static TLS uint32_t t_tick;

/* dlsym() calls calloc before real_calloc is known: serve it from here (never freed). */
static _Alignas(16) uint8_t g_pool[8192];
static size_t g_pool_used;

/* ---- the summary: counts kept while recording, written beside the trace at exit ----
 * `hctune profile` prints these instead of reading every event again after the program ends
 * (issue 23: profile's own work after the exit); the full statistics wait for the first
 * command that needs them.  Per thread, no atomics on the hot path; a thread that exits adds
 * its counts to g_done; the thread ending the process sums g_done and every live buffer. */
enum { C_OPS = 0, C_BYTES = 6, N_COUNTS };
static _Atomic uint64_t g_done[N_COUNTS];
static int g_summary;                /* HCTRACE_SUMMARY=1: write <trace>.sum (hctune profile does) */

/* ---- per-thread buffer ---- */
typedef struct tbuf {
    uint8_t data[BUF_BYTES];
    size_t len;
    hct_enc enc;
    uint32_t thread_plus1;  /* 0 = not yet numbered */
    int in_hook;            /* recursion guard */
    int in_init;
    int dead;               /* key destructor ran: flush after every event */
    int slot;               /* index in g_bufs + 1; 0 = not registered */
    int in_record;          /* inside record() or a flush of its own: the buffer is changing */
    _Atomic int claimed;    /* held by whoever flushes it from outside the thread, or at exit */
    uint64_t counts[N_COUNTS];  /* this thread's events counted as recorded (the summary) */
} tbuf;
static TLS tbuf t_buf;

/* ---- the registry of thread buffers, for exit and crash ---- */
#define MAX_BUFS 4096
static tbuf *_Atomic g_bufs[MAX_BUFS];
static volatile int g_stop;          /* set once by the thread ending the process */
static _Atomic int g_ending;         /* the first thread to end the process wins */
static _Atomic int g_scanning;       /* the ending thread is reading other threads' buffers */
static int g_membarrier;             /* 1: private expedited registered, 2: global, 0: none */
static pid_t g_pid;                  /* ours; another in a vfork child sharing our memory */

#define COMPILER_BARRIER() atomic_signal_fence(memory_order_seq_cst)

/* Mark the buffer busy; 0 when the process is ending (another thread writes the buffers now and
 * this one must not touch its own).  The ending thread's membarrier(2) orders the plain store
 * and load here against its own store to g_stop and load of in_record (an asymmetric fence:
 * the hot path pays only a compiler barrier). */
static inline int begin_own(tbuf *t)
{
    t->in_record = 1;
    COMPILER_BARRIER();
    if (unlikely(g_stop) && !t->dead) {
        __atomic_store_n(&t->in_record, 0, __ATOMIC_RELEASE);
        return 0;
    }
    return 1;
}

static inline void end_own(tbuf *t) { __atomic_store_n(&t->in_record, 0, __ATOMIC_RELEASE); }

static int in_pool(const void *p) { return (const uint8_t *)p >= g_pool && (const uint8_t *)p < g_pool + sizeof g_pool; }

static void *pool_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > sizeof g_pool - g_pool_used)
        return NULL;
    void *p = g_pool + g_pool_used;
    g_pool_used += n;
    return p;                           /* static storage: already zero for calloc */
}

static void say(const char *a, const char *b)
{
    /* stderr without stdio: we may be inside malloc */
    if (write(2, "hctrace: ", 9) < 0 || write(2, a, strlen(a)) < 0 || (b && write(2, b, strlen(b)) < 0))
        return;
    if (write(2, "\n", 1) < 0)
        return;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The trace's clock (flags.CLOCK): CLOCK_MONOTONIC_COARSE, a read of the vDSO's copy of the
 * kernel's tick (no system call, no TSC read), since the start; its resolution (a tick, 1-4 ms)
 * is under the quantum, which is all the clock promises. */
static uint64_t coarse_since_start(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return now > g_mono0 ? now - g_mono0 : 0;   /* the coarse clock lags the fine one */
}

static uint64_t next_seq(void)
{
    if (__libc_single_threaded)
        return g_seq++;
    return __atomic_fetch_add(&g_seq, 1, __ATOMIC_RELAXED);
}

/* ---- output ---- */

static void write_all(const struct iovec *iov, int n)
{
    /* Regular files in O_APPEND mode take a whole writev at once; loop only for the odd
     * partial write (disk full...) and give up on error rather than spin inside malloc. */
    struct iovec v[2];
    memcpy(v, iov, sizeof v[0] * (size_t)n);
    int i = 0;
    while (i < n) {
        ssize_t w = writev(g_fd, v + i, n - i);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        while (i < n && (size_t)w >= v[i].iov_len)
            w -= (ssize_t)v[i++].iov_len;
        if (i < n) {
            v[i].iov_base = (char *)v[i].iov_base + w;
            v[i].iov_len -= (size_t)w;
        }
    }
}

/* Programs close fds they do not know (e.g. before exec in a forked child); check the fd is
 * still our file before each chunk and reopen it by name if not, so we never write into a
 * file the program opened on the same number. */
static int fd_is_ours(void)
{
    struct stat st;
    if (g_fd >= 0 && fstat(g_fd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino)
        return 1;
    int fd = open(g_out, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_dev != g_dev || st.st_ino != g_ino) {
        if (fd >= 0)
            close(fd);
        g_fd = -1;
        return 0;
    }
    g_fd = fd;
    return 1;
}

static void flush(tbuf *t)
{
    if (t->len == 0 || g_fd < 0)
        return;
    if (!fd_is_ours()) {
        t->len = 0;
        hct_enc_reset(&t->enc);
        return;
    }
    uint8_t hdr[HCT_CHUNK_HEADER_MAX];
    size_t h = hct_enc_chunk_header(&t->enc, hdr, g_flags, t->thread_plus1 - 1, t->len);
    struct iovec iov[2] = {{hdr, h}, {t->data, t->len}};
    int saved = errno;
    write_all(iov, 2);
    errno = saved;
    t->len = 0;
    hct_enc_reset(&t->enc);
}

static void unregister(tbuf *t)
{
    if (t->slot) {
        atomic_store(&g_bufs[t->slot - 1], NULL);
        t->slot = 0;
    }
}

static void thread_done(void *arg)
{
    (void)arg;
    t_buf.in_hook++;
    /* a thread ending the process may be writing this buffer right now: wait for it */
    while (atomic_exchange(&t_buf.claimed, 1))
        ;
    if (begin_own(&t_buf)) {
        flush(&t_buf);
        end_own(&t_buf);
    }
    for (int i = 0; i < N_COUNTS; i++) {
        atomic_fetch_add(&g_done[i], t_buf.counts[i]);
        t_buf.counts[i] = 0;         /* its late events (other destructors) count again */
    }
    unregister(&t_buf);
    t_buf.dead = 1;
    atomic_store(&t_buf.claimed, 0);
    /* a thread ending the process may still hold a pointer to this buffer, which goes away
     * with the thread: let it finish reading first */
    while (atomic_load(&g_scanning))
        ;
    t_buf.in_hook--;
}

static void register_buf(tbuf *t)
{
    for (int i = 0; i < MAX_BUFS; i++) {
        tbuf *none = NULL;
        if (!atomic_load_explicit(&g_bufs[i], memory_order_relaxed) &&
            atomic_compare_exchange_strong(&g_bufs[i], &none, t)) {
            t->slot = i + 1;
            return;
        }
    }
    /* more than MAX_BUFS live threads: this one's events are written only as its buffer
     * fills and when it exits, not when another thread ends the process */
}


static void record(tbuf *t, uint8_t op, uint64_t seq, const void *ptr, const void *old,
                   size_t size, size_t align)
{
    if (!begin_own(t))
        return;
    if (unlikely(t->thread_plus1 == 0)) {
        t->thread_plus1 = atomic_fetch_add(&g_threads, 1) + 1;
        pthread_setspecific(g_key, (void *)1);   /* so thread_done runs at thread exit */
        if (!t->dead)
            register_buf(t);
    }
    uint64_t now;
    if (g_flags & HCT_FLAG_TIME) {
        now = mono_ns() - g_mono0;
    } else {
        /* the clock: a chunk whose first event is a quantum old is written first, so this
         * event opens a new chunk with its own time (an idle thread's next event included) */
        now = coarse_since_start();
        if (t->len && now - t->enc.base_time >= HCT_CLOCK_QUANTUM_NS)
            flush(t);
    }
    if (unlikely(t->len + HCT_MAX_EVENT_BYTES > sizeof t->data))
        flush(t);
    uint8_t *end = hct_enc_event(&t->enc, t->data + t->len, g_flags, op, seq,
                                 (uint64_t)(uintptr_t)ptr, (uint64_t)(uintptr_t)old, size, align,
                                 now);
    t->len = (size_t)(end - t->data);
    t->counts[C_OPS + op]++;
    t->counts[C_BYTES] += size;          /* a free's size is 0 */
    if (unlikely(t->dead))
        flush(t);
    end_own(t);
}

/* ---- windowed tracing ---- */

static hct_map g_live;               /* before the window: address -> size | log2(align) << 56 */
static int g_live_lost;              /* the table could not grow: the window would be wrong */

static void win_lock(void)
{
    while (atomic_exchange_explicit(&g_win_lock, 1, memory_order_acquire))
        while (atomic_load_explicit(&g_win_lock, memory_order_relaxed))
            __builtin_ia32_pause();
}

static void win_unlock(void) { atomic_store_explicit(&g_win_lock, 0, memory_order_release); }

#define SIZE_BITS 56
static void live_put(const void *p, size_t size, size_t align, int recorded)
{
    uint64_t v = (uint64_t)size & (((uint64_t)1 << SIZE_BITS) - 1);
    if (align)
        v |= (uint64_t)__builtin_ctzll(align) << SIZE_BITS;
    if (recorded)
        v |= (uint64_t)1 << 62;
    if (hct_map_put(&g_live, (uint64_t)(uintptr_t)p, v) < 0 && !g_live_lost) {
        g_live_lost = 1;
        say("out of memory for the table of live blocks: the window's trace will show frees "
            "of unknown blocks", NULL);
    }
}

/* The table's value: size (56 bits), log2 of the alignment (bits 56-61) and RECORDED (bit 62):
 * the block's allocation is in the trace already (it was allocated inside a window, or written
 * when one opened).  A block not recorded is written when the next window opens. */
#define RECORDED ((uint64_t)1 << 62)
#define SHIFT_MASK ((uint64_t)0x3f)

static void record_block(tbuf *t, uint64_t k, uint64_t v)
{
    uint64_t size = v & (((uint64_t)1 << SIZE_BITS) - 1);
    unsigned shift = (unsigned)((v >> SIZE_BITS) & SHIFT_MASK);
    record(t, shift ? HCT_MEMALIGN : HCT_MALLOC, next_seq(), (void *)(uintptr_t)k, NULL,
           (size_t)size, shift ? (size_t)1 << shift : 0);
}

/* Under the lock: every live block the trace does not have yet, as events (the heap as it is
 * when the window opens), each marked recorded. */
static void win_write_table_locked(void)
{
    for (size_t i = 0; i < g_live.cap; i++) {
        uint64_t k = g_live.keys[i];
        if (!k || (g_live.vals[i] & RECORDED))
            continue;
        record_block(&t_buf, k, g_live.vals[i]);
        g_live.vals[i] |= RECORDED;
    }
}

/* Under the lock: open a window. */
static void win_open_locked(uint64_t now)
{
    win_write_table_locked();
    if (g_win_dur_ns && !g_win_period_ns)
        __atomic_store_n(&g_win_end_ns, now + g_win_dur_ns, __ATOMIC_RELAXED);
    atomic_store_explicit(&g_win, WIN_RECORDING, memory_order_release);
    g_windows++;
}

/* Under the lock: shut the window; the table stays for the next one unless none can come. */
static void win_close_locked(void)
{
    if (g_toggle_sig || g_win_period_ns) {
        atomic_store_explicit(&g_win, WIN_BEFORE, memory_order_release);
        return;
    }
    hct_map_free(&g_live);
    atomic_store_explicit(&g_win, WIN_AFTER, memory_order_release);
}

/* What the state should be now: the clock (start, end, period) or the signals not yet taken
 * (each one flips it: it opens a shut window and shuts an open one). */
static int win_wanted(int w, uint64_t now, int take_signals)
{
    if (g_toggle_sig) {
        int toggles = atomic_load_explicit(&g_toggles, memory_order_relaxed);
        if (toggles != g_toggles_seen) {
            if (!take_signals)
                return -1;                /* something to do: look again under the lock */
            int flips = toggles - g_toggles_seen;
            g_toggles_seen = toggles;
            if (flips & 1)
                w = w == WIN_RECORDING ? WIN_BEFORE : WIN_RECORDING;
            if (w == WIN_RECORDING)
                return w;                 /* a signal just opened it: its duration starts now */
        }
        uint64_t end = __atomic_load_n(&g_win_end_ns, __ATOMIC_RELAXED);
        return w == WIN_RECORDING && end && now >= end ? WIN_BEFORE : w;
    }
    if (now < g_win_start_ns)
        return WIN_BEFORE;
    if (g_win_period_ns)                  /* time slices: dur of every period */
        return (now - g_win_start_ns) % g_win_period_ns < g_win_dur_ns ? WIN_RECORDING
                                                                       : WIN_BEFORE;
    return g_win_end_ns && now >= g_win_end_ns ? WIN_AFTER : WIN_RECORDING;
}

static void win_check_clock(void)
{
    int w = atomic_load_explicit(&g_win, memory_order_acquire);
    if (w == WIN_AFTER)
        return;
    uint64_t now = mono_ns() - g_mono0;
    if (win_wanted(w, now, 0) == w)
        return;
    win_lock();
    w = atomic_load_explicit(&g_win, memory_order_relaxed);
    int want = w == WIN_AFTER ? w : win_wanted(w, now, 1);
    if (want == WIN_RECORDING && w != WIN_RECORDING)
        win_open_locked(now);
    else if (want != WIN_RECORDING && w == WIN_RECORDING)
        win_close_locked();
    else if (want == WIN_AFTER && w == WIN_BEFORE) {
        hct_map_free(&g_live);
        atomic_store_explicit(&g_win, WIN_AFTER, memory_order_release);
    }
    win_unlock();
}

/* One allocator event in windowed mode.  Allocations come here after the real call, frees
 * before (as record).  Until no window can come any more, every event updates the table of live
 * blocks under the lock (so a window, and a child forked inside one, starts with the heap as it
 * is).  Inside a window the event is recorded; outside, only a free (or realloc) of a block
 * the trace has is, so that the trace stays the heap's history with the gaps' short-lived
 * blocks left out.  After the last window the hooks pass everything through. */
static void win_event(uint8_t op, const void *p, const void *old, size_t size, size_t align)
{
    if (unlikely(++t_tick >= WINDOW_TICK)) {
        t_tick = 0;
        win_check_clock();
    }
    if (atomic_load_explicit(&g_win, memory_order_acquire) == WIN_AFTER)
        return;
    win_lock();
    int w = atomic_load_explicit(&g_win, memory_order_relaxed);
    if (w == WIN_AFTER) {
        win_unlock();
        return;
    }
    uint64_t was = 0;
    int had = 0;
    if (op == HCT_FREE || op == HCT_REALLOC)
        had = hct_map_del(&g_live, (uint64_t)(uintptr_t)(op == HCT_FREE ? p : old), &was);
    if (op != HCT_FREE)
        live_put(p, size, op == HCT_MEMALIGN ? align : 0, w == WIN_RECORDING);
    if (w == WIN_RECORDING) {
        uint64_t seq = next_seq();        /* numbered under the lock: after the table */
        win_unlock();
        record(&t_buf, op, seq, p, old, size, align);
        return;
    }
    /* between windows: the trace learns only that a block it has went away */
    if (had && (was & RECORDED)) {
        uint64_t seq = next_seq();
        win_unlock();
        record(&t_buf, HCT_FREE, seq, op == HCT_FREE ? p : old, NULL, 0, 0);
        return;
    }
    win_unlock();
}

/* Every hook's event: the whole run, or the window. */
static inline void event(uint8_t op, const void *p, const void *old, size_t size, size_t align)
{
    if (likely(!g_windowed))
        record(&t_buf, op, next_seq(), p, old, size, align);
    else
        win_event(op, p, old, size, align);
}

/* "12", "0.5", "2.25" seconds -> ns; -1 for anything else.  No strtod: this runs in start-up,
 * possibly inside the program's first malloc. */
static int64_t parse_seconds(const char *s)
{
    if (!s || !*s)
        return -1;
    uint64_t whole = 0, frac = 0, scale = 1000000000u;
    const char *q = s;
    for (; *q >= '0' && *q <= '9'; q++) {
        whole = whole * 10 + (uint64_t)(*q - '0');
        if (whole > 100000000u)
            return -1;
    }
    if (*q == '.')
        for (q++; *q >= '0' && *q <= '9'; q++)
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*q - '0') * scale;
            }
    if (*q || q == s)
        return -1;
    return (int64_t)(whole * 1000000000u + frac);
}

static int is_fatal(int sig);

/* The signal that opens the window, then shuts it: only counted here (async-signal-safe); the
 * hooks act on it at their next look at the clock. */
static void on_toggle(int sig)
{
    (void)sig;
    atomic_fetch_add_explicit(&g_toggles, 1, memory_order_relaxed);
}

static void window_setup(void)
{
    const char *a = getenv("HCTRACE_START_AFTER"), *d = getenv("HCTRACE_DURATION");
    const char *g = getenv("HCTRACE_SIGNAL");
    if (g && *g) {
        int sig = 0;
        for (const char *q = g; *q >= '0' && *q <= '9' && sig < NSIG; q++)
            sig = sig * 10 + (*q - '0');
        int64_t dur = d && *d ? parse_seconds(d) : 0;
        if (sig <= 0 || sig >= NSIG || is_fatal(sig) || sig == SIGKILL || sig == SIGSTOP ||
            dur < 0) {
            say("HCTRACE_SIGNAL must be a signal number (e.g. 12 for SIGUSR2) and "
                "HCTRACE_DURATION seconds; tracing the whole run", NULL);
            return;
        }
        g_toggle_sig = sig;
        g_win_start_ns = UINT64_MAX;          /* only the signal opens it */
        g_win_dur_ns = (uint64_t)dur;
        g_windowed = 1;
        atomic_store(&g_win, WIN_BEFORE);
        return;
    }
    const char *pe = getenv("HCTRACE_PERIOD");
    if ((!a || !*a) && (!d || !*d))
        return;
    int64_t start = a && *a ? parse_seconds(a) : 0, dur = d && *d ? parse_seconds(d) : 0;
    int64_t period = pe && *pe ? parse_seconds(pe) : 0;
    if (start < 0 || dur < 0 || period < 0 || (period && (dur == 0 || period < dur))) {
        say("HCTRACE_START_AFTER / HCTRACE_DURATION / HCTRACE_PERIOD must be seconds (e.g. 30 "
            "or 0.5), PERIOD at least DURATION; tracing the whole run", NULL);
        return;
    }
    g_win_start_ns = (uint64_t)start;
    if (period) {                         /* time slices: DURATION of every PERIOD */
        g_win_period_ns = (uint64_t)period;
        g_win_dur_ns = (uint64_t)dur;
    } else {
        g_win_end_ns = dur ? (uint64_t)start + (uint64_t)dur : 0;
    }
    g_windowed = 1;
    g_windows = start > 0 ? 0 : 1;
    atomic_store(&g_win, start > 0 ? WIN_BEFORE : WIN_RECORDING);
}

/* ---- start-up ---- */

static size_t put_str(char *dst, size_t at, size_t cap, const char *s)
{
    while (*s && at + 1 < cap)
        dst[at++] = *s++;
    dst[at] = 0;
    return at;
}

static size_t put_uint(char *dst, size_t at, size_t cap, unsigned long v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10));
    while (n && at + 1 < cap)
        dst[at++] = tmp[--n];
    dst[at] = 0;
    return at;
}

/* Open this process's trace file without clobbering another process's (O_EXCL). */
static int open_output(void)
{
    const char *base = getenv("HCTRACE_OUT");
    if (!base || !*base)
        base = "hctrace" HCT_EXTENSION;
    pid_t pid = getpid();
    for (int n = -1; n < 1000; n++) {
        size_t at = put_str(g_out, 0, sizeof g_out, base);
        if (n >= 0) {
            at = put_str(g_out, at, sizeof g_out, ".");
            at = put_uint(g_out, at, sizeof g_out, (unsigned long)pid);
        }
        if (n >= 1) {
            at = put_str(g_out, at, sizeof g_out, ".");
            at = put_uint(g_out, at, sizeof g_out, (unsigned long)n);
        }
        int fd = open(g_out, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0) {
            g_dev = st.st_dev;
            g_ino = st.st_ino;
            return fd;
        }
        if (errno != EEXIST) {
            say("cannot create the trace file, not tracing: ", g_out);
            return -1;
        }
    }
    say("too many trace files already exist, not tracing: ", base);
    return -1;
}

static void write_header(void)
{
    static uint8_t hdr[HCT_COMMAND_OFFSET + CMD_MAX];
    static char cmd[CMD_MAX];
    size_t n = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t r;
        while (n < sizeof cmd && (r = read(fd, cmd + n, sizeof cmd - n)) > 0)
            n += (size_t)r;
        close(fd);
    }
    while (n > 0 && cmd[n - 1] == 0)
        n--;
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == 0)
            cmd[i] = ' ';
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    size_t len = hct_enc_file_header(hdr, sizeof hdr, g_flags, (uint32_t)getpid(),
                                     (uint32_t)getppid(),
                                     (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                                     cmd, n);
    struct iovec iov[1] = {{hdr, len}};
    write_all(iov, 1);
}

static void at_fork_child(void)
{
    /* The parent flushes the events in our copy of its buffer; we start our own file. */
    t_buf.len = 0;
    hct_enc_reset(&t_buf.enc);
    memset(t_buf.counts, 0, sizeof t_buf.counts);
    for (int i = 0; i < N_COUNTS; i++)
        atomic_store(&g_done[i], 0);
    /* the parent's other threads do not exist here: forget their buffers */
    for (int i = 0; i < MAX_BUFS; i++)
        atomic_store_explicit(&g_bufs[i], NULL, memory_order_relaxed);
    t_buf.slot = 0;
    atomic_store(&t_buf.claimed, 0);
    if (t_buf.thread_plus1 && !t_buf.dead)
        register_buf(&t_buf);
    g_stop = 0;
    atomic_store(&g_win_lock, 0);    /* only this thread exists now; the table is as it was
                                        (fork_prepare held the lock across the fork) */
    atomic_store(&g_ending, 0);
    atomic_store(&g_scanning, 0);
    g_pid = getpid();
    if (g_fd >= 0)
        close(g_fd);
    g_fd = open_output();
    if (g_fd >= 0) {
        g_mono0 = mono_ns();
        write_header();
    }
    /* windowed: the child's trace has none of its parent's blocks yet; inside a window it
     * starts with them (so the child's frees of them are known), between windows they wait in
     * the table for the next one, as every block does */
    if (g_windowed && atomic_load(&g_win) != WIN_AFTER) {
        for (size_t i = 0; i < g_live.cap; i++)
            g_live.vals[i] &= ~RECORDED;
        if (g_fd >= 0 && atomic_load(&g_win) == WIN_RECORDING && atomic_load(&g_state) == ST_READY)
            win_write_table_locked();
    }
    if (g_windowed)
        t_buf.in_hook--;                /* taken by fork_prepare */
}

/* Around fork: the table must not be copied in the middle of another thread's update.  The
 * forking thread's own allocator calls meanwhile (other libraries' fork handlers) pass straight
 * through (in_hook): they would wait for the lock this thread holds. */
static void fork_prepare(void)
{
    if (g_windowed) {
        t_buf.in_hook++;
        win_lock();
    }
}

static void fork_parent(void)
{
    if (g_windowed) {
        win_unlock();
        t_buf.in_hook--;
    }
}

/* ---- the end of the process: exit, or a fatal signal ---- */

static void pause_a_little(void)
{
    struct timespec ts = {0, 100000};   /* 0.1 ms; nanosleep is async-signal-safe */
    nanosleep(&ts, NULL);
}

/* Stop every other thread recording and write every buffer.  Called by the thread that ends
 * the process (exit, or the handler of a fatal signal); async-signal-safe. */
static void flush_here(void);

static const char *const k_count_name[N_COUNTS] = {
    "-", "malloc", "calloc", "realloc", "free", "memalign", "bytes_requested"};

/* <trace>.sum: "hctrace-summary 1" then one "name count" line per count (async-signal-safe:
 * open, write, no stdio).  Written again (truncated) each time the process-ending path runs. */
static void write_summary(void)
{
    if (!g_summary)
        return;
    uint64_t sum[N_COUNTS];
    for (int i = 0; i < N_COUNTS; i++)
        sum[i] = atomic_load(&g_done[i]);
    int self_seen = 0;
    for (int b = 0; b < MAX_BUFS; b++) {
        tbuf *t = atomic_load(&g_bufs[b]);
        if (!t)
            continue;
        self_seen |= t == &t_buf;
        for (int i = 0; i < N_COUNTS; i++)
            sum[i] += t->counts[i];
    }
    if (!self_seen)
        for (int i = 0; i < N_COUNTS; i++)
            sum[i] += t_buf.counts[i];
    static char name[PATH_MAX_LEN + 8], text[512];
    put_str(name, put_str(name, 0, sizeof name, g_out), sizeof name, ".sum");
    size_t at = put_str(text, 0, sizeof text, "hctrace-summary 1\n");
    for (int i = 1; i < N_COUNTS; i++) {
        at = put_str(text, at, sizeof text, k_count_name[i]);
        at = put_str(text, at, sizeof text, " ");
        at = put_uint(text, at, sizeof text, (unsigned long)sum[i]);
        at = put_str(text, at, sizeof text, "\n");
    }
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    for (size_t done = 0; done < at;) {
        ssize_t w = write(fd, text + done, at - done);
        if (w <= 0 && errno != EINTR)
            break;
        if (w > 0)
            done += (size_t)w;
    }
    close(fd);
}

static void write_all_buffers(void)
{
    tbuf *self = &t_buf;
    if (getpid() != g_pid) {
        /* a vfork child: the memory (and the other threads' buffers) is its parent's, which
         * goes on running; write only the buffer it shares, as before exec */
        flush_here();
        return;
    }
    self->in_hook++;
    if (!atomic_exchange(&g_ending, 1)) {
        int others = 0;
        for (int i = 0; i < MAX_BUFS && !others; i++) {
            tbuf *t = atomic_load(&g_bufs[i]);
            others = t && t != self;
        }
        if (others) {
            atomic_store(&g_scanning, 1);
            g_stop = 1;
            atomic_thread_fence(memory_order_seq_cst);
            if (g_membarrier == 1)
                syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
            else if (g_membarrier == 2)
                syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
            else
                pause_a_little();   /* no membarrier: let running threads see g_stop */
            for (int i = 0; i < MAX_BUFS; i++) {
                tbuf *t = atomic_load(&g_bufs[i]);
                if (!t || t == self)
                    continue;
                /* a thread in the middle of an event finishes it within microseconds; one
                 * that does not within ~0.2 s (stopped in a debugger...) keeps its events */
                for (int n = 0; n < 2000 && __atomic_load_n(&t->in_record, __ATOMIC_ACQUIRE); n++)
                    pause_a_little();
                if (__atomic_load_n(&t->in_record, __ATOMIC_ACQUIRE) ||
                    atomic_exchange(&t->claimed, 1))
                    continue;          /* claimed: the thread is exiting and writes its own */
                if (atomic_load(&g_bufs[i]) == t)
                    flush(t);
                atomic_store(&t->claimed, 0);
            }
            atomic_store(&g_scanning, 0);
        }
    }
    flush(self);
    int saved = errno;
    write_summary();
    errno = saved;
    unregister(self);
    self->dead = 1;          /* late frees from other destructors still reach the file */
    self->in_hook--;
}

static void at_exit_flush(void)
{
    if (atomic_load(&g_state) == ST_READY && g_fd >= 0)
        write_all_buffers();
}

/* The fatal signals: what the program asked for each (it never sees our handler).  SIGTERM
 * and SIGINT too: a server stopped by them (hctune profile --load stops it with TERM) that
 * leaves them at their default action still gets its trace written. */
static const int k_fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT};
static struct sigaction g_prog[NSIG];
static int g_handlers;               /* 1 once ours are installed */
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);

static int is_fatal(int sig)
{
    for (size_t i = 0; i < sizeof k_fatal / sizeof k_fatal[0]; i++)
        if (k_fatal[i] == sig)
            return 1;
    return 0;
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    struct sigaction *p = &g_prog[sig];
    if (p->sa_handler == SIG_IGN) {
        errno = saved;
        return;
    }
    if (p->sa_handler != SIG_DFL) {
        /* the program's own handler, as the kernel would have run it */
        struct sigaction h = *p;
        if (h.sa_flags & SA_RESETHAND) {
            p->sa_handler = SIG_DFL;
            p->sa_flags = 0;
        }
        /* the mask the kernel would have set: the interrupted code's, the handler's, sig */
        sigset_t mask, old;
        sigorset(&mask, &((ucontext_t *)uc)->uc_sigmask, &h.sa_mask);
        if (!(h.sa_flags & SA_NODEFER))
            sigaddset(&mask, sig);
        pthread_sigmask(SIG_SETMASK, &mask, &old);
        errno = saved;
        if (h.sa_flags & SA_SIGINFO)
            h.sa_sigaction(sig, si, uc);
        else
            h.sa_handler(sig);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return;
    }
    if (atomic_load(&g_state) == ST_READY && g_fd >= 0 && !t_buf.in_init)
        write_all_buffers();
    /* die of the same signal: default action, raised again (pending until we return; a fault
     * would also simply recur on return) */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    real_sigaction(sig, &dfl, NULL);
    raise(sig);
    errno = saved;
}

static void install_handlers(void)
{
    *(void **)&real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    if (!real_sigaction)
        return;
    /* an alternate stack for this (the main) thread, so a stack overflow is written too */
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_DISABLE)) {
        size_t n = 64 * 1024;
        void *mem = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem != MAP_FAILED) {
            stack_t ss = {.ss_sp = mem, .ss_size = n, .ss_flags = 0};
            sigaltstack(&ss, NULL);
        }
    }
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_fatal;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigfillset(&ours.sa_mask);
    for (size_t i = 0; i < sizeof k_fatal / sizeof k_fatal[0]; i++) {
        int sig = k_fatal[i];
        if (real_sigaction(sig, NULL, &g_prog[sig]) == 0 && g_prog[sig].sa_handler != SIG_IGN)
            real_sigaction(sig, &ours, NULL);
    }
    g_handlers = 1;
    if (g_toggle_sig) {
        struct sigaction tog;
        memset(&tog, 0, sizeof tog);
        tog.sa_handler = on_toggle;
        tog.sa_flags = SA_RESTART;
        sigemptyset(&tog.sa_mask);
        real_sigaction(g_toggle_sig, &tog, NULL);
    }
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
        g_membarrier = 1;
    else if (syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) > 0 &&
             (syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) & MEMBARRIER_CMD_GLOBAL))
        g_membarrier = 2;
}

/* The program's own handlers for the fatal signals are kept in g_prog, ours stays installed
 * (see the top of the file); other signals go straight through. */
EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!real_sigaction)
        *(void **)&real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    if (!g_handlers || !is_fatal(sig) || (act && act->sa_handler == SIG_IGN))
        return real_sigaction(sig, act, old);
    if (old)
        *old = g_prog[sig];
    if (act)
        g_prog[sig] = *act;
    return 0;
}

EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    if (sig > 0 && sig < NSIG)
        sigaddset(&act.sa_mask, sig);
    act.sa_flags = SA_RESTART;            /* glibc's signal(): BSD semantics */
    if (sigaction(sig, &act, &old) < 0)
        return SIG_ERR;
    return old.sa_handler;
}

#define RESOLVE(name) (*(void **)&real_##name = dlsym(RTLD_NEXT, #name))

static void init(void)
{
    int expected = ST_NONE;
    if (!atomic_compare_exchange_strong(&g_state, &expected, ST_INIT)) {
        while (atomic_load(&g_state) == ST_INIT && !t_buf.in_init)
            ;                 /* another thread is initialising: a few microseconds */
        return;
    }
    t_buf.in_init = 1;
#define HCT_RESOLVE_HOOK(name, ret, params, attrs) RESOLVE(name);
    HCT_HOOKS(HCT_RESOLVE_HOOK)
#undef HCT_RESOLVE_HOOK
    if (!real_malloc || !real_free || !real_calloc || !real_realloc) {
        say("cannot find the real malloc, not tracing", NULL);
        t_buf.in_init = 0;
        atomic_store(&g_state, ST_OFF);
        return;
    }
    /* Time stamps are opt-in: clock_gettime costs more than the rest of the hook together
     * on machines without a vDSO clock (docs/tracing.md has the numbers). */
    const char *tm = getenv("HCTRACE_TIME");
    const char *ck = getenv("HCTRACE_CLOCK");  /* 0: no clock (bench/servers/clock_cost.sh) */
    g_flags = (tm && tm[0] == '1') ? HCT_FLAG_TIME : (ck && ck[0] == '0') ? 0 : HCT_FLAG_CLOCK;
    const char *sm = getenv("HCTRACE_SUMMARY");
    g_summary = sm && sm[0] == '1';
    g_mono0 = mono_ns();
    g_pid = getpid();
    window_setup();
    g_fd = open_output();
    int ok = g_fd >= 0 && pthread_key_create(&g_key, thread_done) == 0;
    if (ok) {
        write_header();
        pthread_atfork(fork_prepare, fork_parent, at_fork_child);
        atexit(at_exit_flush);
        install_handlers();
    }
    t_buf.in_init = 0;
    atomic_store(&g_state, ok ? ST_READY : ST_OFF);
}

__attribute__((constructor)) static void hctrace_start(void)
{
    if (atomic_load(&g_state) == ST_NONE)
        init();
}

__attribute__((destructor)) static void hctrace_stop(void) { at_exit_flush(); }

/* Enter a hook: 1 = record this call (guard taken), 0 = pass it straight through. */
static inline int enter(void)
{
    if (unlikely(atomic_load_explicit(&g_state, memory_order_relaxed) != ST_READY)) {
        if (atomic_load(&g_state) == ST_NONE)
            init();
        if (atomic_load(&g_state) != ST_READY)
            return 0;
    }
    if (t_buf.in_hook)
        return 0;
    t_buf.in_hook = 1;
    return 1;
}
static inline void leave(void) { t_buf.in_hook = 0; }

/* ---- the hooks ---- */

EXPORT void *malloc(size_t n)
{
    if (unlikely(!real_malloc)) {
        init();
        if (!real_malloc)
            return pool_alloc(n);
    }
    if (!enter())
        return real_malloc(n);
    void *p = real_malloc(n);
    if (p)
        event(HCT_MALLOC, p, NULL, n, 0);
    leave();
    return p;
}

EXPORT void *calloc(size_t n, size_t m)
{
    if (unlikely(!real_calloc)) {
        if (atomic_load(&g_state) == ST_NONE)
            init();
        if (!real_calloc) {
            size_t b;
            return __builtin_mul_overflow(n, m, &b) ? NULL : pool_alloc(b);
        }
    }
    if (!enter())
        return real_calloc(n, m);
    void *p = real_calloc(n, m);
    if (p)
        event(HCT_CALLOC, p, NULL, n * m, 0);
    leave();
    return p;
}

EXPORT void free(void *p)
{
    if (!p || in_pool(p))
        return;
    if (unlikely(!real_free)) {
        init();
        if (!real_free)
            return;            /* cannot happen: no pointer exists before the first malloc */
    }
    if (!enter()) {
        real_free(p);
        return;
    }
    event(HCT_FREE, p, NULL, 0, 0);   /* before: see the header */
    leave();
    real_free(p);
}

static void *do_realloc(void *old, size_t n, void *p, int tracing)
{
    if (!tracing)
        return p;
    if (!old) {
        if (p)
            event(HCT_MALLOC, p, NULL, n, 0);
    } else if (p) {
        event(HCT_REALLOC, p, old, n, 0);
    } else if (n == 0) {
        event(HCT_FREE, old, NULL, 0, 0);  /* glibc: realloc(p, 0) frees */
    }
    leave();
    return p;
}

EXPORT void *realloc(void *old, size_t n)
{
    if (unlikely(in_pool(old))) {
        /* a bootstrap block moving to the real heap: copy what the pool can hold */
        void *p = malloc(n);
        if (p)
            memcpy(p, old, n < (size_t)(g_pool + sizeof g_pool - (uint8_t *)old) ? n :
                   (size_t)(g_pool + sizeof g_pool - (uint8_t *)old));
        return p;
    }
    if (unlikely(!real_realloc)) {
        init();
        if (!real_realloc)
            return NULL;
    }
    int tracing = enter();
    return do_realloc(old, n, real_realloc(old, n), tracing);
}

EXPORT void *reallocarray(void *old, size_t n, size_t m)
{
    size_t b;
    if (__builtin_mul_overflow(n, m, &b)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, b);
}

static void *traced_aligned(void *p, size_t align, size_t n, int tracing)
{
    if (tracing) {
        if (p)
            event(HCT_MEMALIGN, p, NULL, n, align);
        leave();
    }
    return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (unlikely(!real_posix_memalign)) {
        init();
        if (!real_posix_memalign)
            return ENOMEM;
    }
    int tracing = enter();
    int rc = real_posix_memalign(out, align, n);
    traced_aligned(rc == 0 ? *out : NULL, align, n, tracing);
    return rc;
}

#define ALIGNED_HOOK(name, params, args, align_expr, size_expr)                              \
    EXPORT void *name params                                                                 \
    {                                                                                        \
        if (unlikely(!real_##name)) {                                                        \
            init();                                                                          \
            if (!real_##name)                                                                \
                return NULL;                                                                 \
        }                                                                                    \
        int tracing = enter();                                                               \
        return traced_aligned(real_##name args, align_expr, size_expr, tracing);             \
    }

ALIGNED_HOOK(aligned_alloc, (size_t align, size_t n), (align, n), align, n)
ALIGNED_HOOK(memalign, (size_t align, size_t n), (align, n), align, n)
ALIGNED_HOOK(valloc, (size_t n), (n), (size_t)sysconf(_SC_PAGESIZE), n)
ALIGNED_HOOK(pvalloc, (size_t n), (n), (size_t)sysconf(_SC_PAGESIZE),
             (n + (size_t)sysconf(_SC_PAGESIZE) - 1) & ~((size_t)sysconf(_SC_PAGESIZE) - 1))

/* ---- exec and _exit: the process image goes away without running destructors ---- */

static void flush_here(void)
{
    if (atomic_load(&g_state) != ST_READY)
        return;
    t_buf.in_hook++;
    if (begin_own(&t_buf)) {
        flush(&t_buf);
        end_own(&t_buf);
    }
    t_buf.in_hook--;
}

/* Before exec: this image's events and its summary (a wrapper that execs the program still
 * says what it did; a vfork child shares its parent's counts and name, so it writes none). */
static void before_exec(void)
{
    flush_here();
    if (atomic_load(&g_state) == ST_READY && g_fd >= 0 && getpid() == g_pid) {
        int saved = errno;
        write_summary();
        errno = saved;
    }
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    before_exec();
    if (!real_execve)
        RESOLVE(execve);
    return real_execve(path, argv, envp);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    before_exec();
    if (!real_execvpe)
        RESOLVE(execvpe);
    return real_execvpe(file, argv, envp);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    before_exec();
    if (!real_fexecve)
        RESOLVE(fexecve);
    return real_fexecve(fd, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }
EXPORT int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }

/* execl, execlp, execle: gather the variadic arguments on the stack, then as above. */
#define GATHER_ARGS(arg0, ap, argv)                                                          \
    size_t argc_ = 1;                                                                        \
    va_start(ap, arg0);                                                                      \
    while (va_arg(ap, const char *))                                                         \
        argc_++;                                                                             \
    va_end(ap);                                                                              \
    char *argv[argc_ + 1];                                                                   \
    va_start(ap, arg0);                                                                      \
    argv[0] = (char *)(arg0);                                                                \
    for (size_t i_ = 1; i_ <= argc_; i_++)                                                   \
        argv[i_] = va_arg(ap, char *);

EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER_ARGS(arg, ap, argv);
    va_end(ap);
    return execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    GATHER_ARGS(arg, ap, argv);
    va_end(ap);
    return execvpe(file, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER_ARGS(arg, ap, argv);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}

EXPORT void _exit(int status)
{
    if (atomic_load(&g_state) == ST_READY && g_fd >= 0)
        write_all_buffers();    /* the other threads end with us: write theirs too */
    if (!real__exit)
        *(void **)&real__exit = dlsym(RTLD_NEXT, "_exit");
    real__exit(status);
}

EXPORT void _Exit(int status) { _exit(status); }
