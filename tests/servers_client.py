"""The load for tests/c/cache_server.c (and the readiness check), never run under a candidate.

    python servers_client.py PORT ping            exit 0 once the server answers PONG
    python servers_client.py PORT load [--keys N] [--idle S] [--fail]

load: phases as a cache sees them: fill (N keys of 2,000..60,000 bytes: the values are most of
the server's memory), overwrite (every other key with a new size) and delete (every third), idle (S seconds, the connection open), then GET
every key; prints "keys K bytes B" (deterministic: output checking compares it). --fail: exit
3 after the fill (a load that fails)."""

import random
import socket
import sys
import time


def main(argv):
    port, what = int(argv[0]), argv[1]
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError as e:
        print(f"client: cannot connect to 127.0.0.1:{port}: {e.strerror}", file=sys.stderr)
        return 1
    f = s.makefile("rw", buffering=1 << 16)

    def ask(line):
        f.write(line + "\n")
        f.flush()
        return f.readline().strip()

    if what == "ping":
        return 0 if ask("PING") == "PONG" else 1
    keys = int(argv[argv.index("--keys") + 1]) if "--keys" in argv else 2000
    idle = float(argv[argv.index("--idle") + 1]) if "--idle" in argv else 0.0
    rng = random.Random(1)
    for i in range(keys):                                   # fill
        assert ask(f"SET k{i} {rng.randint(2000, 60000)}") == "OK"
    if "--fail" in argv:
        print("client: failing as asked", file=sys.stderr)
        return 3
    for i in range(0, keys, 2):                             # overwrite
        assert ask(f"SET k{i} {rng.randint(1000, 80000)}") == "OK"
    for i in range(0, keys, 3):                             # delete
        ask(f"DEL k{i}")
    time.sleep(idle)                                        # idle
    total = n = 0
    for i in range(keys):
        v = int(ask(f"GET k{i}"))
        if v >= 0:
            total, n = total + v, n + 1
    print(f"keys {n} bytes {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
