#!/usr/bin/env python3
"""Run a real program under each allocator (LD_PRELOAD) and compare wall time and peak RSS.

    .venv/bin/python bench/search_real.py [--lib NAME=PATH ...] [--runs 3] [--expect FILE] \
        -- PROGRAM ARGS...

glibc, jemalloc, mimalloc and tcmalloc (the Debian packages) plus every --lib (e.g. the .so
that `hctune emit --so` wrote). Each is run --runs times; the median wall time and the largest
peak RSS (the kernel's ru_maxrss of the program) are kept. With --expect, every run's output must
equal that file, so a faster allocator that breaks the program cannot win.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from hctune import allocators
from hctune.errors import HctuneError


# A process's ru_maxrss includes the memory of the process it was forked from (Linux records the
# old image's high-water mark at exec), so a Python parent would put its own ~15 MB under every
# program. This tiny launcher forks the program from a process of a few hundred KiB instead and
# prints the program's own peak RSS (KiB) on stderr's last line.
LAUNCHER = r"""
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    pid_t pid = fork();
    if (pid == 0) { execvp(argv[1], argv + 1); _exit(127); }
    int status; struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) return 126;
    fprintf(stderr, "\nmaxrss_kib %ld\n", ru.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 125;
}
"""


def launcher() -> str:
    d = tempfile.mkdtemp(prefix="hctune-real-")
    src = os.path.join(d, "launch.c")
    with open(src, "w") as f:
        f.write(LAUNCHER)
    exe = os.path.join(d, "launch")
    subprocess.run(["cc", "-O2", "-static", src, "-o", exe], check=True)
    return exe


def run_once(launch, argv, env) -> tuple[float, int, bytes]:
    start = time.perf_counter()
    proc = subprocess.run([launch, *argv], env=env, capture_output=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited with {proc.returncode}")
    rss = int(proc.stderr.decode(errors="replace").strip().splitlines()[-1].split()[1])
    return wall, rss * 1024, proc.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--expect", default=None)
    ap.add_argument("--out", default=None, help="unused; kept for the demo's symmetry")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    prog = a.program[1:] if a.program[:1] == ["--"] else a.program
    if not prog:
        ap.error("name the program to run after --")
    libs = []
    for name in ("glibc", "jemalloc", "mimalloc", "tcmalloc"):
        try:
            libs.append((name, allocators.resolve(name).library))
        except HctuneError as e:
            print(f"skipping {name}: {e}", file=sys.stderr)
    for item in a.lib:
        name, _, path = item.partition("=")
        libs.append((name, os.path.abspath(path)))
    expected = open(a.expect, "rb").read() if a.expect else None
    launch = launcher()
    rows = []
    for name, lib in libs:
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if lib:
            env["LD_PRELOAD"] = str(lib)
        walls, rss = [], 0
        for _ in range(a.runs):
            wall, peak, out = run_once(launch, prog, env)
            if expected is not None and out != expected:
                print(f"{name}: the program's output differs from {a.expect}", file=sys.stderr)
                return 1
            walls.append(wall)
            rss = max(rss, peak)
        rows.append((name, statistics.median(walls), rss))
    base = rows[0]
    print(f"{'allocator':16} {'wall s':>8} {'vs glibc':>8} {'peak RSS KiB':>12} {'vs glibc':>8}")
    for name, wall, rss in rows:
        print(f"{name:16} {wall:8.3f} {wall / base[1]:8.3f} {rss / 1024:12.0f} "
              f"{rss / base[2]:8.3f}")
    print(f"# {a.runs} runs each, output checked: {'yes' if expected else 'no'}; reproduce: "
          f".venv/bin/python bench/search_real.py "
          + " ".join(f"--lib {shlex.quote(x)}" for x in a.lib) + f" -- {shlex.join(prog)}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
