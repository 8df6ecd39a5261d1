"""Tuning HC to a trace with Optuna (Hasan & Chang 2006, §5.2 done by a sampler instead of by hand).

space    the search space, made from configs/knobs.toml (the `search` field of each knob)
seeds    the first trials: the paper's presets (Tables 6, 7) and its §5.2 guideline
objective  turning a setting into numbers: measure on each trace, ratio to glibc, geometric mean
study    creating/resuming an Optuna study in SQLite or PostgreSQL, running it, reading results
"""
