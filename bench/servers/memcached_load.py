#!/usr/bin/env python3
"""A phased load for memcached (text protocol, pipelined), run by hctune outside the candidate.

    python3 memcached_load.py PORT [--keys N] [--idle S]

fill (N keys of 100..8,000 bytes), overwrite (every other key, 2,000..30,000 bytes), delete
(every third key), idle (S seconds), then get every key; prints "keys K bytes B" (deterministic).
"""
import random
import socket
import sys
import time


def main(argv):
    port = int(argv[0])
    keys = int(argv[argv.index("--keys") + 1]) if "--keys" in argv else 50000
    idle = float(argv[argv.index("--idle") + 1]) if "--idle" in argv else 2.0
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    f = s.makefile("rwb", buffering=1 << 20)
    rng = random.Random(7)

    def sets(items):
        for i in range(0, len(items), 500):
            for k, n in items[i:i + 500]:
                f.write(b"set k%d 0 0 %d\r\n" % (k, n) + b"v" * n + b"\r\n")
            f.flush()
            for _ in items[i:i + 500]:
                if f.readline() != b"STORED\r\n":
                    raise SystemExit("memcached_load: a set failed")

    sets([(k, rng.randint(100, 8000)) for k in range(keys)])                 # fill
    sets([(k, rng.randint(2000, 30000)) for k in range(0, keys, 2)])         # overwrite
    for i in range(0, keys, 3 * 500):                                         # delete
        batch = range(i, min(keys, i + 3 * 500), 3)
        for k in batch:
            f.write(b"delete k%d\r\n" % k)
        f.flush()
        for _ in batch:
            f.readline()
    time.sleep(idle)                                                          # idle
    n = total = 0
    for i in range(0, keys, 500):                                             # get
        batch = range(i, min(keys, i + 500))
        for k in batch:
            f.write(b"get k%d\r\n" % k)
        f.flush()
        for _ in batch:
            line = f.readline()
            if line.startswith(b"VALUE"):
                size = int(line.split()[3])
                f.read(size + 2)
                f.readline()                                                  # END
                n, total = n + 1, total + size
    print(f"keys {n} bytes {total}")


if __name__ == "__main__":
    main(sys.argv[1:])
