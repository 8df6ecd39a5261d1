"""Generate the constant block of tracer/hctrace.h from configs/trace_format.toml.

    python -m hctune.trace.codegen          rewrite the block in place
    python -m hctune.trace.codegen --check  exit 1 if the committed header has drifted
"""

from __future__ import annotations

import sys

from hctune import paths
from hctune.trace import spec

HEADER = paths.TRACER / "hctrace.h"
BEGIN = "/* ---- BEGIN GENERATED from configs/trace_format.toml by hctune.trace.codegen ---- */\n"
END = "/* ---- END GENERATED ---- */\n"


def block(s: dict | None = None) -> str:
    s = s or spec.load()
    out = [BEGIN]
    magic = s["format"]["magic"]
    out.append("#define HCT_MAGIC \"" + "".join(f"\\x{b:02x}" for b in magic) + "\"\n")
    out.append(f"#define HCT_MAGIC_LEN {len(magic)}\n")
    out.append(f"#define HCT_VERSION {s['format']['version']}\n")
    out.append(f"#define HCT_MIN_VERSION {s['format']['min_version']}\n")
    out.append(f"#define HCT_EXTENSION \"{s['format']['extension']}\"\n")
    for section, prefix in (("header", "HCT_"), ("flags", "HCT_FLAG_"), ("ops", "HCT_"),
                            ("chunk", "HCT_"), ("event", "HCT_")):
        out.append(f"/* [{section}] */\n")
        for name, value in s[section].items():
            literal = f"0x{value:02X}" if name.endswith(("MASK", "BIT", "MARKER")) else str(value)
            out.append(f"#define {prefix}{name} {literal}\n")
    out.append(END)
    return "".join(out)


def splice(text: str, new_block: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{HEADER}: generated-block markers not found")
    return text[:start] + new_block + text[end + len(END):]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = HEADER.read_text()
    new = splice(text, block())
    if "--check" in argv:
        if new != text:
            print(f"{HEADER.name} has drifted from trace_format.toml; run python -m "
                  "hctune.trace.codegen", file=sys.stderr)
            return 1
        return 0
    if new != text:
        tmp = HEADER.with_suffix(".h.tmp")
        tmp.write_text(new)
        tmp.replace(HEADER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
