"""A long-running Python program for bench/xalloc_headline.py: the shape of a Python service
whose memory is freed and kept. Five rounds; each loads a cache of N user records (a name and a
list of floats), evicts all but one in 32 (the survivors stay scattered over the memory the load
used), then serves small requests for a while, sleeping 3 ms between batches, as a service
between peaks does. Run with PYTHONMALLOC=malloc so every object comes from the allocator under
test. Prints the records kept and the requests served (deterministic for a SEED).

    PYTHONMALLOC=malloc python3 bench/phased_service.py SEED N
"""

import random
import sys
import time


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: phased_service.py SEED N", file=sys.stderr)
        return 2
    rng = random.Random(int(sys.argv[1]))
    n = int(sys.argv[2])
    cache, served = {}, 0
    for r in range(5):
        for i in range(n):
            cache[f"user-{r}-{i}"] = {"name": "x" * rng.randint(5, 60),
                                      "seen": [rng.random() for _ in range(rng.randint(1, 16))]}
        for i, k in enumerate(list(cache)):
            if i % 32:
                del cache[k]
        for _ in range(100):
            for _ in range(n // 400 + 1):
                req = {"path": f"/item/{rng.randrange(n)}",
                       "args": [rng.random() for _ in range(8)]}
                served += len(str(req)) > 0
            time.sleep(0.003)
    print(len(cache), served)
    return 0


if __name__ == "__main__":
    sys.exit(main())
