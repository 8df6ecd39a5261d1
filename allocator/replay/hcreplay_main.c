/* build/hcreplay TRACE [--repeat N] [--json] [--no-touch] [--threads auto|off]
 *                      [--ops N] [--max-rss BYTES] [--max-cpu-seconds S] [--until-spread F]
 *
 * Replays a heap trace against the malloc of this process: glibc's, or whatever LD_PRELOAD
 * brings in (HC, jemalloc, mimalloc, tcmalloc, Kingsley, ...), always this same binary.
 * Measured on the same run (DESIGN §3):
 *   - CPU time of the replay loop only (CLOCK_THREAD_CPUTIME_ID: user + system, page faults
 *     included), per repeat; the median is reported as ns/op;
 *   - peak resident memory during the first loop over a baseline taken just before it
 *     (VmHWM after resetting it through /proc/self/clear_refs), and during all of them;
 *   - the first repeat's RSS curve: RSS read every n_ops/128 ops (at least 1024 apart; ~5 us
 *     each, inside the first repeat's time), its mean weighted by the ops each sample stands
 *     for (mean_rss_bytes, over the baseline);
 *   - HC's own footprint (its high-water of memory from the OS) when hc_stats_get is present,
 *     after the first loop and after all of them.
 *   Memory is taken from the first repeat because it starts from a fresh heap, as the program
 *   did: later repeats run on a heap filled and emptied before, which some allocators reuse
 *   less well than fresh memory, so their high-water says less about the program.
 *   - under `valgrind --tool=callgrind --instr-atstart=no`, only the loops are instrumented, so
 *     callgrind's total is the instructions of the replay alone (deterministic).
 * Multi-threaded traces (--threads auto, the default) are replayed on threads: each recorded
 * thread on its own, in its recorded order, an op on a block another thread allocated waiting
 * for it (hcreplay_threads.c).  Then the time is the repeat's wall time (all threads) and its
 * CPU time (all threads) is reported beside it.  --threads off replays them on one thread in
 * their recorded global order, as single-thread traces always are (their CPU time).
 * --stream on (auto: when the ops would take more than HCR_STREAM_ABOVE bytes, 2 GiB, about 270 M
 * events) holds no ops: each repeat reads the trace again a chunk at a time (hcreplay_load.c,
 * hcr_stream_*), reading outside the timed part; it replays on one thread (as --threads off)
 * and reports "streamed": true.
 * --ops N replays only the trace's first N ops (a part of the trace: a search's lower fidelity;
 * the rest is not read; the blocks still live after them are freed as at every repeat's end);
 * "part": true says the trace had more.
 * --until-spread F: --repeat is the most; stop once two repeats in a row after the first are
 * within F of each other (0.03: 3 %), so time is repeated only while the repeats disagree.
 * --max-rss BYTES, --max-cpu-seconds S: a search's bounds for a setting that may already have
 * lost; passing one ends the replay early with exit status 3 and one JSON line
 * ({"pruned": "rss"|"cpu", ...}; hcr_bound_check in hcreplay_mem.c).
 * Address-space layout randomisation is turned off for the replay (the harness runs itself again
 * under personality(ADDR_NO_RANDOMIZE), as `setarch -R` does): with it on, glibc's peak RSS on
 * the same trace moved by up to 1.4 % between runs, with it off one replay gives the same figure
 * every time, so memory needs one replay (docs/replay.md).  --aslr on keeps it.
 * Errors: one line on stderr, exit 2. */
#define _GNU_SOURCE
#include "hcreplay.h"

#include <errno.h>
#include <stdarg.h>
#include <sys/personality.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hcreplay_hc.h"
#include "hctrace.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HCR_HAVE_CALLGRIND 1
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define HCR_HAVE_CALLGRIND 0
#endif

#define MAX_REPEAT 1000

static void die(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dprintf(2, "hcreplay: error: %s\n", msg);
    exit(2);
}

static void usage(void)
{
    dprintf(2, "usage: hcreplay TRACE [--repeat N] [--json] [--no-touch] [--threads auto|off] "
               "[--stream auto|on|off] [--explain]\n"
               "  Replays TRACE against this process's malloc (inject others with LD_PRELOAD).\n");
    exit(2);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void put_json_string(const char *s)
{
    hcr_put("\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            hcr_put("\\%c", c);
        else if (c < 0x20)
            hcr_put("\\u%04x", c);
        else
            hcr_put("%c", c);
    }
    hcr_put("\"");
}

static double median_of(const uint64_t *v, long n)
{
    uint64_t sorted[MAX_REPEAT];
    memcpy(sorted, v, sizeof *v * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_u64);
    return n % 2 ? (double)sorted[n / 2]
                 : ((double)sorted[n / 2 - 1] + (double)sorted[n / 2]) / 2;
}

/* What a replay measured, as the whole load (main) and the streamed replay both report it;
 * measure_before and measure_after take its memory readings. */
struct measured {
    const char *path;
    const struct hcr_trace *t;
    long repeat;
    int touch;
    const uint64_t *times, *cpu_times; /* per repeat; the same array when only one clock */
    const char *clock;                 /* what cpu_times counts: "thread_cpu" or "wall" */
    int hwm_ok;                                  /* the high-water mark could be reset */
    uint64_t base_rss, hwm_first, hwm, rss_first;
    size_t n_slots;
    uint64_t trace_bytes;
    int streamed;
    const char *threads_mode;
    unsigned replay_threads;
    uint64_t handoffs, failed;
    int part;                                    /* --ops left some of the trace out */
    long repeat_max;                             /* --repeat: `repeat` may stop sooner */
    int hc;                                      /* HC's statistics are there */
    struct hcr_hc hc_before, hc_first, hc_after;
};

/* Before the first repeat: the baseline RSS, the high-water mark reset, HC's counters. */
static void measure_before(struct measured *m)
{
    m->hwm_ok = hcr_reset_hwm() == 0;
    m->base_rss = hcr_vm_rss();
    m->hc = hcr_hc_read(&m->hc_before);
    hcr_bound_start();
}

/* After repeat r, outside the timed part: after the first, its high-water mark, what the
 * allocator still holds once the repeat has freed its blocks (the decay and trim knobs show
 * here, not in the peak) and HC's counters; after the last, the same for all repeats. */
static void measure_after(struct measured *m, long r)
{
    if (r == 0) {
        m->hwm_first = hcr_vm_hwm();
        m->rss_first = hcr_vm_rss();
        if (m->hc)
            hcr_hc_read(&m->hc_first);
    }
    /* the bounds: the first repeat's peak (memory is the first repeat's), the CPU so far */
    hcr_bound_check(r == 0 && m->hwm_ok && m->hwm_first > m->base_rss
                        ? m->hwm_first - m->base_rss : 0,
                    (uint64_t)m->t->n_ops * (uint64_t)(r + 1));
    if (r == m->repeat - 1) {
        m->hwm = hcr_vm_hwm();
        if (m->hc)
            hcr_hc_read(&m->hc_after);
    }
}

/* One line of text, or the JSON object the tuner reads (tuner/hctune/replay.py). */
static int report(const struct measured *m, int json)
{
    const struct hcr_trace *t = m->t;
    long repeat = m->repeat;
    double median = median_of(m->times, repeat), cpu_median = median_of(m->cpu_times, repeat);
    uint64_t base = m->base_rss;
    uint64_t peak = m->hwm_ok && m->hwm_first > base ? m->hwm_first - base : 0;
    uint64_t peak_all = m->hwm_ok && m->hwm > base ? m->hwm - base : 0;
    if (!json) {
        hcr_put("%s: %zu ops x %ld repeats%s, median %.1f ns/op, peak RSS over baseline %llu KiB, "
            "max live %llu KiB",
            m->path, t->n_ops, repeat, m->streamed ? " (streamed)" : "",
            median / (double)t->n_ops, (unsigned long long)peak / 1024,
            (unsigned long long)t->max_live_bytes / 1024);
        if (m->replay_threads > 1)
            hcr_put(", %u threads (wall time; CPU %.1f ns/op)", m->replay_threads,
                cpu_median / (double)t->n_ops);
        if (m->hc)
            hcr_put(", HC footprint %llu KiB", (unsigned long long)m->hc_first.footprint_max / 1024);
        hcr_put("\n");
        hcr_flush();
        return 0;
    }
    hcr_put("{\"trace\": ");
    put_json_string(m->path);
    hcr_put(", \"command\": ");
    put_json_string(t->command);
    hcr_put(", \"ops\": %zu, \"events\": %llu, \"repeat\": %ld, \"repeat_max\": %ld, "
        "\"touch\": %s", t->n_ops, (unsigned long long)t->events, repeat, m->repeat_max,
        m->touch ? "true" : "false");
    hcr_put(", \"times_ns\": [");
    for (long r = 0; r < repeat; r++)
        hcr_put("%s%llu", r ? ", " : "", (unsigned long long)m->times[r]);
    hcr_put("], \"cpu_times_ns\": [");
    for (long r = 0; r < repeat; r++)
        hcr_put("%s%llu", r ? ", " : "", (unsigned long long)m->cpu_times[r]);
    hcr_put("], \"clock\": \"%s\", \"cpu_median_ns\": %.1f", m->clock, cpu_median);
    hcr_put(", \"median_ns\": %.1f, \"time_ns_per_op\": %.4f", median, median / (double)t->n_ops);
    hcr_put(", \"baseline_rss_bytes\": %llu", (unsigned long long)base);
    if (m->hwm_ok)
        hcr_put(", \"peak_rss_bytes\": %llu, \"peak_rss_all_repeats_bytes\": %llu",
            (unsigned long long)peak, (unsigned long long)peak_all);
    else
        hcr_put(", \"peak_rss_bytes\": null, \"peak_rss_all_repeats_bytes\": null");
    hcr_put(", \"final_rss_bytes\": %llu",
        (unsigned long long)(m->rss_first > base ? m->rss_first - base : 0));
    /* the mean RSS of the first repeat over the baseline, weighted by the trace's time (its
       clock) or, without one, by its ops (hcr_curve) */
    int by_time;
    double mean = hcr_curve_mean(&by_time);
    if (mean >= 0)
        hcr_put(", \"mean_rss_bytes\": %.0f", mean);
    else
        hcr_put(", \"mean_rss_bytes\": null");
    hcr_put(", \"mean_rss_weight\": \"%s\", \"trace_seconds\": %.3f", by_time ? "time" : "ops",
        (double)hcr_curve.span_ns / 1e9);
    hcr_put(", \"rss_samples\": %llu", (unsigned long long)hcr_curve.samples);
    /* where the first repeat's RSS curve peaked (ops replayed at its largest sample): the part
       of the trace a cheaper measure of the peak must reach */
    hcr_put(", \"peak_rss_sample_op\": %llu, \"part\": %s", (unsigned long long)hcr_curve.max_at,
        m->part ? "true" : "false");
    hcr_put(", \"max_live_bytes\": %llu, \"max_live_objects\": %llu, \"slots\": %zu",
        (unsigned long long)t->max_live_bytes, (unsigned long long)t->max_live_objects,
        m->n_slots);
    hcr_put(", \"trace_bytes\": %llu, \"distinct_sizes\": %zu, \"streamed\": %s",
        (unsigned long long)m->trace_bytes, t->n_sizes, m->streamed ? "true" : "false");
    hcr_put(", \"threads_mode\": \"%s\"", m->threads_mode);
    hcr_put(", \"replay_threads\": %u, \"handoffs\": %llu", m->replay_threads,
        (unsigned long long)m->handoffs);
    hcr_put(", \"threads\": %llu, \"skipped\": %llu, \"repaired\": %llu, \"failed\": %llu",
        (unsigned long long)t->threads, (unsigned long long)t->skipped,
        (unsigned long long)t->repaired, (unsigned long long)m->failed);
    hcr_put(", \"callgrind\": %s", HCR_HAVE_CALLGRIND ? "true" : "false");
    if (m->hc) {
        hcr_put(", \"hc_footprint_bytes\": %llu, \"hc_footprint_all_repeats_bytes\": %llu"
            ", \"hc_footprint_before_bytes\": %llu, \"hc_stats\": ",
            (unsigned long long)m->hc_first.footprint_max,
            (unsigned long long)m->hc_after.footprint_max,
            (unsigned long long)m->hc_before.footprint_max);
        hcr_hc_json(hcr_put);
    } else {
        hcr_put(", \"hc_footprint_bytes\": null, \"hc_footprint_all_repeats_bytes\": null");
    }
    hcr_put("}\n");
    hcr_flush();
    return 0;
}

/* The streamed replay (--stream): the same measures as main's, the trace read again for each
 * repeat a chunk at a time; only hcr_replay_ops and the final frees are timed. */
static int replay_streamed(const char *path, long repeat, int json, int touch)
{
    struct hcr_trace t;
    char err[512];
    struct hcr_stream *s = hcr_stream_open(path, &t, err, sizeof err);
    if (!s)
        die("%s", err);
    size_t n_slots = hcr_stream_slots(s);
    void **slots = hcr_map(n_slots * sizeof *slots);
    if (!slots)
        die("out of memory for %zu slots", n_slots);
    const struct hcr_rop *ops;
    long n;
    /* the first chunk is read before the baseline: the reader's buffers are in it */
    if (hcr_stream_rewind(s, &t, err, sizeof err) ||
        (n = hcr_stream_next(s, &t, &ops, err, sizeof err)) < 0)
        die("%s", err);
    uint64_t times[MAX_REPEAT], failed = 0;
    struct measured m;
    m = (struct measured){.path = path, .t = &t, .repeat = repeat, .touch = touch,
                          .times = times, .cpu_times = times, .clock = "thread_cpu",
                          .n_slots = n_slots, .streamed = 1, .threads_mode = "off",
                          .replay_threads = 1, .repeat_max = repeat};
    measure_before(&m);
    /* the first repeat's RSS curve as main's (hcr_curve), sampled between chunks */
    uint64_t every = t.n_ops / 128 > 1024 ? t.n_ops / 128 : 1024, since = 0;
    hcr_curve = (struct hcr_curve){.every = every, .base = m.base_rss};
    for (long r = 0; r < repeat; r++) {
        if (r > 0 && (hcr_stream_rewind(s, &t, err, sizeof err) ||
                      (n = hcr_stream_next(s, &t, &ops, err, sizeof err)) < 0))
            die("%s", err);
        uint64_t spent = 0, t0;
        while (n > 0) {
            t0 = now_ns();
            CALLGRIND_START_INSTRUMENTATION;
            failed += hcr_replay_ops(&t, ops, (size_t)n, slots, touch);
            if (r == 0 && (since += (uint64_t)n) >= every) {
                hcr_curve_sample(since);
                since = 0;
            }
            CALLGRIND_STOP_INSTRUMENTATION;
            spent += now_ns() - t0;
            if ((n = hcr_stream_next(s, &t, &ops, err, sizeof err)) < 0)
                die("%s", err);
        }
        t0 = now_ns();
        CALLGRIND_START_INSTRUMENTATION;
        for (size_t i = 0; i < n_slots; i++) /* as hcr_replay_once: what is left, freed */
            if (slots[i]) {
                free(slots[i]);
                slots[i] = NULL;
            }
        if (r == 0 && since)
            hcr_curve_sample(since);
        CALLGRIND_STOP_INSTRUMENTATION;
        times[r] = spent + now_ns() - t0;
        measure_after(&m, r);
    }
    m.failed = failed;
    /* held at once: one chunk of ops and the table of distinct sizes */
    m.trace_bytes = HCR_STREAM_CHUNK * sizeof(struct hcr_rop) +
                    t.n_sizes * (sizeof *t.sizes + sizeof *t.aligns);
    return report(&m, json);
}

static int under_valgrind(void)
{
#if HCR_HAVE_CALLGRIND
    return RUNNING_ON_VALGRIND;
#else
    return 0;
#endif
}

/* Run this harness again, same arguments and environment, with the address space laid out the
 * same every time (as `setarch -R`); returns only when that cannot be done (then the replay goes
 * on with randomisation, as before). Not under valgrind: /proc/self/exe would be valgrind's. */
static void fixed_layout(char **argv)
{
    int now = personality(0xffffffff);
    if (now == -1 || (now & ADDR_NO_RANDOMIZE))
        return;
    if (under_valgrind())
        return;
    if (personality((unsigned long)now | ADDR_NO_RANDOMIZE) == -1)
        return;
    execv("/proc/self/exe", argv);
    personality((unsigned long)now); /* exec failed: as it was */
}

int main(int argc, char **argv)
{
    int aslr = 0;
    for (int i = 1; i < argc - 1; i++)
        if (!strcmp(argv[i], "--aslr"))
            aslr = !strcmp(argv[i + 1], "on");
    if (!aslr)
        fixed_layout(argv);
    const char *path = NULL;
    long repeat = 5;
    int json = 0, touch = 1, threads_mode = 1; /* 1 auto, 0 off */
    int stream_mode = -1;                      /* -1 auto, 0 off, 1 on */
    unsigned long long ops_limit = 0;          /* --ops: 0, all of them */
    double until_spread = -1;                  /* --until-spread: < 0, all the repeats */
    int explain = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            char *end;
            repeat = strtol(argv[++i], &end, 10);
            if (*end || repeat < 1 || repeat > MAX_REPEAT)
                die("--repeat wants a whole number from 1 to %d, not '%s'", MAX_REPEAT, argv[i]);
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "auto"))
                threads_mode = 1;
            else if (!strcmp(argv[i], "off"))
                threads_mode = 0;
            else
                die("--threads wants auto or off, not '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--stream") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "auto"))
                stream_mode = -1;
            else if (!strcmp(argv[i], "on"))
                stream_mode = 1;
            else if (!strcmp(argv[i], "off"))
                stream_mode = 0;
            else
                die("--stream wants auto, on or off, not '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--aslr") && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "on") && strcmp(argv[i], "off"))
                die("--aslr wants on or off, not '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--until-spread") && i + 1 < argc) {
            char *end;
            until_spread = strtod(argv[++i], &end);
            if (*end || !(until_spread >= 0) || until_spread > 10)
                die("--until-spread wants a fraction from 0 to 10, not '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--ops") && i + 1 < argc) {
            char *end;
            ops_limit = strtoull(argv[++i], &end, 10);
            if (*end || ops_limit < 1 || argv[i][0] == '-')
                die("--ops wants a whole number of ops from 1, not '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--max-rss") && i + 1 < argc) {
            char *end;
            hcr_bound.max_rss = strtoull(argv[++i], &end, 10);
            if (*end || hcr_bound.max_rss < 1 || argv[i][0] == '-')
                die("--max-rss wants a number of bytes from 1, not '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--max-cpu-seconds") && i + 1 < argc) {
            char *end;
            double s = strtod(argv[++i], &end);
            if (*end || !(s > 0) || s > 1e7)
                die("--max-cpu-seconds wants a positive number of seconds, not '%s'", argv[i]);
            hcr_bound.max_cpu_ns = (uint64_t)(s * 1e9);
        } else if (!strcmp(argv[i], "--explain")) {
            explain = 1; /* hcreplay_explain.c: the parts of the RSS at the trace's peak */
        } else if (!strcmp(argv[i], "--no-touch")) {
            touch = 0;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
        } else if (argv[i][0] == '-' || path) {
            usage();
        } else {
            path = argv[i];
        }
    }
    if (!path)
        usage();

    struct hcr_trace t;
    char err[512];
    if (explain) /* one pass in recorded order, on this thread */
        stream_mode = threads_mode = 0;
    if (stream_mode < 0) {
        /* auto: stream when the ops would take more than HCR_STREAM_ABOVE bytes */
        hct_reader *r = hct_open(path, err, sizeof err);
        if (!r)
            die("%s", err);
        stream_mode = hct_count(r) * sizeof(struct hcr_rop) > HCR_STREAM_ABOVE;
        hct_close(r);
    }
    if (stream_mode && ops_limit)
        die("--ops replays a part of a loaded trace; this one is streamed (--stream off to "
            "load it)");
    if (stream_mode)
        return replay_streamed(path, repeat, json, touch);
    hcr_load_max_ops = (size_t)ops_limit; /* a part: the rest of the trace is not even read */
    if (hcr_load(path, &t, threads_mode, err, sizeof err))
        die("%s", err);
    if (hcr_load_fresh && !under_valgrind())
        execv("/proc/self/exe", argv); /* again, from the cache just written (hcr_load) */
    if (ops_limit && ops_limit < t.n_ops)
        t.n_ops = (size_t)ops_limit; /* an event's second op (an implicit free) left out */
    struct hcr_mt *mt = NULL;
    if (threads_mode && t.threads > 1) {
        if (!(mt = hcr_mt_prepare(&t)))
            die("out of memory splitting %s into threads", path);
        if (hcr_mt_threads(mt) < 2)
            mt = NULL; /* only one thread's calls were replayable: the single-thread loop */
        else if (hcr_mt_prime(mt))
            die("cannot create %u threads", hcr_mt_threads(mt));
        if (mt) { /* the threads' streams hold every op now: the trace-order copy can go */
            hcr_unmap(t.ops, t.ops_cap * sizeof *t.ops);
            t.ops = NULL;
        }
    }
    void **slots = hcr_map(t.n_slots * sizeof *slots);
    if (!slots)
        die("out of memory for %zu slots", t.n_slots);

    if (explain)
        return hcr_explain(path, &t, slots, touch);
    uint64_t times[MAX_REPEAT], cpu_times[MAX_REPEAT], failed = 0;
    struct measured m;
    m = (struct measured){.path = path, .t = &t, .repeat = repeat, .touch = touch,
                          .times = times, .cpu_times = cpu_times,
                          .clock = mt ? "wall" : "thread_cpu", .n_slots = t.n_slots,
                          .threads_mode = threads_mode ? "auto" : "off",
                          .replay_threads = mt ? hcr_mt_threads(mt) : 1,
                          .part = hcr_load_stopped, .repeat_max = repeat};
    measure_before(&m);
    /* the first repeat's RSS curve: about CURVE_SAMPLES samples, at least CURVE_MIN_OPS ops
       apart (each sample is a read of /proc/self/statm inside the loop) */
    enum { CURVE_SAMPLES = 128, CURVE_MIN_OPS = 1024 };
    hcr_curve = (struct hcr_curve){.every = t.n_ops / CURVE_SAMPLES > CURVE_MIN_OPS
                                                ? t.n_ops / CURVE_SAMPLES : CURVE_MIN_OPS,
                                   .base = m.base_rss};
    if (!mt)    /* the ops in the trace's order: its clock weighs the curve */
        hcr_curve.ticks = t.ticks, hcr_curve.n_ticks = t.n_ticks;
    for (long r = 0; r < repeat; r++) {
        if (r == 1)
            hcr_curve.every = 0;
        if (mt) {
            CALLGRIND_START_INSTRUMENTATION;
            uint64_t f = hcr_mt_replay_once(mt, slots, touch, &times[r], &cpu_times[r]);
            CALLGRIND_STOP_INSTRUMENTATION;
            if (f == UINT64_MAX)
                die("cannot create %u threads", hcr_mt_threads(mt));
            failed += f;
        } else {
            uint64_t t0 = now_ns();
            CALLGRIND_START_INSTRUMENTATION;
            failed += hcr_replay_once(&t, slots, touch);
            CALLGRIND_STOP_INSTRUMENTATION;
            times[r] = cpu_times[r] = now_ns() - t0;
        }
        /* --until-spread: two repeats in a row within the spread, and the time is known well
           enough: this is the last (the first repeat, a fresh heap's, is not one of the two) */
        if (until_spread >= 0 && r >= 2 && r < repeat - 1) {
            uint64_t a = times[r - 1], b = times[r], lo = a < b ? a : b, hi = a < b ? b : a;
            if (lo > 0 && (double)(hi - lo) / (double)lo <= until_spread)
                m.repeat = repeat = r + 1;
        }
        measure_after(&m, r);
    }
    m.failed = failed;
    m.handoffs = mt ? hcr_mt_handoffs(mt) : 0;
    /* the loaded trace's own memory: 8 bytes per op plus the table of distinct sizes */
    m.trace_bytes = hcr_trace_bytes(&t);
    return report(&m, json);
}
