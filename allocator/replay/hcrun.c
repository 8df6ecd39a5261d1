/* hcrun: run one program and report what it cost, for `hctune validate` (real runs).
 *
 *   hcrun REPORT PROGRAM ARGS...
 *
 * Forks, execs PROGRAM in the child (stdin, stdout, stderr and the environment pass through, so
 * LD_PRELOAD reaches it) and waits for it with wait4().  Writes one line to the file REPORT:
 *
 *   wall_ns user_us sys_us maxrss_kib status rss_mean_kib rss_final_kib samples
 *
 * wall time from fork to the end of wait4 (CLOCK_MONOTONIC), the child's user and system CPU
 * time and peak resident set (ru_maxrss), and its exit code, or 128 + signal; then its RSS
 * over time: a second thread reads /proc/PID/statm every SAMPLE_MS while the main thread
 * blocks in wait4 (so the wall time is not rounded to the sampling period), and reports the
 * time-weighted mean of the samples and the last one, the RSS the program still held after
 * its peak (for a long-running program, what it settles at; jemalloc's decay and glibc's trim
 * show there). A program that ends before the first sample has samples = 0 (means unknown).
 *
 * Why a separate tiny program and not Python's own fork: Linux carries a process's
 * high-water RSS across exec (the old image's mark becomes the new one's floor), so a program
 * forked from a Python process of ~15-30 MiB reports at least that as its peak.  hcrun is linked
 * statically when the C library allows it and is a few hundred KiB: the program's ru_maxrss is
 * then its own.  Exit status of hcrun itself: 0 when it measured, 126 when it could not.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long usec(struct timeval tv)
{
    return (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
}

#define SAMPLE_MS 5

struct sampler {
    pid_t pid;
    atomic_int done;
    long long page_kib;
    double area_kib_ns;     /* sum of rss * interval */
    long long span_ns;      /* time covered by samples */
    long long last_kib;
    long samples;
};

/* RSS of pid in KiB from /proc/pid/statm (its second field, in pages); -1 when gone */
static long long rss_kib(pid_t pid, long long page_kib)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long long size = 0, resident = -1;
    if (!fgets(buf, sizeof buf, f) || sscanf(buf, "%lld %lld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * page_kib;
}

static void *sample_loop(void *arg)
{
    struct sampler *s = arg;
    long long prev_t = now_ns(), prev_kib = -1;
    const struct timespec period = {0, SAMPLE_MS * 1000000L};
    while (!atomic_load(&s->done)) {
        nanosleep(&period, NULL);
        if (atomic_load(&s->done))
            break;
        long long kib = rss_kib(s->pid, s->page_kib), t = now_ns();
        if (kib <= 0)          /* exec not done yet, or a zombie: nothing of the program */
            continue;
        if (prev_kib > 0) {    /* the RSS of the interval: its end's (a step function) */
            s->area_kib_ns += (double)kib * (double)(t - prev_t);
            s->span_ns += t - prev_t;
        }
        prev_t = t;
        prev_kib = kib;
        s->last_kib = kib;
        s->samples++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: hcrun REPORT PROGRAM ARGS...\n");
        return 126;
    }
    long long start = now_ns();
    pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    struct sampler s = {.pid = pid, .page_kib = sysconf(_SC_PAGESIZE) / 1024};
    pthread_t th;
    int sampling = pid > 0 && pthread_create(&th, NULL, sample_loop, &s) == 0;
    int status;
    struct rusage ru;
    int waited = pid < 0 ? -1 : wait4(pid, &status, 0, &ru);
    long long wall = now_ns() - start;
    if (sampling) {
        atomic_store(&s.done, 1);
        pthread_join(th, NULL);
    }
    if (waited < 0) {
        perror("hcrun");
        return 126;
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status)
             : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 125;
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror(argv[1]);
        return 126;
    }
    long long mean_kib = s.span_ns > 0 ? (long long)(s.area_kib_ns / (double)s.span_ns)
                                       : s.last_kib;
    fprintf(f, "%lld %lld %lld %ld %d %lld %lld %ld\n", wall, usec(ru.ru_utime),
            usec(ru.ru_stime), ru.ru_maxrss, code, mean_kib, s.last_kib, s.samples);
    return fclose(f) == 0 ? 0 : 126;
}
