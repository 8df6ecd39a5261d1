/* Threaded replay: every recorded thread's calls on a thread of its own, in recorded order,
 * with the program's cross-thread hand-offs kept (a block allocated by one thread and
 * reallocated or freed by another).
 *
 * Hand-offs are turns on a slot.  At load time each op on a slot learns which thread acts on
 * that slot next (`hand`, when it is another thread), and an op whose slot was last touched by
 * another thread carries TURN_WAIT (in its turn byte).  During the replay turn[slot] names the
 * thread whose turn it is: an op with TURN_WAIT waits until turn[slot] is its thread
 * (acquire), and an op with a hand passes the turn on after writing slots[slot] (release).  Ops on slots only one thread touches
 * pay nothing but a test of a bit.
 *
 * No deadlock: every stream runs in increasing global order and waits only for ops earlier in
 * that order, so the earliest op not yet done can always run.  That also holds when recorded
 * threads share a replay thread (beyond HCR_MAX_THREADS): their ops are merged in global order.
 *
 * The machine may have fewer cores than the trace has threads, so a waiting thread spins only
 * briefly, then yields the processor a few times, then sleeps on the turn word (futex) after
 * setting its WAITER bit; a thread passing the turn wakes the word's sleepers when the bit was
 * set (one atomic exchange per hand-off, a system call only when someone sleeps). */
#define _GNU_SOURCE
#include "hcreplay_op.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#define SPINS 64  /* polls before yielding: a hand-off on another core takes ~100 ns */
#define YIELDS 16 /* yields before sleeping on the futex */
#define WAITER 0x80000000u /* in turn[slot]: some thread sleeps on this word */

/* Under valgrind (callgrind: --metric instructions) threads run one at a time, so spinning only
 * adds instructions: yield at once.  The count still includes the waiting loops, so a threaded
 * replay's instruction count is not exact from run to run as a single-thread one is. */
static unsigned spins = SPINS;

/* A thread's ops, and beside each its turn: TURN_WAIT when the previous op on its slot was
 * another thread's (it waits for its turn on the slot), and in the low 7 bits, 1 + the thread
 * whose op on the slot comes next when that is another thread (0: none). */
#define TURN_WAIT 0x80u
#define TURN_HAND 0x7fu
struct stream {
    struct hcr_rop *ops;
    uint8_t *turns;
    size_t n;
};

struct hcr_mt {
    struct stream s[HCR_MAX_THREADS];
    unsigned n_threads;          /* replay threads: streams 0..n_threads-1 (some may be empty) */
    size_t n_slots;
    const struct hcr_trace *t;   /* the loaded trace (its table of sizes) */
    unsigned sampler;            /* the stream with the most ops: it samples the RSS curve */
    _Atomic uint32_t *turn;      /* by slot: the replay thread whose op on it is next */
    uint32_t *first_turn;        /* by slot: turn at the start of a repeat */
    uint64_t handoffs;
};

struct worker {
    struct hcr_mt *mt;
    void **slots;
    unsigned me;
    int touch;
    pthread_barrier_t *start;
    uint64_t failed;
};

static void wait_turn(_Atomic uint32_t *turn, uint32_t me)
{
    for (unsigned i = 0;; i++) {
        uint32_t cur = atomic_load_explicit(turn, memory_order_acquire);
        if ((cur & ~WAITER) == me) /* another thread may sleep on the word for a later turn */
            return;
        if (i < spins) {
            __builtin_ia32_pause();
        } else if (i < spins + YIELDS) {
            sched_yield();
        } else {
            /* announce a sleeper, then sleep while the word still says so (the passer's
             * exchange clears the bit and wakes every sleeper on the word) */
            if (!(cur & WAITER) &&
                !atomic_compare_exchange_weak_explicit(turn, &cur, cur | WAITER,
                                                       memory_order_acquire,
                                                       memory_order_acquire))
                continue;
            syscall(SYS_futex, (uint32_t *)turn, FUTEX_WAIT_PRIVATE, cur | WAITER, NULL, NULL,
                    0);
        }
    }
}

static void pass_turn(_Atomic uint32_t *turn, uint32_t to)
{
    if (atomic_exchange_explicit(turn, to, memory_order_release) & WAITER)
        syscall(SYS_futex, (uint32_t *)turn, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* The replay loop of one thread: hcr_replay_once's, plus the turns. */
__attribute__((noinline)) static uint64_t run_stream(struct hcr_mt *mt, unsigned me,
                                                     void **slots, int touch_pages)
{
    const struct hcr_rop *op = mt->s[me].ops, *end = op + mt->s[me].n;
    const uint8_t *turns = mt->s[me].turns;
    const uint64_t *sizes = mt->t->sizes;
    const uint8_t *aligns = mt->t->aligns;
    _Atomic uint32_t *turn = mt->turn;
    uint64_t failed = 0;
    /* the busiest stream samples the RSS curve (hcr_curve) between chunks of its own ops, as
     * many samples as a single-thread replay takes (its share of `every`); not the main
     * thread, which in a server may do nothing but start the workers and join them */
    uint64_t every = UINT64_MAX;
    if (me == mt->sampler && hcr_curve.every && mt->t->n_ops) {
        every = (uint64_t)((double)hcr_curve.every * (double)mt->s[me].n / (double)mt->t->n_ops);
        every = every ? every : 1;
    }
    while (op < end) {
        const struct hcr_rop *stop = (uint64_t)(end - op) > every ? op + every : end;
        const uint64_t n = (uint64_t)(stop - op);
        for (; op < stop; op++, turns++) {
            if (*turns & TURN_WAIT)
                wait_turn(&turn[op->slot], me);
            failed += hcr_apply(hcr_kind(op), op, sizes, aligns, slots, touch_pages);
            if (*turns & TURN_HAND)
                pass_turn(&turn[op->slot], (uint32_t)(*turns & TURN_HAND) - 1);
        }
        if (every != UINT64_MAX)
            hcr_curve_sample(n);
    }
    return failed;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(w->start);
    w->failed = run_stream(w->mt, w->me, w->slots, w->touch);
    return NULL;
}

static void *idle_main(void *arg)
{
    (void)arg;
    return NULL;
}

struct hcr_mt *hcr_mt_prepare(const struct hcr_trace *t)
{
    struct hcr_mt *mt = hcr_map(sizeof *mt);
    if (!mt)
        return NULL;
    /* no op_thread: every op was the first thread's */
#define THREAD_OF(i) (t->op_thread ? t->op_thread[i] : 0u)
    size_t count[HCR_MAX_THREADS] = {0};
    for (size_t i = 0; i < t->n_ops; i++)
        count[THREAD_OF(i)]++;
    for (unsigned c = 0; c < HCR_MAX_THREADS; c++) {
        if (count[c]) {
            mt->n_threads = c + 1;
            if (!(mt->s[c].ops = hcr_map(count[c] * sizeof(struct hcr_rop))) ||
                !(mt->s[c].turns = hcr_map(count[c])))
                return NULL;
        }
    }
    mt->n_slots = t->n_slots;
    mt->t = t;
    for (unsigned c = 1; c < HCR_MAX_THREADS; c++)
        if (count[c] > count[mt->sampler])
            mt->sampler = c;
    mt->turn = hcr_map(t->n_slots * sizeof *mt->turn);
    mt->first_turn = hcr_map(t->n_slots * sizeof *mt->first_turn);
    /* by slot: the last op on it so far (its stream and index), to give it a hand */
    uint32_t *last_thread = hcr_map(t->n_slots * sizeof *last_thread);
    size_t *last_index = hcr_map(t->n_slots * sizeof *last_index);
    if (!mt->turn || !mt->first_turn || !last_thread || !last_index)
        return NULL;
    const uint32_t none = UINT32_MAX;
    for (size_t s = 0; s < t->n_slots; s++)
        last_thread[s] = none;
    for (size_t i = 0; i < t->n_ops; i++) {
        unsigned c = THREAD_OF(i);
        uint32_t s = t->ops[i].slot;
        uint8_t turn = 0;
        if (last_thread[s] == none) {
            mt->first_turn[s] = c;
        } else if (last_thread[s] != c) {
            mt->s[last_thread[s]].turns[last_index[s]] |= (uint8_t)(c + 1);
            turn = TURN_WAIT;
            mt->handoffs++;
        }
        last_thread[s] = c;
        last_index[s] = mt->s[c].n;
        mt->s[c].turns[mt->s[c].n] = turn;
        mt->s[c].ops[mt->s[c].n++] = t->ops[i];
    }
#undef THREAD_OF
    hcr_unmap(last_thread, t->n_slots * sizeof *last_thread);
    hcr_unmap(last_index, t->n_slots * sizeof *last_index);
    return mt;
}

unsigned hcr_mt_threads(const struct hcr_mt *mt) { return mt->n_threads; }

uint64_t hcr_mt_handoffs(const struct hcr_mt *mt) { return mt->handoffs; }

int hcr_mt_prime(const struct hcr_mt *mt)
{
    pthread_t th[HCR_MAX_THREADS];
    unsigned n = 0;
    for (unsigned c = 1; c < mt->n_threads; c++)
        if (mt->s[c].n && pthread_create(&th[n++], NULL, idle_main, NULL))
            return -1;
    for (unsigned i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    return 0;
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hcr_mt_replay_once(struct hcr_mt *mt, void **slots, int touch_pages, uint64_t *wall_ns,
                            uint64_t *cpu_ns)
{
    static struct worker w[HCR_MAX_THREADS]; /* static: never from the allocator under test */
    pthread_t th[HCR_MAX_THREADS];
    unsigned started[HCR_MAX_THREADS], n = 0;
    memcpy((void *)mt->turn, mt->first_turn, mt->n_slots * sizeof *mt->first_turn);

    unsigned want = 0;
    for (unsigned c = 1; c < mt->n_threads; c++)
        want += mt->s[c].n != 0;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, want + 1);
    for (unsigned c = 1; c < mt->n_threads; c++) {
        if (!mt->s[c].n)
            continue;
        w[c] = (struct worker){.mt = mt, .slots = slots, .me = c, .touch = touch_pages,
                               .start = &start};
        if (pthread_create(&th[n], NULL, worker_main, &w[c]))
            return UINT64_MAX; /* the process exits on this: the waiting threads go with it */
        started[n++] = c;
    }
    /* the workers wait at the barrier: threads are made outside the timed part */
    if (RUNNING_ON_VALGRIND)
        spins = 0;
    uint64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), wall0 = clock_ns(CLOCK_MONOTONIC);
    pthread_barrier_wait(&start);
    uint64_t failed = run_stream(mt, 0, slots, touch_pages);
    for (unsigned i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        failed += w[started[i]].failed;
    }
    /* every thread is done: free what is still live, as hcr_replay_once does */
    for (size_t i = 0; i < mt->n_slots; i++)
        if (slots[i]) {
            free(slots[i]);
            slots[i] = NULL;
        }
    *wall_ns = clock_ns(CLOCK_MONOTONIC) - wall0;
    *cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    pthread_barrier_destroy(&start);
    return failed;
}
