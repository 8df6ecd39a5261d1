"""A setting that travels: one allocator's knob values, checked and completed once.

`Setting` is a dict (so every reader of a setting keeps working) that remembers its allocator
and that it was completed: completing it again (`knobs.complete`, `allocator_knobs.complete`)
returns it as it is, so a setting measured by the replay, built into a library and rendered
into malloc.c is checked once, not at every step. Changing it makes it a partial setting
again, completed (checked) on its next use.
"""

from __future__ import annotations


class Setting(dict):
    """A completed setting of `allocator` (HC's: every knob; another's: what differs from its
    library's defaults)."""

    __slots__ = ("allocator", "complete")

    def __init__(self, allocator: str, values=(), complete: bool = True):
        super().__init__(values)
        self.allocator = allocator
        self.complete = complete

    @classmethod
    def done(cls, allocator: str, setting) -> bool:
        """`setting` is a Setting of `allocator` that needs no completing."""
        return isinstance(setting, cls) and setting.complete and setting.allocator == allocator

    def _changed(self):
        self.complete = False

    def __setitem__(self, k, v):
        self._changed()
        super().__setitem__(k, v)

    def __delitem__(self, k):
        self._changed()
        super().__delitem__(k)

    def update(self, *a, **kw):
        self._changed()
        super().update(*a, **kw)

    def setdefault(self, k, v=None):
        self._changed()
        return super().setdefault(k, v)

    def pop(self, *a):
        self._changed()
        return super().pop(*a)

    def popitem(self):
        self._changed()
        return super().popitem()

    def clear(self):
        self._changed()
        super().clear()

    def __ior__(self, other):
        self._changed()
        return super().__ior__(other)

    def copy(self):
        return Setting(self.allocator, self, self.complete)

    def __reduce__(self):      # pickles (a worker's arguments) as a plain dict
        return (dict, (dict(self),))
