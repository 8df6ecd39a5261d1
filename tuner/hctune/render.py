"""Render the HC allocator into one self-contained malloc.c (templates/malloc.c.j2).

`render_malloc(setting, provenance=None, debug=False) -> str` is the contract (docs/ARCHITECTURE.md);
`python -m hctune.render --preset NAME [--set K=V ...] [--debug] -o FILE` is what the Makefile runs.
The knob #defines and their documentation come from configs/knobs.toml through hctune.knobs.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import re
import sys
import textwrap
from pathlib import Path

from hctune import VERSION_TEXT, __version__, knobs, paths, templating
from hctune.errors import HctuneError
from hctune.files import write_atomic

# allocator/hc/hc_all.c: the translation unit's files, in order, as its #include lines say
UNIT = "hc_all.c"
_UNIT_INCLUDE = re.compile(r'^\s*#\s*include\s+"(hc_[a-z_]+\.[ch])"', re.M)


def unit_sources(text: str) -> tuple[str, ...]:
    """The files an hc_all.c text #includes, in its order."""
    return tuple(_UNIT_INCLUDE.findall(text))


# allocator/hc/ in the order of the translation unit (hc_all.c says it; hc_internal.h why)
SOURCES = unit_sources((paths.ALLOCATOR / "hc" / UNIT).read_text())

_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"hc_[a-z_]+\.h"\s*\n', re.M)


def _strip_local_includes(text: str) -> str:
    """Our own headers are inlined once, in SOURCES order: their #include lines go."""
    return _LOCAL_INCLUDE.sub("", text)


def _ccomment(text) -> str:
    """Safe inside a /* */ comment on one line."""
    return " ".join(str(text).replace("*/", "* /").split())


def _cwrap(text: str) -> list[str]:
    return textwrap.wrap(_ccomment(text), width=86)


@functools.lru_cache(maxsize=None)
def _environment():
    """The project's one environment, overlaid for C: block tags leave no blank lines behind."""
    env = templating.environment().overlay(trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters = dict(env.filters, strip_local_includes=_strip_local_includes,
                       ccomment=_ccomment, cwrap=_cwrap)
    return env


def date_text() -> str:
    """Now, as a provenance's date reads (UTC, to the minute): the one place it is written."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _provenance_rows(provenance: dict | None) -> list[tuple[str, list[str]]]:
    """(key, value wrapped into comment lines), with the date and hctune version added."""
    if not provenance:
        return []
    rows = dict(provenance)
    rows.setdefault("date", date_text())
    rows.setdefault("hctune", VERSION_TEXT)
    out = []
    for key, value in rows.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        # a path or a study's name is never cut (at a hyphen or mid-word): it is copied whole
        out.append((str(key), textwrap.wrap(_ccomment(value), width=76, break_long_words=False,
                                            break_on_hyphens=False) or [""]))
    return out


def render_malloc(setting: dict, provenance: dict | None = None, debug: bool = False) -> str:
    """One self-contained malloc.c with `setting` baked in as #ifndef/#define blocks."""
    setting = knobs.complete(setting)
    table = knobs.knobs()
    defaults = knobs.defaults()
    rows = []
    for name, knob in table.items():
        rows.append({
            "name": name,
            "c_value": knobs.c_value(knob, setting[name]),
            "c_default": knobs.c_value(knob, defaults[name]),
            "why": knob.why,
            "section": knob.section,
            "unit": knob.unit,
        })
    template = _environment().get_template("malloc.c.j2")
    return template.render(knobs=rows, provenance=_provenance_rows(provenance), debug=debug,
                           version=__version__, sources=SOURCES)




def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hctune.render",
                                     description="Render the HC allocator into one malloc.c.")
    parser.add_argument("--preset", default="generic", help="preset from configs/presets.toml")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KNOB=VALUE",
                        help="override one knob (repeatable)")
    parser.add_argument("--debug", action="store_true", help="build with heap checking (HC_DEBUG)")
    parser.add_argument("-o", "--output", required=True, help="file to write")
    args = parser.parse_args(argv)
    try:
        setting = knobs.resolve(args.preset, args.sets)
        text = render_malloc(setting, debug=args.debug)
        write_atomic(Path(args.output), text)
    except HctuneError as e:
        print(f"hctune: error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        print(f"hctune: error: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
