/* hcreplay: replay a heap trace against whatever malloc the process is linked with (Hasan &
 * Chang 2006, §4.4: a driver calls malloc/realloc/free exactly as the program did, repeated,
 * with every unfreed block released between repeats).
 *
 * The trace is loaded once, before any timing, into a compact array of ops whose objects are
 * dense ids (slots), so the replay loop never hashes a pointer.  The harness keeps its own
 * memory (ops, slots) in mmap'd regions so that the allocator under test sees only the
 * program's requests. */
#ifndef HCREPLAY_H
#define HCREPLAY_H

#include <stddef.h>
#include <stdint.h>

enum hcr_op {
    HCR_MALLOC = 1,
    HCR_CALLOC,   /* size is n*size, asked as calloc(1, size) */
    HCR_REALLOC,  /* slot = realloc(slot, size); the object keeps its id */
    HCR_FREE,
    HCR_MEMALIGN, /* posix_memalign(&slot, 1 << align_log2, size) */
};

/* One replayed call: 16 bytes, so a million ops fit in 16 MiB and stream through the cache;
 * plain fields (no bit-fields) so the loop spends no instructions unpacking them. */
struct hcr_rop {
    uint64_t size;          /* bytes asked (calloc: n*size) */
    uint32_t slot;          /* dense object id */
    uint8_t op;             /* enum hcr_op */
    uint8_t align_log2;
    uint16_t pad;
};

struct hcr_trace {
    struct hcr_rop *ops;
    size_t n_ops;
    size_t n_slots;          /* most objects live at once: the slot array's length */
    uint64_t max_live_bytes; /* most requested bytes live at once (trace order) */
    uint64_t max_live_objects;
    uint64_t events;         /* events read from the trace */
    uint64_t skipped;        /* frees/reallocs of pointers the trace never allocated */
    uint64_t repaired;       /* an address handed out again while still live: implicit free */
    uint64_t threads;        /* distinct thread ids seen (replayed on one thread, in order) */
    char command[512];
};

/* Load TRACE through the C reader (build/libhctrace_read.a).  0 on success, else -1 with a
 * one-line message in err. */
int hcr_load(const char *path, struct hcr_trace *t, char *err, size_t errlen);

/* Replay every op once against slots[] (n_slots long, all NULL on entry), then free what is
 * still live so that slots[] is all NULL again.  touch: write one byte in every 4 KiB page of
 * every new block, as the program would.  Returns the number of failed allocations. */
uint64_t hcr_replay_once(const struct hcr_trace *t, void **slots, int touch);

/* Anonymous memory for the harness itself, never from malloc; zero-filled and pre-faulted. */
void *hcr_map(size_t bytes);
void hcr_unmap(void *p, size_t bytes);

/* Resident memory of this process, from /proc/self/status (bytes; 0 if unreadable). */
uint64_t hcr_vm_rss(void);
uint64_t hcr_vm_hwm(void);
/* Reset VmHWM to the current VmRSS (/proc/self/clear_refs "5"); 0 on success. */
int hcr_reset_hwm(void);

#endif
