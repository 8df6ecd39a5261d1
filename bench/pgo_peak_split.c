/* pgo_peak_split.c -- how much of a program's resident memory is malloc's, sampled through the
 * run (bench/pgo_floor.py).  Preloaded after HC: a thread started by a constructor reads, every
 * 2 ms, the resident size (/proc/self/statm) and HC's statistics (hc_stats_get: bytes_current,
 * the block bytes handed out; heap_bytes + mapped_bytes, the address space HC holds now, an upper
 * bound on its resident memory).  At exit it writes to $SPLIT_OUT, one "name value" line each:
 *
 *   samples        samples taken
 *   hwm            VmHWM at exit (the peak RSS getrusage reports)
 *   rss_max        the largest RSS sampled, and at that sample:
 *   live_at_max    bytes_current
 *   held_at_max    heap_bytes + mapped_bytes
 *   bound          max over the samples of RSS - held + live: the program's memory outside malloc
 *                  (RSS - held, at least) plus malloc's live block bytes, at one instant
 *   live_at_bound  bytes_current at that sample
 *
 *   cc -O2 -shared -fPIC -pthread -Iallocator/hc -o peak_split.so bench/pgo_peak_split.c
 *   SPLIT_OUT=/tmp/split LD_PRELOAD="build/libhcmalloc.so ./peak_split.so" PROGRAM ARGS
 *
 * The thread makes the process multi-threaded (HC then takes its locks); it calls no malloc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hc_stats.h"

static int (*get_stats)(struct hc_stats *);
static pthread_t sampler;
static volatile int stop;
static uint64_t samples, rss_max, live_at_max, held_at_max, bound, live_at_bound;

static uint64_t read_num(const char *path, const char *key, int field)
{
    char buf[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *p = buf;
    if (key) {
        p = strstr(buf, key);
        if (!p)
            return 0;
        p += strlen(key);
    }
    while (field-- > 0) { /* skip fields */
        while (*p == ' ' || *p == '\t')
            p++;
        while (*p && *p != ' ' && *p != '\t')
            p++;
    }
    return strtoull(p, NULL, 10);
}

static void sample(void)
{
    struct hc_stats s;
    uint64_t rss = read_num("/proc/self/statm", NULL, 1) * (uint64_t)sysconf(_SC_PAGESIZE);
    get_stats(&s);
    uint64_t held = s.heap_bytes + s.mapped_bytes;
    samples++;
    if (rss > rss_max) {
        rss_max = rss;
        live_at_max = s.bytes_current;
        held_at_max = held;
    }
    uint64_t b = rss > held ? rss - held + s.bytes_current : s.bytes_current;
    if (b > bound) {
        bound = b;
        live_at_bound = s.bytes_current;
    }
}

static void *run(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 2000000 };
    while (!stop) {
        sample();
        nanosleep(&ts, NULL);
    }
    return NULL;
}

__attribute__((constructor)) static void start(void)
{
    get_stats = (int (*)(struct hc_stats *))dlsym(RTLD_DEFAULT, "hc_stats_get");
    if (get_stats && getenv("SPLIT_OUT") && pthread_create(&sampler, NULL, run, NULL) != 0)
        get_stats = NULL;
    else if (!getenv("SPLIT_OUT"))
        get_stats = NULL;
}

__attribute__((destructor)) static void finish(void)
{
    if (!get_stats)
        return;
    stop = 1;
    pthread_join(sampler, NULL);
    sample();
    char path[4096], buf[1024];
    snprintf(path, sizeof path, "%s", getenv("SPLIT_OUT"));
    int n = snprintf(buf, sizeof buf,
                     "samples %llu\nhwm %llu\nrss_max %llu\nlive_at_max %llu\nheld_at_max %llu\n"
                     "bound %llu\nlive_at_bound %llu\n",
                     (unsigned long long)samples,
                     (unsigned long long)read_num("/proc/self/status", "VmHWM:", 0) * 1024,
                     (unsigned long long)rss_max, (unsigned long long)live_at_max,
                     (unsigned long long)held_at_max, (unsigned long long)bound,
                     (unsigned long long)live_at_bound);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (write(fd, buf, (size_t)n) != n)
            n = 0;
        close(fd);
    }
}
