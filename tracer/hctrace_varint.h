/* hctrace_varint.h — LEB128 varints and zigzag, shared by the trace writers and the reader.
 * (Format: configs/trace_format.toml, docs/trace-format.md.)  Header-only, no allocation. */
#ifndef HCTRACE_VARINT_H
#define HCTRACE_VARINT_H

#include <stdint.h>

static inline uint8_t *hct_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t hct_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t hct_unzigzag(uint64_t z) { return (int64_t)(z >> 1) ^ -(int64_t)(z & 1); }

/* Returns the position after the varint, or NULL if it runs past end or is over 10 bytes. */
static inline const uint8_t *hct_get_varint(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
    if (__builtin_expect(p < end && !(*p & 0x80), 1)) {   /* one byte: most fields */
        *out = *p;
        return p + 1;
    }
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70 && p < end; shift += 7) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return p;
        }
    }
    return 0;
}

#endif /* HCTRACE_VARINT_H */
