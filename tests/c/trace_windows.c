/* trace_windows: several tracing windows in one run, and a child forked inside one
 * (tests/test_trace_window.py).  Between phases the program prints "pause" and waits for a line
 * on stdin; the test sends the tracer's toggle signal meanwhile (each one opens a shut window or
 * shuts an open one).
 *
 *   before    P[0..19] of sizes 2000+i                 (live when window 1 opens)
 *   window 1  frees P[0..4]; Q[0..9] of sizes 3000+i
 *   gap       frees Q[0..4] and P[5..9] (blocks the trace has: their frees are in it);
 *             R[0..9] of sizes 4000+i, R[0..4] freed again (never in the trace)
 *   window 2  a child is forked: it frees P[10..14], Q[5..9], R[5..9] (its parent's blocks,
 *             which its own trace starts with), allocates 3 blocks of 6000+i, exits; the
 *             parent frees P[15..19]
 *   after     10 blocks of 9000+i (never in the trace)
 * The parent's trace must end with P[10..14], Q[5..9], R[5..9] live and show no anomaly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile sink;

static void zero_calls(int n)
{
    for (int i = 0; i < n; i++) {
        sink = malloc(0);
        free(sink);
    }
}

static void pause_here(void)
{
    char line[16];
    zero_calls(40);
    printf("pause\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        exit(3);
    zero_calls(40);                    /* every hook looks at the clock (and the signals) */
}

static void *P[20], *Q[10], *R[10];

int main(void)
{
    for (int i = 0; i < 20; i++)
        P[i] = malloc(2000 + (size_t)i);
    pause_here();                      /* window 1 opens */
    for (int i = 0; i < 5; i++)
        free(P[i]);
    for (int i = 0; i < 10; i++)
        Q[i] = malloc(3000 + (size_t)i);
    pause_here();                      /* window 1 shuts */
    for (int i = 0; i < 5; i++) {
        free(Q[i]);
        free(P[5 + i]);
    }
    for (int i = 0; i < 10; i++)
        R[i] = malloc(4000 + (size_t)i);
    for (int i = 0; i < 5; i++)
        free(R[i]);
    pause_here();                      /* window 2 opens */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 5; i++) {
            free(P[10 + i]);
            free(Q[5 + i]);
            free(R[5 + i]);
        }
        for (int i = 0; i < 3; i++)
            sink = malloc(6000 + (size_t)i);
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    for (int i = 15; i < 20; i++)
        free(P[i]);
    pause_here();                      /* window 2 shuts */
    for (int i = 0; i < 10; i++)
        sink = malloc(9000 + (size_t)i);
    printf("done\n");
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
