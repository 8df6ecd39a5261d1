/* The harness's output: one fixed buffer written to stdout with write(2), because stdio would
 * malloc through the allocator under test. hcreplay_main.c and hcreplay_explain.c both put
 * their JSON here. */
#define _GNU_SOURCE
#include "hcreplay.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char out[1 << 16];
static size_t out_n;

void hcr_put(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + out_n, sizeof out - out_n, fmt, ap);
    va_end(ap);
    if (n > 0)
        out_n += (size_t)n < sizeof out - out_n ? (size_t)n : sizeof out - out_n - 1;
}

void hcr_put_clear(void) { out_n = 0; }

void hcr_flush(void)
{
    for (size_t done = 0; done < out_n;) {
        ssize_t w = write(1, out + done, out_n - done);
        if (w <= 0) {
            if (errno == EINTR)
                continue;
            exit(1);
        }
        done += (size_t)w;
    }
    out_n = 0;
}
