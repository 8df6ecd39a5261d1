/* hcrun: run one program and report what it cost, for `hctune validate` (real runs).
 *
 *   hcrun REPORT PROGRAM ARGS...
 *
 * Forks, execs PROGRAM in the child (stdin, stdout, stderr and the environment pass through, so
 * LD_PRELOAD reaches it) and waits for it with wait4().  Writes one line to the file REPORT:
 *
 *   wall_ns user_us sys_us maxrss_kib status
 *
 * wall time from fork to the end of wait4 (CLOCK_MONOTONIC), the child's user and system CPU
 * time and peak resident set (ru_maxrss), and its exit code, or 128 + signal.
 *
 * Why a separate tiny program and not Python's own fork: Linux carries a process's
 * high-water RSS across exec (the old image's mark becomes the new one's floor), so a program
 * forked from a Python process of ~15-30 MiB reports at least that as its peak.  hcrun is linked
 * statically when the C library allows it and is a few hundred KiB: the program's ru_maxrss is
 * then its own.  Exit status of hcrun itself: 0 when it measured, 126 when it could not.
 */
#define _GNU_SOURCE
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
    int status;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) {
        perror("hcrun");
        return 126;
    }
    long long wall = now_ns() - start;
    int code = WIFEXITED(status) ? WEXITSTATUS(status)
             : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 125;
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror(argv[1]);
        return 126;
    }
    fprintf(f, "%lld %lld %lld %ld %d\n", wall, usec(ru.ru_utime), usec(ru.ru_stime),
            ru.ru_maxrss, code);
    return fclose(f) == 0 ? 0 : 126;
}
