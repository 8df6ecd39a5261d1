/* hc_broken: a deliberately wrong allocator, to show the test programs notice a wrong one.
 *
 * Build as a shared library and LD_PRELOAD it; HC_BROKEN picks the fault:
 *   calloc    calloc returns memory that is not zeroed
 *   realloc   realloc moves the block but copies only half the old contents
 *   align     malloc returns pointers 8 bytes off a 16-byte boundary
 *   crash     the 1000th free() aborts the program (SIGABRT), as a corrupted heap would
 *   (unset)   no fault: glibc's malloc passed through
 * Everything else goes to glibc's own entry points (__libc_malloc and friends, and
 * malloc_usable_size found with dlsym(RTLD_NEXT)).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static int fault(const char *name)
{
    const char *f = getenv("HC_BROKEN");
    return f && strcmp(f, name) == 0;
}

void *malloc(size_t n)
{
    if (fault("align")) {
        /* 8 bytes in, with the offset stored before the pointer so free can undo it. */
        char *p = __libc_malloc(n + 16);
        if (!p)
            return NULL;
        ((size_t *)p)[0] = 0x0ffbad;
        return p + 8;
    }
    return __libc_malloc(n);
}

static void *base_of(void *p)
{
    if (p && fault("align") && ((size_t *)p)[-1] == 0x0ffbad)
        return (char *)p - 8;
    return p;
}

void free(void *p)
{
    static unsigned long frees;
    if (fault("crash") && ++frees == 1000)
        abort();
    __libc_free(base_of(p));
}

size_t malloc_usable_size(void *p)
{
    static size_t (*next)(void *);
    if (!next)
        next = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    void *b = base_of(p);
    if (!p)
        return 0;
    return b == p ? next(p) : next(b) - 8;
}

void *calloc(size_t n, size_t size)
{
    if (fault("calloc")) {
        void *p = __libc_calloc(n, size);
        if (p && n && size)
            ((unsigned char *)p)[(n * size - 1) / 2] = 0xaa;
        return p;
    }
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    if (fault("realloc") && p && n) {
        size_t old = malloc_usable_size(p);
        unsigned char *q = __libc_malloc(n);
        if (!q)
            return NULL;
        size_t keep = old < n ? old : n;
        memcpy(q, p, keep / 2);
        memset(q + keep / 2, 0, keep - keep / 2);
        __libc_free(p);
        return q;
    }
    return __libc_realloc(base_of(p), n);
}
