/* clock_phases: two phases of allocations apart in time, for the trace's clock
 * (tests/test_servers_clock.py).
 *
 *   clock_phases PAUSE_MS [fork]
 *
 * Phase 1: 200 blocks of 1000+i bytes.  A pause of PAUSE_MS (nanosleep: the program is idle,
 * as a server between requests).  Phase 2: the 200 blocks freed, then 100 blocks of 3000+i
 * bytes allocated and freed.  With `fork`, a child forked before phase 1 does the same, so its
 * own trace must carry the same clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    long ms = atol(argv[1]);
    pid_t child = argc > 2 && !strcmp(argv[2], "fork") ? fork() : -1;
    void *blocks[200];
    for (int i = 0; i < 200; i++)
        blocks[i] = malloc(1000 + (size_t)i);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    for (int i = 0; i < 200; i++)
        free(blocks[i]);
    for (int i = 0; i < 100; i++) {
        sink = malloc(3000 + (size_t)i);
        free(sink);
    }
    if (child > 0) {
        int st;
        waitpid(child, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    return 0;
}
