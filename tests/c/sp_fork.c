/* sp_fork: fork while another thread's small page is in the middle of its owner's work
 * (allocator/hc/hc_page.c, hc_sp_fork_child; tests/test_allocator_pages.py).
 *
 *   sp_fork      a second thread allocates HELD blocks of 112 bytes (one page of that class,
 *                no other thread uses the class) and frees every other one onto its page's
 *                free list, then waits.  Its owner takes no lock, so a fork can copy the page
 *                at any instant of a push, a pop or a carve: a free list whose links are not
 *                written yet, blocks past the bump pointer already linked.  The main thread
 *                makes that state on purpose -- it fills every byte of the page that is not
 *                a block the thread holds (the freed blocks' links included) with 0x5a -- and
 *                forks.  The child callocs enough blocks of the class to adopt the page and go
 *                past it, checks each is zero, frees the blocks the thread held, allocates
 *                again, and exits 0.  Prints "ok adopted N" (N: the child's blocks that came
 *                from the thread's page) or "sp_fork: FAIL ..." and exits 1.
 *
 * The main thread writes into blocks the other thread freed: a use after free, made to stand
 * for what fork can copy.  HC only: under another allocator it is undefined.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SIZE = 112, HELD = 200, CHILD = 3000 };
#define PAGE ((uintptr_t)1 << 16) /* hc_page.c's HC_SP_PAGE */
#define HEAD 256u                 /* hc_page.c's HC_SP_HEAD */

static char *blocks[HELD];
static pthread_barrier_t ready;

static void fail(const char *what)
{
    printf("sp_fork: FAIL: %s\n", what);
    fflush(stdout);
    _exit(1);
}

static void *owner(void *arg)
{
    (void)arg;
    for (int i = 0; i < HELD; i++)
        if (!(blocks[i] = malloc(SIZE)))
            fail("malloc");
    for (int i = 0; i < HELD; i += 2)
        free(blocks[i]);
    pthread_barrier_wait(&ready);
    for (;;)
        pause(); /* alive until the process ends: its page was overwritten, it must not use it */
    return NULL;
}

static int held(const char *b)
{
    for (int i = 1; i < HELD; i += 2)
        if (blocks[i] == b)
            return 1;
    return 0;
}

static void child(uintptr_t page)
{
    alarm(10);
    static char *p[CHILD];
    int adopted = 0;
    for (int i = 0; i < CHILD; i++) {
        if (!(p[i] = calloc(1, SIZE)))
            fail("child: calloc");
        for (int k = 0; k < SIZE; k++)
            if (p[i][k])
                fail("child: calloc returned a block that is not zero");
        memset(p[i], 0x11, SIZE);
        adopted += ((uintptr_t)p[i] & ~(PAGE - 1)) == page;
    }
    for (int i = 1; i < HELD; i += 2)  /* the dead thread's blocks, freed by the child */
        free(blocks[i]);
    for (int i = 0; i < CHILD; i++)
        free(p[i]);
    for (int i = 0; i < CHILD; i++)
        if (!(p[i] = malloc(SIZE)))
            fail("child: malloc");
    for (int i = 0; i < CHILD; i++)
        free(p[i]);
    printf("ok adopted %d\n", adopted);
    fflush(stdout);
    _exit(0);
}

int main(void)
{
    pthread_t t;
    pthread_barrier_init(&ready, NULL, 2);
    if (pthread_create(&t, NULL, owner, NULL))
        fail("pthread_create");
    pthread_barrier_wait(&ready);
    uintptr_t page = (uintptr_t)blocks[0] & ~(PAGE - 1);
    for (int i = 0; i < HELD; i++)
        if (((uintptr_t)blocks[i] & ~(PAGE - 1)) != page)
            fail("the thread's blocks are not on one page (pages off?)");
    for (char *b = (char *)page + HEAD; b + SIZE <= (char *)page + PAGE; b += SIZE)
        if (!held(b))
            memset(b, 0x5a, SIZE);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        fail("fork");
    if (pid == 0)
        child(page);
    int status;
    if (waitpid(pid, &status, 0) != pid)
        fail("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("sp_fork: FAIL: child %s %d\n", WIFSIGNALED(status) ? "killed by signal" : "exited with",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        fflush(stdout);
        _exit(1);
    }
    _exit(0); /* not exit(): the other thread's page is not fit for its use any more */
}
