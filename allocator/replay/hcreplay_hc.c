/* Reading HC's statistics (allocator/hc/hc_stats.h) when HC is the malloc of this process. */
#define _GNU_SOURCE
#include "hcreplay_hc.h"

#include <dlfcn.h>
#include <stddef.h>

#if __has_include("hc_stats.h")
#include "hc_stats.h"
#define HCR_HAVE_HC_STATS 1
#else
#define HCR_HAVE_HC_STATS 0
#endif

#if HCR_HAVE_HC_STATS
static struct hc_stats last;
static int (*get)(struct hc_stats *);
static int looked;

int hcr_hc_read(struct hcr_hc *out)
{
    if (!looked) {
        looked = 1;
        get = (int (*)(struct hc_stats *))dlsym(RTLD_DEFAULT, "hc_stats_get");
        if (!get) {
            /* a failed dlsym leaves a malloc'd message behind until dlerror is called again:
             * free it, or the allocator under test carries one stray live block */
            dlerror();
            dlerror();
        }
    }
    if (!get || get(&last) != 0)
        return 0;
    out->footprint_max = last.footprint;
    return 1;
}

void hcr_hc_json(void (*put)(const char *fmt, ...))
{
    const char *sep = "{";
#define HCR_FIELD(name, doc)                                                                     \
    put("%s\"%s\": %llu", sep, #name, (unsigned long long)last.name);                            \
    sep = ", ";
    HC_STATS_FIELDS(HCR_FIELD)
#undef HCR_FIELD
    put("}");
}
#else
int hcr_hc_read(struct hcr_hc *out)
{
    (void)out;
    return 0; /* built without allocator/hc/hc_stats.h: HC's footprint cannot be read */
}

void hcr_hc_json(void (*put)(const char *fmt, ...)) { put("null"); }
#endif
