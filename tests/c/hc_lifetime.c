/* hc_lifetime: a background thread of the allocator must never decide when a process ends or
 * which signals it gets (issue 35).  Standard glibc API only: the same binary runs on glibc and,
 * under LD_PRELOAD, on HC.  Every mode first runs threads that allocate, free and exit (what
 * starts HC's purge thread, PURGE_THREAD), so the case is one with the purge thread running.
 *
 * Usage: hc_lifetime main-exit   main ends with pthread_exit(NULL): the process must exit 0.
 *        hc_lifetime fork-thread [spawn]  a non-main thread forks; in the child that thread is
 *                    the only one (with spawn: it first runs one more thread, which exits) and
 *                    it returns from its start routine: the child must exit 0, and the
 *                    parent's waitpid return.  Prints "child status 0".
 *        hc_lifetime masks  prints "tasks N masks M": the process's threads (after the churn:
 *                    main plus any the allocator keeps) and how many distinct blocked-signal
 *                    sets they have (1: no thread blocks a signal main does not), then "ready",
 *                    and sleeps until a signal ends it (the caller sends SIGTERM).
 * A hang is the failure: the caller's timeout, and its check that the process group is empty.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *churn(void *arg)
{
    unsigned n = (unsigned)(size_t)arg;
    void *keep[64] = {0};
    for (unsigned i = 0; i < 20000; i++) {
        unsigned k = (i * 2654435761u + n) % 64;
        free(keep[k]);
        keep[k] = malloc(16 + (i * 40503u) % 3000 + (i % 97 == 0 ? 40000 : 0));
        if (keep[k])
            memset(keep[k], (int)i, 16);
    }
    for (unsigned k = 0; k < 64; k++)
        free(keep[k]);
    return NULL;
}

/* Threads that allocate, free and exit: joined. */
static void threads_churn(unsigned count)
{
    pthread_t t[8];
    for (unsigned i = 0; i < count; i++)
        if (pthread_create(&t[i], NULL, churn, (void *)(size_t)i) != 0) {
            perror("pthread_create");
            exit(3);
        }
    for (unsigned i = 0; i < count; i++)
        pthread_join(t[i], NULL);
}

static int spawn_in_child;

static void *forker(void *arg)
{
    (void)arg;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(3);
    }
    if (pid == 0) {
        /* the child: this thread is its only one */
        free(malloc(100));
        if (spawn_in_child)
            threads_churn(1);
        free(malloc(5000));
        return NULL; /* the last thread exits: the process must end, status 0 */
    }
    int status = -1;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        exit(3);
    }
    printf("child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return NULL;
}

/* The distinct SigBlk lines of the process's threads; their count in *tasks. */
static int distinct_masks(int *tasks)
{
    char seen[16][128];
    int masks = 0;
    *tasks = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], line[128];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        ++*tasks;
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "SigBlk:", 7) != 0)
                continue;
            int k = 0;
            while (k < masks && strcmp(seen[k], line) != 0)
                k++;
            if (k == masks && masks < 16)
                snprintf(seen[masks++], sizeof seen[0], "%s", line);
        }
        fclose(f);
    }
    if (d)
        closedir(d);
    return masks;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    threads_churn(4);
    free(malloc(200)); /* main allocates with threads about, as programs do */
    if (strcmp(mode, "main-exit") == 0) {
        threads_churn(2);
        pthread_exit(NULL);
    }
    if (strcmp(mode, "fork-thread") == 0) {
        spawn_in_child = argc > 2 && strcmp(argv[2], "spawn") == 0;
        pthread_t t;
        if (pthread_create(&t, NULL, forker, NULL) != 0)
            return 3;
        pthread_join(t, NULL);
        return 0;
    }
    if (strcmp(mode, "masks") == 0) {
        /* A purge sweep blocks signals for microseconds under a lock: look a few times. */
        int tasks = 0, masks = 0;
        for (int i = 0; i < 50; i++) {
            masks = distinct_masks(&tasks);
            if (masks == 1)
                break;
            struct timespec ms = {0, 2000000};
            nanosleep(&ms, NULL);
        }
        printf("tasks %d masks %d\nready\n", tasks, masks);
        for (;;)
            pause();
    }
    fprintf(stderr, "usage: hc_lifetime main-exit|fork-thread [spawn]|masks\n");
    return 2;
}
