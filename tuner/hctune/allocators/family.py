"""One interface for every allocator hctune tunes: a `Family` says what knobs it has, how a
setting is completed, parsed from `--set`, written as one line (its key) and read back, which
settings to try first, how a user reads it, and how to prepare it for a run (a library to
preload and the environment that carries the setting). HC is one family (its knobs are compiled
in: hctune.allocators.hc), the allocators configured through their environment (glibc's
tunables, jemalloc's MALLOC_CONF, mimalloc's and tcmalloc's variables) another
(hctune.allocators.environ); hctune.allocators.registry names them. Code above asks the
registry for a family instead of testing `name == "hc"`.
"""

from __future__ import annotations

from typing import Iterable

from hctune import allocators as _lib   # the folder's __init__: installed()


class Family:
    """What every allocator family provides (the methods raise until a family says them)."""

    name: str = ""
    compiled: bool = False          # its setting is compiled into a library (HC): malloc.c
    label: str = ""                 # how a verdict names its built-in answer ("generic HC")

    def knobs(self) -> dict:
        """{knob name: its declaration}, in the order of its configs/ file."""
        raise NotImplementedError

    def defaults(self) -> dict:
        """The setting every knob's default makes."""
        raise NotImplementedError

    def complete(self, partial: dict | None):
        """`partial` checked and completed once (a hctune.setting.Setting)."""
        raise NotImplementedError

    def parse(self, items: Iterable[str]) -> dict:
        """`--set` items (KNOB=VALUE) -> the setting they name, each value checked."""
        raise NotImplementedError

    def key(self, setting: dict | None) -> str | None:
        """The setting's canonical one-line form (database rows, cache keys); None for no
        setting (and another allocator's defaults, which share rows with plain runs)."""
        raise NotImplementedError

    def from_key(self, text: str | None) -> dict:
        """The setting of a `key` line."""
        raise NotImplementedError

    def seeds(self, objective: str) -> list[tuple[str, dict]]:
        """(label, setting) of the settings declared to try first for `objective`."""
        raise NotImplementedError

    def describe(self, setting: dict | None) -> str:
        """How a user reads the setting."""
        raise NotImplementedError

    def changed(self, setting: dict, base: dict | None = None) -> dict:
        """What the setting changes from `base` (HC: from generic; another allocator: from its
        library's defaults, which its settings already are)."""
        raise NotImplementedError

    def prepare(self, setting: dict | None = None, debug: bool = False, db=None,
                footprint: bool = False):
        """The hctune.allocators.Allocator that runs `setting`: a library and an environment.
        footprint: a measurement of the footprint alone, which a compiled family may build by a
        cheaper recipe (hctune.build.FOOTPRINT_CFLAGS); a library as installed has one build."""
        raise NotImplementedError

    # ---- how the rest of hctune treats the family (each said here once, not by its name) ----
    # The defaults below are those of an allocator set through its environment (or of one
    # without knobs: registry.of); HC says its own in hctune.allocators.hc.

    fits_tables: bool = False       # its settings can carry size classes fitted to a trace
    validates_top: bool = False     # validation runs a study's best K settings of it, not one

    @property
    def tag(self) -> str:
        """How a table or a verdict names the allocator beside a candidate ("HC", "jemalloc")."""
        return self.name

    @property
    def defaults_seed(self) -> str | None:
        """The seed label of the allocator as it comes (its library defaults), or None when
        it has none apart from its searched settings (HC: generic is a seed like the others)."""
        return f"{self.name} defaults"

    @property
    def default_label(self) -> str:
        """How an answer that is this allocator without a trial is named."""
        return self.name

    @property
    def emit_command(self) -> str:
        """The command that writes this allocator's answer (a file name the user may change)."""
        return f"hctune emit --env {self.name}.env"

    def is_defaults(self, setting) -> bool:
        """The stored setting (a key or a dict) is the library as it comes."""
        return not setting

    def available(self) -> bool:
        """Its library is here to run (an allocator without declared knobs: when installed)."""
        return self.name in _lib.installed()

    def trial_label(self, setting, who: str) -> str:
        """How a trial of this allocator is named: `who` ("trial 5") with what it sets."""
        return f"{self.describe(setting)} ({who})"

    def answer_name(self, candidate: str) -> str:
        """A recommended candidate's name as the first line says it."""
        return candidate

    def headline(self, changed: str) -> str:
        """A best trial's `changed_text` as a summary's first line says it."""
        return changed

    def changed_text(self, setting: dict, base: dict | None = None) -> str:
        """What the setting changes, "K=V, K=V", as a report's best row says it."""
        return f"{self.name}: " + (", ".join(f"{k}={v}" for k, v in
                                             self.changed(setting, base).items())
                                   or "its defaults")

    def knob_changes(self, setting: dict, generic: dict) -> tuple[dict, dict]:
        """(what the setting changes, the base it is said against: {} for the library's
        defaults, whose values the knobs' declarations hold)."""
        return dict(setting), {}

    def short_key(self, key: str, generic) -> str:
        """A stored key as what it changes from `generic()` (a trial's row); another
        allocator's key already is."""
        return key

    def setting_text(self, pairs: dict, generic) -> str:
        """A key's {KNOB: VALUE} as a table shows them, "K=V, K=V": what differs from
        `generic()` (HC) or from the library's defaults (which its keys already are)."""
        return ", ".join(f"{k}={v}" for k, v in pairs.items())

    def env_file(self, setting: dict, library=None, generic=None) -> dict:
        """What `hctune emit --env` writes for `setting`: {"library" to preload (None:
        nothing), "variables" that carry the setting, "package" that ships the library,
        "title"}. `library`: a library built for it beside the file (HC's .so); `generic()`:
        HC's generic setting as the search measures it."""
        raise NotImplementedError

    def as_run(self, setting: dict | None) -> tuple[str, dict | None]:
        """(label, setting) of a run of this allocator beside HC's `setting` (compare and
        explain): another allocator runs as it comes, under its name."""
        return self.name, None

    def best_line(self, setting: dict | None, changed: str) -> str:
        """`hctune best`'s line of what the best setting is (`changed`: from generic, "K=V")."""
        return (f"allocator: {self.describe(setting)} (the tuned row; write it with hctune "
                f"emit --env FILE)")

    @property
    def no_setting_text(self) -> str:
        """A table's cell for no setting."""
        return "(defaults)"


    # ---- its seeds and its search dimensions (hctune.search.seeds and .space ask these) ----

    long_walk: bool = False         # its seeds after the first are a long walk (HC's §5.2 and
                                    # Table 7): queued after the other families' few
    search_strict: bool = False     # a stored trial must hold every one of its parameters

    def search_knobs(self, only=None, threads: bool = False) -> dict:
        """{name: knob} the search varies (`only`: names narrowing them, where the family
        allows it; `threads`: the thread knobs too, for a multi-threaded study)."""
        raise NotImplementedError

    def search_stem(self, k) -> str:
        """The name its Optuna parameter is made from (hctune.search.space adds the transform)."""
        raise NotImplementedError

    def search_choices(self, k):
        """A "choice" knob's values (None: the kind is refused for this knob)."""
        raise NotImplementedError

    def search_step(self, k) -> int:
        """An "int" knob's grid step."""
        raise NotImplementedError

    def search_where(self, k) -> str:
        """Where the knob is declared, for errors."""
        raise NotImplementedError

    def search_full(self, setting: dict) -> dict:
        """Every knob's value under `setting`, to encode as parameters."""
        raise NotImplementedError

    def search_setting(self, values: dict, only=None, threads: bool = False):
        """The checked setting of the searched knobs' `values` (the rest as a search holds
        them)."""
        raise NotImplementedError

    def as_searched(self, setting: dict) -> dict:
        """The setting as the search measures it (the knobs a search holds, held)."""
        return setting

    def seedable(self, setting: dict, searched) -> bool:
        """A seed of this setting can be queued in a search that varies `searched` (a
        thread knob's advice: only where thread knobs are searched)."""
        return set(setting) <= set(searched)


class Plain(Family):
    """An allocator without declared knobs (kingsley, a library path): as it comes."""

    def __init__(self, name: str):
        self.name = name
        self.label = name
