"""How many knob checks one HC build of an already completed setting costs on the path a
replay takes (build.build_hc -> render.render_malloc, the build cache warm): each completion of
a setting checks every knob once, so checks / knobs is the number of completions (render's own
table of defaults is one). Reproduce: PYTHONPATH=tuner python bench/setting_checks.py"""

from hctune import build, knobs

calls = [0]
_check = knobs.Knob.check


def _counted(self, value):
    calls[0] += 1
    return _check(self, value)


if __name__ == "__main__":
    print("PYTHONPATH=tuner python bench/setting_checks.py")
    setting = knobs.complete(knobs.preset("generic"))
    knobs.Knob.check = _counted
    build.build_hc(setting)          # compiles once if the cache is cold; counts the same
    n = len(knobs.knobs())
    print(f"knob checks for one build: {calls[0]} ({calls[0] / n:g} x the {n} knobs)")
