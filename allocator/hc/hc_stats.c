/* hc_stats.c -- statistics (Hasan & Chang 2006, §3.11): accounting, hc_stats_get, and the
 * report at exit asked for with HCMALLOC_STATS.  No stdio streams and no malloc here: the
 * report is formatted with snprintf into a stack buffer and written with write(2). */
#include "hc_block.h"
#include "hc_lock.h"

static inline void hc_account_alloc(size_t bytes)
{
    hc.st.allocs_current++;
    hc.st.bytes_current += bytes;
    if (hc.st.allocs_current > hc.st.allocs_max)
        hc.st.allocs_max = hc.st.allocs_current;
    if (hc.st.bytes_current > hc.st.bytes_max)
        hc.st.bytes_max = hc.st.bytes_current;
    HC_COUNT(allocs_total, 1);
    HC_COUNT(bytes_total, bytes);
    hc_sp_note_heap(hc.st.allocs_current, hc.st.bytes_current);
}

static inline void hc_account_free(size_t bytes)
{
    hc.st.allocs_current--;
    hc.st.bytes_current -= bytes;
    HC_COUNT(frees, 1);
    hc_sp_note_heap(hc.st.allocs_current, hc.st.bytes_current);
}

int hc_stats_get(struct hc_stats *out)
{
    hc_arena_stats(out);
    hc_sp_stats(out);
    out->version = HC_STATS_VERSION;
    out->monitor = MONITOR;
    return 0;
}

static void hc_write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* HCMALLOC_STATS=1: stderr; HCMALLOC_STATS=/path: that file (written whole, then renamed). */
__attribute__((destructor)) static void hc_stats_at_exit(void)
{
    const char *where = getenv("HCMALLOC_STATS");
    if (!where || !*where || (where[0] == '0' && !where[1]))
        return;
    struct hc_stats s;
    hc_stats_get(&s);
    char buf[4096], tmp[4096];
    size_t n = (size_t)snprintf(buf, sizeof buf, "hcmalloc statistics\n");
#define HC_STATS_LINE(name, doc)                                                                 \
    if (n < sizeof buf)                                                                          \
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s %llu\n", #name, (unsigned long long)s.name);
    HC_STATS_FIELDS(HC_STATS_LINE)
#undef HC_STATS_LINE
    if (n > sizeof buf)
        n = sizeof buf;
    if (where[0] == '1' && !where[1]) {
        hc_write_all(2, buf, n);
        return;
    }
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", where, (long)getpid()) >= sizeof tmp)
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    hc_write_all(fd, buf, n);
    close(fd);
    rename(tmp, where);
}
