"""A bignum factoring run (bench/big_flow.py's workload): Pollard's rho (Brent's variant) on
ROUNDS semiprimes of two ~50-bit primes.  Run with PYTHONMALLOC=malloc every Python int, tuple
and frame goes through malloc: tens of millions of allocator calls a second of run.  Prints
the factors, so a run under another allocator is checked against glibc's output."""

import math
import sys


def brent(n: int, c: int) -> int:
    y, r, q, g, m = 2, 1, 1, 1, 64
    x = ys = y
    while g == 1:
        x = y
        for _ in range(r):
            y = (y * y + c) % n
        k = 0
        while k < r and g == 1:
            ys = y
            for _ in range(min(m, r - k)):
                y = (y * y + c) % n
                q = q * abs(x - y) % n
            g = math.gcd(q, n)
            k += m
        r *= 2
    if g == n:
        while True:
            ys = (ys * ys + c) % n
            g = math.gcd(abs(x - ys), n)
            if g > 1:
                break
    return g


def next_prime(n: int) -> int:
    def is_prime(p: int) -> bool:
        if p % 2 == 0:
            return p == 2
        d, s = p - 1, 0
        while d % 2 == 0:
            d //= 2
            s += 1
        for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
            x = pow(a, d, p)
            if x in (1, p - 1):
                continue
            for _ in range(s - 1):
                x = x * x % p
                if x == p - 1:
                    break
            else:
                return False
        return True
    while not is_prime(n):
        n += 1
    return n


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    for k in range(rounds):
        p = next_prime((1 << 34) + 7919 * k)
        q = next_prime((1 << 35) + 104729 * k)
        n = p * q
        f = brent(n, 1 + k % 5)
        print(k, n, sorted((f, n // f)))


if __name__ == "__main__":
    main()
