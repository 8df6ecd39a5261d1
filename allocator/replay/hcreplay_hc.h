/* HC's own statistics, found at run time with dlsym(RTLD_DEFAULT, "hc_stats_get") so the same
 * harness binary runs every allocator; absent (returns 0) under any other malloc. */
#ifndef HCREPLAY_HC_H
#define HCREPLAY_HC_H

#include <stdint.h>

struct hcr_hc {
    uint64_t footprint_max; /* HC's high-water of memory taken from the OS (bytes) */
};

/* 1 and *out filled when the allocator in this process is HC, else 0. */
int hcr_hc_read(struct hcr_hc *out);
/* Every field of the last hcr_hc_read, as a JSON object, through put(). */
void hcr_hc_json(void (*put)(const char *fmt, ...));

#endif
