"""hctune's trace format, Python side: reader, writer, importers, statistics, plots.

The format is specified once in configs/trace_format.toml (prose: docs/trace-format.md);
tracer/hctrace.h is generated from it and the readers here read its constants directly.
"""

from hctune.trace.reader import Event, Header, Trace, TraceError, open_trace
from hctune.trace.stats import stats
from hctune.trace.writer import Writer

__all__ = ["Event", "Header", "Trace", "TraceError", "Writer", "open_trace", "stats"]
