"""A validation's options, said once (as hctune.search.options.Options says a study's): what
`hctune validate`'s flags, `search --validate` and the service's worker choose, with the
defaults and the checks, carried whole to `hctune.validate.run` and its measuring loop."""

from __future__ import annotations

import dataclasses

from hctune.errors import HctuneError
from hctune.search import options as _options
from hctune.validate import rule
from hctune.validate.runs import DEFAULT_RUNS, MIN_RUNS
from hctune.validate.summary import TIME_MEASURES


@dataclasses.dataclass
class ValidateOptions:
    study: str | None = None                  # default: the latest (or `objective`'s)
    objective: str | None = None              # without study: the latest study of it
    top: int = _options.VALIDATE_TOP          # the study's best distinct settings to run
    runs: int = DEFAULT_RUNS                  # real runs per candidate, interleaved
    argv: list[str] | None = None             # default: the profiled command
    references: bool = True                   # jemalloc, mimalloc, tcmalloc when installed
    extra: tuple = ()                         # [(label, library path[, env])]
    memory_limit: float | None = None         # perf/pareto: % over glibc (default: the study's)
    timeout: float | None = None              # seconds before a run is hung
    seed: int = 0                             # the interleaving and the bootstrap
    storage: str | None = None                # the Optuna storage URL (workers)
    memory_measure: str | None = None         # peak | mean | final (default: the study's)
    time_measure: str = "wall"                # wall | cpu
    server: dict | None = None                # a server and its load (profile.ServerLoad's dict)
    min_effect: float = rule.MIN_EFFECT       # %: a smaller significant gain keeps the simpler

    def check(self) -> "ValidateOptions":
        """One clear error for a value out of bounds (before anything runs)."""
        if self.runs < MIN_RUNS:
            raise HctuneError(f"--runs must be at least {MIN_RUNS} (intervals need several runs)")
        if not 0 <= self.min_effect < 100:
            raise HctuneError(f"--min-effect is a percentage from 0 to 100, not "
                              f"{self.min_effect:g}")
        if self.top < 1:
            raise HctuneError("--top must be at least 1")
        if self.time_measure not in TIME_MEASURES:
            raise HctuneError(f"--time-measure: use {', '.join(TIME_MEASURES)}, "
                              f"not {self.time_measure!r}")
        return self
