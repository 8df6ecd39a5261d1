/* api_derived.h -- the malloc API calls that follow from malloc, realloc and one aligned
 * allocation, shared by the replay harness's baseline allocators (kingsley.c, bump.c).
 * Include it after defining
 *     static void *aligned_block(size_t align, size_t n);   (align: a power of two)
 * (HC keeps its own: its malloc.c must stand alone.) */
#ifndef HCR_API_DERIVED_H
#define HCR_API_DERIVED_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *aligned_block(size_t align, size_t n);

static int is_pow2(size_t a) { return a && !(a & (a - 1)); }

void *calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = malloc(total);
    if (p)
        memset(p, 0, total); /* recycled or rewound memory is not zero */
    return p;
}

void *reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, total);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (!is_pow2(align) || align % sizeof(void *))
        return EINVAL;
    void *p = aligned_block(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    if (!is_pow2(align)) {
        errno = EINVAL;
        return NULL;
    }
    return aligned_block(align, n);
}

/* memalign rounds a non-power-of-two alignment up, as glibc and HC do: EINVAL only for an
 * alignment above 2^63 (no power of two to round to). */
void *memalign(size_t align, size_t n)
{
    if (align > ((size_t)1 << 63)) {
        errno = EINVAL;
        return NULL;
    }
    size_t a = 1;
    while (a < align)
        a <<= 1;
    return aligned_block(a, n);
}

void *valloc(size_t n) { return aligned_block((size_t)sysconf(_SC_PAGESIZE), n); }

void *pvalloc(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), up;
    if (__builtin_add_overflow(n, page - 1, &up)) {
        errno = ENOMEM;
        return NULL;
    }
    return aligned_block(page, up & ~(page - 1));
}

#endif /* HCR_API_DERIVED_H */
