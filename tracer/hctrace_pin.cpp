/* hctrace_pin.cpp — an Intel Pin tool writing the hctune trace format (docs/trace-format.md),
 * for programs the LD_PRELOAD tracer cannot reach (static binaries, setuid programs).
 *
 *   make pintool PIN_ROOT=/path/to/pin-kit
 *   $PIN_ROOT/pin -follow_execv -t build/hctrace_pin.so -o app.hct -- ./app args
 *   (or: hctune profile --tracer pin ./app args)
 *
 * The approach of Pin's malloctrace example: when an image loads, find the allocator's
 * routines by name and wrap each with a call before (arguments) and after (result).  A call
 * made inside another traced call (realloc calling malloc inside glibc) is not recorded: only
 * the outermost call per thread is the program's.  free takes its sequence number before the
 * real free, allocations after the call returns, as in the preload tracer, so a block freed by
 * one thread and reused by another is seen freed first.  Events are buffered per thread and
 * written as chunks with one write(2) to an O_APPEND file; readers merge chunks by sequence.
 * Files: -o FILE for the first process; a forked child or an exec'd program that finds it taken
 * writes FILE.<pid>, then FILE.<pid>.<n> (the preload tracer's naming). */
#include "pin.H"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <string>
#include <unistd.h>

extern "C" {
#include "hctrace.h"
#include "hctrace_enc.h"
}

KNOB<std::string> KnobOut(KNOB_MODE_WRITEONCE, "pintool", "o", "hctrace" HCT_EXTENSION,
                          "trace file (children: FILE.<pid>[.<n>])");

enum { BUF_BYTES = 32 * 1024 };

struct ThreadState {
    uint8_t data[BUF_BYTES];
    size_t len;
    hct_enc enc;
    uint32_t thread;
    int depth;              /* nesting of traced calls on this thread */
    uint8_t op;             /* the pending outermost call */
    ADDRINT a0, a1, a2;     /* its arguments */
};

static TLS_KEY g_key;
static int g_fd = -1;
static volatile UINT64 g_seq;
static volatile UINT32 g_threads;
static PIN_LOCK g_lock;      /* only around file (re)opening and process-wide flushing */
static std::string g_cmd;

static UINT64 next_seq() { return __sync_fetch_and_add(&g_seq, 1); }
static ThreadState *ts(THREADID tid) { return static_cast<ThreadState *>(PIN_GetThreadData(g_key, tid)); }

static void write_all(const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(g_fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void flush(ThreadState *t)
{
    if (!t || t->len == 0 || g_fd < 0)
        return;
    /* header and payload in one buffer: one write keeps the chunk whole under O_APPEND */
    static const size_t CAP = HCT_CHUNK_HEADER_MAX + BUF_BYTES;
    uint8_t *out = new uint8_t[CAP];
    size_t h = hct_enc_chunk_header(&t->enc, out, 0, t->thread, t->len);
    memcpy(out + h, t->data, t->len);
    write_all(out, h + t->len);
    delete[] out;
    t->len = 0;
    hct_enc_reset(&t->enc);
}

static void record(ThreadState *t, uint8_t op, UINT64 seq, ADDRINT ptr, ADDRINT old, ADDRINT size,
                   ADDRINT align)
{
    if (t->len + HCT_MAX_EVENT_BYTES > sizeof t->data)
        flush(t);
    uint8_t *end = hct_enc_event(&t->enc, t->data + t->len, 0, op, seq, ptr, old, size, align, 0);
    t->len = (size_t)(end - t->data);
}

static void open_output()
{
    std::string base = KnobOut.Value();
    int pid = PIN_GetPid();
    for (int n = -1; n < 1000; n++) {
        std::string path = base;
        if (n >= 0)
            path += "." + std::to_string(pid);
        if (n >= 1)
            path += "." + std::to_string(n);
        int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            g_fd = fd;
            uint8_t hdr[HCT_COMMAND_OFFSET + 4000];
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            size_t len = hct_enc_file_header(hdr, sizeof hdr, 0, (uint32_t)pid,
                                             (uint32_t)getppid(),
                                             (uint64_t)now.tv_sec * 1000000000ull + now.tv_nsec,
                                             g_cmd.c_str(), g_cmd.size());
            write_all(hdr, len);
            return;
        }
        if (errno != EEXIST)
            break;
    }
    fprintf(stderr, "hctrace_pin: cannot create the trace file %s, not tracing\n", base.c_str());
}

/* ---- analysis routines: before and after each allocator call ---- */

static VOID Before(THREADID tid, UINT32 op, ADDRINT a0, ADDRINT a1, ADDRINT a2)
{
    ThreadState *t = ts(tid);
    if (!t || t->depth++ > 0)
        return;
    t->op = (uint8_t)op;
    t->a0 = a0;
    t->a1 = a1;
    t->a2 = a2;
    if (op == HCT_FREE && a0)
        record(t, HCT_FREE, next_seq(), a0, 0, 0, 0);   /* before the real free */
}

/* op codes beyond the format's, for the calls whose arguments need translating */
enum { PIN_POSIX_MEMALIGN = 100, PIN_VALLOC, PIN_PVALLOC, PIN_MEMALIGN_AA };

static VOID After(THREADID tid, ADDRINT ret)
{
    ThreadState *t = ts(tid);
    if (!t || --t->depth > 0)
        return;
    size_t page = (size_t)getpagesize();
    switch (t->op) {
    case HCT_MALLOC:
        if (ret)
            record(t, HCT_MALLOC, next_seq(), ret, 0, t->a0, 0);
        break;
    case HCT_CALLOC:
        if (ret)
            record(t, HCT_CALLOC, next_seq(), ret, 0, t->a0 * t->a1, 0);
        break;
    case HCT_REALLOC:
        if (!t->a0) {
            if (ret)
                record(t, HCT_MALLOC, next_seq(), ret, 0, t->a1, 0);
        } else if (ret) {
            record(t, HCT_REALLOC, next_seq(), ret, t->a0, t->a1, 0);
        } else if (t->a1 == 0) {
            record(t, HCT_FREE, next_seq(), t->a0, 0, 0, 0);
        }
        break;
    case PIN_MEMALIGN_AA:           /* memalign(align, n), aligned_alloc(align, n) */
        if (ret)
            record(t, HCT_MEMALIGN, next_seq(), ret, 0, t->a1, t->a0);
        break;
    case PIN_POSIX_MEMALIGN: {      /* posix_memalign(&out, align, n) returns 0 on success */
        ADDRINT out = 0;
        if (ret == 0 && PIN_SafeCopy(&out, (VOID *)t->a0, sizeof out) == sizeof out && out)
            record(t, HCT_MEMALIGN, next_seq(), out, 0, t->a2, t->a1);
        break;
    }
    case PIN_VALLOC:
        if (ret)
            record(t, HCT_MEMALIGN, next_seq(), ret, 0, t->a0, page);
        break;
    case PIN_PVALLOC:
        if (ret)
            record(t, HCT_MEMALIGN, next_seq(), ret, 0, (t->a0 + page - 1) / page * page, page);
        break;
    default:
        break;
    }
}

/* ---- instrumentation ---- */

struct Hook {
    const char *name;
    UINT32 op;
    int nargs;
};
static const Hook HOOKS[] = {
    {"malloc", HCT_MALLOC, 1},          {"calloc", HCT_CALLOC, 2},
    {"realloc", HCT_REALLOC, 2},        {"free", HCT_FREE, 1},
    {"memalign", PIN_MEMALIGN_AA, 2},   {"aligned_alloc", PIN_MEMALIGN_AA, 2},
    {"posix_memalign", PIN_POSIX_MEMALIGN, 3}, {"valloc", PIN_VALLOC, 1},
    {"pvalloc", PIN_PVALLOC, 1},
};

static VOID Image(IMG img, VOID *)
{
    for (const Hook &h : HOOKS) {
        RTN rtn = RTN_FindByName(img, h.name);
        if (!RTN_Valid(rtn))
            continue;
        RTN_Open(rtn);
        RTN_InsertCall(rtn, IPOINT_BEFORE, (AFUNPTR)Before, IARG_THREAD_ID, IARG_UINT32, h.op,
                       IARG_FUNCARG_ENTRYPOINT_VALUE, 0,
                       IARG_FUNCARG_ENTRYPOINT_VALUE, h.nargs > 1 ? 1 : 0,
                       IARG_FUNCARG_ENTRYPOINT_VALUE, h.nargs > 2 ? 2 : 0, IARG_END);
        if (h.op != HCT_FREE)
            RTN_InsertCall(rtn, IPOINT_AFTER, (AFUNPTR)After, IARG_THREAD_ID,
                           IARG_FUNCRET_EXITPOINT_VALUE, IARG_END);
        else
            RTN_InsertCall(rtn, IPOINT_AFTER, (AFUNPTR)After, IARG_THREAD_ID, IARG_ADDRINT, 0,
                           IARG_END);
        RTN_Close(rtn);
    }
}

static VOID ThreadStart(THREADID tid, CONTEXT *, INT32, VOID *)
{
    ThreadState *t = new ThreadState();
    t->thread = __sync_fetch_and_add(&g_threads, 1);
    PIN_SetThreadData(g_key, t, tid);
}

static VOID ThreadFini(THREADID tid, const CONTEXT *, INT32, VOID *)
{
    ThreadState *t = ts(tid);
    PIN_GetLock(&g_lock, tid + 1);
    flush(t);
    PIN_ReleaseLock(&g_lock);
    delete t;
    PIN_SetThreadData(g_key, 0, tid);
}

static VOID ForkChild(THREADID tid, const CONTEXT *, VOID *)
{
    /* the parent writes the events in our copy of its buffer; start our own file */
    ThreadState *t = ts(tid);
    if (t) {
        t->len = 0;
        hct_enc_reset(&t->enc);
    }
    if (g_fd >= 0)
        close(g_fd);
    g_fd = -1;
    open_output();
}

static VOID Fini(INT32, VOID *)
{
    ThreadState *t = ts(PIN_ThreadId());
    flush(t);
}

int main(int argc, char *argv[])
{
    PIN_InitSymbols();
    if (PIN_Init(argc, argv)) {
        fprintf(stderr, "usage: pin -t hctrace_pin.so [-o FILE] -- program args\n");
        return 1;
    }
    for (int i = 0; i < argc; i++)          /* the application's command line: after "--" */
        if (strcmp(argv[i], "--") == 0) {
            for (int j = i + 1; j < argc; j++)
                g_cmd += (j > i + 1 ? " " : "") + std::string(argv[j]);
            break;
        }
    PIN_InitLock(&g_lock);
    g_key = PIN_CreateThreadDataKey(0);
    open_output();
    IMG_AddInstrumentFunction(Image, 0);
    PIN_AddThreadStartFunction(ThreadStart, 0);
    PIN_AddThreadFiniFunction(ThreadFini, 0);
    PIN_AddForkFunction(FPOINT_AFTER_IN_CHILD, ForkChild, 0);
    PIN_AddFiniFunction(Fini, 0);
    PIN_StartProgram();
    return 0;
}
