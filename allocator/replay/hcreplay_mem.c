/* Resident memory from /proc/self, read with open/read into the stack: no stdio, no malloc,
 * so reading it does not disturb the allocator being measured. */
#define _GNU_SOURCE
#include "hcreplay.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The start of a /proc/self file into buf, NUL-terminated; its length, or 0 if unreadable. */
static size_t read_proc(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    return (size_t)n;
}

static uint64_t status_kb(const char *field)
{
    char buf[4096];
    if (!read_proc("/proc/self/status", buf, sizeof buf))
        return 0;
    size_t len = strlen(field);
    for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            uint64_t kb = 0;
            for (char *c = line + len + 1; *c && *c != '\n'; c++)
                if (*c >= '0' && *c <= '9')
                    kb = kb * 10 + (uint64_t)(*c - '0');
            return kb;
        }
    }
    return 0;
}

uint64_t hcr_vm_rss(void) { return status_kb("VmRSS") * 1024; }

uint64_t hcr_vm_hwm(void) { return status_kb("VmHWM") * 1024; }

int hcr_reset_hwm(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok ? 0 : -1;
}

struct hcr_curve hcr_curve;

/* resident pages from /proc/self/statm (its second field), in bytes; 0 if unreadable */
static uint64_t statm_rss(void)
{
    static long page;
    char buf[256];
    if (!page)
        page = sysconf(_SC_PAGESIZE);
    size_t n = read_proc("/proc/self/statm", buf, sizeof buf);
    if (!n)
        return 0;
    const char *c = strchr(buf, ' ');
    uint64_t pages = 0;
    for (c = c ? c + 1 : buf + n; *c >= '0' && *c <= '9'; c++)
        pages = pages * 10 + (uint64_t)(*c - '0');
    return pages * (uint64_t)page;
}

/* The trace's time between the previous sample (at op a) and this one (at op b = a + ops):
 * every tick in (a, b] ends a stretch of time spent after op tick-1, whose RSS is taken on the
 * line from the previous sample's to this one's. */
static void curve_clock(double rss, uint64_t ops)
{
    struct hcr_curve *c = &hcr_curve;
    uint64_t a = c->pos, b = a + ops;
    for (; c->next_tick < c->n_ticks && c->ticks[c->next_tick].op <= b; c->next_tick++) {
        size_t k = c->next_tick;
        if (k == 0)
            continue;                   /* the trace's first op: its time starts the clock */
        uint64_t i = c->ticks[k].op, dt = c->ticks[k].ns - c->ticks[k - 1].ns;
        double r = c->prev_rss + (rss - c->prev_rss) * (double)(i - a) / (double)(b - a);
        c->area += r * (double)dt;
        c->span_ns += dt;
    }
    c->pos = b;
    c->prev_rss = rss;
}

void hcr_curve_sample(uint64_t ops)
{
    uint64_t rss = statm_rss();
    uint64_t over = rss > hcr_curve.base ? rss - hcr_curve.base : 0;
    hcr_curve.sum += (double)over * (double)ops;
    hcr_curve.ops += ops;
    hcr_curve.samples++;
    if (over > hcr_curve.max) {
        hcr_curve.max = over;
        hcr_curve.max_at = hcr_curve.ops;
    }
    if (hcr_curve.n_ticks && ops)
        curve_clock((double)over, ops);
    hcr_bound_check(over, hcr_curve.ops);
}

double hcr_curve_mean(int *by_time)
{
    *by_time = hcr_curve.span_ns > 0;
    if (*by_time)
        return hcr_curve.area / (double)hcr_curve.span_ns;
    return hcr_curve.ops ? hcr_curve.sum / (double)hcr_curve.ops : -1;
}

struct hcr_bound hcr_bound;

static uint64_t process_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void hcr_bound_start(void) { hcr_bound.cpu_start = process_cpu_ns(); }

void hcr_bound_check(uint64_t rss_over_base, uint64_t ops_done)
{
    const char *why = NULL;
    uint64_t cpu = hcr_bound.max_cpu_ns ? process_cpu_ns() - hcr_bound.cpu_start : 0;
    if (hcr_bound.max_rss && rss_over_base > hcr_bound.max_rss)
        why = "rss";
    else if (hcr_bound.max_cpu_ns && cpu > hcr_bound.max_cpu_ns)
        why = "cpu";
    if (!why)
        return;
    /* dprintf into the pipe: no stdio buffer, no malloc of the allocator under test */
    dprintf(1, "{\"pruned\": \"%s\", \"rss_bytes\": %llu, \"max_rss_bytes\": %llu, "
               "\"cpu_ns\": %llu, \"max_cpu_ns\": %llu, \"ops_done\": %llu}\n",
            why, (unsigned long long)rss_over_base, (unsigned long long)hcr_bound.max_rss,
            (unsigned long long)cpu, (unsigned long long)hcr_bound.max_cpu_ns,
            (unsigned long long)ops_done);
    _exit(HCR_PRUNED_EXIT);
}
