/* hctrace_map.h — a uint64 → uint64 hash map (linear probing, backward-shift deletion) for the
 * readers' live-object tracking and the tracer's table of live blocks (windowed tracing).  Key 0
 * marks an empty slot, so callers never store key 0.  Its memory comes from calloc/free unless
 * the includer defines HCT_MAP_ZALLOC(bytes) and HCT_MAP_RELEASE(p, bytes) (the tracer maps its
 * own: it must not allocate from the heap it traces). */
#ifndef HCTRACE_MAP_H
#define HCTRACE_MAP_H

#include <stdint.h>
#include <stdlib.h>

#ifndef HCT_MAP_ZALLOC
#define HCT_MAP_ZALLOC(bytes) calloc(1, (bytes))
#define HCT_MAP_RELEASE(p, bytes) free(p)
#endif

typedef struct hct_map {
    uint64_t *keys, *vals;
    size_t cap, len;            /* cap is a power of two */
} hct_map;

static inline size_t hct_map_slot(const hct_map *m, uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;   /* a 64-bit finaliser mix: pointers differ in few bits */
    k ^= k >> 33;
    return (size_t)k & (m->cap - 1);
}

static int hct_map_grow(hct_map *m)
{
    size_t ocap = m->cap, ncap = ocap ? ocap * 2 : 1024;
    uint64_t *ok = m->keys, *ov = m->vals;
    uint64_t *nk = HCT_MAP_ZALLOC(ncap * sizeof *m->keys);
    uint64_t *nv = HCT_MAP_ZALLOC(ncap * sizeof *m->vals);
    if (!nk || !nv) {
        if (nk)
            HCT_MAP_RELEASE(nk, ncap * sizeof *m->keys);
        if (nv)
            HCT_MAP_RELEASE(nv, ncap * sizeof *m->vals);
        return -1;
    }
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (ok[i]) {
            size_t j = hct_map_slot(m, ok[i]);
            while (m->keys[j])
                j = (j + 1) & (ncap - 1);
            m->keys[j] = ok[i];
            m->vals[j] = ov[i];
        }
    if (ok) {
        HCT_MAP_RELEASE(ok, ocap * sizeof *ok);
        HCT_MAP_RELEASE(ov, ocap * sizeof *ov);
    }
    return 0;
}

/* Pointer to k's value, or NULL. */
static inline uint64_t *hct_map_get(hct_map *m, uint64_t k)
{
    if (!m->cap)
        return NULL;
    for (size_t j = hct_map_slot(m, k);; j = (j + 1) & (m->cap - 1)) {
        if (m->keys[j] == k)
            return &m->vals[j];
        if (!m->keys[j])
            return NULL;
    }
}

/* Insert or overwrite; returns 1 if k was new, 0 if replaced, -1 out of memory. */
static inline int hct_map_put(hct_map *m, uint64_t k, uint64_t v)
{
    if ((m->len + 1) * 4 > m->cap * 3 && hct_map_grow(m) < 0)
        return -1;
    size_t j = hct_map_slot(m, k);
    while (m->keys[j] && m->keys[j] != k)
        j = (j + 1) & (m->cap - 1);
    int fresh = !m->keys[j];
    m->keys[j] = k;
    m->vals[j] = v;
    m->len += (size_t)fresh;
    return fresh;
}

/* Set k to v in one probe: 1 and the value it replaces in *old if k was there, 0 if new, -1 out
 * of memory. */
static inline int hct_map_swap(hct_map *m, uint64_t k, uint64_t v, uint64_t *old)
{
    if ((m->len + 1) * 4 > m->cap * 3 && hct_map_grow(m) < 0)
        return -1;
    size_t j = hct_map_slot(m, k);
    while (m->keys[j] && m->keys[j] != k)
        j = (j + 1) & (m->cap - 1);
    if (m->keys[j]) {
        *old = m->vals[j];
        m->vals[j] = v;
        return 1;
    }
    m->keys[j] = k;
    m->vals[j] = v;
    m->len++;
    return 0;
}

/* Remove k; returns 1 and its value in *v if it was there. */
static inline int hct_map_del(hct_map *m, uint64_t k, uint64_t *v)
{
    if (!m->cap)
        return 0;
    size_t j = hct_map_slot(m, k);
    while (m->keys[j] != k) {
        if (!m->keys[j])
            return 0;
        j = (j + 1) & (m->cap - 1);
    }
    if (v)
        *v = m->vals[j];
    /* backward shift: pull later members of the probe run into the hole */
    for (size_t i = j;;) {
        m->keys[i] = 0;
        size_t n = i;
        for (;;) {
            n = (n + 1) & (m->cap - 1);
            if (!m->keys[n]) {
                m->len--;
                return 1;
            }
            size_t home = hct_map_slot(m, m->keys[n]);
            /* move n into i unless its home lies cyclically in (i, n] */
            if (i <= n ? (home <= i || home > n) : (home <= i && home > n))
                break;
        }
        m->keys[i] = m->keys[n];
        m->vals[i] = m->vals[n];
        i = n;
    }
}

static inline void hct_map_free(hct_map *m)
{
    if (m->keys) {
        HCT_MAP_RELEASE(m->keys, m->cap * sizeof *m->keys);
        HCT_MAP_RELEASE(m->vals, m->cap * sizeof *m->vals);
    }
    m->keys = m->vals = NULL;
    m->cap = m->len = 0;
}

#endif /* HCTRACE_MAP_H */
