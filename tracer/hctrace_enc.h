/* hctrace_enc.h — encode events and chunks of the hctune trace format (the writer side, shared
 * by the LD_PRELOAD tracer and the Pin tool).  No allocation, no libc beyond memcpy: it runs
 * inside malloc hooks.  Layout: configs/trace_format.toml, docs/trace-format.md. */
#ifndef HCTRACE_ENC_H
#define HCTRACE_ENC_H

#include <string.h>
#include "hctrace.h"
#include "hctrace_varint.h"

/* Per-chunk encoder state: deltas are against the previous event of the same chunk. */
typedef struct hct_enc {
    uint64_t first_seq, prev_seq, prev_ptr, base_time, prev_time;
    uint32_t count;
} hct_enc;

static inline void hct_enc_reset(hct_enc *e)
{
    e->count = 0;
    e->prev_ptr = 0;
}

/* Append one event at p (room for HCT_MAX_EVENT_BYTES needed); returns the new end. */
static inline uint8_t *hct_enc_event(hct_enc *e, uint8_t *p, unsigned flags, uint8_t op,
                                     uint64_t seq, uint64_t ptr, uint64_t old_ptr, uint64_t size,
                                     uint64_t align, uint64_t time_ns)
{
    if (e->count == 0) {
        e->first_seq = seq;
        e->prev_seq = seq - 1;
        e->base_time = e->prev_time = time_ns;
    }
    uint64_t dseq = seq - e->prev_seq - 1;
    int64_t dptr = (int64_t)(ptr - e->prev_ptr);
    uint8_t tag = op;
    if ((dptr & ((1 << HCT_PTR_GRANULE_SHIFT) - 1)) == 0) {
        tag |= HCT_GRANULE_BIT;
        dptr >>= HCT_PTR_GRANULE_SHIFT; /* arithmetic shift keeps the sign */
    }
    if (dseq < HCT_SEQ_ESCAPE) {
        *p++ = tag | (uint8_t)(dseq << HCT_SEQ_SHIFT);
    } else {
        *p++ = tag | (uint8_t)(HCT_SEQ_ESCAPE << HCT_SEQ_SHIFT);
        p = hct_put_varint(p, dseq - HCT_SEQ_ESCAPE);
    }
    p = hct_put_varint(p, hct_zigzag(dptr));
    if (op != HCT_FREE)
        p = hct_put_varint(p, size);
    if (op == HCT_REALLOC)
        p = hct_put_varint(p, hct_zigzag((int64_t)(old_ptr - ptr)));
    if (op == HCT_MEMALIGN)
        p = hct_put_varint(p, align);
    if (flags & HCT_FLAG_TIME) {
        p = hct_put_varint(p, time_ns - e->prev_time);
        e->prev_time = time_ns;
    }
    e->prev_seq = seq;
    e->prev_ptr = ptr;
    e->count++;
    return p;
}

/* Write the chunk header for the events encoded so far into hdr (HCT_CHUNK_HEADER_MAX bytes);
 * returns its length.  The payload follows it in the file. */
static inline size_t hct_enc_chunk_header(const hct_enc *e, uint8_t *hdr, unsigned flags,
                                          uint32_t thread, size_t payload_len)
{
    uint8_t *p = hdr;
    *p++ = HCT_CHUNK_MARKER;
    p = hct_put_varint(p, thread);
    p = hct_put_varint(p, e->first_seq);
    p = hct_put_varint(p, e->count);
    p = hct_put_varint(p, payload_len);
    if (flags & (HCT_FLAG_TIME | HCT_FLAG_CLOCK))
        p = hct_put_varint(p, e->base_time);
    return (size_t)(p - hdr);
}

static inline void hct_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void hct_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void hct_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Build the file header into buf (cap bytes); the command is cut to fit.  Returns its length. */
static inline size_t hct_enc_file_header(uint8_t *buf, size_t cap, unsigned flags, uint32_t pid,
                                         uint32_t ppid, uint64_t start_ns, const char *cmd,
                                         size_t cmd_len)
{
    if (cmd_len > cap - HCT_COMMAND_OFFSET)
        cmd_len = cap - HCT_COMMAND_OFFSET;
    memcpy(buf + HCT_MAGIC_OFFSET, HCT_MAGIC, HCT_MAGIC_LEN);
    hct_put_u16(buf + HCT_VERSION_OFFSET, HCT_VERSION);
    hct_put_u16(buf + HCT_FLAGS_OFFSET, (uint16_t)flags);
    hct_put_u32(buf + HCT_HEADER_LEN_OFFSET, (uint32_t)(HCT_COMMAND_OFFSET + cmd_len));
    hct_put_u32(buf + HCT_PID_OFFSET, pid);
    hct_put_u32(buf + HCT_PPID_OFFSET, ppid);
    hct_put_u64(buf + HCT_START_TIME_OFFSET, start_ns);
    hct_put_u32(buf + HCT_COMMAND_LEN_OFFSET, (uint32_t)cmd_len);
    memcpy(buf + HCT_COMMAND_OFFSET, cmd, cmd_len);
    return HCT_COMMAND_OFFSET + cmd_len;
}

#endif /* HCTRACE_ENC_H */
