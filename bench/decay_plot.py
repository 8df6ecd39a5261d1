#!/usr/bin/env python3
"""The decay's resident-size curves, under glibc, mimalloc, jemalloc and HC:

- a program that peaks at 512 MiB, frees it all and idles (tests/c/hc_os.c `series`: one 8 KiB
  malloc/free and one /proc/self/statm read every 10 ms), HC generic and HC with DECAY_MS=0 (the
  paper);
- thread churn (tests/c/hc_forkpurge.c `churn 5 256 idle series`): 5 cycles of 4 threads each
  allocating 256 MiB in mixed sizes, freeing it and exiting, then no allocator call at all;
  HC generic, HC with ARENAS=64, and HC with PURGE_THREAD=0.

    .venv/bin/python bench/decay_plot.py [--ms 3000] [--out docs/allocator-decay.png]

Writes the PNG (atomically) and prints a Markdown table of the RSS at a few instants, with the
command that made it.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tuner"))

from hctune import build, knobs  # noqa: E402
from hctune.files import write_atomic  # noqa: E402

OTHERS = {"mimalloc": "libmimalloc.so.2", "jemalloc": "libjemalloc.so.2"}
LIB_DIR = Path("/usr/lib/x86_64-linux-gnu")


def series(program: Path, lib: Path | None, ms: int) -> list[tuple[float, float]]:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib is not None:
        env["LD_PRELOAD"] = str(lib)
    out = subprocess.run([str(program), "series", str(ms)], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout
    points = []
    for line in out.splitlines():
        f = line.split()
        if f[0] == "rss_peak_kib":
            points.append((-50.0, int(f[1]) / 1024))
        else:
            points.append((float(f[0]), int(f[1]) / 1024))
    return points


def churn_series(program: Path, lib: Path | None) -> list[tuple[float, float]]:
    """RSS after the last cycle (at t = -50 ms), then every 10 ms of 3 s idle."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib is not None:
        env["LD_PRELOAD"] = str(lib)
    out = subprocess.run([str(program), "churn", "5", "256", "idle", "series"], capture_output=True,
                         text=True, env=env, timeout=300, check=True).stdout
    points = []
    for line in out.splitlines():
        f = line.split()
        if f[0] == "cycle":
            points = [(-50.0, int(f[3]) / 1024)]  # the last cycle's
        else:
            points.append((float(f[0]), int(f[1]) / 1024))
    return points


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ms", type=int, default=3000, help="how long to watch after the frees")
    ap.add_argument("--out", default=str(ROOT / "docs" / "allocator-decay.png"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "hc_os"
        subprocess.run(["cc", "-O2", "-o", str(program), str(ROOT / "tests" / "c" / "hc_os.c")],
                       check=True)
        allocs = {"glibc": None}
        for name, so in OTHERS.items():
            if (LIB_DIR / so).exists():
                allocs[name] = LIB_DIR / so
        allocs["HC generic (DECAY_MS=500)"] = build.build_hc(knobs.preset("generic"))
        allocs["HC, DECAY_MS=0 (paper)"] = build.build_hc(knobs.resolve("generic", ["DECAY_MS=0"]))
        curves = {name: series(program, lib, args.ms) for name, lib in allocs.items()}
        churner = Path(tmp) / "hc_forkpurge"
        subprocess.run(["cc", "-O2", "-pthread", "-fno-builtin", "-I", str(ROOT / "tests" / "c"),
                        "-o", str(churner), str(ROOT / "tests" / "c" / "hc_forkpurge.c")],
                       check=True)
        churn_allocs = {k: v for k, v in allocs.items() if not k.startswith("HC")}
        churn_allocs["HC generic (PURGE_THREAD=1, ARENAS=4)"] = allocs["HC generic (DECAY_MS=500)"]
        churn_allocs["HC, ARENAS=64"] = build.build_hc(knobs.resolve("generic", ["ARENAS=64"]))
        churn_allocs["HC, PURGE_THREAD=0"] = build.build_hc(
            knobs.resolve("generic", ["PURGE_THREAD=0"]))
        churns = {name: churn_series(churner, lib) for name, lib in churn_allocs.items()}

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(2, 1, figsize=(8, 9))
    for name, pts in curves.items():
        ax.plot([t / 1000 for t, _ in pts], [r for _, r in pts], label=name)
    ax.set_xlabel("seconds since the last free (one 8 KiB malloc/free every 10 ms)")
    ax.set_ylabel("resident size (MiB)")
    ax.set_yscale("log")
    ax.set_title("512 MiB allocated, all freed, then idle (one run each; shared, loaded machine)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    for name, pts in churns.items():
        bx.plot([t / 1000 for t, _ in pts], [r for _, r in pts], label=name)
    bx.set_xlabel("seconds since the last thread exited (no allocator call at all)")
    bx.set_ylabel("resident size (MiB)")
    bx.set_yscale("log")
    bx.set_title("thread churn: 5 x (4 threads x 256 MiB allocated and freed, exit), then idle")
    bx.legend()
    bx.grid(True, alpha=0.3)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    write_atomic(Path(args.out), buf.getvalue())

    cmd = "bench/decay_plot.py " + " ".join(sys.argv[1:])
    print(f"Made by `.venv/bin/python {cmd.strip()}` on {datetime.date.today()} "
          f"(one run per allocator on a shared 2-core machine loaded by other jobs).\n")
    marks = [0, 500, 1000, 2000, args.ms]
    print("| allocator | peak | " + " | ".join(f"{m / 1000:g} s" for m in marks) + " |")
    print("|---|---:|" + "---:|" * len(marks))
    for name, pts in curves.items():
        row = [f"{pts[0][1]:.0f}"]
        for m in marks:
            at = [r for t, r in pts if t >= m]
            row.append(f"{at[0]:.0f}" if at else "n/a")
        print(f"| {name} | " + " | ".join(row) + " |")
    print("\n(RSS in MiB.)\n")
    print("Thread churn, then idle:\n")
    print("| allocator | after the churn | " + " | ".join(f"{m / 1000:g} s" for m in marks[:-1])
          + " | 3 s |")
    print("|---|---:|" + "---:|" * len(marks))
    for name, pts in churns.items():
        row = [f"{pts[0][1]:.0f}"]
        for m in marks[:-1] + [2990]:
            at = [r for t, r in pts if t >= m]
            row.append(f"{at[0]:.0f}" if at else "n/a")
        print(f"| {name} | " + " | ".join(row) + " |")
    print("\n(RSS in MiB.)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
