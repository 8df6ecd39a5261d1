/* hctrace_map.h — a uint64 → uint64 hash map (linear probing, backward-shift deletion) for the
 * readers' live-object tracking.  Key 0 marks an empty slot, so callers never store key 0. */
#ifndef HCTRACE_MAP_H
#define HCTRACE_MAP_H

#include <stdint.h>
#include <stdlib.h>

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
    m->keys = calloc(ncap, sizeof *m->keys);
    m->vals = calloc(ncap, sizeof *m->vals);
    if (!m->keys || !m->vals)
        return -1;
    m->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (ok[i]) {
            size_t j = hct_map_slot(m, ok[i]);
            while (m->keys[j])
                j = (j + 1) & (ncap - 1);
            m->keys[j] = ok[i];
            m->vals[j] = ov[i];
        }
    free(ok);
    free(ov);
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
    free(m->keys);
    free(m->vals);
    m->keys = m->vals = NULL;
    m->cap = m->len = 0;
}

#endif /* HCTRACE_MAP_H */
