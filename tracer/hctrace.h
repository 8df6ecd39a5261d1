/* hctrace.h — the hctune trace format, C side: constants, the event, the reader API.
 *
 * The format is specified in configs/trace_format.toml and docs/trace-format.md; the block
 * between the GENERATED markers is produced from the TOML (python -m hctune.trace.codegen) and
 * a test checks it has not drifted.  Everything else here is hand-written.
 *
 * Reader (hctrace_read.c, build/libhctrace_read.a):
 *   hct_reader *r = hct_open(path, err, sizeof err);   // NULL + one-line message in err
 *   hct_event ev; int rc;
 *   while ((rc = hct_next(r, &ev)) == 1) ...;           // events in global order (by seq)
 *   if (rc < 0) puts(hct_error(r));                     // corrupt trace
 *   hct_close(r);
 */
#ifndef HCTRACE_H
#define HCTRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- BEGIN GENERATED from configs/trace_format.toml by hctune.trace.codegen ---- */
#define HCT_MAGIC "\x48\x43\x54\x52\x41\x43\x45\x1a"
#define HCT_MAGIC_LEN 8
#define HCT_VERSION 2
#define HCT_MIN_VERSION 1
#define HCT_EXTENSION ".hct"
/* [header] */
#define HCT_MAGIC_OFFSET 0
#define HCT_VERSION_OFFSET 8
#define HCT_FLAGS_OFFSET 10
#define HCT_HEADER_LEN_OFFSET 12
#define HCT_PID_OFFSET 16
#define HCT_PPID_OFFSET 20
#define HCT_START_TIME_OFFSET 24
#define HCT_COMMAND_LEN_OFFSET 32
#define HCT_COMMAND_OFFSET 36
/* [flags] */
#define HCT_FLAG_TIME 1
#define HCT_FLAG_CLOCK 2
/* [ops] */
#define HCT_MALLOC 1
#define HCT_CALLOC 2
#define HCT_REALLOC 3
#define HCT_FREE 4
#define HCT_MEMALIGN 5
/* [chunk] */
#define HCT_CHUNK_MARKER 0xC1
#define HCT_CHUNK_HEADER_MAX 51
#define HCT_CLOCK_QUANTUM_NS 10000000
/* [event] */
#define HCT_OP_MASK 0x07
#define HCT_GRANULE_BIT 0x08
#define HCT_SEQ_SHIFT 4
#define HCT_SEQ_ESCAPE 15
#define HCT_PTR_GRANULE_SHIFT 4
#define HCT_MAX_EVENT_BYTES 51
/* ---- END GENERATED ---- */

/* One allocator call, as recorded. */
typedef struct hct_event {
    uint64_t seq;      /* global order within the process (may have gaps) */
    uint32_t thread;   /* dense thread id, 0 = the first thread that allocated */
    uint8_t  op;       /* HCT_MALLOC, HCT_CALLOC, HCT_REALLOC, HCT_FREE, HCT_MEMALIGN */
    uint64_t ptr;      /* the result, or the freed pointer */
    uint64_t old_ptr;  /* realloc's argument; 0 otherwise */
    uint64_t size;     /* bytes asked (calloc: nmemb * size); 0 for free */
    uint64_t align;    /* memalign family; 0 otherwise */
    uint64_t time_ns;  /* ns since the trace started; 0 when not recorded */
} hct_event;

typedef struct hct_reader hct_reader;

/* Open and index a trace; NULL and a one-line message in err (wrong magic, version, truncated). */
hct_reader *hct_open(const char *path, char *err, size_t errlen);
/* 1 = an event in *ev, 0 = end of trace, -1 = corrupt (message in hct_error). */
int hct_next(hct_reader *r, hct_event *ev);
const char *hct_error(const hct_reader *r);
/* The traced command line, as recorded in the header. */
const char *hct_command(const hct_reader *r);
/* Header fields. */
uint32_t hct_pid(const hct_reader *r);
uint32_t hct_ppid(const hct_reader *r);
uint64_t hct_start_time_ns(const hct_reader *r);
unsigned hct_flags(const hct_reader *r);
/* Number of events in the trace (known after hct_open, from the chunk index). */
uint64_t hct_count(const hct_reader *r);
void hct_close(hct_reader *r);

#ifdef __cplusplus
}
#endif
#endif /* HCTRACE_H */
