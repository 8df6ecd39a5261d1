/* hctrace-tool — whole-trace work in C for traces too big for Python's reader.
 *
 *   hctrace-tool stats TRACE [POINTS]   the statistics of Hasan & Chang 2006 Tables 1, 3, 4 and
 *                                       the allocation graph (their Fig. 5) as JSON on stdout
 *   hctrace-tool dump TRACE             one line per event: seq thread op ptr old size align time
 *   hctrace-tool sizes TRACE            per request size below 64 KiB: requests, and blocks live
 *                                       at the peak of live bytes (hctune.fitted's profile), JSON
 *
 * The same definitions as hctune.trace.stats (a test compares them); exit 2 with one line on
 * stderr for a bad trace. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hctrace.h"
#include "hctrace_map.h"

#define SMALL_LIMIT 1024          /* Hasan & Chang 2006, Tables 1, 3, 4: small = 1 KiB or less */
#define HIST_BINS 64
#define SEEN_LIMIT 65536          /* sizes below this are told apart by a bitmap, not hashed */
static const char *const OP_NAME[] = {"?", "malloc", "calloc", "realloc", "free", "memalign"};

typedef struct live {
    uint64_t bytes, objects, small_bytes, small_objects;
} live;

typedef struct stats {
    uint64_t ops[6], bytes_req, small_req, small_bytes, live_max[6], threads_max;
    uint64_t free_unknown, realloc_unknown, alloc_live, last_time;
    uint64_t hist_count[HIST_BINS], hist_bytes[HIST_BINS];
    live cur;
    hct_map objects, sizes;     /* live blocks; distinct sizes of SEEN_LIMIT and more */
    uint64_t seen[SEEN_LIMIT / 64]; /* distinct sizes below SEEN_LIMIT, a bit each */
    size_t seen_count;
} stats;

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static int bin_of(uint64_t size)
{
    /* bin 0 holds sizes up to 16; bin b, sizes up to 2^(b+4) (the last, everything above) */
    if (size <= 16)
        return 0;
    int b = 64 - __builtin_clzll(size - 1);
    return (b > 63 ? 63 : b) - 4;
}

/* Only an allocation raises a live count: the maxima are looked at here, and only the
 * counts this size class can raise. */
static void track_add(stats *s, uint64_t ptr, uint64_t size)
{
    uint64_t old;
    int had = hct_map_swap(&s->objects, ptr, size, &old);
    if (had < 0) {
        fprintf(stderr, "hctrace-tool: out of memory\n");
        exit(2);
    }
    if (had) {                    /* the address is already live: a lost free */
        s->alloc_live++;
        s->cur.bytes -= old;
        s->cur.objects--;
        if (old <= SMALL_LIMIT) {
            s->cur.small_bytes -= old;
            s->cur.small_objects--;
        }
    }
    s->cur.bytes += size;
    s->cur.objects++;
    if (s->cur.bytes > s->live_max[0])
        s->live_max[0] = s->cur.bytes;
    if (s->cur.objects > s->live_max[1])
        s->live_max[1] = s->cur.objects;
    if (size <= SMALL_LIMIT) {
        s->cur.small_bytes += size;
        s->cur.small_objects++;
        if (s->cur.small_bytes > s->live_max[2])
            s->live_max[2] = s->cur.small_bytes;
        if (s->cur.small_objects > s->live_max[4])
            s->live_max[4] = s->cur.small_objects;
    } else {
        uint64_t large_bytes = s->cur.bytes - s->cur.small_bytes;
        uint64_t large_objects = s->cur.objects - s->cur.small_objects;
        if (large_bytes > s->live_max[3])
            s->live_max[3] = large_bytes;
        if (large_objects > s->live_max[5])
            s->live_max[5] = large_objects;
    }
}

static int track_del(stats *s, uint64_t ptr)
{
    uint64_t size;
    if (!hct_map_del(&s->objects, ptr, &size))
        return 0;
    s->cur.bytes -= size;
    s->cur.objects--;
    if (size <= SMALL_LIMIT) {
        s->cur.small_bytes -= size;
        s->cur.small_objects--;
    }
    return 1;
}

static void request(stats *s, uint64_t size)
{
    s->bytes_req += size;
    if (size <= SMALL_LIMIT) {
        s->small_req++;
        s->small_bytes += size;
    }
    int b = bin_of(size);
    s->hist_count[b]++;
    s->hist_bytes[b] += size;
    if (size < SEEN_LIMIT) {
        uint64_t bit = (uint64_t)1 << (size & 63);
        if (!(s->seen[size >> 6] & bit)) {
            s->seen[size >> 6] |= bit;
            s->seen_count++;
        }
    } else if (hct_map_put(&s->sizes, size, 1) < 0) {
        fprintf(stderr, "hctrace-tool: out of memory\n");
        exit(2);
    }
}

static void print_array(const char *name, const uint64_t *a, size_t n, int last)
{
    printf("    \"%s\": [", name);
    for (size_t i = 0; i < n; i++)
        printf(i ? ", %" PRIu64 : "%" PRIu64, a[i]);
    printf(last ? "]\n" : "],\n");
}

static int cmd_stats(const char *path, size_t points)
{
    char err[512];
    hct_reader *r = hct_open(path, err, sizeof err);
    if (!r) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    static stats s;
    uint64_t n = hct_count(r);
    uint64_t per = points ? (n + points - 1) / points : 1;
    if (per == 0)
        per = 1;
    size_t gcap = (size_t)(n / per + 2), glen = 0;
    uint64_t *g_ev = calloc(gcap, 8), *g_t = calloc(gcap, 8), *g_live = calloc(gcap, 8);
    uint64_t idx = 0, bucket_max = 0, left = per;   /* events until the next graph point */
    /* headroom: live bytes summed after each event, and over time (bytes x ns until the next
     * event) when the trace has time stamps */
    unsigned __int128 ev_sum = 0, t_sum = 0;
    uint64_t prev_t = 0, prev_bytes = 0;
    hct_event e;
    int rc;
    /* HCTRACE_PROGRESS=N: "progress DONE TOTAL" on stderr every N events (hctune stats) */
    const char *pe = getenv("HCTRACE_PROGRESS");
    uint64_t every = pe ? strtoull(pe, NULL, 10) : 0;
    while ((rc = hct_next(r, &e)) == 1) {
        if (every && idx && idx % every == 0) {
            fprintf(stderr, "progress %" PRIu64 " %" PRIu64 "\n", idx, n);
            fflush(stderr);
        }
        s.ops[e.op]++;
        if (e.thread + 1 > s.threads_max)
            s.threads_max = e.thread + 1;
        s.last_time = e.time_ns;
        switch (e.op) {
        case HCT_FREE:
            if (!track_del(&s, e.ptr))
                s.free_unknown++;
            break;
        case HCT_REALLOC:
            if (!track_del(&s, e.old_ptr))
                s.realloc_unknown++;
            request(&s, e.size);
            track_add(&s, e.ptr, e.size);
            break;
        default:
            request(&s, e.size);
            track_add(&s, e.ptr, e.size);
        }
        if (s.cur.bytes > bucket_max)
            bucket_max = s.cur.bytes;
        ev_sum += s.cur.bytes;
        if (e.time_ns > prev_t)
            t_sum += (unsigned __int128)prev_bytes * (e.time_ns - prev_t);
        if (e.time_ns >= prev_t)
            prev_t = e.time_ns;
        prev_bytes = s.cur.bytes;
        idx++;
        if (--left == 0 || idx == n) {
            left = per;
            if (glen < gcap) {
                g_ev[glen] = idx;
                g_t[glen] = e.time_ns;
                g_live[glen++] = bucket_max;
            }
            bucket_max = s.cur.bytes;
        }
    }
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", path, hct_error(r));
        hct_close(r);
        return 2;
    }
    uint64_t allocs = s.ops[HCT_MALLOC] + s.ops[HCT_CALLOC] + s.ops[HCT_MEMALIGN];
    uint64_t reqs = allocs + s.ops[HCT_REALLOC];
    printf("{\n  \"format_version\": %d,\n  \"command\": ", HCT_VERSION);
    json_str(hct_command(r));
    printf(",\n  \"pid\": %u,\n  \"events\": %" PRIu64 ",\n  \"threads\": %" PRIu64
           ",\n  \"duration_ns\": %" PRIu64 ",\n  \"ops\": {", hct_pid(r), idx, s.threads_max,
           s.last_time);
    for (int op = HCT_MALLOC; op <= HCT_MEMALIGN; op++)
        printf("%s\"%s\": %" PRIu64, op > HCT_MALLOC ? ", " : "", OP_NAME[op], s.ops[op]);
    printf("},\n  \"allocations\": %" PRIu64 ",\n  \"reallocs\": %" PRIu64 ",\n  \"frees\": %"
           PRIu64 ",\n", allocs, s.ops[HCT_REALLOC], s.ops[HCT_FREE]);
    printf("  \"small_limit\": %d,\n  \"requests\": %" PRIu64 ",\n  \"small_requests\": %" PRIu64
           ",\n  \"large_requests\": %" PRIu64 ",\n", SMALL_LIMIT, reqs, s.small_req,
           reqs - s.small_req);
    printf("  \"bytes_requested\": %" PRIu64 ",\n  \"small_bytes\": %" PRIu64
           ",\n  \"large_bytes\": %" PRIu64 ",\n", s.bytes_req, s.small_bytes,
           s.bytes_req - s.small_bytes);
    printf("  \"pct_small_requests\": %.4f,\n  \"pct_small_bytes\": %.4f,\n",
           reqs ? 100.0 * (double)s.small_req / (double)reqs : 0.0,
           s.bytes_req ? 100.0 * (double)s.small_bytes / (double)s.bytes_req : 0.0);
    printf("  \"distinct_sizes\": %zu,\n", s.seen_count + s.sizes.len);
    static const char *const MAXN[] = {"max_live_bytes", "max_live_objects",
                                       "max_live_small_bytes", "max_live_large_bytes",
                                       "max_live_small_objects", "max_live_large_objects"};
    for (int i = 0; i < 6; i++)
        printf("  \"%s\": %" PRIu64 ",\n", MAXN[i], s.live_max[i]);
    int timed = prev_t > 0 && t_sum > 0;
    printf("  \"mean_live_bytes\": %" PRIu64 ",\n  \"mean_live_weight\": \"%s\",\n",
           timed ? (uint64_t)(t_sum / prev_t) : idx ? (uint64_t)(ev_sum / idx) : 0,
           timed ? "time" : "events");
    printf("  \"final_live_bytes\": %" PRIu64 ",\n  \"final_live_objects\": %" PRIu64 ",\n",
           s.cur.bytes, s.cur.objects);
    printf("  \"anomalies\": {\"free_unknown\": %" PRIu64 ", \"realloc_unknown\": %" PRIu64
           ", \"alloc_live\": %" PRIu64 "},\n", s.free_unknown, s.realloc_unknown, s.alloc_live);
    printf("  \"histogram\": [");
    int top = HIST_BINS - 1;
    while (top > 0 && !s.hist_count[top])
        top--;
    for (int b = 0; b <= top && reqs; b++)
        printf("%s\n    {\"max_size\": %" PRIu64 ", \"count\": %" PRIu64 ", \"bytes\": %" PRIu64
               "}", b ? "," : "", (uint64_t)1 << (b + 4), s.hist_count[b], s.hist_bytes[b]);
    printf("\n  ],\n  \"graph\": {\n");
    print_array("event", g_ev, glen, 0);
    print_array("time_ns", g_t, glen, 0);
    print_array("live_bytes", g_live, glen, 1);
    printf("  }\n}\n");
    hct_close(r);
    return 0;
}

static int cmd_dump(const char *path)
{
    char err[512];
    hct_reader *r = hct_open(path, err, sizeof err);
    if (!r) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    printf("# command: %s\n# pid %u ppid %u events %" PRIu64 "\n", hct_command(r), hct_pid(r),
           hct_ppid(r), hct_count(r));
    hct_event e;
    int rc;
    while ((rc = hct_next(r, &e)) == 1)
        printf("%" PRIu64 " %u %s 0x%" PRIx64 " 0x%" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64
               "\n", e.seq, e.thread, OP_NAME[e.op], e.ptr, e.old_ptr, e.size, e.align,
               e.time_ns);
    if (rc < 0)
        fprintf(stderr, "%s: %s\n", path, hct_error(r));
    hct_close(r);
    return rc < 0 ? 2 : 0;
}

/* The profile hctune.fitted derives size classes from: two passes, the first finds the event
 * at which live bytes peak (the first such event), the second counts, per size below
 * SEEN_LIMIT, the requests and the blocks live just after that event. */
static int cmd_sizes(const char *path)
{
    char err[512];
    static stats s;
    static uint64_t reqs[SEEN_LIMIT], live[SEEN_LIMIT];
    uint64_t peak_at = 0, peak = 0, idx = 0, above_reqs = 0, above_live = 0;
    for (int pass = 0; pass < 2; pass++) {
        hct_reader *r = hct_open(path, err, sizeof err);
        if (!r) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        hct_map_free(&s.objects);
        memset(&s, 0, sizeof s);
        idx = 0;
        hct_event e;
        int rc;
        while ((rc = hct_next(r, &e)) == 1) {
            if (e.op == HCT_FREE || e.op == HCT_REALLOC)
                track_del(&s, e.op == HCT_FREE ? e.ptr : e.old_ptr);
            if (e.op != HCT_FREE) {
                track_add(&s, e.ptr, e.size);
                if (pass == 1) {
                    if (e.size < SEEN_LIMIT)
                        reqs[e.size]++;
                    else
                        above_reqs++;
                }
            }
            idx++;
            if (pass == 0 && s.cur.bytes > peak) {
                peak = s.cur.bytes;
                peak_at = idx;
            }
            if (pass == 1 && idx == peak_at) {
                /* the snapshot: every live block's size */
                for (size_t i = 0; i < s.objects.cap; i++) {
                    if (!s.objects.keys[i])
                        continue;
                    uint64_t z = s.objects.vals[i];
                    if (z < SEEN_LIMIT)
                        live[z]++;
                    else
                        above_live += z;
                }
            }
        }
        if (rc < 0) {
            fprintf(stderr, "%s: %s\n", path, hct_error(r));
            hct_close(r);
            return 2;
        }
        if (pass == 1) {
            printf("{\n  \"command\": ");
            json_str(hct_command(r));
            printf(",\n  \"events\": %" PRIu64 ",\n  \"peak_event\": %" PRIu64
                   ",\n  \"max_live_bytes\": %" PRIu64 ",\n  \"above\": {\"limit\": %d"
                   ", \"requests\": %" PRIu64 ", \"live_bytes\": %" PRIu64 "},\n"
                   "  \"sizes\": [", idx, peak_at, peak, SEEN_LIMIT, above_reqs, above_live);
            int first = 1;
            for (size_t z = 0; z < SEEN_LIMIT; z++)
                if (reqs[z] || live[z]) {
                    printf("%s\n    [%zu, %" PRIu64 ", %" PRIu64 "]", first ? "" : ",", z,
                           reqs[z], live[z]);
                    first = 0;
                }
            printf("\n  ]\n}\n");
        }
        hct_close(r);
    }
    hct_map_free(&s.objects);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "stats") == 0)
        return cmd_stats(argv[2], argc >= 4 ? (size_t)strtoull(argv[3], NULL, 10) : 2000);
    if (argc == 3 && strcmp(argv[1], "dump") == 0)
        return cmd_dump(argv[2]);
    if (argc == 3 && strcmp(argv[1], "sizes") == 0)
        return cmd_sizes(argv[2]);
    fprintf(stderr, "usage: hctrace-tool stats TRACE [POINTS] | dump TRACE | sizes TRACE\n");
    return 2;
}
