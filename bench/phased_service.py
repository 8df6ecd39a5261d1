"""A long-running Python program for bench/xalloc_headline.py: the shape of a Python service
whose memory is freed and kept. Five rounds; each loads a cache of N user records (a name and a
list of floats), evicts all but one in 32 (the survivors stay scattered over the memory the load
used), then serves small requests for a while, sleeping 3 ms between batches, as a service
between peaks does. With THREADS > 1 a pool of that many threads does the loading and the
serving (a threaded Python server: with glibc each thread allocates from its own arena). Run
with PYTHONMALLOC=malloc so every object comes from the allocator under test. Prints the records
kept and the requests served (deterministic for a SEED, whatever the threads' interleaving).

    PYTHONMALLOC=malloc python3 bench/phased_service.py SEED N [THREADS]
"""

import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def load(cache: dict, seed: int, r: int, t: int, lo: int, hi: int) -> None:
    rng = random.Random(seed * 1000003 + r * 101 + t)
    for i in range(lo, hi):
        cache[f"user-{r}-{i}"] = {"name": "x" * rng.randint(5, 60),
                                  "seen": [rng.random() for _ in range(rng.randint(1, 16))]}


def serve(seed: int, r: int, t: int, n: int, batches: int) -> int:
    rng = random.Random(seed * 1000003 + r * 101 + t + 50)
    served = 0
    for _ in range(batches):
        for _ in range(n // 400 + 1):
            req = {"path": f"/item/{rng.randrange(n)}", "args": [rng.random() for _ in range(8)]}
            served += len(str(req)) > 0
        time.sleep(0.003)
    return served


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print("usage: phased_service.py SEED N [THREADS]", file=sys.stderr)
        return 2
    seed, n = int(sys.argv[1]), int(sys.argv[2])
    threads = int(sys.argv[3]) if len(sys.argv) == 4 else 1
    cache, served = {}, 0
    # one thread: the main thread does the work, as a single-threaded service's does (with glibc
    # its main arena, not a thread's)
    pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None
    each = pool.map if pool else map
    for r in range(5):
        step = -(-n // threads)
        list(each(lambda t: load(cache, seed, r, t, t * step, min(n, (t + 1) * step)),
                  range(threads)))
        for k in list(cache):
            if int(k.rsplit("-", 1)[1]) % 32:
                del cache[k]
        served += sum(each(lambda t: serve(seed, r, t, n // threads, 100), range(threads)))
    if pool:
        pool.shutdown()
    print(len(cache), served)
    return 0


if __name__ == "__main__":
    sys.exit(main())
