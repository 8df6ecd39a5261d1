"""Where the bytes go at the peak, for every installed allocator, on the demo's program: gawk
counting the words of 40,000 generated lines (bench/demo.sh's input and program), profiled
with hctune's tracer, then `hctune explain` on the trace. Prints a Markdown table (MiB) and the
command that reproduces it. About 10 s on 2 cores.

    .venv/bin/python bench/explain_table.py [OUTDIR]
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tuner"))

from hctune import explain  # noqa: E402  (the checkout's package, after the path above)

AWK = ('{ for (i = 1; i <= NF; i++) { c[$i]++; last[$i] = $0 } }\n'
       '     NR % 5000 == 0 { for (w in last) delete last[w] }\n'
       '     END { n = 0; for (w in c) if (c[w] > 60) n++; print n, length(c) }')


def demo_input(path: Path) -> None:
    """bench/demo.sh's input, the same generator and seed."""
    rng = random.Random(2006)
    words = ["".join(rng.choice("etaoinshrdlucmfw") for _ in range(rng.randint(2, 12)))
             for _ in range(6000)]
    with open(path, "w") as f:
        for _ in range(40000):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 14))) + "\n")


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="explain-"))
    out.mkdir(parents=True, exist_ok=True)
    demo_input(out / "input.txt")
    trace = out / "gawk.hct"
    subprocess.run([sys.executable, "-m", "hctune", "--db", str(out / "hctune.db"), "profile",
                    "-o", str(trace), "gawk", AWK, str(out / "input.txt")], check=True,
                   stdout=subprocess.DEVNULL, env={"PYTHONPATH": str(ROOT / "tuner"),
                                                   "PATH": "/usr/bin:/bin"})
    r = explain.explain(trace, explain.candidates())
    mib = 2 ** 20
    print(f"gawk word count (bench/demo.sh), peak {r['peak_live'] / mib:.1f} MiB live at op "
          f"{r['peak_op']:,} of {r['ops']:,}; MiB at the peak, one replay each, 2 cores")
    print()
    print("| allocator | RSS | live | rounding | free kept | metadata | not returned | other "
          "| (RSS-other)/live | parts vs RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for e in r["candidates"]:
        p = e["parts"]
        est = f" ({e['estimated'].replace('_', ' ')} estimated)" if e["estimated"] else ""
        print(f"| {e['label']} | {e['rss'] / mib:.1f} | "
              + " | ".join(f"{p[k] / mib:.1f}" for k in explain.PARTS)
              + f" | {explain.headroom(e) + 1:.2f}x | {e['check_pct']:+.1f} %{est} |")
    print()
    print("reproduce: .venv/bin/python bench/explain_table.py")


if __name__ == "__main__":
    main()
